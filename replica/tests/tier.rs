//! A replica tier on the in-process bus: three voters and a replica fed by one publish per
//! batch; reads served by the replica without the leader; a replica that lost its disk comes
//! back under its id, relearns, and serves again only once caught up.

use std::time::Duration;

use bytes::Bytes;
use paros_bus::InProcessBus;
use paros_core::journal::WriterMode;
use paros_core::{
    Call, CallAnswer, CallId, Consistency, JournalConfig, JournalId, JournalKey, NodeId, ReadAnswer, ReadId,
    ReadRequest, Seq, TenantId, Tunables,
};
use paros_node::ports::MonotonicClock;
use paros_node::rpc::{NodeAnswer, NodeRequest, Rpc};
use paros_node::shell::{self, NodeHandle, ShellConfig};
use paros_node::{Host, MemStore};
use paros_replica::State;

const VOTERS: [NodeId; 3] = [NodeId(0x11), NodeId(0x12), NodeId(0x13)];
const REPLICA: NodeId = NodeId(0x21);
const FEED: NodeId = NodeId(0xfeed);
const KEY: JournalKey = JournalKey { tenant: TenantId(1), journal: JournalId(2) };

fn config() -> JournalConfig {
    JournalConfig { mode: WriterMode::Multi, voters: VOTERS.to_vec(), learners: vec![FEED] }
}

fn shell_config() -> ShellConfig {
    ShellConfig { tick: Duration::from_millis(5), ..ShellConfig::default() }
}

fn spawn_replica(bus: &InProcessBus, disk: &MemStore, seed: u64) -> (NodeHandle<MemStore>, bool) {
    let booted = paros_replica::boot(disk.clone(), REPLICA, FEED, Tunables::default(), seed, false).expect("boots");
    let mut host = booted.host;
    host.place(KEY, config()).expect("a journal of its tier is placed on a replica");
    let (endpoint, inbox) = bus.register(REPLICA, 1024);
    bus.subscribe(FEED, REPLICA);
    (shell::spawn(host, endpoint, inbox, MonotonicClock::new(), shell_config()), booted.fresh)
}

/// The three voters, running the journal, the first one campaigning.
async fn spawn_voters(bus: &InProcessBus, seed: u64) -> Vec<NodeHandle<MemStore>> {
    let mut voters = Vec::new();
    for (i, id) in VOTERS.iter().enumerate() {
        let mut host = Host::boot(MemStore::new(), None, *id, Tunables::default(), seed + i as u64).expect("boots");
        host.place(KEY, config()).expect("placed");
        let (endpoint, inbox) = bus.register(*id, 1024);
        voters.push(shell::spawn(host, endpoint, inbox, MonotonicClock::new(), shell_config()));
    }
    voters[0].control().campaign(KEY).await.expect("running");
    voters
}

async fn write(bus: &InProcessBus, id: u64, record: &'static [u8]) {
    let call = Call::Write { leader: None, seq: Seq(0), records: vec![Bytes::from_static(record)] };
    for attempt in 0..200 {
        let to = VOTERS[attempt % VOTERS.len()];
        let request = NodeRequest::Call { journal: KEY, id: CallId(id), call: call.clone() };
        if let Ok(NodeAnswer::Call(CallAnswer::Verdict(_))) = bus.request(to, request, Duration::from_secs(1)).await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("write {id} was never acknowledged");
}

async fn read_at_replica(bus: &InProcessBus, id: u64, consistency: Consistency) -> ReadAnswer {
    let read = ReadRequest { from: Seq(0), limit: 0, max_bytes: 0, wait_ticks: 20, consistency };
    let request = NodeRequest::Read { journal: KEY, id: ReadId(id), read };
    match bus.request(REPLICA, request, Duration::from_secs(2)).await {
        Ok(NodeAnswer::Read(answer)) => answer,
        other => panic!("the replica did not answer a read: {other:?}"),
    }
}

/// Reads at the replica until it serves a page holding `records` records.
async fn await_page(bus: &InProcessBus, first_id: u64, records: usize, consistency: Consistency) -> Vec<Bytes> {
    for i in 0..400 {
        if let ReadAnswer::Page { records: page, view, .. } = read_at_replica(bus, first_id + i, consistency).await {
            if let Consistency::Reached(seq) = consistency {
                assert!(view.next_seq >= seq, "a stale page for a read at least at {seq:?}: {view:?}");
            }
            if page.len() == records {
                return page;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the replica never served the {records} records");
}

async fn await_state(node: &NodeHandle<MemStore>, want: State) {
    for _ in 0..400 {
        if State::of(&node.stats().replicas) == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the replica never reached {want:?}: {:?}", node.stats().replicas);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_serves_reads_from_its_tiers_feed_and_relearns_after_losing_its_disk() {
    let bus = InProcessBus::new();
    let voters = spawn_voters(&bus, 100).await;
    let disk = MemStore::new();
    let (replica, fresh) = spawn_replica(&bus, &disk, 7);
    assert!(fresh, "a first start is a fresh store");

    for (i, r) in [b"a", b"b", b"c"].iter().enumerate() {
        write(&bus, i as u64 + 1, *r).await;
    }
    let page = await_page(&bus, 1_000, 3, Consistency::Linearizable).await;
    assert_eq!(page, vec![Bytes::from_static(b"a"), Bytes::from_static(b"b"), Bytes::from_static(b"c")]);
    await_state(&replica, State::Serving).await;
    assert!(bus.stats().feed_publishes > 0, "the leader published to the tier's feed");
    let leader_stats: Vec<_> = voters.iter().map(NodeHandle::stats).collect();
    assert!(leader_stats.iter().all(|s| s.reads_refused_unready == 0), "voters refuse no read as unready");

    // The replica loses its disk while writes go on: it comes back under its own id.
    replica.stop().expect("stops cleanly");
    bus.unregister(REPLICA);
    disk.wipe();
    for (i, r) in [b"d", b"e"].iter().enumerate() {
        write(&bus, i as u64 + 10, *r).await;
    }
    let (replica, fresh) = spawn_replica(&bus, &disk, 8);
    assert!(fresh, "a wiped store relearns under a new incarnation");
    // An at-least read of the last write waits for the replica to relearn it, never a stale page.
    let page = await_page(&bus, 2_000, 5, Consistency::Reached(Seq(5))).await;
    assert_eq!(page.len(), 5);
    await_state(&replica, State::Serving).await;
    assert_eq!(
        Host::boot(MemStore::new(), Some(REPLICA), NodeId(0x99), Tunables::default(), 1).map(|h| h.id()).ok(),
        None,
        "a voter's host would refuse the same empty store under its id"
    );
    let other = MemStore::new();
    drop(Host::boot(other.clone(), None, NodeId(0x77), Tunables::default(), 1).expect("boots"));
    assert!(
        paros_replica::boot(other, REPLICA, FEED, Tunables::default(), 2, false).is_err(),
        "another machine's store is refused"
    );
    replica.stop().expect("stops");
    for v in voters {
        v.stop().expect("stops");
    }
}

/// The replica misses every feed message of a burst (its subscription is gone) and the journal
/// goes quiet; once it hears the feed again, the leader's repeated marks tell it how far the
/// journal is chosen and it catches up on its own: no read is needed to find the gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_missed_the_feed_catches_up_from_the_repeated_marks_without_a_read() {
    let bus = InProcessBus::new();
    let voters = spawn_voters(&bus, 200).await;
    let (replica, _) = spawn_replica(&bus, &MemStore::new(), 9);
    write(&bus, 1, b"a").await;
    await_page(&bus, 3_000, 1, Consistency::Linearizable).await;
    assert!(bus.unsubscribe(FEED, REPLICA));
    for (i, r) in [b"b", b"c"].iter().enumerate() {
        write(&bus, i as u64 + 20, *r).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await; // the journal goes quiet meanwhile
    let age = replica.stats().replicas.feed_age_ms_max;
    assert!(age >= 100, "cut off from its feed, the replica's watermark ages: {age} ms");
    let repeated = || voters.iter().map(|v| v.stats().feed_marks_repeated).sum::<u64>();
    bus.subscribe(FEED, REPLICA);
    let before = repeated();
    // Renewed and caught up, in one snapshot: it heard a mark since it was back (its
    // watermark is young again), and it knows of no chosen slot it has not applied.
    let mut renewed = false;
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let seen = replica.stats().replicas;
        if repeated() >= before + 2 && seen.feed_age_ms_max < 100 && seen.behind == 0 {
            renewed = true;
            break;
        }
    }
    assert!(renewed, "the repeated marks renew its watermark: {:?}", replica.stats().replicas);
    let host = replica.stop().expect("stops");
    let applied = host.replica(&KEY).map(|r| r.state().next_seq);
    assert_eq!(applied, Some(Seq(3)), "the replica applied the burst it missed, without being asked to read");
    for v in voters {
        v.stop().expect("stops");
    }
}

/// A replica restarted over its store hosts the journals it holds as replicas of its tier: the
/// host knows its feed before it restores them (a machine fed by no tier would host a journal
/// not naming it as a joining voter, which votes once a `Reconfigure` names it and serves reads
/// without the replica's gate).
#[test]
fn a_restarted_replica_restores_its_journals_as_replicas_awake_or_asleep() {
    let disk = MemStore::new();
    let mut host = paros_replica::boot(disk.clone(), REPLICA, FEED, Tunables::default(), 1, false).expect("boots").host;
    host.place(KEY, config()).expect("a journal of its tier is placed on a replica");
    assert!(host.replica(&KEY).is_some(), "placed as a replica");
    host.round(|_| {}).expect("the placement is written and synced");
    drop(host);
    let host = paros_replica::boot(disk.clone(), REPLICA, FEED, Tunables::default(), 2, false).expect("boots").host;
    assert!(host.replica(&KEY).is_some(), "restored awake as a replica, not as a joining voter");
    let host = paros_replica::boot(disk, REPLICA, FEED, Tunables::default(), 3, true).expect("boots").host;
    assert_eq!(host.replica_states().bootstrapping, 1, "restored asleep as a replica that has not caught up");
}
