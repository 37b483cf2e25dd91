//! End to end: the built `vfscale` binary runs one small experiment with
//! `--quick`, and its JSON has the documented schema, machine facts and
//! verdict fields, and its report renders.

mod command;

use command::{one_line_error, vfscale};
use serde_json::Value;
use std::process::Command;

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("vfscale-e2e-{}-{name}", std::process::id()))
}

#[test]
fn reproduce_quick_writes_json_with_verdicts_and_a_report() {
    let json_path = tmp("run.json");
    let report_dir = tmp("report");
    let output = Command::new(env!("CARGO_BIN_EXE_vfscale"))
        .args(["reproduce", "inode-list", "--quick", "--threads", "1,2", "--json"])
        .arg(&json_path)
        .arg("--report")
        .arg(&report_dir)
        .output()
        .expect("run vfscale");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "stdout:\n{stdout}\nstderr:\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("Elapsed Time") && stdout.contains("System Time"), "seed 001's table:\n{stdout}");
    assert!(stdout.contains("percpu vs global"), "a verdict line:\n{stdout}");
    assert!(stdout.contains("== summary"), "{stdout}");

    let json: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    for key in ["kernel", "cpus", "cpu_model", "arch"] {
        assert!(json["machine"].get(key).is_some(), "machine.{key}");
    }
    assert_eq!(json["quick"], true);
    assert_eq!(json["runs"], 4);
    let calibration = &json["calibration"];
    assert!(calibration["s2"].as_f64().is_some_and(|s| s > 0.0), "calibration.s2: {calibration}");
    assert!(calibration["s16"].is_null(), "16 threads did not run");
    let experiment = &json["experiments"][0];
    assert_eq!(experiment["name"], "inode-list");
    assert_eq!(experiment["seed"], "001");
    let cases = experiment["cases"].as_array().unwrap();
    let workloads: Vec<&str> = cases.iter().map(|c| c["workload"].as_str().unwrap()).collect();
    assert_eq!(workloads, ["inode-exit", "dir-create", "dir-unlink"], "the exit benchmark, then one shared directory");
    let case = &cases[0];
    let cells = case["cells"].as_array().unwrap();
    assert!(cells.len() >= 6, "percpu, global and private at 1 and 2 threads");
    let private: Vec<&Value> = cells.iter().filter(|c| c["variant"] == "private").collect();
    assert_eq!(private.len(), 2, "the ceiling runs at every thread count");
    for cell in cells {
        let efficiency = &cell["efficiency"];
        if cell["variant"] == "host" {
            assert!(efficiency.is_null(), "the host is not measured against private");
        } else {
            assert!(efficiency.as_f64().is_some_and(f64::is_finite), "{cell}");
        }
    }
    assert!(private.iter().all(|c| c["efficiency"].as_f64() == Some(1.0)));
    assert!(cells.iter().filter(|c| c["variant"] != "host").all(|c| c["efficiency_ci95"].is_array()), "{cells:?}");
    assert!(cells.iter().filter(|c| c["variant"] != "host").all(|c| c["efficiency_pinned"].is_boolean()), "{cells:?}");
    assert!(stdout.contains("efficiency (S / S private, >= 0.9 scales; "), "the summary gives efficiencies:\n{stdout}");
    let designs: Vec<&Value> = cases
        .iter()
        .flat_map(|c| c["cells"].as_array().unwrap())
        .filter(|c| c["threads"] != 1 && c["variant"] != "private" && c["efficiency"].is_f64())
        .collect();
    let loose = designs.iter().filter(|c| c["efficiency_pinned"] == false).count();
    let count = format!("efficiency figures inconclusive (~): {loose} of {} ", designs.len());
    assert!(stdout.contains(&count), "the summary counts the JSON's loose figures, {count}:\n{stdout}");
    assert!(stdout.contains("calibration (") && stdout.contains("noise (private's S per round)"), "{stdout}");
    assert!(!stdout.contains("private vs") && !stdout.contains("vs private"), "private is no contender:\n{stdout}");
    for cell in cells {
        for key in ["workload", "variant", "threads", "runs", "iterations", "ops_per_sec", "per_op_ns", "elapsed_s"] {
            assert!(cell.get(key).is_some(), "cell.{key}");
        }
        for key in ["cpu_user_s", "cpu_system_s", "speedup", "ops_per_sec_samples", "thread_per_op_us", "fairness"] {
            assert!(cell.get(key).is_some(), "cell.{key}");
        }
        for key in ["median", "mean", "variance", "sigma", "min", "max", "ci95"] {
            assert!(cell["ops_per_sec"].get(key).is_some(), "ops_per_sec.{key}");
        }
        assert_eq!(cell["ops_per_sec_samples"].as_array().unwrap().len(), 4);
        let threads = cell["threads"].as_u64().unwrap() as usize;
        assert_eq!(cell["thread_per_op_us"].as_array().unwrap().len(), 4 * threads);
    }
    let verdicts = case["verdicts"].as_array().unwrap();
    assert_eq!(verdicts.len(), 2, "global -> percpu at 1 and 2 threads");
    for v in verdicts {
        assert_eq!((v["before"].as_str(), v["after"].as_str()), (Some("global"), Some("percpu")));
        for key in ["threads", "ratio", "ratio_ci95", "rank_test", "verdict"] {
            assert!(v.get(key).is_some(), "verdict.{key}");
        }
        let verdict = v["verdict"].as_str().unwrap();
        assert!(["faster", "slower", "no significant difference"].contains(&verdict), "{verdict}");
        let p = v["rank_test"]["p_value"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&p));
    }

    let page = std::fs::read_to_string(report_dir.join("index.html")).unwrap();
    assert!(page.contains("<img src=\"inode-list-0-throughput.svg\""), "the page links its charts");
    let chart = std::fs::read_to_string(report_dir.join("inode-list-0-throughput.svg")).unwrap();
    assert!(chart.contains("inode-exit private (ceiling)"), "the chart draws and names the ceiling");
    assert!(std::fs::read_to_string(report_dir.join("inode-list-0-per-op.svg")).unwrap().starts_with("<svg"));

    // The saved run compares against itself: every cell matches, none differs.
    let compared =
        Command::new(env!("CARGO_BIN_EXE_vfscale")).arg("compare").arg(&json_path).arg(&json_path).output().unwrap();
    let text = String::from_utf8_lossy(&compared.stdout);
    assert!(compared.status.success(), "{text}");
    let all_cells: usize = cases.iter().map(|c| c["cells"].as_array().unwrap().len()).sum();
    assert_eq!(text.matches("no significant difference").count(), all_cells, "{text}");

    std::fs::remove_file(&json_path).unwrap();
    std::fs::remove_dir_all(&report_dir).unwrap();
}

#[test]
fn unknown_experiment_is_one_line_error() {
    one_line_error(&["reproduce", "nope"], "kernfs, inode-list, rwsem, proc, locks");
}

#[test]
fn host_driver_runs_like_bench_or_says_why_not() {
    let output =
        vfscale(&["host", "kernfs-missing", "--threads", "1,2", "--runs", "2", "--iterations", "200", "--json"]);
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    if stdout.trim().is_empty() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("skipped"), "{stderr}");
        return;
    }
    let cells: Value = serde_json::from_str(&stdout).unwrap();
    let cells = cells.as_array().unwrap();
    assert_eq!(cells.len(), 2);
    assert!(cells.iter().all(|c| c["variant"] == "host" && c["workload"] == "kernfs-missing"));
}
