//! The append session, `POST /v1/journals/{name}/session`, on the router: lines in, answers out
//! in order, each the Write route's own; the first refusal ends the session; idle sessions end.

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use base64::Engine as _;
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tower::ServiceExt as _;

use common::{call, create, raw, signup, test_config, world, world_with};

const A: &str = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";
const B: &str = "1f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";
const NDJSON: &str = "application/x-ndjson";

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// `n` fenced lines of one record each, from `from`, under `leader`.
fn lines(leader: &str, from: u64, n: u64) -> Vec<Value> {
    (from..from + n).map(|i| json!({"leader": leader, "seq": i, "records": [b64(&format!("r{i}"))]})).collect()
}

fn body(lines: &[Value]) -> Vec<u8> {
    lines.iter().flat_map(|l| format!("{l}\n").into_bytes()).collect()
}

/// The answer stream's lines as JSON.
fn answers(bytes: &[u8]) -> Vec<Value> {
    assert_eq!(bytes.last(), Some(&b'\n'), "the stream ends with a whole line");
    bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect()
}

async fn claimed(r: &axum::Router, name: &str) -> String {
    let (_, owner, _) = signup(r, name).await;
    create(r, &owner, "s", None).await;
    let (s, v) = call(r, "POST", "/v1/journals/s/leader", Some(&owner), Some(json!({"new": A, "old": null}))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    owner
}

async fn session(r: &axum::Router, token: &str, lines: &[Value]) -> (StatusCode, Vec<Value>) {
    let (s, headers, bytes) = raw(r, "POST", "/v1/journals/s/session", Some(token), Some(NDJSON), body(lines)).await;
    if s == StatusCode::OK {
        assert_eq!(headers[header::CONTENT_TYPE], NDJSON);
    }
    (s, answers(&bytes))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_answers_every_line_in_order_as_write_would_and_replays_are_duplicates() {
    let w = world().await;
    let owner = claimed(&w.router, "sess-order").await;
    let sent = lines(A, 0, 40);
    let (s, got) = session(&w.router, &owner, &sent).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(got.len(), 41, "one answer per line, then the end: {got:?}");
    for (i, a) in got[..40].iter().enumerate() {
        assert_eq!(a["status"], 200, "line {i}: {a}");
        assert_eq!((a["body"]["outcome"].as_str(), a["body"]["seq"].as_u64()), (Some("accepted"), Some(i as u64)));
    }
    assert_eq!(got[40], json!({"end": {"code": "closed", "answered": 40, "message": "the request body ended"}}));

    // The same lines again: Write's dedup rules, line by line.
    let (_, again) = session(&w.router, &owner, &sent[..3]).await;
    let outcomes: Vec<_> = again[..3].iter().map(|a| a["body"]["outcome"].as_str().unwrap().to_owned()).collect();
    assert_eq!(outcomes, ["duplicate"; 3]);

    let (s, page) = call(&w.router, "GET", "/v1/journals/s/records?from=0&limit=100", Some(&owner), None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(page["records"].as_array().unwrap().len(), 40);
    assert_eq!(page["records"][39], b64("r39"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_refused_at_the_door_ends_the_session_and_no_later_line_is_read() {
    let w = world().await;
    let owner = claimed(&w.router, "sess-door").await;
    let mut sent = lines(A, 0, 1);
    sent.push(json!({"leader": A, "records": [b64("no seq")]}));
    sent.extend(lines(A, 1, 5));
    let (s, got) = session(&w.router, &owner, &sent).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[0]["status"], 200);
    assert_eq!((got[1]["status"].as_u64(), got[1]["body"]["code"].as_str()), (Some(400), Some("malformed")));
    assert_eq!(got[2]["end"]["code"], "refused");
    assert_eq!(got[2]["end"]["answered"], 2);
    let (_, view) = call(&w.router, "GET", "/v1/journals/s", Some(&owner), None).await;
    assert_eq!(view["view"]["next_seq"], 1, "the lines after the refusal were never written: {view}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_superseded_writer_s_session_ends_with_refused_and_nothing_after_it_is_written() {
    let w = world().await;
    let owner = claimed(&w.router, "sess-fence").await;
    let (_, got) = session(&w.router, &owner, &lines(A, 0, 3)).await;
    assert_eq!(got.len(), 4);
    let (s, _) =
        call(&w.router, "POST", "/v1/journals/s/leader", Some(&owner), Some(json!({"new": B, "old": A}))).await;
    assert_eq!(s, StatusCode::OK);
    let (_, got) = session(&w.router, &owner, &lines(A, 3, 20)).await;
    let end = got.last().unwrap();
    assert_eq!(end["end"]["code"], "refused", "{got:?}");
    let answered = got.len() - 1;
    assert_eq!(end["end"]["answered"], answered);
    assert!((1..=20).contains(&answered));
    for a in &got[..answered] {
        assert_eq!((a["status"].as_u64(), a["body"]["code"].as_str()), (Some(409), Some("refused")), "{a}");
        assert_eq!(a["body"]["view"]["leader"], B);
    }
    let (_, view) = call(&w.router, "GET", "/v1/journals/s", Some(&owner), None).await;
    assert_eq!(view["view"]["next_seq"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_refused_whole_before_it_streams() {
    let w = world().await;
    let owner = claimed(&w.router, "sess-open").await;
    let body = body(&lines(A, 0, 1));
    let (s, _, _) =
        raw(&w.router, "POST", "/v1/journals/s/session", Some(&owner), Some("application/json"), body.clone()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "a session's body is ndjson");
    let (s, _, _) = raw(&w.router, "POST", "/v1/journals/nope/session", Some(&owner), Some(NDJSON), body.clone()).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _, _) = raw(&w.router, "POST", "/v1/journals/s/session", None, Some(NDJSON), body.clone()).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _, _) = raw(&w.router, "POST", "/v1/journals/s/session?x=1", Some(&owner), Some(NDJSON), body).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_session_with_no_line_for_the_idle_timeout_ends() {
    let config = paros_gateway::GatewayConfig { session_idle_timeout: Duration::from_millis(300), ..test_config() };
    let w = world_with(config).await;
    let owner = claimed(&w.router, "sess-idle").await;
    // One line, then a body that neither sends nor ends.
    let first = bytes::Bytes::from(body(&lines(A, 0, 1)));
    let stream = futures_util::StreamExt::chain(
        futures_util::stream::iter([Ok::<_, std::convert::Infallible>(first)]),
        futures_util::stream::pending(),
    );
    let request = Request::builder()
        .method("POST")
        .uri("/v1/journals/s/session")
        .header(header::AUTHORIZATION, format!("Bearer {owner}"))
        .header(header::CONTENT_TYPE, NDJSON)
        .body(Body::from_stream(stream))
        .unwrap();
    let started = std::time::Instant::now();
    let response = w.router.clone().oneshot(request).await.unwrap();
    let bytes = tokio::time::timeout(Duration::from_secs(10), response.into_body().collect()).await;
    let got = answers(&bytes.expect("the idle session ends").unwrap().to_bytes());
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(got.len(), 2);
    assert_eq!(got[0]["status"], 200);
    assert_eq!((got[1]["end"]["code"].as_str(), got[1]["end"]["answered"].as_u64()), (Some("idle"), Some(1)));
}

/// A new tenant `name` with journal `s`, the world's gateway served on a loopback port, and a
/// paros-client of that tenant's owner speaking to it with `config`: the URL and the client.
async fn served(
    w: &common::World,
    name: &str,
    config: paros_client::http::HttpConfig,
) -> (String, paros_client::Client<paros_client::http::HttpService>) {
    let (_, owner, _) = signup(&w.router, name).await;
    create(&w.router, &owner, "s", None).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(paros_gateway::serve(listener, w.gateway.clone()));
    let token = paros_api::Token::parse(&owner).unwrap();
    let client = paros_client::GatewayClient::new(&url, Some(&token), config).unwrap().client();
    (url, client)
}

/// paros-client's defaults: HTTP/2 to the gateway, and a Writer's pipelined batches on one
/// session (no `POST …/records` at all).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_speaks_http2_and_writes_on_one_session() {
    let w = world().await;
    // The library installs the TLS provider plain reqwest clients need.
    let (url, client) = served(&w, "sess-client", paros_client::http::HttpConfig::default()).await;
    let h2 = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
    let answer = h2.get(format!("{url}/healthz")).send().await.unwrap();
    assert_eq!((answer.status().as_u16(), answer.version()), (200, reqwest::Version::HTTP_2));
    let h1 = reqwest::Client::builder().http1_only().build().unwrap();
    let answer = h1.get(format!("{url}/healthz")).send().await.unwrap();
    assert_eq!((answer.status().as_u16(), answer.version()), (200, reqwest::Version::HTTP_11));

    let mut writer = client.writer(paros_api::JournalName::parse("s").unwrap()).claim().await.unwrap();
    let batches = (0..200u32).map(|i| vec![bytes::Bytes::from(i.to_string())]);
    let mut reports = writer.write_all(futures_util::stream::iter(batches));
    let mut next = 0;
    while let Some(written) = futures_util::StreamExt::next(&mut reports).await {
        assert_eq!(written.unwrap().seq.0, next);
        next += 1;
    }
    assert_eq!(next, 200);

    let (_, _, metrics) = raw(&w.router, "GET", "/metrics", None, None, vec![]).await;
    let metrics = String::from_utf8(metrics).unwrap();
    let count = |route: &str| -> f64 {
        let series = format!("paros_gateway_requests_total{{method=\"POST\",route=\"{route}\",status=\"200\"}} ");
        metrics.lines().find_map(|l| l.strip_prefix(series.as_str())).map_or(0.0, |v| v.parse().unwrap())
    };
    assert_eq!(count("/v1/journals/{name}/records"), 0.0, "no write went as a plain request");
    // The session is still open (no end yet); it shows once it ends: drop the client's side.
    drop(reports);
    drop(writer);
    drop(client);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let (_, _, metrics) = raw(&w.router, "GET", "/metrics", None, None, vec![]).await;
        let text = String::from_utf8(metrics).unwrap();
        if text.contains("route=\"/v1/journals/{name}/session\",status=\"200\"} 1") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "one session, ended: {text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A counter from `/metrics`, 0 when absent.
async fn counter(r: &axum::Router, name: &str) -> f64 {
    let (_, _, text) = raw(r, "GET", "/metrics", None, None, vec![]).await;
    let text = String::from_utf8(text).unwrap();
    let series = format!("{name} ");
    text.lines().find_map(|l| l.strip_prefix(series.as_str())).map_or(0.0, |v| v.parse().unwrap())
}

/// The lines of a body that arrive together travel to the cell as few Writes as the write limits
/// allow (16 records in the test config), and each is answered as its own Write would be: its own
/// positions, the view just after it. A line re-sent alone, or lines re-sent across two of those
/// Writes, are duplicates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_read_together_travel_as_one_write_and_each_is_answered_as_its_own() {
    let w = world().await;
    let owner = claimed(&w.router, "sess-merge").await;
    let (s, got) = session(&w.router, &owner, &lines(A, 0, 40)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(got.len(), 41, "{got:?}");
    for (i, a) in got[..40].iter().enumerate() {
        let b = &a["body"];
        assert_eq!((a["status"].as_u64(), b["outcome"].as_str()), (Some(200), Some("accepted")), "line {i}: {a}");
        assert_eq!((b["seq"].as_u64(), b["count"].as_u64()), (Some(i as u64), Some(1)), "line {i}: {a}");
        assert_eq!(b["view"]["next_seq"], i + 1, "the view just after line {i}: {a}");
        assert_eq!(b["view"]["leader"], A);
    }
    assert_eq!(counter(&w.router, "paros_gateway_session_lines_total").await, 40.0);
    assert_eq!(counter(&w.router, "paros_gateway_session_writes_total").await, 3.0, "16 + 16 + 8 records");

    // Retried alone: line 20 was written inside the second Write.
    let (s, a) =
        call(&w.router, "POST", "/v1/journals/s/records", Some(&owner), Some(lines(A, 20, 1)[0].clone())).await;
    assert_eq!(
        (s, a["outcome"].as_str(), a["seq"].as_u64(), a["count"].as_u64()),
        (StatusCode::OK, Some("duplicate"), Some(20), Some(1))
    );
    // Lines 15 and 16 re-sent as one batch, across the first two Writes.
    let across = json!({"leader": A, "seq": 15, "records": [b64("r15"), b64("r16")]});
    let (s, a) = call(&w.router, "POST", "/v1/journals/s/records", Some(&owner), Some(across)).await;
    assert_eq!((s, a["outcome"].as_str(), a["count"].as_u64()), (StatusCode::OK, Some("duplicate"), Some(2)), "{a}");
    let changed = json!({"leader": A, "seq": 15, "records": [b64("r15"), b64("changed")]});
    let (s, a) = call(&w.router, "POST", "/v1/journals/s/records", Some(&owner), Some(changed)).await;
    assert_eq!((s, a["code"].as_str()), (StatusCode::CONFLICT, Some("refused")), "{a}");

    // With one line a Write, as configured: as many Writes as lines.
    let one = paros_gateway::GatewayConfig { session_lines_per_write_max: 1, ..test_config() };
    let w = world_with(one).await;
    let owner = claimed(&w.router, "sess-one").await;
    let (_, got) = session(&w.router, &owner, &lines(A, 0, 10)).await;
    assert_eq!(got.len(), 11, "{got:?}");
    assert_eq!(counter(&w.router, "paros_gateway_session_writes_total").await, 10.0);
}

/// A Write of several lines that the cell does not accept whole is judged line by line, in order:
/// here the first two lines are retries of written records and the rest are new. The lines travel
/// in two Writes (16 records each at most, in the test config); the second, refused because it
/// overtook the first's lines, is judged again after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_of_lines_the_cell_refuses_whole_is_judged_line_by_line() {
    let w = world().await;
    let owner = claimed(&w.router, "sess-split").await;
    let (_, got) = session(&w.router, &owner, &lines(A, 0, 5)).await;
    assert_eq!(got.len(), 6);
    let (s, got) = session(&w.router, &owner, &lines(A, 3, 20)).await;
    assert_eq!(s, StatusCode::OK);
    let outcomes: Vec<(Option<&str>, Option<u64>)> =
        got[..got.len() - 1].iter().map(|a| (a["body"]["outcome"].as_str(), a["body"]["seq"].as_u64())).collect();
    let want: Vec<(Option<&str>, Option<u64>)> = [("duplicate", 3), ("duplicate", 4)]
        .into_iter()
        .chain((5..23).map(|i| ("accepted", i)))
        .map(|(o, s)| (Some(o), Some(s)))
        .collect();
    assert_eq!(outcomes, want, "{got:?}");
    assert_eq!(got[20]["end"]["code"], "closed");
    // The twenty lines went to the cell as two Writes first (then each alone).
    assert_eq!(counter(&w.router, "paros_gateway_session_writes_total").await, 3.0);
    let (_, view) = call(&w.router, "GET", "/v1/journals/s", Some(&owner), None).await;
    assert_eq!(view["view"]["next_seq"], 23);
}

/// A line over the tenant's requests/s quota waits for it, and the session reads no further line
/// meanwhile: every line is written, in order, at the quota's rate. A line whose wait would pass
/// `session_quota_wait_max` is answered 429 instead, which ends the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_over_the_requests_quota_waits_for_it_and_one_that_would_wait_too_long_is_refused() {
    let quotas = paros_registry::Quotas { requests_per_s: 50, ..paros_registry::Quotas::default() };
    let config = paros_gateway::GatewayConfig { quotas_default: quotas, ..test_config() };
    let w = world_with(config).await;
    let owner = claimed(&w.router, "sess-quota").await;
    let started = std::time::Instant::now();
    let (s, got) = session(&w.router, &owner, &lines(A, 0, 150)).await;
    let took = started.elapsed();
    assert_eq!(s, StatusCode::OK);
    assert_eq!(got.len(), 151, "{:?}", &got[got.len().saturating_sub(3)..]);
    for (i, a) in got[..150].iter().enumerate() {
        assert_eq!((a["status"].as_u64(), a["body"]["seq"].as_u64()), (Some(200), Some(i as u64)), "line {i}: {a}");
    }
    assert_eq!(got[150]["end"]["code"], "closed");
    // At most one second's worth (50) passes at once; the other 100 wait for the refill.
    assert!(took >= Duration::from_millis(1_500), "150 lines at 50/s took {took:?}");
    assert!(counter(&w.router, "paros_gateway_session_quota_waits_total").await >= 1.0);

    // 2 requests/s: each line past the bucket would wait 500 ms, over the bound of 300.
    let quotas = paros_registry::Quotas { requests_per_s: 2, ..paros_registry::Quotas::default() };
    let config = paros_gateway::GatewayConfig {
        quotas_default: quotas,
        session_quota_wait_max: Duration::from_millis(300),
        ..test_config()
    };
    let w = world_with(config).await;
    let owner = claimed(&w.router, "sess-quota-bound").await;
    // The claim took the bucket's two requests; wait for both to come back (the session's own
    // request takes one, its first line the other).
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (s, got) = session(&w.router, &owner, &lines(A, 0, 5)).await;
    assert_eq!(s, StatusCode::OK);
    let refused = got.iter().position(|a| a["status"] == 429).expect("a line is refused 429");
    assert!(refused >= 1, "one line passes first: {got:?}");
    let a = &got[refused];
    assert_eq!(a["body"]["code"], "over_quota", "{a}");
    assert!(a["retry_after_s"].as_u64().is_some_and(|s| s >= 1), "{a}");
    assert_eq!(got[refused + 1]["end"]["code"], "refused");
    assert_eq!(got[refused + 1]["end"]["answered"].as_u64(), Some(refused as u64 + 1));
    assert_eq!(got.len(), refused + 2, "no line is read after the refusal: {got:?}");
    tokio::time::sleep(Duration::from_millis(600)).await; // a request's worth for the view
    let (_, view) = call(&w.router, "GET", "/v1/journals/s", Some(&owner), None).await;
    assert_eq!(view["view"]["next_seq"].as_u64(), Some(refused as u64), "{view}");
}

/// The Rust client over plain requests (no session): a Write answered 429 is sent again after its
/// `Retry-After`, so a writer faster than its quota still writes every batch, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_client_waits_out_a_429_and_writes_on() {
    let quotas = paros_registry::Quotas { requests_per_s: 20, ..paros_registry::Quotas::default() };
    let w = world_with(paros_gateway::GatewayConfig { quotas_default: quotas, ..test_config() }).await;
    let config = paros_client::http::HttpConfig { sessions: false, ..paros_client::http::HttpConfig::default() };
    let (_, client) = served(&w, "plain-quota", config).await;
    let mut writer = client.writer(paros_api::JournalName::parse("s").unwrap()).claim().await.unwrap();
    for i in 0..40u64 {
        let written = writer.write(vec![bytes::Bytes::from(i.to_string())]).await.unwrap();
        assert_eq!(written.seq.0, i);
    }
    let (_, _, metrics) = raw(&w.router, "GET", "/metrics", None, None, vec![]).await;
    let metrics = String::from_utf8(metrics).unwrap();
    let series = "paros_gateway_requests_total{method=\"POST\",route=\"/v1/journals/{name}/records\",status=\"429\"} ";
    let refused: f64 = metrics.lines().find_map(|l| l.strip_prefix(series)).map_or(0.0, |v| v.parse().unwrap());
    assert!(refused >= 1.0, "40 writes at 20/s meet the quota: {refused}");
}
