//! The coordinator: the registry journal's writer logic, sans-IO.
//!
//! The coordinator holds the folded [`Directory`] (through a [`Folder`]) and a
//! [`Checkpointer`]. An outer async loop — holding the registry journal's `Writer`, the clock
//! and the bus — drives it with these steps:
//!
//! 1. [`submit`](Coordinator::submit) a caller's [`Request`]: answered at once from the fold
//!    when its id already has a verdict, joined to a request already waiting under the same
//!    id, refused [`Answer::Busy`] past [`CoordinatorConfig::pending_max`], refused
//!    [`Answer::Unplaceable`] when a journal cannot be placed, else queued as a record;
//! 2. [`next_append`](Coordinator::next_append): the next batch of records to write at the
//!    tail, in order (commands, or a checkpoint run's records);
//! 3. [`acknowledged`](Coordinator::acknowledged)`(seq, count)` once the journal accepted
//!    records (`Accepted` or `Duplicate`): they are folded, and every caller whose record it
//!    was is answered with the fold's verdict;
//! 4. [`fold_page`](Coordinator::fold_page) / [`gap`](Coordinator::gap) for records read from
//!    the journal (catching up at start, or records written by an earlier coordinator);
//! 5. [`due_checkpoint`](Coordinator::due_checkpoint)`(now)`: plans a checkpoint run when one
//!    is due — once the application bytes since the last checkpoint reach `factor ×` the
//!    state's size, after `interval_records` records, or once `checkpoint_interval` units of
//!    the caller's clock passed with something written; new commands wait until the records
//!    in flight are acknowledged, so the run begins exactly at the tail of the folded state;
//! 6. [`next_truncate`](Coordinator::next_truncate) once the run's `End` is acknowledged:
//!    `Truncate(up_to = Begin)`; then [`truncate_settled`](Coordinator::truncate_settled) when
//!    the journal answered it (trimmed or refused);
//! 7. [`superseded`](Coordinator::superseded) when a successor fenced this writer: every
//!    waiting caller is answered [`Answer::NotCoordinator`] and the coordinator stops.
//!
//! The coordinator assumes it is the journal's only writer while it is not superseded, so the
//! records it hands out land at consecutive positions from the folded tail; an
//! acknowledgement that says otherwise is a typed error, not a guess.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use paros_client::{Checkpointer, CheckpointerConfig, ConfigError, FoldError, FoldEvent, Folder, Seq, Truncate};
use paros_core::ids::{JournalId, NodeId, TenantId};
use paros_core::journal::WriterMode;
use thiserror::Error;

use crate::command::{Command, Record, RequestId};
use crate::directory::Directory;
use crate::names::{JournalName, TierName};
use crate::placement::{self, PlacementError};
use crate::verdict::Verdict;

/// A caller's request: its idempotency id and what it asks for.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Request {
    pub id: RequestId,
    pub op: Op,
}

/// What a request asks for.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Op {
    /// Create a journal, placed by the coordinator ([`placement`]). The journal id is drawn at
    /// random by the caller's side (the async shell owns the randomness). `tier`: the tier to
    /// put it on (appended as `CreateJournalOnTier`, refused by the fold if the tier does not
    /// exist), or `None` for the `default` tier when it exists (appended as `CreateJournal`).
    CreateJournal { tenant: TenantId, journal: JournalId, name: JournalName, mode: WriterMode, tier: Option<TierName> },
    /// Any command, appended as given (a `CreateJournal` here keeps its explicit voters,
    /// which the fold still checks). Tiers are created and replicas registered this way
    /// (`CreateTier`, `RegisterReplica`).
    Command(Command),
}

/// How a request ended, as the coordinator can tell.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Answer {
    /// The fold's verdict for the request's id.
    Verdict(Verdict),
    /// This coordinator was superseded (or never was one): ask the current coordinator.
    NotCoordinator,
    /// Too many requests wait already; nothing was appended. Safe to retry.
    Busy,
    /// The journal could not be placed; nothing was appended. Safe to retry.
    Unplaceable(PlacementError),
    /// The request's record was folded but its verdict is no longer in the window (a window
    /// smaller than the records folded at once): it may or may not have taken effect.
    Forgotten,
}

/// What [`Coordinator::submit`] did with a request.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Submitted {
    /// Answered now.
    Answered(Answer),
    /// Waiting for its record to be folded; a [`Reply`] with its id will come.
    Waiting,
}

/// The answer to a waiting request. Every caller that submitted `id` gets `answer`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Reply {
    pub id: RequestId,
    pub answer: Answer,
}

/// The coordinator's bounds and policy.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CoordinatorConfig {
    /// The most distinct request ids waiting at once; one more is answered `Busy`.
    pub pending_max: usize,
    /// How many voters placement picks for a new journal.
    pub voters: usize,
    /// The most records in one batch from `next_append` (at least one is always handed out).
    pub batch_records_max: usize,
    /// The most bytes in one batch from `next_append` (a single larger record still goes).
    pub batch_bytes_max: usize,
    /// The checkpoint policy (`factor`, `interval_records`) and chunk size.
    pub checkpoint: CheckpointerConfig,
    /// A checkpoint is also due once this many units of the caller's clock (`now` in
    /// [`Coordinator::due_checkpoint`]) passed since the last one, if anything was written.
    pub checkpoint_interval: Option<u64>,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            pending_max: 1024,
            voters: 3,
            batch_records_max: 64,
            batch_bytes_max: 1 << 20,
            checkpoint: CheckpointerConfig::default(),
            checkpoint_interval: None,
        }
    }
}

/// Misuse the coordinator refuses, leaving itself unchanged.
#[derive(Clone, PartialEq, Eq, Debug, Error)]
pub enum CoordinatorError {
    /// A bound of the configuration is zero.
    #[error("coordinator configuration: {0} must be at least 1")]
    Config(&'static str),
    /// The checkpoint policy is refused.
    #[error("checkpoint configuration: {0}")]
    Checkpoint(#[from] ConfigError),
    /// The folder handed over is not whole: it has not restored from a run after a gap.
    #[error("the directory is not whole: fold the journal from a checkpoint first")]
    NotWhole,
    /// An acknowledgement of records that were not handed out at those positions.
    #[error(
        "an acknowledgement of [{from:?}, +{count}) does not match the records in flight \
         from {in_flight_from:?} ({in_flight} records)"
    )]
    UnexpectedAck { from: Seq, count: u64, in_flight_from: Seq, in_flight: usize },
    /// The folder refused a page or a gap.
    #[error("folding: {0}")]
    Fold(#[from] FoldError),
}

/// A command waiting for `next_append`.
#[derive(Debug)]
struct Queued {
    id: RequestId,
    record: Bytes,
    /// The voters of a `CreateJournal`, counted in placement's load until folded.
    voters: Vec<NodeId>,
}

/// A record handed out and not yet acknowledged.
#[derive(Debug)]
enum InFlight {
    Command(Queued),
    Run(Bytes),
}

/// Counters for metrics and tests.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Stats {
    /// Checkpoint runs planned.
    pub runs_planned: u64,
    /// Runs the folder verified against its own state.
    pub runs_verified: u64,
    /// Runs whose bytes differ from the folder's own state (a determinism bug somewhere).
    pub runs_diverged: u64,
    /// Truncations handed out.
    pub truncations: u64,
}

/// Below this encoded size the directory's size is measured exactly after every command.
const STATE_LEN_EXACT_MAX: usize = 64 << 10;

/// The registry's writer logic. See the module doc for the steps.
#[derive(Debug)]
pub struct Coordinator {
    config: CoordinatorConfig,
    folder: Folder<Directory>,
    checkpointer: Checkpointer,
    pending: BTreeSet<RequestId>,
    queue: VecDeque<Queued>,
    /// Run records planned and not yet handed out.
    run_queue: VecDeque<Bytes>,
    in_flight: VecDeque<InFlight>,
    /// The position of the oldest record in flight (when none is: the folded tail).
    in_flight_from: Seq,
    /// Placement load of the `CreateJournal`s queued or in flight.
    pending_load: BTreeMap<NodeId, usize>,
    /// A checkpoint is due: commands wait until the records in flight are acknowledged.
    checkpoint_wanted: bool,
    truncate: Option<Truncate>,
    last_checkpoint_at: Option<u64>,
    state_len: Option<usize>,
    /// Record bytes applied since `state_len` was measured.
    applied_since_len: u64,
    superseded: bool,
    stats: Stats,
}

impl Coordinator {
    /// A coordinator over `folder`, which has folded the registry journal up to its tail as
    /// this writer claimed it (the records from the floor, restoring from the run there).
    ///
    /// The checkpoint policy counts from the last run the folder restored or verified in the
    /// pages folded through this coordinator; hand it a folder that has just restored (or an
    /// empty one and fold the journal through [`fold_page`](Self::fold_page)) so the count
    /// starts at the checkpoint, not at the restart.
    ///
    /// # Errors
    /// [`CoordinatorError::Config`] or [`CoordinatorError::Checkpoint`] for a bound of zero;
    /// [`CoordinatorError::NotWhole`] for a folder waiting for a run.
    pub fn new(folder: Folder<Directory>, config: CoordinatorConfig) -> Result<Self, CoordinatorError> {
        if config.pending_max == 0 {
            return Err(CoordinatorError::Config("pending_max"));
        }
        if config.voters == 0 {
            return Err(CoordinatorError::Config("voters"));
        }
        if config.batch_records_max == 0 {
            return Err(CoordinatorError::Config("batch_records_max"));
        }
        if config.batch_bytes_max == 0 {
            return Err(CoordinatorError::Config("batch_bytes_max"));
        }
        if config.checkpoint_interval == Some(0) {
            return Err(CoordinatorError::Config("checkpoint_interval"));
        }
        if !folder.is_whole() {
            return Err(CoordinatorError::NotWhole);
        }
        let checkpointer = Checkpointer::new(config.checkpoint)?;
        let in_flight_from = folder.next();
        Ok(Coordinator {
            config,
            folder,
            checkpointer,
            pending: BTreeSet::new(),
            queue: VecDeque::new(),
            run_queue: VecDeque::new(),
            in_flight: VecDeque::new(),
            in_flight_from,
            pending_load: BTreeMap::new(),
            checkpoint_wanted: false,
            truncate: None,
            last_checkpoint_at: None,
            state_len: None,
            applied_since_len: 0,
            superseded: false,
            stats: Stats::default(),
        })
    }

    /// The folded directory.
    pub fn directory(&self) -> &Directory {
        self.folder.state()
    }

    /// The folder (its next position, whether it is whole).
    pub fn folder(&self) -> &Folder<Directory> {
        &self.folder
    }

    /// The position the next record handed out will take.
    pub fn tail(&self) -> Seq {
        if self.in_flight.is_empty() {
            return self.folder.next();
        }
        Seq(self.in_flight_from.0 + self.in_flight.len() as u64)
    }

    /// With nothing in flight, the next record goes at the folded tail.
    fn sync_tail(&mut self) {
        if self.in_flight.is_empty() {
            self.in_flight_from = self.folder.next();
        }
    }

    /// How many distinct request ids wait for an answer.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Records handed out and not yet acknowledged.
    pub fn in_flight_len(&self) -> usize {
        self.in_flight.len()
    }

    /// Whether a checkpoint run is being appended or awaits its truncation.
    pub fn checkpoint_in_flight(&self) -> Option<Seq> {
        self.checkpointer.in_flight()
    }

    /// Whether a successor fenced this coordinator.
    pub fn is_superseded(&self) -> bool {
        self.superseded
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The directory's encoded size.
    ///
    /// Measuring encodes the whole directory, so past 64 KiB it is not redone after every
    /// command: the figure is re-measured once the records applied since reach an eighth of
    /// it, which keeps its cost a constant share of the appends (it was quadratic in the
    /// journals created in a burst) and the figure within about an eighth of the truth.
    pub fn state_len(&mut self) -> usize {
        if let Some(len) = self.state_len
            && (self.applied_since_len == 0 || (len >= STATE_LEN_EXACT_MAX && self.applied_since_len < len as u64 / 8))
        {
            return len;
        }
        let len = self.folder.state().state_len();
        self.state_len = Some(len);
        self.applied_since_len = 0;
        len
    }

    /// Takes a caller's request. See the module doc for the outcomes.
    pub fn submit(&mut self, request: Request) -> Submitted {
        let Request { id, op } = request;
        if self.superseded {
            return Submitted::Answered(Answer::NotCoordinator);
        }
        if let Some(verdict) = self.directory().answer(id) {
            return Submitted::Answered(Answer::Verdict(verdict));
        }
        if self.pending.contains(&id) {
            return Submitted::Waiting;
        }
        if self.pending.len() >= self.config.pending_max {
            return Submitted::Answered(Answer::Busy);
        }
        let command = match op {
            Op::Command(command) => command,
            Op::CreateJournal { tenant, journal, name, mode, tier } => {
                let candidates = placement::candidates(self.directory(), &self.pending_load);
                let mut voters = match placement::place(&candidates, self.config.voters) {
                    Ok(voters) => voters,
                    Err(e) => return Submitted::Answered(Answer::Unplaceable(e)),
                };
                // The first voter is the journal's first leader (it campaigns at placement):
                // rotate by the (random) journal id so leadership spreads over the voters
                // instead of piling on the lowest id.
                let n = voters.len().max(1);
                voters.rotate_left((journal.0 % n as u64) as usize);
                match tier {
                    Some(tier) => Command::CreateJournalOnTier { tenant, journal, name, mode, voters, tier },
                    None => Command::CreateJournal { tenant, journal, name, mode, voters },
                }
            }
        };
        let voters = match &command {
            Command::CreateJournal { voters, .. } | Command::CreateJournalOnTier { voters, .. } => voters.clone(),
            _ => Vec::new(),
        };
        for v in &voters {
            *self.pending_load.entry(*v).or_insert(0) += 1;
        }
        let record = Record { id, command }.encode();
        debug_assert!(
            paros_client::check_application_record(&record).is_ok(),
            "a registry record never carries the checkpoint magic"
        );
        self.pending.insert(id);
        self.queue.push_back(Queued { id, record, voters });
        Submitted::Waiting
    }

    /// The next batch of records to append at [`tail`](Self::tail), in order, or `None`.
    ///
    /// A checkpoint run's records come first and alone; commands wait while a run is being
    /// appended, while a planned checkpoint waits for the records in flight, and once
    /// superseded.
    pub fn next_append(&mut self) -> Option<Vec<Bytes>> {
        if self.superseded || !self.folder.is_whole() {
            return None;
        }
        self.sync_tail();
        if !self.run_queue.is_empty() {
            let mut batch = Vec::new();
            let mut bytes = 0usize;
            while let Some(r) = self.run_queue.front() {
                if !batch.is_empty()
                    && (batch.len() >= self.config.batch_records_max || bytes + r.len() > self.config.batch_bytes_max)
                {
                    break;
                }
                bytes += r.len();
                let r = self.run_queue.pop_front()?;
                batch.push(r.clone());
                self.in_flight.push_back(InFlight::Run(r));
            }
            return Some(batch);
        }
        if self.checkpoint_wanted || self.run_being_appended() {
            return None;
        }
        let mut batch = Vec::new();
        let mut bytes = 0usize;
        while let Some(q) = self.queue.front() {
            if !batch.is_empty()
                && (batch.len() >= self.config.batch_records_max
                    || bytes + q.record.len() > self.config.batch_bytes_max)
            {
                break;
            }
            bytes += q.record.len();
            let q = self.queue.pop_front()?;
            batch.push(q.record.clone());
            self.in_flight.push_back(InFlight::Command(q));
        }
        (!batch.is_empty()).then_some(batch)
    }

    /// Whether a run's records are still to be handed out or acknowledged: until its `End`
    /// is acknowledged nothing else may be written; after it, commands flow again while the
    /// truncation is settled.
    fn run_being_appended(&self) -> bool {
        !self.run_queue.is_empty() || self.in_flight.iter().any(|r| matches!(r, InFlight::Run(_)))
    }

    /// Takes note that the journal accepted `count` records at `[seq, seq + count)` — the
    /// oldest records in flight, in the order they were handed out. A re-sent batch's
    /// acknowledgement may repeat positions already acknowledged; they are skipped.
    ///
    /// # Errors
    /// [`CoordinatorError::UnexpectedAck`] when the range leaves a hole after what was
    /// acknowledged or runs past the records in flight; nothing is folded then.
    pub fn acknowledged(&mut self, seq: Seq, count: u64) -> Result<Vec<Reply>, CoordinatorError> {
        let unexpected = CoordinatorError::UnexpectedAck {
            from: seq,
            count,
            in_flight_from: self.in_flight_from,
            in_flight: self.in_flight.len(),
        };
        let end = seq.0.checked_add(count).ok_or(unexpected.clone())?;
        if seq > self.in_flight_from {
            return Err(unexpected);
        }
        if end <= self.in_flight_from.0 {
            return Ok(Vec::new());
        }
        let fresh = end - self.in_flight_from.0;
        if fresh > self.in_flight.len() as u64 {
            return Err(unexpected);
        }
        let mut replies = Vec::new();
        for _ in 0..fresh {
            let at = self.in_flight_from;
            let Some(entry) = self.in_flight.pop_front() else {
                break;
            };
            self.in_flight_from = Seq(at.0 + 1);
            match entry {
                InFlight::Command(q) => {
                    self.fold_record(at, &q.record, &mut replies)?;
                    self.unload(&q.voters);
                }
                InFlight::Run(r) => {
                    self.fold_record(at, &r, &mut replies)?;
                    if let Ok(Some(t)) = self.checkpointer.acknowledged(at, 1) {
                        self.truncate = Some(t);
                        self.stats.truncations += 1;
                    }
                }
            }
        }
        Ok(replies)
    }

    /// Folds records read from the journal, the first at `from` (positions already folded
    /// are ignored), answering any caller whose request one of them decided.
    ///
    /// # Errors
    /// [`CoordinatorError::Fold`] when `from` is past the folded tail (report the gap first).
    pub fn fold_page(&mut self, from: Seq, records: &[Bytes]) -> Result<Vec<Reply>, CoordinatorError> {
        if from > self.folder.next() {
            return Err(FoldError::NotContiguous { expected: self.folder.next(), from }.into());
        }
        let mut replies = Vec::new();
        for (offset, record) in (0u64..).zip(records) {
            self.fold_record(Seq(from.0 + offset), record, &mut replies)?;
        }
        self.sync_tail();
        Ok(replies)
    }

    /// Takes note that positions `[from, resumed_at)` are gone from the journal.
    ///
    /// # Errors
    /// [`CoordinatorError::Fold`] as [`Folder::gap`].
    pub fn gap(&mut self, from: Seq, resumed_at: Seq) -> Result<(), CoordinatorError> {
        self.folder.gap(from, resumed_at)?;
        self.state_len = None;
        self.sync_tail();
        Ok(())
    }

    /// Folds one record and answers the request it decided, if one waits here.
    fn fold_record(&mut self, at: Seq, record: &Bytes, replies: &mut Vec<Reply>) -> Result<(), CoordinatorError> {
        let events = self.folder.fold(at, record)?;
        for event in events {
            match event {
                FoldEvent::Applied { .. } => {
                    self.applied_since_len += record.len() as u64;
                    // Refused only while our own run is being appended, when no command of
                    // ours is written: such a record is a foreign writer's, and we are about
                    // to learn we were superseded.
                    let _ = self.checkpointer.appended(1, record.len() as u64);
                    if let Some(id) = Record::peek_id(record)
                        && self.pending.remove(&id)
                    {
                        let answer = match self.directory().answer(id) {
                            Some(v) => Answer::Verdict(v),
                            None => Answer::Forgotten,
                        };
                        self.forget_queued(id);
                        replies.push(Reply { id, answer });
                    }
                }
                FoldEvent::Restored { .. } => {
                    self.state_len = None;
                    self.restart_policy();
                }
                FoldEvent::Verified { .. } => {
                    self.stats.runs_verified += 1;
                    self.restart_policy();
                }
                FoldEvent::Diverged { .. } => self.stats.runs_diverged += 1,
                _ => {}
            }
        }
        Ok(())
    }

    /// A run restored or verified outside our own checkpoint: the policy counts from it.
    fn restart_policy(&mut self) {
        if self.checkpointer.in_flight().is_none()
            && let Ok(fresh) = Checkpointer::new(self.config.checkpoint)
        {
            self.checkpointer = fresh;
        }
    }

    /// Drops a queued (not yet handed out) command whose id the fold has decided already.
    fn forget_queued(&mut self, id: RequestId) {
        if let Some(i) = self.queue.iter().position(|q| q.id == id)
            && let Some(q) = self.queue.remove(i)
        {
            self.unload(&q.voters);
        }
    }

    fn unload(&mut self, voters: &[NodeId]) {
        for v in voters {
            if let Some(n) = self.pending_load.get_mut(v) {
                *n -= 1;
                if *n == 0 {
                    self.pending_load.remove(v);
                }
            }
        }
    }

    /// Plans a checkpoint run when one is due at `now` (the caller's clock, any unit that
    /// matches [`CoordinatorConfig::checkpoint_interval`]); returns whether a run was planned.
    ///
    /// Once due, new commands wait (so the run starts at the folded tail); the run is planned
    /// by the first call after the records in flight are acknowledged.
    pub fn due_checkpoint(&mut self, now: u64) -> bool {
        if self.superseded || !self.folder.is_whole() || self.checkpointer.in_flight().is_some() {
            return false;
        }
        let since = *self.last_checkpoint_at.get_or_insert(now);
        if !self.checkpoint_wanted {
            let state_len = self.state_len();
            let (records, _) = self.checkpointer.since_checkpoint();
            let by_time =
                self.config.checkpoint_interval.is_some_and(|i| now.saturating_sub(since) >= i && records > 0);
            self.checkpoint_wanted = self.checkpointer.due(state_len) || by_time;
        }
        if !self.checkpoint_wanted || !self.in_flight.is_empty() {
            return false;
        }
        let tail = self.folder.next();
        let Ok(run) = self.checkpointer.begin(self.folder.state(), tail) else {
            return false;
        };
        self.in_flight_from = tail;
        self.run_queue.extend(run.records);
        self.checkpoint_wanted = false;
        self.last_checkpoint_at = Some(now);
        self.stats.runs_planned += 1;
        true
    }

    /// The truncation to ask for, once: after a run's `End` was acknowledged.
    pub fn next_truncate(&mut self) -> Option<Truncate> {
        self.truncate.take()
    }

    /// The truncation was answered (trimmed, or refused); the next checkpoint may begin.
    pub fn truncate_settled(&mut self) {
        self.truncate = None;
        self.checkpointer.truncate_settled();
    }

    /// A successor fenced this writer: every waiting caller is answered `NotCoordinator`, the
    /// queued and in-flight records are dropped, and every later request is answered so too.
    pub fn superseded(&mut self) -> Vec<Reply> {
        self.superseded = true;
        self.checkpointer.abandon();
        self.queue.clear();
        self.run_queue.clear();
        self.in_flight.clear();
        self.pending_load.clear();
        self.truncate = None;
        self.checkpoint_wanted = false;
        std::mem::take(&mut self.pending).into_iter().map(|id| Reply { id, answer: Answer::NotCoordinator }).collect()
    }
}
