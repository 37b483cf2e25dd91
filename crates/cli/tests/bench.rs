//! End to end: `vfscale bench --max-runs` runs more rounds of every cell
//! only while a design's efficiency is inconclusive, and refuses a cap
//! below the planned runs or a host driver, which has no `private`.

mod command;

use command::{one_line_error, vfscale};
use serde_json::Value;

#[test]
fn a_cap_below_the_runs_or_on_a_host_driver_is_one_line_error() {
    one_line_error(
        &["bench", "prim-lockref", "--runs", "5", "--max-runs", "4"],
        "--max-runs (4) must be at least --runs (5)",
    );
    one_line_error(&["host", "dir-create", "--max-runs", "10"], "--max-runs applies to `vfscale bench`");
    one_line_error(
        &["reproduce", "locks", "--quick", "--max-runs", "3"],
        "--max-runs (3) must be at least the runs per cell (4)",
    );
    let no_private = ["bench", "prim-lockref", "--variant", "lockref", "--threads", "1,2", "--max-runs", "10"];
    one_line_error(&no_private, "--max-runs goes on while an efficiency is undecided, which needs `private`");
    let no_two = ["bench", "prim-lockref", "--variant", "lockref,private", "--threads", "1", "--max-runs", "10"];
    one_line_error(&no_two, "needs `private`, a design, 1 thread and a count above 1");
    let no_one = ["reproduce", "locks", "--threads", "2,16", "--max-runs", "10"];
    one_line_error(&no_one, "needs 1 thread and a count above 1 among --threads");
}

/// Two planned rounds, up to four: cells that ran two were all decided by
/// them; cells that ran four were judged on their 99% intervals. Which of
/// the two happens is up to the machine; each is checked as what it is.
#[test]
fn only_an_undecided_efficiency_runs_more_rounds() {
    let base = ["bench", "prim-lockref", "--variant", "lockref,private", "--threads", "1,2"];
    let args: Vec<&str> =
        base.iter().copied().chain(["--runs", "2", "--max-runs", "4", "--iterations", "200"]).collect();
    let output = vfscale(&[&args[..], &["--json"]].concat());
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let v: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!((v["runs"].as_u64(), v["max_runs"].as_u64()), (Some(2), Some(4)));
    let cells = v["cells"].as_array().unwrap();
    let runs = cells[0]["runs"].as_u64().unwrap();
    assert!(cells.iter().all(|c| c["runs"].as_u64() == Some(runs)), "every cell runs every round: {cells:?}");
    let lockref_2 = cells.iter().find(|c| c["variant"] == "lockref" && c["threads"] == 2).unwrap();
    let interval = |key: &str| lockref_2[key].as_array().map(|a| [a[0].as_f64().unwrap(), a[1].as_f64().unwrap()]);
    match runs {
        2 => {
            let [low, high] = interval("efficiency_ci95").unwrap();
            assert!(high < 0.9 || low >= 0.9, "two rounds left it undecided, yet it ran no more: {lockref_2}");
            assert!(cells.iter().all(|c| c.get("efficiency_ci99").is_none()), "{cells:?}");
        }
        4 => assert!(cells.iter().all(|c| c["efficiency_ci99"].is_array()), "{cells:?}"),
        _ => panic!("{runs} rounds, neither the planned two nor the cap: {cells:?}"),
    }
    let text = vfscale(&args);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.contains("2 runs per cell after a warm-up (up to 4 while an efficiency"), "{stdout}");
    assert!(stdout.contains("efficiency (S / S private, >= 0.9 scales"), "{stdout}");
}
