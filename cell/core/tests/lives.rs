//! A journal's lives on one node (issue 29, seed 41003456): every answer a voter or a replica
//! matches to its own request counts only for the request it answers. A watermark, a catch-up
//! answer or a trim point sent to an earlier life of the journal here (before a crash, a sleep
//! or a removal) and delivered late counts for nothing in the next life; and a ballot that
//! left the machine is always at or below the promise the next life boots with, so no two
//! lives campaign at one ballot.

use bytes::Bytes;
use paros_core::journal::{Command, Entry, JournalState, WriterMode};
use paros_core::{
    Ballot, Consistency, Durable, JournalConfig, Life, LogEntry, Message, NodeId, ReadAnswer, ReadId, ReadRequest,
    Ready, Replica, ReplicaState, Seq, Slot, Tunables, Voter,
};

const ME: NodeId = NodeId(1);
const PEERS: [NodeId; 2] = [NodeId(2), NodeId(3)];
const LEARNER: NodeId = NodeId(9);

fn config() -> JournalConfig {
    JournalConfig { mode: WriterMode::Multi, voters: vec![ME, PEERS[0], PEERS[1]], learners: vec![] }
}

fn write(byte: u8) -> Command {
    Command::Write(Entry { leader: None, seq: Seq(0), records: vec![Bytes::from(vec![byte])] })
}

/// Slots 0..3 chosen here (one record each), nothing accepted beyond: this node's own
/// watermark is its applied prefix, as on the node of seed 41003456.
fn three_chosen() -> Durable {
    let entries = (0..3).map(|s| (Slot(s), LogEntry { ballot: None, command: write(s as u8) })).collect();
    Durable { promise: Ballot { round: 1, node: PEERS[0] }, chosen_up_to: Slot(3), entries, ..Durable::default() }
}

fn linearizable_from_0() -> ReadRequest {
    ReadRequest { from: Seq(0), limit: 0, max_bytes: 0, wait_ticks: 0, consistency: Consistency::Linearizable }
}

/// One round as a host runs it: take the `Ready`, make it durable, advance.
fn round(v: &mut Voter) -> Ready {
    let ready = v.ready();
    v.advance();
    ready
}

fn watermark_requests(ready: &Ready) -> Vec<(NodeId, u64, Life)> {
    ready
        .messages
        .iter()
        .filter_map(|o| match o.message {
            Message::WatermarkRequest { read, life } => Some((o.to, read, life)),
            _ => None,
        })
        .collect()
}

fn answer_of(ready: &Ready, id: ReadId) -> Option<&ReadAnswer> {
    ready.reads.iter().find(|(r, _)| *r == id).map(|(_, a)| a)
}

#[test]
fn a_watermark_from_before_a_wake_arriving_after_it_counts_for_nothing() {
    // The first life leads nothing and opens watermark round 0 for a read.
    let mut first = Voter::recover(ME, config(), Tunables::default(), 7, Life(0xa1), three_chosen());
    first.read(ReadId(1), linearizable_from_0());
    let asked = watermark_requests(&round(&mut first));
    assert_eq!(asked.len(), 2, "round 0 asks both peers: {asked:?}");
    assert!(asked.iter().all(|(_, read, life)| *read == 0 && *life == Life(0xa1)));
    drop(first); // asleep: the journal leaves memory; the peer's answer is still in flight

    // The next life (woken from the same durable state) opens round 0 again.
    let mut woken = Voter::recover(ME, config(), Tunables::default(), 7, Life(0xa2), three_chosen());
    woken.read(ReadId(2), linearizable_from_0());
    let asked = watermark_requests(&round(&mut woken));
    assert!(
        asked.iter().all(|(_, read, life)| *read == 0 && *life == Life(0xa2)),
        "round ids restart; the life tells them apart: {asked:?}"
    );
    // Its own acceptor's watermark (3: its applied prefix) counted once the round was durable.
    let ready = round(&mut woken);
    assert_eq!(answer_of(&ready, ReadId(2)), None, "one watermark is no quorum");

    // The peer's reply to the first life's round 0 arrives: low, and not an answer to this read.
    woken.step(PEERS[0], Message::Watermark { read: 0, life: Life(0xa1), up_to: Slot(2) });
    let ready = round(&mut woken);
    assert_eq!(answer_of(&ready, ReadId(2)), None, "a stale watermark closed the round: {:?}", ready.reads);

    // The real reply: the peer accepted two slots this node has not heard of.
    woken.step(PEERS[0], Message::Watermark { read: 0, life: Life(0xa2), up_to: Slot(5) });
    let ready = round(&mut woken);
    assert_eq!(answer_of(&ready, ReadId(2)), None, "the read waits until slots 3 and 4 are applied here");

    let life = woken.life();
    woken.step(
        PEERS[0],
        Message::CatchUpResponse {
            entries: vec![(Slot(3), write(3)), (Slot(4), write(4))],
            chosen_up_to: Slot(5),
            life,
        },
    );
    let ready = round(&mut woken);
    let Some(ReadAnswer::Page { records, view, .. }) = answer_of(&ready, ReadId(2)) else {
        panic!("the read is served once it covers the quorum's watermark: {:?}", ready.reads)
    };
    assert_eq!(records.len(), 5, "the page holds the two writes the peer had accepted");
    assert_eq!(view.next_seq, Seq(5));
}

#[test]
fn a_catch_up_answer_from_before_a_wake_does_not_count_for_the_check_in() {
    let mut first = Voter::recover(ME, config(), Tunables::default(), 7, Life(0xb1), three_chosen());
    first.check_in();
    let _ = round(&mut first);
    drop(first);

    let mut woken = Voter::recover(ME, config(), Tunables::default(), 7, Life(0xb2), three_chosen());
    woken.check_in();
    let _ = round(&mut woken);
    // Both peers' answers to the first life's check-in arrive; one even brings a slot.
    for p in PEERS {
        woken.step(
            p,
            Message::CatchUpResponse { entries: vec![(Slot(3), write(3))], chosen_up_to: Slot(4), life: Life(0xb1) },
        );
    }
    woken.tick();
    let _ = round(&mut woken);
    assert!(woken.is_checking_in(), "answers to an earlier life's check-in ended this one");
    assert_eq!(woken.chosen_up_to(), Slot(3), "an answer to an earlier life is not learned from");
    // This life's own answers end it.
    for p in PEERS {
        woken.step(
            p,
            Message::CatchUpResponse { entries: vec![(Slot(3), write(3))], chosen_up_to: Slot(4), life: Life(0xb2) },
        );
    }
    woken.tick();
    let _ = round(&mut woken);
    assert!(!woken.is_checking_in());
    assert_eq!(woken.chosen_up_to(), Slot(4));
}

#[test]
fn a_trim_point_sent_to_an_earlier_life_is_not_jumped_to() {
    let mut v = Voter::recover(ME, config(), Tunables::default(), 7, Life(0xc2), three_chosen());
    let state = JournalState { next_seq: Seq(8), first_seq: Seq(8), ..JournalState::default() };
    v.step(PEERS[0], Message::TrimmedTo { from: Slot(3), point: Slot(8), state, life: Life(0xc1) });
    assert_eq!((v.floor(), v.chosen_up_to()), (Slot(0), Slot(3)), "a stale trim point moved the floor");
    v.step(PEERS[0], Message::TrimmedTo { from: Slot(3), point: Slot(8), state, life: Life(0xc2) });
    assert_eq!(v.floor(), Slot(8), "this life's own answer is jumped to");
}

#[test]
fn a_booted_replica_serves_no_read_until_it_covers_a_watermark_of_this_life() {
    let cfg = JournalConfig { mode: WriterMode::Multi, voters: vec![PEERS[0], PEERS[1], ME], learners: vec![LEARNER] };
    let mut r = Replica::recover(LEARNER, cfg, Tunables::default(), Life(0xd2), Durable::default(), false);
    let ready = r.ready();
    r.advance();
    let asked = watermark_requests(&ready);
    assert_eq!(asked.len(), 3, "a booted replica asks every voter for its watermark: {asked:?}");
    let round = asked[0].1;
    assert_eq!(r.serving_state(), ReplicaState::Bootstrapping);
    assert!(!r.is_quiet(), "a booted replica keeps asking until it has caught up");
    r.read(ReadId(1), linearizable_from_0());
    let ready = r.ready();
    r.advance();
    assert_eq!(
        answer_of(&ready, ReadId(1)),
        Some(&ReadAnswer::unserved_at(Seq(0))),
        "a read before it caught up is refused, saying how far the replica has applied"
    );
    assert_eq!(r.refused_unready(), 1, "and counted");
    // Watermarks answering an earlier life of the journal here count for nothing.
    for p in PEERS {
        r.step(p, Message::Watermark { read: round, life: Life(0xd1), up_to: Slot(0) });
    }
    assert_eq!(r.serving_state(), ReplicaState::Bootstrapping, "an earlier life's answers opened the gate");
    r.step(PEERS[0], Message::Watermark { read: round, life: Life(0xd2), up_to: Slot(2) });
    r.step(PEERS[1], Message::Watermark { read: round, life: Life(0xd2), up_to: Slot(1) });
    assert_eq!(r.serving_state(), ReplicaState::CatchingUp { target: Slot(2) }, "the quorum's highest slot");
    r.step(PEERS[0], Message::Chosen { entries: vec![(Slot(0), write(0))] });
    assert_eq!(r.serving_state(), ReplicaState::CatchingUp { target: Slot(2) }, "served with slot 1 unlearned");
    r.step(PEERS[0], Message::Chosen { entries: vec![(Slot(1), write(1))] });
    assert_eq!(r.serving_state(), ReplicaState::Serving, "caught up through the watermark");
    r.read(ReadId(2), linearizable_from_0());
    let ready = r.ready();
    r.advance();
    assert_eq!(answer_of(&ready, ReadId(2)), None, "a read once serving waits for its own round, not refused");
    assert_eq!(r.refused_unready(), 1);
}

#[test]
fn a_replica_that_lost_the_feeds_last_batch_learns_it_from_a_feed_mark_and_asks() {
    let cfg = JournalConfig { mode: WriterMode::Multi, voters: vec![PEERS[0], PEERS[1], ME], learners: vec![LEARNER] };
    let mut r = Replica::recover(LEARNER, cfg, Tunables::default(), Life(0xd3), Durable::default(), true);
    let _ = r.ready();
    r.advance();
    assert!(r.is_quiet(), "a serving replica with nothing to do is quiet");
    r.step(PEERS[0], Message::FeedMark { chosen_up_to: Slot(3) });
    assert!(!r.is_quiet(), "behind the mark");
    let mut asked = false;
    for _ in 0..=Tunables::default().catch_up_backoff_ticks_max {
        r.tick();
        let ready = r.ready();
        r.advance();
        asked |= ready
            .messages
            .iter()
            .any(|o| matches!(o.message, Message::CatchUpRequest { from: Slot(0), .. }) && PEERS.contains(&o.to));
        if asked {
            break;
        }
    }
    assert!(asked, "a replica behind a feed mark asks a voter to catch up");
}

#[test]
fn a_candidates_prepare_waits_for_its_own_promise_so_no_later_life_reuses_its_ballot() {
    let mut durable = three_chosen();
    let mut v = Voter::recover(ME, config(), Tunables::default(), 7, Life(0xe1), durable.clone());
    v.campaign();
    // Nothing of the campaign may leave before its own promise is durable.
    let early = v.take_released();
    assert!(
        !early.messages.iter().any(|o| matches!(o.message, Message::Prepare { .. })),
        "a Prepare left before its ballot was promised durably here: {:?}",
        early.messages
    );
    let ready = v.ready();
    let sent: Vec<Ballot> = ready
        .messages
        .iter()
        .filter_map(|o| match o.message {
            Message::Prepare { ballot, .. } => Some(ballot),
            _ => None,
        })
        .collect();
    assert_eq!(sent.len(), 2, "the Prepare leaves with the round that writes the promise");
    assert!(ready.writes.contains(&paros_core::WriteOp::Promise(sent[0])), "that round writes the promise");
    for w in &ready.writes {
        durable.apply(w);
    }
    // The machine crashes after the sync; whatever the Prepare brought back is in flight.
    drop(v);
    let mut next = Voter::recover(ME, config(), Tunables::default(), 7, Life(0xe2), durable);
    next.campaign();
    let ready = next.ready();
    let again = ready.messages.iter().find_map(|o| match o.message {
        Message::Prepare { ballot, .. } => Some(ballot),
        _ => None,
    });
    assert!(
        again.is_some_and(|b| b > sent[0]),
        "the next life campaigns above every ballot that left: {again:?} after {:?}",
        sent[0]
    );
    // A Promise for the earlier life's ballot cannot count for this campaign.
    next.advance();
    next.step(
        PEERS[0],
        Message::Promise { ballot: sent[0], from: Slot(3), chosen_up_to: Slot(3), accepted: Vec::new(), epoch: 0 },
    );
    assert!(!next.is_leader());
}
