//! The per-journal protocol messages. Each says who sends it to whom.

use serde::{Deserialize, Serialize};

use crate::ids::{Ballot, Life, NodeId, Slot};
use crate::journal::{Command, Digested, JournalState};

/// One slot's value as an acceptor reports it in a [`Message::Promise`].
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Reported {
    pub slot: Slot,
    /// The ballot it was accepted at; `None` when the acceptor knows the command is chosen
    /// (it outranks every ballot).
    pub ballot: Option<Ballot>,
    pub command: Command,
}

/// A protocol message about one journal. The host adds the journal key and the addresses.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Message {
    /// Proposer → acceptors: promise nothing below `ballot` for any slot ≥ `from`.
    Prepare { ballot: Ballot, from: Slot },
    /// Acceptor → proposer: promised `ballot`. Every slot below `chosen_up_to` is chosen here
    /// (the proposer need not re-propose it); `accepted` is every value held from
    /// `max(from, chosen_up_to)` on; `epoch` is the configuration the acceptor's walk reached
    /// (a campaign of an earlier one is void: docs/reconfiguration.md, rule 9).
    Promise { ballot: Ballot, from: Slot, chosen_up_to: Slot, accepted: Vec<Reported>, epoch: u64 },
    /// Acceptor → proposer: refused `ballot`: it promised `promised`, or `from` lies below its
    /// `floor` (it no longer knows those slots and will not pretend it accepted nothing there).
    Nack { ballot: Ballot, promised: Ballot, floor: Slot },
    /// Proposer → acceptors: accept these slots' commands under `ballot`; everything below
    /// `commit` is chosen. Each command carries the digest its leader computed; on the wire it
    /// is the bare command, and the receiver computes the digest once as it decodes it.
    Accept { ballot: Ballot, entries: Vec<(Slot, Digested)>, commit: Slot },
    /// Acceptor → proposer: accepted these slots under `ballot`, each with the digest of the
    /// command it holds there.
    Accepted { ballot: Ballot, slots: Vec<(Slot, u64)> },
    /// Leader → voters: still leading; everything below `commit` is chosen.
    /// `quiesce` says the journal is idle and caught up: stop the election timer until woken.
    Heartbeat { ballot: Ballot, commit: Slot, quiesce: bool },
    /// Voter → leader: heard your heartbeat; my chosen prefix ends at `chosen_up_to`.
    HeartbeatAck { ballot: Ballot, chosen_up_to: Slot },
    /// Leader → a replica tier's feed: these newly chosen slots and their commands. Sent once
    /// per tier; the bus hands a copy to every replica of the tier.
    Chosen { entries: Vec<(Slot, Command)> },
    /// Laggard → peer: send me the chosen commands from `from` on. `from` is where the
    /// asker's chosen prefix ends, so every slot below it is chosen: a voter asked from past its
    /// own prefix learns it is behind (a check-in after a boot tells its peers this way).
    /// `life` is the asker's, echoed in the answer.
    CatchUpRequest { from: Slot, life: Life },
    /// Peer → laggard: chosen commands, contiguous from the requested slot, at most a page of
    /// them; every slot below `chosen_up_to` is chosen at the peer, so an answer that stops
    /// short of it says there is more to ask for. `life` echoes the request's.
    CatchUpResponse { entries: Vec<(Slot, Command)>, chosen_up_to: Slot, life: Life },
    /// Peer → laggard: everything below `point` is chosen and gone here; `state` is its fold.
    /// `life` echoes the request's.
    TrimmedTo { from: Slot, point: Slot, state: JournalState, life: Life },
    /// Reader → acceptors: your highest accepted slot, please (watermark round `read` of the
    /// reader's life `life`: a linearizable read's quorum round).
    WatermarkRequest { read: u64, life: Life },
    /// Acceptor → reader: every slot it accepted or knows chosen is below `up_to`. `read` and
    /// `life` echo the request's.
    Watermark { read: u64, life: Life, up_to: Slot },
    /// Leader → a replica tier's feed: every slot below `chosen_up_to` is chosen. Sent while
    /// the chosen prefix moves and once more as the journal quiesces, so a replica that lost
    /// the feed's last batch learns it is behind without heartbeats; the host coalesces a
    /// round's marks for one tier into one bus message.
    FeedMark { chosen_up_to: Slot },
}

impl Message {
    /// A reply an acceptor produced from state that becomes durable in the same round: it
    /// must not reach even this node's own proposer before that round is synced.
    ///
    /// Not a `Watermark`: it is a bound the reader waits to apply up to, never a vote, and an
    /// accept it counts that is lost in a crash can only make the reader wait longer (it
    /// answers from its own applied prefix, which holds only chosen slots). Holding it for a
    /// round made a one-voter journal's linearizable read wait for a round that never came:
    /// the reply writes nothing.
    #[must_use]
    pub fn needs_durable_sender(&self) -> bool {
        matches!(self, Message::Promise { .. } | Message::Accepted { .. })
    }

    /// A message that may leave only with the round that makes its sender's own state durable:
    /// an acceptor's reply ([`Self::needs_durable_sender`]), or a candidate's `Prepare`, which
    /// waits for its own acceptor's promise of the ballot. A ballot that left the machine is then
    /// always at or below the promise the journal recovers with, so a later life never campaigns
    /// at a ballot an earlier one used (two lives proposing at one ballot could choose two
    /// values; a late Promise from the earlier life would count for the later one).
    #[must_use]
    pub fn waits_for_sync(&self) -> bool {
        self.needs_durable_sender() || matches!(self, Message::Prepare { .. })
    }

    /// The life of the request this message answers, for a reply matched to its request by a
    /// life ([`Life`]): catch-up answers and watermarks.
    #[must_use]
    pub fn answers_life(&self) -> Option<Life> {
        match self {
            Message::CatchUpResponse { life, .. }
            | Message::TrimmedTo { life, .. }
            | Message::Watermark { life, .. } => Some(*life),
            _ => None,
        }
    }

    /// A leader's heartbeat or its answer: it says who leads and how far is chosen, and carries
    /// no entry, proposal or read. An idle journal's leader sends one every few ticks.
    #[must_use]
    pub fn is_liveness(&self) -> bool {
        matches!(self, Message::Heartbeat { .. } | Message::HeartbeatAck { .. })
    }
}

/// A message and where it goes.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Outbound {
    pub to: NodeId,
    pub message: Message,
}
