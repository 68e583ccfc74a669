//! The async coordinator loop over a scripted journal service: a failed term is started
//! again, claims anew (fencing the failed one) and serves the retried request.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use paros_client::fake::{FakeService, Fault};
use paros_client::{Client, ClientConfig};
use paros_core::wire::Call;
use paros_registry::daemon::{CoordinatorGone, CoordinatorLoopConfig, spawn_coordinator};
use paros_registry::{Answer, Op, Request, RequestId};

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_failed_term_is_restarted_and_serves_the_retried_request() {
    let fake = Arc::new(FakeService::new("registry", vec![]));
    // The first term's claim passes; its first write is answered "unknown journal", which
    // halts its writer and ends the term.
    fake.script([Fault::Pass, Fault::UnknownJournal]);
    let client = Client::with_seed(Arc::clone(&fake), ClientConfig::default(), 1).expect("a valid client");
    let config =
        CoordinatorLoopConfig { restart_backoff: Duration::from_millis(50), ..CoordinatorLoopConfig::default() };
    let (handle, _task) = spawn_coordinator(client, "registry".to_owned(), config);
    let init =
        Request { id: RequestId(42), op: Op::Command(init_cell(vec![member(1, "a"), member(2, "b"), member(3, "c")])) };
    assert_eq!(handle.request(init.clone()).await, Err(CoordinatorGone), "the failed term's waiter learns nothing");
    match handle.request(init).await {
        Ok(Answer::Verdict(v)) => assert!(v.is_accepted(), "the next term forms the cell: {v:?}"),
        other => panic!("the restarted term answers: {other:?}"),
    }
    let claims = fake.calls().iter().filter(|(c, _)| matches!(c, Call::SetLeader { .. })).count();
    assert_eq!(claims, 2, "the second term claimed anew");
    assert_eq!(fake.records().len(), 1, "one InitCell record: the failed write never landed");
}
