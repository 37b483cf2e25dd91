//! The mount namespace a mount serves: the VFS it was given as the root
//! mount, and on it whatever the front end mounted through the VFS's own
//! mount calls ([`Context::mount`]): with `--demo` the kernfs tree on
//! `/sys` and the procfs tree on `/proc`. Walks cross mount points, and
//! `..` climbs out of a mount's root, as the VFS does them; removing or
//! renaming a mount point is the VFS's EBUSY, and renaming or linking
//! across mounts its EXDEV.
//!
//! Besides the namespace, it keeps one [`Filesystem`] per VFS instance
//! mounted: the instance (whose release barrier and statistics a request
//! may need, and whose lock owners the `locks` module keeps), and how the
//! kernel may cache what it shows. A position (a [`Location`]) finds its
//! filesystem by its mount's lock manager, which is the instance's own.
//!
//! Adding a filesystem is one call before serving:
//! [`Namespace::mount_read_only`] mounts any [`Vfs`] (a host directory's,
//! say) read-only at a path, making the path first; the crate's
//! `mount_with` takes such mounts from its caller.
//!
//! It imports the lock owners (`locks`) and the node conversions
//! (`nodes`); the handlers (`fs`) use it, never the other way.

use crate::locks::Locks;
use crate::nodes::location_of;
use std::sync::Arc;
use std::time::Duration;
use vfscale::{Context, Credentials, Errno, Location, Mount, MountFlags, MountNamespace, OpenFlags, Vfs, VfsResult};

/// How the kernel may keep what a filesystem shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caching {
    /// Every change goes through this mount: entries (negative ones
    /// too), attributes and pages are kept for the given time.
    Kept(Duration),
    /// The filesystem changes on its own (kernfs, procfs, a host
    /// directory): nothing is kept, files are read with direct I/O past
    /// the sizes they report, and no file can be created in it.
    Live,
}

/// One VFS instance mounted in the namespace.
pub(crate) struct Filesystem {
    pub vfs: Vfs,
    pub locks: Arc<Locks>,
    pub caching: Caching,
}

impl Filesystem {
    fn new(vfs: Vfs, caching: Caching) -> Filesystem {
        Filesystem { locks: Locks::new(vfs.clone()), vfs, caching }
    }

    /// Whether it changes on its own.
    pub fn is_live(&self) -> bool {
        self.caching == Caching::Live
    }

    /// How long the kernel may keep its entries and attributes.
    pub fn ttl(&self) -> Duration {
        match self.caching {
            Caching::Kept(ttl) => ttl,
            Caching::Live => Duration::ZERO,
        }
    }
}

/// The served namespace and the filesystems mounted in it, the served VFS
/// first.
pub(crate) struct Namespace {
    ns: Arc<MountNamespace>,
    root: Location,
    filesystems: Vec<Filesystem>,
}

impl Namespace {
    /// A namespace whose root mount is `vfs`, kept as `caching` says.
    pub fn new(vfs: Vfs, caching: Caching) -> VfsResult<Namespace> {
        let ns = vfs.new_namespace();
        // The root mount's place, as a process in the namespace has it.
        let root = vfs.process_in(&ns, Credentials::root()).open_description("/", OpenFlags::RDONLY, 0)?;
        let root = location_of(&root);
        Ok(Namespace { ns, root, filesystems: vec![Filesystem::new(vfs, caching)] })
    }

    /// The root of the namespace: FUSE's root node.
    pub fn root(&self) -> &Location {
        &self.root
    }

    /// The mount namespace itself.
    #[cfg(test)]
    pub fn mount_namespace(&self) -> &Arc<MountNamespace> {
        &self.ns
    }

    /// The calls of `cred` in the namespace, from its root, relative paths
    /// starting at `at`.
    pub fn context<'a>(&'a self, cred: &'a Credentials, at: &'a Location) -> Context<'a> {
        Context::in_namespace(Some(&self.ns), cred, &self.root, at)
    }

    /// Mounts `fs` on `path` (absolute, in the namespace) with `flags`,
    /// `source` being what `mountinfo` shows; the missing directories of
    /// `path` are made first (mode 0755, the last 0555).
    pub fn mount(&mut self, fs: Vfs, source: &str, path: &str, flags: MountFlags, caching: Caching) -> VfsResult<()> {
        let cred = Credentials::root();
        let at_root = self.context(&cred, &self.root);
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        if parts.is_empty() {
            // The root mount cannot be covered from inside.
            return Err(Errno::EBUSY);
        }
        let mut dir = String::new();
        for (i, part) in parts.iter().enumerate() {
            dir.push('/');
            dir.push_str(part);
            let mode = if i + 1 == parts.len() { 0o555 } else { 0o755 };
            match at_root.mkdir(&dir, mode) {
                Ok(()) | Err(Errno::EEXIST) => {}
                // A read-only filesystem may refuse (EROFS) before it
                // looks the name up: what is there already will do, or
                // the mount says why not (ENOTDIR for a file).
                Err(_) if at_root.locate(&dir, false).is_ok() => {}
                Err(e) => return Err(e),
            }
        }
        at_root.mount(&fs, source, &dir, flags)?;
        if self.filesystem(&at_root.locate(&dir, true)?.mount).is_err() {
            self.filesystems.push(Filesystem::new(fs, caching));
        }
        Ok(())
    }

    /// Mounts `fs` read-only (and `nosuid`, `nodev`) on `path`, as a host
    /// tree bound into the served one would be: nothing of it is cached,
    /// since it may change behind the mount's back.
    pub fn mount_read_only(&mut self, fs: Vfs, source: &str, path: &str) -> VfsResult<()> {
        let flags = MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV;
        self.mount(fs, source, path, flags, Caching::Live)
    }

    /// The filesystem seen through `mount`; ENODEV for one not mounted
    /// through this namespace.
    pub fn filesystem(&self, mount: &Mount) -> VfsResult<&Filesystem> {
        self.filesystems.iter().find(|f| Arc::ptr_eq(f.vfs.locks(), mount.locks())).ok_or(Errno::ENODEV)
    }

    /// The served VFS's.
    pub fn served(&self) -> &Filesystem {
        &self.filesystems[0]
    }

    /// Every filesystem mounted, the served VFS first.
    pub fn filesystems(&self) -> impl Iterator<Item = &Filesystem> {
        self.filesystems.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vfscale::AtFlags;

    #[test]
    fn a_mount_is_crossed_and_read_only_where_asked() {
        let served = Vfs::default();
        let mut ns = Namespace::new(served.clone(), Caching::Kept(Duration::from_secs(1))).unwrap();
        let tree = Vfs::default();
        tree.process(Credentials::root()).mkdir("/inside", 0o700).unwrap();
        ns.mount_read_only(tree.clone(), "tree", "/a/b").unwrap();
        let cred = Credentials::root();
        let c = ns.context(&cred, ns.root());
        let inside = c.locate("/a/b/inside", false).unwrap();
        assert_eq!(inside.inode.ino(), tree.process(Credentials::root()).resolve("/inside", false).unwrap().ino());
        assert!(ns.filesystem(&inside.mount).unwrap().is_live());
        assert!(!ns.filesystem(&ns.root().mount).unwrap().is_live());
        assert_eq!(c.mkdir("/a/b/new", 0o755), Err(Errno::EROFS));
        assert_eq!(c.stat("/a/b/..", AtFlags::NONE).unwrap().ino, c.stat("/a", AtFlags::NONE).unwrap().ino);
        assert_eq!(c.rmdir("/a/b"), Err(Errno::EBUSY));
        assert_eq!(ns.filesystems().count(), 2);
        // The path is a mount point now; another mount of the same
        // instance adds no filesystem.
        ns.mount(tree, "tree", "/c", MountFlags::NONE, Caching::Live).unwrap();
        assert_eq!(ns.filesystems().count(), 2);
        assert_eq!(ns.mount(Vfs::default(), "x", "/", MountFlags::NONE, Caching::Live), Err(Errno::EBUSY));
        let other = Vfs::default().new_namespace();
        let stranger = Vfs::default().process_in(&other, Credentials::root());
        let elsewhere = location_of(&stranger.open_description("/", OpenFlags::RDONLY, 0).unwrap());
        assert!(ns.filesystem(&elsewhere.mount).is_err());
    }
}
