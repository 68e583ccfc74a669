//! The acceptor's rules, one test each, calling `Acceptor` directly (no cluster).

use bytes::Bytes;
use paros_core::journal::{Command, Entry};
use paros_core::log::Log;
use paros_core::message::Reported;
use paros_core::{Acceptor, Ballot, LeaderUuid, LogEntry, Message, NodeId, Seq, Slot, WriteOp};

fn ballot(round: u64) -> Ballot {
    Ballot { round, node: NodeId(0x100) }
}

fn write(tag: &str) -> Command {
    Command::Write(Entry { leader: LeaderUuid::new(0xa), seq: Seq(0), records: vec![Bytes::from(tag.to_owned())] })
}

fn accepted_at(round: u64, command: &Command) -> LogEntry {
    LogEntry { ballot: Some(ballot(round)), command: command.clone() }
}

fn learned(command: &Command) -> LogEntry {
    LogEntry { ballot: None, command: command.clone() }
}

/// A log holding `command` accepted at ballot 1 in each of `slots`, above `floor`.
fn log_with(floor: u64, slots: &[u64], command: &Command) -> Log {
    Log::from_durable(Slot(floor), slots.iter().map(|s| (Slot(*s), accepted_at(1, command))).collect())
}

fn entries_of(log: &Log) -> Vec<(Slot, LogEntry)> {
    log.range_from(Slot(0)).map(|(s, e)| (*s, e.clone())).collect()
}

#[test]
fn a_prepare_below_the_promise_is_nacked_and_writes_nothing() {
    let log = log_with(0, &[0, 1], &write("held"));
    let mut acceptor = Acceptor::new(ballot(4));
    let mut writes = Vec::new();
    let reply = acceptor.on_prepare(&log, Slot(0), 0, ballot(3), Slot(0), &mut writes);
    assert_eq!(
        reply,
        Message::Nack { ballot: ballot(3), promised: ballot(4), floor: Slot(0) },
        "the Nack names the promise that refused it"
    );
    assert_eq!(acceptor.promised(), ballot(4), "a refused Prepare leaves the promise where it was");
    assert!(writes.is_empty(), "a refused Prepare writes nothing: {writes:?}");
}

#[test]
fn a_prepare_below_the_floor_is_nacked_with_the_floor_even_at_a_high_ballot() {
    let log = log_with(6, &[6, 7], &write("held"));
    let mut acceptor = Acceptor::new(ballot(1));
    let mut writes = Vec::new();
    for from in [Slot(0), Slot(5)] {
        let reply = acceptor.on_prepare(&log, Slot(6), 0, ballot(50), from, &mut writes);
        assert_eq!(
            reply,
            Message::Nack { ballot: ballot(50), promised: ballot(1), floor: Slot(6) },
            "{from:?} lies below the floor"
        );
    }
    assert_eq!(acceptor.promised(), ballot(1), "a Prepare below the floor promises nothing, however high its ballot");
    assert!(writes.is_empty(), "a Prepare below the floor writes nothing: {writes:?}");

    let reply = acceptor.on_prepare(&log, Slot(6), 0, ballot(50), Slot(6), &mut writes);
    assert!(matches!(reply, Message::Promise { .. }), "a Prepare from the floor itself is promised: {reply:?}");
}

#[test]
fn the_promise_is_written_once_per_raise_and_never_decreases() {
    let mut log = log_with(0, &[], &write("unused"));
    let mut acceptor = Acceptor::new(Ballot::ZERO);
    let mut writes = Vec::new();

    acceptor.on_prepare(&log, Slot(0), 0, ballot(2), Slot(0), &mut writes);
    acceptor.on_prepare(&log, Slot(0), 0, ballot(2), Slot(0), &mut writes);
    assert_eq!(writes, vec![WriteOp::Promise(ballot(2))], "a repeated Prepare at the promise is not written again");

    writes.clear();
    acceptor.on_prepare(&log, Slot(0), 0, ballot(1), Slot(0), &mut writes);
    acceptor.on_accept(&mut log, Slot(0), ballot(1), &[(Slot(0), write("old").into())], &mut writes);
    assert_eq!(acceptor.promised(), ballot(2), "lower ballots never lower the promise");
    assert!(writes.is_empty(), "lower ballots write nothing: {writes:?}");

    acceptor.on_accept(&mut log, Slot(0), ballot(3), &[(Slot(0), write("new").into())], &mut writes);
    acceptor.on_accept(&mut log, Slot(0), ballot(3), &[(Slot(1), write("newer").into())], &mut writes);
    let promises: Vec<&WriteOp> = writes.iter().filter(|w| matches!(w, WriteOp::Promise(_))).collect();
    assert_eq!(promises, vec![&WriteOp::Promise(ballot(3))], "an Accept above the promise raises it, once");
    assert_eq!(acceptor.promised(), ballot(3));
}

#[test]
fn a_promise_reports_values_only_from_the_later_of_from_and_the_chosen_index() {
    let command = write("held");
    let log = log_with(0, &[0, 1, 2, 3, 4, 5], &command);
    let reported = |slots: &[u64]| -> Vec<Reported> {
        slots.iter().map(|s| Reported { slot: Slot(*s), ballot: Some(ballot(1)), command: command.clone() }).collect()
    };
    let mut acceptor = Acceptor::new(Ballot::ZERO);
    let mut writes = Vec::new();

    let reply = acceptor.on_prepare(&log, Slot(3), 0, ballot(2), Slot(1), &mut writes);
    assert_eq!(
        reply,
        Message::Promise {
            ballot: ballot(2),
            from: Slot(1),
            chosen_up_to: Slot(3),
            accepted: reported(&[3, 4, 5]),
            epoch: 0
        },
        "slots below the chosen index are not reported: they are chosen here"
    );
    let reply = acceptor.on_prepare(&log, Slot(3), 0, ballot(3), Slot(5), &mut writes);
    assert_eq!(
        reply,
        Message::Promise {
            ballot: ballot(3),
            from: Slot(5),
            chosen_up_to: Slot(3),
            accepted: reported(&[5]),
            epoch: 0
        },
        "slots below the Prepare's start are not reported"
    );
}

#[test]
fn a_promise_reports_a_slot_known_chosen_with_no_ballot() {
    let chosen = write("chosen");
    let accepted = write("accepted");
    let log = Log::from_durable(Slot(0), vec![(Slot(0), learned(&chosen)), (Slot(1), accepted_at(1, &accepted))]);
    let mut acceptor = Acceptor::new(Ballot::ZERO);
    let reply = acceptor.on_prepare(&log, Slot(0), 0, ballot(2), Slot(0), &mut Vec::new());
    let Message::Promise { accepted: reported, .. } = reply else { panic!("promised: {reply:?}") };
    assert_eq!(
        reported,
        vec![
            Reported { slot: Slot(0), ballot: None, command: chosen },
            Reported { slot: Slot(1), ballot: Some(ballot(1)), command: accepted },
        ],
        "a learned slot is reported without a ballot, an accepted one with its ballot"
    );
}

#[test]
fn an_accept_below_the_promise_is_nacked_and_writes_nothing() {
    let mut log = log_with(2, &[2], &write("held"));
    let before = entries_of(&log);
    let mut acceptor = Acceptor::new(ballot(5));
    let mut writes = Vec::new();
    let reply = acceptor.on_accept(
        &mut log,
        Slot(2),
        ballot(4),
        &[(Slot(2), write("late").into()), (Slot(3), write("late").into())],
        &mut writes,
    );
    assert_eq!(
        reply,
        Message::Nack { ballot: ballot(4), promised: ballot(5), floor: Slot(2) },
        "the Nack names the promise and the floor"
    );
    assert_eq!(entries_of(&log), before, "a refused Accept leaves the log as it was");
    assert!(writes.is_empty(), "a refused Accept writes nothing: {writes:?}");
    assert_eq!(acceptor.promised(), ballot(5));
}

#[test]
fn an_accept_at_the_promise_is_held_persisted_and_acknowledged_with_its_digest() {
    let mut log = Log::default();
    let mut acceptor = Acceptor::new(ballot(5));
    let mut writes = Vec::new();
    let command = write("at-the-promise");
    let reply = acceptor.on_accept(&mut log, Slot(0), ballot(5), &[(Slot(1), command.clone().into())], &mut writes);
    assert_eq!(reply, Message::Accepted { ballot: ballot(5), slots: vec![(Slot(1), command.digest())] });
    assert_eq!(log.get(Slot(1)), Some(&accepted_at(5, &command)), "the command is held at the Accept's ballot");
    assert_eq!(
        writes,
        vec![WriteOp::Accept { slot: Slot(1), ballot: ballot(5), command }],
        "the acceptance is persisted, the unchanged promise is not"
    );
}

#[test]
fn an_accept_at_a_higher_ballot_replaces_a_value_accepted_at_a_lower_one() {
    let mut log = log_with(0, &[3], &write("old"));
    let mut acceptor = Acceptor::new(ballot(1));
    let mut writes = Vec::new();
    let new = write("new");
    let reply = acceptor.on_accept(&mut log, Slot(0), ballot(2), &[(Slot(3), new.clone().into())], &mut writes);
    assert_eq!(reply, Message::Accepted { ballot: ballot(2), slots: vec![(Slot(3), new.digest())] });
    assert_eq!(log.get(Slot(3)), Some(&accepted_at(2, &new)), "the higher ballot's value replaces the lower one's");
    assert!(writes.contains(&WriteOp::Accept { slot: Slot(3), ballot: ballot(2), command: new }), "{writes:?}");
}

#[test]
fn an_accept_below_the_floor_is_acknowledged_without_a_write() {
    let mut log = log_with(4, &[4], &write("held"));
    let before = entries_of(&log);
    let mut acceptor = Acceptor::new(ballot(1));
    let mut writes = Vec::new();
    let proposed = write("compacted");
    let reply = acceptor.on_accept(&mut log, Slot(4), ballot(2), &[(Slot(3), proposed.clone().into())], &mut writes);
    assert_eq!(
        reply,
        Message::Accepted { ballot: ballot(2), slots: vec![(Slot(3), proposed.digest())] },
        "a slot below the floor is chosen and gone: any proposal that passed the ballot check is its value"
    );
    assert_eq!(entries_of(&log), before, "nothing is held below the floor");
    assert_eq!(writes, vec![WriteOp::Promise(ballot(2))], "only the raised promise is written");
}

#[test]
fn a_slot_below_the_chosen_index_keeps_its_command_and_answers_its_digest() {
    let chosen = write("chosen");
    let other = write("other");
    let mut log = log_with(0, &[0, 1], &chosen);
    let mut acceptor = Acceptor::new(ballot(1));
    let mut writes = Vec::new();
    let reply = acceptor.on_accept(&mut log, Slot(2), ballot(3), &[(Slot(1), other.into())], &mut writes);
    assert_eq!(
        reply,
        Message::Accepted { ballot: ballot(3), slots: vec![(Slot(1), chosen.digest())] },
        "the reply names the chosen command"
    );
    assert_eq!(
        log.get(Slot(1)),
        Some(&accepted_at(1, &chosen)),
        "a slot below the chosen index keeps its command and ballot"
    );
    assert!(
        !writes.iter().any(|w| matches!(w, WriteOp::Accept { .. })),
        "nothing is accepted over a chosen slot: {writes:?}"
    );
}

#[test]
fn a_slot_learned_as_chosen_keeps_its_command_and_answers_its_digest() {
    let chosen = write("chosen");
    let other = write("other");
    // Slot 5 is above the chosen index but was learned (held with no ballot).
    let mut log = Log::from_durable(Slot(0), vec![(Slot(5), learned(&chosen))]);
    let mut acceptor = Acceptor::new(ballot(1));
    let mut writes = Vec::new();
    let reply = acceptor.on_accept(&mut log, Slot(2), ballot(3), &[(Slot(5), other.into())], &mut writes);
    assert_eq!(
        reply,
        Message::Accepted { ballot: ballot(3), slots: vec![(Slot(5), chosen.digest())] },
        "the reply names the learned command"
    );
    assert_eq!(log.get(Slot(5)), Some(&learned(&chosen)), "a learned slot keeps its command");
    assert!(
        !writes.iter().any(|w| matches!(w, WriteOp::Accept { .. })),
        "nothing is accepted over a learned slot: {writes:?}"
    );
}

#[test]
fn a_repeated_accept_at_the_same_ballot_is_acknowledged_without_a_second_write() {
    let command = write("once");
    let mut log = Log::default();
    let mut acceptor = Acceptor::new(ballot(2));
    let mut writes = Vec::new();
    let first = acceptor.on_accept(&mut log, Slot(0), ballot(2), &[(Slot(0), command.clone().into())], &mut writes);
    let again = acceptor.on_accept(&mut log, Slot(0), ballot(2), &[(Slot(0), command.clone().into())], &mut writes);
    assert_eq!(first, again, "a re-sent Accept is answered as the first was");
    assert_eq!(again, Message::Accepted { ballot: ballot(2), slots: vec![(Slot(0), command.digest())] });
    assert_eq!(writes.len(), 1, "the value is written once: {writes:?}");
}

#[test]
#[should_panic(expected = "one ballot proposes one command per slot")]
fn a_second_command_for_one_slot_at_one_ballot_is_a_broken_proposer() {
    let mut log = Log::default();
    let mut acceptor = Acceptor::new(ballot(2));
    acceptor.on_accept(&mut log, Slot(0), ballot(2), &[(Slot(0), write("first").into())], &mut Vec::new());
    acceptor.on_accept(&mut log, Slot(0), ballot(2), &[(Slot(0), write("second").into())], &mut Vec::new());
}

#[test]
fn the_watermark_lies_past_every_held_slot_the_floor_and_the_chosen_index() {
    let acceptor = Acceptor::new(ballot(1));
    let command = write("held");
    assert_eq!(acceptor.watermark(&Log::default(), Slot(0), 0), Slot(0), "an empty fresh journal holds nothing");
    assert_eq!(acceptor.watermark(&log_with(0, &[7], &command), Slot(2), 0), Slot(8), "past the highest held slot");
    assert_eq!(acceptor.watermark(&log_with(5, &[], &command), Slot(5), 0), Slot(5), "at least the floor");
    assert_eq!(
        acceptor.watermark(&log_with(9, &[], &command), Slot(0), 0),
        Slot(9),
        "the floor even when the chosen index is lower"
    );
    assert_eq!(acceptor.watermark(&log_with(0, &[3], &command), Slot(10), 0), Slot(10), "at least the chosen index");
    // Held at a ballot of configuration 0, above the chosen prefix, by an acceptor whose walk
    // reached configuration 1: past a stop-sign, never chosen, not counted.
    assert_eq!(acceptor.watermark(&log_with(0, &[2, 7], &command), Slot(3), 1), Slot(3), "an ended epoch's entry");
}
