//! A node of the embedded cell whose store fails stops and the cell reports its fault (the
//! process running the cell exits with it); the test process itself goes on.

use std::sync::Arc;
use std::time::Duration;

use paros_embedded::{CellError, EMBEDDED_MEMBERS, EmbeddedCell};
use paros_node::shell::EXIT_STORAGE_FAULT;
use paros_registry::daemon::CoordinatorLoopConfig;
use paros_registry::{Command, Op, Quotas, TenantName};
use paros_store::StoreOptions;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_store_fails_is_reported_by_the_cell_and_maps_to_exit_75() {
    let dir = tempfile::tempdir().expect("a temp dir");
    // Segments of 4 KiB: a few registry commands fill one, and the next must be started.
    let store = StoreOptions { wal_segment_bytes: 4 << 10, ..StoreOptions::default() };
    let cell = EmbeddedCell::open_stores(dir.path(), EMBEDDED_MEMBERS, CoordinatorLoopConfig::default(), store)
        .await
        .expect("opens");
    cell.init().await.expect("forms");
    assert!(cell.faulted().is_none(), "no fault yet");

    // Node 0's write-ahead log directory goes away under it, a file in its place: it cannot
    // start its next segment, and its store fails.
    let node_dir = dir.path().join("node-0");
    std::fs::rename(node_dir.join("wal"), node_dir.join("wal-gone")).expect("moves the log away");
    std::fs::write(node_dir.join("wal"), b"not a directory").expect("a file where the log was");

    // Registry commands write on every node until node 0's segment fills.
    let requests = cell.request_handle();
    let load = async move {
        for i in 0u64.. {
            let name = TenantName::parse(&format!("tenant-{i}")).expect("a valid name");
            let tenant = paros_core::TenantId(0x5100 + i);
            let op = Op::Command(Command::SignUp { tenant, name, quotas: Quotas::default() });
            // Answers do not matter: the cell may be electing a new leader without node 0.
            let _ = tokio::time::timeout(Duration::from_secs(2), requests.request(op)).await;
        }
    };
    let fault = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::select! {
            fault = cell.fault() => fault,
            () = load => unreachable!("the load never ends"),
        }
    })
    .await
    .expect("node 0 faults within a minute");

    assert_eq!(fault.node, cell.manifest.nodes[0], "the fault names the node whose store failed");
    assert!(fault.to_string().starts_with(&format!("storage fault on node {}: ", fault.node)), "{fault}");
    assert!(cell.faulted().is_some_and(|f| Arc::ptr_eq(&f, &fault)), "the cell holds the same fault");
    assert_eq!(CellError::NodeFault(Arc::clone(&fault)).exit_code(), EXIT_STORAGE_FAULT);
    let stopped = cell.stop().expect_err("the faulted node has no host to give back");
    assert!(Arc::ptr_eq(&stopped, &fault), "stopping the cell returns the fault");
}
