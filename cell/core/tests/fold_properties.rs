//! Properties of the journal fold over arbitrary command sequences, judged
//! against an independent model of the rules written here from the design, not from the code.

use std::collections::BTreeMap;

use bytes::Bytes;
use paros_core::journal::{
    Command, Control, Entry, Fold, JournalState, JournalView, Judged, Located, Outcome, Voters, WriterMode,
};
use paros_core::{LeaderUuid, NodeId, Seq, Slot};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// The model: the fold's rules read literally, with the whole history kept (no compaction, no blindness).

#[derive(Clone, Debug, Default)]
struct Model {
    leader: Option<LeaderUuid>,
    term: u64,
    next_seq: u64,
    first_seq: u64,
    /// The configuration: 0 and none from creation, then the last `Reconfigure` that followed it.
    epoch: u64,
    voters: Option<Voters>,
    /// Every accepted write, by its start position.
    writes: BTreeMap<u64, (Option<LeaderUuid>, Vec<Bytes>)>,
}

impl Model {
    fn view(&self) -> JournalView {
        JournalView { leader: self.leader, first_seq: Seq(self.first_seq), next_seq: Seq(self.next_seq) }
    }

    fn state(&self) -> JournalState {
        JournalState {
            leader: self.leader,
            term: self.term,
            next_seq: Seq(self.next_seq),
            first_seq: Seq(self.first_seq),
            epoch: self.epoch,
            voters: self.voters,
        }
    }

    fn apply(&mut self, mode: WriterMode, command: &Command) -> Outcome {
        let view = self.view();
        match (mode, command) {
            (_, Command::Control(Control::Noop)) => Outcome::Noop,
            // Rule 1 of docs/reconfiguration.md: only the next epoch, in either mode.
            (_, Command::Control(Control::Reconfigure { epoch, voters })) => {
                if *epoch == self.epoch + 1 {
                    self.epoch = *epoch;
                    self.voters = Some(*voters);
                    Outcome::Reconfigured { epoch: *epoch, view }
                } else {
                    Outcome::StaleEpoch { epoch: self.epoch, view }
                }
            }
            (WriterMode::Single, Command::Write(e)) => {
                let Some(uuid) = e.leader else { return Outcome::WrongMode(view) };
                let seq = e.seq.0;
                if seq < self.first_seq {
                    Outcome::Truncated(view)
                } else if seq < self.next_seq {
                    if self.holds(uuid, seq, &e.records) {
                        Outcome::Duplicate { seq: e.seq, count: e.records.len() as u64, view }
                    } else {
                        Outcome::Refused(view)
                    }
                } else if Some(uuid) != self.leader || seq != self.next_seq || e.records.is_empty() {
                    Outcome::Refused(view)
                } else {
                    self.append(e)
                }
            }
            (WriterMode::Single, Command::Control(Control::SetLeader { new, old })) => {
                if *old == self.leader && Some(*new) != self.leader {
                    self.term += 1;
                    self.leader = Some(*new);
                    Outcome::Won(self.view())
                } else {
                    Outcome::Lost(view)
                }
            }
            (WriterMode::Single, Command::Control(Control::Truncate { leader: None, .. })) => Outcome::WrongMode(view),
            (WriterMode::Single, Command::Control(Control::Truncate { leader, up_to })) => {
                if *leader == self.leader {
                    self.trim(up_to.0)
                } else {
                    Outcome::TruncateRefused(view)
                }
            }
            (WriterMode::Multi, Command::Write(e)) => match e.leader {
                Some(_) => Outcome::WrongMode(view),
                None if e.records.is_empty() => Outcome::Refused(view),
                None => self.append(e),
            },
            (WriterMode::Multi, Command::Control(Control::Truncate { leader: None, up_to })) => self.trim(up_to.0),
            (WriterMode::Multi, Command::Control(_)) => Outcome::WrongMode(view),
        }
    }

    /// Every position of `[seq, seq + records.len())` holds the same record, from a write of
    /// `uuid` (the writes may be cut anywhere).
    fn holds(&self, uuid: LeaderUuid, seq: u64, records: &[Bytes]) -> bool {
        !records.is_empty()
            && records.iter().zip(seq..).all(|(r, at)| {
                self.writes
                    .range(..=at)
                    .next_back()
                    .is_some_and(|(start, (held, rs))| *held == Some(uuid) && rs.get((at - start) as usize) == Some(r))
            })
    }

    fn append(&mut self, e: &Entry) -> Outcome {
        let seq = self.next_seq;
        self.writes.insert(seq, (e.leader, e.records.clone()));
        self.next_seq += e.records.len() as u64;
        Outcome::Accepted { seq: Seq(seq), count: e.records.len() as u64, view: self.view() }
    }

    fn trim(&mut self, up_to: u64) -> Outcome {
        self.first_seq = self.first_seq.max(up_to.min(self.next_seq));
        Outcome::Trimmed(self.view())
    }
}

// ---------------------------------------------------------------------------------------------
// Operations, resolved into commands against the model so every fold sees the same commands.

#[derive(Clone, Copy, Debug)]
enum Mutation {
    None,
    FlipByte,
    OtherUuid,
    DropLast,
    AddOne,
    SplitFirst,
}

#[derive(Clone, Debug)]
enum Op {
    /// A write by uuid `uuid` (0 = unset) at `next_seq + delta`.
    Write {
        uuid: u8,
        delta: i8,
        records: Vec<Vec<u8>>,
    },
    /// A retry of the `pick`-th accepted write, mutated, at its start shifted by `shift`.
    Retry {
        pick: usize,
        mutation: Mutation,
        shift: i8,
    },
    SetLeader {
        new: u8,
        old: u8,
    },
    Truncate {
        uuid: u8,
        up_to: u8,
    },
    Noop,
    /// A `Reconfigure` to the model's epoch plus `skew` (1: the next one; 4: the one before),
    /// voters by `seats`.
    Reconfigure {
        skew: u8,
        seats: Vec<u8>,
    },
    /// Compact as a learner does after a trim: drop the slots below the compaction point.
    Compact,
}

fn uuid(n: u8) -> Option<LeaderUuid> {
    LeaderUuid::new(u128::from(n) << 64 | 0x5eed).filter(|_| n != 0)
}

fn records_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    // A tiny alphabet makes accidental look-alikes common: the fold must tell them apart.
    prop::collection::vec(prop::collection::vec(0u8..2, 0..3), 0..4)
}

fn mutation_strategy() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => Just(Mutation::None),
        1 => Just(Mutation::FlipByte),
        1 => Just(Mutation::OtherUuid),
        1 => Just(Mutation::DropLast),
        1 => Just(Mutation::AddOne),
        1 => Just(Mutation::SplitFirst),
    ]
}

fn shift_strategy() -> impl Strategy<Value = i8> {
    prop_oneof![3 => Just(0i8), 1 => -3i8..=3]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..4, prop_oneof![4 => Just(0i8), 1 => -4i8..=3], records_strategy())
            .prop_map(|(uuid, delta, records)| Op::Write { uuid, delta, records }),
        4 => (any::<usize>(), mutation_strategy(), shift_strategy())
            .prop_map(|(pick, mutation, shift)| Op::Retry { pick, mutation, shift }),
        2 => (1u8..4, 0u8..4).prop_map(|(new, old)| Op::SetLeader { new, old }),
        2 => (0u8..4, any::<u8>()).prop_map(|(uuid, up_to)| Op::Truncate { uuid, up_to }),
        1 => Just(Op::Noop),
        1 => (prop_oneof![3 => Just(1u8), 1 => 0u8..5], prop::collection::btree_set(1u8..9, 1..6))
            .prop_map(|(skew, seats)| Op::Reconfigure { skew, seats: seats.into_iter().collect() }),
        1 => Just(Op::Compact),
    ]
}

fn mode_strategy() -> impl Strategy<Value = WriterMode> {
    prop_oneof![3 => Just(WriterMode::Single), 1 => Just(WriterMode::Multi)]
}

/// The command an op stands for, given the model so far; `None` for `Compact`.
/// Also says whether the command is an unmutated retry at its own start.
fn resolve(op: &Op, model: &Model) -> Option<(Command, bool)> {
    let at = |delta: i64| Seq(model.next_seq.saturating_add_signed(delta));
    let command = match op {
        Op::Write { uuid: n, delta, records } => {
            let records = records.iter().map(|r| Bytes::from(r.clone())).collect();
            (Command::Write(Entry { leader: uuid(*n), seq: at(i64::from(*delta)), records }), false)
        }
        Op::Retry { pick, mutation, shift } => {
            if model.writes.is_empty() {
                return Some((Command::Control(Control::Noop), false));
            }
            let (start, (leader, records)) = model.writes.iter().nth(pick % model.writes.len()).expect("picked");
            let mut e = Entry {
                leader: *leader,
                seq: Seq(start.saturating_add_signed(i64::from(*shift))),
                records: records.clone(),
            };
            match mutation {
                Mutation::None => {}
                Mutation::FlipByte => {
                    let first = e.records[0].to_vec();
                    e.records[0] = Bytes::from(if first.is_empty() {
                        vec![9]
                    } else {
                        [&[first[0] ^ 0x80][..], &first[1..]].concat()
                    });
                }
                Mutation::OtherUuid => {
                    e.leader = match e.leader {
                        None => uuid(1),
                        Some(l) => uuid((((l.get() >> 64) as u8) % 3) + 1),
                    };
                }
                Mutation::DropLast => {
                    e.records.pop();
                }
                Mutation::AddOne => e.records.push(Bytes::from_static(b"extra")),
                Mutation::SplitFirst => {
                    let first = e.records.remove(0);
                    let half = first.len() / 2;
                    e.records.insert(0, first.slice(half..));
                    e.records.insert(0, first.slice(..half));
                }
            }
            let own = matches!(mutation, Mutation::None) && *shift == 0;
            (Command::Write(e), own)
        }
        Op::SetLeader { new, old } => {
            (Command::Control(Control::SetLeader { new: uuid(*new).expect("set"), old: uuid(*old) }), false)
        }
        Op::Truncate { uuid: n, up_to } => {
            // Mostly near the retained range, sometimes past the tail.
            let up_to = Seq(model.first_seq + u64::from(*up_to) % (model.next_seq - model.first_seq + 3));
            (Command::Control(Control::Truncate { leader: uuid(*n), up_to }), false)
        }
        Op::Noop => (Command::Control(Control::Noop), false),
        Op::Reconfigure { skew, seats } => {
            let voters =
                Voters::new(&seats.iter().map(|s| NodeId(u64::from(*s))).collect::<Vec<_>>()).expect("distinct");
            // The next epoch, the one in force, one skipped ahead, or an earlier one.
            let epoch = if *skew == 4 { model.epoch.saturating_sub(1) } else { model.epoch + u64::from(*skew) };
            (Command::Control(Control::Reconfigure { epoch, voters }), false)
        }
        Op::Compact => return None,
    };
    Some(command)
}

// ---------------------------------------------------------------------------------------------
// A fold under test, with the retained log it looks retries up in.

#[derive(Clone, Debug)]
struct Book {
    fold: Fold,
    log: BTreeMap<Slot, Command>,
    /// The floor and the sealed state below it, as the last compaction wrote them.
    floor: Slot,
    sealed: JournalState,
}

impl Book {
    fn new(mode: WriterMode, base: JournalState, slot: Slot) -> Book {
        Book { fold: Fold::new(mode, base, slot), log: BTreeMap::new(), floor: slot, sealed: base }
    }

    fn apply(&mut self, command: &Command) -> Judged {
        let slot = self.fold.next_slot();
        self.log.insert(slot, command.clone());
        let log = &self.log;
        self.fold.apply(slot, command, |s| log.get(&s).and_then(Command::entry))
    }

    /// The learner's compaction: never when the new first_seq lies where this fold is blind.
    fn compact(&mut self) {
        if self.fold.is_blind_at(self.fold.state().first_seq) {
            return;
        }
        let (floor, sealed) = self.fold.compaction_point().unwrap_or((self.fold.next_slot(), *self.fold.state()));
        assert!(floor >= self.floor, "a compaction never lowers the floor");
        self.log.retain(|s, _| *s >= floor);
        self.fold.forget_below(floor, sealed);
        self.floor = floor;
        self.sealed = sealed;
    }

    /// A fold rebuilt from the floor and sealed state, replaying the retained log.
    fn restarted(&self) -> (Book, Vec<(Slot, Judged)>) {
        let mut again = Book::new(self.fold.mode(), self.sealed, self.floor);
        let judged = self.log.iter().map(|(slot, command)| (*slot, again.apply(command))).collect();
        (again, judged)
    }
}

fn assert_step_invariants(before: &JournalState, after: &JournalState, outcome: &Outcome, mode: WriterMode) {
    assert!(after.first_seq <= after.next_seq, "first_seq ≤ next_seq: {after:?}");
    assert_eq!(after.leader.is_some(), after.term > 0, "a leader exists iff term > 0: {after:?}");
    assert!(after.term >= before.term && after.next_seq >= before.next_seq && after.first_seq >= before.first_seq);
    assert!(after.leader == before.leader || after.term > before.term, "the leader changes only with a term increase");
    if matches!(outcome, Outcome::Won(_)) {
        assert_eq!(after.term, before.term + 1);
    } else {
        assert_eq!(after.term, before.term, "only a won SetLeader moves the term");
    }
    if mode == WriterMode::Multi {
        assert_eq!((after.leader, after.term), (None, 0));
    }
}

/// A fold that started above the journal's first slot (a restart from its seal, or a trim-point
/// jump) judges like the complete fold, except where it says it is blind: there it refuses a
/// retry the complete fold may have judged a duplicate.
fn assert_same_or_blind(judged: &Judged, expected: &Outcome, before: &JournalState, what: &str) {
    if judged.blind {
        assert_eq!(judged.outcome, Outcome::Refused(before.view()), "{what}: a blind verdict is a refusal");
        assert!(
            matches!(expected, Outcome::Duplicate { .. } | Outcome::Refused(_)),
            "{what}: blind where the complete fold said {expected:?}"
        );
    } else {
        assert_eq!(judged.outcome, *expected, "{what}");
    }
}

fn is_refusal(o: &Outcome) -> bool {
    matches!(
        o,
        Outcome::Refused(_)
            | Outcome::Truncated(_)
            | Outcome::WrongMode(_)
            | Outcome::Lost(_)
            | Outcome::TruncateRefused(_)
            | Outcome::StaleEpoch { .. }
    )
}

/// Runs `ops` through the model and two independent folds, checking every step.
/// Returns the commands with the model's verdicts and the states before each.
fn run(mode: WriterMode, ops: &[Op]) -> Vec<(Command, Outcome, JournalState)> {
    let mut model = Model::default();
    let mut one = Book::new(mode, JournalState::default(), Slot(0));
    let mut two = Book::new(mode, JournalState::default(), Slot(0));
    let mut trace = Vec::new();
    for op in ops {
        let Some((command, _)) = resolve(op, &model) else {
            one.compact();
            two.compact();
            assert_eq!((one.floor, one.sealed), (two.floor, two.sealed), "two folds compact to the same floor");
            continue;
        };
        let before = model.state();
        let expected = model.apply(mode, &command);
        let a = one.apply(&command);
        let b = two.apply(&command);
        assert_eq!(a, b, "two folds judge {command:?} bit for bit the same");
        assert_eq!(one.fold.state(), two.fold.state());
        assert!(!a.blind, "a fold from the journal's start is never blind");
        assert_eq!(a.outcome, expected, "the fold follows the rules for {command:?} from {before:?}");
        assert_eq!(*one.fold.state(), model.state(), "the fold's state is the model's after {command:?}");
        assert_step_invariants(&before, one.fold.state(), &a.outcome, mode);
        if is_refusal(&a.outcome) || matches!(a.outcome, Outcome::Duplicate { .. } | Outcome::Noop) {
            assert_eq!(*one.fold.state(), before, "{:?} leaves the state bit-identical", a.outcome);
        }
        assert_eq!(one.fold.compaction_point(), two.fold.compaction_point());
        trace.push((command, expected, before));
    }
    // A restart from the last compaction re-judges the retained log to the same place.
    let (again, rejudged) = one.restarted();
    assert_eq!(again.fold.state(), one.fold.state(), "a restarted fold reaches the same state");
    let offset = trace.len() - rejudged.len();
    for ((slot, judged), (command, expected, before)) in rejudged.iter().zip(&trace[offset..]) {
        assert_same_or_blind(judged, expected, before, &format!("{slot:?} ({command:?}) re-judged after a restart"));
    }
    for seq in 0..model.next_seq + 2 {
        let located = one.fold.locate(Seq(seq));
        assert_eq!(located, again.fold.locate(Seq(seq)), "a restarted fold locates {seq} the same");
        match located {
            Located::Truncated => assert!(seq < model.first_seq),
            Located::Tail => assert!(seq >= model.next_seq),
            Located::NotHeld => panic!("a fold from the journal's start holds every retained position"),
            Located::At { slot, start } => {
                let entry = one.log[&slot].entry().expect("a write");
                assert!(start.0 <= seq && seq < start.0 + entry.records.len() as u64);
                assert_eq!(model.writes[&start.0].1, entry.records, "the write the model holds at {start:?}");
            }
            Located::Anchored { .. } | Located::Indexed { .. } => {
                panic!("a fold that evicts nothing locates every position exactly")
            }
        }
    }
    trace
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    /// Two folds agree bit for bit; the fold follows the model; the invariants hold; nothing
    /// decreases; a refusal moves nothing; compaction changes no verdict, and a restart from the
    /// seal changes none except where it says it judged blind.
    #[test]
    fn the_fold_follows_the_rules_over_any_command_sequence(
        mode in mode_strategy(),
        ops in prop::collection::vec(op_strategy(), 1..80),
    ) {
        run(mode, &ops);
    }

    /// `Duplicate` is answered for the byte-identical retries at their own start that are still
    /// retained, and for any range the same writer's records fill byte for byte — never for a
    /// mutated or shifted one that the records written do not match.
    #[test]
    fn duplicate_is_answered_only_where_the_writer_s_records_already_stand(
        ops in prop::collection::vec(
            prop_oneof![
                3 => (1u8..3, records_strategy()).prop_map(|(uuid, records)| Op::Write { uuid, delta: 0, records }),
                5 => (any::<usize>(), mutation_strategy(), shift_strategy())
                    .prop_map(|(pick, mutation, shift)| Op::Retry { pick, mutation, shift }),
                1 => (1u8..3, 0u8..3).prop_map(|(new, old)| Op::SetLeader { new, old }),
                1 => (1u8..3, any::<u8>()).prop_map(|(uuid, up_to)| Op::Truncate { uuid, up_to }),
                1 => Just(Op::Compact),
            ],
            1..80,
        ),
    ) {
        let mut model = Model::default();
        let mut book = Book::new(WriterMode::Single, JournalState::default(), Slot(0));
        let mut history: Vec<(Seq, Option<LeaderUuid>, Vec<Bytes>)> = Vec::new();
        for op in &ops {
            let Some((command, own_retry)) = resolve(op, &model) else {
                book.compact();
                continue;
            };
            let before = model.state();
            model.apply(WriterMode::Single, &command);
            let judged = book.apply(&command);
            let Command::Write(e) = &command else { continue };
            match judged.outcome {
                Outcome::Accepted { seq, .. } => history.push((seq, e.leader, e.records.clone())),
                Outcome::Duplicate { seq, count, .. } => {
                    prop_assert_eq!(seq, e.seq);
                    prop_assert_eq!(count, e.records.len() as u64);
                    // Each of its positions holds its record, accepted from the same writer.
                    for (r, at) in e.records.iter().zip(e.seq.0..) {
                        let held = history.iter().rev().find(|(s, _, rs)| s.0 <= at && at < s.0 + rs.len() as u64);
                        prop_assert!(
                            held.is_some_and(|(s, l, rs)| *l == e.leader && rs[(at - s.0) as usize] == *r),
                            "a duplicate names accepted records byte for byte, at {}", at
                        );
                    }
                    prop_assert!(e.seq >= before.first_seq);
                }
                _ => prop_assert!(
                    !(own_retry && e.seq >= before.first_seq),
                    "an unmutated retry at its own retained start is a duplicate, got {:?}", judged.outcome
                ),
            }
        }
    }

    /// A fold started from a trim point (any slot, with the state the slots below folded to)
    /// reaches the same states as the complete fold; its verdicts differ only where it says it
    /// judged blind, and then only `Refused` against a complete `Duplicate` or `Refused`.
    #[test]
    fn a_fold_started_at_a_trim_point_differs_only_where_it_judges_blind(
        mode in mode_strategy(),
        ops in prop::collection::vec(op_strategy(), 1..80),
        cut in any::<prop::sample::Index>(),
    ) {
        let trace = run(mode, &ops);
        prop_assume!(!trace.is_empty());
        let point = cut.index(trace.len());
        let mut jumped = Book::new(mode, trace[point].2, Slot(point as u64));
        for (command, expected, before) in &trace[point..] {
            prop_assert_eq!(jumped.fold.state(), before);
            let judged = jumped.apply(command);
            assert_same_or_blind(&judged, expected, before, &format!("{command:?} after a jump"));
            if judged.blind {
                let Command::Write(e) = command else { panic!("only a write is judged blind") };
                prop_assert!(jumped.fold.is_blind_at(e.seq));
            }
        }
    }
}
