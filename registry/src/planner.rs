//! The planner: which seats to move next — drain, heal, rebalance. Pure and deterministic.
//!
//! [`plan`] reads the directory, the time and when each machine was last seen (the caller's
//! liveness: the planner holds no clock and hears no one), and proposes the next seat moves,
//! each a [`Command::MoveSeat`] the fold accepts. It never moves a journal that has a move in
//! progress, proposes at most one move per journal, and never targets a machine that may not
//! take a seat (not a node, draining, retired, replaced), that is presumed dead, or that is
//! down now (unseen for [`PlanConfig::target_unseen_max_s`]). Every
//! bound is a [`PlanConfig`] field with a default. In priority order:
//!
//! 1. **Heal**: a node unseen for [`PlanConfig::replace_after_s`], and a retired or replaced
//!    node (gone for good), has its seats moved to live nodes, journal by journal, at most
//!    [`PlanConfig::heal_moves_per_tick_max`] per call; journals that lost the most voters go
//!    first, then by key.
//! 2. **Drain**: the seats of draining nodes move off, with at most
//!    [`PlanConfig::drain_batch_max`] journals moving off draining nodes at once (the moves in
//!    progress in the directory count); a journal with a voter gone waits for its heal.
//! 3. **Rebalance** (after an admit, or whenever loads drift): only when no move is in
//!    progress or planned, seats move from the most loaded eligible node to the least loaded,
//!    at most [`PlanConfig::rebalance_moves_per_tick_max`] per call, until their loads are
//!    within one — and only moves that keep the journal's voters spread over as many zones.
//!
//! Overall, moves in progress plus moves planned stay within
//! [`PlanConfig::moves_in_flight_max`]. A target is chosen like a placement
//! ([`crate::placement`]): the fewest of the journal's remaining voters in its zone, then the
//! least load, then the smallest id. Load here is where seats will be once every move in
//! progress and planned is done.

use std::collections::{BTreeMap, BTreeSet};

use paros_core::ids::{JournalKey, NodeId};

use crate::command::{Command, Role, Standing};
use crate::directory::{Directory, Journal};
use crate::names::Zone;

/// The planner's bounds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PlanConfig {
    /// Seconds a node may go unseen before its seats are moved to live nodes.
    pub replace_after_s: u64,
    /// A node unseen this long (and not yet for `replace_after_s`) keeps its seats but takes
    /// none: a seat moved to a machine that is down waits for it, and the registry journal's
    /// own seat could not move on at all.
    pub target_unseen_max_s: u64,
    /// The most journals moving seats off draining nodes at once (in progress and planned).
    pub drain_batch_max: usize,
    /// The most heal moves one call plans.
    pub heal_moves_per_tick_max: usize,
    /// The most rebalance moves one call plans.
    pub rebalance_moves_per_tick_max: usize,
    /// The most seat moves in progress in the cell at once, whatever their reason.
    pub moves_in_flight_max: usize,
}

impl Default for PlanConfig {
    fn default() -> Self {
        PlanConfig {
            replace_after_s: 300,
            target_unseen_max_s: 1,
            drain_batch_max: 16,
            heal_moves_per_tick_max: 8,
            rebalance_moves_per_tick_max: 4,
            moves_in_flight_max: 64,
        }
    }
}

/// What the planner knows of liveness: the time now and when machines were last seen, in
/// the caller's seconds. A node without an entry is not judged unseen (the caller enters
/// every machine, at the time it started watching, before it can say one is gone).
#[derive(Clone, Copy, Debug)]
pub struct Seen<'a> {
    pub now_s: u64,
    pub last_seen_s: &'a BTreeMap<NodeId, u64>,
}

impl Seen<'_> {
    /// Whether `node` went unseen for `after_s` seconds or more.
    #[must_use]
    pub fn unseen(&self, node: NodeId, after_s: u64) -> bool {
        self.last_seen_s.get(&node).is_some_and(|&t| self.now_s.saturating_sub(t) >= after_s)
    }
}

/// Why a move is planned.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Why {
    /// `from` is gone: unseen for `replace_after_s`, retired, or replaced.
    Heal,
    /// `from` is draining.
    Drain,
    /// `from` holds more seats than `to` by two or more.
    Rebalance,
}

/// One planned seat move.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PlannedMove {
    pub journal: JournalKey,
    pub from: NodeId,
    pub to: NodeId,
    pub why: Why,
}

impl PlannedMove {
    /// The command that records it.
    #[must_use]
    pub fn command(&self) -> Command {
        Command::MoveSeat { journal: self.journal, from: self.from, to: self.to }
    }
}

/// A node's part in planning.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Part {
    /// May take seats.
    Eligible,
    /// Draining: its seats move off, a batch at a time.
    Draining,
    /// Gone (unseen too long, retired, replaced): its seats move off first.
    Gone,
    /// Down for a while ([`PlanConfig::target_unseen_max_s`]): keeps its seats, takes none.
    Down,
}

/// The planner's working view of the cell.
struct Cell<'d> {
    parts: BTreeMap<NodeId, Part>,
    zones: BTreeMap<NodeId, &'d Zone>,
    /// Seats each node will hold once every move in progress and planned is done.
    load: BTreeMap<NodeId, usize>,
    /// Journals with a move in progress or planned.
    busy: BTreeSet<JournalKey>,
}

impl<'d> Cell<'d> {
    fn new(directory: &'d Directory, config: &PlanConfig, seen: Seen<'_>) -> Self {
        let mut parts = BTreeMap::new();
        let mut zones = BTreeMap::new();
        let mut load = BTreeMap::new();
        for m in directory.machines_by_role(Role::Node) {
            let part =
                if m.standing == Standing::Retired || m.is_replaced() || seen.unseen(m.id, config.replace_after_s) {
                    Part::Gone
                } else if m.standing == Standing::Draining {
                    Part::Draining
                } else if seen.unseen(m.id, config.target_unseen_max_s) {
                    Part::Down
                } else {
                    Part::Eligible
                };
            parts.insert(m.id, part);
            zones.insert(m.id, &m.zone);
            load.insert(m.id, directory.load(m.id));
        }
        let mut busy = BTreeSet::new();
        for (j, m) in directory.moves_in_progress() {
            busy.insert(j.key);
            if let Some(l) = load.get_mut(&m.from) {
                *l = l.saturating_sub(1);
            }
        }
        Cell { parts, zones, load, busy }
    }

    fn part(&self, node: NodeId) -> Option<Part> {
        self.parts.get(&node).copied()
    }

    fn load(&self, node: NodeId) -> usize {
        self.load.get(&node).copied().unwrap_or(0)
    }

    /// The target for `journal`'s seat on `leaving`: see the module doc.
    fn target(&self, journal: &Journal, leaving: NodeId) -> Option<NodeId> {
        let remaining: Vec<NodeId> = journal.voters.iter().copied().filter(|&v| v != leaving).collect();
        let in_zone = |z: &Zone| remaining.iter().filter(|v| self.zones.get(v).is_some_and(|vz| *vz == z)).count();
        self.parts
            .iter()
            .filter(|&(id, part)| *part == Part::Eligible && !journal.voters.contains(id))
            .map(|(&id, _)| (self.zones.get(&id).map_or(0, |z| in_zone(z)), self.load(id), id))
            .min()
            .map(|(_, _, id)| id)
    }

    fn take(&mut self, m: PlannedMove, out: &mut Vec<PlannedMove>) {
        self.busy.insert(m.journal);
        *self.load.entry(m.to).or_insert(0) += 1;
        if let Some(l) = self.load.get_mut(&m.from) {
            *l = l.saturating_sub(1);
        }
        out.push(m);
    }

    /// How many distinct zones `voters` span.
    fn zone_count(&self, voters: impl Iterator<Item = NodeId>) -> usize {
        voters.filter_map(|v| self.zones.get(&v)).collect::<BTreeSet<_>>().len()
    }
}

/// The next seat moves for `directory`, at most one per journal, in priority order (heal,
/// drain, rebalance). See the module doc.
#[must_use]
pub fn plan(directory: &Directory, config: &PlanConfig, seen: Seen<'_>) -> Vec<PlannedMove> {
    let mut cell = Cell::new(directory, config, seen);
    let in_flight = directory.moves_in_progress().count();
    let mut budget = config.moves_in_flight_max.saturating_sub(in_flight);
    let mut out = Vec::new();
    let live: Vec<&Journal> = directory.journals().filter(|j| j.is_live()).collect();

    // Heal: journals that lost the most voters first.
    let gone_in = |j: &Journal, cell: &Cell<'_>| j.voters.iter().filter(|&&v| cell.part(v) == Some(Part::Gone)).count();
    let mut hurt: Vec<(usize, &Journal)> =
        live.iter().map(|j| (gone_in(j, &cell), *j)).filter(|(n, j)| *n > 0 && !cell.busy.contains(&j.key)).collect();
    hurt.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.key.cmp(&b.1.key)));
    let mut heals = 0;
    for (_, j) in hurt {
        if heals >= config.heal_moves_per_tick_max || budget == 0 {
            break;
        }
        let Some(&from) = j.voters.iter().find(|&&v| cell.part(v) == Some(Part::Gone)) else { continue };
        if let Some(to) = cell.target(j, from) {
            cell.take(PlannedMove { journal: j.key, from, to, why: Why::Heal }, &mut out);
            heals += 1;
            budget -= 1;
        }
    }

    // Drain: a batch of journals at a time, the moves in progress off draining nodes included.
    let draining_in_flight =
        directory.moves_in_progress().filter(|(_, m)| cell.part(m.from) == Some(Part::Draining)).count();
    let mut drain_room = config.drain_batch_max.saturating_sub(draining_in_flight);
    for j in &live {
        if drain_room == 0 || budget == 0 {
            break;
        }
        // A journal with a voter gone is healed first: drained now, its next voters would be a
        // target still catching up, a dead voter and one live one — a journal that stops until
        // the target hosts it (the simulation's seed 9000181 with seats moving back).
        if cell.busy.contains(&j.key) || gone_in(j, &cell) > 0 {
            continue;
        }
        let Some(&from) = j.voters.iter().find(|&&v| cell.part(v) == Some(Part::Draining)) else { continue };
        if let Some(to) = cell.target(j, from) {
            cell.take(PlannedMove { journal: j.key, from, to, why: Why::Drain }, &mut out);
            drain_room -= 1;
            budget -= 1;
        }
    }

    // Rebalance: only in a quiet cell.
    if in_flight == 0 && out.is_empty() {
        rebalance(&mut cell, &live, config.rebalance_moves_per_tick_max.min(budget), &mut out);
    }
    out
}

/// Moves seats from more loaded eligible nodes to less loaded ones, up to `max`: each time
/// the most loaded node that can give a seat to a node holding two or more fewer, to the
/// least loaded such node, of the first journal (by key) whose zones stay as spread.
fn rebalance(cell: &mut Cell<'_>, live: &[&Journal], max: usize, out: &mut Vec<PlannedMove>) {
    for _ in 0..max {
        let mut eligible: Vec<(usize, NodeId)> =
            cell.parts.iter().filter(|(_, p)| **p == Part::Eligible).map(|(&id, _)| (cell.load(id), id)).collect();
        eligible.sort();
        let Some(m) = eligible.iter().rev().find_map(|&(hi_load, hi)| {
            let givers: Vec<&Journal> =
                live.iter().copied().filter(|j| j.voters.contains(&hi) && !cell.busy.contains(&j.key)).collect();
            eligible.iter().take_while(|&&(lo_load, _)| lo_load + 2 <= hi_load).find_map(|&(_, lo)| {
                let keeps_zones = |j: &&&Journal| {
                    let after = j.voters.iter().map(|&v| if v == hi { lo } else { v });
                    !j.voters.contains(&lo) && cell.zone_count(after) >= cell.zone_count(j.voters.iter().copied())
                };
                let j = givers.iter().find(keeps_zones)?;
                Some(PlannedMove { journal: j.key, from: hi, to: lo, why: Why::Rebalance })
            })
        }) else {
            return;
        };
        cell.take(m, out);
    }
}
