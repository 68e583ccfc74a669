//! The seeded world: machines behind [`Host`], a faulty network, simulated disks, clients, and
//! one event queue ordered by simulated time. Nothing in it reads a clock or iterates a hash map:
//! a seed replays bit for bit.
//!
//! A run is a chaos phase (message loss, duplication, delay spikes, partitions, crashes, failed
//! syncs, long outages, replicas losing their disks) followed by a fault-free settle tail in which
//! every machine restarts, the clients wind down and every journal must converge. Claims are
//! checked as the run goes and at its end.

mod audit;
mod finale;
mod params;
mod trace;

pub use params::{NetParams, Outage, Params, WorkloadParams};
pub use trace::Trace;

use std::collections::BTreeMap;

use paros_core::{Call, CallId, Consistency, JournalConfig, JournalId, JournalKey, Message, NodeId, ReadId, TenantId};

use crate::check::{Claims, HistoryOp, OpInput, OpOutput};
use crate::client::{ClientCtx, ClientEvent, ClientIo, Outgoing, Reader, Reply, Request, Writer};
use crate::disk::{SimDisk, SyncFault};
use crate::host::{CoreHost, Host, MachineRole, MachineSpec, Packet, Placement, RoundOutput};
use crate::rng::SimRng;
use audit::Audit;

/// How to run one seed.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    /// Print every event as it happens.
    pub timeline: bool,
    /// Steps the linearizability search may take per journal.
    pub lin_step_budget: u64,
    /// Keep the client histories in the report.
    pub keep_history: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { timeline: false, lin_step_budget: 2_000_000, keep_history: false }
    }
}

/// What one run found.
#[derive(Debug)]
pub struct RunReport {
    pub seed: u64,
    pub claims: Claims,
    /// The digest of the whole event trace.
    pub hash: u64,
    pub events: u64,
    pub sim_ns: u64,
    /// Journal histories checked, and those whose search ran out of steps.
    pub histories_checked: u64,
    pub histories_exhausted: u64,
    pub history: Vec<HistoryOp>,
}

/// Runs `seed` on machines made of the core ([`CoreHost`]).
#[must_use]
pub fn run_seed(seed: u64, options: RunOptions) -> RunReport {
    World::<CoreHost>::new(seed, options).run()
}

struct Machine<H> {
    spec: MachineSpec,
    disk: SimDisk,
    host: Option<H>,
    /// Bumped at every crash and boot: events of an older incarnation are ignored.
    epoch: u64,
    round_in_flight: bool,
    /// In a long outage: random restarts leave it down.
    held_down: bool,
    tick_ns: u64,
}

enum ClientKind {
    Writer(Writer),
    Reader(Reader),
}

struct Client {
    kind: ClientKind,
    journal: usize,
    name: String,
    next_token: u64,
}

struct Outstanding {
    client: usize,
    token: u64,
    history: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum RestartCause {
    Random,
    OutageEnd,
    Settle,
}

enum Event {
    Tick(usize, u64),
    RoundDone(usize, u64),
    Packet { to: usize, from: NodeId, packet: Packet },
    Request { to: usize, req: u64, journal: JournalKey, request: Request },
    Reply { req: u64, from: NodeId, reply: Reply },
    Timeout(u64),
    ClientWake(usize),
    Crash,
    Restart(usize, RestartCause),
    OutageStart(usize),
    PartitionStart,
    PartitionHeal,
    SettleStart,
    ClientsStop,
    ConvergeCheck,
}

/// One seeded world.
pub struct World<H: Host> {
    seed: u64,
    params: Params,
    options: RunOptions,
    rng: SimRng,
    now: u64,
    queue: BTreeMap<(u64, u64), Event>,
    queued: u64,
    machines: Vec<Machine<H>>,
    index: BTreeMap<NodeId, usize>,
    journals: Vec<(JournalKey, JournalConfig)>,
    clients: Vec<Client>,
    requests: BTreeMap<u64, Outstanding>,
    next_request: u64,
    history: Vec<HistoryOp>,
    history_order: u64,
    partition: Option<BTreeMap<NodeId, u8>>,
    chaos: bool,
    stopping: bool,
    settle_deadline: u64,
    done: bool,
    audit: Audit,
    trace: Trace,
}

impl<H: Host> std::fmt::Debug for World<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World").field("seed", &self.seed).field("now", &self.now).finish_non_exhaustive()
    }
}

const MS: u64 = 1_000_000;

impl<H: Host> World<H> {
    /// Builds the world of `seed`: its machines, journals, clients and fault schedule.
    #[must_use]
    pub fn new(seed: u64, options: RunOptions) -> World<H> {
        let mut rng = SimRng::new(seed);
        let params = Params::draw(&mut rng);
        let voter_ids: Vec<NodeId> = (0..params.voters).map(|_| NodeId(rng.u64())).collect();
        let replica_ids: Vec<NodeId> = (0..params.replicas).map(|_| NodeId(rng.u64())).collect();
        let tenant = TenantId(rng.u64());
        let journals: Vec<(JournalKey, JournalConfig)> = params
            .placements
            .iter()
            .map(|voters| {
                let key = JournalKey { tenant, journal: JournalId(rng.u64()) };
                let config = JournalConfig {
                    mode: paros_core::journal::WriterMode::Single,
                    voters: voters.iter().map(|v| voter_ids[*v]).collect(),
                    learners: replica_ids.clone(),
                };
                (key, config)
            })
            .collect();
        let quorum = journals.iter().map(|(k, c)| (*k, c.quorum())).collect();
        let mut machines = Vec::new();
        for (id, role) in voter_ids.iter().map(|v| (*v, MachineRole::Voter)).chain(replica_ids.iter().map(|r| (*r, MachineRole::Replica))) {
            let placements = journals
                .iter()
                .filter(|(_, c)| c.voters.contains(&id) || c.learners.contains(&id))
                .map(|(key, config)| Placement { key: *key, config: config.clone() })
                .collect();
            let spec = MachineSpec {
                id,
                role,
                placements,
                tunables: params.tunables,
                alive_ticks: params.alive_ticks,
                suspect_ticks: params.suspect_ticks,
            };
            let skew = rng.between(980, 1020);
            machines.push(Machine {
                spec,
                disk: SimDisk::default(),
                host: None,
                epoch: 0,
                round_in_flight: false,
                held_down: false,
                tick_ns: params.tick_ns * skew / 1000,
            });
        }
        let index = machines.iter().enumerate().map(|(i, m)| (m.spec.id, i)).collect();
        let mut clients = Vec::new();
        for (w, wl) in params.workloads.iter().enumerate() {
            let config = &journals[wl.journal].1;
            let start = rng.between(0, 500 * MS);
            clients.push(Client {
                kind: ClientKind::Writer(Writer::new(format!("w{w}"), config.voters.clone(), rng.fork(), wl.writer, start)),
                journal: wl.journal,
                name: format!("w{w}"),
                next_token: 0,
            });
            for (r, rp) in wl.readers.iter().enumerate() {
                let servers: Vec<NodeId> = config.voters.iter().chain(&config.learners).copied().collect();
                let name = format!("r{w}.{r}");
                let start = rng.between(0, 500 * MS);
                clients.push(Client {
                    kind: ClientKind::Reader(Reader::new(name.clone(), servers, rng.fork(), *rp, start)),
                    journal: wl.journal,
                    name,
                    next_token: 0,
                });
            }
        }
        let settle_deadline = params.chaos_ns + params.settle_max_ns;
        let mut world = World {
            seed,
            params,
            options,
            rng,
            now: 0,
            queue: BTreeMap::new(),
            queued: 0,
            machines,
            index,
            journals,
            clients,
            requests: BTreeMap::new(),
            next_request: 1,
            history: Vec::new(),
            history_order: 0,
            partition: None,
            chaos: true,
            stopping: false,
            settle_deadline,
            done: false,
            audit: Audit::new(quorum),
            trace: Trace::new(options.timeline),
        };
        world.schedule_start();
        world
    }

    fn schedule_start(&mut self) {
        for m in 0..self.machines.len() {
            self.boot(m);
        }
        for c in 0..self.clients.len() {
            self.at(0, Event::ClientWake(c));
        }
        if let Some((lo, hi)) = self.params.crash_gap_ns {
            let t = self.rng.between(lo, hi);
            self.at(t, Event::Crash);
        }
        if let Some((lo, hi)) = self.params.partition_gap_ns {
            let t = self.rng.between(lo, hi);
            self.at(t, Event::PartitionStart);
        }
        if let Some(o) = self.params.voter_outage {
            let m = self.rng.below(self.params.voters as u64) as usize;
            self.at(o.start_ns, Event::OutageStart(m));
            self.at(o.start_ns + o.len_ns, Event::Restart(m, RestartCause::OutageEnd));
        }
        if let Some(o) = self.params.replica_outage {
            let m = self.params.voters + self.rng.below(self.params.replicas as u64) as usize;
            self.at(o.start_ns, Event::OutageStart(m));
            self.at(o.start_ns + o.len_ns, Event::Restart(m, RestartCause::OutageEnd));
        }
        self.at(self.params.chaos_ns, Event::SettleStart);
        let (v, r, j, c) = (self.params.voters, self.params.replicas, self.journals.len(), self.clients.len());
        let seed = self.seed;
        self.trace.event(0, "world", &[v as u64, r as u64, j as u64, c as u64], || {
            format!("seed={seed} voters={v} replicas={r} journals={j} clients={c}")
        });
    }

    fn at(&mut self, time: u64, event: Event) {
        self.queued += 1;
        self.queue.insert((time, self.queued), event);
    }

    fn after(&mut self, delay: u64, event: Event) {
        self.at(self.now + delay, event);
    }

    /// Runs the world to its end and judges it.
    pub fn run(mut self) -> RunReport {
        while !self.done {
            let Some(((time, _), event)) = self.queue.pop_first() else { break };
            self.now = time;
            self.handle(event);
        }
        self.finish()
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Tick(m, epoch) => self.on_tick(m, epoch),
            Event::RoundDone(m, epoch) => self.on_round_done(m, epoch),
            Event::Packet { to, from, packet } => self.on_packet(to, from, packet),
            Event::Request { to, req, journal, request } => self.on_request(to, req, journal, request),
            Event::Reply { req, from, reply } => self.resolve(req, Some(from), reply),
            Event::Timeout(req) => self.resolve(req, None, Reply::TimedOut),
            Event::ClientWake(c) => {
                self.wake_client(c);
                let gap = self.params.client_wake_ns;
                self.after(gap, Event::ClientWake(c));
            }
            Event::Crash => self.on_random_crash(),
            Event::Restart(m, cause) => self.on_restart(m, cause),
            Event::OutageStart(m) => {
                if self.chaos {
                    self.machines[m].held_down = true;
                    self.crash(m, "outage");
                }
            }
            Event::PartitionStart => self.on_partition(),
            Event::PartitionHeal => {
                if self.partition.take().is_some() {
                    self.trace.event(self.now, "heal", &[], String::new);
                }
            }
            Event::SettleStart => self.on_settle(),
            Event::ClientsStop => {
                self.stopping = true;
                self.trace.event(self.now, "stop", &[], || "clients start nothing new".into());
                self.after(500 * MS, Event::ConvergeCheck);
            }
            Event::ConvergeCheck => self.on_converge_check(),
        }
    }

    // ---- machines -------------------------------------------------------------------------

    fn boot(&mut self, m: usize) {
        let seed = self.rng.u64();
        let mach = &mut self.machines[m];
        mach.epoch += 1;
        mach.round_in_flight = false;
        mach.host = Some(H::boot(&mach.spec, &mach.disk, seed));
        let (epoch, id) = (mach.epoch, mach.spec.id);
        let offset = self.rng.below(mach.tick_ns);
        self.after(offset, Event::Tick(m, epoch));
        self.trace.event(self.now, "boot", &[id.0], || format!("{id:?}"));
        self.kick(m);
    }

    fn crash(&mut self, m: usize, why: &'static str) {
        let mach = &mut self.machines[m];
        if mach.host.take().is_none() {
            return;
        }
        mach.disk.crash();
        mach.epoch += 1;
        mach.round_in_flight = false;
        let id = mach.spec.id;
        self.observe_disk(m);
        self.trace.event(self.now, "crash", &[id.0], || format!("{id:?} ({why})"));
    }

    fn on_tick(&mut self, m: usize, epoch: u64) {
        let mach = &mut self.machines[m];
        if mach.epoch != epoch {
            return;
        }
        let Some(host) = mach.host.as_mut() else { return };
        host.tick();
        let period = mach.tick_ns;
        self.trace.quiet(self.now, "tick", &[m as u64]);
        self.after(period, Event::Tick(m, epoch));
        self.kick(m);
    }

    /// Starts a round on `m` if it is up, idle and has work.
    fn kick(&mut self, m: usize) {
        let mach = &mut self.machines[m];
        if mach.round_in_flight {
            return;
        }
        let Some(host) = mach.host.as_mut() else { return };
        let Some(started) = host.start_round(&mut mach.disk) else { return };
        mach.round_in_flight = true;
        let writes = started.writes;
        let epoch = mach.epoch;
        let duration = if writes > 0 {
            if self.chaos && self.rng.chance(self.params.sync_fail_ppm) {
                let fault = if self.rng.chance(500_000) { SyncFault::FailLost } else { SyncFault::FailPersisted };
                self.machines[m].disk.arm(fault);
            }
            let (lo, hi) = self.params.fsync_ns;
            self.rng.between(lo, hi)
        } else {
            2_000
        };
        self.trace.quiet(self.now, "round", &[m as u64, writes as u64]);
        self.after(duration, Event::RoundDone(m, epoch));
        self.release(m, started.early);
    }

    fn on_round_done(&mut self, m: usize, epoch: u64) {
        let mach = &mut self.machines[m];
        if mach.epoch != epoch {
            return;
        }
        let host = mach.host.as_mut().expect("a machine with a round in flight is up");
        let result = host.finish_round(&mut mach.disk);
        mach.round_in_flight = false;
        self.observe_disk(m);
        match result {
            Err(_) => {
                self.crash(m, "sync failed");
                let (lo, hi) = self.params.down_ns;
                let down = self.rng.between(lo, hi);
                self.after(down, Event::Restart(m, RestartCause::Random));
            }
            Ok(out) => {
                self.audit_round(m, &out);
                self.release(m, out);
                self.kick(m);
            }
        }
    }

    fn observe_disk(&mut self, m: usize) {
        let mach = &mut self.machines[m];
        let (id, role) = (mach.spec.id, mach.spec.role);
        for (key, op) in mach.disk.take_observed() {
            if matches!(op, paros_core::WriteOp::TrimmedTo { .. }) {
                let j = self.journals.iter().position(|(k, _)| *k == key).unwrap_or(0);
                self.trace.event(self.now, "jump", &[id.0, j as u64], || format!("{id:?} journal {j}: {op:?}"));
            }
            self.audit.on_durable(id, role, key, &op);
        }
    }

    fn audit_round(&mut self, m: usize, out: &RoundOutput) {
        let mach = &self.machines[m];
        let id = mach.spec.id;
        let host = mach.host.as_ref().expect("up");
        for (key, a) in &out.applied {
            self.trace.quiet(self.now, "applied", &[id.0, a.slot.0, a.digest]);
            self.audit.on_applied(id, *key, a);
        }
        for p in &mach.spec.placements {
            if let Some(probe) = host.probe(&p.key) {
                let durable = mach.disk.durable(&p.key).map(|d| d.promise);
                self.audit.on_probe(id, p.key, &probe, durable);
            }
        }
    }

    fn release(&mut self, m: usize, out: RoundOutput) {
        let from = self.machines[m].spec.id;
        for (_, packet) in &out.packets {
            if let Packet::Protocol(e) = packet {
                let durable = self.machines[m].disk.durable(&e.journal);
                self.audit.on_leaving(from, e.journal, &e.message, durable);
            }
        }
        for (to, packet) in out.packets {
            let Some(&t) = self.index.get(&to) else { continue };
            self.send_packet(from, t, packet);
        }
        for (CallId(req), answer) in out.answers {
            self.send_reply(req, from, Reply::Call(answer));
        }
        for (ReadId(req), answer) in out.reads {
            self.send_reply(req, from, Reply::Read(answer));
        }
    }

    // ---- network --------------------------------------------------------------------------

    fn net(&self) -> NetParams {
        if self.chaos { self.params.net } else { self.params.net.calm() }
    }

    fn delay(&mut self) -> u64 {
        let net = self.net();
        let mut d = self.rng.between(net.delay_ns.0, net.delay_ns.1);
        if self.rng.chance(net.spike_ppm) {
            d += self.rng.between(net.spike_ns.0, net.spike_ns.1);
        }
        d
    }

    fn send_packet(&mut self, from: NodeId, to: usize, packet: Packet) {
        let net = self.net();
        if self.rng.chance(net.drop_ppm) {
            return;
        }
        let copies = if self.rng.chance(net.dup_ppm) { 2 } else { 1 };
        for _ in 0..copies {
            let d = self.delay();
            self.after(d, Event::Packet { to, from, packet: packet.clone() });
        }
    }

    fn cut(&self, a: NodeId, b: NodeId) -> bool {
        self.partition.as_ref().is_some_and(|p| p.get(&a) != p.get(&b))
    }

    fn on_packet(&mut self, to: usize, from: NodeId, packet: Packet) {
        let id = self.machines[to].spec.id;
        if self.cut(from, id) {
            return;
        }
        let Some(host) = self.machines[to].host.as_mut() else { return };
        match &packet {
            Packet::Protocol(e) => {
                let (kind, a, b) = message_fields(&e.message);
                self.trace.event(self.now, "deliver", &[from.0, id.0, kind, a, b], || {
                    format!("{from:?} -> {id:?} {:?}: {}", e.journal.journal, describe(&e.message))
                });
            }
            Packet::Alive => self.trace.quiet(self.now, "alive", &[from.0, id.0]),
        }
        host.deliver(from, packet);
        self.kick(to);
    }

    // ---- clients --------------------------------------------------------------------------

    fn clamp(&self, journal: usize) -> Option<u64> {
        self.clients
            .iter()
            .filter(|c| c.journal == journal)
            .filter_map(|c| match &c.kind {
                ClientKind::Reader(r) if r.folding() => Some(r.cursor()),
                _ => None,
            })
            .min()
    }

    fn wake_client(&mut self, c: usize) {
        let ctx = ClientCtx { clamp: self.clamp(self.clients[c].journal), stopping: self.stopping };
        let mut io = ClientIo::new(self.clients[c].next_token);
        let now = self.now;
        match &mut self.clients[c].kind {
            ClientKind::Writer(w) => w.wake(now, ctx, &mut io),
            ClientKind::Reader(r) => r.wake(now, ctx, &mut io),
        }
        self.flush_client(c, io);
    }

    fn flush_client(&mut self, c: usize, io: ClientIo) {
        self.clients[c].next_token = io.next_token();
        let key = self.journals[self.clients[c].journal].0;
        for ev in &io.events {
            let name = &self.clients[c].name;
            if let ClientEvent::Gap { from, resumed_at } = ev {
                self.trace.event(self.now, "gap", &[*from, *resumed_at], || {
                    format!("{name} skipped seq{from}..seq{resumed_at}: truncated past its cursor")
                });
            }
            self.audit.on_client(key, name, ev);
        }
        for out in io.sends {
            self.send_request(c, out);
        }
    }

    fn send_request(&mut self, c: usize, out: Outgoing) {
        let Outgoing { token, to, request } = out;
        let Some(&m) = self.index.get(&to) else { return };
        let journal = self.journals[self.clients[c].journal].0;
        let req = self.next_request;
        self.next_request += 1;
        self.history_order += 1;
        self.history.push(HistoryOp {
            journal,
            client: self.clients[c].name.clone(),
            input: op_input(&request),
            output: None,
            call_ns: self.now,
            return_ns: None,
            call_order: self.history_order,
            return_order: None,
        });
        self.requests.insert(req, Outstanding { client: c, token, history: self.history.len() - 1 });
        let name = &self.clients[c].name;
        self.trace.event(self.now, "request", &[req, to.0], || format!("{name} -> {to:?} #{req} {request:?}"));
        let timeout = self.params.call_timeout_ns;
        self.after(timeout, Event::Timeout(req));
        if !self.rng.chance(self.net().drop_ppm) {
            let d = self.delay();
            self.after(d, Event::Request { to: m, req, journal, request });
        }
    }

    fn on_request(&mut self, to: usize, req: u64, journal: JournalKey, request: Request) {
        let Some(host) = self.machines[to].host.as_mut() else { return };
        match request {
            Request::Call(call) => host.call(journal, CallId(req), call),
            Request::Read(read) => host.read(journal, ReadId(req), read),
        }
        self.kick(to);
    }

    fn send_reply(&mut self, req: u64, from: NodeId, reply: Reply) {
        if !self.requests.contains_key(&req) || self.rng.chance(self.net().drop_ppm) {
            return;
        }
        let d = self.delay();
        self.after(d, Event::Reply { req, from, reply });
    }

    fn resolve(&mut self, req: u64, from: Option<NodeId>, reply: Reply) {
        let Some(o) = self.requests.remove(&req) else { return };
        self.history_order += 1;
        let h = &mut self.history[o.history];
        match &reply {
            Reply::Call(a) => h.output = Some(OpOutput::Call(*a)),
            Reply::Read(a) => h.output = Some(OpOutput::Read(a.clone())),
            Reply::TimedOut => {}
        }
        if !matches!(reply, Reply::TimedOut) {
            h.return_ns = Some(self.now);
            h.return_order = Some(self.history_order);
        }
        if let (OpInput::Read { from: f, .. }, Reply::Read(answer)) = (&h.input, &reply) {
            let key = h.journal;
            let f = *f;
            self.audit.on_read(key, f, answer);
        }
        let name = &self.clients[o.client].name;
        self.trace.event(self.now, "reply", &[req, reply_code(&reply)], || format!("{name} <- #{req} {reply:?}"));
        let c = o.client;
        let mut io = ClientIo::new(self.clients[c].next_token);
        let now = self.now;
        match &mut self.clients[c].kind {
            ClientKind::Writer(w) => w.on_reply(now, o.token, from, reply, &mut io),
            ClientKind::Reader(r) => r.on_reply(now, o.token, reply, &mut io),
        }
        self.flush_client(c, io);
        self.wake_client(c);
    }

    // ---- faults ---------------------------------------------------------------------------

    fn voters_up(&self) -> usize {
        self.machines.iter().filter(|m| m.spec.role == MachineRole::Voter && m.host.is_some()).count()
    }

    /// A machine to hit: half the time one that leads some journal (a leader dying or cut off
    /// with proposals in flight is where Paxos earns its keep), else any machine.
    fn victim(&mut self) -> usize {
        if self.rng.chance(500_000) {
            let leaders: Vec<usize> = (0..self.machines.len())
                .filter(|m| {
                    let mach = &self.machines[*m];
                    mach.host.as_ref().is_some_and(|h| {
                        mach.spec.placements.iter().any(|p| h.probe(&p.key).is_some_and(|pr| pr.leader))
                    })
                })
                .collect();
            if !leaders.is_empty() {
                return *self.rng.pick(&leaders);
            }
        }
        self.rng.below(self.machines.len() as u64) as usize
    }

    fn on_random_crash(&mut self) {
        if !self.chaos {
            return;
        }
        let Some((lo, hi)) = self.params.crash_gap_ns else { return };
        let next = self.rng.between(lo, hi);
        self.after(next, Event::Crash);
        let m = self.victim();
        if self.machines[m].host.is_none() {
            return;
        }
        let majority = self.params.voters / 2 + 1;
        if self.machines[m].spec.role == MachineRole::Voter && self.voters_up() <= majority && self.rng.chance(800_000) {
            return;
        }
        self.crash(m, "random");
        let (lo, hi) = self.params.down_ns;
        let down = self.rng.between(lo, hi);
        self.after(down, Event::Restart(m, RestartCause::Random));
    }

    fn on_restart(&mut self, m: usize, cause: RestartCause) {
        let mach = &mut self.machines[m];
        if mach.held_down && cause == RestartCause::Random {
            return;
        }
        if cause != RestartCause::Random {
            mach.held_down = false;
        }
        if mach.host.is_some() {
            return;
        }
        if mach.spec.role == MachineRole::Replica && self.rng.chance(self.params.wipe_replica_ppm) {
            let id = self.machines[m].spec.id;
            self.machines[m].disk.wipe();
            self.trace.event(self.now, "wipe", &[id.0], || format!("{id:?} comes back with an empty disk"));
        }
        self.boot(m);
    }

    fn on_partition(&mut self) {
        if !self.chaos {
            return;
        }
        let Some((lo, hi)) = self.params.partition_gap_ns else { return };
        let mut groups = BTreeMap::new();
        let ids: Vec<NodeId> = self.machines.iter().map(|m| m.spec.id).collect();
        if self.rng.chance(500_000) {
            let victim = self.victim();
            let alone = self.machines[victim].spec.id;
            for id in &ids {
                groups.insert(*id, u8::from(*id == alone));
            }
        } else {
            for id in &ids {
                groups.insert(*id, self.rng.below(2) as u8);
            }
        }
        let sides: Vec<u64> = ids.iter().map(|id| u64::from(groups[id])).collect();
        self.trace.event(self.now, "partition", &sides, || format!("{groups:?}"));
        self.partition = Some(groups);
        let (llo, lhi) = self.params.partition_len_ns;
        let len = self.rng.between(llo, lhi);
        self.after(len, Event::PartitionHeal);
        let gap = self.rng.between(lo, hi);
        self.after(len + gap, Event::PartitionStart);
    }

    fn on_settle(&mut self) {
        self.chaos = false;
        self.partition = None;
        self.trace.event(self.now, "settle", &[], || "faults stop; every machine restarts".into());
        for m in 0..self.machines.len() {
            self.on_restart(m, RestartCause::Settle);
        }
        let work = self.params.settle_work_ns;
        self.after(work, Event::ClientsStop);
    }

    fn on_converge_check(&mut self) {
        let writers_idle = self.clients.iter().all(|c| match &c.kind {
            ClientKind::Writer(w) => !w.busy(),
            ClientKind::Reader(_) => true,
        });
        if (writers_idle && (0..self.journals.len()).all(|j| self.converged(j))) || self.now >= self.settle_deadline {
            self.done = true;
            return;
        }
        self.after(100 * MS, Event::ConvergeCheck);
    }

    /// True when every machine hosting journal `j` is up and holds the same chosen prefix and
    /// state, covering every slot a quorum is known to have accepted.
    fn converged(&self, j: usize) -> bool {
        let (key, _) = &self.journals[j];
        let mut first = None;
        for mach in self.machines.iter().filter(|m| m.spec.placements.iter().any(|p| p.key == *key)) {
            let Some(probe) = mach.host.as_ref().and_then(|h| h.probe(key)) else { return false };
            let here = (probe.chosen_up_to, probe.state);
            match first {
                None => first = Some(here),
                Some(f) if f != here => return false,
                Some(_) => {}
            }
        }
        let Some((chosen_up_to, _)) = first else { return true };
        self.audit.highest_chosen(key).is_none_or(|s| s < chosen_up_to)
    }
}

fn op_input(request: &Request) -> OpInput {
    match request {
        Request::Call(Call::Write { leader, seq, records }) => {
            OpInput::Write { leader: leader.expect("workload writers are fenced"), seq: seq.0, records: records.clone() }
        }
        Request::Call(Call::Truncate { leader, up_to }) => {
            OpInput::Truncate { leader: leader.expect("workload writers are fenced"), up_to: up_to.0 }
        }
        Request::Call(Call::SetLeader { new, old }) => OpInput::SetLeader { new: *new, old: *old },
        Request::Read(r) => OpInput::Read { from: r.from.0, limit: r.limit, consistency: r.consistency },
    }
}

fn reply_code(reply: &Reply) -> u64 {
    match reply {
        Reply::Call(_) => 1,
        Reply::Read(_) => 2,
        Reply::TimedOut => 3,
    }
}

/// A message's kind and two numbers that identify it, for the trace digest.
fn message_fields(m: &Message) -> (u64, u64, u64) {
    match m {
        Message::Prepare { ballot, from } => (1, ballot.round, from.0),
        Message::Promise { ballot, from, accepted, .. } => (2, ballot.round, from.0 ^ accepted.len() as u64),
        Message::Nack { ballot, promised, floor } => (3, ballot.round ^ promised.round, floor.0),
        Message::Accept { ballot, entries, commit } => (4, ballot.round, entries.first().map_or(0, |e| e.0.0) ^ commit.0),
        Message::Accepted { ballot, slots } => (5, ballot.round, slots.first().map_or(0, |s| s.1)),
        Message::Heartbeat { ballot, commit, quiesce } => (6, ballot.round, commit.0 * 2 + u64::from(*quiesce)),
        Message::HeartbeatAck { ballot, chosen_up_to } => (7, ballot.round, chosen_up_to.0),
        Message::Chosen { entries } => (8, entries.len() as u64, entries.first().map_or(0, |e| e.0.0)),
        Message::CatchUpRequest { from } => (9, from.0, 0),
        Message::CatchUpResponse { entries } => (10, entries.len() as u64, entries.first().map_or(0, |e| e.0.0)),
        Message::TrimmedTo { from, point, .. } => (11, from.0, point.0),
        Message::WatermarkRequest { read } => (12, *read, 0),
        Message::Watermark { read, up_to } => (13, *read, up_to.0),
    }
}

fn describe(m: &Message) -> String {
    match m {
        Message::Accept { ballot, entries, commit } => {
            let slots: Vec<u64> = entries.iter().map(|e| e.0.0).collect();
            format!("Accept {ballot:?} slots {slots:?} commit {commit:?}")
        }
        Message::Chosen { entries } | Message::CatchUpResponse { entries } => {
            let slots: Vec<u64> = entries.iter().map(|e| e.0.0).collect();
            let kind = if matches!(m, Message::Chosen { .. }) { "Chosen" } else { "CatchUpResponse" };
            format!("{kind} slots {slots:?}")
        }
        Message::Promise { ballot, from, chosen_up_to, accepted } => {
            let slots: Vec<u64> = accepted.iter().map(|r| r.slot.0).collect();
            format!("Promise {ballot:?} from {from:?} chosen_up_to {chosen_up_to:?} reported {slots:?}")
        }
        other => format!("{other:?}"),
    }
}

/// Whether `c` is a linearizable read (for reports).
#[must_use]
pub fn is_linearizable_read(input: &OpInput) -> bool {
    matches!(input, OpInput::Read { consistency: Consistency::Linearizable, .. })
}
