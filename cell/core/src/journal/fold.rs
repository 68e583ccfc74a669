//! The fold: judges each chosen command against the journal state, in slot order.

use std::collections::VecDeque;

use super::types::{Command, Control, Entry, JournalState, JournalView, Outcome, WriterMode};
use crate::ids::{LeaderUuid, Seq, Slot};

/// Where an accepted write sits: its slot, its length, and the state just before it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Position {
    slot: Slot,
    count: u64,
    /// The fold's state before this write's slot was applied: the sealed state a compaction
    /// that keeps this write as its first retained slot writes down.
    before: JournalState,
}

/// The journal state machine over a retained suffix of the log.
///
/// Holds the [`JournalState`], the exact positions of the writes in the in-memory window
/// ("which accepted writes hold these positions" for `Duplicate`, "which slot holds this position"
/// for reads), the exact positions of the newest writes evicted from the window (as runs of
/// evenly spaced writes, at most [`Anchoring::exact_writes`] runs: a read there reads only the
/// slots it returns), and sparse
/// **anchors** below it: checkpoints `(slot, state before slot)` from which a read of older
/// evicted entries re-folds to find its records. Memory is the window, the bounded index of
/// evicted writes and one anchor per [`Anchoring`] stride of retained slots.
#[derive(Clone, Debug)]
pub struct Fold {
    mode: WriterMode,
    state: JournalState,
    positions: Positions,
    /// The exact positions of the newest writes evicted from the window, contiguous with it.
    evicted: Evicted,
    /// Checkpoints in slot order; the first is the fold's base (its floor, or a trim point).
    anchors: VecDeque<(Slot, JournalState)>,
    anchoring: Anchoring,
    /// Slots and record bytes applied since the last anchor.
    since: (u64, u64),
    /// The anchor the last `apply` took, until [`Fold::take_new_anchor`].
    new_anchor: Option<(Slot, JournalState)>,
    /// The first position this fold indexes. Below it (and at or above `first_seq`) the fold is
    /// blind: it started from a peer's trim point and never saw those writes.
    held_from: Seq,
    /// The slot the fold applies next.
    next_slot: Slot,
}

/// How a fold indexes what leaves its window: an anchor after this many slots or record bytes
/// since the last, and the exact positions of the newest evicted writes, in at most
/// `exact_writes` runs (writes in consecutive slots of the same record count are one run).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Anchoring {
    pub slots: u32,
    pub bytes: u32,
    pub exact_writes: u32,
}

impl Anchoring {
    /// Never anchors past the base (a fold that keeps every write's position).
    pub const NEVER: Anchoring = Anchoring { slots: u32::MAX, bytes: u32::MAX, exact_writes: 0 };
}

/// What the fold said of one slot.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Judged {
    pub outcome: Outcome,
    /// The fold judged a retry below the positions it holds (after a trim-point jump): the state
    /// is right, but `Refused` may stand where a complete fold says `Duplicate`.
    pub blind: bool,
}

/// Where a read position lies in this fold.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Located {
    /// Below `first_seq`: truncated.
    Truncated,
    /// Retained by the journal but not held here (the fold started from a trim point).
    NotHeld,
    /// At or past `next_seq`.
    Tail,
    /// Inside the write at `slot`, which starts at `start`.
    At { slot: Slot, start: Seq },
    /// Below the window, inside the write at `slot` (which starts at `start`), whose exact
    /// position the fold still keeps: read that slot from the store ([`Fold::evicted_writes`]
    /// lists it and the writes after it).
    Indexed { slot: Slot, start: Seq },
    /// Below the window: re-fold from the anchor at `slot` (whose state before it is `state`)
    /// over entries read from the store.
    Anchored { slot: Slot, state: JournalState },
}

impl Fold {
    /// A fold that starts at `slot` from `base`, the sealed state of everything below it.
    #[must_use]
    pub fn new(mode: WriterMode, base: JournalState, slot: Slot) -> Fold {
        Fold::resume(mode, vec![(slot, base)], Anchoring::NEVER)
    }

    /// A fold over `anchors` (in slot order, at least one): the first is the base the fold
    /// indexes from, the last the state it resumes applying from.
    ///
    /// # Panics
    /// Without an anchor, or with anchors out of order.
    #[must_use]
    pub fn resume(mode: WriterMode, anchors: Vec<(Slot, JournalState)>, anchoring: Anchoring) -> Fold {
        assert!(anchors.windows(2).all(|w| w[0].0 < w[1].0), "anchors are in slot order");
        let (first, last) = (anchors.first().expect("a fold has a base"), anchors.last().expect("a fold has a base"));
        first.1.assert_invariants();
        last.1.assert_invariants();
        Fold {
            mode,
            state: last.1,
            held_from: first.1.next_seq,
            next_slot: last.0,
            positions: Positions::default(),
            evicted: Evicted::default(),
            anchors: anchors.into_iter().collect(),
            anchoring,
            since: (0, 0),
            new_anchor: None,
        }
    }

    /// The anchor the last [`apply`](Self::apply) took (the store keeps it), once.
    pub fn take_new_anchor(&mut self) -> Option<(Slot, JournalState)> {
        self.new_anchor.take()
    }

    #[must_use]
    pub fn mode(&self) -> WriterMode {
        self.mode
    }

    #[must_use]
    pub fn state(&self) -> &JournalState {
        &self.state
    }

    /// The slot the fold applies next.
    #[must_use]
    pub fn next_slot(&self) -> Slot {
        self.next_slot
    }

    /// Applies the command chosen at the fold's next slot and returns its verdict.
    ///
    /// `entry_at` looks up the command of a retained slot (for `Duplicate`).
    pub fn apply<'a>(&mut self, slot: Slot, command: &Command, entry_at: impl Fn(Slot) -> Option<&'a Entry>) -> Judged {
        assert_eq!(slot, self.next_slot, "the fold applies slots in order, without holes");
        let before = self.state;
        if self.since.0 >= u64::from(self.anchoring.slots) || self.since.1 >= u64::from(self.anchoring.bytes) {
            self.anchors.push_back((slot, before));
            self.new_anchor = Some((slot, before));
            self.since = (0, 0);
        }
        self.since.0 += 1;
        self.since.1 += command.entry().map_or(0, Entry::bytes);
        let judged = self.judge(command, &entry_at);
        match judged.outcome {
            Outcome::Accepted { seq, count, .. } => {
                assert!(seq == before.next_seq && count > 0, "an accepted write takes the tail");
                self.state.next_seq = seq.plus(count);
                self.positions.push(seq, Position { slot, count, before });
            }
            Outcome::Won(_) => {
                let Command::Control(Control::SetLeader { new, .. }) = command else {
                    unreachable!("only SetLeader wins")
                };
                self.state.term += 1;
                self.state.leader = Some(*new);
            }
            Outcome::Trimmed(_) => {
                let Command::Control(Control::Truncate { up_to, .. }) = command else {
                    unreachable!("only Truncate trims")
                };
                self.state.first_seq = self.state.first_seq.max((*up_to).min(self.state.next_seq));
            }
            Outcome::Reconfigured { epoch, .. } => {
                let Command::Control(Control::Reconfigure { voters, .. }) = command else {
                    unreachable!("only Reconfigure reconfigures")
                };
                self.state.epoch = epoch;
                self.state.voters = Some(*voters);
            }
            _ => {}
        }
        let outcome = match judged.outcome {
            Outcome::Won(_) => Outcome::Won(self.state.view()),
            Outcome::Trimmed(_) => Outcome::Trimmed(self.state.view()),
            other => other,
        };
        self.next_slot = slot.next();
        self.check_transition(&before, &outcome);
        Judged { outcome, blind: judged.blind }
    }

    fn judge<'a>(&self, command: &Command, entry_at: &impl Fn(Slot) -> Option<&'a Entry>) -> Judged {
        let view = self.state.view();
        let sighted = |outcome| Judged { outcome, blind: false };
        match (self.mode, command) {
            (_, Command::Control(Control::Noop)) => sighted(Outcome::Noop),
            // Either writer mode: the configuration is the consensus layer's, not the writers'.
            (_, Command::Control(Control::Reconfigure { epoch, .. })) => sighted(if *epoch == self.state.epoch + 1 {
                Outcome::Reconfigured { epoch: *epoch, view }
            } else {
                Outcome::StaleEpoch { epoch: self.state.epoch, view }
            }),
            (WriterMode::Single, Command::Write(e)) => match e.leader {
                None => sighted(Outcome::WrongMode(view)),
                Some(uuid) => self.judge_fenced_write(uuid, e, entry_at),
            },
            (WriterMode::Single, Command::Control(Control::SetLeader { new, old })) => {
                let wins = *old == self.state.leader && Some(*new) != self.state.leader;
                sighted(if wins { Outcome::Won(view) } else { Outcome::Lost(view) })
            }
            (WriterMode::Single, Command::Control(Control::Truncate { leader, up_to: _ })) => match leader {
                None => sighted(Outcome::WrongMode(view)),
                Some(_) if *leader == self.state.leader => sighted(Outcome::Trimmed(view)),
                Some(_) => sighted(Outcome::TruncateRefused(view)),
            },
            (WriterMode::Multi, Command::Write(e)) => sighted(match (e.leader, e.records.is_empty()) {
                (Some(_), _) => Outcome::WrongMode(view),
                (None, true) => Outcome::Refused(view),
                (None, false) => accepted(self.state.next_seq, e.count(), view),
            }),
            (WriterMode::Multi, Command::Control(Control::Truncate { leader: None, .. })) => {
                sighted(Outcome::Trimmed(view))
            }
            (WriterMode::Multi, Command::Control(_)) => sighted(Outcome::WrongMode(view)),
        }
    }

    fn judge_fenced_write<'a>(
        &self,
        uuid: LeaderUuid,
        e: &Entry,
        entry_at: &impl Fn(Slot) -> Option<&'a Entry>,
    ) -> Judged {
        let view = self.state.view();
        let sighted = |outcome| Judged { outcome, blind: false };
        if e.seq < self.state.first_seq {
            return sighted(Outcome::Truncated(view));
        }
        if e.seq < self.state.next_seq {
            if e.seq < self.held_from || e.seq < self.positions.first_seq().unwrap_or(self.state.next_seq) {
                // Below what this fold indexes (a trim-point base), or below the window whose
                // writes it can compare: `Refused` may stand where `Duplicate` is true.
                return Judged { outcome: Outcome::Refused(view), blind: true };
            }
            let identical = self.positions.holds(e.seq, &e.records, |slot| {
                let held = entry_at(slot).expect("an indexed write's slot is retained");
                (held.leader == Some(uuid)).then_some(held.records.as_slice())
            });
            return sighted(if identical {
                Outcome::Duplicate { seq: e.seq, count: e.count(), view }
            } else {
                Outcome::Refused(view)
            });
        }
        if Some(uuid) != self.state.leader || e.seq != self.state.next_seq || e.records.is_empty() {
            return sighted(Outcome::Refused(view));
        }
        sighted(accepted(e.seq, e.count(), view))
    }

    fn check_transition(&self, before: &JournalState, outcome: &Outcome) {
        let after = &self.state;
        after.assert_invariants();
        assert!(after.term >= before.term, "term never decreases");
        assert!(after.next_seq >= before.next_seq, "next_seq never decreases");
        assert!(after.first_seq >= before.first_seq, "first_seq never decreases");
        assert!(
            after.epoch == before.epoch || matches!(outcome, Outcome::Reconfigured { .. }),
            "only a Reconfigure changes the configuration"
        );
        assert!(
            after.leader == before.leader || after.term > before.term,
            "the leader changes only with a term increase"
        );
        match *outcome {
            Outcome::Accepted { seq, count, view } => {
                assert_eq!((seq, after.next_seq), (before.next_seq, before.next_seq.plus(count)));
                assert_eq!(view, after.view(), "Accepted reports the view after it");
                assert_eq!((after.term, after.first_seq), (before.term, before.first_seq));
            }
            Outcome::Won(v) => {
                assert_eq!(after.term, before.term + 1, "a won SetLeader advances the term by one");
                assert_eq!(v, after.view(), "Won reports the view after it");
            }
            Outcome::Trimmed(v) => {
                assert_eq!((after.term, after.next_seq), (before.term, before.next_seq));
                assert_eq!(v, after.view(), "Trimmed reports the view after it");
            }
            Outcome::Refused(v)
            | Outcome::Truncated(v)
            | Outcome::WrongMode(v)
            | Outcome::Lost(v)
            | Outcome::TruncateRefused(v) => {
                assert_eq!(after, before, "a refusal leaves the state bit-identical");
                assert_eq!(v, before.view(), "a refusal names the view it was judged against");
            }
            Outcome::Duplicate { view, .. } => {
                assert_eq!(after, before, "a duplicate moves nothing");
                assert_eq!(view, before.view(), "a duplicate names the view it was judged against");
            }
            Outcome::Noop => {
                assert_eq!(after, before, "a noop moves nothing");
            }
            Outcome::Reconfigured { epoch, view } => {
                assert_eq!((epoch, after.epoch), (before.epoch + 1, before.epoch + 1), "one epoch at a time");
                assert_eq!(view, before.view(), "a reconfiguration moves no record and no writer");
                let config = |s: &JournalState| (s.leader, s.term, s.next_seq, s.first_seq);
                assert_eq!(config(after), config(before), "a reconfiguration touches only the configuration");
            }
            Outcome::StaleEpoch { epoch, view } => {
                assert_eq!(after, before, "a refusal leaves the state bit-identical");
                assert_eq!((epoch, view), (before.epoch, before.view()), "a refusal names what it was judged against");
            }
        }
        if self.mode == WriterMode::Multi {
            assert!(after.leader.is_none() && after.term == 0, "a multi-writer journal never names a leader");
        }
    }

    /// Where a compaction after a trim lands: the slot of the write holding `first_seq` and the
    /// state before it (or, when that write lies below the window, the last anchor at or
    /// below it), or `None` when every record is trimmed (the floor is then the slot after the
    /// Truncate, sealed at the current state).
    #[must_use]
    pub fn compaction_point(&self) -> Option<(Slot, JournalState)> {
        let first = self.state.first_seq;
        if first >= self.state.next_seq {
            return None;
        }
        if let Some((start, p)) = self.positions.at_or_below(first)
            && start.plus(p.count) > first
        {
            return Some((p.slot, p.before));
        }
        self.anchor_at_or_below(first)
    }

    /// The last anchor whose state's `next_seq` is at or below `seq`: every write in a slot
    /// below it holds only positions below `seq`.
    fn anchor_at_or_below(&self, seq: Seq) -> Option<(Slot, JournalState)> {
        let i = self.anchors.partition_point(|(_, st)| st.next_seq <= seq);
        i.checked_sub(1).map(|i| self.anchors[i])
    }

    /// Forgets everything below `floor`, whose sealed state is `sealed` (compacted away):
    /// positions and anchors below it; `(floor, sealed)` becomes the base anchor.
    pub fn forget_below(&mut self, floor: Slot, sealed: JournalState) {
        self.positions.forget_below(floor);
        self.evicted.forget_below(floor);
        while self.anchors.front().is_some_and(|(s, _)| *s <= floor) {
            self.anchors.pop_front();
        }
        self.anchors.push_front((floor, sealed));
        // The fold indexes from the floor's anchor on (exactly in the window, through anchors
        // below it).
        self.held_from = self.held_from.max(sealed.next_seq);
    }

    /// The first position the window indexes exactly (`next_seq` when it holds no write).
    #[must_use]
    pub fn window_seq(&self) -> Seq {
        self.positions.first_seq().unwrap_or(self.state.next_seq)
    }

    /// Moves the positions of writes below `start` (evicted from memory) to the index of
    /// evicted writes, which keeps the newest of them in [`Anchoring::exact_writes`] runs; their
    /// entries are read back from the store at those slots, or through the anchors below them.
    pub fn forget_positions_below(&mut self, start: Slot) {
        let max = self.anchoring.exact_writes as usize;
        for (seq, p) in self.positions.drain_below(start) {
            self.evicted.push(seq, p.slot, p.count, max);
        }
    }

    /// The evicted writes from the one holding `seq` on, in order, while the fold keeps their
    /// exact positions: each one's slot and its positions `[start, end)`. Empty when `seq` lies
    /// outside that index.
    pub fn evicted_writes(&self, seq: Seq) -> impl Iterator<Item = (Slot, Seq, Seq)> + '_ {
        let window = self.window_seq();
        let mut at = if seq < window { self.evicted.holding(seq) } else { None };
        std::iter::from_fn(move || {
            let here = at?;
            at = self.evicted.next(here);
            let (start, slot) = self.evicted.write(here);
            Some((slot, start, at.map_or(window, |next| self.evicted.write(next).0)))
        })
    }

    /// True when `seq` is retained by the journal but lies below what this fold indexes.
    #[must_use]
    pub fn is_blind_at(&self, seq: Seq) -> bool {
        seq >= self.state.first_seq && seq < self.held_from
    }

    /// Where position `seq` lies.
    #[must_use]
    pub fn locate(&self, seq: Seq) -> Located {
        if seq < self.state.first_seq {
            return Located::Truncated;
        }
        if seq >= self.state.next_seq {
            return Located::Tail;
        }
        if seq < self.held_from {
            return Located::NotHeld;
        }
        if self.positions.first_seq().is_some_and(|first| first <= seq) {
            let (start, p) = self.positions.at_or_below(seq).expect("a held position is indexed");
            assert!(start.plus(p.count) > seq, "positions are dense from the window to next_seq");
            return Located::At { slot: p.slot, start };
        }
        if let Some(at) = self.evicted.holding(seq) {
            let (start, slot) = self.evicted.write(at);
            return Located::Indexed { slot, start };
        }
        let (slot, state) = self.anchor_at_or_below(seq).expect("the base anchor lies at or below held_from");
        Located::Anchored { slot, state }
    }
}

/// The accepted writes the fold holds, in order: each write's first seq and where it lies.
/// Writes are accepted at the tail and forgotten from the head, so both seqs and slots grow
/// along the queue and every lookup is a binary search.
#[derive(Clone, Debug, Default)]
struct Positions {
    writes: VecDeque<(Seq, Position)>,
}

impl Positions {
    fn push(&mut self, seq: Seq, position: Position) {
        assert!(
            self.writes.back().is_none_or(|(s, p)| *s < seq && p.slot < position.slot),
            "positions are appended in seq and slot order"
        );
        self.writes.push_back((seq, position));
    }

    /// True when the window holds exactly `records` at `[seq, seq + records.len())`, each record
    /// in a write whose records `held` gives (`None`: a write of another writer). The range
    /// may start inside one write and span several: a batch written as part of a larger one,
    /// or over several, is recognised as written (docs/decisions.md, "Duplicate by range").
    fn holds<'a>(&self, seq: Seq, records: &[bytes::Bytes], held: impl Fn(Slot) -> Option<&'a [bytes::Bytes]>) -> bool {
        let Some(first) = self.writes.partition_point(|(s, _)| *s <= seq).checked_sub(1) else { return false };
        let (mut at, mut rest) = (seq, records);
        for (start, p) in self.writes.range(first..) {
            if rest.is_empty() {
                break;
            }
            let Some(write) = held(p.slot) else { return false };
            let from = at.0.checked_sub(start.0).and_then(|o| usize::try_from(o).ok());
            let Some(from) = from.filter(|&o| o < write.len()) else { return false };
            let n = (write.len() - from).min(rest.len());
            if write[from..from + n] != rest[..n] {
                return false;
            }
            (at, rest) = (at.plus(n as u64), &rest[n..]);
        }
        !records.is_empty() && rest.is_empty()
    }

    /// The last write starting at or below `seq`.
    fn at_or_below(&self, seq: Seq) -> Option<(Seq, &Position)> {
        let i = self.writes.partition_point(|(s, _)| *s <= seq);
        let (start, p) = self.writes.get(i.checked_sub(1)?)?;
        Some((*start, p))
    }

    fn forget_below(&mut self, floor: Slot) {
        drop(self.drain_below(floor));
    }

    /// Takes the writes in slots below `floor` out, oldest first.
    ///
    /// Counted from the front, not searched: a voter evicts after every round, almost always
    /// none or a few writes, and a search of the whole window cost a node thread a seventh of
    /// its time at 64 busy journals (each probe a cache miss: a position holds a state).
    fn drain_below(&mut self, floor: Slot) -> impl Iterator<Item = (Seq, Position)> + '_ {
        let n = self.writes.iter().take_while(|(_, p)| p.slot < floor).count();
        self.writes.drain(..n)
    }

    fn first_seq(&self) -> Option<Seq> {
        self.writes.front().map(|(s, _)| *s)
    }
}

/// The exact positions of the newest writes evicted from the window, in order; the last ends
/// where the window's first write starts. Kept as runs: writes in consecutive slots that each
/// hold the same number of records are one entry (a steady writer's whole history is one), so
/// the bound counts entries, not writes, and a run of one write is the worst case. Pushing past
/// the bound forgets the oldest run (reads there re-fold from an anchor).
#[derive(Clone, Debug, Default)]
struct Evicted {
    runs: VecDeque<Run>,
}

/// Writes `k` in `0..writes` at slot `slot + k`, positions `[seq + k·count, seq + (k+1)·count)`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Run {
    seq: Seq,
    slot: Slot,
    writes: u32,
    count: u32,
}

impl Run {
    /// The position after the run's last write.
    fn end_seq(&self) -> Seq {
        self.seq.plus(u64::from(self.writes) * u64::from(self.count))
    }

    /// The slot after the run's last write.
    fn end_slot(&self) -> Slot {
        Slot(self.slot.0 + u64::from(self.writes))
    }

    /// The run's write `k`: its first position and its slot.
    fn write(&self, k: u32) -> (Seq, Slot) {
        (self.seq.plus(u64::from(k) * u64::from(self.count)), Slot(self.slot.0 + u64::from(k)))
    }
}

impl Evicted {
    /// A write of `count` records (at least one) from `seq` at `slot`, past every write held.
    fn push(&mut self, seq: Seq, slot: Slot, count: u64, max: usize) {
        assert!(
            self.runs.back().is_none_or(|r| r.end_seq() <= seq && r.end_slot() <= slot),
            "evicted writes come in seq and slot order"
        );
        let count = u32::try_from(count).expect("a write's records fit a u32");
        assert!(count > 0, "an accepted write holds a record");
        if max == 0 {
            return;
        }
        if let Some(last) = self.runs.back_mut()
            && (last.end_seq(), last.end_slot(), last.count) == (seq, slot, count)
            && last.writes < u32::MAX
        {
            last.writes += 1;
            return;
        }
        if self.runs.len() >= max {
            self.runs.pop_front();
        }
        self.runs.push_back(Run { seq, slot, writes: 1, count });
    }

    /// The write holding `seq`, as (run, write within it), when `seq` lies at or past the
    /// first write kept (the caller knows it lies below the window).
    fn holding(&self, seq: Seq) -> Option<(usize, u32)> {
        let i = self.runs.partition_point(|r| r.seq <= seq).checked_sub(1)?;
        let r = &self.runs[i];
        let k = u32::try_from((seq.0 - r.seq.0) / u64::from(r.count)).unwrap_or(u32::MAX).min(r.writes - 1);
        Some((i, k))
    }

    /// The write `k` of run `i`: its first position and slot.
    fn write(&self, (i, k): (usize, u32)) -> (Seq, Slot) {
        self.runs[i].write(k)
    }

    /// The write after write `k` of run `i`, if one is kept.
    fn next(&self, (i, k): (usize, u32)) -> Option<(usize, u32)> {
        if k + 1 < self.runs[i].writes { Some((i, k + 1)) } else { (i + 1 < self.runs.len()).then_some((i + 1, 0)) }
    }

    fn forget_below(&mut self, floor: Slot) {
        while let Some(first) = self.runs.front_mut() {
            if first.end_slot() <= floor {
                self.runs.pop_front();
                continue;
            }
            if first.slot < floor {
                let k = u32::try_from(floor.0 - first.slot.0).expect("inside the run");
                let (seq, slot) = first.write(k);
                *first = Run { seq, slot, writes: first.writes - k, count: first.count };
            }
            break;
        }
    }
}

/// The verdict of a write that takes `[seq, seq + count)` of a journal whose view was `before`.
fn accepted(seq: Seq, count: u64, before: JournalView) -> Outcome {
    Outcome::Accepted { seq, count, view: JournalView { next_seq: seq.plus(count), ..before } }
}

#[cfg(test)]
mod tests {
    //! One test per rule of the fold, each named by the claim it checks.

    use std::collections::BTreeMap;

    use bytes::Bytes;

    use super::{Fold, Judged, Located};
    use crate::ids::{LeaderUuid, Seq, Slot};
    use crate::journal::types::{Command, Control, Entry, JournalState, JournalView, Outcome, WriterMode};

    /// A write's verdict and where it landed, its view aside: the fold itself asserts every
    /// view it reports (`check_transition`).
    fn verdict_at(o: Outcome) -> (&'static str, Seq, u64) {
        match o {
            Outcome::Accepted { seq, count, .. } => ("accepted", seq, count),
            Outcome::Duplicate { seq, count, .. } => ("duplicate", seq, count),
            other => panic!("expected a write's acknowledgement, got {other:?}"),
        }
    }

    /// A fold and the retained log it looks retries up in, as a learner holds them.
    struct Book {
        fold: Fold,
        log: BTreeMap<Slot, Command>,
    }

    impl Book {
        fn new(mode: WriterMode) -> Book {
            Book::from_base(mode, JournalState::default(), Slot(0))
        }

        fn from_base(mode: WriterMode, base: JournalState, slot: Slot) -> Book {
            Book { fold: Fold::new(mode, base, slot), log: BTreeMap::new() }
        }

        fn judge(&mut self, command: Command) -> Judged {
            let slot = self.fold.next_slot();
            self.log.insert(slot, command.clone());
            let log = &self.log;
            self.fold.apply(slot, &command, |s| log.get(&s).and_then(Command::entry))
        }

        fn apply(&mut self, command: Command) -> Outcome {
            let judged = self.judge(command);
            assert!(!judged.blind, "a fold that saw every write never judges blind");
            judged.outcome
        }

        fn state(&self) -> JournalState {
            *self.fold.state()
        }

        fn view(&self) -> JournalView {
            self.fold.state().view()
        }

        /// Compacts as the learner does after a trim: drops the slots below the compaction point.
        fn compact(&mut self) -> Slot {
            let (floor, sealed) = self.fold.compaction_point().unwrap_or((self.fold.next_slot(), *self.fold.state()));
            self.log.retain(|s, _| *s >= floor);
            self.fold.forget_below(floor, sealed);
            floor
        }
    }

    fn u(n: u128) -> LeaderUuid {
        LeaderUuid::new(n).expect("non-zero")
    }

    fn recs(tag: &str, n: usize) -> Vec<Bytes> {
        (0..n).map(|i| Bytes::from(format!("{tag}{i}"))).collect()
    }

    fn write(leader: Option<LeaderUuid>, seq: u64, records: Vec<Bytes>) -> Command {
        Command::Write(Entry { leader, seq: Seq(seq), records })
    }

    fn w(leader: LeaderUuid, seq: u64, records: Vec<Bytes>) -> Command {
        write(Some(leader), seq, records)
    }

    fn set_leader(new: LeaderUuid, old: Option<LeaderUuid>) -> Command {
        Command::Control(Control::SetLeader { new, old })
    }

    fn truncate(leader: Option<LeaderUuid>, up_to: u64) -> Command {
        Command::Control(Control::Truncate { leader, up_to: Seq(up_to) })
    }

    const NOOP: Command = Command::Control(Control::Noop);

    fn view(leader: Option<LeaderUuid>, first: u64, next: u64) -> JournalView {
        JournalView { leader, first_seq: Seq(first), next_seq: Seq(next) }
    }

    /// A single-writer journal led by `a` holding `[0,3)` in "x" and `[3,5)` in "y".
    fn led_by_a_with_two_writes() -> Book {
        let mut b = Book::new(WriterMode::Single);
        assert!(matches!(b.apply(set_leader(u(0xa), None)), Outcome::Won(_)));
        assert_eq!(verdict_at(b.apply(w(u(0xa), 0, recs("x", 3)))), ("accepted", Seq(0), 3));
        assert_eq!(verdict_at(b.apply(w(u(0xa), 3, recs("y", 2)))), ("accepted", Seq(3), 2));
        b
    }

    // ---- single-writer Write, rule by rule, in order ----

    #[test]
    fn a_write_below_first_seq_is_truncated_even_when_it_is_a_byte_identical_retry() {
        let mut b = led_by_a_with_two_writes();
        assert!(matches!(b.apply(truncate(Some(u(0xa)), 1)), Outcome::Trimmed(_)));
        let v = view(Some(u(0xa)), 1, 5);
        // Rule 1 comes first: an identical retry of the trimmed write cannot be told apart.
        assert_eq!(b.apply(w(u(0xa), 0, recs("x", 3))), Outcome::Truncated(v));
        // ...as does anything else starting below first_seq, whatever rule 3 would say of it.
        assert_eq!(b.apply(w(u(0xb), 0, vec![])), Outcome::Truncated(v));
        assert_eq!(b.state().next_seq, Seq(5));
    }

    #[test]
    fn a_byte_identical_retry_at_its_own_start_is_a_duplicate_and_moves_nothing() {
        let mut b = led_by_a_with_two_writes();
        let before = b.state();
        assert_eq!(verdict_at(b.apply(w(u(0xa), 0, recs("x", 3)))), ("duplicate", Seq(0), 3));
        assert_eq!(verdict_at(b.apply(w(u(0xa), 3, recs("y", 2)))), ("duplicate", Seq(3), 2));
        assert_eq!(b.state(), before);
    }

    #[test]
    fn a_retry_of_positions_the_writer_already_holds_is_a_duplicate_wherever_the_writes_were_cut() {
        let mut b = led_by_a_with_two_writes();
        let before = b.state();
        let (x, y) = (recs("x", 3), recs("y", 2));
        // A batch the door merged into one write, retried alone: inside, a prefix, a suffix.
        assert_eq!(verdict_at(b.apply(w(u(0xa), 1, x[1..].to_vec()))), ("duplicate", Seq(1), 2));
        assert_eq!(verdict_at(b.apply(w(u(0xa), 0, x[..2].to_vec()))), ("duplicate", Seq(0), 2));
        assert_eq!(verdict_at(b.apply(w(u(0xa), 4, y[1..].to_vec()))), ("duplicate", Seq(4), 1));
        // Batches written apart, retried as one: the range spans both writes.
        let across: Vec<Bytes> = x[2..].iter().chain(&y).cloned().collect();
        assert_eq!(verdict_at(b.apply(w(u(0xa), 2, across))), ("duplicate", Seq(2), 3));
        let whole: Vec<Bytes> = x.iter().chain(&y).cloned().collect();
        assert_eq!(verdict_at(b.apply(w(u(0xa), 0, whole))), ("duplicate", Seq(0), 5));
        assert_eq!(b.state(), before);
    }

    #[test]
    fn a_retry_with_different_bytes_at_a_write_start_is_refused() {
        let mut b = led_by_a_with_two_writes();
        let v = b.view();
        assert_eq!(b.apply(w(u(0xa), 0, recs("z", 3))), Outcome::Refused(v));
        // The batch with one more record runs into the next write's different bytes, or past
        // the tail: not written.
        assert_eq!(b.apply(w(u(0xa), 0, recs("x", 4))), Outcome::Refused(v));
        let past: Vec<Bytes> = recs("y", 3);
        assert_eq!(b.apply(w(u(0xa), 3, past)), Outcome::Refused(v));
        // One record changed inside a range spanning two writes.
        let mut across: Vec<Bytes> = recs("x", 3).into_iter().chain(recs("y", 2)).collect();
        across[4] = Bytes::from("other");
        assert_eq!(b.apply(w(u(0xa), 0, across)), Outcome::Refused(v));
        // The same bytes cut at other record boundaries are a different write.
        assert_eq!(b.apply(w(u(0xa), 3, vec![Bytes::from("y0y1")])), Outcome::Refused(v));
        assert_eq!(b.apply(w(u(0xa), 3, vec![])), Outcome::Refused(v));
    }

    #[test]
    fn a_retry_under_another_uuid_is_refused() {
        let mut b = led_by_a_with_two_writes();
        assert!(matches!(b.apply(set_leader(u(0xb), Some(u(0xa)))), Outcome::Won(_)));
        assert_eq!(verdict_at(b.apply(w(u(0xb), 5, recs("b", 2)))), ("accepted", Seq(5), 2));
        let v = b.view();
        // B leads now, and B's bytes equal A's write at 0, but A wrote it: not B's retry.
        assert_eq!(b.apply(w(u(0xb), 0, recs("x", 3))), Outcome::Refused(v));
        // A range over A's last record and B's first is neither writer's alone.
        let across: Vec<Bytes> = recs("y", 2)[1..].iter().chain(&recs("b", 1)).cloned().collect();
        assert_eq!(b.apply(w(u(0xb), 4, across.clone())), Outcome::Refused(v));
        assert_eq!(b.apply(w(u(0xa), 4, across)), Outcome::Refused(v));
    }

    #[test]
    fn a_write_from_a_uuid_that_is_not_the_leader_is_refused() {
        let mut b = led_by_a_with_two_writes();
        let v = b.view();
        assert_eq!(b.apply(w(u(0xb), 5, recs("b", 1))), Outcome::Refused(v));
        assert_eq!(b.state().next_seq, Seq(5));
    }

    #[test]
    fn a_write_to_a_journal_never_led_is_refused() {
        let mut b = Book::new(WriterMode::Single);
        assert_eq!(b.apply(w(u(0xa), 0, recs("x", 1))), Outcome::Refused(view(None, 0, 0)));
    }

    #[test]
    fn a_write_that_does_not_start_at_next_seq_is_refused() {
        let mut b = led_by_a_with_two_writes();
        let v = b.view();
        assert_eq!(b.apply(w(u(0xa), 6, recs("gap", 1))), Outcome::Refused(v));
        assert_eq!(b.apply(w(u(0xa), 50, recs("gap", 1))), Outcome::Refused(v));
        assert_eq!(b.state().next_seq, Seq(5));
    }

    #[test]
    fn an_empty_batch_from_the_leader_at_next_seq_is_refused() {
        let mut b = led_by_a_with_two_writes();
        let v = b.view();
        assert_eq!(b.apply(w(u(0xa), 5, vec![])), Outcome::Refused(v));
        assert_eq!(b.state().next_seq, Seq(5));
    }

    #[test]
    fn an_accepted_write_advances_next_seq_by_its_count() {
        let mut b = led_by_a_with_two_writes();
        let before = b.state();
        assert_eq!(verdict_at(b.apply(w(u(0xa), 5, recs("z", 4)))), ("accepted", Seq(5), 4));
        assert_eq!(b.state(), JournalState { next_seq: Seq(9), ..before });
    }

    #[test]
    fn a_retry_survives_a_leadership_change() {
        let mut b = led_by_a_with_two_writes();
        assert!(matches!(b.apply(set_leader(u(0xb), Some(u(0xa)))), Outcome::Won(_)));
        assert_eq!(verdict_at(b.apply(w(u(0xa), 3, recs("y", 2)))), ("duplicate", Seq(3), 2));
        // A is superseded all the same: anything new from it is refused.
        assert_eq!(b.apply(w(u(0xa), 5, recs("late", 1))), Outcome::Refused(b.view()));
    }

    #[test]
    fn a_retry_is_truncated_once_a_truncation_passes_its_start() {
        let mut b = led_by_a_with_two_writes();
        // A truncation up to the write's own start keeps it: still a duplicate.
        assert!(matches!(b.apply(truncate(Some(u(0xa)), 3)), Outcome::Trimmed(_)));
        assert_eq!(verdict_at(b.apply(w(u(0xa), 3, recs("y", 2)))), ("duplicate", Seq(3), 2));
        // One past its start trims the start away: the retry is now Truncated, not Duplicate.
        assert!(matches!(b.apply(truncate(Some(u(0xa)), 4)), Outcome::Trimmed(_)));
        assert_eq!(b.apply(w(u(0xa), 3, recs("y", 2))), Outcome::Truncated(view(Some(u(0xa)), 4, 5)));
    }

    // ---- SetLeader ----

    #[test]
    fn set_leader_from_none_wins_on_a_journal_never_led() {
        let mut b = Book::new(WriterMode::Single);
        assert_eq!(b.apply(set_leader(u(0xa), None)), Outcome::Won(view(Some(u(0xa)), 0, 0)));
        assert_eq!(b.state().term, 1);
    }

    #[test]
    fn set_leader_naming_an_old_leader_loses_on_a_journal_never_led() {
        let mut b = Book::new(WriterMode::Single);
        assert_eq!(b.apply(set_leader(u(0xa), Some(u(0xb)))), Outcome::Lost(view(None, 0, 0)));
        assert_eq!(b.state(), JournalState::default());
    }

    #[test]
    fn set_leader_loses_unless_old_is_the_current_leader() {
        let mut b = led_by_a_with_two_writes();
        let before = b.state();
        assert_eq!(b.apply(set_leader(u(0xb), None)), Outcome::Lost(before.view()));
        assert_eq!(b.apply(set_leader(u(0xb), Some(u(0xc)))), Outcome::Lost(before.view()));
        assert_eq!(b.state(), before);
    }

    #[test]
    fn set_leader_to_the_current_leader_loses() {
        let mut b = led_by_a_with_two_writes();
        let before = b.state();
        assert_eq!(b.apply(set_leader(u(0xa), Some(u(0xa)))), Outcome::Lost(before.view()));
        assert_eq!(b.state().term, before.term, "a lost compare-and-set spends no term");
    }

    #[test]
    fn a_won_set_leader_advances_the_term_by_one_and_reports_the_view_after_it() {
        let mut b = led_by_a_with_two_writes();
        let before = b.state();
        assert_eq!(b.apply(set_leader(u(0xb), Some(u(0xa)))), Outcome::Won(view(Some(u(0xb)), 0, 5)));
        assert_eq!(b.state(), JournalState { leader: Some(u(0xb)), term: before.term + 1, ..before });
    }

    #[test]
    fn leadership_may_return_to_a_former_leader() {
        let mut b = led_by_a_with_two_writes();
        assert!(matches!(b.apply(set_leader(u(0xb), Some(u(0xa)))), Outcome::Won(_)));
        assert_eq!(b.apply(set_leader(u(0xa), Some(u(0xb)))), Outcome::Won(view(Some(u(0xa)), 0, 5)));
        assert_eq!(b.state().term, 3);
        assert_eq!(verdict_at(b.apply(w(u(0xa), 5, recs("back", 1)))), ("accepted", Seq(5), 1));
    }

    // ---- Truncate ----

    #[test]
    fn a_truncate_from_the_leader_trims_to_up_to_and_reports_the_view_after_it() {
        let mut b = led_by_a_with_two_writes();
        assert_eq!(b.apply(truncate(Some(u(0xa)), 2)), Outcome::Trimmed(view(Some(u(0xa)), 2, 5)));
        assert_eq!(b.state().first_seq, Seq(2));
    }

    #[test]
    fn a_truncate_from_a_superseded_writer_is_refused_in_place() {
        let mut b = led_by_a_with_two_writes();
        assert!(matches!(b.apply(set_leader(u(0xb), Some(u(0xa)))), Outcome::Won(_)));
        let before = b.state();
        assert_eq!(b.apply(truncate(Some(u(0xa)), 4)), Outcome::TruncateRefused(view(Some(u(0xb)), 0, 5)));
        assert_eq!(b.state(), before);
    }

    #[test]
    fn a_truncate_on_a_journal_never_led_is_refused() {
        let mut b = Book::new(WriterMode::Single);
        assert_eq!(b.apply(truncate(Some(u(0xa)), 0)), Outcome::TruncateRefused(view(None, 0, 0)));
    }

    #[test]
    fn a_truncate_past_the_tail_is_clamped_to_next_seq() {
        let mut b = led_by_a_with_two_writes();
        assert_eq!(b.apply(truncate(Some(u(0xa)), 1_000)), Outcome::Trimmed(view(Some(u(0xa)), 5, 5)));
        // The tail did not move: the next write still lands at 5.
        assert_eq!(verdict_at(b.apply(w(u(0xa), 5, recs("z", 1)))), ("accepted", Seq(5), 1));
    }

    #[test]
    fn a_truncate_below_first_seq_never_lowers_it() {
        let mut b = led_by_a_with_two_writes();
        assert!(matches!(b.apply(truncate(Some(u(0xa)), 4)), Outcome::Trimmed(_)));
        assert_eq!(b.apply(truncate(Some(u(0xa)), 1)), Outcome::Trimmed(view(Some(u(0xa)), 4, 5)));
        assert_eq!(b.state().first_seq, Seq(4));
    }

    #[test]
    fn a_single_writer_truncate_without_a_uuid_is_wrong_mode() {
        let mut b = led_by_a_with_two_writes();
        let before = b.state();
        assert_eq!(b.apply(truncate(None, 4)), Outcome::WrongMode(before.view()));
        assert_eq!(b.state(), before);
    }

    // ---- writer modes ----

    #[test]
    fn a_single_writer_write_without_a_uuid_is_wrong_mode() {
        let mut b = led_by_a_with_two_writes();
        let before = b.state();
        assert_eq!(b.apply(write(None, 5, recs("anon", 1))), Outcome::WrongMode(before.view()));
        assert_eq!(b.state(), before);
    }

    #[test]
    fn a_multi_writer_append_lands_at_next_seq_whatever_seq_says() {
        let mut b = Book::new(WriterMode::Multi);
        assert_eq!(verdict_at(b.apply(write(None, 0, recs("p", 2)))), ("accepted", Seq(0), 2));
        assert_eq!(verdict_at(b.apply(write(None, 77, recs("q", 3)))), ("accepted", Seq(2), 3));
        assert_eq!(verdict_at(b.apply(write(None, 0, recs("r", 1)))), ("accepted", Seq(5), 1));
        assert_eq!(b.state().next_seq, Seq(6));
    }

    #[test]
    fn a_multi_writer_retry_appends_again() {
        let mut b = Book::new(WriterMode::Multi);
        assert_eq!(verdict_at(b.apply(write(None, 0, recs("p", 2)))), ("accepted", Seq(0), 2));
        // At least once: the same bytes at the same seq are appended, never deduplicated.
        assert_eq!(verdict_at(b.apply(write(None, 0, recs("p", 2)))), ("accepted", Seq(2), 2));
    }

    #[test]
    fn a_multi_writer_empty_batch_is_refused() {
        let mut b = Book::new(WriterMode::Multi);
        assert_eq!(verdict_at(b.apply(write(None, 0, recs("p", 2)))), ("accepted", Seq(0), 2));
        assert_eq!(b.apply(write(None, 2, vec![])), Outcome::Refused(view(None, 0, 2)));
        assert_eq!(b.state().next_seq, Seq(2));
    }

    #[test]
    fn a_multi_writer_write_with_a_uuid_is_wrong_mode() {
        let mut b = Book::new(WriterMode::Multi);
        assert_eq!(b.apply(w(u(0xa), 0, recs("p", 1))), Outcome::WrongMode(view(None, 0, 0)));
        assert_eq!(b.state(), JournalState::default());
    }

    #[test]
    fn set_leader_on_a_multi_writer_journal_is_wrong_mode() {
        let mut b = Book::new(WriterMode::Multi);
        assert_eq!(b.apply(set_leader(u(0xa), None)), Outcome::WrongMode(view(None, 0, 0)));
        assert_eq!(b.state(), JournalState::default(), "a multi-writer journal never names a leader");
    }

    #[test]
    fn a_multi_writer_truncate_is_unfenced_and_one_with_a_uuid_is_wrong_mode() {
        let mut b = Book::new(WriterMode::Multi);
        assert!(matches!(b.apply(write(None, 0, recs("p", 4))), Outcome::Accepted { .. }));
        assert_eq!(b.apply(truncate(Some(u(0xa)), 3)), Outcome::WrongMode(view(None, 0, 4)));
        assert_eq!(b.apply(truncate(None, 3)), Outcome::Trimmed(view(None, 3, 4)));
        assert_eq!(b.apply(truncate(None, 9)), Outcome::Trimmed(view(None, 4, 4)), "clamped to next_seq");
    }

    // ---- refusals, noops, slot order ----

    #[test]
    fn every_refusal_spends_its_slot_and_leaves_the_state_bit_identical() {
        let mut b = led_by_a_with_two_writes();
        assert!(matches!(b.apply(truncate(Some(u(0xa)), 1)), Outcome::Trimmed(_)));
        let before = b.state();
        let refusals = [
            (w(u(0xa), 0, recs("x", 3)), Outcome::Truncated(before.view())),
            (w(u(0xa), 4, recs("y", 1)), Outcome::Refused(before.view())),
            (w(u(0xb), 5, recs("b", 1)), Outcome::Refused(before.view())),
            (write(None, 5, recs("n", 1)), Outcome::WrongMode(before.view())),
            (set_leader(u(0xb), Some(u(0xc))), Outcome::Lost(before.view())),
            (truncate(Some(u(0xb)), 4), Outcome::TruncateRefused(before.view())),
        ];
        for (command, expected) in refusals {
            let slot = b.fold.next_slot();
            assert_eq!(b.apply(command.clone()), expected, "{command:?}");
            assert_eq!(b.state(), before, "{command:?} moved nothing");
            assert_eq!(b.fold.next_slot(), slot.next(), "{command:?} spent its slot");
        }
    }

    #[test]
    fn a_noop_decides_its_slot_and_moves_nothing() {
        for mode in [WriterMode::Single, WriterMode::Multi] {
            let mut b = Book::new(mode);
            assert_eq!(b.apply(NOOP), Outcome::Noop);
            assert_eq!(b.state(), JournalState::default());
            assert_eq!(b.fold.next_slot(), Slot(1));
        }
    }

    #[test]
    #[should_panic(expected = "the fold applies slots in order")]
    fn the_fold_refuses_to_apply_a_slot_out_of_order() {
        let mut fold = Fold::new(WriterMode::Single, JournalState::default(), Slot(3));
        let _ = fold.apply(Slot(4), &NOOP, |_| None);
    }

    // ---- compaction and positions ----

    #[test]
    fn the_compaction_point_is_the_write_holding_first_seq_and_the_state_before_it() {
        let mut b = led_by_a_with_two_writes();
        let before_y = JournalState {
            leader: Some(u(0xa)),
            term: 1,
            next_seq: Seq(3),
            first_seq: Seq(0),
            ..JournalState::default()
        };
        assert!(matches!(b.apply(truncate(Some(u(0xa)), 4)), Outcome::Trimmed(_)));
        // "y" at slot 2 holds seq 4; it is the first retained slot, folded from the state before it.
        assert_eq!(b.fold.compaction_point(), Some((Slot(2), before_y)));
    }

    #[test]
    fn the_compaction_point_at_a_write_boundary_is_the_write_starting_there() {
        let mut b = led_by_a_with_two_writes();
        assert!(matches!(b.apply(truncate(Some(u(0xa)), 3)), Outcome::Trimmed(_)));
        assert_eq!(b.fold.compaction_point().map(|(s, st)| (s, st.next_seq)), Some((Slot(2), Seq(3))));
    }

    #[test]
    fn the_compaction_point_is_none_when_every_record_is_trimmed() {
        let mut b = led_by_a_with_two_writes();
        assert!(matches!(b.apply(truncate(Some(u(0xa)), 5)), Outcome::Trimmed(_)));
        assert_eq!(b.fold.compaction_point(), None);
    }

    #[test]
    fn a_fold_restarted_at_the_compaction_point_rejudges_the_retained_log_identically() {
        let mut b = led_by_a_with_two_writes();
        let mut outcomes = vec![b.apply(truncate(Some(u(0xa)), 4))];
        outcomes.push(b.apply(w(u(0xa), 3, recs("y", 2))));
        outcomes.push(b.apply(w(u(0xa), 5, recs("z", 1))));
        let (floor, sealed) = b.fold.compaction_point().expect("seq 4 is held by a write");
        let mut again = Book::from_base(WriterMode::Single, sealed, floor);
        let mut replayed = Vec::new();
        for (slot, command) in b.log.range(floor..) {
            let judged = again.judge(command.clone());
            assert!(!judged.blind, "{slot:?}: the compaction point keeps every position it needs");
            replayed.push(judged.outcome);
        }
        assert_eq!(&replayed[1..], &outcomes[..], "the retained slots after the write at the floor");
        assert_eq!(again.state(), b.state());
    }

    #[test]
    fn a_retry_of_a_retained_write_is_still_a_duplicate_after_compaction() {
        let mut b = led_by_a_with_two_writes();
        assert!(matches!(b.apply(truncate(Some(u(0xa)), 3)), Outcome::Trimmed(_)));
        assert_eq!(b.compact(), Slot(2));
        assert!(!b.log.contains_key(&Slot(1)), "the write at 0 is gone");
        assert_eq!(verdict_at(b.apply(w(u(0xa), 3, recs("y", 2)))), ("duplicate", Seq(3), 2));
        assert_eq!(b.fold.locate(Seq(3)), Located::At { slot: Slot(2), start: Seq(3) });
    }

    #[test]
    fn locate_answers_truncated_below_first_seq_tail_from_next_seq_and_the_write_in_between() {
        let mut b = led_by_a_with_two_writes();
        assert!(matches!(b.apply(truncate(Some(u(0xa)), 1)), Outcome::Trimmed(_)));
        assert_eq!(b.fold.locate(Seq(0)), Located::Truncated);
        assert_eq!(b.fold.locate(Seq(1)), Located::At { slot: Slot(1), start: Seq(0) });
        assert_eq!(b.fold.locate(Seq(2)), Located::At { slot: Slot(1), start: Seq(0) });
        assert_eq!(b.fold.locate(Seq(3)), Located::At { slot: Slot(2), start: Seq(3) });
        assert_eq!(b.fold.locate(Seq(4)), Located::At { slot: Slot(2), start: Seq(3) });
        assert_eq!(b.fold.locate(Seq(5)), Located::Tail);
        assert_eq!(b.fold.locate(Seq(99)), Located::Tail);
    }

    // ---- a fold started from a peer's trim point ----

    /// What a laggard holds after jumping to a peer's trim point at slot 10: a journal led by
    /// `a` retaining `[2, 8)`, none of whose writes it ever saw.
    fn jumped() -> Book {
        let base = JournalState {
            leader: Some(u(0xa)),
            term: 1,
            next_seq: Seq(8),
            first_seq: Seq(2),
            ..JournalState::default()
        };
        Book::from_base(WriterMode::Single, base, Slot(10))
    }

    #[test]
    fn a_fold_started_at_a_trim_point_does_not_hold_the_positions_below_its_base() {
        let mut b = jumped();
        assert_eq!(b.fold.locate(Seq(1)), Located::Truncated);
        assert_eq!(b.fold.locate(Seq(2)), Located::NotHeld);
        assert_eq!(b.fold.locate(Seq(7)), Located::NotHeld);
        assert_eq!(b.fold.locate(Seq(8)), Located::Tail);
        assert!(b.fold.is_blind_at(Seq(2)) && b.fold.is_blind_at(Seq(7)));
        assert!(!b.fold.is_blind_at(Seq(1)) && !b.fold.is_blind_at(Seq(8)));
        assert_eq!(verdict_at(b.judge(w(u(0xa), 8, recs("new", 2))).outcome), ("accepted", Seq(8), 2));
        assert_eq!(b.fold.locate(Seq(9)), Located::At { slot: Slot(10), start: Seq(8) });
        assert_eq!(b.fold.locate(Seq(7)), Located::NotHeld);
    }

    #[test]
    fn a_retry_below_a_trim_point_base_is_judged_blind() {
        let mut b = jumped();
        let before = b.state();
        let judged = b.judge(w(u(0xa), 4, recs("maybe", 2)));
        assert_eq!(judged, Judged { outcome: Outcome::Refused(before.view()), blind: true });
        assert_eq!(b.state(), before);
    }

    #[test]
    fn a_write_below_first_seq_after_a_jump_is_truncated_and_not_blind() {
        let mut b = jumped();
        let judged = b.judge(w(u(0xa), 1, recs("old", 1)));
        assert_eq!(judged, Judged { outcome: Outcome::Truncated(b.view()), blind: false });
    }

    #[test]
    fn a_retry_of_a_write_made_after_a_jump_is_a_sighted_duplicate() {
        let mut b = jumped();
        assert!(matches!(b.judge(w(u(0xa), 8, recs("new", 2))).outcome, Outcome::Accepted { .. }));
        let judged = b.judge(w(u(0xa), 8, recs("new", 2)));
        assert_eq!((verdict_at(judged.outcome), judged.blind), (("duplicate", Seq(8), 2), false));
    }

    /// The index of evicted writes in runs: merged while slots and counts follow on, forgotten
    /// a whole run at a time past its bound, cut inside a run by a floor, and each write found.
    #[test]
    fn evicted_writes_are_kept_as_runs_bounded_by_their_number() {
        use super::Evicted;
        let mut e = Evicted::default();
        for k in 0..5 {
            e.push(Seq(2 * k), Slot(10 + k), 2, 2);
        }
        assert_eq!(e.runs.len(), 1, "five writes of two records in consecutive slots: one run");
        e.push(Seq(10), Slot(16), 2, 2);
        assert_eq!(e.runs.len(), 2, "a slot skipped (a no-op at 15) starts a run");
        assert_eq!(e.write(e.holding(Seq(7)).expect("held")), (Seq(6), Slot(13)));
        assert_eq!(e.write(e.holding(Seq(11)).expect("held")), (Seq(10), Slot(16)));
        e.push(Seq(12), Slot(17), 3, 2);
        assert_eq!(e.runs.len(), 2, "another count starts a run; the oldest run goes whole");
        assert!(e.holding(Seq(9)).is_none(), "below the first write kept");
        assert_eq!(e.write(e.holding(Seq(14)).expect("held")), (Seq(12), Slot(17)));
        let mut e = Evicted::default();
        for k in 0..6 {
            e.push(Seq(3 * k), Slot(k), 3, 1);
        }
        e.forget_below(Slot(4));
        assert_eq!(e.write(e.holding(Seq(12)).expect("held")), (Seq(12), Slot(4)), "cut inside the run");
        assert_eq!(e.next(e.holding(Seq(13)).expect("held")).map(|at| e.write(at)), Some((Seq(15), Slot(5))));
        assert!(e.holding(Seq(11)).is_none());
        e.forget_below(Slot(6));
        assert!(e.runs.is_empty());
        e.push(Seq(30), Slot(40), 1, 0);
        assert!(e.runs.is_empty(), "a bound of 0 keeps none");
    }
}
