//! Who sent a request: the [`Client`] a request's header names (uid, gid
//! and pid, all FUSE passes), and the [`Credentials`] the handlers run its
//! VFS calls with, whose supplementary groups come from the host's
//! `/proc/PID/status`.
//!
//! It imports no module of this crate, only `vfscale`'s credentials, so
//! both front ends (`dev`, `wire`) build a [`Client`] and the handlers
//! (`fs`) turn it into credentials.

use vfscale::Credentials;

/// Who sent a request: what credentials and lock owners are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Client {
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
}

/// The caller's supplementary groups, from the host's `/proc/PID/status`
/// (FUSE passes only uid, gid and pid); none if the process is gone.
fn groups_of(pid: u32) -> Vec<u32> {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return Vec::new() };
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| g.split_whitespace().filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_default()
}

/// The credentials a request runs with. Root's groups decide nothing, so
/// only other callers cost a read of `/proc`.
pub(crate) fn credentials(c: &Client) -> Credentials {
    if c.uid == 0 {
        Credentials::user(0, c.gid, [])
    } else {
        Credentials::user(c.uid, c.gid, groups_of(c.pid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_read_from_proc() {
        let mine = groups_of(std::process::id());
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("Groups:")).unwrap();
        assert_eq!(mine.len(), line.split_whitespace().count() - 1);
        assert!(groups_of(u32::MAX).is_empty());
    }
}
