//! Reads through the gateway are served by the read replicas of the journal's tier, and the
//! response says which server answered (`paros-served-by`); writes go to the voters.

mod common;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{Value, json};

use common::{claimed_with, create, raw, signup, world};

const A: &str = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_is_served_by_a_replica_of_the_journals_tier_and_names_it() {
    let w = world().await;
    let r = &w.router;
    let (_, owner, _) = signup(r, "acme").await;
    create(r, &owner, "orders", None).await;
    claimed_with(r, &owner, "orders", A, &["aGk=", "dGhlcmU="]).await;
    let replicas: Vec<String> = w.cell.manifest.replicas.iter().map(ToString::to_string).collect();
    let voters: Vec<String> = w.cell.manifest.nodes.iter().map(ToString::to_string).collect();
    assert_eq!(replicas.len(), 2, "the embedded cell has a tier of two replicas");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut by_replica = None;
    while by_replica.is_none() && Instant::now() < deadline {
        for consistency in ["linearizable", "at_least&min_seq=1"] {
            let uri = format!("/v1/journals/orders/records?from=0&consistency={consistency}");
            let (s, headers, body) = raw(r, "GET", &uri, Some(&owner), None, Vec::new()).await;
            assert_eq!(s, StatusCode::OK);
            let page: Value = serde_json::from_slice(&body).expect("json");
            assert_eq!(page["records"], json!(["aGk=", "dGhlcmU="]), "{consistency}: every read sees the write");
            let by = headers.get("paros-served-by").and_then(|v| v.to_str().ok()).map(str::to_owned);
            let by = by.expect("a served read names its server");
            assert!(replicas.contains(&by) || voters.contains(&by), "{by} is one of the cell's machines");
            if replicas.contains(&by) {
                by_replica = Some(by);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(by_replica.is_some(), "reads are served by a replica once it has caught up");
    let _ = w.cell.stop();
}
