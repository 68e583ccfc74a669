//! The cell as the gateway sees it: a [`Client`] over some journal service, behind an object
//! so the handlers (and the OpenAPI paths generated from them) are not generic.

use futures_util::future::BoxFuture;
use paros_client::{AnswerError, Client, Decided, JournalService, ReadAnswer, ReadParams, Route};
use paros_core::{Call, JournalKey, NodeId};

/// What the gateway asks of the cell.
pub trait CellPort: Send + Sync + 'static {
    /// One call, with the client's retries, redirects and settling.
    fn call(&self, journal: JournalKey, call: Call) -> BoxFuture<'_, Result<Decided, AnswerError>>;
    /// One read request (`attempt` spreads retries over the servers).
    fn read(&self, journal: JournalKey, params: ReadParams, attempt: u32) -> BoxFuture<'_, ReadAnswer>;
    /// The node whose verdict on `journal` came back last through this gateway, and how long
    /// ago: it led the journal then. `None` when no call on it went through here.
    fn leader(&self, journal: JournalKey) -> Option<(NodeId, std::time::Duration)>;
}

/// A [`Client`] is the gateway's way into the cell.
pub(crate) struct ClientPort<S: JournalService>(pub(crate) Client<S>);

impl<S> CellPort for ClientPort<S>
where
    S: JournalService<Journal = JournalKey> + 'static,
{
    fn call(&self, journal: JournalKey, call: Call) -> BoxFuture<'_, Result<Decided, AnswerError>> {
        Box::pin(async move { self.0.call(&journal, call).await })
    }

    fn read(&self, journal: JournalKey, params: ReadParams, attempt: u32) -> BoxFuture<'_, ReadAnswer> {
        // The first try goes to the server of the last verdict: after a write, the leader that
        // took it has applied it, where a follower learns the commit only at the next heartbeat.
        let server = if attempt == 0 { self.0.preferred_server(&journal) } else { None };
        Box::pin(async move { self.0.service().read(&journal, params, Route { server, attempt }).await })
    }

    fn leader(&self, journal: JournalKey) -> Option<(NodeId, std::time::Duration)> {
        self.0.leader_hint(&journal)
    }
}
