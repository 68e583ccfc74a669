//! The mover carries a recorded seat move through the journal's own log and back into the
//! registry: the target hosting the journal, `Reconfigure`, a quorum of the new voters
//! confirmed, `MoveDone` (docs/reconfiguration.md, rule 6). Every step that fails is tried
//! again, nothing is reconfigured before the target hosts the journal, and nothing is recorded
//! done before a quorum of the new voters confirmed.

mod common;

use common::*;
use paros_core::ids::NodeId;
use paros_registry::mover::{MoveAction, MoveResult, Mover, MoverConfig, done_id};
use paros_registry::{Command, Epoch, Role, Verdict};

const RETRY: u64 = 100;

fn cell_moving() -> Book {
    let mut b = Book::formed();
    assert!(matches!(b.run(admit(4, Role::Node, "a", 40)), Verdict::Accepted(_)));
    assert!(matches!(b.run(create(100, 7, "orders", &[1, 2, 3])), Verdict::Accepted(_)));
    assert!(matches!(b.run(move_seat(100, 7, 2, 4)), Verdict::Accepted(_)));
    b
}

fn mover() -> Mover {
    Mover::new(MoverConfig { moves_max: 8, retry_ms: RETRY })
}

/// The probe of the move's target (node 4) is asked, and answered: it hosts the journal.
fn hosted(m: &mut Mover, b: &Book, key: paros_core::ids::JournalKey, now: u64) {
    assert_eq!(m.poll(&b.dir, now), vec![MoveAction::Probe { journal: key, node: NodeId(4) }]);
    m.on_result(MoveResult::Hosted { journal: key, node: NodeId(4) }, now);
}

/// The registry journal's seat on node 2 moving to node 4.
fn registry_moving() -> (Book, paros_core::ids::JournalKey) {
    let mut b = Book::formed();
    assert!(matches!(b.run(admit(4, Role::Node, "a", 40)), Verdict::Accepted(_)));
    let key = b.dir.registry_journal().expect("formed").key;
    let command = Command::MoveSeat { journal: key, from: NodeId(2), to: NodeId(4) };
    assert!(matches!(b.run(command), Verdict::Accepted(_)));
    (b, key)
}

/// Nothing is reconfigured before the target hosts the journal: were another new voter down,
/// the journal would stop until it does (and the registry journal's target learns of its seat
/// only from the registry).
#[test]
fn the_registry_journal_is_not_reconfigured_before_the_target_hosts_it() {
    let (b, key) = registry_moving();
    let mut m = mover();
    assert_eq!(m.poll(&b.dir, 0), vec![MoveAction::Probe { journal: key, node: NodeId(4) }]);
    assert!(m.poll(&b.dir, 0).is_empty(), "one probe at a time");
    m.on_result(MoveResult::Failed { journal: key }, 0);
    assert!(m.poll(&b.dir, RETRY - 1).is_empty(), "not before the pause");
    assert_eq!(m.poll(&b.dir, RETRY), vec![MoveAction::Probe { journal: key, node: NodeId(4) }], "then again");
    m.on_result(MoveResult::Hosted { journal: key, node: NodeId(3) }, RETRY);
    assert_eq!(
        m.poll(&b.dir, 2 * RETRY),
        vec![MoveAction::Probe { journal: key, node: NodeId(4) }],
        "another node hosting it is not the target"
    );
    m.on_result(MoveResult::Hosted { journal: key, node: NodeId(4) }, 2 * RETRY);
    assert!(matches!(m.poll(&b.dir, 2 * RETRY)[..], [MoveAction::Reconfigure { journal, .. }] if journal == key));
}

#[test]
fn a_move_is_reconfigured_confirmed_by_a_quorum_with_its_target_then_recorded_done() {
    let mut b = cell_moving();
    let key = jkey(100, 7);
    let mut m = mover();
    hosted(&mut m, &b, key, 0);
    let voters = vec![NodeId(1), NodeId(4), NodeId(3)];
    assert_eq!(m.poll(&b.dir, 0), vec![MoveAction::Reconfigure { journal: key, epoch: Epoch(1), voters }]);
    assert!(m.poll(&b.dir, 0).is_empty(), "one call at a time");
    m.on_result(MoveResult::Decided { journal: key, in_force: Epoch(1) }, 0);
    let confirms = m.poll(&b.dir, 0);
    let asked: Vec<NodeId> = confirms
        .iter()
        .map(|a| match a {
            MoveAction::Confirm { journal, node } if *journal == key => *node,
            other => panic!("a confirmation, not {other:?}"),
        })
        .collect();
    assert_eq!(asked, vec![NodeId(1), NodeId(4), NodeId(3)], "every new voter is asked");
    m.on_result(MoveResult::Confirmed { journal: key, node: NodeId(1) }, 0);
    m.on_result(MoveResult::Confirmed { journal: key, node: NodeId(3) }, 0);
    m.on_result(MoveResult::Failed { journal: key }, 0);
    assert!(m.poll(&b.dir, 0).is_empty(), "a quorum without the target (node 4): not yet, and a pause");
    assert_eq!(m.poll(&b.dir, RETRY), vec![MoveAction::Confirm { journal: key, node: NodeId(4) }], "the target again");
    m.on_result(MoveResult::Confirmed { journal: key, node: NodeId(4) }, RETRY);
    let done = m.poll(&b.dir, RETRY);
    assert_eq!(done, vec![MoveAction::Done { journal: key, epoch: Epoch(1), id: done_id(key, Epoch(1)) }]);
    // The loop appends it; the fold records the move done and the directory drops it.
    assert!(matches!(b.run_as(done_id(key, Epoch(1)).0, move_done(100, 7, 1)), Verdict::Accepted(_)));
    m.on_result(MoveResult::Recorded { journal: key }, 0);
    assert_eq!((m.in_progress(), m.done()), (0, 1));
    assert!(m.poll(&b.dir, 0).is_empty(), "nothing left to move");
    assert_eq!(b.dir.journal(key).map(|j| j.voters.to_vec()), Some(vec![NodeId(1), NodeId(4), NodeId(3)]));
}

/// A target the directory shows gone for good (its machine rejoined as a new identity) never
/// confirms: the quorum that stays records the move, and the planner heals the dead voter.
#[test]
fn a_target_gone_for_good_is_not_waited_for() {
    let mut b = cell_moving();
    let key = jkey(100, 7);
    let mut m = mover();
    hosted(&mut m, &b, key, 0);
    assert_eq!(m.poll(&b.dir, 0).len(), 1);
    m.on_result(MoveResult::Decided { journal: key, in_force: Epoch(1) }, 0);
    assert_eq!(m.poll(&b.dir, 0).len(), 3, "every new voter asked");
    m.on_result(MoveResult::Confirmed { journal: key, node: NodeId(1) }, 0);
    m.on_result(MoveResult::Confirmed { journal: key, node: NodeId(3) }, 0);
    m.on_result(MoveResult::Failed { journal: key }, 0);
    assert_eq!(m.poll(&b.dir, RETRY), vec![MoveAction::Confirm { journal: key, node: NodeId(4) }], "waits for it");
    m.on_result(MoveResult::Failed { journal: key }, RETRY);
    assert!(b.run(rejoin(4, 9, "a", 90)).is_accepted(), "node 4 lost its store and came back as 9");
    let done = m.poll(&b.dir, 2 * RETRY);
    assert_eq!(done, vec![MoveAction::Done { journal: key, epoch: Epoch(1), id: done_id(key, Epoch(1)) }]);
}

/// A target gone for good before it hosted the journal is not waited for: the move goes on,
/// and the planner heals the dead voter once it is recorded.
#[test]
fn a_tenant_journals_target_gone_before_it_hosts_the_journal_is_not_probed() {
    let mut b = cell_moving();
    let key = jkey(100, 7);
    let mut m = mover();
    assert!(matches!(m.poll(&b.dir, 0)[..], [MoveAction::Probe { .. }]));
    m.on_result(MoveResult::Failed { journal: key }, 0);
    assert!(b.run(rejoin(4, 9, "a", 90)).is_accepted(), "node 4 lost its store and came back as 9");
    assert!(matches!(m.poll(&b.dir, RETRY)[..], [MoveAction::Reconfigure { journal, .. }] if journal == key));
}

/// The registry journal's too: its target, gone, needs to learn nothing, and the heal that
/// follows is decided by the registry running on the voters that stay. (Waiting for it, the
/// move would never end and no other move of the registry journal could start.)
#[test]
fn the_registry_journals_target_gone_before_it_hosts_the_journal_is_not_waited_for() {
    let (mut b, key) = registry_moving();
    let mut m = mover();
    assert!(matches!(m.poll(&b.dir, 0)[..], [MoveAction::Probe { .. }]));
    m.on_result(MoveResult::Failed { journal: key }, 0);
    assert_eq!(m.poll(&b.dir, RETRY), vec![MoveAction::Probe { journal: key, node: NodeId(4) }], "down is not gone");
    m.on_result(MoveResult::Failed { journal: key }, RETRY);
    assert!(b.run(rejoin(4, 9, "a", 90)).is_accepted(), "node 4 lost its store and came back as 9");
    let voters = vec![NodeId(1), NodeId(4), NodeId(3)];
    assert_eq!(m.poll(&b.dir, 2 * RETRY), vec![MoveAction::Reconfigure { journal: key, epoch: Epoch(1), voters }]);
    m.on_result(MoveResult::Decided { journal: key, in_force: Epoch(1) }, 2 * RETRY);
    assert_eq!(m.poll(&b.dir, 2 * RETRY).len(), 3, "every new voter asked");
    m.on_result(MoveResult::Confirmed { journal: key, node: NodeId(1) }, 2 * RETRY);
    m.on_result(MoveResult::Confirmed { journal: key, node: NodeId(3) }, 2 * RETRY);
    let done = m.poll(&b.dir, 2 * RETRY);
    assert_eq!(done, vec![MoveAction::Done { journal: key, epoch: Epoch(1), id: done_id(key, Epoch(1)) }]);
}

#[test]
fn a_failed_step_is_tried_again_after_the_pause_and_an_earlier_epoch_in_force_is_no_decision() {
    let b = cell_moving();
    let key = jkey(100, 7);
    let mut m = mover();
    hosted(&mut m, &b, key, 0);
    assert_eq!(m.poll(&b.dir, 0).len(), 1);
    m.on_result(MoveResult::Failed { journal: key }, 10);
    assert!(m.poll(&b.dir, 10 + RETRY - 1).is_empty(), "not before the pause");
    assert!(matches!(m.poll(&b.dir, 10 + RETRY)[..], [MoveAction::Reconfigure { .. }]), "then again");
    // The journal answers with the epoch before the move in force: not decided, asked again.
    m.on_result(MoveResult::Decided { journal: key, in_force: Epoch(0) }, 200);
    assert!(matches!(m.poll(&b.dir, 200 + RETRY)[..], [MoveAction::Reconfigure { .. }]));
    // An epoch past it (decided by an earlier mover that then crashed) moves on.
    m.on_result(MoveResult::Decided { journal: key, in_force: Epoch(1) }, 300);
    assert!(m.poll(&b.dir, 300).iter().all(|a| matches!(a, MoveAction::Confirm { .. })));
}

#[test]
fn moves_are_carried_out_at_most_moves_max_at_once_and_one_the_directory_dropped_is_forgotten() {
    let mut b = Book::formed();
    assert!(matches!(b.run(admit(4, Role::Node, "a", 40)), Verdict::Accepted(_)));
    for j in 0..5 {
        assert!(matches!(b.run(create(100, 10 + j, &format!("j{j}"), &[1, 2, 3])), Verdict::Accepted(_)));
        assert!(matches!(b.run(move_seat(100, 10 + j, 2, 4)), Verdict::Accepted(_)));
    }
    let mut m = Mover::new(MoverConfig { moves_max: 2, retry_ms: RETRY });
    let first = m.poll(&b.dir, 0);
    assert_eq!((first.len(), m.in_progress()), (2, 2), "two at once");
    // Journal 10's move is recorded done by someone else (a re-driven completion).
    assert!(matches!(b.run(move_done(100, 10, 1)), Verdict::Accepted(_)));
    let next = m.poll(&b.dir, 0);
    assert_eq!(m.in_progress(), 2, "journal 10 forgotten, the next one taken on");
    assert!(matches!(next[..], [MoveAction::Probe { journal, .. }] if journal == jkey(100, 12)));
    let deleted = Command::DeleteJournal { tenant: paros_core::ids::TenantId(100), name: journal_name("j1") };
    assert!(matches!(b.run(deleted), Verdict::Accepted(_)));
    m.poll(&b.dir, 0);
    assert_eq!(m.in_progress(), 2, "a deleted journal's move is dropped too");
}

/// A probe needs only proof the target hosts the journal: a copy that looked at it and would
/// not serve (`Unserved` saying how far it applied) hosts it — a former voter's copy a seat
/// moves back to answers so (the simulation's seed 70003546 waited on it forever). A
/// confirmation needs the read served.
#[test]
fn a_probe_takes_any_answer_from_the_journal_and_a_confirmation_only_a_served_read() {
    use paros_client::ReadAnswer;
    use paros_core::Seq;
    use paros_core::journal::JournalView;
    let (key, node) = (jkey(100, 7), NodeId(4));
    let view = JournalView { leader: None, first_seq: Seq(0), next_seq: Seq(3) };
    let page = ReadAnswer::Page { from: Seq(0), records: Vec::new(), view };
    let unserved = ReadAnswer::Unserved { applied_to: Some(Seq(3)) };
    let refused = ReadAnswer::Unserved { applied_to: None };
    let probe = |a: Option<&ReadAnswer>| MoveResult::of_read(key, node, true, a);
    let confirm = |a: Option<&ReadAnswer>| MoveResult::of_read(key, node, false, a);
    assert_eq!(probe(Some(&page)), MoveResult::Hosted { journal: key, node });
    assert_eq!(probe(Some(&ReadAnswer::Truncated { view })), MoveResult::Hosted { journal: key, node });
    assert_eq!(probe(Some(&unserved)), MoveResult::Hosted { journal: key, node }, "looked at the journal");
    assert_eq!(probe(Some(&refused)), MoveResult::Failed { journal: key }, "refused before looking");
    assert_eq!(probe(Some(&ReadAnswer::UnknownJournal)), MoveResult::Failed { journal: key }, "not placed yet");
    assert_eq!(probe(None), MoveResult::Failed { journal: key });
    assert_eq!(confirm(Some(&page)), MoveResult::Confirmed { journal: key, node });
    assert_eq!(confirm(Some(&unserved)), MoveResult::Failed { journal: key }, "a confirmation needs the read served");
}
