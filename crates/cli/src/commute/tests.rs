//! The checker's verdict on every pair, and the summary's arithmetic.

use super::*;
use crate::stats::{Judgement, Look};
use measure::{Plan, Scaling, SCALES};
use outcome::{Conditions, PairResult, Summary};

#[test]
fn commutative_pairs_are_conflict_free() {
    let all = pairs::all();
    for (i, (name, _)) in KNOWN_CONFLICTS.iter().enumerate() {
        assert!(all.iter().any(|p| p.name == *name), "'{name}' is listed but names no pair");
        assert!(!KNOWN_CONFLICTS[..i].iter().any(|k| k.0 == *name), "'{name}' listed twice");
    }
    let mut wrong = Vec::new();
    for pair in all {
        let verdict = check(pair).unwrap_or_else(|e| panic!("{e}"));
        let lines: Vec<String> = verdict.conflicts.iter().map(|c| c.sites.join(", ")).collect();
        let known = KNOWN_CONFLICTS.iter().find(|(name, _)| *name == pair.name);
        match (verdict.conflict_free(), known) {
            (true, Some((_, reason))) => {
                wrong.push(format!("{}: known to conflict ({reason}) but conflict-free now: remove it", pair.name))
            }
            (false, None) => {
                wrong.push(format!("{}: conflicts on {} lines:\n  {}", pair.name, lines.len(), lines.join("\n  ")));
            }
            _ => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    generated_cases_conflict_only_through_known_mechanisms();
}

/// The generated matrix: every case runs (vfscale gives each call the
/// host's result), every conflicting site falls under a known mechanism,
/// and every known mechanism still explains a conflict.
fn generated_cases_conflict_only_through_known_mechanisms() {
    if let Some(note) = &crate::host::ScratchDir::new("commute-gen-test", None).expect("a scratch directory").note {
        eprintln!("generated cases skipped: {note}");
        return;
    }
    let results: Vec<_> =
        generate::cases().iter().map(|case| generate::run_case(case).unwrap_or_else(|e| panic!("{e}"))).collect();
    let generated = generate::Generated::of(&results);
    eprint!("{}", generated.text());
    assert!(generated.totals.commutative >= 500, "{} commutative cases", generated.totals.commutative);
    let unexplained: Vec<String> = generated
        .conflicting
        .iter()
        .filter(|c| !c.unexplained.is_empty())
        .map(|c| format!("{}: {}", c.case, c.unexplained.join(", ")))
        .collect();
    assert!(unexplained.is_empty(), "conflicts no known mechanism explains:\n{}", unexplained.join("\n"));
    for (name, ..) in generate::KNOWN_MECHANISMS {
        assert!(
            generated.conflicting.iter().any(|c| c.mechanisms.contains(name)),
            "{name} explains no conflict any more: remove it"
        );
    }
}

/// A result with the given verdict and S2 figures (vfscale, private, host).
fn result(name: &'static str, conflict_free: bool, s2: Option<(f64, f64, Option<f64>)>) -> PairResult {
    use audited_sync::audit::{Conflict, Trace};
    let pair = pairs::all().into_iter().find(|p| p.name == name).expect("a pair of the table");
    let conflicts = if conflict_free {
        Vec::new()
    } else {
        vec![Conflict {
            line: 7,
            sites: vec!["crates/vfs/src/x.rs:1 (write)".into(), "crates/vfs/src/y.rs:2 (read)".into()],
        }]
    };
    let verdict = Verdict { conflicts, a: Trace::default(), b: Trace::default() };
    let scaling = |s2: f64| measure::Scaling {
        s2,
        judgement: None,
        scales: None,
        vs_private: None,
        alone: None,
        ci95: None,
        ci99: None,
        iterations: 100,
        ops_per_sec_1: 1e6,
        ops_per_sec_2: s2 * 1e6,
        runs_1: vec![1e6],
        runs_2: vec![s2 * 1e6],
    };
    let measured = s2.map(|(vfscale, private, host)| {
        let private = scaling(private);
        measure::Measured {
            vfscale: scaling(vfscale).judged_by_round(&private, Look::First),
            host: host.map(|h| scaling(h).judged(&private, Look::First)).ok_or_else(|| "no sysfs here".to_string()),
            private,
        }
    });
    PairResult::new(pair, &verdict, measured)
}

/// The machine slowed down in the last rounds, in both cells: the medians
/// put vfscale's 2-thread runs below private's, round by round it matches.
#[test]
fn vfscale_is_judged_against_private_round_by_round() {
    let cell = |runs_1: Vec<f64>, runs_2: Vec<f64>| measure::Scaling {
        s2: crate::stats::median(&runs_2).unwrap() / crate::stats::median(&runs_1).unwrap(),
        judgement: None,
        scales: None,
        vs_private: None,
        alone: None,
        ci95: None,
        ci99: None,
        iterations: 100,
        ops_per_sec_1: 0.0,
        ops_per_sec_2: 0.0,
        runs_1,
        runs_2,
    };
    let one = vec![7.0, 7.9, 7.9, 7.3, 7.5, 6.6, 6.6, 6.6, 6.6];
    let private = cell(one.clone(), vec![13.6, 14.0, 13.9, 13.8, 13.9, 9.8, 9.8, 9.8, 9.8]);
    let drifted = cell(one.clone(), vec![15.7, 15.3, 15.0, 15.1, 9.9, 9.8, 9.8, 9.8, 9.8]);
    assert!(drifted.s2 < 0.9 * private.s2, "the ratio of medians says it does not scale");
    let judged = drifted.judged_by_round(&private, Look::First);
    assert_eq!((judged.judgement, judged.scales), (Some(Judgement::Met), Some(true)));
    assert!((judged.vs_private.unwrap() - 1.0).abs() < 1e-9, "{:?}", judged.vs_private);
    let slower =
        cell(one, vec![10.0, 10.5, 10.4, 10.2, 7.0, 7.1, 7.0, 7.0, 7.0]).judged_by_round(&private, Look::First);
    assert_eq!(slower.judgement, Some(Judgement::NotMet), "0.5-0.75 of private in every round");
}

/// Rounds on both sides of 0.9 leave a pair undecided: it is neither
/// scaling nor an exception to the checker, and a goal it could tip is
/// inconclusive.
#[test]
fn a_pair_whose_rounds_straddle_the_bar_is_inconclusive() {
    let mut straddling = result("stat-diff-files", true, Some((1.8, 2.0, Some(1.9))));
    let vfscale = straddling.vfscale.take().unwrap();
    let private = straddling.private.clone().unwrap();
    let rounds = Scaling { runs_1: vec![1e6; 6], runs_2: vec![1.6e6, 2.0e6, 1.7e6, 1.9e6, 1.75e6, 1.95e6], ..vfscale };
    let private = Scaling { runs_1: vec![1e6; 6], runs_2: vec![2e6; 6], ..private };
    straddling.vfscale = Some(rounds.judged_by_round(&private, Look::First));
    assert_eq!(straddling.vfscale.as_ref().unwrap().judgement, Some(Judgement::Inconclusive));
    let mut results = vec![straddling];
    results.extend((0..19).map(|_| result("stat-same-file", true, Some((1.9, 2.0, Some(1.0))))));
    let s = Summary::of(&results, KNOWN_CONFLICTS, conditions(true));
    assert!(s.checker_exceptions.is_empty() && s.inconclusive == ["stat-diff-files"], "{s:?}");
    assert!(s.line.ends_with("; vfscale inconclusive on 1"), "{}", s.line);
    assert_eq!(s.goals[1].judgement, Judgement::Met, "one open pair in 20 cannot make the checker a liar");
    let table = table(&Commute { pairs: results, summary: s, generated: None });
    assert!(table.contains("?"), "{table}");
}

/// Rounds a little below 0.9 (0.80-0.89 of private): the interval
/// misses the bar, but by less than the drift another run could show, so
/// the pair is undecided, not a checker exception. Well below, it is one.
#[test]
fn a_pair_just_below_the_bar_is_inconclusive_not_an_exception() {
    let mut near = result("stat-diff-files", true, Some((1.7, 2.0, Some(1.9))));
    let vfscale = near.vfscale.take().unwrap();
    let private = Scaling { runs_1: vec![1e6; 9], runs_2: vec![2e6; 9], ..near.private.clone().unwrap() };
    let rounds = |share: &[f64]| Scaling {
        runs_1: vec![1e6; 9],
        runs_2: share.iter().map(|s| s * 2e6).collect(),
        ..vfscale.clone()
    };
    let just_below =
        rounds(&[0.80, 0.84, 0.86, 0.88, 0.89, 0.87, 0.85, 0.83, 0.86]).judged_by_round(&private, Look::First);
    let [low, high] = just_below.ci95.unwrap();
    assert!((SCALES - measure::DRIFT..SCALES).contains(&high), "[{low}, {high}] misses 0.9 by less than the margin");
    assert_eq!(just_below.judgement, Some(Judgement::Inconclusive));
    near.vfscale = Some(just_below);
    let s = Summary::of(&[near.clone()], KNOWN_CONFLICTS, conditions(true));
    assert!(s.checker_exceptions.is_empty() && s.inconclusive == ["stat-diff-files"], "{s:?}");

    near.vfscale =
        Some(rounds(&[0.70, 0.74, 0.76, 0.78, 0.79, 0.77, 0.75, 0.73, 0.76]).judged_by_round(&private, Look::First));
    let s = Summary::of(&[near], KNOWN_CONFLICTS, conditions(true));
    assert_eq!(s.checker_exceptions, ["stat-diff-files"], "0.70-0.79 of private is below the margin too");
}

/// A pair the first look leaves inconclusive runs more rounds, `runs` at
/// a time up to `max_runs`; a decided one, or one at the cap, runs none.
/// A later look judges on the 99% interval: rounds whose 95% interval
/// clears 0.9 and whose 99% one does not are met at the first look and
/// inconclusive at a later one.
#[test]
fn an_undecided_pair_runs_more_rounds_judged_on_its_99_percent_interval() {
    let base = result("create-one-dir", true, Some((1.9, 2.0, None)));
    let rounds = |shares: &[f64]| Scaling {
        runs_1: vec![1e6; shares.len()],
        runs_2: shares.iter().map(|s| s * 2e6).collect(),
        ..base.vfscale.clone().unwrap()
    };
    let private = |n: usize| Scaling { runs_1: vec![1e6; n], runs_2: vec![2e6; n], ..base.private.clone().unwrap() };
    // 50 rounds spread evenly over 0.66-1.36 of private, median 1.01: the
    // 95% interval's low end comes to about 0.91, the 99% one's to 0.88.
    let spread: Vec<f64> = (0..50).map(|i| 0.66 + 0.70 * f64::from(i) / 49.0).collect();
    let first = rounds(&spread).judged_by_round(&private(50), Look::First);
    let later = rounds(&spread).judged_by_round(&private(50), Look::More);
    let (ci95, ci99) = (later.ci95.unwrap(), later.ci99.unwrap());
    assert!(ci95[0] >= SCALES && ci99[0] < SCALES, "the data straddle only at 99%: {ci95:?} {ci99:?}");
    assert_eq!((first.judgement, first.ci95, first.ci99), (Some(Judgement::Met), Some(ci95), None));
    assert_eq!(later.judgement, Some(Judgement::Inconclusive));

    let plan = Plan { runs: 25, max_runs: 100, iterations: None, run_time: std::time::Duration::from_millis(20) };
    let undecided = |n: usize| Scaling { judgement: Some(Judgement::Inconclusive), ..rounds(&spread[..n]) };
    assert_eq!(undecided(25).more_rounds_wanted(plan), Some(25));
    assert_eq!(undecided(50).more_rounds_wanted(Plan { max_runs: 60, ..plan }), Some(10), "what is left below the cap");
    assert_eq!(undecided(50).more_rounds_wanted(Plan { max_runs: 50, ..plan }), None, "at the cap");
    assert_eq!(undecided(25).more_rounds_wanted(Plan { max_runs: 25, ..plan }), None, "--max-runs equal to --runs");
    assert_eq!(first.more_rounds_wanted(plan), None, "decided");
    let not_met = Scaling { judgement: Some(Judgement::NotMet), ..rounds(&spread[..25]) };
    assert_eq!(not_met.more_rounds_wanted(plan), None, "decided");
}

/// The measuring loop runs more rounds of every cell while a judgement
/// wants them, each judged as a later look: a pair a third look decides
/// ran 75 rounds, judged first, more, more; one no look decides stops at
/// the cap.
#[test]
fn more_rounds_run_until_a_look_decides_or_the_cap() {
    use crate::harness::until_decided;
    struct Idle;
    impl crate::workloads::Subject for Idle {
        fn run_thread(&self, _thread: usize, _iterations: u64) {}
    }
    let plan = Plan { runs: 25, max_runs: 100, iterations: Some(1), run_time: std::time::Duration::from_millis(1) };
    let cells: [(&dyn crate::workloads::Subject, usize); 2] = [(&Idle, 1), (&Idle, 2)];
    let first_runs = || crate::harness::run_cells(&cells, crate::harness::RunPlan::new(plan.runs, 1), |_, _| {});
    let looks = std::cell::RefCell::new(Vec::new());
    let decided_at = |rounds: usize| {
        let looks = &looks;
        move |runs: &[crate::harness::CellRuns], look| {
            looks.borrow_mut().push(look);
            let s = Scaling::of(&runs[0], &runs[1]);
            let judgement = if s.rounds() >= rounds { Judgement::Met } else { Judgement::Inconclusive };
            Ok(Scaling { judgement: Some(judgement), ..s })
        }
    };
    let wanted = |plan: Plan| move |s: &Result<Scaling, String>| s.as_ref().ok()?.more_rounds_wanted(plan);
    let judged = until_decided(&cells, first_runs(), |_, _| {}, decided_at(75), wanted(plan)).unwrap();
    assert_eq!((judged.rounds(), judged.judgement), (75, Some(Judgement::Met)));
    assert_eq!(*looks.borrow(), [Look::First, Look::More, Look::More]);
    let capped = Plan { max_runs: 60, ..plan };
    let open = until_decided(&cells, first_runs(), |_, _| {}, decided_at(usize::MAX), wanted(capped));
    assert_eq!(open.map(|s| (s.rounds(), s.judgement)), Ok((60, Some(Judgement::Inconclusive))), "25 + 25 + 10");
}

/// The table names each pair that ran more rounds, with its count and
/// its verdict then, and says how far they go.
#[test]
fn the_table_names_the_pairs_that_ran_more_rounds() {
    let mut more = result("create-one-dir", true, Some((1.9, 2.0, None)));
    let vfscale = more.vfscale.take().unwrap();
    more.vfscale = Some(Scaling { runs_1: vec![1e6; 10], runs_2: vec![1.9e6; 10], ..vfscale });
    let results = vec![more, result("stat-diff-files", true, Some((1.9, 2.0, None)))];
    let summary = Summary::of(&results, KNOWN_CONFLICTS, conditions(true));
    let table = table(&Commute { pairs: results, summary, generated: None });
    assert!(table.contains("up to 20, each later look judged on the 99% interval"), "{table}");
    assert!(table.contains("\nmore rounds: create-one-dir vfscale 10 (met)\n"), "{table}");
    assert!(!table.contains("more rounds: stat-diff-files"), "{table}");
}

/// Judged against an earlier run, a pair whose verdict differed there is
/// inconclusive here (its figures stay this run's); one whose verdict
/// agreed keeps it; one the earlier run lacks is judged on this run alone.
#[test]
fn a_verdict_an_earlier_run_did_not_share_is_inconclusive() {
    let earlier = Commute {
        pairs: vec![
            result("stat-same-file", true, Some((1.5, 2.0, Some(1.0)))),
            result("stat-diff-files", true, Some((1.5, 2.0, Some(1.0)))),
        ],
        summary: Summary::of(&[], KNOWN_CONFLICTS, conditions(true)),
        generated: None,
    };
    let json = serde_json::to_string(&earlier).unwrap();
    let previous = against::Previous::from_json("c1.json".into(), &json).unwrap();
    let mut results = vec![
        result("stat-same-file", true, Some((1.95, 2.0, Some(1.0)))),
        result("stat-diff-files", true, Some((1.5, 2.0, Some(1.0)))),
        result("fstat-same-file", true, Some((1.5, 2.0, None))),
    ];
    let against = previous.apply(&mut results);
    let judged = |r: &PairResult| (r.vfscale.as_ref().unwrap().judgement, r.vfscale.as_ref().unwrap().scales);
    assert_eq!(judged(&results[0]), (Some(Judgement::Inconclusive), Some(false)), "met here, not met there");
    assert_eq!(results[0].vfscale.as_ref().unwrap().s2, 1.95, "the figures stay this run's");
    assert_eq!(judged(&results[1]), (Some(Judgement::NotMet), Some(false)), "not met in both");
    assert_eq!(judged(&results[2]), (Some(Judgement::NotMet), Some(false)), "judged here alone");
    assert_eq!(results[0].vfscale.as_ref().unwrap().alone, Some(Judgement::Met), "its own verdict is kept");
    assert_eq!(against.vfscale_differed, ["stat-same-file"]);
    assert!(against.host_differed.is_empty());
    assert_eq!(against.not_there, ["fstat-same-file"]);
    let mut summary = Summary::of(&results, KNOWN_CONFLICTS, conditions(true));
    summary.against = Some(against);
    assert_eq!(summary.checker_exceptions, ["stat-diff-files", "fstat-same-file"]);
    assert_eq!(summary.inconclusive, ["stat-same-file"]);
    let table = table(&Commute { pairs: results, summary, generated: None });
    assert!(
        table.contains(
            "against c1.json: judged otherwise there, inconclusive here: vfscale 1 (stat-same-file); \
             not there (judged on this run alone): fstat-same-file\n"
        ),
        "{table}"
    );
}

/// `--against` names what is wrong with the file it is given.
#[test]
fn an_earlier_run_that_cannot_be_read_is_named() {
    let missing = against::Previous::load(std::path::Path::new("/nonexistent/c1.json")).unwrap_err();
    assert!(missing.starts_with("cannot read /nonexistent/c1.json: "), "{missing}");
    let not_commute = against::Previous::from_json("b.json".into(), "[{\"workload\": \"walk\"}]").unwrap_err();
    assert!(not_commute.starts_with("b.json is not the JSON of vfscale commute"), "{not_commute}");
    let check_only = serde_json::to_string(&Commute {
        pairs: vec![result("stat-same-file", true, None)],
        summary: Summary::of(&[], KNOWN_CONFLICTS, conditions(false)),
        generated: None,
    })
    .unwrap();
    let untimed = against::Previous::from_json("c.json".into(), &check_only).unwrap_err();
    assert_eq!(untimed, "c.json has no scaling verdicts (a --check-only run?)");
}

/// A known conflict for the summary's and the table's arithmetic (the
/// design has none left).
const SAMPLE_KNOWN: &[(&str, &str)] =
    &[("mkdir-one-dir", "each new directory's `..` counts a reference on the parent")];

fn conditions(timed: bool) -> Conditions {
    Conditions {
        timed,
        runs: 5,
        max_runs: 20,
        iterations: None,
        run_ms: 20.0,
        quick: false,
        load_average: [0.1, 0.2, 0.3],
    }
}

#[test]
fn summary_counts_verdicts_scaling_and_goals() {
    let results = vec![
        result("stat-same-file", true, Some((1.9, 2.0, Some(1.0)))),
        result("stat-diff-files", true, Some((1.6, 2.0, Some(1.9)))),
        result("mkdir-one-dir", false, Some((1.0, 2.0, Some(1.0)))),
        result("kernfs-read-same", true, Some((2.0, 2.0, None))),
    ];
    let s = Summary::of(&results, SAMPLE_KNOWN, conditions(true));
    assert_eq!(s.line, "vfscale conflict-free on 3 of 4, scales on 2 of 4; host scales on 1 of 4");
    // 1.6 < 0.85 x 2.0: the checker's promise failed for stat-diff-files.
    assert_eq!(s.checker_exceptions, ["stat-diff-files"]);
    assert_eq!(s.host_skipped.get("kernfs-read-same").map(String::as_str), Some("no sysfs here"));
    assert_eq!(s.known_conflicts.keys().copied().collect::<Vec<_>>(), ["mkdir-one-dir"]);
    let met: Vec<bool> = s.goals.iter().map(|g| g.met).collect();
    assert!(s.goals.iter().all(|g| g.met == (g.judgement == Judgement::Met)));
    // Too few pairs; 1 exception in 3 conflict-free pairs is more than 1 in
    // 20; vfscale scales on 2, the host on 1.
    assert_eq!(met, [false, false, true]);
    assert!(s.goals[1].detail.contains("1 of 3") && s.goals[1].detail.contains("stat-diff-files"));

    let unmeasured: Vec<PairResult> = pairs::all().iter().map(|p| result(p.name, true, None)).collect();
    let s = Summary::of(&unmeasured, KNOWN_CONFLICTS, conditions(false));
    let n = pairs::all().len();
    assert_eq!(s.line, format!("vfscale conflict-free on {n} of {n}"));
    assert_eq!(s.goals.len(), 1, "without timing only the conflict-free goal is judged");
    assert!(s.goals[0].met && s.checker_exceptions.is_empty() && s.vfscale_scales.is_none());
}

/// A timed run of two pairs: one conflict-free whose host does not
/// scale, one known conflict the host skipped.
fn two_pair_run() -> Commute {
    let pairs = vec![
        result("stat-same-file", true, Some((1.9, 2.0, Some(1.0)))),
        result("mkdir-one-dir", false, Some((1.0, 2.0, None))),
    ];
    let summary = Summary::of(&pairs, SAMPLE_KNOWN, conditions(true));
    Commute { pairs, summary, generated: None }
}

#[test]
fn json_has_the_issues_shape_and_the_table_one_line_per_pair() {
    let run = two_pair_run();
    let json = serde_json::to_value(&run).unwrap();
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&json), ["pairs", "summary"]);
    let first = &json["pairs"][0];
    let mut pair_keys = keys(first);
    pair_keys.sort();
    let mut want =
        ["name", "ops", "commutes_because", "conflict_free", "conflicting_sites", "vfscale", "private", "host"];
    want.sort();
    assert_eq!(pair_keys, want);
    assert_eq!(first["vfscale"]["s2"], 1.9);
    assert_eq!(first["host"]["scales"], false, "1.0 < 0.9 x 2.0");
    assert!(first["private"].get("scales").is_none(), "private is the ceiling, not judged");
    assert!(json["pairs"][1]["host"].is_null());
    assert_eq!(json["pairs"][1]["conflicting_sites"][0], "crates/vfs/src/x.rs:1 (write)");
    assert_eq!(json["summary"]["line"], run.summary.line);
    assert!(json["summary"].get("generated").is_none(), "no generated totals without --generate");

    let mut with_generated = two_pair_run();
    let generated = generate::Generated::of(&[]);
    with_generated.summary.add_generated(&generated);
    with_generated.generated = Some(generated);
    let json = serde_json::to_value(&with_generated).unwrap();
    assert_eq!(keys(&json), ["generated", "pairs", "summary"]);
    let mut totals = keys(&json["summary"]["generated"]);
    totals.sort();
    assert_eq!(totals, ["cases", "commutative", "conflict_free", "exempt", "exempt_conflict_free"]);
    assert!(json["generated"]["conflicting"].as_array().unwrap().is_empty());

    let table = table(&run);
    assert!(table
        .lines()
        .any(|l| l.starts_with("stat-same-file") && l.contains("conflict-free") && l.contains("1.00*")));
    assert!(table.lines().any(|l| l.starts_with("mkdir-one-dir") && l.contains("1 lines")));
    let header = table.lines().next().unwrap();
    assert!(header.contains("vfscale") && header.contains("rounds") && header.contains("private"), "{header}");
    assert!(table.lines().any(|l| l.starts_with("stat-same-file") && l.contains(" 0.95 ")), "1.9 / 2.0 by round");
    assert!(
        table.contains("counts a reference on the parent") && table.contains("line: crates/vfs/src/x.rs:1 (write)")
    );
    assert!(table.contains("host skipped mkdir-one-dir: no sysfs here"));
    assert!(table.contains(&run.summary.line) && table.contains("goal not met: at least 30 pairs"));
}

/// A small timed run of a pair that consumes its instances and one that
/// uses per-thread file tables: every cell measured, S2 finite.
#[test]
fn measuring_gives_every_cell() {
    let calibrated = Plan { runs: 1, max_runs: 1, iterations: None, run_time: std::time::Duration::from_millis(1) };
    let fixed = Plan { iterations: Some(40), ..calibrated };
    for (name, plan) in [("unlink-one-dir", calibrated), ("posix-disjoint-ranges", fixed)] {
        let pair = select(&[name.to_string()]).unwrap()[0];
        let m = measure::measure(pair, plan, |_, _| {}).unwrap();
        for s in [&m.vfscale, &m.private] {
            assert!(s.s2.is_finite() && s.s2 > 0.0 && s.runs_1.len() == 1, "{name}: {s:?}");
        }
        assert!(m.vfscale.scales.is_some() && m.private.scales.is_none());
        if plan.iterations.is_some() {
            assert_eq!(m.vfscale.iterations, 40);
        } else {
            assert!((200..=200_000).contains(&m.vfscale.iterations), "calibrated: {}", m.vfscale.iterations);
        }
        match &m.host {
            Ok(host) => assert!(host.s2.is_finite() && host.scales.is_some(), "{name}: {host:?}"),
            Err(why) => assert!(!why.is_empty() && !why.contains('\n'), "{name}: {why}"),
        }
    }
}

#[test]
fn unknown_pairs_are_refused_by_name() {
    let err = select(&["stat-same-file".into(), "nope".into()]).unwrap_err();
    assert!(err.starts_with("no pair 'nope' (there are: stat-same-file, "), "{err}");
    assert_eq!(select(&[]).unwrap().len(), pairs::all().len());
}

#[test]
fn report_draws_the_matrix() {
    let run = two_pair_run();
    let dir = tempfile::tempdir().unwrap();
    let index = write_report(&run, dir.path()).unwrap();
    let page = std::fs::read_to_string(index).unwrap();
    assert!(page.contains("<td class=\"num yes\">1.90</td>"), "vfscale scales: green");
    assert!(page.contains("<td class=\"num no\">1.00</td>"), "the host does not: red");
    assert!(page.contains("skipped: no sysfs here") && page.contains("crates/vfs/src/x.rs:1 (write)"));
    assert!(page.contains("counts a reference on the parent") && page.contains("load average 0.10 0.20 0.30"));
    let svg = std::fs::read_to_string(dir.path().join("commute-s2.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("stat-same-file") && svg.contains("host"));
}
