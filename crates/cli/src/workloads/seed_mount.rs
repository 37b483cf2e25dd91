//! The namespace the seed workloads walk in, as on Linux: `/` is an
//! in-memory filesystem and the seed's tree is mounted on it (sysfs on
//! `/sys` for seed 000, proc on `/proc` for seed 003), so every path
//! crosses a mount point as `/sys/devices/system/cpu/...` and
//! `/proc/<pid>/...` do.

use std::sync::Arc;
use vfscale::{Credentials, MountFlags, MountNamespace, Process, Vfs, VfsConfig};

/// An in-memory root with one filesystem mounted on a directory of it.
pub(super) struct SeedMount {
    root: Vfs,
    ns: Arc<MountNamespace>,
}

impl SeedMount {
    /// `fs` mounted on `/{dir}` as `source` (`sysfs`, `proc`), with the
    /// `nosuid,nodev,noexec` a distribution mounts them with. The root's
    /// walk mode is `config`'s, so a "before" design walks the whole path
    /// as that design does.
    pub(super) fn new(fs: &Vfs, dir: &str, source: &str, config: VfsConfig) -> SeedMount {
        let root = Vfs::new(config);
        let ns = root.new_namespace();
        let admin = root.process_in(&ns, Credentials::root());
        let at = format!("/{dir}");
        admin.mkdir(&at, 0o555).expect("make the mount point");
        let flags = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
        admin.mount(fs, source, &at, flags).expect("mount the seed's tree");
        SeedMount { root, ns }
    }

    /// A root process in the namespace.
    pub(super) fn process(&self) -> Process {
        self.root.process_in(&self.ns, Credentials::root())
    }
}
