//! `HttpService`, `GatewayClient` and the SSE tail against a tiny fake gateway: a TCP listener
//! that speaks just enough HTTP/1.1 (one request per connection) to answer with the contract's
//! statuses and bodies, drop a connection, stall, or stream events.
#![cfg(feature = "http")]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use paros_api::{
    CreateJournalRequest, JournalName, MintTokenRequest, Scope, TailEvent, TenantName, Token, TokenId, WriterMode,
};
use paros_client::http::{GatewayClient, GatewayError, HttpConfig, HttpService, SseEvent, SseParser};
use paros_client::{
    CallReply, Client, ClientConfig, Decided, Denial, JournalService, ReadAnswer, ReadConsistency, ReadParams, Reader,
    ReaderConfig, ReaderError, ReaderOutcome, Route, Writer, WriterConfig, WriterError, Written,
};
use paros_core::journal::{JournalView, Outcome, TooLarge};
use paros_core::{Call, CallAnswer, CallId, Consistency, LeaderUuid, Seq};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

// ---------------------------------------------------------------------------------------------
// The fake gateway.

#[derive(Debug, Clone)]
struct Req {
    method: String,
    path: String,
    query: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

impl Req {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

enum Resp {
    Reply {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// Read the request, then close the socket without a byte of answer.
    Drop,
    /// Answer nothing for this long, then close.
    Stall(Duration),
    /// `200 text/event-stream`, these chunks, then close.
    Stream(Vec<String>),
}

fn reply(status: u16, body: Value) -> Resp {
    Resp::Reply { status, headers: vec![], body: body.to_string() }
}

type Handler = Arc<dyn Fn(&Req) -> Resp + Send + Sync>;

struct Fake {
    url: String,
    requests: Arc<Mutex<Vec<Req>>>,
}

impl Fake {
    fn requests(&self) -> Vec<Req> {
        self.requests.lock().unwrap().clone()
    }

    fn service(&self) -> HttpService {
        let token = Token::parse("tok.en").unwrap();
        HttpService::new(&self.url, Some(&token), quick()).unwrap()
    }

    fn gateway(&self) -> GatewayClient {
        self.service().gateway().clone()
    }
}

fn quick() -> HttpConfig {
    HttpConfig {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_millis(500),
        tail_idle_timeout: Duration::from_secs(2),
        tail_reconnects_max: 3,
        // The fake speaks HTTP/1.1, one request per connection, and has no sessions.
        http2: false,
        sessions: false,
        ..HttpConfig::default()
    }
}

async fn fake(handler: impl Fn(&Req) -> Resp + Send + Sync + 'static) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(vec![]));
    let handler: Handler = Arc::new(handler);
    let log = Arc::clone(&requests);
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else { return };
            let (handler, log) = (Arc::clone(&handler), Arc::clone(&log));
            tokio::spawn(async move { serve_one(socket, handler, log).await });
        }
    });
    Fake { url, requests }
}

async fn serve_one(mut socket: TcpStream, handler: Handler, log: Arc<Mutex<Vec<Req>>>) {
    let mut buf = Vec::new();
    let head_end = loop {
        let mut chunk = [0u8; 4096];
        let Ok(n) = socket.read(&mut chunk).await else { return };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap().split(' ');
    let method = first.next().unwrap().to_owned();
    let target = first.next().unwrap().to_owned();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let mut chunk = [0u8; 4096];
        let Ok(n) = socket.read(&mut chunk).await else { return };
        if n == 0 {
            return;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_owned(), q.to_owned()),
        None => (target.clone(), String::new()),
    };
    let req = Req { method, path, query, headers, body };
    log.lock().unwrap().push(req.clone());
    match handler(&req) {
        Resp::Reply { status, headers, body } => {
            let mut out = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n", body.len());
            if status != 204 {
                out.push_str("content-type: application/json\r\n");
            }
            for (k, v) in headers {
                out.push_str(&format!("{k}: {v}\r\n"));
            }
            out.push_str("\r\n");
            out.push_str(&body);
            let _ = socket.write_all(out.as_bytes()).await;
        }
        Resp::Drop => {}
        Resp::Stall(d) => tokio::time::sleep(d).await,
        Resp::Stream(chunks) => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            let _ = socket.write_all(head.as_bytes()).await;
            for c in chunks {
                let _ = socket.write_all(c.as_bytes()).await;
                let _ = socket.flush().await;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    let _ = socket.shutdown().await;
}

const U1: &str = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";
const U2: &str = "00000000-0000-0000-0000-000000000002";

fn view(leader: Option<&str>, first: u64, next: u64) -> Value {
    json!({"leader": leader, "first_seq": first, "next_seq": next})
}

fn journal_view(leader: Option<u128>, first: u64, next: u64) -> JournalView {
    JournalView { leader: leader.and_then(LeaderUuid::new), first_seq: Seq(first), next_seq: Seq(next) }
}

fn u1() -> LeaderUuid {
    LeaderUuid::new(0x0f8b_1c2e_4a5d_4e6f_9a0b_1c2d_3e4f_5a6b).unwrap()
}

fn j() -> JournalName {
    JournalName::parse("orders").unwrap()
}

fn write_call() -> Call {
    Call::Write { leader: Some(u1()), seq: Seq(3), records: vec![Bytes::from_static(b"hi"), Bytes::new()] }
}

fn err(status: u16, code: &str, view: Option<Value>) -> Resp {
    let mut body = json!({"code": code, "message": "m"});
    if let Some(v) = view {
        body["view"] = v;
    }
    reply(status, body)
}

async fn call_with(resp: impl Fn() -> Resp + Send + Sync + 'static, call: Call) -> (CallReply, Vec<Req>) {
    let f = fake(move |_| resp()).await;
    let reply = f.service().call(&j(), CallId(1), &call, Route::default()).await;
    (reply, f.requests())
}

// ---------------------------------------------------------------------------------------------
// The mapping of one call.

#[tokio::test]
async fn a_write_travels_as_api_md_says_and_200_accepted_is_an_accepted_verdict() {
    let (reply, reqs) = call_with(
        || reply(200, json!({"outcome": "accepted", "seq": 3, "count": 2, "view": view(Some(U1), 0, 5)})),
        write_call(),
    )
    .await;
    let view = journal_view(Some(0x0f8b_1c2e_4a5d_4e6f_9a0b_1c2d_3e4f_5a6b), 0, 5);
    assert_eq!(reply, CallReply::Answer(CallAnswer::Verdict(Outcome::Accepted { seq: Seq(3), count: 2, view })));
    let r = &reqs[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/v1/journals/orders/records"));
    assert_eq!(r.headers["authorization"], "Bearer tok.en");
    assert!(r.headers["content-type"].starts_with("application/json"));
    assert_eq!(r.json(), json!({"leader": U1, "seq": 3, "records": ["aGk=", ""]}));
}

/// A gateway without the session route: the first write asks for a session, is told the route
/// does not exist, and goes as a plain request; later writes do not ask again.
#[tokio::test]
async fn against_a_gateway_without_sessions_writes_go_as_plain_requests() {
    let f = fake(|r: &Req| {
        if r.path.ends_with("/session") {
            Resp::Reply { status: 404, headers: vec![("x-paros-no-route", "1".into())], body: String::new() }
        } else {
            reply(200, json!({"outcome": "accepted", "seq": 3, "count": 2, "view": view(Some(U1), 0, 5)}))
        }
    })
    .await;
    let token = Token::parse("tok.en").unwrap();
    let service = HttpService::new(&f.url, Some(&token), HttpConfig { sessions: true, ..quick() }).unwrap();
    for _ in 0..2 {
        let reply = service.call(&j(), CallId(1), &write_call(), Route::default()).await;
        assert!(matches!(reply, CallReply::Answer(CallAnswer::Verdict(Outcome::Accepted { .. }))), "{reply:?}");
    }
    let paths: Vec<String> = f.requests().into_iter().map(|r| r.path).collect();
    let want = ["/v1/journals/orders/session", "/v1/journals/orders/records", "/v1/journals/orders/records"];
    assert_eq!(paths, want);
}

#[tokio::test]
async fn a_multi_writer_write_sends_records_only() {
    let call = Call::Write { leader: None, seq: Seq(0), records: vec![Bytes::from_static(b"x")] };
    let (reply, reqs) = call_with(
        || reply(200, json!({"outcome": "duplicate", "seq": 9, "count": 1, "view": view(None, 0, 10)})),
        call,
    )
    .await;
    let view = journal_view(None, 0, 10);
    assert_eq!(reply, CallReply::Answer(CallAnswer::Verdict(Outcome::Duplicate { seq: Seq(9), count: 1, view })));
    assert_eq!(reqs[0].json(), json!({"records": ["eA=="]}));
}

#[tokio::test]
async fn a_409_refusal_carries_its_view_into_the_core_verdict() {
    let (reply, _) = call_with(|| err(409, "refused", Some(view(Some(U2), 1, 7))), write_call()).await;
    assert_eq!(reply, CallReply::Answer(CallAnswer::Verdict(Outcome::Refused(journal_view(Some(2), 1, 7)))));
}

#[tokio::test]
async fn a_410_is_a_truncated_verdict() {
    let (reply, _) = call_with(|| err(410, "truncated", Some(view(Some(U1), 8, 9))), write_call()).await;
    assert_eq!(reply, CallReply::Answer(CallAnswer::Verdict(Outcome::Truncated(journal_view(Some(u1().get()), 8, 9)))));
}

#[tokio::test]
async fn a_413_is_too_large_with_the_limits() {
    let body = json!({
        "code": "too_large",
        "message": "m",
        "max_records": 1024,
        "max_bytes": 1_048_576,
        "max_body_bytes": 4_000_000
    });
    let (reply, _) = call_with(move || reply(413, body.clone()), write_call()).await;
    assert_eq!(reply, CallReply::Answer(CallAnswer::TooLarge(TooLarge { max_records: 1024, max_bytes: 1 << 20 })));
}

#[tokio::test]
async fn a_404_unknown_journal_is_unknown_journal() {
    let (reply, _) = call_with(|| err(404, "unknown_journal", None), write_call()).await;
    assert_eq!(reply, CallReply::UnknownJournal);
}

#[tokio::test]
async fn a_503_is_busy_nothing_was_done() {
    let (reply, _) = call_with(|| err(503, "unavailable", None), write_call()).await;
    assert_eq!(reply, CallReply::Answer(CallAnswer::Busy));
}

#[tokio::test]
async fn a_504_is_no_answer() {
    let (reply, _) = call_with(|| err(504, "ambiguous", None), write_call()).await;
    assert_eq!(reply, CallReply::NoAnswer);
}

#[tokio::test]
async fn a_proxy_502_page_is_no_answer_and_a_proxy_503_page_is_busy() {
    let page = |status| move || Resp::Reply { status, headers: vec![], body: "<html>bad gateway</html>".into() };
    assert_eq!(call_with(page(502), write_call()).await.0, CallReply::NoAnswer);
    assert_eq!(call_with(page(503), write_call()).await.0, CallReply::Answer(CallAnswer::Busy));
}

#[tokio::test]
async fn unauthorized_forbidden_and_over_quota_are_denied_with_their_codes() {
    assert_eq!(
        call_with(|| err(401, "unauthorized", None), write_call()).await.0,
        CallReply::Denied(Denial::new(401, "unauthorized", "m"))
    );
    assert_eq!(
        call_with(|| err(403, "forbidden", None), write_call()).await.0,
        CallReply::Denied(Denial::new(403, "forbidden", "m"))
    );
    let quota = || Resp::Reply {
        status: 429,
        headers: vec![("retry-after", "7".into())],
        body: json!({"code": "over_quota", "message": "m"}).to_string(),
    };
    assert_eq!(
        call_with(quota, write_call()).await.0,
        CallReply::Denied(Denial { retry_after_s: Some(7), ..Denial::new(429, "over_quota", "m") })
    );
}

#[tokio::test]
async fn a_dropped_connection_after_sending_is_no_answer() {
    let (reply, reqs) = call_with(|| Resp::Drop, write_call()).await;
    assert_eq!(reply, CallReply::NoAnswer);
    assert_eq!(reqs.len(), 1, "the request reached the gateway");
}

#[tokio::test]
async fn a_gateway_that_does_not_answer_in_time_is_no_answer() {
    let (reply, _) = call_with(|| Resp::Stall(Duration::from_secs(3)), write_call()).await;
    assert_eq!(reply, CallReply::NoAnswer);
}

#[tokio::test]
async fn a_refused_connection_is_not_sent() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let service = HttpService::new(&url, None, quick()).unwrap();
    assert_eq!(service.call(&j(), CallId(1), &write_call(), Route::default()).await, CallReply::NotSent);
    assert_eq!(
        service.read(&j(), read_params(0, Consistency::Linearizable), Route::default()).await,
        ReadAnswer::Unserved { applied_to: None }
    );
}

#[tokio::test]
async fn set_leader_and_truncate_travel_as_api_md_says() {
    let (reply, reqs) = call_with(
        || reply(200, json!({"outcome": "won", "view": view(Some(U1), 0, 0)})),
        Call::SetLeader { new: u1(), old: None },
    )
    .await;
    assert_eq!(reply, CallReply::Answer(CallAnswer::Verdict(Outcome::Won(journal_view(Some(u1().get()), 0, 0)))));
    assert_eq!(reqs[0].path, "/v1/journals/orders/leader");
    assert_eq!(reqs[0].json(), json!({"new": U1, "old": null}));

    let (reply, _) =
        call_with(|| err(409, "lost", Some(view(Some(U2), 0, 0))), Call::SetLeader { new: u1(), old: None }).await;
    assert_eq!(reply, CallReply::Answer(CallAnswer::Verdict(Outcome::Lost(journal_view(Some(2), 0, 0)))));

    let (reply, reqs) = call_with(
        || err(409, "truncate_refused", Some(view(Some(U2), 0, 4))),
        Call::Truncate { leader: Some(u1()), up_to: Seq(2) },
    )
    .await;
    assert_eq!(reply, CallReply::Answer(CallAnswer::Verdict(Outcome::TruncateRefused(journal_view(Some(2), 0, 4)))));
    assert_eq!(reqs[0].path, "/v1/journals/orders/truncate");
    assert_eq!(reqs[0].json(), json!({"leader": U1, "up_to": 2}));
}

#[tokio::test]
async fn a_409_without_its_view_breaks_the_contract_and_is_denied() {
    let (reply, _) = call_with(|| err(409, "refused", None), write_call()).await;
    assert!(matches!(reply, CallReply::Denied(Denial { status: 409, code: "contract", .. })), "{reply:?}");
}

// ---------------------------------------------------------------------------------------------
// Reads.

fn read_params(from: u64, consistency: Consistency) -> ReadParams {
    ReadParams { from: Seq(from), limit: 10, max_bytes: 100, wait_ms: 250, consistency }
}

#[tokio::test]
async fn a_read_sends_its_query_and_maps_the_page() {
    let f = fake(|_| reply(200, json!({"from": 2, "records": ["aGk="], "view": view(None, 0, 3)}))).await;
    let answer = f.service().read(&j(), read_params(2, Consistency::Reached(Seq(3))), Route::default()).await;
    assert_eq!(
        answer,
        ReadAnswer::Page { from: Seq(2), records: vec![Bytes::from_static(b"hi")], view: journal_view(None, 0, 3) }
    );
    let r = &f.requests()[0];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("GET", "/v1/journals/orders/records"));
    // core's AtLeast(3) is `next_seq ≥ 3`, the contract's min_seq=2 is `next_seq > 2`.
    assert_eq!(r.query, "from=2&limit=10&max_bytes=100&wait_ms=250&min_seq=2");
}

#[tokio::test]
async fn a_gateway_read_names_the_server_that_answered_when_the_gateway_does() {
    let f = fake(|r| {
        let body = json!({"from": 0, "records": ["aGk="], "view": view(None, 0, 1)}).to_string();
        let headers =
            if r.query.contains("min_seq") { vec![("paros-served-by", "00c0ffee00c0ffee".to_owned())] } else { vec![] };
        Resp::Reply { status: 200, headers, body }
    })
    .await;
    let g = f.gateway();
    let at_least = paros_api::ReadQuery {
        consistency: paros_api::Consistency::AtLeast { min_seq: Seq(0) },
        ..paros_api::ReadQuery::from(Seq(0))
    };
    let (outcome, by) = g.read_served(&j(), &at_least).await.expect("a page");
    assert!(matches!(outcome, paros_api::ReadOutcome::Page(_)), "{outcome:?}");
    assert_eq!(by.as_deref(), Some("00c0ffee00c0ffee"), "the paros-served-by header, as it came");
    let (_, by) = g.read_served(&j(), &paros_api::ReadQuery::from(Seq(0))).await.expect("a page");
    assert_eq!(by, None, "an answer without the header names no server");
}

#[tokio::test]
async fn a_linearizable_read_with_server_defaults_sends_from_alone() {
    let f = fake(|_| reply(200, json!({"from": 0, "records": [], "view": view(None, 0, 0)}))).await;
    let params =
        ReadParams { from: Seq(0), limit: 0, max_bytes: 0, wait_ms: 5000, consistency: Consistency::Reached(Seq(0)) };
    f.service().read(&j(), params, Route::default()).await;
    assert_eq!(f.requests()[0].query, "from=0&wait_ms=1000", "zero limits are the server's, wait_ms is capped at 1000");
}

#[tokio::test]
async fn read_answers_410_503_504_404_and_401_map_to_the_readers_answers() {
    let cases: Vec<(Resp, ReadAnswer)> = vec![
        (err(410, "truncated", Some(view(None, 5, 9))), ReadAnswer::Truncated { view: journal_view(None, 5, 9) }),
        (err(503, "unavailable", None), ReadAnswer::Unserved { applied_to: None }),
        (
            reply(503, json!({"code": "unavailable", "message": "m", "applied_to": 6})),
            ReadAnswer::Unserved { applied_to: Some(Seq(6)) },
        ),
        (err(504, "ambiguous", None), ReadAnswer::Unserved { applied_to: None }),
        (err(404, "unknown_journal", None), ReadAnswer::UnknownJournal),
        (err(401, "unauthorized", None), ReadAnswer::Denied(Denial::new(401, "unauthorized", "m"))),
        (Resp::Drop, ReadAnswer::Unserved { applied_to: None }),
    ];
    for (resp, want) in cases {
        let resp = Mutex::new(Some(resp));
        let f = fake(move |_| resp.lock().unwrap().take().unwrap_or_else(|| err(500, "malformed", None))).await;
        let got = f.service().read(&j(), read_params(0, Consistency::Linearizable), Route::default()).await;
        assert_eq!(got, want);
    }
}

// ---------------------------------------------------------------------------------------------
// The policy over HTTP.

fn client(service: HttpService) -> Client<HttpService> {
    let config = ClientConfig {
        backoff_base: Duration::from_millis(1),
        backoff_max: Duration::from_millis(5),
        ..ClientConfig::default()
    };
    Client::with_seed(service, config, 7).unwrap()
}

#[tokio::test]
async fn the_client_ends_a_call_at_once_on_a_denial() {
    let f = fake(|_| err(401, "unauthorized", None)).await;
    let decided = client(f.service()).call(&j(), write_call()).await;
    assert_eq!(decided, Ok(Decided::Denied { denial: Denial::new(401, "unauthorized", "m"), ambiguous: false }));
    assert_eq!(f.requests().len(), 1, "a denial is not retried");
}

#[tokio::test]
async fn the_client_retries_503_and_504_identically_until_a_verdict() {
    let n = AtomicU32::new(0);
    let f = fake(move |_| match n.fetch_add(1, Ordering::SeqCst) {
        0 => err(503, "unavailable", None),
        1 => err(504, "ambiguous", None),
        _ => reply(200, json!({"outcome": "duplicate", "seq": 3, "count": 2, "view": view(Some(U1), 0, 5)})),
    })
    .await;
    let decided = client(f.service()).call(&j(), write_call()).await;
    let view = journal_view(Some(0x0f8b_1c2e_4a5d_4e6f_9a0b_1c2d_3e4f_5a6b), 0, 5);
    assert_eq!(decided, Ok(Decided::Verdict(Outcome::Duplicate { seq: Seq(3), count: 2, view })));
    let reqs = f.requests();
    assert_eq!(reqs.len(), 3);
    assert!(reqs.iter().all(|r| r.body == reqs[0].body), "every retry is the identical request");
}

#[tokio::test]
async fn a_denial_after_an_unanswered_attempt_says_the_call_may_have_taken_effect() {
    let n = AtomicU32::new(0);
    let f = fake(move |_| match n.fetch_add(1, Ordering::SeqCst) {
        0 => Resp::Drop,
        _ => err(429, "over_quota", None),
    })
    .await;
    let decided = client(f.service()).call(&j(), write_call()).await;
    assert!(matches!(decided, Ok(Decided::Denied { ambiguous: true, .. })), "{decided:?}");
}

// ---------------------------------------------------------------------------------------------
// A fake that behaves like a single-writer journal, for the Writer and the Reader.

#[derive(Default)]
struct Journal {
    leader: Option<String>,
    first: u64,
    /// Every record ever written, by position (trimmed ones stay here, unread).
    records: Vec<String>,
}

impl Journal {
    fn view(&self) -> Value {
        view(self.leader.as_deref(), self.first, self.records.len() as u64)
    }

    fn handle(&mut self, r: &Req) -> Resp {
        let next = self.records.len() as u64;
        match (r.method.as_str(), r.path.rsplit('/').next().unwrap_or("")) {
            ("GET", "records") => {
                let q: HashMap<&str, u64> = r
                    .query
                    .split('&')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k, v.parse().unwrap()))
                    .collect();
                let from = q["from"];
                if from < self.first {
                    return err(410, "truncated", Some(self.view()));
                }
                let end = next.min(from + q.get("limit").copied().unwrap_or(100));
                let page: Vec<&String> = self.records.get(from as usize..end as usize).unwrap_or(&[]).iter().collect();
                reply(200, json!({"from": from, "records": page, "view": self.view()}))
            }
            ("POST", "leader") => {
                let b = r.json();
                if b["old"].as_str() == self.leader.as_deref() {
                    self.leader = b["new"].as_str().map(str::to_owned);
                    reply(200, json!({"outcome": "won", "view": self.view()}))
                } else {
                    err(409, "lost", Some(self.view()))
                }
            }
            ("POST", "records") => {
                let b = r.json();
                let records: Vec<String> =
                    b["records"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect();
                let seq = b["seq"].as_u64().unwrap();
                if b["leader"].as_str() != self.leader.as_deref() || seq != next || records.is_empty() {
                    return err(409, "refused", Some(self.view()));
                }
                let count = records.len();
                self.records.extend(records);
                reply(200, json!({"outcome": "accepted", "seq": seq, "count": count, "view": self.view()}))
            }
            ("POST", "truncate") => {
                let b = r.json();
                if b["leader"].as_str() != self.leader.as_deref() {
                    return err(409, "truncate_refused", Some(self.view()));
                }
                self.first = self.first.max(b["up_to"].as_u64().unwrap().min(next));
                reply(200, json!({"outcome": "trimmed", "view": self.view()}))
            }
            _ => err(404, "unknown_journal", None),
        }
    }
}

async fn journal_fake() -> Fake {
    let journal = Mutex::new(Journal::default());
    fake(move |r| journal.lock().unwrap().handle(r)).await
}

fn batch(tag: &str, n: usize) -> Vec<Bytes> {
    (0..n).map(|i| Bytes::from(format!("{tag}{i}"))).collect()
}

#[tokio::test]
async fn a_writer_claims_writes_and_truncates_over_http_and_a_reader_reports_the_gap() {
    let f = journal_fake().await;
    let c = client(f.service());
    let mut writer = Writer::with_seed(c.clone(), j(), WriterConfig::default(), 5).unwrap();
    let claimed = writer.claim().await.expect("claims a new journal");
    assert_eq!(claimed.next_seq, Seq(0));
    assert_eq!(writer.write(batch("a", 3)).await, Ok(Written { seq: Seq(0), count: 3 }));
    assert_eq!(writer.write(batch("b", 2)).await, Ok(Written { seq: Seq(3), count: 2 }));

    let mut reader =
        Reader::new(c.clone(), j(), Seq(0), ReaderConfig::default(), ReadConsistency::Linearizable, 0).unwrap();
    match reader.next().await.unwrap() {
        ReaderOutcome::Records { from, records, .. } => {
            assert_eq!(from, Seq(0));
            assert_eq!(records, [batch("a", 3), batch("b", 2)].concat());
        }
        other => panic!("{other:?}"),
    }

    let trimmed = writer.truncate(Seq(4)).await.expect("trims");
    assert_eq!(trimmed.first_seq, Seq(4));
    let mut late =
        Reader::new(c.clone(), j(), Seq(1), ReaderConfig::default(), ReadConsistency::Linearizable, 0).unwrap();
    assert!(matches!(late.next().await.unwrap(), ReaderOutcome::Gap { from: Seq(1), resumed_at: Seq(4), .. }));
    match late.next().await.unwrap() {
        ReaderOutcome::Records { from, records, .. } => assert_eq!((from, records), (Seq(4), vec![Bytes::from("b1")])),
        other => panic!("{other:?}"),
    }
    let mut following =
        Reader::new(c.clone(), j(), Seq(1), ReaderConfig::default(), ReadConsistency::Linearizable, 0).unwrap();
    assert!(matches!(following.follow().await.unwrap(), ReaderOutcome::Gap { from: Seq(1), resumed_at: Seq(4), .. }));
    match following.follow().await.unwrap() {
        ReaderOutcome::Records { from, records, .. } => assert_eq!((from, records), (Seq(4), vec![Bytes::from("b1")])),
        other => panic!("{other:?}"),
    }

    // A second writer claims: the first one is fenced.
    let mut usurper = Writer::with_seed(c, j(), WriterConfig::default(), 6).unwrap();
    usurper.claim().await.expect("claims from the first writer");
    assert!(matches!(writer.write(batch("c", 1)).await, Err(WriterError::Superseded { .. })));
}

#[tokio::test]
async fn a_reader_denied_by_the_gateway_stops_with_a_typed_error() {
    let f = fake(|_| err(403, "forbidden", None)).await;
    let mut reader =
        Reader::new(client(f.service()), j(), Seq(0), ReaderConfig::default(), ReadConsistency::Linearizable, 0)
            .unwrap();
    assert_eq!(reader.next().await, Err(ReaderError::Denied(Denial::new(403, "forbidden", "m"))));
}

/// A bad token is one refusal whichever part of the library meets it: the writer's claim, the
/// reader and the gateway client each report the same `Denial`, with the gateway's message,
/// and its text reads as a sentence.
#[tokio::test]
async fn a_bad_token_is_the_same_denial_to_the_writer_the_reader_and_the_gateway_client() {
    let f =
        fake(|_| reply(401, json!({"code": "unauthorized", "message": "the token's signature does not verify"}))).await;
    let want = Denial::new(401, "unauthorized", "the token's signature does not verify");
    let c = client(f.service());
    let mut writer = Writer::with_seed(c.clone(), j(), WriterConfig::default(), 1).unwrap();
    let claimed = writer.claim().await.expect_err("a bad token claims nothing");
    assert_eq!(claimed.denial(), Some(&want), "{claimed:?}");
    let mut reader = Reader::new(c, j(), Seq(0), ReaderConfig::default(), ReadConsistency::Linearizable, 0).unwrap();
    let read = reader.next().await.expect_err("a bad token reads nothing");
    assert_eq!(read.denial(), Some(&want), "{read:?}");
    let listed = f.gateway().list_journals().await.expect_err("a bad token lists nothing");
    assert_eq!(listed.denial(), Some(&want), "{listed:?}");
    assert_eq!(listed.code(), Some(paros_api::ErrorCode::Unauthorized));
    for text in [claimed.to_string(), listed.to_string()] {
        assert!(text.contains("unauthorized: the token's signature does not verify (HTTP 401)"), "{text}");
        assert!(!text.contains('{') && !text.contains("Some("), "{text}");
    }
}

// ---------------------------------------------------------------------------------------------
// The other routes.

#[tokio::test]
async fn the_admin_routes_travel_as_api_md_says() {
    let f = fake(|r| match (r.method.as_str(), r.path.as_str()) {
        ("POST", "/v1/signup") => reply(
            200,
            json!({
                "tenant": "t-1",
                "name": "acme",
                "token": "jwt.a.b",
                "token_id": "jti-1",
                "expires_at": 1_900_000_000u64
            }),
        ),
        ("POST", "/v1/tokens") => {
            reply(200, json!({"token": "jwt.c.d", "token_id": "jti-2", "expires_at": 1_800_000_000u64}))
        }
        ("DELETE", "/v1/tokens/jti%2F2") => Resp::Reply { status: 204, headers: vec![], body: String::new() },
        ("POST", "/v1/journals") => {
            reply(201, json!({"name": "orders", "mode": "multi_writer", "view": view(None, 0, 0)}))
        }
        ("GET", "/v1/journals") => {
            reply(200, json!({"journals": [{"name": "orders", "mode": "single_writer", "view": view(None, 0, 0)}]}))
        }
        ("GET", "/v1/journals/orders") => {
            reply(200, json!({"name": "orders", "mode": "single_writer", "view": view(Some(U1), 2, 5)}))
        }
        ("DELETE", "/v1/journals/orders") => Resp::Reply { status: 204, headers: vec![], body: String::new() },
        _ => err(404, "unknown_journal", None),
    })
    .await;
    let g = f.gateway();
    let s = g.signup(&TenantName::parse("acme").unwrap()).await.unwrap();
    let a = &s.answer;
    assert_eq!((a.token.as_str(), a.token_id.as_str(), a.expires_at), ("jwt.a.b", "jti-1", 1_900_000_000));
    // The signed-up client speaks as the new owner.
    let mint = MintTokenRequest { scope: Scope::Read, journal: Some(j()), expires_in_s: std::num::NonZeroU64::new(60) };
    assert_eq!(s.client.mint_token(&mint).await.unwrap().token_id.as_str(), "jti-2");
    g.revoke_token(&TokenId::parse("jti/2").unwrap()).await.expect("the id is one path segment");
    let created = g
        .create_journal(&CreateJournalRequest { name: j(), mode: Some(WriterMode::MultiWriter), tier: None })
        .await
        .unwrap();
    assert_eq!(created.mode, WriterMode::MultiWriter);
    assert_eq!(g.list_journals().await.unwrap().journals.len(), 1);
    assert_eq!(g.show_journal(&j()).await.unwrap().view.first_seq, Seq(2));
    g.delete_journal(&j()).await.unwrap();
    let e = g.show_journal(&JournalName::parse("gone").unwrap()).await.unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(404), Some(paros_api::ErrorCode::UnknownJournal)));

    let reqs = f.requests();
    assert_eq!(reqs[0].json(), json!({"name": "acme"}));
    assert_eq!(reqs[1].json(), json!({"scope": "read", "journal": "orders", "expires_in_s": 60}));
    assert_eq!(reqs[1].headers.get("authorization").map(String::as_str), Some("Bearer jwt.a.b"));
    assert_eq!(reqs[2].headers.get("authorization").map(String::as_str), Some("Bearer tok.en"), "g keeps its token");
    assert_eq!(reqs[3].json(), json!({"name": "orders", "mode": "multi_writer"}));
    // A bare name makes a single-writer journal: the body names no mode.
    g.create_journal(j()).await.unwrap();
    assert_eq!(f.requests().last().unwrap().json(), json!({"name": "orders"}));
}

/// A call of the gateway client's own answered 429 is sent again, identically, after its
/// `Retry-After`, while the waits fit `over_quota_wait_max`; past it the 429 is the answer.
#[tokio::test]
async fn the_gateway_clients_own_calls_wait_out_a_429_within_their_bound() {
    let answered = Arc::new(Mutex::new(0u32));
    let count = Arc::clone(&answered);
    let f = fake(move |r| {
        let mut n = count.lock().unwrap();
        *n += 1;
        match (r.method.as_str(), *n) {
            ("POST", 1) => Resp::Reply {
                status: 429,
                headers: vec![("retry-after", "1".into())],
                body: json!({"code": "over_quota", "message": "requests/s"}).to_string(),
            },
            ("POST", _) => reply(201, json!({"name": "orders", "mode": "single_writer", "view": view(None, 0, 0)})),
            _ => err(404, "unknown_journal", None),
        }
    })
    .await;
    let started = std::time::Instant::now();
    let created = f.gateway().create_journal(j()).await.expect("created once the quota allows");
    assert_eq!(created.name, j());
    assert!(started.elapsed() >= Duration::from_secs(1), "waited the Retry-After: {:?}", started.elapsed());
    let reqs = f.requests();
    assert_eq!(reqs.len(), 2, "sent twice");
    assert_eq!((reqs[0].json(), reqs[0].path.as_str()), (reqs[1].json(), reqs[1].path.as_str()), "identically");

    // A bound shorter than the Retry-After: the 429 is the answer, after one request.
    *answered.lock().unwrap() = 0;
    let token = Token::parse("tok.en").unwrap();
    let config = HttpConfig { over_quota_wait_max: Duration::from_millis(500), ..quick() };
    let g = GatewayClient::new(&f.url, Some(&token), config).unwrap();
    let e = g.create_journal(j()).await.expect_err("over quota");
    assert_eq!((e.status(), e.code()), (Some(429), Some(paros_api::ErrorCode::OverQuota)));
    assert_eq!(e.denial().and_then(|d| d.retry_after_s), Some(1));
    assert_eq!(f.requests().len(), 3, "one more request, not sent again");
}

#[tokio::test]
async fn a_gateway_url_with_a_path_prefix_keeps_it() {
    let f = fake(|_| reply(200, json!({"journals": []}))).await;
    let g = GatewayClient::new(&format!("{}/paros/", f.url), None, quick()).unwrap();
    g.list_journals().await.unwrap();
    assert_eq!(f.requests()[0].path, "/paros/v1/journals");
    assert!(!f.requests()[0].headers.contains_key("authorization"), "no token, no header");
    assert!(matches!(GatewayClient::new("ftp://x", None, quick()), Err(GatewayError::Url { .. })));
}

// ---------------------------------------------------------------------------------------------
// SSE.

#[test]
fn the_sse_parser_joins_split_chunks_and_follows_the_line_rules() {
    let mut p = SseParser::default();
    let stream = b": hello\r\nevent: records\r\nid: 3\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n\
        event: heartbeat\rdata: x\r\rdata: y\n\n";
    let mut events = vec![];
    for chunk in stream.chunks(3) {
        events.extend(p.push(chunk));
    }
    assert_eq!(
        events,
        vec![
            SseEvent { event: "records".into(), id: Some("3".into()), data: "{\"a\":\n1}".into() },
            SseEvent { event: "heartbeat".into(), id: Some("3".into()), data: "x".into() },
            SseEvent { event: "message".into(), id: Some("3".into()), data: "y".into() },
        ]
    );
}

#[test]
fn an_event_without_data_is_not_dispatched() {
    let mut p = SseParser::default();
    assert!(p.push(b"event: gap\nid: 4\n\n").is_empty());
}

fn frame(event: &str, id: u64, data: Value) -> String {
    format!("event: {event}\nid: {id}\ndata: {data}\n\n")
}

#[tokio::test]
async fn a_tail_yields_records_gaps_and_heartbeats_and_resumes_with_last_event_id() {
    let n = AtomicU32::new(0);
    let f = fake(move |_| match n.fetch_add(1, Ordering::SeqCst) {
        0 => Resp::Stream(vec![
            frame("records", 2, json!({"from": 0, "records": ["YQ==", "Yg=="], "view": view(None, 0, 2)})),
            // A frame cut in two chunks.
            "event: heartbeat\nid: 2\n".into(),
            format!("data: {}\n\n", json!({"view": view(None, 0, 2), "caught_up": true})),
        ]),
        // Over the quota while reopening: waited out, then opened.
        1 => Resp::Reply {
            status: 429,
            headers: vec![("retry-after", "1".into())],
            body: json!({"code": "over_quota", "message": "m"}).to_string(),
        },
        2 => Resp::Stream(vec![frame("gap", 7, json!({"from": 2, "resumed_at": 7, "view": view(None, 7, 9)}))]),
        _ => err(401, "unauthorized", None),
    })
    .await;
    let mut tail = f.gateway().tail(&j(), Some(Seq(0))).await.unwrap();
    let first = tail.next().await.unwrap();
    assert_eq!(first.id, Seq(2));
    assert!(matches!(&first.event, TailEvent::Records(p) if p.records.len() == 2));
    assert!(matches!(tail.next().await.unwrap().event, TailEvent::Heartbeat(h) if h.caught_up));
    // The stream closes; the tail reconnects from the last id, after the 429's Retry-After.
    let reopening = std::time::Instant::now();
    let gap = tail.next().await.unwrap();
    assert!(reopening.elapsed() >= Duration::from_secs(1), "{:?}", reopening.elapsed());
    assert!(matches!(gap.event, TailEvent::Gap(g) if g.resumed_at == Seq(7)));
    assert_eq!(tail.last_event_id(), Some(Seq(7)));
    // A refusal while reconnecting ends the tail.
    let e = tail.next().await.unwrap_err();
    assert_eq!(e.status(), Some(401));

    let reqs = f.requests();
    assert_eq!(reqs[0].path, "/v1/journals/orders/tail");
    assert_eq!(reqs[0].query, "from=0");
    assert_eq!(reqs[0].headers.get("accept").map(String::as_str), Some("text/event-stream"));
    assert!(!reqs[0].headers.contains_key("last-event-id"));
    assert_eq!(reqs[1].headers.get("last-event-id").map(String::as_str), Some("2"));
    assert_eq!(reqs[2].headers.get("last-event-id").map(String::as_str), Some("2"));
    assert_eq!(reqs[3].headers.get("last-event-id").map(String::as_str), Some("7"));
}
