//! `vfscale commute`: the Scalable Commutativity Rule (Clements et al.,
//! SOSP 2013; `docs/commutativity.md`) applied to vfscale. For each pair of
//! operations that commute under POSIX ([`pairs`]), it asks the conflict
//! checker (`conflict::check_pair`, on the audited build of vfscale)
//! whether vfscale runs them conflict-free, and measures, in the same run,
//! how the pair scales on two threads on vfscale (the plain build, as
//! `bench` measures it), on its `private` ceiling and on the host kernel
//! ([`measure`]).
//!
//! The checker sees only what the audit sees: vfscale's audited atomics,
//! locks, epoch pointers and counted `Arc`s. A verdict of conflict-free is
//! therefore a claim the timing can refute: a conflict-free pair should
//! scale like `private` does.

pub mod against;
mod audited;
mod expected;
pub mod generate;
mod host_sys;
mod measure;
mod outcome;
pub mod pairs;
mod plain;
mod report;
mod sys;
mod world;

pub use expected::KNOWN_CONFLICTS;
pub use measure::Plan;
pub use outcome::{table, Commute};
pub use report::write as write_report;

use audited_sync::conflict::{self, Verdict};
use outcome::{Conditions, PairResult, Summary};
use pairs::Pair;

/// The checker's verdict on `pair`, on a fresh state of the audited build.
pub fn check(pair: &Pair) -> Result<Verdict, String> {
    audited::release_barrier();
    let ops = (pair.build)(&audited::world(pair.fs)?, conflict::INSTANCES)?;
    conflict::check_pair(&*ops.a, &*ops.b).map_err(|e| format!("{}: {e}", pair.name))
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Pair names to run (all when empty).
    pub filter: Vec<String>,
    /// Measure S2 (otherwise only the checker runs).
    pub timed: bool,
    /// Runs per cell and operations per thread per run.
    pub plan: measure::Plan,
    /// `--quick` was given.
    pub quick: bool,
    /// Also run the generated matrix (`--generate`; checker only).
    pub generate: bool,
    /// An earlier run to judge scaling together with (`--against`).
    pub against: Option<against::Previous>,
}

/// The pairs `filter` names (all when empty); an unknown name is an error
/// that lists the known ones.
pub fn select(filter: &[String]) -> Result<Vec<&'static Pair>, String> {
    let all = pairs::all();
    if filter.is_empty() {
        return Ok(all);
    }
    filter
        .iter()
        .map(|name| {
            all.iter().copied().find(|p| p.name == name).ok_or_else(|| {
                let known: Vec<_> = all.iter().map(|p| p.name).collect();
                format!("no pair '{name}' (there are: {})", known.join(", "))
            })
        })
        .collect()
}

/// The 1, 5 and 15 minute load averages (zeros if unknown).
pub fn load_average() -> [f64; 3] {
    let mut load = [0.0; 3];
    // SAFETY: getloadavg writes at most 3 doubles into the array we own.
    unsafe { libc::getloadavg(load.as_mut_ptr(), 3) };
    load
}

/// Runs the checker and, if `options.timed`, the measurement on every
/// selected pair; `progress(index, pair, step)` is called before each
/// step of the `index`-th pair.
pub fn run(options: &Options, mut progress: impl FnMut(usize, &str, &str)) -> Result<Commute, String> {
    let load_average = load_average();
    let mut results = Vec::new();
    for (index, pair) in select(&options.filter)?.into_iter().enumerate() {
        progress(index, pair.name, "checker");
        let verdict = check(pair)?;
        let measured = if options.timed {
            let plan = options.plan;
            let step = |_, run| {
                let step = if run <= plan.runs {
                    format!("run {run} of {}", plan.runs)
                } else {
                    format!("run {run}, more rounds (up to {})", plan.max_runs)
                };
                progress(index, pair.name, &step)
            };
            Some(measure::measure(pair, options.plan, step)?)
        } else {
            None
        };
        results.push(PairResult::new(pair, &verdict, measured));
    }
    let conditions = Conditions {
        timed: options.timed,
        runs: options.plan.runs,
        max_runs: options.plan.max_runs,
        iterations: options.plan.iterations,
        run_ms: options.plan.run_time.as_secs_f64() * 1e3,
        quick: options.quick,
        load_average,
    };
    let against = options.against.as_ref().map(|previous| previous.apply(&mut results));
    let mut summary = Summary::of(&results, KNOWN_CONFLICTS, conditions);
    summary.against = against;
    let generated = if options.generate {
        let cases = generate::cases();
        let mut done = Vec::with_capacity(cases.len());
        for (index, case) in cases.iter().enumerate() {
            progress(results.len() + index, "generated", &case.to_string());
            done.push(generate::run_case(case)?);
        }
        let generated = generate::Generated::of(&done);
        summary.add_generated(&generated);
        Some(generated)
    } else {
        None
    };
    Ok(Commute { pairs: results, summary, generated })
}

#[cfg(test)]
mod tests;
