//! The node RPC: journal calls and reads addressed to one node, answered once.

use paros_core::{Call, CallAnswer, JournalKey, NodeId, ReadAnswer, ReadRequest};
use serde::{Deserialize, Serialize};

use crate::ports::Envelope;

/// A request to one node.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum NodeRequest {
    /// A Write, Truncate or SetLeader for one journal.
    Call { journal: JournalKey, call: Call },
    /// A Read of one journal.
    Read { journal: JournalKey, read: ReadRequest },
}

/// A node's answer.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum NodeAnswer {
    Call(CallAnswer),
    Read(ReadAnswer),
    /// The node hosts no such journal.
    UnknownJournal,
}

/// Why an RPC got no answer. To a caller of a decided call, every one of these is ambiguous.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error, Serialize, Deserialize)]
pub enum RpcError {
    #[error("no answer before the deadline")]
    Timeout,
    #[error("no such node on the bus: {0:?}")]
    NoRoute(NodeId),
    #[error("the node stopped before answering")]
    Dropped,
}

/// Sends a request to a node and waits for its answer, at most until the deadline.
pub trait Rpc: Clone + Send + Sync + 'static {
    fn request(
        &self,
        to: NodeId,
        request: NodeRequest,
        deadline: std::time::Duration,
    ) -> impl std::future::Future<Output = Result<NodeAnswer, RpcError>> + Send;
}

/// Where an answer to a request goes. Dropping it unanswered tells the caller `Dropped`.
pub type Responder = tokio::sync::oneshot::Sender<NodeAnswer>;

/// What the bus hands a node.
#[derive(Debug)]
pub enum Incoming {
    /// Protocol messages from one peer, batched.
    Protocol { from: NodeId, envelopes: Vec<Envelope> },
    /// A request to answer through `reply`.
    Request { request: NodeRequest, reply: Responder },
}
