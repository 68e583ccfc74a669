//! The simulation runner: `sweep` many seeds, or `replay` one.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use paros_sim::check::MUST_REACH_SEEDS_MIN;
use paros_sim::sweep::{self, SeedResult};
use paros_sim::RunOptions;

#[derive(Parser, Debug)]
#[command(name = "paros-sim", about = "deterministic simulation of a paros cell, with audited claims")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Runs seeds S..S+N-1 and prints every claim's counters.
    Sweep {
        /// How many seeds.
        #[arg(long)]
        seeds: u64,
        /// The first seed.
        #[arg(long, default_value_t = 0)]
        start: u64,
        /// Worker threads (each seed still runs on one thread); defaults to the CPU count.
        #[arg(long)]
        threads: Option<usize>,
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
        Command::Sweep { seeds, start, threads, lin_steps } => run_sweep(seeds, start, threads, lin_steps),
        Command::Replay { seed, timeline, history, lin_steps } => run_replay(seed, timeline, history, lin_steps),
    }
}

fn run_sweep(seeds: u64, start: u64, threads: Option<usize>, lin_steps: u64) -> ExitCode {
    let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let options = RunOptions { lin_step_budget: lin_steps, ..RunOptions::default() };
    let s = sweep::sweep(start, seeds, threads, options, &|_| {});
    for (seed, details) in &s.failing {
        println!("violation: seed={seed}");
        for d in details {
            println!("  {d}");
        }
        println!("  replay: {}", replay_command(*seed));
    }
    print!("{}", s.claims);
    print!("{}", s.probes);
    println!(
        "linearizability: histories={} budget_exhausted={} (not violations)",
        s.histories_checked, s.histories_exhausted
    );
    let unreached = s.unreached();
    if seeds >= MUST_REACH_SEEDS_MIN {
        for c in &unreached {
            println!("unreached: claim \"{}\" must be reached in a sweep of {MUST_REACH_SEEDS_MIN}+ seeds", c.name());
        }
    }
    let per_s = seeds as f64 / s.elapsed_s.max(1e-9);
    println!("sweep: seeds={seeds} violations={} seeds_per_s={per_s:.1}", s.violations());
    let _ = std::io::stdout().flush();
    if s.violations() > 0 || (seeds >= MUST_REACH_SEEDS_MIN && !unreached.is_empty()) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
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
    println!("replay: seed={seed} hash={:016x}", report.hash);
    if report.claims.violations() > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
