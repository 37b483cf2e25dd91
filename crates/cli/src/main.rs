//! The `vfscale` command: benchmarks of the scalable primitives and the VFS,
//! and reproductions of the five seed experiments.

mod bench;
mod calibration;
mod commute;
mod compare;
mod harness;
mod host;
mod machine;
mod mount;
mod mount_bench;
mod report;
mod reproduce;
mod stats;
mod workloads;

use bench::BenchRequest;
use calibration::Calibration;
use clap::{Args, Parser, Subcommand};
use harness::RunPlan;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use workloads::Params;

/// mimalloc, not glibc's malloc: a free from a thread other than the
/// allocating one takes the owning arena's lock there, and
/// crossbeam-epoch frees garbage on whichever thread collects it, so
/// create-heavy workloads measured that lock (`docs/benchmarks.md`, "The
/// allocator"). mimalloc's frees from other threads are one atomic push.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (`mimalloc.h`), which
/// libmimalloc-sys does not name; its default is 1000 (ms) in the
/// mimalloc it builds (`options.c`).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keeps freed memory mapped for reuse, unless `MIMALLOC_PURGE_DELAY`
/// asks otherwise. By default mimalloc gives freed pages back to the
/// system after that delay, and benchmark runs then faulted in again
/// what runs before them had freed (16,777 page faults against 356 in
/// five 2-thread `dir-create` runs); the runs that did were up to 3x
/// slower. A `vfscale mount` server keeps its peak memory too.
fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: `mi_option_set` stores without synchronization; this runs
    // first in `main`, before the command starts any thread.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}

#[derive(Debug, Parser)]
#[command(name = "vfscale", version, about = "A scalable VFS core and lock-design lab")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one workload's variants at several thread counts.
    Bench(BenchArgs),
    /// Run the seed experiments with built-in defaults, host kernel beside.
    Reproduce(ReproduceArgs),
    /// Run a host-kernel driver (real sysfs, tmpfs, /proc, locks) like `bench`.
    Host(BenchArgs),
    /// Judge run B against run A (JSON of reproduce, bench or host).
    Compare(CompareArgs),
    /// Which commutative operation pairs vfscale runs conflict-free, and their 2-thread scaling beside the host's.
    Commute(CommuteArgs),
    /// Mount an in-memory VFS on an empty directory (FUSE) until Ctrl-C or `vfscale umount`.
    Mount(mount::MountArgs),
    /// Unmount a `vfscale mount`.
    Umount(mount::UmountArgs),
    /// Measure a fresh mount beside tmpfs in one run, against the mount's goals.
    MountBench(mount_bench::MountBenchArgs),
}

#[derive(Debug, Args)]
struct BenchArgs {
    /// Workload to run (see --list).
    #[arg(required_unless_present = "list")]
    workload: Option<String>,
    /// List the workloads and their variants.
    #[arg(long)]
    list: bool,
    /// Variants to run, comma-separated [default: all of the workload's, `private` last].
    #[arg(long, value_delimiter = ',')]
    variant: Vec<String>,
    /// Thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,16")]
    threads: Vec<usize>,
    /// Measured runs per cell (after one warm-up run).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// `bench` only: runs per cell to go on to, --runs more at a time, while a design's efficiency at 2+
    /// threads is inconclusive, judged then on its 99% interval [default: --runs, none more].
    #[arg(long, value_name = "N")]
    max_runs: Option<usize>,
    /// Operations per thread per run [default: the workload's].
    #[arg(long)]
    iterations: Option<u64>,
    /// Microseconds of work while holding the lock (prim-mprotect).
    #[arg(long)]
    hold_us: Option<u64>,
    /// Microseconds of work outside the lock (prim-mprotect) [default: --hold-us].
    #[arg(long)]
    work_us: Option<u64>,
    /// Print a JSON array (one object per cell) instead of a table.
    #[arg(long)]
    json: bool,
    /// `host` only: run the driver in these directories (tmpfs, ext4, a
    /// vfscale mount...), comma-separated, side by side in one run; each
    /// is a variant named after its file system.
    #[arg(long, value_delimiter = ',')]
    dir: Vec<PathBuf>,
}

#[derive(Debug, Args)]
struct ReproduceArgs {
    /// Experiments to run [default: all]: kernfs, inode-list, rwsem, proc, locks.
    experiments: Vec<String>,
    /// Fewer runs and a fifth of the iterations (about a minute).
    #[arg(long)]
    quick: bool,
    /// Also write every cell and verdict, with machine facts, to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also write an HTML report with SVG charts into DIR.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,16")]
    threads: Vec<usize>,
    /// Runs per cell a case goes on to, 5 (--quick: 4) more at a time, while a design's efficiency at 2+
    /// threads is inconclusive, judged then on its 99% interval [default: 5, --quick: 4; none more].
    #[arg(long, value_name = "N")]
    max_runs: Option<usize>,
}

#[derive(Debug, Args)]
struct CommuteArgs {
    /// Pairs to run [default: all] (see --list).
    pairs: Vec<String>,
    /// List the pairs, their operations and why each commutes.
    #[arg(long)]
    list: bool,
    /// Run only the conflict checker, measure nothing (seconds).
    #[arg(long, conflicts_with_all = ["quick", "runs", "max_runs", "iterations"])]
    check_only: bool,
    /// 3 runs per cell of about 5 ms each, none more for undecided pairs; figures are noisier.
    #[arg(long)]
    quick: bool,
    /// Measured runs per cell, after one warm-up run [default: 25, --quick: 3].
    #[arg(long)]
    runs: Option<usize>,
    /// Runs per cell a pair left inconclusive goes on to, --runs more at a time, judged then on its 99%
    /// interval [default: 4 x --runs, --quick: --runs; equal to --runs: none more].
    #[arg(long, value_name = "N")]
    max_runs: Option<usize>,
    /// Operations per thread per run [default: calibrated per pair so that a 1-thread run takes about 20 ms].
    #[arg(long)]
    iterations: Option<u64>,
    /// Also write every pair's verdict and figures, with the summary, to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also write an HTML report of the pair matrix into DIR.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Judge scaling together with an earlier run's JSON (--json FILE): a pair whose verdict differs
    /// there is inconclusive here.
    #[arg(long, value_name = "FILE", conflicts_with = "check_only")]
    against: Option<PathBuf>,
    /// Also enumerate pairs of calls with every argument relation, decide on the host's tmpfs which commute,
    /// and run the checker on those (checker only: the generated cases are not timed).
    #[arg(long)]
    generate: bool,
}

#[derive(Debug, Args)]
struct CompareArgs {
    /// The baseline run.
    a: PathBuf,
    /// The run judged against it.
    b: PathBuf,
}

fn main() -> ExitCode {
    keep_freed_memory();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => bench_command(args),
        Command::Reproduce(args) => reproduce_command(args),
        Command::Host(args) => host_command(args),
        Command::Compare(args) => compare::load(&args.a).and_then(|a| {
            let b = compare::load(&args.b)?;
            print!("{}", compare::render(&a, &b, &args.a.display().to_string(), &args.b.display().to_string()));
            Ok(())
        }),
        Command::Commute(args) => commute_command(args),
        Command::Mount(args) => mount::mount_command(args),
        Command::Umount(args) => mount::umount_command(args),
        Command::MountBench(args) => mount_bench::mount_bench_command(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("vfscale: {message}");
            ExitCode::from(2)
        }
    }
}

fn bench_command(args: BenchArgs) -> Result<(), String> {
    if args.list {
        print!("{}", list_workloads());
        return Ok(());
    }
    if !args.dir.is_empty() {
        return Err("--dir applies to `vfscale host`, whose drivers run on real file systems".into());
    }
    let request = bench_request(&args)?;
    eprintln!("[calibration] a private table per thread at 1 and {:?} threads", request.threads);
    let calibration = Calibration::measure(&request.threads, request.plan.runs, calibration::RUN_TIME);
    let reports = request.run(|variant, threads, run| {
        if run == 0 {
            eprintln!("[{}] {variant} x{threads} (warm-up)", request.workload.name);
        }
    });
    let machine = machine::Machine::this();
    if args.json {
        let run = serde_json::json!({
            "vfscale_version": env!("CARGO_PKG_VERSION"),
            "machine": machine,
            "calibration": calibration,
            "runs": request.plan.runs,
            "max_runs": request.plan.max_runs,
            "cells": reports,
        });
        println!("{}", serde_json::to_string_pretty(&run).map_err(|e| e.to_string())?);
    } else {
        println!("{}, {} CPUs ({}); {}", machine.kernel, machine.cpus, machine.cpu_model, calibration.line());
        print!("{}", describe(&request));
        print!("{}", bench::table(&reports));
        let judged = [
            bench::efficiency_line(&reports),
            bench::more_rounds_line(&reports, request.plan.runs, request.plan.max_runs),
        ];
        for line in judged.into_iter().chain([bench::noise_line(&reports)]).flatten() {
            println!("{line}");
        }
        for note in calibration.ceiling_notes(&reports) {
            println!("{note}");
        }
    }
    Ok(())
}

fn list_workloads() -> String {
    workloads::all()
        .iter()
        .map(|w| format!("{:<14} {}\n{:<14} variants: {}\n", w.name, w.about, "", w.all_variants().join(", ")))
        .collect()
}

fn bench_request(args: &BenchArgs) -> Result<BenchRequest, String> {
    let name = args.workload.as_deref().unwrap_or_default();
    let workload = workloads::find(name)
        .ok_or_else(|| format!("unknown workload '{name}' (`vfscale bench --list` lists them)"))?;
    let known = workload.all_variants();
    let variants = if args.variant.is_empty() {
        known
    } else {
        args.variant
            .iter()
            .map(|v| {
                known.iter().copied().find(|k| k == v).ok_or_else(|| {
                    format!("workload {} has no variant '{v}' (it has: {})", workload.name, known.join(", "))
                })
            })
            .collect::<Result<_, _>>()?
    };
    check_plan(&args.threads, args.runs)?;
    let max_runs = max_runs(args.max_runs, args.runs, "--runs")?;
    let judged = variants.contains(&workloads::PRIVATE) && variants.len() > 1;
    if max_runs > args.runs && !(judged && args.threads.contains(&1) && args.threads.iter().any(|&t| t > 1)) {
        return Err("--max-runs goes on while an efficiency is undecided, which needs `private`, a design, \
                    1 thread and a count above 1 among the cells"
            .into());
    }
    if !workload.takes_hold && (args.hold_us.is_some() || args.work_us.is_some()) {
        return Err(format!("--hold-us and --work-us apply to prim-mprotect, not {}", workload.name));
    }
    let hold_us = args.hold_us.unwrap_or(Params::default().hold_us);
    let params = Params { hold_us, work_us: args.work_us.unwrap_or(hold_us) };
    let iterations = args.iterations.unwrap_or_else(|| (workload.default_iterations)(&params));
    if iterations == 0 {
        return Err("--iterations must be at least 1".into());
    }
    Ok(BenchRequest {
        workload,
        variants,
        threads: args.threads.clone(),
        plan: RunPlan { max_runs, ..RunPlan::new(args.runs, iterations) },
        params,
    })
}

fn describe(request: &BenchRequest) -> String {
    let hold = if request.workload.takes_hold {
        format!(", hold {} us, work {} us", request.params.hold_us, request.params.work_us)
    } else {
        String::new()
    };
    let plan = request.plan;
    format!(
        "{}: {} iterations per thread, {} runs per cell after a warm-up{}, runs of all cells interleaved{hold}\n",
        request.workload.name,
        plan.iterations,
        plan.runs,
        bench::up_to(plan.runs, plan.max_runs)
    )
}

fn host_command(args: BenchArgs) -> Result<(), String> {
    if args.list {
        for driver in host::all() {
            println!("{:<14} {}", driver.name, driver.about);
        }
        return Ok(());
    }
    let name = args.workload.as_deref().unwrap_or_default();
    let driver =
        host::find(name).ok_or_else(|| format!("no host driver '{name}' (`vfscale host --list` lists them)"))?;
    let mut targets = host::label_dirs(&args.dir);
    let variants: Vec<&str> =
        if targets.is_empty() { vec![host::VARIANT] } else { targets.iter().map(|t| t.label).collect() };
    if let Some(v) = args.variant.iter().find(|v| !variants.contains(&v.as_str())) {
        return Err(format!("host {name} has no variant '{v}' here (it has: {})", variants.join(", ")));
    }
    if !args.variant.is_empty() {
        targets.retain(|t| args.variant.iter().any(|v| v == t.label));
    }
    if args.hold_us.is_some() || args.work_us.is_some() {
        return Err("--hold-us and --work-us apply to vfscale's prim-mprotect, not to host drivers".into());
    }
    if args.max_runs.is_some() {
        return Err(
            "--max-runs applies to `vfscale bench`: a host driver has no `private` to judge an efficiency by".into()
        );
    }
    if !targets.is_empty() && !driver.takes_dir() {
        return Err(format!("host {name} runs where its seed ran; --dir applies to the file drivers (inode-exit, dir-create, dir-unlink, file-overwrite, walk, flock01..lease02)"));
    }
    check_plan(&args.threads, args.runs)?;
    let iterations = args.iterations.unwrap_or(driver.default_iterations);
    if iterations == 0 {
        return Err("--iterations must be at least 1".into());
    }
    let plan = RunPlan::new(args.runs, iterations);
    let measured = host::measure(driver, &targets, &args.threads, plan, |v, t, run| {
        if run == 0 {
            eprintln!("[host {name}] {v} x{t}");
        }
    });
    let (reports, skipped) = match measured {
        Ok(done) => done,
        Err(reason) => {
            eprintln!("host {name}: skipped: {reason}");
            return Ok(());
        }
    };
    for reason in &skipped {
        eprintln!("host {name}: skipped in {reason}");
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports).map_err(|e| e.to_string())?);
    } else {
        println!(
            "host {name}: {}; {iterations} iterations per thread, {} runs per cell after a warm-up",
            driver.about, args.runs
        );
        print!("{}", bench::table(&reports));
        if let Some(note) = reports.first().and_then(|r| r.note.as_ref()) {
            println!("note: {note}");
        }
    }
    Ok(())
}

/// `--max-runs`, or `runs` where it is not given; never below `runs`
/// (what the error calls `runs_are`).
fn max_runs(max_runs: Option<usize>, runs: usize, runs_are: &str) -> Result<usize, String> {
    match max_runs {
        Some(max) if max < runs => Err(format!("--max-runs ({max}) must be at least {runs_are} ({runs})")),
        Some(max) => Ok(max),
        None => Ok(runs),
    }
}

fn check_plan(threads: &[usize], runs: usize) -> Result<(), String> {
    if threads.is_empty() || threads.contains(&0) {
        return Err("--threads needs positive thread counts, e.g. --threads 1,2,16".into());
    }
    if runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    Ok(())
}

fn reproduce_command(args: ReproduceArgs) -> Result<(), String> {
    let experiments: Vec<&reproduce::Experiment> = if args.experiments.is_empty() {
        reproduce::EXPERIMENTS.iter().collect()
    } else {
        args.experiments
            .iter()
            .map(|name| {
                reproduce::find(name).ok_or_else(|| {
                    let known: Vec<_> = reproduce::EXPERIMENTS.iter().map(|e| e.name).collect();
                    format!("no experiment '{name}' (there are: {})", known.join(", "))
                })
            })
            .collect::<Result<_, _>>()?
    };
    check_plan(&args.threads, 1)?;
    let mut options = reproduce::Options { quick: args.quick, threads: args.threads.clone(), max_runs: None };
    options.max_runs = Some(max_runs(args.max_runs, options.runs(), "the runs per cell")?);
    if options.max_runs() > options.runs() && !(args.threads.contains(&1) && args.threads.iter().any(|&t| t > 1)) {
        return Err("--max-runs goes on while an efficiency is undecided, which needs 1 thread and a count above 1 \
                    among --threads"
            .into());
    }
    let machine = machine::Machine::this();
    println!(
        "vfscale {} reproduce on {}, {} CPUs ({}): {} runs per cell after a warm-up{}, threads {}",
        env!("CARGO_PKG_VERSION"),
        machine.kernel,
        machine.cpus,
        machine.cpu_model,
        options.runs(),
        bench::up_to(options.runs(), options.max_runs()),
        options.threads.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",")
    );
    if args.quick {
        println!("--quick: {} runs per cell and a fifth of the iterations; figures are noisier", options.runs());
    }
    eprintln!("[calibration] a private table per thread");
    let calibration = Calibration::measure(&options.threads, options.runs(), calibration::RUN_TIME);
    println!("{}", calibration.line());
    let bar = ProgressBar::new(reproduce::run_count(&experiments, &options) as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} runs  {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let mut results = Vec::new();
    for experiment in experiments {
        let result = reproduce::run(experiment, &options, &mut |what: &str, planned| {
            if planned == reproduce::Planned::No {
                bar.inc_length(1);
            }
            bar.set_message(what.to_string());
            bar.inc(1);
        });
        let text = reproduce::render(experiment, &result, &options);
        bar.suspend(|| print!("{text}"));
        results.push(result);
    }
    bar.finish_and_clear();
    print!("{}", reproduce::summary(&results, &calibration));
    let reproduction = reproduce::Reproduction {
        vfscale_version: env!("CARGO_PKG_VERSION"),
        machine,
        quick: args.quick,
        runs: options.runs(),
        max_runs: options.max_runs(),
        threads: options.threads,
        calibration,
        experiments: results,
    };
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&reproduction).map_err(|e| e.to_string())?;
        std::fs::write(path, json + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("JSON: {}", path.display());
    }
    if let Some(dir) = &args.report {
        let index = report::write(&reproduction, dir)?;
        println!("report: {}", index.display());
    }
    Ok(())
}

fn commute_command(args: CommuteArgs) -> Result<(), String> {
    if args.list {
        for pair in commute::pairs::all() {
            println!("{:<26} {} || {}\n{:<26} {}", pair.name, pair.ops[0], pair.ops[1], "", pair.commutes_because);
        }
        return Ok(());
    }
    let pairs = commute::select(&args.pairs)?;
    // 25 rounds by default: on a shared VM the ratio of two runs side by
    // side moves by a fifth from one round to the next, and with nine
    // rounds the 95% intervals of a quarter of the pairs (14 of 56, most
    // of them at 1.0 x private) reached below 0.9 (docs/results/commute.md).
    let (runs, run_ms) = if args.quick { (3, 5) } else { (25, 20) };
    let runs = args.runs.unwrap_or(runs);
    let plan = commute::Plan {
        runs,
        // Four looks at most: with the first at 95% and each later one at
        // 99%, a pair at the bar is called met at most 4% of the time
        // (nominally: see docs/commutativity.md). --quick stays quick.
        max_runs: args.max_runs.unwrap_or(if args.quick { runs } else { runs.saturating_mul(4) }),
        iterations: args.iterations,
        run_time: std::time::Duration::from_millis(run_ms),
    };
    check_plan(&[1, 2], plan.runs)?;
    max_runs(Some(plan.max_runs), plan.runs, "--runs")?;
    if plan.iterations == Some(0) {
        return Err("--iterations must be at least 1".into());
    }
    // The earlier run, and where the results go, are checked now, not
    // after a minute of runs.
    let against = args.against.as_deref().map(commute::against::Previous::load).transpose()?;
    let json_file = args
        .json
        .as_ref()
        .map(|path| std::fs::File::create(path).map_err(|e| format!("cannot write {}: {e}", path.display())))
        .transpose()?;
    if let Some(dir) = &args.report {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let options = commute::Options {
        filter: args.pairs.clone(),
        timed: !args.check_only,
        plan,
        quick: args.quick,
        generate: args.generate,
        against,
    };
    let generated = if args.generate { commute::generate::cases().len() } else { 0 };
    let machine = machine::Machine::this();
    let load = commute::load_average();
    println!(
        "vfscale {} commute on {}, {} CPUs ({}), load average {:.2} {:.2} {:.2}: {} pairs, {}",
        env!("CARGO_PKG_VERSION"),
        machine.kernel,
        machine.cpus,
        machine.cpu_model,
        load[0],
        load[1],
        load[2],
        pairs.len(),
        if options.generate { format!("and {generated} generated cases (checker only), ") } else { String::new() }
            + &if options.timed {
                let each = plan.iterations.map_or_else(
                    || format!("operations per run calibrated to about {run_ms} ms per 1-thread run"),
                    |n| format!("{n} operations per thread per run"),
                );
                let more = if plan.max_runs > plan.runs {
                    format!(" (up to {} for a pair left undecided)", plan.max_runs)
                } else {
                    String::new()
                };
                format!("{} runs per cell after a warm-up{more}, {each}", plan.runs)
            } else {
                "checker only".to_string()
            }
    );
    if options.timed && load[0] > 0.5 {
        println!("note: the machine is not quiet (load {:.2}); S2 figures are noisier", load[0]);
    }
    if options.timed && machine.cpus < 2 {
        println!("note: one CPU here, so both threads of a 2-thread run share it; S2 says nothing about scaling");
    }
    let bar = ProgressBar::new((pairs.len() + generated) as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} pairs  {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let result = commute::run(&options, |index, name, step| {
        bar.set_position(index as u64);
        bar.set_message(format!("{name}: {step}"));
    });
    bar.finish_and_clear();
    let run = result?;
    print!("{}", commute::table(&run));
    if let (Some(path), Some(mut file)) = (&args.json, json_file) {
        let json = serde_json::to_string_pretty(&run).map_err(|e| e.to_string())?;
        file.write_all((json + "\n").as_bytes()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("JSON: {}", path.display());
    }
    if let Some(dir) = &args.report {
        let index = commute::write_report(&run, dir)?;
        println!("report: {}", index.display());
    }
    Ok(())
}

#[cfg(test)]
mod allocator_tests {
    use super::MI_OPTION_PURGE_DELAY;

    /// The option the command sets is the purge delay: the one whose
    /// default is 1000 ms (`options.c`), or what `MIMALLOC_PURGE_DELAY`
    /// says (tests do not run `main`).
    #[test]
    fn the_purge_delay_option_is_the_one_named() {
        let expected = std::env::var("MIMALLOC_PURGE_DELAY").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
        // SAFETY: only reads an option, which nothing in the tests sets.
        let delay = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(delay, expected, "mimalloc's option {MI_OPTION_PURGE_DELAY} is not the purge delay");
    }
}
