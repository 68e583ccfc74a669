//! `paros bench`: drive the embedded cell the way a user does — journals created through the
//! registry, records written with paros-client's `Writer` — and report throughput, latency
//! and group-commit figures; verify every acknowledged record afterwards with its `Reader`.
//!
//! With `--target http://HOST:PORT` the same writers drive a running gateway over HTTP
//! instead ([`HttpService`]): a fresh tenant signed up (or `--token`'s), journals created with
//! `POST /v1/journals`, every acknowledged record read back over HTTP. The figures only the
//! embedded cell can tell (fsyncs, the process's memory, placement on every node) are 0 there.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use paros_client::{
    Client, ClientConfig, Decided, Denial, GatewayClient, HttpConfig, HttpService, JournalService, ReadConsistency,
    Reader, ReaderConfig, ReaderError, ReaderOutcome, Writer, WriterConfig, WriterError,
};
use paros_core::journal::WriterMode;
use paros_core::{JournalId, JournalKey, TenantId};
use paros_registry::{Accepted, Directory, JournalName, Op, Quotas, TenantName};
use serde::Serialize;

pub use paros_embedded::read_all;
use paros_embedded::{CellError, EmbeddedCell, random_u64};

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
    /// Drive the gateway at this URL over HTTP instead of an embedded cell.
    pub target: Option<String>,
    /// The tenant token to drive the gateway as (default: sign up a fresh tenant).
    pub token: Option<String>,
    /// How the embedded cell's stores are opened.
    pub store: paros_store::StoreOptions,
    /// Stop writing once this many record bytes are acknowledged (before `duration` if sooner).
    pub stop_after_bytes: Option<u64>,
    /// The cell's nodes put journals quiet this long to sleep (the idle journals' memory is
    /// read once they had the time to).
    pub dormant_after: Option<Duration>,
    /// The nodes' [`paros_node::shell::ShellConfig::idle_spin`] (`None`: the default).
    pub idle_spin: Option<Duration>,
    /// The nodes' [`paros_node::shell::ShellConfig::spin_round_journals_max`] (`None`: the
    /// default).
    pub spin_round_journals_max: Option<usize>,
}

/// What `paros bench --json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// `in_cell` (the embedded cell, through the node RPC) or `http` (a gateway, `--target`).
    pub target: &'static str,
    pub records_per_s: f64,
    pub batches_per_s: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    /// The 99.99th percentile and the slowest acknowledged write.
    pub p9999_us: u64,
    pub max_us: u64,
    /// Syncs of the three nodes per second (0 over HTTP: the gateway does not say).
    pub fsyncs_per_s: f64,
    /// Records per sync of one node (0 over HTTP).
    pub records_per_fsync: f64,
    pub writers: usize,
    pub journals: usize,
    pub record_bytes: usize,
    pub batch: usize,
    pub duration_s: f64,
    pub acked_records: u64,
    pub verified_records: u64,
    /// The process's CPU time (user + system, every thread: writers, nodes, stores, fjall's
    /// workers) while the writers ran, per acknowledged record, in microseconds; 0 where
    /// `/proc` has none. On a shared machine it moves less than records/s: it is the figure
    /// to compare builds by when throughput is bound by the CPU.
    pub cpu_us_per_record: f64,
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
    /// The peak resident set while writing, and while reading every journal back from its
    /// first position (the peak is reset between the two where Linux allows it; else both are
    /// the peak so far). In the cell only.
    pub rss_peak_write_bytes: u64,
    pub rss_peak_read_bytes: u64,
    /// Seconds the read-back of every journal took.
    pub read_back_s: f64,
    /// Seconds to open the cell (boot every node from its store: a restart with `--data-dir`),
    /// and from the start of the open to the run's first acknowledged write. In the cell only.
    pub open_s: f64,
    pub first_write_s: f64,
    /// Resident memory the idle journals added, per journal, measured in the same run: the
    /// resident set after they were placed and went quiet, less the one before (0 without
    /// idle journals).
    pub rss_per_idle_journal_bytes: u64,
    /// Seconds from the first `CreateJournal` of the idle journals to every node hosting them
    /// all (0 without idle journals).
    pub idle_placement_s: f64,
    /// Journals dormant on the nodes (all nodes together) when the idle journals' memory was
    /// read.
    pub dormant_journals: u64,
    /// Requests the gateway answered 429 `over_quota` (each waited its `Retry-After`, then
    /// the writer claimed again; 0 in the cell, which has no quotas).
    pub over_quota_retries: u64,
    /// Where the nodes' rounds spent their time during the run, all nodes together (empty
    /// over HTTP).
    pub round_split: RoundSplit,
    /// fjall's background work during the run, all nodes together (0 over HTTP).
    pub store_compactions: u64,
    pub store_compacting_s: f64,
    /// Writes that waited for a store's applier (its bound of synced rounds not yet in fjall
    /// reached), all nodes, and their wait in all: the store's background work holding up
    /// rounds.
    pub store_room_waits: u64,
    pub store_room_waited_s: f64,
    /// One entry per whole second of the run: acknowledged records and their latency, with
    /// fjall's activity sampled at the second's end.
    pub windows: Vec<Window>,
    /// The slowest second's records over the median second's (1.0 is flat; 0 with fewer
    /// than two whole seconds).
    pub min_window_ratio: f64,
}

/// Quantiles of one part of a round, in microseconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Split {
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl Split {
    fn of(h: &paros_node::timing::Histogram) -> Split {
        Split {
            p50_us: h.quantile(0.50),
            p99_us: h.quantile(0.99),
            p999_us: h.quantile(0.999),
            max_us: h.quantile(1.0),
        }
    }
}

/// A round's time split (see `paros_node::timing::RoundTimes`).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct RoundSplit {
    /// Rounds that went to the store during the run.
    pub rounds: u64,
    /// First input absorbed → batch handed to the store (waiting behind the previous round).
    pub queue: Split,
    /// The store's place + write.
    pub write: Split,
    /// The store's sync.
    pub sync: Split,
    /// Sync's end → the node thread has sent what the round released.
    pub hop: Split,
}

/// One second of the run.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Window {
    pub second: u64,
    pub records: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    /// Summed over the nodes, at the second's end.
    pub compactions_active: u64,
    pub flushes_outstanding: u64,
    pub log_l0_tables: u64,
    /// Compactions that finished during the second, all nodes.
    pub compactions_done: u64,
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
    #[error("the gateway: {0}")]
    Gateway(String),
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

struct JournalWriter<S: JournalService + 'static> {
    index: usize,
    journal: S::Journal,
    writer: Writer<S>,
}

type Journals<S> = Vec<Arc<tokio::sync::Mutex<JournalWriter<S>>>>;

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

/// The process's CPU time so far (user + system), in seconds; 0 where `/proc` has none.
fn cpu_s() -> f64 {
    // Fields 14 and 15 of /proc/self/stat, in clock ticks (100 a second on Linux); the
    // command name (field 2) may hold spaces, so count from its closing parenthesis.
    const TICKS_PER_S: f64 = 100.0;
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 1..];
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let (user, system) = (fields.get(11)?.parse::<u64>().ok()?, fields.get(12)?.parse::<u64>().ok()?);
            Some((user + system) as f64 / TICKS_PER_S)
        })
        .unwrap_or(0.0)
}

/// A `/proc/self/status` figure (`VmRSS:`, `VmHWM:`) in bytes; 0 where there is none.
fn rss_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with(field)).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

/// How long the registry may take to place the run's journals on every node.
const PLACEMENT_TIMEOUT: Duration = Duration::from_secs(120);

/// The bench's journals, created through the registry where missing: `(index, key)` in index
/// order, how many were created, and how long until every node hosted them all.
pub async fn bench_journals(
    cell: &EmbeddedCell,
    journals: usize,
    create: bool,
) -> Result<(Vec<(usize, JournalKey)>, usize, Duration), BenchError> {
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
            let quotas =
                Quotas { journals_max: u32::try_from(journals).unwrap_or(u32::MAX).max(1), ..Quotas::default() };
            match cell
                .request(Op::Command(paros_registry::Command::SignUp { tenant: TenantId(random_u64()), name, quotas }))
                .await
            {
                Ok(Accepted::SignedUp { tenant }) => tenant,
                other => return Err(BenchError::Registry(format!("signing up the bench tenant: {other:?}"))),
            }
        }
        None => return Err(BenchError::Registry("the cell has no bench tenant".into())),
    };
    let started = Instant::now();
    let dir = cell.wait_followers(PLACEMENT_TIMEOUT, |d| d.tenant(tenant).is_some()).await.map_err(registry)?;
    let missing: Vec<usize> =
        (0..journals).filter(|i| dir.journal_by_name(tenant, &journal_name(*i)).is_none()).collect();
    if !create && !missing.is_empty() {
        return Err(BenchError::Registry(format!("{} of the bench's journals are missing", missing.len())));
    }
    let created = missing.len();
    let live_before = dir.live_journals(tenant) as usize;
    let mut pending = tokio::task::JoinSet::new();
    for i in missing {
        if pending.len() >= CREATES_IN_FLIGHT_MAX {
            pending
                .join_next()
                .await
                .expect("a task is pending")
                .map_err(|e| BenchError::Registry(e.to_string()))??;
        }
        let op = Op::CreateJournal {
            tenant,
            journal: JournalId(random_u64()),
            name: journal_name(i),
            mode: WriterMode::Single,
        };
        let request = cell.request_handle();
        pending.spawn(async move {
            request.request(op).await.map_err(|e| BenchError::Registry(format!("creating journal {i}: {e}")))
        });
    }
    while let Some(done) = pending.join_next().await {
        done.map_err(|e| BenchError::Registry(e.to_string()))??;
    }
    // Every create was answered, so counting the tenant's live journals is enough (checking a
    // hundred thousand names on every published directory would be the slowest part).
    let all = |d: &Directory| d.live_journals(tenant) as usize >= live_before + created;
    let dir = cell.wait_followers(PLACEMENT_TIMEOUT, all).await.map_err(registry)?;
    let placement = started.elapsed();
    let keys = (0..journals)
        .map(|i| (i, dir.journal_by_name(tenant, &journal_name(i)).expect("every journal is placed").key))
        .collect();
    Ok((keys, created, placement))
}

struct Shared {
    stop: AtomicBool,
    records: AtomicU64,
    batches: AtomicU64,
    /// `(milliseconds into the run at the acknowledgement, latency in µs)`.
    latencies_us: Mutex<Vec<(u32, u32)>>,
    acked: Mutex<BTreeMap<usize, Vec<(u64, u64)>>>,
    ack_log: Option<Mutex<std::fs::File>>,
    over_quota: AtomicU64,
    /// When the run ends (set as it starts).
    deadline: Mutex<Option<Instant>>,
    /// When the run started.
    started: Mutex<Option<Instant>>,
    /// When the first write of the run was acknowledged.
    first_ack: Mutex<Option<Instant>>,
}

impl Shared {
    /// Time left in the run (all of a quota wait before it starts).
    fn remaining(&self) -> Duration {
        self.deadline.lock().expect("lock").map_or(Duration::MAX, |d| d.saturating_duration_since(Instant::now()))
    }
}

/// Runs the benchmark: on a fresh embedded cell, or over HTTP against `args.target`.
///
/// # Errors
/// [`BenchError`] when the cell will not start, a writer is superseded or fails, or a
/// read-back does not match what was acknowledged.
pub async fn run(args: BenchArgs) -> Result<Report, BenchError> {
    if args.writers == 0 || args.journals == 0 || args.batch == 0 || args.record_bytes == 0 {
        return Err(BenchError::Args("writers, journals, batch and record-bytes must be at least 1".into()));
    }
    let limits = paros_core::journal::Limits::default();
    if args.batch > limits.write_records_max as usize
        || (args.batch * args.record_bytes) as u64 > limits.write_bytes_max
    {
        return Err(BenchError::Args(format!(
            "a batch holds at most {} records and {} bytes",
            limits.write_records_max, limits.write_bytes_max
        )));
    }
    match args.target.clone() {
        Some(url) => run_http(args, &url).await,
        None if args.token.is_some() => Err(BenchError::Args("--token goes with --target".into())),
        None => run_in_cell(args).await,
    }
}

fn shared(args: &BenchArgs) -> Result<Arc<Shared>, BenchError> {
    Ok(Arc::new(Shared {
        stop: AtomicBool::new(false),
        records: AtomicU64::new(0),
        batches: AtomicU64::new(0),
        latencies_us: Mutex::new(Vec::new()),
        acked: Mutex::new(BTreeMap::new()),
        ack_log: match &args.ack_log {
            Some(p) => Some(Mutex::new(open_ack_log(p)?)),
            None => None,
        },
        over_quota: AtomicU64::new(0),
        deadline: Mutex::new(None),
        started: Mutex::new(None),
        first_ack: Mutex::new(None),
    }))
}

/// Opens an ack log to append to. A log whose last line a kill cut short gets a line end
/// first, so the cut line stays alone instead of running into this run's first line.
fn open_ack_log(path: &Path) -> std::io::Result<std::fs::File> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut file = std::fs::OpenOptions::new().create(true).read(true).append(true).open(path)?;
    if file.metadata()?.len() > 0 {
        let mut last = [0u8; 1];
        file.seek(SeekFrom::End(-1))?;
        file.read_exact(&mut last)?;
        if last[0] != b'\n' {
            file.write_all(b"\n")?;
        }
    }
    Ok(file)
}

/// The whole lines of an ack log: `(journal, first position, records)`. A line a kill cut
/// short is not an acknowledgement the writer finished recording, and is left out.
pub fn ack_entries(text: &str) -> Vec<(usize, u64, u64)> {
    text.lines()
        .filter_map(|line| {
            let parts: Vec<u64> = line.split_whitespace().map(str::parse).collect::<Result<_, _>>().ok()?;
            let [j, seq, count] = parts[..] else { return None };
            Some((usize::try_from(j).ok()?, seq, count))
        })
        .collect()
}

async fn run_in_cell(args: BenchArgs) -> Result<Report, BenchError> {
    let temp;
    let dir: &Path = match &args.data_dir {
        Some(d) => d,
        None => {
            temp = tempfile::tempdir()?;
            temp.path()
        }
    };
    let opening = Instant::now();
    let defaults = paros_embedded::embedded_tunables().1;
    let shell = paros_node::shell::ShellConfig {
        dormant_after: args.dormant_after,
        idle_spin: args.idle_spin.unwrap_or(defaults.idle_spin),
        spin_round_journals_max: args.spin_round_journals_max.unwrap_or(defaults.spin_round_journals_max),
        ..defaults
    };
    let cell = EmbeddedCell::open_tuned(
        dir,
        paros_embedded::EMBEDDED_MEMBERS,
        paros_registry::daemon::CoordinatorLoopConfig::default(),
        args.store,
        shell,
    )
    .await?;
    let open_s = opening.elapsed().as_secs_f64();
    let (keys, journals_created, placement) = bench_journals(&cell, args.journals, true).await?;
    let placement_s = placement.as_secs_f64();
    let mut dormant_journals = 0;
    let (rss_per_idle_journal_bytes, idle_placement_s) = if args.idle_journals > 0 {
        // Let the bench's own journals settle first, so only the idle ones are counted.
        tokio::time::sleep(IDLE_SETTLE).await;
        let before = rss_bytes("VmRSS:");
        let (_, _, placed) = named_journals(&cell, IDLE_TENANT, args.idle_journals, true).await?;
        // Long enough for them to elect, go quiet and (with dormancy) leave memory.
        tokio::time::sleep(IDLE_SETTLE + args.dormant_after.unwrap_or_default()).await;
        dormant_journals = cell.node_stats().iter().map(|s| s.dormant).sum();
        (rss_bytes("VmRSS:").saturating_sub(before) / args.idle_journals as u64, placed.as_secs_f64())
    } else {
        (0, 0.0)
    };
    let shared = shared(&args)?;
    let journals = claim_all(&cell.client, keys, &shared).await?;
    let syncs_before: u64 = cell.node_stats().iter().map(|s| s.syncs).sum();
    let times_before = cell.round_times();
    let probes = cell.store_probes();
    let activity_before = sum_activity(&probes);
    let sampler = {
        let (probes, shared) = (probes.clone(), Arc::clone(&shared));
        tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            while !shared.stop.load(Ordering::Relaxed) {
                tick.tick().await;
                samples.push(sum_activity(&probes));
            }
            samples
        })
    };
    let cpu_before = cpu_s();
    let elapsed = drive(&journals, &args, &shared).await?;
    let cpu_spent = cpu_s() - cpu_before;
    let syncs_after: u64 = cell.node_stats().iter().map(|s| s.syncs).sum();
    let mut split = paros_node::timing::RoundTimes::default();
    for (after, before) in cell.round_times().iter().zip(&times_before) {
        split.merge(&after.since(before));
    }
    let activity_after = sum_activity(&probes);
    let samples = sampler.await.unwrap_or_default();
    let rss_peak_write_bytes = rss_bytes("VmHWM:");
    // Linux resets the peak resident set on this write: the read-back's peak is its own.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let read_started = Instant::now();
    let verified = verify(&cell.client, &journals, &shared, args.record_bytes).await?;
    let read_back_s = read_started.elapsed().as_secs_f64();
    let rss_peak_read_bytes = rss_bytes("VmHWM:");
    let _hosts = cell.stop();
    let mut report = report(&args, &shared, elapsed, verified);
    report.cpu_us_per_record =
        if report.acked_records > 0 { cpu_spent * 1e6 / report.acked_records as f64 } else { 0.0 };
    report.open_s = open_s;
    report.first_write_s =
        shared.first_ack.lock().expect("lock").map_or(0.0, |t| t.duration_since(opening).as_secs_f64());
    report.rss_peak_write_bytes = rss_peak_write_bytes;
    report.rss_peak_read_bytes = rss_peak_read_bytes;
    report.read_back_s = read_back_s;
    let syncs = (syncs_after - syncs_before) as f64;
    let nodes = 3.0;
    report.fsyncs_per_s = syncs / elapsed;
    report.records_per_fsync = if syncs > 0.0 { report.acked_records as f64 / (syncs / nodes) } else { 0.0 };
    report.placement_s = placement_s;
    report.journals_created = journals_created;
    report.idle_journals = args.idle_journals;
    report.rss_peak_bytes = rss_peak_write_bytes.max(rss_peak_read_bytes);
    report.rss_per_idle_journal_bytes = rss_per_idle_journal_bytes;
    report.idle_placement_s = idle_placement_s;
    report.dormant_journals = dormant_journals;
    report.round_split = RoundSplit {
        rounds: split.write.count(),
        queue: Split::of(&split.queue),
        write: Split::of(&split.write),
        sync: Split::of(&split.sync),
        hop: Split::of(&split.hop),
    };
    report.store_compactions = activity_after.compactions_completed - activity_before.compactions_completed;
    report.store_compacting_s = (activity_after.compacting_us - activity_before.compacting_us) as f64 / 1e6;
    report.store_room_waits = activity_after.room_waits - activity_before.room_waits;
    report.store_room_waited_s = (activity_after.room_waited_us - activity_before.room_waited_us) as f64 / 1e6;
    let mut done_before = activity_before.compactions_completed;
    for (w, a) in report.windows.iter_mut().zip(&samples) {
        w.compactions_active = a.compactions_active;
        w.flushes_outstanding = a.flushes_outstanding;
        w.log_l0_tables = a.log_l0_tables;
        w.compactions_done = a.compactions_completed.saturating_sub(done_before);
        done_before = a.compactions_completed;
    }
    Ok(report)
}

/// Every node's fjall activity added up.
fn sum_activity(probes: &[paros_store::StoreProbe]) -> paros_store::StoreActivity {
    let mut sum = paros_store::StoreActivity::default();
    for a in probes.iter().map(paros_store::StoreProbe::sample) {
        sum.compactions_completed += a.compactions_completed;
        sum.compacting_us += a.compacting_us;
        sum.compactions_active += a.compactions_active;
        sum.flushes_outstanding += a.flushes_outstanding;
        sum.log_tables += a.log_tables;
        sum.log_l0_tables += a.log_l0_tables;
        sum.journal_files += a.journal_files;
        sum.room_waits += a.room_waits;
        sum.room_waited_us += a.room_waited_us;
        sum.disk_bytes += a.disk_bytes;
    }
    sum
}

/// Per-second windows of acknowledged records (whole seconds only) and the slowest one's
/// ratio to the median.
fn windows(lat: &[(u32, u32)], elapsed: f64) -> (Vec<Window>, f64) {
    let seconds = elapsed.floor() as usize;
    let mut per: Vec<Vec<u32>> = vec![Vec::new(); seconds];
    for (ms, us) in lat {
        if let Some(v) = per.get_mut((*ms / 1000) as usize) {
            v.push(*us);
        }
    }
    let windows: Vec<Window> = per
        .iter_mut()
        .enumerate()
        .map(|(i, v)| {
            v.sort_unstable();
            let pct = |p: f64| {
                v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1))).copied().unwrap_or(0) as u64
            };
            Window {
                second: i as u64,
                records: v.len() as u64,
                p99_us: pct(0.99),
                p999_us: pct(0.999),
                ..Window::default()
            }
        })
        .collect();
    let mut counts: Vec<u64> = windows.iter().map(|w| w.records).collect();
    counts.sort_unstable();
    let ratio = if counts.len() >= 2 && counts[counts.len() / 2] > 0 {
        counts[0] as f64 / counts[counts.len() / 2] as f64
    } else {
        0.0
    };
    (windows, ratio)
}

/// Journal creates over HTTP in flight at once.
const HTTP_CREATES_IN_FLIGHT_MAX: usize = 16;

/// A tenant name no earlier run took: `bench-` and 16 hex digits.
fn fresh_tenant_name() -> paros_api::TenantName {
    paros_api::TenantName::parse(&format!("bench-{:016x}", random_u64())).expect("a valid tenant name")
}

/// The bench's journals at the gateway, `j0`, `j1`, …: created with `POST /v1/journals`, or
/// reused when the tenant holds them already (409 `name_taken`). How many were created.
async fn http_journals(
    g: &GatewayClient,
    journals: usize,
    shared: &Arc<Shared>,
) -> Result<(Vec<(usize, paros_api::JournalName)>, usize), BenchError> {
    let mut pending = tokio::task::JoinSet::new();
    let mut created = 0;
    let mut names = Vec::new();
    let mut join = |done: Result<Result<bool, BenchError>, tokio::task::JoinError>| -> Result<(), BenchError> {
        if done.map_err(|e| BenchError::Gateway(e.to_string()))?? {
            created += 1;
        }
        Ok(())
    };
    for i in 0..journals {
        let name = paros_api::JournalName::parse(&format!("{}{i}", BENCH_TENANT.1)).expect("a valid journal name");
        names.push((i, name.clone()));
        if pending.len() >= HTTP_CREATES_IN_FLIGHT_MAX {
            join(pending.join_next().await.expect("a task is pending"))?;
        }
        let (g, shared) = (g.clone(), Arc::clone(shared));
        pending.spawn(async move {
            let request = paros_api::CreateJournalRequest { name, mode: None };
            loop {
                match g.create_journal(&request).await {
                    Ok(_) => return Ok(true),
                    Err(e) if e.code() == Some(paros_api::ErrorCode::NameTaken) => return Ok(false),
                    Err(paros_client::GatewayError::Api { status: 429 | 503, retry_after_s, error }) => {
                        // Over the requests/s quota, or the registry slow to show it: wait.
                        if !matches!(
                            error.code(),
                            Some(paros_api::ErrorCode::OverQuota | paros_api::ErrorCode::Unavailable)
                        ) {
                            return Err(BenchError::Registry(format!("creating journal {i}: {error}")));
                        }
                        if error.code() == Some(paros_api::ErrorCode::OverQuota) {
                            shared.over_quota.fetch_add(1, Ordering::Relaxed);
                        }
                        tokio::time::sleep(Duration::from_secs(retry_after_s.unwrap_or(1))).await;
                    }
                    Err(e) => return Err(BenchError::Registry(format!("creating journal {i}: {e}"))),
                }
            }
        });
    }
    while let Some(done) = pending.join_next().await {
        join(done)?;
    }
    Ok((names, created))
}

async fn run_http(args: BenchArgs, url: &str) -> Result<Report, BenchError> {
    if args.data_dir.is_some() || args.idle_journals > 0 {
        return Err(BenchError::Args(
            "--data-dir and --idle-journals are the embedded cell's: not with --target".into(),
        ));
    }
    let gateway = |e: paros_client::GatewayError| BenchError::Gateway(e.to_string());
    let config = HttpConfig::default();
    let token = match &args.token {
        Some(t) => paros_api::Token::parse(t).map_err(|e| BenchError::Args(format!("--token: {e}")))?,
        None => {
            let anonymous = GatewayClient::new(url, None, config).map_err(gateway)?;
            anonymous.signup(&fresh_tenant_name()).await.map_err(gateway)?.token
        }
    };
    let g = GatewayClient::new(url, Some(&token), config).map_err(gateway)?;
    let shared = shared(&args)?;
    let started = Instant::now();
    let (names, journals_created) = http_journals(&g, args.journals, &shared).await?;
    let client = Client::new(HttpService::from_gateway(g), ClientConfig::default(), random_u64())
        .map_err(|e| BenchError::Args(e.to_string()))?;
    let journals = claim_all(&client, names, &shared).await?;
    let placement_s = started.elapsed().as_secs_f64();
    let elapsed = drive(&journals, &args, &shared).await?;
    let verified = verify(&client, &journals, &shared, args.record_bytes).await?;
    let mut report = report(&args, &shared, elapsed, verified);
    report.target = "http";
    report.placement_s = placement_s;
    report.journals_created = journals_created;
    Ok(report)
}

/// How long to wait before asking again, when `e` is the gateway's 429 `over_quota`.
fn over_quota(e: &WriterError) -> Option<Duration> {
    match e {
        WriterError::Failed { decided: Decided::Denied { denial, .. }, .. }
        | WriterError::Undecided { decided: Decided::Denied { denial, .. } } => quota_wait(denial),
        _ => None,
    }
}

fn quota_wait(denial: &Denial) -> Option<Duration> {
    (denial.status == 429).then(|| Duration::from_secs(denial.retry_after_s.unwrap_or(1).max(1)))
}

/// Claims `writer`'s journal, waiting out the gateway's quota.
async fn claim<S>(writer: &mut Writer<S>, index: usize, shared: &Shared) -> Result<(), BenchError>
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    loop {
        match writer.claim().await {
            Ok(_) => return Ok(()),
            Err(e) => match over_quota(&e) {
                Some(wait) => {
                    shared.over_quota.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(wait).await;
                }
                None => return Err(BenchError::Writer { journal: index, reason: format!("claim: {e}") }),
            },
        }
    }
}

async fn claim_all<S>(
    client: &Client<S>,
    journals: Vec<(usize, S::Journal)>,
    shared: &Shared,
) -> Result<Journals<S>, BenchError>
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    let mut out = Vec::new();
    for (index, journal) in journals {
        let fail = |reason: String| BenchError::Writer { journal: index, reason };
        let mut writer = Writer::new(client.clone(), journal.clone(), WriterConfig::default(), random_u64())
            .map_err(|e| fail(e.to_string()))?;
        claim(&mut writer, index, shared).await?;
        out.push(Arc::new(tokio::sync::Mutex::new(JournalWriter { index, journal, writer })));
    }
    Ok(out)
}

/// Runs the writers for the run's duration; the seconds they ran.
async fn drive<S>(journals: &Journals<S>, args: &BenchArgs, shared: &Arc<Shared>) -> Result<f64, BenchError>
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    let started = Instant::now();
    *shared.deadline.lock().expect("lock") = Some(started + args.duration);
    *shared.started.lock().expect("lock") = Some(started);
    let mut tasks = Vec::new();
    for w in 0..args.writers {
        let journal = Arc::clone(&journals[w % journals.len()]);
        let shared = Arc::clone(shared);
        let (batch, size) = (args.batch, args.record_bytes);
        tasks.push(tokio::spawn(async move { write_loop(&journal, &shared, batch, size).await }));
    }
    let progress = args.progress.then(|| progress_bar(args.duration));
    let bytes_done = || {
        args.stop_after_bytes
            .is_some_and(|max| shared.records.load(Ordering::Relaxed).saturating_mul(args.record_bytes as u64) >= max)
    };
    while started.elapsed() < args.duration && !bytes_done() {
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
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    Ok(elapsed)
}

/// The figures every target has; the cell's own are 0 here.
fn report(args: &BenchArgs, shared: &Shared, elapsed: f64, verified: u64) -> Report {
    let records = shared.records.load(Ordering::Relaxed);
    let batches = shared.batches.load(Ordering::Relaxed);
    let timed = std::mem::take(&mut *shared.latencies_us.lock().expect("lock"));
    // Windows count acknowledged writes (batches), as the latency figures do.
    let (windows, min_window_ratio) = windows(&timed, elapsed);
    let mut lat: Vec<u32> = timed.into_iter().map(|(_, us)| us).collect();
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1))).copied().unwrap_or(0) as u64
    };
    Report {
        target: "in_cell",
        records_per_s: records as f64 / elapsed,
        batches_per_s: batches as f64 / elapsed,
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        p999_us: pct(0.999),
        p9999_us: pct(0.9999),
        max_us: lat.last().copied().map_or(0, u64::from),
        fsyncs_per_s: 0.0,
        records_per_fsync: 0.0,
        writers: args.writers,
        journals: args.journals,
        record_bytes: args.record_bytes,
        batch: args.batch,
        duration_s: elapsed,
        acked_records: records,
        verified_records: verified,
        cpu_us_per_record: 0.0,
        placement_s: 0.0,
        journals_created: 0,
        idle_journals: 0,
        rss_peak_bytes: 0,
        rss_peak_write_bytes: 0,
        rss_peak_read_bytes: 0,
        read_back_s: 0.0,
        open_s: 0.0,
        first_write_s: 0.0,
        rss_per_idle_journal_bytes: 0,
        idle_placement_s: 0.0,
        dormant_journals: 0,
        over_quota_retries: shared.over_quota.load(Ordering::Relaxed),
        round_split: RoundSplit::default(),
        store_compactions: 0,
        store_compacting_s: 0.0,
        store_room_waits: 0,
        store_room_waited_s: 0.0,
        windows,
        min_window_ratio,
    }
}

fn progress_bar(duration: Duration) -> indicatif::ProgressBar {
    let p = indicatif::ProgressBar::new(duration.as_millis() as u64);
    p.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {msg}")
            .expect("a valid template"),
    );
    p
}

async fn write_loop<S>(
    journal: &tokio::sync::Mutex<JournalWriter<S>>,
    shared: &Shared,
    batch: usize,
    size: usize,
) -> Result<(), BenchError>
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    let mut latencies = Vec::new();
    let run_started = shared.started.lock().expect("lock").unwrap_or_else(Instant::now);
    while !shared.stop.load(Ordering::Relaxed) {
        let mut j = journal.lock().await;
        let seq = j.writer.core().next_seq().0;
        let records: Vec<Bytes> = (0..batch as u64).map(|i| record_bytes(j.index, seq + i, size)).collect();
        let started = Instant::now();
        let index = j.index;
        let written = match j.writer.write(records).await {
            Ok(w) => w,
            Err(e) => match over_quota(&e) {
                // Refused before it was sent on: nothing was written. The writer halted; wait,
                // then claim again to learn the tail.
                Some(wait) => {
                    shared.over_quota.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(wait.min(shared.remaining())).await;
                    if shared.stop.load(Ordering::Relaxed) {
                        break;
                    }
                    claim(&mut j.writer, index, shared).await?;
                    continue;
                }
                None => return Err(BenchError::Writer { journal: index, reason: format!("write at {seq}: {e}") }),
            },
        };
        assert_eq!(written.seq.0, seq, "an acknowledgement names the write's own position");
        let count = written.count;
        let at_ms = run_started.elapsed().as_millis().min(u128::from(u32::MAX)) as u32;
        latencies.push((at_ms, started.elapsed().as_micros().min(u128::from(u32::MAX)) as u32));
        shared.records.fetch_add(count, Ordering::Relaxed);
        if shared.batches.fetch_add(1, Ordering::Relaxed) == 0 {
            shared.first_ack.lock().expect("lock").get_or_insert_with(Instant::now);
        }
        shared.acked.lock().expect("lock").entry(j.index).or_default().push((seq, count));
        if let Some(log) = &shared.ack_log {
            // One write per line: a kill then cuts at most the line being written.
            log.lock().expect("lock").write_all(format!("{} {} {}\n", j.index, seq, count).as_bytes())?;
        }
    }
    shared.latencies_us.lock().expect("lock").extend(latencies);
    Ok(())
}

/// Reads every journal back and checks each acknowledged record at its position, and that
/// every record read names its own position (nothing duplicated or misplaced). Streams: no more
/// than one page is held at a time, so reading a journal larger than memory measures the
/// cell's memory, not the bench's.
async fn verify<S>(client: &Client<S>, journals: &Journals<S>, shared: &Shared, size: usize) -> Result<u64, BenchError>
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    let acked = shared.acked.lock().expect("lock").clone();
    let mut verified = 0;
    for j in journals {
        let j = j.lock().await;
        let mut ranges: Vec<(u64, u64)> = acked.get(&j.index).cloned().unwrap_or_default();
        ranges.sort_unstable();
        let mut pending = ranges.into_iter().peekable();
        let mut foreign = None;
        let mut count = 0u64;
        read_back(client, j.journal.clone(), shared, |seq, record| {
            if foreign.is_none() && *record != record_bytes(j.index, seq, size) {
                foreign = Some(seq);
            }
            // Positions arrive once each, in order: count those inside an acknowledged range
            // (consumed in order as the read passes them). Fewer than acknowledged: some lost.
            while let Some((start, n)) = pending.peek().copied() {
                if seq >= start + n {
                    pending.next();
                    continue;
                }
                if seq >= start {
                    count += 1;
                }
                break;
            }
        })
        .await
        .map_err(BenchError::Verify)?;
        if let Some(seq) = foreign {
            return Err(BenchError::Verify(format!("journal {} holds a foreign record at {seq}", j.index)));
        }
        let want: u64 = acked.get(&j.index).into_iter().flatten().map(|(_, n)| n).sum();
        if count != want {
            return Err(BenchError::Verify(format!(
                "journal {} lost acknowledged records: read back {count} of {want}",
                j.index
            )));
        }
        verified += count;
    }
    Ok(verified)
}

/// Reads every record of `journal` linearizably from the start, handing each to `each` with
/// its position (as [`read_all`], over any service, waiting out a gateway's quota). Positions
/// arrive in increasing order.
async fn read_back<S>(
    client: &Client<S>,
    journal: S::Journal,
    shared: &Shared,
    mut each: impl FnMut(u64, &Bytes),
) -> Result<(), String>
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    let mut reader = Reader::new(
        client.clone(),
        journal,
        paros_core::Seq(0),
        ReaderConfig::default(),
        ReadConsistency::Linearizable,
        0,
    )
    .map_err(|e| e.to_string())?;
    loop {
        match reader.next().await {
            Ok(ReaderOutcome::Records { from, records, .. }) => {
                let empty = records.is_empty();
                for (i, r) in records.iter().enumerate() {
                    each(from.0 + i as u64, r);
                }
                if empty || reader.caught_up() {
                    return Ok(());
                }
            }
            Ok(ReaderOutcome::Gap { .. }) => {}
            Err(ReaderError::Denied(denial)) if quota_wait(&denial).is_some() => {
                shared.over_quota.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(quota_wait(&denial).unwrap_or_default()).await;
            }
            Ok(other) => return Err(format!("read at {:?} answered {other:?}", reader.cursor())),
            Err(e) => return Err(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_cut_by_a_kill_stays_alone_and_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acks.log");
        // The last run was killed after writing the journal of its last line.
        std::fs::write(&path, "0 10 4\n1").unwrap();
        let mut log = open_ack_log(&path).unwrap();
        log.write_all(b"2 20 4\n").unwrap();
        drop(log);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "0 10 4\n1\n2 20 4\n");
        assert_eq!(ack_entries(&text), vec![(0, 10, 4), (2, 20, 4)]);
        assert_eq!(ack_entries("3 5\n4 x 1\n5 6 7 8\n"), vec![], "short, unparsable and long lines are left out");
        let mut fresh = open_ack_log(&dir.path().join("new.log")).unwrap();
        fresh.write_all(b"0 0 1\n").unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("new.log")).unwrap(), "0 0 1\n", "a new log starts clean");
    }
}
