//! `/metrics`, in Prometheus text (or OpenMetrics, [`crate::exposition`]): per-route request
//! counts and latency histograms, per-tenant records and bytes written and read, auth refusals
//! by reason, the process's CPU time by thread role ([`crate::threads`]), and — when the
//! gateway was given its cell's node counters ([`NodeStats`]) — each node's rounds, syncs,
//! campaigns, leaderships won and dormant journals, and, where the port has them, its store's
//! compactions, flushes, tables, waits and bytes on disk.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use paros_core::{NodeId, TenantId};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric as _};
use prometheus_client::metrics::TypedMetric as _;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::auth::Refusal;
use crate::exposition::{Exposition, to_prometheus};
use crate::nodes::{NodeCounters, NodeStats, ReplicaCounters, ReplicaStateName, StoreCounters};
use crate::threads::{ROLES, ThreadCpu};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub method: String,
    pub route: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LatencyLabels {
    pub method: String,
    pub route: String,
}

/// A tenant's traffic in one direction: `direction` is `written` or `read`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TrafficLabels {
    /// The tenant id, as it travels (16 lowercase hex digits).
    pub tenant: String,
    pub direction: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    node: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_5, 2.0, 16))
}

/// The node counters, read from the port at each scrape, and the directory that names the
/// journals in the replicas' top-N series (as of the last [`Metrics::name_journals`]).
struct NodeCollector(Arc<dyn NodeStats>, Names);

/// Where the collector finds journal names.
type Names = Arc<RwLock<Option<Arc<paros_registry::Directory>>>>;

impl std::fmt::Debug for NodeCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeCollector")
    }
}

/// How a family's values behave: counted up since boot, or a level now.
#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
}

/// A series' value: a count, or a duration given in microseconds and shown in seconds.
#[derive(Clone, Copy)]
enum Value {
    Count(u64),
    Micros(u64),
}

type Field<T> = (&'static str, &'static str, Kind, fn(&T) -> Value);

/// The node families: name, help, kind, value.
const NODE_FAMILIES: [Field<NodeCounters>; 5] = [
    ("node_rounds", "Rounds each node ran", Kind::Counter, |c| Value::Count(c.rounds)),
    ("node_syncs", "Rounds each node made durable with a sync", Kind::Counter, |c| Value::Count(c.syncs)),
    ("node_campaigns", "Campaigns each node's voters started", Kind::Counter, |c| Value::Count(c.campaigns)),
    ("node_leaderships_won", "Campaigns each node's voters won", Kind::Counter, |c| Value::Count(c.leaderships_won)),
    ("node_dormant_journals", "Journals asleep on each node now", Kind::Gauge, |c| Value::Count(c.dormant)),
];

/// The store families (only the nodes whose store the port samples): name, help, kind, value.
const STORE_FAMILIES: [Field<StoreCounters>; 10] = [
    (
        "node_store_disk_bytes",
        "Bytes each node's store holds on disk: tables, journals, write-ahead segments",
        Kind::Gauge,
        |a| Value::Count(a.disk_bytes),
    ),
    ("node_store_compactions", "Compactions each node's store finished", Kind::Counter, |a| {
        Value::Count(a.compactions_completed)
    }),
    ("node_store_compaction_seconds", "Time each node's store spent compacting", Kind::Counter, |a| {
        Value::Micros(a.compacting_us)
    }),
    ("node_store_compactions_active", "Compactions running in each node's store now", Kind::Gauge, |a| {
        Value::Count(a.compactions_active)
    }),
    (
        "node_store_flushes_outstanding",
        "Sealed memtables waiting to be flushed in each node's store now",
        Kind::Gauge,
        |a| Value::Count(a.flushes_outstanding),
    ),
    ("node_store_log_tables", "Tables holding each node's log, every level", Kind::Gauge, |a| {
        Value::Count(a.log_tables)
    }),
    ("node_store_log_l0_tables", "Tables holding each node's log at level 0", Kind::Gauge, |a| {
        Value::Count(a.log_l0_tables)
    }),
    ("node_store_journal_files", "Each node's database journal files", Kind::Gauge, |a| Value::Count(a.journal_files)),
    ("node_store_room_waits", "Writes that waited for each node's store to apply synced rounds", Kind::Counter, |a| {
        Value::Count(a.room_waits)
    }),
    (
        "node_store_room_wait_seconds",
        "Time writes waited for each node's store to apply synced rounds",
        Kind::Counter,
        |a| Value::Micros(a.room_waited_us),
    ),
];

/// The read replica families (one series per replica, its journals' maxima): name, help, kind,
/// value.
const REPLICA_FAMILIES: [Field<ReplicaCounters>; 6] = [
    ("replica_journals_behind", "Journals each replica knows chosen slots of and has not applied", Kind::Gauge, |r| {
        Value::Count(r.behind)
    }),
    ("replica_lag_slots_max", "The most chosen slots one journal of each replica has not applied", Kind::Gauge, |r| {
        Value::Count(r.lag_slots_max)
    }),
    (
        "replica_lag_seconds_max",
        "How long the furthest behind journal of each replica has known of slots it has not applied",
        Kind::Gauge,
        |r| Value::Micros(r.lag_ms_max.saturating_mul(1_000)),
    ),
    (
        "replica_watermark_age_seconds_max",
        "The age of each replica's oldest watermark: time since its tier's feed last told one of its journals anything",
        Kind::Gauge,
        |r| Value::Micros(r.feed_age_ms_max.saturating_mul(1_000)),
    ),
    (
        "replica_reads_refused_unready",
        "Reads each replica refused because it had not caught up since it started",
        Kind::Counter,
        |r| Value::Count(r.reads_refused_unready),
    ),
    (
        "replica_reads_cached",
        "Reads each replica's read cache answered without a trip to its node thread",
        Kind::Counter,
        |r| Value::Count(r.reads_cached),
    ),
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    node: String,
    state: &'static str,
}

/// `replica_state{node,state}`: 1 for each replica's state, 0 for the others.
fn encode_replica_states(encoder: &mut DescriptorEncoder, stats: &[NodeCounters]) -> Result<(), std::fmt::Error> {
    let help = "Each read replica's state: 1 for the one it is in (only serving replicas are sent reads)";
    let mut family = encoder.encode_descriptor("replica_state", help, None, ConstGauge::<i64>::TYPE)?;
    for c in stats {
        let Some(r) = c.replica else { continue };
        for state in ReplicaStateName::ALL {
            let labels = StateLabels { node: c.node.to_string(), state: state.as_str() };
            ConstGauge::new(i64::from(r.state == state)).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BucketLabels {
    node: String,
    le: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JournalLabels {
    node: String,
    journal: String,
}

/// The replicas' lag over their journals: per replica, a histogram of its journals by lag (in
/// slots and in seconds; a gauge per cumulative bucket, `le` as in a histogram, since the
/// counts are a snapshot), and its few journals furthest behind by name (bounded:
/// [`crate::nodes::LAG_TOP_MAX`] per replica).
fn encode_replica_lags(
    encoder: &mut DescriptorEncoder,
    stats: &[NodeCounters],
    names: Option<&paros_registry::Directory>,
) -> Result<(), std::fmt::Error> {
    type Pick = fn(&ReplicaCounters) -> &crate::nodes::LagHistogram;
    let histograms: [(&str, &str, Pick, f64); 2] = [
        (
            "replica_journals_lag_slots",
            "Each replica's journals lagging at most le chosen slots (cumulative, a snapshot)",
            |r| &r.lag_slots_journals,
            1.0,
        ),
        (
            "replica_journals_lag_seconds",
            "Each replica's journals behind for at most le seconds (cumulative, a snapshot)",
            |r| &r.lag_ms_journals,
            1e-3,
        ),
    ];
    for (name, help, pick, scale) in histograms {
        let mut family = encoder.encode_descriptor(name, help, None, ConstGauge::<i64>::TYPE)?;
        for c in stats {
            let Some(r) = &c.replica else { continue };
            let h = pick(r);
            let mut below = 0u64;
            for (i, count) in h.counts.iter().enumerate() {
                below += count;
                #[allow(clippy::cast_precision_loss, reason = "bucket bounds are small")]
                let le = h.bounds.get(i).map_or_else(|| "+Inf".to_owned(), |b| (*b as f64 * scale).to_string());
                let labels = BucketLabels { node: c.node.to_string(), le };
                ConstGauge::new(i64::try_from(below).unwrap_or(i64::MAX)).encode(family.encode_family(&labels)?)?;
            }
        }
    }
    let name_of = |key: paros_core::JournalKey| {
        names
            .and_then(|d| Some(format!("{}/{}", d.tenant(key.tenant)?.name, d.journal(key)?.name)))
            .unwrap_or_else(|| format!("{}/{}", key.tenant, key.journal))
    };
    type Top = fn(&crate::nodes::LaggingJournal) -> Value;
    let tops: [(&str, &str, Top); 2] = [
        (
            "replica_journal_lag_slots",
            "Chosen slots not yet applied by each replica's journals furthest behind (tenant/journal)",
            |l| Value::Count(l.slots),
        ),
        (
            "replica_journal_lag_seconds",
            "How long each replica's journals furthest behind have been behind (tenant/journal)",
            |l| Value::Micros(l.ms.saturating_mul(1_000)),
        ),
    ];
    for (name, help, value) in tops {
        let mut family = encoder.encode_descriptor(name, help, None, ConstGauge::<i64>::TYPE)?;
        for c in stats {
            let Some(r) = &c.replica else { continue };
            for l in r.top() {
                let labels = JournalLabels { node: c.node.to_string(), journal: name_of(l.journal) };
                encode_gauge(family.encode_family(&labels)?, value(l))?;
            }
        }
    }
    Ok(())
}

/// Writes one family: a series per node that has a value.
fn encode_family(
    encoder: &mut DescriptorEncoder,
    (name, help, kind): (&str, &str, Kind),
    series: impl Iterator<Item = (NodeId, Value)>,
) -> Result<(), std::fmt::Error> {
    let metric_type = match kind {
        Kind::Counter => ConstCounter::<u64>::TYPE,
        Kind::Gauge => ConstGauge::<i64>::TYPE,
    };
    let mut family = encoder.encode_descriptor(name, help, None, metric_type)?;
    for (node, value) in series {
        let labels = NodeLabels { node: node.to_string() };
        let metric = family.encode_family(&labels)?;
        #[allow(clippy::cast_precision_loss, reason = "a duration in seconds, shown to the microsecond")]
        match (kind, value) {
            (Kind::Counter, Value::Count(n)) => ConstCounter::new(n).encode(metric)?,
            (Kind::Counter, Value::Micros(us)) => ConstCounter::new(us as f64 / 1e6).encode(metric)?,
            (Kind::Gauge, value) => encode_gauge(metric, value)?,
        }
    }
    Ok(())
}

/// One gauge sample: a count as an integer, a duration in seconds.
fn encode_gauge(metric: prometheus_client::encoding::MetricEncoder<'_>, value: Value) -> Result<(), std::fmt::Error> {
    #[allow(clippy::cast_precision_loss, reason = "a duration in seconds, shown to the microsecond")]
    match value {
        Value::Count(n) => ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX)).encode(metric),
        Value::Micros(us) => ConstGauge::new(us as f64 / 1e6).encode(metric),
    }
}

impl Collector for NodeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats = self.0.node_stats();
        for (name, help, kind, value) in NODE_FAMILIES {
            encode_family(&mut encoder, (name, help, kind), stats.iter().map(|c| (c.node, value(c))))?;
        }
        if stats.iter().any(|c| c.replica.is_some()) {
            encode_replica_states(&mut encoder, &stats)?;
            let names = self.1.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
            encode_replica_lags(&mut encoder, &stats, names.as_deref())?;
            for (name, help, kind, value) in REPLICA_FAMILIES {
                encode_family(
                    &mut encoder,
                    (name, help, kind),
                    stats.iter().filter_map(|c| Some((c.node, value(c.replica.as_ref()?)))),
                )?;
            }
        }
        if stats.iter().any(|c| c.store.is_some()) {
            for (name, help, kind, value) in STORE_FAMILIES {
                encode_family(
                    &mut encoder,
                    (name, help, kind),
                    stats.iter().filter_map(|c| Some((c.node, value(c.store.as_ref()?)))),
                )?;
            }
        }
        Ok(())
    }
}

/// Notes every node in `stats` as seen now.
fn note_seen(seen: &Mutex<HashMap<NodeId, std::time::Instant>>, stats: &[NodeCounters]) {
    let now = std::time::Instant::now();
    let mut seen = seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for c in stats {
        seen.insert(c.node, now);
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MachineLabels {
    role: &'static str,
    standing: &'static str,
}

/// The cell's machines and seat moves (issue 34), from the directory of the last
/// [`Metrics::name_journals`] and, when the gateway has one, the node port: bounded
/// cardinality (machines by role and standing: at most nine series; the others one each).
struct CellCollector {
    names: Names,
    nodes: Option<Arc<dyn NodeStats>>,
    seen: Arc<Mutex<HashMap<NodeId, std::time::Instant>>>,
}

impl std::fmt::Debug for CellCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CellCollector")
    }
}

impl Collector for CellCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use paros_registry::{Role, Standing};
        let Some(d) = self.names.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone() else {
            return Ok(());
        };
        let reported: Option<std::collections::BTreeSet<NodeId>> = self.nodes.as_ref().map(|n| {
            let stats = n.node_stats();
            note_seen(&self.seen, &stats);
            stats.into_iter().map(|c| c.node).collect()
        });
        let live = |m: &paros_registry::Machine| crate::fleet::Liveness::of(m, reported.as_ref());
        let s = crate::fleet::survey(&d, &live, 0);

        let help = "The registry's machines, by role and standing (registered: in service)";
        let mut family = encoder.encode_descriptor("cell_machines", help, None, ConstGauge::<i64>::TYPE)?;
        for role in [Role::Node, Role::Replica, Role::Gateway] {
            for standing in [Standing::Registered, Standing::Draining, Standing::Retired] {
                let n = d.machines().filter(|m| m.role == role && m.standing == standing).count();
                let labels = MachineLabels {
                    role: crate::fleet::role_text(role),
                    standing: crate::fleet::standing_text(standing),
                };
                encode_gauge(family.encode_family(&labels)?, Value::Count(n as u64))?;
            }
        }
        if reported.is_some() {
            let help = "Nodes and replicas in service or draining that the node port does not report now";
            let unseen = d
                .machines()
                .filter(|m| m.standing != Standing::Retired && live(m) == crate::fleet::Liveness::Unseen)
                .count();
            let family = encoder.encode_descriptor("cell_machines_unseen", help, None, ConstGauge::<i64>::TYPE)?;
            encode_gauge(family, Value::Count(unseen as u64))?;
        }
        let gauges = [
            ("cell_moves_in_progress", "Seat moves the registry recorded and has not recorded done", s.moves_total),
            (
                "cell_journals_below_full_strength",
                "Live journals with a voter that is retired, replaced, unknown or (with the node port) unseen",
                s.weak_total,
            ),
        ];
        for (name, help, n) in gauges {
            let family = encoder.encode_descriptor(name, help, None, ConstGauge::<i64>::TYPE)?;
            encode_gauge(family, Value::Count(n))?;
        }
        let help = "Seat moves the registry recorded done (MoveDone), ever: the sum of every journal's epoch";
        let family = encoder.encode_descriptor("cell_moves_done", help, None, ConstCounter::<u64>::TYPE)?;
        ConstCounter::new(s.moves_done).encode(family)?;
        Ok(())
    }
}

/// The seat moves this gateway saw recorded and not yet done, timed from the first directory
/// it folded that showed each one: the source of `cell_move_duration_seconds`. The directory
/// keeps no time of a `MoveSeat` or a `MoveDone`, so the gateway's own clock, at its folds,
/// is the measure; a move already recorded in the first directory it saw has no known start
/// and is not timed. Bounded by the directory's moves in progress.
#[derive(Debug, Default)]
pub(crate) struct MoveClock {
    /// Each move in progress by journal: its epoch, and when it was first seen (`None`: in
    /// the first directory this clock saw, so its start is unknown).
    started: HashMap<paros_core::JournalKey, (paros_registry::Epoch, Option<std::time::Instant>)>,
    /// Whether a directory was seen before: a move first seen after it was recorded while this
    /// clock ran, so its first sight is its start.
    primed: bool,
}

impl MoveClock {
    /// Takes in the directory as folded at `now`; returns how long each move it finds
    /// recorded done took (those whose start it saw). One pass over the directory's journals.
    pub(crate) fn on_directory(
        &mut self,
        d: &paros_registry::Directory,
        now: std::time::Instant,
    ) -> Vec<std::time::Duration> {
        let mut done = Vec::new();
        let seen_at = self.primed.then_some(now);
        let mut moving = std::collections::HashSet::new();
        for (j, m) in d.moves_in_progress() {
            moving.insert(j.key);
            match self.started.get(&j.key) {
                Some((epoch, _)) if *epoch == m.epoch => {}
                // A move recorded after an earlier one of the same journal was done between
                // two folds: the earlier one ends here, the new one starts here.
                Some((epoch, start)) => {
                    if let Some(start) = start.filter(|_| j.epoch >= *epoch) {
                        done.push(now.saturating_duration_since(start));
                    }
                    self.started.insert(j.key, (m.epoch, seen_at));
                }
                None => {
                    self.started.insert(j.key, (m.epoch, seen_at));
                }
            }
        }
        self.started.retain(|key, (epoch, start)| {
            if moving.contains(key) {
                return true;
            }
            // Recorded done (the journal reached the move's epoch), or the journal is gone.
            let reached = d.journal(*key).is_some_and(|j| j.is_live() && j.epoch >= *epoch);
            if let Some(start) = start.filter(|_| reached) {
                done.push(now.saturating_duration_since(start));
            }
            false
        });
        self.primed = true;
        done
    }
}

/// Buckets of `cell_move_duration_seconds`: 0.1 s to about 27 minutes, doubling.
fn move_duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.1, 2.0, 15))
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RoleLabels {
    role: &'static str,
}

/// The process's CPU by thread role ([`crate::threads`]), read at each scrape.
#[derive(Debug, Default)]
struct ThreadCollector(ThreadCpu);

impl Collector for ThreadCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let seconds = self.0.sample();
        let help = "CPU time (user + system) of this process's threads, by role: runtime (tokio's threads and \
                    the main thread: HTTP, auth, the gateway), node, store, read, other";
        let mut family = encoder.encode_descriptor("thread_cpu_seconds", help, None, ConstCounter::<f64>::TYPE)?;
        for (role, s) in ROLES.iter().zip(seconds) {
            ConstCounter::new(s).encode(family.encode_family(&RoleLabels { role })?)?;
        }
        Ok(())
    }
}

/// A tenant's traffic through this gateway, cumulative since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    pub records_written: u64,
    pub bytes_written: u64,
    pub records_read: u64,
    pub bytes_read: u64,
}

impl Traffic {
    /// The sum of two tallies.
    #[must_use]
    pub fn plus(self, o: Traffic) -> Traffic {
        Traffic {
            records_written: self.records_written + o.records_written,
            bytes_written: self.bytes_written + o.bytes_written,
            records_read: self.records_read + o.records_read,
            bytes_read: self.bytes_read + o.bytes_read,
        }
    }
}

const WRITTEN: &str = "written";
const READ: &str = "read";

/// The gateway's metrics, in their own registry (no global recorder).
pub struct Metrics {
    registry: Mutex<Registry>,
    pub requests: Family<RouteLabels, Counter>,
    pub latency: Family<LatencyLabels, Histogram, fn() -> Histogram>,
    /// Records accepted (written) or answered (read), per tenant.
    pub records: Family<TrafficLabels, Counter>,
    /// Decoded record bytes accepted (written) or answered (read), per tenant.
    pub bytes: Family<TrafficLabels, Counter>,
    pub auth_refusals: Family<RefusalLabels, Counter>,
    /// Every tenant's traffic added up.
    total: Mutex<Traffic>,
    nodes: Option<Arc<dyn NodeStats>>,
    /// The series each answer counts, found once per (method, route, status): an answer then
    /// costs no label allocation and no hashing of labels (the families hold the same series).
    routes: RwLock<Vec<RouteSeries>>,
    /// The series each tenant's traffic counts, found once per tenant.
    tenants: RwLock<HashMap<TenantId, TenantSeries>>,
    /// The directory the node collector names journals from.
    names: Names,
    /// When the node port last reported each node (bounded by the cell's machines).
    seen: Arc<Mutex<HashMap<NodeId, std::time::Instant>>>,
    /// Seat moves' durations, as this gateway saw them ([`MoveClock`]).
    move_durations: Histogram,
    moves: Mutex<MoveClock>,
    /// Lines of append sessions sent to the cell, and the Writes they travelled in.
    session_lines: Counter,
    session_writes: Counter,
    /// Times an append session's line waited for a quota instead of being refused.
    session_quota_waits: Counter,
}

/// One (method, route, status)'s request counter and its (method, route)'s latency histogram.
struct RouteSeries {
    method: String,
    route: String,
    status: u16,
    requests: Counter,
    latency: Histogram,
}

/// A tenant's records and bytes counters: written, then read.
struct TenantSeries {
    records: [Counter; 2],
    bytes: [Counter; 2],
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").field("nodes", &self.nodes.is_some()).finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(None)
    }
}

impl Metrics {
    /// The gateway's metrics; `nodes` adds the node families, read from it at each scrape.
    #[must_use]
    pub fn new(nodes: Option<Arc<dyn NodeStats>>) -> Metrics {
        let mut registry = Registry::with_prefix("paros_gateway");
        let requests = Family::<RouteLabels, Counter>::default();
        let latency = Family::<LatencyLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let records = Family::<TrafficLabels, Counter>::default();
        let bytes = Family::<TrafficLabels, Counter>::default();
        let auth_refusals = Family::<RefusalLabels, Counter>::default();
        registry.register("requests", "HTTP requests answered, by route and status", requests.clone());
        registry.register("request_duration_seconds", "HTTP request latency, by route", latency.clone());
        registry.register(
            "tenant_records",
            "Records written (accepted) and read (answered), by tenant",
            records.clone(),
        );
        registry.register(
            "tenant_bytes",
            "Decoded record bytes written (accepted) and read (answered), by tenant",
            bytes.clone(),
        );
        registry.register("auth_refusals", "Requests refused 401, by reason", auth_refusals.clone());
        let (session_lines, session_writes, session_quota_waits) =
            (Counter::default(), Counter::default(), Counter::default());
        registry.register(
            "session_lines",
            "Append-session lines the door admitted and sent to the cell",
            session_lines.clone(),
        );
        registry.register(
            "session_writes",
            "Writes those lines travelled to the cell in (consecutive lines read together travel as one)",
            session_writes.clone(),
        );
        registry.register(
            "session_quota_waits",
            "Times an append-session line over its tenant's requests/s or bytes/s quota waited for it (the session \
             reads no further line meanwhile) instead of being answered 429",
            session_quota_waits.clone(),
        );
        // Every reason is listed from the start, at 0, so a dashboard can rate it at once.
        for r in Refusal::ALL {
            let _ = auth_refusals.get_or_create(&RefusalLabels { reason: r.as_str() });
        }
        registry.register_collector(Box::new(ThreadCollector::default()));
        let names = Names::default();
        let seen: Arc<Mutex<HashMap<NodeId, std::time::Instant>>> = Arc::default();
        if let Some(port) = &nodes {
            registry.register_collector(Box::new(NodeCollector(Arc::clone(port), Arc::clone(&names))));
        }
        let move_durations = move_duration_histogram();
        registry.register(
            "cell_move_duration_seconds",
            "Seat moves from the first registry fold this gateway saw showing each recorded (MoveSeat) to the first \
             showing it done (MoveDone), by this gateway's clock; a move in progress when the gateway started is \
             not timed",
            move_durations.clone(),
        );
        registry.register_collector(Box::new(CellCollector {
            names: Arc::clone(&names),
            nodes: nodes.clone(),
            seen: Arc::clone(&seen),
        }));
        Metrics {
            registry: Mutex::new(registry),
            requests,
            latency,
            records,
            bytes,
            auth_refusals,
            total: Mutex::default(),
            nodes,
            routes: RwLock::default(),
            tenants: RwLock::default(),
            names,
            seen,
            move_durations,
            moves: Mutex::default(),
            session_lines,
            session_writes,
            session_quota_waits,
        }
    }

    /// Times the seat moves in the directory as folded now (`cell_move_duration_seconds`):
    /// the gateway calls it with each directory it folds.
    pub fn time_moves(&self, directory: &paros_registry::Directory) {
        let now = std::time::Instant::now();
        let done = self.moves.lock().unwrap_or_else(std::sync::PoisonError::into_inner).on_directory(directory, now);
        for took in done {
            self.move_durations.observe(took.as_secs_f64());
        }
    }

    /// The directory whose names the replicas' top-N journal series carry (ids, as
    /// `tenant/journal` in hex, for a journal it does not know).
    pub fn name_journals(&self, directory: Option<Arc<paros_registry::Directory>>) {
        *self.names.write().unwrap_or_else(std::sync::PoisonError::into_inner) = directory;
    }

    /// The node counters now, when the gateway was given the port; each node reported is noted
    /// as seen now ([`seen_ago`](Self::seen_ago)).
    #[must_use]
    pub fn node_stats(&self) -> Option<Vec<NodeCounters>> {
        let stats = self.nodes.as_ref().map(|n| n.node_stats());
        if let Some(all) = &stats {
            note_seen(&self.seen, all);
        }
        stats
    }

    /// How long ago the node port last reported `node`, as far as this gateway looked (the
    /// overview, the cell status and each scrape look); `None` when it never did.
    #[must_use]
    pub fn seen_ago(&self, node: NodeId) -> Option<std::time::Duration> {
        let seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.get(&node).map(std::time::Instant::elapsed)
    }

    /// Counts one answered request.
    pub fn observe(&self, method: &str, route: &str, status: u16, seconds: f64) {
        let hit = |routes: &[RouteSeries]| {
            routes.iter().find(|r| r.status == status && r.route == route && r.method == method).map(|r| {
                r.requests.inc();
                r.latency.observe(seconds);
            })
        };
        if hit(&self.routes.read().unwrap_or_else(std::sync::PoisonError::into_inner)).is_some() {
            return;
        }
        let requests = self
            .requests
            .get_or_create(&RouteLabels { method: method.to_owned(), route: route.to_owned(), status })
            .clone();
        let latency =
            self.latency.get_or_create(&LatencyLabels { method: method.to_owned(), route: route.to_owned() }).clone();
        requests.inc();
        latency.observe(seconds);
        let mut routes = self.routes.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !routes.iter().any(|r| r.status == status && r.route == route && r.method == method) {
            routes.push(RouteSeries { method: method.to_owned(), route: route.to_owned(), status, requests, latency });
        }
    }

    /// Counts one refused token.
    pub fn refused(&self, reason: Refusal) {
        self.auth_refusals.get_or_create(&RefusalLabels { reason: reason.as_str() }).inc();
    }

    fn count(&self, tenant: TenantId, direction: &'static str, records: u64, bytes: u64) {
        let i = usize::from(direction != WRITTEN);
        let add = |t: &TenantSeries| {
            t.records[i].inc_by(records);
            t.bytes[i].inc_by(bytes);
        };
        let known = self.tenants.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(&tenant).map(add);
        if known.is_none() {
            // The tenant's first traffic: find its series once.
            let text = crate::auth::tenant_text(tenant);
            let get = |f: &Family<TrafficLabels, Counter>, direction| {
                f.get_or_create(&TrafficLabels { tenant: text.clone(), direction }).clone()
            };
            let mut tenants = self.tenants.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            add(tenants.entry(tenant).or_insert_with(|| TenantSeries {
                records: [get(&self.records, WRITTEN), get(&self.records, READ)],
                bytes: [get(&self.bytes, WRITTEN), get(&self.bytes, READ)],
            }));
        }
        let mut total = self.total.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let add = if direction == WRITTEN {
            Traffic { records_written: records, bytes_written: bytes, ..Traffic::default() }
        } else {
            Traffic { records_read: records, bytes_read: bytes, ..Traffic::default() }
        };
        *total = total.plus(add);
    }

    /// Counts `lines` of an append session sent to the cell as one Write.
    pub fn session_write(&self, lines: u64) {
        self.session_lines.inc_by(lines);
        self.session_writes.inc();
    }

    /// Counts one wait of an append-session line for its tenant's quota.
    pub fn session_quota_wait(&self) {
        self.session_quota_waits.inc();
    }

    /// Counts records a Write put in a tenant's journal (accepted, not duplicates).
    pub fn written(&self, tenant: TenantId, records: u64, bytes: u64) {
        self.count(tenant, WRITTEN, records, bytes);
    }

    /// Counts the records a Read page or a tail event answered a tenant.
    pub fn read(&self, tenant: TenantId, records: &[bytes::Bytes]) {
        self.count(tenant, READ, records.len() as u64, records.iter().map(|r| r.len() as u64).sum());
    }

    /// A tenant's traffic so far (zero for a tenant that had none: nothing is created).
    #[must_use]
    pub fn traffic(&self, tenant: TenantId) -> Traffic {
        let tenant = crate::auth::tenant_text(tenant);
        let get = |f: &Family<TrafficLabels, Counter>, direction| {
            f.get(&TrafficLabels { tenant: tenant.clone(), direction }).map_or(0, |c| c.get())
        };
        Traffic {
            records_written: get(&self.records, WRITTEN),
            bytes_written: get(&self.bytes, WRITTEN),
            records_read: get(&self.records, READ),
            bytes_read: get(&self.bytes, READ),
        }
    }

    /// Every tenant's traffic so far, added up.
    #[must_use]
    pub fn total(&self) -> Traffic {
        *self.total.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The metrics in `format`.
    #[must_use]
    pub fn render(&self, format: Exposition) -> String {
        let mut out = String::new();
        let registry = self.registry.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Writing to a String fails only if a collector does; what was written still counts.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        match format {
            Exposition::OpenMetrics => out,
            Exposition::Prometheus => to_prometheus(&out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exposition::tests::parse_prometheus;

    #[test]
    fn every_family_renders_as_prometheus_text_that_parses() {
        let nodes: Arc<dyn NodeStats> = Arc::new(|| {
            let node = NodeCounters { node: NodeId(1), rounds: 4, syncs: 3, dormant: 2, ..NodeCounters::default() };
            let store = StoreCounters { compacting_us: 1_500_000, disk_bytes: 4096, ..StoreCounters::default() };
            let replica = ReplicaCounters {
                state: ReplicaStateName::CatchingUp,
                lag_slots_max: 7,
                lag_ms_max: 250,
                feed_age_ms_max: 40,
                reads_refused_unready: 3,
                reads_cached: 11,
                lag_slots_journals: crate::nodes::LagHistogram {
                    bounds: [0, 1, 16, 256, 4_096, 65_536],
                    counts: [5, 0, 2, 0, 0, 0, 1],
                },
                lag_ms_journals: crate::nodes::LagHistogram {
                    bounds: [0, 10, 100, 1_000, 10_000, 60_000],
                    counts: [5, 0, 0, 3, 0, 0, 0],
                },
                top: [crate::nodes::LaggingJournal {
                    journal: paros_core::JournalKey { tenant: TenantId(9), journal: paros_core::JournalId(4) },
                    slots: 70_000,
                    ms: 250,
                }; crate::nodes::LAG_TOP_MAX],
                top_len: 1,
                ..ReplicaCounters::default()
            };
            vec![
                node.with_store(store),
                NodeCounters { node: NodeId(2), ..NodeCounters::default() },
                NodeCounters { node: NodeId(3), replica: Some(replica), ..NodeCounters::default() },
            ]
        });
        let m = Metrics::new(Some(nodes));
        m.observe("GET", "/v1/journals", 200, 0.002);
        m.refused(Refusal::Expired);
        m.written(TenantId(7), 3, 30);
        m.read(TenantId(7), &[bytes::Bytes::from_static(b"abc")]);

        let text = m.render(Exposition::Prometheus);
        let samples = parse_prometheus(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let value = |key: &str| {
            samples
                .iter()
                .find(|(k, _)| {
                    *k == key
                        .replace("NODE1", &NodeId(1).to_string())
                        .replace("NODE2", &NodeId(2).to_string())
                        .replace("NODE3", &NodeId(3).to_string())
                })
                .map(|(_, v)| *v)
        };
        assert_eq!(value(r#"paros_gateway_requests_total{method="GET",route="/v1/journals",status="200"}"#), Some(1.0));
        assert_eq!(value(r#"paros_gateway_auth_refusals_total{reason="expired"}"#), Some(1.0));
        assert_eq!(value(r#"paros_gateway_node_rounds_total{node="NODE1"}"#), Some(4.0));
        assert_eq!(value(r#"paros_gateway_node_store_compaction_seconds_total{node="NODE1"}"#), Some(1.5));
        assert_eq!(value(r#"paros_gateway_node_dormant_journals{node="NODE1"}"#), Some(2.0));
        assert_eq!(value(r#"paros_gateway_replica_state{node="NODE3",state="catching_up"}"#), Some(1.0));
        assert_eq!(value(r#"paros_gateway_replica_state{node="NODE3",state="serving"}"#), Some(0.0));
        assert_eq!(value(r#"paros_gateway_replica_lag_slots_max{node="NODE3"}"#), Some(7.0));
        assert_eq!(value(r#"paros_gateway_replica_lag_seconds_max{node="NODE3"}"#), Some(0.25));
        assert_eq!(value(r#"paros_gateway_replica_watermark_age_seconds_max{node="NODE3"}"#), Some(0.04));
        assert_eq!(value(r#"paros_gateway_replica_reads_refused_unready_total{node="NODE3"}"#), Some(3.0));
        assert_eq!(value(r#"paros_gateway_replica_reads_cached_total{node="NODE3"}"#), Some(11.0));
        assert_eq!(value(r#"paros_gateway_replica_journals_lag_slots{node="NODE3",le="0"}"#), Some(5.0));
        assert_eq!(value(r#"paros_gateway_replica_journals_lag_slots{node="NODE3",le="16"}"#), Some(7.0));
        assert_eq!(value(r#"paros_gateway_replica_journals_lag_slots{node="NODE3",le="65536"}"#), Some(7.0));
        assert_eq!(value(r#"paros_gateway_replica_journals_lag_slots{node="NODE3",le="+Inf"}"#), Some(8.0));
        assert_eq!(value(r#"paros_gateway_replica_journals_lag_seconds{node="NODE3",le="0.01"}"#), Some(5.0));
        assert_eq!(value(r#"paros_gateway_replica_journals_lag_seconds{node="NODE3",le="1"}"#), Some(8.0));
        let journal = format!("{}/{}", TenantId(9), paros_core::JournalId(4));
        let top = format!(r#"paros_gateway_replica_journal_lag_slots{{node="NODE3",journal="{journal}"}}"#);
        assert_eq!(value(&top), Some(70_000.0), "a journal the directory does not know is named by its ids");
        let top = format!(r#"paros_gateway_replica_journal_lag_seconds{{node="NODE3",journal="{journal}"}}"#);
        assert_eq!(value(&top), Some(0.25));
        assert_eq!(text.matches("paros_gateway_replica_journal_lag_slots{").count(), 1, "only the first top_len");
        assert_eq!(
            value(r#"paros_gateway_replica_lag_slots_max{node="NODE1"}"#),
            None,
            "a voter has no replica series"
        );
        assert_eq!(
            value(r#"paros_gateway_node_store_disk_bytes{node="NODE2"}"#),
            None,
            "node 2's store is not sampled"
        );
        assert!(text.contains("# TYPE paros_gateway_requests_total counter\n"), "{text}");
        assert!(text.contains("# TYPE paros_gateway_request_duration_seconds histogram\n"), "{text}");

        let open = m.render(Exposition::OpenMetrics);
        assert!(open.ends_with("# EOF\n"), "{open}");
        assert!(open.contains("# TYPE paros_gateway_requests counter\n"), "{open}");
        assert!(parse_prometheus(&open).is_err(), "OpenMetrics is another format");
    }

    /// A directory folded from commands: founders 1 to 3, nodes 4 to 6 admitted, tenant 7 with
    /// journals 1 and 2 on the founders. Every command must be accepted.
    struct Folded {
        directory: paros_registry::Directory,
        next: u64,
    }

    impl Folded {
        fn apply(&mut self, command: paros_registry::Command) {
            let id = paros_registry::RequestId(u128::from(self.next) + 1);
            let record = paros_registry::Record { id, command };
            self.directory.apply_record(paros_core::Seq(self.next), &record.encode());
            self.next += 1;
            let verdict = self.directory.answer(id);
            assert!(matches!(verdict, Some(paros_registry::Verdict::Accepted(_))), "{record:?}: {verdict:?}");
        }

        fn key(journal: u64) -> paros_core::JournalKey {
            paros_core::JournalKey { tenant: TenantId(7), journal: paros_core::JournalId(journal) }
        }

        fn move_seat(&mut self, journal: u64, from: u64, to: u64) {
            let (journal, from, to) = (Folded::key(journal), NodeId(from), NodeId(to));
            self.apply(paros_registry::Command::MoveSeat { journal, from, to });
        }

        fn move_done(&mut self, journal: u64, epoch: u64) {
            let (journal, epoch) = (Folded::key(journal), paros_registry::Epoch(epoch));
            self.apply(paros_registry::Command::MoveDone { journal, epoch });
        }
    }

    fn folded() -> Folded {
        use paros_registry::{BusAddress, Command, Member, Zone};
        let mut f = Folded { directory: paros_registry::Directory::new(), next: 0 };
        let address = |i| BusAddress::new(format!("mem:{i}")).unwrap();
        let zone = |i| Zone::new(format!("z{i}")).unwrap();
        let members = (1..=3).map(|i| Member { id: NodeId(i), bus_address: address(i), zone: zone(i) }).collect();
        let limits = paros_registry::Limits::default();
        let registry = paros_core::JournalId(99);
        f.apply(Command::InitCell { cell: paros_registry::CellId(1), members, registry, limits });
        for i in 4..=6 {
            let incarnation = paros_registry::Incarnation(i);
            let role = paros_registry::Role::Node;
            f.apply(Command::Admit { id: NodeId(i), role, bus_address: address(i), zone: zone(i), incarnation });
        }
        let name = paros_registry::TenantName::parse("acme").unwrap();
        f.apply(Command::SignUp { tenant: TenantId(7), name, quotas: paros_registry::Quotas::default() });
        for j in [1, 2] {
            f.apply(Command::CreateJournal {
                tenant: TenantId(7),
                journal: paros_core::JournalId(j),
                name: paros_registry::JournalName::parse(&format!("j{j}")).unwrap(),
                mode: paros_core::journal::WriterMode::Single,
                voters: vec![NodeId(1), NodeId(2), NodeId(3)],
            });
        }
        f
    }

    #[test]
    fn the_move_clock_times_the_moves_it_saw_recorded_and_done_and_no_other() {
        use std::time::{Duration, Instant};
        let mut f = folded();
        let mut clock = MoveClock::default();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        // Journal 1's move is in progress in the first directory: its start is unknown.
        f.move_seat(1, 1, 4);
        assert!(clock.on_directory(&f.directory, at(0)).is_empty());
        f.move_done(1, 1);
        assert!(clock.on_directory(&f.directory, at(100)).is_empty(), "a move first seen in progress is not timed");

        // Journal 2's move, seen recorded at 200 ms and done at 1,700 ms.
        f.move_seat(2, 1, 4);
        assert!(clock.on_directory(&f.directory, at(200)).is_empty());
        assert!(clock.on_directory(&f.directory, at(900)).is_empty(), "still in progress");
        f.move_done(2, 1);
        assert_eq!(clock.on_directory(&f.directory, at(1_700)), vec![Duration::from_millis(1_500)]);
        assert!(clock.on_directory(&f.directory, at(1_800)).is_empty(), "timed once");

        // Done and the next move recorded between two directories: one ends, the next starts.
        f.move_seat(2, 2, 5);
        assert!(clock.on_directory(&f.directory, at(2_000)).is_empty());
        f.move_done(2, 2);
        f.move_seat(2, 3, 6);
        assert_eq!(clock.on_directory(&f.directory, at(2_500)), vec![Duration::from_millis(500)]);
        f.move_done(2, 3);
        assert_eq!(clock.on_directory(&f.directory, at(2_600)), vec![Duration::from_millis(100)]);

        // A journal deleted while its seat moves: not timed, and forgotten.
        f.move_seat(1, 2, 5);
        assert!(clock.on_directory(&f.directory, at(3_000)).is_empty());
        let name = paros_registry::JournalName::parse("j1").unwrap();
        f.apply(paros_registry::Command::DeleteJournal { tenant: TenantId(7), name });
        assert!(clock.on_directory(&f.directory, at(3_500)).is_empty(), "a deleted journal's move never ends");
        assert!(clock.started.is_empty(), "nothing is kept of moves no longer in progress");
    }

    #[test]
    fn the_process_cpu_is_split_by_thread_role() {
        let m = Metrics::new(None);
        let text = m.render(Exposition::Prometheus);
        let samples = parse_prometheus(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert!(text.contains("# TYPE paros_gateway_thread_cpu_seconds_total counter\n"), "{text}");
        for role in ROLES {
            let key = format!("paros_gateway_thread_cpu_seconds_total{{role=\"{role}\"}}");
            assert!(samples.iter().any(|(k, _)| *k == key), "{key} in {text}");
        }
    }
}
