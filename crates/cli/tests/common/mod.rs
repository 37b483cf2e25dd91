//! What the command's integration tests share: whether this machine can
//! mount, where a test that cannot must fail under CI rather than pass as
//! skipped.

use std::path::Path;

/// Whether `CI` is set (to anything but empty, `false` or `0`).
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Whether this machine can mount: root and `/dev/fuse`. Under CI a
/// machine that cannot is a failure; elsewhere the test says it skipped.
pub fn can_mount(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let fuse = Path::new("/dev/fuse").exists();
    if root && fuse {
        return true;
    }
    let why = if root { "no /dev/fuse" } else { "not root" };
    assert!(!under_ci(), "CI is set, but `{what}` cannot run here: {why}");
    eprintln!("SKIPPED: `{what}` needs root and /dev/fuse ({why}; with CI set, a failure)");
    false
}
