//! Fencing, truncation, compaction and the trim-point jump.

mod harness;

use harness::*;
use paros_core::journal::{JournalView, Outcome};
use paros_core::{Call, CallAnswer, Consistency, NodeId, ReadAnswer, Seq, Slot};

fn truncate(c: &mut Cluster, leader: paros_core::LeaderUuid, up_to: u64) -> JournalView {
    match c.call(Call::Truncate { leader: Some(leader), up_to: Seq(up_to) }) {
        Some(CallAnswer::Verdict(Outcome::Trimmed(v))) => v,
        other => panic!("truncating to {up_to}: {other:?}"),
    }
}

/// The slots every running machine applied to `outcome`.
fn slots_judged(c: &Cluster, pred: impl Fn(&Outcome) -> bool) -> Vec<Slot> {
    c.applied.iter().filter(|(_, by)| by.values().any(|(_, o, _)| pred(o))).map(|(s, _)| *s).collect()
}

#[test]
fn a_superseded_writers_write_and_truncate_are_refused_in_place() {
    for seed in SEEDS {
        let mut c = Cluster::new(3, 1, seed, Faults::LOSSY);
        let (a, b) = (uuid(0xa), uuid(0xb));
        claim(&mut c, a, None);
        let mut w = Written::default();
        w.append(&mut c, a, recs("a", 3));
        w.append(&mut c, a, recs("a2", 2));
        claim(&mut c, b, Some(a));
        c.settle(300);
        let before = c.state_of(c.leader().expect("settled"));
        let in_force = JournalView { leader: Some(b), first_seq: Seq(0), next_seq: Seq(5) };

        let refused = c.call(write(a, 5, recs("late", 1)));
        assert_eq!(
            refused,
            Some(CallAnswer::Verdict(Outcome::Refused(in_force))),
            "seed={seed}: the write names B and the tail"
        );
        let refused = c.call(Call::Truncate { leader: Some(a), up_to: Seq(4) });
        assert_eq!(refused, Some(CallAnswer::Verdict(Outcome::TruncateRefused(in_force))), "seed={seed}");
        // A's acknowledged write is still A's: its retry is a duplicate under B's term.
        let retry = c.call(write(a, 3, recs("a2", 2)));
        let duplicate = Outcome::Duplicate { seq: Seq(3), count: 2, view: in_force };
        assert_eq!(retry, Some(CallAnswer::Verdict(duplicate)), "seed={seed}");

        c.settle(300);
        for id in c.up() {
            assert_eq!(c.state_of(id), before, "seed={seed}: {id:?} moved nothing for the superseded writer");
        }
        let spent = slots_judged(&c, |o| matches!(o, Outcome::Refused(_) | Outcome::TruncateRefused(_)));
        assert!(!spent.is_empty(), "seed={seed}: a refusal spends its decided slot");
        for slot in spent {
            assert_eq!(c.applied[&slot].len(), c.up().len(), "seed={seed}: every machine judged the refused {slot:?}");
        }
        w.append(&mut c, b, recs("b", 1));
        c.assert_agreement();
    }
}

#[test]
fn a_truncation_lands_every_node_on_the_same_floor_and_reads_below_it_are_truncated() {
    for voters in [3, 5] {
        for seed in SEEDS {
            let mut c = Cluster::new(voters, 1, seed, Faults::LOSSY);
            let (a, mut w) = claimed(&mut c);
            for i in 0..6 {
                w.append(&mut c, a, recs(&format!("b{i}"), 3));
            }
            // Seq 10 lies inside the batch [9, 12): that batch's slot is the floor everywhere.
            let view = truncate(&mut c, a, 10);
            assert_eq!((view.first_seq, view.next_seq), (Seq(10), Seq(18)));
            w.append(&mut c, a, recs("after", 2));
            c.settle(400);

            let floors: Vec<(NodeId, Slot)> = c.up().into_iter().map(|id| (id, c.floor_of(id))).collect();
            assert!(
                floors.iter().all(|(_, f)| *f == floors[0].1 && *f > Slot(0)),
                "voters={voters} seed={seed}: {floors:?}"
            );
            let durable: Vec<Slot> = c.up().into_iter().map(|id| c.machines[&id].durable.floor).collect();
            assert!(
                durable.iter().all(|f| *f == floors[0].1),
                "voters={voters} seed={seed}: the floor is persisted: {durable:?}"
            );
            for id in c.up() {
                let state = c.state_of(id);
                for below in [0, 9] {
                    let answer = c.read_at(id, Seq(below), Consistency::Reached(Seq(20)), 60);
                    assert_eq!(
                        answer,
                        Some(ReadAnswer::Truncated(state.view())),
                        "voters={voters} seed={seed}: {id:?} at {below}"
                    );
                }
                let got = read_range(&mut c, id, 10, 20, Consistency::Reached(Seq(20)));
                assert_eq!(got, w.range(10, 20), "voters={voters} seed={seed}: {id:?} serves the retained tail");
            }

            // A restarted node folds its retained log from the sealed base: it boots on the same
            // floor, never ahead of where it was, and re-learns the slots its chosen-index hint
            // did not cover.
            let follower = c.cfg.voters.iter().copied().find(|v| Some(*v) != c.leader()).expect("a follower");
            let state = c.state_of(follower);
            c.crash(follower);
            c.start(follower);
            assert_eq!(c.floor_of(follower), floors[0].1, "voters={voters} seed={seed}");
            assert!(c.state_of(follower).next_seq <= state.next_seq, "voters={voters} seed={seed}");
            c.settle(400);
            assert_eq!(
                c.state_of(follower),
                state,
                "voters={voters} seed={seed}: the restarted node is back where it was"
            );
            c.assert_agreement();
        }
    }
}

/// Writes and truncates while `down` is crashed until the cluster's floor passes everything
/// `down` holds: first every record (the floor goes past the Truncate), then all but one.
/// `id` answers a read at `below` (under `first_seq`) `Truncated` with its view, and serves
/// exactly the retained records the writer wrote.
fn assert_serves_only_the_retained_records(c: &mut Cluster, id: NodeId, w: &Written, below: u64, ctx: &str) {
    let state = c.state_of(id);
    assert_eq!(
        c.read_at(id, Seq(below), Consistency::Reached(state.next_seq), 60),
        Some(ReadAnswer::Truncated(state.view())),
        "{ctx}"
    );
    let got = read_range(c, id, state.first_seq.0, state.next_seq.0, Consistency::Reached(state.next_seq));
    assert_eq!(got, w.range(state.first_seq.0, state.next_seq.0), "{ctx}");
}

/// Lets the journal go quiet (every member caught up, no heartbeats), then crashes the learner
/// as if its last round never reached the disk: it reboots holding the claim (slot 0), not the
/// write. Returns (leader, learner).
fn quiet_then_reboot_the_learner_behind(c: &mut Cluster, ctx: &str) -> (NodeId, NodeId) {
    c.settle(300);
    c.run(20);
    let leader = c.leader().expect("settled");
    assert!(c.voter(leader).is_quiet(), "{ctx}: every member caught up: the journal is quiet, no heartbeats");
    let learner = learner_id(0);
    c.crash(learner);
    let durable = &mut c.machines.get_mut(&learner).expect("known").durable;
    durable.entries.retain(|(s, _)| *s < Slot(1));
    durable.chosen_up_to = durable.chosen_up_to.min(Slot(1));
    c.start(learner);
    (leader, learner)
}

fn truncate_past(c: &mut Cluster, down: NodeId, a: paros_core::LeaderUuid, w: &mut Written) {
    let held_to = c.machines[&down].durable.entries.last().map_or(Slot(0), |(s, _)| s.next());
    c.crash(down);
    for i in 0..4 {
        w.append(c, a, recs(&format!("while-down{i}"), 2));
    }
    truncate(c, a, w.next());
    w.append(c, a, recs("tail", 3));
    truncate(c, a, w.next() - 1);
    c.settle(400);
    for id in c.up() {
        assert!(
            c.floor_of(id) > held_to,
            "{id:?}'s floor {:?} passed all {down:?} holds (below {held_to:?})",
            c.floor_of(id)
        );
    }
}

#[test]
fn a_node_that_was_down_while_the_cluster_truncated_past_it_jumps_to_the_trim_point() {
    for voters in [3, 5] {
        for seed in SEEDS {
            let mut c = Cluster::new(voters, 1, seed, Faults::LOSSY);
            let (a, mut w) = claimed(&mut c);
            w.append(&mut c, a, recs("early", 2));
            c.settle(300);
            let down = c.cfg.voters.iter().copied().find(|v| Some(*v) != c.leader()).expect("a follower");
            truncate_past(&mut c, down, a, &mut w);
            let promised = c.machines[&down].durable.promise;

            c.start(down);
            c.faults = Faults::LOSSY;
            c.run(30);
            c.settle(400);

            let jumps: Vec<&Jump> = c.jumps.iter().filter(|j| j.node == down).collect();
            assert!(!jumps.is_empty(), "voters={voters} seed={seed}: {down:?} recovered by a jump");
            for j in &jumps {
                assert_eq!(
                    j.promised_after, j.promised_before,
                    "voters={voters} seed={seed}: the jump never changes the promise"
                );
                assert!(j.floor_after == j.point && j.floor_after > j.floor_before);
            }
            assert!(persisted_a_jump(&c, down), "voters={voters} seed={seed}: the jump is durable");
            assert!(c.voter(down).promised() >= promised, "a promise never decreases");
            let others: Vec<NodeId> = c.up().into_iter().filter(|id| *id != down).collect();
            for id in &others {
                assert_eq!(
                    c.floor_of(down),
                    c.floor_of(*id),
                    "voters={voters} seed={seed}: {down:?} lands on {id:?}'s floor"
                );
                assert_eq!(c.state_of(down), c.state_of(*id), "voters={voters} seed={seed}: {down:?} converges");
            }
            assert_serves_only_the_retained_records(&mut c, down, &w, 0, &format!("voters={voters} seed={seed}"));
            c.assert_agreement();
        }
    }
}

#[test]
fn a_learner_that_was_down_below_the_floor_jumps_to_the_trim_point() {
    for seed in SEEDS {
        let mut c = Cluster::new(3, 1, seed, Faults::LOSSY);
        let (a, mut w) = claimed(&mut c);
        w.append(&mut c, a, recs("early", 2));
        c.settle(300);
        let learner = learner_id(0);
        truncate_past(&mut c, learner, a, &mut w);

        c.start(learner);
        c.faults = Faults::LOSSY;
        c.run(30);
        c.settle(400);

        assert!(c.jumps.iter().any(|j| j.node == learner), "seed={seed}: the learner recovered by a jump");
        assert!(persisted_a_jump(&c, learner), "seed={seed}: the learner's jump is durable");
        let leader = c.leader().expect("settled");
        assert_eq!(c.floor_of(learner), c.floor_of(leader), "seed={seed}: the learner lands on the voters' floor");
        assert_eq!(c.state_of(learner), c.state_of(leader), "seed={seed}");
        assert_serves_only_the_retained_records(&mut c, learner, &w, 1, &format!("seed={seed}"));
        c.assert_agreement();
    }
}

#[test]
fn a_truncation_of_every_record_puts_the_floor_just_past_the_truncate() {
    for seed in SEEDS {
        let mut c = Cluster::new(3, 1, seed, Faults::LOSSY);
        let (a, mut w) = claimed(&mut c);
        for i in 0..3 {
            w.append(&mut c, a, recs(&format!("b{i}"), 2));
        }
        let view = truncate(&mut c, a, 100);
        assert_eq!((view.first_seq, view.next_seq), (Seq(6), Seq(6)), "seed={seed}: clamped to next_seq");
        c.settle(400);
        let trimmed = slots_judged(&c, |o| matches!(o, Outcome::Trimmed(_)));
        let floor = trimmed.last().expect("the truncate applied").next();
        for id in c.up() {
            assert_eq!(c.floor_of(id), floor, "seed={seed}: {id:?} dropped every slot through the truncate");
            assert_eq!(c.read_at(id, Seq(5), Consistency::Reached(Seq(6)), 60), Some(ReadAnswer::Truncated(view)));
        }
        w.append(&mut c, a, recs("again", 1));
        c.settle(400);
        c.assert_agreement();
    }
}

#[test]
fn a_leader_with_learners_survives_a_truncate_of_every_record() {
    let mut c = Cluster::new(3, 1, 1, Faults::NONE);
    let (a, mut w) = claimed(&mut c);
    w.append(&mut c, a, recs("x", 2));
    // Every record trimmed: the floor is the slot after the Truncate, so the walk that applies
    // it drops the Truncate's own slot before the leader copies it into the learners' feed.
    let view = truncate(&mut c, a, 2);
    assert_eq!(view.first_seq, Seq(2));
    c.settle(300);
    let learner = learner_id(0);
    assert_eq!(c.floor_of(learner), c.floor_of(c.leader().expect("settled")));
    c.assert_agreement();
}

#[test]
fn a_learner_restarted_into_a_quiet_journal_learns_it_is_behind() {
    let mut c = Cluster::new(3, 1, 5, Faults::NONE);
    let (a, mut w) = claimed(&mut c);
    w.append(&mut c, a, recs("known", 2));
    let (leader, learner) = quiet_then_reboot_the_learner_behind(&mut c, "seed=5");
    assert_eq!(c.state_of(learner).next_seq, Seq(0), "the learner rebooted behind");
    c.run(20);
    assert_eq!(c.state_of(learner), c.state_of(leader), "the restarted learner caught up without a new write");
    let answer = c.read_at(learner, Seq(0), Consistency::Reached(Seq(2)), 30);
    assert!(matches!(answer, Some(ReadAnswer::Page { .. })), "{answer:?}");
}

#[test]
fn a_restarted_learner_keeps_asking_until_a_voter_answers() {
    for seed in SEEDS {
        let mut c = Cluster::new(3, 1, seed, Faults::NONE);
        let (a, mut w) = claimed(&mut c);
        w.append(&mut c, a, recs("known", 2));
        let (leader, learner) = quiet_then_reboot_the_learner_behind(&mut c, &format!("seed={seed}"));
        // The network loses the learner's first request, as a lossy one sometimes does.
        let mut lost = false;
        c.filter = Some(Box::new(move |from, _, m| {
            let drop = from == learner && !lost && matches!(m, paros_core::Message::CatchUpRequest { .. });
            lost |= drop;
            drop
        }));
        c.run(40);
        assert_eq!(c.state_of(learner), c.state_of(leader), "seed={seed}: the learner asked again and caught up");
    }
}
