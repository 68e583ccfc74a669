//! The history file `replay --history` writes says what docs/sim-history.md says it does: a
//! header line, then one line per call with every field, and one strictly increasing order of
//! every call and return.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

const SEED: u64 = 5;

fn export(seed: u64) -> Vec<Value> {
    let path = std::env::temp_dir().join(format!("paros-sim-history-{seed}-{}.jsonl", std::process::id()));
    let status = Command::new(env!("CARGO_BIN_EXE_paros-sim"))
        .args(["replay", "--seed", &seed.to_string(), "--history"])
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("the runner starts");
    assert!(status.success(), "replay of seed {seed} holds every claim");
    let text = std::fs::read_to_string(&path).expect("the history file was written");
    let _ = std::fs::remove_file(&path);
    text.lines().map(|l| serde_json::from_str(l).expect("every line is one JSON object")).collect()
}

fn index(v: &Value, field: &str) -> Option<u64> {
    let f = &v[field];
    assert!(f.is_u64() || f.is_null(), "`{field}` is a number or null: {v}");
    f.as_u64()
}

#[test]
fn an_exported_history_has_a_header_and_every_field_and_one_event_order() {
    let lines = export(SEED);
    let (header, ops) = lines.split_first().expect("a header line");
    let h = &header["header"];
    assert_eq!(h["format"], "paros-sim-history/4");
    assert_eq!(h["seed"], SEED);
    for field in [
        "tick_ns",
        "call_timeout_ns",
        "page_records_max",
        "page_bytes_max",
        "write_records_max",
        "write_bytes_max",
        "wait_ticks_max",
        "read_ticks_max",
    ] {
        assert!(h[field].as_u64().is_some_and(|n| n > 0), "the header names `{field}`: {h}");
    }
    let journals: BTreeSet<&str> = h["journals"]
        .as_array()
        .expect("the header lists the journals")
        .iter()
        .map(|j| {
            assert!(j["mode"] == "single" || j["mode"] == "multi", "a journal's writer mode: {j}");
            assert!(j["voters"].as_array().is_some_and(|v| !v.is_empty()), "a journal's voters: {j}");
            j["journal"].as_str().expect("a journal's name")
        })
        .collect();
    assert!(ops.len() > 100, "seed {SEED}'s clients called the cell");
    let mut seen = BTreeSet::new();
    let mut last_call = 0;
    let (mut ties, mut probes, mut reports) = (0, 0, 0);
    let returns: BTreeSet<u64> = ops.iter().filter_map(|o| o["return"].as_u64()).collect();
    for op in ops {
        for field in [
            "journal",
            "client",
            "op",
            "input",
            "output",
            "call",
            "return",
            "call_index",
            "return_index",
            "to",
            "server",
            "probe",
            "report",
        ] {
            assert!(op.get(field).is_some(), "every call line has `{field}`: {op}");
        }
        assert!(journals.contains(op["journal"].as_str().expect("a journal")), "the journal is in the header: {op}");
        let call = index(op, "call_index").expect("every call has an index");
        assert!(call > last_call, "lines are in call order and call indices strictly increase: {op}");
        last_call = call;
        assert!(seen.insert(call), "an index names one event");
        let answered = !op["output"].is_null();
        assert_eq!(op["return"].is_null(), !answered, "a return time iff an answer: {op}");
        assert_eq!(op["server"].is_null(), !answered, "a server iff an answer: {op}");
        match index(op, "return_index") {
            Some(r) => {
                assert!(answered && r > call, "a return comes after its call: {op}");
                assert!(seen.insert(r), "an index names one event");
            }
            None => assert!(!answered, "an answered call has a return index: {op}"),
        }
        if op["op"] == "read" {
            for field in ["from", "limit", "max_bytes", "wait_ticks", "consistency"] {
                assert!(op["input"].get(field).is_some(), "a read's input has `{field}`: {op}");
            }
        }
        if !op["report"].is_null() {
            reports += 1;
            assert_eq!(op["op"], "read", "only reads carry a reader's report: {op}");
            let r = &op["report"];
            assert!(
                r == "nothing" || r.get("records").is_some() || r.get("gap").is_some(),
                "a report is records, a gap or nothing: {op}"
            );
        }
        ties += usize::from(op["call"].as_u64().is_some_and(|t| returns.contains(&t)));
        probes += usize::from(!op["probe"].is_null());
    }
    assert!(ties > 0, "some call was sent at the nanosecond a call returned: the indices order them");
    assert!(probes > 0, "seed {SEED} sends probes");
    assert!(reports > 0, "seed {SEED}'s readers report what they read");
}
