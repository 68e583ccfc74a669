//! One term of the registry coordinator, sans-IO: claim, catch up, serve, checkpoint, end.
//!
//! [`CoordinatorTerm`] is what both the async daemon (`daemon.rs`, over paros-client's
//! `Writer` and `Reader`) and the simulation (over its simulated network) run. It decides; they
//! carry out its [`TermEffect`]s and report back:
//!
//! - [`TermEffect::Claim`]: read the journal's view, then `SetLeader(fresh uuid, current)`;
//!   reported with [`CoordinatorTerm::claimed`];
//! - [`TermEffect::Read`]: read the page at `from` (linearizable, no wait); reported with
//!   [`CoordinatorTerm::page`];
//! - [`TermEffect::Write`]: append the batch at the tail under the term's fence; reported, in
//!   position order, with [`CoordinatorTerm::written`];
//! - [`TermEffect::Truncate`]: `Truncate(up_to)` under the term's fence; reported with
//!   [`CoordinatorTerm::truncated`];
//! - [`TermEffect::Answer`]: answer every caller of the reply's request id.
//!
//! The term's life: claim (fencing whoever wrote before); fold the journal from its floor up
//! to the claimed tail (restoring from the checkpoint at the floor); then serve: callers'
//! requests go to [`submit`](CoordinatorTerm::submit), every [`poll`](CoordinatorTerm::poll)
//! plans a checkpoint when one is due and hands out the batches the writer has room for and the
//! truncation a finished checkpoint run asks. No batch is handed out while a truncation is
//! outstanding. The term ends ([`TermEnd`]) when a successor fenced it, or when anything fails:
//! a claim that did not win, a read or write that failed, a truncation refused other than by a
//! successor. Whether and when another term starts is [`Restarts`]'.
//!
//! Retrying one read or one call (which server, how long between attempts) is the transport's:
//! paros-client's `Reader` and `CallPolicy` in both shells.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use paros_client::{
    FoldEvent, Folder, FolderConfig, JournalView, ReaderError, ReaderOutcome, Seq, WriterError, Written,
};
use thiserror::Error;

use crate::coordinator::{Answer, Coordinator, CoordinatorConfig, CoordinatorError, Reply, Request, Stats, Submitted};
use crate::directory::Directory;

/// What the term asks its shell to do.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum TermEffect {
    /// Claim the registry journal for this term: read its view, then `SetLeader(fresh, current)`.
    Claim,
    /// Read the page at `from` (catching up to the claimed tail).
    Read { from: Seq },
    /// Append these records at the writer's tail, after every batch handed out before.
    Write(Vec<Bytes>),
    /// Truncate the journal below `up_to` under the term's fence.
    Truncate { up_to: Seq },
    /// Answer every caller waiting on `reply.id`.
    Answer(Reply),
}

/// Why a term failed.
#[derive(Clone, PartialEq, Eq, Debug, Error)]
pub enum TermFailure {
    #[error("claiming the registry: {0}")]
    Claim(#[source] WriterError),
    #[error("reading the registry: {0}")]
    Read(#[source] ReaderError),
    #[error("the registry journal is unknown to the cell")]
    UnknownJournal,
    #[error("writing the registry: {0}")]
    Write(#[source] WriterError),
    #[error("truncating the registry: {0}")]
    Truncate(#[source] WriterError),
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),
    /// The shell could not carry out an effect (its transport gave up).
    #[error("the shell gave up: {0}")]
    Shell(&'static str),
}

/// How a term ended.
#[derive(Clone, PartialEq, Eq, Debug, Error)]
pub enum TermEnd {
    /// A successor claimed the journal: every waiting caller was answered `NotCoordinator`.
    #[error("superseded by {:?}", .view.leader)]
    Superseded { view: JournalView },
    /// The term failed; callers still waiting were not answered (they may ask again: the same
    /// request id is answered from the fold).
    #[error(transparent)]
    Failed(#[from] TermFailure),
}

#[derive(Debug)]
enum Phase {
    /// `asked` once the `Claim` effect went out.
    Claiming {
        asked: bool,
    },
    /// Folding from the floor up to the claimed tail; `reading` while a `Read` is out.
    CatchingUp {
        tail: Seq,
        folder: Box<Folder<Directory>>,
        reading: bool,
    },
    Serving(Box<Serving>),
    Ended(TermEnd),
}

#[derive(Debug)]
struct Serving {
    coordinator: Coordinator,
    /// A batch the writer had no room for: handed out first when it has.
    held: Option<Vec<Bytes>>,
    writes_in_flight: usize,
    truncating: bool,
}

/// One coordinator term. See the module doc.
#[derive(Debug)]
pub struct CoordinatorTerm {
    config: CoordinatorConfig,
    phase: Phase,
    /// Answers decided by inputs, handed out by the next `poll`.
    answers: VecDeque<Reply>,
    /// The coordinator's counters when the term ended.
    last_stats: Stats,
}

impl CoordinatorTerm {
    /// A term about to claim. `config` is checked when the term starts serving (a bad one
    /// ends the term with [`TermFailure::Coordinator`]); check it up front with
    /// [`CoordinatorTerm::check`].
    #[must_use]
    pub fn new(config: CoordinatorConfig) -> Self {
        CoordinatorTerm {
            config,
            phase: Phase::Claiming { asked: false },
            answers: VecDeque::new(),
            last_stats: Stats::default(),
        }
    }

    /// Refuses a configuration no term could serve with.
    ///
    /// # Errors
    /// As [`Coordinator::new`].
    pub fn check(config: CoordinatorConfig) -> Result<(), CoordinatorError> {
        Coordinator::new(Folder::new(Directory::new(), Seq(0), FolderConfig::default()), config).map(drop)
    }

    /// How the term ended, once it has.
    #[must_use]
    pub fn ended(&self) -> Option<&TermEnd> {
        match &self.phase {
            Phase::Ended(end) => Some(end),
            _ => None,
        }
    }

    /// Whether the term is before its first write (claiming or catching up).
    #[must_use]
    pub fn is_starting(&self) -> bool {
        matches!(self.phase, Phase::Claiming { .. } | Phase::CatchingUp { .. })
    }

    /// Whether the term takes requests ([`submit`](Self::submit)).
    #[must_use]
    pub fn is_serving(&self) -> bool {
        matches!(self.phase, Phase::Serving(_))
    }

    /// The coordinator's counters (while serving, else as the term ended).
    #[must_use]
    pub fn stats(&self) -> Stats {
        match &self.phase {
            Phase::Serving(s) => s.coordinator.stats(),
            _ => self.last_stats,
        }
    }

    /// The folder of the journal, while catching up or serving.
    #[must_use]
    pub fn folder(&self) -> Option<&Folder<Directory>> {
        match &self.phase {
            Phase::CatchingUp { folder, .. } => Some(folder),
            Phase::Serving(s) => Some(s.coordinator.folder()),
            _ => None,
        }
    }

    /// The coordinator, while serving.
    #[must_use]
    pub fn coordinator(&self) -> Option<&Coordinator> {
        match &self.phase {
            Phase::Serving(s) => Some(&s.coordinator),
            _ => None,
        }
    }

    fn end(&mut self, end: TermEnd) {
        if let Phase::Serving(s) = &mut self.phase {
            self.last_stats = s.coordinator.stats();
            if matches!(end, TermEnd::Superseded { .. }) {
                self.answers.extend(s.coordinator.superseded());
            }
        }
        self.phase = Phase::Ended(end);
    }

    fn fail(&mut self, failure: TermFailure) {
        self.end(TermEnd::Failed(failure));
    }

    /// The shell could not carry out an effect: the term fails.
    pub fn shell_failed(&mut self, why: &'static str) {
        if !matches!(self.phase, Phase::Ended(_)) {
            self.fail(TermFailure::Shell(why));
        }
    }

    /// What the claim came to: `Ok` with the view it won (the tail to catch up to).
    pub fn claimed(&mut self, result: Result<JournalView, WriterError>) {
        if !matches!(self.phase, Phase::Claiming { asked: true }) {
            return;
        }
        match result {
            Ok(view) => {
                let folder = Box::new(Folder::new(Directory::new(), Seq(0), FolderConfig::default()));
                self.phase = Phase::CatchingUp { tail: view.next_seq, folder, reading: false };
            }
            Err(WriterError::Superseded { view }) => self.end(TermEnd::Superseded { view }),
            Err(e) => self.fail(TermFailure::Claim(e)),
        }
    }

    /// The answer to the `Read` handed out, as the shell's reader made of it. Returns what
    /// folding it did (for an audit).
    pub fn page(&mut self, outcome: Result<ReaderOutcome, ReaderError>) -> Vec<FoldEvent> {
        let Phase::CatchingUp { folder, reading, .. } = &mut self.phase else { return Vec::new() };
        *reading = false;
        let folded = match outcome {
            Ok(ReaderOutcome::Records { from, records, .. }) => folder.fold_page(from, &records),
            Ok(ReaderOutcome::Gap { from, resumed_at, .. }) => folder.gap(from, resumed_at),
            Ok(ReaderOutcome::Retry { .. } | ReaderOutcome::Unavailable { .. }) => Ok(Vec::new()),
            Ok(ReaderOutcome::UnknownJournal) => {
                self.fail(TermFailure::UnknownJournal);
                return Vec::new();
            }
            Err(e) => {
                self.fail(TermFailure::Read(e));
                return Vec::new();
            }
        };
        match folded {
            Ok(events) => events,
            Err(e) => {
                self.fail(CoordinatorError::from(e).into());
                Vec::new()
            }
        }
    }

    /// A caller's request. Only a serving term takes requests; any other answers
    /// [`Answer::NotCoordinator`].
    pub fn submit(&mut self, request: Request) -> Submitted {
        match &mut self.phase {
            Phase::Serving(s) => s.coordinator.submit(request),
            _ => Submitted::Answered(Answer::NotCoordinator),
        }
    }

    /// The report of the oldest `Write` not yet reported (reports come in position order).
    pub fn written(&mut self, report: Result<Written, WriterError>) {
        let Phase::Serving(s) = &mut self.phase else { return };
        s.writes_in_flight = s.writes_in_flight.saturating_sub(1);
        match report {
            Ok(w) => match s.coordinator.acknowledged(w.seq, w.count) {
                Ok(replies) => self.answers.extend(replies),
                Err(e) => self.fail(e.into()),
            },
            Err(WriterError::Superseded { view }) => self.end(TermEnd::Superseded { view }),
            Err(e) => self.fail(TermFailure::Write(e)),
        }
    }

    /// What the `Truncate` handed out came to.
    pub fn truncated(&mut self, result: Result<JournalView, WriterError>) {
        let Phase::Serving(s) = &mut self.phase else { return };
        if !s.truncating {
            return;
        }
        s.truncating = false;
        match result {
            Ok(_) => s.coordinator.truncate_settled(),
            Err(WriterError::Superseded { view }) => self.end(TermEnd::Superseded { view }),
            Err(e) => self.fail(TermFailure::Truncate(e)),
        }
    }

    /// What to do now, at `now_ms` (the shell's clock in milliseconds: time-based checkpoints
    /// count in it). `room(bytes)` says whether the writer takes a batch of `bytes` now. At
    /// most one `Write` is handed out per call: carry it out and poll again.
    pub fn poll(&mut self, now_ms: u64, room: impl Fn(u64) -> bool) -> Vec<TermEffect> {
        let mut effects: Vec<TermEffect> = self.answers.drain(..).map(TermEffect::Answer).collect();
        match &mut self.phase {
            Phase::Claiming { asked } => {
                if !*asked {
                    *asked = true;
                    effects.push(TermEffect::Claim);
                }
            }
            Phase::CatchingUp { tail, folder, reading } => {
                if folder.next() < *tail {
                    if !*reading {
                        *reading = true;
                        effects.push(TermEffect::Read { from: folder.next() });
                    }
                    return effects;
                }
                let Phase::CatchingUp { folder, .. } =
                    std::mem::replace(&mut self.phase, Phase::Claiming { asked: true })
                else {
                    unreachable!("the phase was just matched")
                };
                match Coordinator::new(*folder, self.config) {
                    Ok(coordinator) => {
                        let serving = Serving { coordinator, held: None, writes_in_flight: 0, truncating: false };
                        self.phase = Phase::Serving(Box::new(serving));
                        effects.extend(self.poll(now_ms, room));
                    }
                    Err(e) => self.fail(e.into()),
                }
            }
            Phase::Serving(s) => {
                s.coordinator.due_checkpoint(now_ms);
                // One batch per poll: `room` speaks of the writer before this batch.
                if !s.truncating
                    && let Some(batch) = s.held.take().or_else(|| s.coordinator.next_append())
                {
                    let bytes = batch.iter().map(|r| r.len() as u64).sum();
                    if room(bytes) {
                        s.writes_in_flight += 1;
                        effects.push(TermEffect::Write(batch));
                    } else {
                        s.held = Some(batch);
                    }
                }
                if !s.truncating
                    && let Some(t) = s.coordinator.next_truncate()
                {
                    s.truncating = true;
                    effects.push(TermEffect::Truncate { up_to: t.up_to });
                }
            }
            Phase::Ended(_) => {}
        }
        effects
    }
}

/// What happens after a term ends, besides the pause.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Succession {
    /// One coordinator per process (the embedded cell): a superseded one stops for good.
    Once,
    /// One per node, active while its node leads the registry journal: a superseded term is
    /// followed by a new claim too (while the node leads: the shell's to know).
    WhileLeading,
}

/// The restart policy's bounds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RestartConfig {
    /// The pause between a term's end and the next term's claim.
    pub backoff: Duration,
    /// Failed terms after which no new term starts.
    pub failures_max: u32,
    pub succession: Succession,
}

/// Whether and when a new term follows one that ended.
#[derive(Clone, Debug)]
pub struct Restarts {
    config: RestartConfig,
    failures: u32,
}

impl Restarts {
    #[must_use]
    pub fn new(config: RestartConfig) -> Self {
        Restarts { config, failures: 0 }
    }

    /// Failed terms so far.
    #[must_use]
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// After a term ended with `end`: the pause before the next term's claim, or `None` when
    /// no new term starts.
    pub fn after(&mut self, end: &TermEnd) -> Option<Duration> {
        match end {
            TermEnd::Superseded { .. } => match self.config.succession {
                Succession::Once => None,
                Succession::WhileLeading => Some(self.config.backoff),
            },
            TermEnd::Failed(_) if self.failures >= self.config.failures_max => None,
            TermEnd::Failed(_) => {
                self.failures += 1;
                Some(self.config.backoff)
            }
        }
    }
}
