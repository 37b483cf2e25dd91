//! The crate's layering, checked against its source: every top-level
//! module of `src`, and every filesystem under `src/fs` (`fs::kernfs`,
//! ...), imports only the modules its doc's "May import" sentence names;
//! the only import circle is the one among the node types (`inode`,
//! `dentry` and a directory's `dirents`: the tree is recursive); and the core imports no filesystem.
//!
//! Imports are read from the source text: every `crate::name` and
//! `crate::{a, b}` outside comments and `#[cfg(test)]` modules, with the
//! names the crate root re-exports mapped to the module they come from.
//! `crate::fs::kernfs::...` names the module `fs::kernfs`; `crate::fs::X`
//! for anything else names `fs`, the interface.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// "The base modules" of a module doc (the base layer of the table in
/// `lib.rs`).
const BASE: &[&str] = &[
    "errno",
    "mode",
    "time",
    "path",
    "cred",
    "types",
    "config",
    "pages",
    "space",
    "reclaim",
    "opens",
    "xattr_store",
    "batched",
    "test_pause",
];
/// "The node types" of a module doc.
const NODE_TYPES: &[&str] = &["inode", "dentry", "dcache", "dirents"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The core: the modules that must import no filesystem.
const CORE: &[&str] = &["dcache", "namei", "mount", "namespace", "syscalls", "file", "process", "locks"];

/// The modules a `mod.rs` or `lib.rs` declares.
fn declared(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().trim_start_matches("pub ").strip_prefix("mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect()
}

/// The top-level modules `lib.rs` declares, and the filesystems `fs`
/// declares, as `fs::name`.
fn modules(lib: &str) -> Vec<String> {
    let mut mods = declared(lib);
    mods.extend(filesystems().into_iter().map(|m| format!("fs::{m}")));
    mods
}

/// The modules `fs/mod.rs` declares: the filesystems.
fn filesystems() -> Vec<String> {
    declared(&std::fs::read_to_string(src().join("fs/mod.rs")).unwrap())
}

/// A module's files: `name.rs`, or `name/mod.rs` (first) and everything
/// else under `name/` but the filesystems under `fs/`, which are modules
/// of their own. `fs::x` is `fs/x.rs` or `fs/x/`.
fn files(name: &str) -> Vec<PathBuf> {
    let name = name.replace("::", "/");
    let flat = src().join(format!("{name}.rs"));
    if flat.exists() {
        return vec![flat];
    }
    let nested: Vec<PathBuf> = if name == "fs" {
        filesystems().iter().flat_map(|m| [src().join("fs").join(m), src().join(format!("fs/{m}.rs"))]).collect()
    } else {
        Vec::new()
    };
    let mut found = Vec::new();
    let mut dirs = vec![src().join(&name)];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if nested.contains(&path) {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found.sort_by_key(|p| (!p.ends_with("mod.rs") || p.parent() != Some(&src().join(&name)), p.clone()));
    found
}

/// The file's code: without its `#[cfg(test)]` modules and comments.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
    text.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

/// The identifier at the start of `text`.
fn ident(text: &str) -> String {
    text.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

/// The modules a path after `crate::` names: `a::b` gives `a`, `{a, b::c}`
/// gives `a` and `b`, and `fs::kernfs::X` (or `fs::{kernfs, X}`) gives
/// `fs::kernfs` (and `fs`).
fn heads(part: &str, filesystems: &[String], names: &mut BTreeSet<String>) {
    let part = part.trim_start();
    if let Some(group) = part.strip_prefix('{') {
        let group = &group[..group.find('}').unwrap_or(group.len())];
        for item in group.split(',') {
            heads(item, filesystems, names);
        }
        return;
    }
    let head = ident(part);
    if head.is_empty() {
        return;
    }
    let rest = part.trim_start()[head.len()..].trim_start();
    if head == "fs" {
        if let Some(rest) = rest.strip_prefix("::") {
            if let Some(group) = rest.trim_start().strip_prefix('{') {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                for item in group.split(',') {
                    let sub = ident(item);
                    names.insert(if filesystems.contains(&sub) { format!("fs::{sub}") } else { head.clone() });
                }
                return;
            }
            let sub = ident(rest);
            if filesystems.contains(&sub) {
                names.insert(format!("fs::{sub}"));
                return;
            }
        }
    }
    names.insert(head);
}

/// The modules named after each `crate::` (see [`heads`]).
fn crate_paths(code: &str) -> BTreeSet<String> {
    let filesystems = filesystems();
    let mut names = BTreeSet::new();
    for part in code.split("crate::").skip(1) {
        heads(part, &filesystems, &mut names);
    }
    names
}

/// The names the crate root re-exports (`pub use module::{A, B};`), to
/// the module each comes from (a filesystem re-exported from `fs` is its
/// own module).
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let filesystems = filesystems();
    let mut map = BTreeMap::new();
    for line in lib.lines().filter_map(|l| l.strip_prefix("pub use ")) {
        let Some((module, items)) = line.trim_end_matches(';').split_once("::") else { continue };
        for item in items.trim_matches(|c| c == '{' || c == '}').split(',') {
            let item = item.trim().to_string();
            let from =
                if module == "fs" && filesystems.contains(&item) { format!("fs::{item}") } else { module.into() };
            map.insert(item, from);
        }
    }
    map
}

/// The modules a module doc's "May import" sentence allows.
fn allowed(doc: &str, all: &[String]) -> Option<BTreeSet<String>> {
    let sentence = &doc[doc.find("May import")?..];
    let sentence = &sentence[..sentence.find(".\n").or_else(|| sentence.find(". ")).unwrap_or(sentence.len())];
    if sentence.starts_with("May import every module") {
        return Some(all.iter().cloned().collect());
    }
    let mut names: BTreeSet<String> = sentence.split('`').skip(1).step_by(2).map(str::to_string).collect();
    if sentence.contains("the base modules") {
        names.extend(BASE.iter().map(|m| m.to_string()));
    }
    if sentence.contains("the node types") {
        names.extend(NODE_TYPES.iter().map(|m| m.to_string()));
    }
    Some(names)
}

/// The leading `//!` lines of a file, joined.
fn module_doc(text: &str) -> String {
    text.lines().map_while(|l| l.strip_prefix("//!")).map(str::trim).collect::<Vec<_>>().join("\n")
}

/// Each module's imports of other top-level modules.
fn import_graph() -> (BTreeMap<String, BTreeSet<String>>, BTreeMap<String, String>) {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let mods = modules(&lib);
    let roots = reexports(&lib);
    let mut graph = BTreeMap::new();
    let mut docs = BTreeMap::new();
    for m in &mods {
        let paths = files(m);
        assert!(!paths.is_empty(), "no source for module {m}");
        let mut imports = BTreeSet::new();
        for path in &paths {
            let text = std::fs::read_to_string(path).unwrap();
            for name in crate_paths(&code(&text)) {
                let module = roots.get(&name).cloned().unwrap_or(name);
                if module != *m && mods.contains(&module) {
                    imports.insert(module);
                }
            }
        }
        let top = std::fs::read_to_string(&paths[0]).unwrap();
        docs.insert(m.clone(), module_doc(&top));
        graph.insert(m.clone(), imports);
    }
    (graph, docs)
}

/// The modules that reach themselves through the graph.
fn in_a_circle(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
    let reaches = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&String> = graph[from].iter().collect();
        while let Some(m) = todo.pop() {
            if seen.insert(m.clone()) {
                todo.extend(graph.get(m).into_iter().flatten());
            }
        }
        seen
    };
    graph.keys().filter(|m| reaches(m).contains(*m)).cloned().collect()
}

#[test]
fn every_module_imports_only_what_its_doc_allows() {
    let (graph, docs) = import_graph();
    let all: Vec<String> = graph.keys().cloned().collect();
    // The reader sees imports at all: the top layer uses the calls.
    assert!(graph["process"].contains("syscalls"), "{:?}", graph["process"]);
    let mut wrong = Vec::new();
    for (m, imports) in &graph {
        let Some(allowed) = allowed(&docs[m], &all) else {
            wrong.push(format!("{m}: its doc has no \"May import\" sentence"));
            continue;
        };
        let extra: Vec<_> = imports.difference(&allowed).collect();
        if !extra.is_empty() {
            wrong.push(format!("{m} imports {extra:?}, which its doc does not allow"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_only_import_circle_is_among_the_node_types() {
    let (graph, _) = import_graph();
    let circle = in_a_circle(&graph);
    let expected: BTreeSet<String> = ["inode", "dentry", "dirents"].map(String::from).into();
    assert_eq!(circle, expected, "modules on an import circle");
}

#[test]
fn the_core_imports_no_filesystem() {
    let (graph, _) = import_graph();
    for m in CORE {
        let filesystems: Vec<_> = graph[*m].iter().filter(|i| i.starts_with("fs::")).collect();
        assert!(filesystems.is_empty(), "{m} imports the filesystems {filesystems:?}");
    }
    // The filesystems are seen at all.
    assert!(graph.contains_key("fs::kernfs") && graph.contains_key("fs::memfs"), "{:?}", graph.keys());
    assert!(graph["fs::procfs"].contains("fs"), "{:?}", graph["fs::procfs"]);
}
