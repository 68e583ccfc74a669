//! Many seeds: each runs alone on one thread (a world is single-threaded); threads only share
//! the next seed to take. A panic inside a run (a core assertion) is caught and reported with
//! its seed.

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

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
    pub seeds: u64,
    pub claims: Claims,
    /// Seeds with a violation or a panic, with what went wrong.
    pub failing: Vec<(u64, Vec<String>)>,
    pub histories_checked: u64,
    pub histories_exhausted: u64,
    pub probes: ProbeCounts,
    pub events: u64,
    pub sim_ns: u64,
    pub elapsed_s: f64,
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
}

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: std::sync::Once = std::sync::Once::new();

/// Replaces the panic hook (once per process) with one that keeps the message for the report.
fn install_quiet_hook() {
    HOOK.call_once(|| panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic".to_owned());
        let place = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{message}{place}")));
    })));
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

/// Runs seeds `start .. start + count` on `threads` threads; `progress` is told of each seed.
pub fn sweep(start: u64, count: u64, threads: usize, options: RunOptions, progress: &(dyn Fn(u64) + Sync)) -> Summary {
    let began = Instant::now();
    let next = AtomicU64::new(0);
    let results: Mutex<Vec<(u64, SeedResult)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        break;
                    }
                    let seed = start + i;
                    let r = run_caught(seed, options);
                    progress(seed);
                    results.lock().expect("no thread panics holding the lock").push((seed, r));
                }
            });
        }
    });
    let mut results = results.into_inner().expect("threads are done");
    results.sort_by_key(|(seed, _)| *seed);
    let mut summary = Summary { seeds: count, ..Summary::default() };
    for (seed, result) in results {
        match result {
            SeedResult::Ran(r) => {
                summary.claims.merge(&r.claims);
                summary.histories_checked += r.histories_checked;
                summary.histories_exhausted += r.histories_exhausted;
                summary.probes.merge(&r.probes);
                summary.events += r.events;
                summary.sim_ns += r.sim_ns;
                if r.claims.violations() > 0 {
                    let details = r.claims.details.iter().map(|(c, d)| format!("claim \"{}\": {d}", c.name())).collect();
                    summary.failing.push((seed, details));
                }
            }
            SeedResult::Panicked(msg) => summary.failing.push((seed, vec![format!("panic: {msg}")])),
        }
    }
    summary.elapsed_s = began.elapsed().as_secs_f64();
    summary
}
