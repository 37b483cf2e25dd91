//! Publishes a small sysfs-like tree with kernfs, walks it like a user
//! would, changes it while it is open, and shows a procfs task table.
//!
//! Run with `cargo run -p vfscale --example sysfs_tree`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use vfscale::kernfs::{Kernfs, KernfsConfig};
use vfscale::procfs::{ProcConfig, Procfs, TaskInfo};
use vfscale::{Credentials, Errno, OpenFlags, Process, VfsResult};

fn cat(p: &Process, path: &str) -> VfsResult<String> {
    let fd = p.open(path, OpenFlags::RDONLY, 0)?;
    let mut buf = vec![0u8; 4096];
    let n = p.read(fd, &mut buf);
    p.close(fd)?;
    buf.truncate(n?);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

fn main() -> VfsResult<()> {
    // A device with a read-only statistic and a writable setting.
    let sys = Kernfs::new(KernfsConfig::rcu());
    let devices = sys.create_dir(&sys.root(), "devices", 0o755)?;
    let eth0 = sys.create_dir(&devices, "eth0", 0o755)?;
    let packets = Arc::new(AtomicU64::new(0));
    let mtu = Arc::new(AtomicU64::new(1500));
    let shown = Arc::clone(&packets);
    sys.create_file(
        &eth0,
        "rx_packets",
        0o444,
        move || Ok(format!("{}\n", shown.load(Ordering::Relaxed)).into_bytes()),
        None::<fn(&[u8]) -> VfsResult<()>>,
    )?;
    let (shown, stored) = (Arc::clone(&mtu), Arc::clone(&mtu));
    sys.create_file(
        &eth0,
        "mtu",
        0o644,
        move || Ok(format!("{}\n", shown.load(Ordering::Relaxed)).into_bytes()),
        Some(move |buf: &[u8]| {
            let value: u64 = std::str::from_utf8(buf).ok().and_then(|s| s.trim().parse().ok()).ok_or(Errno::EINVAL)?;
            if !(68..=65535).contains(&value) {
                return Err(Errno::EINVAL);
            }
            stored.store(value, Ordering::Relaxed);
            Ok(())
        }),
    )?;
    let class = sys.create_dir(&sys.root(), "class", 0o755)?;
    sys.create_symlink(&class, "eth0", &eth0)?;

    let root = sys.vfs().process(Credentials::root());
    packets.fetch_add(42, Ordering::Relaxed);
    println!("/class/eth0 -> {}", String::from_utf8_lossy(&root.readlink("/class/eth0")?));
    println!("rx_packets: {}", cat(&root, "/class/eth0/rx_packets")?.trim());
    let fd = root.open("/devices/eth0/mtu", OpenFlags::WRONLY, 0)?;
    root.write(fd, b"9000\n")?;
    println!("mtu after writing 9000: {}", cat(&root, "/devices/eth0/mtu")?.trim());
    println!("writing 10 gives {:?}", root.pwrite(fd, b"10", 0).unwrap_err());
    root.close(fd)?;

    // Hot-unplug: open files see ENODEV, new walks ENOENT.
    let fd = root.open("/devices/eth0/rx_packets", OpenFlags::RDONLY, 0)?;
    sys.remove(&eth0)?;
    println!("read after removal: {:?}", root.read(fd, &mut [0u8; 8]).unwrap_err());
    println!("open after removal: {:?}", root.open("/devices/eth0/mtu", OpenFlags::RDONLY, 0).unwrap_err());
    root.close(fd)?;

    // A procfs task table.
    let proc = Procfs::new(ProcConfig::rcu_revalidate());
    proc.add_task(1, TaskInfo::new("init", ["/sbin/init"]))?;
    proc.add_task(731, TaskInfo::new("sshd", ["/usr/sbin/sshd", "-D"]))?;
    let p = proc.vfs().process(Credentials::root());
    for entry in p.list_dir("/")?.into_iter().skip(2) {
        let pid = String::from_utf8_lossy(&entry.name).into_owned();
        let stat = cat(&p, &format!("/{pid}/stat"))?;
        println!("{pid}: {}", stat.split_whitespace().take(4).collect::<Vec<_>>().join(" "));
    }
    proc.exit_task(731)?;
    println!("after exit, /731: {:?}", p.stat("/731").unwrap_err());
    Ok(())
}
