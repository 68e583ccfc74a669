//! The planner: drain, heal and rebalance, each bounded; every planned move is one the fold
//! accepts, never puts two seats of a journal on one machine, never targets a machine that
//! may not take a seat or is presumed dead, and keeps zones spread when it can.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use paros_core::ids::NodeId;
use paros_registry::planner::{PlanConfig, PlannedMove, Seen, Why, plan};
use paros_registry::{Command, Directory, Role, Standing, Verdict};
use proptest::prelude::*;

fn node_standing(b: &mut Book, id: u64, standing: Standing) {
    assert!(b.run(Command::SetStanding { machine: NodeId(id), standing }).is_accepted(), "standing of {id}");
}

/// Records every planned move and completes it, as the coordinator will once the journal's
/// log decided it. Returns the moves.
fn carry_out(b: &mut Book, moves: &[PlannedMove]) {
    for m in moves {
        let v = b.run(m.command());
        assert!(v.is_accepted(), "the fold accepts every planned move: {m:?} → {v:?}");
        let epoch = b.dir.journal(m.journal).and_then(|j| j.moving).map(|s| s.epoch).expect("in progress");
        assert!(b.run(Command::MoveDone { journal: m.journal, epoch }).is_accepted(), "and its completion");
    }
}

/// Plans and carries out until the planner proposes nothing; returns every move, per call.
fn settle(b: &mut Book, config: &PlanConfig, seen: Seen<'_>) -> Vec<Vec<PlannedMove>> {
    let mut calls = Vec::new();
    for _ in 0..200 {
        let moves = plan(&b.dir, config, seen);
        if moves.is_empty() {
            return calls;
        }
        carry_out(b, &moves);
        calls.push(moves);
    }
    panic!("the planner did not settle in 200 calls");
}

fn loads(dir: &Directory, nodes: &[u64]) -> Vec<usize> {
    nodes.iter().map(|&n| dir.load(NodeId(n))).collect()
}

/// Nodes 1–6 in zones a, b, c, a, b, c, and `journals` journals on 1, 2, 3.
fn cell_of(journals: u64) -> Book {
    let mut b = Book::formed();
    for (id, z) in [(4, "a"), (5, "b"), (6, "c")] {
        assert!(b.run(admit(id, Role::Node, z, id * 10)).is_accepted());
    }
    for j in 0..journals {
        assert!(b.run(create(100, j, &format!("j{j}"), &[1, 2, 3])).is_accepted());
    }
    b
}

static NO_ONE: BTreeMap<NodeId, u64> = BTreeMap::new();

fn nobody_missing() -> Seen<'static> {
    Seen { now_s: 0, last_seen_s: &NO_ONE }
}

#[test]
fn a_draining_node_is_emptied_a_batch_at_a_time_within_its_zone() {
    let mut b = cell_of(10);
    node_standing(&mut b, 2, Standing::Draining);
    let config = PlanConfig { drain_batch_max: 3, ..PlanConfig::default() };
    let first = plan(&b.dir, &config, nobody_missing());
    assert_eq!(first.len(), 3, "one batch: {first:?}");
    assert!(first.iter().all(|m| m.why == Why::Drain && m.from == NodeId(2) && m.to == NodeId(5)), "zone b's node");
    // Recorded but not done: the batch is full, nothing more is planned.
    for m in &first {
        assert!(b.run(m.command()).is_accepted());
    }
    assert!(plan(&b.dir, &config, nobody_missing()).is_empty(), "the batch in flight fills the bound");
    for m in &first {
        let epoch = b.dir.journal(m.journal).and_then(|j| j.moving).map(|s| s.epoch).expect("moving");
        assert!(b.run(Command::MoveDone { journal: m.journal, epoch }).is_accepted());
    }
    let calls = settle(&mut b, &config, nobody_missing());
    assert!(calls.iter().all(|c| c.iter().filter(|m| m.why == Why::Drain).count() <= 3), "never more than a batch");
    assert_eq!(b.dir.load(NodeId(2)), 0, "drained");
    assert!(b.dir.journals().all(|j| j.voters.contains(&NodeId(5))), "each seat went to zone b");
}

/// Drained while another voter is gone, a journal's next voters would be a target still
/// catching up, a dead voter and one live one: it is healed first, then drained.
#[test]
fn a_journal_with_a_voter_gone_is_healed_before_it_is_drained() {
    let mut b = cell_of(3);
    node_standing(&mut b, 2, Standing::Draining);
    let config = PlanConfig {
        replace_after_s: 60,
        heal_moves_per_tick_max: 1,
        drain_batch_max: 3,
        rebalance_moves_per_tick_max: 0,
        ..PlanConfig::default()
    };
    let mut seen: BTreeMap<NodeId, u64> = (1..=6).map(|n| (NodeId(n), 1_000)).collect();
    seen.insert(NodeId(3), 900);
    let now = Seen { now_s: 1_000, last_seen_s: &seen };
    let first = plan(&b.dir, &config, now);
    assert!(
        matches!(first[..], [PlannedMove { why: Why::Heal, from: NodeId(3), .. }]),
        "one heal, no drain of a journal that lost a voter: {first:?}"
    );
    settle(&mut b, &config, now);
    assert_eq!((b.dir.load(NodeId(2)), b.dir.load(NodeId(3))), (0, 0), "healed, then drained");
}

/// A node down now, not yet long enough to be replaced, keeps its seats and takes none: a
/// seat moved to it would wait for it (and the registry journal's own could not move on).
#[test]
fn a_node_down_now_takes_no_seat() {
    let mut b = cell_of(3);
    node_standing(&mut b, 2, Standing::Draining);
    let config = PlanConfig { replace_after_s: 60, target_unseen_max_s: 2, ..PlanConfig::default() };
    let mut seen: BTreeMap<NodeId, u64> = (1..=6).map(|n| (NodeId(n), 1_000)).collect();
    seen.insert(NodeId(5), 997);
    let now = Seen { now_s: 1_000, last_seen_s: &seen };
    let planned = plan(&b.dir, &config, now);
    assert!(!planned.is_empty() && planned.iter().all(|m| m.to != NodeId(5)), "zone b's node is down: {planned:?}");
    assert!(planned.iter().all(|m| m.why == Why::Drain && m.from == NodeId(2)), "node 5 keeps what it has");
}

#[test]
fn a_node_unseen_for_replace_after_s_is_healed_journal_by_journal() {
    let mut b = cell_of(5);
    let config = PlanConfig {
        replace_after_s: 60,
        heal_moves_per_tick_max: 2,
        rebalance_moves_per_tick_max: 0,
        ..PlanConfig::default()
    };
    // The live nodes were seen last at 1,010 s, node 3 at 950 s.
    let mut seen: BTreeMap<NodeId, u64> = (1..=6).map(|n| (NodeId(n), 1_010)).collect();
    seen.insert(NodeId(3), 950);
    let early = Seen { now_s: 1_009, last_seen_s: &seen };
    assert!(plan(&b.dir, &config, early).iter().all(|m| m.why != Why::Heal), "59 s unseen: not yet");
    let late = Seen { now_s: 1_010, last_seen_s: &seen };
    let first = plan(&b.dir, &config, late);
    assert_eq!(first.len(), 2, "rate-limited: {first:?}");
    assert!(first.iter().all(|m| m.why == Why::Heal && m.from == NodeId(3) && m.to == NodeId(6)));
    let calls = settle(&mut b, &config, late);
    assert!(calls.iter().all(|c| c.len() <= 2), "at most two a call");
    assert_eq!(b.dir.load(NodeId(3)), 0, "the unseen node holds no seat");
    assert!(b.dir.journals().all(|j| j.epoch == paros_registry::Epoch(1)), "one move each");
}

#[test]
fn a_replaced_identity_is_healed_at_once_and_never_a_target() {
    let mut b = cell_of(4);
    assert!(b.run(rejoin(1, 9, "a", 90)).is_accepted());
    let calls = settle(&mut b, &PlanConfig::default(), nobody_missing());
    assert!(calls[0].iter().all(|m| m.why == Why::Heal && m.from == NodeId(1)), "healed first: {calls:?}");
    assert_eq!(b.dir.load(NodeId(1)), 0, "the old identity holds nothing");
    assert!(calls.iter().flatten().all(|m| m.to != NodeId(1)), "and is never a target");
    let spread = loads(&b.dir, &[4, 9]);
    // Four journals' seats and the registry journal's.
    assert_eq!(spread.iter().sum::<usize>(), 5, "zone a's seats went to 4 and the new identity 9: {spread:?}");
}

#[test]
fn an_admitted_node_takes_seats_until_loads_are_within_one() {
    let mut b = Book::formed();
    for j in 0..9 {
        assert!(b.run(create(100, j, &format!("j{j}"), &[1, 2, 3])).is_accepted());
    }
    assert!(b.run(admit(4, Role::Node, "a", 40)).is_accepted());
    let config = PlanConfig { rebalance_moves_per_tick_max: 2, ..PlanConfig::default() };
    let calls = settle(&mut b, &config, nobody_missing());
    assert!(calls.iter().all(|c| c.len() <= 2 && c.iter().all(|m| m.why == Why::Rebalance)), "{calls:?}");
    let l = loads(&b.dir, &[1, 4]);
    assert!(l[0].abs_diff(l[1]) <= 1, "zone a's two nodes within one: {l:?}");
    assert!(b.dir.journals().all(|j| j.voters.len() == 3), "voter counts unchanged");
    // Zone spread kept: every journal still has one voter per zone.
    for j in b.dir.journals() {
        let zones: BTreeSet<_> = j.voters.iter().map(|v| b.dir.machine(*v).map(|m| m.zone.clone())).collect();
        assert_eq!(zones.len(), 3, "{:?} spans three zones", j.voters);
    }
}

#[test]
fn nothing_is_rebalanced_while_moves_are_in_flight_and_the_total_is_bounded() {
    let mut b = cell_of(6);
    node_standing(&mut b, 2, Standing::Draining);
    let config = PlanConfig { moves_in_flight_max: 2, ..PlanConfig::default() };
    let first = plan(&b.dir, &config, nobody_missing());
    assert_eq!(first.len(), 2, "bounded by moves_in_flight_max");
    for m in &first {
        assert!(b.run(m.command()).is_accepted());
    }
    assert!(plan(&b.dir, &config, nobody_missing()).is_empty(), "the cell's bound is full");
}

// ---- properties -----------------------------------------------------------------------

/// A random cell: founders 1–3, admitted nodes 4–11 in random zones, journals on random
/// voters, some nodes draining, retired or replaced, some moves in progress, random liveness.
#[derive(Debug, Clone)]
struct World {
    extra: Vec<(u64, usize)>,
    journals: Vec<[u64; 3]>,
    standings: Vec<(u64, u8)>,
    rejoins: Vec<u64>,
    moves: Vec<(u64, u64, u64)>,
    last_seen: Vec<(u64, u64)>,
    config: (u64, usize, usize, usize, usize),
}

fn world() -> impl Strategy<Value = World> {
    (
        prop::collection::vec((4u64..12, 0usize..4), 0..8),
        prop::collection::vec(prop::array::uniform3(1u64..12), 0..24),
        prop::collection::vec((1u64..12, 0u8..3), 0..4),
        prop::collection::vec(1u64..12, 0..2),
        prop::collection::vec((0u64..24, 1u64..12, 1u64..13), 0..6),
        prop::collection::vec((1u64..13, 0u64..200), 0..12),
        (1u64..150, 0usize..5, 0usize..5, 0usize..5, 0usize..8),
    )
        .prop_map(|(extra, journals, standings, rejoins, moves, last_seen, config)| World {
            extra,
            journals,
            standings,
            rejoins,
            moves,
            last_seen,
            config,
        })
}

fn build(w: &World) -> (Book, PlanConfig, BTreeMap<NodeId, u64>) {
    let zones = ["a", "b", "c", "d"];
    let mut b = Book::formed();
    for &(id, z) in &w.extra {
        b.run(admit(id, Role::Node, zones[z], id));
    }
    for (j, v) in (0u64..).zip(&w.journals) {
        b.run(create(100, j, &format!("j{j}"), v));
    }
    for &(id, s) in &w.standings {
        let standing = [Standing::Registered, Standing::Draining, Standing::Retired][usize::from(s)];
        b.run(Command::SetStanding { machine: NodeId(id), standing });
    }
    for &old in &w.rejoins {
        b.run(rejoin(old, 100 + old, "d", old));
    }
    for &(j, from, to) in &w.moves {
        b.run(move_seat(100, j, from, to));
    }
    let (replace_after_s, drain, heal, rebalance, total) = w.config;
    let config = PlanConfig {
        replace_after_s,
        target_unseen_max_s: replace_after_s,
        drain_batch_max: drain,
        heal_moves_per_tick_max: heal,
        rebalance_moves_per_tick_max: rebalance,
        moves_in_flight_max: total,
    };
    let seen = w.last_seen.iter().map(|&(n, t)| (NodeId(n), t)).collect();
    (b, config, seen)
}

/// Whether `node` may take a seat and is not presumed dead: what the planner must respect.
fn may_take(dir: &Directory, seen: Seen<'_>, config: &PlanConfig, node: NodeId) -> bool {
    dir.machine(node).is_some_and(|m| m.role == Role::Node && m.standing == Standing::Registered && !m.is_replaced())
        && !seen.unseen(node, config.replace_after_s)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_plan_is_safe_bounded_spread_and_accepted_by_the_fold(w in world(), now in 0u64..300) {
        let (mut b, config, last_seen) = build(&w);
        let seen = Seen { now_s: now, last_seen_s: &last_seen };
        let moves = plan(&b.dir, &config, seen);
        prop_assert_eq!(&moves, &plan(&b.dir, &config, seen), "deterministic");
        let in_flight = b.dir.moves_in_progress().count();
        let mut planned = BTreeSet::new();
        for m in &moves {
            let j = b.dir.journal(m.journal).expect("a known journal");
            prop_assert!(j.is_live() && j.moving.is_none(), "no move for a journal already moving");
            prop_assert!(planned.insert(m.journal), "one move per journal");
            prop_assert!(j.voters.contains(&m.from), "from a seat it holds");
            prop_assert!(!j.voters.contains(&m.to), "never two seats of one journal on one machine");
            prop_assert!(may_take(&b.dir, seen, &config, m.to), "a target that may take a seat: {:?}", m);
            // Zones: no eligible alternative would have had fewer of the remaining voters in
            // its zone (heal and drain pick zones first; rebalance never loses a zone).
            let zone_of = |n: NodeId| b.dir.machine(n).map(|m| m.zone.clone());
            let remaining: Vec<NodeId> = j.voters.iter().copied().filter(|&v| v != m.from).collect();
            let crowd = |n: NodeId| remaining.iter().filter(|&&v| zone_of(v) == zone_of(n)).count();
            if m.why != Why::Rebalance {
                let best = b.dir.machines()
                    .filter(|c| !j.voters.contains(&c.id) && may_take(&b.dir, seen, &config, c.id))
                    .map(|c| crowd(c.id)).min();
                prop_assert_eq!(Some(crowd(m.to)), best, "the least crowded zone: {:?}", m);
            } else {
                let zones = |v: &mut dyn Iterator<Item = NodeId>| v.map(zone_of).collect::<BTreeSet<_>>().len();
                let after = zones(&mut j.voters.iter().map(|&v| if v == m.from { m.to } else { v }));
                prop_assert!(after >= zones(&mut j.voters.iter().copied()), "a rebalance keeps the zones");
            }
            let from = b.dir.machine(m.from).expect("a known voter");
            match m.why {
                Why::Heal => prop_assert!(
                    from.standing == Standing::Retired || seen.unseen(m.from, config.replace_after_s),
                    "healed off a gone node"
                ),
                Why::Drain => prop_assert_eq!(from.standing, Standing::Draining, "drained off a draining node"),
                Why::Rebalance => prop_assert!(in_flight == 0, "rebalanced only in a quiet cell"),
            }
        }
        let count = |why| moves.iter().filter(|m| m.why == why).count();
        prop_assert!(count(Why::Heal) <= config.heal_moves_per_tick_max, "heal bound");
        prop_assert!(count(Why::Rebalance) <= config.rebalance_moves_per_tick_max, "rebalance bound");
        let draining_in_flight = b.dir.moves_in_progress()
            .filter(|(_, s)| b.dir.machine(s.from).is_some_and(|m| m.standing == Standing::Draining && !m.is_replaced())
                && !seen.unseen(s.from, config.replace_after_s))
            .count();
        if count(Why::Drain) > 0 {
            prop_assert!(draining_in_flight + count(Why::Drain) <= config.drain_batch_max, "drain batch bound");
        }
        if !moves.is_empty() {
            prop_assert!(in_flight + moves.len() <= config.moves_in_flight_max, "the cell's bound");
        }
        for m in &moves {
            let v = b.run(m.command());
            prop_assert!(matches!(v, Verdict::Accepted(_)), "the fold accepts {:?}: {:?}", m, v);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Carried out call after call (each move recorded, then done), the plans end: no seat is
    /// left on a gone or draining node that some eligible node could take, and no two
    /// eligible nodes differ by two seats where a move would keep the zones.
    #[test]
    fn plans_carried_out_settle_with_no_seat_left_behind(w in world(), now in 0u64..300) {
        let (mut b, mut config, last_seen) = build(&w);
        config.heal_moves_per_tick_max = config.heal_moves_per_tick_max.max(1);
        config.drain_batch_max = config.drain_batch_max.max(1);
        config.moves_in_flight_max = config.moves_in_flight_max.max(1);
        let seen = Seen { now_s: now, last_seen_s: &last_seen };
        let pending: Vec<_> = b.dir.moves_in_progress().map(|(j, m)| (j.key, m.epoch)).collect();
        for (journal, epoch) in pending {
            prop_assert!(b.run(Command::MoveDone { journal, epoch }).is_accepted(), "completed");
        }
        settle(&mut b, &config, seen);
        for j in b.dir.journals().filter(|j| j.is_live()) {
            let open = b
                .dir
                .machines()
                .any(|m| !j.voters.contains(&m.id) && may_take(&b.dir, seen, &config, m.id));
            for v in j.voters.iter() {
                prop_assert!(
                    may_take(&b.dir, seen, &config, *v) || !open,
                    "{:?} keeps a seat on {:?} though a node could take it", j.key, v
                );
            }
        }
    }
}
