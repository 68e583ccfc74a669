//! Rules of the acceptor and the learner that cargo-mutants showed no other test pinned down:
//! each test here fails under the mutant named in its doc comment and passes on the real code.

use bytes::Bytes;
use paros_core::Served;
use paros_core::journal::{Command, Control, Digested, Entry, JournalState, WriterMode};
use paros_core::log::Log;
use paros_core::{Acceptor, Ballot, LeaderUuid, Learner, Life, LogEntry, Message, NodeId, Seq, Slot, WriteOp};

fn ballot(round: u64) -> Ballot {
    Ballot { round, node: NodeId(0x100) }
}

fn write(tag: &str) -> Command {
    Command::Write(Entry { leader: LeaderUuid::new(0xa), seq: Seq(0), records: vec![Bytes::from(tag.to_owned())] })
}

const NOOP: Command = Command::Control(Control::Noop);

/// An Accept for the floor slot itself — slot 0 of a fresh journal, or the first slot after a
/// trim-point jump or a truncation of every record — is held (and persisted) before it is
/// acknowledged: only slots *below* the floor are chosen and gone.
///
/// Mutants `acceptor.rs:81:22: replace < with <= / == in Acceptor::on_accept` acknowledged the
/// floor slot without holding it (the simulation's "sent Accepted ... before its disk held that
/// command" fired on every seed; no core test noticed).
#[test]
fn an_accept_at_the_floor_slot_is_held_before_it_is_acknowledged() {
    for floor in [Slot(0), Slot(5)] {
        let mut log = Log::from_durable(floor, Vec::new());
        let mut acceptor = Acceptor::new(ballot(1));
        let mut writes = Vec::new();
        let command = write("at-the-floor");
        let reply = acceptor.on_accept(&mut log, floor, ballot(2), &[(floor, command.clone().into())], &mut writes);

        assert_eq!(reply, Message::Accepted { ballot: ballot(2), slots: vec![(floor, command.digest())] }, "{floor:?}");
        assert_eq!(
            log.get(floor),
            Some(&LogEntry { ballot: Some(ballot(2)), command: command.clone() }),
            "{floor:?}: held"
        );
        assert!(
            writes.contains(&WriteOp::Accept { slot: floor, ballot: ballot(2), command }),
            "{floor:?}: the acceptance is persisted in the same round: {writes:?}"
        );
    }
}

/// Catch-up serves the chosen prefix and nothing past it: the slot at the prefix end may hold a
/// value merely accepted here, which another leader may still replace — a laggard told it is
/// chosen would apply a value that is never chosen.
///
/// Mutant `learner.rs:188:38: replace < with <= in Learner::serve_catch_up` served it.
#[test]
fn catch_up_serves_only_the_chosen_prefix() {
    let accepted_only = write("accepted-not-chosen");
    let mut log = Log::from_durable(
        Slot(0),
        vec![
            (Slot(0), LogEntry { ballot: None, command: NOOP }),
            (Slot(1), LogEntry { ballot: None, command: NOOP }),
            (Slot(2), LogEntry { ballot: Some(ballot(3)), command: accepted_only }),
        ],
    );
    let mut learner = Learner::new(WriterMode::Single, &log, JournalState::default(), Slot(0));
    let (mut writes, mut walked) = (Vec::new(), Vec::new());
    learner.recover(&mut log, Slot(2), &mut writes, &mut walked);
    assert_eq!(learner.chosen_up_to(), Slot(2));

    let served = learner.serve_catch_up(&log, Slot(0), Life(3), 64, u32::MAX).and_then(Served::message);
    assert_eq!(
        served,
        Some(Message::CatchUpResponse {
            entries: vec![(Slot(0), NOOP), (Slot(1), NOOP)],
            chosen_up_to: Slot(2),
            life: Life(3)
        })
    );
    let served = learner.serve_catch_up(&log, Slot(2), Life(3), 64, u32::MAX).and_then(Served::message);
    assert_eq!(
        served,
        Some(Message::CatchUpResponse { entries: Vec::new(), chosen_up_to: Slot(2), life: Life(3) }),
        "nothing chosen from the prefix end on"
    );
}

/// Phase 1 refusals: a Prepare below the floor is answered `Nack` with the floor —
/// never a promise, least of all an empty one — and a Prepare below the promise is answered
/// `Nack`; a Prepare at exactly the promised ballot (a duplicate) is promised again.
///
/// Mutants `acceptor.rs:50:31: replace || with &&` and `acceptor.rs:50:41: replace < with == /
/// <=` in `Acceptor::on_prepare` passed every other test and every simulated seed (the Accept
/// side's ballot check hides them from the safety claims), and so does a hand-made
/// "empty promise below the floor", which the simulation catches but no core test did.
#[test]
fn a_prepare_below_the_floor_or_the_promise_is_refused() {
    let held = write("held");
    let log = Log::from_durable(Slot(4), vec![(Slot(4), LogEntry { ballot: Some(ballot(2)), command: held.clone() })]);
    let chosen_up_to = Slot(4);

    // Below the floor, at a ballot above the promise: refused with the floor, nothing promised.
    let mut acceptor = Acceptor::new(ballot(2));
    let mut writes = Vec::new();
    let reply = acceptor.on_prepare(&log, chosen_up_to, 0, ballot(5), Slot(1), &mut writes);
    assert_eq!(reply, Message::Nack { ballot: ballot(5), promised: ballot(2), floor: Slot(4) });
    assert_eq!(acceptor.promised(), ballot(2), "a refused Prepare promises nothing");
    assert!(writes.is_empty(), "{writes:?}");

    // Below the promise, from the floor: refused, the promise stands.
    let mut acceptor = Acceptor::new(ballot(3));
    let reply = acceptor.on_prepare(&log, chosen_up_to, 0, ballot(2), Slot(4), &mut writes);
    assert_eq!(reply, Message::Nack { ballot: ballot(2), promised: ballot(3), floor: Slot(4) });
    assert_eq!(acceptor.promised(), ballot(3));
    assert!(writes.is_empty(), "{writes:?}");

    // At exactly the promise (a duplicate Prepare): promised again, reporting what it holds.
    let reply = acceptor.on_prepare(&log, chosen_up_to, 0, ballot(3), Slot(4), &mut writes);
    let reported = vec![paros_core::message::Reported { slot: Slot(4), ballot: Some(ballot(2)), command: held }];
    assert_eq!(
        reply,
        Message::Promise { ballot: ballot(3), from: Slot(4), chosen_up_to, accepted: reported, epoch: 0 }
    );
    assert!(writes.is_empty(), "an unchanged promise is not written again: {writes:?}");
}

/// A slot this acceptor already knows chosen keeps its command: learned here (held without a
/// ballot), or below the chosen prefix. An Accept proposing something else there (a confused
/// or stale leader) changes nothing on disk, and the reply names the held command's digest, so
/// the proposer is not credited for its own. A slot merely accepted at an older ballot, at or
/// above the prefix, is replaced as Phase 2 says.
///
/// Mutants of the guard `*slot < chosen_up_to || held.ballot.is_none()` in
/// `Acceptor::on_accept` (`<` → `<=`/`==`/`>`, `||` → `&&`, deleting the `!`-free check)
/// overwrote a chosen slot or kept a replaceable one; no other test noticed.
#[test]
fn a_slot_known_chosen_keeps_its_command_and_a_merely_accepted_one_is_replaced() {
    let chosen = write("chosen");
    let other = write("other");
    // Slots 0..2 are below the chosen prefix (accepted at ballot 1); slot 2 was accepted at
    // ballot 1 and is not known chosen; slot 3 was learned (held without a ballot).
    let held = |c: &Command| LogEntry { ballot: Some(ballot(1)), command: c.clone() };
    let mut log = Log::from_durable(
        Slot(0),
        vec![
            (Slot(0), held(&chosen)),
            (Slot(1), held(&chosen)),
            (Slot(2), held(&chosen)),
            (Slot(3), LogEntry { ballot: None, command: chosen.clone() }),
        ],
    );
    let chosen_up_to = Slot(2);
    let mut acceptor = Acceptor::new(ballot(1));
    let mut writes = Vec::new();
    let entries: Vec<(Slot, Digested)> = (0..4).map(|s| (Slot(s), other.clone().into())).collect();
    let reply = acceptor.on_accept(&mut log, chosen_up_to, ballot(3), &entries, &mut writes);

    let Message::Accepted { ballot: b, slots } = reply else { panic!("accepted: {reply:?}") };
    assert_eq!(b, ballot(3));
    assert_eq!(
        slots,
        vec![
            (Slot(0), chosen.digest()),
            (Slot(1), chosen.digest()),
            (Slot(2), other.digest()),
            (Slot(3), chosen.digest())
        ],
        "known-chosen slots answer with the held command; the merely accepted one takes the new"
    );
    for s in [0, 1] {
        assert_eq!(log.get(Slot(s)), Some(&held(&chosen)), "slot {s} below the prefix is untouched");
    }
    assert_eq!(log.get(Slot(2)), Some(&LogEntry { ballot: Some(ballot(3)), command: other.clone() }));
    assert_eq!(
        log.get(Slot(3)),
        Some(&LogEntry { ballot: None, command: chosen.clone() }),
        "a learned slot is untouched"
    );
    let accepts: Vec<Slot> = writes
        .iter()
        .filter_map(|w| match w {
            WriteOp::Accept { slot, .. } => Some(*slot),
            _ => None,
        })
        .collect();
    assert_eq!(accepts, vec![Slot(2)], "only the replaceable slot is written: {writes:?}");
}
