//! The node RPC: journal calls and reads addressed to one node, answered once. The request
//! and answer types live in [`paros_core::wire`]; this module adds the transport's side.

use paros_core::NodeId;
pub use paros_core::wire::{NodeAnswer, NodeRequest, RpcError};

use crate::ports::Envelope;

/// Sends a request to a node and waits for its answer, at most until the deadline.
pub trait Rpc: Clone + Send + Sync + 'static {
    fn request(
        &self,
        to: NodeId,
        request: NodeRequest,
        deadline: std::time::Duration,
    ) -> impl std::future::Future<Output = Result<NodeAnswer, RpcError>> + Send;

    /// The answer node `to` would give a read of `journal`, served in the caller's task from
    /// the node's [`ReadCache`](crate::read_cache::ReadCache) when the node runs in this
    /// process and its cache holds it; `None` (the default) sends the read to the node.
    fn read_locally(
        &self,
        to: NodeId,
        journal: &paros_core::JournalKey,
        read: &paros_core::ReadRequest,
    ) -> Option<paros_core::ReadAnswer> {
        let _ = (to, journal, read);
        None
    }
}

/// Where an answer to a request goes. Dropping it unanswered tells the caller `Dropped`.
pub type Responder = tokio::sync::oneshot::Sender<NodeAnswer>;

/// What the bus hands a node.
#[derive(Debug)]
pub enum Incoming {
    /// Protocol messages from one peer, batched.
    Protocol { from: NodeId, envelopes: Vec<Envelope> },
    /// A batch one peer published to a replica tier's feed, shared by every subscriber: the
    /// publisher hands out one allocation, and each subscriber copies the envelopes out on its
    /// own thread.
    Published { from: NodeId, envelopes: std::sync::Arc<[Envelope]> },
    /// A request to answer through `reply`.
    Request { request: NodeRequest, reply: Responder },
    /// Requests made together (in one turn of the caller's runtime), one inbox item for all:
    /// each is answered through its own responder, as if it had come alone.
    Requests(Vec<(NodeRequest, Responder)>),
}
