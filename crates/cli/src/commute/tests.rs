//! The checker's verdict on every pair, and the summary's arithmetic.

use super::*;

/// Tries a layout-dependent pair gets to come out conflict-free.
const LAYOUT_TRIES: usize = 5;

#[test]
fn commutative_pairs_are_conflict_free() {
    let all = pairs::all();
    for (name, _) in KNOWN_CONFLICTS.iter().chain(LAYOUT_DEPENDENT) {
        assert!(all.iter().any(|p| p.name == *name), "'{name}' is listed but names no pair");
    }
    for (name, _) in LAYOUT_DEPENDENT {
        assert!(!KNOWN_CONFLICTS.iter().any(|(k, _)| k == name), "'{name}' is listed twice");
    }
    let mut wrong = Vec::new();
    for pair in all {
        let known = KNOWN_CONFLICTS.iter().find(|(name, _)| *name == pair.name);
        let tries = if LAYOUT_DEPENDENT.iter().any(|(name, _)| *name == pair.name) { LAYOUT_TRIES } else { 1 };
        let mut verdict = check(pair).unwrap_or_else(|e| panic!("{e}"));
        for _ in 1..tries {
            if verdict.conflict_free() {
                break;
            }
            verdict = check(pair).unwrap_or_else(|e| panic!("{e}"));
        }
        match (verdict.conflict_free(), known) {
            (true, Some((_, reason))) => {
                wrong.push(format!("{}: known to conflict ({reason}) but conflict-free now: remove it", pair.name))
            }
            (false, None) => {
                let lines: Vec<String> = verdict.conflicts.iter().map(|c| c.sites.join(", ")).collect();
                wrong.push(format!("{}: conflicts on {} lines:\n  {}", pair.name, lines.len(), lines.join("\n  ")));
            }
            _ => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
