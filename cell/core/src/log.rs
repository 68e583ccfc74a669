//! A journal's retained log on one machine, and the durable writes that change it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ids::{Ballot, Slot};
use crate::journal::{Command, Entry, JournalState};

/// One retained slot: the command held for it and the ballot it was accepted at.
///
/// A slot below the learner's chosen index holds the *chosen* command. `ballot` is `None` for a
/// command learned as chosen without being accepted here (catch-up, or a learner-only replica).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct LogEntry {
    pub ballot: Option<Ballot>,
    pub command: Command,
}

/// One durable change to a journal's storage. The host writes every [`WriteOp`] of a round
/// in one atomic batch and syncs once before any message of that round leaves.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum WriteOp {
    /// The acceptor promised `ballot` (a scalar beside the log; truncation never touches it).
    Promise(Ballot),
    /// The acceptor accepted `command` at `slot` under `ballot`.
    Accept { slot: Slot, ballot: Ballot, command: Command },
    /// `command` is known chosen at `slot` (learned from a peer, not accepted here).
    Learn { slot: Slot, command: Command },
    /// Every slot below `up_to` is chosen (the learner's chosen index).
    Chosen { up_to: Slot },
    /// Compaction: drop every slot below `floor`; `sealed` is the state they folded to.
    Truncate { floor: Slot, sealed: JournalState },
    /// Trim-point jump: drop every slot below `point`, everything below is chosen, `state` is
    /// the fold base. Never touches the promise.
    TrimmedTo { point: Slot, state: JournalState },
}

impl WriteOp {
    /// True when a message or answer of the same round may depend on this write being
    /// durable. The chosen index is a hint (a lower one is re-learned after a restart), so a
    /// round whose only writes are `Chosen` needs no sync of its own: it rides the next one.
    #[must_use]
    pub fn needs_sync(&self) -> bool {
        !matches!(self, WriteOp::Chosen { .. })
    }
}

/// What storage gives back at boot for one journal.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct Durable {
    pub promise: Ballot,
    pub floor: Slot,
    pub sealed: JournalState,
    pub chosen_up_to: Slot,
    pub entries: Vec<(Slot, LogEntry)>,
}

impl Durable {
    /// Applies one write, as storage does: the in-memory model of the durable state.
    pub fn apply(&mut self, op: &WriteOp) {
        match op {
            WriteOp::Promise(b) => self.promise = *b,
            WriteOp::Accept { slot, ballot, command } => {
                self.put(*slot, LogEntry { ballot: Some(*ballot), command: command.clone() });
            }
            WriteOp::Learn { slot, command } => {
                self.put(*slot, LogEntry { ballot: None, command: command.clone() });
            }
            WriteOp::Chosen { up_to } => self.chosen_up_to = self.chosen_up_to.max(*up_to),
            WriteOp::Truncate { floor, sealed } | WriteOp::TrimmedTo { point: floor, state: sealed } => {
                if *floor > self.floor {
                    self.floor = *floor;
                    self.sealed = *sealed;
                    self.entries.retain(|(s, _)| s >= floor);
                }
                if matches!(op, WriteOp::TrimmedTo { .. }) {
                    self.chosen_up_to = self.chosen_up_to.max(*floor);
                }
            }
        }
    }

    fn put(&mut self, slot: Slot, entry: LogEntry) {
        if slot < self.floor {
            return;
        }
        match self.entries.binary_search_by_key(&slot, |(s, _)| *s) {
            Ok(i) => self.entries[i].1 = entry,
            Err(i) => self.entries.insert(i, (slot, entry)),
        }
    }
}

/// The retained log in memory: slots at or above the floor.
#[derive(Clone, Debug, Default)]
pub struct Log {
    floor: Slot,
    entries: BTreeMap<Slot, LogEntry>,
}

impl Log {
    /// A log rebuilt from storage.
    #[must_use]
    pub fn from_durable(floor: Slot, entries: Vec<(Slot, LogEntry)>) -> Log {
        assert!(entries.iter().all(|(s, _)| *s >= floor), "storage holds nothing below the floor");
        Log { floor, entries: entries.into_iter().collect() }
    }

    /// The first retained slot: every slot below it was chosen and dropped.
    #[must_use]
    pub fn floor(&self) -> Slot {
        self.floor
    }

    #[must_use]
    pub fn get(&self, slot: Slot) -> Option<&LogEntry> {
        self.entries.get(&slot)
    }

    /// The write held at `slot`, if the slot holds a write.
    #[must_use]
    pub fn entry_at(&self, slot: Slot) -> Option<&Entry> {
        self.entries.get(&slot).and_then(|e| e.command.entry())
    }

    /// Holds `entry` at `slot`. Slots below the floor are chosen and gone: ignored.
    pub fn put(&mut self, slot: Slot, entry: LogEntry) {
        if slot >= self.floor {
            self.entries.insert(slot, entry);
        }
    }

    /// Retained entries from `from` on.
    pub fn range_from(&self, from: Slot) -> impl Iterator<Item = (&Slot, &LogEntry)> {
        self.entries.range(from..)
    }

    /// One past the highest slot held as known chosen (learned), if any.
    #[must_use]
    pub fn learned_end(&self) -> Option<Slot> {
        self.entries.iter().rev().find(|(_, e)| e.ballot.is_none()).map(|(s, _)| s.next())
    }

    /// The highest slot held, if any.
    #[must_use]
    pub fn last_slot(&self) -> Option<Slot> {
        self.entries.keys().next_back().copied()
    }

    /// Drops every slot below `floor`. A floor at or below the current one changes nothing.
    pub fn drop_below(&mut self, floor: Slot) -> bool {
        if floor <= self.floor {
            return false;
        }
        self.entries = self.entries.split_off(&floor);
        self.floor = floor;
        true
    }
}
