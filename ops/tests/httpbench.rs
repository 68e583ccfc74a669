//! `paros bench --target`: the benchmark driving a running `paros dev` over HTTP — a fresh
//! tenant, its journals created through the API, every acknowledged record read back.

use std::process::Stdio;

mod common;

use common::{paros, start, stop};

#[test]
fn bench_over_http_against_paros_dev_verifies_every_acknowledged_record() {
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
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
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
