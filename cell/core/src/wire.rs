//! The node RPC's wire types: journal calls and reads addressed to one node, and the answers
//! it gives. A client links these (through paros-core, which is sans-IO) without linking the
//! host, the store or the async runtime.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::ids::{CallId, JournalKey, LeaderUuid, NodeId, ReadId, Seq};
use crate::journal::{Command, Control, Entry, JournalView, Outcome, TooLarge, Voters};

/// A call that is decided in the log.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Call {
    Write {
        leader: Option<LeaderUuid>,
        seq: Seq,
        records: Vec<Bytes>,
    },
    Truncate {
        leader: Option<LeaderUuid>,
        up_to: Seq,
    },
    SetLeader {
        new: LeaderUuid,
        old: Option<LeaderUuid>,
    },
    /// The stop-sign: the journal's voters become `voters` at configuration `epoch` after the
    /// slot it is decided at (docs/reconfiguration.md). The registry's coordinator sends it,
    /// never a tenant.
    Reconfigure {
        epoch: u64,
        voters: Voters,
    },
}

impl Call {
    /// The command a leader proposes for this call.
    #[must_use]
    pub fn into_command(self) -> Command {
        match self {
            Call::Write { leader, seq, records } => Command::Write(Entry { leader, seq, records }),
            Call::Truncate { leader, up_to } => Command::Control(Control::Truncate { leader, up_to }),
            Call::SetLeader { new, old } => Command::Control(Control::SetLeader { new, old }),
            Call::Reconfigure { epoch, voters } => Command::Control(Control::Reconfigure { epoch, voters }),
        }
    }
}

/// How a decided call ended, as far as this node knows.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum CallAnswer {
    /// The verdict the fold gave the call's slot.
    Verdict(Outcome),
    /// Over the batch limits; proposed nowhere.
    TooLarge(TooLarge),
    /// This node does not lead; it believes `leader` does.
    Redirect { leader: Option<NodeId> },
    /// The slot chose another command, or the call outlived its patience: it may or may not
    /// have taken effect.
    NoVerdict,
    /// Too many calls already wait here (the bound is `calls_max`); nothing was proposed.
    Busy,
}

/// How fresh a read must be.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Consistency {
    /// Sees every write acknowledged before the read started: the server confirms a quorum's
    /// accepted watermark and waits until its fold covers it.
    Linearizable,
    /// Served once this server's fold has reached `next_seq ≥ seq` (read-your-writes). The
    /// HTTP contract's `at_least` with `min_seq = m` is `Reached(m + 1)`: "the record at `m` is
    /// applied" (paros-client's `convert` is the one place that translates).
    Reached(Seq),
}

/// A page request.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ReadRequest {
    pub from: Seq,
    /// Records at most; 0 means the server's page size. Capped at the server's page size.
    pub limit: u32,
    /// Record bytes at most (a page always holds at least one record); 0 means the server's.
    pub max_bytes: u32,
    /// Ticks a read at the tail may wait for a record or a truncation (capped by the server).
    pub wait_ticks: u32,
    pub consistency: Consistency,
}

/// The answer to a read.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum ReadAnswer {
    /// Records dense from `from` (possibly none: at the tail after the wait).
    Page { from: Seq, records: Vec<Bytes>, view: JournalView },
    /// `from` lies below `first_seq`.
    Truncated(JournalView),
    /// This server cannot answer now (no quorum, election, not caught up, an `at_least`
    /// position it has not applied within the wait, or the records lie below a trim point it
    /// jumped to). Ask another.
    Unserved {
        /// How far this server had applied the journal when it judged the read: the end of its
        /// applied prefix, its fold's `next_seq` (every record below it is applied there; the
        /// record at it is not). An `at_least` read of `Reached(seq)` that waited its bound
        /// out answers `applied_to < seq`. `None` when the server did not know (it refused the
        /// read before looking at the journal's state).
        applied_to: Option<Seq>,
    },
}

impl ReadAnswer {
    /// `Unserved` by a server that has applied the journal up to `applied_to` (its fold's
    /// `next_seq`).
    #[must_use]
    pub fn unserved_at(applied_to: Seq) -> ReadAnswer {
        ReadAnswer::Unserved { applied_to: Some(applied_to) }
    }

    /// `Unserved` by a server that did not look at the journal's state.
    pub const UNSERVED: ReadAnswer = ReadAnswer::Unserved { applied_to: None };
}

/// A request to one node.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum NodeRequest {
    /// A Write, Truncate or SetLeader for one journal; `id` is the caller's for the whole call.
    Call { journal: JournalKey, id: CallId, call: Call },
    /// A Read of one journal; `id` is the sender's for this send.
    Read { journal: JournalKey, id: ReadId, read: ReadRequest },
}

/// A node's answer.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum NodeAnswer {
    Call(CallAnswer),
    Read(ReadAnswer),
    /// The node hosts no such journal.
    UnknownJournal,
}

/// Why an RPC got no answer. To a caller of a decided call, every one of these is ambiguous.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error, Serialize, Deserialize)]
pub enum RpcError {
    #[error("no answer before the deadline")]
    Timeout,
    #[error("no such node on the bus: {0:?}")]
    NoRoute(NodeId),
    #[error("the node stopped before answering")]
    Dropped,
}
