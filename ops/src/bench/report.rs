//! The report of a run: its figures, per-second windows, the round split, the progress bar.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::Serialize;

use super::{BenchArgs, ReadFigures, Shared};

/// What `paros bench --json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// `in_cell` (the embedded cell, through the node RPC) or `http` (a gateway, `--target`).
    pub target: &'static str,
    /// Over HTTP, how writes travelled: `http2` or `http1`, `+session` on append sessions;
    /// empty in the cell.
    pub transport: String,
    /// Writes each loop kept in flight (`--in-flight`).
    pub in_flight: usize,
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
    /// to compare builds by when throughput is bound by the CPU. Over HTTP this process is
    /// the client (the writers, HTTP and JSON); the gateway's is `target_cpu_us_per_record`.
    pub cpu_us_per_record: f64,
    /// The CPU per acknowledged record of the process that serves the writes while the writers
    /// ran, in microseconds (`target_cpu_split` added up). Over HTTP the gateway's process,
    /// from its `/metrics` read before and after (`paros_gateway_thread_cpu_seconds_total`; 0
    /// when it has no such series); in the cell this process, from its threads' times (the
    /// writers are tokio tasks here, so `runtime` holds the client's side too).
    pub target_cpu_us_per_record: f64,
    /// In the cell: CPU of the voters' node threads per acknowledged record, in µs, and of the
    /// read replicas' (`null`: no replicas, or not Linux). Reads served by voters count too.
    pub voter_node_cpu_us_per_record: Option<f64>,
    pub replica_node_cpu_us_per_record: Option<f64>,
    /// In the cell: reads answered from the machines' read caches in the readers' own tasks
    /// (`paros_node::ReadCache`), and reads the caches declined and sent to the node's thread;
    /// `null` over HTTP.
    pub reads_from_cache: Option<u64>,
    pub reads_cache_declined: Option<u64>,
    /// In the cell, with readers: the round trip of a request a node (the first replica, else
    /// the first voter) answers at once on its thread, timed every 2 ms during the run.
    pub node_hop_ms: Option<HopMs>,
    /// Over HTTP on append sessions: the lines the gateway's sessions sent to the cell per Write
    /// they travelled in while the writers ran (`paros_gateway_session_lines_total` over
    /// `paros_gateway_session_writes_total`; consecutive lines read together travel as one).
    /// `null` in the cell, without sessions, or from a gateway that does not count them.
    pub session_lines_per_write: Option<f64>,
    /// The same by thread role: `runtime` (tokio's threads and the main thread: HTTP, auth,
    /// the gateway's handlers, the client's hop to the node), `node`, `store`, `read`, `other`.
    pub target_cpu_split: BTreeMap<String, f64>,
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
    /// The readers' figures (`--readers`), as fields of the report; absent without readers.
    #[serde(flatten)]
    pub reads: Option<ReadFigures>,
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
    pub(super) fn of(h: &paros_node::timing::Histogram) -> Split {
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

/// Every node's fjall activity added up.
pub(super) fn sum_activity(probes: &[paros_store::StoreProbe]) -> paros_store::StoreActivity {
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
pub(super) fn windows(lat: &[(u32, u32)], elapsed: f64) -> (Vec<Window>, f64) {
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

/// The figures every target has; the cell's own are 0 here.
pub(super) fn report(args: &BenchArgs, shared: &Shared, elapsed: f64, verified: u64) -> Report {
    let records = shared.records.load(Ordering::Relaxed);
    let batches = shared.batches.load(Ordering::Relaxed);
    let timed = std::mem::take(&mut *shared.latencies_us.lock().expect("lock"));
    // Windows count acknowledged writes (batches), as the latency figures do.
    let (windows, min_window_ratio) = windows(&timed, elapsed);
    let mut lat: Vec<u32> = timed.into_iter().map(|(_, us)| us).collect();
    lat.sort_unstable();
    let pct = |p: f64| percentile(&lat, p);
    Report {
        target: "in_cell",
        transport: String::new(),
        in_flight: args.in_flight,
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
        target_cpu_us_per_record: 0.0,
        voter_node_cpu_us_per_record: None,
        replica_node_cpu_us_per_record: None,
        reads_from_cache: None,
        reads_cache_declined: None,
        node_hop_ms: None,
        session_lines_per_write: None,
        target_cpu_split: BTreeMap::new(),
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
        reads: None,
    }
}

pub(super) fn progress_bar(duration: Duration) -> indicatif::ProgressBar {
    let p = indicatif::ProgressBar::new(duration.as_millis() as u64);
    p.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {msg}")
            .expect("a valid template"),
    );
    p
}

/// The value at fraction `p` (0..=1) of `sorted` (ascending), exactly; 0 when it is empty.
/// How long a request a node answers at once takes there and back ([`Report::node_hop_ms`]).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct HopMs {
    pub probes: u64,
    pub p50: f64,
    pub p99: f64,
}

pub(super) fn percentile(sorted: &[u32], p: f64) -> u64 {
    sorted.get(((sorted.len() as f64 * p) as usize).min(sorted.len().saturating_sub(1))).copied().map_or(0, u64::from)
}
