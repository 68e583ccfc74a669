//! The port through which a gateway shows its cell's node counters, in the gateway's own
//! types: whoever wires a cell to a gateway (`paros dev`, a test) converts the node's and the
//! store's counters into these, so the gateway never names the node's types.

use paros_core::NodeId;

/// One node's counters, cumulative since the node booted (the overview's `counters`; the node
/// id travels beside them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct NodeCounters {
    #[serde(skip)]
    pub node: NodeId,
    /// Rounds run (one storage batch each at most).
    pub rounds: u64,
    /// Rounds that wrote a batch and synced.
    pub syncs: u64,
    /// Write ops persisted.
    pub writes: u64,
    /// Records in write verdicts answered `Accepted` by this node.
    pub records_accepted: u64,
    /// Campaigns this node's voters started.
    pub campaigns: u64,
    /// Campaigns that won: a voter here became its journal's leader.
    pub leaderships_won: u64,
    /// Journals asleep on this node now (metrics only).
    #[serde(skip)]
    pub dormant: u64,
    /// The node's store, when the port can sample it (metrics only).
    #[serde(skip)]
    pub store: Option<StoreCounters>,
    /// Where a read replica stands (`None` for a voter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica: Option<ReplicaCounters>,
}

/// A read replica's state and lag (its journals' maxima: the metrics' cardinality is one series
/// per replica, never one per journal).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct ReplicaCounters {
    /// The replica's tier's feed (16 hex digits), naming the tier.
    #[serde(serialize_with = "hex")]
    #[schema(value_type = String)]
    pub feed: NodeId,
    /// `bootstrapping`, `catching_up` or `serving`: only a serving replica is sent reads.
    pub state: ReplicaStateName,
    /// Its journals by state.
    pub bootstrapping: u64,
    pub catching_up: u64,
    pub serving: u64,
    /// Journals that know of chosen slots they have not applied.
    pub behind: u64,
    /// The most such slots one journal has, and for how long the furthest behind has been.
    pub lag_slots_max: u64,
    pub lag_ms_max: u64,
    /// The age of its oldest watermark: ms since its tier's feed last told one of its awake
    /// journals anything (voters repeat their marks every few ticks).
    pub feed_age_ms_max: u64,
    /// Reads it refused because it had not caught up since it started.
    pub reads_refused_unready: u64,
    /// Reads its read cache answered in the reader's task, without its node thread.
    pub reads_cached: u64,
    /// Its journals by lag in slots, and in ms (metrics only).
    #[serde(skip)]
    pub lag_slots_journals: LagHistogram,
    #[serde(skip)]
    pub lag_ms_journals: LagHistogram,
    /// Its journals furthest behind, most first: the first `top_len` of `top` (metrics only).
    #[serde(skip)]
    pub top: [LaggingJournal; LAG_TOP_MAX],
    #[serde(skip)]
    pub top_len: usize,
}

impl ReplicaCounters {
    /// The journals furthest behind, most first.
    #[must_use]
    pub fn top(&self) -> &[LaggingJournal] {
        &self.top[..self.top_len.min(LAG_TOP_MAX)]
    }
}

/// Buckets in a [`LagHistogram`]: one per bound and one past them all.
pub const LAG_BUCKETS: usize = 7;
/// The most journals [`ReplicaCounters::top`] names.
pub const LAG_TOP_MAX: usize = 8;

/// A replica's journals counted by lag: `counts[i]` journals lag at most `bounds[i]` and more
/// than the bound before; the last count is those past every bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LagHistogram {
    pub bounds: [u64; LAG_BUCKETS - 1],
    pub counts: [u64; LAG_BUCKETS],
}

/// One of a replica's journals furthest behind: chosen slots it has not applied, and how long
/// it has been behind (ms).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaggingJournal {
    pub journal: paros_core::JournalKey,
    pub slots: u64,
    pub ms: u64,
}

fn hex<S: serde::Serializer>(id: &NodeId, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(id)
}

/// The port through which an operator stops and starts a cell's machines by hand, where the
/// cell can (the embedded cell of `paros dev`: its read replicas), to try failures
/// (`POST /v1/admin/machines/{node}/stop|start`).
pub trait MachineControl: Send + Sync + 'static {
    /// Stops machine `node` as a crash would; with `wipe`, deletes its store too.
    ///
    /// # Errors
    /// [`ControlError`].
    fn stop(&self, node: NodeId, wipe: bool) -> Result<(), ControlError>;

    /// Starts stopped machine `node` again (an empty store relearns); a running one is left be.
    ///
    /// # Errors
    /// [`ControlError`].
    fn start(&self, node: NodeId) -> Result<(), ControlError>;
}

/// Why a machine was not stopped or started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ControlError {
    /// Not a machine this port stops and starts.
    NotControlled,
    /// It is, but the step failed (its store did not open, its directory was not removed).
    Failed(String),
}

/// A read replica's state (DESIGN §7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReplicaStateName {
    #[default]
    Bootstrapping,
    CatchingUp,
    Serving,
}

impl ReplicaStateName {
    pub const ALL: [ReplicaStateName; 3] =
        [ReplicaStateName::Bootstrapping, ReplicaStateName::CatchingUp, ReplicaStateName::Serving];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ReplicaStateName::Bootstrapping => "bootstrapping",
            ReplicaStateName::CatchingUp => "catching_up",
            ReplicaStateName::Serving => "serving",
        }
    }
}

impl NodeCounters {
    /// The same counters with the node's store activity beside them.
    #[must_use]
    pub fn with_store(self, store: StoreCounters) -> NodeCounters {
        NodeCounters { store: Some(store), ..self }
    }
}

/// A node's store: its background work since it opened and its size now (metrics only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreCounters {
    /// Compactions finished.
    pub compactions_completed: u64,
    /// Time spent compacting, in microseconds.
    pub compacting_us: u64,
    /// Compactions running now.
    pub compactions_active: u64,
    /// Sealed memtables waiting to be flushed now.
    pub flushes_outstanding: u64,
    /// Tables holding the log, every level.
    pub log_tables: u64,
    /// Tables holding the log at level 0.
    pub log_l0_tables: u64,
    /// The database's own journal (write-ahead log) files.
    pub journal_files: u64,
    /// Writes that waited for the store to apply synced rounds.
    pub room_waits: u64,
    /// Their wait in all, in microseconds.
    pub room_waited_us: u64,
    /// Bytes the store holds on disk now.
    pub disk_bytes: u64,
}

/// The port through which a gateway learns its cell's node counters (`paros dev` gives it the
/// embedded cell's; a gateway started without one shows no node counters).
pub trait NodeStats: Send + Sync + 'static {
    /// Every node's counters now.
    fn node_stats(&self) -> Vec<NodeCounters>;
}

impl<F> NodeStats for F
where
    F: Fn() -> Vec<NodeCounters> + Send + Sync + 'static,
{
    fn node_stats(&self) -> Vec<NodeCounters> {
        self()
    }
}
