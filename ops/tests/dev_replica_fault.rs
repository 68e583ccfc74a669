//! A read replica of `paros dev` killed and wiped under read load, as an operator trying
//! failures does it (`POST /v1/admin/machines/{node}/stop?wipe=true`, then `/start`): every read
//! during and after is correct, the replica's readiness (`GET /readyz/{node}`) fails until it
//! has caught up, and once ready it serves reads again.

mod common;

use std::io::{Read as _, Write as _};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use paros_api::Record;
use serde_json::{Value, json};

use common::{start_admin, stop};

const LEADER: &str = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";

/// One HTTP/1.1 exchange on its own connection: status, the `paros-served-by` header, body.
fn http(
    url: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> (u16, Option<String>, Value) {
    let host = url.strip_prefix("http://").expect("an http URL");
    let mut conn = std::net::TcpStream::connect(host).expect("the gateway listens");
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let auth = token.map(|t| format!("authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n{auth}content-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).expect("an answer");
    let (head, rest) = answer.split_once("\r\n\r\n").expect("a head");
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("a status");
    let served_by = head.lines().find_map(|l| l.strip_prefix("paros-served-by: ")).map(str::to_owned);
    let body =
        if head.to_ascii_lowercase().contains("transfer-encoding: chunked") { dechunk(rest) } else { rest.into() };
    (status, served_by, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

fn record(i: u64) -> String {
    serde_json::to_value(Record(format!("r{i}").into_bytes())).unwrap().as_str().unwrap().to_owned()
}

/// The replicas' ids, from `/metrics`.
fn replicas(url: &str) -> Vec<String> {
    let host = url.strip_prefix("http://").unwrap();
    let mut conn = std::net::TcpStream::connect(host).unwrap();
    write!(conn, "GET /metrics HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    conn.read_to_string(&mut text).unwrap();
    let mut ids: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("paros_gateway_replica_state{node=\""))
        .filter_map(|l| l.split('"').next().map(str::to_owned))
        .collect();
    ids.dedup();
    ids
}

fn ready(url: &str, node: &str) -> (u16, Value) {
    let (s, _, body) = http(url, "GET", &format!("/readyz/{node}"), None, None);
    (s, body)
}

fn wait_ready(url: &str, node: &str, within: Duration) {
    let deadline = Instant::now() + within;
    while ready(url, node).0 != 200 {
        assert!(Instant::now() < deadline, "replica {node} is ready within {within:?}: {:?}", ready(url, node));
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_replica_killed_and_wiped_under_reads_is_never_read_stale_and_serves_again_once_caught_up() {
    let dir = tempfile::tempdir().unwrap();
    // The readers read as fast as the cell answers: past the default 1,000 requests/s.
    let (dev, url, admin) = start_admin(&dir.path().join("paros-data"), &["--quota-requests-per-s", "1000000"]);
    let (s, _, signup) = http(&url, "POST", "/v1/signup", None, Some(&json!({"name": "faults"})));
    assert_eq!(s, 200, "{signup}");
    let token = signup["token"].as_str().unwrap().to_owned();
    let t = Some(token.as_str());
    assert_eq!(http(&url, "POST", "/v1/journals", t, Some(&json!({"name": "orders"}))).0, 201);
    let claim = json!({"new": LEADER, "old": null});
    assert_eq!(http(&url, "POST", "/v1/journals/orders/leader", t, Some(&claim)).0, 200);

    let ids = replicas(&url);
    assert_eq!(ids.len(), 2, "paros dev runs a tier of two replicas: {ids:?}");
    for id in &ids {
        wait_ready(&url, id, Duration::from_secs(10));
    }
    let victim = ids[0].clone();

    // The operator routes: admin only, replicas only.
    let stop_path = format!("/v1/admin/machines/{victim}/stop?wipe=true");
    assert_eq!(http(&url, "POST", &stop_path, t, None).0, 403, "a tenant token may not stop machines");
    assert_eq!(http(&url, "POST", "/v1/admin/machines/zz/stop", Some(&admin), None).0, 400, "not a node id");
    assert_eq!(http(&url, "POST", "/v1/admin/machines/1/stop", Some(&admin), None).0, 400, "not a replica");
    assert_eq!(ready(&url, "1").0, 503, "no such machine is not ready");

    // Writers and readers: every acknowledged record is counted; every read checks each record
    // it got against its position, and a linearizable read sees every record acknowledged
    // before it began.
    let acked = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let served: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (url, token, acked, done, served) =
                (url.clone(), token.clone(), Arc::clone(&acked), Arc::clone(&done), Arc::clone(&served));
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) {
                    let before = acked.load(Ordering::Acquire);
                    // A page holds at most 256 records: read from a little below what was acknowledged.
                    let from = before.saturating_sub(50);
                    let path = if r == 0 {
                        format!("/v1/journals/orders/records?from={from}&limit=256")
                    } else {
                        let min = before.saturating_sub(1);
                        format!("/v1/journals/orders/records?from={from}&limit=256&consistency=at_least&min_seq={min}")
                    };
                    let (s, by, page) = http(&url, "GET", &path, Some(&token), None);
                    if s == 503 {
                        continue; // no server could answer now: safe to retry
                    }
                    assert_eq!(s, 200, "{page}");
                    let got = page["records"].as_array().expect("records");
                    let end = from + got.len() as u64;
                    assert!(end >= before, "read {r} saw through {end}, {before} acknowledged before it began");
                    for (i, rec) in got.iter().enumerate() {
                        let at = from + i as u64;
                        assert_eq!(rec.as_str(), Some(record(at).as_str()), "position {at}");
                    }
                    served.lock().unwrap().push((Instant::now(), by.expect("a served read names its server")));
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let writer = {
        let (url, token, acked, done) = (url.clone(), token.clone(), Arc::clone(&acked), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut seq = 0u64;
            while !done.load(Ordering::Acquire) {
                let records: Vec<String> = (seq..seq + 5).map(record).collect();
                let body = json!({"leader": LEADER, "seq": seq, "records": records});
                let (s, _, answer) = http(&url, "POST", "/v1/journals/orders/records", Some(&token), Some(&body));
                assert_eq!(s, 200, "{answer}");
                seq += 5;
                acked.store(seq, Ordering::Release);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };

    std::thread::sleep(Duration::from_millis(500));
    let (s, _, body) = http(&url, "POST", &stop_path, Some(&admin), None);
    assert_eq!((s, body["state"].as_str()), (200, Some("down")), "{body}");
    let (s, body) = ready(&url, &victim);
    assert_eq!((s, body["state"].as_str(), body["ready"].as_bool()), (503, Some("down"), Some(false)));
    std::thread::sleep(Duration::from_millis(700));
    let (s, _, body) = http(&url, "POST", &format!("/v1/admin/machines/{victim}/start"), Some(&admin), None);
    assert_eq!(s, 200, "{body}");
    wait_ready(&url, &victim, Duration::from_secs(20));
    let ready_at = Instant::now();
    let deadline = ready_at + Duration::from_secs(10);
    let serves_again = || {
        served
            .lock()
            .unwrap()
            .iter()
            .any(|(at, by)| *at > ready_at && by.trim_start_matches('0') == victim.trim_start_matches('0'))
    };
    while !serves_again() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    done.store(true, Ordering::Release);
    writer.join().expect("every write is acknowledged");
    let reads: u64 = readers.into_iter().map(|r| r.join().expect("every read is correct")).sum();
    assert!(serves_again(), "the wiped replica serves reads again once caught up");
    assert!(reads > 20, "the readers read throughout: {reads}");
    assert!(acked.load(Ordering::Acquire) > 0);
    stop(dev);
}
