//! The generator's enumeration and the host's commutativity decisions on
//! cases whose answer POSIX fixes.

use super::*;

fn find(cases: &[Case], text: &str) -> Case {
    *cases.iter().find(|c| c.to_string() == text).unwrap_or_else(|| panic!("no generated case {text}"))
}

#[test]
fn every_call_and_relation_is_generated_once() {
    let cases = cases();
    let mut names: Vec<String> = cases.iter().map(Case::to_string).collect();
    names.sort();
    let before = names.len();
    names.dedup();
    assert_eq!(names.len(), before, "a case is generated twice");
    for verb in Verb::ALL {
        assert!(cases.iter().any(|c| c.a.verb == verb || c.b.verb == verb), "{verb:?} is in no case");
    }
    for desc in [Desc::P1, Desc::P1Again, Desc::P2, Desc::Q1, Desc::Q2] {
        assert!(cases.iter().any(|c| c.b.desc == Some(desc)), "no case uses {desc:?}");
    }
    for range in RANGES {
        assert!(cases.iter().any(|c| c.b.range == Some(range)), "no case uses {range:?}");
    }
    // The lock table is probed wherever a generated lock can begin or end.
    assert_eq!(lock_boundaries(), [0, 4080, 4088, 4096, 4104, 4112, 8192, 8208]);
    let same_name = cases.iter().any(|c| c.a.object.is_some() && c.a.object == c.b.object);
    let other_dir = cases.iter().any(|c| c.b.object.is_some_and(|o| o.other_dir));
    assert!(same_name && other_dir);
}

#[test]
fn the_host_decides_what_posix_fixes() {
    if let Some(note) = &crate::host::ScratchDir::new("commute-gen-test", None).unwrap().note {
        eprintln!("skipped: {note}");
        return;
    }
    let cases = cases();
    let commutes = |text: &str| host::decide(&find(&cases, text)).unwrap().is_some();
    // Reads of anything commute; two reads of one file too.
    assert!(commutes("P: stat(d/f1) || Q: stat(d/f1)"));
    // Different names in one directory commute, whatever the calls.
    assert!(commutes("P: open(O_CREAT|O_EXCL)+close(d/n1) || Q: unlink(d/f2)"));
    // Removing one name twice: the second fails, whichever it is.
    assert!(!commutes("P: unlink(d/f1) || Q: unlink(d/f1)"));
    // A look-up of a name another call creates sees it or not.
    assert!(!commutes("P: stat(d/n1) || Q: mkdir(d/n1)"));
    // A listing of a directory another call adds to.
    assert!(!commutes("P: mkdir(d/n1) || Q: getdents(d)"));
    // Writes to overlapping bytes leave the later one's bytes.
    assert!(!commutes("pwrite(P:d/f1, 4080+16) || pwrite(Q:d/f1, 4088+16)"));
    assert!(commutes("pwrite(P:d/f1, 4080+16) || pwrite(Q:d/f1, 8192+16)"));
    // Conflicting write locks of two owners: the second fails.
    assert!(!commutes("F_SETLK(F_WRLCK)(P:d/f1, 4080+16) || F_SETLK(F_WRLCK)(Q:d/f1, 4088+16)"));
    assert!(commutes("F_SETLK(F_WRLCK)(P:d/f1, 4080+16) || F_SETLK(F_WRLCK)(Q:d/f1, 8192+16)"));
    // One owner's adjacent write locks merge into one either way.
    assert!(commutes("F_SETLK(F_WRLCK)(P:d/f1, 4080+16) || F_SETLK(F_WRLCK)(P:d/f1', 4096+16)"));
    // A close in P drops P's POSIX locks on the file, in one order only.
    assert!(!commutes("F_SETLK(F_WRLCK)(P:d/f1, 4080+16) || P: open(O_RDONLY)+close(d/f1)"));
    assert!(commutes("F_SETLK(F_WRLCK)(P:d/f1, 4080+16) || Q: open(O_RDONLY)+close(d/f1)"));
    // Two seeks of one description leave the later offset.
    assert!(!commutes("lseek(P:d/f1, 4080+16) || lseek(P:d/f1, 4088+16)"));
    assert!(commutes("lseek(P:d/f1, 4080+16) || lseek(P:d/f1', 4088+16)"));
}

/// The exemption: locks of one owner on one file that overlap, or
/// touch with one type; nothing else.
#[test]
fn only_merging_locks_of_one_owner_are_exempt() {
    let cases = cases();
    let exempt = |text: &str| find(&cases, text).exempt();
    assert!(exempt("F_SETLK(F_WRLCK)(P:d/f1, 4080+16) || F_SETLK(F_WRLCK)(P:d/f1', 4096+16)"), "touching");
    assert!(exempt("F_SETLK(F_RDLCK)(P:d/f1, 4080+16) || F_SETLK(F_RDLCK)(P:d/f1, 4088+16)"), "overlapping");
    assert!(exempt("F_OFD_SETLK(F_WRLCK)(P:d/f1, 4080+16) || F_OFD_SETLK(F_WRLCK)(P:d/f1, 4096+16)"));
    assert!(!exempt("F_SETLK(F_RDLCK)(P:d/f1, 4080+16) || F_SETLK(F_WRLCK)(P:d/f1, 4096+16)"), "two types");
    assert!(!exempt("F_SETLK(F_WRLCK)(P:d/f1, 4080+16) || F_SETLK(F_WRLCK)(P:d/f1, 8192+16)"), "disjoint");
    assert!(!exempt("F_SETLK(F_WRLCK)(P:d/f1, 4080+16) || F_SETLK(F_WRLCK)(Q:d/f1, 4096+16)"), "two processes");
    assert!(!exempt("F_SETLK(F_WRLCK)(P:d/f1, 4080+16) || F_SETLK(F_WRLCK)(P:d/f2, 4096+16)"), "two files");
    let two_descriptions = "F_OFD_SETLK(F_WRLCK)(P:d/f1, 4080+16) || F_OFD_SETLK(F_WRLCK)(P:d/f1', 4096+16)";
    assert!(!exempt(two_descriptions), "OFD locks of two descriptions have two owners");
    assert!(!exempt("pwrite(P:d/f1, 4080+16) || pwrite(P:d/f1, 4096+16)"), "not locks");
}

/// The goal leaves the exempt cases out: of three commutative cases, one
/// exempt and conflicting, the other two conflict-free, the goal counts
/// two of two.
#[test]
fn totals_count_the_exempt_apart() {
    let cases = cases();
    let result = |text: &str, commutes: bool, conflict: bool| CaseResult {
        case: find(&cases, text),
        commutes,
        conflicts: commutes.then(|| {
            if conflict {
                vec![vec!["crates/vfs/src/locks/mod.rs:1 (write)".into()]]
            } else {
                Vec::new()
            }
        }),
    };
    let results = [
        result("F_SETLK(F_WRLCK)(P:d/f1, 4080+16) || F_SETLK(F_WRLCK)(P:d/f1', 4096+16)", true, true),
        result("F_SETLK(F_WRLCK)(P:d/f1, 4080+16) || F_SETLK(F_WRLCK)(Q:d/f1, 8192+16)", true, false),
        result("P: stat(d/f1) || Q: stat(d/f1)", true, false),
        result("P: unlink(d/f1) || Q: unlink(d/f1)", false, false),
    ];
    let generated = Generated::of(&results);
    let t = generated.totals;
    assert_eq!((t.cases, t.commutative, t.conflict_free, t.exempt, t.exempt_conflict_free), (4, 3, 2, 1, 0));
    assert_eq!(t.judged(), (2, 2));
    assert!(generated.conflicting[0].exempt);
    let text = generated.text();
    assert!(text.contains("conflict-free on 2 of 3 generated commutative cases (66.7%)"), "{text}");
    assert!(text.contains("exempt: 1 of them (0 conflict-free)") && text.contains("on 2 of 2 (100.0%)"), "{text}");
    assert!(text.contains("exempt case: F_SETLK(F_WRLCK)(P:d/f1, 4080+16) ||"), "{text}");
}

#[test]
fn sites_fall_under_the_mechanism_of_their_first_frame() {
    let site = "crates/vfs/src/inode.rs:432 > crates/sync/src/seqcount.rs:131 (write)";
    assert_eq!(mechanism_of(site), Some("inode-attributes"));
    assert_eq!(mechanism_of("crates/vfs/src/locks/context.rs:252 (write)"), Some("lock-lists"));
    assert_eq!(mechanism_of("crates/vfs/src/syscalls/open.rs:156 (read)"), Some("directory-entries"));
    assert_eq!(mechanism_of("crates/sync/src/seqcount.rs:131 (write)"), None);
}
