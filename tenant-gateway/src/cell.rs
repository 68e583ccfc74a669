//! The cell as the gateway sees it: a [`Client`] over some journal service, behind an object
//! so the handlers (and the OpenAPI paths generated from them) are not generic.

use futures_util::future::BoxFuture;
use paros_client::{AnswerError, CallReply, Client, Decided, JournalService, ReadAnswer, ReadParams, Route};
use paros_core::{Call, CallAnswer, JournalKey, NodeId};

/// What the gateway asks of the cell.
pub trait CellPort: Send + Sync + 'static {
    /// One call, with the client's retries, redirects and settling.
    fn call(&self, journal: JournalKey, call: Call) -> BoxFuture<'_, Result<Decided, AnswerError>>;
    /// One read request (`attempt` spreads retries over the servers).
    fn read(&self, journal: JournalKey, params: ReadParams, attempt: u32) -> BoxFuture<'_, ReadAnswer>;
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
}

/// Which node answered the last verdict on each journal, and when: the gateway's honest
/// knowledge of a journal's consensus leader. Only a leader answers a call with a verdict (a
/// follower redirects), so the server that answered one led the journal then; it may have
/// stopped since, which is why every entry carries its age. Journals no call went through
/// this gateway for are unknown. Holds at most `max` journals (the oldest half is forgotten
/// when full).
#[derive(Debug)]
pub(crate) struct LeaderBook {
    max: usize,
    seen: std::sync::Mutex<std::collections::HashMap<JournalKey, (NodeId, std::time::Instant)>>,
}

impl LeaderBook {
    pub(crate) fn new(max: usize) -> LeaderBook {
        LeaderBook { max: max.max(1), seen: std::sync::Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<JournalKey, (NodeId, std::time::Instant)>> {
        self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `node` answered a verdict on `journal` now.
    pub(crate) fn saw(&self, journal: JournalKey, node: NodeId) {
        let mut seen = self.lock();
        if seen.len() >= self.max && !seen.contains_key(&journal) {
            let mut ages: Vec<std::time::Instant> = seen.values().map(|(_, at)| *at).collect();
            ages.sort_unstable();
            let cut = ages[ages.len() / 2];
            seen.retain(|_, (_, at)| *at > cut);
        }
        seen.insert(journal, (node, std::time::Instant::now()));
    }

    /// The node that answered the last verdict on `journal` through this gateway, and how long
    /// ago.
    pub(crate) fn leader(&self, journal: JournalKey) -> Option<(NodeId, std::time::Duration)> {
        self.lock().get(&journal).map(|(node, at)| (*node, at.elapsed()))
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// The gateway's journal service: `S`, noting in a [`LeaderBook`] which server answered each
/// verdict. A request the client sends without naming a server tells nothing (the service
/// chose), so only named servers are noted; the client names one after its first answer.
pub(crate) struct Observed<S> {
    pub(crate) inner: S,
    pub(crate) leaders: std::sync::Arc<LeaderBook>,
}

impl<S> JournalService for Observed<S>
where
    S: JournalService<Journal = JournalKey>,
{
    type Journal = JournalKey;

    fn servers(&self) -> Vec<NodeId> {
        self.inner.servers()
    }

    fn call(&self, journal: &JournalKey, call: &Call, route: Route) -> impl std::future::Future<Output = CallReply> + Send {
        let key = *journal;
        let reply = self.inner.call(journal, call, route);
        async move {
            let reply = reply.await;
            if let (CallReply::Answer(CallAnswer::Verdict(_)), Some(server)) = (&reply, route.server) {
                self.leaders.saw(key, server);
            }
            reply
        }
    }

    fn read(&self, journal: &JournalKey, read: ReadParams, route: Route) -> impl std::future::Future<Output = ReadAnswer> + Send {
        self.inner.read(journal, read, route)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use paros_core::{JournalId, TenantId};

    fn key(i: u64) -> JournalKey {
        JournalKey { tenant: TenantId(1), journal: JournalId(i) }
    }

    #[test]
    fn the_leader_book_stays_within_its_bound_and_keeps_the_newest() {
        let book = LeaderBook::new(4);
        for i in 0..4 {
            book.saw(key(i), NodeId(i));
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        assert_eq!(book.len(), 4);
        book.saw(key(9), NodeId(9));
        assert!(book.len() <= 4, "{} entries", book.len());
        assert_eq!(book.leader(key(9)).map(|(n, _)| n), Some(NodeId(9)), "the newest is kept");
        assert_eq!(book.leader(key(3)).map(|(n, _)| n), Some(NodeId(3)));
        assert!(book.leader(key(0)).is_none(), "the oldest was forgotten");
        book.saw(key(3), NodeId(7));
        assert_eq!(book.leader(key(3)).map(|(n, _)| n), Some(NodeId(7)), "a newer verdict replaces the node");
    }
}
