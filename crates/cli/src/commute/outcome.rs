//! What `vfscale commute` reports: one result per pair, the summary with
//! the goals, the table text, and the JSON (`{pairs, summary}`).

use super::measure::{Measured, Scaling};
use super::pairs::Pair;
use crate::machine::Machine;
use crate::stats::Judgement;
use audited_sync::conflict::Verdict;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One pair's verdict and figures.
#[derive(Debug, Clone, Serialize)]
pub struct PairResult {
    /// The pair's name.
    pub name: &'static str,
    /// The two operations.
    pub ops: [&'static str; 2],
    /// Why they commute.
    pub commutes_because: &'static str,
    /// The checker's verdict.
    pub conflict_free: bool,
    /// Every site that touched a conflicting line, sorted.
    pub conflicting_sites: Vec<String>,
    /// S2 of one shared vfscale state (null when not timed).
    pub vfscale: Option<Scaling>,
    /// S2 of one state per thread, the ceiling (null when not timed).
    pub private: Option<Scaling>,
    /// S2 on the host kernel (null when not timed or the host could not
    /// run it; the summary's `host_skipped` says why).
    pub host: Option<Scaling>,
    /// Each conflicting line's sites, for the table and the report.
    #[serde(skip)]
    pub conflicts: Vec<Vec<String>>,
    /// Why the host did not run the pair.
    #[serde(skip)]
    pub host_skipped: Option<String>,
}

impl PairResult {
    /// The result of `pair` from its verdict and, when timed, its figures.
    pub fn new(pair: &Pair, verdict: &Verdict, measured: Option<Measured>) -> PairResult {
        let conflicts: Vec<Vec<String>> = verdict.conflicts.iter().map(|c| c.sites.clone()).collect();
        let mut sites: Vec<String> = conflicts.iter().flatten().cloned().collect();
        sites.sort();
        sites.dedup();
        let (vfscale, private, host, host_skipped) = match measured {
            Some(m) => {
                let (host, skipped) = match m.host {
                    Ok(host) => (Some(host), None),
                    Err(why) => (None, Some(why)),
                };
                (Some(m.vfscale), Some(m.private), host, skipped)
            }
            None => (None, None, None, None),
        };
        PairResult {
            name: pair.name,
            ops: pair.ops,
            commutes_because: pair.commutes_because,
            conflict_free: verdict.conflict_free(),
            conflicting_sites: sites,
            vfscale,
            private,
            host,
            conflicts,
            host_skipped,
        }
    }

    fn vfscale_is(&self, judgement: Judgement) -> bool {
        self.vfscale.as_ref().and_then(|s| s.judgement) == Some(judgement)
    }

    fn host_is(&self, judgement: Judgement) -> bool {
        self.host.as_ref().and_then(|s| s.judgement) == Some(judgement)
    }
}

/// One of the goals and whether this run met it.
#[derive(Debug, Clone, Serialize)]
pub struct Goal {
    /// The goal, in the words.
    pub goal: &'static str,
    /// Met, not met, or inconclusive: met only if it holds however the
    /// pairs whose scaling was inconclusive turn out, not met only if it
    /// fails however they do.
    pub judgement: Judgement,
    /// `judgement` is `met`.
    pub met: bool,
    /// The figures it was judged on.
    pub detail: String,
}

/// The run's totals, goals and conditions.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// "vfscale conflict-free on X of N, scales on Y of N; host scales on
    /// Z of N" (the second half only when timed).
    pub line: String,
    /// Pairs run.
    pub pairs: usize,
    /// Pairs the checker found conflict-free.
    pub conflict_free: usize,
    /// Pairs whose vfscale S2 reached 0.9 times private's, the whole
    /// interval (null when not timed).
    pub vfscale_scales: Option<usize>,
    /// Pairs whose host S2 reached 0.9 times private's, the whole interval
    /// (null when not timed).
    pub host_scales: Option<usize>,
    /// Conflict-free pairs that did not scale, the whole interval below
    /// 0.85 (0.9 less the drift margin): where the checker's promise failed
    /// in this run.
    pub checker_exceptions: Vec<&'static str>,
    /// Pairs whose vfscale scaling the run could not decide (the interval
    /// reaches from below 0.9 to 0.85 or above): neither scaling nor
    /// exceptions.
    pub inconclusive: Vec<&'static str>,
    /// The known conflicts among the pairs run, with their reasons.
    pub known_conflicts: BTreeMap<&'static str, &'static str>,
    /// Pairs the host did not run, and why.
    pub host_skipped: BTreeMap<&'static str, String>,
    /// The generated matrix's totals (`--generate`; absent without it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generated: Option<super::generate::Totals>,
    /// The earlier run this one was judged together with (`--against`;
    /// absent without it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub against: Option<super::against::Against>,
    /// The goals.
    pub goals: Vec<Goal>,
    /// How the run was made.
    #[serde(flatten)]
    pub conditions: Conditions,
    /// Where it ran.
    pub machine: Machine,
}

/// How the run was made.
#[derive(Debug, Clone, Serialize)]
pub struct Conditions {
    /// Whether S2 was measured.
    pub timed: bool,
    /// Measured runs per cell of a pair the first look decides.
    pub runs: usize,
    /// Runs per cell a pair left inconclusive could go on to.
    pub max_runs: usize,
    /// Operations per thread per run, when fixed by `--iterations` (each
    /// cell's own count is in its figures).
    pub iterations: Option<u64>,
    /// Otherwise: what a 1-thread run was calibrated to take, in ms.
    pub run_ms: f64,
    /// Whether `--quick` shortened the run.
    pub quick: bool,
    /// The 1, 5 and 15 minute load averages when the run began: timings
    /// are trustworthy only on a quiet machine.
    pub load_average: [f64; 3],
}

impl Summary {
    /// Totals and goals of `results`; `known` lists the known conflicts.
    pub fn of(results: &[PairResult], known: Notes, conditions: Conditions) -> Summary {
        let n = results.len();
        let conflict_free = results.iter().filter(|r| r.conflict_free).count();
        let timed = conditions.timed;
        let count = |is: &dyn Fn(&PairResult) -> bool| results.iter().filter(|r| is(r)).count();
        let vfscale_scales = timed.then(|| count(&|r| r.vfscale_is(Judgement::Met)));
        let host_scales = timed.then(|| count(&|r| r.host_is(Judgement::Met)));
        let names = |is: &dyn Fn(&PairResult) -> bool| -> Vec<&'static str> {
            results.iter().filter(|r| timed && is(r)).map(|r| r.name).collect()
        };
        let checker_exceptions =
            names(&|r| r.conflict_free && !r.vfscale_is(Judgement::Met) && !r.vfscale_is(Judgement::Inconclusive));
        let inconclusive = names(&|r| r.vfscale_is(Judgement::Inconclusive));
        let mut line = format!("vfscale conflict-free on {conflict_free} of {n}");
        if let (Some(y), Some(z)) = (vfscale_scales, host_scales) {
            let _ = write!(line, ", scales on {y} of {n}; host scales on {z} of {n}");
            if !inconclusive.is_empty() {
                let _ = write!(line, "; vfscale inconclusive on {}", inconclusive.len());
            }
        }
        let percent = |x: usize| if n == 0 { 0.0 } else { 100.0 * x as f64 / n as f64 };
        let mut goals = vec![Goal::decided(
            "at least 30 pairs, vfscale conflict-free on at least 90% of them",
            n >= 30 && conflict_free * 10 >= n * 9,
            format!("{n} pairs, {conflict_free} conflict-free ({:.0}%)", percent(conflict_free)),
        )];
        if let (Some(y), Some(z)) = (vfscale_scales, host_scales) {
            let open = inconclusive.iter().filter(|name| results.iter().any(|r| r.name == **name && r.conflict_free));
            let open = open.count();
            let lies = |exceptions: usize| exceptions * 20 > conflict_free;
            let list =
                |names: &[&str]| if names.is_empty() { String::new() } else { format!(": {}", names.join(", ")) };
            goals.push(Goal::between(
                "the checker does not lie: conflict-free pairs scale, at most 1 exception in 20",
                !lies(checker_exceptions.len() + open),
                lies(checker_exceptions.len()),
                format!(
                    "{} of {conflict_free} conflict-free pairs below 0.85 x private{}; {open} inconclusive",
                    checker_exceptions.len(),
                    list(&checker_exceptions)
                ),
            ));
            let host_open = count(&|r| r.host_is(Judgement::Inconclusive));
            let ours_open = count(&|r| r.vfscale_is(Judgement::Inconclusive));
            goals.push(Goal::between(
                "in the same run, vfscale scales on more pairs than the host kernel",
                y > z + host_open,
                y + ours_open <= z,
                format!("vfscale {y}, host {z} of {n}; inconclusive: vfscale {ours_open}, host {host_open}"),
            ));
        }
        Summary {
            line,
            pairs: n,
            conflict_free,
            vfscale_scales,
            host_scales,
            checker_exceptions,
            inconclusive,
            known_conflicts: among(results, known),
            host_skipped: results.iter().filter_map(|r| Some((r.name, r.host_skipped.clone()?))).collect(),
            generated: None,
            against: None,
            goals,
            conditions,
            machine: Machine::this(),
        }
    }
}

impl Summary {
    /// Records the generated matrix's totals and judges its goal.
    pub fn add_generated(&mut self, generated: &super::generate::Generated) {
        let t = generated.totals;
        self.generated = Some(t);
        let (judged, judged_free) = t.judged();
        self.goals.push(Goal::decided(
            "at least 500 generated commutative cases, vfscale conflict-free on at least 99% of them (the exempt \
             left out)",
            judged >= 500 && judged_free * 100 >= judged * 99,
            format!(
                "{} commutative of {} generated, {} exempt; {judged_free} of the other {judged} conflict-free",
                t.commutative, t.cases, t.exempt
            ),
        ));
    }
}

impl Goal {
    /// A goal the data decide either way.
    fn decided(goal: &'static str, met: bool, detail: String) -> Goal {
        Goal::between(goal, met, !met, detail)
    }

    /// A goal that is `met` when it holds even at the worst for it,
    /// `not met` when it fails even at the best, else inconclusive.
    fn between(goal: &'static str, holds_at_worst: bool, fails_at_best: bool, detail: String) -> Goal {
        let judgement = match (holds_at_worst, fails_at_best) {
            (true, _) => Judgement::Met,
            (false, true) => Judgement::NotMet,
            (false, false) => Judgement::Inconclusive,
        };
        Goal { goal, judgement, met: judgement == Judgement::Met, detail }
    }
}

impl Summary {
    /// For a conflicting pair, why its conflict is known.
    pub fn note(&self, r: &PairResult) -> Option<&'static str> {
        if r.conflict_free {
            return None;
        }
        self.known_conflicts.get(r.name).copied()
    }
}

/// Pair names with a reason each.
pub type Notes = &'static [(&'static str, &'static str)];

/// The entries of `notes` that name a pair of `results`.
fn among(results: &[PairResult], notes: &[(&'static str, &'static str)]) -> BTreeMap<&'static str, &'static str> {
    notes.iter().filter(|(name, _)| results.iter().any(|r| r.name == *name)).copied().collect()
}

/// The whole run, as the JSON file holds it.
#[derive(Debug, Clone, Serialize)]
pub struct Commute {
    /// One result per pair, in table order.
    pub pairs: Vec<PairResult>,
    /// Totals and goals.
    pub summary: Summary,
    /// The generated matrix (`--generate`; absent without it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generated: Option<super::generate::Generated>,
}

/// An S2 figure for the table, `*` marking one that does not scale and
/// `?` one the run could not decide.
fn s2_cell(s: Option<&Scaling>) -> String {
    match s {
        None => "-".to_string(),
        Some(s) => format!("{:.2}{}", s.s2, s.judgement.map_or("", mark)),
    }
}

/// `more rounds: NAME vfscale 50 (met), host 100 (inconclusive)`, for a
/// pair whose vfscale or host side ran more than its first `runs` rounds.
fn more_rounds(r: &PairResult, runs: usize) -> Option<String> {
    let sides = [("vfscale", r.vfscale.as_ref()), ("host", r.host.as_ref())];
    let more: Vec<String> = sides
        .iter()
        .filter_map(|(side, s)| {
            let s = s.filter(|s| s.rounds() > runs)?;
            // This run's own verdict, not one an earlier run's (`--against`) changed.
            let judgement = s.alone.or(s.judgement).map_or("-".to_string(), |j| j.to_string());
            Some(format!("{side} {} ({judgement})", s.rounds()))
        })
        .collect();
    (!more.is_empty()).then(|| format!("more rounds: {} {}", r.name, more.join(", ")))
}

fn mark(judgement: Judgement) -> &'static str {
    match judgement {
        Judgement::Met => "",
        Judgement::NotMet => "*",
        Judgement::Inconclusive => "?",
    }
}

/// One line per pair (conflicting sites indented below it), then the
/// summary and the goals.
pub fn table(run: &Commute) -> String {
    let width = run.pairs.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
    let mut out = format!(
        "{:<width$}  {:<13} {:>8} {:>8} {:>8} {:>8}\n",
        "pair", "checker", "vfscale", "rounds", "private", "host"
    );
    for r in &run.pairs {
        let verdict =
            if r.conflict_free { "conflict-free".to_string() } else { format!("{} lines", r.conflicts.len()) };
        let _ = writeln!(
            out,
            "{:<width$}  {verdict:<13} {:>8} {:>8} {:>8} {:>8}",
            r.name,
            s2_cell(r.vfscale.as_ref()),
            r.vfscale.as_ref().and_then(|s| s.vs_private).map_or("-".to_string(), |v| format!("{v:.2}")),
            s2_cell(r.private.as_ref()),
            s2_cell(r.host.as_ref())
        );
        if let Some(reason) = run.summary.note(r) {
            let _ = writeln!(out, "{:width$}    known: {reason}", "");
        }
        for sites in &r.conflicts {
            let _ = writeln!(out, "{:width$}    line: {}", "", sites.join(", "));
        }
    }
    let s = &run.summary;
    if s.conditions.timed {
        out.push_str(
            "S2 = 2-thread / 1-thread throughput (medians); rounds = the median over rounds of vfscale's 2-thread \
             throughput over private's (its S2 over private's, round by round); * = below 0.85 x private's S2 \
             (vfscale: rounds below 0.85), ? = inconclusive (the interval reaches below 0.9, not wholly below 0.85), each judged on its \
             whole 95% interval (99% after more rounds); 0.05 below the bar is left for the drift between runs\n",
        );
        if s.conditions.max_runs > s.conditions.runs {
            let _ = writeln!(
                out,
                "a pair left inconclusive by its first {} rounds runs {} more at a time, up to {}, each later look \
                 judged on the 99% interval of all its rounds",
                s.conditions.runs, s.conditions.runs, s.conditions.max_runs
            );
        }
        for line in run.pairs.iter().filter_map(|r| more_rounds(r, s.conditions.runs)) {
            let _ = writeln!(out, "{line}");
        }
    }
    for (name, why) in &s.host_skipped {
        let _ = writeln!(out, "host skipped {name}: {why}");
    }
    if let Some(against) = &s.against {
        let _ = writeln!(out, "{}", against.line());
    }
    let _ = writeln!(out, "{}", s.line);
    if let Some(generated) = &run.generated {
        out.push_str(&generated.text());
    }
    for g in &s.goals {
        let _ = writeln!(out, "goal {}: {} ({})", g.judgement, g.goal, g.detail);
    }
    out
}
