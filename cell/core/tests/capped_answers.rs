//! Multi-message exchanges whose answers come one small page at a time (issue 8, seed 6482):
//! a node that knows slots are chosen that it does not hold keeps asking until it holds them,
//! whether it leads or follows, and never quiesces while it lags.

mod harness;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use harness::*;
use paros_core::journal::WriterMode;
use paros_core::{CHOSEN_PERSIST_SLOTS, Message, NodeId, Seq, Slot, Tunables};

/// Catch-up pages of one slot each.
fn one_slot_pages(t: &mut Tunables) {
    t.catch_up_slots_max = 1;
}

/// Writes `n` single-record batches, plus one persist period of them, while `lagging` hears
/// nothing: the peers' durable chosen index (what their Promises claim) then lies past the
/// laggard's prefix, so a campaign leaves those slots to catch-up.
fn write_past(c: &mut Cluster, lagging: NodeId, a: paros_core::LeaderUuid, w: &mut Written, n: usize) {
    c.isolated = vec![lagging];
    for i in 0..n + CHOSEN_PERSIST_SLOTS as usize {
        w.append(c, a, recs(&format!("past{i}"), 1));
    }
    // Every peer learns the commit of the last write: nothing is left for a campaign to
    // re-propose, so only catch-up can bring the laggard those slots.
    c.run(5);
    c.isolated.clear();
}

fn a_follower(c: &Cluster) -> NodeId {
    let leader = c.leader().expect("a leader");
    c.cfg.voters.iter().copied().find(|v| *v != leader).expect("three voters")
}

/// The shape of seed 6482: a node far behind wins an election. Its Promises say the slots up
/// to the others' prefix are chosen; one-slot catch-up pages must still bring it all of them,
/// after which it decides new writes.
#[test]
fn a_lagging_node_elected_leader_catches_up_one_slot_at_a_time() {
    for seed in [1, 2, 3] {
        let mut c = Cluster::with_tunables(3, 1, seed, Faults::NONE, WriterMode::Single, one_slot_pages);
        let (a, mut w) = claimed(&mut c);
        let old = c.leader().expect("a leader");
        let laggard = a_follower(&c);
        write_past(&mut c, laggard, a, &mut w, 30);
        let behind = c.chosen_of(laggard);
        assert!(c.chosen_of(old) > behind.plus_slots(20), "seed {seed}: the laggard missed the writes");

        // The old leader falls silent; the laggard campaigns before it has learned anything.
        c.isolated = vec![old];
        c.voter_mut(laggard).campaign();
        for _ in 0..4 {
            c.round();
        }
        assert!(c.voter(laggard).is_leader(), "seed {seed}: the laggard won the election");
        c.run(60);
        assert!(c.chosen_of(laggard) > behind.plus_slots(30), "seed {seed}: the leader learned what its Promises said");
        let (seq, _) = accepted(c.call_at(laggard, write(a, w.next(), recs("after", 1)), 60));
        assert_eq!(seq, Seq(w.next()), "seed {seed}: the new leader decides writes at the tail");
        w.0.extend(recs("after", 1));
        c.settle(400);
        for id in c.up() {
            assert_eq!(c.state_of(id).next_seq, Seq(w.next()), "seed {seed}: {id:?} folded every write");
        }
        c.assert_agreement();
    }
}

/// A follower (and a replica) behind by many slots, with one-slot pages and half of all
/// catch-up answers lost, still reaches the prefix, and the journal only quiesces after.
#[test]
fn followers_and_replicas_catch_up_through_one_slot_pages_with_answers_lost() {
    for seed in [4, 5, 6] {
        let mut c = Cluster::with_tunables(3, 1, seed, Faults::NONE, WriterMode::Single, one_slot_pages);
        let (a, mut w) = claimed(&mut c);
        let follower = a_follower(&c);
        let replica = learner_id(0);
        c.isolated = vec![follower, replica];
        for i in 0..25 {
            w.append(&mut c, a, recs(&format!("w{i}"), 1));
        }
        c.isolated.clear();
        let mut n = 0u64;
        c.filter = Some(Box::new(move |_, _, m| {
            if matches!(m, Message::CatchUpResponse { .. }) {
                n += 1;
                n.is_multiple_of(2)
            } else {
                false
            }
        }));
        c.run(400);
        let leader = c.leader().expect("a leader");
        for id in [follower, replica] {
            assert_eq!(c.chosen_of(id), c.chosen_of(leader), "seed {seed}: {id:?} reached the leader's prefix");
        }
        c.settle(200);
        c.assert_agreement();
    }
}

/// A replica whose feed (`Chosen`) is lost entirely learns every slot from the commit in the
/// heartbeats and one-slot catch-up pages.
#[test]
fn a_replica_that_misses_the_whole_feed_learns_through_one_slot_pages() {
    let mut c = Cluster::with_tunables(3, 1, 7, Faults::NONE, WriterMode::Single, one_slot_pages);
    let (a, mut w) = claimed(&mut c);
    c.filter = Some(Box::new(|_, _, m| matches!(m, Message::Chosen { .. })));
    for i in 0..20 {
        w.append(&mut c, a, recs(&format!("w{i}"), 1));
    }
    c.run(200);
    let leader = c.leader().expect("a leader");
    assert_eq!(c.chosen_of(learner_id(0)), c.chosen_of(leader), "the replica reached the leader's prefix");
    assert_eq!(c.state_of(learner_id(0)).next_seq, Seq(w.next()));
}

/// Requests that bring nothing back slow down (each pause doubles up to the configured cap)
/// and go round the peers; the first answer that moves the prefix restores the pace.
#[test]
fn unanswered_catch_up_backs_off_within_its_bound_and_rotates_peers() {
    let cap = 8u32;
    let mut c = Cluster::with_tunables(3, 0, 8, Faults::NONE, WriterMode::Single, |t| {
        t.catch_up_ticks = 1;
        t.catch_up_backoff_ticks_max = cap;
    });
    let (a, mut w) = claimed(&mut c);
    let laggard = a_follower(&c);
    write_past(&mut c, laggard, a, &mut w, 10);
    // The laggard hears the leader's heartbeats (it knows it is behind) but every catch-up
    // answer is lost.
    let asked: Rc<RefCell<Vec<(u64, NodeId)>>> = Rc::default();
    let tick = Rc::new(RefCell::new(0u64));
    let (log, now) = (asked.clone(), tick.clone());
    c.filter = Some(Box::new(move |from, to, m| match m {
        Message::CatchUpRequest { .. } if from == laggard => {
            log.borrow_mut().push((*now.borrow(), to));
            false
        }
        Message::CatchUpResponse { .. } | Message::TrimmedTo { .. } => to == laggard,
        _ => false,
    }));
    for _ in 0..120 {
        *tick.borrow_mut() += 1;
        c.tick();
    }
    let asked = asked.borrow().clone();
    // Only the timer's requests count here: one per tick at most.
    let mut per_tick: BTreeMap<u64, Vec<NodeId>> = BTreeMap::new();
    for (t, to) in &asked {
        per_tick.entry(*t).or_default().push(*to);
    }
    let ticks: Vec<u64> = per_tick.keys().copied().collect();
    assert!(ticks.len() >= 10, "the laggard keeps asking: {ticks:?}");
    let gaps: Vec<u64> = ticks.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.iter().all(|g| *g <= u64::from(cap)), "no pause exceeds the cap: {gaps:?}");
    assert!(
        gaps.iter().rev().take(4).all(|g| *g == u64::from(cap)),
        "fruitless requests back off to the cap: {gaps:?}"
    );
    let peers: std::collections::BTreeSet<NodeId> = asked.iter().map(|(_, to)| *to).collect();
    assert_eq!(peers.len(), 2, "both peers are asked: {asked:?}");
    assert!(!c.voter(laggard).is_quiet(), "a lagging voter never quiesces");

    // Answers get through again: it catches up.
    c.filter = None;
    c.run(cap + 30);
    assert_eq!(c.chosen_of(laggard), c.chosen_of(c.leader().expect("a leader")));
}

/// Phase 1 is one message per acceptor, sized by the acceptor's unchosen suffix. A campaign
/// over a suffix as long as the pipeline window (every slot accepted everywhere, none known
/// chosen) re-proposes all of it, and every value a quorum accepted ends up applied.
#[test]
fn a_campaign_over_a_full_pipeline_of_unchosen_slots_completes() {
    let window = 200u32;
    let mut c = Cluster::with_tunables(3, 0, 9, Faults::NONE, WriterMode::Single, |t| {
        t.pipeline_slots_max = window;
        t.calls_max = window * 2;
    });
    let (a, w) = claimed(&mut c);
    let leader = c.leader().expect("a leader");
    // Every acceptor accepts the whole window, but no Accepted and no commit reaches anyone.
    c.filter = Some(Box::new(move |_, _, m| matches!(m, Message::Accepted { .. } | Message::Heartbeat { .. })));
    for i in 0..u64::from(window) {
        c.propose_at(leader, write(a, w.next() + i, recs(&format!("p{i}"), 1)));
    }
    for _ in 0..4 {
        c.round();
    }
    let prefix = c.chosen_of(leader);
    c.crash(leader);
    c.filter = None;
    c.settle(600);
    let successor = c.leader().expect("a successor");
    assert!(c.chosen_of(successor) >= prefix.plus_slots(u64::from(window)), "the successor chose the whole suffix");
    assert_eq!(c.state_of(successor).next_seq, Seq(w.next() + u64::from(window)), "every accepted write applied");
    c.assert_agreement();
}

trait PlusSlots {
    fn plus_slots(self, n: u64) -> Slot;
}

impl PlusSlots for Slot {
    fn plus_slots(self, n: u64) -> Slot {
        Slot(self.0 + n)
    }
}

/// A replica restarted behind a journal probes a voter at boot. With one-slot pages and every
/// heartbeat to it lost (so nothing but catch-up answers can tell it how far behind it is), the
/// first answer does not end the probe: it reaches the prefix.
#[test]
fn a_replica_probing_at_boot_reaches_the_prefix_through_one_slot_pages() {
    for seed in [10, 11] {
        let mut c = Cluster::with_tunables(3, 1, seed, Faults::NONE, WriterMode::Single, one_slot_pages);
        let (a, mut w) = claimed(&mut c);
        let replica = learner_id(0);
        c.crash(replica);
        for i in 0..15 {
            w.append(&mut c, a, recs(&format!("w{i}"), 1));
        }
        c.filter = Some(Box::new(move |_, to, m| {
            to == replica && matches!(m, Message::Heartbeat { .. } | Message::Chosen { .. })
        }));
        c.start(replica);
        c.run(150);
        let leader = c.leader().expect("a leader");
        assert_eq!(c.chosen_of(replica), c.chosen_of(leader), "seed {seed}: the probing replica reached the prefix");
        assert_eq!(c.state_of(replica).next_seq, Seq(w.next()));
    }
}
