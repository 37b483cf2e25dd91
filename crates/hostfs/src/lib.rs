//! hostfs: a read-only passthrough of a host directory, as a filesystem a
//! vfscale [`Vfs`] serves, written against the public interface of
//! [`vfscale::fs`] alone.
//!
//! Each name is looked up on the host when a walk first asks for it
//! (`lstat`), and its inode shows the host's type, permission bits, owner,
//! group, size, link count and times, and a symlink's target. The host
//! ownership and mode are exactly what the VFS checks, with the *caller's*
//! credentials, before anything is read: the passthrough itself reads with
//! the rights of the program that runs it (often root), so it never decides
//! who may read. The instance is read-only ([`Filesystem::read_only`]):
//! every change fails with EROFS.
//!
//! A cached name is checked against the host again in ref-walk (a host
//! `lstat` is a system call, which rcu-walk may not make): when the host's
//! file changed identity, size, modification or status-change time, the
//! name is looked up afresh and gets a new inode with the new attributes.
//! An open file checks at open that the host path still names the file
//! looked up (ESTALE otherwise), and reads the host file it opened.
//!
//! The inode numbers are the VFS's own, not the host's: a `readdir` entry
//! carries 0 for a name not looked up yet.
//!
//! ```
//! use vfscale::{Credentials, MountFlags, OpenFlags, Vfs, VfsConfig};
//!
//! let dir = std::env::temp_dir().join(format!("hostfs-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! std::fs::write(dir.join("motd"), b"welcome\n").unwrap();
//!
//! let host = vfscale_hostfs::new(&dir, VfsConfig::default())?;
//! let root_fs = Vfs::default();
//! let ns = root_fs.new_namespace();
//! let p = root_fs.process_in(&ns, Credentials::root());
//! p.mkdir("/host", 0o755)?;
//! p.mount(&host, "hostfs", "/host", MountFlags::NONE)?;
//! let fd = p.open("/host/motd", OpenFlags::RDONLY, 0)?;
//! let mut buf = [0u8; 16];
//! let n = p.read(fd, &mut buf)?;
//! assert_eq!(&buf[..n], b"welcome\n");
//! assert_eq!(p.unlink("/host/motd"), Err(vfscale::Errno::EROFS));
//! std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), vfscale::Errno>(())
//! ```

#![warn(missing_docs, missing_debug_implementations)]

use std::ffi::OsStr;
use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use vfscale::fs::{FileOps, Filesystem, Guard, Instance, NewInode, Revalidate};
use vfscale::inode::Inode;
use vfscale::{Credentials, DirEntry, Errno, FileType, OpenFlags, Timespec, Vfs, VfsConfig, VfsResult};

/// A [`Vfs`] that shows the host directory `dir`, read-only; ENOTDIR if it
/// is not a directory, or the host's error for it.
pub fn new(dir: impl AsRef<Path>, config: VfsConfig) -> VfsResult<Vfs> {
    let dir = dir.as_ref().to_path_buf();
    let meta = std::fs::metadata(&dir).map_err(errno)?;
    if !meta.is_dir() {
        return Err(Errno::ENOTDIR);
    }
    Ok(Vfs::with_filesystem(config, |instance| {
        instance.set_attributes(instance.root(), &spec(&meta, FileType::Directory));
        Arc::new(Hostfs { base: dir, instance: instance.clone() })
    }))
}

/// The filesystem: the host directory it shows and the instance it makes
/// inodes in.
#[derive(Debug)]
struct Hostfs {
    base: PathBuf,
    instance: Instance,
}

/// What a hostfs inode stands for (its `i_private`): the host path and
/// what identified the file when it was looked up.
#[derive(Debug)]
struct HostNode {
    path: PathBuf,
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl HostNode {
    fn of(path: PathBuf, meta: &Metadata) -> HostNode {
        HostNode {
            path,
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Whether `meta` is the file this node was made from, unchanged.
    fn matches(&self, meta: &Metadata) -> bool {
        self.dev == meta.dev()
            && self.ino == meta.ino()
            && self.size == meta.size()
            && self.mtime == (meta.mtime(), meta.mtime_nsec())
            && self.ctime == (meta.ctime(), meta.ctime_nsec())
    }
}

/// The host's error as an [`Errno`]; EIO for one without a number.
fn errno(err: io::Error) -> Errno {
    err.raw_os_error().filter(|&raw| raw > 0).map_or(Errno::EIO, Errno::from_raw)
}

/// The vfscale type of a host file.
fn file_type(meta: &Metadata) -> FileType {
    let t = meta.file_type();
    if t.is_dir() {
        FileType::Directory
    } else if t.is_symlink() {
        FileType::Symlink
    } else if t.is_fifo() {
        FileType::Fifo
    } else if t.is_socket() {
        FileType::Socket
    } else if t.is_char_device() {
        FileType::CharDevice
    } else if t.is_block_device() {
        FileType::BlockDevice
    } else {
        FileType::Regular
    }
}

/// The attributes of an inode for the host file `meta`.
fn spec(meta: &Metadata, file_type: FileType) -> NewInode {
    let time = |sec: i64, nsec: i64| Some(Timespec { sec, nsec });
    let mut spec = NewInode::of(file_type, meta.mode() & 0o7777);
    spec.uid = meta.uid();
    spec.gid = meta.gid();
    spec.size = Some(meta.size());
    spec.nlink = Some(u32::try_from(meta.nlink()).unwrap_or(u32::MAX));
    spec.atime = time(meta.atime(), meta.atime_nsec());
    spec.mtime = time(meta.mtime(), meta.mtime_nsec());
    spec.ctime = time(meta.ctime(), meta.ctime_nsec());
    if file_type.is_device() {
        spec.rdev = meta.rdev();
    }
    spec
}

impl Hostfs {
    /// The host path of the directory or file `inode`.
    fn path_of<'a>(&'a self, inode: &'a Inode) -> &'a Path {
        match inode.private::<HostNode>() {
            Some(node) => &node.path,
            None => &self.base,
        }
    }
}

impl Filesystem for Hostfs {
    fn fs_type(&self) -> &'static str {
        "hostfs"
    }

    fn read_only(&self) -> bool {
        true
    }

    /// The host may have changed the file; only a host `lstat` tells, and
    /// rcu-walk makes no system call.
    fn revalidate_rcu(&self, _dir: &Inode, _name: &[u8], _inode: &Inode, _guard: &Guard) -> Revalidate {
        Revalidate::NeedRefWalk
    }

    fn revalidate(&self, _dir: &Inode, _name: &[u8], inode: &Inode) -> bool {
        let Some(node) = inode.private::<HostNode>() else { return false };
        std::fs::symlink_metadata(&node.path).is_ok_and(|meta| node.matches(&meta))
    }

    fn lookup(&self, dir: &Arc<Inode>, name: &[u8]) -> VfsResult<Option<Arc<Inode>>> {
        let path = self.path_of(dir).join(OsStr::from_bytes(name));
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(errno(err)),
        };
        let file_type = file_type(&meta);
        let mut spec = spec(&meta, file_type);
        match file_type {
            FileType::Directory => spec.parent = Some(Arc::clone(dir)),
            FileType::Symlink => {
                spec.symlink_target = std::fs::read_link(&path).map_err(errno)?.into_os_string().into_vec().into();
            }
            _ => {}
        }
        spec.private = Some(Arc::new(HostNode::of(path, &meta)));
        Ok(Some(self.instance.new_inode(spec)))
    }

    fn readdir(&self, dir: &Inode) -> VfsResult<Vec<DirEntry>> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(self.path_of(dir)).map_err(errno)? {
            let entry = entry.map_err(errno)?;
            let meta = entry.metadata().map_err(errno)?;
            entries.push(DirEntry { name: entry.file_name().into_vec(), ino: 0, file_type: file_type(&meta) });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    fn open(&self, inode: &Arc<Inode>, _flags: OpenFlags, _cred: &Credentials) -> VfsResult<Box<dyn FileOps>> {
        let node = inode.private::<HostNode>().ok_or(Errno::EINVAL)?;
        // Read-only whatever was asked: the instance is read-only, so the
        // VFS refused any write before calling here.
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&node.path)
            .map_err(errno)?;
        let meta = file.metadata().map_err(errno)?;
        if meta.dev() != node.dev || meta.ino() != node.ino {
            return Err(Errno::ESTALE);
        }
        Ok(Box::new(HostFile { file }))
    }
}

/// An open host file.
#[derive(Debug)]
struct HostFile {
    file: File,
}

impl FileOps for HostFile {
    fn read(&self, _inode: &Inode, buf: &mut [u8], offset: u64) -> VfsResult<usize> {
        self.file.read_at(buf, offset).map_err(errno)
    }

    fn write(&self, _inode: &Inode, _buf: &[u8], _offset: u64) -> VfsResult<usize> {
        Err(Errno::EROFS)
    }
}
