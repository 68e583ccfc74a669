//! One round's worth of effects, and the persist-before-send contract.

use serde::{Deserialize, Serialize};

use crate::ids::{CallId, ReadId, Slot};
use crate::journal::Judged;
use crate::log::WriteOp;
use crate::message::Outbound;
use crate::reads::Fetch;
use crate::wire::{CallAnswer, ReadAnswer};

/// Everything a journal wants done since the last [`advance`](crate::Voter::advance).
///
/// **Persist before send.** The host must make every one of `writes` durable (one storage
/// batch, one sync, shared with every other journal of the round) before any message in
/// `messages` that [waits for the sync](crate::Message::waits_for_sync) leaves the process
/// (an acceptor reply — `Promise`, `Accepted` — or a candidate's `Prepare`, which
/// waits for its own promise of the ballot), and must call `advance()` only after that. Every
/// other message (a leader's `Accept`, heartbeats, chosen values, catch-up) states nothing
/// this round's writes make true, so the host may send it before the sync: the leader's own
/// disk write then overlaps its followers'. Answers to
/// calls and reads report chosen slots (a quorum made them durable) and may leave with it.
/// A round whose writes all have [`WriteOp::needs_sync`] false needs no sync.
///
/// A `Ready` taken and not advanced makes the next `ready()` panic: one round is in flight.
#[derive(Debug, Default)]
#[must_use = "a Ready's writes must be persisted and its messages sent"]
pub struct Ready {
    pub writes: Vec<WriteOp>,
    pub messages: Vec<Outbound>,
    pub answers: Vec<(CallId, CallAnswer)>,
    pub reads: Vec<(ReadId, ReadAnswer)>,
    /// The slots this node applied in the round, with their verdicts (for audits and metrics).
    pub applied: Vec<Applied>,
    /// Work against the store: answers built from entries evicted from memory.
    pub fetches: Vec<Fetch>,
}

impl Ready {
    /// True when the round asks for nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
            && self.messages.is_empty()
            && self.answers.is_empty()
            && self.reads.is_empty()
            && self.applied.is_empty()
            && self.fetches.is_empty()
    }
}

/// One slot applied by the learner's walk.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Applied {
    pub slot: Slot,
    pub digest: u64,
    pub judged: JudgedRecord,
}

/// A serializable copy of [`Judged`].
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct JudgedRecord {
    pub outcome: crate::journal::Outcome,
    pub blind: bool,
}

impl From<Judged> for JudgedRecord {
    fn from(j: Judged) -> Self {
        JudgedRecord { outcome: j.outcome, blind: j.blind }
    }
}

/// What may leave at once, even while a `Ready` is in flight: messages that state nothing a
/// pending write makes true, and answers (they report chosen slots).
#[derive(Debug, Default)]
pub struct Released {
    pub messages: Vec<Outbound>,
    pub answers: Vec<(CallId, CallAnswer)>,
    pub reads: Vec<(ReadId, ReadAnswer)>,
    pub fetches: Vec<Fetch>,
}

impl Released {
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty() && self.answers.is_empty() && self.reads.is_empty() && self.fetches.is_empty()
    }
}
