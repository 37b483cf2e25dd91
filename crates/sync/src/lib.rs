//! # vfscale-sync
//!
//! The Linux kernel's scalable locking primitives behind the VFS, in
//! userspace Rust: the pieces that five LKML threads (kernfs rwsem, dlock
//! lists, rwsem spinning, /proc RCU revalidation, file-lock lists) used to
//! stop the VFS from serializing.
//!
//! | primitive | kernel original | module |
//! |---|---|---|
//! | [`SeqCount`], [`SeqLock`] | `seqcount_t`, `seqlock_t` | [`seqcount`] |
//! | [`LockRef`] | `struct lockref` (`lib/lockref.c`) | [`lockref`] |
//! | [`spin::TasLock`], [`spin::TicketLock`], [`spin::McsLock`] | `arch_spinlock_t`, qspinlock | [`spin`] |
//! | [`audit`] traces, [`audited`] atomics and locks, `conflict::check_pair` | sv6's conflict-free check, COMMUTER | [`audit`] |
//! | [`PerCpuList`], [`GlobalList`] | `lib/dlock-list.c`, `s_inode_list_lock` | [`dlock_list`] |
//! | [`LgLock`] | `lglock` (3.13-4.8) | [`lglock`] |
//! | [`PercpuRef`] | `percpu_ref`, `mnt_count` | [`percpu_ref`] |
//! | [`seq_gate`] | `__legitimize_mnt` against `do_umount` | [`seq_gate`] |
//! | [`PercpuCounter`] | `percpu_counter` | [`percpu_counter`] |
//! | [`PerCpuRwSem`] | `percpu_rw_semaphore` | [`percpu_rwsem`] |
//! | [`RwSem`] with [`SpinPolicy`] | `rw_semaphore` + OSQ spinning | [`rwsem`] |
//! | [`Srcu`] | `srcu_struct` (classic two-phase SRCU) | [`srcu`] |
//! | [`srcu_slot::SrcuSlot`] | `rcu_assign_pointer` into an fd table, with a grace period only for a value a reader borrowed, and only for the CPUs it was borrowed on | [`srcu_slot`] |
//!
//! Every primitive is model-checked with loom: build with
//! `RUSTFLAGS="--cfg loom"` and run `cargo test -p vfscale-sync --release --lib`
//! (`docs/testing.md` in the repository: the models and the mutations they
//! catch). `docs/design.md` maps each primitive to the seed mechanism and
//! the VFS module that uses it, and `docs/commutativity.md` describes the
//! cache-line audit.

#![warn(missing_docs, missing_debug_implementations)]

mod percpu_alloc;
mod shim;

pub mod audit;
#[cfg(not(loom))]
pub mod audited;
#[cfg(all(feature = "audit", not(loom)))]
pub mod conflict;
pub mod cpu;
pub mod dlock_list;
pub mod futex;
pub mod lglock;
pub mod lockref;
pub mod pad;
pub mod percpu_changes;
pub mod percpu_counter;
pub mod percpu_ref;
pub mod percpu_rwsem;
pub mod poison;
pub mod rwsem;
pub mod seq_gate;
pub mod seqcount;
pub mod spin;
pub mod srcu;
pub mod srcu_slot;
#[cfg(all(any(test, feature = "audit"), not(loom)))]
pub mod test_support;

pub use dlock_list::{ConcurrentList, GlobalList, ListHandle, PerCpuList};
pub use lglock::{LgLock, LgPerCpu};
pub use lockref::LockRef;
pub use percpu_changes::PercpuChanges;
pub use percpu_counter::PercpuCounter;
pub use percpu_ref::PercpuRef;
pub use percpu_rwsem::PerCpuRwSem;
pub use rwsem::{RwSem, SpinPolicy};
pub use seqcount::{SeqCount, SeqLock};
pub use srcu::Srcu;
