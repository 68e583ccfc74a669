//! The cell as the gateway sees it: a [`Client`] over some journal service, behind an object
//! so the handlers (and the OpenAPI paths generated from them) are not generic.
//!
//! Every retry on the way to the cell happens here, bounded, and nowhere in the routes:
//! - a call is the client's [`Client::call`] (its retries, redirects and settling), asked again
//!   only while the journal is listed but no server hosts it yet (`placement_wait`);
//! - a read is asked of one server after another until it is served or its [`ReadDeadline`]
//!   passes. paros-client has no read entry point that takes a deadline and an arbitrary
//!   consistency (its `Reader` follows a cursor, linearizable or monotonic, with no deadline),
//!   so this is the one place the gateway carries that policy itself: the client's jittered
//!   [`backoff`] between tries, each try cut off at the deadline.

use std::time::Duration;

use futures_util::future::BoxFuture;
use paros_client::policy::backoff;
use paros_client::{AnswerError, Client, Decided, JournalService, ReadAnswer, ReadParams, Route};
use paros_core::rng::Rng;
use paros_core::{Call, Consistency, JournalKey, NodeId};
use tokio::time::{Instant, sleep, timeout_at};

use crate::config::GatewayConfig;

/// When a read ends. `wait_until` bounds the wait for the journal (records at the tail, the
/// record at `min_seq`): an empty page at the tail is answered then. `give_up_at` bounds the
/// wait for a server to serve the read at all: an unserved read is answered then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadDeadline {
    pub wait_until: Instant,
    pub give_up_at: Instant,
}

impl ReadDeadline {
    /// The deadline of a read that starts `now` and may wait `wait` for the journal.
    ///
    /// A read that waits for a position (`Reached`) cannot tell a journal that has not reached
    /// it from a server that cannot say so: it ends when `wait` passes (API.md: 503 if not
    /// within `wait_ms`), though never before one trip's worth, `read_reach_min`. A
    /// linearizable read waits `wait` for records at the tail, and up to `read_serve_max` more
    /// for a server to confirm it.
    #[must_use]
    pub fn new(now: Instant, wait: Duration, consistency: Consistency, config: &GatewayConfig) -> ReadDeadline {
        let wait_until = now + wait;
        let give_up_at = match consistency {
            Consistency::Reached(_) => now + wait.max(config.read_reach_min),
            Consistency::Linearizable => wait_until + config.read_serve_max,
        };
        ReadDeadline { wait_until, give_up_at }
    }

    /// The milliseconds left of the wait for the journal at `now`, rounded up: a server asked
    /// with time left waits at least that long (the answer is cut off at `wait_until`).
    fn wait_ms_left(&self, now: Instant) -> u32 {
        let left = self.wait_until.saturating_duration_since(now);
        u32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(u32::MAX)
    }
}

/// What the gateway asks of the cell.
pub trait CellPort: Send + Sync + 'static {
    /// One call, with the client's retries, redirects and settling. While it is answered
    /// `UnknownJournal` and `listed()` says the registry still lists the journal (created, not
    /// yet hosted), it is asked again, up to the configured `placement_wait`.
    fn call<'a>(
        &'a self,
        journal: JournalKey,
        call: Call,
        listed: &'a (dyn Fn() -> bool + Send + Sync),
    ) -> BoxFuture<'a, Result<Decided, AnswerError>>;
    /// One read: the first answer that serves it, an empty page at the tail once
    /// `deadline.wait_until` passed, or `Unserved` at `deadline.give_up_at`.
    fn read(&self, journal: JournalKey, params: ReadParams, deadline: ReadDeadline) -> BoxFuture<'_, ReadAnswer>;
    /// The node whose verdict on `journal` came back last through this gateway, and how long
    /// ago: it led the journal then. `None` when no call on it went through here.
    fn leader(&self, journal: JournalKey) -> Option<(NodeId, Duration)>;
}

/// A [`Client`] is the gateway's way into the cell.
pub(crate) struct ClientPort<S: JournalService> {
    pub(crate) client: Client<S>,
    pub(crate) placement_wait: Duration,
    pub(crate) read_attempts_max: u32,
}

impl<S> ClientPort<S>
where
    S: JournalService<Journal = JournalKey> + 'static,
{
    async fn call_placed(
        &self,
        journal: JournalKey,
        call: Call,
        listed: &(dyn Fn() -> bool + Send + Sync),
    ) -> Result<Decided, AnswerError> {
        let placed_by = Instant::now() + self.placement_wait;
        let mut rng = Rng::new(self.client.draw());
        let mut tries = 0;
        loop {
            let decided = self.client.call(&journal, call.clone()).await;
            tries += 1;
            if !matches!(decided, Ok(Decided::UnknownJournal)) || !listed() {
                return decided;
            }
            let delay = backoff(self.client.config(), tries, &mut rng);
            if Instant::now() + delay >= placed_by {
                return decided;
            }
            sleep(delay).await;
        }
    }

    async fn read_until(&self, journal: JournalKey, params: ReadParams, deadline: ReadDeadline) -> ReadAnswer {
        let mut rng = Rng::new(self.client.draw());
        // An empty page at the tail that came back before the wait was over (a node caps its
        // own long-poll, in whole ticks): answered if nothing comes by `wait_until`.
        let mut early: Option<ReadAnswer> = None;
        for attempt in 0..self.read_attempts_max.max(1) {
            // The first try goes to the server of the last verdict: after a write, the leader
            // that took it has applied it, where a follower learns the commit only at the next
            // heartbeat.
            let server = if attempt == 0 { self.client.preferred_server(&journal) } else { None };
            let wait_ms = deadline.wait_ms_left(Instant::now());
            let trip =
                self.client.service().read(&journal, ReadParams { wait_ms, ..params }, Route { server, attempt });
            let cut_off = if early.is_some() { deadline.wait_until } else { deadline.give_up_at };
            let Ok(answer) = timeout_at(cut_off, trip).await else {
                return early.unwrap_or(ReadAnswer::Unserved);
            };
            match answer {
                ReadAnswer::Page { from, ref records, view }
                    if records.is_empty() && from >= view.next_seq && Instant::now() < deadline.wait_until =>
                {
                    early = Some(answer);
                }
                ReadAnswer::Unserved => {
                    let delay = backoff(self.client.config(), attempt + 1, &mut rng);
                    if Instant::now() + delay >= deadline.give_up_at {
                        return early.unwrap_or(ReadAnswer::Unserved);
                    }
                    sleep(delay).await;
                }
                served => return served,
            }
        }
        early.unwrap_or(ReadAnswer::Unserved)
    }
}

impl<S> CellPort for ClientPort<S>
where
    S: JournalService<Journal = JournalKey> + 'static,
{
    fn call<'a>(
        &'a self,
        journal: JournalKey,
        call: Call,
        listed: &'a (dyn Fn() -> bool + Send + Sync),
    ) -> BoxFuture<'a, Result<Decided, AnswerError>> {
        Box::pin(self.call_placed(journal, call, listed))
    }

    fn read(&self, journal: JournalKey, params: ReadParams, deadline: ReadDeadline) -> BoxFuture<'_, ReadAnswer> {
        Box::pin(self.read_until(journal, params, deadline))
    }

    fn leader(&self, journal: JournalKey) -> Option<(NodeId, Duration)> {
        self.client.leader_hint(&journal)
    }
}
