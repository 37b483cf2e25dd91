//! `open(2)`: the walk, creation with `O_CREAT`, and the checks of Linux
//! `do_open` and `do_dentry_open`, in Linux's order.
//!
//! May import the name operations (`namespace`, `namei`), `file`, the
//! node types and the base modules.

use crate::cred::Access;
use crate::errno::{Errno, VfsResult};
use crate::file::open_ref::OpenRef;
use crate::file::OpenFile;
use crate::inode::{Body, Inode};
use crate::mount::{MountFlags, MountRef, MountWrite, WriteAccess};
use crate::namei::{At, Intent, Walked, MAX_SYMLINKS};
use crate::namespace::{keep_mount_on, Ctx, Dir, ParentDir};
use crate::path::Last;
use crate::types::{FileType, OpenFlags};
use std::sync::Arc;
use vfscale_sync::audited::CountedArc;

/// `open(2)`: the walk, creation, and the checks of Linux `do_open`.
/// The description is made in its `Arc`, not moved there: it is several
/// cache lines.
pub(crate) fn open(ctx: &Ctx<'_>, path: &[u8], flags: OpenFlags, perm: u32) -> VfsResult<Arc<OpenFile>> {
    // Linux 6.4+: O_CREAT|O_DIRECTORY never creates a directory; refuse it.
    if flags.creat() && flags.directory() {
        return Err(Errno::EINVAL);
    }
    // Neither a path-only descriptor nor an unnamed file is kept: Linux's
    // answer for a filesystem without `->tmpfile`.
    if flags.0 & libc::O_PATH != 0 || flags.0 & libc::O_TMPFILE == libc::O_TMPFILE {
        return Err(Errno::EOPNOTSUPP);
    }
    // Counted as an open from here on (Linux `do_dentry_open` counts
    // before the lease check); in rcu-walk that is the only write.
    let count = |at: At<'_>, created| {
        let cpu = vfscale_sync::cpu::current_cpu();
        let mount = keep_mount_on(&at, cpu)?;
        let inode = OpenRef::new(at.inode, &at.sb().reclaim, flags.may_read(), flags.may_write(), created, cpu);
        Ok((inode, mount))
    };
    let intent = if flags.nofollow() { Intent::NoFollow } else { Intent::Follow };
    let existing = |ctx: &Ctx<'_>| {
        ctx.walk(path, intent, |walked| match walked {
            Walked::Found(at) => count(at, false),
            Walked::Parent { .. } => unreachable!("not a parent walk"),
        })
    };
    // `O_CREAT` of a name that exists opens it as an open without
    // `O_CREAT` does, in rcu-walk, counting only per CPU (Linux 6.12's
    // opportunistic look-up for `O_CREAT`). A missing name, or an error
    // of the walk's last steps (a final symlink to `f/` is EISDIR with
    // `O_CREAT`), goes on to the create, which walks again; more than
    // `MAX_SYMLINKS` links on the way is ELOOP on any path. Not with
    // `O_EXCL`, which fails on any name there, nor with a trailing slash,
    // which is EISDIR on a file too.
    // A create's write access to the mount, held until the file is open
    // (Linux `open_last_lookups` .. `do_open`), and kept by a file opened
    // for writing.
    let ((inode, mount), creation) = if !flags.creat() {
        (existing(ctx)?, None)
    } else {
        let quick = !flags.excl() && !path.ends_with(b"/");
        match quick.then(|| existing(ctx)) {
            Some(Ok(found)) => (found, None),
            Some(Err(Errno::ELOOP)) => return Err(Errno::ELOOP),
            _ => {
                let (Dir { mount, inode }, creation) = open_or_create(ctx, path, flags, perm)?;
                (count(At { mount: &mount, inode: &inode }, creation.is_some())?, creation)
            }
        }
    };
    let sb = &mount.sb;
    let mut wanted = flags.permission_needed();
    if flags.trunc() {
        wanted |= Access::WRITE;
    }
    if flags.directory() && !inode.is_dir() {
        return Err(Errno::ENOTDIR);
    }
    match inode.file_type() {
        FileType::Symlink => return Err(Errno::ELOOP),
        FileType::Directory if flags.creat() || wanted.contains(Access::WRITE) => return Err(Errno::EISDIR),
        _ => {}
    }
    let special = matches!(&inode.body, Body::Special(..));
    let max = sb.config.max_file_size;
    let created = creation.is_some();
    let (mut write_access, _creating) = if flags.may_write() { (creation, None) } else { (None, creation) };
    if !created {
        // Held until the truncation below is done.
        let _truncating = check_mount(&mount, &inode, flags)?;
        if !sb.native {
            // Decided without the filesystem's lock where it can (the
            // "after" designs), as the walk's own permission checks are.
            match sb.fs.permission_rcu(&inode, ctx.cred, wanted) {
                Some(decided) => decided?,
                None => sb.fs.permission(&inode, ctx.cred, wanted)?,
            }
        } else {
            inode.permission_fast(ctx.cred, wanted)?;
        }
        // `do_dentry_open`: writing through a read-only mount; the file
        // keeps the mount's write access until it closes.
        if flags.may_write() && !special {
            write_access = Some(crate::mount::Mount::get_write_access(&mount)?);
        }
        if let (true, Body::Regular(data)) = (flags.trunc(), &inode.body) {
            crate::file::truncate_data(&inode, data, 0, max, Some(ctx.cred))?;
        }
    }
    if special {
        open_special(inode.file_type(), flags)?;
    }
    let served = match &inode.body {
        Body::Generated => Some(sb.fs.open(&inode, flags, ctx.cred)?),
        _ => None,
    };
    let (lister, dir_locks) = if inode.is_dir() {
        ((!sb.native).then(|| Arc::clone(&sb.fs)), sb.dir_locks.for_open_directory())
    } else {
        (None, crate::dirlock::DirLocks::PerDirectory)
    };
    let file = Arc::new(OpenFile::new(inode, mount, flags, max, lister, served, dir_locks, write_access));
    // Counted as open by now, so a racing F_SETLEASE sees this open.
    if !created {
        super::locks::break_lease(&file)?;
    }
    Ok(file)
}

/// The mount's say before the permission check (Linux `may_open`, and
/// `do_open` for `O_TRUNC`): a device on a `nodev` mount is EACCES, a
/// truncation on a read-only one EROFS; a truncation gets the mount's
/// write access, for the caller to hold until it is done.
fn check_mount<'m>(mount: &'m MountRef, inode: &Inode, flags: OpenFlags) -> VfsResult<Option<MountWrite<'m>>> {
    if inode.file_type().is_device() && mount.flags().contains(MountFlags::NODEV) {
        return Err(Errno::EACCES);
    }
    if flags.trunc() && inode.file_type() == FileType::Regular {
        return mount.want_write().map(Some);
    }
    Ok(None)
}

/// Opening a special file, after the permission check: the library keeps
/// no pipe buffers, sockets or drivers (a front end does their I/O; on the
/// mount, the kernel), so it answers as Linux does where none is there: a
/// socket or a device with no driver is ENXIO, and so is a FIFO opened
/// `O_WRONLY | O_NONBLOCK`, which finds no reader since the library keeps
/// no pipe for a reader to wait on. Other FIFO opens succeed (without
/// waiting for a peer); reading or writing the description is EINVAL.
fn open_special(file_type: FileType, flags: OpenFlags) -> VfsResult<()> {
    match file_type {
        FileType::Fifo if flags.0 & libc::O_ACCMODE == libc::O_WRONLY && flags.0 & libc::O_NONBLOCK != 0 => {
            Err(Errno::ENXIO)
        }
        FileType::Fifo => Ok(()),
        _ => Err(Errno::ENXIO),
    }
}

/// `O_CREAT`: the existing file (following a final symlink unless
/// `O_EXCL` or `O_NOFOLLOW`), or a new one; a dangling final symlink
/// creates its target, as Linux does. With a new file, the create's write
/// access to the mount.
fn open_or_create(ctx: &Ctx<'_>, path: &[u8], flags: OpenFlags, perm: u32) -> VfsResult<(Dir, Option<WriteAccess>)> {
    let mut path = path.to_vec();
    let mut start: Option<crate::namespace::ParentDir> = None;
    let mut links_followed = 0;
    loop {
        let cwd = start.as_ref().map_or(ctx.cwd, |dir| At { mount: &dir.mount, inode: &dir.inode });
        let here = Ctx { cwd, ..*ctx };
        let (dir, last, trailing_slash) = here.parent(&path)?;
        let name = match last {
            Last::Normal(name) => name,
            // ".", ".." or "/": an existing directory, once the walk's own
            // checks of it passed (Linux `handle_dots` before `do_open`:
            // EXDEV for a `..` out of a RESOLVE_BENEATH or across a
            // RESOLVE_NO_XDEV mount, say).
            _ => {
                here.walk(&path, Intent::Follow, |_| Ok(()))?;
                return Err(if flags.excl() { Errno::EEXIST } else { Errno::EISDIR });
            }
        };
        if trailing_slash {
            return Err(Errno::EISDIR);
        }
        // `O_EXCL` goes straight to the create, which fails on a name that
        // exists (where its presence shows without a lock, before any lock
        // or count: two failing exclusive creates share no line).
        let existing = if flags.excl() { None } else { existing_child(&dir, name)? };
        let Some(existing) = existing else {
            match here.create(&dir, name, FileType::Regular, perm, Box::default(), 0) {
                // Lost a race with another creator: look again.
                Err(Errno::EEXIST) if !flags.excl() => continue,
                created => {
                    let (inode, write) = created?;
                    let write = write.keep(&dir.mount);
                    let inode = CountedArc::adopt(inode);
                    return Ok((Dir { mount: dir.mount, inode }, Some(write)));
                }
            }
        };
        // Onto whatever is mounted on the name, before its type counts.
        let (mut on, mut existing) = (None::<MountRef>, existing);
        if let Some(ns) = ctx.ns {
            while existing.has_mounts() {
                let Some(child) = crate::namei::mounted_on(ns, on.as_ref().unwrap_or(&dir.mount), &existing) else {
                    break;
                };
                if ctx.scope.no_xdev {
                    return Err(Errno::EXDEV);
                }
                existing = Arc::clone(child.root());
                on = Some(child);
            }
        }
        match existing.symlink_target() {
            Some(target) if !flags.nofollow() => {
                links_followed += 1;
                if links_followed > MAX_SYMLINKS || ctx.scope.no_symlinks {
                    return Err(Errno::ELOOP);
                }
                path = target.to_vec();
                start = Some(dir);
            }
            _ => return Ok((Dir { mount: on.unwrap_or(dir.mount), inode: CountedArc::adopt(existing) }, None)),
        }
    }
}

/// The inode `name` of `dir` names, if any, counted. A native tree's
/// dcache holds every name of its directories, so a positive dentry there
/// answers; a miss (or a negative) goes on to the create, which looks
/// again under the name's lock. That spares a create of a new name in a
/// split directory a read of its bucket's nodes, which other CPUs
/// made.
fn existing_child(dir: &ParentDir, name: &[u8]) -> VfsResult<Option<Arc<Inode>>> {
    let directory = dir.dir()?;
    let sb = &dir.mount.sb;
    if !sb.native {
        // Its filesystem knows its names (a generated tree's directories
        // keep none), as the create it would go on to asks it.
        let _locked = sb.dir_locks.read(directory);
        return sb.fs.lookup(&dir.inode, name);
    }
    let guard = crossbeam_epoch::pin();
    let cached = sb.dcache.lookup(dir.ino(), name, &guard).and_then(|dentry| dentry.inode.as_ref());
    Ok(cached.map(|inode| CountedArc::new(inode).into_arc()))
}
