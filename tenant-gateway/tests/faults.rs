//! The cell misbehaving under the gateway: answers lost after the call took effect are 504
//! `ambiguous` (never a guess), and the identical retry then finds the write (`duplicate`);
//! calls no server took are 503 `unavailable`, and nothing happened.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use paros_client::service::{CallReply, JournalService, ReadParams, Route};
use paros_client::{Client, ClientConfig, ReadAnswer};
use paros_core::{Call, CallId, JournalKey, NodeId};
use paros_embedded::CellService;
use paros_gateway::{Gateway, KeyPair, SigningKeys};
use paros_registry::KeyId;
use serde_json::json;

use common::{call, code, create, signup};

const PASS: u8 = 0;
/// Forward the call (it takes effect), then lose the answer.
const LOSE_ANSWERS: u8 = 1;
/// Send nothing: no server was reachable.
const UNREACHABLE: u8 = 2;

/// The cell's own service, with a switch that loses answers or refuses to send.
#[derive(Clone)]
struct Faulty {
    inner: Arc<CellService>,
    mode: Arc<AtomicU8>,
}

impl JournalService for Faulty {
    type Journal = JournalKey;

    fn servers(&self) -> Vec<NodeId> {
        self.inner.servers()
    }

    async fn call(&self, journal: &JournalKey, id: CallId, call: &Call, route: Route) -> CallReply {
        match self.mode.load(Ordering::SeqCst) {
            LOSE_ANSWERS => {
                let _ = self.inner.call(journal, id, call, route).await;
                CallReply::NoAnswer
            }
            UNREACHABLE => CallReply::NotSent,
            _ => self.inner.call(journal, id, call, route).await,
        }
    }

    async fn read(&self, journal: &JournalKey, read: ReadParams, route: Route) -> ReadAnswer {
        self.inner.read(journal, read, route).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_is_504_ambiguous_and_the_identical_retry_is_a_duplicate() {
    let w = common::world().await;
    let mode = Arc::new(AtomicU8::new(PASS));
    let faulty = Faulty { inner: Arc::new(w.cell.client.service().clone()), mode: Arc::clone(&mode) };
    let config = ClientConfig {
        attempts_max: 10,
        backoff_base: Duration::from_millis(10),
        backoff_max: Duration::from_millis(200),
        ..ClientConfig::default()
    };
    let client = Client::with_seed(faulty, config, 3).unwrap();
    let key = KeyPair::generate(KeyId::new("k-faults").unwrap());
    let gateway =
        Gateway::start(client, w.cell.coordinator(), w.cell.directory(), common::test_config(), SigningKeys::new(key))
            .await
            .unwrap();
    let r = &gateway.router();

    let (_, owner, _) = signup(r, "acme").await;
    create(r, &owner, "orders", None).await;
    let uuid = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";
    let (s, _) =
        call(r, "POST", "/v1/journals/orders/leader", Some(&owner), Some(json!({"new": uuid, "old": null}))).await;
    assert_eq!(s, StatusCode::OK);
    let write = json!({"leader": uuid, "seq": 0, "records": ["aGk="]});

    mode.store(LOSE_ANSWERS, Ordering::SeqCst);
    let (s, v) = call(r, "POST", "/v1/journals/orders/records", Some(&owner), Some(write.clone())).await;
    assert_eq!((s, code(&v)), (StatusCode::GATEWAY_TIMEOUT, "ambiguous"), "no verdict came back: {v}");
    let (s, v) =
        call(r, "POST", "/v1/journals/orders/truncate", Some(&owner), Some(json!({"leader": uuid, "up_to": 0}))).await;
    assert_eq!((s, code(&v)), (StatusCode::GATEWAY_TIMEOUT, "ambiguous"), "{v}");

    mode.store(UNREACHABLE, Ordering::SeqCst);
    let other = json!({"leader": uuid, "seq": 1, "records": ["aGk="]});
    let (s, v) = call(r, "POST", "/v1/journals/orders/records", Some(&owner), Some(other)).await;
    assert_eq!((s, code(&v)), (StatusCode::SERVICE_UNAVAILABLE, "unavailable"), "no server took it: {v}");

    mode.store(PASS, Ordering::SeqCst);
    let (s, v) = call(r, "POST", "/v1/journals/orders/records", Some(&owner), Some(write)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(
        (v["outcome"].as_str(), v["seq"].as_u64()),
        (Some("duplicate"), Some(0)),
        "the ambiguous write had landed: {v}"
    );
    assert_eq!(v["view"]["next_seq"], 1, "and the unavailable one had not: {v}");
}
