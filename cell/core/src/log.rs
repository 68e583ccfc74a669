//! A journal's retained log on one machine, and the durable writes that change it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ids::{Ballot, Slot};
use crate::journal::{Command, Digested, Entry, JournalState};

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
        self.anchors
            .iter()
            .rev()
            .map(|(s, _)| *s)
            .find(|s| *s <= self.chosen_up_to)
            .unwrap_or(self.floor)
            .max(self.floor)
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

/// An entry in the window with its command's digest and its record bytes, both taken once when
/// it came: the learner's walk reads the digest from here, and evicting the entry reads only the
/// tree, not the records (by then long out of the cache).
#[derive(Clone, Debug)]
struct Held {
    entry: LogEntry,
    digest: u64,
    bytes: u64,
}

impl Held {
    fn new(ballot: Option<Ballot>, command: Digested) -> Held {
        let digest = command.digest();
        let entry = LogEntry { ballot, command: command.into_command() };
        Held { bytes: entry_bytes(&entry), digest, entry }
    }

    /// An entry read back from storage: its digest is computed here, once.
    fn read_back(entry: LogEntry) -> Held {
        Held::new(entry.ballot, Digested::new(entry.command))
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
        let entries: BTreeMap<Slot, Held> =
            entries.into_iter().filter(|(s, _)| *s >= start).map(|(s, e)| (s, Held::read_back(e))).collect();
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

    /// The entry held at `slot` with its command's digest (taken when it was put).
    #[must_use]
    pub fn get_with_digest(&self, slot: Slot) -> Option<(&LogEntry, u64)> {
        self.entries.get(&slot).map(|h| (&h.entry, h.digest))
    }

    /// The write held at `slot`, if the slot holds a write.
    #[must_use]
    pub fn entry_at(&self, slot: Slot) -> Option<&Entry> {
        self.entries.get(&slot).and_then(|h| h.entry.command.entry())
    }

    /// Holds `command` at `slot`, accepted at `ballot` (`None`: known chosen). Slots below the
    /// window are chosen and held elsewhere: ignored.
    pub fn put(&mut self, slot: Slot, ballot: Option<Ballot>, command: Digested) {
        if slot >= self.start {
            let held = Held::new(ballot, command);
            self.bytes += held.bytes;
            if let Some(old) = self.entries.insert(slot, held) {
                self.bytes -= old.bytes;
            }
        }
    }

    /// Holds `make()` (a ballot and a command) at `slot` unless the entry held there passes
    /// `keep`, with one descent of the tree for the look and the write. Returns the entry kept
    /// with its digest, or `None` when `make()` is held now. Slots below the window are chosen
    /// and held elsewhere: the caller checks [`Log::start`] first (below it nothing is held and
    /// nothing is put).
    pub fn put_unless(
        &mut self,
        slot: Slot,
        keep: impl FnOnce(&LogEntry) -> bool,
        make: impl FnOnce() -> (Option<Ballot>, Digested),
    ) -> Option<(&LogEntry, u64)> {
        use std::collections::btree_map::Entry as At;
        if slot < self.start {
            return None;
        }
        match self.entries.entry(slot) {
            At::Occupied(held) if keep(&held.get().entry) => {
                let held = held.into_mut();
                Some((&held.entry, held.digest))
            }
            At::Occupied(mut held) => {
                let (ballot, command) = make();
                let new = Held::new(ballot, command);
                self.bytes += new.bytes;
                self.bytes -= held.insert(new).bytes;
                None
            }
            At::Vacant(free) => {
                let (ballot, command) = make();
                let new = Held::new(ballot, command);
                self.bytes += new.bytes;
                free.insert(new);
                None
            }
        }
    }

    /// Retained entries from `from` on.
    pub fn range_from(&self, from: Slot) -> impl DoubleEndedIterator<Item = (&Slot, &LogEntry)> {
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
            let first = self.entries.first_key_value().map(|(s, _)| *s);
            match first {
                Some(first) if start.0.saturating_sub(first.0) > POP_SLOTS_MAX => {
                    // Many at once: one split of the tree. Popping each from the front costs a
                    // descent from the root and a shift of its leaf's entries apiece.
                    let kept = self.entries.split_off(&start);
                    let dropped = std::mem::replace(&mut self.entries, kept);
                    self.bytes -= dropped.values().map(|h| h.bytes).sum::<u64>();
                }
                Some(_) => {
                    // A few: popped from the front (a split would rebuild the tree's spine).
                    while let Some(entry) = self.entries.first_entry() {
                        if *entry.key() >= start {
                            break;
                        }
                        self.bytes -= entry.remove().bytes;
                    }
                }
                None => {}
            }
            self.start = start;
        }
        self.start
    }

    /// Evicts from the front, never past `limit`, until the window holds at most `slots_max`
    /// slots below `keep` and at most `bytes_max` record bytes. Returns the new start.
    ///
    /// Past the slot bound it evicts an eighth of the window more ([`EVICT_SHARE`]), so the
    /// start moves in steps of many slots, each one split of the tree, not after every slot
    /// chosen. The window then holds between seven eighths of `slots_max` and `slots_max`.
    pub fn evict_over(&mut self, limit: Slot, keep: Slot, slots_max: u32, bytes_max: u32) -> Slot {
        let bound = keep.0.saturating_sub(u64::from(slots_max));
        if bound > self.start.0 {
            let step = bound + u64::from(slots_max / EVICT_SHARE);
            self.evict_below(Slot(step).min(keep).min(limit));
        }
        while self.bytes > u64::from(bytes_max) && self.start < limit {
            let next = self.entries.first_key_value().map_or(limit, |(s, _)| s.next()).min(limit);
            self.evict_below(next);
        }
        self.start
    }
}

/// [`Log::evict_over`] evicts `1 / EVICT_SHARE` of the window past its slot bound.
pub const EVICT_SHARE: u32 = 8;

/// [`Log::evict_below`] pops entries one by one when the start moves by at most this many
/// slots, and splits the tree when it moves further.
const POP_SLOTS_MAX: u64 = 8;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Seq;

    fn entry(slot: u64, len: usize) -> LogEntry {
        let record = bytes::Bytes::from(vec![u8::try_from(slot % 251).unwrap(); len]);
        LogEntry {
            ballot: None,
            command: Command::Write(Entry { leader: None, seq: Seq(slot), records: vec![record] }),
        }
    }

    /// What [`Log::put_unless`] makes: the entry's ballot and its command, digested.
    fn made(slot: u64, len: usize) -> (Option<Ballot>, Digested) {
        let e = entry(slot, len);
        (e.ballot, Digested::new(e.command))
    }

    fn log_of(slots: std::ops::Range<u64>, len: usize) -> Log {
        Log::from_durable(Slot(0), slots.map(|s| (Slot(s), entry(s, len))).collect())
    }

    fn held(log: &Log) -> Vec<u64> {
        log.range_from(Slot(0)).map(|(s, _)| s.0).collect()
    }

    #[test]
    fn evicting_a_few_or_many_slots_keeps_exactly_the_slots_above_and_their_bytes() {
        for start in [1, 3, 8, 9, 40, 99, 100, 150] {
            let mut log = log_of(0..100, 10);
            assert_eq!(log.evict_below(Slot(start)), Slot(start));
            let want: Vec<u64> = (start..100).collect();
            assert_eq!(held(&log), want, "start {start}");
            assert_eq!(log.bytes(), 10 * want.len() as u64, "start {start}");
            assert_eq!(log.start(), Slot(start));
        }
        // A sparse window: the slot distance, not the count, picks the way; both agree.
        let mut log = Log::from_durable(Slot(0), [0, 5, 50, 51, 90].map(|s| (Slot(s), entry(s, 3))).to_vec());
        log.evict_below(Slot(51));
        assert_eq!(held(&log), vec![51, 90]);
        assert_eq!(log.bytes(), 6);
        // Never backwards.
        assert_eq!(log.evict_below(Slot(10)), Slot(51));
    }

    #[test]
    fn the_slot_bound_holds_and_eviction_moves_in_steps_of_about_an_eighth() {
        let mut log = Log::default();
        let mut starts = Vec::new();
        for slot in 0..1000u64 {
            let (ballot, command) = made(slot, 1);
            log.put(Slot(slot), ballot, command);
            let keep = Slot(slot + 1);
            let start = log.evict_over(keep, keep, 64, u32::MAX);
            let below_keep = held(&log).into_iter().filter(|s| *s < keep.0).count();
            assert!(below_keep <= 64, "slot {slot}: {below_keep} held below the chosen index");
            assert!(slot < 64 || below_keep >= 64 - 8, "slot {slot}: only {below_keep} held");
            if starts.last() != Some(&start) {
                starts.push(start);
            }
        }
        let steps: Vec<u64> = starts.windows(2).map(|w| w[1].0 - w[0].0).collect();
        // Past the bound by one, then an eighth more.
        assert!(steps.iter().all(|s| *s == 9), "the start moves 9 slots at a time: {steps:?}");
    }

    #[test]
    fn put_unless_keeps_what_passes_and_counts_the_bytes_of_what_it_replaces() {
        let mut log = log_of(5..8, 10);
        // Kept: the entry held is handed back, nothing changes.
        let kept = log.put_unless(Slot(6), |e| e.ballot.is_none(), || made(6, 99)).map(|(e, d)| (e.clone(), d));
        assert_eq!(kept, Some((entry(6, 10), entry(6, 10).command.digest())));
        assert_eq!(log.bytes(), 30);
        // Replaced, and put where nothing was held.
        assert_eq!(log.put_unless(Slot(6), |_| false, || made(6, 4)), None);
        assert_eq!(log.put_unless(Slot(9), |_| true, || made(9, 7)), None);
        assert_eq!(log.get(Slot(6)), Some(&entry(6, 4)));
        assert_eq!(log.get(Slot(9)), Some(&entry(9, 7)));
        assert_eq!(log.bytes(), 10 + 4 + 10 + 7);
        // Below the window nothing is put.
        log.evict_below(Slot(7));
        assert_eq!(log.put_unless(Slot(5), |_| false, || made(5, 1)), None);
        assert_eq!(log.get(Slot(5)), None);
        assert_eq!(log.bytes(), 17);
    }

    #[test]
    fn the_digest_held_with_an_entry_is_its_commands_whether_put_or_read_back_at_boot() {
        // The walk reports this digest for the slot, and a leader credits a held call by it.
        let mut log = log_of(0..3, 5);
        let (ballot, command) = made(3, 2);
        log.put(Slot(3), ballot, command);
        log.put_unless(Slot(4), |_| false, || made(4, 6));
        for (slot, len) in [(0, 5), (1, 5), (2, 5), (3, 2), (4, 6)] {
            let (held, digest) = log.get_with_digest(Slot(slot)).expect("held");
            assert_eq!(held, &entry(slot, len));
            assert_eq!(digest, entry(slot, len).command.digest(), "slot {slot}");
        }
        let (_, kept) = log.put_unless(Slot(1), |_| true, || made(1, 9)).expect("kept");
        assert_eq!(kept, entry(1, 5).command.digest(), "the digest of the entry kept");
    }

    #[test]
    fn eviction_never_passes_the_limit_and_the_byte_bound_still_holds() {
        let mut log = log_of(0..100, 10);
        assert_eq!(log.evict_over(Slot(20), Slot(100), 16, u32::MAX), Slot(20), "the limit holds");
        assert_eq!(log.evict_over(Slot(100), Slot(100), 16, 200), Slot(86), "the eighth past the slot bound");
        assert_eq!(log.bytes(), 140);
        assert_eq!(log.evict_over(Slot(100), Slot(100), 16, 55), Slot(95), "then the byte bound, slot by slot");
        assert_eq!(log.bytes(), 50);
    }
}
