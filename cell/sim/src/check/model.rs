//! The sequential specification of one single-writer journal, written from DESIGN.md §3 alone
//! (it shares no code with the core's fold). The linearizability checker replays histories
//! against it.

use bytes::Bytes;
use paros_core::journal::{JournalView, Outcome};
use paros_core::{Consistency, LeaderUuid, ReadAnswer, Seq};

use super::history::OpInput;

/// One accepted batch.
#[derive(Clone, Debug)]
struct Batch {
    start: u64,
    leader: LeaderUuid,
    records: Vec<Bytes>,
}

/// The server's page bounds, which decide how long a page must be.
#[derive(Clone, Copy, Debug)]
pub struct PageBounds {
    pub records_max: u32,
    pub bytes_max: u32,
}

/// What must be restored to take back one applied op.
#[derive(Clone, Copy, Debug)]
pub enum Undo {
    Claim { leader: Option<LeaderUuid>, term: u64 },
    Trim { first: u64 },
    Append { next: u64, digest: u64 },
}

/// A compact identity of the model state, for memoizing the search.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ModelKey {
    leader: u128,
    term: u64,
    first: u64,
    next: u64,
    digest: u64,
}

/// The journal as a sequential object.
#[derive(Clone, Debug, Default)]
pub struct JournalModel {
    leader: Option<LeaderUuid>,
    term: u64,
    first: u64,
    next: u64,
    batches: Vec<Batch>,
    /// A rolling digest of every accepted batch, in order.
    digest: u64,
}

fn mix(h: u64, x: u64) -> u64 {
    let mut z = (h ^ x).wrapping_add(0x9e37_79b9_7f4a_7c15).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z ^= z >> 29;
    z.wrapping_mul(0x94d0_49bb_1331_11eb) ^ (z >> 32)
}

fn records_digest(records: &[Bytes]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for r in records {
        for b in r.iter() {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
        h = mix(h, r.len() as u64);
    }
    h
}

impl JournalModel {
    #[must_use]
    pub fn view(&self) -> JournalView {
        JournalView { leader: self.leader, first_seq: Seq(self.first), next_seq: Seq(self.next) }
    }

    #[must_use]
    pub fn key(&self) -> ModelKey {
        ModelKey {
            leader: self.leader.map_or(0, LeaderUuid::get),
            term: self.term,
            first: self.first,
            next: self.next,
            digest: self.digest,
        }
    }

    fn batch_at(&self, start: u64) -> Option<&Batch> {
        let i = self.batches.partition_point(|b| b.start < start);
        self.batches.get(i).filter(|b| b.start == start)
    }

    /// The record at position `seq`, if one was ever accepted there.
    fn record(&self, seq: u64) -> Option<&Bytes> {
        let i = self.batches.partition_point(|b| b.start <= seq);
        let b = self.batches.get(i.checked_sub(1)?)?;
        b.records.get((seq - b.start) as usize)
    }

    /// Applies a Write, Truncate or SetLeader; returns the verdict and how to take it back
    /// (`None` when the state did not change).
    ///
    /// # Panics
    /// On a read (reads do not change the state: use [`JournalModel::read_matches`]).
    pub fn apply(&mut self, input: &OpInput) -> (Outcome, Option<Undo>) {
        let view = self.view();
        match input {
            OpInput::Write { leader, seq, records } => {
                let (seq, count) = (*seq, records.len() as u64);
                if seq < self.first {
                    return (Outcome::Truncated(view), None);
                }
                if seq < self.next {
                    let same = self.batch_at(seq).is_some_and(|b| b.leader == *leader && b.records == *records);
                    let o = if same { Outcome::Duplicate { seq: Seq(seq), count } } else { Outcome::Refused(view) };
                    return (o, None);
                }
                if self.leader != Some(*leader) || seq != self.next || records.is_empty() {
                    return (Outcome::Refused(view), None);
                }
                let undo = Undo::Append { next: self.next, digest: self.digest };
                self.batches.push(Batch { start: seq, leader: *leader, records: records.clone() });
                self.next += count;
                self.digest = mix(mix(mix(self.digest, seq), leader.get() as u64), records_digest(records));
                (Outcome::Accepted { seq: Seq(seq), count }, Some(undo))
            }
            OpInput::SetLeader { new, old } => {
                if *old != self.leader || Some(*new) == self.leader {
                    return (Outcome::Lost(view), None);
                }
                let undo = Undo::Claim { leader: self.leader, term: self.term };
                self.leader = Some(*new);
                self.term += 1;
                (Outcome::Won(self.view()), Some(undo))
            }
            OpInput::Truncate { leader, up_to } => {
                if self.leader != Some(*leader) {
                    return (Outcome::TruncateRefused(view), None);
                }
                let first = self.first.max((*up_to).min(self.next));
                if first == self.first {
                    return (Outcome::Trimmed(view), None);
                }
                let undo = Undo::Trim { first: self.first };
                self.first = first;
                (Outcome::Trimmed(self.view()), Some(undo))
            }
            OpInput::Read { .. } => panic!("a read is matched, not applied"),
        }
    }

    /// Takes back the op that returned `undo`. Undos are taken back in reverse order.
    pub fn undo(&mut self, undo: Undo) {
        match undo {
            Undo::Claim { leader, term } => {
                self.leader = leader;
                self.term = term;
            }
            Undo::Trim { first } => self.first = first,
            Undo::Append { next, digest } => {
                self.batches.pop().expect("an append is undone after it was applied");
                self.next = next;
                self.digest = digest;
            }
        }
    }

    /// True when `answer` is a correct answer to the read `input` in the current state. An
    /// `at_least(s)` read is answered only from a state with `next_seq ≥ s`.
    #[must_use]
    pub fn read_matches(&self, input: &OpInput, answer: &ReadAnswer, bounds: PageBounds) -> bool {
        let OpInput::Read { from, limit, max_bytes, consistency, .. } = input else { return false };
        let from = *from;
        if let Consistency::AtLeast(s) = consistency
            && self.next < s.0
        {
            return false;
        }
        match answer {
            ReadAnswer::Truncated(v) => from < self.first && *v == self.view(),
            ReadAnswer::Unserved => true,
            ReadAnswer::Page { from: f, records, view } => {
                if f.0 != from || *view != self.view() || from < self.first {
                    return false;
                }
                if from >= self.next {
                    return records.is_empty();
                }
                if records.is_empty() {
                    return false;
                }
                let held = records.iter().enumerate().all(|(i, r)| self.record(from + i as u64) == Some(r));
                if !held || from + records.len() as u64 > self.next {
                    return false;
                }
                let end = from + records.len() as u64;
                if end == self.next {
                    return true;
                }
                // Short of the tail: the page must be full by count or by bytes.
                let limit = if *limit == 0 { bounds.records_max } else { (*limit).min(bounds.records_max) } as usize;
                let bytes_max = if *max_bytes == 0 { bounds.bytes_max } else { (*max_bytes).min(bounds.bytes_max) } as usize;
                let bytes: usize = records.iter().map(Bytes::len).sum();
                let next_len = self.record(end).map_or(0, Bytes::len);
                records.len() == limit || bytes + next_len > bytes_max
            }
        }
    }
}

/// True when an observed verdict is the one the model gives. There is no allowance: a node that
/// judges blind after a trim-point jump answers `NoVerdict` (docs/decisions.md), never a verdict.
#[must_use]
pub fn verdict_matches(model: &Outcome, observed: &Outcome) -> bool {
    model == observed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(n: u128) -> LeaderUuid {
        LeaderUuid::new(n).expect("non-zero")
    }

    #[test]
    fn the_model_follows_the_fold_rules() {
        let mut m = JournalModel::default();
        let w = |seq, r: &str| OpInput::Write { leader: u(1), seq, records: vec![Bytes::from(r.to_owned())] };
        assert!(matches!(m.apply(&w(0, "a")).0, Outcome::Refused(_)), "no leader yet");
        assert!(matches!(m.apply(&OpInput::SetLeader { new: u(1), old: None }).0, Outcome::Won(_)));
        assert!(matches!(m.apply(&w(0, "a")).0, Outcome::Accepted { .. }));
        assert!(matches!(m.apply(&w(0, "a")).0, Outcome::Duplicate { .. }));
        assert!(matches!(m.apply(&w(0, "b")).0, Outcome::Refused(_)));
        assert!(matches!(m.apply(&w(2, "c")).0, Outcome::Refused(_)), "a gap is refused");
        let (o, undo) = m.apply(&OpInput::Truncate { leader: u(1), up_to: 9 });
        assert!(matches!(o, Outcome::Trimmed(v) if v.first_seq == Seq(1)), "clamped to next_seq");
        assert!(matches!(m.apply(&w(0, "a")).0, Outcome::Truncated(_)));
        m.undo(undo.expect("the trim moved first_seq"));
        assert_eq!(m.view().first_seq, Seq(0));
    }
}
