//! Machines: boot, crash, ticks, and rounds (start, sync, release) against their disks.

use super::{Event, RestartCause, World};
use crate::check::claims::Claim;
use crate::client::Reply;
use crate::disk::SyncFault;
use crate::host::{Host, Packet, RoundOutput};
use crate::registry::RegReply;
use paros_node::LifeEvent;
use paros_node::ports::LogStore;

impl<H: Host> World<H> {
    pub(super) fn boot(&mut self, m: usize) {
        let seed = self.rng.u64();
        let mach = &mut self.machines[m];
        mach.epoch += 1;
        mach.round_in_flight = false;
        match H::boot(&mach.spec, &mach.disk, seed) {
            Ok(host) => mach.host = Some(host),
            // A store wiped under the identity the shell knows: the machine refuses to run, and
            // is gone for good (it comes back only as a new identity). Its seats are no longer
            // hosted anywhere the world judges.
            Err(paros_node::BootError::Wiped(id)) => {
                mach.refused = true;
                mach.spec.placements.clear();
                self.trace.event(self.now, "refused", &[id.0], || format!("{id:?}'s wiped store refuses to boot"));
                return;
            }
            Err(e) => panic!("a simulated machine boots: {e}"),
        }
        if mach.spec.role == crate::host::MachineRole::Voter {
            mach.spec.asserts_identity = true;
        }
        self.moves.set_down(m, None);
        let (epoch, id) = (mach.epoch, mach.spec.id);
        if mach.spec.role == crate::host::MachineRole::Replica {
            let wiped = std::mem::take(&mut mach.wiped);
            self.audit.replica_booted(id, mach.spec.placements.iter().map(|p| p.key), wiped);
        }
        self.answers.booted(id);
        let offset = self.rng.below(mach.tick_ns);
        self.after(offset, Event::Tick(m, epoch));
        self.trace.event(self.now, "boot", &[id.0], || format!("{id:?}"));
        self.registry_boot(m);
        self.kick(m);
    }

    pub(super) fn crash(&mut self, m: usize, why: &'static str) {
        let mach = &mut self.machines[m];
        if mach.host.take().is_none() {
            return;
        }
        let lost = if mach.round_in_flight { mach.round_writes } else { 0 };
        self.registry_crash(m);
        self.moves.set_down(m, Some(self.now));
        let mach = &mut self.machines[m];
        mach.disk.crash();
        mach.epoch += 1;
        mach.round_in_flight = false;
        let id = mach.spec.id;
        let durable: Vec<_> = mach
            .spec
            .placements
            .iter()
            .map(|p| (p.key, mach.disk.durable(&p.key).map_or(paros_core::Ballot::ZERO, |d| d.promise)))
            .collect();
        self.audit.on_crash(id, lost, &durable);
        self.audit.reads_lost(id);
        self.observe_disk(m);
        self.trace.event(self.now, "crash", &[id.0], || format!("{id:?} ({why})"));
    }

    pub(super) fn on_tick(&mut self, m: usize, epoch: u64) {
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
        self.registry_tick(m);
    }

    /// Steps `m`'s event loop if it is up and has something to do.
    pub(super) fn kick(&mut self, m: usize) {
        if self.machines[m].host.as_ref().is_some_and(|h| h.wants_step()) {
            self.step(m, false);
        }
    }

    /// One step of `m`'s event loop (`synced`: its round in flight is durable): performs what
    /// the step asks — a round's batch to sync later, messages and answers to send now.
    fn step(&mut self, m: usize, synced: bool) {
        let mach = &mut self.machines[m];
        let Some(host) = mach.host.as_mut() else { return };
        let stepped = host.step(synced);
        for _ in 0..stepped.fetches {
            self.audit.claims.reach(Claim::FetchedFromDisk);
        }
        for _ in 0..stepped.wakes {
            self.audit.claims.reach(Claim::DormantWakes);
        }
        let me = mach.spec.id;
        for (key, event) in &stepped.lives {
            match *event {
                LifeEvent::Slept => {
                    self.answers.life_bound(me, *key);
                    self.trace.event(self.now, "dormant", &[m as u64], || format!("{me:?} {key:?} went dormant"));
                }
                LifeEvent::Woke(life) => {
                    self.answers.life_bound(me, *key);
                    self.trace.event(self.now, "wake", &[m as u64, life.0], || {
                        format!("{me:?} {key:?} woke from its disk in {life:?}")
                    });
                }
                LifeEvent::StaleAnswer { from, dormant, after_wake } => {
                    if after_wake {
                        self.audit.claims.reach(Claim::StaleAnswerAfterWake);
                    }
                    self.trace.event(self.now, "stale", &[m as u64, from.0, u64::from(dormant)], || {
                        let found = if dormant {
                            "dormant"
                        } else if after_wake {
                            "woken since"
                        } else {
                            "in a later life"
                        };
                        format!("{me:?} {key:?} dropped an answer from {from:?} to an earlier life (found it {found})")
                    });
                }
            }
        }
        if let Some(writes) = stepped.persisting {
            mach.round_in_flight = true;
            mach.round_writes = writes;
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
        }
        if stepped.reading {
            let (lo, hi) = self.params.read_ns;
            let epoch = self.machines[m].epoch;
            let delay = self.rng.between(lo, hi);
            self.after(delay, Event::ReadsDone(m, epoch));
        }
        if stepped.completed || !stepped.output.applied.is_empty() {
            self.audit_round(m, &stepped.output);
        }
        self.release(m, stepped.output);
    }

    pub(super) fn on_round_done(&mut self, m: usize, epoch: u64) {
        let mach = &mut self.machines[m];
        if mach.epoch != epoch {
            return;
        }
        assert!(mach.host.as_ref().is_some_and(Host::is_syncing), "a machine with a round in flight is up and syncing");
        let needs_sync = mach.round_writes > 0;
        // The storage thread's sync, through the store port the host wrote the round with.
        let result = if needs_sync { LogStore::sync(&mut mach.disk) } else { Ok(()) };
        mach.round_in_flight = false;
        self.observe_disk(m);
        match result {
            Err(_) => {
                self.crash(m, "sync failed");
                let (lo, hi) = self.params.down_ns;
                let down = self.rng.between(lo, hi);
                self.after(down, Event::Restart(m, RestartCause::Random));
            }
            Ok(()) => self.step(m, true),
        }
    }

    /// `m`'s read workers answer the oldest batch of store reads its steps handed out; the
    /// next step releases the answers.
    pub(super) fn on_reads_done(&mut self, m: usize, epoch: u64) {
        let mach = &mut self.machines[m];
        if mach.epoch != epoch {
            return;
        }
        let Some(host) = mach.host.as_mut() else { return };
        host.run_reads();
        self.kick(m);
    }

    pub(super) fn observe_disk(&mut self, m: usize) {
        let mach = &mut self.machines[m];
        let (id, role) = (mach.spec.id, mach.spec.role);
        for (key, op) in mach.disk.take_observed() {
            if matches!(op, paros_core::WriteOp::TrimmedTo { .. }) {
                let j = self.journals.iter().position(|(k, _)| *k == key).unwrap_or(0);
                self.trace.event(self.now, "jump", &[id.0, j as u64], || format!("{id:?} journal {j}: {op:?}"));
                self.moves_jumped(key);
            }
            self.audit.on_durable(id, role, key, &op);
        }
        self.tier_observe_drops(m);
    }

    pub(super) fn audit_round(&mut self, m: usize, out: &RoundOutput) {
        let mach = &self.machines[m];
        let id = mach.spec.id;
        let host = mach.host.as_ref().expect("up");
        let mut during_moves = Vec::new();
        for (key, a) in &out.applied {
            match a.judged.outcome {
                paros_core::journal::Outcome::Trimmed(_) => during_moves.push((*key, true)),
                paros_core::journal::Outcome::Won(_) => during_moves.push((*key, false)),
                _ => {}
            }
            self.trace.quiet(self.now, "applied", &[id.0, a.slot.0, a.digest]);
            self.audit.on_applied(id, *key, a);
            if let Some(j) = self.journals.iter().position(|(k, _)| k == key) {
                self.progress.on_decided(j, self.now);
            }
        }
        for p in &mach.spec.placements {
            if let Some(probe) = host.probe(&mach.disk, &p.key) {
                let durable = mach.disk.durable(&p.key).map(|d| d.promise);
                self.audit.on_probe(id, p.key, &probe, durable);
            }
        }
        for (key, trim) in during_moves {
            self.moves_decided(key, trim);
        }
    }

    pub(super) fn release(&mut self, m: usize, out: RoundOutput) {
        let from = self.machines[m].spec.id;
        self.wipes_check_votes(from, &out);
        for (_, packet) in &out.packets {
            if let Packet::Protocol(e) = packet {
                let durable = self.machines[m].disk.durable(&e.journal);
                self.audit.on_leaving(from, e.journal, &e.message, durable.as_deref());
            }
        }
        for (to, packet) in out.packets {
            match self.index.get(&to) {
                Some(&t) => self.send_packet(from, t, packet),
                // A tier's feed: every subscriber gets its own copy, each dropped, delayed or
                // duplicated on its own, as one publish fanned out by the bus would be.
                None => {
                    let subscribers: Vec<usize> =
                        (0..self.machines.len()).filter(|m| self.machines[*m].spec.feeds.contains(&to)).collect();
                    for t in subscribers {
                        self.send_packet(from, t, packet.clone());
                    }
                }
            }
        }
        for (req, answer) in out.answers {
            if self.registry.owns(req) {
                self.registry_answer(req, from, RegReply::Call(answer));
            } else {
                self.send_reply(req, from, Reply::Call(answer));
            }
        }
        for req in out.unknown {
            if self.registry.owns(req) {
                self.registry_answer(req, from, RegReply::UnknownJournal);
            } else {
                self.send_reply(req, from, Reply::UnknownJournal);
            }
        }
        let replica = self.machines[m].spec.role == crate::host::MachineRole::Replica;
        for (req, answer) in out.reads {
            let held_before = self.audit.read_released(req);
            if let paros_core::ReadAnswer::Unserved { applied_to: Some(applied_to) } = answer
                && let Some(o) = self.requests.get(&req)
                && let crate::check::history::OpInput::Read { from: f, consistency, .. } = self.history[o.history].input
            {
                let key = self.history[o.history].journal;
                let mach = &self.machines[m];
                let probe = mach.host.as_ref().and_then(|h| h.probe(&mach.disk, &key));
                self.audit.on_unserved(&crate::world::audit::UnservedRead {
                    node: from,
                    key,
                    by_replica: replica,
                    from: paros_core::Seq(f),
                    consistency,
                    applied_to,
                    applied_now: probe.map(|p| p.state.next_seq),
                    held_before,
                    reads_max: self.params.tunables.reads_max as usize,
                });
            }
            if replica
                && matches!(answer, paros_core::ReadAnswer::Page { .. })
                && let Some(o) = self.requests.get(&req)
            {
                let key = self.history[o.history].journal;
                let mach = &self.machines[m];
                if let Some(probe) = mach.host.as_ref().and_then(|h| h.probe(&mach.disk, &key)) {
                    self.audit.on_replica_page(from, key, probe.chosen_up_to);
                }
            }
            if self.registry.owns(req) {
                self.registry_answer(req, from, RegReply::Read(answer));
            } else {
                self.send_reply(req, from, Reply::Read(answer));
            }
        }
    }
}
