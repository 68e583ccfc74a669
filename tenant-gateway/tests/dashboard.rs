//! The operator's side: `GET /v1/admin/overview` (401 / 403 / 400 / 200 and its shape), `/ui`
//! served without a token, and `/metrics`' per-tenant traffic, auth refusals by reason and the
//! nodes' counters moving with traffic.

mod common;

use std::collections::BTreeMap;

use axum::http::StatusCode;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use paros_api::Scope;
use paros_gateway::{KeyPair, auth, mint_admin_token};
use paros_registry::KeyId;
use serde_json::{Value, json};

use common::{call, code, create, raw, signup, test_config, world, world_opts};

const A: &str = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";

/// `/metrics` as `name{labels} -> value` (counters and gauges; `# ` lines skipped).
async fn scrape(r: &axum::Router) -> BTreeMap<String, f64> {
    let (s, _, body) = raw(r, "GET", "/metrics", None, None, Vec::new()).await;
    assert_eq!(s, StatusCode::OK);
    let text = String::from_utf8(body).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.rsplit_once(' ').map(|(k, v)| (k.to_owned(), v.parse::<f64>().unwrap_or(f64::NAN))))
        .collect()
}

fn metric(m: &BTreeMap<String, f64>, key: &str) -> f64 {
    m.get(key).copied().unwrap_or(0.0)
}

/// Bytes allocated to every file under `dir`, as `du` counts them.
fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.flatten()
            .map(|e| match e.metadata() {
                Ok(m) if m.is_dir() => dir_bytes(&e.path()),
                Ok(m) => std::os::unix::fs::MetadataExt::blocks(&m) * 512,
                Err(_) => 0,
            })
            .sum()
    })
}

/// Every series of one family: `labels -> value`.
fn family<'a>(m: &'a BTreeMap<String, f64>, name: &str) -> Vec<(&'a str, f64)> {
    m.iter()
        .filter_map(|(k, v)| k.strip_prefix(name).and_then(|rest| rest.strip_prefix('{')).map(|labels| (labels, *v)))
        .collect()
}

async fn claim_and_write(r: &axum::Router, token: &str, journal: &str, records: &[&[u8]]) -> Value {
    let (s, v) =
        call(r, "POST", &format!("/v1/journals/{journal}/leader"), Some(token), Some(json!({"new": A, "old": null})))
            .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let records: Vec<String> = records.iter().map(|b| STANDARD.encode(b)).collect();
    let (s, v) = call(
        r,
        "POST",
        &format!("/v1/journals/{journal}/records"),
        Some(token),
        Some(json!({"leader": A, "seq": 0, "records": records})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_is_the_operators_and_shows_machines_tenants_journals_and_leaders() {
    let w = world().await;
    let r = &w.router;
    let admin = mint_admin_token(&w.key, 600);
    let (tenant, owner, _) = signup(r, "acme").await;
    create(r, &owner, "orders", None).await;
    create(r, &owner, "quiet", None).await;
    claim_and_write(r, &owner, "orders", &[b"one", b"two", b"three"]).await;

    // The page is served without a token, and locks itself to this gateway.
    let (s, headers, body) = raw(r, "GET", "/ui", None, None, Vec::new()).await;
    assert_eq!(s, StatusCode::OK);
    assert!(headers["content-type"].to_str().unwrap().starts_with("text/html"));
    assert!(headers["content-security-policy"].to_str().unwrap().contains("connect-src 'self'"));
    assert!(String::from_utf8(body).unwrap().contains("/v1/admin/overview"), "the page polls the overview");

    // 401 without or with a bad token, 403 with a tenant token, 400 for a bad query.
    let (s, v) = call(r, "GET", "/v1/admin/overview", None, None).await;
    assert_eq!((s, code(&v)), (StatusCode::UNAUTHORIZED, "unauthorized"));
    let (s, v) = call(r, "GET", "/v1/admin/overview", Some("not-a-jwt"), None).await;
    assert_eq!((s, code(&v)), (StatusCode::UNAUTHORIZED, "unauthorized"));
    let (s, v) = call(r, "GET", "/v1/admin/overview", Some(&owner), None).await;
    assert_eq!((s, code(&v)), (StatusCode::FORBIDDEN, "forbidden"), "a tenant token is no operator's");
    for bad in ["limit=0", "offset=x", "page=2", "limit=1&limit=2"] {
        let (s, v) = call(r, "GET", &format!("/v1/admin/overview?{bad}"), Some(&admin), None).await;
        assert_eq!((s, code(&v)), (StatusCode::BAD_REQUEST, "malformed"), "{bad}");
    }

    // The quiet journal's first campaign may still be in flight: its win is counted once the
    // campaigning node's round completes.
    let won_of = |o: &serde_json::Value| {
        o["machines"]
            .as_array()
            .map_or(0, |ms| ms.iter().filter_map(|m| m["counters"]["leaderships_won"].as_u64()).sum::<u64>())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let (s, o) = loop {
        let (s, o) = call(r, "GET", "/v1/admin/overview", Some(&admin), None).await;
        if s != StatusCode::OK || won_of(&o) >= 2 || std::time::Instant::now() > deadline {
            break (s, o);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(s, StatusCode::OK, "{o}");
    assert_eq!(o["node_counters"], true);
    // Three voters and the two read replicas of the default tier.
    assert_eq!(o["machines_total"], 5);
    let machines = o["machines"].as_array().unwrap();
    assert_eq!(machines.len(), 5);
    let nodes: Vec<String> = w.cell.manifest.nodes.iter().map(ToString::to_string).collect();
    let replicas: Vec<String> = w.cell.manifest.replicas.iter().map(ToString::to_string).collect();
    for m in machines {
        let id = m["node"].as_str().unwrap().to_owned();
        assert_eq!(m["standing"].as_str(), Some("registered"), "{m}");
        assert!(m["counters"]["rounds"].as_u64().unwrap() > 0, "a running machine has run rounds: {m}");
        if nodes.contains(&id) {
            assert_eq!((m["role"].as_str(), m["tier"].as_str()), (Some("node"), None), "{m}");
            assert!(m["counters"]["replica"].is_null(), "a voter has no replica state: {m}");
        } else {
            assert!(replicas.contains(&id), "{m}");
            assert_eq!((m["role"].as_str(), m["tier"].as_str()), (Some("replica"), Some("default")), "{m}");
            let state = m["counters"]["replica"]["state"].as_str().unwrap_or_default().to_owned();
            assert!(["bootstrapping", "catching_up", "serving"].contains(&state.as_str()), "{m}");
            assert!(m["counters"]["replica"]["lag_slots_max"].is_u64(), "{m}");
        }
    }
    let machines: Vec<&serde_json::Value> =
        machines.iter().filter(|m| nodes.contains(&m["node"].as_str().unwrap().to_owned())).collect();
    let won: u64 = machines.iter().map(|m| m["counters"]["leaderships_won"].as_u64().unwrap()).sum();
    let campaigns: u64 = machines.iter().map(|m| m["counters"]["campaigns"].as_u64().unwrap()).sum();
    // The registry journal and the written journal each elected a leader (a journal only read
    // is read from the replicas, which need no leader).
    assert!(won >= 2 && campaigns >= won, "won {won}, campaigns {campaigns}");

    assert_eq!(o["tenants_total"], 1);
    let t = &o["tenants"][0];
    assert_eq!(
        (t["tenant"].as_str(), t["name"].as_str(), t["journals"].as_u64()),
        (Some(tenant.as_str()), Some("acme"), Some(2))
    );
    assert_eq!((t["traffic"]["records_written"].as_u64(), t["traffic"]["bytes_written"].as_u64()), (Some(3), Some(11)));
    assert_eq!(o["traffic"]["records_written"], 3);

    assert_eq!((o["journals_total"].as_u64(), o["offset"].as_u64(), o["limit"].as_u64()), (Some(2), Some(0), Some(50)));
    let journals: BTreeMap<&str, &Value> =
        o["journals"].as_array().unwrap().iter().map(|j| (j["name"].as_str().unwrap(), j)).collect();
    let orders = journals["orders"];
    assert_eq!(orders["tenant_name"], "acme");
    assert_eq!(orders["mode"], "single_writer");
    assert_eq!(orders["view"], json!({"leader": A, "first_seq": 0, "next_seq": 3}));
    let leader = orders["leader_node"]["node"].as_str().expect("the node that answered the write's verdict");
    assert!(nodes.contains(&leader.to_owned()), "{leader}");
    // The node named is the one that led: it counts at least one leadership won.
    let m = machines.iter().find(|m| m["node"] == leader).unwrap();
    assert!(m["counters"]["leaderships_won"].as_u64().unwrap() >= 1, "{m}");
    let quiet = journals["quiet"];
    assert_eq!(quiet["leader_node"], Value::Null, "no call went through this gateway: unknown, never a guess");
    assert_eq!(quiet["view"], json!({"leader": null, "first_seq": 0, "next_seq": 0}));

    // Pages: one journal at a time, in a stable order; past the end, none.
    let (_, p0) = call(r, "GET", "/v1/admin/overview?limit=1", Some(&admin), None).await;
    let (_, p1) = call(r, "GET", "/v1/admin/overview?limit=1&offset=1", Some(&admin), None).await;
    let (_, p2) = call(r, "GET", "/v1/admin/overview?offset=2", Some(&admin), None).await;
    assert_eq!((p0["journals"].as_array().unwrap().len(), p1["journals"].as_array().unwrap().len()), (1, 1));
    assert_ne!(p0["journals"][0]["name"], p1["journals"][0]["name"]);
    assert_eq!(p2["journals"], json!([]));
    assert_eq!(p2["journals_total"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_are_capped_by_configuration() {
    let config = paros_gateway::GatewayConfig { overview_journals_max: 2, overview_list_max: 1, ..test_config() };
    let w = common::world_with(config).await;
    let r = &w.router;
    let admin = mint_admin_token(&w.key, 600);
    let (_, a, _) = signup(r, "acme").await;
    let (_, b, _) = signup(r, "bravo").await;
    for name in ["j1", "j2", "j3"] {
        create(r, &a, name, None).await;
    }
    create(r, &b, "k1", None).await;
    let (s, o) = call(r, "GET", "/v1/admin/overview?limit=1000", Some(&admin), None).await;
    assert_eq!(s, StatusCode::OK, "{o}");
    assert_eq!(
        (o["limit"].as_u64(), o["journals"].as_array().unwrap().len(), o["journals_total"].as_u64()),
        (Some(2), 2, Some(4))
    );
    assert_eq!((o["tenants"].as_array().unwrap().len(), o["tenants_total"].as_u64()), (1, Some(2)));
    assert_eq!((o["machines"].as_array().unwrap().len(), o["machines_total"].as_u64()), (1, Some(5)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_tenant_traffic_refusals_by_reason_and_node_counters() {
    let w = world().await;
    let r = &w.router;
    let (tenant, owner, _) = signup(r, "acme").await;
    create(r, &owner, "orders", None).await;
    let before = scrape(r).await;

    // Traffic: 3 records of 3 + 0 + 5 bytes written; a duplicate retry adds nothing; a read
    // of all three and a read of the last one count 4 records and 13 bytes read.
    let batch = [b"abc".as_slice(), b"", b"hello"];
    claim_and_write(r, &owner, "orders", &batch).await;
    let records: Vec<String> = batch.iter().map(|b| STANDARD.encode(b)).collect();
    let (s, v) = call(
        r,
        "POST",
        "/v1/journals/orders/records",
        Some(&owner),
        Some(json!({"leader": A, "seq": 0, "records": records})),
    )
    .await;
    assert_eq!((s, v["outcome"].as_str()), (StatusCode::OK, Some("duplicate")));
    let (s, _) = call(r, "GET", "/v1/journals/orders/records?from=0", Some(&owner), None).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = call(r, "GET", "/v1/journals/orders/records?from=2", Some(&owner), None).await;
    assert_eq!(s, StatusCode::OK);

    let after = scrape(r).await;
    let series = |kind: &str, direction: &str| {
        format!("paros_gateway_tenant_{kind}_total{{tenant=\"{tenant}\",direction=\"{direction}\"}}")
    };
    assert_eq!(metric(&after, &series("records", "written")), 3.0);
    assert_eq!(metric(&after, &series("bytes", "written")), 8.0);
    assert_eq!(metric(&after, &series("records", "read")), 4.0);
    assert_eq!(metric(&after, &series("bytes", "read")), 13.0);
    assert_eq!(metric(&before, &series("records", "written")), 0.0);

    // Node counters: one series per node, moving with the traffic.
    for name in [
        "paros_gateway_node_rounds_total",
        "paros_gateway_node_syncs_total",
        "paros_gateway_node_campaigns_total",
        "paros_gateway_node_leaderships_won_total",
    ] {
        assert_eq!(family(&after, name).len(), 5, "three voters, two replicas: {name}: {:?}", family(&after, name));
    }
    let sum = |m: &BTreeMap<String, f64>, name| family(m, name).iter().map(|(_, v)| v).sum::<f64>();
    assert!(sum(&after, "paros_gateway_node_rounds_total") > sum(&before, "paros_gateway_node_rounds_total"));
    assert!(
        sum(&after, "paros_gateway_node_syncs_total") > sum(&before, "paros_gateway_node_syncs_total"),
        "the writes synced"
    );
    assert!(sum(&after, "paros_gateway_node_leaderships_won_total") >= 2.0, "the registry's and orders' leaders");
    assert!(
        sum(&after, "paros_gateway_node_campaigns_total") >= sum(&after, "paros_gateway_node_leaderships_won_total")
    );
    assert_eq!(family(&after, "paros_gateway_node_dormant_journals").len(), 5);

    // Each node's store: its bytes on disk are its directory's (compared when two scrapes
    // around one walk agree: the store's background work may change it meanwhile), and its
    // background work has a series per node.
    for (i, node) in w.cell.manifest.nodes.iter().enumerate() {
        let series = format!("paros_gateway_node_store_disk_bytes{{node=\"{node}\"}}");
        let mut seen = Vec::new();
        for _ in 0..50 {
            let before = metric(&scrape(r).await, &series);
            let on_disk = dir_bytes(&w.dir.path().join(format!("node-{i}"))) as f64;
            let after = metric(&scrape(r).await, &series);
            seen = vec![before, on_disk, after];
            if before > 0.0 && before == on_disk && on_disk == after {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(
            seen[0] > 0.0 && seen[0] == seen[1] && seen[1] == seen[2],
            "node {node}: reported, on disk, reported: {seen:?}"
        );
    }
    for name in [
        "paros_gateway_node_store_compactions_total",
        "paros_gateway_node_store_compaction_seconds_total",
        "paros_gateway_node_store_compactions_active",
        "paros_gateway_node_store_flushes_outstanding",
        "paros_gateway_node_store_log_tables",
        "paros_gateway_node_store_log_l0_tables",
        "paros_gateway_node_store_journal_files",
        "paros_gateway_node_store_room_waits_total",
        "paros_gateway_node_store_room_wait_seconds_total",
    ] {
        assert_eq!(family(&after, name).len(), 5, "three voters, two replicas: {name}: {:?}", family(&after, name));
    }
    assert!(sum(&after, "paros_gateway_node_store_journal_files") >= 3.0, "each database has its journal");

    // Refusals: each bad token counts under its own reason, and only there.
    let tenant_id = paros_core::TenantId(u64::from_str_radix(&tenant, 16).unwrap());
    let other = KeyPair::generate(KeyId::new("k1").unwrap());
    let stranger = KeyPair::generate(KeyId::new("k9").unwrap());
    let payload = owner.split('.').nth(1).unwrap().to_owned();
    let none_header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT","kid":"k1"}"#);
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&payload).unwrap()).unwrap();
    let mut hs_header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    hs_header.kid = Some("k1".into());
    let hs256 = jsonwebtoken::encode(
        &hs_header,
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(w.key.public_key().as_slice()).unwrap(),
    )
    .unwrap();
    let (s, v) = common::mint(r, &owner, json!({"scope": "read"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let revoked = v["token"].as_str().unwrap().to_owned();
    let (s, _) =
        call(r, "DELETE", &format!("/v1/tokens/{}", v["token_id"].as_str().unwrap()), Some(&owner), None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);

    let cases: Vec<(&str, Option<String>)> = vec![
        ("missing", None),
        ("malformed_header", Some("Basic abc".into())),
        ("not_jwt", Some("Bearer not-a-jwt".into())),
        ("wrong_algorithm", Some(format!("Bearer {none_header}.{payload}."))),
        ("wrong_algorithm", Some(format!("Bearer {hs256}"))),
        (
            "unknown_key",
            Some(format!(
                "Bearer {}",
                auth::mint_tenant_token(&stranger, tenant_id, Scope::Owner, None, auth::now_s() + 600).0
            )),
        ),
        (
            "bad_signature",
            Some(format!(
                "Bearer {}",
                auth::mint_tenant_token(&other, tenant_id, Scope::Owner, None, auth::now_s() + 600).0
            )),
        ),
        (
            "expired",
            Some(format!(
                "Bearer {}",
                auth::mint_tenant_token(&w.key, tenant_id, Scope::Owner, None, auth::now_s() - 2).0
            )),
        ),
        ("revoked", Some(format!("Bearer {revoked}"))),
    ];
    for (reason, header) in cases {
        let before = scrape(r).await;
        let mut req = axum::http::Request::get("/v1/journals");
        if let Some(h) = &header {
            req = req.header("authorization", h);
        }
        let response =
            tower::ServiceExt::oneshot(r.clone(), req.body(axum::body::Body::empty()).unwrap()).await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{reason}");
        let after = scrape(r).await;
        for (labels, value) in family(&after, "paros_gateway_auth_refusals_total") {
            let was = family(&before, "paros_gateway_auth_refusals_total")
                .iter()
                .find(|(l, _)| *l == labels)
                .map_or(0.0, |(_, v)| *v);
            let expected = if labels == format!("reason=\"{reason}\"}}") { was + 1.0 } else { was };
            assert_eq!(value, expected, "a {reason} token: {labels}");
        }
    }
    assert_eq!(
        family(&scrape(r).await, "paros_gateway_auth_refusals_total").len(),
        auth::Refusal::ALL.len(),
        "every reason is listed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_given_no_node_counters_shows_none() {
    let w = world_opts(test_config(), false).await;
    let r = &w.router;
    let m = scrape(r).await;
    assert!(!m.keys().any(|k| k.starts_with("paros_gateway_node_")), "no node families without the port");
    assert!(
        m.keys().any(|k| k.starts_with("paros_gateway_auth_refusals_total")),
        "the gateway's own families are there"
    );
    let admin = mint_admin_token(&w.key, 600);
    let (s, o) = call(r, "GET", "/v1/admin/overview", Some(&admin), None).await;
    assert_eq!(s, StatusCode::OK, "{o}");
    assert_eq!(o["node_counters"], false);
    assert_eq!(o["machines_total"], 5, "the registry still names the machines");
    assert!(o["machines"].as_array().unwrap().iter().all(|m| m["counters"].is_null()));
}
