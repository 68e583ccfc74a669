//! The registry's actors in the world: a follower on every machine that is up, a coordinator
//! on the node leading the registry journal's consensus, their requests carried over the
//! simulated network (loss, delay, partitions), and the follower's changes applied to the host.

use std::collections::BTreeMap;
use std::time::Duration;

use paros_core::NodeId;

use paros_registry::follow::Hosting;
use paros_registry::follower::{FollowedMachine, FollowerEffect};
use paros_registry::mover::MoverConfig;
use paros_registry::term::{RestartConfig, Restarts, Succession};

use super::{Event, World};
use crate::host::{Host, MachineRole};
use crate::registry::coordinator::Ctx;
use crate::registry::mover::MoverCtx;
use crate::registry::{
    CoordinatorActor, Follower, MoverActor, Plan, RegReply, RegRequest, RegistryAudit, Script, Send,
};
use crate::rng::SimRng;

/// A node's coordinator terms: after one ends, the node waits this long before claiming again
/// (while it leads the registry journal), however often.
const RESTARTS: RestartConfig =
    RestartConfig { backoff: Duration::from_millis(50), failures_max: u32::MAX, succession: Succession::WhileLeading };

/// The mover's bounds: a failed step is tried again this soon (the daemon's default is 500 ms;
/// the simulated runs are short).
/// How often an idle registry with requests due is nudged to elect a leader, at most.
const NUDGE_NS: u64 = 1_000_000_000;

const MOVER: MoverConfig = MoverConfig { moves_max: 4, retry_ms: 100 };

#[derive(Clone, Copy, Debug)]
enum Actor {
    Follower,
    Coordinator(u64),
    /// The mover beside coordinator term `n`.
    Mover(u64),
}

#[derive(Clone, Copy, Debug)]
struct Owner {
    m: usize,
    epoch: u64,
    actor: Actor,
    token: u64,
}

#[derive(Debug)]
struct NodeActors {
    follower: Option<Follower>,
    coordinator: Option<CoordinatorActor>,
    /// The mover of the coordinator term, running while it runs.
    mover: Option<MoverActor>,
    /// Coordinator terms started on this machine (the current one's number).
    terms: u64,
    restarts: Restarts,
    /// When the next term may claim (`None`: no more terms).
    claim_at: Option<u64>,
}

impl Default for NodeActors {
    fn default() -> Self {
        NodeActors {
            follower: None,
            coordinator: None,
            mover: None,
            terms: 0,
            restarts: Restarts::new(RESTARTS),
            claim_at: Some(0),
        }
    }
}

/// The registry's part of the world.
#[derive(Debug)]
pub(super) struct RegistryWorld {
    pub plan: Plan,
    pub script: Script,
    pub audit: RegistryAudit,
    nodes: Vec<NodeActors>,
    outstanding: BTreeMap<u64, Owner>,
    rng: SimRng,
    /// When a founding node was last asked to campaign for an idle registry.
    nudged_at: Option<u64>,
}

impl RegistryWorld {
    pub fn new(plan: Plan, machines: usize, rng: SimRng) -> RegistryWorld {
        let script = Script::new(plan.script.clone());
        RegistryWorld {
            plan,
            script,
            audit: RegistryAudit::default(),
            nodes: (0..machines).map(|_| NodeActors::default()).collect(),
            outstanding: BTreeMap::new(),
            rng,
            nudged_at: None,
        }
    }

    /// The run's figures, counting the coordinators still running.
    pub fn figures(&self) -> crate::registry::RegistryFigures {
        let mut f = self.audit.figures;
        for s in self.nodes.iter().filter_map(|n| n.coordinator.as_ref()?.stats()) {
            f.runs_planned += s.runs_planned;
            f.truncations += s.truncations;
        }
        f
    }

    /// Whether machine `m`'s follower has placed what the directory says once since it booted.
    pub fn has_applied(&self, m: usize) -> bool {
        self.nodes[m].follower.as_ref().is_some_and(|f| f.applied())
    }

    /// The directory machine `m`'s follower last published, if it published one.
    pub fn directory(&mut self, m: usize) -> Option<std::sync::Arc<paros_registry::Directory>> {
        self.nodes[m].follower.as_mut()?.driver().directory()
    }

    /// Whether request `req` is a registry actor's.
    pub fn owns(&self, req: u64) -> bool {
        self.outstanding.contains_key(&req)
    }
}

impl<H: Host> World<H> {
    /// `m` booted: it follows the registry from scratch.
    pub(super) fn registry_boot(&mut self, m: usize) {
        let mach = &self.machines[m];
        let (id, role) = (mach.spec.id, mach.spec.role);
        let hosted = mach.host.as_ref().map(Host::hosted).unwrap_or_default();
        let plan = &self.registry.plan;
        let hosting = match role {
            MachineRole::Voter => Hosting::Voter,
            MachineRole::Replica => Hosting::Replica { feed: plan.feed },
        };
        let machine = FollowedMachine { id, hosting, hosted };
        let servers = plan.servers.clone();
        let first = servers.iter().position(|s| *s == id).unwrap_or(m);
        let follower = Follower::new(format!("follower@{id:?}"), plan.key, machine, servers, first)
            .with_registry_config(plan.config.clone());
        let node = &mut self.registry.nodes[m];
        node.follower = Some(follower);
        node.coordinator = None;
        node.mover = None;
    }

    /// `m` crashed: its actors die with it.
    pub(super) fn registry_crash(&mut self, m: usize) {
        let node = &mut self.registry.nodes[m];
        node.follower = None;
        node.coordinator = None;
        node.mover = None;
    }

    /// A tick of `m`'s clock: its actors take a step.
    pub(super) fn registry_tick(&mut self, m: usize) {
        if self.machines[m].host.is_none() {
            return;
        }
        let now = self.now;
        if let Some(send) = self.registry.nodes[m].follower.as_mut().and_then(|f| f.wake(now)) {
            self.registry_send(m, Actor::Follower, send);
        }
        let key = self.registry.plan.key;
        let leader = self.machines[m]
            .host
            .as_ref()
            .and_then(|h| h.probe(&self.machines[m].disk, &key))
            .is_some_and(|p| p.leader);
        self.registry_nudge(m, leader);
        let node = &mut self.registry.nodes[m];
        if let Some(a) = &node.coordinator {
            if let Some(end) = a.ended() {
                let pause = node.restarts.after(end);
                node.claim_at = pause.map(|p| now + p.as_nanos() as u64);
                node.coordinator = None;
                node.mover = None;
            } else if a.is_starting() && !leader {
                // Not the leader any more: the term stops before it writes.
                node.claim_at = Some(now + RESTARTS.backoff.as_nanos() as u64);
                node.coordinator = None;
                node.mover = None;
            }
        }
        if leader && node.coordinator.is_none() && node.claim_at.is_some_and(|at| now >= at) {
            node.terms += 1;
            let id = self.machines[m].spec.id;
            let name = format!("coordinator@{id:?}#{}", node.terms);
            let rng = self.registry.rng.fork();
            let actor = CoordinatorActor::new(
                name,
                id,
                self.registry.plan.servers.clone(),
                self.registry.plan.coordinator,
                rng,
            );
            self.registry.nodes[m].coordinator = Some(actor);
            let rng = self.registry.rng.fork();
            let name = format!("mover@{id:?}#{}", self.registry.nodes[m].terms);
            let planner = self.moves.params.planner;
            self.registry.nodes[m].mover = Some(MoverActor::new(name, id, MOVER, planner, rng));
        }
        self.registry_coordinator(m, |a, ctx| a.wake(ctx));
        self.registry_mover(m, |a, ctx| a.wake(ctx));
    }

    /// A registry journal no node leads (every machine restarted, the journal asleep and idle)
    /// serves no request: no coordinator claims it. When the registry's caller has a request
    /// due (a seat move's `MoveSeat` or `MoveDone` late in the run), or a seat move the registry
    /// decided is not done (its mover runs beside a coordinator), and no coordinator runs,
    /// the first node that is up and votes in the registry journal's configuration as its own
    /// walk knows it (its seats move) asks its voter to campaign, as an operator would, at most
    /// once per [`NUDGE_NS`].
    fn registry_nudge(&mut self, m: usize, leader: bool) {
        let now = self.now;
        let r = &self.registry;
        let id = self.machines[m].spec.id;
        let key = r.plan.key;
        // The epoch of the configuration machine `i`'s walk knows, if it votes in it.
        let votes_in = |i: usize| {
            let mach = &self.machines[i];
            let probe = mach.host.as_ref().and_then(|h| h.probe(&mach.disk, &key))?;
            let votes = probe
                .state
                .voters
                .map_or(r.plan.founding.contains(&mach.spec.id), |v| v.as_slice().contains(&mach.spec.id));
            votes.then_some(probe.state.epoch)
        };
        // The furthest walk wins: a voter taken out whose walk has not reached the stop-sign
        // still believes it votes (seed 220: nudged forever while the new voters slept).
        let first_up = r
            .plan
            .servers
            .iter()
            .filter_map(|f| Some((votes_in(*self.index.get(f)?)?, f)))
            .rev()
            .max_by_key(|(epoch, _)| *epoch)
            .map(|(_, f)| f);
        // Work for a coordinator's term: a request due, or a seat move its mover must carry on.
        let work = r.script.due(now).next().is_some() || self.moves_in_progress();
        if leader
            || first_up != Some(&id)
            || r.nudged_at.is_some_and(|at| now < at + NUDGE_NS)
            || !work
            || r.nodes.iter().any(|n| n.coordinator.is_some())
        {
            return;
        }
        self.registry.nudged_at = Some(now);
        let key = self.registry.plan.key;
        if let Some(host) = self.machines[m].host.as_mut() {
            host.campaign(&key);
        }
        self.trace.event(now, "registry", &[m as u64], || format!("{id:?} campaigns for the idle registry"));
    }

    /// Runs `f` on `m`'s mover with the directory its follower last published, then carries
    /// out what it asked.
    fn registry_mover(&mut self, m: usize, f: impl FnOnce(&mut MoverActor, &mut MoverCtx<'_>)) {
        let r = &mut self.registry;
        let term = r.nodes[m].terms;
        let node = &mut r.nodes[m];
        let Some(actor) = node.mover.as_mut() else { return };
        let directory = node.follower.as_mut().and_then(|f| f.driver().directory());
        let last_seen_s = self.moves.last_seen_s(self.now, &self.machines);
        let mut ctx = MoverCtx {
            last_seen_s: &last_seen_s,
            planned: Vec::new(),
            now: self.now,
            directory: directory.as_deref(),
            script: &mut r.script,
            sends: Vec::new(),
            notes: Vec::new(),
            asked: Vec::new(),
            recorded: Vec::new(),
        };
        f(actor, &mut ctx);
        let (sends, notes, asked, recorded, planned) = (ctx.sends, ctx.notes, ctx.asked, ctx.recorded, ctx.planned);
        for planned in planned {
            self.moves_planned(planned, directory.as_deref());
        }
        for (key, epoch) in asked {
            self.moves_mover_did(m, term, key, epoch, false);
        }
        for (key, epoch) in recorded {
            self.moves_mover_did(m, term, key, epoch, true);
        }
        for note in notes {
            self.trace.event(self.now, "mover", &[m as u64], || note);
        }
        for send in sends {
            self.registry_send(m, Actor::Mover(term), send);
        }
    }

    /// Runs `f` on `m`'s coordinator with a fresh context, then carries out what it asked.
    fn registry_coordinator(&mut self, m: usize, f: impl FnOnce(&mut CoordinatorActor, &mut Ctx<'_>)) {
        let r = &mut self.registry;
        let term = r.nodes[m].terms;
        let Some(actor) = r.nodes[m].coordinator.as_mut() else { return };
        let mut ctx = Ctx {
            now: self.now,
            audit: &mut r.audit,
            claims: &mut self.audit.claims,
            script: &mut r.script,
            sends: Vec::new(),
            notes: Vec::new(),
        };
        f(actor, &mut ctx);
        let (sends, notes) = (ctx.sends, ctx.notes);
        for note in notes {
            self.trace.event(self.now, "registry", &[m as u64], || note);
        }
        for send in sends {
            self.registry_send(m, Actor::Coordinator(term), send);
        }
    }

    fn registry_send(&mut self, m: usize, actor: Actor, send: Send) {
        let req = self.next_request;
        self.next_request += 1;
        let epoch = self.machines[m].epoch;
        self.registry.outstanding.insert(req, Owner { m, epoch, actor, token: send.token });
        let target = self.index.get(&send.to).copied();
        // A machine gone for good refuses the connection, as it does a client's
        // (`World::send_request`): the actor learns at once that nothing was asked, not a call timeout
        // later. Waiting out the timeout on it, a restarted node's follower took 1.5 s to
        // place its journals (seed 130015909).
        if target.is_some_and(|to| self.machines[to].refused) {
            let d = self.delay();
            self.after(d, Event::RegistryReply { req, reply: None });
            return;
        }
        // A machine the world does not know times out, as any request without an answer.
        let timeout = self.params.call_timeout_ns;
        self.after(timeout, Event::RegistryTimeout(req));
        let Some(to) = target else { return };
        let from = self.machines[m].spec.id;
        if self.cut(from, send.to) || self.rng.chance(self.net().drop_ppm) {
            return;
        }
        let d = self.delay();
        self.after(d, Event::RegistryRequest { to, req, request: send.request });
    }

    pub(super) fn on_registry_request(&mut self, to: usize, req: u64, request: RegRequest) {
        let key = self.registry.plan.key;
        let Some(host) = self.machines[to].host.as_mut() else { return };
        match request {
            RegRequest::Call(id, call) => host.call(key, req, id, call),
            RegRequest::Read(read) => host.read(key, req, read),
            RegRequest::JournalCall(journal, id, call) => host.call(journal, req, id, call),
            RegRequest::JournalRead(journal, read) => host.read(journal, req, read),
        }
        self.kick(to);
    }

    /// Machine `from` answered registry request `req`; the answer travels back.
    pub(super) fn registry_answer(&mut self, req: u64, from: NodeId, reply: RegReply) {
        let Some(o) = self.registry.outstanding.get(&req).copied() else { return };
        let back = self.machines[o.m].spec.id;
        if self.cut(from, back) || self.rng.chance(self.net().drop_ppm) {
            return;
        }
        let d = self.delay();
        self.after(d, Event::RegistryReply { req, reply: Some(reply) });
    }

    /// Registry request `req` was answered (`None`: it timed out).
    pub(super) fn on_registry_reply(&mut self, req: u64, reply: Option<RegReply>) {
        let Some(o) = self.registry.outstanding.remove(&req) else { return };
        let m = o.m;
        if self.machines[m].epoch != o.epoch || self.machines[m].host.is_none() {
            return;
        }
        match o.actor {
            Actor::Follower => {
                let read = match reply {
                    Some(RegReply::Read(a)) => Some(paros_client::ReadAnswer::from_node(a)),
                    Some(RegReply::UnknownJournal) => Some(paros_client::ReadAnswer::UnknownJournal),
                    Some(RegReply::Call(_)) | None => None,
                };
                let now = self.now;
                let r = &mut self.registry;
                let Some(f) = r.nodes[m].follower.as_mut() else { return };
                let effects = f.on_answer(now, o.token, read, &mut r.audit, &mut self.audit.claims);
                self.registry_apply(m, effects);
                if let Some(send) = self.registry.nodes[m].follower.as_mut().and_then(|f| f.wake(now)) {
                    self.registry_send(m, Actor::Follower, send);
                }
            }
            Actor::Coordinator(term) => {
                if self.registry.nodes[m].terms != term {
                    return;
                }
                self.registry_coordinator(m, |a, ctx| a.on_reply(ctx, o.token, reply));
            }
            Actor::Mover(term) => {
                if self.registry.nodes[m].terms != term {
                    return;
                }
                self.registry_mover(m, |a, ctx| a.on_reply(ctx, o.token, reply));
            }
        }
    }

    /// `m` places and removes what its follower says, then tells the follower it did.
    fn registry_apply(&mut self, m: usize, effects: Vec<FollowerEffect>) {
        let now = self.now;
        let mut changed = false;
        let mut seated = false;
        let mut retired = None;
        let mut published = None;
        for effect in effects {
            let mach = &mut self.machines[m];
            let (Some(host), Some(f)) = (mach.host.as_mut(), self.registry.nodes[m].follower.as_mut()) else { return };
            let id = mach.spec.id;
            match effect {
                FollowerEffect::Place { machine, journals } => {
                    let placed: Vec<bool> = journals.iter().map(|a| host.place(a.clone())).collect();
                    f.driver().placed(machine, &journals, &placed);
                    seated |= placed.iter().any(|ok| *ok);
                    for (paros_core::Assignment { key, config, .. }, _) in
                        journals.iter().zip(&placed).filter(|(_, ok)| **ok)
                    {
                        self.trace.event(now, "place", &[id.0, key.journal.0], || format!("{id:?} places {key:?}"));
                        // A seat moving here: the world judges the journal here from now on.
                        let ours = self.journals.iter().any(|(k, _)| k == key);
                        let spec = &mut mach.spec;
                        if ours && spec.role == MachineRole::Voter && !spec.placements.iter().any(|p| p.key == *key) {
                            spec.placements.push(crate::host::Placement { key: *key, config: config.clone() });
                        }
                    }
                    changed = true;
                }
                FollowerEffect::Remove { machine, journal, epoch } => {
                    if !host.remove(&journal, epoch) {
                        let key = journal;
                        self.trace.event(now, "keep", &[id.0, key.journal.0], || {
                            format!("{id:?} keeps {key:?}: its copy promised past the directory's epoch {epoch}")
                        });
                        continue;
                    }
                    if mach.spec.role == MachineRole::Voter {
                        mach.spec.placements.retain(|p| p.key != journal);
                    }
                    // Its life here ends: a later placement begins another (answers audit), and
                    // the votes of this one go with its bytes (a seat placed here again begins
                    // in a later epoch, whose floor refuses every ballot they were cast at:
                    // rule 13).
                    self.answers.life_bound(id, journal);
                    self.audit.on_removed(id, journal);
                    f.driver().removed(machine, journal);
                    let key = journal;
                    self.trace.event(now, "remove", &[id.0, key.journal.0], || format!("{id:?} removes {key:?}"));
                    changed = true;
                }
                FollowerEffect::Publish => {
                    f.driver().published(Duration::from_nanos(now));
                    f.note_applied();
                    let directory = f.driver().directory();
                    let standing = directory.as_ref().and_then(|d| d.machine(id).map(|m| m.standing));
                    retired = Some(standing == Some(paros_registry::Standing::Retired));
                    published = directory;
                }
            }
        }
        if seated {
            self.wipes_placed(m);
        }
        if let Some(retired) = retired {
            self.tier_published(m, retired);
        }
        if let Some(directory) = published {
            self.moves_published(&directory);
        }
        if changed {
            self.kick(m);
            self.tier_observe_drops(m);
        }
    }
}
