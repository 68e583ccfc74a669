//! `/ui` in a real browser: Debian's `chromium`, headless, loads the page from a gateway
//! served on a loopback port over a real embedded cell, with the admin token in the URL
//! fragment, while a writer keeps writing. The DOM it dumps must show live figures: the three
//! machines, the journal with a `next_seq` only the writes made, and a write rate above zero —
//! which the page computes between two of its polls, so only data that moved while it ran
//! produces it — and the seats section: each machine's state and seats, and a recorded move.

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;

use common::{call, create, signup, world};

const LEADER: &str = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";

/// How long chromium may take before the test gives up on it.
const CHROMIUM_DEADLINE: Duration = Duration::from_secs(90);

fn chromium() -> String {
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("chromium"))
        .find(|p| p.is_file());
    match found {
        Some(p) => p.display().to_string(),
        None => panic!(
            "`chromium` is not on PATH: the /ui test needs Debian's chromium; \
             run ops/scripts/test.sh, which installs it"
        ),
    }
}

/// The text of the element whose opening tag contains `marker` (up to the next `<`).
fn text_after<'a>(dom: &'a str, marker: &str) -> Option<&'a str> {
    let at = dom.find(marker)?;
    let rest = &dom[at..];
    let start = rest.find('>')? + 1;
    let end = rest[start..].find('<')?;
    Some(rest[start..start + end].trim())
}

/// Dumps the DOM of `url` after the page ran `budget_ms` of virtual time.
fn dump_dom(url: &str, budget_ms: u64) -> String {
    let profile = tempfile::tempdir().expect("a profile dir");
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--disable-dev-shm-usage",
            "--disable-extensions",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--virtual-time-budget={budget_ms}"))
        .arg("--dump-dom")
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let started = Instant::now();
    loop {
        if child.try_wait().expect("chromium is waitable").is_some() {
            break;
        }
        if started.elapsed() > CHROMIUM_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {CHROMIUM_DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("chromium's output");
    assert!(out.status.success(), "chromium exited with {:?}", out.status);
    String::from_utf8(out.stdout).expect("the DOM is UTF-8")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_renders_live_figures_in_headless_chromium() {
    let chromium_path = chromium();
    let w = world().await;
    let r = w.router.clone();
    let (_, owner, _) = signup(&r, "acme").await;
    create(&r, &owner, "orders", None).await;
    let (s, v) =
        call(&r, "POST", "/v1/journals/orders/leader", Some(&owner), Some(json!({"new": LEADER, "old": null}))).await;
    assert_eq!(s, StatusCode::OK, "{v}");

    // A writer that keeps writing one record at a time until told to stop.
    let written = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (r, owner, written, stop) = (r.clone(), owner.clone(), Arc::clone(&written), Arc::clone(&stop));
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let seq = written.load(Ordering::SeqCst);
                let record = STANDARD.encode(format!("record {seq}"));
                let (s, v) = call(
                    &r,
                    "POST",
                    "/v1/journals/orders/records",
                    Some(&owner),
                    Some(json!({"leader": LEADER, "seq": seq, "records": [record]})),
                )
                .await;
                assert_eq!(s, StatusCode::OK, "{v}");
                written.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    while written.load(Ordering::SeqCst) < 5 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // The seats section: a machine admitted (nothing runs under its id: unseen) and a seat move
    // of the journal to it recorded (in this test world the mover has no budget: it stays pending).
    let admin = paros_gateway::mint_admin_token(&w.key, 600);
    let body = json!({"id": "d1", "role": "node", "bus_address": "mem:d1", "zone": "z9", "incarnation": "7"});
    let (s, v) = call(&r, "POST", "/v1/admin/machines", Some(&admin), Some(body)).await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let d = w.cell.directory().borrow().directory.clone().expect("folded");
    let from = d.journals().find(|j| j.is_live()).expect("the journal").voters[0].to_string();
    let (s, v) =
        call(&r, "POST", "/v1/admin/journals/acme/orders/move", Some(&admin), Some(json!({"from": from, "to": "d1"})))
            .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(paros_gateway::serve(listener, w.gateway.clone()));
    let url = format!("http://{addr}/ui#token={admin}");
    let before = written.load(Ordering::SeqCst);
    // Twenty polls of virtual time (virtual time runs ahead while the page is idle, so they
    // take a fraction of that in real time; the writer runs meanwhile).
    let dom = tokio::task::spawn_blocking(move || dump_dom(&url, 20_000)).await.expect("chromium ran");
    let after = written.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    writer.await.expect("the writer stops");
    server.abort();

    let polls: u64 =
        dom.split("data-polls=\"").nth(1).and_then(|r| r.split('"').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(polls >= 2, "the page polled the overview at least twice ({chromium_path}); DOM:\n{dom}");
    assert_eq!(text_after(&dom, "id=\"node-count\""), Some("6"), "the machine count; DOM:\n{dom}");
    assert_eq!(dom.matches("data-node=\"").count(), 6, "one row per machine");

    // The seats section: every machine with its state and seats, and the move in progress.
    assert_eq!(text_after(&dom, "id=\"seat-machine-count\""), Some("6"), "DOM:\n{dom}");
    assert_eq!(dom.matches("data-seat-node=\"").count(), 6, "one seats row per machine");
    let seat_row = |node: &str| {
        let at = dom.find(&format!("data-seat-node=\"{node}\"")).unwrap_or_else(|| panic!("{node}'s row: {dom}"));
        let row = &dom[at..];
        &row[..row.find("</tr>").unwrap_or(row.len())]
    };
    let d1 = seat_row("00000000000000d1");
    assert_eq!(text_after(d1, "data-field=\"state\""), Some("unseen"), "nothing runs as d1: {d1}");
    assert_eq!(text_after(d1, "data-field=\"joining\""), Some("1"), "{d1}");
    let founder = seat_row(&from);
    assert_eq!(text_after(founder, "data-field=\"state\""), Some("alive"), "{founder}");
    let seats = text_after(founder, "data-field=\"seats\"");
    assert_eq!(seats, Some("2"), "it votes for the one journal and the registry journal: {founder}");
    assert_eq!(text_after(&dom, "id=\"moves-count\""), Some("1"), "DOM:\n{dom}");
    let mv = dom.find("data-move=\"acme/orders\"").map(|at| &dom[at..]).expect("the move's row");
    assert_eq!(text_after(mv, "data-field=\"to\""), Some("00000000000000d1"));
    assert_eq!(text_after(mv, "data-field=\"move_state\""), Some("pending"));

    let row = dom.find("data-journal=\"acme/orders\"").map(|at| &dom[at..]).expect("the journal's row");
    let next_seq: u64 =
        text_after(row, "data-field=\"next_seq\"").and_then(|t| t.parse().ok()).expect("next_seq is a number");
    // At most one write was in flight (applied, not yet counted) at the page's last poll.
    assert!(
        (before..=after + 1).contains(&next_seq),
        "next_seq {next_seq} is what the writer had written while the page ran ({before}..={after})"
    );
    let leader = text_after(row, "data-field=\"leader_node\"").expect("a leader cell");
    let nodes: Vec<String> = w.cell.manifest.nodes.iter().map(ToString::to_string).collect();
    assert!(nodes.iter().any(|n| leader.starts_with(n.as_str())), "the leader node is one of the cell's: {leader}");

    let rate: f64 =
        text_after(&dom, "id=\"total-write-rps\"").and_then(|t| t.replace(',', "").parse().ok()).expect("a write rate");
    assert!(rate > 0.0, "records were written between two polls, so the rate is above zero: {rate}");
    // A founder's row (the admitted d1, first by id, runs nothing and reports no counters).
    let founder_row = dom.find(&format!("data-node=\"{from}\"")).map(|at| &dom[at..]).expect("a founder's row");
    let rounds: u64 = text_after(founder_row, "data-field=\"rounds\"")
        .and_then(|t| t.replace(',', "").parse().ok())
        .expect("a node's rounds");
    assert!(rounds > 0, "the nodes' counters are shown");
}
