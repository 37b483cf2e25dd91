//! Ending a mount's FUSE connection from the server's side, when part of
//! the server has died and requests would otherwise wait forever: the
//! kernel then fails every request in flight, and every later one, with
//! ENOTCONN, as it does when a killed server's device closes.
//!
//! The kernel offers two ways: writing to the connection's `abort` file
//! under `/sys/fs/fuse/connections` (fusectl, where it is mounted; the
//! file belongs to the user who mounted), and `umount2(MNT_FORCE)` on the
//! mount point (root only), whose first step aborts the connection even
//! where the unmount then fails as busy.

use std::path::{Path, PathBuf};

/// Where fusectl shows connections, one directory each, named by the
/// device number of the mount's superblock.
const FUSECTL: &str = "/sys/fs/fuse/connections";

/// A mount's connection, found once it is mounted.
#[derive(Debug, Clone)]
pub(crate) struct Connection {
    dir: PathBuf,
    /// The kernel's device number of the mount (`st_dev`, as
    /// `/proc/self/mountinfo` shows it), which names its fusectl directory.
    id: Option<u64>,
}

impl Connection {
    /// The connection of the vfscale mount on `dir`, a canonical path
    /// (the last mounted, if several are stacked there). Reads
    /// `/proc/self/mountinfo`, which sends the mount no request.
    pub fn of(dir: &Path) -> Connection {
        let dir = dir.to_owned();
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let id = mountinfo.lines().rev().find_map(|line| device_of(line, &dir));
        Connection { dir, id }
    }

    /// Aborts the connection; says how, or why it could not.
    pub fn abort(&self) -> Result<&'static str, String> {
        let mut why = Vec::new();
        if let Some(id) = self.id {
            match std::fs::write(format!("{FUSECTL}/{id}/abort"), "1") {
                Ok(()) => return Ok("through fusectl's abort"),
                Err(e) => why.push(format!("{FUSECTL}/{id}/abort: {e}")),
            }
        }
        // The mount point may show another mount by now (this one
        // detached, another mounted there): only this one is forced.
        if self.id.is_none() || Connection::of(&self.dir).id != self.id {
            why.push(format!("{} no longer shows this mount", self.dir.display()));
            return Err(why.join("; "));
        }
        let path = std::ffi::CString::new(self.dir.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
        // SAFETY: `path` is a NUL-terminated string that outlives the call.
        if unsafe { libc::umount2(path.as_ptr(), libc::MNT_FORCE) } == 0 {
            return Ok("by a forced unmount");
        }
        let err = std::io::Error::last_os_error();
        // A busy mount's connection is aborted before the unmount fails.
        if err.raw_os_error() == Some(libc::EBUSY) {
            return Ok("by a forced unmount (the mount stays, busy)");
        }
        why.push(format!("umount2({}, MNT_FORCE): {err}", self.dir.display()));
        Err(why.join("; "))
    }
}

/// The kernel's device number of a `/proc/self/mountinfo` line's mount,
/// if the line is a vfscale FUSE mount on `dir`: `(major << 20) | minor`,
/// the number fusectl names the connection by.
fn device_of(line: &str, dir: &Path) -> Option<u64> {
    let (mount, fs) = line.split_once(" - ")?;
    let fields: Vec<&str> = mount.split(' ').collect();
    let (device, target) = (fields.get(2)?, fields.get(4)?);
    let mut fs = fs.split(' ');
    let (kind, source) = (fs.next()?, fs.next()?);
    if !kind.starts_with("fuse") || source != "vfscale" {
        return None;
    }
    if crate::unescape_mount_path(target) != dir.as_os_str().as_encoded_bytes() {
        return None;
    }
    let (major, minor) = device.split_once(':')?;
    Some((major.parse::<u64>().ok()? << 20) | minor.parse::<u64>().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_name_the_connection() {
        let line = "48 30 0:52 / /tmp/a\\040b rw,nosuid,relatime shared:1 - fuse.vfscale vfscale rw,user_id=0";
        assert_eq!(device_of(line, Path::new("/tmp/a b")), Some(52));
        assert_eq!(device_of(line, Path::new("/tmp/a")), None);
        let high = "48 30 1:7 / /m rw - fuse vfscale rw";
        assert_eq!(device_of(high, Path::new("/m")), Some((1 << 20) | 7));
        let other = "48 30 0:52 / /m rw - fuse.sshfs host:/ rw";
        assert_eq!(device_of(other, Path::new("/m")), None);
        assert_eq!(device_of("garbage", Path::new("/m")), None);
    }
}
