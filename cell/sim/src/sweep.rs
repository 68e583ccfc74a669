//! Many seeds: each runs alone on one thread (a world is single-threaded); threads only share
//! the next seed to take. A panic inside a run (a core assertion) is caught and reported with
//! its seed.

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::check::{Claim, Claims, ProbeCounts};
use crate::world::{RunOptions, RunReport, run_seed};

/// What one seed ended with.
#[derive(Debug)]
pub enum SeedResult {
    Ran(Box<RunReport>),
    /// The run panicked: the message and where.
    Panicked(String),
}

/// A sweep's totals.
#[derive(Debug, Default)]
pub struct Summary {
    /// Seeds run (a time budget decides it at the end).
    pub seeds: u64,
    pub claims: Claims,
    /// For each claim (in [`Claim::ALL`] order), the seeds in which it was reached at least once.
    pub seeds_reached: Vec<u64>,
    /// Seeds with a violation or a panic, with what went wrong, in seed order.
    pub failing: Vec<(u64, Vec<String>)>,
    pub histories_checked: u64,
    pub histories_exhausted: u64,
    pub probes: ProbeCounts,
    pub events: u64,
    pub sim_ns: u64,
    pub elapsed_s: f64,
    /// The longest stall of the progress claim, and the seed it happened in.
    pub longest_stall: Option<(u64, u64)>,
    /// The registry's figures of every seed that ran, in seed order.
    pub registry: Vec<(u64, crate::registry::RegistryFigures)>,
}

impl Summary {
    /// Violations plus panics.
    #[must_use]
    pub fn violations(&self) -> u64 {
        self.claims.violations() + self.panics()
    }

    /// Seeds whose run panicked.
    #[must_use]
    pub fn panics(&self) -> u64 {
        self.failing.iter().filter(|(_, d)| d.iter().any(|l| l.starts_with("panic"))).count() as u64
    }

    /// Must-reach claims this sweep never reached.
    #[must_use]
    pub fn unreached(&self) -> Vec<Claim> {
        Claim::ALL.into_iter().filter(|c| c.must_reach() && self.claims.count(*c).reached == 0).collect()
    }

    /// The share of seeds (0..=1) in which `claim` was reached.
    #[must_use]
    pub fn reach_share(&self, claim: Claim) -> f64 {
        let i = Claim::ALL.iter().position(|c| *c == claim).expect("every claim is in ALL");
        self.seeds_reached.get(i).copied().unwrap_or(0) as f64 / self.seeds.max(1) as f64
    }

    /// Must-reach claims reached in fewer than [`Claim::reach_share_min`] of the seeds.
    #[must_use]
    pub fn under_reached(&self) -> Vec<(Claim, f64)> {
        Claim::ALL
            .into_iter()
            .filter_map(|c| c.reach_share_min().map(|min| (c, min)))
            .filter(|(c, min)| self.reach_share(*c) < *min)
            .map(|(c, _)| (c, self.reach_share(c)))
            .collect()
    }

    fn note_stall(&mut self, seed: u64, ns: u64) {
        if ns > 0 && self.longest_stall.is_none_or(|(_, longest)| ns > longest) {
            self.longest_stall = Some((seed, ns));
        }
    }

    fn add(&mut self, seed: u64, result: SeedResult) {
        self.seeds += 1;
        if self.seeds_reached.is_empty() {
            self.seeds_reached = vec![0; Claim::ALL.len()];
        }
        match result {
            SeedResult::Ran(r) => {
                self.claims.merge(&r.claims);
                for (i, c) in Claim::ALL.iter().enumerate() {
                    if r.claims.count(*c).reached > 0 {
                        self.seeds_reached[i] += 1;
                    }
                }
                self.histories_checked += r.histories_checked;
                self.histories_exhausted += r.histories_exhausted;
                self.probes.merge(&r.probes);
                self.events += r.events;
                self.sim_ns += r.sim_ns;
                self.note_stall(seed, r.longest_stall_ns);
                self.registry.push((seed, r.registry));
                if r.claims.violations() > 0 {
                    let details =
                        r.claims.details.iter().map(|(c, d)| format!("claim \"{}\": {d}", c.name())).collect();
                    self.failing.push((seed, details));
                }
            }
            SeedResult::Panicked(msg) => self.failing.push((seed, vec![format!("panic: {msg}")])),
        }
    }
}

/// Which seeds a sweep runs.
#[derive(Clone, Debug)]
pub enum Seeds {
    /// `start .. start + count`.
    Range { start: u64, count: u64 },
    /// `start, start + 1, …` until the time budget is spent (seeds already started finish).
    For { start: u64, budget: Duration },
    /// Exactly these (e.g. every seed that ever failed).
    List(Vec<u64>),
}

impl Seeds {
    /// The seed at `index`, or `None` when the sweep is done.
    fn nth(&self, index: u64, began: Instant) -> Option<u64> {
        match self {
            Seeds::Range { start, count } => (index < *count).then(|| start + index),
            Seeds::For { start, budget } => (began.elapsed() < *budget).then(|| start + index),
            Seeds::List(seeds) => seeds.get(index as usize).copied(),
        }
    }
}

/// Reads a seed list: one seed per line; `#` starts a comment; blank lines are skipped.
///
/// # Errors
/// A line that is not a seed, naming its number.
pub fn parse_seed_list(text: &str) -> Result<Vec<u64>, String> {
    let mut seeds = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let bare = line.split('#').next().unwrap_or("").trim();
        if bare.is_empty() {
            continue;
        }
        seeds.push(bare.parse().map_err(|e| format!("line {}: {bare:?} is not a seed: {e}", n + 1))?);
    }
    Ok(seeds)
}

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: std::sync::Once = std::sync::Once::new();

/// Replaces the panic hook (once per process) with one that keeps the message for the report.
fn install_quiet_hook() {
    HOOK.call_once(|| {
        panic::set_hook(Box::new(|info| {
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic".to_owned());
            let place = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{message}{place}")));
        }))
    });
}

/// Runs one seed, catching a panic.
#[must_use]
pub fn run_caught(seed: u64, options: RunOptions) -> SeedResult {
    install_quiet_hook();
    match panic::catch_unwind(AssertUnwindSafe(|| run_seed(seed, options))) {
        Ok(report) => SeedResult::Ran(Box::new(report)),
        Err(_) => SeedResult::Panicked(LAST_PANIC.with(|p| p.borrow_mut().take()).unwrap_or_else(|| "panic".into())),
    }
}

/// Runs `seeds` on `jobs` threads; `progress` is told of each finished seed. Each worker folds
/// its seeds into its own summary (nothing per seed is kept but what failed), and the summaries
/// are added at the end, in seed order for the failures.
pub fn sweep(seeds: &Seeds, jobs: usize, options: RunOptions, progress: &(dyn Fn(u64) + Sync)) -> Summary {
    let began = Instant::now();
    let next = AtomicU64::new(0);
    let total: Mutex<Summary> = Mutex::new(Summary { seeds_reached: vec![0; Claim::ALL.len()], ..Summary::default() });
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| {
                let mut mine = Summary { seeds_reached: vec![0; Claim::ALL.len()], ..Summary::default() };
                while let Some(seed) = seeds.nth(next.fetch_add(1, Ordering::Relaxed), began) {
                    let r = run_caught(seed, options);
                    progress(seed);
                    mine.add(seed, r);
                }
                total.lock().expect("no thread panics holding the lock").absorb(mine);
            });
        }
    });
    let mut summary = total.into_inner().expect("threads are done");
    summary.failing.sort_by_key(|(seed, _)| *seed);
    summary.registry.sort_by_key(|(seed, _)| *seed);
    summary.elapsed_s = began.elapsed().as_secs_f64();
    summary
}

impl Summary {
    fn absorb(&mut self, other: Summary) {
        self.seeds += other.seeds;
        self.claims.merge(&other.claims);
        for (a, b) in self.seeds_reached.iter_mut().zip(&other.seeds_reached) {
            *a += b;
        }
        self.failing.extend(other.failing);
        self.registry.extend(other.registry);
        self.histories_checked += other.histories_checked;
        self.histories_exhausted += other.histories_exhausted;
        self.probes.merge(&other.probes);
        self.events += other.events;
        self.sim_ns += other.sim_ns;
        if let Some((seed, ns)) = other.longest_stall {
            self.note_stall(seed, ns);
        }
    }
}
