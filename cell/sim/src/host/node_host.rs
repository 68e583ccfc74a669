//! [`Host`] over the node host itself (`paros_node::Host`): the simulation runs the same round
//! logic the daemon runs — `begin_round`, one batch and one sync, `release`, `complete_round` —
//! with the simulated disk behind it. This adapter only translates: packets to envelopes,
//! tickets to call and read ids.

use std::collections::BTreeMap;

use paros_core::journal::Command;
use paros_core::{Call, CallAnswer, CallId, JournalConfig, JournalKey, NodeId, ReadId, ReadRequest, Slot};
use paros_node::ports::{Clock, Envelope as NodeEnvelope, LogStore, StoreError, StoredJournal};
use paros_node::rpc::{NodeAnswer, NodeRequest};
use paros_node::{Early, PendingRound, Ticket};

use super::{Envelope, Host, JournalProbe, MachineSpec, Packet, RoundOutput, RoundStarted, StorageFault};
use crate::disk::SimDisk;

/// The store the node host boots from: a snapshot of the simulated disk. Rounds never write
/// through it — the adapter persists each round's batch on the world's [`SimDisk`] itself, so
/// the world keeps one disk per machine that outlives crashes.
#[derive(Debug)]
pub struct BootStore {
    id: NodeId,
    journals: Vec<StoredJournal>,
}

impl LogStore for BootStore {
    fn identity(&self) -> Result<Option<NodeId>, StoreError> {
        Ok(Some(self.id))
    }
    fn set_identity(&mut self, _: NodeId) -> Result<(), StoreError> {
        Ok(())
    }
    fn put_config(&mut self, _: JournalKey, _: &JournalConfig) -> Result<(), StoreError> {
        Ok(())
    }
    fn write(&mut self, _: &[(JournalKey, Vec<paros_core::WriteOp>)]) -> Result<(), StoreError> {
        unreachable!("the adapter persists rounds on the simulated disk")
    }
    fn sync(&mut self) -> Result<(), StoreError> {
        unreachable!("the adapter persists rounds on the simulated disk")
    }
    fn load(&self) -> Result<Vec<StoredJournal>, StoreError> {
        Ok(self.journals.clone())
    }
}

/// A simulated machine's clock: it advances one tick period per tick event the world
/// schedules for the machine (clock skew lives in the event period, see the world).
#[derive(Clone, Copy, Debug, Default)]
struct SimClock {
    ms: u64,
}

/// The tick period of a simulated machine's clock.
const SIM_TICK_MS: u64 = 10;

impl Clock for SimClock {
    fn now_ms(&self) -> u64 {
        self.ms
    }
}

enum Owed {
    Call(CallId),
    Read(ReadId),
}

/// A machine made of the node host and a simulated disk.
pub struct NodeHost {
    host: paros_node::Host<BootStore>,
    owed: BTreeMap<Ticket, Owed>,
    pending: Option<PendingRound>,
    immediate: Vec<(CallId, CallAnswer)>,
    pings: Vec<NodeId>,
    clock: SimClock,
}

impl std::fmt::Debug for NodeHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NodeHost({:?})", self.host.id())
    }
}

impl NodeHost {
    fn released(&mut self, e: Early, out: &mut RoundOutput) {
        match e {
            Early::Messages(to, envelopes) => {
                for e in envelopes {
                    out.packets.push((to, Packet::Protocol(Envelope { journal: e.journal, message: e.message })));
                }
            }
            Early::Answer(ticket, answer) => match (self.owed.remove(&ticket), answer) {
                (Some(Owed::Call(id)), NodeAnswer::Call(a)) => out.answers.push((id, a)),
                (Some(Owed::Read(id)), NodeAnswer::Read(a)) => out.reads.push((id, a)),
                (owed, answer) => {
                    assert!(owed.is_none(), "an answer matches the request it owes: {answer:?}");
                }
            },
        }
    }

    fn release_into(&mut self, out: &mut RoundOutput) {
        let mut early = Vec::new();
        self.host.release(|e| early.push(e));
        for e in early {
            self.released(e, out);
        }
    }
}

impl Host for NodeHost {
    fn boot(spec: &MachineSpec, disk: &SimDisk, seed: u64) -> NodeHost {
        let journals = spec
            .placements
            .iter()
            .map(|p| StoredJournal { key: p.key, config: p.config.clone(), durable: disk.load(&p.key) })
            .collect();
        let store = BootStore { id: spec.id, journals };
        let mut host = paros_node::Host::boot(store, Some(spec.id), spec.id, spec.tunables, seed).expect("a simulated machine boots");
        for p in &spec.placements {
            host.place(p.key, p.config.clone()).expect("placement on a booted host");
        }
        host.set_tick_ms(SIM_TICK_MS);
        let clock = SimClock::default();
        let armed = host.on_clock(clock.now_ms());
        assert!(!armed.ticked, "the first reading only arms the timer");
        NodeHost { host, owed: BTreeMap::new(), pending: None, immediate: Vec::new(), pings: Vec::new(), clock }
    }

    fn deliver(&mut self, from: NodeId, packet: Packet) {
        let envelopes = match packet {
            Packet::Alive => Vec::new(),
            Packet::Protocol(e) => vec![NodeEnvelope { journal: e.journal, from, message: e.message }],
        };
        self.host.deliver(from, envelopes);
    }

    fn tick(&mut self) {
        self.clock.ms += SIM_TICK_MS;
        let clocked = self.host.on_clock(self.clock.now_ms());
        assert!(clocked.ticked, "a tick period of the machine's clock delivers one tick");
        self.pings.extend(self.host.peers());
    }

    fn call(&mut self, journal: JournalKey, id: CallId, call: Call) {
        match self.host.request(NodeRequest::Call { journal, call }) {
            Ok(ticket) => {
                self.owed.insert(ticket, Owed::Call(id));
            }
            Err(NodeAnswer::Call(a)) => self.immediate.push((id, a)),
            Err(_) => {}
        }
    }

    fn read(&mut self, journal: JournalKey, id: ReadId, request: ReadRequest) {
        if let Ok(ticket) = self.host.request(NodeRequest::Read { journal, read: request }) {
            self.owed.insert(ticket, Owed::Read(id));
        }
    }

    fn has_work(&self) -> bool {
        self.host.has_work() || self.host.has_release() || !self.immediate.is_empty() || !self.pings.is_empty()
    }

    fn start_round(&mut self, disk: &mut SimDisk) -> Option<RoundStarted> {
        assert!(self.pending.is_none(), "one round is in flight at a time");
        if !self.has_work() {
            return None;
        }
        let mut early_out = RoundOutput {
            packets: self.pings.drain(..).map(|p| (p, Packet::Alive)).collect(),
            answers: std::mem::take(&mut self.immediate),
            ..RoundOutput::default()
        };
        self.release_into(&mut early_out);
        let mut early = Vec::new();
        let pending = self.host.begin_round(|e| early.push(e));
        for e in early {
            self.released(e, &mut early_out);
        }
        disk.write(&pending.batch);
        let writes = if pending.needs_sync { pending.batch.iter().map(|(_, w)| w.len()).sum() } else { 0 };
        self.pending = Some(pending);
        Some(RoundStarted { writes, early: early_out })
    }

    fn finish_round(&mut self, disk: &mut SimDisk) -> Result<RoundOutput, StorageFault> {
        let pending = self.pending.take().expect("finish_round follows start_round");
        // What inputs since start_round released may leave now too (the shell sends it while
        // the sync runs).
        let mut out = RoundOutput::default();
        self.release_into(&mut out);
        if pending.needs_sync {
            disk.sync().map_err(|_| StorageFault)?;
        }
        let done = self.host.complete_round(pending);
        for (to, envelopes) in done.messages {
            for e in envelopes {
                out.packets.push((to, Packet::Protocol(Envelope { journal: e.journal, message: e.message })));
            }
        }
        out.applied.extend(done.applied);
        Ok(out)
    }

    fn probe(&self, journal: &JournalKey) -> Option<JournalProbe> {
        if let Some(v) = self.host.voter(journal) {
            return Some(JournalProbe {
                state: *v.state(),
                chosen_up_to: v.chosen_up_to(),
                floor: v.floor(),
                promised: Some(v.promised()),
                leader: v.is_leader(),
                leader_hint: v.leader_hint(),
            });
        }
        let r = self.host.replica(journal)?;
        Some(JournalProbe {
            state: *r.state(),
            chosen_up_to: r.chosen_up_to(),
            floor: r.floor(),
            promised: None,
            leader: false,
            leader_hint: None,
        })
    }

    fn command_at(&self, journal: &JournalKey, slot: Slot) -> Option<Command> {
        let log = match self.host.voter(journal) {
            Some(v) => v.log(),
            None => self.host.replica(journal)?.log(),
        };
        log.get(slot).map(|e| e.command.clone())
    }
}
