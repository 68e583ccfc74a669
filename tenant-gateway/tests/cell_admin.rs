//! The operator's cell routes (issue 34): `GET /v1/admin/cell`, admit, drain, retire and a
//! journal's seat move — the happy paths, every refusal code, bad input changing nothing, and
//! tenant tokens refused; and the cell families of `/metrics`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use paros_gateway::{Gateway, NodeCounters, NodeStats, SigningKeys, mint_admin_token};
use paros_registry::{Command, Directory, Op, TierName};
use serde_json::{Value, json};

use common::{call, code, create, raw, signup, test_config, world};

/// The directory the cell's followers fold now.
fn directory(w: &common::World) -> Arc<Directory> {
    w.cell.directory().borrow().directory.clone().expect("folded")
}

/// What a refusal of the fold must leave as it was: every machine and journal (the fold still
/// records the refusal as the request's verdict).
fn machines_and_journals(w: &common::World) -> (Vec<paros_registry::Machine>, Vec<paros_registry::Journal>) {
    let d = directory(w);
    (d.machines().cloned().collect(), d.journals().cloned().collect())
}

/// The voters of `tenant/journal`, from the directory.
fn voters(w: &common::World, tenant: &str, journal: &str) -> Vec<String> {
    let d = directory(w);
    let t = d.tenant_by_name(&paros_registry::TenantName::parse(tenant).unwrap()).unwrap().id;
    let j = d.journal_by_name(t, &paros_registry::JournalName::parse(journal).unwrap()).unwrap();
    j.voters.iter().map(ToString::to_string).collect()
}

async fn admit(r: &axum::Router, admin: &str, id: &str, incarnation: &str) -> (StatusCode, Value) {
    let body = json!({"id": id, "role": "node", "bus_address": format!("mem:{id}"), "zone": "z9",
        "incarnation": incarnation});
    call(r, "POST", "/v1/admin/machines", Some(admin), Some(body)).await
}

async fn status(r: &axum::Router, admin: &str) -> Value {
    let (s, v) = call(r, "GET", "/v1/admin/cell", Some(admin), None).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v
}

fn machine<'a>(status: &'a Value, node: &str) -> &'a Value {
    status["machines"].as_array().unwrap().iter().find(|m| m["node"] == node).unwrap_or_else(|| panic!("{node}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cell_status_shows_machines_seats_and_liveness_to_the_operator_only() {
    let w = world().await;
    let r = &w.router;
    let admin = mint_admin_token(&w.key, 60);
    let (_, owner, _) = signup(r, "acme").await;
    create(r, &owner, "orders", None).await;
    create(r, &owner, "audit", None).await;

    let v = status(r, &admin).await;
    assert_eq!(v["node_counters"], true, "{v}");
    assert_eq!(v["machines_total"], 5, "the three founders and the two read replicas: {v}");
    let roles: Vec<&str> = v["machines"].as_array().unwrap().iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles.iter().filter(|r| **r == "node").count(), 3, "{v}");
    let mut seats = 0;
    for m in v["machines"].as_array().unwrap() {
        assert_eq!(m["standing"], "registered", "{m}");
        assert_eq!(m["liveness"], "alive", "the node port reports every machine: {m}");
        assert!(m["seen_s_ago"].as_u64().is_some_and(|s| s < 60), "{m}");
        seats += m["seats"].as_u64().unwrap();
    }
    assert_eq!(seats, 9, "two journals of three voters each, and the registry journal's three: {v}");
    assert_eq!((v["moves_total"].as_u64(), v["moves_done"].as_u64()), (Some(0), Some(0)), "{v}");
    assert_eq!(v["below_full_strength_total"], 0, "{v}");
    assert_eq!(v["list_max"], u64::from(test_config().cell_list_max));

    let (s, e) = call(r, "GET", "/v1/admin/cell", Some(&owner), None).await;
    assert_eq!((s, code(&e)), (StatusCode::FORBIDDEN, "forbidden"), "a tenant token");
    let (s, e) = call(r, "GET", "/v1/admin/cell", None, None).await;
    assert_eq!((s, code(&e)), (StatusCode::UNAUTHORIZED, "unauthorized"));
    let (s, e) = call(r, "GET", "/v1/admin/cell?offset=1", Some(&admin), None).await;
    assert_eq!((s, code(&e)), (StatusCode::BAD_REQUEST, "malformed"), "the route takes no query");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_list_of_the_cell_status_is_bounded_by_configuration() {
    let w = common::world_with(paros_gateway::GatewayConfig { cell_list_max: 1, ..test_config() }).await;
    let admin = mint_admin_token(&w.key, 60);
    let v = status(&w.router, &admin).await;
    assert_eq!((v["machines"].as_array().map(Vec::len), v["machines_total"].as_u64()), (Some(1), Some(5)), "{v}");
    assert_eq!(v["list_max"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admit_drain_and_retire_are_the_registrys_verdicts() {
    let w = world().await;
    let r = &w.router;
    let admin = mint_admin_token(&w.key, 60);
    let (_, owner, _) = signup(r, "acme").await;

    let (s, m) = admit(r, &admin, "a1", "77").await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    assert_eq!(m["node"], "00000000000000a1");
    assert_eq!((m["role"].as_str(), m["zone"].as_str()), (Some("node"), Some("z9")));
    assert_eq!((m["incarnation"].as_str(), m["standing"].as_str()), (Some("0000000000000077"), Some("registered")));
    assert_eq!((m["liveness"].as_str(), m["seats"].as_u64()), (Some("unseen"), Some(0)), "nothing runs as a1: {m}");
    let (s, m) = admit(r, &admin, "A1", "77").await;
    assert_eq!(s, StatusCode::OK, "the same machine again is an update: {m}");

    let before = machines_and_journals(&w);
    let (s, e) = admit(r, &admin, "a1", "78").await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "incarnation_changed"), "{e}");
    assert_eq!(machines_and_journals(&w), before, "a refused admit changes nothing");
    assert_eq!(machine(&status(r, &admin).await, "00000000000000a1")["incarnation"], "0000000000000077");
    // A founder's id under another role.
    let founder = directory(&w).cell().unwrap().members[0].to_string();
    let body = json!({"id": founder, "role": "gateway", "bus_address": "x", "zone": "z", "incarnation": "1"});
    let (s, e) = call(r, "POST", "/v1/admin/machines", Some(&admin), Some(body)).await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "role_change"), "{e}");
    // A replica tier's feed is no machine's id.
    w.cell
        .request(Op::Command(Command::CreateTier {
            tier: TierName::new("gold").unwrap(),
            feed: paros_core::NodeId(0xfeed),
        }))
        .await
        .expect("the tier is created");
    // The directory shows a verdict once the cell's followers fold it, which may be just after
    // the answer: wait for the tier, then for the refusal's verdict after it.
    let folded = |done: &dyn Fn(&Directory) -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !done(&directory(&w)) {
            assert!(std::time::Instant::now() < deadline, "the verdict is folded");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    };
    folded(&|d| d.tier(&TierName::new("gold").unwrap()).is_some());
    let judged = directory(&w).verdicts_len();
    let (s, e) = admit(r, &admin, "feed", "1").await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "id_is_a_feed"), "{e}");
    folded(&|d| d.verdicts_len() > judged);

    // Bad input is 400 and sends nothing.
    let before = directory(&w);
    let good = json!({"id": "b2", "role": "node", "bus_address": "mem:b2", "zone": "z1", "incarnation": "5"});
    let mut bad: Vec<Value> = Vec::new();
    for (field, value) in [
        ("id", json!("0")),
        ("id", json!("xyz")),
        ("id", json!("11112222333344445")),
        ("id", json!(5)),
        ("role", json!("voter")),
        ("bus_address", json!("a b")),
        ("bus_address", json!("")),
        ("zone", json!("Zone")),
        ("incarnation", json!("0")),
        ("incarnation", json!(null)),
    ] {
        let mut b = good.clone();
        b[field] = value;
        bad.push(b);
    }
    let mut extra = good.clone();
    extra["tier"] = json!("gold");
    bad.push(extra);
    bad.push(json!({"id": "b2"}));
    for body in bad {
        let (s, e) = call(r, "POST", "/v1/admin/machines", Some(&admin), Some(body.clone())).await;
        assert_eq!((s, code(&e)), (StatusCode::BAD_REQUEST, "malformed"), "{body}: {e}");
    }
    let (s, _, _) =
        raw(r, "POST", "/v1/admin/machines", Some(&admin), Some("text/plain"), good.to_string().into()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "not JSON by its type");
    let (s, e) = call(r, "POST", "/v1/admin/machines?x=1", Some(&admin), Some(good.clone())).await;
    assert_eq!((s, code(&e)), (StatusCode::BAD_REQUEST, "malformed"), "{e}");
    assert_eq!(*directory(&w), *before, "nothing bad reached the registry");

    // Tenant tokens are refused, and change nothing either.
    let (s, _) = call(r, "POST", "/v1/admin/machines", Some(&owner), Some(good)).await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    for action in ["drain", "retire"] {
        let (s, _) = call(r, "POST", &format!("/v1/admin/machines/a1/{action}"), Some(&owner), None).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{action}");
    }
    assert_eq!(*directory(&w), *before, "a tenant token changed nothing");

    // Drain, again, retire, then the retired machine stays retired.
    for (action, want) in [("drain", "draining"), ("drain", "draining"), ("retire", "retired"), ("retire", "retired")] {
        let (s, m) = call(r, "POST", &format!("/v1/admin/machines/a1/{action}"), Some(&admin), None).await;
        assert_eq!((s, m["standing"].as_str()), (StatusCode::OK, Some(want)), "{action}: {m}");
    }
    let (s, e) = call(r, "POST", "/v1/admin/machines/a1/drain", Some(&admin), None).await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "machine_retired"), "{e}");
    let (s, e) = admit(r, &admin, "a1", "77").await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "machine_retired"), "{e}");
    for action in ["drain", "retire"] {
        let (s, e) = call(r, "POST", &format!("/v1/admin/machines/c3/{action}"), Some(&admin), None).await;
        assert_eq!((s, code(&e)), (StatusCode::NOT_FOUND, "unknown_machine"), "{action}: {e}");
        let (s, e) = call(r, "POST", &format!("/v1/admin/machines/zz/{action}"), Some(&admin), None).await;
        assert_eq!((s, code(&e)), (StatusCode::BAD_REQUEST, "malformed"), "{action}: {e}");
    }
    let v = status(r, &admin).await;
    assert_eq!(machine(&v, "00000000000000a1")["standing"], "retired", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seat_move_is_recorded_pending_and_refused_by_each_rule() {
    let w = world().await;
    let r = &w.router;
    let admin = mint_admin_token(&w.key, 60);
    let (_, owner, _) = signup(r, "acme").await;
    create(r, &owner, "orders", None).await;
    create(r, &owner, "audit", None).await;
    let v = voters(&w, "acme", "orders");
    assert_eq!(v.len(), 3, "{v:?}");
    assert_eq!(admit(r, &admin, "d1", "1").await.0, StatusCode::CREATED);
    assert_eq!(admit(r, &admin, "d2", "2").await.0, StatusCode::CREATED);
    let adm: &str = &admin;
    let mv = |journal: &str, from: &str, to: &str| {
        let (path, body) = (format!("/v1/admin/journals/acme/{journal}/move"), json!({"from": from, "to": to}));
        async move { call(r, "POST", &path, Some(adm), Some(body)).await }
    };

    // Tenant tokens and bad input change nothing.
    let before = directory(&w);
    let (s, _) =
        call(r, "POST", "/v1/admin/journals/acme/orders/move", Some(&owner), Some(json!({"from": v[0], "to": "d1"})))
            .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    for (path, body, want) in [
        ("/v1/admin/journals/Acme/orders/move", json!({"from": v[0], "to": "d1"}), (400, "malformed")),
        ("/v1/admin/journals/acme/.x/move", json!({"from": v[0], "to": "d1"}), (400, "malformed")),
        ("/v1/admin/journals/acme/orders/move", json!({"from": v[0]}), (400, "malformed")),
        ("/v1/admin/journals/acme/orders/move", json!({"from": v[0], "to": "d1", "why": 1}), (400, "malformed")),
        ("/v1/admin/journals/acme/orders/move", json!({"from": v[0], "to": "q"}), (400, "malformed")),
        ("/v1/admin/journals/acme/nope/move", json!({"from": v[0], "to": "d1"}), (404, "unknown_journal")),
        ("/v1/admin/journals/nobody/orders/move", json!({"from": v[0], "to": "d1"}), (404, "unknown_journal")),
        ("/v1/admin/journals/acme/orders/move", json!({"from": v[0], "to": "e5"}), (404, "unknown_machine")),
        ("/v1/admin/journals/acme/orders/move", json!({"from": "e5", "to": "d1"}), (404, "unknown_machine")),
    ] {
        let (s, e) = call(r, "POST", path, Some(&admin), Some(body.clone())).await;
        assert_eq!((s.as_u16(), code(&e)), want, "{path} {body}: {e}");
    }
    assert_eq!(*directory(&w), *before, "nothing refused at the door reached the registry");

    // Recorded: pending, counted toward the target's seats, the voters unchanged.
    let (s, m) = mv("orders", &v[0], "d1").await;
    assert_eq!(s, StatusCode::ACCEPTED, "{m}");
    assert_eq!((m["journal"].as_str(), m["epoch"].as_u64()), (Some("acme/orders"), Some(1)), "{m}");
    assert_eq!((m["from"].as_str(), m["to"].as_str()), (Some(v[0].as_str()), Some("00000000000000d1")));
    assert!(m["recorded_at"].as_u64().is_some_and(|at| at > 0), "{m}");
    let st = status(r, &admin).await;
    assert_eq!((st["moves_total"].as_u64(), st["moves_done"].as_u64()), (Some(1), Some(0)), "{st}");
    assert_eq!(st["moves"][0]["journal"], "acme/orders");
    assert_eq!((machine(&st, "00000000000000d1")["joining"].as_u64()), Some(1), "{st}");
    assert_eq!(voters(&w, "acme", "orders"), v, "a recorded move changes no voter");

    // Each rule of the fold, each refusal changing nothing.
    let before = machines_and_journals(&w);
    let (s, e) = mv("orders", &v[1], "d2").await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "move_in_progress"), "{e}");
    let (s, e) = mv("audit", "d1", "d2").await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "not_a_voter"), "{e}");
    let a = voters(&w, "acme", "audit");
    let (s, e) = mv("audit", &a[0], &a[1]).await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "already_a_voter"), "{e}");
    assert_eq!(machines_and_journals(&w), before, "refusals change no machine and no journal");
    assert_eq!(call(r, "POST", "/v1/admin/machines/d2/drain", Some(&admin), None).await.0, StatusCode::OK);
    let (s, e) = mv("audit", &a[0], "d2").await;
    assert_eq!((s, code(&e)), (StatusCode::CONFLICT, "target_ineligible"), "a draining target: {e}");

    // A retired voter leaves its journals below full strength.
    let (s, _) = call(r, "POST", &format!("/v1/admin/machines/{}/retire", a[2]), Some(&admin), None).await;
    assert_eq!(s, StatusCode::OK);
    let st = status(r, &admin).await;
    assert_eq!(st["below_full_strength_total"], 3, "the two journals and the registry journal: {st}");
    let weak = st["below_full_strength"].as_array().unwrap();
    assert!(weak.iter().all(|j| j["weak"][0]["node"] == a[2] && j["weak"][0]["why"] == "retired"), "{st}");
    assert!(weak.iter().any(|j| j["journal"] == "acme/orders" && j["moving"] == true), "{st}");
}

/// `/metrics` as text, and its samples by series.
async fn scrape(r: &axum::Router) -> (String, std::collections::BTreeMap<String, f64>) {
    let (s, _, body) = raw(r, "GET", "/metrics", None, None, Vec::new()).await;
    assert_eq!(s, StatusCode::OK);
    let text = String::from_utf8(body).unwrap();
    let samples = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap_or_else(|| panic!("a sample: {l}"));
            (k.to_owned(), v.parse::<f64>().unwrap_or_else(|_| panic!("a number: {l}")))
        })
        .collect();
    (text, samples)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_machines_moves_and_journals_below_full_strength() {
    let w = world().await;
    // A second gateway over the same cell whose node port leaves the first founder out: it
    // sees that founder unseen.
    let founders = directory(&w).cell().unwrap().members.clone();
    let silent = founders[0];
    let reader = w.cell.stats_reader();
    let port: Arc<dyn NodeStats> = Arc::new(move || {
        reader.read().iter().map(common::sample_counters).filter(|c: &NodeCounters| c.node != silent).collect()
    });
    let g = Gateway::start_with_nodes(
        w.cell.client.clone(),
        w.cell.coordinator(),
        w.cell.directory(),
        test_config(),
        SigningKeys::new(w.key.clone()),
        Some(port),
    )
    .await
    .expect("a second gateway");
    let r = g.router();
    let admin = mint_admin_token(&w.key, 60);
    let (_, owner, _) = signup(&r, "acme").await;
    create(&r, &owner, "orders", None).await;
    assert_eq!(admit(&r, &admin, "d1", "1").await.0, StatusCode::CREATED);
    let v = voters(&w, "acme", "orders");
    let (s, e) =
        call(&r, "POST", "/v1/admin/journals/acme/orders/move", Some(&admin), Some(json!({"from": v[0], "to": "d1"})))
            .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{e}");
    assert_eq!(call(&r, "POST", "/v1/admin/machines/d1/drain", Some(&admin), None).await.0, StatusCode::OK);

    let (text, samples) = scrape(&r).await;
    let get = |k: &str| samples.get(k).copied().unwrap_or_else(|| panic!("{k} in\n{text}"));
    assert_eq!(get(r#"paros_gateway_cell_machines{role="node",standing="registered"}"#), 3.0);
    assert_eq!(get(r#"paros_gateway_cell_machines{role="node",standing="draining"}"#), 1.0);
    assert_eq!(get(r#"paros_gateway_cell_machines{role="gateway",standing="retired"}"#), 0.0);
    assert_eq!(text.matches("paros_gateway_cell_machines{").count(), 9, "three roles by three standings");
    assert_eq!(get("paros_gateway_cell_machines_unseen"), 2.0, "the silent founder and d1, which nothing runs");
    assert_eq!(get("paros_gateway_cell_moves_in_progress"), 1.0);
    assert_eq!(get("paros_gateway_cell_moves_done_total"), 0.0, "nothing records a move done yet");
    // The registry journal, whose voters are the three founders, and orders if it has one.
    let weak = if v.contains(&silent.to_string()) { 2.0 } else { 1.0 };
    assert_eq!(get("paros_gateway_cell_journals_below_full_strength"), weak, "a journal voted for by {silent}");
    assert!(text.contains("# TYPE paros_gateway_cell_moves_done_total counter\n"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seat_moves_duration_is_measured_from_its_record_to_its_completion() {
    // Five nodes and the registry's mover at work (the other tests' world has it idle).
    let dir = tempfile::tempdir().expect("a tempdir");
    let loops = paros_registry::daemon::CoordinatorLoopConfig::default();
    let cell = paros_embedded::EmbeddedCell::open_configured(dir.path(), 5, loops).await.expect("opens");
    cell.init().await.expect("forms");
    cell.wait_followers(Duration::from_secs(10), |d| d.cell().is_some()).await.expect("folds the formation");
    let key = paros_gateway::KeyPair::generate(paros_registry::KeyId::new("k1").expect("a key id"));
    let g = Gateway::start(
        cell.client.clone(),
        cell.coordinator(),
        cell.directory(),
        test_config(),
        SigningKeys::new(key.clone()),
    )
    .await
    .expect("the gateway starts");
    let r = g.router();
    let admin = mint_admin_token(&key, 60);
    let (_, owner, _) = signup(&r, "acme").await;
    create(&r, &owner, "orders", None).await;
    let count = "paros_gateway_cell_move_duration_seconds_count";
    let sum = "paros_gateway_cell_move_duration_seconds_sum";
    let (text, samples) = scrape(&r).await;
    assert_eq!((samples.get(count), samples.get(sum)), (Some(&0.0), Some(&0.0)), "no move yet:\n{text}");
    assert!(text.contains("# TYPE paros_gateway_cell_move_duration_seconds histogram\n"), "{text}");

    let d = cell.directory().borrow().directory.clone().expect("folded");
    let t = d.tenant_by_name(&paros_registry::TenantName::parse("acme").unwrap()).unwrap().id;
    let j = d.journal_by_name(t, &paros_registry::JournalName::parse("orders").unwrap()).unwrap();
    let (journal, from) = (j.key, j.voters[0]);
    let to = *cell.manifest.nodes.iter().find(|n| !j.voters.contains(n)).expect("a node outside");
    let body = json!({"from": from.to_string(), "to": to.to_string()});
    let (s, e) = call(&r, "POST", "/v1/admin/journals/acme/orders/move", Some(&admin), Some(body)).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{e}");
    let moved = |d: &Directory| d.journal(journal).is_some_and(|j| j.epoch == paros_registry::Epoch(1));
    cell.wait_followers(Duration::from_secs(60), moved).await.expect("the mover carries the move out");

    // The gateway times the move on its own task, from the same folds.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let (text, samples) = loop {
        let (text, samples) = scrape(&r).await;
        if samples.get(count).is_some_and(|n| *n >= 1.0) || tokio::time::Instant::now() > deadline {
            break (text, samples);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(samples.get(count), Some(&1.0), "the one move, timed:\n{text}");
    assert!(samples.get(sum).is_some_and(|s| *s > 0.0), "it took some time:\n{text}");
    let inf = r#"paros_gateway_cell_move_duration_seconds_bucket{le="+Inf"}"#;
    assert_eq!(samples.get(inf), Some(&1.0), "{text}");
    assert_eq!(samples.get("paros_gateway_cell_moves_done_total"), Some(&1.0), "{text}");
    drop(g);
    let _ = cell.stop();
}
