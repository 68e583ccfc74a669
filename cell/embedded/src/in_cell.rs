//! paros-client's [`JournalService`] inside the cell: one request to one node over the node
//! RPC. The registry coordinator, `paros bench` and the tests write and read through it, with
//! the same `Client`, `Writer` and `Reader` a tenant uses over HTTP.

use std::time::Duration;

use paros_client::{CallReply, JournalService, ReadParams, ReadServers, Route};
use paros_replica::{ReadRouter, ReplicaSeen};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use paros_core::{Call, CallId, JournalKey, NodeId, ReadId, ReadRequest};

use paros_node::rpc::{NodeAnswer, NodeRequest, Rpc, RpcError};

/// Bounds of the in-cell service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InCellConfig {
    /// How long one call may wait for its node's answer.
    pub call_deadline: Duration,
    /// How long one read may wait beyond its own `wait_ms`.
    pub read_deadline: Duration,
    /// The nodes' tick length: a read's `wait_ms` becomes whole ticks of it, rounded up.
    pub tick_ms: u64,
}

impl Default for InCellConfig {
    fn default() -> Self {
        InCellConfig {
            call_deadline: Duration::from_secs(2),
            read_deadline: Duration::from_secs(2),
            tick_ms: paros_node::host::TICK_MS_DEFAULT,
        }
    }
}

/// The feed of the tier a journal is on, as the cell's directory says.
type FeedOf = Box<dyn Fn(&JournalKey) -> Option<NodeId> + Send + Sync>;

/// Where the cell's reads go first: its read replicas, ranked per read by a
/// [`ReadRouter`] that the cell keeps told how each replica stands.
pub struct ReplicaReads {
    router: Mutex<ReadRouter>,
    /// The feed of the tier a journal is on (`None`: on none, or not known yet).
    feed_of: FeedOf,
    started: Instant,
}

impl std::fmt::Debug for ReplicaReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaReads").field("router", &self.router).finish_non_exhaustive()
    }
}

impl ReplicaReads {
    /// Reads ranked by `router`, for journals whose tier's feed `feed_of` tells.
    #[must_use]
    pub fn new(
        router: ReadRouter,
        feed_of: impl Fn(&JournalKey) -> Option<NodeId> + Send + Sync + 'static,
    ) -> ReplicaReads {
        ReplicaReads { router: Mutex::new(router), feed_of: Box::new(feed_of), started: Instant::now() }
    }

    /// What the replicas look like now.
    pub fn update(&self, seen: Vec<ReplicaSeen>) {
        self.router().update(seen);
    }

    /// Every replica as last seen.
    #[must_use]
    pub fn seen(&self) -> Vec<ReplicaSeen> {
        self.router().replicas().to_vec()
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn router(&self) -> std::sync::MutexGuard<'_, ReadRouter> {
        self.router.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn is_replica(&self, node: NodeId) -> bool {
        self.router().replicas().iter().any(|r| r.id == node)
    }
}

/// The journal service of a cell reached over `R`, asking the nodes in `servers`; reads ask
/// the journal's read replicas first when it has [`ReplicaReads`].
#[derive(Clone, Debug)]
pub struct InCell<R: Rpc> {
    rpc: R,
    servers: Vec<NodeId>,
    config: InCellConfig,
    /// The next read's id: one per send, counting from a random start, shared by clones.
    next_read: Arc<AtomicU64>,
    replicas: Option<Arc<ReplicaReads>>,
}

impl<R: Rpc> InCell<R> {
    /// # Panics
    /// When `servers` is empty or `config.tick_ms` is 0: such a service could answer nothing.
    #[must_use]
    pub fn new(rpc: R, servers: Vec<NodeId>, config: InCellConfig) -> InCell<R> {
        assert!(!servers.is_empty(), "an in-cell service asks at least one node");
        assert!(config.tick_ms > 0, "a tick lasts at least a millisecond");
        InCell { rpc, servers, config, next_read: Arc::new(AtomicU64::new(crate::random_u64())), replicas: None }
    }

    /// The same service, reading from the replicas `replicas` ranks before the nodes.
    #[must_use]
    pub fn with_replicas(mut self, replicas: Arc<ReplicaReads>) -> InCell<R> {
        self.replicas = Some(replicas);
        self
    }

    /// The node a request goes to: the one named, else one in rotation by attempt.
    fn pick(&self, route: Route) -> NodeId {
        route.server.unwrap_or_else(|| self.servers[route.attempt as usize % self.servers.len()])
    }

    fn wait_ticks(&self, wait_ms: u32) -> u32 {
        u32::try_from(u64::from(wait_ms).div_ceil(self.config.tick_ms)).unwrap_or(u32::MAX)
    }
}

impl<R: Rpc> JournalService for InCell<R> {
    type Journal = JournalKey;

    fn servers(&self) -> Vec<NodeId> {
        self.servers.clone()
    }

    fn read_servers(&self, journal: &JournalKey) -> ReadServers {
        let Some(replicas) = &self.replicas else { return ReadServers::Rotate(self.servers.clone()) };
        let feed = (replicas.feed_of)(journal);
        let ranked = replicas.router().ranked(feed, replicas.now_ms());
        // The nodes after the replicas, from one in turn.
        ReadServers::replicas_first(ranked, &self.servers, self.next_read.load(Ordering::Relaxed))
    }

    async fn call(&self, journal: &JournalKey, id: CallId, call: &Call, route: Route) -> CallReply {
        let to = self.pick(route);
        let request = NodeRequest::Call { journal: *journal, id, call: call.clone() };
        match self.rpc.request(to, request, self.config.call_deadline).await {
            Ok(NodeAnswer::Call(answer)) => CallReply::Answer(answer),
            Ok(NodeAnswer::UnknownJournal) => CallReply::UnknownJournal,
            // A node answering a call with a read answer is broken: nothing can be concluded.
            Ok(NodeAnswer::Read(_)) | Err(RpcError::Timeout | RpcError::Dropped) => CallReply::NoAnswer,
            Err(RpcError::NoRoute(_)) => CallReply::NotSent,
        }
    }

    async fn read(&self, journal: &JournalKey, read: ReadParams, route: Route) -> paros_client::ReadAnswer {
        let to = self.pick(route);
        let request = ReadRequest {
            from: read.from,
            limit: read.limit,
            max_bytes: read.max_bytes,
            wait_ticks: self.wait_ticks(read.wait_ms),
            consistency: read.consistency,
        };
        if let Some(answer) = self.rpc.read_locally(to, journal, &request) {
            // The node's own answer, from its cache, without a trip to its thread. Answered
            // without waiting, so it counts against the task's budget: a reader that loops on
            // cached reads still lets the runtime's other tasks run.
            tokio::task::consume_budget().await;
            return paros_client::ReadAnswer::from_node(answer);
        }
        let deadline = self.config.read_deadline + Duration::from_millis(u64::from(read.wait_ms));
        let id = ReadId(self.next_read.fetch_add(1, Ordering::Relaxed));
        let answer =
            match self.rpc.request(to, NodeRequest::Read { journal: *journal, id, read: request }, deadline).await {
                Ok(NodeAnswer::Read(answer)) => paros_client::ReadAnswer::from_node(answer),
                Ok(NodeAnswer::UnknownJournal) => paros_client::ReadAnswer::UnknownJournal,
                Ok(NodeAnswer::Call(_)) | Err(_) => paros_client::ReadAnswer::Unserved { applied_to: None },
            };
        if let Some(replicas) = &self.replicas
            && matches!(answer, paros_client::ReadAnswer::Unserved { .. } | paros_client::ReadAnswer::UnknownJournal)
            && replicas.is_replica(to)
        {
            // Not caught up, not hosting it yet, or gone: the next reads skip it for a while.
            replicas.router().unserved(to, replicas.now_ms());
        }
        answer
    }
}
