//! The in-process bus: one bounded tokio channel per registered node.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use paros_core::{JournalKey, NodeId, ReadAnswer, ReadRequest};
use paros_node::ReadCache;
use paros_node::ports::{Envelope, Transport};
use paros_node::rpc::{Incoming, NodeAnswer, NodeRequest, Responder, Rpc, RpcError};
use tokio::sync::{mpsc, oneshot};

/// A snapshot of an [`InProcessBus`]'s counters, totals since the bus was created.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct BusStats {
    /// Protocol bus messages (one batch for one destination each) put into an inbox.
    pub messages_sent: u64,
    /// Envelopes carried by those bus messages.
    pub envelopes_sent: u64,
    /// Protocol bus messages dropped: unknown (or unregistered) destination, or full inbox.
    pub dropped: u64,
    /// Requests made, whatever their outcome.
    pub requests: u64,
    /// Inbox items that carried requests: requests made together travel as one item.
    pub request_items: u64,
    /// Protocol batches sent to a replica tier's feed (one publish each, whatever the number
    /// of subscribers it reached).
    pub feed_publishes: u64,
}

#[derive(Debug, Default)]
struct Counters {
    messages_sent: AtomicU64,
    envelopes_sent: AtomicU64,
    dropped: AtomicU64,
    requests: AtomicU64,
    request_items: AtomicU64,
    feed_publishes: AtomicU64,
}

#[derive(Debug, Default)]
struct Shared {
    inboxes: Mutex<HashMap<NodeId, mpsc::Sender<Incoming>>>,
    /// Requests waiting to go into a node's inbox together (see [`InProcessBus::call`]).
    outboxes: Mutex<HashMap<NodeId, Vec<(NodeRequest, Responder)>>>,
    /// Replica tiers' feeds: a batch sent to a feed address goes to each subscriber.
    /// Shared, so a publish takes the list without copying it.
    feeds: std::sync::RwLock<HashMap<NodeId, std::sync::Arc<[NodeId]>>>,
    /// The read caches of registered nodes that keep one ([`InProcessBus::attach_cache`]).
    caches: std::sync::RwLock<HashMap<NodeId, ReadCache>>,
    counters: Counters,
}

/// An in-process bus: a cloneable handle to one routing table of node inboxes.
///
/// Every node [`register`](InProcessBus::register)s a bounded inbox and gets back a
/// [`BusEndpoint`] to send with and the receiver of its inbox. Clones share the table and the
/// counters. The bus itself also implements [`Rpc`], for callers that are not nodes (a
/// gateway, a CLI, a test).
#[derive(Clone, Debug, Default)]
pub struct InProcessBus {
    shared: Arc<Shared>,
}

impl InProcessBus {
    /// An empty bus: no node registered, every counter zero.
    #[must_use]
    pub fn new() -> InProcessBus {
        InProcessBus::default()
    }

    /// Registers `node` with an inbox of `inbox_capacity` items (at least 1) and returns its
    /// endpoint and the receiving end of its inbox.
    ///
    /// Registering a node that is already registered replaces its inbox (a restarted node):
    /// the old receiver gets nothing more.
    pub fn register(&self, node: NodeId, inbox_capacity: usize) -> (BusEndpoint, mpsc::Receiver<Incoming>) {
        let (tx, rx) = mpsc::channel(inbox_capacity.max(1));
        self.shared.caches.write().unwrap_or_else(PoisonError::into_inner).remove(&node);
        self.inboxes().insert(node, tx);
        (BusEndpoint { node, bus: self.clone() }, rx)
    }

    /// Removes `node` from the bus, as if it crashed: later protocol sends to it are dropped
    /// and counted, later requests to it fail at once with [`RpcError::NoRoute`]. What already
    /// sits in its inbox stays there for whoever holds the receiver. Returns whether `node`
    /// was registered.
    pub fn unregister(&self, node: NodeId) -> bool {
        self.shared.caches.write().unwrap_or_else(PoisonError::into_inner).remove(&node);
        self.inboxes().remove(&node).is_some()
    }

    /// Reads of registered `node` are served from `cache` where it can
    /// ([`Rpc::read_locally`]), until the node is unregistered or registered again.
    pub fn attach_cache(&self, node: NodeId, cache: ReadCache) {
        self.shared.caches.write().unwrap_or_else(PoisonError::into_inner).insert(node, cache);
    }

    fn serve_locally(&self, to: NodeId, journal: &JournalKey, read: &ReadRequest) -> Option<ReadAnswer> {
        self.shared.caches.read().unwrap_or_else(PoisonError::into_inner).get(&to)?.serve(journal, read)
    }

    /// Subscribes registered node `node` to the replica tier feed `feed`: every protocol batch
    /// sent to `feed` is put into its inbox too. Subscribing twice changes nothing.
    pub fn subscribe(&self, feed: NodeId, node: NodeId) {
        let mut feeds = self.shared.feeds.write().unwrap_or_else(PoisonError::into_inner);
        let members = feeds.entry(feed).or_insert_with(|| std::sync::Arc::from([]));
        if !members.contains(&node) {
            *members = members.iter().copied().chain([node]).collect();
        }
    }

    /// Ends `node`'s subscription to `feed`. Returns whether it was subscribed.
    pub fn unsubscribe(&self, feed: NodeId, node: NodeId) -> bool {
        let mut feeds = self.shared.feeds.write().unwrap_or_else(PoisonError::into_inner);
        let Some(members) = feeds.get_mut(&feed) else { return false };
        if !members.contains(&node) {
            return false;
        }
        *members = members.iter().copied().filter(|m| *m != node).collect();
        if members.is_empty() {
            feeds.remove(&feed);
        }
        true
    }

    /// The subscribers of `feed` (`None`: `feed` is no feed).
    fn feed_members(&self, feed: NodeId) -> Option<std::sync::Arc<[NodeId]>> {
        // Read for every protocol send: shared, and empty-handed at once for a machine.
        let feeds = self.shared.feeds.read().unwrap_or_else(PoisonError::into_inner);
        if feeds.is_empty() {
            return None;
        }
        feeds.get(&feed).map(std::sync::Arc::clone)
    }

    /// Whether `node` is registered and its inbox receiver is still alive.
    #[must_use]
    pub fn is_registered(&self, node: NodeId) -> bool {
        self.inboxes().get(&node).is_some_and(|tx| !tx.is_closed())
    }

    /// The counters so far.
    #[must_use]
    pub fn stats(&self) -> BusStats {
        let c = &self.shared.counters;
        BusStats {
            messages_sent: c.messages_sent.load(Ordering::Relaxed),
            envelopes_sent: c.envelopes_sent.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            requests: c.requests.load(Ordering::Relaxed),
            request_items: c.request_items.load(Ordering::Relaxed),
            feed_publishes: c.feed_publishes.load(Ordering::Relaxed),
        }
    }

    fn inboxes(&self) -> std::sync::MutexGuard<'_, HashMap<NodeId, mpsc::Sender<Incoming>>> {
        // Nothing panics while holding the lock; a poisoned table is still a valid table.
        self.shared.inboxes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The sender into `node`'s inbox, if it is registered and its receiver is alive. A
    /// registration whose receiver was dropped is forgotten here.
    fn route(&self, node: NodeId) -> Option<mpsc::Sender<Incoming>> {
        let mut inboxes = self.inboxes();
        match inboxes.get(&node) {
            Some(tx) if tx.is_closed() => {
                inboxes.remove(&node);
                None
            }
            Some(tx) => Some(tx.clone()),
            None => None,
        }
    }

    /// Sends one protocol batch from `from` to `to` without waiting; drops and counts it when
    /// `to` is unknown or its inbox is full. An empty batch is a machine heartbeat (the host's
    /// peer liveness) and is sent like any other.
    fn send_protocol(&self, from: NodeId, to: NodeId, envelopes: Vec<Envelope>) {
        if let Some(members) = self.feed_members(to) {
            // One publish to a tier's feed: the bus hands each subscriber its copy.
            self.shared.counters.feed_publishes.fetch_add(1, Ordering::Relaxed);
            // One allocation shared by them all: no subscriber's copy is made on the sender's
            // thread.
            match &*members {
                [] => {}
                [only] => self.put(*only, Incoming::Protocol { from, envelopes }),
                _ => {
                    let shared: std::sync::Arc<[Envelope]> = envelopes.into();
                    for m in members.iter() {
                        self.put(*m, Incoming::Published { from, envelopes: std::sync::Arc::clone(&shared) });
                    }
                }
            }
            return;
        }
        self.put(to, Incoming::Protocol { from, envelopes });
    }

    /// Puts one protocol batch into node `to`'s inbox (see [`Self::send_protocol`]).
    fn put(&self, to: NodeId, item: Incoming) {
        let c = &self.shared.counters;
        let count = match &item {
            Incoming::Protocol { envelopes, .. } => envelopes.len(),
            Incoming::Published { envelopes, .. } => envelopes.len(),
            Incoming::Request { .. } | Incoming::Requests(_) => 0,
        } as u64;
        let Some(tx) = self.route(to) else {
            c.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        match tx.try_send(item) {
            Ok(()) => {
                c.messages_sent.fetch_add(1, Ordering::Relaxed);
                c.envelopes_sent.fetch_add(count, Ordering::Relaxed);
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                c.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                c.dropped.fetch_add(1, Ordering::Relaxed);
                self.forget_closed(to);
            }
        }
    }

    /// Forgets `node`'s registration if its receiver is gone (not if it re-registered since).
    fn forget_closed(&self, node: NodeId) {
        let mut inboxes = self.inboxes();
        if inboxes.get(&node).is_some_and(mpsc::Sender::is_closed) {
            inboxes.remove(&node);
        }
    }

    fn outboxes(&self) -> std::sync::MutexGuard<'_, HashMap<NodeId, Vec<(NodeRequest, Responder)>>> {
        self.shared.outboxes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts the request in `to`'s outbox and waits for its answer. The request that finds the
    /// outbox empty carries it: it lets the calls made in the same turn of the runtime join
    /// (one yield), then puts them all into the inbox as one item — one wake-up of the node for
    /// a burst, as protocol messages travel. Nothing is lost if the carrier gives up: dropping
    /// it sends what it carried.
    async fn call(&self, to: NodeId, request: NodeRequest, deadline: Duration) -> Result<NodeAnswer, RpcError> {
        self.shared.counters.requests.fetch_add(1, Ordering::Relaxed);
        let tx = self.route(to).ok_or(RpcError::NoRoute(to))?;
        let (reply, answer) = oneshot::channel();
        let carrier = {
            let mut outboxes = self.outboxes();
            let outbox = outboxes.entry(to).or_default();
            outbox.push((request, reply));
            outbox.len() == 1
        };
        let exchange = async {
            if carrier {
                let mut carried = Carried { bus: self, to, tx: Some(tx) };
                tokio::task::yield_now().await;
                // Requests are not retried by Paxos: a full inbox is waited on, not dropped.
                carried.send().await;
            }
            answer.await.map_err(|_| RpcError::Dropped)
        };
        tokio::time::timeout(deadline, exchange).await.unwrap_or(Err(RpcError::Timeout))
    }

    /// The requests waiting for `to`, as one inbox item.
    fn take_outbox(&self, to: NodeId) -> Option<Incoming> {
        let mut requests = self.outboxes().remove(&to)?;
        self.shared.counters.request_items.fetch_add(1, Ordering::Relaxed);
        Some(if requests.len() == 1 {
            let (request, reply) = requests.pop().expect("one request");
            Incoming::Request { request, reply }
        } else {
            Incoming::Requests(requests)
        })
    }
}

/// An outbox its carrier has yet to send.
struct Carried<'a> {
    bus: &'a InProcessBus,
    to: NodeId,
    tx: Option<mpsc::Sender<Incoming>>,
}

impl Carried<'_> {
    /// Waits for room in the inbox, then sends what the outbox holds by then.
    async fn send(&mut self) {
        // Cancelled while waiting for room, the carrier still holds `tx`: its drop sends.
        if let Some(tx) = self.tx.as_ref() {
            match tx.reserve().await {
                Ok(permit) => {
                    if let Some(item) = self.bus.take_outbox(self.to) {
                        permit.send(item);
                    }
                }
                Err(_) => {
                    self.bus.forget_closed(self.to);
                    if let Some(item) = self.bus.take_outbox(self.to) {
                        unsent(item);
                    }
                }
            }
        }
        self.tx = None;
    }
}

impl Drop for Carried<'_> {
    /// A carrier dropped before it sent (its caller gave up): the outbox goes now if the inbox
    /// has room, else every request in it is told `Busy` (nothing was done; ask again).
    fn drop(&mut self) {
        let Some(tx) = self.tx.take() else { return };
        let Some(item) = self.bus.take_outbox(self.to) else { return };
        if let Err(mpsc::error::TrySendError::Full(item) | mpsc::error::TrySendError::Closed(item)) = tx.try_send(item)
        {
            unsent(item);
        }
    }
}

/// Requests that never reached the node: each is answered `Busy`, which to a call means
/// nothing was done (to a read, not served).
fn unsent(item: Incoming) {
    let requests = match item {
        Incoming::Request { request, reply } => vec![(request, reply)],
        Incoming::Requests(requests) => requests,
        Incoming::Protocol { .. } | Incoming::Published { .. } => return,
    };
    for (_, reply) in requests {
        let _ = reply.send(NodeAnswer::Call(paros_core::wire::CallAnswer::Busy));
    }
}

impl Rpc for InProcessBus {
    /// Puts the request into `to`'s inbox (waiting while it is full) and waits for the answer,
    /// all within `deadline`.
    fn request(
        &self,
        to: NodeId,
        request: NodeRequest,
        deadline: Duration,
    ) -> impl Future<Output = Result<NodeAnswer, RpcError>> + Send {
        self.call(to, request, deadline)
    }

    fn read_locally(&self, to: NodeId, journal: &JournalKey, read: &ReadRequest) -> Option<ReadAnswer> {
        self.serve_locally(to, journal, read)
    }
}

/// One node's handle on an [`InProcessBus`]: sends protocol batches as that node and makes
/// requests to other nodes. Cheap to clone.
#[derive(Clone, Debug)]
pub struct BusEndpoint {
    node: NodeId,
    bus: InProcessBus,
}

impl BusEndpoint {
    /// The node this endpoint sends as.
    #[must_use]
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The bus this endpoint is attached to.
    #[must_use]
    pub fn bus(&self) -> &InProcessBus {
        &self.bus
    }
}

impl Transport for BusEndpoint {
    /// Puts `envelopes` into `to`'s inbox as one [`Incoming::Protocol`] without waiting. An
    /// unknown destination or a full inbox drops the batch and counts it in
    /// [`BusStats::dropped`]: Paxos tolerates loss.
    fn send(&mut self, to: NodeId, envelopes: Vec<Envelope>) {
        self.bus.send_protocol(self.node, to, envelopes);
    }
}

impl Rpc for BusEndpoint {
    /// As [`InProcessBus`]'s `request`: errors are [`RpcError::NoRoute`] for an unknown node,
    /// [`RpcError::Timeout`] at the deadline, [`RpcError::Dropped`] when the node drops the
    /// responder unanswered.
    fn request(
        &self,
        to: NodeId,
        request: NodeRequest,
        deadline: Duration,
    ) -> impl Future<Output = Result<NodeAnswer, RpcError>> + Send {
        self.bus.call(to, request, deadline)
    }

    fn read_locally(&self, to: NodeId, journal: &JournalKey, read: &ReadRequest) -> Option<ReadAnswer> {
        self.bus.serve_locally(to, journal, read)
    }
}
