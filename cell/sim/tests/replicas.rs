//! Replicas join and leave the tier during a run: the reads a replica that joined served are in
//! the history the linearizability checker judges, and a removed replica serves nothing after.

use paros_core::ReadAnswer;
use paros_core::journal::WriterMode;
use paros_sim::check::linearizability::{self, Verdict};
use paros_sim::check::{Claim, OpOutput, PageBounds};
use paros_sim::{RunOptions, run_seed};

/// A seed in which a replica joins during the run and serves readers.
const JOINS: u64 = 7_000_005;
/// A seed in which a replica that served readers is retired during the run.
const LEAVES: u64 = 7_000_000;

#[test]
fn the_pages_a_replica_that_joined_served_are_judged_by_the_linearizability_checker() {
    let r = run_seed(JOINS, RunOptions { keep_history: true, ..RunOptions::default() });
    assert_eq!(r.claims.violations(), 0, "{:#?}", r.claims.details);
    let joined = r.joined.expect("a replica joins in this seed");
    assert!(r.claims.count(Claim::ReplicaJoins).reached > 0, "and serves a reader");
    let mode_of = |key| r.header.journals.iter().find(|j| j.key == key).map_or(WriterMode::Single, |j| j.mode);
    // A single-writer journal's page: its records name their positions, so a forged one is
    // caught whatever position it sits at.
    let served: Vec<usize> = (0..r.history.len())
        .filter(|i| {
            let op = &r.history[*i];
            op.server == Some(joined)
                && mode_of(op.journal) == WriterMode::Single
                && matches!(&op.output, Some(OpOutput::Read(ReadAnswer::Page { records, .. })) if !records.is_empty())
        })
        .collect();
    assert!(!served.is_empty(), "pages with records served by {joined:?} are in the history");
    // Change one record of one such page: the checker, judging the journal's whole history, must
    // see it (the page is in what it judges, not set aside as a replica's).
    let bounds = PageBounds { records_max: r.header.page_records_max, bytes_max: r.header.page_bytes_max };
    let i = served[0];
    let key = r.history[i].journal;
    let mode = mode_of(key);
    let mut ops: Vec<_> = r.history.iter().filter(|op| op.journal == key).cloned().collect();
    let honest = linearizability::check(&ops, mode, bounds, 2_000_000);
    assert!(matches!(honest, Verdict::Linearizable { .. }), "the run's history is linearizable: {honest:?}");
    let at = ops.iter().position(|op| op.call_index == r.history[i].call_index).expect("the op is the journal's");
    if let Some(OpOutput::Read(ReadAnswer::Page { records, .. })) = &mut ops[at].output {
        records[0] = bytes::Bytes::from_static(b"never written");
    }
    let forged = linearizability::check(&ops, mode, bounds, 2_000_000);
    assert!(matches!(forged, Verdict::Violation { .. }), "a forged page from the new replica is caught: {forged:?}");
}

#[test]
fn a_removed_replica_drops_its_tiers_journals_while_readers_read_on() {
    let r = run_seed(LEAVES, RunOptions { keep_history: true, ..RunOptions::default() });
    assert_eq!(r.claims.violations(), 0, "{:#?}", r.claims.details);
    let retired = r.retired.expect("a replica is retired in this seed");
    let leaves = r.claims.count(Claim::ReplicaLeaves);
    assert!(leaves.checked > 0 && leaves.reached > 0, "the removal was judged and reached: {leaves:?}");
    assert!(
        r.history.iter().any(|op| op.server == Some(retired) && op.client.starts_with('r')),
        "readers used {retired:?} before it left"
    );
}
