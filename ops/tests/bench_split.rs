//! `paros bench --json` on the embedded cell reports where its rounds spent their time, fjall's
//! activity and one window per second, and the figures agree with each other.

use std::process::Command;

#[test]
fn the_in_cell_bench_reports_the_round_split_and_per_second_windows() {
    let out = Command::new(env!("CARGO_BIN_EXE_paros"))
        .args(["bench", "--writers", "4", "--journals", "2", "--duration-s", "3", "--json"])
        .output()
        .expect("paros bench runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let split = &report["round_split"];
    let rounds = split["rounds"].as_u64().expect("rounds");
    assert!(rounds > 0, "{report}");
    for part in ["queue", "write", "sync", "hop"] {
        let (p50, p99, max) = (
            split[part]["p50_us"].as_u64().unwrap(),
            split[part]["p99_us"].as_u64().unwrap(),
            split[part]["max_us"].as_u64().unwrap(),
        );
        assert!(p50 <= p99 && p99 <= max, "{part}: {report}");
    }
    assert!(split["sync"]["p50_us"].as_u64().unwrap() > 0, "a sync takes time: {report}");
    let windows = report["windows"].as_array().expect("windows");
    assert!((2..=3).contains(&windows.len()), "one window per whole second: {report}");
    let in_windows: u64 = windows.iter().map(|w| w["records"].as_u64().unwrap()).sum();
    let batches = report["acked_records"].as_u64().unwrap(); // batch 1: one record a write
    assert!(in_windows <= batches && in_windows > 0, "{report}");
    let ratio = report["min_window_ratio"].as_f64().unwrap();
    assert!(ratio > 0.0 && ratio <= 1.0, "{report}");
    assert!(
        report["store_compactions"].as_u64().is_some() && report["store_compacting_s"].as_f64().is_some(),
        "{report}"
    );
}

#[test]
fn idle_journals_report_their_placement_time_and_memory() {
    let out = Command::new(env!("CARGO_BIN_EXE_paros"))
        .args([
            "bench",
            "--writers",
            "1",
            "--journals",
            "1",
            "--duration-s",
            "1",
            "--idle-journals",
            "300",
            "--dormant-after-s",
            "1",
            "--json",
        ])
        .output()
        .expect("paros bench runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(report["idle_journals"], 300, "{report}");
    let placed = report["idle_placement_s"].as_f64().expect("idle_placement_s");
    assert!(placed > 0.0 && placed < 60.0, "{report}");
    assert!(report["rss_peak_bytes"].as_u64().unwrap() > 0, "{report}");
}

#[test]
fn the_in_cell_bench_splits_its_cpu_per_record_by_thread_role() {
    let out = Command::new(env!("CARGO_BIN_EXE_paros"))
        .args(["bench", "--writers", "4", "--journals", "2", "--duration-s", "2", "--json"])
        .output()
        .expect("paros bench runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let split = report["target_cpu_split"].as_object().expect("target_cpu_split");
    let roles: Vec<&str> = split.keys().map(String::as_str).collect();
    assert_eq!(roles, ["node", "other", "read", "runtime", "store"], "{report}");
    assert!(split["node"].as_f64().unwrap() > 0.0, "the node threads worked: {report}");
    let total = report["target_cpu_us_per_record"].as_f64().unwrap();
    let sum: f64 = split.values().map(|v| v.as_f64().unwrap()).sum();
    assert!(total > 0.0 && (total - sum).abs() < 1e-6 * total.max(1.0), "{report}");
}
