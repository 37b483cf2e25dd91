//! The workloads `vfscale bench` runs. A workload is a name, its variants,
//! and a constructor that builds the variant's [`Subject`] once per cell;
//! variants are distinct types behind that trait, chosen at construction.
//! Every workload also has the variant [`PRIVATE`], built here for all of
//! them alike: its first variant with nothing shared between threads.

mod busy;
mod dirs;
mod file_overwrite;
mod inode_exit;
mod kernfs;
pub(crate) mod locks;
mod prim_list;
mod prim_lockref;
mod prim_mprotect;
mod prim_read;
mod private;
mod proc_ps;
mod seed_mount;
pub(crate) mod walk;

pub use private::PRIVATE;

/// The thing being measured, shared by all threads of a run.
pub trait Subject: Sync {
    /// Called before each run (warm-up included) with the run's thread count.
    fn prepare_run(&self, _threads: usize) {}
    /// Called on thread number `thread` of a run, after
    /// [`prepare_run`](Self::prepare_run) and before the run's clock
    /// starts: work the thread's operations need done first (the files a
    /// thread will unlink), untimed.
    fn prepare_thread(&self, _thread: usize, _iterations: u64) {}
    /// Does `iterations` operations as thread number `thread` of the run.
    fn run_thread(&self, thread: usize, iterations: u64);
}

/// Knobs some workloads take; each workload says which it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Microseconds of busy work while holding the lock (`prim-mprotect`).
    pub hold_us: u64,
    /// Microseconds of busy work after releasing it (`prim-mprotect`).
    pub work_us: u64,
}

impl Default for Params {
    fn default() -> Self {
        Self { hold_us: 1, work_us: 1 }
    }
}

/// A benchmark workload and its selectable variants.
#[derive(Debug)]
pub struct Workload {
    /// Name on the command line.
    pub name: &'static str,
    /// One line on what each operation does.
    pub about: &'static str,
    /// The workload's own designs, ours first, then the "before" design,
    /// then peers; [`Workload::all_variants`] adds [`PRIVATE`].
    pub variants: &'static [&'static str],
    /// Iterations per thread when `--iterations` is not given.
    pub default_iterations: fn(&Params) -> u64,
    /// Whether `--hold-us` / `--work-us` mean anything to this workload.
    pub takes_hold: bool,
    /// Builds the subject of one variant (a name from `variants`).
    pub build: fn(variant: &str, params: &Params) -> Box<dyn Subject>,
}

impl Workload {
    /// Every variant a run may name: the designs, then [`PRIVATE`].
    pub fn all_variants(&self) -> Vec<&'static str> {
        self.variants.iter().copied().chain([PRIVATE]).collect()
    }

    /// Builds the subject of `variant`, one of [`Workload::all_variants`],
    /// for runs of up to `max_threads` threads (`private` builds an
    /// instance per thread).
    pub fn subject(&self, variant: &str, params: &Params, max_threads: usize) -> Box<dyn Subject> {
        if variant == PRIVATE {
            Box::new(private::Private::new(self, params, max_threads))
        } else {
            (self.build)(variant, params)
        }
    }
}

/// All workloads, in the order `bench --list` shows them.
pub fn all() -> &'static [Workload] {
    static ALL: [Workload; 22] = [
        prim_list::WORKLOAD,
        prim_read::WORKLOAD,
        prim_mprotect::WORKLOAD,
        prim_lockref::WORKLOAD,
        walk::WALK,
        walk::WALK_MISSING,
        inode_exit::WORKLOAD,
        dirs::CREATE,
        dirs::UNLINK,
        file_overwrite::WORKLOAD,
        kernfs::FILES,
        kernfs::MISSING,
        proc_ps::WORKLOAD,
        locks::FLOCK01,
        locks::FLOCK02,
        locks::POSIX01,
        locks::POSIX02,
        locks::POSIX03,
        locks::POSIX04,
        locks::POSIX05,
        locks::LEASE01,
        locks::LEASE02,
    ];
    &ALL
}

/// The workload called `name`.
pub fn find(name: &str) -> Option<&'static Workload> {
    all().iter().find(|w| w.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{run_cell, RunPlan};

    #[test]
    fn names_and_variants_are_unique() {
        let mut names: Vec<_> = all().iter().map(|w| w.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all().len());
        for w in all() {
            let mut v = w.all_variants();
            v.sort();
            v.dedup();
            assert_eq!(v.len(), w.variants.len() + 1, "{}: no design may be called {PRIVATE}", w.name);
            assert_eq!(w.all_variants().last(), Some(&PRIVATE), "{}", w.name);
        }
    }

    #[test]
    fn every_variant_of_every_workload_runs() {
        let params = Params { hold_us: 1, work_us: 1 };
        for w in all() {
            // A thousandth of the workload's own default, so an op as heavy
            // as a whole `ps` run (900 opens) runs a few times, not 200.
            let iterations = ((w.default_iterations)(&params) / 1000).clamp(2, 200);
            for variant in w.all_variants() {
                let subject = w.subject(variant, &params, 3);
                let runs = run_cell(subject.as_ref(), 3, RunPlan::new(1, iterations));
                assert_eq!(runs.elapsed.len(), 1, "{} {}", w.name, variant);
            }
        }
    }
}
