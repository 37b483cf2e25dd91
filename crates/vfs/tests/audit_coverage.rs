//! The cache-line audit sees every atomic and lock of `crates/vfs/src`:
//! the VFS reaches them only through `vfscale_sync::audited` (or the
//! primitives of `vfscale_sync`, which report through the same shim). A
//! grep, so a new `use std::sync::atomic` fails here before it hides a
//! shared write from the conflict checker.

use std::path::{Path, PathBuf};

/// Synchronization types the audit cannot see, as they would be named in
/// `crates/vfs/src` (a path, or a name inside a `use` list of the module).
const UNSEEN: &[(&str, &[&str])] = &[
    ("std::sync::atomic", &[]),
    ("core::sync::atomic", &[]),
    ("std::sync", &["Mutex", "RwLock", "OnceLock", "Condvar", "Once", "LazyLock", "Barrier"]),
    ("crossbeam_epoch", &["Atomic"]),
    ("crossbeam_utils::atomic", &[]),
    ("crossbeam_utils::sync", &[]),
    ("parking_lot", &[]),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every use in `source` of a type [`UNSEEN`] lists, as `line: text`.
fn unseen_uses(source: &str) -> Vec<String> {
    let mut found = Vec::new();
    // `use` statements may span lines: join each one before looking.
    let mut statement = String::new();
    for (number, line) in source.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        statement.push_str(code);
        if statement.trim_start().starts_with("use ") && !code.contains(';') {
            continue;
        }
        for (module, names) in UNSEEN {
            let Some(at) = statement.find(&format!("{module}::")) else { continue };
            let rest = &statement[at + module.len() + 2..];
            let named =
                |name: &&str| rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).any(|word| word == *name);
            if names.is_empty() || names.iter().any(named) {
                found.push(format!("{}: {}", number + 1, statement.trim()));
            }
        }
        statement.clear();
    }
    found
}

#[test]
fn vfs_uses_no_synchronization_the_audit_cannot_see() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 20, "found the sources: {files:?}");
    let mut offenders = Vec::new();
    for file in &files {
        for hit in unseen_uses(&std::fs::read_to_string(file).unwrap()) {
            offenders.push(format!("{}:{hit}", file.strip_prefix(&src).unwrap().display()));
        }
    }
    assert!(offenders.is_empty(), "use vfscale_sync::audited instead:\n{}", offenders.join("\n"));
}

#[test]
fn the_grep_catches_each_form() {
    assert_eq!(unseen_uses("use std::sync::atomic::{AtomicU64, Ordering};").len(), 1);
    assert_eq!(unseen_uses("static N: std::sync::atomic::AtomicU64 = todo!();").len(), 1);
    assert_eq!(unseen_uses("use std::sync::{\n    Arc,\n    Mutex,\n};").len(), 1);
    assert_eq!(unseen_uses("let m = std::sync::Mutex::new(0);").len(), 1);
    assert_eq!(unseen_uses("use crossbeam_epoch::{Atomic, Guard};").len(), 1);
    assert_eq!(unseen_uses("use std::sync::{Arc, Weak};").len(), 0, "reference counts are checked elsewhere");
    assert_eq!(unseen_uses("use crossbeam_epoch::{Guard, Owned};").len(), 0);
    assert_eq!(unseen_uses("use vfscale_sync::audited::{AtomicU64, Mutex};").len(), 0);
    assert_eq!(unseen_uses("// std::sync::Mutex in a comment").len(), 0);
}
