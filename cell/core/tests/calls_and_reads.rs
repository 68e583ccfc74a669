//! How calls and reads are answered: limits before proposing, redirects, read freshness, and
//! the one-round-in-flight contract.

mod harness;

use bytes::Bytes;
use harness::*;
use paros_core::journal::{JournalState, TooLarge, WriterMode};
use paros_core::message::Reported;
use paros_core::{
    Ballot, Call, CallAnswer, CallId, Consistency, Durable, JournalConfig, Life, Message, NodeId, ReadAnswer,
    ReadRequest, Replica, Seq, Slot, Tunables, Voter,
};

fn request(from: Seq, consistency: Consistency) -> ReadRequest {
    ReadRequest { from, limit: 0, max_bytes: 0, wait_ticks: 0, consistency }
}

/// Runs rounds and ticks until `read` is answered or `ticks` pass.
fn await_read(c: &mut Cluster, read: paros_core::ReadId, ticks: u32) -> Option<ReadAnswer> {
    for _ in 0..ticks {
        c.round();
        if let Some(a) = c.reads.remove(&read) {
            return Some(a);
        }
        c.tick();
    }
    c.reads.remove(&read)
}

#[test]
fn an_at_least_read_waits_until_the_server_applied_through_its_seq() {
    for seed in SEEDS {
        let mut c = Cluster::new(3, 1, seed, Faults::LOSSY);
        let (a, mut w) = claimed(&mut c);
        w.append(&mut c, a, recs("first", 2));
        c.settle(300);
        let learner = learner_id(0);
        c.isolated = vec![learner];
        w.append(&mut c, a, recs("second", 3));
        assert_eq!(c.state_of(learner).next_seq, Seq(2), "seed={seed}: the cut-off learner has not applied the write");

        // As long as the server lets it wait (`read_ticks_max`).
        let waits = ReadRequest { wait_ticks: u32::MAX, ..request(Seq(2), Consistency::Reached(Seq(5))) };
        let read = c.submit_read(learner, waits);
        for _ in 0..5 {
            c.tick();
        }
        assert_eq!(c.reads.get(&read), None, "seed={seed}: no page before the learner reached seq 5");
        c.isolated.clear();
        match await_read(&mut c, read, 40) {
            Some(ReadAnswer::Page { from, records, view }) => {
                assert_eq!(from, Seq(2));
                assert_eq!(records, w.range(2, 5), "seed={seed}: the page holds the write it waited for");
                assert!(view.next_seq >= Seq(5));
            }
            other => panic!("seed={seed}: {other:?}"),
        }
        c.settle(300);
        c.assert_agreement();
    }
}

/// Replicas never hold a journal awake: the leader quiesces with the learner still cut off,
/// and its feed and marks were lost. A read at the learner finds the gap (its quorum round
/// shows slots it has not learned) and the learner catches up to serve it.
#[test]
fn a_learner_cut_off_until_the_journal_went_quiet_catches_up_for_a_read() {
    let mut c = Cluster::new(3, 1, 5, Faults::NONE);
    let a = uuid(0xa);
    claim(&mut c, a, None);
    c.settle(300);
    let learner = learner_id(0);
    c.isolated = vec![learner];
    let mut w = Written::default();
    w.append(&mut c, a, recs("missed", 3));
    c.run(20); // every voter caught up and the leader quiesced: the learner is left behind
    c.isolated.clear();
    let leader = c.leader().expect("leads");
    assert!(c.state_of(learner).next_seq < c.state_of(leader).next_seq, "the learner missed the writes");
    let read = c.submit_read(learner, request(Seq(0), Consistency::Linearizable));
    match await_read(&mut c, read, 40) {
        Some(ReadAnswer::Page { records, .. }) => assert_eq!(records, w.range(0, 3), "the read sees every write"),
        other => panic!("the learner did not serve the read: {other:?}"),
    }
    assert_eq!(c.state_of(learner), c.state_of(leader), "the learner caught up");
}

#[test]
fn an_at_least_read_the_server_never_reaches_is_unserved_not_stale() {
    let mut c = Cluster::new(3, 1, 9, Faults::NONE);
    let (a, mut w) = claimed(&mut c);
    w.append(&mut c, a, recs("x", 2));
    c.settle(300);
    assert_eq!(c.state_of(learner_id(0)).next_seq, Seq(2), "the replica applied both records");
    let parked = ReadRequest { wait_ticks: 5, ..request(Seq(0), Consistency::Reached(Seq(50))) };
    let read = c.submit_read(learner_id(0), parked);
    // Parked until its wait ran out, then refused saying how far the replica had applied.
    assert_eq!(await_read(&mut c, read, 40), Some(ReadAnswer::Unserved { applied_to: Some(Seq(2)) }));
}

#[test]
fn a_linearizable_read_sees_every_write_acked_before_it() {
    for seed in SEEDS {
        let mut c = Cluster::new(3, 1, seed, Faults::LOSSY);
        let (a, mut w) = claimed(&mut c);
        w.append(&mut c, a, recs("old", 2));
        c.settle(300);
        let leader = c.leader().expect("settled");
        let follower = c.cfg.voters.iter().copied().find(|v| *v != leader).expect("a follower");
        let learner = learner_id(0);
        // The follower and the learner hear nothing of what is chosen (they still vote and
        // answer watermark rounds), so both lag the acknowledged write.
        c.filter = Some(Box::new(move |from, to, m| {
            (to == follower || to == learner)
                && from == leader
                && matches!(m, Message::Heartbeat { .. } | Message::Chosen { .. } | Message::Accept { .. })
        }));
        w.append(&mut c, a, recs("acked", 3));
        for node in [follower, learner] {
            assert_eq!(c.state_of(node).next_seq, Seq(2), "seed={seed}: {node:?} lags the acknowledged write");
        }
        let reads: Vec<_> = [follower, learner, leader]
            .into_iter()
            .map(|node| (node, c.submit_read(node, request(Seq(2), Consistency::Linearizable))))
            .collect();
        for _ in 0..3 {
            c.tick();
        }
        c.filter = None;
        let mut lagging_served = 0;
        for (node, read) in reads {
            match c.reads.remove(&read).or_else(|| await_read(&mut c, read, 40)) {
                Some(ReadAnswer::Page { records, .. }) => {
                    assert_eq!(records, w.range(2, 5), "seed={seed}: {node:?} served the write acked before the read");
                    lagging_served += usize::from(node != leader);
                }
                // Allowed (a lost watermark round): never stale, sometimes not served.
                Some(ReadAnswer::Unserved { .. }) => {}
                other => panic!("seed={seed}: {node:?}: {other:?}"),
            }
        }
        assert!(lagging_served > 0, "seed={seed}: a lagging server answered after catching up");
        c.settle(300);
        c.assert_agreement();
    }
}

#[test]
fn a_too_large_write_is_answered_before_proposing_and_consumes_no_slot() {
    for seed in SEEDS {
        let mut c = Cluster::with_tunables(3, 1, seed, Faults::LOSSY, WriterMode::Single, |t| {
            t.limits.write_records_max = 4;
            t.limits.write_bytes_max = 64;
        });
        let (a, mut w) = claimed(&mut c);
        w.append(&mut c, a, recs("ok", 4));
        c.settle(300);
        let leader = c.leader().expect("settled");
        let follower = c.cfg.voters.iter().copied().find(|v| *v != leader).expect("a follower");
        let chosen = c.chosen_of(leader);
        let limits = TooLarge { max_records: 4, max_bytes: 64 };
        for (node, records) in [
            (leader, recs("many", 5)),
            (leader, vec![Bytes::from(vec![7u8; 65])]),
            // Judged before the leader check: a follower says TooLarge, not Redirect.
            (follower, recs("many", 5)),
        ] {
            let id = c.propose_at(node, write(a, w.next(), records));
            c.round();
            assert_eq!(
                c.answers.remove(&id),
                Some(CallAnswer::TooLarge(limits)),
                "seed={seed}: answered in the very next round"
            );
        }
        c.settle(300);
        assert_eq!(c.chosen_of(leader), chosen, "seed={seed}: nothing was proposed for an oversized batch");
        w.append(&mut c, a, recs("next", 1));
        assert_eq!(
            c.chosen_of(c.leader().expect("leads")),
            chosen.next(),
            "seed={seed}: the next write takes the next slot"
        );
        c.assert_agreement();
    }
}

#[test]
fn a_non_leader_answers_redirect_naming_the_leader() {
    for seed in SEEDS {
        let mut c = Cluster::new(5, 1, seed, Faults::LOSSY);
        let a = uuid(0xa);
        claim(&mut c, a, None);
        c.settle(300);
        let leader = c.leader().expect("settled");
        let chosen = c.chosen_of(leader);
        for follower in c.cfg.voters.clone().into_iter().filter(|v| *v != leader) {
            let id = c.propose_at(follower, write(a, 0, recs("x", 1)));
            c.round();
            assert_eq!(
                c.answers.remove(&id),
                Some(CallAnswer::Redirect { leader: Some(leader) }),
                "seed={seed}: {follower:?}"
            );
            let id = c.propose_at(follower, Call::SetLeader { new: uuid(0xb), old: Some(a) });
            c.round();
            assert_eq!(
                c.answers.remove(&id),
                Some(CallAnswer::Redirect { leader: Some(leader) }),
                "seed={seed}: {follower:?}"
            );
        }
        c.settle(300);
        assert_eq!(c.chosen_of(leader), chosen, "seed={seed}: a redirected call proposes nothing");
        c.assert_agreement();
    }
}

fn lone_voter() -> Voter {
    let me = NodeId(0x100);
    let cfg = JournalConfig {
        mode: WriterMode::Single,
        voters: vec![me, NodeId(0x101), NodeId(0x102)],
        learners: vec![NodeId(0x900)],
    };
    Voter::new(me, cfg, Tunables::default(), 1, Life(1))
}

#[test]
#[should_panic(expected = "ready() is called once per round")]
fn a_second_ready_without_advance_panics_on_a_voter() {
    let mut v = lone_voter();
    v.campaign();
    let _first = v.ready();
    let _second = v.ready();
}

#[test]
#[should_panic(expected = "ready() is called once per round")]
fn a_second_ready_without_advance_panics_on_a_replica() {
    let me = NodeId(0x900);
    let cfg = JournalConfig { mode: WriterMode::Single, voters: vec![NodeId(0x100)], learners: vec![me] };
    let mut r = Replica::recover(me, cfg, Tunables::default(), Life(1), Durable::default(), false);
    let _first = r.ready();
    let _second = r.ready();
}

#[test]
fn ready_then_advance_may_repeat_round_after_round() {
    let mut v = lone_voter();
    v.campaign();
    for _ in 0..3 {
        let _ = v.ready();
        v.advance();
        v.tick();
    }
}

/// A deposed leader holds a call for a retry it proposed at slot 3; a peer that chose the retry
/// there (a `Duplicate`: the write at slot 1 is byte-identical) then truncates and compacts to
/// the write at slot 2. The deposed node jumps to that trim point and re-applies slot 3 without
/// the write at slot 1: its fold judges the retry blind. The client must not hear `Refused`.
#[test]
fn a_held_call_judged_blind_after_a_jump_gets_no_verdict() {
    let (me, p, q) = (NodeId(0x100), NodeId(0x101), NodeId(0x102));
    let cfg = JournalConfig { mode: WriterMode::Single, voters: vec![me, p, q], learners: vec![] };
    let mut v = Voter::new(me, cfg, Tunables::default(), 1, Life(1));
    let a = uuid(0xa);
    let w2 = write(a, 1, vec![Bytes::from_static(b"r1")]).into_command();
    let retry = write(a, 0, vec![Bytes::from_static(b"r0")]);

    let round = |v: &mut Voter| {
        let ready = v.ready();
        v.advance();
        ready
    };
    // This node wins an election whose quorum reports slots 0..3 chosen elsewhere.
    v.campaign();
    let _ = round(&mut v);
    let ballot = v.promised();
    v.step(
        p,
        Message::Promise { ballot, from: Slot(0), chosen_up_to: Slot(3), accepted: Vec::<Reported>::new(), epoch: 0 },
    );
    assert!(v.is_leader());
    let call = CallId(1);
    v.propose(call, retry.clone());
    let ready = round(&mut v);
    assert!(
        ready.messages.iter().any(|o| matches!(&o.message, Message::Accept { entries, .. } if entries[0].0 == Slot(3)))
    );
    // P accepts slot 3: chosen here, not yet applied (this node's prefix is still at 0).
    v.step(p, Message::Accepted { ballot, slots: vec![(Slot(3), retry.clone().into_command().digest())] });
    let _ = round(&mut v);
    // Q deposes it.
    let higher = Ballot { round: ballot.round + 1, node: q };
    v.step(q, Message::Prepare { ballot: higher, from: Slot(0) });
    assert!(!v.is_leader());
    let _ = round(&mut v);
    // Q chose the retry at 3 and Truncate{up_to: 1} at 4, then compacted to the write at 2.
    let sealed =
        JournalState { leader: Some(a), term: 1, next_seq: Seq(1), first_seq: Seq(0), ..JournalState::default() };
    v.step(q, Message::TrimmedTo { from: Slot(0), point: Slot(2), state: sealed, life: v.life() });
    let truncate = Call::Truncate { leader: Some(a), up_to: Seq(1) }.into_command();
    v.step(
        q,
        Message::CatchUpResponse {
            entries: vec![(Slot(2), w2), (Slot(3), retry.into_command()), (Slot(4), truncate)],
            chosen_up_to: Slot(5),
            life: v.life(),
        },
    );
    let ready = round(&mut v);
    assert_eq!(v.chosen_up_to(), Slot(5));
    let judged: Vec<_> = ready.applied.iter().map(|x| (x.slot, x.judged.outcome, x.judged.blind)).collect();
    assert!(judged.iter().any(|(s, _, blind)| *s == Slot(3) && *blind), "slot 3 is judged blind here: {judged:?}");
    let answer = ready.answers.iter().find(|(id, _)| *id == call).map(|(_, a)| *a);
    assert_eq!(answer, Some(CallAnswer::NoVerdict), "a blind verdict is no verdict for the caller");
}

/// A journal of one voter, driven as the node's pump drives it (release first, then a round only
/// when `has_ready()`, a tick otherwise): its linearizable read is served. Its own acceptor's
/// watermark is its whole quorum; the watermark round starts in `take_released`, and the reply
/// writes nothing, so no round would ever come to deliver it if it waited for one.
#[test]
fn a_one_voter_journal_serves_a_linearizable_read() {
    let me = NodeId(0x100);
    let cfg = JournalConfig { mode: WriterMode::Single, voters: vec![me], learners: vec![] };
    let mut v = Voter::new(me, cfg, Tunables::default(), 1, Life(1));
    let mut answers = Vec::new();
    let mut reads = Vec::new();
    let drive = |v: &mut Voter, answers: &mut Vec<_>, reads: &mut Vec<_>| {
        for _ in 0..50 {
            // As the node's pump does: what may leave goes first, then a round only if owed.
            let released = v.take_released();
            answers.extend(released.answers);
            reads.extend(released.reads);
            if v.has_ready() {
                let ready = v.ready();
                answers.extend(ready.answers);
                reads.extend(ready.reads);
                v.advance();
            } else {
                v.tick();
            }
        }
    };
    v.campaign();
    drive(&mut v, &mut answers, &mut reads);
    assert!(v.is_leader(), "a lone voter is its own quorum");
    let a = uuid(0xa);
    v.propose(CallId(1), Call::SetLeader { new: a, old: None });
    v.propose(CallId(2), write(a, 0, vec![Bytes::from_static(b"r0")]));
    drive(&mut v, &mut answers, &mut reads);
    assert_eq!(answers.len(), 2, "both calls answered: {answers:?}");
    v.read(paros_core::ReadId(7), request(Seq(0), Consistency::Linearizable));
    drive(&mut v, &mut answers, &mut reads);
    match reads.as_slice() {
        [(paros_core::ReadId(7), ReadAnswer::Page { records, .. })] => {
            assert_eq!(records, &[Bytes::from_static(b"r0")])
        }
        other => panic!("the read is served from the lone voter, not {other:?}"),
    }
}

/// A quiet follower that holds a value accepted past the chosen prefix, with no leader left to
/// settle it: a linearizable read's quorum reports that slot, so the read waits for it, and the
/// follower wakes its election timer and campaigns rather than waiting out the read's deadline.
#[test]
fn a_read_waiting_for_an_unsettled_slot_wakes_a_quiet_follower_to_campaign() {
    use paros_core::journal::{Command, Control};
    let (me, p, q) = (NodeId(0x100), NodeId(0x101), NodeId(0x102));
    let cfg = JournalConfig { mode: WriterMode::Single, voters: vec![me, p, q], learners: vec![] };
    let mut v = Voter::new(me, cfg, Tunables::default(), 1, Life(1));
    let round = |v: &mut Voter| -> Vec<Message> {
        let released = v.take_released();
        let mut out: Vec<Message> = released.messages.into_iter().map(|o| o.message).collect();
        if v.has_ready() {
            out.extend(v.ready().messages.into_iter().map(|o| o.message));
            v.advance();
        }
        out
    };
    // p led at ballot 1, had this node accept slot 0, and is gone; nothing was committed.
    let ballot = Ballot { round: 1, node: p };
    let noop: Command = Command::Control(Control::Noop);
    v.step(p, Message::Accept { ballot, entries: vec![(Slot(0), noop.into())], commit: Slot(0) });
    round(&mut v);
    v.sleep();
    v.read(paros_core::ReadId(1), request(Seq(0), Consistency::Linearizable));
    let asked = round(&mut v);
    let read = asked
        .iter()
        .find_map(|m| match m {
            Message::WatermarkRequest { read, .. } => Some(*read),
            _ => None,
        })
        .expect("the read asks the voters for their watermarks");
    // q accepted nothing; this node's own watermark (slot 0 accepted) makes the target 1.
    v.step(q, Message::Watermark { read, life: Life(1), up_to: Slot(0) });
    let mut campaigned = false;
    for _ in 0..Tunables::default().election_ticks_max * 2 {
        v.tick();
        campaigned |= round(&mut v).iter().any(|m| matches!(m, Message::Prepare { .. }));
        if campaigned {
            break;
        }
    }
    assert!(campaigned, "a read waiting for an unsettled slot makes the quiet follower campaign");
}

/// A seat placed for a later configuration (a move back to a machine the journal left: a fresh
/// copy, promised to that configuration's floor, its walk still in the founders') answers no
/// watermark: it holds nothing its earlier copy accepted, so its watermark could lie below a
/// stop-sign that copy helped choose, and a reader of the old configuration counting it would
/// serve a page older than an acknowledged write (seed 130002648). A founder's copy answers.
#[test]
fn a_seat_placed_for_a_later_configuration_answers_no_watermark_until_its_walk_gets_there() {
    let (me, p, q) = (NodeId(0x100), NodeId(0x101), NodeId(0x102));
    let cfg = JournalConfig { mode: WriterMode::Single, voters: vec![me, p, q], learners: vec![] };
    let life = Life(7);
    let answers = |promise: Ballot| -> Vec<Message> {
        let durable = Durable { promise, ..Durable::default() };
        let mut v = Voter::recover(me, cfg.clone(), Tunables::default(), 1, Life(1), durable);
        v.step(p, Message::WatermarkRequest { read: 3, life });
        let mut out: Vec<Message> = v.take_released().messages.into_iter().map(|o| o.message).collect();
        if v.has_ready() {
            out.extend(v.ready().messages.into_iter().map(|o| o.message));
            v.advance();
        }
        out.into_iter().filter(|m| matches!(m, Message::Watermark { .. })).collect()
    };
    assert_eq!(answers(Ballot::ZERO), vec![Message::Watermark { read: 3, life, up_to: Slot(0) }], "a founder answers");
    assert_eq!(answers(Ballot::seat_floor(2)), vec![], "a seat of epoch 2 whose walk is in epoch 0 does not");
}

/// A voter's watermark counts an accepted entry only once the round holding it synced: a write
/// is acknowledged only after a quorum's `Accepted`, which leave with that sync, so a read that
/// follows the acknowledgement still meets the write's slot, and a read does not wait for slots
/// still in flight.
#[test]
fn a_watermark_counts_an_accepted_entry_once_its_round_synced() {
    use paros_core::journal::{Command, Control};
    let (me, p, q) = (NodeId(0x100), NodeId(0x101), NodeId(0x102));
    let cfg = JournalConfig { mode: WriterMode::Single, voters: vec![me, p, q], learners: vec![] };
    let mut v = Voter::new(me, cfg, Tunables::default(), 1, Life(1));
    let life = Life(7);
    let watermark = |v: &mut Voter, read: u64| -> Vec<Message> {
        v.step(p, Message::WatermarkRequest { read, life });
        v.take_released()
            .messages
            .into_iter()
            .map(|o| o.message)
            .filter(|m| matches!(m, Message::Watermark { .. }))
            .collect()
    };
    let ballot = Ballot { round: 1, node: p };
    let noop: Command = Command::Control(Control::Noop);
    v.step(p, Message::Accept { ballot, entries: vec![(Slot(0), noop.clone().into())], commit: Slot(0) });
    assert_eq!(watermark(&mut v, 1), vec![Message::Watermark { read: 1, life, up_to: Slot(0) }], "not yet taken");
    let ready = v.ready();
    assert!(
        ready.messages.iter().any(|o| matches!(o.message, Message::Accepted { .. })),
        "the Accepted waits for the sync"
    );
    assert_eq!(watermark(&mut v, 2), vec![Message::Watermark { read: 2, life, up_to: Slot(0) }], "taken, not synced");
    v.advance();
    assert_eq!(watermark(&mut v, 3), vec![Message::Watermark { read: 3, life, up_to: Slot(1) }], "synced: counted");
    // Recovered from the disk, the entry is durable from the start.
    let entry = paros_core::LogEntry { ballot: Some(ballot), command: noop };
    let durable = Durable { promise: ballot, entries: vec![(Slot(0), entry)], ..Durable::default() };
    let cfg = JournalConfig { mode: WriterMode::Single, voters: vec![me, p, q], learners: vec![] };
    let mut r = Voter::recover(me, cfg, Tunables::default(), 1, Life(2), durable);
    assert_eq!(watermark(&mut r, 4), vec![Message::Watermark { read: 4, life, up_to: Slot(1) }], "recovered: counted");
}
