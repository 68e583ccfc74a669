//! The tenant verbs as a process: `paros` against a tiny fake gateway (std threads, one request
//! per connection), checking stdout and the exit codes.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

type Handler = dyn Fn(&str, &str, &str) -> (u16, String) + Send + Sync;

/// Serves `handler(method, target, body) -> (status, body)`; returns the URL and the log of
/// `method target body` lines.
fn gateway(handler: Box<Handler>) -> (String, Arc<Mutex<Vec<String>>>) {
    gateway_with(handler, "")
}

/// As [`gateway`], every answer carrying the header lines `extra` (each ending in `\r\n`).
fn gateway_with(handler: Box<Handler>, extra: &'static str) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let log = Arc::new(Mutex::new(vec![]));
    let seen = Arc::clone(&log);
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let Ok(mut s) = socket else { return };
            let mut buf = vec![];
            let mut chunk = [0u8; 4096];
            let head_end = loop {
                let n = s.read(&mut chunk).unwrap_or(0);
                if n == 0 {
                    break None;
                }
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break Some(i);
                }
            };
            let Some(head_end) = head_end else { continue };
            let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
            let len: usize = head
                .lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse().ok())
                .unwrap_or(0);
            let mut body = buf[head_end + 4..].to_vec();
            while body.len() < len {
                let n = s.read(&mut chunk).unwrap_or(0);
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
            let mut first = head.lines().next().unwrap_or("").split(' ');
            let (method, target) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
            let body = String::from_utf8_lossy(&body).to_string();
            seen.lock().unwrap().push(format!("{method} {target} {body}"));
            let (status, answer) = handler(method, target, &body);
            let out = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 {extra}connection: close\r\n\r\n{answer}",
                answer.len()
            );
            let _ = s.write_all(out.as_bytes());
        }
    });
    (url, log)
}

fn paros(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_paros"))
        .args(args)
        .env("PAROS_URL", url)
        .env("PAROS_TOKEN", "tok.en")
        // The fake gateway speaks HTTP/1.1, one request per connection, and has no sessions.
        .env("PAROS_HTTP1", "1")
        .output()
        .expect("runs paros")
}

const U: &str = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";

#[test]
fn journal_create_prints_the_journal_and_exits_0() {
    let (url, log) = gateway(Box::new(|_, _, _| {
        (201, r#"{"name":"orders","mode":"multi_writer","view":{"leader":null,"first_seq":0,"next_seq":0}}"#.into())
    }));
    let out = paros(&url, &["journal", "create", "orders", "--mode", "multi_writer"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "orders multi_writer leader - first_seq 0 next_seq 0\n");
    assert_eq!(log.lock().unwrap()[0], r#"POST /v1/journals {"name":"orders","mode":"multi_writer"}"#);
}

#[test]
fn journal_create_on_a_tier_sends_it_and_prints_it() {
    let (url, log) = gateway(Box::new(|_, _, _| {
        let view = r#"{"leader":null,"first_seq":0,"next_seq":0}"#;
        (201, format!(r#"{{"name":"orders","mode":"single_writer","view":{view},"tier":"gold"}}"#))
    }));
    let out = paros(&url, &["journal", "create", "orders", "--tier", "gold"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "orders single_writer leader - first_seq 0 next_seq 0 tier gold\n"
    );
    assert_eq!(log.lock().unwrap()[0], r#"POST /v1/journals {"name":"orders","mode":"single_writer","tier":"gold"}"#);
    let bad = paros(&url, &["journal", "create", "orders", "--tier", "Gold"]);
    assert_eq!(bad.status.code(), Some(2), "a bad tier name is a usage error");
    assert_eq!(log.lock().unwrap().len(), 1, "and sends nothing");
}

#[test]
fn write_with_a_leader_in_force_writes_at_the_tail() {
    let (url, log) = gateway(Box::new(|method, target, _| match (method, target) {
        ("GET", "/v1/journals/orders") => (
            200,
            format!(
                r#"{{"name":"orders","mode":"single_writer","view":{{"leader":"{U}","first_seq":0,"next_seq":4}}}}"#
            ),
        ),
        ("POST", "/v1/journals/orders/records") => (
            200,
            format!(
                r#"{{"outcome":"accepted","seq":4,"count":2,"view":{{"leader":"{U}","first_seq":0,"next_seq":6}}}}"#
            ),
        ),
        _ => (404, r#"{"code":"unknown_journal","message":"m"}"#.into()),
    }));
    let out = paros(&url, &["write", "orders", "a", "b", "--leader", U, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, serde_json::json!({"leader": U, "seq": 4, "count": 2, "next_seq": 6}));
    assert_eq!(
        log.lock().unwrap()[1],
        format!(r#"POST /v1/journals/orders/records {{"leader":"{U}","seq":4,"records":["YQ==","Yg=="]}}"#)
    );
}

#[test]
fn a_lost_set_leader_exits_3_and_an_unauthorized_token_exits_6() {
    let (url, _) = gateway(Box::new(|_, target, _| match target {
        "/v1/journals/orders/leader" => {
            (409, format!(r#"{{"code":"lost","message":"m","view":{{"leader":"{U}","first_seq":0,"next_seq":0}}}}"#))
        }
        _ => (401, r#"{"code":"unauthorized","message":"expired"}"#.into()),
    }));
    let out = paros(&url, &["set-leader", "orders", "--new", "00000000-0000-0000-0000-000000000002"]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains(U), "names the leader in force");
    let out = paros(&url, &["journal", "list"]);
    assert_eq!(out.status.code(), Some(6), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_read_prints_positions_and_records_and_a_truncated_read_exits_3() {
    let (url, _) = gateway(Box::new(|_, target, _| {
        if target.starts_with("/v1/journals/orders/records?from=0") {
            (410, r#"{"code":"truncated","message":"m","view":{"leader":null,"first_seq":2,"next_seq":4}}"#.into())
        } else {
            (200, r#"{"from":2,"records":["aGk=","eW8="],"view":{"leader":null,"first_seq":2,"next_seq":4}}"#.into())
        }
    }));
    let out = paros(&url, &["read", "orders", "--from", "2", "--limit", "5"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2\thi\n3\tyo\n");
    assert_eq!(paros(&url, &["read", "orders", "--from", "0"]).status.code(), Some(3));
}

#[test]
fn a_read_names_the_server_that_answered_on_stderr_when_the_gateway_does() {
    let page = r#"{"from":0,"records":["aGk="],"view":{"leader":null,"first_seq":0,"next_seq":1}}"#;
    let (url, _) = gateway_with(Box::new(move |_, _, _| (200, page.into())), "paros-served-by: 00c0ffee00c0ffee\r\n");
    let out = paros(&url, &["read", "orders", "--from", "0"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "0\thi\n", "stdout holds the records only");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("next 1 of [0, 1), served by 00c0ffee00c0ffee"), "{said}");
    let (url, _) = gateway(Box::new(move |_, _, _| (200, page.into())));
    let said = String::from_utf8_lossy(&paros(&url, &["read", "orders", "--from", "0"]).stderr).to_string();
    assert!(said.contains("next 1 of [0, 1)") && !said.contains("served by"), "no header, no name: {said}");
}

#[test]
fn a_truncate_without_leader_on_a_single_writer_journal_says_what_to_pass() {
    let (url, _) = gateway(Box::new(|_, _, _| {
        (409, format!(r#"{{"code":"wrong_mode","message":"m","view":{{"leader":"{U}","first_seq":0,"next_seq":9}}}}"#))
    }));
    let out = paros(&url, &["truncate", "orders", "--up-to", "5"]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(&format!("pass --leader {U}")), "names the flag and the writer in force: {said}");
    let out = paros(&url, &["truncate", "orders", "--up-to", "5", "--leader", U]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("without --leader"), "the other mode's shape");
}

#[test]
fn a_read_through_gaps_reports_the_gap_and_goes_on_from_the_first_retained_position() {
    let (url, log) = gateway(Box::new(|_, target, _| {
        if target.starts_with("/v1/journals/orders/records?from=0") {
            (410, r#"{"code":"truncated","message":"m","view":{"leader":null,"first_seq":2,"next_seq":4}}"#.into())
        } else {
            (200, r#"{"from":2,"records":["aGk=","eW8="],"view":{"leader":null,"first_seq":2,"next_seq":4}}"#.into())
        }
    }));
    let out = paros(&url, &["read", "orders", "--from", "0", "--through-gaps"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2\thi\n3\tyo\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("gap: positions [0, 2) were truncated"));
    assert!(log.lock().unwrap()[1].starts_with("GET /v1/journals/orders/records?from=2"), "read on from 2");
    let out = paros(&url, &["read", "orders", "--from", "0"]);
    assert_eq!(out.status.code(), Some(3), "without the flag a truncated read still exits 3");
}

#[test]
fn with_json_a_failure_prints_its_error_body_on_stdout() {
    let (url, _) = gateway(Box::new(|_, target, _| match target {
        "/v1/journals/orders/leader" => {
            (409, format!(r#"{{"code":"lost","message":"m","view":{{"leader":"{U}","first_seq":0,"next_seq":0}}}}"#))
        }
        _ => (401, r#"{"code":"unauthorized","message":"expired"}"#.into()),
    }));
    let out = paros(&url, &["set-leader", "orders", "--new", "00000000-0000-0000-0000-000000000002", "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    assert_eq!(body["code"], "lost");
    assert_eq!(body["view"]["leader"], U);
    assert_eq!(body["exit"], 3);
    let out = paros(&url, &["journal", "list", "--json"]);
    assert_eq!(out.status.code(), Some(6));
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    assert_eq!((body["code"].as_str(), body["message"].as_str()), (Some("unauthorized"), Some("expired")));
    let out = paros(&url, &["journal", "list"]);
    assert!(out.stdout.is_empty(), "without --json stdout stays empty on failure");
}

/// A machine as `GET /v1/admin/cell` lists it.
fn machine_json(node: &str, standing: &str, liveness: &str, seats: u64) -> String {
    format!(
        r#"{{"node":"{node}","role":"node","zone":"z1","bus_address":"mem:{node}","tier":null,
        "standing":"{standing}","incarnation":null,"replaced_by":null,"replaces":null,
        "liveness":"{liveness}","seen_s_ago":3,"seats":{seats},"joining":0}}"#
    )
}

#[test]
fn cell_status_prints_machines_moves_and_weak_journals() {
    let (url, log) = gateway(Box::new(|_, _, _| {
        let m = machine_json("0000000000000001", "registered", "alive", 2);
        let d = machine_json("00000000000000d1", "draining", "unseen", 0);
        let body = format!(
            r#"{{"generated_at_ms":1,"node_counters":true,"machines":[{m},{d}],"machines_total":2,
            "moves":[{{"journal":"acme/orders","tenant":"aa","from":"0000000000000001","to":"00000000000000d1",
            "epoch":1,"recorded_at":40}}],"moves_total":1,"moves_done":0,
            "below_full_strength":[{{"journal":"acme/audit","tenant":"aa","voters":["0000000000000001"],
            "weak":[{{"node":"0000000000000001","why":"retired"}}],"moving":false}}],
            "below_full_strength_total":1,"list_max":200}}"#
        );
        (200, body)
    }));
    let out = paros(&url, &["cell", "status"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("machines 2 of 2\n"), "{text}");
    assert!(text.contains("  0000000000000001 node zone z1 registered alive seats 2 joining 0 (seen 3 s ago)\n"));
    assert!(text.contains("  00000000000000d1 node zone z1 draining unseen seats 0"), "{text}");
    assert!(text.contains("moves in progress 1, done"), "{text}");
    assert!(text.contains("  acme/orders 0000000000000001 -> 00000000000000d1 epoch 1 recorded at 40\n"), "{text}");
    assert!(text.contains("  acme/audit weak 0000000000000001 (retired)\n"), "{text}");
    assert_eq!(log.lock().unwrap()[0], "GET /v1/admin/cell ");
    let out = paros(&url, &["cell", "status", "--json"]);
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the body as it came");
    assert_eq!(body["moves_total"], 1);
}

#[test]
fn cell_admit_drain_and_retire_send_the_operator_routes() {
    let (url, log) = gateway(Box::new(|method, target, _| match (method, target) {
        ("POST", "/v1/admin/machines") => (201, machine_json("00000000000000d1", "registered", "unseen", 0)),
        ("POST", "/v1/admin/machines/d1/drain") => (200, machine_json("00000000000000d1", "draining", "unseen", 0)),
        ("POST", "/v1/admin/machines/d1/retire") => (200, machine_json("00000000000000d1", "retired", "unseen", 0)),
        _ => (404, r#"{"code":"unknown_machine","message":"the registry knows no machine"}"#.into()),
    }));
    let args = ["cell", "admit", "D1", "--bus-address", "10.0.0.9:7000", "--zone", "z1", "--incarnation", "7f"];
    let out = paros(&url, &args);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("admitted 00000000000000d1 node zone z1 registered"));
    let logged = log.lock().unwrap()[0].clone();
    let sent: serde_json::Value =
        serde_json::from_str(logged.strip_prefix("POST /v1/admin/machines ").expect("the admit route")).unwrap();
    assert_eq!(
        sent,
        serde_json::json!({"id": "d1", "role": "node", "bus_address": "10.0.0.9:7000", "zone": "z1",
            "incarnation": "7f"})
    );
    let out = paros(&url, &["cell", "drain", "d1"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains(" draining "));
    let out = paros(&url, &["cell", "retire", "d1", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["standing"], "retired");

    let out = paros(&url, &["cell", "drain", "e5", "--json"]);
    assert_eq!(out.status.code(), Some(3), "404 unknown_machine is a refusal");
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((body["code"].as_str(), body["exit"].as_u64()), (Some("unknown_machine"), Some(3)));
    let before = log.lock().unwrap().len();
    for bad in [&["cell", "drain", "xyz"][..], &["cell", "retire", "0"], &["cell", "admit", "d2", "--zone", "z"]] {
        assert_eq!(paros(&url, bad).status.code(), Some(2), "{bad:?} is a usage error");
    }
    assert_eq!(log.lock().unwrap().len(), before, "and sends nothing");
}

#[test]
fn journal_move_records_a_move_and_exits_by_the_refusal() {
    let (url, log) = gateway(Box::new(|_, _, body| {
        if body.contains("\"to\":\"d1\"") {
            let m = r#"{"journal":"acme/orders","tenant":"aa","from":"0000000000000001","to":"00000000000000d1",
                "epoch":1,"recorded_at":40}"#;
            (202, m.into())
        } else if body.contains("\"to\":\"d2\"") {
            (409, r#"{"code":"move_in_progress","message":"one at a time"}"#.into())
        } else {
            (403, r#"{"code":"forbidden","message":"needs an admin token"}"#.into())
        }
    }));
    let out = paros(&url, &["journal", "move", "acme/orders", "--from", "1", "--to", "d1"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "moving acme/orders 0000000000000001 -> 00000000000000d1 epoch 1 recorded at 40 \
         (recorded: in progress until the target holds the journal)\n"
    );
    assert_eq!(log.lock().unwrap()[0], r#"POST /v1/admin/journals/acme/orders/move {"from":"1","to":"d1"}"#);
    let out = paros(&url, &["journal", "move", "acme/orders", "--from", "1", "--to", "d2"]);
    assert_eq!(out.status.code(), Some(3), "409 move_in_progress");
    assert!(String::from_utf8_lossy(&out.stderr).contains("move_in_progress"), "names the code");
    let out = paros(&url, &["journal", "move", "acme/orders", "--from", "1", "--to", "d3"]);
    assert_eq!(out.status.code(), Some(6), "403 is denied");
    let before = log.lock().unwrap().len();
    for bad in ["orders", "Acme/orders", "acme/.x"] {
        let out = paros(&url, &["journal", "move", bad, "--from", "1", "--to", "d1"]);
        assert_eq!(out.status.code(), Some(2), "{bad} is not tenant/journal");
    }
    assert_eq!(log.lock().unwrap().len(), before, "and sends nothing");
    assert_eq!(paros("http://127.0.0.1:9", &["cell", "status"]).status.code(), Some(5), "no gateway: unavailable");
}
