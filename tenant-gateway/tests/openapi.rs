//! The OpenAPI document says what the routes answer (regressions from schemathesis runs
//! against `paros dev`, ops/scripts/schemathesis.sh): the content types served, the tail's
//! events, the statuses the layers add to every route, and request shapes as strict as the
//! parsers.

mod common;

use axum::http::StatusCode;
use serde_json::Value;

use common::{create, raw, signup, world};

const AUTHENTICATED: [&str; 17] = [
    "post /v1/tokens",
    "delete /v1/tokens/{token_id}",
    "post /v1/journals",
    "get /v1/journals",
    "get /v1/journals/{name}",
    "delete /v1/journals/{name}",
    "post /v1/journals/{name}/leader",
    "post /v1/journals/{name}/records",
    "get /v1/journals/{name}/records",
    "post /v1/journals/{name}/truncate",
    "get /v1/journals/{name}/tail",
    "get /v1/admin/overview",
    "get /v1/admin/cell",
    "post /v1/admin/machines",
    "post /v1/admin/machines/{node}/drain",
    "post /v1/admin/machines/{node}/retire",
    "post /v1/admin/journals/{tenant}/{journal}/move",
];

async fn document(r: &axum::Router) -> Value {
    let (s, _, body) = raw(r, "GET", "/v1/openapi.json", None, None, Vec::new()).await;
    assert_eq!(s, StatusCode::OK);
    serde_json::from_slice(&body).expect("the document is JSON")
}

fn operation<'a>(doc: &'a Value, route: &str) -> &'a Value {
    let (method, path) = route.split_once(' ').expect("`method path`");
    let op = &doc["paths"][path][method];
    assert!(op.is_object(), "{route} is documented");
    op
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_is_documented_with_the_content_types_it_serves() {
    let w = world().await;
    let doc = document(&w.router).await;
    let documented: Vec<&String> =
        operation(&doc, "get /metrics")["responses"]["200"]["content"].as_object().unwrap().keys().collect();
    let mut served = Vec::new();
    for accept in ["*/*", "application/openmetrics-text"] {
        let request = axum::http::Request::get("/metrics").header("accept", accept);
        let response = tower::ServiceExt::oneshot(w.router.clone(), request.body(axum::body::Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let content_type = response.headers()["content-type"].to_str().unwrap();
        served.push(content_type.split(';').next().unwrap().trim().to_owned());
    }
    assert_eq!(served, ["text/plain", "application/openmetrics-text"], "Prometheus text unless asked");
    let mut documented: Vec<String> = documented.into_iter().cloned().collect();
    documented.sort();
    served.sort();
    assert_eq!(documented, served, "schemathesis found /metrics documented with another type than served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tail_documents_each_event_not_a_string() {
    let w = world().await;
    let doc = document(&w.router).await;
    let schema =
        &operation(&doc, "get /v1/journals/{name}/tail")["responses"]["200"]["content"]["text/event-stream"]["schema"];
    let events: Vec<(&str, &str)> = schema["oneOf"]
        .as_array()
        .expect("one schema per event")
        .iter()
        .map(|e| {
            assert_eq!(e["type"], "object", "an event is an object of its fields: {e}");
            assert_eq!(e["properties"]["data"]["contentMediaType"], "application/json");
            (
                e["properties"]["event"]["const"].as_str().unwrap(),
                e["properties"]["data"]["contentSchema"]["$ref"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            ("records", "#/components/schemas/Page"),
            ("gap", "#/components/schemas/Gap"),
            ("heartbeat", "#/components/schemas/Heartbeat")
        ]
    );
    for name in ["Page", "Gap", "Heartbeat"] {
        assert!(doc["components"]["schemas"][name].is_object(), "{name} is a component");
    }

    // And a real tail's first event is what the document says: a heartbeat with an id.
    let (_, owner, _) = signup(&w.router, "acme").await;
    create(&w.router, &owner, "orders", None).await;
    let mut request = axum::http::Request::get("/v1/journals/orders/tail?from=0");
    request = request.header("authorization", format!("Bearer {owner}"));
    let response =
        tower::ServiceExt::oneshot(w.router.clone(), request.body(axum::body::Body::empty()).unwrap()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let frame = tokio::time::timeout(std::time::Duration::from_secs(5), http_body_util::BodyExt::frame(&mut body))
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let text = String::from_utf8(frame.into_data().unwrap().to_vec()).unwrap();
    assert!(text.contains("event: heartbeat") && text.contains("id: 0") && text.contains("data: {"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_documents_the_statuses_its_layers_answer() {
    let w = world().await;
    let doc = document(&w.router).await;
    for route in AUTHENTICATED {
        let op = operation(&doc, route);
        let responses = op["responses"].as_object().unwrap();
        let mut need = vec!["401", "403", "429", "503"];
        if op.get("requestBody").is_some() {
            need.extend(["400", "413"]);
        }
        if route.contains("{name}") {
            need.extend(["400", "404"]);
        }
        for status in need {
            let response = responses.get(status).unwrap_or_else(|| panic!("{route} documents {status}"));
            let body = &response["content"]["application/json"]["schema"];
            assert_eq!(body["$ref"], "#/components/schemas/ErrorBody", "{route} {status}");
        }
        assert!(responses["429"]["headers"]["Retry-After"].is_object(), "{route}: 429 carries Retry-After");
    }
    // A route that commits to the registry or the cell may answer 504 `ambiguous`.
    for route in [
        "post /v1/signup",
        "delete /v1/tokens/{token_id}",
        "post /v1/journals",
        "delete /v1/journals/{name}",
        "post /v1/journals/{name}/leader",
        "post /v1/journals/{name}/records",
        "post /v1/journals/{name}/truncate",
    ] {
        assert!(operation(&doc, route)["responses"]["504"].is_object(), "{route} documents 504");
    }
    // Read's 503 for a `min_seq` not reached in time.
    assert!(operation(&doc, "get /v1/journals/{name}/records")["responses"]["503"].is_object());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bodies_are_documented_as_strictly_as_they_are_parsed() {
    let w = world().await;
    let doc = document(&w.router).await;
    let schemas = &doc["components"]["schemas"];
    for name in [
        "SignupRequest",
        "MintTokenRequest",
        "CreateJournalRequest",
        "SetLeaderRequest",
        "WriteRequest",
        "TruncateRequest",
        "AdmitRequest",
        "MoveRequest",
    ] {
        let s = &schemas[name];
        assert_eq!(s["additionalProperties"], false, "{name}: an unknown field is 400");
        for (field, prop) in s["properties"].as_object().unwrap() {
            let nullable = prop["type"].as_array().is_some_and(|t| t.iter().any(|t| t == "null"));
            // The contract: an optional field given `null` is 400, except SetLeader's `old`.
            assert_eq!(nullable, (name, field.as_str()) == ("SetLeaderRequest", "old"), "{name}.{field}: {prop}");
        }
    }
    let old = &schemas["SetLeaderRequest"];
    assert!(old["required"].as_array().unwrap().iter().any(|f| f == "old"), "SetLeader's old is required");
    assert_eq!(schemas["MintTokenRequest"]["properties"]["scope"]["$ref"], "#/components/schemas/Scope");
    assert_eq!(schemas["Scope"]["enum"], serde_json::json!(["owner", "write", "read"]));
    assert!(schemas["WriteRequest"]["properties"]["records"]["items"]["pattern"].is_string(), "records are base64");
    let tier = &schemas["CreateJournalRequest"]["properties"]["tier"];
    assert_eq!(tier["pattern"], "^[a-z0-9][a-z0-9-]{0,62}$", "a journal's tier is a tier name: {tier}");
    let info = &schemas["JournalInfo"];
    assert!(info["required"].as_array().unwrap().iter().any(|f| f == "tier"), "a journal always shows its tier");
    assert_eq!(info["properties"]["tier"]["type"], serde_json::json!(["string", "null"]), "a name or null");
    let view = &schemas["View"];
    assert!(view["required"].as_array().unwrap().iter().any(|f| f == "leader"), "a view always carries its leader");
    let error = &schemas["ErrorBody"];
    assert_eq!(error["properties"]["code"]["$ref"], "#/components/schemas/ErrorCode");
    assert!(
        error["properties"]["view"].get("oneOf").is_none() && error["properties"]["view"]["type"] != "null",
        "absent, never null"
    );
    assert_eq!(error["properties"]["applied_to"]["$ref"], "#/components/schemas/Seq", "a read 503's position");
    assert!(!error["required"].as_array().unwrap().iter().any(|f| f == "applied_to"), "absent when unknown");

    let read = operation(&doc, "get /v1/journals/{name}/records");
    for param in read["parameters"].as_array().unwrap() {
        let schema = &param["schema"];
        match param["name"].as_str().unwrap() {
            "name" => assert!(schema["pattern"].is_string()),
            "limit" | "max_bytes" => assert_eq!(schema["minimum"], 1),
            "wait_ms" => assert_eq!(schema["maximum"], 1000),
            "consistency" => assert_eq!(schema["enum"], serde_json::json!(["linearizable", "at_least"])),
            _ => {}
        }
    }
}

/// A JSON-Schema checker for the subset the served document uses (`$ref`, `oneOf`, `type`,
/// `enum`, `const`, `pattern`, `minimum`, `maximum`, `properties`, `required`,
/// `additionalProperties`, `items`; annotations such as `description` and `format` are
/// skipped, as JSON Schema 2020-12 treats `format` by default). A keyword outside that subset
/// fails the check, so the checker cannot pass a schema it does not understand.
///
/// It is stricter than JSON Schema in one way: a property an object schema does not list is
/// an error even without `additionalProperties: false`, since the test is that every field a
/// paros-api type serializes is documented.
mod schema_check {
    use serde_json::Value;

    const ANNOTATIONS: [&str; 8] =
        ["description", "title", "format", "examples", "example", "default", "deprecated", "contentMediaType"];

    pub fn errors(doc: &Value, schema: &Value, value: &Value, at: &str) -> Vec<String> {
        let mut out = Vec::new();
        check(doc, schema, value, at, &mut out);
        out
    }

    fn check(doc: &Value, schema: &Value, value: &Value, at: &str, out: &mut Vec<String>) {
        let Some(keywords) = schema.as_object() else {
            out.push(format!("{at}: the schema {schema} is not an object"));
            return;
        };
        for (keyword, rule) in keywords {
            match keyword.as_str() {
                "$ref" => {
                    let target = rule.as_str().and_then(|r| r.strip_prefix("#/components/schemas/"));
                    match target.map(|name| &doc["components"]["schemas"][name]) {
                        Some(s) if s.is_object() => check(doc, s, value, at, out),
                        _ => out.push(format!("{at}: {rule} names no component")),
                    }
                }
                "oneOf" => {
                    let matching =
                        rule.as_array().into_iter().flatten().filter(|s| errors(doc, s, value, at).is_empty()).count();
                    if matching != 1 {
                        out.push(format!("{at}: {value} matches {matching} of oneOf {rule}, not exactly one"));
                    }
                }
                "type" => {
                    let allowed: Vec<&str> = match rule {
                        Value::String(t) => vec![t.as_str()],
                        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                        _ => Vec::new(),
                    };
                    if !allowed.iter().any(|t| has_type(value, t)) {
                        out.push(format!("{at}: {value} is not of type {rule}"));
                    }
                }
                "enum" => {
                    if !rule.as_array().is_some_and(|vs| vs.contains(value)) {
                        out.push(format!("{at}: {value} is not one of {rule}"));
                    }
                }
                "const" => {
                    if rule != value {
                        out.push(format!("{at}: {value} is not {rule}"));
                    }
                }
                "pattern" => {
                    let re = regex_lite::Regex::new(rule.as_str().unwrap_or_default())
                        .expect("the document's patterns compile");
                    if let Some(text) = value.as_str().filter(|text| !re.is_match(text)) {
                        out.push(format!("{at}: {text:?} does not match {rule}"));
                    }
                }
                "minimum" | "maximum" => {
                    if let (Some(n), Some(bound)) = (value.as_number(), rule.as_number()) {
                        let below = compare(n, bound).is_lt();
                        let above = compare(n, bound).is_gt();
                        if (keyword == "minimum" && below) || (keyword == "maximum" && above) {
                            out.push(format!("{at}: {n} is past its {keyword} {bound}"));
                        }
                    }
                }
                "required" => {
                    for field in rule.as_array().into_iter().flatten().filter_map(Value::as_str) {
                        if value.is_object() && value.get(field).is_none() {
                            out.push(format!("{at}: the required field {field:?} is missing"));
                        }
                    }
                }
                "properties" => {
                    let (Some(fields), Some(props)) = (value.as_object(), rule.as_object()) else { continue };
                    for (field, v) in fields {
                        match props.get(field) {
                            Some(s) => check(doc, s, v, &format!("{at}.{field}"), out),
                            None => out.push(format!("{at}: the field {field:?} is serialized but not documented")),
                        }
                    }
                }
                "additionalProperties" => {
                    if rule != &Value::Bool(false) {
                        out.push(format!("{at}: additionalProperties {rule} is outside the checked subset"));
                    }
                }
                "items" => {
                    for (i, item) in value.as_array().into_iter().flatten().enumerate() {
                        check(doc, rule, item, &format!("{at}[{i}]"), out);
                    }
                }
                other if ANNOTATIONS.contains(&other) => {}
                other => out.push(format!("{at}: the keyword {other:?} is outside the checked subset")),
            }
        }
        if value.is_object()
            && keywords.get("type").is_some_and(|t| t == "object")
            && !keywords.contains_key("properties")
        {
            out.push(format!("{at}: an object schema with no properties documents none of {value}"));
        }
    }

    fn has_type(value: &Value, t: &str) -> bool {
        match t {
            "null" => value.is_null(),
            "boolean" => value.is_boolean(),
            "string" => value.is_string(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            "integer" => value.is_u64() || value.is_i64(),
            "number" => value.is_number(),
            _ => false,
        }
    }

    /// Compares two JSON numbers exactly when both are integers (a u64 above 2^53 included).
    fn compare(a: &serde_json::Number, b: &serde_json::Number) -> std::cmp::Ordering {
        let int = |n: &serde_json::Number| n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
        match (int(a), int(b)) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => a.as_f64().unwrap_or(f64::NAN).total_cmp(&b.as_f64().unwrap_or(f64::NAN)),
        }
    }
}

/// Every body schema the document names (request bodies, JSON answers, the tail's events).
fn body_components(doc: &Value) -> std::collections::BTreeSet<String> {
    fn refs(v: &Value, out: &mut std::collections::BTreeSet<String>) {
        match v {
            Value::Object(m) => {
                if let Some(name) =
                    m.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/components/schemas/"))
                {
                    out.insert(name.to_owned());
                }
                m.values().for_each(|v| refs(v, out));
            }
            Value::Array(vs) => vs.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let mut names = std::collections::BTreeSet::new();
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            refs(&op["requestBody"], &mut names);
            refs(&op["responses"], &mut names);
        }
    }
    names
}

/// Real values of each paros-api body type, serialized by the type's own serde code, edge
/// values included: an empty record, `leader: null`, positions above 2^53, every error code.
fn samples() -> Vec<(&'static str, Vec<Value>)> {
    use std::num::NonZeroU64;

    use paros_api::*;

    fn v<T: serde::Serialize>(values: &[T]) -> Vec<Value> {
        values.iter().map(|t| serde_json::to_value(t).expect("a body serializes")).collect()
    }
    let big = (1u64 << 53) + 1;
    let uuid = LeaderUuid::parse("0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b").unwrap();
    let top = LeaderUuid::new(u128::MAX).unwrap();
    let views = [JournalView::NEW, JournalView { leader: Some(uuid), first_seq: Seq(big), next_seq: Seq(u64::MAX) }];
    let records: Vec<Record> =
        [&b""[..], b"f", b"fo", b"foo", &(0..=255).collect::<Vec<u8>>()].into_iter().map(Record::from).collect();
    let journal = JournalName::parse("Orders.v2_eu-1").unwrap();
    let tenant = TenantName::parse(&"a".repeat(TenantName::LEN_MAX)).unwrap();
    let (token, token_id) = (Token::parse("eyJhbGciOiJFZERTQSJ9.e30.sig").unwrap(), TokenId::parse("t-01~!").unwrap());
    let info = |mode, tier: Option<&str>| JournalInfo {
        name: journal.clone(),
        mode,
        view: views[1],
        tier: tier.map(String::from),
    };
    let limits = Limits { max_records: 16, max_bytes: big, max_body_bytes: u64::MAX };
    let mut errors: Vec<ErrorBody> = ErrorCode::ALL.iter().map(|&c| ErrorBody::new(c, "")).collect();
    errors.push(ErrorBody::new(ErrorCode::TooLarge, "over").with_view(views[0]).with_limits(limits));
    errors.push(ErrorBody::new(ErrorCode::Refused, "not the writer").with_view(views[1]));
    errors.push(ErrorBody::new(ErrorCode::Unavailable, "not applied").with_applied_to(Some(Seq(big))));
    vec![
        ("ErrorBody", v(&errors)),
        (
            "SignupRequest",
            v(&[SignupRequest { name: tenant.clone() }, SignupRequest { name: TenantName::parse("0").unwrap() }]),
        ),
        (
            "SignupAnswer",
            v(&[SignupAnswer {
                tenant: TenantId::parse("tn_1").unwrap(),
                name: tenant,
                token: token.clone(),
                token_id: token_id.clone(),
                expires_at: big,
            }]),
        ),
        (
            "MintTokenRequest",
            v(&[
                MintTokenRequest { scope: Scope::Owner, journal: None, expires_in_s: None },
                MintTokenRequest {
                    scope: Scope::Write,
                    journal: Some(journal.clone()),
                    expires_in_s: NonZeroU64::new(1),
                },
                MintTokenRequest { scope: Scope::Read, journal: None, expires_in_s: NonZeroU64::new(big) },
            ]),
        ),
        ("TokenAnswer", v(&[TokenAnswer { token, token_id, expires_at: 0 }])),
        (
            "CreateJournalRequest",
            v(&[WriterMode::SingleWriter, WriterMode::MultiWriter]
                .map(|m| CreateJournalRequest { name: journal.clone(), mode: Some(m), tier: None })
                .into_iter()
                .chain([CreateJournalRequest { name: journal.clone(), mode: None, tier: None }])
                .chain([CreateJournalRequest { name: journal.clone(), mode: None, tier: Some("t".repeat(63)) }])
                .collect::<Vec<_>>()),
        ),
        ("JournalInfo", v(&[info(WriterMode::SingleWriter, Some("default")), info(WriterMode::MultiWriter, None)])),
        (
            "JournalList",
            v(&[
                JournalList { journals: Vec::new() },
                JournalList { journals: vec![info(WriterMode::MultiWriter, Some("gold"))] },
            ]),
        ),
        (
            "SetLeaderRequest",
            v(&[SetLeaderRequest { new: uuid, old: None }, SetLeaderRequest { new: top, old: Some(uuid) }]),
        ),
        ("SetLeaderAnswer", v(&views.map(|view| SetLeaderAnswer { outcome: SetLeaderVerdict::Won, view }))),
        (
            "WriteRequest",
            v(&[
                WriteRequest::fenced(uuid, Seq(big), records.clone()),
                WriteRequest::append(vec![Record::default()]),
                WriteRequest::append(Vec::new()),
            ]),
        ),
        (
            "WriteAnswer",
            v(&[
                WriteAnswer { outcome: WriteVerdict::Accepted, seq: Seq(big), count: 5, view: views[1] },
                WriteAnswer { outcome: WriteVerdict::Duplicate, seq: Seq(0), count: 0, view: views[0] },
            ]),
        ),
        (
            "Page",
            v(&[
                Page { from: Seq(big), records, view: views[1] },
                Page { from: Seq(0), records: Vec::new(), view: views[0] },
            ]),
        ),
        ("Gap", v(&[Gap { from: Seq(1), resumed_at: Seq(u64::MAX), view: views[1] }])),
        ("Heartbeat", v(&views.map(|view| Heartbeat { view, caught_up: view.leader.is_none() }))),
        (
            "TruncateRequest",
            v(&[
                TruncateRequest { leader: Some(uuid), up_to: Seq(big) },
                TruncateRequest { leader: None, up_to: Seq(0) },
            ]),
        ),
        ("TruncateAnswer", v(&views.map(|view| TruncateAnswer { outcome: TruncateVerdict::Trimmed, view }))),
        (
            "ReadyBody",
            v(&[
                paros_gateway::ReadyBody { node: "00000000000000ff".into(), ready: true, state: "serving" },
                paros_gateway::ReadyBody { node: "0000000000000001".into(), ready: false, state: "unknown" },
            ]),
        ),
        ("MachineStateBody", v(&[paros_gateway::MachineStateBody { node: "00000000000000ff".into(), state: "down" }])),
        (
            "OperatorErrorBody",
            v(&paros_gateway::OperatorCode::ALL
                .iter()
                .map(|c| paros_gateway::OperatorErrorBody { code: c.as_str(), message: String::new() })
                .chain(
                    ErrorCode::ALL
                        .iter()
                        .map(|c| paros_gateway::OperatorErrorBody { code: c.as_str(), message: "m".into() }),
                )
                .collect::<Vec<_>>()),
        ),
        (
            "CellMachineBody",
            v(&[
                paros_gateway::CellMachineBody {
                    node: "00000000000000a1".into(),
                    role: "node",
                    zone: "z1".into(),
                    bus_address: "mem:a1".into(),
                    tier: None,
                    standing: "retired",
                    incarnation: Some("0000000000000077".into()),
                    replaced_by: Some("00000000000000a2".into()),
                    replaces: None,
                    liveness: "unseen",
                    seen_s_ago: Some(u64::MAX),
                    seats: 0,
                    joining: 1,
                },
                paros_gateway::CellMachineBody {
                    node: "00000000000000a2".into(),
                    role: "replica",
                    zone: "z1".into(),
                    bus_address: "mem:a2".into(),
                    tier: Some("gold".into()),
                    standing: "registered",
                    incarnation: None,
                    replaced_by: None,
                    replaces: Some("00000000000000a1".into()),
                    liveness: "unknown",
                    seen_s_ago: None,
                    seats: big,
                    joining: 0,
                },
            ]),
        ),
        (
            "SeatMoveBody",
            v(&[paros_gateway::SeatMoveBody {
                journal: "acme/orders".into(),
                tenant: "00000000000000aa".into(),
                from: "0000000000000001".into(),
                to: "00000000000000d1".into(),
                epoch: big,
                recorded_at: u64::MAX,
            }]),
        ),
        (
            "AdmitRequest",
            v(&[paros_gateway::AdmitRequest {
                id: "a1".into(),
                role: paros_gateway::RoleName::Replica,
                bus_address: "127.0.0.1:7000".into(),
                zone: "z-1".into(),
                incarnation: "FFFFFFFFFFFFFFFF".into(),
            }]),
        ),
        ("MoveRequest", v(&[paros_gateway::MoveRequest { from: "1".into(), to: "00000000000000d1".into() }])),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_body_type_serializes_to_what_its_schema_documents() {
    let w = world().await;
    let doc = document(&w.router).await;
    let mut checked = std::collections::BTreeSet::new();
    for (name, values) in samples() {
        let schema = &doc["components"]["schemas"][name];
        assert!(schema.is_object(), "{name} is a component");
        for value in values {
            let errors = schema_check::errors(&doc, schema, &value, name);
            assert!(errors.is_empty(), "{value} against {name}:\n{}", errors.join("\n"));
        }
        checked.insert(name.to_owned());
    }
    // The overview's body: a live answer, with a tenant, a journal and a write in it.
    let (_, owner, _) = common::signup(&w.router, "acme").await;
    common::create(&w.router, &owner, "orders", None).await;
    let admin = paros_gateway::mint_admin_token(&w.key, 60);
    let (status, overview) = common::call(&w.router, "GET", "/v1/admin/overview", Some(&admin), None).await;
    assert_eq!(status, axum::http::StatusCode::OK);
    assert_eq!(overview["journals"].as_array().map(Vec::len), Some(1), "{overview}");
    let errors = schema_check::errors(&doc, &doc["components"]["schemas"]["OverviewBody"], &overview, "OverviewBody");
    assert!(errors.is_empty(), "{overview} against OverviewBody:\n{}", errors.join("\n"));
    checked.insert("OverviewBody".to_owned());
    // The cell status: a live answer, with a seat move and a journal below full strength.
    let (s, _) = common::call(
        &w.router,
        "POST",
        "/v1/admin/machines",
        Some(&admin),
        Some(serde_json::json!({"id": "d1", "role": "node", "bus_address": "m", "zone": "z", "incarnation": "1"})),
    )
    .await;
    assert_eq!(s, axum::http::StatusCode::CREATED);
    let d = w.cell.directory().borrow().directory.clone().unwrap();
    let from = d.journals().find(|j| j.name.as_str() == "orders").unwrap().voters[0].to_string();
    let body = serde_json::json!({"from": from, "to": "d1"});
    let (s, _) = common::call(&w.router, "POST", "/v1/admin/journals/acme/orders/move", Some(&admin), Some(body)).await;
    assert_eq!(s, axum::http::StatusCode::ACCEPTED);
    let (s, _) =
        common::call(&w.router, "POST", &format!("/v1/admin/machines/{from}/retire"), Some(&admin), None).await;
    assert_eq!(s, axum::http::StatusCode::OK);
    let (status, cell) = common::call(&w.router, "GET", "/v1/admin/cell", Some(&admin), None).await;
    assert_eq!(status, axum::http::StatusCode::OK);
    // Orders and the registry journal, both voted for by the retired founder.
    assert_eq!((cell["moves_total"].as_u64(), cell["below_full_strength_total"].as_u64()), (Some(1), Some(2)));
    let errors = schema_check::errors(&doc, &doc["components"]["schemas"]["CellStatusBody"], &cell, "CellStatusBody");
    assert!(errors.is_empty(), "{cell} against CellStatusBody:\n{}", errors.join("\n"));
    checked.insert("CellStatusBody".to_owned());
    let mut named = body_components(&doc);
    named.extend(["Page", "Gap", "Heartbeat"].map(String::from));
    let unchecked: Vec<_> = named.difference(&checked).collect();
    assert!(unchecked.is_empty(), "body schemas with no sample values here: {unchecked:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wire_bodies_the_parsers_refuse_the_schemas_refuse_too() {
    use paros_api::*;
    use serde_json::json;

    fn refused<T: serde::de::DeserializeOwned>(doc: &Value, name: &str, bodies: &[Value]) {
        for body in bodies {
            assert!(serde_json::from_value::<T>(body.clone()).is_err(), "paros-api refuses {body} as {name}");
            let errors = schema_check::errors(doc, &doc["components"]["schemas"][name], body, name);
            assert!(!errors.is_empty(), "the {name} schema refuses {body}");
        }
    }
    let w = world().await;
    let doc = document(&w.router).await;
    let uuid = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";
    refused::<SignupRequest>(
        &doc,
        "SignupRequest",
        &[json!({"name": "Acme"}), json!({"name": "acme", "plan": 1}), json!({})],
    );
    refused::<MintTokenRequest>(
        &doc,
        "MintTokenRequest",
        &[
            json!({"scope": "admin"}),
            json!({"scope": "read", "journal": null}),
            json!({"scope": "read", "expires_in_s": 0}),
        ],
    );
    refused::<CreateJournalRequest>(
        &doc,
        "CreateJournalRequest",
        &[
            json!({"name": ".hidden"}),
            json!({"name": "a", "mode": null}),
            json!({"name": "a", "tier": null}),
            json!({"name": "a", "tier": "Gold"}),
            json!({"name": "a", "tier": ""}),
        ],
    );
    refused::<SetLeaderRequest>(
        &doc,
        "SetLeaderRequest",
        &[json!({"new": uuid}), json!({"new": uuid.to_uppercase(), "old": null}), json!({"new": uuid, "old": 7})],
    );
    refused::<WriteRequest>(
        &doc,
        "WriteRequest",
        &[
            json!({"records": ["Zg"]}),
            json!({"records": ["-_8="]}),
            json!({"leader": null, "records": []}),
            json!({"seq": -1, "leader": uuid, "records": []}),
            json!({"seq": 1.5, "leader": uuid, "records": []}),
            json!({"records": [], "fence": 1}),
        ],
    );
    refused::<TruncateRequest>(
        &doc,
        "TruncateRequest",
        &[json!({"up_to": "5"}), json!({"leader": uuid}), json!({"up_to": 1, "x": 0})],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_says_what_it_means() {
    let w = world().await;
    let doc = document(&w.router).await;
    let mut silent = Vec::new();
    for (path, methods) in doc["paths"].as_object().unwrap() {
        for (method, op) in methods.as_object().unwrap() {
            for (status, response) in op["responses"].as_object().unwrap() {
                let said = response["description"].as_str().unwrap_or("");
                // A readiness probe's 503 is its own body, not the error body: no code to name.
                let body = response["content"]["application/json"]["schema"]["$ref"].as_str().unwrap_or("");
                if body.ends_with("/ReadyBody") && !said.trim().is_empty() {
                    continue;
                }
                let names = match status.as_str() {
                    "409" => {
                        let mut names = vec!["refused", "lost", "truncate_refused", "wrong_mode", "name_taken"];
                        names.extend(paros_gateway::OperatorCode::ALL.iter().map(|c| c.as_str()));
                        names
                    }
                    "410" => vec!["truncated"],
                    "413" => vec!["too_large"],
                    "429" => vec!["over_quota"],
                    "503" => vec!["unavailable"],
                    "504" => vec!["ambiguous"],
                    _ => vec![],
                };
                if said.trim().is_empty() || !(names.is_empty() || names.iter().any(|n| said.contains(n))) {
                    silent.push(format!("{method} {path} {status}: {said:?}"));
                }
            }
        }
    }
    assert!(silent.is_empty(), "responses that do not say what they mean: {silent:#?}");
}
