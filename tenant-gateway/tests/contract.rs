//! The contract's strict edges: unknown, repeated or malformed query parameters are 400 `malformed`
//! on every route (and the request takes no effect); `/metrics` is Prometheus text unless the
//! scraper asks for OpenMetrics; a read's `wait_ms` is honoured within a few milliseconds.

mod common;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::{Value, json};

use common::{call, claimed_with, code, create, raw, signup, world};

const A: &str = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_repeated_or_malformed_query_parameters_are_malformed_on_every_route() {
    let w = world().await;
    let r = &w.router;
    let (_, owner, owner_jti) = signup(r, "acme").await;
    create(r, &owner, "orders", None).await;
    let admin = paros_gateway::mint_admin_token(w.gateway.active_key(), 60);
    let write = json!({"leader": A, "seq": 0, "records": ["aGk="]});
    // Every route, with what it needs to succeed but for its query.
    let routes: Vec<(&str, String, Option<&str>, Option<Value>)> = vec![
        ("POST", "/v1/signup".into(), None, Some(json!({"name": "globex"}))),
        ("POST", "/v1/tokens".into(), Some(&owner), Some(json!({"scope": "read"}))),
        ("DELETE", format!("/v1/tokens/{owner_jti}"), Some(&owner), None),
        ("POST", "/v1/journals".into(), Some(&owner), Some(json!({"name": "fresh"}))),
        ("GET", "/v1/journals".into(), Some(&owner), None),
        ("GET", "/v1/journals/orders".into(), Some(&owner), None),
        ("DELETE", "/v1/journals/orders".into(), Some(&owner), None),
        ("POST", "/v1/journals/orders/leader".into(), Some(&owner), Some(json!({"new": A, "old": null}))),
        ("POST", "/v1/journals/orders/records".into(), Some(&owner), Some(write)),
        ("POST", "/v1/journals/orders/truncate".into(), Some(&owner), Some(json!({"leader": A, "up_to": 0}))),
        ("GET", "/healthz".into(), None, None),
        ("GET", "/metrics".into(), None, None),
        ("GET", "/v1/openapi.json".into(), None, None),
        ("GET", "/ui".into(), None, None),
    ];
    for (method, path, token, body) in &routes {
        for query in ["bogus=1", "x", "&"] {
            let uri = format!("{path}?{query}");
            let (s, v) = call(r, method, &uri, *token, body.clone()).await;
            assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, "malformed"), "{method} {uri}: {v}");
        }
    }
    // Routes that take parameters refuse unknown, repeated and malformed ones.
    for uri in [
        "/v1/journals/orders/records?from=0&bogus=1",
        "/v1/journals/orders/records?from=0&from=0",
        "/v1/journals/orders/records?from=x",
        "/v1/journals/orders/records?from",
        "/v1/journals/orders/tail?from=0&bogus=1",
        "/v1/journals/orders/tail?from=0&from=1",
        "/v1/journals/orders/tail?from=-1",
    ] {
        let (s, v) = call(r, "GET", uri, Some(&owner), None).await;
        assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, "malformed"), "{uri}: {v}");
    }
    for uri in ["/v1/admin/overview?bogus=1", "/v1/admin/overview?limit=1&limit=1", "/v1/admin/overview?limit=1&"] {
        let (s, v) = call(r, "GET", uri, Some(&admin), None).await;
        assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, "malformed"), "{uri}: {v}");
    }

    // None of the refused requests took effect: the signup name and the journal name are free,
    // the journal is still there and never led, the token still works.
    signup(r, "globex").await;
    create(r, &owner, "fresh", None).await;
    let (s, v) = call(r, "GET", "/v1/journals/orders", Some(&owner), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["view"], json!({"leader": null, "first_seq": 0, "next_seq": 0}), "nothing was written or led");
    // A bare `?` names no parameter.
    assert_eq!(call(r, "GET", "/v1/journals?", Some(&owner), None).await.0, StatusCode::OK);
}

/// A scrape's body as `(sample, value)`, checking it is Prometheus text 0.0.4 as a parser
/// would: no OpenMetrics-only line, and every sample named as its family's `# TYPE` says.
fn prometheus_samples(text: &str) -> Vec<(String, f64)> {
    let mut family: Option<(String, String)> = None;
    let mut samples = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        assert!(line != "# EOF" && !line.starts_with("# UNIT"), "an OpenMetrics line: {line}");
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(["counter", "gauge", "histogram", "untyped"].contains(&kind), "{line}");
            family = Some((name.to_owned(), kind.to_owned()));
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (name_labels, value) = line.rsplit_once(' ').expect("a sample and its value");
        let name = name_labels.split('{').next().unwrap();
        let (fam, kind) = family.as_ref().expect("a sample after its TYPE");
        let ok = if kind == "histogram" {
            [format!("{fam}_bucket"), format!("{fam}_sum"), format!("{fam}_count")].contains(&name.to_owned())
        } else {
            name == fam
        };
        assert!(ok, "sample {name} is not of family {fam} ({kind})");
        samples.push((name_labels.to_owned(), value.parse::<f64>().expect("a value")));
    }
    samples
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_prometheus_text_by_default_and_openmetrics_when_asked() {
    let w = world().await;
    let r = &w.router;
    signup(r, "acme").await;
    let (s, headers, body) = raw(r, "GET", "/metrics", None, None, Vec::new()).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    let text = String::from_utf8(body).unwrap();
    let samples = prometheus_samples(&text);
    assert!(
        samples.iter().any(|(k, v)| k.starts_with("paros_gateway_requests_total{") && *v >= 1.0),
        "the signup is counted: {text}"
    );
    assert!(text.contains("# TYPE paros_gateway_node_rounds_total counter"), "{text}");

    let ask = |accept: &'static str| {
        let request = axum::http::Request::get("/metrics").header("accept", accept);
        tower::ServiceExt::oneshot(r.clone(), request.body(axum::body::Body::empty()).unwrap())
    };
    let prometheus_accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;\
                             q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let response = ask(prometheus_accept).await.unwrap();
    assert_eq!(response.headers()["content-type"], "application/openmetrics-text; version=1.0.0; charset=utf-8");
    let body = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
    let open = String::from_utf8(body.to_vec()).unwrap();
    assert!(open.ends_with("# EOF\n") && open.contains("# TYPE paros_gateway_requests counter"), "{open}");
    let response = ask("text/plain;version=0.0.4").await.unwrap();
    assert_eq!(response.headers()["content-type"], "text/plain; version=0.0.4; charset=utf-8");
}

/// `(status, body, elapsed)` of one read.
async fn timed(r: &axum::Router, token: &str, uri: &str) -> (StatusCode, Value, Duration) {
    let started = Instant::now();
    let (s, v) = call(r, "GET", uri, Some(token), None).await;
    (s, v, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_answers_within_a_few_milliseconds_of_its_wait() {
    let w = world().await;
    let r = &w.router;
    let (_, owner, _) = signup(r, "acme").await;
    create(r, &owner, "orders", None).await;
    claimed_with(r, &owner, "orders", A, &["aGk=", "aGk="]).await;
    let window = Duration::from_millis(200)..Duration::from_millis(400);

    // A position the journal does not reach in time: 503 once wait_ms passed, not seconds later.
    for _ in 0..3 {
        let (s, v, took) = timed(r, &owner, "/v1/journals/orders/records?from=2&min_seq=50&wait_ms=200").await;
        assert_eq!((s, code(&v)), (StatusCode::SERVICE_UNAVAILABLE, "unavailable"), "{v}");
        assert!(window.contains(&took), "min_seq not reached: answered after {took:?}");
        assert!(v["applied_to"].as_u64().is_some_and(|a| a <= 2), "how far the server had applied: {v}");
        let uri = "/v1/journals/orders/records?from=2&consistency=linearizable&min_seq=50&wait_ms=200";
        let (s, v, took) = timed(r, &owner, uri).await;
        assert_eq!((s, code(&v)), (StatusCode::SERVICE_UNAVAILABLE, "unavailable"), "{v}");
        assert!(window.contains(&took), "linearizable with min_seq: answered after {took:?}");
    }
    // At the tail (and past it): an empty page once wait_ms passed.
    for from in [2, 9] {
        let (s, v, took) = timed(r, &owner, &format!("/v1/journals/orders/records?from={from}&wait_ms=200")).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(v["records"], json!([]), "{v}");
        assert!(window.contains(&took), "an empty page from {from}: answered after {took:?}");
    }
    // A record that arrives during the wait is answered at once, not at the end of the wait.
    let writer = {
        let r = r.clone();
        let owner = owner.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            let body = json!({"leader": A, "seq": 2, "records": ["aGk="]});
            call(&r, "POST", "/v1/journals/orders/records", Some(&owner), Some(body)).await
        })
    };
    let (s, v, took) = timed(r, &owner, "/v1/journals/orders/records?from=2&wait_ms=1000").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["records"], json!(["aGk="]), "{v}");
    assert!(took < Duration::from_millis(900), "the record was answered when it arrived, after {took:?}");
    assert_eq!(writer.await.unwrap().0, StatusCode::OK);
    // And a position already reached is served without waiting.
    let (s, v, took) = timed(r, &owner, "/v1/journals/orders/records?from=0&min_seq=2&wait_ms=1000").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["records"].as_array().map(Vec::len), Some(3), "{v}");
    assert!(took < Duration::from_millis(500), "answered after {took:?}");
}

/// A page ends early only at the tail, at `limit` or at `max_bytes` (clamped to the server's
/// maximum): the gateway's bounds are the cell's, so a page never stops short of them with more
/// records there, where a client may take a short page for the tail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_holds_the_gateways_bound_when_the_journal_has_more() {
    let config = paros_gateway::GatewayConfig::default();
    let w = common::world_with(config).await;
    let r = &w.router;
    let (_, owner, _) = signup(r, "pages").await;
    create(r, &owner, "long", None).await;
    let records_max = config.read_records_max as usize;
    claimed_with(r, &owner, "long", A, &["eA=="]).await;
    let mut seq = 1;
    while seq < 2 * records_max {
        let n = (config.write_records_max as usize).min(2 * records_max - seq);
        let body = json!({"leader": A, "seq": seq, "records": vec!["eA=="; n]});
        let (s, v) = call(r, "POST", "/v1/journals/long/records", Some(&owner), Some(body)).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        seq += n;
    }
    let (s, v) = call(r, "GET", "/v1/journals/long/records?from=0&limit=100000", Some(&owner), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["records"].as_array().unwrap().len(), records_max, "{}", v["view"]);

    // Records of 1 KiB: a page holds as many as `read_bytes_max` allows.
    let kib = paros_api::Record(vec![7; 1024]);
    let big: Vec<_> = (0..100).map(|_| kib.clone()).collect();
    let body = json!({"leader": A, "seq": seq, "records": big});
    let (s, v) = call(r, "POST", "/v1/journals/long/records", Some(&owner), Some(body)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let uri = format!("/v1/journals/long/records?from={seq}&limit=100000&max_bytes=1000000000");
    let (s, v) = call(r, "GET", &uri, Some(&owner), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let expected = (config.read_bytes_max as usize / 1024).min(100);
    assert_eq!(v["records"].as_array().unwrap().len(), expected, "{}", v["view"]);
    let _ = w.cell.stop();
}
