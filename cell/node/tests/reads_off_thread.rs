//! Reads below a journal's in-memory window run on the node's read threads, never on the node
//! thread: while a read waits on a slow disk, every other journal on the machine keeps
//! acknowledging writes; a read that finds every read thread busy and the queue full is
//! answered `Unserved` at once (the caller retries), never held and never dropped. The wake of
//! a dormant journal reads the store the same way: while it waits on the disk, its inputs are
//! held (one wake per journal) and every other journal keeps acknowledging writes.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use common::{Gate, GatedStore, Stall, next_id};
use paros_core::journal::{JournalView, Outcome, WriterMode};
use paros_core::wire::{Consistency, ReadRequest};
use paros_core::{
    Call, CallAnswer, JournalConfig, JournalId, JournalKey, LeaderUuid, NodeId, ReadAnswer, Seq, TenantId, Tunables,
};
use paros_node::ports::{Envelope, LogStore, MonotonicClock, Transport};
use paros_node::rpc::{Incoming, NodeAnswer, NodeRequest};
use paros_node::shell::{self, NodeHandle, ShellConfig};
use paros_node::{Host, MemStore};

const ME: NodeId = NodeId(0x7701);
const SLOW: JournalKey = JournalKey { tenant: TenantId(0x71), journal: JournalId(1) };
const BUSY: JournalKey = JournalKey { tenant: TenantId(0x71), journal: JournalId(2) };
const WAIT: Duration = Duration::from_secs(10);

/// A one-machine cell: nothing to send anywhere.
struct Nowhere;

impl Transport for Nowhere {
    fn send(&mut self, _: NodeId, _: Vec<Envelope>) {}
}

struct Node {
    handle: NodeHandle<GatedStore>,
    inbox: tokio::sync::mpsc::Sender<Incoming>,
    gate: Arc<Gate>,
}

fn uuid() -> LeaderUuid {
    LeaderUuid::new(0x77).expect("non-zero")
}

/// The write of one record at `seq` by [`uuid`], accepted on a journal never truncated.
fn accepted(seq: u64) -> Outcome {
    let view = JournalView { leader: Some(uuid()), first_seq: Seq(0), next_seq: Seq(seq + 1) };
    Outcome::Accepted { seq: Seq(seq), count: 1, view }
}

impl Node {
    /// A machine that is the only voter of two journals, with a window of four slots, and no
    /// dormancy.
    async fn start(config: ShellConfig) -> Node {
        Node::start_dormant(config, None).await
    }

    /// As [`Node::start`], journals quiet for `dormant_after` leaving memory.
    async fn start_dormant(config: ShellConfig, dormant_after: Option<Duration>) -> Node {
        let tunables = Tunables { window_slots: 4, window_bytes: 64, anchor_slots: 5, ..Tunables::default() };
        let gate = Arc::new(Gate::default());
        let store =
            GatedStore { disk: MemStore::new(), gate: Arc::clone(&gate), stall: Stall::Reads { wake_of: SLOW } };
        let mut host = Host::boot(store, None, ME, tunables, 0x77).expect("boots");
        for key in [SLOW, BUSY] {
            host.place(key, JournalConfig { mode: WriterMode::Single, voters: vec![ME], learners: vec![] })
                .expect("placed");
            host.campaign(&key);
        }
        let (inbox, rx) = tokio::sync::mpsc::channel(64);
        let config = ShellConfig { tick: Duration::from_millis(5), dormant_after, ..config };
        let handle = shell::spawn(host, Nowhere, rx, MonotonicClock::new(), config);
        let node = Node { handle, inbox, gate };
        for key in [SLOW, BUSY] {
            let won = node.ask(NodeRequest::Call {
                journal: key,
                id: paros_core::CallId(next_id()),
                call: Call::SetLeader { new: uuid(), old: None },
            });
            assert!(matches!(won.await, NodeAnswer::Call(CallAnswer::Verdict(Outcome::Won(_)))), "{key:?} claimed");
        }
        node
    }

    /// Sends `request`; the answer arrives on the receiver.
    async fn send(&self, request: NodeRequest) -> tokio::sync::oneshot::Receiver<NodeAnswer> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.inbox.send(Incoming::Request { request, reply }).await.expect("the node runs");
        answer
    }

    async fn ask(&self, request: NodeRequest) -> NodeAnswer {
        let answer = self.send(request).await;
        tokio::time::timeout(WAIT, answer).await.expect("answered in time").expect("answered")
    }

    async fn write(&self, key: JournalKey, seq: u64) -> NodeAnswer {
        self.ask(write_request(key, seq)).await
    }

    /// Enough writes on `SLOW` that its first records leave memory.
    async fn fill_past_the_window(&self) {
        for seq in 0..24 {
            let accepted = NodeAnswer::Call(CallAnswer::Verdict(accepted(seq)));
            assert_eq!(self.write(SLOW, seq).await, accepted);
        }
    }

    /// Waits until `n` range reads wait at the gate.
    async fn reads_waiting(&self, n: usize) {
        for _ in 0..1000 {
            if self.gate.waiting.load(Ordering::SeqCst) == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("{n} reads never reached the disk: {:?}", self.handle.stats());
    }
}

/// Waits until the node's counters (published after each step) satisfy `ok`.
async fn stats_reach(node: &Node, ok: impl Fn(&paros_node::HostStats) -> bool) -> paros_node::HostStats {
    for _ in 0..1000 {
        let stats = node.handle.stats();
        if ok(&stats) {
            return stats;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the counters never got there: {:?}", node.handle.stats());
}

/// The write of `record {seq}` at `seq` on `key` by [`uuid`].
fn write_request(key: JournalKey, seq: u64) -> NodeRequest {
    let records = vec![Bytes::from(format!("record {seq}"))];
    NodeRequest::Call {
        journal: key,
        id: paros_core::CallId(next_id()),
        call: Call::Write { leader: Some(uuid()), seq: Seq(seq), records },
    }
}

fn first_record() -> NodeRequest {
    let read = ReadRequest {
        from: Seq(0),
        limit: 1,
        max_bytes: 0,
        wait_ticks: u32::MAX,
        consistency: Consistency::Linearizable,
    };
    NodeRequest::Read { journal: SLOW, id: paros_core::ReadId(next_id()), read }
}

#[tokio::test]
async fn a_read_below_the_window_waits_on_a_read_thread_while_other_journals_keep_writing() {
    let node = Node::start(ShellConfig::default()).await;
    node.fill_past_the_window().await;
    node.gate.set(true);
    let mut read = node.send(first_record()).await;
    node.reads_waiting(1).await;
    // The disk holds the read; the node thread does not wait for it.
    for seq in 0..8 {
        let accepted = NodeAnswer::Call(CallAnswer::Verdict(accepted(seq)));
        assert_eq!(node.write(BUSY, seq).await, accepted, "another journal writes while a read waits on the disk");
    }
    assert!(read.try_recv().is_err(), "the read is still waiting on the disk");
    node.gate.set(false);
    let answer = tokio::time::timeout(WAIT, read).await.expect("answered in time").expect("answered");
    let NodeAnswer::Read(ReadAnswer::Page { from, records, .. }) = answer else { panic!("a page: {answer:?}") };
    assert_eq!((from, records), (Seq(0), vec![Bytes::from("record 0")]), "the worker read the evicted record");
    let stats = stats_reach(&node, |s| s.fetches >= 1).await;
    assert_eq!(stats.fetches_refused, 0, "served by a worker, not refused");
    let _ = node.handle.stop();
}

#[tokio::test]
async fn a_read_that_finds_the_read_queue_full_is_answered_unserved_at_once() {
    let node = Node::start(ShellConfig { read_workers: 1, reads_queued_max: 1, ..ShellConfig::default() }).await;
    node.fill_past_the_window().await;
    node.gate.set(true);
    let first = node.send(first_record()).await;
    node.reads_waiting(1).await;
    assert_eq!(
        node.ask(first_record()).await,
        NodeAnswer::Read(ReadAnswer::unserved_at(Seq(24))),
        "no room: retry later"
    );
    let stats = stats_reach(&node, |s| s.fetches_refused >= 1).await;
    assert_eq!((stats.fetches_refused, stats.fetches), (1, 0), "the refusal is counted; nothing served yet");
    node.gate.set(false);
    let answer = tokio::time::timeout(WAIT, first).await.expect("answered in time").expect("answered");
    assert!(matches!(answer, NodeAnswer::Read(ReadAnswer::Page { .. })), "the read that got room is served");
    // Room again: the next read below the window is served.
    assert!(matches!(node.ask(first_record()).await, NodeAnswer::Read(ReadAnswer::Page { .. })));
    let _ = node.handle.stop();
}

#[tokio::test]
async fn a_wake_waits_on_a_read_thread_while_other_journals_keep_writing() {
    let node = Node::start_dormant(ShellConfig::default(), Some(Duration::from_millis(50))).await;
    assert_eq!(node.write(SLOW, 0).await, NodeAnswer::Call(CallAnswer::Verdict(accepted(0))));
    stats_reach(&node, |s| s.dormant == 2).await;
    node.gate.set(true);
    // A write wakes SLOW: its state is read on a read thread, which the disk holds.
    let mut write = node.send(write_request(SLOW, 1)).await;
    node.reads_waiting(1).await;
    // A read of SLOW arriving meanwhile is held with the write; SLOW is not woken twice (the
    // other read thread is free, and no second read of it reaches the disk).
    let mut read = node.send(first_record()).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(node.gate.waiting.load(Ordering::SeqCst), 1, "one wake of SLOW at a time");
    // The node thread does not wait for the disk: BUSY wakes too (its read is not held) and
    // its writes are acknowledged.
    for seq in 0..8 {
        let accepted = NodeAnswer::Call(CallAnswer::Verdict(accepted(seq)));
        assert_eq!(node.write(BUSY, seq).await, accepted, "another journal writes while a wake waits on the disk");
    }
    assert!(write.try_recv().is_err() && read.try_recv().is_err(), "SLOW's inputs wait for its wake");
    let stats = node.handle.stats();
    assert_eq!((stats.wakes, stats.dormant), (1, 1), "BUSY woke; SLOW is still dormant, waking");
    node.gate.set(false);
    let answer = tokio::time::timeout(WAIT, write).await.expect("answered in time").expect("answered");
    assert_eq!(answer, NodeAnswer::Call(CallAnswer::Verdict(accepted(1))), "the write that woke SLOW lands");
    let answer = tokio::time::timeout(WAIT, read).await.expect("answered in time").expect("answered");
    let NodeAnswer::Read(ReadAnswer::Page { from, records, .. }) = answer else { panic!("a page: {answer:?}") };
    assert_eq!((from, records), (Seq(0), vec![Bytes::from("record 0")]), "the read held with it is served");
    assert!(stats_reach(&node, |s| s.wakes >= 2).await.fetch_errors == 0);
    let _ = node.handle.stop();
}

/// The sans-IO hand-off the shell and the simulation both drive: a one-voter pump over a
/// memory store, each round persisted at once.
struct Driver {
    pump: paros_node::Pump<MemStore>,
    reader: MemStore,
    now_ms: u64,
    answers: Vec<(paros_node::Owed, NodeAnswer)>,
    jobs: Vec<paros_node::FetchJob>,
    /// The batch persisted by the last step, handed back to the next.
    synced: Option<paros_node::pump::Batch>,
}

impl Driver {
    fn new() -> Driver {
        Driver::with(Tunables::default(), None)
    }

    /// [`Driver::new`] with `tunables` (its window and anchors aside), and with journals quiet
    /// for `dormant_after` ticks leaving memory: a tick then passes at every step.
    fn with(tunables: Tunables, dormant_after: Option<u64>) -> Driver {
        Driver::feeding(tunables, dormant_after, vec![])
    }

    /// [`Driver::with`], the journal's chosen batches fed to the tiers `learners`.
    fn feeding(tunables: Tunables, dormant_after: Option<u64>, learners: Vec<NodeId>) -> Driver {
        let tunables = Tunables { window_slots: 4, window_bytes: 64, anchor_slots: 5, ..tunables };
        let disk = MemStore::new();
        let mut host = Host::boot(disk.clone(), None, ME, tunables, 0x78).expect("boots");
        if dormant_after.is_some() {
            host.set_dormancy(dormant_after);
            host.set_tick_ms(1);
        }
        host.place(SLOW, JournalConfig { mode: WriterMode::Single, voters: vec![ME], learners }).expect("placed");
        host.campaign(&SLOW);
        let mut d = Driver {
            pump: paros_node::Pump::new(host, 0),
            reader: disk,
            now_ms: 0,
            answers: vec![],
            jobs: vec![],
            synced: None,
        };
        d.ask(NodeRequest::Call {
            journal: SLOW,
            id: paros_core::CallId(next_id()),
            call: Call::SetLeader { new: uuid(), old: None },
        });
        for seq in 0..24 {
            let records = vec![Bytes::from(format!("record {seq}"))];
            let write = Call::Write { leader: Some(uuid()), seq: Seq(seq), records };
            d.ask(NodeRequest::Call { journal: SLOW, id: paros_core::CallId(next_id()), call: write });
        }
        d.answers.clear();
        d
    }

    /// Steps until the pump rests, persisting each round at once; keeps answers and jobs.
    fn settle(&mut self) {
        self.run(64, true);
    }

    /// Steps `steps` times, or until the pump rests if `until_rest`, persisting each round at
    /// once; keeps answers and jobs.
    fn run(&mut self, steps: usize, until_rest: bool) {
        for _ in 0..steps {
            self.now_ms += 1;
            let effects = self.pump.step(self.now_ms, self.synced.take());
            self.answers.extend(effects.answers);
            self.jobs.extend(effects.fetches);
            if let Some(p) = effects.persist {
                let mut store = self.pump.host_mut().lend_store();
                store.place(&p.placements).expect("memory");
                store.write(&p.batch).expect("memory");
                store.sync().expect("memory");
                self.pump.host_mut().return_store(store);
                self.synced = Some(p.batch);
            } else if until_rest && !self.pump.wants_step() {
                return;
            }
        }
    }

    fn ask(&mut self, request: NodeRequest) -> paros_node::Owed {
        let ticket = self.pump.request(request).expect("hosted");
        self.settle();
        ticket
    }

    fn answer(&self, ticket: paros_node::Owed) -> Option<&NodeAnswer> {
        self.answers.iter().find(|(t, _)| *t == ticket).map(|(_, a)| a)
    }
}

#[test]
fn a_step_hands_a_read_below_the_window_out_and_answers_it_only_when_its_answer_comes_back() {
    let mut d = Driver::new();
    let read = d.ask(first_record());
    assert_eq!(d.jobs.len(), 1, "the read is handed out as a job");
    assert!(d.answer(read).is_none(), "and not answered by the round");
    assert_eq!(d.pump.host().fetches_out(), 1);
    for _ in 0..4 {
        d.settle();
    }
    assert!(d.answer(read).is_none(), "steps do not wait for it, nor answer it");
    let job = d.jobs.pop().expect("one job");
    d.pump.fetched(job.run(&d.reader));
    assert!(d.pump.wants_step(), "an answer handed back wants a step");
    d.settle();
    let Some(NodeAnswer::Read(ReadAnswer::Page { from, records, .. })) = d.answer(read) else {
        panic!("a page: {:?}", d.answer(read))
    };
    assert_eq!((*from, records.clone()), (Seq(0), vec![Bytes::from("record 0")]));
    assert_eq!(d.pump.host().fetches_out(), 0);
}

#[test]
fn past_the_bound_a_read_below_the_window_is_answered_unserved_in_the_same_step() {
    let mut d = Driver::new();
    d.pump.host_mut().set_fetches_max(1);
    let first = d.pump.request(first_record()).expect("hosted");
    let second = d.pump.request(first_record()).expect("hosted");
    d.settle();
    assert_eq!(d.jobs.len(), 1, "one read out at a time");
    assert!(d.answer(first).is_none());
    assert_eq!(
        d.answer(second),
        Some(&NodeAnswer::Read(ReadAnswer::unserved_at(Seq(24)))),
        "the other is refused at once"
    );
    assert_eq!(d.pump.host().stats().fetches_refused, 1);
    let job = d.jobs.pop().expect("one job");
    d.pump.fetched(job.run(&d.reader));
    d.settle();
    assert!(matches!(d.answer(first), Some(NodeAnswer::Read(ReadAnswer::Page { .. }))));
}

#[test]
fn a_step_hands_a_wake_out_once_and_its_journal_answers_only_once_the_answer_comes_back() {
    let mut d = Driver::with(Tunables { calls_max: 2, ..Tunables::default() }, Some(3));
    for _ in 0..200 {
        if d.pump.host().is_dormant(&SLOW) {
            break;
        }
        d.run(1, false);
    }
    assert!(d.pump.host().is_dormant(&SLOW), "the quiet journal went dormant");
    let write = |seq: u64| {
        let records = vec![Bytes::from(format!("record {seq}"))];
        NodeRequest::Call {
            journal: SLOW,
            id: paros_core::CallId(next_id()),
            call: Call::Write { leader: Some(uuid()), seq: Seq(seq), records },
        }
    };
    let call = d.ask(write(24));
    let wakes = |d: &Driver| d.jobs.iter().filter(|j| j.is_wake()).count();
    assert_eq!(wakes(&d), 1, "the wake is handed out as a job");
    assert!(d.pump.host().is_waking(&SLOW) && d.pump.host().is_dormant(&SLOW), "dormant until it comes back");
    assert_eq!(d.pump.host().fetches_out(), 1);
    // More inputs while it wakes: held with the first, no second wake; past the journal's
    // bound of calls a call is answered `Busy` at once.
    let read = d.ask(first_record());
    let held = d.ask(write(25));
    let busy = d.ask(write(26));
    d.run(10, false);
    assert_eq!(wakes(&d), 1, "one wake at a time");
    assert!(d.answer(call).is_none() && d.answer(read).is_none() && d.answer(held).is_none(), "held");
    assert_eq!(d.answer(busy), Some(&NodeAnswer::Call(CallAnswer::Busy)), "past the bound of held calls");
    assert_eq!(d.pump.host().stats().wakes, 0, "steps do not read the store");

    let job = d.jobs.pop().expect("the wake");
    assert!(job.is_wake());
    d.pump.fetched(job.run(&d.reader));
    assert!(d.pump.wants_step(), "a wake's answer wants a step");
    d.settle();
    assert!(!d.pump.host().is_dormant(&SLOW) && !d.pump.host().is_waking(&SLOW), "woken");
    assert_eq!(d.pump.host().stats().wakes, 1);
    let view = |next: u64| JournalView { leader: Some(uuid()), first_seq: Seq(0), next_seq: Seq(next) };
    let landed = |seq: u64| CallAnswer::Verdict(Outcome::Accepted { seq: Seq(seq), count: 1, view: view(seq + 1) });
    assert_eq!(d.answer(call), Some(&NodeAnswer::Call(landed(24))), "the call that woke it lands");
    assert_eq!(d.answer(held), Some(&NodeAnswer::Call(landed(25))), "and the one held after it, in order");
    // The read below the window, held with them, is a page read on a worker in turn.
    assert!(d.answer(read).is_none());
    for job in std::mem::take(&mut d.jobs) {
        assert!(job.is_page(), "no second wake");
        d.pump.fetched(job.run(&d.reader));
    }
    d.settle();
    let Some(NodeAnswer::Read(ReadAnswer::Page { from, records, .. })) = d.answer(read) else {
        panic!("a page: {:?}", d.answer(read))
    };
    assert_eq!((*from, records.clone()), (Seq(0), vec![Bytes::from("record 0")]));
}

#[test]
fn a_read_past_the_bound_of_a_waking_journal_says_how_far_it_was_applied_when_this_boot_noted_it() {
    // A voter feeding a tier notes where it stood when it went dormant; one feeding none does not.
    for (learners, applied_to) in [(vec![NodeId(0xfeed)], Some(Seq(24))), (vec![], None)] {
        let mut d = Driver::feeding(Tunables { reads_max: 1, ..Tunables::default() }, Some(3), learners);
        for _ in 0..200 {
            if d.pump.host().is_dormant(&SLOW) {
                break;
            }
            d.run(1, false);
        }
        assert!(d.pump.host().is_dormant(&SLOW), "the quiet journal went dormant");
        let held = d.ask(first_record());
        let refused = d.ask(first_record());
        assert!(d.answer(held).is_none(), "the first read is held while the journal wakes");
        assert_eq!(
            d.answer(refused),
            Some(&NodeAnswer::Read(ReadAnswer::Unserved { applied_to })),
            "past the bound of held reads, refused at once"
        );
    }
}

#[test]
fn a_journal_removed_while_it_wakes_answers_what_it_held_and_its_wake_counts_for_nothing() {
    let mut d = Driver::with(Tunables::default(), Some(3));
    for _ in 0..200 {
        if d.pump.host().is_dormant(&SLOW) {
            break;
        }
        d.run(1, false);
    }
    assert!(d.pump.host().is_dormant(&SLOW), "the quiet journal went dormant");
    let read = d.ask(first_record());
    let wake = d.jobs.pop().expect("the wake");
    assert!(wake.is_wake() && d.pump.host().is_waking(&SLOW));
    let removed = d.pump.host_mut().remove(&SLOW);
    assert_eq!(removed, vec![(read, NodeAnswer::UnknownJournal)], "the held read is answered");
    d.pump.fetched(wake.run(&d.reader));
    d.settle();
    assert_eq!(d.pump.host().journal_count(), 0, "the late wake brings nothing back");
    assert_eq!((d.pump.host().fetches_out(), d.pump.host().stats().wakes), (0, 0));
    assert!(d.answer(read).is_none(), "answered once, by the removal");
}
