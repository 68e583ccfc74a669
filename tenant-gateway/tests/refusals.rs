//! Bad input gets a typed refusal: malformed JSON, base64, uuids and queries are 400; an
//! oversized batch or body is 413; a tenant over its quota is 429 with `Retry-After`; and the
//! OpenAPI document describes exactly the routes the router serves.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use axum::http::StatusCode;
use paros_registry::{Command, Op, Quotas};
use serde_json::json;

use common::{call, code, create, raw, signup, world};

const A: &str = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_oversized_requests_are_refused_before_any_node_sees_them() {
    let w = world().await;
    let r = &w.router;
    let (_, owner, _) = signup(r, "acme").await;
    create(r, &owner, "orders", None).await;
    let (s, _) =
        call(r, "POST", "/v1/journals/orders/leader", Some(&owner), Some(json!({"new": A, "old": null}))).await;
    assert_eq!(s, StatusCode::OK);
    let records = "/v1/journals/orders/records";

    for body in [
        "{",
        "[]",
        r#"{"leader": "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b", "seq": 0, "records": ["aGk"]}"#,
        r#"{"leader": "0F8B1C2E-4A5D-4E6F-9A0B-1C2D3E4F5A6B", "seq": 0, "records": []}"#,
        r#"{"leader": "00000000-0000-0000-0000-000000000000", "seq": 0, "records": []}"#,
        r#"{"leader": "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b", "seq": 0, "records": [], "extra": 1}"#,
        r#"{"leader": "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b", "seq": null, "records": []}"#,
        r#"{"leader": "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b", "records": ["aGk="]}"#,
    ] {
        let (s, _, b) = raw(r, "POST", records, Some(&owner), Some("application/json"), body.as_bytes().to_vec()).await;
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, "malformed"), "{body}: {v}");
    }
    let body = br#"{"leader": "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b", "seq": 0, "records": []}"#.to_vec();
    for ct in [None, Some("text/plain"), Some("application/problem+json")] {
        let (s, _, _) = raw(r, "POST", records, Some(&owner), ct, body.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{ct:?}");
    }
    let (s, _, _) = raw(r, "POST", records, Some(&owner), Some("Application/JSON; charset=utf-8"), body).await;
    assert_eq!(s, StatusCode::CONFLICT, "a JSON media type with parameters is JSON; an empty batch is refused");

    // Bad names and queries.
    let (s, v) = call(r, "GET", "/v1/journals/.hidden/records?from=0", Some(&owner), None).await;
    assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, "malformed"));
    for q in [
        "",
        "?from=-1",
        "?from=0&limit=0",
        "?from=0&wait_ms=1001",
        "?from=0&bogus=1",
        "?from=0&from=1",
        "?from=0&consistency=at_least",
    ] {
        let (s, v) = call(r, "GET", &format!("{records}{q}"), Some(&owner), None).await;
        assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, "malformed"), "{q}");
    }
    let (s, _) = call(r, "GET", "/v1/journals/orders/tail?from=x", Some(&owner), None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    // 404 wins over a malformed body.
    let (s, _, _) =
        raw(r, "POST", "/v1/journals/nope/records", Some(&owner), Some("application/json"), b"{".to_vec()).await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // A batch over the write limits: 413 with the three limits and the view.
    let many: Vec<&str> = vec!["eA=="; 17];
    let (s, v) = call(r, "POST", records, Some(&owner), Some(json!({"leader": A, "seq": 0, "records": many}))).await;
    assert_eq!((s, code(&v)), (StatusCode::PAYLOAD_TOO_LARGE, "too_large"), "{v}");
    assert_eq!(
        (v["max_records"].as_u64(), v["max_bytes"].as_u64(), v["max_body_bytes"].as_u64()),
        (Some(16), Some(4096), Some(65536))
    );
    assert_eq!(v["view"]["leader"], A);
    // A body over the body limit: 413 before it is parsed (it is not even JSON).
    let huge = vec![b'x'; 70 * 1024];
    let (s, _, b) = raw(r, "POST", records, Some(&owner), Some("application/json"), huge).await;
    let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
    assert_eq!((s, code(&v)), (StatusCode::PAYLOAD_TOO_LARGE, "too_large"));
    assert_eq!(v["max_body_bytes"], 65536);

    // A SetLeader with a bad uuid, and `old` missing, are 400.
    let (s, _) = call(
        r,
        "POST",
        "/v1/journals/orders/leader",
        Some(&owner),
        Some(json!({"new": "{0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b}", "old": null})),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, _) = call(r, "POST", "/v1/journals/orders/leader", Some(&owner), Some(json!({"new": A}))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);

    // An unknown route is no API answer.
    let (s, headers, _) = raw(r, "GET", "/v1/nothing", None, None, Vec::new()).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert!(headers.contains_key("x-paros-no-route"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_on_a_tier_the_cell_does_not_have_is_400_and_changes_nothing() {
    let w = world().await;
    let r = &w.router;
    let (_, owner, _) = signup(r, "acme").await;
    let before = w.cell.directory().borrow().directory.clone().expect("a directory");
    let body = json!({"name": "orders", "tier": "gold"});
    let (s, v) = call(r, "POST", "/v1/journals", Some(&owner), Some(body)).await;
    assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, "malformed"), "{v}");
    assert!(v["message"].as_str().unwrap_or("").contains("gold"), "the message names the tier: {v}");
    let after = w.cell.directory().borrow().directory.clone().expect("a directory");
    assert!(before.journals().eq(after.journals()), "no journal was created");
    assert!(before.tiers().eq(after.tiers()), "no tier was created");
    let (s, v) = call(r, "GET", "/v1/journals/orders", Some(&owner), None).await;
    assert_eq!((s, code(&v)), (StatusCode::NOT_FOUND, "unknown_journal"), "{v}");
    // The name stays free, and the default tier is named explicitly as well as by omission.
    let (s, v) =
        call(r, "POST", "/v1/journals", Some(&owner), Some(json!({"name": "orders", "tier": "default"}))).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["tier"], "default");
    let (s, v) = call(r, "GET", "/v1/journals", Some(&owner), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["journals"][0]["tier"], "default", "the list shows the tier: {v}");
    let (s, v) = call(r, "GET", "/v1/journals/orders", Some(&owner), None).await;
    assert_eq!((s, &v["tier"]), (StatusCode::OK, &json!("default")), "and so does show: {v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_over_its_quota_is_429_with_retry_after() {
    let w = world().await;
    let r = &w.router;
    let (tenant, owner, _) = signup(r, "busy").await;
    let (_, calm, _) = signup(r, "calm").await;
    let tenant = paros_core::TenantId(u64::from_str_radix(&tenant, 16).unwrap());
    let quotas = Quotas { requests_per_s: 5, bytes_per_s: 1 << 20, journals_max: 1 };
    w.cell.request(Op::Command(Command::SetQuotas { tenant, quotas })).await.expect("quotas set");
    w.cell
        .wait_followers(Duration::from_secs(5), |d| d.tenant(tenant).is_some_and(|t| t.quotas == quotas))
        .await
        .unwrap();

    let mut limited = None;
    for _ in 0..20 {
        let (s, headers, b) = raw(r, "GET", "/v1/journals", Some(&owner), None, Vec::new()).await;
        if s == StatusCode::TOO_MANY_REQUESTS {
            limited = Some((headers, b));
            break;
        }
    }
    let (headers, b) = limited.expect("the sixth request in a second is over the quota");
    let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
    assert_eq!(code(&v), "over_quota");
    let after: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=2).contains(&after), "{after}");
    let (s, _) = call(r, "GET", "/v1/journals", Some(&calm), None).await;
    assert_eq!(s, StatusCode::OK, "another tenant is not limited");
    // A bad token is 401 even when over the quota (401 wins).
    let (s, _) = call(r, "GET", "/v1/journals", Some("x.y.z"), None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);

    // The journal quota: the second journal of a tenant allowed one.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    create(r, &owner, "one", None).await;
    let (s, v) = call(r, "POST", "/v1/journals", Some(&owner), Some(json!({"name": "two"}))).await;
    assert_eq!((s, code(&v)), (StatusCode::TOO_MANY_REQUESTS, "over_quota"), "{v}");

    // Open tails are bounded per tenant (2 in the test configuration).
    create(r, &calm, "t", None).await;
    let open = |router: axum::Router, token: String| async move {
        use tower::ServiceExt as _;
        let req = axum::http::Request::builder()
            .uri("/v1/journals/t/tail")
            .header("authorization", format!("Bearer {token}"))
            .body(axum::body::Body::empty())
            .unwrap();
        router.oneshot(req).await.unwrap()
    };
    let first = open(r.clone(), calm.clone()).await;
    let second = open(r.clone(), calm.clone()).await;
    assert_eq!((first.status(), second.status()), (StatusCode::OK, StatusCode::OK));
    let third = open(r.clone(), calm.clone()).await;
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(third.headers().contains_key("retry-after"));
    drop(first);
    let again = open(r.clone(), calm.clone()).await;
    assert_eq!(again.status(), StatusCode::OK, "a closed tail frees its slot");
}

/// The bytes/s and journal quotas answer 429 before anything of the request is judged (the contract:
/// 401 → 429 → 403 → … → 400 body): a malformed body, or a read-only token, over quota is 429.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bytes_and_journal_quotas_win_over_the_checks_after_them() {
    let w = world().await;
    let r = &w.router;
    let (tenant, owner, _) = signup(r, "heavy").await;
    let tenant = paros_core::TenantId(u64::from_str_radix(&tenant, 16).unwrap());
    let quotas = Quotas { requests_per_s: 1000, bytes_per_s: 1000, journals_max: 1 };
    w.cell.request(Op::Command(Command::SetQuotas { tenant, quotas })).await.expect("quotas set");
    w.cell
        .wait_followers(Duration::from_secs(5), |d| d.tenant(tenant).is_some_and(|t| t.quotas == quotas))
        .await
        .unwrap();
    create(r, &owner, "bulk", None).await;
    let uuid = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";
    let (s, _) =
        call(r, "POST", "/v1/journals/bulk/leader", Some(&owner), Some(json!({"new": uuid, "old": null}))).await;
    assert_eq!(s, StatusCode::OK);
    // 3000 bytes in one write: it passes (the bucket goes into debt), the next waits ~2 s.
    let big = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, vec![7u8; 3000]);
    let (s, v) = call(
        r,
        "POST",
        "/v1/journals/bulk/records",
        Some(&owner),
        Some(json!({"leader": uuid, "seq": 0, "records": [big]})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, headers, b) =
        raw(r, "POST", "/v1/journals/bulk/records", Some(&owner), Some("application/json"), b"{not json".to_vec())
            .await;
    let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
    assert_eq!((s, code(&v)), (StatusCode::TOO_MANY_REQUESTS, "over_quota"), "429 wins over a malformed body");
    let after: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=3).contains(&after), "{after}");
    let (s, _) = call(r, "GET", "/v1/journals/bulk/records?from=0", Some(&owner), None).await;
    assert_eq!(s, StatusCode::OK, "reads are not held back by the bytes/s debt");

    let (s, minted) = call(r, "POST", "/v1/tokens", Some(&owner), Some(json!({"scope": "read"}))).await;
    assert_eq!(s, StatusCode::OK);
    let reader = minted["token"].as_str().unwrap();
    let (s, v) = call(r, "POST", "/v1/journals", Some(reader), Some(json!({"name": "more"}))).await;
    assert_eq!((s, code(&v)), (StatusCode::TOO_MANY_REQUESTS, "over_quota"), "429 wins over the read token's 403");
    let (s, v) = call(r, "POST", "/v1/journals", Some(&owner), Some(json!({"name": 5}))).await;
    assert_eq!((s, code(&v)), (StatusCode::TOO_MANY_REQUESTS, "over_quota"), "and over a malformed body");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_describes_the_routes_the_router_serves() {
    let w = world().await;
    let r = &w.router;
    let (s, doc) = call(r, "GET", "/v1/openapi.json", None, None).await;
    assert_eq!(s, StatusCode::OK);
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().unwrap().keys() {
            documented.insert((method.to_uppercase(), path.clone()));
        }
    }
    let expected: BTreeSet<(String, String)> = [
        ("POST", "/v1/signup"),
        ("POST", "/v1/tokens"),
        ("DELETE", "/v1/tokens/{token_id}"),
        ("POST", "/v1/journals"),
        ("GET", "/v1/journals"),
        ("GET", "/v1/journals/{name}"),
        ("DELETE", "/v1/journals/{name}"),
        ("POST", "/v1/journals/{name}/leader"),
        ("POST", "/v1/journals/{name}/records"),
        ("GET", "/v1/journals/{name}/records"),
        ("POST", "/v1/journals/{name}/truncate"),
        ("POST", "/v1/journals/{name}/session"),
        ("GET", "/v1/journals/{name}/tail"),
        ("GET", "/healthz"),
        ("GET", "/metrics"),
        ("GET", "/v1/openapi.json"),
        ("GET", "/ui"),
        ("GET", "/v1/admin/overview"),
        ("GET", "/readyz/{node}"),
        ("POST", "/v1/admin/machines/{node}/stop"),
        ("POST", "/v1/admin/machines/{node}/start"),
        ("GET", "/v1/admin/cell"),
        ("POST", "/v1/admin/machines"),
        ("POST", "/v1/admin/machines/{node}/drain"),
        ("POST", "/v1/admin/machines/{node}/retire"),
        ("POST", "/v1/admin/journals/{tenant}/{journal}/move"),
    ]
    .into_iter()
    .map(|(m, p)| (m.to_owned(), p.to_owned()))
    .collect();
    assert_eq!(documented, expected, "the document names the contract's routes and the operator's");
    // Every documented route is served (answered by a handler, not the router's fallback),
    // and each documented path refuses a method it does not document.
    for (method, path) in &documented {
        let uri = path
            .replace("{name}", "x")
            .replace("{token_id}", "x")
            .replace("{node}", "1")
            .replace("{tenant}", "t")
            .replace("{journal}", "j");
        let (_, headers, _) = raw(r, method, &uri, None, None, Vec::new()).await;
        assert!(!headers.contains_key("x-paros-no-route"), "{method} {path} is served");
        let (_, headers, _) = raw(r, "PATCH", &uri, None, None, Vec::new()).await;
        assert!(headers.contains_key("x-paros-no-route"), "PATCH {path} is not served");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_serves_http_on_a_loopback_port() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let w = world().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(paros_gateway::serve(listener, w.gateway.clone()));
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(5), conn.read_to_string(&mut answer)).await.unwrap().unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    server.abort();
}

/// A body over the limit sent over HTTP/2: the gateway answers 413 and reads the rest of the
/// body and drops it (within `body_drain_bytes_max`), so the client sends it whole and reads
/// the 413. Without the drain the stream is reset under the client (`RST_STREAM NO_ERROR`
/// after the answer), which curl 7.88 and Python's h2 report as an error, not as the 413.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_body_over_http2_is_answered_413_after_the_client_sent_it_whole() {
    let w = world().await;
    let (_, owner, _) = signup(&w.router, "big").await;
    create(&w.router, &owner, "orders", None).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(paros_gateway::serve(listener, w.gateway.clone()));
    let (h2, connection) = h2::client::handshake(tokio::net::TcpStream::connect(addr).await.unwrap()).await.unwrap();
    tokio::spawn(connection);
    // The test gateway's body limit is 64 KiB: send three times that, with and without a
    // content-length (refused before reading, or once past the limit).
    let total = 3 * 64 * 1024;
    for with_length in [true, false] {
        let mut h2 = h2.clone().ready().await.unwrap();
        let mut request = axum::http::Request::post(format!("http://{addr}/v1/journals/orders/records"))
            .header("authorization", format!("Bearer {owner}"))
            .header("content-type", "application/json");
        if with_length {
            request = request.header("content-length", total);
        }
        let (answer, mut send) = h2.send_request(request.body(()).unwrap(), false).unwrap();
        let chunk = bytes::Bytes::from(vec![b'x'; 16 * 1024]);
        let mut sent = 0;
        while sent < total {
            send.reserve_capacity(chunk.len());
            let room = std::future::poll_fn(|cx| send.poll_capacity(cx)).await;
            let room = room.expect("the stream is open").expect("the stream is not reset");
            let n = room.min(chunk.len()).min(total - sent);
            send.send_data(chunk.slice(..n), sent + n == total).expect("the body is sent");
            sent += n;
        }
        let answer = tokio::time::timeout(Duration::from_secs(5), answer).await.expect("in time").expect("an answer");
        assert_eq!(answer.status(), StatusCode::PAYLOAD_TOO_LARGE, "content-length {with_length}");
        let mut body = answer.into_body();
        let mut bytes = Vec::new();
        while let Some(data) = body.data().await {
            let data = data.unwrap();
            body.flow_control().release_capacity(data.len()).unwrap();
            bytes.extend_from_slice(&data);
        }
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!((code(&v), v["max_body_bytes"].as_u64()), ("too_large", Some(65536)), "{v}");
    }
}
