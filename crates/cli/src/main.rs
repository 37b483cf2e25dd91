//! The `vfscale` command: benchmarks of the scalable primitives and the VFS,
//! and reproductions of the five seed experiments.

mod bench;
mod harness;
mod stats;
mod workloads;

use bench::{BenchRequest, CellReport};
use clap::{Args, Parser, Subcommand};
use harness::RunPlan;
use std::process::ExitCode;
use workloads::Params;

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
    /// Run the seed experiments with built-in defaults.
    Reproduce(ReproduceArgs),
}

#[derive(Debug, Args)]
struct BenchArgs {
    /// Workload to run (see --list).
    #[arg(required_unless_present = "list")]
    workload: Option<String>,
    /// List the workloads and their variants.
    #[arg(long)]
    list: bool,
    /// Variants to run, comma-separated [default: all of the workload's].
    #[arg(long, value_delimiter = ',')]
    variant: Vec<String>,
    /// Thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,16")]
    threads: Vec<usize>,
    /// Measured runs per cell (after one warm-up run).
    #[arg(long, default_value_t = 5)]
    runs: usize,
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
}

#[derive(Debug, Args)]
struct ReproduceArgs {
    /// Fewer runs and iterations (about a minute).
    #[arg(long)]
    quick: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => bench_command(args),
        Command::Reproduce(args) => reproduce_command(args),
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
    let request = bench_request(&args)?;
    let reports = request.run(|variant, threads| {
        eprintln!("[{}] {variant} x{threads}", request.workload.name);
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports).map_err(|e| e.to_string())?);
    } else {
        print!("{}", describe(&request));
        print!("{}", bench::table(&reports));
    }
    Ok(())
}

fn list_workloads() -> String {
    workloads::all()
        .iter()
        .map(|w| format!("{:<14} {}\n{:<14} variants: {}\n", w.name, w.about, "", w.variants.join(", ")))
        .collect()
}

fn bench_request(args: &BenchArgs) -> Result<BenchRequest, String> {
    let name = args.workload.as_deref().unwrap_or_default();
    let workload = workloads::find(name)
        .ok_or_else(|| format!("unknown workload '{name}' (`vfscale bench --list` lists them)"))?;
    let variants = if args.variant.is_empty() {
        workload.variants.to_vec()
    } else {
        args.variant
            .iter()
            .map(|v| {
                workload.variants.iter().copied().find(|known| known == v).ok_or_else(|| {
                    format!("workload {} has no variant '{v}' (it has: {})", workload.name, workload.variants.join(", "))
                })
            })
            .collect::<Result<_, _>>()?
    };
    if args.threads.is_empty() || args.threads.contains(&0) {
        return Err("--threads needs positive thread counts, e.g. --threads 1,2,16".into());
    }
    if args.runs == 0 {
        return Err("--runs must be at least 1".into());
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
    Ok(BenchRequest { workload, variants, threads: args.threads.clone(), plan: RunPlan { runs: args.runs, iterations }, params })
}

fn describe(request: &BenchRequest) -> String {
    let hold = if request.workload.takes_hold {
        format!(", hold {} us, work {} us", request.params.hold_us, request.params.work_us)
    } else {
        String::new()
    };
    format!(
        "{}: {} iterations per thread, {} runs per cell after a warm-up{hold}\n",
        request.workload.name, request.plan.iterations, request.plan.runs
    )
}

/// Until the seed experiments land, `reproduce` runs the primitive
/// benchmarks that underlie them.
fn reproduce_command(args: ReproduceArgs) -> Result<(), String> {
    let (runs, scale) = if args.quick { (2, 10) } else { (5, 1) };
    let mut sections: Vec<(String, Vec<CellReport>)> = Vec::new();
    let cases: [(&str, Option<u64>); 5] =
        [("prim-list", None), ("prim-read", None), ("prim-lockref", None), ("prim-mprotect", Some(1)), ("prim-mprotect", Some(100))];
    if args.quick {
        println!("--quick: {runs} runs per cell and a tenth of the iterations; figures are noisier");
    }
    for (name, hold_us) in cases {
        let workload = workloads::find(name).expect("built-in workload");
        let params = hold_us.map_or_else(Params::default, |h| Params { hold_us: h, work_us: h });
        let iterations = ((workload.default_iterations)(&params) / scale).max(10);
        let request = BenchRequest {
            workload,
            variants: workload.variants.to_vec(),
            threads: vec![1, 2, 16],
            plan: RunPlan { runs, iterations },
            params,
        };
        let reports = request.run(|variant, threads| eprintln!("[{name}] {variant} x{threads}"));
        sections.push((describe(&request), reports));
    }
    for (heading, reports) in sections {
        println!("\n{heading}{}", bench::table(&reports));
    }
    Ok(())
}
