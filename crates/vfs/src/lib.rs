//! # vfscale
//!
//! An in-memory virtual filesystem with Linux semantics, built to show how
//! the kernel's VFS read path scales: path walks run in rcu-walk mode (no
//! lock, no reference count, no shared write) and fall back to ref-walk;
//! missing names are cached as negative dentries (validated by directory
//! revisions in kernfs trees, which change behind the dcache); the
//! superblock's inode list is a per-CPU list. Each of those designs has its
//! "before" variant, selected in [`VfsConfig`].
//!
//! ```
//! use vfscale::{Credentials, Errno, OpenFlags, Vfs};
//!
//! let vfs = Vfs::default();
//! let root = vfs.process(Credentials::root());
//! root.mkdir("/srv", 0o755)?;
//! root.symlink("/srv", "/data")?;
//! let fd = root.open("/data/hello", OpenFlags::CREAT | OpenFlags::RDWR, 0o644)?;
//! root.write(fd, b"hi")?;
//! root.close(fd)?;
//! assert_eq!(root.stat("/srv/hello")?.size, 2);
//!
//! let alice = vfs.process(Credentials::user(1000, 1000, []));
//! assert_eq!(alice.unlink("/srv/hello"), Err(Errno::EACCES));
//! assert_eq!(alice.stat("/srv/missing").unwrap_err(), Errno::ENOENT);
//! # Ok::<(), Errno>(())
//! ```
//!
//! The modules, in layers: each may import only the layers below it (its
//! doc says exactly which modules), so the only import circle is the one
//! among the node types, whose tree is recursive. `tests/layering.rs`
//! checks every module's imports against its doc.
//!
//! | layer | module | what | Linux original |
//! |---|---|---|---|
//! | base | [`errno`] | [`Errno`], [`VfsResult`]: Linux error numbers | `include/uapi/asm-generic/errno*.h` |
//! | base | [`mode`] | `st_mode` type and permission bits | `include/uapi/linux/stat.h` |
//! | base | [`time`], [`path`] | timestamps; path validation and components | `getname` |
//! | base | [`cred`] | [`Credentials`] and permission checks | `generic_permission`, `setattr_prepare` |
//! | base | [`types`] | the values system calls take and return | `include/uapi/linux/fcntl.h` |
//! | base | [`config`] | the design variants | — |
//! | base | [`pages`], [`space`] | sparse file data, read lock-free; `size=` and `nr_inodes=` limits | `mm/shmem.c`, `lib/xarray.c` |
//! | base | `reclaim`, `opens`, `xattr_store`, `posix_marks`, `batched`, `test_pause` | deferred releases; open counts; xattr storage; the files a process may hold POSIX locks on; numbers in per-thread batches; stop points for tests (built only for them) | `call_rcu`, `i_writecount`, `simple_xattr`, —, `get_next_ino`, — |
//! | engine | [`locks`] | the lock engine: flock, POSIX and OFD record locks, leases, by owner id | `fs/locks.c` |
//! | node types | [`inode`], `dentry`, `dcache`, `dirents` | inodes, dentries, the dentry hash and negative dentries, a directory's entries | `fs/inode.c`, `fs/dcache.c`, `fs/libfs.c` (stable offsets) |
//! | filesystem | `dirlock`, [`fs`], `superblock` | directory locking; the filesystem interface; one instance | `include/linux/fs.h`, `fs/super.c` |
//! | filesystem | [`file`](mod@file) | open file descriptions | `fs/read_write.c`, `fs/open.c` |
//! | filesystem | [`mount`] | mounts, mount namespaces, per-mount references | `fs/namespace.c`, `fs/mount.h` |
//! | filesystem | `namei` | rcu-walk and ref-walk, across mounts | `fs/namei.c` |
//! | operations | `namespace`, `notify_change`, [`xattr`] | mkdir, unlink, rename, ...; attribute changes; xattr calls | `fs/namei.c`, `fs/attr.c`, `fs/xattr.c` |
//! | instance | [`Vfs`] | the handle of a filesystem instance | `struct super_block` |
//! | filesystems | [`memfs`], [`kernfs`], [`procfs`] (`fs::*`) | the in-memory default; sysfs-like trees; a task table as `/proc` | `mm/shmem.c`, `fs/kernfs/`, `fs/proc/base.c` |
//! | system calls | [`syscalls`] | [`Context`]: calls by credentials and start directory | `fs/open.c`, `fs/fcntl.c` |
//! | process | [`process`] | a descriptor table, a cwd and credentials, whose methods wrap the calls | `fs/file.c` |
//!
//! "The base modules" in a module's doc are the modules of the base layer;
//! "the node types" are `inode`, `dentry`, `dcache` and `dirents`. The filesystems
//! are modules of their own under [`fs`], written against its interface,
//! and the core (`dcache`, `namei`, `mount`, `namespace`, `syscalls`,
//! `file`, `process`, `locks`) imports none of them; a filesystem outside
//! the crate (`vfscale-hostfs`) is built the same way.
//!
//! In the repository, `docs/design.md` maps these modules and the seed
//! mechanism each holds, `docs/benchmarks.md` and `docs/commutativity.md`
//! describe how the designs are measured, and `docs/results/` holds the
//! measurements, each with its machine, date and command.

#![warn(missing_docs, missing_debug_implementations)]

mod batched;
pub mod config;
pub mod cred;
mod dcache;
mod dentry;
mod dirents;
mod dirlock;
pub mod errno;
mod fdtable;
pub mod file;
pub mod fs;
pub mod inode;
pub mod locks;
pub mod mode;
pub mod mount;
mod namei;
mod namespace;
mod notify_change;
mod opens;
pub mod pages;
pub mod path;
mod posix_marks;
pub mod process;
mod reclaim;
pub mod space;
mod superblock;
pub mod syscalls;
#[cfg(test)]
mod test_pause;
pub mod time;
pub mod types;
mod vfs;
pub mod xattr;
mod xattr_store;

pub use config::VfsConfig;
pub use cred::Credentials;
pub use dentry::randomize_name_hash;
pub use errno::{Errno, VfsResult};
pub use file::OpenFile;
pub use fs::{kernfs, memfs, procfs};
pub use mount::{Location, Mount, MountFlags, MountNamespace, MountRef};
pub use namei::MAX_SYMLINKS;
pub use process::{Fd, Process, AT_FDCWD};
pub use reclaim::release_barrier;
pub use syscalls::{Context, UmountFlags};
pub use time::Timespec;
pub use types::{
    falloc, AtFlags, DirEntry, FileType, OpenFlags, OpenHow, RenameFlags, ResolveFlags, SetAttr, SetTime, Stat, Whence,
};
pub use vfs::{FsStats, Vfs};
