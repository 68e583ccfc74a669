//! A cell that heals (issue 34, item 7), in one process: four nodes, a writer on each of six
//! journals, one node drained and another killed and brought back wiped under a new identity.
//! The registry plans the moves (drain, heal) and carries them out through each journal's own
//! log. At the end every acknowledged record is present exactly once at its position, every
//! journal has a full set of live voters, and the wiped identity holds no seat.
//!
//! The registry journal's seats move too: the drained node is one of its three founding
//! voters. A second test kills two of its founders in turn and the registry goes on.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use paros_client::{ReadItem, Seq, Writer, WriterConfig};
use paros_core::journal::WriterMode;
use paros_core::{JournalId, JournalKey, TenantId};
use paros_embedded::EmbeddedCell;
use paros_registry::daemon::CoordinatorLoopConfig;
use paros_registry::mover::MoverConfig;
use paros_registry::planner::PlanConfig;
use paros_registry::{Command, JournalName, Op, Quotas, Standing, TenantName};

const JOURNALS: u64 = 6;

type Acked = Vec<(Seq, Bytes)>;

/// The registry's loops at test speed: a plan every 200 ms, a failed move step retried after
/// 200 ms, a node unseen for `replace_after_s` healed.
fn quick_loops(replace_after_s: u64) -> CoordinatorLoopConfig {
    let defaults = CoordinatorLoopConfig::default();
    CoordinatorLoopConfig {
        plan: PlanConfig { replace_after_s, ..defaults.plan },
        plan_interval: Duration::from_millis(200),
        mover: MoverConfig { retry_ms: 200, ..defaults.mover },
        ..defaults
    }
}

/// Signs a tenant up through the registry, waiting at most a minute for the decision.
async fn sign_up(
    cell: &EmbeddedCell,
    tenant: u64,
    name: &str,
) -> Result<paros_registry::Accepted, paros_embedded::CellError> {
    let (tenant, name) = (TenantId(tenant), TenantName::parse(name).expect("a name"));
    let signing = cell.request(Op::Command(Command::SignUp { tenant, name, quotas: Quotas::default() }));
    tokio::time::timeout(Duration::from_secs(60), signing).await.expect("decided in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_nodes_one_drained_one_wiped_every_record_kept_every_journal_at_full_strength() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let loops = quick_loops(1);
    let mut cell = EmbeddedCell::open_configured(dir.path(), 4, loops).await.expect("opens");
    cell.init().await.expect("forms");
    let tenant = TenantId(0x4ea1);
    let name = TenantName::parse("acme").expect("a name");
    cell.request(Op::Command(Command::SignUp { tenant, name, quotas: Quotas::default() })).await.expect("signs up");
    let mut keys = Vec::new();
    for j in 0..JOURNALS {
        let name = JournalName::parse(&format!("j{j}")).expect("a name");
        let create =
            Op::CreateJournal { tenant, journal: JournalId(0x100 + j), name, mode: WriterMode::Single, tier: None };
        match cell.request(create).await.expect("creates") {
            paros_registry::Accepted::JournalCreated { key, .. } => keys.push(key),
            other => panic!("{other:?}"),
        }
    }
    let nodes = cell.manifest.nodes.clone();
    let (drained, wiped) = (nodes[1], nodes[3]);

    // A writer per journal, writing until told to stop; every write must succeed: a seat move
    // is a pause the client retries through, never an error.
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for (i, key) in keys.iter().copied().enumerate() {
        let (client, stop) = (cell.client.clone(), Arc::clone(&stop));
        writers.push(tokio::spawn(async move {
            let mut w = Writer::with_seed(client, key, WriterConfig::default(), i as u64 + 1).expect("a writer");
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            while let Err(e) = w.claim().await {
                assert!(tokio::time::Instant::now() < deadline, "claims {key:?}: {e:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let mut acked: Acked = Vec::new();
            for n in 0u64.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let record = Bytes::from(format!("{i}-{n}"));
                let written =
                    w.write(vec![record.clone()]).await.unwrap_or_else(|e| panic!("{key:?} write {n}: {e:?}"));
                acked.push((written.seq, record));
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            (key, acked)
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;

    let drain = Command::SetStanding { machine: drained, standing: Standing::Draining };
    cell.request(Op::Command(drain)).await.expect("drains");
    cell.kill(wiped).expect("killed");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let new = cell.rejoin_wiped(wiped).await.expect("rejoins as a new identity");
    assert_ne!(new, wiped);

    let live = [nodes[0], nodes[2], new];
    let registry = cell.registry();
    let healed = |d: &paros_registry::Directory| {
        d.moves_in_progress().next().is_none()
            && keys
                .iter()
                .chain([&registry])
                .all(|k| d.journal(*k).is_some_and(|j| j.voters.iter().all(|v| live.contains(v))))
    };
    let d = cell.wait_followers(Duration::from_secs(120), healed).await.expect("every journal healed");
    stop.store(true, Ordering::Relaxed);
    let mut acknowledged: BTreeMap<JournalKey, Acked> = BTreeMap::new();
    for w in writers {
        let (key, acked) = w.await.expect("a writer task");
        acknowledged.insert(key, acked);
    }

    for key in &keys {
        let j = d.journal(*key).expect("live");
        assert_eq!(j.voters.len(), 3, "{key:?}: a full set of voters");
        assert!(!j.voters.contains(&wiped) && !j.voters.contains(&drained), "{key:?}: {:?}", j.voters);
        let acked = &acknowledged[key];
        assert!(acked.len() > 10, "{key:?}: the writer wrote throughout ({} records)", acked.len());
        let items = cell.client.reader(*key).build().expect("a reader").read_to_tail().await.expect("reads");
        let records: Vec<Bytes> = items
            .into_iter()
            .filter_map(|i| match i {
                ReadItem::Record { data, .. } => Some(data),
                _ => None,
            })
            .collect();
        for (seq, record) in acked {
            assert_eq!(records.get(seq.0 as usize), Some(record), "{key:?}: acknowledged at {seq:?}");
            assert_eq!(records.iter().filter(|r| *r == record).count(), 1, "{key:?}: once: {record:?}");
        }
    }
    let r = d.registry_journal().expect("recorded");
    assert!(r.epoch.0 >= 1 && !r.voters.contains(&drained), "the registry journal's seat left the drained node: {r:?}");
    let old = d.machine(wiped).expect("the old identity is remembered");
    assert_eq!(old.replaced_by, Some(new), "marked replaced by the new one");
    assert_eq!(d.load(wiped), 0, "the wiped identity holds no seat");
    assert_eq!(d.journals_on(wiped).count(), 0);
    let _ = cell.stop();
}

/// The registry journal heals like any journal: of four nodes, the first three are its
/// founding voters. One of them is killed; once the planner moved its seat to the fourth
/// node, a second founder is killed, and the registry still decides requests — which its
/// founding configuration, with two of three voters gone, could not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registry_journal_loses_two_founders_in_turn_and_still_decides() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let loops = quick_loops(1);
    let cell = EmbeddedCell::open_configured(dir.path(), 4, loops).await.expect("opens");
    cell.init().await.expect("forms");
    let nodes = cell.manifest.nodes.clone();
    let registry = cell.registry();
    let formed =
        cell.wait_followers(Duration::from_secs(10), |d| d.registry_journal().is_some()).await.expect("formed");
    let founders = formed.registry_journal().expect("recorded").voters.to_vec();
    assert_eq!(founders, nodes[..3].to_vec(), "the first three nodes are its founders");

    cell.kill(nodes[0]).expect("killed");
    let moved = |d: &paros_registry::Directory| {
        d.moves_in_progress().next().is_none()
            && d.journal(registry).is_some_and(|j| j.voters.contains(&nodes[3]) && !j.voters.contains(&nodes[0]))
    };
    let d = cell.wait_followers(Duration::from_secs(60), moved).await.expect("the registry seat healed");
    assert_eq!(d.registry_journal().map(|j| j.epoch.0), Some(1), "one move");

    cell.kill(nodes[1]).expect("killed");
    let signed = sign_up(&cell, 0x4ea2, "after").await;
    assert!(signed.is_ok(), "the registry decides with its founders 0 and 1 gone: {signed:?}");
    let _ = cell.stop();
}

/// After the registry journal's seat moved off a drained founder, the cell stops and opens
/// again: formation is not repeated (the drained node is not placed the registry journal
/// again), the registry decides, and only its voters in force host it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cell_whose_registry_seat_moved_opens_again_with_it_where_it_moved() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let loops = quick_loops(CoordinatorLoopConfig::default().plan.replace_after_s);
    let cell = EmbeddedCell::open_configured(dir.path(), 4, loops).await.expect("opens");
    cell.init().await.expect("forms");
    let nodes = cell.manifest.nodes.clone();
    let registry = cell.registry();
    let drain = Command::SetStanding { machine: nodes[0], standing: Standing::Draining };
    cell.request(Op::Command(drain)).await.expect("drains");
    let moved = |d: &paros_registry::Directory| {
        d.moves_in_progress().next().is_none() && d.journal(registry).is_some_and(|j| !j.voters.contains(&nodes[0]))
    };
    cell.wait_followers(Duration::from_secs(60), moved).await.expect("the registry seat moved");
    let hosts = |hosts: &[paros_node::Host<paros_store::FjallStore>]| -> Vec<bool> {
        hosts.iter().map(|h| h.journal_config(&registry).is_some()).collect()
    };
    let stopped = cell.stop().expect("stops");
    assert_eq!(hosts(&stopped), vec![false, true, true, true], "the drained founder gave it back");
    drop(stopped);

    let cell = EmbeddedCell::open_configured(dir.path(), 4, loops).await.expect("opens again");
    let signed = sign_up(&cell, 0x4ea3, "again").await;
    assert!(signed.is_ok(), "the registry decides after the restart: {signed:?}");
    let stopped = cell.stop().expect("stops");
    assert_eq!(hosts(&stopped), vec![false, true, true, true], "formation was not repeated");
}
