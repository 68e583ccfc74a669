//! Issue 34 in the fold: machines' incarnations, old identities replaced by new ones, and
//! seat moves recorded as intent (`MoveSeat`) then done (`MoveDone`). Every refusal is typed
//! and changes nothing.

mod common;

use std::collections::BTreeMap;

use common::*;
use paros_core::ids::NodeId;
use paros_registry::placement::{candidates, place};
use paros_registry::{
    Accepted, Command, Directory, Epoch, Incarnation, MoveRefusal, Refusal, Role, SeatMove, Standing, Verdict,
    VoterRefusal,
};

/// Folds `command`, checks it was refused with `want` and that machines and journals are
/// unchanged.
fn refused(book: &mut Book, command: Command, want: Refusal) {
    let before = book.dir.clone();
    let verdict = book.run(command);
    assert_eq!(verdict, Verdict::Refused(want), "the refusal names its reason");
    assert!(before.machines().eq(book.dir.machines()), "machines are unchanged");
    assert!(before.journals().eq(book.dir.journals()), "journals are unchanged");
    for m in before.machines() {
        assert_eq!(before.load(m.id), book.dir.load(m.id), "load is unchanged");
    }
}

fn accepted(book: &mut Book, command: Command) -> Accepted {
    match book.run(command) {
        Verdict::Accepted(a) => a,
        Verdict::Refused(r) => panic!("refused: {r:?}"),
    }
}

/// A formed cell (nodes 1, 2, 3 in zones a, b, c) with nodes 4 (zone a) and 5 (zone b)
/// admitted, and journal 7 of tenant 100 on 1, 2, 3.
fn cell() -> Book {
    let mut b = Book::formed();
    accepted(&mut b, admit(4, Role::Node, "a", 40));
    accepted(&mut b, admit(5, Role::Node, "b", 50));
    accepted(&mut b, create(100, 7, "orders", &[1, 2, 3]));
    b
}

#[test]
fn admit_records_the_incarnation_once_and_refuses_another() {
    let mut b = cell();
    assert_eq!(b.dir.machine(NodeId(4)).and_then(|m| m.incarnation), Some(Incarnation(40)), "recorded");
    let again = accepted(&mut b, admit(4, Role::Node, "c", 40));
    assert_eq!(again, Accepted::MachineRegistered { machine: NodeId(4), updated: true }, "the same store: an update");
    assert_eq!(b.dir.machine(NodeId(4)).map(|m| m.zone.clone()), Some(zone("c")), "its zone moved");
    let foreign =
        Refusal::IncarnationChanged { machine: NodeId(4), recorded: Incarnation(40), offered: Incarnation(41) };
    refused(&mut b, admit(4, Role::Node, "c", 41), foreign);
    // A founder, registered without one, gets its incarnation recorded by its first Admit.
    accepted(&mut b, admit(1, Role::Node, "a", 10));
    assert_eq!(b.dir.machine(NodeId(1)).and_then(|m| m.incarnation), Some(Incarnation(10)), "a founder's, first time");
    // RegisterMachine keeps the incarnation recorded.
    assert!(b.run(register(1, Role::Node, "a")).is_accepted(), "re-registered");
    assert_eq!(b.dir.machine(NodeId(1)).and_then(|m| m.incarnation), Some(Incarnation(10)), "kept");
    refused(
        &mut b,
        admit(1, Role::Replica, "a", 10),
        Refusal::RoleChange { machine: NodeId(1), registered: Role::Node },
    );
}

#[test]
fn a_rejoined_machine_is_recorded_as_both_identities_and_the_old_one_never_gets_a_seat() {
    let mut b = cell();
    let v = accepted(&mut b, rejoin(2, 9, "b", 90));
    assert_eq!(v, Accepted::Rejoined { old: NodeId(2), new: NodeId(9) });
    let old = b.dir.machine(NodeId(2)).expect("the old identity is kept");
    assert_eq!((old.standing, old.replaced_by), (Standing::Retired, Some(NodeId(9))), "retired, marked replaced");
    let new = b.dir.machine(NodeId(9)).expect("the new identity is registered");
    assert_eq!(
        (new.role, new.standing, new.incarnation, new.replaces),
        (Role::Node, Standing::Registered, Some(Incarnation(90)), Some(NodeId(2))),
        "in the old one's role, in service, with its incarnation"
    );
    // No seat: not in a new journal, not as a move's target, not by placement.
    let replaced = VoterRefusal::Replaced { node: NodeId(2), by: NodeId(9) };
    refused(&mut b, create(100, 8, "other", &[1, 2, 4]), Refusal::Voters(replaced.clone()));
    accepted(&mut b, create(100, 8, "other", &[1, 4, 5]));
    refused(&mut b, move_seat(100, 8, 4, 2), Refusal::Move(MoveRefusal::Target(replaced)));
    let eligible: Vec<NodeId> = candidates(&b.dir, &BTreeMap::new()).into_iter().map(|c| c.id).collect();
    assert!(!eligible.contains(&NodeId(2)), "never a placement candidate: {eligible:?}");
    assert_eq!(place(&candidates(&b.dir, &BTreeMap::new()), 5).map(|v| v.contains(&NodeId(2))), Ok(false));
    // Never back under its old id, nor replaced twice, nor under a taken id.
    refused(&mut b, admit(2, Role::Node, "b", 91), Refusal::MachineRetired { machine: NodeId(2) });
    refused(&mut b, register(2, Role::Node, "b"), Refusal::MachineRetired { machine: NodeId(2) });
    refused(&mut b, Command::SetStanding { machine: NodeId(2), standing: Standing::Registered }, {
        Refusal::MachineRetired { machine: NodeId(2) }
    });
    refused(&mut b, rejoin(2, 10, "b", 92), Refusal::AlreadyReplaced { machine: NodeId(2), by: NodeId(9) });
    refused(&mut b, rejoin(3, 4, "c", 93), Refusal::IdentityTaken { machine: NodeId(4) });
    refused(&mut b, rejoin(3, 3, "c", 93), Refusal::IdentityTaken { machine: NodeId(3) });
    refused(&mut b, rejoin(77, 78, "c", 93), Refusal::UnknownMachine { machine: NodeId(77) });
    // Its seat in journal 7 moves to the new identity like any other.
    accepted(&mut b, move_seat(100, 7, 2, 9));
    accepted(&mut b, move_done(100, 7, 1));
    assert_eq!(b.dir.journal(jkey(100, 7)).map(|j| j.voters.to_vec()), Some(vec![NodeId(1), NodeId(9), NodeId(3)]));
    // And so does its seat of the registry journal.
    accepted(&mut b, move_seat(0, 0x4e6, 2, 9));
    accepted(&mut b, move_done(0, 0x4e6, 1));
    assert_eq!(b.dir.load(NodeId(2)), 0, "the old identity holds nothing");
    assert!(b.dir.journals_on(NodeId(2)).next().is_none(), "and is placed nothing");
}

#[test]
fn a_rejoin_through_a_checkpoint_keeps_both_identities() {
    use paros_client::Checkpointable;
    let mut b = cell();
    accepted(&mut b, rejoin(2, 9, "b", 90));
    let restored = Directory::restore(&b.dir.checkpoint()).expect("restores");
    assert_eq!(restored, b.dir, "the same directory");
    assert!(b.dir.checkpoint_v2().is_none(), "format 2 cannot say it");
}

#[test]
fn a_move_is_intent_until_done_then_the_voters_change_at_the_next_epoch() {
    let mut b = cell();
    let key = jkey(100, 7);
    let v = accepted(&mut b, move_seat(100, 7, 2, 5));
    assert_eq!(v, Accepted::SeatMoving { key, from: NodeId(2), to: NodeId(5), epoch: Epoch(1) });
    let j = b.dir.journal(key).expect("live");
    assert_eq!(j.voters.to_vec(), vec![NodeId(1), NodeId(2), NodeId(3)], "the voters are unchanged: intent only");
    assert_eq!(j.epoch, Epoch(0));
    assert!(matches!(j.moving, Some(SeatMove { from: NodeId(2), to: NodeId(5), epoch: Epoch(1), .. })));
    assert_eq!(j.next_voters(), Some(vec![NodeId(1), NodeId(5), NodeId(3)]), "replaced in place");
    assert!(j.is_joining(NodeId(5)) && j.is_placed_on(NodeId(5)), "the target joins: it hosts the journal to catch up");
    assert_eq!(j.config().voters, vec![NodeId(1), NodeId(2), NodeId(3)], "placed with the founding voters");
    // Node 2 holds a seat of the registry journal besides.
    assert_eq!((b.dir.load(NodeId(2)), b.dir.load(NodeId(5))), (2, 1), "both count the seat while it moves");
    assert_eq!(b.dir.moves_in_progress().count(), 1);
    // One move at a time; a completion must name the pending epoch.
    refused(&mut b, move_seat(100, 7, 3, 4), Refusal::Move(MoveRefusal::InProgress { key, epoch: Epoch(1) }));
    let wrong = MoveRefusal::WrongEpoch { key, pending: Epoch(1), offered: Epoch(2) };
    refused(&mut b, move_done(100, 7, 2), Refusal::Move(wrong));
    let v = accepted(&mut b, move_done(100, 7, 1));
    assert_eq!(v, Accepted::SeatMoved { key, epoch: Epoch(1), already: false });
    let j = b.dir.journal(key).expect("live");
    assert_eq!((j.voters.to_vec(), j.epoch, j.moving), (vec![NodeId(1), NodeId(5), NodeId(3)], Epoch(1), None));
    assert_eq!(
        (b.dir.load(NodeId(2)), b.dir.load(NodeId(5))),
        (1, 1),
        "the seat left node 2 (its registry seat stays)"
    );
    assert!(j.is_placed_on(NodeId(5)) && !j.is_placed_on(NodeId(2)), "the followers now place it on 5, not 2");
    assert_eq!(j.config().voters, vec![NodeId(1), NodeId(2), NodeId(3)], "still placed with its founders, for life");
    // A re-driven completion (a new coordinator, another request id) changes nothing.
    let again = accepted(&mut b, move_done(100, 7, 1));
    assert_eq!(again, Accepted::SeatMoved { key, epoch: Epoch(1), already: true });
    refused(&mut b, move_done(100, 7, 2), Refusal::Move(MoveRefusal::NotMoving { key }));
    // The next move is at epoch 2.
    let v = accepted(&mut b, move_seat(100, 7, 1, 4));
    assert_eq!(v, Accepted::SeatMoving { key, from: NodeId(1), to: NodeId(4), epoch: Epoch(2) });
}

#[test]
fn every_move_refusal_is_typed_and_changes_nothing() {
    let mut b = cell();
    accepted(&mut b, register(6, Role::Replica, "c"));
    accepted(&mut b, admit(8, Role::Node, "c", 80));
    assert!(b.run(Command::SetStanding { machine: NodeId(8), standing: Standing::Draining }).is_accepted());
    accepted(&mut b, admit(11, Role::Node, "c", 110));
    assert!(b.run(Command::SetStanding { machine: NodeId(11), standing: Standing::Retired }).is_accepted());
    let key = jkey(100, 7);
    let target = |r| Refusal::Move(MoveRefusal::Target(r));
    refused(&mut b, move_seat(100, 99, 1, 4), Refusal::Move(MoveRefusal::UnknownJournal { key: jkey(100, 99) }));
    refused(&mut b, move_seat(100, 7, 4, 5), Refusal::Move(MoveRefusal::NotAVoter { key, node: NodeId(4) }));
    refused(&mut b, move_seat(100, 7, 1, 2), Refusal::Move(MoveRefusal::AlreadyAVoter { key, node: NodeId(2) }));
    refused(&mut b, move_seat(100, 7, 1, 1), Refusal::Move(MoveRefusal::AlreadyAVoter { key, node: NodeId(1) }));
    refused(&mut b, move_seat(100, 7, 1, 42), target(VoterRefusal::Unknown { node: NodeId(42) }));
    refused(&mut b, move_seat(100, 7, 1, 6), target(VoterRefusal::NotANode { node: NodeId(6), role: Role::Replica }));
    let draining = VoterRefusal::NotInService { node: NodeId(8), standing: Standing::Draining };
    refused(&mut b, move_seat(100, 7, 1, 8), target(draining));
    let retired = VoterRefusal::NotInService { node: NodeId(11), standing: Standing::Retired };
    refused(&mut b, move_seat(100, 7, 1, 11), target(retired));
    refused(&mut b, move_done(100, 7, 1), Refusal::Move(MoveRefusal::NotMoving { key }));
    refused(&mut b, move_done(100, 7, 0), Refusal::Move(MoveRefusal::NotMoving { key }));
    // A deleted journal is no longer moved, and its move's load is given back.
    accepted(&mut b, move_seat(100, 7, 1, 4));
    assert!(b.run(delete(100, "orders")).is_accepted());
    assert_eq!(b.dir.load(NodeId(4)), 0, "the target's load went with the journal");
    refused(&mut b, move_done(100, 7, 1), Refusal::Move(MoveRefusal::UnknownJournal { key }));
    refused(&mut b, move_seat(100, 7, 2, 4), Refusal::Move(MoveRefusal::UnknownJournal { key }));
    let before_init = Book::new().run(move_seat(100, 7, 1, 4));
    assert_eq!(before_init, Verdict::Refused(Refusal::NotInitialized), "nothing before the cell is formed");
}

#[test]
fn a_draining_or_retired_voter_can_still_be_moved_off() {
    let mut b = cell();
    assert!(b.run(Command::SetStanding { machine: NodeId(3), standing: Standing::Draining }).is_accepted());
    accepted(&mut b, move_seat(100, 7, 3, 4));
    accepted(&mut b, move_done(100, 7, 1));
    assert!(b.run(Command::SetStanding { machine: NodeId(2), standing: Standing::Retired }).is_accepted());
    accepted(&mut b, move_seat(100, 7, 2, 5));
    accepted(&mut b, move_done(100, 7, 2));
    let j = b.dir.journal(jkey(100, 7)).expect("live");
    assert_eq!((j.voters.to_vec(), j.epoch), (vec![NodeId(1), NodeId(5), NodeId(4)], Epoch(2)));
}

/// A machine that held a seat of a journal once — a founder, or one a seat moved off — may
/// take a seat of it again, placed from the epoch in force: its store gave the journal back
/// with the promises it made, so it must answer no ballot of an earlier configuration
/// (docs/reconfiguration.md, rule 13; the simulation's seed 9000015 is what happens without
/// it). A move's target begins in the move's epoch, every other machine in the epoch in force.
#[test]
fn a_machine_that_held_a_seat_takes_one_again_from_the_epoch_in_force() {
    let mut b = cell();
    let key = jkey(100, 7);
    let seat = |b: &Book, node: u64| b.dir.journal(key).map(|j| j.assignment(NodeId(node)).epoch);
    assert_eq!(seat(&b, 2), Some(0), "a founder is placed from the journal's creation");
    accepted(&mut b, move_seat(100, 7, 2, 5));
    assert_eq!((seat(&b, 5), seat(&b, 1)), (Some(1), Some(0)), "the target begins in the move's epoch");
    accepted(&mut b, move_done(100, 7, 1));
    assert_eq!(b.dir.journal(key).map(|j| j.left.to_vec()), Some(vec![NodeId(2)]), "2 left it");
    accepted(&mut b, move_seat(100, 7, 5, 2));
    assert_eq!(seat(&b, 2), Some(2), "the founder comes back in epoch 2, not 0");
    assert_eq!(seat(&b, 3), Some(1), "a voter placed afresh now begins in the epoch in force");
    accepted(&mut b, move_done(100, 7, 2));
    accepted(&mut b, move_seat(100, 7, 2, 5));
    accepted(&mut b, move_done(100, 7, 3));
    let j = b.dir.journal(key).expect("live");
    assert_eq!((j.voters.to_vec(), j.epoch), (vec![NodeId(1), NodeId(5), NodeId(3)], Epoch(3)));
    assert_eq!(j.left.to_vec(), vec![NodeId(2), NodeId(5)], "each machine that left is named once");
    use paros_client::Checkpointable as _;
    let restored = Directory::restore(&b.dir.checkpoint()).expect("restores");
    assert_eq!(restored.journal(key).map(|j| j.left.to_vec()), Some(vec![NodeId(2), NodeId(5)]), "checkpointed");
}
