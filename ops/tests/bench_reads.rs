//! `paros bench --readers` on the embedded cell: tail readers and random readers run beside the
//! writers, and the report carries their figures (and leaves them out without readers).

use std::process::{Command, Stdio};

mod common;

fn bench(extra: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_paros"))
        .args(["bench", "--writers", "2", "--journals", "2", "--duration-s", "2", "--json"])
        .args(extra)
        .output()
        .expect("paros bench runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[test]
fn readers_beside_the_writers_report_reads_latency_and_tail_visibility() {
    let report = bench(&["--readers", "2", "--read-limit", "1"]);
    assert_eq!(report["readers"], 2, "{report}");
    assert_eq!(report["read_limit"], 1, "{report}");
    assert_eq!(report["read_records"], report["reads"], "a point read holds one record: {report}");
    let (tail, all) = (report["tail_reads_per_s"].as_f64().unwrap(), report["all_reads_per_s"].as_f64().unwrap());
    assert!(tail > 0.0, "the tail reader's pages count: {report}");
    assert!((all - tail - report["reads_per_s"].as_f64().unwrap()).abs() < 1e-6, "{report}");
    assert_eq!(report["consistency"], "at_least", "{report}");
    assert!(report["acked_records"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(report["acked_records"], report["verified_records"], "{report}");
    let reads = report["reads"].as_u64().expect("reads");
    assert!(reads > 0, "{report}");
    assert!(report["reads_per_s"].as_f64().unwrap() > 0.0, "{report}");
    let latency = &report["read_latency_ms"];
    let (p50, p90, p99, max) = (
        latency["p50"].as_f64().expect("p50"),
        latency["p90"].as_f64().expect("p90"),
        latency["p99"].as_f64().expect("p99"),
        latency["max"].as_f64().expect("max"),
    );
    assert!(0.0 < p50 && p50 <= p90 && p90 <= p99 && p99 <= max, "{report}");
    let visible = &report["tail_visible_ms"];
    let (v50, v99) = (visible["p50"].as_f64().expect("p50"), visible["p99"].as_f64().expect("p99"));
    assert!(0.0 <= v50 && v50 <= v99, "{report}");
    assert!(report["tail_records"].as_u64().unwrap() > 0, "the tail readers saw records: {report}");
    let first = report["tail_seen_first_share"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&first), "{report}");
    assert!(report["reads_unserved"].as_u64().is_some(), "{report}");
    // In the cell every read names its server (the voters serve them all until the cell has
    // replicas).
    let share = report["served_by_replica_share"].as_f64().expect("a share in the cell");
    assert!((0.0..=1.0).contains(&share), "{report}");
    if std::fs::read_dir("/proc/self/task").is_ok() {
        assert!(report["voter_cpu_us_per_record"].as_f64().unwrap() > 0.0, "{report}");
    }
}

#[test]
fn linearizable_readers_are_reported_and_no_readers_leave_the_report_as_it_was() {
    let report = bench(&["--readers", "1", "--consistency", "linearizable"]);
    assert_eq!(report["consistency"], "linearizable", "{report}");
    assert_eq!(report["readers"], 1, "{report}");
    assert!(report.get("tail_visible_ms").is_some(), "the one reader follows the tail: {report}");
    let plain = bench(&[]);
    for field in ["readers", "reads", "read_latency_ms", "tail_visible_ms", "served_by_replica_share"] {
        assert!(plain.get(field).is_none(), "{field} without readers: {plain}");
    }
    assert!(plain["records_per_s"].as_f64().unwrap() > 0.0, "{plain}");
}

#[test]
fn readers_over_http_leave_what_the_gateway_does_not_say_null() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, url) = common::start_with(&dir.path().join("data"), &["--quota-requests-per-s", "1000000"]);
    let out = common::paros()
        .args(["bench", "--target", &url, "--writers", "2", "--journals", "2", "--duration-s", "2"])
        .args(["--readers", "2", "--json"])
        .stderr(Stdio::inherit())
        .output()
        .expect("paros bench runs");
    common::stop(dev);
    assert!(out.status.success(), "paros bench --target --readers failed");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(report["target"], "http", "{report}");
    assert!(report["reads"].as_u64().unwrap() > 0, "{report}");
    assert!(report["tail_records"].as_u64().unwrap() > 0, "{report}");
    for field in ["served_by_replica_share", "voter_cpu_us_per_record", "replica_cpu_us_per_record"] {
        assert!(report[field].is_null(), "{field} over HTTP: {report}");
    }
}

#[test]
fn paced_readers_read_at_the_rate_asked_and_no_faster() {
    // Two random readers at 400 pages a second together: 800 in 2 s. A closed loop in the cell
    // reads thousands a second (the test beside this one).
    let report = bench(&["--readers", "4", "--read-limit", "1", "--reads-per-s", "400"]);
    assert_eq!(report["reads_per_s_paced"], 400, "{report}");
    let rate = report["reads_per_s"].as_f64().expect("reads_per_s");
    // Below the pace by what a loaded machine's stalls cost (a reader forgets what it fell
    // behind by over 10 ms), never above it.
    assert!((200.0..=440.0).contains(&rate), "paced at 400 a second, read {rate}: {report}");
    assert_eq!(report["acked_records"], report["verified_records"], "{report}");
    let closed = bench(&["--readers", "4", "--read-limit", "1"]);
    assert!(closed["reads_per_s_paced"].is_null(), "{closed}");
    let unpaced = closed["reads_per_s"].as_f64().expect("reads_per_s");
    assert!(unpaced > 1000.0, "without a pace the same readers read far more ({unpaced} a second): {closed}");
    for bad in [&["--readers", "4", "--reads-per-s", "0"][..], &["--readers", "1", "--reads-per-s", "10"][..]] {
        let out = Command::new(env!("CARGO_BIN_EXE_paros"))
            .args(["bench", "--writers", "1", "--journals", "1", "--duration-s", "1", "--json"])
            .args(bad)
            .stdout(Stdio::null())
            .output()
            .expect("paros bench runs");
        assert!(!out.status.success(), "{bad:?} is refused");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--reads-per-s"), "{bad:?}: {stderr}");
    }
}
