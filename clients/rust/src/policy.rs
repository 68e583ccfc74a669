//! The client's retry, redirect and settling policy for one decided call, and its retry policy
//! for one read, sans-IO.
//!
//! A [`CallPolicy`] decides, for one Write, Truncate or SetLeader, what to send next, to whom
//! and after how long; a [`ReadPolicy`] does the same for one Read within a [`ReadDeadline`].
//! The async [`Client`](crate::Client) only carries their [`Step`]s and [`ReadStep`]s out. They
//! have no clock (the wrapper reports the time elapsed since the call began, and sleeps the
//! delays the policy returns) and no randomness of their own (backoff jitter is drawn from a
//! seeded [`Rng`]), so the simulation replays them bit for bit.
//!
//! The rules:
//! - Every send is the **identical** request: the fold deduplicates a retried Write from the log
//!   itself (`Duplicate`), so only an identical retry can be recognised.
//! - `Redirect{leader: Some(n)}` is followed to `n` at once, at most
//!   [`ClientConfig::redirects_max`] times per call.
//! - `Redirect{leader: None}`, `Busy` and [`CallReply::NotSent`] mean nothing happened: the next
//!   server in the rotation is asked after a jittered exponential backoff.
//! - `NoVerdict` and [`CallReply::NoAnswer`] mean the call *may* have taken effect: from then on
//!   the call is *ambiguous*, it is re-sent identically and the answer is read in that light
//!   (below). If the bounds run out while ambiguous the result is [`Decided::Ambiguous`], never
//!   [`Decided::Unavailable`] (which promises nothing happened).
//! - Settling an ambiguous Write: `Accepted` (written now) and `Duplicate` (written before)
//!   are acknowledgements; `Refused(view)` with `view.next_seq` past the write's seq asks the
//!   wrapper to read `[seq, seq + n)` back and compare byte for byte (equal: it was written,
//!   reported as `Duplicate`; different: it was not, the refusal stands); `Refused` with the tail
//!   at or before the seq proves it was not written; `Truncated` makes it unknowable:
//!   `Ambiguous`.
//! - An unfenced append (a multi-writer Write, `leader: None`) is acknowledged by `Accepted` at
//!   any seq with its own count. It is not idempotent (the fold cannot tell a retry from a second
//!   append), so once it may have taken effect it is never sent again: `NoVerdict` or
//!   [`CallReply::NoAnswer`] end it as [`Decided::Ambiguous`].
//! - Settling an ambiguous SetLeader(new, old): `Lost(view)` whose view names `new` as leader is
//!   our own earlier attempt having won: `Won(view)`. Uuids are fresh per term, so nobody else
//!   sets `new`.
//! - Settling an ambiguous Truncate(up_to): `TruncateRefused(view)` whose view already retains
//!   nothing below `min(up_to, next_seq)` is reported `Trimmed(view)`: the truncation's effect
//!   holds (first_seq never decreases), whoever applied it.
//! - [`CallReply::Denied`] (a gateway's 401, 403 or 400) ends the call at once as
//!   [`Decided::Denied`]: the identical request would be refused again.
//! - A 429 (over the tenant's quota) took no effect and passes once the quota has refilled: the
//!   identical request is sent again to the same server after the `Retry-After` it named plus a
//!   jittered backoff (so calls refused together do not return together), within `attempts_max`
//!   and the deadline; past them the 429 stands as [`Decided::Denied`].
//! - `UnknownJournal` from one named server means "not placed here yet" (a journal is placed
//!   on its servers one by one after it is created): the other servers are asked at once, and
//!   once every server in a row said so, they are asked again after a jittered backoff, while
//!   [`ClientConfig::placement_wait`] lasts; then `UnknownJournal` stands. A service that names
//!   no servers routes by itself and answers for all of them: its `UnknownJournal` stands at
//!   once. Requests answered `UnknownJournal` count against `placement_wait`, not
//!   `attempts_max`.
//! - Every bound ([`ClientConfig`]) ends the call: sends, redirects, total deadline.
//!
//! The rules of a read ([`ReadPolicy`]), within its [`ReadDeadline`]:
//! - The first try goes to the hinted server (the server of the last verdict: after a write,
//!   the leader that took it has applied it, where a follower learns the commit only at its
//!   next heartbeat); later tries rotate through the servers.
//! - Each try asks its server to wait what is left of `wait_until`, and is cut off at
//!   `give_up_at` (at `wait_until` once an early empty page is held, below) — plus
//!   `read_answer_grace` when no early page is held and the server was asked to wait until
//!   then: it answers just after by its own clock, and its answer (an `Unserved` saying how
//!   far it applied, an empty page at the tail) is worth more than a cut-off.
//! - `Unserved` is asked again of the next server after a jittered backoff, while the backoff
//!   ends before `give_up_at`.
//! - An empty page at the tail that comes back before `wait_until` (a server caps its own
//!   long-poll) is held, and the next server is asked at once: the held page is the answer
//!   if nothing serves the read by `wait_until`.
//! - `UnknownJournal` as for a call, within the read's deadline too.
//! - A 429 is asked again of the same server after its `Retry-After` and a backoff, when that
//!   is before the read's end; else it ends the read (with the held page, if one is held).
//! - A page, `Truncated` or `Denied` ends the read; so do `read_attempts_max` and the
//!   deadline, with the held page, else `UnknownJournal` if that was the last answer and no
//!   server answered anything else (one that does not host the journal cannot end a read a
//!   server hosting it answered `Unserved`), else
//!   `Unserved` carrying the furthest `applied_to` any server that did not serve it named.
//!
//! Answers are parsed, not trusted: a verdict that cannot answer this call (a `Won` for a
//! Write, an `Accepted` at another seq, a view with `first_seq > next_seq`) ends the call with
//! an [`AnswerError`].

use std::time::Duration;

use paros_core::journal::{JournalView, Outcome, TooLarge};
use paros_core::rng::Rng;
use paros_core::{Call, CallAnswer, CallId, Consistency, NodeId, Seq};
use thiserror::Error;

use crate::service::{CallReply, Denial, ReadAnswer, ReadParams, Route};
use crate::types::{seq_checked_add, view_is_consistent};

/// The bounds of one call's and one read's retries. Every one is finite: a call always ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientConfig {
    /// Requests sent for one call at most, counting the first, redirected ones and read-backs
    /// (not those answered `UnknownJournal`: `placement_wait` bounds them).
    pub attempts_max: u32,
    /// Redirects followed for one call at most.
    pub redirects_max: u32,
    /// The first retry's delay, and the least any retry waits.
    pub backoff_base: Duration,
    /// The most any retry waits.
    pub backoff_max: Duration,
    /// No retry is scheduled that would start later than this after the call began.
    pub deadline: Duration,
    /// The most records one read-back page asks for, when settling an ambiguous write.
    pub read_back_records_max: u32,
    /// The most bytes one read-back page asks for (a page holds at least one record).
    pub read_back_bytes_max: u32,
    /// The most journals the [`Client`](crate::Client) remembers a likely leader for (the server of each
    /// journal's last verdict); past it, the oldest-inserted hints are forgotten.
    pub leader_hints_max: usize,
    /// How long after it began a call or read still asks its servers again while each answers
    /// `UnknownJournal` (a journal created and not placed on them yet). Zero: one round.
    pub placement_wait: Duration,
    /// Requests sent for one read at most, counting the first (not those answered
    /// `UnknownJournal`).
    pub read_attempts_max: u32,
    /// How long past a read's end the answer of a server asked to wait until that end may
    /// still come back (its clock ticks, the trip back): an `Unserved` saying how far it had
    /// applied, or an empty page at the tail, is the read's answer rather than a cut-off.
    pub read_answer_grace: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            attempts_max: 16,
            redirects_max: 8,
            backoff_base: Duration::from_millis(10),
            backoff_max: Duration::from_secs(1),
            deadline: Duration::from_secs(30),
            read_back_records_max: 256,
            read_back_bytes_max: 1 << 20,
            leader_hints_max: 65_536,
            placement_wait: Duration::from_secs(5),
            read_attempts_max: 8,
            read_answer_grace: Duration::from_millis(100),
        }
    }
}

/// A [`ClientConfig`] that is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ClientConfigError {
    /// `attempts_max` is 0: no request would ever be sent.
    #[error("a call must be allowed at least one attempt")]
    AttemptsZero,
    /// `backoff_base` is zero: retries would spin.
    #[error("the backoff base must be positive")]
    BackoffBaseZero,
    /// `backoff_base` exceeds `backoff_max`.
    #[error("the backoff base {base:?} exceeds the backoff max {max:?}")]
    BackoffInverted {
        /// The `backoff_base` asked for.
        base: Duration,
        /// The `backoff_max` it exceeds.
        max: Duration,
    },
    /// `deadline` is zero: no retry could ever be scheduled.
    #[error("the call deadline must be positive")]
    DeadlineZero,
    /// A read-back page bound is zero: an ambiguous write could never be read back.
    #[error("a read-back page must be allowed at least one record and one byte")]
    ReadBackPageZero,
    /// `read_attempts_max` is 0: no read would ever be sent.
    #[error("a read must be allowed at least one attempt")]
    ReadAttemptsZero,
}

impl ClientConfig {
    /// Checks every bound.
    ///
    /// # Errors
    /// The first [`ClientConfigError`] found.
    pub fn validate(&self) -> Result<(), ClientConfigError> {
        if self.attempts_max == 0 {
            return Err(ClientConfigError::AttemptsZero);
        }
        if self.backoff_base.is_zero() {
            return Err(ClientConfigError::BackoffBaseZero);
        }
        if self.backoff_base > self.backoff_max {
            return Err(ClientConfigError::BackoffInverted { base: self.backoff_base, max: self.backoff_max });
        }
        if self.deadline.is_zero() {
            return Err(ClientConfigError::DeadlineZero);
        }
        if self.read_back_records_max == 0 || self.read_back_bytes_max == 0 {
            return Err(ClientConfigError::ReadBackPageZero);
        }
        if self.read_attempts_max == 0 {
            return Err(ClientConfigError::ReadAttemptsZero);
        }
        Ok(())
    }
}

/// How a call ended, as the library reports it: the fold's verdict, or what the client knows
/// instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// The verdict of the call's slot (after settling, when the call was ambiguous).
    Verdict(Outcome),
    /// Over the server's batch limits; proposed nowhere.
    TooLarge(TooLarge),
    /// The call may or may not have taken effect, and the bounds ran out before it was known.
    Ambiguous,
    /// No server took the call within the bounds; it took no effect.
    Unavailable,
    /// The service knows no such journal (no server named it within `placement_wait`).
    UnknownJournal,
    /// The service refused the call (unauthorized, forbidden, malformed; over quota once the
    /// bounds allow no further wait). `ambiguous`: an earlier attempt got no answer, so the
    /// call may still have taken effect; otherwise nothing was done.
    Denied {
        /// The service's refusal.
        denial: Denial,
        /// An earlier attempt got no answer: the call may still have taken effect.
        ambiguous: bool,
    },
}

impl std::fmt::Display for Decided {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Decided::Verdict(outcome) => write!(f, "{outcome}"),
            Decided::TooLarge(limits) => write!(f, "{limits}"),
            Decided::Ambiguous => f.write_str("no answer within the bounds: it may or may not have taken effect"),
            Decided::Unavailable => f.write_str("no server took the call within the bounds: nothing was done"),
            Decided::UnknownJournal => f.write_str("no such journal"),
            Decided::Denied { denial, ambiguous: false } => write!(f, "denied: {denial}"),
            Decided::Denied { denial, ambiguous: true } => {
                write!(f, "denied: {denial} (an earlier attempt got no answer: it may have taken effect)")
            }
        }
    }
}

/// An answer that cannot be an answer to the call it came back for; the call ends.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AnswerError {
    /// A verdict of a kind this call cannot get (a `Won` for a Write, a `Noop`, ...).
    #[error("the verdict \"{outcome}\" cannot answer this call")]
    WrongVerdict {
        /// The verdict that came back.
        outcome: Outcome,
    },
    /// An `Accepted` or `Duplicate` for other positions than the write's.
    #[error("an acknowledgement of {count} records at {} answers a write of {len} at {}", .seq.0, .expected.0)]
    WrongPosition {
        /// The position acknowledged.
        seq: Seq,
        /// How many records were acknowledged.
        count: u64,
        /// The write's position.
        expected: Seq,
        /// How many records the write holds.
        len: u64,
    },
    /// A view with `first_seq > next_seq`.
    #[error("a view with first_seq {} past next_seq {} describes no journal", .view.first_seq.0, .view.next_seq.0)]
    InconsistentView {
        /// The view that came back.
        view: JournalView,
    },
    /// A read-back page that does not start where it was asked to, or runs past its own tail.
    #[error("a read-back page from {} of {len} records does not answer a read from {}", .from.0, .asked.0)]
    WrongPage {
        /// The position the read-back asked for.
        asked: Seq,
        /// Where the page began.
        from: Seq,
        /// How many records it held.
        len: usize,
    },
}

/// What the wrapper does next for this call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Wait `after`, then send [`CallPolicy::call`] (always the identical request) by `route`.
    Send {
        /// Where to send it.
        route: Route,
        /// How long to wait before sending.
        after: Duration,
    },
    /// Wait `after`, then read by `route` and hand the answer to [`CallPolicy::on_read`].
    Read {
        /// The read to send.
        params: ReadParams,
        /// Where to send it.
        route: Route,
        /// How long to wait before sending.
        after: Duration,
    },
    /// The call is over.
    Done(Result<Decided, AnswerError>),
}

/// The delay before retry number `retry` (1 for the first retry): drawn uniformly from
/// `[base, min(max, base · 2^retry)]`, so it is never below `base`, never above `max`, and the
/// window doubles per retry (jitter keeps many clients that failed together from retrying
/// together).
pub fn backoff(config: &ClientConfig, retry: u32, rng: &mut Rng) -> Duration {
    let base = duration_nanos(config.backoff_base);
    let max = duration_nanos(config.backoff_max).max(base);
    let ceiling = base.checked_shl(retry.min(63)).filter(|c| c >> retry.min(63) == base).unwrap_or(max).min(max);
    let span = ceiling - base;
    let jitter = if span == u64::MAX { rng.next_u64() } else { rng.next_u64() % (span + 1) };
    Duration::from_nanos(base + jitter)
}

/// How long to wait before asking again after a 429: its `Retry-After`, plus the backoff of
/// retry number `retry`, so that callers refused together do not all return together.
fn quota_wait(denial: &Denial, config: &ClientConfig, retry: u32, rng: &mut Rng) -> Duration {
    denial.retry_after() + backoff(config, retry, rng)
}

fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Where a call or a read stands with servers that answered `UnknownJournal`.
#[derive(Debug, Default, Clone, Copy)]
struct Unplaced {
    /// Servers in a row that answered `UnknownJournal` in this round.
    in_a_row: usize,
    /// Requests answered `UnknownJournal` so far.
    requests: u32,
}

impl Unplaced {
    /// Another `UnknownJournal`, `elapsed` after the call or read began, from one of `servers`
    /// named servers: the delay before the next server is asked (none while a server of this
    /// round was not asked yet; a backoff, drawn for retry number `retry`, once every server
    /// in a row said so), or `None` when `UnknownJournal` stands: no named servers, or the
    /// backoff would end past `placement_wait`.
    fn answered(
        &mut self,
        servers: usize,
        elapsed: Duration,
        config: &ClientConfig,
        retry: u32,
        rng: &mut Rng,
    ) -> Option<Duration> {
        self.requests += 1;
        if servers == 0 {
            return None;
        }
        self.in_a_row += 1;
        if self.in_a_row < servers {
            return Some(Duration::ZERO);
        }
        self.in_a_row = 0;
        let delay = backoff(config, retry, rng);
        (elapsed.saturating_add(delay) <= config.placement_wait).then_some(delay)
    }

    /// Any other answer, or none: the round starts again.
    fn other(&mut self) {
        self.in_a_row = 0;
    }
}

/// Where the ambiguous-write read-back stands.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ReadBack {
    /// The refusal that is reported if the records read back differ.
    refusal: JournalView,
    /// The next position to compare.
    at: Seq,
}

/// The policy of one decided call. See the [module documentation](self) for the rules.
#[derive(Debug)]
pub struct CallPolicy {
    call: Call,
    /// The call's one id, drawn once: every send carries it to the node, which owes the
    /// answer under it (a resend to a node still owing it waits for the same answer).
    id: CallId,
    config: ClientConfig,
    rng: Rng,
    rotation: Rotation,
    sent: u32,
    redirects: u32,
    /// Retries after a backoff so far (the exponent of the next backoff).
    retries: u32,
    unplaced: Unplaced,
    ambiguous: bool,
    read_back: Option<ReadBack>,
    /// The server that gave the verdict, for the wrapper to ask first next time.
    answered_by: Option<NodeId>,
    done: bool,
}

/// Where a first request goes among `servers`: the position of `hint` when it is one of them,
/// else a position drawn from `rng` (0 when `servers` is empty). Drawing, not the first server,
/// spreads the first requests of many journals over the cell.
pub(crate) fn first_server(servers: &[NodeId], hint: Option<NodeId>, rng: &mut Rng) -> usize {
    match hint.and_then(|h| servers.iter().position(|s| *s == h)) {
        Some(i) => i,
        None if servers.is_empty() => 0,
        None => (rng.next_u64() % servers.len() as u64) as usize,
    }
}

/// The servers a policy asks in turn, and the one named for its next send.
#[derive(Debug)]
struct Rotation {
    servers: Vec<NodeId>,
    /// Index into `servers` of the server asked last (meaningful only when `servers` is
    /// non-empty).
    at: usize,
    /// The server named for the next send: a hint, a redirect's target, the rotation's pick,
    /// or none (the service routes by itself).
    server: Option<NodeId>,
}

impl Rotation {
    /// `hint` first when it is given, else a server drawn from `rng` ([`first_server`]).
    fn new(servers: Vec<NodeId>, hint: Option<NodeId>, rng: &mut Rng) -> Rotation {
        let at = first_server(&servers, hint, rng);
        let server = hint.or_else(|| servers.get(at).copied());
        Rotation { servers, at, server }
    }

    /// The servers in their order, the first one first.
    fn ranked(servers: Vec<NodeId>) -> Rotation {
        let server = servers.first().copied();
        Rotation { servers, at: 0, server }
    }

    /// The next server in turn (none when the service routes by itself).
    fn rotate(&mut self) {
        if self.servers.is_empty() {
            self.server = None;
        } else {
            self.at = (self.at + 1) % self.servers.len();
            self.server = Some(self.servers[self.at]);
        }
    }

    /// `node` next, and the rotation goes on from it when it is one of the servers.
    fn redirect(&mut self, node: NodeId) {
        self.server = Some(node);
        if let Some(i) = self.servers.iter().position(|s| *s == node) {
            self.at = i;
        }
    }
}

impl CallPolicy {
    /// The policy for `call`, over `servers` (empty: the service routes by itself), asking
    /// `hint` first when it is given (the server that answered last time), else a server drawn
    /// from `rng`.
    ///
    /// # Errors
    /// [`ClientConfigError`] when `config` is invalid.
    pub fn new(
        call: Call,
        servers: Vec<NodeId>,
        hint: Option<NodeId>,
        config: ClientConfig,
        mut rng: Rng,
    ) -> Result<CallPolicy, ClientConfigError> {
        config.validate()?;
        let rotation = Rotation::new(servers, hint, &mut rng);
        let id = CallId(rng.next_u64());
        Ok(CallPolicy {
            call,
            id,
            config,
            rng,
            rotation,
            sent: 0,
            redirects: 0,
            retries: 0,
            unplaced: Unplaced::default(),
            ambiguous: false,
            read_back: None,
            answered_by: None,
            done: false,
        })
    }

    /// The request every [`Step::Send`] sends.
    pub fn call(&self) -> &Call {
        &self.call
    }

    /// The id every [`Step::Send`] carries: one per call, kept across its resends.
    #[must_use]
    pub fn id(&self) -> CallId {
        self.id
    }

    /// Whether the call is an unfenced append (a multi-writer Write): not idempotent, so it is
    /// re-sent only when no server can have taken it.
    pub fn is_append(&self) -> bool {
        matches!(self.call, Call::Write { leader: None, .. })
    }

    /// Whether the call may already have taken effect (a request got no answer).
    pub fn is_ambiguous(&self) -> bool {
        self.ambiguous
    }

    /// How many requests were handed out so far.
    pub fn sent(&self) -> u32 {
        self.sent
    }

    /// The server whose answer ended the call, if one did.
    pub fn answered_by(&self) -> Option<NodeId> {
        self.answered_by
    }

    /// The first step: send at once.
    pub fn start(&mut self) -> Step {
        if self.sent > 0 || self.done {
            return self.finish(Ok(Decided::Unavailable));
        }
        self.send(Duration::ZERO)
    }

    /// Takes in what came back from the last [`Step::Send`]; `elapsed` is the time since the
    /// call began.
    pub fn on_reply(&mut self, reply: CallReply, elapsed: Duration) -> Step {
        if self.done {
            return Step::Done(Ok(Decided::Unavailable));
        }
        if !matches!(reply, CallReply::UnknownJournal) {
            self.unplaced.other();
        }
        match reply {
            CallReply::Answer(CallAnswer::Verdict(outcome)) => {
                self.answered_by = self.rotation.server;
                self.on_verdict(outcome)
            }
            CallReply::Answer(CallAnswer::TooLarge(limits)) => self.finish(Ok(Decided::TooLarge(limits))),
            CallReply::Answer(CallAnswer::Redirect { leader: Some(node) }) => {
                if self.redirects >= self.config.redirects_max {
                    return self.give_up();
                }
                self.redirects += 1;
                self.rotation.redirect(node);
                if self.spent() >= self.config.attempts_max || elapsed > self.config.deadline {
                    return self.give_up();
                }
                self.send(Duration::ZERO)
            }
            CallReply::Answer(CallAnswer::Redirect { leader: None } | CallAnswer::Busy) | CallReply::NotSent => {
                self.rotation.rotate();
                self.retry(elapsed)
            }
            // An unfenced append that may have landed is never sent again: the fold cannot
            // tell a retry from a second append.
            CallReply::Answer(CallAnswer::NoVerdict) | CallReply::NoAnswer if self.is_append() => {
                self.ambiguous = true;
                self.finish(Ok(Decided::Ambiguous))
            }
            CallReply::Answer(CallAnswer::NoVerdict) => {
                // The server answered, so it is alive: ask it again.
                self.ambiguous = true;
                self.retry(elapsed)
            }
            CallReply::NoAnswer => {
                self.ambiguous = true;
                self.rotation.rotate();
                self.retry(elapsed)
            }
            CallReply::UnknownJournal => self.on_unknown(elapsed, false),
            CallReply::Denied(denial) if denial.status == 429 => self.over_quota(denial, elapsed),
            CallReply::Denied(denial) => self.finish(Ok(Decided::Denied { denial, ambiguous: self.ambiguous })),
        }
    }

    /// After a 429: the same request to the same server once the quota should admit it, or
    /// the refusal stands when a bound would be passed.
    fn over_quota(&mut self, denial: Denial, elapsed: Duration) -> Step {
        let retry = self.retries + 1;
        let wait = quota_wait(&denial, &self.config, retry, &mut self.rng);
        if self.spent() >= self.config.attempts_max || elapsed.saturating_add(wait) > self.config.deadline {
            return self.finish(Ok(Decided::Denied { denial, ambiguous: self.ambiguous }));
        }
        self.retries = retry;
        self.send(wait)
    }

    /// Takes in the answer to the last [`Step::Read`] (the read-back of an ambiguous write).
    pub fn on_read(&mut self, answer: ReadAnswer, elapsed: Duration) -> Step {
        let (Some(read_back), Call::Write { seq, records, .. }) = (self.read_back.clone(), &self.call) else {
            return self.finish(Ok(Decided::Unavailable));
        };
        let (seq, count) = (*seq, records.len() as u64);
        if !matches!(answer, ReadAnswer::UnknownJournal) {
            self.unplaced.other();
        }
        match answer {
            ReadAnswer::Page { from, records: page, view } => {
                if !view_is_consistent(&view) {
                    return self.finish(Err(AnswerError::InconsistentView { view }));
                }
                let wrong = AnswerError::WrongPage { asked: read_back.at, from, len: page.len() };
                let Some(end) = seq_checked_add(from, page.len() as u64) else {
                    return self.finish(Err(wrong));
                };
                if from != read_back.at || (!page.is_empty() && end > view.next_seq) {
                    return self.finish(Err(wrong));
                }
                if page.is_empty() {
                    // An empty page: trimmed to past the position (the records cannot be
                    // confirmed any more), or a server that has not applied that far yet.
                    // A server behind the refusal's tail: ask again.
                    return if view.first_seq > from {
                        self.finish(Ok(Decided::Ambiguous))
                    } else {
                        self.retry_read(elapsed)
                    };
                }
                let offset = (from.0 - seq.0) as usize;
                let wanted = &records[offset..];
                let n = page.len().min(wanted.len());
                if page[..n] != wanted[..n] {
                    return self.finish(Ok(Decided::Verdict(Outcome::Refused(read_back.refusal))));
                }
                let at = Seq(from.0 + n as u64);
                if at.0 >= seq.0 + count {
                    // The view of the page that confirmed the last records: the journal as that
                    // server saw it, like the view a Duplicate verdict is judged against.
                    return self.finish(Ok(Decided::Verdict(Outcome::Duplicate { seq, count, view })));
                }
                self.read_back = Some(ReadBack { at, ..read_back });
                self.read_step(Duration::ZERO)
            }
            // Trimmed below the positions being compared: whether they held the write is lost.
            ReadAnswer::Truncated { view } => {
                if !view_is_consistent(&view) {
                    return self.finish(Err(AnswerError::InconsistentView { view }));
                }
                self.finish(Ok(Decided::Ambiguous))
            }
            ReadAnswer::Unserved { .. } => {
                self.rotation.rotate();
                self.retry_read(elapsed)
            }
            ReadAnswer::UnknownJournal => self.on_unknown(elapsed, true),
            // The read-back belongs to an ambiguous call: it may have taken effect.
            ReadAnswer::Denied(denial) => self.finish(Ok(Decided::Denied { denial, ambiguous: true })),
        }
    }

    fn on_verdict(&mut self, outcome: Outcome) -> Step {
        if let Some(view) = outcome.view()
            && !view_is_consistent(&view)
        {
            return self.finish(Err(AnswerError::InconsistentView { view }));
        }
        // A write's acknowledgement carries the view at its apply: the tail just past it
        // (`Accepted`) or at least past it (`Duplicate`).
        if let Outcome::Accepted { seq, count, view } | Outcome::Duplicate { seq, count, view } = outcome {
            let past = seq_checked_add(seq, count);
            let fits = if matches!(outcome, Outcome::Accepted { .. }) {
                past == Some(view.next_seq)
            } else {
                past.is_some_and(|end| end <= view.next_seq)
            };
            if !fits {
                return self.finish(Err(AnswerError::InconsistentView { view }));
            }
        }
        let wrong = Err(AnswerError::WrongVerdict { outcome });
        let decided = match (&self.call, outcome) {
            (_, Outcome::WrongMode(_)) => Ok(outcome),
            // An append lands at the tail, wherever that is: only its count must match.
            (Call::Write { leader: None, seq, records }, Outcome::Accepted { seq: at, count, .. }) => {
                let len = records.len() as u64;
                if count == len {
                    Ok(outcome)
                } else {
                    Err(AnswerError::WrongPosition { seq: at, count, expected: *seq, len })
                }
            }
            (Call::Write { leader: None, .. }, Outcome::Duplicate { .. }) => wrong,
            (
                Call::Write { seq, records, .. },
                Outcome::Accepted { seq: at, count, .. } | Outcome::Duplicate { seq: at, count, .. },
            ) => {
                let len = records.len() as u64;
                if at != *seq || count != len {
                    Err(AnswerError::WrongPosition { seq: at, count, expected: *seq, len })
                } else {
                    Ok(outcome)
                }
            }
            (Call::Write { leader, seq, .. }, Outcome::Refused(view)) => {
                if self.ambiguous && leader.is_some() && view.next_seq > *seq {
                    self.read_back = Some(ReadBack { refusal: view, at: *seq });
                    return self.read_step(Duration::ZERO);
                }
                Ok(outcome)
            }
            (Call::Write { .. }, Outcome::Truncated(_)) if self.ambiguous => {
                return self.finish(Ok(Decided::Ambiguous));
            }
            (Call::Write { .. }, Outcome::Truncated(_)) => Ok(outcome),
            (Call::SetLeader { .. }, Outcome::Won(_)) => Ok(outcome),
            (Call::SetLeader { new, .. }, Outcome::Lost(view)) => {
                if self.ambiguous && view.leader == Some(*new) {
                    Ok(Outcome::Won(view))
                } else {
                    Ok(outcome)
                }
            }
            (Call::Reconfigure { epoch, .. }, Outcome::Reconfigured { epoch: e, .. }) if e == *epoch => Ok(outcome),
            // The epoch in force when the journal judged it: the asked one when an earlier send
            // of this call (or of the same change, re-driven) was decided first.
            (Call::Reconfigure { .. }, Outcome::StaleEpoch { .. }) => Ok(outcome),
            (Call::Truncate { .. }, Outcome::Trimmed(_)) => Ok(outcome),
            (Call::Truncate { up_to, .. }, Outcome::TruncateRefused(view)) => {
                if self.ambiguous && view.first_seq >= (*up_to).min(view.next_seq) {
                    Ok(Outcome::Trimmed(view))
                } else {
                    Ok(outcome)
                }
            }
            _ => wrong,
        };
        self.finish(decided.map(Decided::Verdict))
    }

    /// The requests that count against `attempts_max`: all but those answered
    /// `UnknownJournal`.
    fn spent(&self) -> u32 {
        self.sent - self.unplaced.requests
    }

    /// After an `UnknownJournal`: the next server is asked again (by a send, or by a
    /// read-back when `read`), at once or after a backoff, or `UnknownJournal` stands.
    fn on_unknown(&mut self, elapsed: Duration, read: bool) -> Step {
        let retry = self.retries + 1;
        let delay = self.unplaced.answered(self.rotation.servers.len(), elapsed, &self.config, retry, &mut self.rng);
        let Some(delay) = delay.filter(|d| elapsed.saturating_add(*d) <= self.config.deadline) else {
            // Out of time before every server of the round said so: this one does not host the
            // journal, and the others did not decide it in time — no "no such journal".
            if delay.is_some_and(|d| d.is_zero()) {
                return self.give_up();
            }
            return self.finish(Ok(Decided::UnknownJournal));
        };
        if !delay.is_zero() {
            self.retries = retry;
        }
        self.rotation.rotate();
        if read { self.read_step(delay) } else { self.send(delay) }
    }

    /// The delay before the next retry, or `None` when a bound says stop.
    fn next_delay(&mut self, elapsed: Duration) -> Option<Duration> {
        if self.spent() >= self.config.attempts_max {
            return None;
        }
        let delay = backoff(&self.config, self.retries + 1, &mut self.rng);
        if elapsed.saturating_add(delay) > self.config.deadline {
            return None;
        }
        self.retries += 1;
        Some(delay)
    }

    fn retry(&mut self, elapsed: Duration) -> Step {
        match self.next_delay(elapsed) {
            Some(delay) => self.send(delay),
            None => self.give_up(),
        }
    }

    fn retry_read(&mut self, elapsed: Duration) -> Step {
        match self.next_delay(elapsed) {
            Some(delay) => self.read_step(delay),
            None => self.give_up(),
        }
    }

    fn send(&mut self, after: Duration) -> Step {
        let route = Route { server: self.rotation.server, attempt: self.sent };
        self.sent += 1;
        Step::Send { route, after }
    }

    fn read_step(&mut self, after: Duration) -> Step {
        let (Some(read_back), Call::Write { seq, records, .. }) = (&self.read_back, &self.call) else {
            return self.finish(Ok(Decided::Unavailable));
        };
        if self.spent() >= self.config.attempts_max {
            return self.give_up();
        }
        let left = seq.0 + records.len() as u64 - read_back.at.0;
        let limit = u32::try_from(left).unwrap_or(u32::MAX).min(self.config.read_back_records_max);
        let params = ReadParams {
            from: read_back.at,
            limit,
            max_bytes: self.config.read_back_bytes_max,
            wait_ms: 0,
            // Positions below the refusal's tail never change: any server that has applied that
            // far may answer.
            consistency: Consistency::Reached(read_back.refusal.next_seq),
        };
        let route = Route { server: self.rotation.server, attempt: self.sent };
        self.sent += 1;
        Step::Read { params, route, after }
    }

    fn give_up(&mut self) -> Step {
        let decided = if self.ambiguous { Decided::Ambiguous } else { Decided::Unavailable };
        self.finish(Ok(decided))
    }

    fn finish(&mut self, result: Result<Decided, AnswerError>) -> Step {
        self.done = true;
        self.read_back = None;
        Step::Done(result)
    }
}

/// When one read ends, counted from the moment it began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadDeadline {
    /// The end of the wait for the journal (records at the tail, the position a `Reached`
    /// read waits for): each try asks its server to wait what is left of it, and an empty
    /// page at the tail is answered then.
    pub wait_until: Duration,
    /// The end of the wait for a server to serve the read at all: an unserved read is
    /// answered `Unserved` then (or up to [`ClientConfig::read_answer_grace`] later, when the
    /// server asked last was asked to wait until then and its own answer comes back).
    pub give_up_at: Duration,
}

impl ReadDeadline {
    /// The deadline of a read that may wait `wait` for the journal.
    ///
    /// A read that waits for a position (`Reached`) cannot tell a journal that has not
    /// reached it from a server that cannot say so: it ends when `wait` passes, though never
    /// before `reach_min` (one trip's worth). A linearizable read waits `wait` for records at
    /// the tail, and up to `serve_max` more for a server to confirm it.
    #[must_use]
    pub fn new(wait: Duration, consistency: Consistency, reach_min: Duration, serve_max: Duration) -> ReadDeadline {
        let give_up_at = match consistency {
            Consistency::Reached(_) => wait.max(reach_min),
            Consistency::Linearizable => wait.saturating_add(serve_max),
        };
        ReadDeadline { wait_until: wait, give_up_at }
    }

    /// What is left of this deadline for a read that begins `elapsed` after the one it was
    /// made for (two reads within one wait).
    #[must_use]
    pub fn after(self, elapsed: Duration) -> ReadDeadline {
        ReadDeadline {
            wait_until: self.wait_until.saturating_sub(elapsed),
            give_up_at: self.give_up_at.saturating_sub(elapsed),
        }
    }
}

/// What the wrapper does next for one read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadStep {
    /// Wait `after`, then send `params` by `route` and hand the answer to
    /// [`ReadPolicy::on_answer`]; if none came by `cut_off` after the read began, stop
    /// waiting for it and call [`ReadPolicy::on_cut_off`].
    Send {
        /// The read to send.
        params: ReadParams,
        /// Where to send it.
        route: Route,
        /// How long to wait before sending.
        after: Duration,
        /// When to stop waiting for its answer, counted from the read's start.
        cut_off: Duration,
    },
    /// The read is over: its answer.
    Done(ReadAnswer),
}

/// The policy of one read, of any consistency, within a [`ReadDeadline`]. See the
/// [module documentation](self) for the rules.
#[derive(Debug)]
pub struct ReadPolicy {
    params: ReadParams,
    deadline: ReadDeadline,
    config: ClientConfig,
    rng: Rng,
    rotation: Rotation,
    sent: u32,
    unplaced: Unplaced,
    /// An empty page at the tail that came back before `wait_until`: the answer if nothing
    /// serves the read by then.
    early: Option<ReadAnswer>,
    /// Whether the last answer was `UnknownJournal`.
    unknown: bool,
    /// A named server answered anything but `UnknownJournal`: the journal is hosted somewhere,
    /// and a server that does not host it (a node outside its voters) cannot end the read
    /// `UnknownJournal`.
    hosted: bool,
    done: bool,
    /// The server named in the last send.
    asked: Option<NodeId>,
    /// The server whose answer (an early page, or the one that ended it) is the read's.
    served_by: Option<NodeId>,
    /// The furthest any server that did not serve the read said it had applied the journal:
    /// what an `Unserved` end carries.
    applied_to: Option<Seq>,
}

impl ReadPolicy {
    /// The policy for a read of `params` (each try asks for what is left of
    /// `deadline.wait_until` instead of `params.wait_ms`), over `servers` (empty: the service
    /// routes by itself), asking `hint` first when it is given, else a server drawn from
    /// `rng`.
    ///
    /// # Errors
    /// [`ClientConfigError`] when `config` is invalid.
    pub fn new(
        params: ReadParams,
        deadline: ReadDeadline,
        servers: Vec<NodeId>,
        hint: Option<NodeId>,
        config: ClientConfig,
        rng: Rng,
    ) -> Result<ReadPolicy, ClientConfigError> {
        ReadPolicy::over(params, deadline, crate::ReadServers::Rotate(servers), hint, config, rng)
    }

    /// [`ReadPolicy::new`] over the servers a service gave ([`crate::JournalService::read_servers`]):
    /// ranked ones are asked in their order from the first (the hint is not used), each read
    /// that is not served moving on to the next.
    ///
    /// # Errors
    /// [`ClientConfigError`] when `config` is invalid.
    pub fn over(
        params: ReadParams,
        deadline: ReadDeadline,
        servers: crate::ReadServers,
        hint: Option<NodeId>,
        config: ClientConfig,
        mut rng: Rng,
    ) -> Result<ReadPolicy, ClientConfigError> {
        config.validate()?;
        let rotation = match servers {
            crate::ReadServers::Rotate(servers) => Rotation::new(servers, hint, &mut rng),
            crate::ReadServers::Ranked(servers) => Rotation::ranked(servers),
        };
        Ok(ReadPolicy {
            params,
            deadline,
            config,
            rng,
            rotation,
            sent: 0,
            unplaced: Unplaced::default(),
            early: None,
            unknown: false,
            hosted: false,
            done: false,
            asked: None,
            served_by: None,
            applied_to: None,
        })
    }

    /// The server that served the read (the one named in the send whose answer ended it), once
    /// it is done with an answer from a named server.
    #[must_use]
    pub fn served_by(&self) -> Option<NodeId> {
        self.served_by
    }

    /// How many requests were handed out so far.
    pub fn sent(&self) -> u32 {
        self.sent
    }

    /// The first step: send at once.
    pub fn start(&mut self) -> ReadStep {
        if self.sent > 0 || self.done {
            return self.give_up();
        }
        self.send(Duration::ZERO, Duration::ZERO)
    }

    /// Takes in the answer to the last [`ReadStep::Send`]; `elapsed` is the time since the
    /// read began.
    pub fn on_answer(&mut self, answer: ReadAnswer, elapsed: Duration) -> ReadStep {
        if self.done {
            return ReadStep::Done(ReadAnswer::Unserved { applied_to: self.applied_to });
        }
        self.unknown = matches!(answer, ReadAnswer::UnknownJournal);
        if !self.unknown {
            self.unplaced.other();
            self.hosted = true;
        }
        match answer {
            ReadAnswer::Page { from, ref records, view }
                if records.is_empty() && from >= view.next_seq && elapsed < self.deadline.wait_until =>
            {
                self.early = Some(answer);
                self.served_by = self.asked;
                self.next(Duration::ZERO, elapsed)
            }
            ReadAnswer::Unserved { applied_to } => {
                self.applied_to = self.applied_to.max(applied_to);
                let delay = backoff(&self.config, self.sent, &mut self.rng);
                self.next(delay, elapsed)
            }
            ReadAnswer::UnknownJournal => {
                let unplaced = self.unplaced.answered(
                    self.rotation.servers.len(),
                    elapsed,
                    &self.config,
                    self.sent,
                    &mut self.rng,
                );
                match unplaced {
                    Some(delay) => self.next(delay, elapsed),
                    None => self.give_up(),
                }
            }
            // Over the tenant's quota: nothing was read, and the same server may serve it once
            // the quota refills, if that is before the read's end.
            ReadAnswer::Denied(ref denial) if denial.status == 429 => {
                let after = quota_wait(denial, &self.config, self.sent, &mut self.rng);
                let spent = self.sent - self.unplaced.requests;
                if spent < self.config.read_attempts_max && elapsed.saturating_add(after) < self.end() {
                    self.send(after, elapsed)
                } else if self.early.is_some() {
                    self.give_up()
                } else {
                    self.finish(answer)
                }
            }
            served => {
                self.served_by = self.asked;
                self.finish(served)
            }
        }
    }

    /// No answer came by the last [`ReadStep::Send`]'s `cut_off`: the read is over.
    pub fn on_cut_off(&mut self) -> ReadStep {
        // The last try got no answer: an earlier server's `UnknownJournal` is not the last word
        // (that server may just not host the journal).
        self.unknown = false;
        self.give_up()
    }

    /// When the read ends now: at `wait_until` once an early page is held, else at
    /// `give_up_at`.
    fn end(&self) -> Duration {
        if self.early.is_some() { self.deadline.wait_until } else { self.deadline.give_up_at }
    }

    /// The next try, `after` from `elapsed`, to the next server; or the end, when a bound says
    /// stop.
    fn next(&mut self, after: Duration, elapsed: Duration) -> ReadStep {
        let spent = self.sent - self.unplaced.requests;
        if spent >= self.config.read_attempts_max || elapsed.saturating_add(after) >= self.end() {
            return self.give_up();
        }
        self.rotation.rotate();
        self.send(after, elapsed)
    }

    fn send(&mut self, after: Duration, elapsed: Duration) -> ReadStep {
        let start = elapsed.saturating_add(after);
        let left = self.deadline.wait_until.saturating_sub(start);
        let wait_ms = u32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(u32::MAX);
        let route = Route { server: self.rotation.server, attempt: self.sent };
        self.asked = route.server;
        self.sent += 1;
        // A server asked to wait until the read's end answers just after it, by its own clock:
        // unless an early page is held (the answer then), its answer (how far it applied, an
        // empty page at the tail) is given the grace to come back.
        let end = self.end();
        let graced = self.early.is_none() && start.saturating_add(left) >= end;
        let cut_off = if graced { end.saturating_add(self.config.read_answer_grace) } else { end };
        ReadStep::Send { params: ReadParams { wait_ms, ..self.params }, route, after, cut_off }
    }

    /// The read ends without a page that serves it: the early page if one is held, else
    /// `UnknownJournal` if that was the last answer and no server answered otherwise, else
    /// `Unserved`, carrying the furthest
    /// applied position a server that did not serve it named.
    fn give_up(&mut self) -> ReadStep {
        let answer = match self.early.take() {
            Some(early) => early,
            // A service that routes by itself speaks for every server: its word stands.
            None if self.unknown && (!self.hosted || self.rotation.servers.is_empty()) => ReadAnswer::UnknownJournal,
            None => ReadAnswer::Unserved { applied_to: self.applied_to },
        };
        self.finish(answer)
    }

    fn finish(&mut self, answer: ReadAnswer) -> ReadStep {
        self.done = true;
        ReadStep::Done(answer)
    }
}
