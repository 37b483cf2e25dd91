//! `vfscale mount DIR` and `vfscale umount DIR`: serve a fresh in-memory
//! VFS to real programs through FUSE, and stop serving it; `--bind-ro
//! HOSTDIR:PATH` binds host directories read-only into the served tree
//! (through `vfscale-hostfs`).

use clap::Args;
use std::path::{Path, PathBuf};
use vfscale_fuse::{MountOptions, ReadOnlyMount, RecordLocks};

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
    /// permissions); non-root needs `user_allow_other` in /etc/fuse.conf,
    /// and then mounts with auto_unmount (fusermount3 unmounts when the
    /// server ends, however it ends).
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
    /// Bind the host directory HOSTDIR read-only (`ro,nosuid,nodev`) at
    /// PATH, an absolute path of the served tree. PATH and its missing
    /// parents are made first in the in-memory tree (mkdir -p, mode
    /// 0755), so a fresh tree needs no preparation. PATH then shows
    /// HOSTDIR, its files the host's owners, modes and contents, live;
    /// the VFS checks each caller's permission, and changes fail with
    /// EROFS. May be given more than once (a PATH inside another bind
    /// must exist as a directory on that host directory). The last ':'
    /// ends HOSTDIR, so PATH cannot contain one.
    #[arg(long = "bind-ro", value_name = "HOSTDIR:PATH", value_parser = parse_bind_ro)]
    bind_ro: Vec<BindRo>,
}

/// One `--bind-ro HOSTDIR:PATH`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindRo {
    /// The host directory, canonical.
    host: PathBuf,
    /// Where in the served tree: absolute, without `.`, `..`, repeated or
    /// trailing slashes.
    path: String,
}

/// Parses and checks a `--bind-ro` value: a `:` (the last one) between
/// an existing host directory and an absolute path of the served tree
/// other than its root.
fn parse_bind_ro(arg: &str) -> Result<BindRo, String> {
    let Some((host, path)) = arg.rsplit_once(':') else {
        return Err("no ':' between HOSTDIR and PATH (give HOSTDIR:PATH, e.g. /etc:/host/etc)".into());
    };
    if host.is_empty() {
        return Err("HOSTDIR (before the ':') is empty".into());
    }
    if path.is_empty() {
        return Err("PATH (after the ':') is empty".into());
    }
    let path = served_path(path)?;
    Ok(BindRo { host: host_dir(Path::new(host))?, path })
}

/// `path` as a path of the served tree: absolute, plain, not the root.
fn served_path(path: &str) -> Result<String, String> {
    if !path.starts_with('/') {
        return Err(format!("PATH '{path}' is not absolute (a path of the served tree starts with /)"));
    }
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    if parts.iter().any(|p| *p == "." || *p == "..") {
        return Err(format!("PATH '{path}' has a '.' or '..' component; give it without them"));
    }
    if parts.is_empty() {
        return Err("PATH / is the served tree's root, which a bind cannot cover; bind under it, e.g. /host".into());
    }
    Ok(format!("/{}", parts.join("/")))
}

/// `host` as an existing host directory, canonical.
fn host_dir(host: &Path) -> Result<PathBuf, String> {
    let shown = host.display();
    match std::fs::metadata(host) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!("HOSTDIR '{shown}' does not exist")),
        Err(e) => Err(format!("HOSTDIR '{shown}': {e}")),
        Ok(meta) if !meta.is_dir() => Err(format!("HOSTDIR '{shown}' is not a directory")),
        Ok(_) => std::fs::canonicalize(host).map_err(|e| format!("HOSTDIR '{shown}': {e}")),
    }
}

/// Checks the binds against each other and the demo trees, and orders
/// them parents first, so a bind inside another lands on top of it
/// whatever the order they were given in.
fn order_binds(mut binds: Vec<BindRo>, demo: bool) -> Result<Vec<BindRo>, String> {
    for (i, bind) in binds.iter().enumerate() {
        if binds[..i].iter().any(|b| b.path == bind.path) {
            return Err(format!("--bind-ro: PATH {} is given twice", bind.path));
        }
        if demo {
            for (tree, what) in [("/sys", "kernfs"), ("/proc", "procfs")] {
                if bind.path == tree || bind.path.starts_with(&format!("{tree}/")) {
                    return Err(format!(
                        "--bind-ro: PATH {} is in {tree}, where --demo mounts {what}; bind elsewhere",
                        bind.path
                    ));
                }
            }
        }
    }
    binds.sort_by_key(|b| b.path.matches('/').count());
    Ok(binds)
}

/// Arguments of `vfscale umount`.
#[derive(Debug, Args)]
pub struct UmountArgs {
    /// The directory a `vfscale mount` serves.
    dir: PathBuf,
}

/// Serves until Ctrl-C, SIGTERM or `vfscale umount DIR`.
pub fn mount_command(args: MountArgs) -> Result<(), String> {
    // Users of the mount choose its names: the hash that places them in
    // buckets and hash chains gets a key they cannot know. Nothing made an
    // instance yet, so the key is drawn.
    let keyed = vfscale::randomize_name_hash();
    debug_assert!(keyed, "an instance was made before the mount");
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
    let read_only = order_binds(args.bind_ro, args.demo)?
        .into_iter()
        .map(|bind| {
            let source = bind.host.display().to_string();
            let fs = vfscale_hostfs::new(&bind.host, vfscale::VfsConfig::default())
                .map_err(|e| format!("--bind-ro: cannot serve HOSTDIR {source}: {e}"))?;
            Ok(ReadOnlyMount { fs, source, path: bind.path })
        })
        .collect::<Result<Vec<_>, String>>()?;
    vfscale_fuse::serve_with(&args.dir, read_only, &options).map_err(|e| e.to_string())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn bind(host: &Path, path: &str) -> BindRo {
        BindRo { host: host.canonicalize().unwrap(), path: path.into() }
    }

    #[test]
    fn a_bind_is_hostdir_colon_path() {
        let tmp = tempfile::tempdir().unwrap();
        let host = tmp.path().display().to_string();
        assert_eq!(parse_bind_ro(&format!("{host}:/host")), Ok(bind(tmp.path(), "/host")));
        assert_eq!(parse_bind_ro(&format!("{host}://a//b/")), Ok(bind(tmp.path(), "/a/b")), "slashes tidied");
        // The last ':' ends HOSTDIR.
        let colon = tmp.path().join("a:b");
        std::fs::create_dir(&colon).unwrap();
        assert_eq!(parse_bind_ro(&format!("{}:/c", colon.display())), Ok(bind(&colon, "/c")));
        // A relative HOSTDIR is the current directory's, made canonical.
        assert_eq!(parse_bind_ro(".:/here"), Ok(bind(Path::new("."), "/here")));
    }

    #[test]
    fn bad_binds_say_what_is_wrong() {
        let tmp = tempfile::tempdir().unwrap();
        let host = tmp.path().display().to_string();
        let file = tmp.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let err = |arg: &str| parse_bind_ro(arg).unwrap_err();
        assert!(err(&host).contains("no ':' between HOSTDIR and PATH"), "{}", err(&host));
        assert_eq!(err(":/host"), "HOSTDIR (before the ':') is empty");
        assert_eq!(err(&format!("{host}:")), "PATH (after the ':') is empty");
        assert_eq!(
            err(&format!("{host}:host")),
            "PATH 'host' is not absolute (a path of the served tree starts with /)"
        );
        assert!(err(&format!("{host}:/a/../b")).contains("'.' or '..'"));
        assert!(err(&format!("{host}:/a/./b")).contains("'.' or '..'"));
        assert!(err(&format!("{host}:/")).contains("served tree's root"));
        assert!(err(&format!("{host}:///")).contains("served tree's root"));
        let missing = tmp.path().join("missing");
        assert_eq!(
            err(&format!("{}:/h", missing.display())),
            format!("HOSTDIR '{}' does not exist", missing.display())
        );
        assert_eq!(err(&format!("{}:/h", file.display())), format!("HOSTDIR '{}' is not a directory", file.display()));
    }

    #[test]
    fn binds_are_checked_together_and_mounted_parents_first() {
        let tmp = tempfile::tempdir().unwrap();
        let b = |path: &str| bind(tmp.path(), path);
        let paths = |binds: Vec<BindRo>| binds.into_iter().map(|b| b.path).collect::<Vec<_>>();
        assert_eq!(paths(order_binds(vec![b("/h/a/b"), b("/x"), b("/h/a")], false).unwrap()), ["/x", "/h/a", "/h/a/b"]);
        assert_eq!(order_binds(vec![b("/h"), b("/h")], false).unwrap_err(), "--bind-ro: PATH /h is given twice");
        assert!(order_binds(vec![b("/sys")], false).is_ok());
        let err = order_binds(vec![b("/sys")], true).unwrap_err();
        assert!(err.contains("where --demo mounts kernfs"), "{err}");
        assert!(order_binds(vec![b("/proc/x")], true).unwrap_err().contains("procfs"));
        assert!(order_binds(vec![b("/system"), b("/procs")], true).is_ok());
    }

    #[test]
    fn the_help_names_the_option() {
        use clap::CommandFactory;
        let help = crate::Cli::command().find_subcommand_mut("mount").unwrap().render_long_help().to_string();
        assert!(help.contains("--bind-ro <HOSTDIR:PATH>"), "{help}");
        assert!(help.contains("mkdir -p"), "{help}");
    }
}
