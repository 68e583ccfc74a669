//! A storage fault stops the node, not the process: the node answers nothing from the moment
//! its round's sync fails (not the calls of that round, not the calls behind it), closes its
//! inbox and its control queue, and reports the fault to its owner through its handle.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use common::{Gate, GatedStore, Stall, next_id};
use paros_core::journal::{JournalView, Outcome, WriterMode};
use paros_core::{Call, CallAnswer, JournalConfig, JournalId, JournalKey, LeaderUuid, NodeId, Seq, TenantId, Tunables};
use paros_node::ports::{Envelope, MonotonicClock, StoreError, StoreOp, Transport};
use paros_node::rpc::{Incoming, NodeAnswer, NodeRequest};
use paros_node::shell::{self, NodeHandle, ShellConfig};
use paros_node::{Host, MemStore};

const ME: NodeId = NodeId(0x7f01);
const KEY: JournalKey = JournalKey { tenant: TenantId(0x7f), journal: JournalId(1) };
const WAIT: Duration = Duration::from_secs(10);

/// A one-machine cell: nothing to send anywhere.
struct Nowhere;

impl Transport for Nowhere {
    fn send(&mut self, _: NodeId, _: Vec<Envelope>) {}
}

fn uuid() -> LeaderUuid {
    LeaderUuid::new(0x7f).expect("non-zero")
}

fn write(seq: u64) -> NodeRequest {
    let records = vec![Bytes::from(format!("record {seq}"))];
    NodeRequest::Call {
        journal: KEY,
        id: paros_core::CallId(next_id()),
        call: Call::Write { leader: Some(uuid()), seq: Seq(seq), records },
    }
}

async fn send(
    inbox: &tokio::sync::mpsc::Sender<Incoming>,
    request: NodeRequest,
) -> tokio::sync::oneshot::Receiver<NodeAnswer> {
    let (reply, answer) = tokio::sync::oneshot::channel();
    inbox.send(Incoming::Request { request, reply }).await.expect("the node runs");
    answer
}

async fn ask(inbox: &tokio::sync::mpsc::Sender<Incoming>, request: NodeRequest) -> NodeAnswer {
    let answer = send(inbox, request).await;
    tokio::time::timeout(WAIT, answer).await.expect("answered in time").expect("answered")
}

/// The only voter of [`KEY`], claimed by [`uuid`], over a store whose syncs wait at `door`.
async fn start(disk: &MemStore, door: &Arc<Gate>) -> (NodeHandle<GatedStore>, tokio::sync::mpsc::Sender<Incoming>) {
    let store = GatedStore { disk: disk.clone(), gate: Arc::clone(door), stall: Stall::Syncs };
    let mut host = Host::boot(store, None, ME, Tunables::default(), 0x7f).expect("boots");
    host.place(KEY, JournalConfig { mode: WriterMode::Single, voters: vec![ME], learners: vec![] }).expect("placed");
    host.campaign(&KEY);
    let (inbox, rx) = tokio::sync::mpsc::channel(64);
    let config = ShellConfig { tick: Duration::from_millis(5), dormant_after: None, ..ShellConfig::default() };
    let handle = shell::spawn(host, Nowhere, rx, MonotonicClock::new(), config);
    let claim = ask(
        &inbox,
        NodeRequest::Call {
            journal: KEY,
            id: paros_core::CallId(next_id()),
            call: Call::SetLeader { new: uuid(), old: None },
        },
    );
    assert!(matches!(claim.await, NodeAnswer::Call(CallAnswer::Verdict(Outcome::Won(_)))), "claimed");
    (handle, inbox)
}

#[tokio::test]
async fn a_node_whose_sync_fails_reports_the_fault_through_its_handle_and_answers_nothing_more() {
    let disk = MemStore::new();
    let door = Arc::new(Gate::default());
    let (handle, inbox) = start(&disk, &door).await;
    let view = JournalView { leader: Some(uuid()), first_seq: Seq(0), next_seq: Seq(1) };
    let accepted = NodeAnswer::Call(CallAnswer::Verdict(Outcome::Accepted { seq: Seq(0), count: 1, view }));
    assert_eq!(ask(&inbox, write(0)).await, accepted, "a healthy node acknowledges");
    assert!(handle.fault().is_none(), "no fault yet");
    let syncs = disk.counts().1;

    // The round of the next write holds its sync at the door; a later write waits behind it.
    door.set(true);
    let mut failing = send(&inbox, write(1)).await;
    for _ in 0..1000 {
        if door.waiting.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(door.waiting.load(Ordering::SeqCst), 1, "the write's sync waits at the door");
    let mut behind = send(&inbox, write(2)).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(failing.try_recv().is_err() && behind.try_recv().is_err(), "nothing acknowledged before the sync");

    // The sync fails: the node stops and says why; the process goes on.
    disk.fail_next_sync();
    door.set(false);
    let fault = tokio::time::timeout(WAIT, handle.faults().stopped())
        .await
        .expect("the fault is reported in time")
        .expect("the node stopped on a fault");
    assert_eq!(fault.node, ME);
    assert!(matches!(fault.error, StoreError::Engine { op: StoreOp::Sync, .. }), "{:?}", fault.error);
    assert!(fault.to_string().starts_with(&format!("storage fault on node {ME}: ")), "{fault}");
    assert!(fault.to_string().ends_with("injected sync failure"), "the store's reason is in the message: {fault}");
    assert!(handle.fault().is_some_and(|f| Arc::ptr_eq(&f, &fault)), "the handle holds the same fault");

    // Neither the call whose round failed nor the one behind it is answered: their replies
    // are dropped unanswered.
    let failing = tokio::time::timeout(WAIT, failing).await.expect("the reply is settled in time");
    assert!(failing.is_err(), "the write of the failed round is not answered: {failing:?}");
    let behind = tokio::time::timeout(WAIT, behind).await.expect("the reply is settled in time");
    assert!(behind.is_err(), "the write behind it is not answered: {behind:?}");
    // The node takes nothing more: its inbox and its control queue are closed.
    let (reply, _answer) = tokio::sync::oneshot::channel();
    assert!(inbox.send(Incoming::Request { request: write(1), reply }).await.is_err(), "the inbox is closed");
    assert!(handle.control().campaign(KEY).await.is_err(), "the control queue is closed");
    assert_eq!(disk.counts().1, syncs, "no sync succeeded since write 0's, nor was tried after the failed one");

    let stopped = handle.stop().expect_err("a faulted node has no host to give back");
    assert!(Arc::ptr_eq(&stopped, &fault), "stopping it returns the same fault");
}

#[tokio::test]
async fn a_node_stopped_without_a_fault_reports_none() {
    let disk = MemStore::new();
    let door = Arc::new(Gate::default());
    let (handle, inbox) = start(&disk, &door).await;
    let mut faults = handle.faults();
    let host = handle.stop().expect("no fault: the host comes back");
    assert_eq!(host.id(), ME);
    let stopped = tokio::time::timeout(WAIT, faults.stopped()).await.expect("the watch sees the node stop");
    assert!(stopped.is_none(), "a clean stop is no fault");
    drop(inbox);
}
