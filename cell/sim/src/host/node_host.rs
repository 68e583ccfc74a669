//! [`Host`] over `paros_node::Pump` and the node host itself: the simulation runs the event loop
//! the daemon's shell runs — each step's clock reading, release, one batch per round and one
//! sync, loopback of self-addressed messages, store reads handed to read workers — on the
//! shell's own schedule (`paros_node::schedule`), with the simulated disk as the host's
//! `LogStore`. Wakes of dormant journals go to the read workers too, as in the shell. This
//! adapter only translates: packets to envelopes, owed answers to the world's request
//! ids, the world's events to the wakes the shell's thread would see.

use std::collections::BTreeMap;

use paros_core::journal::Command;
use paros_core::{Call, CallAnswer, CallId, JournalConfig, JournalKey, NodeId, ReadId, ReadRequest, Slot};
use paros_node::ports::{Clock, Envelope as NodeEnvelope, LogRead, LogStore};
use paros_node::pump::Batch;
use paros_node::rpc::{NodeAnswer, NodeRequest};
use paros_node::schedule::{Next, Schedule, Spin, Wake};
use paros_node::{Effects, Owed, Pump};

use super::{Envelope, Host, JournalProbe, MachineSpec, Packet, RoundOutput, Stepped};
use crate::disk::SimDisk;

/// A simulated machine's clock: it advances one tick period per tick event the world
/// schedules for the machine (clock skew lives in the event period, see the world).
#[derive(Clone, Copy, Debug, Default)]
struct SimClock {
    ms: u64,
}

/// The tick period of a simulated machine's clock.
const SIM_TICK_MS: u64 = 10;

/// Store reads out with a simulated machine's read workers at once: small, so a burst of cold
/// reads meets the bound and is answered `Unserved` now and then.
const SIM_READS_QUEUED_MAX: usize = 8;

impl Clock for SimClock {
    fn now_ms(&self) -> u64 {
        self.ms
    }
}

/// A machine made of the node host, its event loop and a simulated disk.
pub struct NodeHost {
    pump: Pump<SimDisk>,
    /// The world's request number each owed answer goes to; a resend of a call still owed
    /// takes its answer, as the shell's newest responder does.
    owed: BTreeMap<Owed, u64>,
    /// The round in flight: the store lent out for it (the world syncs the disk, as the
    /// shell's storage thread does) and its batch, written and waiting for the sync.
    persisting: Option<(SimDisk, Batch)>,
    /// The store's read handle, as the shell's read workers hold one.
    reader: SimDisk,
    /// When the node thread steps and when it waits: the shell's own policy.
    schedule: Schedule,
    /// What ended the wait since the last step (an input, a tick, a persisted round, a read
    /// answered, a control request), and when the wait began, in the machine clock's µs.
    woken: Option<Wake>,
    waiting_since_us: u64,
    immediate: Vec<(u64, CallAnswer)>,
    /// Requests answered `UnknownJournal` at once.
    unknown: Vec<u64>,
    /// A tick period passed since the last step.
    clock_due: bool,
    clock: SimClock,
    tunables: paros_core::Tunables,
    /// Store reads handed out by steps (pages, catch-ups, wakes of dormant journals), one batch
    /// a step, oldest first: the world runs each batch a moment after its step
    /// ([`Host::run_reads`]).
    reading: std::collections::VecDeque<Vec<paros_node::FetchJob>>,
    /// Probes of dormant journals, rebuilt from the disk once per sleep: nothing writes a
    /// dormant journal's rows, so its probe holds until it wakes (or is removed).
    dormant_probes: std::cell::RefCell<rustc_hash::FxHashMap<JournalKey, JournalProbe>>,
    /// What the machine publishes for readers in its process, when it keeps a cache.
    cache: Option<paros_node::ReadCache>,
}

impl std::fmt::Debug for NodeHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NodeHost({:?})", self.pump.host().id())
    }
}

impl NodeHost {
    /// Something the shell's thread waits for arrived: its wait ends (work outranks idle).
    fn wake(&mut self, by: Wake) {
        if self.woken != Some(Wake::Work) {
            self.woken = Some(by);
        }
    }

    fn translate(&mut self, effects: Effects, out: &mut RoundOutput) {
        out.packets.extend(effects.pings.into_iter().map(|p| (p, Packet::Alive)));
        for (to, envelopes) in effects.messages {
            for e in envelopes {
                out.packets.push((to, Packet::Protocol(Envelope { journal: e.journal, message: e.message })));
            }
        }
        for (owed, answer) in effects.answers {
            match (owed, self.owed.remove(&owed), answer) {
                (Owed::Call(..), Some(req), NodeAnswer::Call(a)) => out.answers.push((req, a)),
                (Owed::Read(..), Some(req), NodeAnswer::Read(a)) => out.reads.push((req, a)),
                (_, req, answer) => {
                    assert!(req.is_none(), "an answer matches the request it owes: {answer:?}");
                }
            }
        }
        out.applied.extend(effects.applied);
    }
}

impl Host for NodeHost {
    fn boot(spec: &MachineSpec, disk: &SimDisk, seed: u64) -> Result<NodeHost, paros_node::BootError> {
        // With dormancy, a machine boots its journals dormant, as the embedded cell does.
        let asleep = spec.dormant_after_ticks.is_some();
        let replica = spec.role == super::MachineRole::Replica && !spec.feeds.is_empty();
        // Formation places the registry journal on a node once, on its first disk
        // (`Host::form_node`): its seats move from then on, and a node's disk holds it while the
        // node has one (a founder it left, placed it again from epoch 0, would answer for
        // promises it gave back).
        let mut host = match (replica, spec.feeds.first()) {
            // A replica of a tier boots as the replica daemon boots one (a wiped disk under its
            // own id boots and relearns), joined to its tier's feed.
            (true, Some(feed)) => {
                paros_replica::boot(disk.clone(), spec.id, *feed, spec.tunables, seed, asleep)
                    .expect("a simulated replica boots")
                    .host
            }
            // A node of the cell: it hosts a seat moving to it as a joining voter. Once formatted
            // it boots asserting its identity, as the embedded cell's nodes do from its manifest:
            // a wiped disk refuses to boot. Formed as the embedded cell's nodes are.
            _ if spec.role != super::MachineRole::Replica => {
                let expected = spec.asserts_identity.then_some(spec.id);
                let formation: Vec<_> = spec.formation.iter().map(|p| (p.key, p.config.clone())).collect();
                paros_node::Host::form_node(disk.clone(), expected, spec.id, &formation, spec.tunables, seed, asleep)?
            }
            // A replica removed from its tier (on no feed).
            _ => {
                let boot = if asleep { paros_node::Host::boot_asleep } else { paros_node::Host::boot };
                // No identity is asserted: a replica may come back on a wiped disk under its own id.
                boot(disk.clone(), None, spec.id, spec.tunables, seed).expect("a simulated machine boots")
            }
        };
        assert_eq!(host.id(), spec.id, "a machine's disk holds its own identity");
        let reader = host.store().reader();
        let config = paros_node::shell::ShellConfig::default();
        let spin =
            Spin::new(u64::try_from(config.idle_spin.as_micros()).unwrap_or(u64::MAX), config.spin_round_journals_max);
        // `paros_replica::boot` joined a replica's first feed.
        for feed in spec.feeds.iter().skip(usize::from(replica)) {
            host.join_feed(*feed);
        }
        if spec.role == super::MachineRole::Replica {
            for p in &spec.formation {
                host.place(p.key, p.config.clone()).expect("placement on a booted host");
            }
        }
        host.set_tick_ms(SIM_TICK_MS);
        host.set_dormancy(spec.dormant_after_ticks);
        host.record_lives(true);
        host.set_fetches_max(SIM_READS_QUEUED_MAX);
        let cache =
            spec.read_cache.then(|| paros_node::ReadCache::new(paros_node::ReadCacheConfig::default(), spec.tunables));
        host.publish_reads(cache.is_some());
        let clock = SimClock::default();
        let pump = Pump::new(host, clock.now_ms());
        Ok(NodeHost {
            pump,
            owed: BTreeMap::new(),
            persisting: None,
            reader,
            schedule: Schedule::new(spin, config.inputs_per_round_max),
            woken: None,
            waiting_since_us: 0,
            immediate: Vec::new(),
            unknown: Vec::new(),
            clock_due: false,
            clock,
            tunables: spec.tunables,
            reading: std::collections::VecDeque::new(),
            dormant_probes: std::cell::RefCell::default(),
            cache,
        })
    }

    fn incarnation(&self) -> Option<paros_node::Incarnation> {
        self.pump.host().incarnation()
    }

    fn deliver(&mut self, from: NodeId, packet: Packet) {
        let envelopes = match packet {
            Packet::Alive => Vec::new(),
            Packet::Protocol(e) => vec![NodeEnvelope { journal: e.journal, from, message: e.message }],
        };
        // As the shell's thread judges it: liveness predicts no more work soon.
        let work = envelopes.iter().any(|e| !e.message.is_liveness());
        self.wake(if work { Wake::Work } else { Wake::Idle });
        self.pump.deliver(from, envelopes);
    }

    fn tick(&mut self) {
        self.clock.ms += SIM_TICK_MS;
        self.clock_due = true;
        self.wake(Wake::Idle);
    }

    fn call(&mut self, journal: JournalKey, req: u64, id: CallId, call: Call) {
        self.wake(Wake::Work);
        match self.pump.request(NodeRequest::Call { journal, id, call }) {
            Ok(owed) => {
                self.owed.insert(owed, req);
            }
            Err(NodeAnswer::Call(a)) => self.immediate.push((req, a)),
            Err(NodeAnswer::UnknownJournal) => self.unknown.push(req),
            Err(_) => {}
        }
    }

    fn read(&mut self, journal: JournalKey, req: u64, request: ReadRequest) {
        self.wake(Wake::Work);
        match self.pump.request(NodeRequest::Read { journal, id: ReadId(req), read: request }) {
            Ok(owed) => {
                self.owed.insert(owed, req);
            }
            Err(NodeAnswer::UnknownJournal) => self.unknown.push(req),
            Err(_) => {}
        }
    }

    fn read_locally(&self, journal: &JournalKey, request: &ReadRequest) -> Option<(paros_core::ReadAnswer, Slot)> {
        self.cache.as_ref()?.serve_applied(journal, request)
    }

    /// As the shell's thread decides: step at once while the pump has work and no round is out
    /// with the disk; else only once something ended the wait, and only if there is something
    /// to do.
    fn wants_step(&self) -> bool {
        match self.schedule.next(self.pump.wants_step(), self.pump.is_syncing()) {
            Next::Step { .. } => true,
            Next::Wait { .. } => {
                self.woken.is_some()
                    && (self.pump.wants_step()
                        || self.clock_due
                        || !self.immediate.is_empty()
                        || !self.unknown.is_empty())
            }
        }
    }

    fn is_syncing(&self) -> bool {
        self.pump.is_syncing()
    }

    fn step(&mut self, synced: bool) -> Stepped {
        let synced = synced.then(|| {
            let (store, batch) = self.persisting.take().expect("a synced round was persisting");
            self.pump.host_mut().return_store(store);
            self.wake(Wake::Work);
            batch
        });
        let now_us = self.clock.ms.saturating_mul(1000);
        if let Some(by) = self.woken.take() {
            self.schedule.woke(now_us.saturating_sub(self.waiting_since_us), by);
        }
        self.waiting_since_us = now_us;
        let ticked = std::mem::take(&mut self.clock_due);
        let (fetches, wakes) = (self.pump.host().stats().fetches, self.pump.host().stats().wakes);
        let mut effects = self.pump.step(self.clock.now_ms(), synced);
        if let Some(cache) = &self.cache {
            cache.publish(std::mem::take(&mut effects.published));
        }
        assert!(!ticked || effects.ticked, "a tick period of the machine's clock delivers one tick");
        let fetches = self.pump.host().stats().fetches - fetches;
        let wakes = self.pump.host().stats().wakes - wakes;
        let lives = self.pump.host_mut().take_life_events();
        for (key, _) in &lives {
            self.dormant_probes.get_mut().remove(key);
        }
        let mut stepped = Stepped { completed: effects.completed, fetches, wakes, lives, ..Stepped::default() };
        let handed_out = std::mem::take(&mut effects.fetches);
        if !handed_out.is_empty() {
            stepped.reading = true;
            self.reading.push_back(handed_out);
        }
        stepped.output.answers = std::mem::take(&mut self.immediate);
        stepped.output.unknown = std::mem::take(&mut self.unknown);
        if let Some(persist) = effects.persist.take() {
            assert!(self.persisting.is_none(), "one round is in flight at a time");
            self.schedule.persist(persist.batch.len());
            // Written as the shell's storage thread writes it; the world syncs it later.
            let mut store = self.pump.host_mut().lend_store();
            store.place(&persist.placements).expect("placing on a simulated disk never fails");
            store.write(&persist.batch).expect("writing to a simulated disk never fails");
            let ops: usize = persist.batch.iter().map(|(_, w)| w.len()).sum();
            let writes = if persist.needs_sync { ops + persist.placements.len() } else { 0 };
            stepped.persisting = Some(writes);
            self.persisting = Some((store, persist.batch));
        }
        self.translate(effects, &mut stepped.output);
        stepped
    }

    fn run_reads(&mut self) {
        self.wake(Wake::Work);
        for job in self.reading.pop_front().unwrap_or_default() {
            self.pump.fetched(job.run(&self.reader));
        }
    }

    fn probe(&self, disk: &SimDisk, journal: &JournalKey) -> Option<JournalProbe> {
        let host = self.pump.host();
        if host.is_dormant(journal) {
            if let Some(probe) = self.dormant_probes.borrow().get(journal) {
                return Some(*probe);
            }
            // Dormant: what it would wake with, read from its disk (nothing here changes).
            let config = host.journal_config(journal)?.clone();
            let durable = disk.load_journal(journal).ok().flatten().unwrap_or_default();
            let me = host.id();
            let probe = if config.voters.contains(&me) {
                let v = paros_core::Voter::recover(me, config, self.tunables, 0, paros_core::Life::default(), durable);
                JournalProbe {
                    state: *v.state(),
                    chosen_up_to: v.chosen_up_to(),
                    floor: v.floor(),
                    promised: Some(v.promised()),
                    leader: false,
                    leader_hint: None,
                }
            } else {
                let r =
                    paros_core::Replica::recover(me, config, self.tunables, paros_core::Life::default(), durable, true);
                JournalProbe {
                    state: *r.state(),
                    chosen_up_to: r.chosen_up_to(),
                    floor: r.floor(),
                    promised: None,
                    leader: false,
                    leader_hint: None,
                }
            };
            self.dormant_probes.borrow_mut().insert(*journal, probe);
            return Some(probe);
        }
        if let Some(v) = self.pump.host().voter(journal) {
            return Some(JournalProbe {
                state: *v.state(),
                chosen_up_to: v.chosen_up_to(),
                floor: v.floor(),
                promised: Some(v.promised()),
                leader: v.is_leader(),
                leader_hint: v.leader_hint(),
            });
        }
        let r = self.pump.host().replica(journal)?;
        Some(JournalProbe {
            state: *r.state(),
            chosen_up_to: r.chosen_up_to(),
            floor: r.floor(),
            promised: None,
            leader: false,
            leader_hint: None,
        })
    }

    fn command_at(&self, disk: &SimDisk, journal: &JournalKey, slot: Slot) -> Option<Command> {
        if self.pump.host().is_dormant(journal) {
            let read = disk.read_range(journal, slot, 1).ok()?;
            return read.into_iter().find(|(s, _)| *s == slot).map(|(_, e)| e.command);
        }
        let log = match self.pump.host().voter(journal) {
            Some(v) => v.log(),
            None => self.pump.host().replica(journal)?.log(),
        };
        if slot < log.start() {
            // Evicted from memory: the machine reads it back from its disk.
            let read = disk.read_range(journal, slot, 1).ok()?;
            return read.into_iter().find(|(s, _)| *s == slot).map(|(_, e)| e.command);
        }
        log.get(slot).map(|e| e.command.clone())
    }

    fn hosted(&self) -> BTreeMap<JournalKey, JournalConfig> {
        let host = self.pump.host();
        host.journal_keys().filter_map(|k| Some((*k, host.journal_config(k)?.clone()))).collect()
    }

    fn place(&mut self, assignment: paros_core::Assignment) -> bool {
        self.wake(Wake::Idle);
        // As the node shell does: with dormancy a journal is placed asleep.
        let host = self.pump.host_mut();
        let asleep = host.dormancy().is_some();
        host.assign(assignment, asleep).is_ok()
    }

    fn remove(&mut self, journal: &JournalKey, epoch: u64) -> bool {
        self.wake(Wake::Idle);
        let Some(removed) = self.pump.host_mut().remove_at(journal, epoch) else { return false };
        self.dormant_probes.get_mut().remove(journal);
        // As the shell does: its readers are served nothing of it from now on.
        if let Some(cache) = &self.cache {
            cache.publish(self.pump.host_mut().take_publications());
        }
        // What it owed is answered that the journal is unknown here, as the shell answers its
        // responders (the sweep's seed 20002517: dropped, a writer's call was never answered).
        for (owed, _) in removed {
            if let Some(req) = self.owed.remove(&owed) {
                self.unknown.push(req);
            }
        }
        true
    }

    fn campaign(&mut self, journal: &JournalKey) {
        self.wake(Wake::Work);
        self.pump.host_mut().campaign(journal);
    }

    fn hosts(&self, journal: &JournalKey) -> bool {
        self.pump.host().journal_config(journal).is_some()
    }

    fn stale_answers(&self) -> u64 {
        let stats = self.pump.host().stats();
        stats.stale_answers + stats.stale_answers_dormant
    }

    fn replica_states(&self) -> paros_node::host::ReplicaStates {
        self.pump.host().stats().replicas
    }
}
