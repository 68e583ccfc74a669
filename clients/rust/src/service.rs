//! The one port the library's async layer talks through: a journal service that takes decided
//! calls and reads for one journal and answers each once, or not at all.
//!
//! Two implementations: in the cell, over the node RPC (paros-embedded's `InCell`: used by the
//! registry coordinator, `paros bench` and the tests), and over a gateway's HTTP API. The
//! library's decisions never depend on which one it talks to; the only difference a caller
//! sees is that the cell may answer [`CallAnswer::Redirect`] (a gateway follows redirects
//! itself) and names servers by [`NodeId`].
//!
//! Every method sends exactly one request and returns what came back: retries, redirects,
//! backoff and the settling of ambiguous writes are the [`Client`](crate::client)'s decisions.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use paros_core::{Call, CallAnswer, CallId, Consistency, NodeId, Seq};

use crate::types::JournalView;

/// A server's answer to a read, as the wrapper decoded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadAnswer {
    /// Records at positions `from`, `from + 1`, …
    Page {
        /// The first record's position.
        from: Seq,
        /// The records.
        records: Vec<Bytes>,
        /// The journal's view.
        view: JournalView,
    },
    /// The requested position is below the journal's first retained one.
    Truncated {
        /// The journal's view: its `first_seq` lies past the requested position.
        view: JournalView,
    },
    /// This server cannot serve the read now; another may.
    Unserved {
        /// How far the server had applied the journal when it judged the read: the end of its
        /// applied prefix, its `next_seq` (every record below it is applied there). A read of
        /// `Reached(seq)` not served within its wait says `applied_to < seq`. `None` when the
        /// server did not say (it refused before looking at the journal, or no answer came).
        applied_to: Option<Seq>,
    },
    /// No such journal.
    UnknownJournal,
    /// The service refused the read (unauthorized, forbidden, over quota, malformed).
    Denied(Denial),
}

/// Where one request goes: a server a redirect named, or the service's own choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Route {
    /// The server to ask; `None` lets the service choose (for HTTP, always the gateway).
    pub server: Option<NodeId>,
    /// How many requests for the same operation went before this one (0 for the first): a
    /// service without a named server spreads retries over its servers by it.
    pub attempt: u32,
}

/// What came back from one decided call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallReply {
    /// The server answered.
    Answer(CallAnswer),
    /// The service knows no such journal.
    UnknownJournal,
    /// The request left and no answer came (a timeout, a dropped connection, a 504): the call
    /// may or may not have taken effect.
    NoAnswer,
    /// The request provably never reached a server (no route, connection refused): nothing
    /// happened; another server may be asked.
    NotSent,
    /// The service refused to judge the call (a gateway's 401, 403, 429, 400): asking again
    /// identically would be refused again, so the call ends here. Nothing was done.
    Denied(Denial),
}

/// The service said no: the one shape every part of the library reports a refusal in — a
/// [`Writer`](crate::Writer), a [`Reader`](crate::Reader), a [`Client`](crate::Client) call and
/// a [`GatewayClient`](crate::GatewayClient) request alike. For a journal call it is a refusal
/// by the service in front of the journal (authentication, authorization, quota, a malformed
/// request, an answer outside the contract), not a journal verdict; for the gateway's other
/// calls, any error it answered (`name_taken`, `unknown_journal`, …).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    /// The HTTP status (401, 403, 429, 400, …).
    pub status: u16,
    /// The stable error code (`unauthorized`, `forbidden`, `over_quota`, `malformed`, …), or
    /// `contract` for an answer that breaks the API contract.
    pub code: &'static str,
    /// What the service said, for people: the error body's `message`, or how the answer
    /// broke the contract.
    pub message: String,
    /// The `Retry-After` a 429 named, in seconds.
    pub retry_after_s: Option<u64>,
}

impl Denial {
    /// A refusal with `code` and `message` and nothing else.
    #[must_use]
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> Denial {
        Denial { status, code, message: message.into(), retry_after_s: None }
    }

    /// The wait its `Retry-After` named (zero when it named none).
    #[must_use]
    pub fn retry_after(&self) -> Duration {
        Duration::from_secs(self.retry_after_s.unwrap_or(0))
    }
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "{} (HTTP {})", self.code, self.status)?;
        } else {
            write!(f, "{}: {} (HTTP {})", self.code, self.message, self.status)?;
        }
        if let Some(s) = self.retry_after_s {
            write!(f, "; retry after {s} s")?;
        }
        Ok(())
    }
}

/// The servers a read asks ([`JournalService::read_servers`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadServers {
    /// Any of these, in rotation from the server that answered last (else a drawn one).
    Rotate(Vec<NodeId>),
    /// These in this order, best first: the journal's read replicas the service judges
    /// serving and least behind, then its voters. A read that is not served moves on down.
    Ranked(Vec<NodeId>),
}

impl ReadServers {
    /// A journal's read replicas as a router ranked them, best first, then its `voters` from
    /// the one at `turn` (modulo their count), so reads that reach the voters take turns.
    #[must_use]
    pub fn replicas_first(replicas: Vec<NodeId>, voters: &[NodeId], turn: u64) -> ReadServers {
        let mut ranked = replicas;
        if !voters.is_empty() {
            let start = usize::try_from(turn % voters.len() as u64).unwrap_or(0);
            ranked.extend(voters[start..].iter().chain(&voters[..start]));
        }
        ReadServers::Ranked(ranked)
    }

    /// The server try `attempt` (0 for the first) of a cursor's read asks: ranked servers from
    /// the best on each new read, one further down the ranking on each retry; servers in
    /// rotation from `start` on, one further on each retry. `None` when no server is named (the
    /// service routes by itself).
    #[must_use]
    pub fn pick(&self, start: usize, attempt: u32) -> Option<NodeId> {
        let (servers, start) = match self {
            ReadServers::Rotate(servers) => (servers, start),
            ReadServers::Ranked(servers) => (servers, 0),
        };
        (!servers.is_empty()).then(|| servers[start.wrapping_add(attempt as usize) % servers.len()])
    }
}

/// One page request, as the service sends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadParams {
    /// The first position wanted.
    pub from: Seq,
    /// Records at most; the server caps it by its page size.
    pub limit: u32,
    /// Record bytes at most (a page holds at least one record when one is there).
    pub max_bytes: u32,
    /// How long a read at the tail may wait for a record, in milliseconds (the server caps it).
    pub wait_ms: u32,
    /// How fresh the answer must be.
    pub consistency: Consistency,
}

/// A journal service: the four calls (Write, Truncate and SetLeader as a decided [`Call`];
/// Read as [`read`](Self::read)) and inspect, for journals named by [`Journal`](Self::Journal).
pub trait JournalService: Send + Sync {
    /// How this service names a journal: a `JournalKey` in the cell, a name at a gateway.
    type Journal: Clone + Eq + std::hash::Hash + fmt::Debug + Send + Sync;

    /// The servers a caller may name in a [`Route`] (empty: the service routes by itself).
    fn servers(&self) -> Vec<NodeId>;

    /// The servers a read of `journal` asks, and how: by default any of [`servers`]
    /// (Self::servers) in rotation. A service with read replicas ranks them first.
    fn read_servers(&self, _journal: &Self::Journal) -> ReadServers {
        ReadServers::Rotate(self.servers())
    }

    /// Sends one decided call and waits, within the service's own request deadline, for its
    /// answer. `id` is the call's own, the same on every send of it ([`CallPolicy::id`]); a
    /// service that reaches the nodes directly carries it to them.
    ///
    /// [`CallPolicy::id`]: crate::CallPolicy::id
    fn call(
        &self,
        journal: &Self::Journal,
        id: CallId,
        call: &Call,
        route: Route,
    ) -> impl Future<Output = CallReply> + Send;

    /// Sends one read and waits for its page (`wait_ms` plus the service's deadline at most).
    /// A read that got no answer is [`ReadAnswer::Unserved`] with no `applied_to`: reads change
    /// nothing, so a lost one is simply asked again.
    fn read(&self, journal: &Self::Journal, read: ReadParams, route: Route) -> impl Future<Output = ReadAnswer> + Send;

    /// The journal's current view (its retained range and writer), from a linearizable read of
    /// at most one record at its start: `Page` and `Truncated` both carry it.
    fn inspect(&self, journal: &Self::Journal, route: Route) -> impl Future<Output = ReadAnswer> + Send {
        self.read(
            journal,
            ReadParams { from: Seq(0), limit: 1, max_bytes: 1, wait_ms: 0, consistency: Consistency::Linearizable },
            route,
        )
    }
}

/// A shared service is a service: a test keeps a handle on its fake while the client owns
/// another, and several clients can share one connection pool.
impl<T: JournalService + ?Sized> JournalService for std::sync::Arc<T> {
    type Journal = T::Journal;

    fn servers(&self) -> Vec<NodeId> {
        (**self).servers()
    }

    fn read_servers(&self, journal: &Self::Journal) -> ReadServers {
        (**self).read_servers(journal)
    }

    fn call(
        &self,
        journal: &Self::Journal,
        id: CallId,
        call: &Call,
        route: Route,
    ) -> impl Future<Output = CallReply> + Send {
        (**self).call(journal, id, call, route)
    }

    fn read(&self, journal: &Self::Journal, read: ReadParams, route: Route) -> impl Future<Output = ReadAnswer> + Send {
        (**self).read(journal, read, route)
    }
}

impl ReadAnswer {
    /// The client's reading of a node's read answer (in-cell services).
    #[must_use]
    pub fn from_node(answer: paros_core::ReadAnswer) -> ReadAnswer {
        match answer {
            paros_core::ReadAnswer::Page { from, records, view } => ReadAnswer::Page { from, records, view },
            paros_core::ReadAnswer::Truncated(view) => ReadAnswer::Truncated { view },
            paros_core::ReadAnswer::Unserved { applied_to } => ReadAnswer::Unserved { applied_to },
        }
    }
}
