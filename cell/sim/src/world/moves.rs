//! Seat moves in the world: an operator asks the registry to move a workload journal's seat
//! (`MoveSeat`, a voter — often one that is down — to a node that is not its voter) at times the
//! seed draws, during the chaos and early in the settle tail. The coordinator's mover carries
//! each move out (`registry/mover.rs`); the followers place the journal on the target and
//! remove it from the source; this module watches each move from the registry's decision to
//! its `MoveDone`, routes the clients to the voters the registry names, and judges the moves'
//! claims at the end.

use std::collections::BTreeMap;

use paros_core::{JournalKey, NodeId, Tunables};
use paros_registry::{Command, Directory, Op, PlanConfig, PlannedMove, Request, RequestId, Standing, Why};

use super::{ClientKind, Event, Machine, World};
use crate::check::Claim;
use crate::host::{Host, MachineRole};
use crate::registry::plan::Scripted;
use crate::rng::SimRng;

const MS: u64 = 1_000_000;

/// A catch-up page's round trip the move claim allows per page a target must copy: a request,
/// the source's round (and its store read), the answer, the target's round and sync. The runs
/// measure about 4 ms.
const PAGE_ROUND_TRIP_NS: u64 = 6 * MS;

/// The side stream the moves draw from (added after seeds were published).
const MOVES_SALT: u64 = 0x6d6f_7665_7365_6174;

/// What a seed decides about seat moves.
#[derive(Clone, Debug, Default)]
pub struct MoveParams {
    /// When the operator asks for a seat move.
    pub at_ns: Vec<u64>,
    /// The chance a move takes the seat of a voter that is down, when one is.
    pub from_down_ppm: u64,
    /// The bound the move claim holds the registry to: from its decision (or from the settle
    /// tail's grace period, for one decided during the chaos) to `MoveDone`.
    pub bound_ns: u64,
    /// The coordinators' planner: heal (a node unseen for `replace_after_s`) and drain; no
    /// rebalance (its churn would crowd out the schedules the claims want reached).
    pub planner: PlanConfig,
    /// A voter drained (`SetStanding` to `Draining`) at a time, by index among the voters.
    pub drain: Option<(u64, usize)>,
}

impl MoveParams {
    /// Draws from `rng`'s side stream: no seat move in a quarter of the seeds, else one to
    /// three between half a second in and two seconds into the settle tail.
    #[must_use]
    pub fn draw(rng: &SimRng, chaos_ns: u64) -> MoveParams {
        let mut side = rng.side(MOVES_SALT);
        let count = if side.chance(250_000) { 0 } else { side.between(1, 3) };
        let mut at_ns: Vec<u64> = (0..count).map(|_| side.between(500 * MS, chaos_ns + 2_000 * MS)).collect();
        at_ns.sort_unstable();
        let drain = side.chance(800_000).then(|| (side.between(1_000 * MS, chaos_ns / 2), side.below(5) as usize));
        let planner = PlanConfig {
            replace_after_s: side.between(3, 8),
            target_unseen_max_s: 1,
            drain_batch_max: 1,
            heal_moves_per_tick_max: 1,
            rebalance_moves_per_tick_max: 0,
            moves_in_flight_max: 2,
        };
        MoveParams { at_ns, from_down_ppm: 500_000, bound_ns: 10_000 * MS, planner, drain }
    }
}

/// One move the operator asked for.
#[derive(Clone, Debug)]
struct Tracked {
    /// Why: the operator's own (`None`), or the planner's.
    why: Option<Why>,
    key: JournalKey,
    id: RequestId,
    from: NodeId,
    to: NodeId,
    /// The epoch the move leads to, once the registry recorded it.
    epoch: Option<u64>,
    decided_at: Option<u64>,
    done_at: Option<u64>,
    /// At the decision: another voter of the journal was down.
    others_down: bool,
    /// Decided while the move was in progress.
    truncated: bool,
    leader_changed: bool,
    jumped: bool,
    /// A write to the journal was acknowledged while the move was in progress.
    acked: bool,
    /// The target hosted the journal before (a founder, a voter or an earlier move's target).
    back: bool,
    /// The target lost its disk while the move was in progress.
    target_wiped: bool,
    /// The coordinator terms (machine, term) whose mover asked for the `Reconfigure`, and the
    /// one whose mover recorded it done.
    asked_by: Vec<(usize, u64)>,
    recorded_by: Option<(usize, u64)>,
}

impl Tracked {
    fn new(why: Option<Why>, key: JournalKey, id: RequestId, from: NodeId, to: NodeId) -> Tracked {
        Tracked {
            why,
            key,
            id,
            from,
            to,
            epoch: None,
            decided_at: None,
            done_at: None,
            others_down: false,
            truncated: false,
            leader_changed: false,
            jumped: false,
            acked: false,
            back: false,
            target_wiped: false,
            asked_by: Vec::new(),
            recorded_by: None,
        }
    }

    fn in_progress(&self) -> bool {
        self.decided_at.is_some() && self.done_at.is_none()
    }
}

/// The moves of one world.
#[derive(Debug)]
pub(super) struct MovesWorld {
    pub params: MoveParams,
    rng: SimRng,
    tracked: Vec<Tracked>,
    /// The epoch of the voters each workload journal's clients were last routed to.
    routed: Vec<u64>,
    /// Every machine each journal was ever placed on as a voter or a move's target: one taking
    /// a seat again is placed from the epoch in force (docs/reconfiguration.md, rule 13).
    hosted: Vec<std::collections::BTreeSet<NodeId>>,
    /// Since when each machine is down (the planner's liveness: when it was last seen up).
    down_since: Vec<Option<u64>>,
}

impl MovesWorld {
    pub fn new(params: MoveParams, rng: SimRng, journals: usize, machines: usize) -> MovesWorld {
        let hosted = vec![std::collections::BTreeSet::new(); journals];
        let down_since = vec![None; machines];
        MovesWorld { params, rng, tracked: Vec::new(), routed: vec![0; journals], hosted, down_since }
    }

    /// Machine `m` went down (`Some(now)`) or came up (`None`).
    pub fn set_down(&mut self, m: usize, since: Option<u64>) {
        self.down_since[m] = since;
    }

    /// When each voter machine in the cell was last seen up, in seconds: what the planner's
    /// liveness knows (the daemon's comes from the nodes' pings; here the world tells it). A
    /// machine down now was last seen a second before it went down, as the daemon's planner
    /// loop, judging once a second, last saw it at its previous judgement: down is down at once
    /// (the planner's `target_unseen_max_s`), not only from the next whole second.
    pub fn last_seen_s<H>(&self, now: u64, machines: &[Machine<H>]) -> BTreeMap<NodeId, u64> {
        let s = |ns: u64| ns / (1_000 * MS);
        machines
            .iter()
            .enumerate()
            .filter(|(_, m)| m.spec.role == MachineRole::Voter && m.present)
            .map(|(i, m)| (m.spec.id, self.down_since[i].map_or(s(now), |d| s(d).saturating_sub(1))))
            .collect()
    }
}

impl<H: Host> World<H> {
    pub(super) fn schedule_moves(&mut self) {
        for at in self.moves.params.at_ns.clone() {
            self.at(at, Event::SeatMove);
        }
        if let Some((at, v)) = self.moves.params.drain
            && v < self.params.voters
        {
            self.at(at, Event::Drain(v));
        }
    }

    /// The operator drains voter `m`: the planner moves its seats off it, a few at a time.
    pub(super) fn on_drain(&mut self, m: usize) {
        let machine = self.machines[m].spec.id;
        let id = RequestId(u128::from(self.moves.rng.u64()) << 64 | u128::from(self.moves.rng.u64()));
        let op = Op::Command(Command::SetStanding { machine, standing: Standing::Draining });
        self.registry.script.push(Scripted { at_ns: self.now, request: Request { id, op } });
        self.trace.event(self.now, "drain", &[machine.0], || format!("the operator drains {machine:?}"));
    }

    /// A coordinator's planner proposed `planned` from `directory`: the registry's caller asks
    /// for it (a workload journal's seat, or the registry journal's) under an id drawn from the
    /// move and the second, so a move planned again by the next planner is asked once.
    pub(super) fn moves_planned(&mut self, planned: PlannedMove, directory: Option<&Directory>) {
        let PlannedMove { journal: key, from, to, why } = planned;
        // A workload journal's, or the registry journal's own.
        let w = self.journals.iter().position(|(k, _)| *k == key);
        if w.is_none() && key != self.registry.plan.key {
            return;
        }
        let Some(j) = directory.and_then(|d| d.journal(key)) else { return };
        let back = j.founders.contains(&to) || w.is_some_and(|w| self.moves.hosted[w].contains(&to));
        let script = &self.registry.script;
        if self.moves.tracked.iter().any(|t| t.key == key && t.done_at.is_none() && script.answer_of(t.id).is_none()) {
            return;
        }
        let mut h = paros_core::rng::Rng::new(key.journal.0 ^ from.0.rotate_left(13) ^ to.0.rotate_left(29));
        let salt = h.next_u64() ^ j.epoch.0 ^ (self.now / (1_000 * MS)).rotate_left(40);
        let id = RequestId(0x706c_616e_u128 << 96 | u128::from(salt));
        if self.registry.script.answer_of(id).is_some() || self.moves.tracked.iter().any(|t| t.id == id) {
            return;
        }
        let op = Op::Command(Command::MoveSeat { journal: key, from, to });
        self.registry.script.push(Scripted { at_ns: self.now, request: Request { id, op } });
        self.trace.event(self.now, "move", &[key.journal.0, from.0, to.0], || {
            format!("the planner ({why:?}) moves {key:?}'s seat from {from:?} to {to:?}")
        });
        self.moves.tracked.push(Tracked { back, ..Tracked::new(Some(why), key, id, from, to) });
    }

    /// The directory the most machines' followers agree is newest: the one of the follower
    /// furthest along (the operator reads the registry as any reader does).
    fn operator_directory(&mut self) -> Option<std::sync::Arc<Directory>> {
        (0..self.machines.len())
            .filter_map(|m| self.registry.directory(m))
            .max_by_key(|d| d.journals().map(|j| j.epoch.0).sum::<u64>())
    }

    /// The operator asks for a seat move of a workload journal whose seat can go somewhere: to
    /// a node that is not its voter — half the time, when there is one, a node it was on before
    /// (a founder or a voter it left). Placed again, such a machine hosts the journal from an
    /// empty store and walks into every configuration that named it before: unless it is
    /// placed from the epoch in force (rule 13), an old voter that forgot its votes (seed
    /// 9000015 of the first version: a founder moved out and back campaigned in epoch 0 from a
    /// fresh store).
    pub(super) fn on_seat_move(&mut self) {
        let Some(directory) = self.operator_directory() else { return };
        let nodes: Vec<NodeId> = self
            .machines
            .iter()
            .filter(|m| m.spec.role == MachineRole::Voter && m.present && !m.refused)
            .map(|m| m.spec.id)
            .collect();
        let registry = self.registry.plan.key;
        let candidates: Vec<(JournalKey, Vec<NodeId>)> = self
            .journals
            .iter()
            .filter(|(k, _)| *k != registry)
            .filter_map(|(k, _)| directory.journal(*k))
            .filter(|j| j.is_live() && j.moving.is_none())
            .filter(|j| nodes.iter().any(|n| !j.voters.contains(n)))
            .map(|j| (j.key, j.voters.to_vec()))
            .collect();
        if candidates.is_empty() {
            return;
        }
        let pick = self.moves.rng.below(candidates.len() as u64) as usize;
        let (key, voters) = candidates[pick].clone();
        let down: Vec<NodeId> = voters.iter().copied().filter(|v| !self.is_up(*v)).collect();
        let rng = &mut self.moves.rng;
        let from = if !down.is_empty() && rng.chance(self.moves.params.from_down_ppm) {
            down[rng.below(down.len() as u64) as usize]
        } else {
            voters[rng.below(voters.len() as u64) as usize]
        };
        let w = self.journals.iter().position(|(k, _)| *k == key).expect("a workload journal");
        let founders = directory.journal(key).map(|j| j.founders.to_vec()).unwrap_or_default();
        let hosted = &self.moves.hosted[w];
        let was_on = |n: &NodeId| founders.contains(n) || hosted.contains(n);
        let spare: Vec<NodeId> = nodes.iter().copied().filter(|n| !voters.contains(n)).collect();
        let former: Vec<NodeId> = spare.iter().copied().filter(was_on).collect();
        let rng = &mut self.moves.rng;
        let pool = if !former.is_empty() && rng.chance(500_000) { &former } else { &spare };
        let to = pool[rng.below(pool.len() as u64) as usize];
        let back = was_on(&to);
        let id = RequestId(u128::from(rng.u64()) << 64 | u128::from(rng.u64()));
        let op = Op::Command(Command::MoveSeat { journal: key, from, to });
        self.registry.script.push(Scripted { at_ns: self.now, request: Request { id, op } });
        self.trace.event(self.now, "move", &[key.journal.0, from.0, to.0], || {
            format!("the operator asks to move {key:?}'s seat from {from:?} to {to:?}")
        });
        self.moves.tracked.push(Tracked { back, ..Tracked::new(None, key, id, from, to) });
    }

    /// Whether a seat move the registry decided is not recorded done yet.
    pub(super) fn moves_in_progress(&self) -> bool {
        self.moves.tracked.iter().any(Tracked::in_progress)
    }

    /// The target of a seat move in progress, the registry journal's first.
    pub(super) fn moves_target_in_progress(&self) -> Option<NodeId> {
        let registry = self.registry.plan.key;
        let mut moving = self.moves.tracked.iter().filter(|t| t.in_progress());
        let first = moving.clone().next().map(|t| t.to);
        moving.find(|t| t.key == registry).map(|t| t.to).or(first)
    }

    /// Machine `id` lost its disk: every move in progress to it has a target gone.
    pub(super) fn moves_target_wiped(&mut self, id: NodeId) {
        for t in self.moves.tracked.iter_mut().filter(|t| t.to == id && t.in_progress()) {
            t.target_wiped = true;
        }
    }

    fn is_up(&self, id: NodeId) -> bool {
        self.index.get(&id).is_some_and(|m| self.machines[*m].host.is_some())
    }

    /// Machine `m`'s follower published `directory`: the moves it shows decided or done, and
    /// the clients routed to the voters it names.
    pub(super) fn moves_published(&mut self, directory: &Directory) {
        let now = self.now;
        for t in 0..self.moves.tracked.len() {
            let tracked = &self.moves.tracked[t];
            let Some(j) = directory.journal(tracked.key) else { continue };
            if tracked.decided_at.is_none()
                && let Some(mv) = j.moving.filter(|mv| mv.from == tracked.from && mv.to == tracked.to)
                && self.registry.script.accepted(tracked.id)
            {
                let others_down = j.voters.iter().any(|v| *v != mv.from && !self.is_up(*v));
                let tracked = &mut self.moves.tracked[t];
                tracked.decided_at = Some(now);
                tracked.epoch = Some(mv.epoch.0);
                tracked.others_down = others_down;
            }
            let tracked = &mut self.moves.tracked[t];
            if tracked.in_progress() && tracked.epoch.is_some_and(|e| j.epoch.0 >= e) {
                tracked.done_at = Some(now);
                let (key, e) = (tracked.key, j.epoch.0);
                self.trace.event(now, "moved", &[key.journal.0, e], || format!("{key:?} moved to epoch {e}"));
            }
        }
        for w in 0..self.moves.routed.len() {
            let key = self.journals[w].0;
            if let Some(j) = directory.journal(key) {
                let hosted = &mut self.moves.hosted[w];
                hosted.extend(j.voters.iter().chain(j.founders.iter()).copied());
                hosted.extend(j.moving.map(|m| m.to));
            }
            let Some(j) = directory.journal(key).filter(|j| j.epoch.0 > self.moves.routed[w]) else { continue };
            self.moves.routed[w] = j.epoch.0;
            let voters = j.voters.to_vec();
            self.routes[w].voters.clone_from(&voters);
            for c in self.clients.iter_mut().filter(|c| c.journal == w) {
                if let ClientKind::Writer(wc) = &mut c.kind {
                    wc.set_voters(voters.clone());
                }
            }
        }
    }

    /// A mover of coordinator term `term` on `m` asked for `key`'s `Reconfigure` to `epoch`,
    /// or (`recorded`) recorded it done.
    pub(super) fn moves_mover_did(&mut self, m: usize, term: u64, key: JournalKey, epoch: u64, recorded: bool) {
        for t in self.moves.tracked.iter_mut().filter(|t| t.key == key && t.epoch == Some(epoch)) {
            if recorded {
                t.recorded_by.get_or_insert((m, term));
            } else if !t.asked_by.contains(&(m, term)) {
                t.asked_by.push((m, term));
            }
        }
    }

    /// `key` decided a truncation (`trim`) or a leader change while its moves are in progress.
    pub(super) fn moves_decided(&mut self, key: JournalKey, trim: bool) {
        for t in self.moves.tracked.iter_mut().filter(|t| t.key == key && t.in_progress()) {
            if trim {
                t.truncated = true;
            } else {
                t.leader_changed = true;
            }
        }
    }

    /// A client of `key` was acknowledged a write.
    pub(super) fn moves_acked(&mut self, key: JournalKey) {
        for t in self.moves.tracked.iter_mut().filter(|t| t.key == key && t.in_progress()) {
            t.acked = true;
        }
    }

    /// A machine of `key` jumped to a trim point while its moves are in progress.
    pub(super) fn moves_jumped(&mut self, key: JournalKey) {
        for t in self.moves.tracked.iter_mut().filter(|t| t.key == key && t.in_progress()) {
            t.jumped = true;
        }
    }

    /// Whether every move the registry decided is recorded done (the settle tail waits for it).
    pub(super) fn moves_settled(&self) -> bool {
        self.moves.tracked.iter().all(|t| !t.in_progress())
    }

    /// The time a move's target may take to copy `key`'s log by catch-up, beyond the fixed
    /// bound: a round trip per page ([`PAGE_ROUND_TRIP_NS`]) for every page of the chosen log
    /// (a page is one slot when the seed's catch-up byte bound admits only the first, else
    /// `catch_up_slots_max` slots). A seed whose bound is a few records' worth moves a journal
    /// of 3,000 slots one slot per round trip (seed 70001687: 14.6 s in the fault-free tail).
    fn copy_allowance_ns(&self, key: &JournalKey) -> u64 {
        let slots = self.audit.highest_chosen(key).map_or(0, |s| s.0 + 1);
        let t = &self.params.tunables;
        let per_page =
            if t.catch_up_bytes_max < Tunables::default().catch_up_bytes_max { 1 } else { t.catch_up_slots_max.max(1) };
        slots.div_ceil(u64::from(per_page)) * PAGE_ROUND_TRIP_NS
    }

    /// At the end: each decided move was done within its bound, and what it met on the way.
    pub(super) fn moves_finish(&mut self) {
        let grace_end = self.params.chaos_ns + self.grace_ns;
        let bound = self.moves.params.bound_ns;
        for t in &self.moves.tracked {
            let Some(decided) = t.decided_at else { continue };
            let deadline = decided.max(grace_end) + bound + self.copy_allowance_ns(&t.key);
            let in_time = t.done_at.is_some_and(|d| d <= deadline);
            let judged = in_time || self.now >= deadline || t.done_at.is_some();
            if judged {
                let claims = &mut self.audit.claims;
                claims.check(Claim::MoveCompletes, in_time, || {
                    format!(
                        "{:?}: the seat move {:?} → {:?} decided at {} ms was done at {:?} ms, \
                         past its deadline {} ms",
                        t.key,
                        t.from,
                        t.to,
                        decided / MS,
                        t.done_at.map(|d| d / MS),
                        deadline / MS
                    )
                });
            }
            if !in_time {
                continue;
            }
            let claims = &mut self.audit.claims;
            claims.reach(Claim::MoveCompletes);
            if t.others_down {
                claims.reach(Claim::MoveWhileDown);
            }
            if t.recorded_by.is_some_and(|r| t.asked_by.iter().any(|a| *a != r)) {
                claims.reach(Claim::MoveCoordinatorCrash);
            }
            if t.truncated && t.leader_changed {
                claims.reach(Claim::MoveConcurrent);
            }
            if t.jumped {
                claims.reach(Claim::MoveTrimJump);
            }
            if t.why == Some(Why::Drain) && t.acked {
                claims.reach(Claim::MoveDrainUnderLoad);
            }
            if t.why == Some(Why::Heal) {
                claims.reach(Claim::MoveHeals);
            }
            if t.back {
                claims.reach(Claim::MoveBack);
            }
            if t.key == self.registry.plan.key {
                claims.reach(Claim::MoveRegistry);
            }
            if t.target_wiped {
                claims.reach(Claim::MoveTargetWiped);
            }
        }
    }
}
