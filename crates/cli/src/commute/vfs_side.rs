//! The vfscale side of the pairs: [`Syscalls`] on a vfscale `Process`, and
//! fresh vfscale worlds. This file is compiled twice, as `plain` (the
//! build `bench` measures, for the timing) and as `audited` (the same
//! sources on `vfscale-audit`, for the checker); each parent names the
//! crate `vfs`.

use super::vfs::kernfs::{Kernfs, KernfsConfig};
use super::vfs::locks::Flock;
use super::vfs::procfs::{ProcConfig, Procfs, TaskInfo};
use super::vfs::{
    AtFlags, Credentials, Errno, MountFlags, OpenFlags, Process, SetTime, Stat, Timespec, UmountFlags, Vfs, VfsResult,
    Whence,
};
use crate::commute::sys::{digest, failed, names_digest, shown, stat_digest, Call, Fd, Outcome, Owner, Syscalls};
use crate::commute::world::{pids, Fs, Keep, World, CPU_ATTRIBUTES, MOUNT_DIRS};
use std::ffi::{CStr, CString};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The release barrier of this build's VFS (`release_barrier`).
pub fn release_barrier() {
    super::vfs::release_barrier(Duration::from_secs(2));
}

/// A fresh file system of kind `fs`, in its scalable design.
pub fn world(fs: Fs) -> Result<World, String> {
    let (vfs, keep): (Vfs, Option<Keep>) = match fs {
        Fs::Tmpfs => (Vfs::default(), None),
        Fs::Mounts => return mounts_world().map_err(|e| format!("building the mount tree: {e}")),
        Fs::Sysfs => {
            let sys = kernfs_tree().map_err(|e| format!("building the kernfs tree: {e}"))?;
            (sys.vfs().clone(), Some(Arc::new(sys)))
        }
        Fs::Proc => {
            let proc = Procfs::new(ProcConfig::rcu_revalidate());
            for pid in pids() {
                let comm = format!("task{pid}");
                proc.add_task(pid, TaskInfo::new(&comm, [comm.clone()]))
                    .map_err(|e| format!("adding task {pid}: {e}"))?;
            }
            (proc.vfs().clone(), Some(Arc::new(proc)))
        }
    };
    Ok(World::new(move || {
        Arc::new(VfsSyscalls::new(vfs.process(Credentials::root()), keep.clone())) as Arc<dyn Syscalls>
    }))
}

/// An in-memory root with [`MOUNT_DIRS`]: a second in-memory file system
/// mounted on `m`, its directory `m/d` bound on `b`, and an empty `x`.
fn mounts_world() -> VfsResult<World> {
    let root = Vfs::default();
    let ns = root.new_namespace();
    let admin = root.process_in(&ns, Credentials::root());
    for dir in MOUNT_DIRS {
        admin.mkdir(dir, 0o755)?;
    }
    let mounted = Vfs::default();
    admin.mount(&mounted, "none", "/m", MountFlags::NONE)?;
    admin.mkdir("/m/d", 0o755)?;
    admin.bind_mount("/m/d", "/b", false)?;
    let keep: Keep = Arc::new(mounted);
    Ok(World::new(move || {
        Arc::new(VfsSyscalls::new(root.process_in(&ns, Credentials::root()), Some(Arc::clone(&keep))))
            as Arc<dyn Syscalls>
    }))
}

/// A kernfs tree holding [`CPU_ATTRIBUTES`].
fn kernfs_tree() -> VfsResult<Kernfs> {
    type Store = fn(&[u8]) -> VfsResult<()>;
    let sys = Kernfs::new(KernfsConfig::rcu());
    for (cpu, path) in CPU_ATTRIBUTES.iter().enumerate() {
        let (dirs, attribute) = path.rsplit_once('/').expect("attribute paths have directories");
        let mut dir = sys.root();
        for name in dirs.split('/') {
            dir = match sys.lookup(&dir, name) {
                Some(existing) => existing,
                None => sys.create_dir(&dir, name, 0o755)?,
            };
        }
        let value = format!("{cpu}\n").into_bytes();
        sys.create_file(&dir, attribute, 0o444, move || Ok(value.clone()), None::<Store>)?;
    }
    Ok(sys)
}

/// A vfscale process; `keep` holds what its file system needs alive (a
/// kernfs tree, a task table).
struct VfsSyscalls {
    process: Process,
    _keep: Option<Keep>,
    /// The file system [`Syscalls::mount_and_umount`] mounts, made at its
    /// first call.
    spare: OnceLock<Vfs>,
}

impl VfsSyscalls {
    fn new(process: Process, keep: Option<Keep>) -> VfsSyscalls {
        VfsSyscalls { process, _keep: keep, spare: OnceLock::new() }
    }
}

impl Syscalls for VfsSyscalls {
    fn path(&self, rel: &str) -> CString {
        CString::new(format!("/{rel}")).expect("pair paths have no NUL byte")
    }

    fn stat(&self, path: &CStr) -> Result<u64, String> {
        self.process.stat(path.to_bytes()).map(|s| s.size).map_err(|e| failed("stat", shown(path), e))
    }

    fn missing(&self, path: &CStr) -> Result<(), String> {
        match self.process.stat(path.to_bytes()) {
            Err(Errno::ENOENT) => Ok(()),
            Ok(_) => Err(failed("stat", shown(path), "exists, but should be missing")),
            Err(e) => Err(failed("stat", shown(path), e)),
        }
    }

    fn fstat(&self, fd: Fd) -> Result<u64, String> {
        self.process.fstat(fd).map(|s| s.size).map_err(|e| failed("fstat", fd, e))
    }

    fn open(&self, path: &CStr, flags: i32, mode: u32) -> Result<Fd, String> {
        self.process.open(path.to_bytes(), OpenFlags(flags), mode).map_err(|e| failed("open", shown(path), e))
    }

    fn close(&self, fd: Fd) -> Result<(), String> {
        self.process.close(fd).map_err(|e| failed("close", fd, e))
    }

    fn read(&self, fd: Fd, buf: &mut [u8]) -> Result<usize, String> {
        self.process.read(fd, buf).map_err(|e| failed("read", fd, e))
    }

    fn pread(&self, fd: Fd, buf: &mut [u8], offset: u64) -> Result<usize, String> {
        self.process.pread(fd, buf, offset as i64).map_err(|e| failed("pread", fd, e))
    }

    fn pwrite(&self, fd: Fd, buf: &[u8], offset: u64) -> Result<usize, String> {
        self.process.pwrite(fd, buf, offset as i64).map_err(|e| failed("pwrite", fd, e))
    }

    fn lseek(&self, fd: Fd, offset: u64) -> Result<u64, String> {
        self.process.lseek(fd, offset as i64, Whence::Set).map_err(|e| failed("lseek", fd, e))
    }

    fn mkdir(&self, path: &CStr, mode: u32) -> Result<(), String> {
        self.process.mkdir(path.to_bytes(), mode).map_err(|e| failed("mkdir", shown(path), e))
    }

    fn unlink(&self, path: &CStr) -> Result<(), String> {
        self.process.unlink(path.to_bytes()).map_err(|e| failed("unlink", shown(path), e))
    }

    fn rename(&self, from: &CStr, to: &CStr) -> Result<(), String> {
        self.process.rename(from.to_bytes(), to.to_bytes()).map_err(|e| failed("rename", shown(from), e))
    }

    fn chmod(&self, path: &CStr, mode: u32) -> Result<(), String> {
        self.process.chmod(path.to_bytes(), mode).map_err(|e| failed("chmod", shown(path), e))
    }

    fn atime_ahead(&self, path: &CStr, ahead: i64) -> Result<(), String> {
        let mut at = Timespec::now();
        at.sec += ahead;
        self.process
            .utimens(path.to_bytes(), SetTime::At(at), SetTime::Omit)
            .map_err(|e| failed("utimensat", shown(path), e))
    }

    fn readdir(&self, path: &CStr) -> Result<usize, String> {
        self.process
            .list_dir(path.to_bytes())
            .map(|entries| entries.len())
            .map_err(|e| failed("readdir", shown(path), e))
    }

    fn flock(&self, fd: Fd, op: i32) -> Result<(), String> {
        self.process.flock(fd, op).map_err(|e| failed("flock", fd, e))
    }

    fn record_lock(&self, fd: Fd, owner: Owner, l_type: i16, start: i64, len: i64) -> Result<(), String> {
        let lock = Flock::new(l_type, start, len);
        match owner {
            Owner::Process => self.process.fcntl_setlk(fd, &lock).map_err(|e| failed("F_SETLK", fd, e)),
            Owner::Description => self.process.ofd_setlk(fd, &lock).map_err(|e| failed("F_OFD_SETLK", fd, e)),
        }
    }

    fn setlease(&self, fd: Fd, arg: i32) -> Result<(), String> {
        self.process.setlease(fd, arg).map_err(|e| failed("F_SETLEASE", fd, e))
    }

    fn unshare_mounts(&self) -> Result<(), String> {
        self.process.unshare_mount_namespace().map_err(|e| failed("unshare", "CLONE_NEWNS", e))
    }

    fn mount_and_umount(&self, target: &CStr) -> Result<(), String> {
        let spare = self.spare.get_or_init(Vfs::default);
        self.process
            .mount(spare, "none", target.to_bytes(), MountFlags::NONE)
            .map_err(|e| failed("mount", shown(target), e))?;
        self.process.umount2(target.to_bytes(), UmountFlags::NONE).map_err(|e| failed("umount2", shown(target), e))
    }
    fn call(&self, call: &Call) -> Outcome {
        vfs_call(&self.process, call).map_err(Errno::raw)
    }
}

/// The vfscale side of [`Syscalls::call`].
fn vfs_call(p: &Process, call: &Call) -> VfsResult<u64> {
    let digest_of = |st: Stat| stat_digest(st.mode, st.size, u64::from(st.nlink));
    match call {
        Call::Stat(path) => p.stat(path.to_bytes()).map(digest_of),
        Call::Fstatat(dir, name) => p.fstatat(*dir, name.to_bytes(), AtFlags::NONE).map(digest_of),
        Call::Fstat(fd) => p.fstat(*fd).map(digest_of),
        Call::OpenClose(path, flags) => {
            p.open(path.to_bytes(), OpenFlags(*flags), 0o644).and_then(|fd| p.close(fd)).map(|()| 0)
        }
        Call::OpenatClose(dir, name, flags) => {
            p.openat(*dir, name.to_bytes(), OpenFlags(*flags), 0o644).and_then(|fd| p.close(fd)).map(|()| 0)
        }
        Call::Unlink(path) => p.unlink(path.to_bytes()).map(|()| 0),
        Call::Unlinkat(dir, name, flags) => p.unlinkat(*dir, name.to_bytes(), AtFlags(*flags)).map(|()| 0),
        Call::Mkdir(path) => p.mkdir(path.to_bytes(), 0o755).map(|()| 0),
        Call::Mkdirat(dir, name) => p.mkdirat(*dir, name.to_bytes(), 0o755).map(|()| 0),
        Call::Rmdir(path) => p.rmdir(path.to_bytes()).map(|()| 0),
        Call::Rename(from, to) => p.rename(from.to_bytes(), to.to_bytes()).map(|()| 0),
        Call::Link(from, to) => p.link(from.to_bytes(), to.to_bytes()).map(|()| 0),
        Call::Chmod(path, mode) => p.chmod(path.to_bytes(), *mode).map(|()| 0),
        Call::Readdir(path) => p.list_dir(path.to_bytes()).map(|entries| {
            names_digest(entries.into_iter().map(|e| e.name).filter(|name| name != b"." && name != b"..").collect())
        }),
        Call::Setxattr(path, name, value) => p.setxattr(path.to_bytes(), name.to_bytes(), value, 0).map(|()| 0),
        Call::Getxattr(path, name) => {
            let mut buf = [0u8; 64];
            p.getxattr(path.to_bytes(), name.to_bytes(), &mut buf).map(|n| digest([&buf[..n]]))
        }
        Call::Pread(fd, offset, len) => {
            let mut buf = vec![0u8; *len];
            p.pread(*fd, &mut buf, *offset as i64).map(|n| digest([&buf[..n]]))
        }
        Call::Pwrite(fd, offset, len, byte) => p.pwrite(*fd, &vec![*byte; *len], *offset as i64).map(|n| n as u64),
        Call::Ftruncate(fd, len) => p.ftruncate(*fd, *len as i64).map(|()| 0),
        Call::Fallocate(fd, offset, len) => p.fallocate(*fd, 0, *offset as i64, *len as i64).map(|()| 0),
        Call::Lseek(fd, offset) => p.lseek(*fd, *offset as i64, Whence::Set),
        Call::Flock(fd, op) => p.flock(*fd, *op).map(|()| 0),
        Call::RecordLock(fd, owner, l_type, start, len) => {
            let lock = Flock::new(*l_type, *start, *len);
            match owner {
                Owner::Process => p.fcntl_setlk(*fd, &lock),
                Owner::Description => p.ofd_setlk(*fd, &lock),
            }
            .map(|()| 0)
        }
    }
}
