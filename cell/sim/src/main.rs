//! The simulation runner: `sweep` many seeds, or `replay` one.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use paros_sim::RunOptions;
use paros_sim::check::Claim;
use paros_sim::check::MUST_REACH_SEEDS_MIN;
use paros_sim::sweep::{self, SeedResult, Seeds};

/// The sweeps allocate per message and per event: mimalloc, as the `paros` binary uses.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(name = "paros-sim", about = "deterministic simulation of a paros cell, with audited claims")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Runs seeds in parallel and prints every claim's counters: S..S+N-1 (`--seeds`), or from
    /// S until a time budget is spent (`--duration-s`), or the seeds of a list (`--seed-list`).
    Sweep {
        /// How many seeds.
        #[arg(long, conflicts_with_all = ["duration_s", "seed_list"])]
        seeds: Option<u64>,
        /// Run seeds from `--start` on until this many seconds have passed.
        #[arg(long, conflicts_with = "seed_list")]
        duration_s: Option<u64>,
        /// Run exactly the seeds in FILE (one per line, `#` comments), e.g. every seed that ever failed.
        #[arg(long, value_name = "FILE")]
        seed_list: Option<std::path::PathBuf>,
        /// The first seed.
        #[arg(long, default_value_t = 0)]
        start: u64,
        /// Seeds run at once (each on its own thread); defaults to the CPU count.
        #[arg(long, alias = "threads")]
        jobs: Option<usize>,
        /// Steps the linearizability search may take per journal history.
        #[arg(long, default_value_t = RunOptions::default().lin_step_budget)]
        lin_steps: u64,
    },
    /// Runs one seed and prints the digest of its event trace.
    Replay {
        #[arg(long)]
        seed: u64,
        /// Print every event.
        #[arg(long)]
        timeline: bool,
        /// Write every journal's client history to FILE as JSON lines (docs/sim-history.md).
        #[arg(long, value_name = "FILE")]
        history: Option<std::path::PathBuf>,
        #[arg(long, default_value_t = RunOptions::default().lin_step_budget)]
        lin_steps: u64,
    },
}

fn replay_command(seed: u64) -> String {
    format!("cargo run --release -p paros-sim -- replay --seed {seed} --timeline")
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Sweep { seeds, duration_s, seed_list, start, jobs, lin_steps } => {
            let plan = match (seeds, duration_s, seed_list) {
                (Some(count), _, _) => Seeds::Range { start, count },
                (None, Some(secs), _) => Seeds::For { start, budget: std::time::Duration::from_secs(secs) },
                (None, None, Some(path)) => match std::fs::read_to_string(&path)
                    .map_err(|e| e.to_string())
                    .and_then(|t| sweep::parse_seed_list(&t))
                {
                    Ok(list) => Seeds::List(list),
                    Err(e) => {
                        eprintln!("cannot read the seed list {}: {e}", path.display());
                        return ExitCode::from(2);
                    }
                },
                (None, None, None) => {
                    eprintln!("say which seeds: --seeds N, --duration-s SECS or --seed-list FILE");
                    return ExitCode::from(2);
                }
            };
            run_sweep(&plan, jobs, lin_steps)
        }
        Command::Replay { seed, timeline, history, lin_steps } => run_replay(seed, timeline, history, lin_steps),
    }
}

fn run_sweep(plan: &Seeds, jobs: Option<usize>, lin_steps: u64) -> ExitCode {
    let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let options = RunOptions { lin_step_budget: lin_steps, ..RunOptions::default() };
    let s = sweep::sweep(plan, jobs, options, &|_| {});
    for (seed, details) in &s.failing {
        println!("violation: seed={seed}");
        for d in details {
            println!("  {d}");
        }
        println!("  replay: {}", replay_command(*seed));
    }
    print!("{}", s.claims);
    for claim in Claim::ALL.into_iter().filter(|c| c.must_reach()) {
        println!("reached: claim \"{}\" in {:.1}% of seeds", claim.name(), 100.0 * s.reach_share(claim));
    }
    print!("{}", s.probes);
    println!(
        "linearizability: histories={} budget_exhausted={} (not violations)",
        s.histories_checked, s.histories_exhausted
    );
    match s.longest_stall {
        Some((seed, ns)) => println!("progress: longest stall {} ms (seed {seed})", ns / 1_000_000),
        None => println!("progress: longest stall 0 ms"),
    }
    for (seed, f) in &s.registry {
        println!("registry: seed={seed} {}", registry_line(f));
    }
    if let Some((seed, f)) = s.registry.iter().max_by_key(|(_, f)| f.retained_bytes_max) {
        let over = s.registry.iter().filter(|(_, f)| !f.bounded()).count();
        println!(
            "registry: sweep max retained {} bytes / {} records (seed {seed}, bound {} bytes); \
             seeds over the bound: {over}",
            f.retained_bytes_max,
            s.registry.iter().map(|(_, f)| f.retained_records_max).max().unwrap_or(0),
            f.bound_bytes()
        );
    }
    let judged = s.seeds >= MUST_REACH_SEEDS_MIN;
    let unreached = if judged { s.unreached() } else { Vec::new() };
    for c in &unreached {
        println!("unreached: claim \"{}\" must be reached in a sweep of {MUST_REACH_SEEDS_MIN}+ seeds", c.name());
    }
    let under = if judged { s.under_reached() } else { Vec::new() };
    for (c, share) in &under {
        let min = c.reach_share_min().unwrap_or(0.0);
        println!("under-reached: claim \"{}\" in {:.1}% of seeds, below {:.0}%", c.name(), 100.0 * share, 100.0 * min);
    }
    let per_s = s.seeds as f64 / s.elapsed_s.max(1e-9);
    println!(
        "sweep: seeds={} jobs={jobs} violations={} elapsed_s={:.1} seeds_per_s={per_s:.1}",
        s.seeds,
        s.violations(),
        s.elapsed_s
    );
    let _ = std::io::stdout().flush();
    if s.violations() > 0 || !unreached.is_empty() || !under.is_empty() { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

fn run_replay(seed: u64, timeline: bool, history: Option<std::path::PathBuf>, lin_steps: u64) -> ExitCode {
    let options = RunOptions { timeline, lin_step_budget: lin_steps, keep_history: history.is_some() };
    let report = match sweep::run_caught(seed, options) {
        SeedResult::Ran(r) => r,
        SeedResult::Panicked(msg) => {
            println!("panic: {msg}");
            println!("replay: seed={seed} hash=none");
            return ExitCode::FAILURE;
        }
    };
    if let Some(path) = history {
        let out = paros_sim::check::history::export(&report.header, &report.history);
        if let Err(e) = std::fs::write(&path, out) {
            eprintln!("cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    for (claim, detail) in &report.claims.details {
        println!("violation: claim \"{}\": {detail}", claim.name());
    }
    print!("{}", report.claims);
    println!(
        "run: events={} sim_ms={} histories={} budget_exhausted={}",
        report.events,
        report.sim_ns / 1_000_000,
        report.histories_checked,
        report.histories_exhausted
    );
    println!("progress: longest stall {} ms", report.longest_stall_ns / 1_000_000);
    println!("registry: {}", registry_line(&report.registry));
    println!("replay: seed={seed} hash={:016x}", report.hash);
    if report.claims.violations() > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

/// The registry's figures of one run, as the runner prints them.
fn registry_line(f: &paros_sim::registry::RegistryFigures) -> String {
    format!(
        "retained_max={} records / {} bytes (bound 4 x state {} + run {} = {} bytes{}) \
         runs={} truncations={} coordinators={} verdicts={}",
        f.retained_records_max,
        f.retained_bytes_max,
        f.state_bytes_max,
        f.run_bytes_max,
        f.bound_bytes(),
        if f.bounded() { "" } else { ", OVER" },
        f.runs_planned,
        f.truncations,
        f.coordinators,
        f.verdicts
    )
}
