//! The `--demo` trees: a kernfs-like `sys/` whose attribute files show live
//! values of the VFS, and a procfs-like `proc/` that mirrors the host's
//! processes.
//!
//! Invariant: nothing here is stored; every directory listing and every
//! file's contents are computed when they are read (a file's contents once
//! per open, as kernfs's `seq_file` calls `show()` on the first read), so a
//! value is never staler than the open that read it. Node ids of these trees
//! lie at or above [`SYNTH`], far above any VFS inode number, and need no
//! lookup counting. The VFS keeps two empty directories `/sys` and `/proc`
//! as mount points; a lookup that reaches one answers with the tree's root
//! instead, as crossing a mount does.
//!
//! These trees are built in the FUSE front end because the VFS has no kernfs
//! or procfs yet; once it does, they should be served from there like any
//! other VFS directory, and this module reduced to nothing.

use crate::nodes::ROOT;
use std::sync::atomic::{AtomicU64, Ordering};
use vfscale::{Credentials, Errno, FileType, OpenFlags, Vfs, VfsResult};

/// The lowest node id of the demo trees.
pub(crate) const SYNTH: u64 = 1 << 56;
const SYS_ROOT: u64 = SYNTH;
const SYS_FS: u64 = SYNTH + 1;
const SYS_VFSCALE: u64 = SYNTH + 2;
const ATTR_BASE: u64 = SYNTH + 16;
const PROC_ROOT: u64 = SYNTH + 100;
const PROC_SELF: u64 = SYNTH + 101;
const PID_BASE: u64 = SYNTH + (1 << 32);
const PID_FILES: [&str; 3] = ["stat", "status", "cmdline"];

/// One attribute of `sys/fs/vfscale`: its name and how to show it.
struct Attr {
    name: &'static str,
    show: fn(&Demo) -> String,
    writable: bool,
}

const ATTRS: [Attr; 5] = [
    Attr { name: "inodes", show: |d| d.vfs.statfs().inodes.to_string(), writable: false },
    Attr { name: "bytes", show: |d| d.vfs.statfs().bytes.to_string(), writable: false },
    Attr { name: "dentries", show: |d| d.vfs.statfs().dentries.to_string(), writable: false },
    Attr { name: "negative_dentries", show: |d| d.vfs.statfs().negative_dentries.to_string(), writable: false },
    Attr { name: "drop_caches", show: |d| d.drop_caches.load(Ordering::Relaxed).to_string(), writable: true },
];

/// What a demo node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A directory.
    Dir,
    /// A file whose contents are computed at open.
    File {
        /// Whether it accepts writes.
        writable: bool,
    },
    /// `proc/self`.
    Symlink,
}

/// A node's attributes as the demo trees report them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SynthAttr {
    pub id: u64,
    pub kind: Kind,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// One directory entry of a demo directory.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub id: u64,
    pub name: Vec<u8>,
    pub file_type: FileType,
}

/// The demo trees of one mount.
#[derive(Debug)]
pub(crate) struct Demo {
    vfs: Vfs,
    sys_mount: u64,
    proc_mount: u64,
    drop_caches: AtomicU64,
}

impl Demo {
    /// Creates the mount-point directories `/sys` and `/proc` in `vfs`.
    pub fn new(vfs: &Vfs) -> VfsResult<Demo> {
        let root = vfs.process(Credentials::root());
        let mount = |path: &str| -> VfsResult<u64> {
            match root.mkdir(path, 0o555) {
                Ok(()) | Err(Errno::EEXIST) => Ok(root.resolve(path, false)?.ino()),
                Err(e) => Err(e),
            }
        };
        Ok(Demo {
            sys_mount: mount("/sys")?,
            proc_mount: mount("/proc")?,
            vfs: vfs.clone(),
            drop_caches: AtomicU64::new(0),
        })
    }

    /// Whether `id` is a demo node.
    pub fn owns(id: u64) -> bool {
        id >= SYNTH
    }

    /// The tree mounted on the VFS directory numbered `vfs_ino`, if any.
    pub fn mounted_on(&self, vfs_ino: u64) -> Option<u64> {
        if vfs_ino == self.sys_mount {
            Some(SYS_ROOT)
        } else if vfs_ino == self.proc_mount {
            Some(PROC_ROOT)
        } else {
            None
        }
    }

    fn dir(id: u64) -> SynthAttr {
        SynthAttr { id, kind: Kind::Dir, mode: 0o555, uid: 0, gid: 0 }
    }

    /// The attributes of node `id`; ENOENT once a process has gone.
    pub fn getattr(&self, id: u64) -> VfsResult<SynthAttr> {
        match id {
            SYS_ROOT | SYS_FS | SYS_VFSCALE | PROC_ROOT => Ok(Self::dir(id)),
            PROC_SELF => Ok(SynthAttr { id, kind: Kind::Symlink, mode: 0o777, uid: 0, gid: 0 }),
            _ if (ATTR_BASE..ATTR_BASE + ATTRS.len() as u64).contains(&id) => {
                let writable = ATTRS[(id - ATTR_BASE) as usize].writable;
                Ok(SynthAttr {
                    id,
                    kind: Kind::File { writable },
                    mode: if writable { 0o644 } else { 0o444 },
                    uid: 0,
                    gid: 0,
                })
            }
            _ if id >= PID_BASE => {
                let (pid, file) = ((id - PID_BASE) / 4, (id - PID_BASE) % 4);
                let meta = std::fs::metadata(format!("/proc/{pid}")).map_err(|_| Errno::ENOENT)?;
                let (uid, gid) = {
                    use std::os::unix::fs::MetadataExt;
                    (meta.uid(), meta.gid())
                };
                let (kind, mode) = if file == 0 { (Kind::Dir, 0o555) } else { (Kind::File { writable: false }, 0o444) };
                Ok(SynthAttr { id, kind, mode, uid, gid })
            }
            _ => Err(Errno::ENOENT),
        }
    }

    /// `name` in demo directory `parent`.
    pub fn lookup(&self, parent: u64, name: &[u8]) -> VfsResult<SynthAttr> {
        let entry = self.entries(parent)?.into_iter().find(|e| e.name == name);
        match entry {
            Some(e) => self.getattr(e.id),
            None if parent == PROC_ROOT => {
                // Thread ids are reachable without being listed, as in /proc.
                let pid = std::str::from_utf8(name).ok().and_then(|s| s.parse::<u32>().ok()).ok_or(Errno::ENOENT)?;
                self.getattr(PID_BASE + u64::from(pid) * 4)
            }
            None => Err(Errno::ENOENT),
        }
    }

    /// The entries of demo directory `id`, `.` and `..` first.
    pub fn entries(&self, id: u64) -> VfsResult<Vec<Entry>> {
        let d = |id: u64, name: &str| Entry { id, name: name.as_bytes().to_vec(), file_type: FileType::Directory };
        let f = |id: u64, name: &str| Entry { id, name: name.as_bytes().to_vec(), file_type: FileType::Regular };
        let mut out = match id {
            SYS_ROOT => vec![d(SYS_ROOT, "."), d(ROOT, ".."), d(SYS_FS, "fs")],
            SYS_FS => vec![d(SYS_FS, "."), d(SYS_ROOT, ".."), d(SYS_VFSCALE, "vfscale")],
            SYS_VFSCALE => {
                let mut v = vec![d(SYS_VFSCALE, "."), d(SYS_FS, "..")];
                v.extend(ATTRS.iter().enumerate().map(|(i, a)| f(ATTR_BASE + i as u64, a.name)));
                v
            }
            PROC_ROOT => {
                let mut v = vec![d(PROC_ROOT, "."), d(ROOT, "..")];
                v.push(Entry { id: PROC_SELF, name: b"self".to_vec(), file_type: FileType::Symlink });
                let mut pids: Vec<u32> = std::fs::read_dir("/proc")
                    .map_err(|_| Errno::EIO)?
                    .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                    .collect();
                pids.sort_unstable();
                v.extend(pids.into_iter().map(|pid| d(PID_BASE + u64::from(pid) * 4, &pid.to_string())));
                v
            }
            _ if id >= PID_BASE && (id - PID_BASE) % 4 == 0 => {
                self.getattr(id)?;
                let mut v = vec![d(id, "."), d(PROC_ROOT, "..")];
                v.extend(PID_FILES.iter().enumerate().map(|(i, name)| f(id + 1 + i as u64, name)));
                v
            }
            _ => return Err(self.getattr(id).map_or(Errno::ENOENT, |_| Errno::ENOTDIR)),
        };
        out.dedup_by_key(|e| e.name.clone());
        Ok(out)
    }

    /// Checks that `cred` may open node `id` with `flags` and returns the
    /// contents it reads, computed now.
    pub fn open(&self, id: u64, flags: OpenFlags, cred: &Credentials) -> VfsResult<Vec<u8>> {
        let attr = self.getattr(id)?;
        let Kind::File { writable } = attr.kind else { return Err(Errno::EISDIR) };
        let wants_write = flags.0 & libc::O_ACCMODE != libc::O_RDONLY;
        let mut access = vfscale::cred::Access::READ;
        if wants_write {
            if !writable {
                return Err(Errno::EACCES);
            }
            access = vfscale::cred::Access::WRITE;
        }
        vfscale::cred::permission(libc::S_IFREG | attr.mode, attr.uid, attr.gid, cred, access)?;
        if (ATTR_BASE..ATTR_BASE + ATTRS.len() as u64).contains(&id) {
            return Ok(format!("{}\n", (ATTRS[(id - ATTR_BASE) as usize].show)(self)).into_bytes());
        }
        let (pid, file) = ((id - PID_BASE) / 4, (id - PID_BASE) % 4);
        std::fs::read(format!("/proc/{pid}/{}", PID_FILES[file as usize - 1])).map_err(|_| Errno::ENOENT)
    }

    /// A write to attribute `id` (its `store()`): `drop_caches` takes 1, 2
    /// or 3 and drops the VFS's unused negative dentries and deferred
    /// frees; anything else is EINVAL, as Linux's sysctl answers.
    pub fn store(&self, id: u64, data: &[u8]) -> VfsResult<usize> {
        if id != ATTR_BASE + 4 {
            return Err(Errno::EACCES);
        }
        let value: u64 = std::str::from_utf8(data).ok().and_then(|s| s.trim().parse().ok()).ok_or(Errno::EINVAL)?;
        if !(1..=3).contains(&value) {
            return Err(Errno::EINVAL);
        }
        self.vfs.drop_caches(std::time::Duration::from_secs(1));
        self.drop_caches.store(value, Ordering::Relaxed);
        Ok(data.len())
    }

    /// The target of symlink `id` as thread `tid` sees it: `proc/self`
    /// names the thread's process (FUSE reports the calling thread).
    pub fn readlink(&self, id: u64, tid: u32) -> VfsResult<Vec<u8>> {
        if id != PROC_SELF {
            return Err(Errno::EINVAL);
        }
        let status = std::fs::read_to_string(format!("/proc/{tid}/status")).map_err(|_| Errno::ENOENT)?;
        let tgid = status.lines().find_map(|l| l.strip_prefix("Tgid:")).map(str::trim).ok_or(Errno::ENOENT)?;
        Ok(tgid.as_bytes().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sys_attributes_show_live_values() {
        let vfs = Vfs::default();
        let demo = Demo::new(&vfs).unwrap();
        let root = Credentials::root();
        let attr = demo.lookup(SYS_VFSCALE, b"inodes").unwrap();
        let before: usize =
            String::from_utf8(demo.open(attr.id, OpenFlags::RDONLY, &root).unwrap()).unwrap().trim().parse().unwrap();
        vfs.process(root.clone()).mkdir("/x", 0o755).unwrap();
        let after: usize =
            String::from_utf8(demo.open(attr.id, OpenFlags::RDONLY, &root).unwrap()).unwrap().trim().parse().unwrap();
        assert_eq!(after, before + 1);
    }

    #[test]
    fn drop_caches_is_the_one_writable_attribute() {
        let vfs = Vfs::default();
        let demo = Demo::new(&vfs).unwrap();
        let drop = demo.lookup(SYS_VFSCALE, b"drop_caches").unwrap();
        assert_eq!(drop.kind, Kind::File { writable: true });
        assert_eq!(demo.store(drop.id, b"2\n"), Ok(2));
        assert_eq!(demo.open(drop.id, OpenFlags::RDONLY, &Credentials::root()).unwrap(), b"2\n");
        assert_eq!(demo.store(drop.id, b"7"), Err(Errno::EINVAL));
        let alice = Credentials::user(1000, 1000, []);
        assert_eq!(demo.open(drop.id, OpenFlags::WRONLY, &alice), Err(Errno::EACCES));
        let inodes = demo.lookup(SYS_VFSCALE, b"inodes").unwrap();
        assert_eq!(demo.open(inodes.id, OpenFlags::WRONLY, &Credentials::root()), Err(Errno::EACCES));
    }

    #[test]
    fn proc_mirrors_this_process() {
        let vfs = Vfs::default();
        let demo = Demo::new(&vfs).unwrap();
        let me = std::process::id();
        let names: Vec<Vec<u8>> = demo.entries(PROC_ROOT).unwrap().into_iter().map(|e| e.name).collect();
        assert!(names.contains(&me.to_string().into_bytes()));
        let dir = demo.lookup(PROC_ROOT, me.to_string().as_bytes()).unwrap();
        assert_eq!(dir.kind, Kind::Dir);
        let status = demo.lookup(dir.id, b"status").unwrap();
        let text = String::from_utf8(demo.open(status.id, OpenFlags::RDONLY, &Credentials::root()).unwrap()).unwrap();
        assert!(text.contains(&format!("Pid:\t{me}")), "{text}");
        assert_eq!(demo.readlink(PROC_SELF, me).unwrap(), me.to_string().as_bytes());
        assert_eq!(demo.lookup(PROC_ROOT, b"nonsense").unwrap_err(), Errno::ENOENT);
    }

    #[test]
    fn mount_points_are_vfs_directories() {
        let vfs = Vfs::default();
        let demo = Demo::new(&vfs).unwrap();
        let p = vfs.process(Credentials::root());
        assert_eq!(demo.mounted_on(p.resolve("/sys", false).unwrap().ino()), Some(SYS_ROOT));
        assert_eq!(demo.mounted_on(p.resolve("/proc", false).unwrap().ino()), Some(PROC_ROOT));
        assert_eq!(demo.mounted_on(vfs.root().ino()), None);
        assert!(Demo::owns(SYS_ROOT) && !Demo::owns(ROOT));
    }
}
