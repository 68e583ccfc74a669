//! The learner's rules, one test each, calling `Learner` directly (no cluster).

use bytes::Bytes;
use paros_core::Served;
use paros_core::journal::{Command, Control, Entry, JournalState, WriterMode};
use paros_core::log::Log;
use paros_core::{
    Ballot, CHOSEN_PERSIST_SLOTS, LeaderUuid, Learner, Life, LogEntry, Message, NodeId, Seq, Slot, Walked, WriteOp,
};

const NOOP: Command = Command::Control(Control::Noop);

fn ballot(round: u64) -> Ballot {
    Ballot { round, node: NodeId(0x100) }
}

fn uuid() -> LeaderUuid {
    LeaderUuid::new(0xa).expect("non-zero")
}

fn write(seq: u64, records: &[&str]) -> Command {
    Command::Write(Entry {
        leader: Some(uuid()),
        seq: Seq(seq),
        records: records.iter().map(|r| Bytes::from((*r).to_owned())).collect(),
    })
}

fn accepted_at(round: u64, command: &Command) -> LogEntry {
    LogEntry { ballot: Some(ballot(round)), command: command.clone() }
}

fn learned(command: &Command) -> LogEntry {
    LogEntry { ballot: None, command: command.clone() }
}

fn fresh(log: &Log) -> Learner {
    Learner::new(WriterMode::Single, log, JournalState::default(), log.floor())
}

/// Walks and returns the slots applied.
fn walk(learner: &mut Learner, log: &mut Log, writes: &mut Vec<WriteOp>) -> Vec<Slot> {
    let mut walked: Vec<Walked> = Vec::new();
    learner.walk(log, writes, &mut walked);
    walked.iter().map(|w| w.slot).collect()
}

fn chosen_writes(writes: &[WriteOp]) -> Vec<Slot> {
    writes
        .iter()
        .filter_map(|w| match w {
            WriteOp::Chosen { up_to } => Some(*up_to),
            _ => None,
        })
        .collect()
}

/// A single-writer history: a leader, two writes (records 0..2 and 2..3), a Truncate up to `up_to`.
fn trimmed_history(up_to: u64) -> Vec<Command> {
    vec![
        Command::Control(Control::SetLeader { new: uuid(), old: None }),
        write(0, &["r0", "r1"]),
        write(2, &["r2"]),
        Command::Control(Control::Truncate { leader: Some(uuid()), up_to: Seq(up_to) }),
    ]
}

/// A log holding `chosen` as learned slots from 0, then one value accepted at ballot 1 after it.
fn learned_then_accepted(chosen: &[Command]) -> Log {
    let mut entries: Vec<(Slot, LogEntry)> =
        chosen.iter().enumerate().map(|(s, c)| (Slot(s as u64), learned(c))).collect();
    entries.push((Slot(chosen.len() as u64), accepted_at(1, &NOOP)));
    Log::from_durable(Slot(0), entries)
}

// ---- what makes a slot chosen here ----

#[test]
fn a_value_accepted_below_the_commits_ballot_is_not_applied_from_the_commit_alone() {
    let mut log = Log::from_durable(Slot(0), vec![(Slot(0), accepted_at(1, &NOOP))]);
    let mut learner = fresh(&log);
    let mut writes = Vec::new();
    learner.on_commit(ballot(2), Slot(1));
    assert!(
        walk(&mut learner, &mut log, &mut writes).is_empty(),
        "a value accepted at ballot 1 may not be the one chosen at ballot 2"
    );
    assert_eq!(learner.chosen_up_to(), Slot(0));
    assert!(learner.is_behind(), "the commit says slot 0 is chosen: we lack its value");
}

#[test]
fn a_value_accepted_at_or_above_the_commits_ballot_is_applied() {
    for round in [2, 3] {
        let mut log = Log::from_durable(Slot(0), vec![(Slot(0), accepted_at(round, &NOOP))]);
        let mut learner = fresh(&log);
        learner.on_commit(ballot(2), Slot(1));
        assert_eq!(
            walk(&mut learner, &mut log, &mut Vec::new()),
            vec![Slot(0)],
            "a value accepted at ballot {round} under a commit at ballot 2 is the chosen one"
        );
        assert!(!learner.is_behind());
    }
}

#[test]
fn a_commit_makes_chosen_only_the_slots_below_it() {
    // Slots 0..3 accepted at ballot 2; slot 4 learned, so the learner knows of chosen slots past
    // the commit and the walk looks beyond it.
    let mut entries: Vec<(Slot, LogEntry)> = (0..3).map(|s| (Slot(s), accepted_at(2, &NOOP))).collect();
    entries.push((Slot(4), learned(&NOOP)));
    let mut log = Log::from_durable(Slot(0), entries);
    let mut learner = fresh(&log);
    learner.on_commit(ballot(2), Slot(2));
    assert_eq!(
        walk(&mut learner, &mut log, &mut Vec::new()),
        vec![Slot(0), Slot(1)],
        "slot 2 is at the commit, not below it"
    );
}

#[test]
fn a_commit_from_a_lower_ballot_does_not_replace_a_higher_ones() {
    let mut log = Log::from_durable(Slot(0), vec![(Slot(0), accepted_at(3, &NOOP)), (Slot(1), accepted_at(2, &NOOP))]);
    let mut learner = fresh(&log);
    learner.on_commit(ballot(3), Slot(1));
    learner.on_commit(ballot(1), Slot(2));
    assert_eq!(
        walk(&mut learner, &mut log, &mut Vec::new()),
        vec![Slot(0)],
        "slot 1's ballot-2 value is judged against the ballot-3 commit"
    );
}

#[test]
fn a_learned_value_is_held_persisted_and_applied_without_a_commit() {
    let merely_accepted = write(0, &["accepted"]);
    let mut log = Log::from_durable(Slot(0), vec![(Slot(0), accepted_at(5, &merely_accepted))]);
    let mut learner = fresh(&log);
    let mut writes = Vec::new();
    learner.learn(&mut log, Slot(0), &NOOP, &mut writes);
    assert_eq!(
        log.get(Slot(0)),
        Some(&learned(&NOOP)),
        "the chosen value replaces one merely accepted, held with no ballot"
    );
    assert_eq!(writes, vec![WriteOp::Learn { slot: Slot(0), command: NOOP }]);
    assert_eq!(
        walk(&mut learner, &mut log, &mut writes),
        vec![Slot(0)],
        "a learned value is chosen without any commit"
    );
}

#[test]
fn a_learned_value_ahead_of_the_prefix_waits_and_marks_the_learner_behind() {
    let mut log = Log::default();
    let mut learner = fresh(&log);
    let mut writes = Vec::new();
    learner.learn(&mut log, Slot(3), &NOOP, &mut writes);
    assert!(walk(&mut learner, &mut log, &mut writes).is_empty(), "slots 0..3 are missing: the walk applies in order");
    assert!(learner.is_behind(), "slot 3 is chosen and our prefix is below it");
    assert_eq!(learner.known_chosen(), Slot(4));
}

#[test]
fn learning_a_slot_already_known_chosen_writes_nothing() {
    let mut log = Log::default();
    let mut learner = fresh(&log);
    let mut writes = Vec::new();
    learner.learn(&mut log, Slot(2), &NOOP, &mut writes);
    learner.learn(&mut log, Slot(2), &NOOP, &mut writes);
    assert_eq!(writes.len(), 1, "a slot held as chosen is not learned twice: {writes:?}");
}

#[test]
fn learning_a_slot_below_the_prefix_or_the_floor_is_ignored() {
    // Slots 0 and 1 were accepted at ballot 2 and applied under a commit.
    let mut log = Log::from_durable(Slot(0), (0..2).map(|s| (Slot(s), accepted_at(2, &NOOP))).collect());
    let mut learner = fresh(&log);
    let mut writes = Vec::new();
    learner.on_commit(ballot(2), Slot(2));
    walk(&mut learner, &mut log, &mut writes);
    assert_eq!(learner.chosen_up_to(), Slot(2));
    learner.learn(&mut log, Slot(1), &write(0, &["late"]), &mut writes);
    assert_eq!(log.get(Slot(1)), Some(&accepted_at(2, &NOOP)), "an applied slot keeps the command it applied");
    assert!(writes.is_empty(), "learning an applied slot writes nothing: {writes:?}");

    let mut log = Log::from_durable(Slot(5), Vec::new());
    let mut learner = fresh(&log);
    learner.learn(&mut log, Slot(3), &NOOP, &mut writes);
    assert!(writes.is_empty(), "learning a slot below the floor writes nothing: {writes:?}");
    assert!(!learner.is_behind());
}

#[test]
fn a_peers_chosen_index_marks_the_learner_behind_without_applying_anything() {
    let mut log = Log::from_durable(Slot(0), vec![(Slot(0), accepted_at(1, &NOOP))]);
    let mut learner = fresh(&log);
    let mut writes = Vec::new();
    learner.note_chosen(Slot(5));
    assert!(learner.is_behind(), "a peer's chosen prefix ahead of ours makes us behind");
    assert_eq!(learner.known_chosen(), Slot(5));
    assert!(
        walk(&mut learner, &mut log, &mut writes).is_empty(),
        "a peer's index makes no value chosen here: only a commit or a learned value does"
    );
    assert!(writes.is_empty(), "{writes:?}");
    learner.note_chosen(Slot(2));
    assert_eq!(learner.known_chosen(), Slot(5), "a lower index never lowers what we know");
}

// ---- the chosen index on disk ----

#[test]
fn the_chosen_index_written_never_passes_the_applied_prefix() {
    // Slots 0..100 accepted at ballot 2, a commit claiming 0..300 chosen.
    let mut log = Log::from_durable(Slot(0), (0..100).map(|s| (Slot(s), accepted_at(2, &NOOP))).collect());
    let mut learner = fresh(&log);
    let mut writes = Vec::new();
    learner.on_commit(ballot(2), Slot(300));
    walk(&mut learner, &mut log, &mut writes);
    assert_eq!(learner.chosen_up_to(), Slot(100));
    assert_eq!(chosen_writes(&writes), vec![Slot(100)], "the index written is the applied prefix, not the commit");
}

#[test]
fn the_chosen_index_is_written_every_chosen_persist_slots() {
    let mut log = Log::default();
    let mut learner = fresh(&log);
    let mut writes = Vec::new();
    for s in 0..200 {
        learner.learn(&mut log, Slot(s), &NOOP, &mut writes);
        walk(&mut learner, &mut log, &mut writes);
        for up_to in chosen_writes(&writes) {
            assert!(up_to <= learner.chosen_up_to(), "the chosen index written never passes the applied prefix");
        }
    }
    let every = CHOSEN_PERSIST_SLOTS;
    assert_eq!(
        chosen_writes(&writes),
        vec![Slot(every), Slot(2 * every), Slot(3 * every)],
        "written once per {every} slots applied"
    );
}

#[test]
fn recovery_walks_the_prefix_chosen_before_the_restart_and_counts_the_index_from_it() {
    let mut log = Log::from_durable(Slot(0), (0..80).map(|s| (Slot(s), accepted_at(1, &NOOP))).collect());
    let mut learner = fresh(&log);
    let (mut writes, mut walked) = (Vec::new(), Vec::new());
    learner.recover(&mut log, Slot(70), &mut writes, &mut walked);
    assert_eq!(
        learner.chosen_up_to(),
        Slot(70),
        "every slot below the persisted index was chosen: walked without a commit"
    );
    assert_eq!(walked.len(), 70);
    for s in 70..70 + CHOSEN_PERSIST_SLOTS + 1 {
        learner.learn(&mut log, Slot(s), &NOOP, &mut writes);
        walk(&mut learner, &mut log, &mut writes);
    }
    assert_eq!(
        chosen_writes(&writes),
        vec![Slot(70 + CHOSEN_PERSIST_SLOTS)],
        "the index counts from the one recovery read from disk"
    );
}

// ---- compaction ----

#[test]
fn compaction_drops_the_slots_below_the_first_retained_write_and_seals_their_state() {
    let mut log = learned_then_accepted(&trimmed_history(2));
    let mut learner = fresh(&log);
    let mut writes = Vec::new();
    walk(&mut learner, &mut log, &mut writes);
    let sealed =
        JournalState { leader: Some(uuid()), term: 1, next_seq: Seq(2), first_seq: Seq(0), ..JournalState::default() };
    assert_eq!(
        writes,
        vec![WriteOp::Truncate { floor: Slot(2), sealed }, WriteOp::Chosen { up_to: Slot(4) }],
        "the floor is the slot of the write holding first_seq, sealed at the state before it, \
         and the index is written with it"
    );
    assert_eq!(log.floor(), Slot(2));
    assert!(log.get(Slot(1)).is_none() && log.get(Slot(2)).is_some(), "the write holding first_seq is retained");
    assert_eq!(learner.state().first_seq, Seq(2));
    assert_eq!(
        learner.serve_catch_up(&log, Slot(0), Life(3), 64, u32::MAX).and_then(Served::message),
        Some(Message::TrimmedTo { from: Slot(0), point: Slot(2), state: sealed, life: Life(3) }),
        "the seal is what a laggard below the floor is told"
    );
}

#[test]
fn compaction_never_passes_the_chosen_prefix() {
    // Truncating every record puts the floor just past the Truncate, which is the prefix end.
    let mut log = learned_then_accepted(&trimmed_history(3));
    let mut learner = fresh(&log);
    let mut writes = Vec::new();
    walk(&mut learner, &mut log, &mut writes);
    assert_eq!(learner.chosen_up_to(), Slot(4));
    assert_eq!(log.floor(), Slot(4), "the floor reaches the chosen prefix and stops there");
    assert_eq!(log.get(Slot(4)), Some(&accepted_at(1, &NOOP)), "a value not yet chosen survives compaction");
    let sealed = *learner.state();
    assert_eq!(writes, vec![WriteOp::Truncate { floor: Slot(4), sealed }, WriteOp::Chosen { up_to: Slot(4) }]);
}

// ---- the trim-point jump ----

#[test]
fn a_jump_to_a_point_at_or_below_the_prefix_is_ignored() {
    let mut log = learned_then_accepted(&[NOOP, NOOP, NOOP]);
    let mut learner = fresh(&log);
    let mut writes = Vec::new();
    walk(&mut learner, &mut log, &mut writes);
    let state = JournalState { leader: None, term: 0, next_seq: Seq(9), first_seq: Seq(9), ..JournalState::default() };
    for point in [Slot(0), Slot(2), Slot(3)] {
        assert!(!learner.jump(&mut log, point, state, &mut writes), "{point:?}: our prefix already reaches it");
    }
    assert!(writes.is_empty(), "an ignored jump writes nothing: {writes:?}");
    assert_eq!((log.floor(), learner.chosen_up_to(), *learner.state()), (Slot(0), Slot(3), JournalState::default()));
}

#[test]
fn a_jump_to_a_point_at_the_floor_is_ignored() {
    let mut log = Log::from_durable(Slot(6), Vec::new());
    let mut learner = fresh(&log);
    let mut writes = Vec::new();
    let state = JournalState { leader: None, term: 0, next_seq: Seq(9), first_seq: Seq(9), ..JournalState::default() };
    assert!(!learner.jump(&mut log, Slot(6), state, &mut writes), "a point at our floor is nothing new");
    assert!(writes.is_empty(), "{writes:?}");
}

#[test]
fn a_jump_moves_floor_prefix_and_fold_base_and_writes_only_the_trim_point() {
    let mut log = learned_then_accepted(&[NOOP, NOOP]);
    log.put(Slot(7), Some(ballot(2)), NOOP.into());
    let mut learner = fresh(&log);
    let mut writes = Vec::new();
    let state =
        JournalState { leader: Some(uuid()), term: 3, next_seq: Seq(9), first_seq: Seq(4), ..JournalState::default() };
    assert!(learner.jump(&mut log, Slot(6), state, &mut writes));
    assert_eq!(
        writes,
        vec![WriteOp::TrimmedTo { point: Slot(6), state }],
        "the jump writes its point and state, and no promise"
    );
    assert_eq!((log.floor(), learner.chosen_up_to(), *learner.state()), (Slot(6), Slot(6), state));
    assert!(
        log.get(Slot(2)).is_none() && log.get(Slot(7)).is_some(),
        "slots below the point are dropped, those above kept"
    );

    writes.clear();
    for s in 6..6 + CHOSEN_PERSIST_SLOTS + 1 {
        learner.learn(&mut log, Slot(s), &NOOP, &mut writes);
        walk(&mut learner, &mut log, &mut writes);
    }
    assert_eq!(
        chosen_writes(&writes),
        vec![Slot(6 + CHOSEN_PERSIST_SLOTS)],
        "the index counts from the point the jump persisted"
    );
}

// ---- serving laggards ----

#[test]
fn catch_up_answers_a_page_of_at_most_slots_max_from_the_requested_slot() {
    let mut log = learned_then_accepted(&[NOOP; 10]);
    let mut learner = fresh(&log);
    walk(&mut learner, &mut log, &mut Vec::new());
    let page = |slots: std::ops::Range<u64>| Message::CatchUpResponse {
        entries: slots.map(|s| (Slot(s), NOOP)).collect(),
        chosen_up_to: Slot(10),
        life: Life(3),
    };
    assert_eq!(
        learner.serve_catch_up(&log, Slot(2), Life(3), 3, u32::MAX).and_then(Served::message),
        Some(page(2..5)),
        "three slots from slot 2, and where our prefix ends"
    );
    assert_eq!(
        learner.serve_catch_up(&log, Slot(8), Life(3), 64, u32::MAX).and_then(Served::message),
        Some(page(8..10)),
        "a page stops at the prefix end"
    );
    assert_eq!(
        learner.serve_catch_up(&log, Slot(10), Life(3), 64, u32::MAX).and_then(Served::message),
        Some(page(10..10)),
        "nothing newer: an empty page that says so"
    );
}

/// A journal of large records answers a laggard in pages a bus can carry: past the first
/// slot (which always goes, however large), no more than `bytes_max` record bytes.
#[test]
fn catch_up_answers_at_most_bytes_max_of_records_past_the_first_slot() {
    let write = |n: usize| {
        Command::Write(paros_core::journal::Entry {
            leader: None,
            seq: paros_core::Seq(0),
            records: vec![bytes::Bytes::from(vec![7u8; n])],
        })
    };
    let chosen = [write(300), write(100), write(100), write(100), NOOP];
    let mut log = learned_then_accepted(&chosen);
    let mut learner = fresh(&log);
    walk(&mut learner, &mut log, &mut Vec::new());
    let slots = |m: Option<Message>| match m {
        Some(Message::CatchUpResponse { entries, .. }) => entries.iter().map(|(s, _)| s.0).collect::<Vec<_>>(),
        other => panic!("a catch-up page, not {other:?}"),
    };
    let served = |from: u64, bytes_max: u32| {
        slots(learner.serve_catch_up(&log, Slot(from), Life(3), 64, bytes_max).and_then(Served::message))
    };
    assert_eq!(served(0, 200), vec![0], "the first slot goes alone, over the bound");
    assert_eq!(served(1, 200), vec![1, 2], "then what fits: 100 + 100");
    assert_eq!(served(1, 250), vec![1, 2], "not a byte over");
    assert_eq!(served(3, 0), vec![3, 4], "a command without records costs nothing");
}

#[test]
fn the_durable_chosen_index_moves_only_when_a_round_that_wrote_it_syncs() {
    let n = CHOSEN_PERSIST_SLOTS as usize + 1;
    let history: Vec<Command> = (0..n).map(|_| NOOP).collect();
    let mut log = learned_then_accepted(&history);
    let mut learner = fresh(&log);
    let mut writes = Vec::new();
    learner.note_chosen(Slot(n as u64));
    walk(&mut learner, &mut log, &mut writes);
    assert_eq!(chosen_writes(&writes), vec![Slot(n as u64)], "the index is written once a period has passed");
    assert_eq!(learner.durable_chosen(), Slot(0), "written is not durable: the round has not synced");

    learner.round_taken(false);
    learner.round_synced();
    assert_eq!(learner.durable_chosen(), Slot(0), "a round the host does not sync makes nothing durable");

    learner.round_taken(true);
    walk(&mut learner, &mut log, &mut writes);
    assert_eq!(learner.durable_chosen(), Slot(0), "still in flight");
    learner.round_synced();
    assert_eq!(learner.durable_chosen(), Slot(n as u64), "the synced round carried the index");
}
