//! Persist before send, at the host and the pump: an acceptor's vote (`Promise`, `Accepted`:
//! `Message::needs_durable_sender`) leaves only once the round that wrote the
//! state it reports is synced — never in an `Early` hand-out, a `release`, or a step taken
//! while the batch is on its way to the disk — and this node's own acceptor's reply counts
//! for its own proposer only then too.
//!
//! One machine under test (`B`) hosts a journal of three voters over an in-memory store; the
//! two peers are played by the test, which writes their messages by hand (and, for a
//! linearizable read, takes the request from a real second host).

mod common;

use common::next_id;
use paros_core::journal::{Command, Control, WriterMode};
use paros_core::{
    Ballot, Consistency, Durable, JournalConfig, JournalId, JournalKey, Message, NodeId, ReadRequest, Seq, Slot,
    TenantId, Tunables, WriteOp,
};
use paros_node::ports::{Envelope, LogStore};
use paros_node::pump::Batch;
use paros_node::rpc::NodeRequest;
use paros_node::{Early, Host, MemStore, PendingRound, Pump, RoundOutput};

const A: NodeId = NodeId(0x6601);
const B: NodeId = NodeId(0x6602);
const C: NodeId = NodeId(0x6603);
const NOOP: Command = Command::Control(Control::Noop);

fn key() -> JournalKey {
    JournalKey { tenant: TenantId(0x77), journal: JournalId(0x78) }
}

fn config() -> JournalConfig {
    JournalConfig { mode: WriterMode::Single, voters: vec![A, B, C], learners: vec![] }
}

fn tunables() -> Tunables {
    Tunables { election_ticks_min: 5, election_ticks_max: 10, ..Tunables::default() }
}

fn ballot_of(node: NodeId, round: u64) -> Ballot {
    Ballot { round, node }
}

/// A leader's Accept of a gap filler at each of `slots`.
fn accept_noops(ballot: Ballot, slots: &[u64]) -> Message {
    Message::Accept { ballot, entries: slots.iter().map(|s| (Slot(*s), NOOP.into())).collect(), commit: Slot(0) }
}

fn envelope(from: NodeId, message: Message) -> Envelope {
    Envelope { journal: key(), from, message }
}

/// Machine `me` with the journal placed and its placement persisted: nothing in flight, nothing
/// waiting. No clock is read, so nothing ticks and nobody campaigns unless told to.
fn boot(me: NodeId) -> (Host<MemStore>, MemStore) {
    let disk = MemStore::new();
    let mut host = Host::boot(disk.clone(), None, me, tunables(), me.0).expect("boots");
    host.place(key(), config()).expect("placed");
    host.round(|_| {}).expect("the placement round");
    assert!(!host.has_work(), "the placement is persisted");
    (host, disk)
}

/// What the disk holds synced for the journal (a crash now would keep exactly this).
fn synced(disk: &MemStore) -> Durable {
    disk.load().expect("memory load").into_iter().find(|j| j.key == key()).expect("placed").durable
}

/// The acceptor replies among `envelopes`.
fn replies<'a>(envelopes: impl IntoIterator<Item = &'a Envelope>) -> Vec<&'a Message> {
    envelopes.into_iter().map(|e| &e.message).filter(|m| m.needs_durable_sender()).collect()
}

/// Every acceptor reply handed out early, with its destination.
fn early_replies(early: &[Early]) -> Vec<(NodeId, &Message)> {
    early
        .iter()
        .flat_map(|e| match e {
            Early::Messages(to, envelopes) => replies(envelopes).into_iter().map(|m| (*to, m)).collect(),
            Early::Answer(..) => Vec::new(),
        })
        .collect()
}

/// Writes a round's batch and syncs it, as the shell's storage thread does.
fn persist(host: &mut Host<MemStore>, pending: &PendingRound) {
    let mut store = host.lend_store();
    store.place(&pending.placements).expect("memory place");
    store.write(&pending.batch).expect("memory write");
    if pending.needs_sync {
        store.sync().expect("memory sync");
    }
    host.return_store(store);
}

/// Delivers `inputs` from `from` to `host` and runs one round the way the shell does — the
/// inputs released, the round begun, more releases while its batch is out — stopping short of
/// the sync. Returns everything handed out so far and the round in flight.
fn begin(host: &mut Host<MemStore>, from: NodeId, inputs: Vec<Message>) -> (Vec<Early>, PendingRound) {
    let mut early = Vec::new();
    host.deliver(from, inputs.into_iter().map(|m| envelope(from, m)).collect());
    host.release(|e| early.push(e));
    let pending = host.begin_round(|e| early.push(e));
    host.release(|e| early.push(e));
    (early, pending)
}

/// The acceptor replies a completed round hands out, with their destination.
fn output_replies(out: &RoundOutput) -> Vec<(NodeId, &Message)> {
    out.messages.iter().flat_map(|(to, envelopes)| replies(envelopes).into_iter().map(|m| (*to, m))).collect()
}

#[test]
fn a_promise_leaves_only_after_the_round_that_wrote_the_promise_is_synced() {
    let (mut host, disk) = boot(B);
    let ballot = ballot_of(A, 3);
    let (early, pending) = begin(&mut host, A, vec![Message::Prepare { ballot, from: Slot(0) }]);
    assert!(
        pending.batch.iter().any(|(_, ops)| ops.contains(&WriteOp::Promise(ballot))),
        "the round writes the promise"
    );
    assert!(pending.needs_sync, "a promise needs a sync");
    assert_eq!(early_replies(&early), Vec::new(), "no Promise before the sync of the round that wrote it");
    // The candidate retries its Prepare while the batch is out: still nothing leaves.
    let mut meanwhile = Vec::new();
    host.deliver(A, vec![envelope(A, Message::Prepare { ballot, from: Slot(0) })]);
    host.release(|e| meanwhile.push(e));
    assert_eq!(early_replies(&meanwhile), Vec::new(), "no Promise while the promise is on its way to the disk");
    persist(&mut host, &pending);
    assert_eq!(synced(&disk).promise, ballot, "the promise is synced");
    let out = host.complete_round(pending);
    let sent = output_replies(&out);
    assert!(
        matches!(sent.as_slice(), [(A, Message::Promise { ballot: b, .. })] if *b == ballot),
        "the Promise leaves with the completed round, to the candidate: {sent:?}"
    );
}

#[test]
fn an_accepted_leaves_only_after_the_round_that_wrote_the_values_is_synced() {
    let (mut host, disk) = boot(B);
    let ballot = ballot_of(A, 2);
    let (early, pending) = begin(&mut host, A, vec![accept_noops(ballot, &[0, 1])]);
    let accepts =
        pending.batch.iter().flat_map(|(_, ops)| ops).filter(|op| matches!(op, WriteOp::Accept { .. })).count();
    assert_eq!(accepts, 2, "the round writes both values");
    assert_eq!(early_replies(&early), Vec::new(), "no Accepted before the sync of the round that wrote the values");
    // The leader pipelines a second Accept while the first round is on its way to the disk:
    // its reply waits for the next round, and this one's still for its sync.
    let mut meanwhile = Vec::new();
    host.deliver(A, vec![envelope(A, accept_noops(ballot, &[2]))]);
    host.release(|e| meanwhile.push(e));
    assert_eq!(early_replies(&meanwhile), Vec::new(), "nothing acknowledged while the batch is out");
    persist(&mut host, &pending);
    assert_eq!(synced(&disk).entries.len(), 2, "the first two values are on the disk");
    let out = host.complete_round(pending);
    let sent = output_replies(&out);
    match sent.as_slice() {
        [(A, Message::Accepted { ballot: b, slots })] => {
            assert_eq!(*b, ballot);
            assert_eq!(
                slots.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
                vec![Slot(0), Slot(1)],
                "only the synced slots"
            );
        }
        other => panic!("the completed round acknowledges the two values it synced: {other:?}"),
    }
    // The pipelined value: its own round, its own sync.
    let mut early = Vec::new();
    let pending = host.begin_round(|e| early.push(e));
    assert_eq!(early_replies(&early), Vec::new());
    persist(&mut host, &pending);
    let out = host.complete_round(pending);
    let acknowledged = matches!(
        output_replies(&out).as_slice(),
        [(A, Message::Accepted { slots, .. })] if slots.iter().map(|(s, _)| *s).eq([Slot(2)])
    );
    assert!(acknowledged, "the pipelined value is acknowledged with its own round");
}

/// A watermark is a bound a reader waits to apply up to, not a vote: it leaves before the sync.
/// It counts what the last synced round made durable, not the Accept of the round being synced
/// (whose `Accepted`, the only way a write it holds is acknowledged, waits for that sync); once
/// the round synced, the next watermark counts it.
#[test]
fn a_watermark_leaves_before_the_sync_and_counts_what_the_last_sync_made_durable() {
    // A real second machine asks: the request is the one a linearizable read sends.
    let (mut reader, _) = boot(A);
    let (mut host, disk) = boot(B);
    let ballot = ballot_of(C, 2);
    let mut early = Vec::new();
    host.deliver(C, vec![envelope(C, accept_noops(ballot, &[0]))]);
    host.deliver(A, watermark_requests_to_b(&mut reader));
    host.release(|e| early.push(e));
    let pending = host.begin_round(|e| early.push(e));
    host.release(|e| early.push(e));
    assert_eq!(early_replies(&early), Vec::new(), "no Accepted before the sync");
    assert_eq!(
        watermarks_to_a(&early),
        [Slot(0)],
        "the watermark leaves at once, not counting the accept not yet synced"
    );
    persist(&mut host, &pending);
    assert_eq!(synced(&disk).entries.len(), 1, "the value is synced");
    let out = host.complete_round(pending);
    let sent = output_replies(&out);
    assert!(sent.iter().any(|(to, m)| *to == C && matches!(m, Message::Accepted { .. })), "{sent:?}");
    // Asked again once the round synced, B counts the accept.
    let mut again = Vec::new();
    host.deliver(A, watermark_requests_to_b(&mut reader));
    host.release(|e| again.push(e));
    assert_eq!(watermarks_to_a(&again), [Slot(1)], "once synced, the accept counts");
}

/// A linearizable read on `reader` (machine A): the watermark request it sends B.
fn watermark_requests_to_b(reader: &mut Host<MemStore>) -> Vec<Envelope> {
    let read =
        ReadRequest { from: Seq(0), limit: 0, max_bytes: 0, wait_ticks: 0, consistency: Consistency::Linearizable };
    reader.request(NodeRequest::Read { journal: key(), id: paros_core::ReadId(next_id()), read }).expect("hosted");
    let mut asked = Vec::new();
    let out = reader.round(|e| asked.push(e)).expect("round");
    let to_b: Vec<Envelope> = asked
        .into_iter()
        .flat_map(|e| match e {
            Early::Messages(to, envelopes) if to == B => envelopes,
            _ => Vec::new(),
        })
        .chain(out.messages.get(&B).cloned().unwrap_or_default())
        .filter(|e| matches!(e.message, Message::WatermarkRequest { .. }))
        .collect();
    assert_eq!(to_b.len(), 1, "the read asks B for its watermark");
    to_b
}

/// The `up_to` of every watermark sent to A among `early`.
fn watermarks_to_a(early: &[Early]) -> Vec<Slot> {
    early
        .iter()
        .flat_map(|e| match e {
            Early::Messages(to, envelopes) if *to == A => envelopes.iter().collect(),
            _ => Vec::new(),
        })
        .filter_map(|e| match e.message {
            Message::Watermark { up_to, .. } => Some(up_to),
            _ => None,
        })
        .collect()
}

/// `Host::round` persists on the caller's thread: its output holds the replies, and by the
/// time it returns the promise and the values they report are synced.
#[test]
fn a_whole_round_syncs_before_it_hands_out_the_replies() {
    let (mut host, disk) = boot(B);
    let ballot = ballot_of(A, 4);
    host.deliver(A, vec![envelope(A, Message::Prepare { ballot, from: Slot(0) })]);
    host.deliver(A, vec![envelope(A, accept_noops(ballot, &[0]))]);
    let mut early = Vec::new();
    let before = disk.counts().1;
    let out = host.round(|e| early.push(e)).expect("round");
    assert_eq!(early_replies(&early), Vec::new(), "nothing acknowledged before the sync");
    let sent = output_replies(&out);
    assert!(sent.iter().any(|(_, m)| matches!(m, Message::Promise { .. })), "{sent:?}");
    assert!(sent.iter().any(|(_, m)| matches!(m, Message::Accepted { .. })), "{sent:?}");
    assert_eq!(disk.counts().1, before + 1, "one sync for the round");
    let on_disk = synced(&disk);
    assert_eq!(on_disk.promise, ballot, "the promise the replies state is synced");
    assert_eq!(on_disk.entries.len(), 1, "the value the Accepted states is synced");
}

/// The node's own acceptor is a voter like any other: a candidate may not count its own
/// Promise before the round that wrote it is synced, even with a peer's Promise in hand.
#[test]
fn a_candidates_own_promise_counts_only_after_its_round_is_synced() {
    let (mut host, disk) = boot(B);
    host.campaign(&key());
    let ballot = host.voter(&key()).expect("a voter").promised();
    assert_eq!(ballot.node, B, "B campaigns at a ballot of its own");
    let (early, pending) = begin(&mut host, A, vec![]);
    assert!(
        pending.batch.iter().any(|(_, ops)| ops.contains(&WriteOp::Promise(ballot))),
        "the round writes B's own promise"
    );
    assert_eq!(early_replies(&early), Vec::new());
    // A's Promise arrives while B's own promise is on its way to the disk: one of two.
    let peer = Message::Promise { ballot, from: Slot(0), chosen_up_to: Slot(0), accepted: Vec::new(), epoch: 0 };
    host.deliver(A, vec![envelope(A, peer)]);
    host.release(|_| {});
    assert!(
        !host.voter(&key()).expect("a voter").is_leader(),
        "B's own unsynced promise does not make a quorum with A's"
    );
    persist(&mut host, &pending);
    assert_eq!(synced(&disk).promise, ballot, "B's own promise is synced");
    let out = host.complete_round(pending);
    assert!(host.voter(&key()).expect("a voter").is_leader(), "once synced, B's own promise and A's elect B");
    assert!(
        output_replies(&out).iter().all(|(to, _)| *to != B),
        "B's reply to itself is delivered inside the journal, never handed out"
    );
}

// ---- the pump: the event loop the shell and the simulation drive ----

/// A pump over machine `B`, with the store it persists to.
fn pump() -> (Pump<MemStore>, MemStore) {
    let (host, disk) = boot(B);
    (Pump::new(host, 0), disk)
}

/// One step at clock reading 0 (no tick is ever due), handing back `synced` if given.
fn step(pump: &mut Pump<MemStore>, synced: Option<Batch>) -> paros_node::Effects {
    pump.step(0, synced)
}

/// Writes a persist's batch to the pump's store and syncs when asked, as the driver does.
fn write_and_sync(pump: &mut Pump<MemStore>, p: &paros_node::Persist) {
    let mut store = pump.host_mut().lend_store();
    store.place(&p.placements).expect("memory place");
    store.write(&p.batch).expect("memory write");
    if p.needs_sync {
        store.sync().expect("memory sync");
    }
    pump.host_mut().return_store(store);
}

fn effect_replies(effects: &paros_node::Effects) -> Vec<(NodeId, &Message)> {
    effects.messages.iter().flat_map(|(to, envelopes)| replies(envelopes).into_iter().map(|m| (*to, m))).collect()
}

#[test]
fn a_pump_hands_out_acceptor_replies_only_in_the_step_that_hands_their_batch_back() {
    let (mut pump, disk) = pump();
    let ballot = ballot_of(A, 5);
    pump.deliver(A, vec![envelope(A, Message::Prepare { ballot, from: Slot(0) })]);
    pump.deliver(A, vec![envelope(A, accept_noops(ballot, &[0]))]);
    let mut first = step(&mut pump, None);
    let persist = first.persist.take().expect("the step begins a round with the promise and the value");
    assert!(persist.needs_sync);
    assert_eq!(effect_replies(&first), Vec::new(), "nothing acknowledged in the step that begins the round");
    // The disk is slow: steps go on, more input arrives, and no reply leaves.
    pump.deliver(A, vec![envelope(A, accept_noops(ballot, &[1]))]);
    for _ in 0..3 {
        let meanwhile = step(&mut pump, None);
        assert_eq!(effect_replies(&meanwhile), Vec::new(), "no reply while the batch is out");
        assert!(meanwhile.persist.is_none() && !meanwhile.completed, "one round in flight at a time");
    }
    assert_eq!(synced(&disk).promise, Ballot::ZERO, "nothing of the round reached the disk yet");
    write_and_sync(&mut pump, &persist);
    let done = step(&mut pump, Some(persist.batch));
    assert!(done.completed);
    let sent = effect_replies(&done);
    assert!(sent.iter().any(|(to, m)| *to == A && matches!(m, Message::Promise { .. })), "{sent:?}");
    assert!(
        sent.iter().any(|(to, m)| *to == A
            && matches!(m, Message::Accepted { slots, .. } if slots.iter().map(|(s, _)| *s).eq([Slot(0)]))),
        "the value of the synced round is acknowledged, not the one still waiting: {sent:?}"
    );
    let on_disk = synced(&disk);
    assert_eq!((on_disk.promise, on_disk.entries.len()), (ballot, 1), "what the replies state is synced");
}

#[test]
fn a_pumped_candidate_counts_its_own_promise_only_once_its_batch_is_handed_back() {
    let (mut pump, _disk) = pump();
    pump.host_mut().campaign(&key());
    let ballot = pump.host().voter(&key()).expect("a voter").promised();
    let mut first = step(&mut pump, None);
    let persist = first.persist.take().expect("the campaign's round");
    pump.deliver(
        A,
        vec![envelope(
            A,
            Message::Promise { ballot, from: Slot(0), chosen_up_to: Slot(0), accepted: Vec::new(), epoch: 0 },
        )],
    );
    for _ in 0..2 {
        let meanwhile = step(&mut pump, None);
        assert!(meanwhile.messages.iter().all(|(to, _)| *to != B), "never mailed to itself");
        assert!(
            !pump.host().voter(&key()).expect("a voter").is_leader(),
            "B's own promise is not synced: no quorum yet"
        );
    }
    write_and_sync(&mut pump, &persist);
    let done = step(&mut pump, Some(persist.batch));
    assert!(done.completed);
    assert!(pump.host().voter(&key()).expect("a voter").is_leader(), "its own synced promise and A's elect B");
}
