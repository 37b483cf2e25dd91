//! Running the built `vfscale` command from an integration test.

use std::process::{Command, Output};

/// `vfscale ARGS...`, run to its end.
pub fn vfscale(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vfscale")).args(args).output().unwrap()
}

/// Asserts that `vfscale ARGS...` fails with one line on stderr that
/// contains `expected`.
pub fn one_line_error(args: &[&str], expected: &str) {
    let output = vfscale(args);
    assert!(!output.status.success(), "{args:?} succeeded");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(expected), "{stderr}");
}
