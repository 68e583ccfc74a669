//! The fenced writer: claims a journal, writes batches at its tail, pipelines, and stops for
//! good once superseded.
//!
//! [`WriterCore`] is the sans-IO part: the fence (the leader uuid of this term), the position
//! (`next_seq`), the window of batches in flight, and the judgement of every answer. [`Writer`]
//! is the thin async wrapper that sends the calls the core hands out over a [`Client`] and feeds
//! the answers back.
//!
//! Rules the core keeps:
//! - One fresh uuid per term: `claim` is `SetLeader(new = fresh, old = the leader in force)`;
//!   the `Won` view's `next_seq` is where the first batch goes.
//! - Batch `k + 1` goes at `seq_k + len_k` before `k` is acknowledged, up to
//!   [`WriterConfig::batches_in_flight_max`] batches and [`WriterConfig::bytes_in_flight_max`]
//!   bytes at once.
//! - Every batch handed out is reported exactly once, in position order, by
//!   [`WriterCore::next_report`]: acknowledged, or an error. None is dropped silently.
//! - A refusal naming another leader (`Refused`, `Lost` or `TruncateRefused` whose view's
//!   leader is not ours) supersedes the writer **for good**: that batch, every later one in
//!   flight, and every later call report [`WriterError::Superseded`] with the view. A write
//!   under our uuid can never be accepted once another leader is in force (uuids are never
//!   reused), so the later batches' requests can be abandoned safely.
//! - A batch refused *by our own term* with the tail before its seq arrived ahead of an earlier
//!   batch (a retry reordered them): it is re-sent once every batch before it is acknowledged,
//!   at most [`WriterConfig::early_resends_max`] times.
//! - Any other failure of a batch (ambiguous, unavailable, too large, a refusal at a taken
//!   position) *halts* the writer: the tail it tracks is no longer known. Batches after it report
//!   their actual outcome if they got one, else [`WriterError::Halted`]; new writes are refused
//!   with `Halted` until the writer claims again (a new term learns the tail afresh).
//!
//! ```
//! # use paros_client::fake::FakeService;
//! # use paros_client::{Client, ClientConfig, Seq, Written};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let client = Client::new(FakeService::new("j", vec![]), ClientConfig::default())?;
//! use futures_util::StreamExt;
//!
//! let mut writer = client.writer("j".to_owned()).claim().await?;
//! // Ten batches of two records, several in flight at once; each position as it is acknowledged.
//! let batches = futures_util::stream::iter((0..10).map(|i| vec![format!("{i}a").into(), format!("{i}b").into()]));
//! let mut reports = writer.write_all(batches);
//! let mut positions = vec![];
//! while let Some(written) = reports.next().await {
//!     let Written { seq, count } = written?;
//!     positions.push((seq, count));
//! }
//! assert_eq!(positions.first(), Some(&(Seq(0), 2)));
//! assert_eq!(positions.last(), Some(&(Seq(18), 2)));
//! # Ok(())
//! # }
//! ```

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use bytes::Bytes;
use paros_core::journal::{JournalView, Outcome};
use paros_core::rng::Rng;
use paros_core::{Call, LeaderUuid, Seq};
use thiserror::Error;

use crate::client::Client;
use crate::policy::{AnswerError, Decided};
use crate::service::{Denial, JournalService, ReadAnswer, Route};
use crate::types::{seq_checked_add, view_is_consistent};

/// The writer's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterConfig {
    /// Batches sent and not yet reported, at most.
    pub batches_in_flight_max: u32,
    /// Record bytes sent and not yet reported, at most (a single batch over it still goes when
    /// nothing else is in flight, so no batch is refused by this bound alone).
    pub bytes_in_flight_max: u64,
    /// How often one batch that arrived ahead of its predecessor is re-sent.
    pub early_resends_max: u32,
    /// How many times `claim` asks for the journal's view when no server answers.
    pub inspect_attempts_max: u32,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            batches_in_flight_max: 8,
            bytes_in_flight_max: 8 << 20,
            early_resends_max: 8,
            inspect_attempts_max: 8,
        }
    }
}

/// A [`WriterConfig`] that is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum WriterConfigError {
    #[error("a writer must be allowed at least one batch in flight")]
    /// `batches_in_flight_max` is 0: no batch could be sent.
    BatchesZero,
    #[error("a writer must be allowed at least one byte in flight")]
    /// `bytes_in_flight_max` is 0.
    BytesZero,
    #[error("claim must be allowed at least one inspect attempt")]
    /// `inspect_attempts_max` is 0: a claim could never learn the journal's view.
    InspectZero,
}

impl WriterConfig {
    /// Checks every bound.
    ///
    /// # Errors
    /// The first [`WriterConfigError`] found.
    pub fn validate(&self) -> Result<(), WriterConfigError> {
        if self.batches_in_flight_max == 0 {
            return Err(WriterConfigError::BatchesZero);
        }
        if self.bytes_in_flight_max == 0 {
            return Err(WriterConfigError::BytesZero);
        }
        if self.inspect_attempts_max == 0 {
            return Err(WriterConfigError::InspectZero);
        }
        Ok(())
    }
}

/// An acknowledged batch: its records hold `[seq, seq + count)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// The batch's first position.
    pub seq: Seq,
    /// How many records it holds.
    pub count: u64,
}

/// Why a writer call or a batch did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WriterError {
    /// Another writer holds the journal; this writer stopped for good.
    #[error("superseded: another writer holds the journal now ({view})")]
    Superseded {
        /// The view that names the other writer.
        view: JournalView,
    },
    /// The writer has not claimed the journal (or its claim has not been learned).
    #[error("the writer has not claimed the journal")]
    NotClaimed,
    /// The claim's compare-and-set lost: another writer claimed first. Claim again.
    #[error("the claim lost: another writer claimed first ({view})")]
    Lost {
        /// The view the claim was judged against.
        view: JournalView,
    },
    /// A batch at `at` failed; the writer's tail is unknown until it claims again.
    #[error("halted: the batch at {} failed, claim again to learn the tail", .at.0)]
    Halted {
        /// The position of the batch that failed.
        at: Seq,
    },
    /// This batch's call ended without an acknowledgement.
    #[error("the batch at {} was not acknowledged: {decided}", .seq.0)]
    Failed {
        /// The batch's position.
        seq: Seq,
        /// How its call ended.
        decided: Decided,
    },
    /// A claim or truncation ended without a verdict it could use.
    #[error("the call was not decided: {decided}")]
    Undecided {
        /// How the call ended.
        decided: Decided,
    },
    /// The service refused the call or the read before it (a bad token, a missing scope, a
    /// quota): the same refusal a [`Reader`](crate::Reader) or a
    /// [`GatewayClient`](crate::GatewayClient) reports. A refused batch halts the writer.
    /// `ambiguous`: an earlier attempt got no answer, so the call may still have taken effect.
    #[error("denied: {denial}")]
    Denied {
        /// The service's refusal.
        denial: Denial,
        /// An earlier attempt got no answer: the call may still have taken effect.
        ambiguous: bool,
    },
    /// A server's answer contradicted the call.
    #[error(transparent)]
    Answer(#[from] AnswerError),
    /// The window is full: wait for a report first.
    #[error("the window of batches in flight is full")]
    WindowFull,
    /// A batch with no records (the fold refuses it; it is never sent).
    #[error("a batch needs at least one record")]
    EmptyBatch,
    /// Batches are in flight: the call needs an empty window.
    #[error("batches are in flight")]
    InFlight,
    /// The batch would run past the last position.
    #[error("a batch at {} of {count} records runs past the last position", .seq.0)]
    PositionOverflow {
        /// Where the batch would go.
        seq: Seq,
        /// How many records it holds.
        count: u64,
    },
    /// A claim under a uuid already used: the leader's in force, or this writer's last term's.
    /// A fresh term needs a uuid nobody holds.
    #[error("the uuid {uuid} is in use already: a claim needs a fresh one")]
    UuidInUse {
        /// The uuid refused.
        uuid: LeaderUuid,
    },
    /// The writer's configuration is refused ([`WriterBuilder::claim`]).
    #[error(transparent)]
    Config(#[from] WriterConfigError),
}

impl WriterError {
    /// The service's refusal, when that is why the call failed.
    #[must_use]
    pub fn denial(&self) -> Option<&Denial> {
        match self {
            WriterError::Denied { denial, .. } => Some(denial),
            _ => None,
        }
    }

    /// A claim, truncation or inspection that ended `decided` without a verdict it could use.
    fn undecided(decided: Decided) -> WriterError {
        match decided {
            Decided::Denied { denial, ambiguous } => WriterError::Denied { denial, ambiguous },
            decided => WriterError::Undecided { decided },
        }
    }
}

/// What became of one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
enum BatchState {
    InFlight,
    /// Refused by our own term ahead of an earlier batch; re-sent once the earlier ones land.
    Early {
        resends: u32,
    },
    /// Re-sent after arriving early; waiting for its answer.
    Resent {
        resends: u32,
    },
    Done(Result<Written, WriterError>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Batch {
    seq: Seq,
    count: u64,
    bytes: u64,
    state: BatchState,
}

/// What the wrapper must do after a batch's answer came back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completion {
    /// Batches whose requests are abandoned (the writer was superseded): stop sending them.
    pub abandon: Vec<Seq>,
    /// Batches to send again, identically, now.
    pub resend: Vec<Seq>,
}

/// The writer's sans-IO core. See the [module documentation](self).
#[derive(Debug)]
pub struct WriterCore {
    config: WriterConfig,
    uuid: Option<LeaderUuid>,
    next_seq: Seq,
    window: VecDeque<Batch>,
    bytes_in_flight: u64,
    superseded: Option<JournalView>,
    halted: Option<Seq>,
}

impl WriterCore {
    /// A writer that has claimed nothing yet.
    ///
    /// # Errors
    /// [`WriterConfigError`] when `config` is invalid.
    pub fn new(config: WriterConfig) -> Result<WriterCore, WriterConfigError> {
        config.validate()?;
        Ok(WriterCore {
            config,
            uuid: None,
            next_seq: Seq(0),
            window: VecDeque::new(),
            bytes_in_flight: 0,
            superseded: None,
            halted: None,
        })
    }

    /// The uuid of this writer's term, once claimed.
    pub fn uuid(&self) -> Option<LeaderUuid> {
        self.uuid
    }

    /// Where the next batch goes.
    pub fn next_seq(&self) -> Seq {
        self.next_seq
    }

    /// The view that superseded this writer, if one did.
    pub fn superseded(&self) -> Option<JournalView> {
        self.superseded
    }

    /// Batches handed out and not yet reported.
    pub fn in_flight(&self) -> usize {
        self.window.len()
    }

    /// Record bytes handed out and not yet reported.
    pub fn bytes_in_flight(&self) -> u64 {
        self.bytes_in_flight
    }

    /// Whether a batch of `bytes` would be taken now.
    pub fn has_room(&self, bytes: u64) -> bool {
        self.window.is_empty()
            || (self.window.len() < self.config.batches_in_flight_max as usize
                && self.bytes_in_flight.saturating_add(bytes) <= self.config.bytes_in_flight_max)
    }

    fn check_live(&self) -> Result<(), WriterError> {
        if let Some(view) = self.superseded {
            return Err(WriterError::Superseded { view });
        }
        Ok(())
    }

    /// The claim to send: `SetLeader(new, old = current.leader)`. `current` is the journal's
    /// view as just read; if this writer held a term and `current` names another leader, it was
    /// superseded.
    ///
    /// # Errors
    /// [`WriterError::Superseded`], [`WriterError::InFlight`] while batches are in flight, or
    /// [`WriterError::UuidInUse`] for a `new` that is the leader in force or this writer's last.
    pub fn claim_call(&mut self, new: LeaderUuid, current: JournalView) -> Result<Call, WriterError> {
        self.check_live()?;
        if !self.window.is_empty() {
            return Err(WriterError::InFlight);
        }
        // A claim under the uuid in force, or under this writer's last one, could be settled as
        // won without this claim having won anything: refuse to send it.
        if Some(new) == current.leader || Some(new) == self.uuid {
            return Err(WriterError::UuidInUse { uuid: new });
        }
        if let Some(ours) = self.uuid
            && current.leader != Some(ours)
        {
            self.superseded = Some(current);
            return Err(WriterError::Superseded { view: current });
        }
        Ok(Call::SetLeader { new, old: current.leader })
    }

    /// Takes in how the claim for `new` ended; on `Won`, the writer writes at the view's tail.
    ///
    /// # Errors
    /// [`WriterError::Lost`] (claim again), [`WriterError::Superseded`] when this writer held
    /// a term and lost it, [`WriterError::Undecided`], or an [`AnswerError`].
    pub fn on_claimed(
        &mut self,
        new: LeaderUuid,
        decided: Result<Decided, AnswerError>,
    ) -> Result<JournalView, WriterError> {
        self.check_live()?;
        match decided? {
            Decided::Verdict(Outcome::Won(view)) => {
                if view.leader != Some(new) || !view_is_consistent(&view) {
                    return Err(AnswerError::WrongVerdict { outcome: Outcome::Won(view) }.into());
                }
                self.uuid = Some(new);
                self.next_seq = view.next_seq;
                self.halted = None;
                Ok(view)
            }
            Decided::Verdict(Outcome::Lost(view)) => {
                if let Some(ours) = self.uuid
                    && view.leader != Some(ours)
                {
                    self.superseded = Some(view);
                    return Err(WriterError::Superseded { view });
                }
                Err(WriterError::Lost { view })
            }
            decided => Err(WriterError::undecided(decided)),
        }
    }

    /// Hands out the write of `records` at the tail and moves the tail past it.
    ///
    /// # Errors
    /// [`WriterError::Superseded`], [`WriterError::NotClaimed`], [`WriterError::Halted`],
    /// [`WriterError::EmptyBatch`], [`WriterError::WindowFull`],
    /// [`WriterError::PositionOverflow`].
    pub fn begin_write(&mut self, records: Vec<Bytes>) -> Result<Call, WriterError> {
        self.check_live()?;
        let leader = self.uuid.ok_or(WriterError::NotClaimed)?;
        if let Some(at) = self.halted {
            return Err(WriterError::Halted { at });
        }
        if records.is_empty() {
            return Err(WriterError::EmptyBatch);
        }
        let bytes: u64 = records.iter().map(|r| r.len() as u64).sum();
        if !self.has_room(bytes) {
            return Err(WriterError::WindowFull);
        }
        let seq = self.next_seq;
        let count = records.len() as u64;
        let next = seq_checked_add(seq, count).ok_or(WriterError::PositionOverflow { seq, count })?;
        self.next_seq = next;
        self.bytes_in_flight += bytes;
        self.window.push_back(Batch { seq, count, bytes, state: BatchState::InFlight });
        Ok(Call::Write { leader: Some(leader), seq, records })
    }

    /// Takes in how the write of the batch at `seq` ended.
    pub fn complete(&mut self, seq: Seq, decided: Result<Decided, AnswerError>) -> Completion {
        let mut completion = Completion::default();
        let Some(i) = self.batch_at(seq) else {
            return completion;
        };
        let batch = &self.window[i];
        if matches!(batch.state, BatchState::Done(_) | BatchState::Early { .. }) {
            return completion;
        }
        let count = batch.count;
        let resends = match batch.state {
            BatchState::Resent { resends } => resends,
            _ => 0,
        };
        let ours = self.uuid;
        let result = match decided {
            Err(e) => Err(WriterError::Answer(e)),
            Ok(Decided::Verdict(
                Outcome::Accepted { seq: at, count: n, .. } | Outcome::Duplicate { seq: at, count: n, .. },
            )) if at == seq && n == count => Ok(Written { seq, count }),
            Ok(Decided::Verdict(Outcome::Refused(view) | Outcome::Truncated(view))) if view.leader != ours => {
                self.supersede(i, view, &mut completion);
                self.check();
                return completion;
            }
            Ok(Decided::Verdict(Outcome::Refused(view))) if view.next_seq < seq => {
                if self.halted.is_some() || resends >= self.config.early_resends_max {
                    Err(self.halt(seq, Decided::Verdict(Outcome::Refused(view))))
                } else {
                    self.window[i].state = BatchState::Early { resends };
                    completion.resend = self.due_resends();
                    self.check();
                    return completion;
                }
            }
            Ok(decided) => Err(self.halt(seq, decided)),
        };
        self.window[i].state = BatchState::Done(result);
        completion.resend = self.due_resends();
        self.check();
        completion
    }

    /// Halts the writer at `seq` (the earliest failure wins) and says what the batch reports.
    fn halt(&mut self, seq: Seq, decided: Decided) -> WriterError {
        match self.halted {
            Some(at) if at < seq => WriterError::Halted { at },
            _ => {
                self.halted = Some(seq);
                match decided {
                    Decided::Denied { denial, ambiguous } => WriterError::Denied { denial, ambiguous },
                    decided => WriterError::Failed { seq, decided },
                }
            }
        }
    }

    fn supersede(&mut self, i: usize, view: JournalView, completion: &mut Completion) {
        self.superseded = Some(view);
        for batch in self.window.iter_mut().skip(i) {
            match batch.state {
                BatchState::Done(_) => {}
                BatchState::Early { .. } => batch.state = BatchState::Done(Err(WriterError::Superseded { view })),
                _ => {
                    completion.abandon.push(batch.seq);
                    batch.state = BatchState::Done(Err(WriterError::Superseded { view }));
                }
            }
        }
        // Earlier batches still in flight: their requests may yet have been accepted before the
        // new leader; their own answers tell.
    }

    /// Early batches whose every predecessor is acknowledged: send them again now.
    fn due_resends(&mut self) -> Vec<Seq> {
        let mut due = vec![];
        for batch in &mut self.window {
            match &batch.state {
                BatchState::Done(Ok(_)) => {}
                BatchState::Early { resends } => {
                    let resends = resends + 1;
                    batch.state = BatchState::Resent { resends };
                    due.push(batch.seq);
                    break;
                }
                _ => break,
            }
        }
        // A halted writer resends nothing: the early batches after the failure report Halted.
        if let Some(at) = self.halted {
            for batch in &mut self.window {
                if batch.seq > at && matches!(batch.state, BatchState::Early { .. }) {
                    batch.state = BatchState::Done(Err(WriterError::Halted { at }));
                }
            }
        }
        due
    }

    /// Whether the batch at `seq` waits to be re-sent (its request is over, its call is kept).
    pub fn is_early(&self, seq: Seq) -> bool {
        self.batch_at(seq).is_some_and(|i| matches!(self.window[i].state, BatchState::Early { .. }))
    }

    /// Where in the window the batch at `seq` is. The window holds one term's batches in the
    /// order they were handed out, at rising positions, so a search finds it.
    fn batch_at(&self, seq: Seq) -> Option<usize> {
        self.window.binary_search_by_key(&seq, |b| b.seq).ok()
    }

    /// The first batch's report, once it is known: reports come in position order.
    pub fn next_report(&mut self) -> Option<(Seq, Result<Written, WriterError>)> {
        if !matches!(self.window.front()?.state, BatchState::Done(_)) {
            return None;
        }
        let batch = self.window.pop_front()?;
        self.bytes_in_flight -= batch.bytes;
        let BatchState::Done(result) = batch.state else { return None };
        Some((batch.seq, result))
    }

    /// The truncation to send, under this writer's fence.
    ///
    /// # Errors
    /// [`WriterError::Superseded`] or [`WriterError::NotClaimed`].
    pub fn truncate_call(&self, up_to: Seq) -> Result<Call, WriterError> {
        self.check_live()?;
        let leader = self.uuid.ok_or(WriterError::NotClaimed)?;
        Ok(Call::Truncate { leader: Some(leader), up_to })
    }

    /// Takes in how a truncation ended.
    ///
    /// # Errors
    /// [`WriterError::Superseded`] on a refusal naming another leader,
    /// [`WriterError::Undecided`], or an [`AnswerError`].
    pub fn on_truncated(&mut self, decided: Result<Decided, AnswerError>) -> Result<JournalView, WriterError> {
        self.check_live()?;
        match decided? {
            Decided::Verdict(Outcome::Trimmed(view)) => Ok(view),
            Decided::Verdict(Outcome::TruncateRefused(view)) if view.leader != self.uuid => {
                self.superseded = Some(view);
                for batch in &mut self.window {
                    if !matches!(batch.state, BatchState::Done(_)) {
                        batch.state = BatchState::Done(Err(WriterError::Superseded { view }));
                    }
                }
                Err(WriterError::Superseded { view })
            }
            decided => Err(WriterError::undecided(decided)),
        }
    }

    fn check(&self) {
        let bytes: u64 = self.window.iter().map(|b| b.bytes).sum();
        assert_eq!(bytes, self.bytes_in_flight, "the bytes in flight are the window's bytes");
    }
}

type CallFuture = Pin<Box<dyn Future<Output = Result<Decided, AnswerError>> + Send>>;

/// One batch's request in flight: the call (kept to re-send it identically) and its future.
struct Flight {
    seq: Seq,
    call: Call,
    future: Option<CallFuture>,
}

/// A [`Writer`] to be: its journal, its client and its bounds ([`WriterConfig::default`] unless
/// [`config`](Self::config) says otherwise). From [`Writer::builder`] or [`Client::writer`].
#[must_use = "a builder does nothing until it is built or claims"]
pub struct WriterBuilder<S: JournalService + 'static> {
    client: Client<S>,
    journal: S::Journal,
    config: WriterConfig,
}

impl<S: JournalService + 'static> std::fmt::Debug for WriterBuilder<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterBuilder").field("journal", &self.journal).field("config", &self.config).finish()
    }
}

impl<S: JournalService + 'static> WriterBuilder<S>
where
    S::Journal: 'static,
{
    /// The writer's bounds, instead of the defaults.
    pub fn config(mut self, config: WriterConfig) -> Self {
        self.config = config;
        self
    }

    /// The writer, not yet claimed: [`Writer::claim`] before the first write.
    ///
    /// # Errors
    /// [`WriterConfigError`] when the configuration is invalid.
    pub fn build(self) -> Result<Writer<S>, WriterConfigError> {
        Writer::new(self.client, self.journal, self.config)
    }

    /// The writer, having claimed the journal: its batches go at the tail the claim learned.
    ///
    /// # Errors
    /// [`WriterError::Config`] for an invalid configuration, else as [`Writer::claim`].
    pub async fn claim(self) -> Result<Writer<S>, WriterError> {
        let mut writer = self.build()?;
        writer.claim().await?;
        Ok(writer)
    }
}

/// The async writer over a [`Client`]: [`claim`](Self::claim), then [`submit`](Self::submit)
/// batches (pipelined) and collect their reports with [`next_report`](Self::next_report), or
/// [`write`](Self::write) one batch at a time.
pub struct Writer<S: JournalService + 'static> {
    client: Client<S>,
    journal: S::Journal,
    core: WriterCore,
    uuids: Uuids,
    /// The batches whose calls are kept, at rising positions (the order they were submitted).
    flights: VecDeque<Flight>,
}

/// Where a [`Writer`]'s fences come from.
#[derive(Debug)]
enum Uuids {
    /// Each fence a fresh draw from the OS's random generator.
    Os,
    /// Each fence the next draw of a generator seeded by the caller (simulations and tests).
    Seeded(Rng),
}

impl Uuids {
    fn draw(&mut self) -> u128 {
        match self {
            Uuids::Os => crate::entropy::os_u128(),
            Uuids::Seeded(rng) => (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64()),
        }
    }
}

impl<S: JournalService + 'static> std::fmt::Debug for Writer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("journal", &self.journal).field("core", &self.core).finish_non_exhaustive()
    }
}

impl<S: JournalService + 'static> Writer<S>
where
    S::Journal: 'static,
{
    /// A writer of `journal` over `client`, with the default bounds unless the builder says
    /// otherwise: `Writer::builder(client, journal).claim().await?`.
    pub fn builder(client: Client<S>, journal: S::Journal) -> WriterBuilder<S> {
        WriterBuilder { client, journal, config: WriterConfig::default() }
    }

    /// A writer of `journal`; each term's fresh uuid is drawn from the OS's random generator,
    /// so no other writer draws it.
    ///
    /// # Errors
    /// [`WriterConfigError`] when `config` is invalid.
    ///
    /// # Panics
    /// At a claim, when the OS has no random generator.
    pub fn new(client: Client<S>, journal: S::Journal, config: WriterConfig) -> Result<Self, WriterConfigError> {
        Writer::with_uuids(client, journal, config, Uuids::Os)
    }

    /// For simulations and tests: a writer whose fresh uuids (one per term) are the draws of a
    /// generator seeded by `uuid_seed`, so a run can be replayed. Two writers given the same
    /// seed draw the same uuids; only the ordinary [`new`](Self::new) keeps writers apart.
    ///
    /// # Errors
    /// [`WriterConfigError`] when `config` is invalid.
    pub fn with_seed(
        client: Client<S>,
        journal: S::Journal,
        config: WriterConfig,
        uuid_seed: u64,
    ) -> Result<Self, WriterConfigError> {
        Writer::with_uuids(client, journal, config, Uuids::Seeded(Rng::new(uuid_seed)))
    }

    fn with_uuids(
        client: Client<S>,
        journal: S::Journal,
        config: WriterConfig,
        uuids: Uuids,
    ) -> Result<Self, WriterConfigError> {
        Ok(Writer { client, journal, core: WriterCore::new(config)?, uuids, flights: VecDeque::new() })
    }

    /// The sans-IO core (position, fence, window).
    pub fn core(&self) -> &WriterCore {
        &self.core
    }

    /// This term's uuid: a draw of this writer's own, never its previous term's uuid nor the
    /// leader in force in `current` (a claim under another writer's uuid, once settled by
    /// reading the view back, would count that writer's term as this one's).
    fn fresh_uuid(&mut self, current: &JournalView) -> LeaderUuid {
        loop {
            if let Some(uuid) = LeaderUuid::new(self.uuids.draw())
                && Some(uuid) != self.core.uuid
                && Some(uuid) != current.leader
            {
                return uuid;
            }
        }
    }

    /// Reads the journal's view (for the claim's compare-and-set). Holds no borrow of the
    /// writer across an await, so a writer moved into a spawned task need not be `Sync`.
    fn inspect(&self) -> impl Future<Output = Result<JournalView, WriterError>> + Send + 'static {
        let (client, journal) = (self.client.clone(), self.journal.clone());
        let attempts = client.config().attempts_max.min(self.core.config.inspect_attempts_max);
        async move { inspect_view(client, journal, attempts).await }
    }

    /// Claims the journal for a new term: `SetLeader(fresh uuid, the leader in force)`.
    /// Returns the `Won` view; batches go at its `next_seq`.
    ///
    /// # Errors
    /// As [`WriterCore::on_claimed`]; [`WriterError::InFlight`] while batches are in flight.
    pub async fn claim(&mut self) -> Result<JournalView, WriterError> {
        self.core.check_live()?;
        let current = self.inspect().await?;
        let new = self.fresh_uuid(&current);
        let call = self.core.claim_call(new, current)?;
        let decided = self.client.call(&self.journal, call).await;
        self.core.on_claimed(new, decided)
    }

    fn launch(&self, call: Call) -> CallFuture {
        let client = self.client.clone();
        let journal = self.journal.clone();
        Box::pin(async move { client.call(&journal, call).await })
    }

    /// Sends the batch `records` at the tail without waiting; returns its first position. Its
    /// report comes from [`next_report`](Self::next_report).
    ///
    /// # Errors
    /// As [`WriterCore::begin_write`].
    pub fn submit(&mut self, records: Vec<Bytes>) -> Result<Seq, WriterError> {
        let call = self.core.begin_write(records)?;
        let Call::Write { seq, .. } = call else { unreachable!("begin_write hands out a write") };
        let future = self.launch(call.clone());
        self.flights.push_back(Flight { seq, call, future: Some(future) });
        Ok(seq)
    }

    /// Whether a batch of `bytes` would be taken by [`submit`](Self::submit) now.
    pub fn has_room(&self, bytes: u64) -> bool {
        self.core.superseded.is_none() && self.core.has_room(bytes)
    }

    /// Batches submitted and not yet reported.
    pub fn in_flight(&self) -> usize {
        self.core.in_flight()
    }

    /// The next batch's report, in position order; `None` when nothing is in flight.
    /// Cancel-safe: dropping the future loses no answer (the requests stay in the writer).
    pub async fn next_report(&mut self) -> Option<(Seq, Result<Written, WriterError>)> {
        loop {
            if let Some(report) = self.core.next_report() {
                return Some(report);
            }
            if self.core.in_flight() == 0 {
                return None;
            }
            // Answers come mostly in position order: the oldest call is looked at first.
            let (at, seq, decided) = std::future::poll_fn(|cx| {
                for (at, flight) in self.flights.iter_mut().enumerate() {
                    if let Some(future) = flight.future.as_mut()
                        && let Poll::Ready(decided) = future.as_mut().poll(cx)
                    {
                        flight.future = None;
                        return Poll::Ready((at, flight.seq, decided));
                    }
                }
                Poll::Pending
            })
            .await;
            let completion = self.core.complete(seq, decided);
            for seq in completion.resend {
                if let Ok(i) = self.flights.binary_search_by_key(&seq, |f| f.seq) {
                    let future = self.launch(self.flights[i].call.clone());
                    self.flights[i].future = Some(future);
                }
            }
            // A call is dropped once its batch is over and not waiting to be re-sent. Usually
            // that is the one call just answered; a halt or a supersession ends others too.
            let core = &self.core;
            if completion.abandon.is_empty() && core.halted.is_none() && core.superseded.is_none() {
                if self.flights[at].future.is_none() && !core.is_early(seq) {
                    self.flights.remove(at);
                }
            } else {
                let abandon = completion.abandon;
                self.flights.retain(|f| !abandon.contains(&f.seq) && (f.future.is_some() || core.is_early(f.seq)));
            }
        }
    }

    /// Writes one batch and waits for its report.
    ///
    /// # Errors
    /// [`WriterError::InFlight`] when submitted batches are unreported (their reports would be
    /// taken); else the batch's error.
    pub async fn write(&mut self, records: Vec<Bytes>) -> Result<Written, WriterError> {
        if self.core.in_flight() > 0 {
            return Err(WriterError::InFlight);
        }
        self.submit(records)?;
        match self.next_report().await {
            Some((_, result)) => result,
            None => Err(WriterError::NotClaimed),
        }
    }

    /// Truncates everything below `up_to` under this writer's fence.
    ///
    /// # Errors
    /// As [`WriterCore::on_truncated`].
    pub async fn truncate(&mut self, up_to: Seq) -> Result<JournalView, WriterError> {
        let call = self.core.truncate_call(up_to)?;
        let decided = self.client.call(&self.journal, call).await;
        let result = self.core.on_truncated(decided);
        if self.core.superseded.is_some() {
            // Every batch in flight was reported superseded: abandon their requests.
            self.flights.clear();
        }
        result
    }
}

/// See [`Writer::inspect`].
async fn inspect_view<S: JournalService + 'static>(
    client: Client<S>,
    journal: S::Journal,
    attempts: u32,
) -> Result<JournalView, WriterError> {
    let servers = client.service().servers();
    let mut rng = Rng::new(client.draw());
    // First at this journal's likely leader, else at a drawn server: a read that wakes a
    // dormant journal elects on the server it reaches, so always starting at the first server
    // would make that one machine the leader of every journal claimed after a quiet spell.
    let start = crate::policy::first_server(&servers, client.leader_hint(&journal).map(|(leader, _)| leader), &mut rng);
    // Named servers in a row that said they do not host it: a node outside the journal's
    // voters does not, so only all of them saying so in a row makes it unknown.
    let mut unknown = 0;
    for attempt in 0..attempts {
        let server = (!servers.is_empty()).then(|| servers[(start + attempt as usize) % servers.len()]);
        match client.service().inspect(&journal, Route { server, attempt }).await {
            ReadAnswer::Page { view, .. } | ReadAnswer::Truncated { view } => {
                if !view_is_consistent(&view) {
                    return Err(AnswerError::InconsistentView { view }.into());
                }
                return Ok(view);
            }
            ReadAnswer::UnknownJournal => {
                unknown += 1;
                if unknown >= servers.len() {
                    return Err(WriterError::undecided(Decided::UnknownJournal));
                }
            }
            ReadAnswer::Denied(denial) => return Err(WriterError::Denied { denial, ambiguous: false }),
            ReadAnswer::Unserved { .. } => {
                unknown = 0;
                tokio::time::sleep(crate::policy::backoff(client.config(), attempt + 1, &mut rng)).await;
            }
        }
    }
    Err(WriterError::undecided(Decided::Unavailable))
}
