//! Consensus leader failure: what a successor keeps, and how it fills what nobody described.

mod harness;

use harness::*;
use paros_core::journal::{Outcome, WriterMode};
use paros_core::{Call, CallAnswer, Consistency, Message, NodeId, Seq, Slot};

#[test]
fn every_acked_write_survives_the_leader_crashing() {
    for voters in [3, 5] {
        for seed in SEEDS {
            let mut c = Cluster::new(voters, 1, seed, Faults::LOSSY);
            let (a, mut w) = claimed(&mut c);
            for i in 0..6 {
                w.append(&mut c, a, recs(&format!("before{i}"), 1 + i % 3));
            }
            let first = c.leader().expect("a leader answered");
            let chosen_before = c.chosen_of(first);
            c.crash(first);
            for i in 0..6 {
                w.append(&mut c, a, recs(&format!("after{i}"), 1 + i % 2));
            }
            let successor = c.leader().expect("a successor answered");
            assert_ne!(successor, first, "voters={voters} seed={seed}: the crashed leader does not lead");
            assert!(c.chosen_of(successor) > chosen_before);
            let got = read_range(&mut c, successor, 0, w.next(), Consistency::Linearizable);
            assert_eq!(got, w.0, "voters={voters} seed={seed}: the successor holds every acked write at its position");

            c.start(first);
            c.settle(400);
            for id in c.up() {
                assert_eq!(
                    c.state_of(id).next_seq,
                    Seq(w.next()),
                    "voters={voters} seed={seed}: {id:?} folded every write"
                );
                let got = read_range(&mut c, id, 0, w.next(), Consistency::Reached(Seq(w.next())));
                assert_eq!(got, w.0, "voters={voters} seed={seed}: {id:?} serves every acked write at its position");
            }
            c.assert_agreement();
        }
    }
}

/// The leader's first proposal, at `hole`, reaches nobody; its second, at `hole + 1`, reaches
/// just enough followers that every quorum without the leader holds one of them. Returns the
/// two calls and the leader.
fn leave_a_hole(
    c: &mut Cluster,
    hole: Slot,
    a: paros_core::LeaderUuid,
    next: u64,
) -> (paros_core::CallId, paros_core::CallId, NodeId) {
    let leader = c.leader().expect("settled");
    let others: Vec<NodeId> = c.cfg.voters.iter().copied().filter(|v| *v != leader).collect();
    let (told, untold) = others.split_at(c.cfg.quorum() - 1);
    let (told, untold) = (told.to_vec(), untold.to_vec());
    c.faults = Faults::NONE;
    c.filter = Some(Box::new(move |from, to, m| {
        let Message::Accept { entries, .. } = m else { return false };
        from == leader && (untold.contains(&to) || entries.iter().any(|(s, _)| *s == hole))
    }));
    let lost = c.propose_at(leader, write(a, next, recs("lost", 2)));
    c.round();
    let kept = c.propose_at(leader, write(a, next, recs("kept", 3)));
    c.round();
    c.round();
    for v in others {
        let held: Vec<Slot> = c.voter(v).log().range_from(hole).map(|(s, _)| *s).collect();
        let expected = if told.contains(&v) { vec![hole.next()] } else { vec![] };
        assert_eq!(held, expected, "{v:?} holds the second proposal iff it was told, and never the first");
    }
    (lost, kept, leader)
}

#[test]
fn a_new_leader_fills_an_undescribed_hole_with_noop() {
    for voters in [3, 5] {
        for seed in SEEDS {
            let mut c = Cluster::new(voters, 1, seed, Faults::LOSSY);
            let (a, mut w) = claimed(&mut c);
            w.append(&mut c, a, recs("w", 2));
            c.settle(300);
            let hole = c.chosen_of(c.leader().expect("settled"));
            let (_, _, leader) = leave_a_hole(&mut c, hole, a, w.next());

            c.crash(leader);
            c.filter = None;
            c.faults = Faults::LOSSY;
            c.elect(300);
            c.start(leader);
            c.settle(400);

            let at_hole = &c.applied[&hole];
            assert_eq!(at_hole.len(), c.up().len(), "voters={voters} seed={seed}: every machine applied {hole:?}");
            assert!(
                at_hole.values().all(|(_, o, _)| *o == Outcome::Noop),
                "voters={voters} seed={seed}: the hole below a reported slot is filled with Noop: {at_hole:?}"
            );
            let after = &c.applied[&hole.next()];
            assert!(
                after
                    .values()
                    .all(|(_, o, _)| matches!(*o, Outcome::Accepted { seq, count: 3, .. } if seq == Seq(w.next()))),
                "voters={voters} seed={seed}: the reported value above the hole is re-proposed and chosen: {after:?}"
            );
            let l = c.leader().expect("settled");
            let got = read_range(&mut c, l, w.next(), w.next() + 3, Consistency::Linearizable);
            assert_eq!(got, recs("kept", 3));
            c.assert_agreement();
        }
    }
}

#[test]
fn a_held_call_whose_slot_chose_another_command_gets_no_verdict() {
    for seed in SEEDS {
        // A patient call: a NoVerdict here cannot come from the call's deadline.
        let mut c =
            Cluster::with_tunables(3, 1, seed, Faults::LOSSY, WriterMode::Single, |t| t.call_ticks_max = 10_000);
        let (a, mut w) = claimed(&mut c);
        w.append(&mut c, a, recs("w", 2));
        c.settle(300);
        let hole = c.chosen_of(c.leader().expect("settled"));
        let (lost, kept, leader) = leave_a_hole(&mut c, hole, a, w.next());

        c.filter = None;
        c.isolated = vec![leader];
        for _ in 0..300 {
            c.tick();
            if c.leader().is_some_and(|l| l != leader) && c.chosen_of(c.leader().expect("some")) > hole.next() {
                break;
            }
        }
        c.isolated.clear();
        for _ in 0..300 {
            if c.answers.contains_key(&lost) && c.answers.contains_key(&kept) {
                break;
            }
            c.tick();
        }
        assert_eq!(
            c.answers.get(&lost),
            Some(&CallAnswer::NoVerdict),
            "seed={seed}: the hole chose Noop, not the held write"
        );
        // The successor re-proposed the kept write in its slot, but its caller cannot tell that
        // from an identical command another leader decided there (an earlier attempt of the
        // same request, say): it gets no verdict, and the write is in the journal.
        assert_eq!(
            c.answers.get(&kept),
            Some(&CallAnswer::NoVerdict),
            "seed={seed}: a slot chosen at another ballot gives no verdict"
        );
        c.settle(400);
        let l = c.leader().expect("settled");
        let got = read_range(&mut c, l, w.next(), w.next() + 3, Consistency::Linearizable);
        assert_eq!(got, recs("kept", 3), "seed={seed}: the re-proposed write holds its position");
        c.assert_agreement();
    }
}

/// Seed 856 of the simulation: a stale leader, cut off, holds a retry of a SetLeader at slot X
/// while the rest of the cluster decides the identical command at X from the first attempt, and
/// another claim after it. The stale node must not hand its held retry that slot's `Won`: the
/// verdict belongs to an attempt decided before the retry was proposed here.
#[test]
fn a_held_retry_gets_no_verdict_from_an_identical_command_decided_elsewhere() {
    for seed in SEEDS {
        let mut c = Cluster::with_tunables(3, 0, seed, Faults::NONE, WriterMode::Single, |t| t.call_ticks_max = 10_000);
        let (a, _) = claimed(&mut c);
        c.settle(300);
        let stale = c.leader().expect("settled");
        let (b, third) = (uuid(0xb), uuid(0xc));
        let attempt = Call::SetLeader { new: b, old: Some(a) };
        c.isolated = vec![stale];
        let retry = c.propose_at(stale, attempt.clone());
        c.round();
        // The journal was quiet: the followers' timers are stopped (the host's machine liveness
        // would wake them); one campaigns.
        let other = c.cfg.voters.iter().copied().find(|v| *v != stale).expect("three voters");
        c.voter_mut(other).campaign();
        let mut successor = None;
        for _ in 0..300 {
            c.tick();
            successor = c.cfg.voters.iter().copied().find(|v| *v != stale && c.voter(*v).is_leader());
            if successor.is_some() {
                break;
            }
        }
        let successor = successor.expect("the others elect a successor");
        assert!(
            matches!(c.call_at(successor, attempt, 100), Some(CallAnswer::Verdict(Outcome::Won(_)))),
            "seed={seed}: the first attempt won"
        );
        assert!(
            matches!(
                c.call_at(successor, Call::SetLeader { new: third, old: Some(b) }, 100),
                Some(CallAnswer::Verdict(Outcome::Won(_)))
            ),
            "seed={seed}: a third claim won after it"
        );
        c.isolated.clear();
        for _ in 0..200 {
            if c.answers.contains_key(&retry) {
                break;
            }
            c.tick();
        }
        assert_eq!(
            c.answers.get(&retry),
            Some(&CallAnswer::NoVerdict),
            "seed={seed}: the stale node's held retry gets no verdict"
        );
        c.settle(300);
        assert_eq!(c.state_of(stale).leader, Some(third), "seed={seed}: the stale node folded the third claim");
        c.assert_agreement();
    }
}

/// Five voters, one record written and settled: the leader B, three others F, G, H, and the
/// next slot s.
struct FiveSettled {
    c: Cluster,
    a: paros_core::LeaderUuid,
    w: Written,
    b: NodeId,
    f: NodeId,
    g: NodeId,
    h: NodeId,
    s: Slot,
}

fn five_settled(seed: u64, tweak: impl FnOnce(&mut paros_core::Tunables)) -> FiveSettled {
    let mut c = Cluster::with_tunables(5, 0, seed, Faults::NONE, WriterMode::Single, |t| {
        t.call_ticks_max = 10_000;
        tweak(t);
    });
    let (a, mut w) = claimed(&mut c);
    w.append(&mut c, a, recs("w", 1));
    c.settle(300);
    let b = c.leader().expect("settled");
    let others: Vec<NodeId> = c.cfg.voters.iter().copied().filter(|v| *v != b).collect();
    let (f, g, h) = (others[0], others[1], others[2]);
    let s = c.chosen_of(b);
    FiveSettled { c, a, w, b, f, g, h, s }
}

/// G campaigns, wins with H and I (B and F cut off), and proposes `y`.
fn g_leads_and_proposes(c: &mut Cluster, seed: u64, g: NodeId, y: Call) {
    c.voter_mut(g).campaign();
    for _ in 0..4 {
        c.round();
    }
    assert!(c.voter(g).is_leader(), "seed={seed}: G won with H and I");
    c.propose_at(g, y);
}

/// A leader whose own proposal in a slot lost to another leader's value, and which learned that
/// value by catch-up, must not tell its followers the slot is chosen: a follower still holding
/// the losing proposal at the leader's ballot would apply it (two values applied in one slot).
/// The scenario a role-level review found (5 voters): B proposes X in slot s, only F accepts;
/// G, with H and I, chooses Y there at a higher ballot; B learns Y and heartbeats on.
#[test]
fn a_leader_never_commits_a_slot_its_own_proposal_lost() {
    for seed in SEEDS {
        let FiveSettled { mut c, a, w, b, f, g, h, s } = five_settled(seed, |_| {});
        c.filter = Some(Box::new(move |from, to, m| from == b && to != f && matches!(m, Message::Accept { .. })));
        c.propose_at(b, write(a, w.next(), recs("x", 1)));
        for _ in 0..3 {
            c.round();
        }
        let ballot_b = c.voter(b).promised();
        assert!(
            c.voter(f).log().get(s).is_some_and(|e| e.ballot == Some(ballot_b)),
            "seed={seed}: F holds X at B's ballot"
        );
        // B and F hear nothing from the other three, nor they from B and F.
        let cut = [b, f];
        c.filter = Some(Box::new(move |from, to, _| cut.contains(&from) != cut.contains(&to)));
        let y = write(a, w.next(), recs("y", 1));
        g_leads_and_proposes(&mut c, seed, g, y.clone());
        for _ in 0..4 {
            c.round();
        }
        assert!(c.chosen_of(g) > s, "seed={seed}: G chose Y in slot s");
        // H's catch-up answer reaches B, still leading at its ballot.
        let life = c.voter(b).life();
        c.voter_mut(b)
            .step(h, Message::CatchUpResponse { entries: vec![(s, y.into_command())], chosen_up_to: s.next(), life });
        assert!(c.voter(b).is_leader() && c.chosen_of(b) > s, "seed={seed}: B applied Y and still leads");
        c.tick();
        c.tick();
        assert_eq!(c.chosen_of(f), s, "seed={seed}: F did not take B's commit as a verdict on its X");
        c.filter = None;
        c.settle(400);
        c.assert_agreement();
    }
}

/// An acceptor credits an Accept for a slot below its log's start without comparing (the
/// command is evicted from memory), so a deposed leader's Accept for another command there is
/// acknowledged. That credit never makes the command chosen: the quorum that chose the slot
/// promised a higher ballot, and every quorum of the deposed leader's meets it (simulation seed
/// 80014893 found such an acknowledgement; this is the argument in `Acceptor::on_accept`).
/// Five voters: B proposes X in slot s, only F hears it (its acknowledgement lost); G, with H
/// and I, chooses Y there and more; F learns those by catch-up, never promising G's ballot, and
/// evicts s; B's re-sent Accept of X reaches F.
#[test]
fn a_deposed_leader_credited_blind_for_an_evicted_slot_chooses_nothing() {
    use std::cell::Cell;
    use std::rc::Rc;
    for seed in SEEDS {
        let FiveSettled { mut c, a, w, b, f, g, h, s } = five_settled(seed, |t| t.window_slots = 1);
        // Only F hears X, and its acknowledgement is lost: B will re-send X to it.
        c.filter = Some(Box::new(move |from, to, m| {
            (from == b && to != f && matches!(m, Message::Accept { .. }))
                || (from == f && to == b && matches!(m, Message::Accepted { .. }))
        }));
        let x = write(a, w.next(), recs("x", 1));
        c.propose_at(b, x.clone());
        for _ in 0..3 {
            c.round();
        }
        let ballot_b = c.voter(b).promised();
        assert!(c.voter(f).log().get(s).is_some_and(|e| e.ballot == Some(ballot_b)), "seed={seed}: F holds X");
        // B and F hear nothing from the other three, nor they from B and F; B's Accepts reach F
        // only when the test says so.
        let cut = [b, f];
        let open = Rc::new(Cell::new(false));
        let credited = Rc::new(Cell::new(false));
        let (open_in, credited_in, x_digest) = (open.clone(), credited.clone(), x.clone().into_command().digest());
        c.filter = Some(Box::new(move |from, to, m| {
            if from == f
                && to == b
                && let Message::Accepted { slots, .. } = m
            {
                credited_in.set(credited_in.get() || slots.contains(&(s, x_digest)));
            }
            let b_to_f_accept = from == b && to == f && matches!(m, Message::Accept { .. });
            cut.contains(&from) != cut.contains(&to) || (b_to_f_accept && !open_in.get())
        }));
        g_leads_and_proposes(&mut c, seed, g, write(a, w.next(), recs("y", 1)));
        for i in 0..4 {
            c.propose_at(g, write(a, w.next() + 1 + i, recs("more", 1)));
        }
        for _ in 0..6 {
            c.round();
        }
        let chosen_g = c.chosen_of(g);
        assert!(chosen_g > s.next(), "seed={seed}: G chose Y in slot s and more");
        // H's catch-up answer reaches F, which learns the slots, syncs and evicts s.
        let entries: Vec<_> = (s.0..chosen_g.0)
            .map(|i| (Slot(i), c.voter(h).log().get(Slot(i)).expect("H holds it").command.clone()))
            .collect();
        let life = c.voter(f).life();
        c.voter_mut(f).step(h, Message::CatchUpResponse { entries, chosen_up_to: chosen_g, life });
        for _ in 0..3 {
            c.round();
        }
        assert!(c.voter(f).log().start() > s, "seed={seed}: F evicted slot s");
        assert_eq!(c.voter(f).promised(), ballot_b, "seed={seed}: F never promised G's ballot");
        open.set(true);
        for _ in 0..6 {
            c.tick();
        }
        assert!(credited.get(), "seed={seed}: F credited B's X in slot s, blind");
        assert_eq!(c.chosen_of(b), s, "seed={seed}: two credits of five are no quorum: B chose nothing in s");
        c.filter = None;
        c.settle(400);
        c.assert_agreement();
    }
}

/// Simulation seed 2013486, reduced. A campaign skips the slots its Promises say are chosen and
/// fetches them later by catch-up; an acceptor that says so from memory, then crashes before
/// its chosen index reached storage, leaves nobody who knows them chosen. The Promise must say
/// only what a reboot keeps, and report the values above it for the new leader to re-propose.
#[test]
fn a_promise_claims_only_the_chosen_index_a_reboot_keeps() {
    let mut c = Cluster::new(3, 0, 11, Faults::NONE);
    let (a, mut w) = claimed(&mut c);
    let first = c.leader().expect("claimed");
    let others: Vec<NodeId> = c.cfg.voters.iter().copied().filter(|v| *v != first).collect();
    let (promiser, laggard) = (others[0], others[1]);
    // The laggard hears nothing while the first leader and the promiser choose a few slots.
    c.filter = Some(Box::new(move |_, to, _| to == laggard));
    for i in 0..4 {
        w.append(&mut c, a, recs(&format!("w{i}"), 2));
    }
    let known = c.chosen_of(promiser);
    assert!(known > c.chosen_of(laggard), "the promiser knows more chosen slots than the laggard");
    assert!(
        c.machines[&promiser].durable.chosen_up_to < known,
        "fewer slots than the persist period: the index is in memory only"
    );

    // The first leader goes; the laggard campaigns and wins on the promiser's Promise alone,
    // and the promiser crashes right after that Promise left.
    c.crash(first);
    c.filter = None;
    c.voter_mut(laggard).campaign();
    let mut rounds = 0;
    while !c.voter(laggard).is_leader() {
        c.round();
        rounds += 1;
        assert!(rounds < 10, "the laggard wins with the promiser's Promise");
    }
    c.crash(promiser);
    // The first leader reboots knowing its values only as acceptances; then the promiser does.
    c.start(first);
    c.run(20);
    c.start(promiser);
    c.settle(600);
    for id in c.up() {
        assert_eq!(c.state_of(id).next_seq, Seq(w.next()), "{id:?} folded every acknowledged write");
    }
    w.append(&mut c, a, recs("after", 1));
    let leader = c.leader().expect("settled");
    assert_eq!(read_range(&mut c, leader, 0, w.next(), Consistency::Linearizable), w.0, "every acked write survives");
    c.assert_agreement();
}
