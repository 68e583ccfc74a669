//! The seeded world: machines behind [`Host`], a faulty network, simulated disks, clients, and
//! one event queue ordered by simulated time. Nothing in it reads a clock or iterates a hash map:
//! a seed replays bit for bit.
//!
//! A run is a chaos phase (message loss, duplication, delay spikes, partitions, crashes, failed
//! syncs, long outages, replicas losing their disks) followed by a fault-free settle tail in which
//! every machine restarts, the clients wind down and every journal must converge. Claims are
//! checked as the run goes and at its end.

mod answers;
mod audit;
mod clients;
mod faults;
mod finale;
mod machines;
mod moves;
mod network;
mod params;
mod progress;
mod queue;
mod registry;
mod tier;
mod trace;
mod wipes;

pub use params::{NetParams, Outage, Params, WorkloadParams};
pub use trace::Trace;

use std::collections::BTreeMap;

use paros_core::journal::WriterMode;
use paros_core::{JournalConfig, JournalId, JournalKey, NodeId, TenantId};

use crate::check::multi::MultiWriterAudit;
use crate::check::{Claims, HistoryHeader, HistoryOp, ProbeCounts};
use crate::client::{Appender, Prober, Reader, Reply, Request, Writer, WriterClient};
use crate::disk::SimDisk;
use crate::host::{Host, MachineRole, MachineSpec, NodeHost, Packet, Placement};
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
    /// The journals and limits of the run, for the history file's header line.
    pub header: HistoryHeader,
    /// The workload's probe calls, by probe and answer.
    pub probes: ProbeCounts,
    pub history: Vec<HistoryOp>,
    /// The longest a journal with a pending call went without deciding, in the judged part of
    /// the fault-free tail.
    pub longest_stall_ns: u64,
    /// The registry journal's figures (retained length, state and run sizes).
    pub registry: crate::registry::RegistryFigures,
    /// The replica that joined the tier during the run, if one did.
    pub joined: Option<NodeId>,
    /// The replica retired from the tier during the run, if its retirement was accepted.
    pub retired: Option<NodeId>,
}

/// Runs `seed` on machines made of the node host ([`NodeHost`]): the daemon's own round logic.
#[must_use]
pub fn run_seed(seed: u64, options: RunOptions) -> RunReport {
    World::<NodeHost>::new(seed, options).run()
}

struct Machine<H> {
    spec: MachineSpec,
    disk: SimDisk,
    host: Option<H>,
    /// Bumped at every crash and boot: events of an older incarnation are ignored.
    epoch: u64,
    round_in_flight: bool,
    /// Writes of the round in flight (written to the disk, not yet synced).
    round_writes: usize,
    /// In a long outage: random restarts leave it down.
    held_down: bool,
    /// The disk was wiped since the last boot (a replica coming back empty).
    wiped: bool,
    tick_ns: u64,
    /// In the cell: false for a replica that joins during the run, or a wiped voter's new
    /// identity, until it joins.
    present: bool,
    /// Its store refused to boot (wiped under the identity its shell knows): gone for good.
    refused: bool,
}

impl<H> Machine<H> {
    /// A machine that has not booted yet, on an empty disk.
    fn new(spec: MachineSpec, tick_ns: u64, present: bool) -> Machine<H> {
        Machine {
            spec,
            disk: SimDisk::default(),
            host: None,
            epoch: 0,
            round_in_flight: false,
            round_writes: 0,
            held_down: false,
            wiped: false,
            tick_ns,
            present,
            refused: false,
        }
    }
}

impl MachineSpec {
    /// A machine of `role` with the run's tunables and timers, placed nothing yet.
    fn new(id: NodeId, role: MachineRole, params: &Params) -> MachineSpec {
        MachineSpec {
            id,
            role,
            feeds: Vec::new(),
            placements: Vec::new(),
            formation: Vec::new(),
            tunables: params.tunables,
            alive_ticks: params.alive_ticks,
            suspect_ticks: params.suspect_ticks,
            dormant_after_ticks: params.dormant_after_ticks,
            read_cache: params.read_cache,
            asserts_identity: false,
        }
    }
}

enum ClientKind {
    /// A single-writer journal's writer, or one of a multi-writer journal's appenders.
    Writer(WriterClient),
    Reader(Box<Reader>),
    Prober(Prober),
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
    ReadsDone(usize, u64),
    Packet {
        to: usize,
        from: NodeId,
        packet: Packet,
    },
    Request {
        to: usize,
        req: u64,
        journal: JournalKey,
        request: Request,
    },
    Reply {
        req: u64,
        from: NodeId,
        reply: Reply,
    },
    Timeout(u64),
    ClientWake(usize),
    Crash,
    Restart(usize, RestartCause),
    /// A replica machine joins the cell: it boots for the first time.
    Join(usize),
    OutageStart(usize),
    PartitionStart,
    PartitionHeal,
    SettleStart,
    ClientsStop,
    ConvergeCheck,
    RegistryRequest {
        to: usize,
        req: u64,
        request: crate::registry::RegRequest,
    },
    RegistryReply {
        req: u64,
        reply: Option<crate::registry::RegReply>,
    },
    RegistryTimeout(u64),
    /// The operator asks for one of the seed's seat moves.
    SeatMove,
    /// The operator drains voter `n`.
    Drain(usize),
    /// Voter machine `m` loses its disk.
    Wipe(usize),
    /// The wiped machine comes back as a new identity.
    Rejoin,
}

/// One seeded world.
pub struct World<H: Host> {
    seed: u64,
    params: Params,
    options: RunOptions,
    rng: SimRng,
    now: u64,
    queue: queue::EventQueue<Event>,
    machines: Vec<Machine<H>>,
    index: BTreeMap<NodeId, usize>,
    journals: Vec<(JournalKey, JournalConfig)>,
    clients: Vec<Client>,
    requests: BTreeMap<u64, Outstanding>,
    next_request: u64,
    history: Vec<HistoryOp>,
    /// The index of the latest call or return in the history (see [`HistoryOp::call_index`]).
    history_index: u64,
    partition: Option<BTreeMap<NodeId, u8>>,
    chaos: bool,
    stopping: bool,
    settle_deadline: u64,
    done: bool,
    audit: Audit,
    /// The client checks of multi-writer journals, whose records name no position.
    multi: MultiWriterAudit,
    progress: progress::Progress,
    trace: Trace,
    /// Requests in flight and journal lives: the answers audit.
    answers: answers::Answers,
    registry: registry::RegistryWorld,
    /// The replica tier: its changes during the run and the readers' router.
    tier: tier::TierWorld,
    /// Seat moves: asked for, watched, judged.
    moves: moves::MovesWorld,
    /// A voter losing its disk and rejoining as a new identity.
    wipes: wipes::WipesWorld,
    /// Each journal's configuration as the clients route by it: the voters the registry names
    /// now (a seat move changes them), the rest as placed.
    routes: Vec<JournalConfig>,
    /// How long into the settle tail the progress claims start judging.
    grace_ns: u64,
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
        // The tier's changes draw from a stream of their own (added after seeds were published).
        let mut tier_rng = rng.side(0x6a6f_696e_6c65_6176);
        let joiner = params.replica_join_ns.map(|at| (NodeId(tier_rng.u64()), at));
        let leaver = params
            .replica_leave
            .map(|(i, at)| (replica_ids.get(i).copied().or(joiner.map(|(id, _)| id)).expect("a replica leaves"), at));
        let tenant = TenantId(rng.u64());
        let journals: Vec<(JournalKey, JournalConfig)> = params
            .placements
            .iter()
            .zip(&params.modes)
            .map(|(voters, mode)| {
                let key = JournalKey { tenant, journal: JournalId(rng.u64()) };
                // The registry places odd voter sets only: an even one loses its last voter.
                let odd = if voters.len() % 2 == 0 { &voters[..voters.len() - 1] } else { &voters[..] };
                let mut voters: Vec<NodeId> = odd.iter().map(|v| voter_ids[*v]).collect();
                voters.sort_unstable();
                (key, JournalConfig { mode: *mode, voters, learners: Vec::new() })
            })
            .collect();
        let mut side = rng.side(0x7265_6769_7374_7279);
        let changes = crate::registry::TierChanges { replicas: &replica_ids, join: joiner, leave: leaver };
        let mut plan = crate::registry::Plan::draw(&mut side, &voter_ids, changes, tenant, &journals, params.chaos_ns);
        // The registry puts every journal on the replicas' one tier: each is fed at its feed.
        let tiered = !replica_ids.is_empty() || joiner.is_some();
        let feed: Vec<NodeId> = if tiered { vec![plan.feed] } else { Vec::new() };
        let journals: Vec<(JournalKey, JournalConfig)> =
            journals.into_iter().map(|(k, c)| (k, JournalConfig { learners: feed.clone(), ..c })).collect();
        let mut quorum: BTreeMap<JournalKey, usize> = journals.iter().map(|(k, c)| (*k, c.quorum())).collect();
        quorum.insert(plan.key, plan.config.quorum());
        for key in &plan.scratch {
            quorum.insert(*key, plan.coordinator.voters / 2 + 1);
        }
        let registry_placement = Placement { key: plan.key, config: plan.config.clone() };
        let mut machines = Vec::new();
        let joiner_id = joiner.map(|(id, _)| id);
        for (id, role) in voter_ids
            .iter()
            .map(|v| (*v, MachineRole::Voter))
            .chain(replica_ids.iter().chain(&joiner_id).map(|r| (*r, MachineRole::Replica)))
        {
            let formation: Vec<Placement> = (plan.config.voters.contains(&id) || plan.config.learners.contains(&id))
                .then(|| registry_placement.clone())
                .into_iter()
                .collect();
            let fed = |l: &NodeId| *l == id || (role == MachineRole::Replica && feed.contains(l));
            let placements = journals
                .iter()
                .filter(|(_, c)| c.voters.contains(&id) || c.learners.iter().any(fed))
                .map(|(key, config)| Placement { key: *key, config: config.clone() })
                .chain(formation.iter().cloned())
                .collect();
            let feeds = if role == MachineRole::Replica { feed.clone() } else { Vec::new() };
            let spec = MachineSpec { feeds, placements, formation, ..MachineSpec::new(id, role, &params) };
            let present = Some(id) != joiner_id;
            let skew = if present { rng.between(980, 1020) } else { tier_rng.between(980, 1020) };
            machines.push(Machine::new(spec, params.tick_ns * skew / 1000, present));
        }
        // A wiped voter's new identity boots on a machine of its own, the world's last.
        let wipe = wipes::WipeParams::draw(&rng, params.voters, params.chaos_ns);
        let mut wipes = wipes::WipesWorld { params: wipe, ..wipes::WipesWorld::default() };
        if let Some(w) = wipe {
            wipes.spare = Some(machines.len());
            plan.servers.push(w.new_id);
            machines.push(Machine::new(MachineSpec::new(w.new_id, MachineRole::Voter, &params), params.tick_ns, false));
        }
        let index: BTreeMap<NodeId, usize> = machines.iter().enumerate().map(|(i, m)| (m.spec.id, i)).collect();
        let mut clients = Vec::new();
        for (w, wl) in params.workloads.iter().enumerate() {
            let config = &journals[wl.journal].1;
            if config.mode == WriterMode::Multi {
                for (a, ap) in wl.appenders.iter().enumerate() {
                    let name = format!("a{w}.{a}");
                    let start = rng.between(0, 500 * MS);
                    let appender =
                        Appender::new(name.clone(), config.voters.clone(), rng.fork(), *ap, params.tick_ns, start);
                    clients.push(Client {
                        kind: ClientKind::Writer(WriterClient::Multi(Box::new(appender))),
                        journal: wl.journal,
                        name,
                        next_token: 0,
                    });
                }
            } else {
                let start = rng.between(0, 500 * MS);
                let writer =
                    Writer::new(format!("w{w}"), config.voters.clone(), rng.fork(), wl.writer, params.tick_ns, start);
                clients.push(Client {
                    kind: ClientKind::Writer(WriterClient::Single(Box::new(writer))),
                    journal: wl.journal,
                    name: format!("w{w}"),
                    next_token: 0,
                });
            }
            for (r, rp) in wl.readers.iter().enumerate() {
                let name = format!("r{w}.{r}");
                let start = rng.between(0, 500 * MS);
                clients.push(Client {
                    kind: ClientKind::Reader(Box::new(Reader::new(
                        name.clone(),
                        &config.voters,
                        rng.fork(),
                        *rp,
                        params.tick_ns,
                        start,
                    ))),
                    journal: wl.journal,
                    name,
                    next_token: 0,
                });
            }
            if let Some(pp) = wl.prober {
                // Probes go to any server, removed replicas included (nothing routes them).
                let servers: Vec<NodeId> =
                    config.voters.iter().chain(&replica_ids).chain(&joiner_id).copied().collect();
                let name = format!("p{w}");
                let start = rng.between(0, 500 * MS);
                clients.push(Client {
                    kind: ClientKind::Prober(Prober::new(name.clone(), servers, rng.fork(), pp, start)),
                    journal: wl.journal,
                    name,
                    next_token: 0,
                });
            }
        }
        let settle_deadline = params.chaos_ns + params.settle_max_ns;
        // The registry journal is judged like every other journal (last, after the workload's).
        let mut journals = journals;
        journals.push((plan.key, plan.config.clone()));
        let tier = tier::TierWorld::new(&plan, tiered, joiner, leaver, &index);
        let registry = registry::RegistryWorld::new(plan, machines.len(), side.fork());
        let journals_len = journals.len();
        let founders: Vec<(JournalKey, Vec<NodeId>)> = journals.iter().map(|(k, c)| (*k, c.voters.clone())).collect();
        let moves = moves::MovesWorld::new(
            moves::MoveParams::draw(&rng, params.chaos_ns),
            rng.side(0x6d76),
            journals_len,
            machines.len(),
        );
        let routes: Vec<JournalConfig> = journals.iter().map(|(_, c)| c.clone()).collect();
        // Judged from three election timeouts into the tail (every machine restarts at its
        // start); a stall may last five.
        let election_ns = u64::from(params.tunables.election_ticks_max) * params.tick_ns;
        let (grace_ns, stall_bound_ns) = (3 * election_ns, 5 * election_ns);
        let retry_window_ns = 3 * params.tick_ns;
        let mut world = World {
            seed,
            params,
            options,
            rng,
            now: 0,
            queue: queue::EventQueue::default(),
            machines,
            index,
            journals,
            clients,
            requests: BTreeMap::new(),
            next_request: 1,
            history: Vec::new(),
            history_index: 0,
            partition: None,
            chaos: true,
            stopping: false,
            settle_deadline,
            done: false,
            audit: Audit::new(quorum, &founders),
            multi: MultiWriterAudit::default(),
            progress: progress::Progress::new(journals_len, grace_ns, stall_bound_ns, retry_window_ns),
            trace: Trace::new(options.timeline),
            answers: answers::Answers::default(),
            registry,
            tier,
            moves,
            wipes,
            routes,
            grace_ns,
        };
        world.schedule_start();
        world
    }

    fn schedule_start(&mut self) {
        for m in 0..self.machines.len() {
            if self.machines[m].present {
                self.boot(m);
            }
        }
        if let Some((m, at)) = self.tier.joiner {
            self.at(at, Event::Join(m));
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
        self.schedule_moves();
        self.schedule_wipe();
        let (v, r, j, c) = (self.params.voters, self.params.replicas, self.journals.len(), self.clients.len());
        let seed = self.seed;
        self.trace.event(0, "world", &[v as u64, r as u64, j as u64, c as u64], || {
            format!("seed={seed} voters={v} replicas={r} journals={j} clients={c}")
        });
    }

    fn at(&mut self, time: u64, event: Event) {
        self.queue.push(time, event);
    }

    fn after(&mut self, delay: u64, event: Event) {
        self.at(self.now + delay, event);
    }

    /// Runs the world to its end and judges it.
    pub fn run(mut self) -> RunReport {
        while !self.done {
            let Some((time, event)) = self.queue.pop() else { break };
            self.now = time;
            self.handle(event);
        }
        self.finish()
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Tick(m, epoch) => self.on_tick(m, epoch),
            Event::RoundDone(m, epoch) => self.on_round_done(m, epoch),
            Event::ReadsDone(m, epoch) => self.on_reads_done(m, epoch),
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
            Event::Join(m) => self.on_join(m),
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
            Event::RegistryRequest { to, req, request } => self.on_registry_request(to, req, request),
            Event::RegistryReply { req, reply } => self.on_registry_reply(req, reply),
            Event::RegistryTimeout(req) => self.on_registry_reply(req, None),
            Event::SeatMove => self.on_seat_move(),
            Event::Drain(m) => self.on_drain(m),
            Event::Wipe(m) => self.on_wipe(m),
            Event::Rejoin => self.on_rejoin(),
        }
    }
}
