//! Placement: spread across zones first, then least loaded, then by id; too few nodes is a
//! typed error.

mod common;

use std::collections::BTreeMap;

use common::*;
use paros_core::ids::NodeId;
use paros_registry::placement::{Candidate, PlacementError, candidates, place};
use paros_registry::{Command, Role, Standing};

fn cand(id: u64, z: &str, load: usize) -> Candidate {
    Candidate { id: NodeId(id), zone: zone(z), load }
}

fn ids(v: &[u64]) -> Vec<NodeId> {
    v.iter().map(|n| NodeId(*n)).collect()
}

#[test]
fn the_least_loaded_nodes_are_picked() {
    let c = [cand(1, "a", 5), cand(2, "b", 0), cand(3, "c", 2), cand(4, "a", 1), cand(5, "b", 9)];
    assert_eq!(place(&c, 3), Ok(ids(&[2, 3, 4])), "loads 0, 1 and 2 win over 5 and 9");
}

#[test]
fn among_equal_loads_zones_are_spread_before_ids() {
    let c = [cand(1, "a", 0), cand(2, "a", 0), cand(3, "a", 0), cand(4, "b", 0), cand(5, "c", 0)];
    assert_eq!(place(&c, 3), Ok(ids(&[1, 4, 5])), "one voter per zone when loads tie");
}

#[test]
fn ties_are_broken_by_id_deterministically() {
    let c = [cand(9, "a", 0), cand(3, "a", 0), cand(7, "a", 0), cand(5, "a", 0)];
    assert_eq!(place(&c, 3), Ok(ids(&[3, 5, 7])), "the smallest ids in one zone");
    let mut reversed = c.to_vec();
    reversed.reverse();
    assert_eq!(place(&reversed, 3), place(&c, 3), "the candidates' order does not matter");
}

#[test]
fn too_few_nodes_is_a_typed_error() {
    let c = [cand(1, "a", 0), cand(2, "b", 0)];
    assert_eq!(
        place(&c, 3),
        Err(PlacementError::TooFewNodes { wanted: 3, eligible: 2 }),
        "two nodes cannot hold three voters"
    );
    assert_eq!(place(&c, 0), Err(PlacementError::NoVoters), "zero voters is refused");
    let dup = [cand(1, "a", 0), cand(1, "a", 0), cand(2, "b", 0)];
    assert_eq!(
        place(&dup, 3),
        Err(PlacementError::TooFewNodes { wanted: 3, eligible: 2 }),
        "a candidate listed twice counts once"
    );
}

#[test]
fn only_registered_nodes_in_service_are_candidates_and_load_counts_live_journals() {
    let mut b = Book::formed();
    for (id, role) in [(4, Role::Node), (5, Role::Node), (6, Role::Replica), (7, Role::Gateway)] {
        assert!(b.run(register(id, role, "d")).is_accepted(), "machine {id} registers");
    }
    let drain = Command::SetStanding { machine: NodeId(5), standing: Standing::Draining };
    assert!(b.run(drain).is_accepted(), "node 5 drains");
    assert!(b.run(create(100, 1, "x", &[1, 2, 3])).is_accepted(), "a journal on 1, 2, 3");
    assert!(b.run(create(100, 2, "y", &[1, 2, 4])).is_accepted(), "a journal on 1, 2, 4");
    assert!(b.run(delete(100, "y")).is_accepted(), "deleted: its load is gone");
    let found = candidates(&b.dir, &BTreeMap::new());
    let summary: Vec<(u64, usize)> = found.iter().map(|c| (c.id.0, c.load)).collect();
    // Nodes 1, 2 and 3 hold the registry journal's seats besides.
    assert_eq!(summary, vec![(1, 2), (2, 2), (3, 2), (4, 0)], "nodes in service, with live load");
    let pending = BTreeMap::from([(NodeId(4), 3)]);
    let with_pending = candidates(&b.dir, &pending);
    assert_eq!(with_pending[3].load, 3, "pending placements count as load");
    assert_eq!(b.dir.journals_on(NodeId(1)).count(), 2, "node 1 holds one live journal and the registry's");
}

#[test]
fn placement_uses_admitted_nodes_and_spreads_zones_before_load() {
    let mut b = Book::formed();
    assert!(b.run(create(100, 1, "x", &[1, 2, 3])).is_accepted());
    assert!(b.run(admit(4, Role::Node, "a", 40)).is_accepted());
    assert!(b.run(admit(5, Role::Node, "a", 50)).is_accepted());
    let c = candidates(&b.dir, &BTreeMap::new());
    let picked = place(&c, 3).expect("placed");
    // Zone a has three nodes (1 loaded, 4 and 5 empty); b and c one loaded node each.
    assert_eq!(picked, vec![NodeId(2), NodeId(3), NodeId(4)], "one per zone, then the least loaded of zone a");
}

#[test]
fn zones_are_spread_before_load() {
    let c = [cand(1, "a", 0), cand(2, "a", 0), cand(3, "b", 5)];
    assert_eq!(place(&c, 2), Ok(ids(&[1, 3])), "a loaded node of another zone wins over an empty one of a used zone");
}
