//! The tenant's story through the real cell: signup → create → claim → write → duplicate →
//! superseded → truncate → read below the floor → tail (records, gap, heartbeats, resume).

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt as _;
use paros_gateway::GatewayConfig;
use serde_json::{Value, json};
use tower::ServiceExt as _;

use common::{call, code, create, signup, test_config, world, world_with};

const A: &str = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";
const B: &str = "1f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";

/// Reads SSE frames from a tail until `enough` holds or the time runs out.
async fn tail_frames(
    router: &axum::Router,
    uri: &str,
    token: &str,
    last_event_id: Option<&str>,
    enough: impl Fn(&[(String, String, Value)]) -> bool,
) -> Vec<(String, String, Value)> {
    let mut b = Request::builder().uri(uri).header(header::AUTHORIZATION, format!("Bearer {token}"));
    if let Some(id) = last_event_id {
        b = b.header("last-event-id", id);
    }
    let response = router.clone().oneshot(b.body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers()[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/event-stream"));
    let mut body = response.into_body();
    let mut text = String::new();
    let mut frames = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !enough(&frames) {
        let next = tokio::time::timeout_at(deadline, body.frame())
            .await
            .expect("the tail keeps sending")
            .expect("open")
            .unwrap();
        if let Ok(data) = next.into_data() {
            text.push_str(std::str::from_utf8(&data).unwrap());
        }
        while let Some(end) = text.find("\n\n") {
            let raw: String = text.drain(..end + 2).collect();
            let (mut event, mut id, mut data) = (String::new(), String::new(), String::new());
            for line in raw.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    event = v.trim().to_owned();
                } else if let Some(v) = line.strip_prefix("id:") {
                    id = v.trim().to_owned();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data = v.trim().to_owned();
                }
            }
            frames.push((event, id, serde_json::from_str(&data).unwrap_or(Value::Null)));
        }
    }
    frames
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_claims_writes_is_superseded_truncates_and_tails() {
    let w = world().await;
    let r = &w.router;
    let (_tenant, owner, _) = signup(r, "acme").await;
    let info = create(r, &owner, "orders", None).await;
    assert_eq!(
        info,
        json!({
            "name": "orders",
            "mode": "single_writer",
            "view": {"leader": null, "first_seq": 0, "next_seq": 0},
            "tier": "default"
        }),
        "a journal created without a tier is on the default tier the cell formed with"
    );

    // Claim.
    let (s, v) =
        call(r, "POST", "/v1/journals/orders/leader", Some(&owner), Some(json!({"new": A, "old": null}))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["outcome"], "won");
    assert_eq!(v["view"]["leader"], A);

    // Write, then the byte-identical retry.
    let batch = json!({"leader": A, "seq": 0, "records": ["aGk=", "", "+/8="]});
    let (s, v) = call(r, "POST", "/v1/journals/orders/records", Some(&owner), Some(batch.clone())).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!((v["outcome"].as_str(), v["seq"].as_u64(), v["count"].as_u64()), (Some("accepted"), Some(0), Some(3)));
    assert_eq!(v["view"]["next_seq"], 3);
    let (s, v) = call(r, "POST", "/v1/journals/orders/records", Some(&owner), Some(batch)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["outcome"], "duplicate");

    // A new writer supersedes the first; the first is refused with a view naming the new one.
    let (s, v) = call(r, "POST", "/v1/journals/orders/leader", Some(&owner), Some(json!({"new": B, "old": A}))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = call(
        r,
        "POST",
        "/v1/journals/orders/records",
        Some(&owner),
        Some(json!({"leader": A, "seq": 3, "records": ["eA=="]})),
    )
    .await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(code(&v), "refused");
    assert_eq!(v["view"]["leader"], B);
    let (s, v) =
        call(r, "POST", "/v1/journals/orders/leader", Some(&owner), Some(json!({"new": A, "old": null}))).await;
    assert_eq!((s, code(&v)), (StatusCode::CONFLICT, "lost"), "{v}");
    assert_eq!(v["view"]["leader"], B);

    // The new writer writes on, then truncates.
    for seq in 3..6 {
        let (s, v) = call(
            r,
            "POST",
            "/v1/journals/orders/records",
            Some(&owner),
            Some(json!({"leader": B, "seq": seq, "records": ["eA=="]})),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
    }
    let (s, v) =
        call(r, "POST", "/v1/journals/orders/truncate", Some(&owner), Some(json!({"leader": A, "up_to": 2}))).await;
    assert_eq!((s, code(&v)), (StatusCode::CONFLICT, "truncate_refused"), "{v}");
    let (s, v) = call(r, "POST", "/v1/journals/orders/truncate", Some(&owner), Some(json!({"up_to": 2}))).await;
    assert_eq!((s, code(&v)), (StatusCode::CONFLICT, "wrong_mode"), "{v}");

    // Truncate below the tail.
    let (s, v) =
        call(r, "POST", "/v1/journals/orders/truncate", Some(&owner), Some(json!({"leader": B, "up_to": 4}))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["outcome"], "trimmed");
    assert_eq!(v["view"]["first_seq"], 4);

    // Reads: below the floor 410 with the view; at the floor the records.
    let (s, v) = call(r, "GET", "/v1/journals/orders/records?from=1", Some(&owner), None).await;
    assert_eq!((s, code(&v)), (StatusCode::GONE, "truncated"), "{v}");
    assert_eq!(v["view"]["first_seq"], 4);
    let (s, v) = call(r, "GET", "/v1/journals/orders/records?from=4&limit=1", Some(&owner), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["from"], 4);
    assert_eq!(v["records"], json!(["eA=="]));
    let (s, v) = call(r, "GET", "/v1/journals/orders/records?from=6&min_seq=5", Some(&owner), None).await;
    assert_eq!(s, StatusCode::OK, "read-your-writes: {v}");
    assert_eq!(v["records"], json!([]));
    let (s, v) = call(r, "GET", "/v1/journals/orders/records?from=6&min_seq=50&wait_ms=100", Some(&owner), None).await;
    assert_eq!((s, code(&v)), (StatusCode::SERVICE_UNAVAILABLE, "unavailable"), "{v}");
    // A long-poll at the tail ends empty once wait_ms passed.
    let started = std::time::Instant::now();
    let (s, v) = call(r, "GET", "/v1/journals/orders/records?from=6&wait_ms=300", Some(&owner), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["records"], json!([]));
    assert!(started.elapsed() >= Duration::from_millis(250), "the read waited for a record");

    // A tail whose cursor is below the floor sees a gap, then the records, then heartbeats.
    let frames = tail_frames(r, "/v1/journals/orders/tail?from=1", &owner, None, |f| {
        f.iter().any(|(e, ..)| e == "records") && f.iter().filter(|(e, ..)| e == "heartbeat").count() >= 2
    })
    .await;
    let gap = frames.iter().find(|(e, ..)| e == "gap").expect("a gap");
    assert_eq!((gap.1.as_str(), gap.2["from"].as_u64(), gap.2["resumed_at"].as_u64()), ("4", Some(1), Some(4)));
    let rec = frames.iter().find(|(e, ..)| e == "records").expect("records");
    assert_eq!((rec.1.as_str(), rec.2["from"].as_u64()), ("6", Some(4)));
    let hb = frames.iter().rev().find(|(e, ..)| e == "heartbeat").expect("a heartbeat");
    assert_eq!((hb.1.as_str(), hb.2["caught_up"].as_bool()), ("6", Some(true)));

    // Resume with Last-Event-ID (it overrides `from`): the next record, nothing before it.
    let (s, _) = call(
        r,
        "POST",
        "/v1/journals/orders/records",
        Some(&owner),
        Some(json!({"leader": B, "seq": 6, "records": ["eQ=="]})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let frames = tail_frames(r, "/v1/journals/orders/tail?from=0", &owner, Some("6"), |f| {
        f.iter().any(|(e, ..)| e == "records")
    })
    .await;
    let rec = frames.iter().find(|(e, ..)| e == "records").unwrap();
    assert_eq!((rec.1.as_str(), rec.2["from"].as_u64(), &rec.2["records"]), ("7", Some(6), &json!(["eQ=="])));
    assert!(frames.iter().all(|(e, ..)| e != "gap"));

    // Multi-writer: appends land at the tail; a leader is the wrong mode.
    create(r, &owner, "events", Some("multi_writer")).await;
    let (s, v) = call(r, "POST", "/v1/journals/events/records", Some(&owner), Some(json!({"records": ["YQ=="]}))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) =
        call(r, "POST", "/v1/journals/events/records", Some(&owner), Some(json!({"records": ["Yg==", "Yw=="]}))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!((v["seq"].as_u64(), v["count"].as_u64()), (Some(1), Some(2)));
    let (s, v) = call(
        r,
        "POST",
        "/v1/journals/events/records",
        Some(&owner),
        Some(json!({"leader": A, "seq": 3, "records": ["Yg=="]})),
    )
    .await;
    assert_eq!((s, code(&v)), (StatusCode::CONFLICT, "wrong_mode"), "{v}");
    let (s, v) =
        call(r, "POST", "/v1/journals/events/leader", Some(&owner), Some(json!({"new": A, "old": null}))).await;
    assert_eq!((s, code(&v)), (StatusCode::CONFLICT, "wrong_mode"), "{v}");

    // List, show, delete; the name is free afterwards.
    let (s, v) = call(r, "GET", "/v1/journals", Some(&owner), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["journals"].as_array().unwrap().len(), 2);
    let (s, v) = call(r, "GET", "/v1/journals/orders", Some(&owner), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["view"], json!({"leader": B, "first_seq": 4, "next_seq": 7}));
    let (s, v) = call(r, "POST", "/v1/journals", Some(&owner), Some(json!({"name": "orders"}))).await;
    assert_eq!((s, code(&v)), (StatusCode::CONFLICT, "name_taken"));
    let (s, _) = call(r, "DELETE", "/v1/journals/orders", Some(&owner), None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, v) = call(r, "GET", "/v1/journals/orders/records?from=0", Some(&owner), None).await;
    assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, "unknown_journal"));
    create(r, &owner, "orders", None).await;

    // Health and metrics.
    let (s, _) = call(r, "GET", "/healthz", None, None).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _, body) = common::raw(r, "GET", "/metrics", None, None, Vec::new()).await;
    assert_eq!(s, StatusCode::OK);
    let text = String::from_utf8(body).unwrap();
    assert!(text.contains("paros_gateway_requests_total"), "{text}");
    assert!(text.contains("route=\"/v1/journals/{name}/records\""), "{text}");
    assert!(text.contains("paros_gateway_request_duration_seconds_bucket"), "{text}");
}

/// A quiet tail sends a heartbeat at once, then one each `heartbeat_interval`, also when that is
/// longer than a node's own long-poll (until stop 55 they came each time a node's long-poll
/// ended, about every 1.6 s on `paros dev`, whatever the interval).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_tail_heartbeats_at_once_then_once_per_heartbeat_interval() {
    let interval = Duration::from_millis(2_500);
    let w = world_with(GatewayConfig { heartbeat_interval: interval, ..test_config() }).await;
    let r = &w.router;
    let (_tenant, owner, _) = signup(r, "acme").await;
    create(r, &owner, "orders", None).await;
    let opened = std::time::Instant::now();
    let arrivals = std::sync::Mutex::new(Vec::new());
    let frames = tail_frames(r, "/v1/journals/orders/tail", &owner, None, |f| {
        let mut at = arrivals.lock().unwrap();
        while at.len() < f.len() {
            at.push(opened.elapsed());
        }
        f.len() >= 3
    })
    .await;
    let at = arrivals.into_inner().unwrap();
    assert!(frames.iter().all(|(e, id, v)| e == "heartbeat" && id == "0" && v["caught_up"] == true), "{frames:?}");
    assert!(at[0] < Duration::from_secs(1), "the first heartbeat comes at once: {at:?}");
    for pair in at.windows(2) {
        let gap = pair[1] - pair[0];
        let fits = gap >= interval - Duration::from_millis(100) && gap < interval + Duration::from_millis(1_500);
        assert!(fits, "heartbeats {gap:?} apart, the interval is {interval:?}: {at:?}");
    }
}
