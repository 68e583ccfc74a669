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
    /// A fold checkpoint: `state` is the journal state before `slot` was applied. Where boot
    /// resumes the fold, and the sparse index reads of evicted entries start from. Dropped
    /// with the slots below a floor.
    Anchor { slot: Slot, state: JournalState },
}

impl WriteOp {
    /// True when a message or answer of the same round may depend on this write being
    /// durable. The chosen index is a hint (a lower one is re-learned after a restart), so a
    /// round whose only writes are `Chosen` needs no sync of its own: it rides the next one.
    #[must_use]
    pub fn needs_sync(&self) -> bool {
        !matches!(self, WriteOp::Chosen { .. } | WriteOp::Anchor { .. })
    }
}

/// What storage gives back at boot for one journal.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct Durable {
    pub promise: Ballot,
    pub floor: Slot,
    pub sealed: JournalState,
    pub chosen_up_to: Slot,
    /// Fold checkpoints above the floor, in slot order.
    pub anchors: Vec<(Slot, JournalState)>,
    /// The retained entries from [`Durable::boot_start`] on (a store may hold more: boot
    /// never reads them).
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
            WriteOp::Anchor { slot, state } => {
                if *slot > self.floor {
                    match self.anchors.binary_search_by_key(slot, |(s, _)| *s) {
                        Ok(i) => self.anchors[i].1 = *state,
                        Err(i) => self.anchors.insert(i, (*slot, *state)),
                    }
                }
            }
            WriteOp::Truncate { floor, sealed } | WriteOp::TrimmedTo { point: floor, state: sealed } => {
                if *floor > self.floor {
                    self.floor = *floor;
                    self.sealed = *sealed;
                    self.entries.retain(|(s, _)| s >= floor);
                    self.anchors.retain(|(s, _)| s > floor);
                }
                if matches!(op, WriteOp::TrimmedTo { .. }) {
                    self.chosen_up_to = self.chosen_up_to.max(*floor);
                }
            }
        }
    }

    /// Where boot resumes the fold: the last checkpoint at or below the chosen index (the
    /// floor when there is none). Boot needs the entries from here on, not the retained log.
    #[must_use]
    pub fn boot_start(&self) -> Slot {
        self.anchors.iter().rev().map(|(s, _)| *s).find(|s| *s <= self.chosen_up_to).unwrap_or(self.floor).max(self.floor)
    }

    /// What a store hands back at boot: this state with the entries below
    /// [`boot_start`](Self::boot_start) left out.
    #[must_use]
    pub fn for_boot(&self) -> Durable {
        let start = self.boot_start();
        Durable {
            promise: self.promise,
            floor: self.floor,
            sealed: self.sealed,
            chosen_up_to: self.chosen_up_to,
            anchors: self.anchors.clone(),
            entries: self.entries.iter().filter(|(s, _)| *s >= start).cloned().collect(),
        }
    }

    /// Up to `slots_max` retained entries from `from` on, in slot order (what
    /// `LogRead::read_range` answers from this model).
    #[must_use]
    pub fn read_range(&self, from: Slot, slots_max: u32) -> Vec<(Slot, LogEntry)> {
        let from = from.max(self.floor);
        let i = self.entries.partition_point(|(s, _)| *s < from);
        self.entries[i..].iter().take(slots_max as usize).cloned().collect()
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

/// The retained log's window in memory: slots from `start` on. Every slot in `[floor, start)`
/// is chosen, durable and evicted: read it from the store.
#[derive(Clone, Debug, Default)]
pub struct Log {
    floor: Slot,
    start: Slot,
    entries: BTreeMap<Slot, Held>,
    /// Record bytes of the entries held.
    bytes: u64,
}

fn entry_bytes(e: &LogEntry) -> u64 {
    e.command.entry().map_or(0, crate::journal::Entry::bytes)
}

/// An entry in the window with its record bytes, counted once when it came: evicting it then
/// reads only the tree, not the records (by then long out of the cache).
#[derive(Clone, Debug)]
struct Held {
    entry: LogEntry,
    bytes: u64,
}

impl Held {
    fn new(entry: LogEntry) -> Held {
        Held { bytes: entry_bytes(&entry), entry }
    }
}

impl Log {
    /// A log rebuilt from storage, holding every retained entry (its window starts at the floor).
    #[must_use]
    pub fn from_durable(floor: Slot, entries: Vec<(Slot, LogEntry)>) -> Log {
        Log::with_window(floor, floor, entries)
    }

    /// A log rebuilt from storage: the entries at or after `start` (at or above `floor`).
    #[must_use]
    pub fn with_window(floor: Slot, start: Slot, entries: Vec<(Slot, LogEntry)>) -> Log {
        assert!(start >= floor, "the window starts at or above the floor");
        let entries: BTreeMap<Slot, Held> = entries.into_iter().filter(|(s, _)| *s >= start).map(|(s, e)| (s, Held::new(e))).collect();
        let bytes = entries.values().map(|h| h.bytes).sum();
        Log { floor, start, entries, bytes }
    }

    /// The first retained slot: every slot below it was chosen and dropped.
    #[must_use]
    pub fn floor(&self) -> Slot {
        self.floor
    }

    /// The first slot held in memory: every slot in `[floor, start)` is chosen and evicted.
    #[must_use]
    pub fn start(&self) -> Slot {
        self.start
    }

    /// Record bytes held in memory.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    #[must_use]
    pub fn get(&self, slot: Slot) -> Option<&LogEntry> {
        self.entries.get(&slot).map(|h| &h.entry)
    }

    /// The write held at `slot`, if the slot holds a write.
    #[must_use]
    pub fn entry_at(&self, slot: Slot) -> Option<&Entry> {
        self.entries.get(&slot).and_then(|h| h.entry.command.entry())
    }

    /// Holds `entry` at `slot`. Slots below the window are chosen and held elsewhere: ignored.
    pub fn put(&mut self, slot: Slot, entry: LogEntry) {
        if slot >= self.start {
            let held = Held::new(entry);
            self.bytes += held.bytes;
            if let Some(old) = self.entries.insert(slot, held) {
                self.bytes -= old.bytes;
            }
        }
    }

    /// Retained entries from `from` on.
    pub fn range_from(&self, from: Slot) -> impl Iterator<Item = (&Slot, &LogEntry)> {
        self.entries.range(from..).map(|(s, h)| (s, &h.entry))
    }

    /// One past the highest slot held as known chosen (learned), if any.
    #[must_use]
    pub fn learned_end(&self) -> Option<Slot> {
        self.entries.iter().rev().find(|(_, h)| h.entry.ballot.is_none()).map(|(s, _)| s.next())
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
        self.evict_below(floor);
        self.floor = floor;
        true
    }

    /// Moves the window's start up to `start`, forgetting the entries below it (the caller
    /// knows them chosen and durable). Returns the new start.
    pub fn evict_below(&mut self, start: Slot) -> Slot {
        if start > self.start {
            // Popped from the front, not split off: eviction runs after every input and moves
            // the start by a few slots, and a split rebuilds the tree's spine each time.
            while let Some(entry) = self.entries.first_entry() {
                if *entry.key() >= start {
                    break;
                }
                self.bytes -= entry.remove().bytes;
            }
            self.start = start;
        }
        self.start
    }

    /// Evicts from the front, never past `limit`, until the window holds at most `slots_max`
    /// slots below `keep` and at most `bytes_max` record bytes. Returns the new start.
    pub fn evict_over(&mut self, limit: Slot, keep: Slot, slots_max: u32, bytes_max: u32) -> Slot {
        self.evict_below(Slot(keep.0.saturating_sub(u64::from(slots_max))).min(limit));
        while self.bytes > u64::from(bytes_max) && self.start < limit {
            let next = self.entries.first_key_value().map_or(limit, |(s, _)| s.next()).min(limit);
            self.evict_below(next);
        }
        self.start
    }
}
