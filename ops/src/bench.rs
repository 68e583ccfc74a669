//! `paros bench`: drive the embedded cell through the node RPC and report throughput,
//! latency and group-commit figures; verify every acknowledged record afterwards.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use paros_core::journal::Outcome;
use paros_core::{Call, JournalKey, LeaderUuid, ReadAnswer, Seq};
use serde::Serialize;

use crate::cell::{random_u64, EmbeddedCell};
use crate::client::{CellClient, ClientConfig, Decided};

/// The benchmark's shape.
#[derive(Clone, Debug)]
pub struct BenchArgs {
    pub writers: usize,
    pub journals: usize,
    pub record_bytes: usize,
    pub batch: usize,
    pub duration: Duration,
    pub data_dir: Option<PathBuf>,
    /// Append one line per acknowledged write (`journal seq count`) to this file.
    pub ack_log: Option<PathBuf>,
    pub progress: bool,
}

/// What `paros bench --json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub records_per_s: f64,
    pub batches_per_s: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub fsyncs_per_s: f64,
    pub records_per_fsync: f64,
    pub writers: usize,
    pub journals: usize,
    pub record_bytes: usize,
    pub batch: usize,
    pub duration_s: f64,
    pub acked_records: u64,
    pub verified_records: u64,
    /// Seconds to place the run's journals on the three running nodes (each node's
    /// placements ride its rounds: no sync per journal).
    pub placement_s: f64,
}

/// Why a benchmark run failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Cell(#[from] crate::cell::CellError),
    #[error("invalid arguments: {0}")]
    Args(String),
    #[error("writer for journal {journal} failed: {reason}")]
    Writer { journal: usize, reason: String },
    #[error("verification failed: {0}")]
    Verify(String),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

/// The bytes of the record at `seq` of journal number `journal`: they name their position, so
/// a misplaced or duplicated record is visible on read-back.
#[must_use]
pub fn record_bytes(journal: usize, seq: u64, size: usize) -> Bytes {
    let mut v = format!("{journal}:{seq}:").into_bytes();
    while v.len() < size {
        v.push(b'a' + (v.len() % 26) as u8);
    }
    Bytes::from(v)
}

struct JournalWriter {
    index: usize,
    key: JournalKey,
    uuid: LeaderUuid,
    next: u64,
    hint: usize,
}

struct Shared {
    stop: AtomicBool,
    records: AtomicU64,
    batches: AtomicU64,
    latencies_us: Mutex<Vec<u32>>,
    acked: Mutex<BTreeMap<usize, Vec<(u64, u64)>>>,
    ack_log: Option<Mutex<std::fs::File>>,
}

/// Runs the benchmark on a fresh embedded cell.
///
/// # Errors
/// [`BenchError`] when the cell will not start, a writer is superseded or fails, or a
/// read-back does not match what was acknowledged.
pub async fn run(args: BenchArgs) -> Result<Report, BenchError> {
    if args.writers == 0 || args.journals == 0 || args.batch == 0 || args.record_bytes == 0 {
        return Err(BenchError::Args("writers, journals, batch and record-bytes must be at least 1".into()));
    }
    let limits = paros_core::journal::Limits::default();
    if args.batch > limits.write_records_max as usize || (args.batch * args.record_bytes) as u64 > limits.write_bytes_max {
        return Err(BenchError::Args(format!(
            "a batch holds at most {} records and {} bytes",
            limits.write_records_max, limits.write_bytes_max
        )));
    }
    let temp;
    let dir: &Path = match &args.data_dir {
        Some(d) => d,
        None => {
            temp = tempfile::tempdir()?;
            temp.path()
        }
    };
    let cell = EmbeddedCell::open(dir, args.journals).await?;
    let placement_s = cell.placement.as_secs_f64();
    let client = CellClient::new(cell.bus.clone(), cell.manifest.nodes.clone(), ClientConfig::default());
    let mut journals = Vec::new();
    for (index, key) in cell.manifest.journals.iter().enumerate() {
        let uuid = LeaderUuid::new(u128::from(random_u64()) << 64 | u128::from(random_u64())).expect("non-zero");
        let next = claim(&client, *key, uuid, index).await?;
        journals.push(Arc::new(tokio::sync::Mutex::new(JournalWriter { index, key: *key, uuid, next, hint: index % 3 })));
    }
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        records: AtomicU64::new(0),
        batches: AtomicU64::new(0),
        latencies_us: Mutex::new(Vec::new()),
        acked: Mutex::new(BTreeMap::new()),
        ack_log: match &args.ack_log {
            Some(p) => Some(Mutex::new(std::fs::OpenOptions::new().create(true).append(true).open(p)?)),
            None => None,
        },
    });
    let syncs_before: u64 = cell.node_stats().iter().map(|s| s.syncs).sum();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..args.writers {
        let journal = Arc::clone(&journals[w % journals.len()]);
        let client = client.clone();
        let shared = Arc::clone(&shared);
        let (batch, size) = (args.batch, args.record_bytes);
        tasks.push(tokio::spawn(async move { write_loop(&client, &journal, &shared, batch, size).await }));
    }
    let progress = args.progress.then(|| progress_bar(args.duration));
    while started.elapsed() < args.duration {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if let Some(p) = &progress {
            let secs = started.elapsed().as_secs_f64();
            p.set_position(started.elapsed().as_millis() as u64);
            p.set_message(format!("{:.0} records/s", shared.records.load(Ordering::Relaxed) as f64 / secs));
        }
    }
    shared.stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.map_err(|e| BenchError::Writer { journal: 0, reason: e.to_string() })??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let syncs_after: u64 = cell.node_stats().iter().map(|s| s.syncs).sum();
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    let verified = verify(&client, &journals, &shared, args.record_bytes).await?;
    let _hosts = cell.stop();
    let records = shared.records.load(Ordering::Relaxed);
    let batches = shared.batches.load(Ordering::Relaxed);
    let mut lat = std::mem::take(&mut *shared.latencies_us.lock().expect("lock"));
    lat.sort_unstable();
    let pct = |p: f64| lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1))).copied().unwrap_or(0) as u64;
    let syncs = (syncs_after - syncs_before) as f64;
    let nodes = 3.0;
    Ok(Report {
        records_per_s: records as f64 / elapsed,
        batches_per_s: batches as f64 / elapsed,
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        p999_us: pct(0.999),
        fsyncs_per_s: syncs / elapsed,
        records_per_fsync: if syncs > 0.0 { records as f64 / (syncs / nodes) } else { 0.0 },
        writers: args.writers,
        journals: args.journals,
        record_bytes: args.record_bytes,
        batch: args.batch,
        duration_s: elapsed,
        acked_records: records,
        verified_records: verified,
        placement_s,
    })
}

fn progress_bar(duration: Duration) -> indicatif::ProgressBar {
    let p = indicatif::ProgressBar::new(duration.as_millis() as u64);
    p.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {msg}")
            .expect("a valid template"),
    );
    p
}

/// Claims journal `index` for `uuid`, returning its tail.
async fn claim(client: &CellClient, key: JournalKey, uuid: LeaderUuid, index: usize) -> Result<u64, BenchError> {
    let fail = |reason: String| BenchError::Writer { journal: index, reason };
    for _ in 0..50 {
        let mut hint = index % 3;
        let Some(view) = client.view(key, hint).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if view.leader == Some(uuid) {
            return Ok(view.next_seq.0);
        }
        match client.call(key, &Call::SetLeader { new: uuid, old: view.leader }, &mut hint).await {
            Decided::Verdict(Outcome::Won(v)) => return Ok(v.next_seq.0),
            Decided::Verdict(other) => return Err(fail(format!("claim answered {other:?}"))),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    Err(fail("no node accepted the claim".into()))
}

async fn write_loop(
    client: &CellClient,
    journal: &tokio::sync::Mutex<JournalWriter>,
    shared: &Shared,
    batch: usize,
    size: usize,
) -> Result<(), BenchError> {
    let mut latencies = Vec::new();
    while !shared.stop.load(Ordering::Relaxed) {
        let mut j = journal.lock().await;
        let seq = j.next;
        let records: Vec<Bytes> = (0..batch as u64).map(|i| record_bytes(j.index, seq + i, size)).collect();
        let call = Call::Write { leader: Some(j.uuid), seq: Seq(seq), records };
        let started = Instant::now();
        let mut attempts = 0;
        let outcome = loop {
            attempts += 1;
            let mut hint = j.hint;
            let decided = client.call(j.key, &call, &mut hint).await;
            j.hint = hint;
            match decided {
                Decided::Ambiguous | Decided::Unavailable if attempts < 20 => continue,
                other => break other,
            }
        };
        let fail = |reason: String| BenchError::Writer { journal: j.index, reason };
        match outcome {
            Decided::Verdict(Outcome::Accepted { seq: s, count } | Outcome::Duplicate { seq: s, count }) => {
                assert_eq!(s.0, seq, "an acknowledgement names the write's own position");
                j.next = seq + count;
                latencies.push(started.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
                shared.records.fetch_add(count, Ordering::Relaxed);
                shared.batches.fetch_add(1, Ordering::Relaxed);
                shared.acked.lock().expect("lock").entry(j.index).or_default().push((seq, count));
                if let Some(log) = &shared.ack_log {
                    writeln!(log.lock().expect("lock"), "{} {} {}", j.index, seq, count)?;
                }
            }
            other => return Err(fail(format!("write at {seq} answered {other:?}"))),
        }
    }
    shared.latencies_us.lock().expect("lock").extend(latencies);
    Ok(())
}

/// Reads every journal back and checks each acknowledged record at its position, and that
/// every record read names its own position (nothing duplicated or misplaced).
async fn verify(
    client: &CellClient,
    journals: &[Arc<tokio::sync::Mutex<JournalWriter>>],
    shared: &Shared,
    size: usize,
) -> Result<u64, BenchError> {
    let acked = shared.acked.lock().expect("lock").clone();
    let mut verified = 0;
    for j in journals {
        let j = j.lock().await;
        let read = read_all(client, j.key, j.hint).await.map_err(BenchError::Verify)?;
        for (seq, record) in &read {
            if *record != record_bytes(j.index, *seq, size) {
                return Err(BenchError::Verify(format!("journal {} holds a foreign record at {seq}", j.index)));
            }
        }
        for (seq, count) in acked.get(&j.index).into_iter().flatten() {
            for s in *seq..seq + count {
                if !read.contains_key(&s) {
                    return Err(BenchError::Verify(format!("journal {} lost acknowledged record {s}", j.index)));
                }
                verified += 1;
            }
        }
    }
    Ok(verified)
}

/// Every retained record of `key`, by position.
///
/// # Errors
/// A description of the first read that failed.
pub async fn read_all(client: &CellClient, key: JournalKey, hint: usize) -> Result<BTreeMap<u64, Bytes>, String> {
    let mut out = BTreeMap::new();
    let mut from = Seq(0);
    loop {
        match client.read(key, from, hint).await {
            Some(ReadAnswer::Page { records, view, .. }) => {
                for r in records {
                    out.insert(from.0, r);
                    from = from.plus(1);
                }
                if from >= view.next_seq {
                    return Ok(out);
                }
            }
            Some(ReadAnswer::Truncated(view)) => from = view.first_seq,
            other => return Err(format!("read at {from:?} answered {other:?}")),
        }
    }
}
