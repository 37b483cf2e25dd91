//! Which CPU the calling thread runs on, for picking a per-CPU slot.
//!
//! The answer is a hint: the thread may migrate right after, so per-CPU
//! structures must stay correct when the slot chosen is not the current CPU.
//! The fast path reads the `cpu_id` field of the rseq area that glibc (2.35+)
//! registers for every thread (~0.3 ns); without it, `sched_getcpu(3)`
//! (~2 ns); if that fails too, a stable per-thread index.

/// Number of per-CPU slots to allocate: every CPU the kernel may report.
/// Asked of the kernel once (glibc's `sysconf` reads `/sys` for it, some
/// microseconds a call) and kept: objects with per-CPU parts, a process's
/// descriptor table among them, are made on hot paths.
pub fn possible_cpus() -> usize {
    #[cfg(loom)]
    return 2;
    #[cfg(not(loom))]
    {
        static CPUS: crate::audited::OnceLock<usize> = crate::audited::OnceLock::new();
        *CPUS.get_or_init(|| {
            // SAFETY: sysconf has no memory-safety preconditions.
            let configured = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
            if configured > 0 {
                configured as usize
            } else {
                std::thread::available_parallelism().map_or(1, |n| n.get())
            }
        })
    }
}

/// How many CPUs this process may run on now (its affinity mask, at least
/// 1): the thread count that fills the machine without oversubscribing it.
pub fn usable_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// The CPU the caller is running on now (a hint, see the module doc).
///
/// Under loom it is always 0; models choose slots explicitly.
#[inline]
pub fn current_cpu() -> usize {
    #[cfg(loom)]
    return 0;
    #[cfg(all(feature = "audit", not(loom)))]
    if crate::audit::active() {
        if let Some(cpu) = VIRTUAL_CPU.with(std::cell::Cell::get) {
            return cpu;
        }
    }
    #[cfg(not(loom))]
    imp::current_cpu()
}

#[cfg(all(feature = "audit", not(loom)))]
std::thread_local!(static VIRTUAL_CPU: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) });

/// Runs `f` with [`current_cpu`] answering `cpu` on this thread, whatever
/// CPU it runs on: how the conflict checker puts its two threads on two
/// CPUs, deterministically, wherever the kernel schedules them. `cpu` is
/// taken modulo [`possible_cpus`] (so a one-CPU machine has no second
/// CPU to give). Only with the `audit` feature.
#[cfg(all(feature = "audit", not(loom)))]
pub fn with_virtual_cpu<R>(cpu: usize, f: impl FnOnce() -> R) -> R {
    let _active = crate::audit::Active::raise();
    let saved = VIRTUAL_CPU.with(|v| v.replace(Some(cpu % possible_cpus())));
    struct Restore(Option<usize>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = VIRTUAL_CPU.try_with(|v| v.set(self.0));
        }
    }
    let _restore = Restore(saved);
    f()
}

#[cfg(not(loom))]
mod imp {
    use std::sync::atomic::{AtomicIsize, AtomicU32, AtomicUsize, Ordering};

    /// Offset of this thread's rseq area from the thread pointer;
    /// `UNKNOWN` before the first look-up, `ABSENT` when rseq is not usable.
    static RSEQ_OFFSET: AtomicIsize = AtomicIsize::new(UNKNOWN);
    const UNKNOWN: isize = isize::MIN;
    const ABSENT: isize = isize::MIN + 1;
    /// `struct rseq { u32 cpu_id_start; u32 cpu_id; ... }`
    const CPU_ID_FIELD: isize = 4;

    #[inline]
    pub(super) fn current_cpu() -> usize {
        if let Some(cpu) = rseq_cpu() {
            return cpu;
        }
        // SAFETY: sched_getcpu has no preconditions.
        let cpu = unsafe { libc::sched_getcpu() };
        if cpu >= 0 {
            cpu as usize
        } else {
            thread_index()
        }
    }

    #[inline]
    fn rseq_cpu() -> Option<usize> {
        let mut offset = RSEQ_OFFSET.load(Ordering::Relaxed);
        if offset == UNKNOWN {
            offset = lookup_rseq_offset();
            RSEQ_OFFSET.store(offset, Ordering::Relaxed);
        }
        if offset == ABSENT {
            return None;
        }
        let tp = thread_pointer()?;
        // SAFETY: glibc registered an rseq area at `tp + offset` for every
        // thread (rseq size > 0 was checked); the kernel keeps `cpu_id` up to
        // date asynchronously, so it is read as an atomic.
        let cpu_id = unsafe { (*(tp.offset(offset + CPU_ID_FIELD) as *const AtomicU32)).load(Ordering::Relaxed) };
        // RSEQ_CPU_ID_UNINITIALIZED (-1) or registration failed (-2).
        (cpu_id < u32::MAX - 1).then_some(cpu_id as usize)
    }

    fn lookup_rseq_offset() -> isize {
        // SAFETY: dlsym with RTLD_DEFAULT and NUL-terminated names is sound;
        // the symbols, when present, are glibc's `ptrdiff_t __rseq_offset`
        // and `unsigned int __rseq_size`.
        unsafe {
            let offset = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr());
            let size = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr());
            if offset.is_null() || size.is_null() || *(size as *const u32) == 0 {
                return ABSENT;
            }
            *(offset as *const isize)
        }
    }

    #[inline]
    fn thread_pointer() -> Option<*const u8> {
        #[cfg(target_arch = "x86_64")]
        {
            let tp: *const u8;
            // SAFETY: on x86_64 Linux, %fs:0 holds the TCB's self pointer,
            // which is the thread pointer glibc's __rseq_offset is relative to.
            unsafe { std::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags)) };
            Some(tp)
        }
        #[cfg(target_arch = "aarch64")]
        {
            let tp: *const u8;
            // SAFETY: reading TPIDR_EL0 has no side effects.
            unsafe { std::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nostack, nomem, preserves_flags)) };
            Some(tp)
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        None
    }

    fn thread_index() -> usize {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local!(static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed));
        INDEX.with(|i| *i)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn current_cpu_is_a_possible_cpu() {
        let n = possible_cpus();
        assert!(n >= 1);
        for _ in 0..100 {
            assert!(current_cpu() < n, "cpu {} >= possible {}", current_cpu(), n);
        }
    }

    #[test]
    fn rseq_agrees_with_sched_getcpu_when_pinned() {
        // Pin to one CPU so both sources must agree.
        // SAFETY: plain libc calls on a zeroed cpu_set_t we own.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) != 0 {
                return;
            }
            let first = (0..libc::CPU_SETSIZE as usize).find(|&c| libc::CPU_ISSET(c, &set)).unwrap();
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(first, &mut one);
            let pinned = std::thread::spawn(move || {
                libc::sched_setaffinity(0, std::mem::size_of_val(&one), &one);
                (current_cpu(), libc::sched_getcpu())
            })
            .join()
            .unwrap();
            assert_eq!(pinned.0 as i32, pinned.1);
            assert_eq!(pinned.0, first);
        }
    }
}
