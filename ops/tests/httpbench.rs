//! `paros bench --target`: the benchmark driving a running `paros dev` over HTTP — a fresh
//! tenant, its journals created through the API, every acknowledged record read back.

use std::process::Stdio;

mod common;

use common::{paros, start, stop};

/// `paros bench --target` with 4 writers on 2 journals for 2 s against a fresh `paros dev`: its
/// JSON report.
fn bench_against_paros_dev() -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let (dev, url) = start(&dir.path().join("data"));
    let out = paros()
        .args(["bench", "--target", &url, "--writers", "4", "--journals", "2", "--duration-s", "2", "--json"])
        .stderr(Stdio::inherit())
        .output()
        .expect("paros bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    stop(dev);
    assert!(out.status.success(), "paros bench --target failed: {stdout}");
    serde_json::from_str(stdout.trim()).expect("one JSON object")
}

#[test]
fn bench_over_http_against_paros_dev_verifies_every_acknowledged_record() {
    let report = bench_against_paros_dev();
    assert_eq!(report["target"], "http");
    let acked = report["acked_records"].as_u64().expect("acked_records");
    assert!(acked > 0, "{report}");
    assert_eq!(report["verified_records"].as_u64(), Some(acked), "{report}");
    assert_eq!(report["writers"], 4);
    assert_eq!(report["journals"], 2);
    assert_eq!(report["journals_created"], 2, "a fresh tenant's journals are created over HTTP");
    assert!(report["records_per_s"].as_f64().unwrap() > 0.0, "{report}");
    assert!(report["p50_us"].as_u64().unwrap() > 0, "{report}");
}

#[test]
fn token_without_target_is_refused() {
    let out = paros().args(["bench", "--token", "x", "--duration-s", "1"]).output().expect("runs");
    assert!(!out.status.success());
}

#[test]
fn bench_over_http_reports_the_gateway_process_cpu_per_record_by_thread_role() {
    let report = bench_against_paros_dev();
    let split = report["target_cpu_split"].as_object().expect("target_cpu_split");
    let roles: Vec<&str> = split.keys().map(String::as_str).collect();
    assert_eq!(roles, ["node", "other", "read", "runtime", "store"], "{report}");
    assert!(split["runtime"].as_f64().unwrap() > 0.0, "the gateway's own threads worked: {report}");
    assert!(split["node"].as_f64().unwrap() > 0.0, "paros dev's node threads worked: {report}");
    let total = report["target_cpu_us_per_record"].as_f64().expect("target_cpu_us_per_record");
    let sum: f64 = split.values().map(|v| v.as_f64().unwrap()).sum();
    assert!(total > 0.0 && (total - sum).abs() < 1e-6 * total.max(1.0), "{report}");
    assert!(report["cpu_us_per_record"].as_f64().unwrap() > 0.0, "the client's own CPU: {report}");
}
