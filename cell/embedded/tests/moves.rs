//! A seat moves in a running cell (issue 34): the registry records the intent, the mover asks
//! the journal's own log to decide the next configuration, a quorum of the new voters confirms
//! it holds the prefix, and the registry records the move done; the machine moved off gives
//! the journal's bytes back. Writes go on throughout, and every acknowledged record stays at
//! its position, once.

use std::time::Duration;

use bytes::Bytes;
use paros_client::{ReadItem, Seq, Writer, WriterConfig};
use paros_core::journal::WriterMode;
use paros_core::{JournalId, JournalKey, NodeId, TenantId};
use paros_embedded::EmbeddedCell;
use paros_registry::daemon::CoordinatorLoopConfig;
use paros_registry::{Accepted, Command, Epoch, JournalName, Op, Quotas, TenantName};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seat_moves_to_another_node_while_a_writer_writes_and_the_old_voter_lets_the_journal_go() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let cell = EmbeddedCell::open_configured(dir.path(), 5, CoordinatorLoopConfig::default()).await.expect("opens");
    cell.init().await.expect("forms");
    let tenant = TenantId(0x7e57);
    let name = TenantName::parse("acme").expect("a name");
    cell.request(Op::Command(Command::SignUp { tenant, name, quotas: Quotas::default() })).await.expect("signs up");
    let journal = JournalName::parse("orders").expect("a name");
    let create = Op::CreateJournal {
        tenant,
        journal: JournalId(0x0dd),
        name: journal.clone(),
        mode: WriterMode::Single,
        tier: None,
    };
    let Accepted::JournalCreated { key, voters, .. } = cell.request(create).await.expect("creates") else {
        panic!("a journal")
    };
    assert_eq!(voters.len(), 3, "three of the five nodes vote");
    let to = *cell.manifest.nodes.iter().find(|n| !voters.contains(n)).expect("a node outside");
    let from = voters[0];
    cell.wait_followers(Duration::from_secs(20), |d| d.journal(key).is_some()).await.expect("placed");

    let mut writer = Writer::with_seed(cell.client.clone(), key, WriterConfig::default(), 11).expect("a writer");
    // The directory names the journal a moment before its voters host it: a claim asked of the
    // cell's five nodes in that moment finds none hosting it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while let Err(e) = writer.claim().await {
        assert!(tokio::time::Instant::now() < deadline, "claims: {e:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut acknowledged: Vec<(Seq, Bytes)> = Vec::new();
    for i in 0..20 {
        let record = Bytes::from(format!("before-{i}"));
        let w = writer.write(vec![record.clone()]).await.expect("writes");
        acknowledged.push((w.seq, record));
    }
    // The writer goes on while the seat moves.
    let writing = tokio::spawn(async move {
        let mut acked = Vec::new();
        for i in 0..200 {
            let record = Bytes::from(format!("during-{i}"));
            match writer.write(vec![record.clone()]).await {
                Ok(w) => acked.push((w.seq, record)),
                Err(e) => panic!("a write during the move failed: {e:?}"),
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        (writer, acked)
    });
    let moved = Op::Command(Command::MoveSeat { journal: key, from, to });
    cell.request(moved).await.expect("the move is recorded");
    let d = cell
        .wait_followers(Duration::from_secs(60), |d| d.journal(key).is_some_and(|j| j.epoch == Epoch(1)))
        .await
        .expect("the move is recorded done");
    let j = d.journal(key).expect("live");
    assert!(j.voters.contains(&to) && !j.voters.contains(&from) && j.moving.is_none());
    let (mut writer, during) = writing.await.expect("the writer task");
    acknowledged.extend(during);
    let w = writer.write(vec![Bytes::from_static(b"after")]).await.expect("the new voters decide");
    acknowledged.push((w.seq, Bytes::from_static(b"after")));

    let items = cell.client.reader(key).build().expect("a reader").read_to_tail().await.expect("reads");
    let records: Vec<(Seq, Bytes)> = items
        .into_iter()
        .filter_map(|i| match i {
            ReadItem::Record { seq, data } => Some((seq, data)),
            _ => None,
        })
        .collect();
    for (seq, record) in &acknowledged {
        assert_eq!(records.get(seq.0 as usize).map(|(_, r)| r), Some(record), "acknowledged at {seq:?}");
        assert_eq!(records.iter().filter(|(_, r)| r == record).count(), 1, "once: {record:?}");
    }

    // The follower removes the journal from `from` right after folding the move done.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let i = cell.manifest.nodes.iter().position(|n| *n == from).expect("a member");
    let hosts = cell.stop().expect("no node faulted");
    let host = |id: NodeId| hosts.iter().find(|h| h.id() == id).expect("a node");
    assert!(host(from).voter(&key).is_none(), "the old voter no longer hosts it");
    let v = host(to).voter(&key).expect("the new voter hosts it");
    assert!(v.is_voter() && v.epoch() == 1, "and votes in epoch 1");
    let stored = |i: usize| -> Vec<JournalKey> {
        let store = paros_store::FjallStore::open(&dir.path().join(format!("node-{i}"))).expect("opens");
        paros_node::ports::LogStore::load(&store).expect("loads").into_iter().map(|j| j.key).collect()
    };
    drop(hosts);
    assert!(!stored(i).contains(&key), "the old voter's store gave the journal back");
}
