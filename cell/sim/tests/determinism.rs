//! A seed replays bit for bit.

use paros_sim::{RunOptions, run_seed};

#[test]
fn the_same_seed_twice_gives_the_same_trace() {
    for seed in [7, 1234] {
        let a = run_seed(seed, RunOptions::default());
        let b = run_seed(seed, RunOptions::default());
        assert_eq!(a.hash, b.hash, "seed {seed} replays to the same trace digest");
        assert_eq!((a.events, a.sim_ns), (b.events, b.sim_ns), "seed {seed} replays the same events");
        assert_eq!(a.claims.to_string(), b.claims.to_string(), "seed {seed} replays the same claim counters");
    }
}

#[test]
fn different_seeds_give_different_traces() {
    let a = run_seed(11, RunOptions::default());
    let b = run_seed(12, RunOptions::default());
    assert_ne!(a.hash, b.hash, "two seeds draw two different worlds");
}

#[test]
fn a_kept_history_is_the_one_the_run_checked() {
    let r = run_seed(5, RunOptions { keep_history: true, ..RunOptions::default() });
    assert!(!r.history.is_empty(), "the clients called the cell");
    for op in &r.history {
        let line = op.to_json();
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
            assert!(line.get(field).is_some(), "every history line has `{field}`: {line}");
        }
        assert_eq!(line["output"].is_null(), op.output.is_none(), "a call without an answer has a null output");
    }
}
