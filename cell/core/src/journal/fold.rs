//! The fold: judges each chosen command against the journal state, in slot order.

use std::collections::BTreeMap;

use super::types::{Command, Control, Entry, JournalState, Outcome, WriterMode};
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
/// Holds the [`JournalState`] and the positions index, which answers "which accepted write
/// starts at this seq" for `Duplicate` and "which slot holds this position" for reads.
#[derive(Clone, Debug)]
pub struct Fold {
    mode: WriterMode,
    state: JournalState,
    positions: BTreeMap<Seq, Position>,
    /// The first position this fold indexes. Below it (and at or above `first_seq`) the fold is
    /// blind: it started from a peer's trim point and never saw those writes.
    held_from: Seq,
    /// The slot the fold applies next.
    next_slot: Slot,
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
}

impl Fold {
    /// A fold that starts at `slot` from `base`, the sealed state of everything below it.
    #[must_use]
    pub fn new(mode: WriterMode, base: JournalState, slot: Slot) -> Fold {
        base.assert_invariants();
        Fold { mode, state: base, positions: BTreeMap::new(), held_from: base.next_seq, next_slot: slot }
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
    pub fn apply<'a>(
        &mut self,
        slot: Slot,
        command: &Command,
        entry_at: impl Fn(Slot) -> Option<&'a Entry>,
    ) -> Judged {
        assert_eq!(slot, self.next_slot, "the fold applies slots in order, without holes");
        let before = self.state;
        let judged = self.judge(command, &entry_at);
        match judged.outcome {
            Outcome::Accepted { seq, count } => {
                assert!(seq == before.next_seq && count > 0, "an accepted write takes the tail");
                self.state.next_seq = seq.plus(count);
                self.positions.insert(seq, Position { slot, count, before });
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
            (WriterMode::Single, Command::Write(e)) => match e.leader {
                None => sighted(Outcome::WrongMode(view)),
                Some(uuid) => self.judge_fenced_write(uuid, e, entry_at),
            },
            (WriterMode::Single, Command::Control(Control::SetLeader { new, old })) => {
                let wins = *old == self.state.leader && Some(*new) != self.state.leader;
                sighted(if wins { Outcome::Won(view) } else { Outcome::Lost(view) })
            }
            (WriterMode::Single, Command::Control(Control::Truncate { leader, up_to: _ })) => {
                match leader {
                    None => sighted(Outcome::WrongMode(view)),
                    Some(_) if *leader == self.state.leader => sighted(Outcome::Trimmed(view)),
                    Some(_) => sighted(Outcome::TruncateRefused(view)),
                }
            }
            (WriterMode::Multi, Command::Write(e)) => sighted(match (e.leader, e.records.is_empty()) {
                (Some(_), _) => Outcome::WrongMode(view),
                (None, true) => Outcome::Refused(view),
                (None, false) => Outcome::Accepted { seq: self.state.next_seq, count: e.count() },
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
            if e.seq < self.held_from {
                return Judged { outcome: Outcome::Refused(view), blind: true };
            }
            let identical = self.positions.get(&e.seq).is_some_and(|p| {
                let held = entry_at(p.slot).expect("an indexed write's slot is retained");
                held.leader == Some(uuid) && held.records == e.records
            });
            return sighted(if identical {
                Outcome::Duplicate { seq: e.seq, count: e.count() }
            } else {
                Outcome::Refused(view)
            });
        }
        if Some(uuid) != self.state.leader || e.seq != self.state.next_seq || e.records.is_empty() {
            return sighted(Outcome::Refused(view));
        }
        sighted(Outcome::Accepted { seq: e.seq, count: e.count() })
    }

    fn check_transition(&self, before: &JournalState, outcome: &Outcome) {
        let after = &self.state;
        after.assert_invariants();
        assert!(after.term >= before.term, "term never decreases");
        assert!(after.next_seq >= before.next_seq, "next_seq never decreases");
        assert!(after.first_seq >= before.first_seq, "first_seq never decreases");
        assert!(after.leader == before.leader || after.term > before.term, "the leader changes only with a term increase");
        match *outcome {
            Outcome::Accepted { seq, count } => {
                assert_eq!((seq, after.next_seq), (before.next_seq, before.next_seq.plus(count)));
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
            Outcome::Refused(v) | Outcome::Truncated(v) | Outcome::WrongMode(v) | Outcome::Lost(v)
            | Outcome::TruncateRefused(v) => {
                assert_eq!(after, before, "a refusal leaves the state bit-identical");
                assert_eq!(v, before.view(), "a refusal names the view it was judged against");
            }
            Outcome::Duplicate { .. } | Outcome::Noop => {
                assert_eq!(after, before, "a duplicate or noop moves nothing");
            }
        }
        if self.mode == WriterMode::Multi {
            assert!(after.leader.is_none() && after.term == 0, "a multi-writer journal never names a leader");
        }
    }

    /// Where a compaction after a trim lands: the slot of the write holding `first_seq` and the
    /// state before it, or `None` when every record is trimmed (the floor is then the slot after
    /// the Truncate, sealed at the current state).
    #[must_use]
    pub fn compaction_point(&self) -> Option<(Slot, JournalState)> {
        let first = self.state.first_seq;
        let (start, p) = self.positions.range(..=first).next_back()?;
        (start.plus(p.count) > first).then_some((p.slot, p.before))
    }

    /// Forgets the positions of writes in slots below `floor` (they were compacted away).
    pub fn forget_below(&mut self, floor: Slot) {
        self.positions.retain(|_, p| p.slot >= floor);
        if let Some((start, _)) = self.positions.iter().next() {
            self.held_from = self.held_from.max(*start);
        } else {
            self.held_from = self.held_from.max(self.state.next_seq);
        }
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
        let (start, p) = self.positions.range(..=seq).next_back().expect("a held position is indexed");
        assert!(start.plus(p.count) > seq, "positions are dense between held_from and next_seq");
        Located::At { slot: p.slot, start: *start }
    }
}
