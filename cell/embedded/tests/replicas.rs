//! The embedded cell's read replicas under faults: reads are served by the replicas, and a
//! replica killed under read load, wiped and started again serves again once caught up, with
//! every read before, during and after correct (never a stale or wrong page).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use paros_client::{ReadAnswer, ReadDeadline, ReadParams};
use paros_core::{Consistency, JournalKey, NodeId, Seq};
use paros_embedded::EmbeddedCell;
use paros_registry::{JournalName, TenantName};
use paros_replica::State;

fn record(i: u64) -> Bytes {
    Bytes::from(format!("record-{i:06}"))
}

/// Reads at random acknowledged positions until told to stop, checking every page against
/// what was written; counts the reads each server answered.
async fn read_load(
    cell: Arc<EmbeddedCell>,
    key: JournalKey,
    acked: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    linearizable: bool,
) -> Vec<(NodeId, u64)> {
    let mut served: std::collections::BTreeMap<NodeId, u64> = std::collections::BTreeMap::new();
    let mut n: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let written = acked.load(Ordering::Relaxed);
        if written == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        n += 1;
        let p = n.wrapping_mul(0x9e37_79b9) % written;
        let consistency = if linearizable { Consistency::Linearizable } else { Consistency::Reached(Seq(p + 1)) };
        let params = ReadParams { from: Seq(p), limit: 4, max_bytes: 1 << 16, wait_ms: 200, consistency };
        let deadline = ReadDeadline::new(
            Duration::from_millis(200),
            consistency,
            Duration::from_millis(500),
            Duration::from_secs(2),
        );
        let (answer, by) = cell.client.read_served(&key, params, deadline).await;
        match answer {
            ReadAnswer::Page { from, records, view } => {
                assert_eq!(from, Seq(p), "a page from where it was asked");
                assert!(view.next_seq > Seq(p), "a stale page: position {p} acknowledged, the view ends at {view:?}");
                assert!(!records.is_empty(), "a page short of the tail holds a record");
                for (i, r) in records.iter().enumerate() {
                    assert_eq!(*r, record(p + i as u64), "position {} holds what was written", p + i as u64);
                }
                *served.entry(by.expect("an in-cell read names its server")).or_default() += 1;
            }
            ReadAnswer::Unserved { .. } => {}
            other => panic!("read at {p}: {other:?}"),
        }
    }
    served.into_iter().collect()
}

/// Writes records `from..from + n` and publishes how many are acknowledged.
async fn write_some(
    writer: &mut paros_client::Writer<paros_embedded::CellService>,
    acked: &AtomicU64,
    from: u64,
    n: u64,
) {
    writer.write((from..from + n).map(record).collect()).await.expect("writes");
    acked.store(from + n, Ordering::Relaxed);
}

async fn await_serving(cell: &EmbeddedCell, replica: NodeId) {
    for _ in 0..500 {
        let samples = cell.replicas().expect("a tier").samples();
        if samples.iter().any(|s| s.id == replica && s.state() == State::Serving && s.host.replicas.serving > 0) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("replica {replica:?} never served again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_under_read_load_and_wiped_serves_again_once_caught_up_and_no_read_is_wrong() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let cell = Arc::new(EmbeddedCell::open(dir.path()).await.expect("opens"));
    let replicas = cell.replicas().expect("a new embedded cell has a replica tier").ids();
    assert_eq!(replicas.len(), 2);
    let key = cell
        .journal(&TenantName::parse("acme").expect("name"), &JournalName::parse("orders").expect("name"))
        .await
        .expect("a journal");
    let mut writer = cell.client.writer(key).claim().await.expect("claims");
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    write_some(&mut writer, &acked, 0, 50).await;
    for r in &replicas {
        await_serving(&cell, *r).await;
    }
    let readers: Vec<_> = [false, true]
        .into_iter()
        .map(|lin| tokio::spawn(read_load(Arc::clone(&cell), key, Arc::clone(&acked), Arc::clone(&stop), lin)))
        .collect();
    let tier = cell.replicas().expect("a tier");
    for i in 0..5 {
        write_some(&mut writer, &acked, 50 + i * 20, 20).await;
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    // Kill replica 0 under the read load, write on, wipe its disk, start it again.
    tier.kill(0);
    for i in 0..5 {
        write_some(&mut writer, &acked, 150 + i * 20, 20).await;
    }
    tier.wipe(0).expect("wipes");
    tier.boot(0).expect("boots on an empty disk under its id");
    for i in 0..5 {
        write_some(&mut writer, &acked, 250 + i * 20, 20).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    await_serving(&cell, replicas[0]).await;
    // It serves reads again.
    let mut again = false;
    for _ in 0..200 {
        let params =
            ReadParams { from: Seq(0), limit: 1, max_bytes: 64, wait_ms: 0, consistency: Consistency::Linearizable };
        let deadline =
            ReadDeadline::new(Duration::ZERO, params.consistency, Duration::from_millis(500), Duration::from_secs(2));
        if let (ReadAnswer::Page { records, .. }, Some(by)) = cell.client.read_served(&key, params, deadline).await
            && by == replicas[0]
        {
            assert_eq!(records, vec![record(0)], "the relearned replica serves what was written before its wipe");
            again = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(again, "the wiped replica serves reads again");
    stop.store(true, Ordering::Relaxed);
    let mut by_replica = 0;
    let mut total = 0;
    for r in readers {
        for (server, n) in r.await.expect("every read was right") {
            total += n;
            if replicas.contains(&server) {
                by_replica += n;
            }
        }
    }
    assert!(total > 0, "reads were served");
    assert!(by_replica * 2 > total, "most reads were served by the replicas: {by_replica} of {total}");
    // The at_least reads were answered from the replicas' read caches, in the readers' tasks;
    // the relearned replica's cache is a new one, and it served too once caught up.
    let cached: Vec<u64> = tier.samples().iter().map(|s| s.cache.expect("replicas keep a read cache").served).collect();
    assert!(cached.iter().all(|n| *n > 0), "each replica's cache served reads: {cached:?}");
    let cell = Arc::into_inner(cell).expect("the readers are done");
    let _ = cell.stop();
}
