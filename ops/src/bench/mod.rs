//! `paros bench`: drive the embedded cell the way a user does — journals created through the
//! registry, records written with paros-client's `Writer` — and report throughput, latency
//! and group-commit figures; verify every acknowledged record afterwards with its `Reader`.
//!
//! With `--target http://HOST:PORT` the same writers drive a running gateway over HTTP
//! instead ([`HttpService`]): a fresh tenant signed up (or `--token`'s), journals created with
//! `POST /v1/journals`, every acknowledged record read back over HTTP. The figures only the
//! embedded cell can tell (fsyncs, the process's memory, placement on every node) are 0 there.

mod drive;
mod http;
mod in_cell;
mod read;
mod report;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use paros_client::{JournalService, Writer};
use paros_core::journal::WriterMode;
use paros_core::{JournalId, JournalKey, TenantId};
use paros_registry::{Accepted, Directory, JournalName, Op, Quotas, TenantName};

pub use paros_embedded::read_all;
use paros_embedded::{CellError, EmbeddedCell, random_u64};

use http::run_http;
use in_cell::run_in_cell;
pub use read::ReadFigures;
pub use report::Report;

/// The benchmark's shape.
#[derive(Clone, Debug)]
pub struct BenchArgs {
    pub writers: usize,
    pub journals: usize,
    pub record_bytes: usize,
    pub batch: usize,
    /// Writes each loop keeps in flight on its journal's writer.
    pub in_flight: usize,
    /// Over HTTP: writes travel on append sessions.
    pub session: bool,
    /// Over HTTP: HTTP/1.1 instead of HTTP/2.
    pub http1: bool,
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
    /// Over HTTPS: PEM certificates to trust beside the system's roots.
    pub ca_file: Option<PathBuf>,
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
    /// The nodes' [`paros_node::shell::ShellConfig::read_batch_max`] (`None`: the default).
    pub read_batch_max: Option<usize>,
    /// The replicas keep their read caches (`false`: every read goes through a node's thread).
    pub read_cache: bool,
    /// Read replicas of the embedded cell's default tier (0: none; reads then go to the
    /// voters). In-cell only: a gateway's cell has the replicas it has.
    pub replicas: usize,
    /// Readers beside the writers: half (rounded up) follow a journal's tail, the others read
    /// pages at random acknowledged positions (0: none, and no read figures in the report).
    pub readers: usize,
    /// The consistency the readers read with.
    pub consistency: ReadMode,
    /// How long one read may take before it counts as unserved (and a tail reader's long-poll,
    /// capped at a second).
    pub read_deadline: Duration,
    /// The `limit` of each random read (`None`: a full page).
    pub read_limit: Option<u32>,
    /// The random readers' pages a second, all of them together (`None`: each reads as fast as
    /// its reads come back, a closed loop). Paced, they leave the writers the rest of the
    /// machine, so a read-to-write ratio can be taken at the writers' own rate.
    pub reads_per_s: Option<u64>,
}

/// The consistency of the bench's readers (`--consistency`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadMode {
    /// A random read at position `p` asks for a server that has applied `p`
    /// (`Consistency::Reached(p + 1)`); a tail reader reads monotonically.
    #[default]
    #[value(name = "at_least")]
    AtLeast,
    /// Every read is linearizable.
    #[value(name = "linearizable")]
    Linearizable,
}

impl ReadMode {
    /// The flag's (and the report's) name of the mode.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            ReadMode::AtLeast => "at_least",
            ReadMode::Linearizable => "linearizable",
        }
    }
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
    #[error("reader of journal {journal} failed: {reason}")]
    Reader { journal: usize, reason: String },
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
    /// When each write in flight was handed to the writer, oldest first.
    sent: std::collections::VecDeque<Instant>,
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
            tier: None,
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
    /// Each bench journal's acknowledgements, by index, for the readers.
    acks: Vec<read::JournalAcks>,
    /// Whether the acknowledgements' instants are kept (there are readers).
    ack_times: bool,
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
    if args.writers == 0 || args.journals == 0 || args.batch == 0 || args.record_bytes == 0 || args.in_flight == 0 {
        return Err(BenchError::Args("writers, journals, batch, in-flight and record-bytes must be at least 1".into()));
    }
    if args.read_limit == Some(0) {
        return Err(BenchError::Args("--read-limit must be at least 1".into()));
    }
    if args.reads_per_s == Some(0) {
        return Err(BenchError::Args("--reads-per-s must be at least 1".into()));
    }
    if args.reads_per_s.is_some() && args.readers < 2 {
        return Err(BenchError::Args("--reads-per-s paces the random readers: give --readers 2 or more".into()));
    }
    if args.readers > 0 && args.read_deadline.is_zero() {
        return Err(BenchError::Args("--read-deadline-ms must be at least 1 with --readers".into()));
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
        acks: (0..args.journals).map(|_| read::JournalAcks::default()).collect(),
        ack_times: args.readers > 0,
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
