//! End to end: `vfscale commute` runs more rounds only for a pair its
//! first rounds leave undecided, and refuses a cap below the first rounds.

mod command;

use command::{one_line_error, vfscale};
use serde_json::Value;

#[test]
fn a_cap_below_the_first_rounds_is_one_line_error() {
    let args = ["commute", "stat-same-file", "--runs", "5", "--max-runs", "4"];
    one_line_error(&args, "--max-runs (4) must be at least --runs (5)");
}

/// Two first rounds, up to four: a side judged on two rounds was decided
/// by them; a side that ran four was not, and was judged on its 99%
/// interval. Which of the two happens is up to the machine; each is
/// checked as what it is.
#[test]
fn only_an_undecided_side_runs_more_rounds() {
    let json_path = std::env::temp_dir().join(format!("vfscale-e2e-{}-more-rounds.json", std::process::id()));
    let json = json_path.to_str().unwrap();
    let args = ["commute", "stat-same-file", "--runs", "2", "--max-runs", "4", "--iterations", "200", "--json", json];
    let output = vfscale(&args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    std::fs::remove_file(&json_path).unwrap();
    assert_eq!((v["summary"]["runs"].as_u64(), v["summary"]["max_runs"].as_u64()), (Some(2), Some(4)));
    let stdout = String::from_utf8_lossy(&output.stdout);
    for side in ["vfscale", "host"] {
        let s = &v["pairs"][0][side];
        if s.is_null() {
            continue;
        }
        let rounds = s["runs_1"].as_array().unwrap().len();
        let more = format!("{side} 4 (");
        match rounds {
            2 => {
                assert_ne!(s["judgement"], "inconclusive", "{side}: two rounds left it undecided, yet it ran no more");
                assert!(s.get("ci99").is_none() && !stdout.contains(&more), "{side}: {s}\n{stdout}");
            }
            4 => assert!(s["ci99"].as_array().is_some() && stdout.contains(&more), "{side}: {s}\n{stdout}"),
            _ => panic!("{side} ran {rounds} rounds, neither the first two nor the cap: {s}"),
        }
    }
}
