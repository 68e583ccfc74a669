//! A real embedded cell in a tempdir, a gateway over it, and a small HTTP driver
//! (`tower::ServiceExt::oneshot` on the router: the same stack a listener serves).

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use http_body_util::BodyExt as _;
use paros_embedded::{EmbeddedCell, NodeSample};
use paros_gateway::{Gateway, GatewayConfig, KeyPair, NodeCounters, NodeStats, SigningKeys, StoreCounters};
use paros_registry::KeyId;
use serde_json::Value;
use tower::ServiceExt as _;

pub struct World {
    pub cell: EmbeddedCell,
    pub gateway: Gateway,
    pub router: Router,
    pub key: KeyPair,
    /// The cell's data directory (`node-<i>` per member).
    pub dir: tempfile::TempDir,
}

pub fn test_config() -> GatewayConfig {
    GatewayConfig {
        body_limit_bytes: 64 * 1024,
        write_records_max: 16,
        write_bytes_max: 4096,
        heartbeat_interval: Duration::from_millis(300),
        tails_per_tenant_max: 2,
        ..GatewayConfig::default()
    }
}

pub async fn world_with(config: GatewayConfig) -> World {
    world_opts(config, true).await
}

/// A world whose gateway is given the cell's node counters (as `paros dev` gives them) or not.
pub async fn world_opts(config: GatewayConfig, node_counters: bool) -> World {
    let dir = tempfile::tempdir().expect("a tempdir");
    // The registry records seat moves here and nothing carries them out (the mover and the
    // planner have no budget): the operator routes' tests see a recorded move as it is until
    // done, and fake machines they admit are never given seats.
    let defaults = paros_registry::daemon::CoordinatorLoopConfig::default();
    let loops = paros_registry::daemon::CoordinatorLoopConfig {
        mover: paros_registry::mover::MoverConfig { moves_max: 0, ..defaults.mover },
        plan: paros_registry::planner::PlanConfig { moves_in_flight_max: 0, ..defaults.plan },
        ..defaults
    };
    let cell = EmbeddedCell::open_configured(dir.path(), paros_embedded::EMBEDDED_MEMBERS, loops)
        .await
        .expect("the cell opens");
    cell.init().await.expect("the cell forms");
    cell.wait_followers(Duration::from_secs(10), |d| d.cell().is_some()).await.expect("followers fold the formation");
    let key = KeyPair::generate(KeyId::new("k1").expect("a key id"));
    let nodes: Option<Arc<dyn NodeStats>> = node_counters.then(|| {
        let reader = cell.stats_reader();
        Arc::new(move || reader.read().iter().map(sample_counters).collect::<Vec<_>>()) as Arc<dyn NodeStats>
    });
    let gateway = Gateway::start_with_nodes(
        cell.client.clone(),
        cell.coordinator(),
        cell.directory(),
        config,
        SigningKeys::new(key.clone()),
        nodes,
    )
    .await
    .expect("the gateway starts");
    let router = gateway.router();
    World { cell, gateway, router, key, dir }
}

/// An embedded node's sample in the gateway's port types (as `paros dev` converts it).
pub fn sample_counters(s: &NodeSample) -> NodeCounters {
    let (h, st) = (&s.host, &s.store);
    let node = NodeCounters {
        node: s.node,
        rounds: h.rounds,
        syncs: h.syncs,
        writes: h.writes,
        records_accepted: h.records_accepted,
        campaigns: h.campaigns,
        leaderships_won: h.leaderships_won,
        dormant: h.dormant,
        store: None,
        replica: s.replica.map(|(feed, state)| paros_gateway::ReplicaCounters {
            feed,
            state: match state {
                paros_replica::State::Bootstrapping => paros_gateway::ReplicaStateName::Bootstrapping,
                paros_replica::State::CatchingUp => paros_gateway::ReplicaStateName::CatchingUp,
                paros_replica::State::Serving => paros_gateway::ReplicaStateName::Serving,
            },
            lag_slots_max: h.replicas.lag_slots_max,
            lag_ms_max: h.replicas.lag_ms_max,
            ..paros_gateway::ReplicaCounters::default()
        }),
    };
    node.with_store(StoreCounters {
        compactions_completed: st.compactions_completed,
        compacting_us: st.compacting_us,
        compactions_active: st.compactions_active,
        flushes_outstanding: st.flushes_outstanding,
        log_tables: st.log_tables,
        log_l0_tables: st.log_l0_tables,
        journal_files: st.journal_files,
        room_waits: st.room_waits,
        room_waited_us: st.room_waited_us,
        disk_bytes: st.disk_bytes,
    })
}

pub async fn world() -> World {
    world_with(test_config()).await
}

/// One request: `(status, headers, body bytes)`.
pub async fn raw(
    router: &Router,
    method: &str,
    uri: &str,
    token: Option<&str>,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let mut b = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        b = b.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    if let Some(ct) = content_type {
        b = b.header(header::CONTENT_TYPE, ct);
    }
    let response = router.clone().oneshot(b.body(Body::from(body)).expect("a request")).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.expect("a body").to_bytes().to_vec();
    (status, headers, bytes)
}

/// One JSON request: `(status, body as JSON or Null)`.
pub async fn call(
    router: &Router,
    method: &str,
    uri: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let (ct, bytes) = match body {
        Some(v) => (Some("application/json"), serde_json::to_vec(&v).expect("json")),
        None => (None, Vec::new()),
    };
    let (status, _, bytes) = raw(router, method, uri, token, ct, bytes).await;
    let value = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap_or(Value::Null) };
    (status, value)
}

/// Signs up `name`: `(tenant id, owner token, token id)`.
pub async fn signup(router: &Router, name: &str) -> (String, String, String) {
    let (s, v) = call(router, "POST", "/v1/signup", None, Some(serde_json::json!({"name": name}))).await;
    assert_eq!(s, StatusCode::OK, "signup {name}: {v}");
    (
        v["tenant"].as_str().unwrap().to_owned(),
        v["token"].as_str().unwrap().to_owned(),
        v["token_id"].as_str().unwrap().to_owned(),
    )
}

pub async fn create(router: &Router, token: &str, name: &str, mode: Option<&str>) -> Value {
    let mut body = serde_json::json!({"name": name});
    if let Some(m) = mode {
        body["mode"] = Value::from(m);
    }
    let (s, v) = call(router, "POST", "/v1/journals", Some(token), Some(body)).await;
    assert_eq!(s, StatusCode::CREATED, "create {name}: {v}");
    v
}

pub async fn mint(router: &Router, token: &str, body: Value) -> (StatusCode, Value) {
    call(router, "POST", "/v1/tokens", Some(token), Some(body)).await
}

pub fn code(v: &Value) -> &str {
    v["code"].as_str().unwrap_or("")
}

/// Claims `name` for leader `leader` and writes `records` (base64) at seq 0: a journal with
/// records to read.
pub async fn claimed_with(router: &Router, token: &str, name: &str, leader: &str, records: &[&str]) {
    let (s, v) = call(
        router,
        "POST",
        &format!("/v1/journals/{name}/leader"),
        Some(token),
        Some(serde_json::json!({"new": leader, "old": null})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let body = serde_json::json!({"leader": leader, "seq": 0, "records": records});
    let (s, v) = call(router, "POST", &format!("/v1/journals/{name}/records"), Some(token), Some(body)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
}
