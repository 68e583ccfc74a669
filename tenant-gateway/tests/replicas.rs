//! Reads through the gateway are served by the read replicas of the journal's tier, and the
//! response says which server answered (`paros-served-by`); writes go to the voters.

mod common;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{Value, json};

use common::{claimed_with, create, raw, signup, world};

const A: &str = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";

/// A cell with a tenant's journal `orders` holding two records; the tenant's owner token and the
/// cell's replicas' ids.
async fn orders_with_two_records() -> (common::World, String, Vec<String>) {
    let w = world().await;
    let (_, owner, _) = signup(&w.router, "acme").await;
    create(&w.router, &owner, "orders", None).await;
    claimed_with(&w.router, &owner, "orders", A, &["aGk=", "dGhlcmU="]).await;
    let replicas = w.cell.manifest.replicas.iter().map(ToString::to_string).collect();
    (w, owner, replicas)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_is_served_by_a_replica_of_the_journals_tier_and_names_it() {
    let (w, owner, replicas) = orders_with_two_records().await;
    let r = &w.router;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_at_least_read_past_the_journal_is_503_saying_how_far_the_closest_server_applied() {
    let (w, owner, replicas) = orders_with_two_records().await;
    let r = &w.router;
    // Until a replica serves the journal (it hosts it and has caught up).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let uri = "/v1/journals/orders/records?from=0&min_seq=1";
        let (s, headers, _) = raw(r, "GET", uri, Some(&owner), None, Vec::new()).await;
        let by = headers.get("paros-served-by").and_then(|v| v.to_str().ok()).map(str::to_owned);
        if s == StatusCode::OK && by.is_some_and(|by| replicas.contains(&by)) {
            break;
        }
        assert!(Instant::now() < deadline, "a replica serves the journal");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Position 50 is never reached: parked for wait_ms, then 503 with how far the server got.
    let mut applied = Vec::new();
    for _ in 0..3 {
        let uri = "/v1/journals/orders/records?from=0&min_seq=50&wait_ms=200";
        let (s, _, body) = raw(r, "GET", uri, Some(&owner), None, Vec::new()).await;
        let v: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!((s, v["code"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable")), "{v}");
        assert!(v.get("view").is_none() && v.get("max_records").is_none(), "a bare 503 with applied_to: {v}");
        let a = v["applied_to"].as_u64().unwrap_or_else(|| panic!("a read's 503 says how far a server applied: {v}"));
        assert!(a <= 2, "no server applied past the journal's two records: {v}");
        applied.push(a);
        if a == 2 {
            break;
        }
    }
    assert_eq!(applied.last(), Some(&2), "a caught-up server applied both records: {applied:?}");
    // A read that is served carries no such field, and neither does any other 503.
    let (s, _, body) = raw(r, "GET", "/v1/journals/orders/records?from=0", Some(&owner), None, Vec::new()).await;
    let v: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!((s, v.get("applied_to")), (StatusCode::OK, None), "{v}");
    let _ = w.cell.stop();
}
