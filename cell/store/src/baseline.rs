//! The raw disk baseline the benchmark compares paros against: fjall alone, one committer,
//! one fdatasync per batch, no consensus, no encoding, no network.

use std::path::Path;
use std::time::{Duration, Instant};

use fjall::{Database, KeyspaceCreateOptions, PersistMode};

/// What [`raw_fjall_append`] measured.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct BaselineReport {
    /// Records appended (and synced).
    pub records: u64,
    /// Batches committed, each followed by one fdatasync.
    pub batches: u64,
    /// Wall time from the first commit to the end of the last sync.
    pub elapsed: Duration,
    /// Median latency of one batch (commit + fdatasync), in microseconds.
    pub p50_us: u64,
    /// 99th percentile latency of one batch (commit + fdatasync), in microseconds.
    pub p99_us: u64,
    /// 99.9th percentile latency of one batch, in microseconds.
    pub p999_us: u64,
    /// The slowest batch, in microseconds.
    pub max_us: u64,
    /// Batches that took longer than 5 ms: the disk's stalls at the scale of the issue-10
    /// p99 target (a stall holds every write waiting on this disk).
    pub over_5ms: u64,
    /// Batches that took longer than 15 ms (the p999 target's scale).
    pub over_15ms: u64,
}

impl BaselineReport {
    /// Records per second over the run (0 for an empty run).
    #[must_use]
    pub fn records_per_sec(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            #[expect(clippy::cast_precision_loss, reason = "a rate, not an exact count")]
            let records = self.records as f64;
            records / secs
        } else {
            0.0
        }
    }
}

/// The nearest-rank percentile `p` (0..=100) of sorted `xs`, 0 when empty.
fn percentile(sorted: &[u64], p: u64) -> u64 {
    permille(sorted, p * 10)
}

/// The nearest-rank `p`-th permille (0..=1000) of sorted `xs`, 0 when empty.
fn permille(sorted: &[u64], p: u64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let n = sorted.len() as u64;
    let rank = (p * n).div_ceil(1000).clamp(1, n);
    usize::try_from(rank - 1).ok().and_then(|i| sorted.get(i)).copied().unwrap_or(0)
}

/// How many of sorted `xs` exceed `limit`.
fn over(sorted: &[u64], limit: u64) -> u64 {
    (sorted.len() - sorted.partition_point(|&x| x <= limit)) as u64
}

/// Appends for `duration` from one writer thread into a fresh fjall database at `dir`:
/// each batch holds `batch` records of `record_bytes` bytes under sequential big-endian u64
/// keys in one keyspace, is committed, then made durable with `persist(SyncData)`.
///
/// `dir` should be empty (the run's keys start at 0). The database is dropped before this
/// returns; its files are left in `dir`.
///
/// # Panics
/// When `batch` is 0, or on any fjall error (a benchmark has no use for a half-measured run).
#[must_use]
pub fn raw_fjall_append(dir: &Path, batch: usize, record_bytes: usize, duration: Duration) -> BaselineReport {
    assert!(batch > 0, "a batch holds at least one record");
    let dir = dir.to_path_buf();
    let writer = std::thread::spawn(move || {
        let db = Database::builder(&dir).open().expect("open the baseline database");
        let ks = db.keyspace("baseline", KeyspaceCreateOptions::default).expect("open the baseline keyspace");
        let record = vec![0x5au8; record_bytes];
        let mut latencies_us = Vec::new();
        let mut next_key = 0u64;
        let start = Instant::now();
        let mut end = start;
        while start.elapsed() < duration {
            let t0 = Instant::now();
            let mut wb = db.batch();
            for _ in 0..batch {
                wb.insert(&ks, next_key.to_be_bytes(), record.as_slice());
                next_key += 1;
            }
            wb.commit().expect("commit a baseline batch");
            db.persist(PersistMode::SyncData).expect("fdatasync a baseline batch");
            end = Instant::now();
            latencies_us.push(u64::try_from(end.duration_since(t0).as_micros()).unwrap_or(u64::MAX));
        }
        latencies_us.sort_unstable();
        BaselineReport {
            records: next_key,
            batches: latencies_us.len() as u64,
            elapsed: end.duration_since(start),
            p50_us: percentile(&latencies_us, 50),
            p99_us: percentile(&latencies_us, 99),
            p999_us: permille(&latencies_us, 999),
            max_us: latencies_us.last().copied().unwrap_or(0),
            over_5ms: over(&latencies_us, 5_000),
            over_15ms: over(&latencies_us, 15_000),
        }
    });
    writer.join().expect("the baseline writer thread panicked")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_is_nearest_rank() {
        assert_eq!(percentile(&[], 50), 0);
        assert_eq!(percentile(&[7], 99), 7);
        let xs: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&xs, 50), 50);
        assert_eq!(percentile(&xs, 99), 99);
        assert_eq!(percentile(&xs, 100), 100);
        let xs: Vec<u64> = (1..=2000).collect();
        assert_eq!(permille(&xs, 999), 1998);
    }

    #[test]
    fn over_counts_the_values_past_the_limit() {
        assert_eq!(over(&[], 5), 0);
        assert_eq!(over(&[1, 5, 5, 6, 20], 5), 2);
        assert_eq!(over(&[1, 2], 5), 0);
    }
}
