//! The README and `docs/` stay true: every `vfscale` command the README
//! shows runs, in a quick form, and every relative link in the README and
//! `docs/` resolves.
//!
//! Commands: each line of a ```` ```sh ```` block of `README.md` that starts
//! with `cargo run --release -- ` is looked up in [`QUICK`], which says how
//! this test runs it: the built binary with the same subcommand, cut down
//! (`--quick`, one small experiment or pair, few runs and iterations) so
//! the whole test takes seconds. A README command the table does not know
//! fails the test, and so does a table entry the README no longer shows,
//! so the two change together. The commands run in README order, so a
//! file one command writes is there for the next. `mount` and
//! `mount-bench` need root and `/dev/fuse`: without them they are skipped,
//! with the reason printed, except under CI (`CI` set), where that is a
//! failure.
//!
//! Links: each `[text](target)` outside code, whose target has no scheme,
//! must name a file or directory that exists relative to the linking file;
//! a `#anchor` must be the slug (as GitHub makes it) of a heading of the
//! file it points into, or of the linking file for an anchor alone.

mod common;
use common::can_mount;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What the README's command lines start with.
const PREFIX: &str = "cargo run --release -- ";

/// How the test runs one README command. In an invocation, `{tmp}` is the
/// test's temporary directory, and `> FILE` sends standard output to FILE.
enum Quick {
    /// These invocations, in order, each of which must succeed.
    Run(&'static [&'static str]),
    /// The same, where mounting is possible (root and `/dev/fuse`).
    Fuse(&'static [&'static str]),
    /// A `mount DIR ... &`: starts this invocation in the background, waits
    /// until the mount shows in `/proc/self/mounts`, and does what the
    /// README does there (a directory, a file written and read back; a
    /// `--bind-ro`'s PATH shows its HOSTDIR).
    Mount(&'static str),
    /// The `umount DIR` of the mount above: it must succeed, and the
    /// server must then exit with success.
    Umount(&'static str),
}

use Quick::{Fuse, Mount, Run, Umount};

/// Each README command (what follows `cargo run --release -- `, without
/// its `# comment`) and its quick form.
const QUICK: &[(&str, Quick)] = &[
    ("reproduce", Run(&["reproduce inode-list --quick --threads 1,2"])),
    ("bench walk --threads 1,2,16", Run(&["bench walk --threads 1,2 --runs 1 --iterations 100"])),
    (
        "reproduce kernfs --quick --report report/",
        Run(&["reproduce kernfs --quick --threads 1,2 --report {tmp}/report"]),
    ),
    ("commute", Run(&["commute stat-same-file --quick", "commute --check-only"])),
    (
        "commute --against c1.json",
        Run(&[
            "commute stat-same-file --quick --json {tmp}/c1.json",
            "commute stat-same-file --quick --against {tmp}/c1.json",
        ]),
    ),
    ("mount /tmp/vfs &", Mount("mount {tmp}/vfs")),
    ("umount /tmp/vfs", Umount("umount {tmp}/vfs")),
    ("mount /tmp/vfs --bind-ro /etc:/host/etc &", Mount("mount {tmp}/vfs --bind-ro /etc:/host/etc")),
    ("mount-bench --quick", Fuse(&["mount-bench --quick --goals-only --runs 1"])),
    ("host kernfs-files --threads 1,2,16", Run(&["host kernfs-files --threads 1,2 --runs 1 --iterations 100"])),
    (
        "bench walk --json > before.json",
        Run(&["bench walk --threads 1,2 --runs 2 --iterations 100 --json > {tmp}/before.json"]),
    ),
    (
        "compare before.json after.json",
        Run(&[
            "bench walk --threads 1,2 --runs 2 --iterations 100 --json > {tmp}/after.json",
            "compare {tmp}/before.json {tmp}/after.json",
        ]),
    ),
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the repository root")
}

/// The README's `vfscale` command lines, in order, without the prefix and
/// comments.
fn readme_commands(readme: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut in_sh = false;
    for line in readme.lines() {
        let trimmed = line.trim();
        if let Some(fence) = trimmed.strip_prefix("```") {
            in_sh = !in_sh && fence.trim() == "sh";
            continue;
        }
        if let Some(command) = line.strip_prefix(PREFIX).filter(|_| in_sh) {
            let command = command.split(" #").next().unwrap_or_default();
            commands.push(command.trim().to_string());
        }
    }
    commands
}

/// Runs one invocation of the binary, `{tmp}` replaced and `> FILE`
/// honoured; panics, with the output, when it fails or (unless it is
/// `umount`, which says nothing when it succeeds) prints nothing.
fn run(invocation: &str, tmp: &Path) {
    let invocation = invocation.replace("{tmp}", &tmp.display().to_string());
    let mut words = invocation.split_whitespace();
    let mut args = Vec::new();
    let mut stdout_to = None;
    while let Some(word) = words.next() {
        if word == ">" {
            stdout_to = Some(PathBuf::from(words.next().expect("a file after >")));
        } else {
            args.push(word);
        }
    }
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_vfscale")).args(&args).output().expect("run vfscale");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "`vfscale {invocation}` failed ({}):\n{stdout}\n{stderr}", output.status);
    let quiet = args.first() == Some(&"umount");
    assert!(quiet || !stdout.trim().is_empty(), "`vfscale {invocation}` printed nothing:\n{stderr}");
    if let Some(path) = stdout_to {
        fs::write(&path, output.stdout.as_slice()).expect("write the redirected output");
    }
    eprintln!("ok ({:.1} s): vfscale {invocation}", started.elapsed().as_secs_f64());
}

/// Whether `dir` is a mount point now.
fn mounted(dir: &Path) -> bool {
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let dir = dir.display().to_string();
    mounts.lines().any(|line| line.split(' ').nth(1) == Some(dir.as_str()))
}

/// A `vfscale mount` running in the background; unmounted and stopped on
/// drop if the test did not get that far.
struct Server {
    child: Child,
    dir: PathBuf,
}

impl Server {
    fn start(invocation: &str, tmp: &Path) -> Server {
        let invocation = invocation.replace("{tmp}", &tmp.display().to_string());
        let args: Vec<&str> = invocation.split_whitespace().collect();
        let dir = PathBuf::from(*args.get(1).expect("a mount point after `mount`"));
        fs::create_dir_all(&dir).expect("create the mount point");
        // A file, not a pipe: nothing reads the server's output while it runs.
        let log = tmp.join("mount.log");
        let child = Command::new(env!("CARGO_BIN_EXE_vfscale"))
            .args(&args)
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).expect("create the server's log"))
            .spawn()
            .expect("start vfscale mount");
        let mut server = Server { child, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !mounted(&server.dir) {
            if let Some(status) = server.child.try_wait().expect("poll the server") {
                let stderr = fs::read_to_string(&log).unwrap_or_default();
                panic!("`vfscale {invocation}` exited ({status}) before mounting:\n{stderr}");
            }
            assert!(Instant::now() < deadline, "`vfscale {invocation}`: not mounted within 30 s");
            std::thread::sleep(Duration::from_millis(10));
        }
        // What the README does on the mount.
        let sub = server.dir.join("a/b");
        fs::create_dir_all(&sub).expect("mkdir -p on the mount");
        fs::write(sub.join("f"), "hi\n").expect("write a file on the mount");
        assert_eq!(fs::read_to_string(sub.join("f")).expect("read it back"), "hi\n");
        assert_eq!(fs::read_dir(&sub).expect("ls on the mount").count(), 1);
        // A `--bind-ro HOSTDIR:PATH` shows the host directory at PATH:
        // its owner and mode (which, unlike its entries, nothing else on
        // the host changes meanwhile).
        for bind in args.windows(2).filter(|w| w[0] == "--bind-ro").map(|w| w[1]) {
            use std::os::unix::fs::MetadataExt;
            let (host, path) = bind.rsplit_once(':').expect("HOSTDIR:PATH");
            let bound = fs::metadata(server.dir.join(path.trim_start_matches('/'))).expect("stat the bind");
            let host = fs::metadata(host).expect("stat the host directory");
            assert_eq!((bound.mode(), bound.uid(), bound.gid()), (host.mode(), host.uid(), host.gid()), "{bind}");
        }
        eprintln!("ok: vfscale {invocation} (mounted, a file written and read)");
        server
    }

    /// Waits up to 30 s for the server to exit; its status.
    fn wait(&mut self) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("poll the server") {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = Command::new(env!("CARGO_BIN_EXE_vfscale")).arg("umount").arg(&self.dir).status();
            if self.wait().is_none() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }
}

#[test]
fn every_readme_command_runs_in_its_quick_form() {
    let readme = fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let commands = readme_commands(&readme);
    assert!(!commands.is_empty(), "no `{PREFIX}` lines in the README's sh blocks");
    let unknown: Vec<&String> = commands.iter().filter(|c| !QUICK.iter().any(|(k, _)| k == c)).collect();
    assert!(
        unknown.is_empty(),
        "the README shows commands this test has no quick form for (add them to QUICK): {unknown:?}"
    );
    let stale: Vec<&str> = QUICK.iter().map(|(k, _)| *k).filter(|k| !commands.iter().any(|c| c == k)).collect();
    assert!(stale.is_empty(), "QUICK has commands the README no longer shows: {stale:?}");

    let tmp = tempfile::tempdir().expect("a temporary directory");
    let started = Instant::now();
    let mut server: Option<Server> = None;
    let mut seen = BTreeSet::new();
    for command in &commands {
        let quick = &QUICK.iter().find(|(k, _)| k == command).expect("checked above").1;
        // A command shown twice runs once, but every mount has its umount.
        if !seen.insert(command.as_str()) && !matches!(quick, Umount(_)) {
            continue;
        }
        match quick {
            Run(invocations) => invocations.iter().for_each(|i| run(i, tmp.path())),
            Fuse(invocations) => {
                if can_mount(command) {
                    invocations.iter().for_each(|i| run(i, tmp.path()));
                }
            }
            Mount(invocation) => {
                if can_mount(command) {
                    assert!(server.is_none(), "two mounts at once");
                    server = Some(Server::start(invocation, tmp.path()));
                }
            }
            Umount(invocation) => {
                if let Some(mut running) = server.take() {
                    run(invocation, tmp.path());
                    assert!(!mounted(&running.dir), "{} still mounted after umount", running.dir.display());
                    let status = running.wait().expect("the server exits after umount");
                    assert!(status.success(), "the mount server ended with {status}");
                }
            }
        }
    }
    assert!(server.is_none(), "a `mount` without its `umount` in the README");
    eprintln!("all README commands: {:.1} s", started.elapsed().as_secs_f64());
}

/// GitHub's anchor of a heading: lower case, punctuation other than `-`
/// and `_` dropped, spaces turned into `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The lines of `text` outside fenced code blocks, with their numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut in_code = false;
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
                return false;
            }
            !in_code
        })
        .map(|(i, line)| (i + 1, line))
        .collect()
}

/// The anchors of every heading of a Markdown text, numbered as GitHub
/// numbers repeats (`name`, `name-1`, ...).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for (_, line) in prose(text) {
        let Some(heading) = line.strip_prefix('#') else { continue };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = slug(heading);
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// The targets of the `[text](target)` links of a line, inline code left
/// out.
fn link_targets(line: &str) -> Vec<String> {
    let mut outside_code = String::new();
    for (i, part) in line.split('`').enumerate() {
        if i % 2 == 0 {
            outside_code.push_str(part);
        }
    }
    let mut targets = Vec::new();
    let mut rest = outside_code.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest.find(')').unwrap_or(rest.len());
        let target = rest[..end].split_whitespace().next().unwrap_or_default();
        targets.push(target.to_string());
        rest = &rest[end..];
    }
    targets
}

/// README.md and every Markdown file under docs/.
fn documents(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).expect("read a docs directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.extension().is_some_and(|e| e == "md") {
                found.push(path);
            }
        }
    }
    let mut found = vec![root.join("README.md")];
    walk(&root.join("docs"), &mut found);
    found.sort();
    found
}

#[test]
fn every_relative_link_resolves() {
    let root = repo_root();
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in documents(&root) {
        let text = fs::read_to_string(&doc).expect("read a document");
        let name = doc.strip_prefix(&root).unwrap_or(&doc).display().to_string();
        for (number, line) in prose(&text) {
            for target in link_targets(line) {
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, anchor) = target.split_once('#').unwrap_or((target.as_str(), ""));
                let file = if path.is_empty() { doc.clone() } else { doc.parent().expect("a parent").join(path) };
                if !file.exists() {
                    broken.push(format!("{name}:{number}: {target}: no such file"));
                    continue;
                }
                if anchor.is_empty() {
                    continue;
                }
                if !file.extension().is_some_and(|e| e == "md") {
                    broken.push(format!("{name}:{number}: {target}: an anchor into a file that is not Markdown"));
                    continue;
                }
                let target_text = fs::read_to_string(&file).expect("read a linked document");
                if !anchors(&target_text).contains(anchor) {
                    broken.push(format!("{name}:{number}: {target}: no heading with that anchor"));
                }
            }
        }
    }
    assert!(checked > 0, "no relative links found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn slugs_are_githubs() {
    assert_eq!(slug("`private` and efficiency"), "private-and-efficiency");
    assert_eq!(slug("Goals: met, not met, inconclusive"), "goals-met-not-met-inconclusive");
    assert_eq!(slug("One server thread on `/dev/fuse`"), "one-server-thread-on-devfuse");
    assert_eq!(slug("`FUSE_WRITEBACK_CACHE`"), "fuse_writeback_cache");
    let text = "# A\n```sh\n# not a heading\n```\n## A\n#notaheading\n";
    assert_eq!(anchors(text), BTreeSet::from(["a".to_string(), "a-1".to_string()]));
    assert_eq!(link_targets("see [x](a.md#b) and `[y](z.md)` and ![i](img.svg)"), ["a.md#b", "img.svg"]);
}
