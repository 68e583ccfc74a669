//! A voter's own acceptor reply to its own proposer (a loopback `Promise` or `Accepted`) counts
//! only once the round that wrote the state it reports is durable: after the `Ready` holding
//! those writes is taken *and* advanced. Counted earlier, a crash could lose the promise or the
//! value that made the quorum.

mod harness;

use harness::{Cluster, Faults, voter_id};
use paros_core::journal::Outcome;
use paros_core::{Call, CallAnswer, CallId, LeaderUuid, Message, Slot, WriteOp};

#[test]
fn a_candidates_own_promise_counts_only_after_its_round_is_advanced() {
    let me = voter_id(0);
    let mut c = Cluster::new(3, 0, 7, Faults::NONE);
    let v = c.voter_mut(me);
    v.campaign();
    let ballot = v.promised();
    assert_eq!(ballot.node, me, "a campaign at a ballot of its own, promised here in memory");
    let peer_promise =
        Message::Promise { ballot, from: Slot(0), chosen_up_to: Slot(0), accepted: Vec::new(), epoch: 0 };

    // A peer's Promise before the round is even taken: one durable promise of two.
    v.step(voter_id(1), peer_promise.clone());
    assert!(!v.is_leader(), "the own promise is not even handed to storage yet");
    let released = v.take_released();
    assert!(released.messages.iter().all(|o| o.to != me), "nothing self-addressed leaves the voter");
    assert!(!v.is_leader());

    // The round is taken (its writes hold the promise) but not durable yet.
    let ready = v.ready();
    assert!(ready.writes.contains(&WriteOp::Promise(ballot)), "the round writes the own promise");
    assert!(ready.messages.iter().all(|o| o.to != me), "the own Promise is no message of the Ready");
    v.step(voter_id(1), peer_promise);
    v.tick();
    let _ = v.take_released();
    assert!(!v.is_leader(), "the own promise is in flight: it does not count yet");

    v.advance();
    assert!(v.is_leader(), "durable now: the own promise and the peer's elect it");
}

#[test]
fn a_leaders_own_accepted_counts_only_after_its_round_is_advanced() {
    let mut c = Cluster::new(3, 0, 11, Faults::NONE);
    let leader = c.elect(100);
    c.run(2);
    let peer = c.cfg.voters.iter().copied().find(|v| *v != leader).expect("three voters");
    let start = c.chosen_of(leader);
    let uuid = LeaderUuid::new(0x5e).expect("non-zero");
    let v = c.voter_mut(leader);
    v.propose(CallId(900), Call::SetLeader { new: uuid, old: None });

    // The proposal leaves for the peers; the own acceptor accepts it in the same breath.
    let released = v.take_released();
    let (ballot, entries) = released
        .messages
        .iter()
        .find_map(|o| match &o.message {
            Message::Accept { ballot, entries, .. } if o.to == peer && !entries.is_empty() => {
                Some((*ballot, entries.clone()))
            }
            _ => None,
        })
        .expect("an Accept for the peer");
    let slot = entries[0].0;
    assert_eq!(slot, start, "the call takes the next slot");
    let acked = Message::Accepted { ballot, slots: entries.iter().map(|(s, cmd)| (*s, cmd.digest())).collect() };

    // The peer's ack before the own value is even handed to storage: one of two.
    v.step(peer, acked.clone());
    assert_eq!(v.chosen_up_to(), start, "the own accept is not durable: no quorum yet");

    let ready = v.ready();
    assert!(
        ready.writes.iter().any(|w| matches!(w, WriteOp::Accept { slot: s, .. } if *s == slot)),
        "the round writes the own value"
    );
    assert!(ready.answers.is_empty(), "no verdict yet");
    v.step(peer, acked);
    v.tick();
    let released = v.take_released();
    assert!(released.answers.is_empty(), "no verdict while the own value is in flight");
    assert_eq!(v.chosen_up_to(), start, "the own value is in flight: it does not count yet");

    v.advance();
    assert_eq!(v.chosen_up_to(), slot.next(), "durable now: the own ack and the peer's choose the slot");
    let ready = v.ready();
    assert!(
        ready.answers.iter().any(|(id, a)| *id == CallId(900) && matches!(a, CallAnswer::Verdict(Outcome::Won(_)))),
        "the call is answered once chosen: {:?}",
        ready.answers
    );
    v.advance();
}
