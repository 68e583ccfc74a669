//! The OpenAPI document says what the routes answer (regressions from schemathesis runs
//! against `paros dev`, ops/scripts/schemathesis.sh): the content types served, the tail's
//! events, the statuses the layers add to every route, and request shapes as strict as the
//! parsers.

mod common;

use axum::http::StatusCode;
use serde_json::Value;

use common::{create, raw, signup, world};

const AUTHENTICATED: [&str; 12] = [
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
async fn metrics_is_documented_with_the_content_type_it_serves() {
    let w = world().await;
    let doc = document(&w.router).await;
    let (s, headers, _) = raw(&w.router, "GET", "/metrics", None, None, Vec::new()).await;
    assert_eq!(s, StatusCode::OK);
    let served = headers["content-type"].to_str().unwrap().split(';').next().unwrap().trim().to_owned();
    let documented: Vec<&String> = operation(&doc, "get /metrics")["responses"]["200"]["content"].as_object().unwrap().keys().collect();
    assert_eq!(documented, [&served], "schemathesis found /metrics documented as text/plain");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tail_documents_each_event_not_a_string() {
    let w = world().await;
    let doc = document(&w.router).await;
    let schema = &operation(&doc, "get /v1/journals/{name}/tail")["responses"]["200"]["content"]["text/event-stream"]["schema"];
    let events: Vec<(&str, &str)> = schema["oneOf"]
        .as_array()
        .expect("one schema per event")
        .iter()
        .map(|e| {
            assert_eq!(e["type"], "object", "an event is an object of its fields: {e}");
            assert_eq!(e["properties"]["data"]["contentMediaType"], "application/json");
            (e["properties"]["event"]["const"].as_str().unwrap(), e["properties"]["data"]["contentSchema"]["$ref"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        events,
        [("records", "#/components/schemas/Page"), ("gap", "#/components/schemas/Gap"), ("heartbeat", "#/components/schemas/Heartbeat")]
    );
    for name in ["Page", "Gap", "Heartbeat"] {
        assert!(doc["components"]["schemas"][name].is_object(), "{name} is a component");
    }

    // And a real tail's first event is what the document says: a heartbeat with an id.
    let (_, owner, _) = signup(&w.router, "acme").await;
    create(&w.router, &owner, "orders", None).await;
    let mut request = axum::http::Request::get("/v1/journals/orders/tail?from=0");
    request = request.header("authorization", format!("Bearer {owner}"));
    let response = tower::ServiceExt::oneshot(w.router.clone(), request.body(axum::body::Body::empty()).unwrap()).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let frame = tokio::time::timeout(std::time::Duration::from_secs(5), http_body_util::BodyExt::frame(&mut body)).await.unwrap().unwrap().unwrap();
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
            let body = &responses.get(status).unwrap_or_else(|| panic!("{route} documents {status}"))["content"]["application/json"]["schema"];
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
    for name in ["SignupRequest", "MintTokenRequest", "CreateJournalRequest", "SetLeaderRequest", "WriteRequest", "TruncateRequest"] {
        let s = &schemas[name];
        assert_eq!(s["additionalProperties"], false, "{name}: an unknown field is 400");
        for (field, prop) in s["properties"].as_object().unwrap() {
            let nullable = prop["type"].as_array().is_some_and(|t| t.iter().any(|t| t == "null"));
            // API.md: an optional field given `null` is 400, except SetLeader's `old`.
            assert_eq!(nullable, (name, field.as_str()) == ("SetLeaderRequest", "old"), "{name}.{field}: {prop}");
        }
    }
    let old = &schemas["SetLeaderRequest"];
    assert!(old["required"].as_array().unwrap().iter().any(|f| f == "old"), "SetLeader's old is required");
    assert_eq!(schemas["MintTokenRequest"]["properties"]["scope"]["$ref"], "#/components/schemas/Scope");
    assert_eq!(schemas["Scope"]["enum"], serde_json::json!(["owner", "write", "read"]));
    assert!(schemas["WriteRequest"]["properties"]["records"]["items"]["pattern"].is_string(), "records are base64");
    let view = &schemas["View"];
    assert!(view["required"].as_array().unwrap().iter().any(|f| f == "leader"), "a view always carries its leader");
    let error = &schemas["ErrorBody"];
    assert_eq!(error["properties"]["code"]["$ref"], "#/components/schemas/ErrorCode");
    assert!(error["properties"]["view"].get("oneOf").is_none() && error["properties"]["view"]["type"] != "null", "absent, never null");

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
