//! The sequential specification of one journal, in either writer mode, written from the design
//! §3 alone (it shares no code with the core's fold). The linearizability checker replays
//! histories against it.
//!
//! - Single-writer: a Write is fenced by the leader uuid and seq-checked (`Truncated`,
//!   `Duplicate`, `Refused`, `Accepted` in that order); SetLeader claims the fence; Truncate
//!   needs the current leader.
//! - Multi-writer: nobody holds a fence and the view never names a leader. A Write without a
//!   uuid appends its records at `next_seq` whatever its `seq` says (an empty one is `Refused`);
//!   a Truncate without a uuid trims; a uuid on either, or any SetLeader, is `WrongMode`.
//! - In single-writer mode a Write or Truncate without a uuid is `WrongMode`: a call shaped for
//!   the other mode is refused before anything else is looked at, and changes nothing.

use bytes::Bytes;
use paros_core::journal::{JournalView, Outcome, WriterMode};
use paros_core::{Consistency, LeaderUuid, ReadAnswer, Seq};

use super::history::OpInput;

/// One accepted batch.
#[derive(Clone, Debug)]
struct Batch {
    start: u64,
    /// `None` for an unfenced append (multi-writer).
    leader: Option<LeaderUuid>,
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
#[derive(Clone, Debug)]
pub struct JournalModel {
    mode: WriterMode,
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

impl Default for JournalModel {
    /// An empty single-writer journal (the default mode).
    fn default() -> Self {
        JournalModel::new(WriterMode::Single)
    }
}

impl JournalModel {
    /// An empty journal of `mode`.
    #[must_use]
    pub fn new(mode: WriterMode) -> JournalModel {
        JournalModel { mode, leader: None, term: 0, first: 0, next: 0, batches: Vec::new(), digest: 0 }
    }

    #[must_use]
    pub fn mode(&self) -> WriterMode {
        self.mode
    }

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

    /// True when every position of `[seq, seq + records.len())` holds the same record, accepted
    /// from a batch `leader` wrote (however the batches were cut): the Duplicate rule.
    fn holds(&self, leader: LeaderUuid, seq: u64, records: &[Bytes]) -> bool {
        !records.is_empty()
            && records.iter().zip(seq..).all(|(r, at)| {
                let i = self.batches.partition_point(|b| b.start <= at);
                i.checked_sub(1)
                    .and_then(|i| self.batches.get(i))
                    .is_some_and(|b| b.leader == Some(leader) && b.records.get((at - b.start) as usize) == Some(r))
            })
    }

    /// The record at position `seq`, if one was ever accepted there.
    fn record(&self, seq: u64) -> Option<&Bytes> {
        let i = self.batches.partition_point(|b| b.start <= seq);
        let b = self.batches.get(i.checked_sub(1)?)?;
        b.records.get((seq - b.start) as usize)
    }

    /// True when `input` changes the state of no journal of this mode: a call shaped for the other
    /// mode, or an empty Write.
    #[must_use]
    pub fn inert(&self, input: &OpInput) -> bool {
        match input {
            OpInput::Write { leader, records, .. } => {
                records.is_empty() || leader.is_some() != (self.mode == WriterMode::Single)
            }
            OpInput::Truncate { leader, .. } => leader.is_some() != (self.mode == WriterMode::Single),
            OpInput::SetLeader { .. } => self.mode == WriterMode::Multi,
            OpInput::Read { .. } => true,
        }
    }

    /// Applies a Write, Truncate or SetLeader; returns the verdict and how to take it back
    /// (`None` when the state did not change).
    ///
    /// # Panics
    /// On a read (reads do not change the state: use [`JournalModel::read_matches`]).
    pub fn apply(&mut self, input: &OpInput) -> (Outcome, Option<Undo>) {
        let view = self.view();
        let fenced = match input {
            OpInput::Write { leader, .. } | OpInput::Truncate { leader, .. } => leader.is_some(),
            OpInput::SetLeader { .. } => true,
            OpInput::Read { .. } => panic!("a read is matched, not applied"),
        };
        if fenced != (self.mode == WriterMode::Single) {
            return (Outcome::WrongMode(view), None);
        }
        match (input, self.mode) {
            (OpInput::Write { leader: Some(leader), seq, records }, WriterMode::Single) => {
                self.fenced_write(*leader, *seq, records)
            }
            (OpInput::Write { leader: None, records, .. }, WriterMode::Multi) => {
                if records.is_empty() {
                    return (Outcome::Refused(view), None);
                }
                let seq = self.next;
                let undo = self.append(None, records);
                (Outcome::Accepted { seq: Seq(seq), count: records.len() as u64, view: self.view() }, Some(undo))
            }
            (OpInput::SetLeader { new, old }, _) => {
                if *old != self.leader || Some(*new) == self.leader {
                    return (Outcome::Lost(view), None);
                }
                let undo = Undo::Claim { leader: self.leader, term: self.term };
                self.leader = Some(*new);
                self.term += 1;
                (Outcome::Won(self.view()), Some(undo))
            }
            (OpInput::Truncate { leader, up_to }, mode) => {
                // Multi-writer: nobody holds a fence, every unfenced Truncate trims.
                if mode == WriterMode::Single && *leader != self.leader {
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
            (OpInput::Write { .. } | OpInput::Read { .. }, _) => {
                unreachable!("a write's shape was matched to the mode above")
            }
        }
    }

    /// A single-writer Write under `leader` at `seq`.
    fn fenced_write(&mut self, leader: LeaderUuid, seq: u64, records: &[Bytes]) -> (Outcome, Option<Undo>) {
        let view = self.view();
        let count = records.len() as u64;
        if seq < self.first {
            return (Outcome::Truncated(view), None);
        }
        if seq < self.next {
            let same = self.holds(leader, seq, records);
            let o = if same { Outcome::Duplicate { seq: Seq(seq), count, view } } else { Outcome::Refused(view) };
            return (o, None);
        }
        if self.leader != Some(leader) || seq != self.next || records.is_empty() {
            return (Outcome::Refused(view), None);
        }
        let undo = self.append(Some(leader), records);
        (Outcome::Accepted { seq: Seq(seq), count, view: self.view() }, Some(undo))
    }

    /// Appends `records` at the tail; returns how to take it back.
    fn append(&mut self, leader: Option<LeaderUuid>, records: &[Bytes]) -> Undo {
        let undo = Undo::Append { next: self.next, digest: self.digest };
        let seq = self.next;
        self.batches.push(Batch { start: seq, leader, records: records.to_vec() });
        self.next += records.len() as u64;
        self.digest =
            mix(mix(mix(self.digest, seq), leader.map_or(0, LeaderUuid::get) as u64), records_digest(records));
        undo
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
        if let Consistency::Reached(s) = consistency
            && self.next < s.0
        {
            return false;
        }
        match answer {
            ReadAnswer::Truncated(v) => from < self.first && *v == self.view(),
            ReadAnswer::Unserved { .. } => true,
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
                let bytes_max =
                    if *max_bytes == 0 { bounds.bytes_max } else { (*max_bytes).min(bounds.bytes_max) } as usize;
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

    fn recs(rs: &[&str]) -> Vec<Bytes> {
        rs.iter().map(|r| Bytes::from((*r).to_owned())).collect()
    }

    fn view(first: u64, next: u64) -> JournalView {
        JournalView { leader: None, first_seq: Seq(first), next_seq: Seq(next) }
    }

    const BOUNDS: PageBounds = PageBounds { records_max: 16, bytes_max: 4096 };

    fn linearizable_read(from: u64) -> OpInput {
        OpInput::Read { from, limit: 0, max_bytes: 0, wait_ticks: 0, consistency: Consistency::Linearizable }
    }

    #[test]
    fn the_model_recognises_a_retry_of_any_range_the_writer_holds() {
        let mut m = JournalModel::default();
        let w = |seq, rs: &[&str]| OpInput::Write { leader: Some(u(1)), seq, records: recs(rs) };
        assert!(matches!(m.apply(&OpInput::SetLeader { new: u(1), old: None }).0, Outcome::Won(_)));
        assert!(matches!(m.apply(&w(0, &["a", "b"])).0, Outcome::Accepted { .. }));
        assert!(matches!(m.apply(&w(2, &["c"])).0, Outcome::Accepted { .. }));
        assert!(matches!(m.apply(&w(1, &["b", "c"])).0, Outcome::Duplicate { seq: Seq(1), count: 2, .. }));
        assert!(matches!(m.apply(&w(0, &["a"])).0, Outcome::Duplicate { seq: Seq(0), count: 1, .. }));
        assert!(matches!(m.apply(&w(1, &["b", "d"])).0, Outcome::Refused(_)), "one record differs");
        assert!(matches!(m.apply(&w(2, &["c", "e"])).0, Outcome::Refused(_)), "runs past the tail");
        assert!(matches!(m.apply(&OpInput::SetLeader { new: u(2), old: Some(u(1)) }).0, Outcome::Won(_)));
        let other = OpInput::Write { leader: Some(u(2)), seq: 1, records: recs(&["b"]) };
        assert!(matches!(m.apply(&other).0, Outcome::Refused(_)), "another writer's records");
    }

    #[test]
    fn the_model_follows_the_fold_rules() {
        let mut m = JournalModel::default();
        let w = |seq, r: &str| OpInput::Write { leader: Some(u(1)), seq, records: vec![Bytes::from(r.to_owned())] };
        assert!(matches!(m.apply(&w(0, "a")).0, Outcome::Refused(_)), "no leader yet");
        assert!(matches!(m.apply(&OpInput::SetLeader { new: u(1), old: None }).0, Outcome::Won(_)));
        assert!(matches!(m.apply(&w(0, "a")).0, Outcome::Accepted { .. }));
        assert!(matches!(m.apply(&w(0, "a")).0, Outcome::Duplicate { .. }));
        assert!(matches!(m.apply(&w(0, "b")).0, Outcome::Refused(_)));
        assert!(matches!(m.apply(&w(2, "c")).0, Outcome::Refused(_)), "a gap is refused");
        let (o, undo) = m.apply(&OpInput::Truncate { leader: Some(u(1)), up_to: 9 });
        assert!(matches!(o, Outcome::Trimmed(v) if v.first_seq == Seq(1)), "clamped to next_seq");
        assert!(matches!(m.apply(&w(0, "a")).0, Outcome::Truncated(_)));
        m.undo(undo.expect("the trim moved first_seq"));
        assert_eq!(m.view().first_seq, Seq(0));
    }

    #[test]
    fn a_single_writer_journal_answers_unfenced_calls_wrong_mode() {
        let mut m = JournalModel::new(WriterMode::Single);
        let append = OpInput::Write { leader: None, seq: 0, records: recs(&["a"]) };
        let (o, undo) = m.apply(&append);
        assert_eq!(o, Outcome::WrongMode(view(0, 0)), "an unfenced append to a journal never led");
        assert!(undo.is_none());
        assert!(matches!(m.apply(&OpInput::SetLeader { new: u(1), old: None }).0, Outcome::Won(_)));
        let before = m.key();
        let led = JournalView { leader: Some(u(1)), first_seq: Seq(0), next_seq: Seq(0) };
        assert_eq!(m.apply(&append).0, Outcome::WrongMode(led), "an unfenced append under a leader");
        assert_eq!(
            m.apply(&OpInput::Truncate { leader: None, up_to: 0 }).0,
            Outcome::WrongMode(led),
            "an unfenced truncate"
        );
        assert_eq!(m.key(), before, "WrongMode changes nothing");
    }

    #[test]
    fn a_multi_writer_journal_appends_at_the_tail_whatever_the_seq() {
        let mut m = JournalModel::new(WriterMode::Multi);
        let append = |seq, rs: &[&str]| OpInput::Write { leader: None, seq, records: recs(rs) };
        assert_eq!(
            m.apply(&append(7, &["a"])).0,
            Outcome::Accepted { seq: Seq(0), count: 1, view: view(0, 1) },
            "seq 7 is ignored: the tail is 0"
        );
        let (o, undo_bc) = m.apply(&append(0, &["b", "c"]));
        assert_eq!(
            o,
            Outcome::Accepted { seq: Seq(1), count: 2, view: view(0, 3) },
            "seq 0 is below the tail: appended at it anyway"
        );
        let (o, undo_a) = m.apply(&append(0, &["a"]));
        assert_eq!(
            o,
            Outcome::Accepted { seq: Seq(3), count: 1, view: view(0, 4) },
            "the same records again are a second append (at-least-once), never a duplicate"
        );
        assert!(m.read_matches(
            &linearizable_read(0),
            &ReadAnswer::Page { from: Seq(0), records: recs(&["a", "b", "c", "a"]), view: view(0, 4) },
            BOUNDS
        ));

        let (o, undo) = m.apply(&append(4, &[]));
        assert_eq!(o, Outcome::Refused(view(0, 4)), "an empty append is refused");
        assert!(undo.is_none());

        let before = m.key();
        for fenced in [
            OpInput::Write { leader: Some(u(1)), seq: 4, records: recs(&["d"]) },
            OpInput::Truncate { leader: Some(u(1)), up_to: 2 },
            OpInput::SetLeader { new: u(1), old: None },
        ] {
            let (o, undo) = m.apply(&fenced);
            assert_eq!(o, Outcome::WrongMode(view(0, 4)), "{fenced:?} is shaped for a single-writer journal");
            assert!(undo.is_none());
        }
        assert_eq!(m.key(), before, "WrongMode changes nothing; nobody ever leads");

        let (o, trim) = m.apply(&OpInput::Truncate { leader: None, up_to: 2 });
        assert_eq!(o, Outcome::Trimmed(view(2, 4)), "an unfenced truncate trims");
        assert_eq!(
            m.apply(&OpInput::Truncate { leader: None, up_to: 1 }).0,
            Outcome::Trimmed(view(2, 4)),
            "first_seq never decreases"
        );
        let (o, undo_d) = m.apply(&append(0, &["d"]));
        assert_eq!(
            o,
            Outcome::Accepted { seq: Seq(4), count: 1, view: view(2, 5) },
            "an append below first_seq still lands at the tail"
        );
        assert!(m.read_matches(&linearizable_read(0), &ReadAnswer::Truncated(view(2, 5)), BOUNDS));
        assert!(m.read_matches(
            &linearizable_read(2),
            &ReadAnswer::Page { from: Seq(2), records: recs(&["c", "a", "d"]), view: view(2, 5) },
            BOUNDS
        ));

        // Taking the changes back in reverse order restores the earlier states exactly.
        m.undo(undo_d.expect("an append changes the state"));
        m.undo(trim.expect("the trim moved first_seq"));
        assert_eq!(m.key(), before);
        m.undo(undo_a.expect("an append changes the state"));
        m.undo(undo_bc.expect("an append changes the state"));
        assert_eq!(m.view(), view(0, 1));
        assert!(m.read_matches(
            &linearizable_read(0),
            &ReadAnswer::Page { from: Seq(0), records: recs(&["a"]), view: view(0, 1) },
            BOUNDS
        ));
    }
}
