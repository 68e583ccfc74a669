//! Multi-node scenarios over the in-memory harness.

mod harness;

use harness::*;
use paros_core::journal::Outcome;
use paros_core::{Call, CallAnswer, Consistency, ReadAnswer, Seq};

#[test]
fn a_cluster_elects_one_leader() {
    for voters in [3, 5] {
        let mut c = Cluster::new(voters, 1, 7, Faults::LOSSY);
        let l = c.elect(300);
        c.run(20);
        let leaders: Vec<_> = c.cfg.voters.iter().filter(|v| c.voter(**v).is_leader()).collect();
        assert_eq!(leaders.len(), 1, "exactly one leader with a quorum, got {leaders:?}");
        let _ = l;
        c.assert_agreement();
    }
}

#[test]
fn writes_are_chosen_and_applied_identically_everywhere() {
    let mut c = Cluster::new(3, 1, 11, Faults::LOSSY);
    let a = uuid(0xa);
    assert!(matches!(c.call(Call::SetLeader { new: a, old: None }), Some(CallAnswer::Verdict(Outcome::Won(_)))));
    let mut next = 0;
    for i in 0..20 {
        let (seq, count) = accepted(c.call(write(a, next, recs(&format!("w{i}"), 3))));
        assert_eq!(seq, Seq(next));
        next += count;
    }
    c.settle(300);
    for id in c.machines.keys().copied().collect::<Vec<_>>() {
        assert_eq!(c.state_of(id).next_seq, Seq(60), "{id:?} folded every write");
    }
    let l = c.leader().unwrap();
    match c.read_at(l, Seq(57), Consistency::Linearizable, 50) {
        Some(ReadAnswer::Page { records, .. }) => assert_eq!(records, recs("w19", 3)),
        other => panic!("{other:?}"),
    }
    c.assert_agreement();
}
