//! `paros bench`: drive the embedded cell the way a user does — journals created through the
//! registry, records written with paros-client's `Writer` — and report throughput, latency
//! and group-commit figures; verify every acknowledged record afterwards with its `Reader`.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use paros_client::{Client, Writer, WriterConfig};
use paros_core::journal::WriterMode;
use paros_core::{JournalId, JournalKey, TenantId};
use paros_registry::{Accepted, Directory, JournalName, Op, Quotas, TenantName};
use serde::Serialize;

pub use paros_embedded::read_all;
use paros_embedded::{random_u64, CellError, CellService, EmbeddedCell};

/// The benchmark's shape.
#[derive(Clone, Debug)]
pub struct BenchArgs {
    pub writers: usize,
    pub journals: usize,
    pub record_bytes: usize,
    pub batch: usize,
    pub duration: Duration,
    pub data_dir: Option<PathBuf>,
    /// Journals placed besides the bench's, which stay idle during the run (their memory
    /// cost is reported).
    pub idle_journals: usize,
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
    /// Seconds from the first `CreateJournal` request to every node hosting every journal of
    /// the run: the registry's commands decided, folded by each node's follower and placed
    /// (each node's placements ride its rounds: no sync per journal).
    pub placement_s: f64,
    /// Journals the run created through the registry (the rest existed already).
    pub journals_created: usize,
    /// Idle journals placed besides the bench's (`--idle-journals`).
    pub idle_journals: usize,
    /// The process's peak resident set (`VmHWM`), in bytes; 0 where `/proc` has none.
    pub rss_peak_bytes: u64,
    /// Resident memory the idle journals added, per journal, measured in the same run: the
    /// resident set after they were placed and went quiet, less the one before (0 without
    /// idle journals).
    pub rss_per_idle_journal_bytes: u64,
}

/// Why a benchmark run failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Cell(#[from] paros_embedded::CellError),
    #[error("invalid arguments: {0}")]
    Args(String),
    #[error("creating the bench's journals: {0}")]
    Registry(String),
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
    writer: Writer<CellService>,
}

/// The bench's tenant and the prefix of its journals' names (`j0`, `j1`, …).
const BENCH_TENANT: (&str, &str) = ("bench", "j");

/// The tenant and name prefix of the journals `--idle-journals` adds.
const IDLE_TENANT: (&str, &str) = ("bench-idle", "idle");

fn journal_name(prefix: &str, i: usize) -> JournalName {
    JournalName::parse(&format!("{prefix}{i}")).expect("a valid journal name")
}

/// Requests to the registry in flight at once while creating journals (below the
/// coordinator's pending bound).
const CREATES_IN_FLIGHT_MAX: usize = 512;

/// How long placed journals get to elect and go quiet before memory is read.
const IDLE_SETTLE: Duration = Duration::from_secs(2);

/// A `/proc/self/status` figure (`VmRSS:`, `VmHWM:`) in bytes; 0 where there is none.
fn rss_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()))
        .map_or(0, |kib| kib * 1024)
}

/// How long the registry may take to place the run's journals on every node.
const PLACEMENT_TIMEOUT: Duration = Duration::from_secs(120);

/// The bench's journals, created through the registry where missing: `(index, key)` in index
/// order, how many were created, and how long until every node hosted them all.
pub async fn bench_journals(cell: &EmbeddedCell, journals: usize, create: bool) -> Result<(Vec<(usize, JournalKey)>, usize, Duration), BenchError> {
    named_journals(cell, BENCH_TENANT, journals, create).await
}

/// `journals` journals named `{prefix}{i}` of the tenant `name`, created (tenant included)
/// through the registry where missing and `create` allows.
async fn named_journals(
    cell: &EmbeddedCell,
    (name, prefix): (&str, &str),
    journals: usize,
    create: bool,
) -> Result<(Vec<(usize, JournalKey)>, usize, Duration), BenchError> {
    let journal_name = |i: usize| journal_name(prefix, i);
    let registry = |e: CellError| BenchError::Registry(e.to_string());
    match cell.init().await {
        Ok(_) | Err(CellError::AlreadyFormed(_)) => {}
        Err(e) => return Err(registry(e)),
    }
    let name = TenantName::parse(name).expect("a valid tenant name");
    let dir = cell.wait_followers(PLACEMENT_TIMEOUT, |d| d.cell().is_some()).await.map_err(registry)?;
    let tenant = match dir.tenant_by_name(&name) {
        Some(t) => t.id,
        None if create => {
            let quotas = Quotas { journals_max: u32::try_from(journals).unwrap_or(u32::MAX).max(1), ..Quotas::default() };
            match cell.request(Op::Command(paros_registry::Command::SignUp { tenant: TenantId(random_u64()), name, quotas })).await {
                Ok(Accepted::SignedUp { tenant }) => tenant,
                other => return Err(BenchError::Registry(format!("signing up the bench tenant: {other:?}"))),
            }
        }
        None => return Err(BenchError::Registry("the cell has no bench tenant".into())),
    };
    let started = Instant::now();
    let dir = cell.wait_followers(PLACEMENT_TIMEOUT, |d| d.tenant(tenant).is_some()).await.map_err(registry)?;
    let missing: Vec<usize> = (0..journals).filter(|i| dir.journal_by_name(tenant, &journal_name(*i)).is_none()).collect();
    if !create && !missing.is_empty() {
        return Err(BenchError::Registry(format!("{} of the bench's journals are missing", missing.len())));
    }
    let created = missing.len();
    let mut pending = tokio::task::JoinSet::new();
    for i in missing {
        if pending.len() >= CREATES_IN_FLIGHT_MAX {
            pending.join_next().await.expect("a task is pending").map_err(|e| BenchError::Registry(e.to_string()))??;
        }
        let op = Op::CreateJournal { tenant, journal: JournalId(random_u64()), name: journal_name(i), mode: WriterMode::Single };
        let request = cell.request_handle();
        pending.spawn(async move { request.request(op).await.map_err(|e| BenchError::Registry(format!("creating journal {i}: {e}"))) });
    }
    while let Some(done) = pending.join_next().await {
        done.map_err(|e| BenchError::Registry(e.to_string()))??;
    }
    let all = |d: &Directory| (0..journals).all(|i| d.journal_by_name(tenant, &journal_name(i)).is_some());
    let dir = cell.wait_followers(PLACEMENT_TIMEOUT, all).await.map_err(registry)?;
    let placement = started.elapsed();
    let keys = (0..journals).map(|i| (i, dir.journal_by_name(tenant, &journal_name(i)).expect("every journal is placed").key)).collect();
    Ok((keys, created, placement))
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
    let cell = EmbeddedCell::open(dir).await?;
    let (keys, journals_created, placement) = bench_journals(&cell, args.journals, true).await?;
    let placement_s = placement.as_secs_f64();
    let rss_per_idle_journal_bytes = if args.idle_journals > 0 {
        // Let the bench's own journals settle first, so only the idle ones are counted.
        tokio::time::sleep(IDLE_SETTLE).await;
        let before = rss_bytes("VmRSS:");
        named_journals(&cell, IDLE_TENANT, args.idle_journals, true).await?;
        tokio::time::sleep(IDLE_SETTLE).await;
        rss_bytes("VmRSS:").saturating_sub(before) / args.idle_journals as u64
    } else {
        0
    };
    let mut journals = Vec::new();
    for (index, key) in keys {
        let fail = |reason: String| BenchError::Writer { journal: index, reason };
        let mut writer = Writer::new(cell.client.clone(), key, WriterConfig::default(), random_u64()).map_err(|e| fail(e.to_string()))?;
        writer.claim().await.map_err(|e| fail(format!("claim: {e}")))?;
        journals.push(Arc::new(tokio::sync::Mutex::new(JournalWriter { index, key, writer })));
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
        let shared = Arc::clone(&shared);
        let (batch, size) = (args.batch, args.record_bytes);
        tasks.push(tokio::spawn(async move { write_loop(&journal, &shared, batch, size).await }));
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
    let verified = verify(&cell.client, &journals, &shared, args.record_bytes).await?;
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
        journals_created,
        idle_journals: args.idle_journals,
        rss_peak_bytes: rss_bytes("VmHWM:"),
        rss_per_idle_journal_bytes,
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

async fn write_loop(journal: &tokio::sync::Mutex<JournalWriter>, shared: &Shared, batch: usize, size: usize) -> Result<(), BenchError> {
    let mut latencies = Vec::new();
    while !shared.stop.load(Ordering::Relaxed) {
        let mut j = journal.lock().await;
        let seq = j.writer.core().next_seq().0;
        let records: Vec<Bytes> = (0..batch as u64).map(|i| record_bytes(j.index, seq + i, size)).collect();
        let started = Instant::now();
        let index = j.index;
        let written = j.writer.write(records).await.map_err(|e| BenchError::Writer { journal: index, reason: format!("write at {seq}: {e}") })?;
        assert_eq!(written.seq.0, seq, "an acknowledgement names the write's own position");
        let count = written.count;
        latencies.push(started.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
        shared.records.fetch_add(count, Ordering::Relaxed);
        shared.batches.fetch_add(1, Ordering::Relaxed);
        shared.acked.lock().expect("lock").entry(j.index).or_default().push((seq, count));
        if let Some(log) = &shared.ack_log {
            writeln!(log.lock().expect("lock"), "{} {} {}", j.index, seq, count)?;
        }
    }
    shared.latencies_us.lock().expect("lock").extend(latencies);
    Ok(())
}

/// Reads every journal back and checks each acknowledged record at its position, and that
/// every record read names its own position (nothing duplicated or misplaced).
async fn verify(
    client: &Client<CellService>,
    journals: &[Arc<tokio::sync::Mutex<JournalWriter>>],
    shared: &Shared,
    size: usize,
) -> Result<u64, BenchError> {
    let acked = shared.acked.lock().expect("lock").clone();
    let mut verified = 0;
    for j in journals {
        let j = j.lock().await;
        let read = read_all(client, j.key).await.map_err(BenchError::Verify)?;
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
