//! `vfscale mount DIR` and `vfscale umount DIR`: serve a fresh in-memory
//! VFS to real programs through FUSE, and stop serving it.

use clap::Args;
use std::path::PathBuf;
use vfscale_fuse::{MountOptions, RecordLocks};

/// Arguments of `vfscale mount`.
#[derive(Debug, Args)]
pub struct MountArgs {
    /// An empty directory to mount on.
    dir: PathBuf,
    /// Mount a kernfs tree on `sys/` with live attributes of the VFS and a
    /// procfs task table on `proc/` mirroring the host's processes.
    #[arg(long)]
    demo: bool,
    /// Threads reading /dev/fuse: every request, or only FORGETs while the
    /// io_uring queues serve [default: one per CPU].
    #[arg(long)]
    threads: Option<usize>,
    /// Let users other than the mounting one in (the VFS checks their
    /// permissions); non-root needs `user_allow_other` in /etc/fuse.conf.
    #[arg(long)]
    allow_other: bool,
    /// Most bytes of file data, as tmpfs's size=: with a K, M, G, T, P or E
    /// suffix, or a percentage of RAM; 0 for no limit. Past it writes fail
    /// with ENOSPC.
    #[arg(long, default_value = "50%", value_parser = vfscale_fuse::capacity::parse_size)]
    size: u64,
    /// Most inodes, as tmpfs's nr_inodes= (K, M, G suffixes; 0 for no
    /// limit); by default the pages in half of RAM, as tmpfs.
    #[arg(long, value_parser = vfscale_fuse::capacity::parse_count)]
    inodes: Option<u64>,
    /// Where record locks (fcntl) live: `kernel` (as flock locks; opening
    /// and closing a file then send no request) or `vfs` (the VFS's lock
    /// manager decides them; every open and close asks the server).
    #[arg(long, default_value_t = RecordLocks::Kernel)]
    locks: RecordLocks,
    /// Microseconds a request thread that has replied polls for the next
    /// request before blocking again, while that pays; 0 never. Threads
    /// reading /dev/fuse linger, not the io_uring queues'.
    #[arg(long, default_value_t = vfscale_fuse::LINGER_US)]
    linger_us: u64,
    /// Serve through /dev/fuse reads even where the kernel offers FUSE
    /// over io_uring (by default, with `--locks kernel`, the mount then
    /// takes a queue per CPU; as root, `echo Y >
    /// /sys/module/fuse/parameters/enable_uring` offers it).
    #[arg(long)]
    no_io_uring: bool,
}

/// Arguments of `vfscale umount`.
#[derive(Debug, Args)]
pub struct UmountArgs {
    /// The directory a `vfscale mount` serves.
    dir: PathBuf,
}

/// Serves until Ctrl-C, SIGTERM or `vfscale umount DIR`.
pub fn mount_command(args: MountArgs) -> Result<(), String> {
    let options = MountOptions {
        demo: args.demo,
        threads: args.threads.unwrap_or_else(vfscale_sync::cpu::usable_cpus),
        allow_other: args.allow_other,
        size_limit: args.size,
        inode_limit: args.inodes.unwrap_or_else(vfscale_fuse::capacity::default_inodes),
        locks: args.locks,
        linger: std::time::Duration::from_micros(args.linger_us),
        io_uring: !args.no_io_uring,
    };
    vfscale_fuse::serve(&args.dir, &options).map_err(|e| e.to_string())
}

/// Unmounts and waits until the mount is gone.
pub fn umount_command(args: UmountArgs) -> Result<(), String> {
    vfscale_fuse::unmount(&args.dir).map_err(|e| e.to_string())?;
    if vfscale_fuse::wait_unmounted(&args.dir, vfscale_fuse::UNMOUNT_WAIT) {
        Ok(())
    } else {
        Err(format!("{} is still mounted", args.dir.display()))
    }
}
