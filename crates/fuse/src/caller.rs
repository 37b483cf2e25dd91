//! Who sent a request: the [`Client`] a request's header names (uid, gid
//! and pid, all FUSE passes), and the [`Credentials`] the handlers run its
//! VFS calls with, whose supplementary groups and effective capabilities
//! come from the host's `/proc/PID/status`.
//!
//! It imports no module of this crate, only `vfscale`'s credentials, so
//! both front ends (`dev`, `wire`) build a [`Client`] and the handlers
//! (`fs`) turn it into credentials.

use vfscale::cred::Capabilities;
use vfscale::Credentials;

/// Who sent a request: what credentials and lock owners are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Client {
    pub uid: u32,
    pub gid: u32,
    pub pid: u32,
}

/// What the host's `/proc/PID/status` says of a caller that FUSE does not
/// pass: its supplementary groups and effective capabilities.
#[derive(Debug, Default, PartialEq, Eq)]
struct Status {
    groups: Vec<u32>,
    caps: Capabilities,
}

/// The caller's status; no groups and no capabilities if the process is
/// gone (a caller that exited can be granted nothing it would need a
/// capability for).
fn status_of(pid: u32) -> Status {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return Status::default() };
    parse_status(&text)
}

fn parse_status(text: &str) -> Status {
    let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
    let groups = field("Groups:").map(|g| g.split_whitespace().filter_map(|n| n.parse().ok()).collect());
    let caps = field("CapEff:").and_then(|c| u64::from_str_radix(c, 16).ok()).map(Capabilities::from_bits);
    Status { groups: groups.unwrap_or_default(), caps: caps.unwrap_or_default() }
}

/// The credentials a request runs with: the header's uid and gid, and the
/// calling thread's groups and effective capabilities from `/proc` (the
/// header's pid is the thread's id, and capabilities are per thread), so
/// that a root caller that dropped `CAP_DAC_OVERRIDE` is refused and an
/// ordinary one holding `CAP_CHOWN` is not.
pub(crate) fn credentials(c: &Client) -> Credentials {
    let Status { groups, caps } = status_of(c.pid);
    Credentials::user(c.uid, c.gid, groups).with_capabilities(caps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_capabilities_are_read_from_proc() {
        let mine = status_of(std::process::id());
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("Groups:")).unwrap();
        assert_eq!(mine.groups.len(), line.split_whitespace().count() - 1);
        let cap_eff = status.lines().find_map(|l| l.strip_prefix("CapEff:")).unwrap().trim();
        assert_eq!(mine.caps.bits(), u64::from_str_radix(cap_eff, 16).unwrap());
        assert_eq!(status_of(u32::MAX), Status::default());
    }

    #[test]
    fn a_status_gives_groups_and_the_effective_set() {
        let text = "Name:\tcat\nGroups:\t4 27 \nCapInh:\t0000000000000000\nCapPrm:\t00000000000000ff\nCapEff:\t0000000000000009\n";
        let status = parse_status(text);
        assert_eq!(status.groups, [4, 27]);
        assert_eq!(status.caps, Capabilities::CHOWN | Capabilities::FOWNER);
        // A root caller whose CapEff is empty holds nothing.
        let c = Client { uid: 0, gid: 0, pid: u32::MAX };
        assert!(!credentials(&c).capable(Capabilities::DAC_OVERRIDE));
        assert_eq!(parse_status("Groups:\nCapEff:\tzz\n"), Status::default());
    }
}
