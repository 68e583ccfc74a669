//! The cell as the gateway sees it: a [`Client`] over some journal service, behind an object
//! so the handlers (and the OpenAPI paths generated from them) are not generic.
//!
//! The gateway has no retry of its own: a call is one [`Client::call`] (its retries, redirects
//! and settling, and its wait for a journal no server hosts yet), a read is one
//! [`Client::read_served`] within its [`ReadDeadline`] (paros-client's `ReadPolicy`): the
//! journal's read replicas first when the cell ranks them, then its voters.

use std::time::Duration;

use futures_util::future::BoxFuture;
use paros_client::{AnswerError, Client, Decided, JournalService, ReadAnswer, ReadDeadline, ReadParams};
use paros_core::{Call, JournalKey, NodeId};

/// What the gateway asks of the cell.
pub trait CellPort: Send + Sync + 'static {
    /// One call, with the client's retries, redirects and settling; `UnknownJournal` once no
    /// server hosted the journal within the client's placement wait.
    fn call(&self, journal: JournalKey, call: Call) -> BoxFuture<'_, Result<Decided, AnswerError>>;
    /// One read, within `deadline` counted from now: the first answer that serves it, an empty
    /// page at the tail once `deadline.wait_until` passed, or `Unserved` at
    /// `deadline.give_up_at`; and the server whose answer it is (a read replica, else a voter),
    /// when the cell names one.
    fn read(
        &self,
        journal: JournalKey,
        params: ReadParams,
        deadline: ReadDeadline,
    ) -> BoxFuture<'_, (ReadAnswer, Option<NodeId>)>;
    /// The node whose verdict on `journal` came back last through this gateway, and how long
    /// ago: it led the journal then. `None` when no call on it went through here.
    fn leader(&self, journal: JournalKey) -> Option<(NodeId, Duration)>;
}

/// A [`Client`] is the gateway's way into the cell.
pub(crate) struct ClientPort<S: JournalService> {
    pub(crate) client: Client<S>,
}

impl<S> CellPort for ClientPort<S>
where
    S: JournalService<Journal = JournalKey> + 'static,
{
    fn call(&self, journal: JournalKey, call: Call) -> BoxFuture<'_, Result<Decided, AnswerError>> {
        Box::pin(async move { self.client.call(&journal, call).await })
    }

    fn read(
        &self,
        journal: JournalKey,
        params: ReadParams,
        deadline: ReadDeadline,
    ) -> BoxFuture<'_, (ReadAnswer, Option<NodeId>)> {
        Box::pin(async move { self.client.read_served(&journal, params, deadline).await })
    }

    fn leader(&self, journal: JournalKey) -> Option<(NodeId, Duration)> {
        self.client.leader_hint(&journal)
    }
}
