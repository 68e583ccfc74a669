//! The registry's actors in the world: a follower on every machine that is up, a coordinator
//! on the node leading the registry journal's consensus, their requests carried over the
//! simulated network (loss, delay, partitions), and the follower's changes applied to the host.

use std::collections::BTreeMap;

use paros_core::{CallId, NodeId, ReadId};

use super::{Event, World};
use crate::host::Host;
use crate::registry::coordinator::Ctx;
use crate::registry::{CoordinatorActor, Follower, Plan, RegReply, RegRequest, RegistryAudit, Script, Send, changes};
use crate::rng::SimRng;

const MS: u64 = 1_000_000;

/// After a coordinator's term ends, the node waits this long before claiming again.
const RECLAIM_NS: u64 = 50 * MS;

#[derive(Clone, Copy, Debug)]
enum Actor {
    Follower,
    Coordinator(u64),
}

#[derive(Clone, Copy, Debug)]
struct Owner {
    m: usize,
    epoch: u64,
    actor: Actor,
    token: u64,
}

#[derive(Debug, Default)]
struct NodeActors {
    follower: Option<Follower>,
    coordinator: Option<CoordinatorActor>,
    /// Coordinator terms started on this machine (the current one's number).
    terms: u64,
    over_at: u64,
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

    /// Whether request `req` is a registry actor's.
    pub fn owns(&self, req: u64) -> bool {
        self.outstanding.contains_key(&req)
    }
}

impl<H: Host> World<H> {
    /// `m` booted: it follows the registry from scratch.
    pub(super) fn registry_boot(&mut self, m: usize) {
        let id = self.machines[m].spec.id;
        let servers = self.registry.plan.founding.clone();
        let first = servers.iter().position(|s| *s == id).unwrap_or(m);
        let node = &mut self.registry.nodes[m];
        node.follower = Some(Follower::new(format!("follower@{id:?}"), servers, first));
        node.coordinator = None;
    }

    /// `m` crashed: its actors die with it.
    pub(super) fn registry_crash(&mut self, m: usize) {
        let node = &mut self.registry.nodes[m];
        node.follower = None;
        node.coordinator = None;
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
        let node = &mut self.registry.nodes[m];
        match &node.coordinator {
            Some(a) if a.is_over() || (a.is_starting() && !leader) => {
                node.coordinator = None;
                node.over_at = now;
            }
            _ => {}
        }
        if leader && node.coordinator.is_none() && now >= node.over_at + RECLAIM_NS {
            node.terms += 1;
            let id = self.machines[m].spec.id;
            let name = format!("coordinator@{id:?}#{}", node.terms);
            let rng = self.registry.rng.fork();
            let actor = CoordinatorActor::new(
                name,
                id,
                self.registry.plan.founding.clone(),
                self.registry.plan.coordinator,
                rng,
            );
            self.registry.nodes[m].coordinator = Some(actor);
        }
        self.registry_coordinator(m, |a, ctx| a.wake(ctx));
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
        let timeout = self.params.call_timeout_ns;
        self.after(timeout, Event::RegistryTimeout(req));
        let from = self.machines[m].spec.id;
        let Some(&to) = self.index.get(&send.to) else { return };
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
            RegRequest::Call(call) => host.call(key, CallId(req), call),
            RegRequest::Read(read) => host.read(key, ReadId(req), read),
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
                    Some(RegReply::Read(a)) => Some(a),
                    _ => None,
                };
                let now = self.now;
                let r = &mut self.registry;
                let Some(f) = r.nodes[m].follower.as_mut() else { return };
                f.on_answer(now, o.token, read, &mut r.audit, &mut self.audit.claims);
                self.registry_apply(m);
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
        }
    }

    /// `m`'s follower is caught up: `m` places and removes what the directory says.
    fn registry_apply(&mut self, m: usize) {
        let plan = &self.registry.plan;
        let Some(directory) = self.registry.nodes[m].follower.as_ref().and_then(Follower::current) else { return };
        let mach = &mut self.machines[m];
        let Some(host) = mach.host.as_mut() else { return };
        let hosted = host.hosted();
        let (id, role) = (mach.spec.id, mach.spec.role);
        let changes = changes::for_machine(directory, id, role, &hosted, &plan.key, &plan.replicas);
        if changes.is_empty() {
            return;
        }
        let mut placed = Vec::new();
        for (key, config) in changes.place {
            if host.place(key, config) {
                placed.push(key);
            }
        }
        for key in &changes.remove {
            host.remove(key);
        }
        for key in placed {
            self.trace.event(self.now, "place", &[id.0, key.journal.0], || format!("{id:?} places {key:?}"));
        }
        for key in changes.remove {
            self.trace.event(self.now, "remove", &[id.0, key.journal.0], || format!("{id:?} removes {key:?}"));
        }
        self.kick(m);
    }
}
