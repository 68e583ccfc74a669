//! [`Host`] over the core alone: one [`Voter`] or [`Replica`] per placed journal, one batch and
//! one sync per round for all of them, machine-level liveness pings to wake quiesced journals.
//!
//! It holds no protocol logic: it routes inputs to the core, gathers `Ready`s, and performs them
//! durable-first. The node host replaces it.

use std::collections::{BTreeMap, BTreeSet};

use paros_core::journal::Command;
use paros_core::{Call, CallAnswer, CallId, JournalKey, NodeId, ReadId, ReadRequest, Ready, Replica, Slot, Voter, WriteOp};

use super::{Envelope, Host, JournalProbe, MachineRole, MachineSpec, Packet, RoundOutput, RoundStarted, StorageFault};
use crate::disk::SimDisk;
use crate::rng::SimRng;

#[derive(Debug)]
enum Role {
    Voter(Box<Voter>),
    Replica(Box<Replica>),
}

/// One hosted journal, and whether its last `Ready` waits for `advance()`.
#[derive(Debug)]
struct Member {
    role: Role,
    advance_pending: bool,
}

impl Member {
    fn has_ready(&self) -> bool {
        match &self.role {
            Role::Voter(v) => v.has_ready(),
            Role::Replica(r) => r.has_ready(),
        }
    }

    fn ready(&mut self) -> Ready {
        match &mut self.role {
            Role::Voter(v) => v.ready(),
            Role::Replica(r) => r.ready(),
        }
    }

    fn advance(&mut self) {
        match &mut self.role {
            Role::Voter(v) => v.advance(),
            Role::Replica(r) => r.advance(),
        }
    }
}

/// A machine made of core journals and a simulated disk.
#[derive(Debug)]
pub struct CoreHost {
    id: NodeId,
    role: MachineRole,
    journals: BTreeMap<JournalKey, Member>,
    /// Each journal's voters other than this machine (whose silence wakes the journal).
    voters_of: BTreeMap<JournalKey, Vec<NodeId>>,
    /// Every machine this one shares a journal with, and the tick it was last heard.
    heard: BTreeMap<NodeId, u64>,
    /// The round in flight: what it releases after its sync, and whether it needs one.
    in_flight: Option<(RoundOutput, bool)>,
    /// Liveness pings and host-level answers waiting for the next round.
    pending_packets: Vec<(NodeId, Packet)>,
    pending_answers: Vec<(CallId, CallAnswer)>,
    tick: u64,
    alive_ticks: u64,
    suspect_ticks: u64,
}

impl Host for CoreHost {
    fn boot(spec: &MachineSpec, disk: &SimDisk, seed: u64) -> CoreHost {
        let mut rng = SimRng::new(seed);
        let mut journals = BTreeMap::new();
        let mut voters_of = BTreeMap::new();
        let mut peers = BTreeSet::new();
        for p in &spec.placements {
            let durable = disk.load(&p.key);
            let role = match spec.role {
                MachineRole::Voter => {
                    Role::Voter(Box::new(Voter::recover(spec.id, p.config.clone(), spec.tunables, rng.u64(), durable)))
                }
                MachineRole::Replica => {
                    Role::Replica(Box::new(Replica::recover(spec.id, p.config.clone(), spec.tunables, durable)))
                }
            };
            journals.insert(p.key, Member { role, advance_pending: false });
            voters_of.insert(p.key, p.config.voters.iter().copied().filter(|v| *v != spec.id).collect());
            peers.extend(p.config.voters.iter().chain(&p.config.learners).copied().filter(|n| *n != spec.id));
        }
        CoreHost {
            id: spec.id,
            role: spec.role,
            journals,
            voters_of,
            heard: peers.into_iter().map(|n| (n, 0)).collect(),
            in_flight: None,
            pending_packets: Vec::new(),
            pending_answers: Vec::new(),
            tick: 0,
            alive_ticks: u64::from(spec.alive_ticks.max(1)),
            suspect_ticks: u64::from(spec.suspect_ticks.max(1)),
        }
    }

    fn deliver(&mut self, from: NodeId, packet: Packet) {
        if let Some(t) = self.heard.get_mut(&from) {
            *t = self.tick;
        }
        let Packet::Protocol(Envelope { journal, message }) = packet else { return };
        match self.journals.get_mut(&journal).map(|m| &mut m.role) {
            Some(Role::Voter(v)) => v.step(from, message),
            Some(Role::Replica(r)) => r.step(from, message),
            None => {}
        }
    }

    fn tick(&mut self) {
        self.tick += 1;
        if self.tick.is_multiple_of(self.alive_ticks) {
            for peer in self.heard.keys() {
                self.pending_packets.push((*peer, Packet::Alive));
            }
        }
        let tick = self.tick;
        let suspect = self.suspect_ticks;
        let silent: Vec<NodeId> = self.heard.iter().filter(|(_, t)| tick - **t > suspect).map(|(n, _)| *n).collect();
        for (key, member) in &mut self.journals {
            if let Role::Voter(v) = &mut member.role
                && self.voters_of[key].iter().any(|n| silent.contains(n))
            {
                v.wake();
            }
            match &mut member.role {
                Role::Voter(v) if !v.is_quiet() => v.tick(),
                Role::Replica(r) if !r.is_quiet() => r.tick(),
                _ => {}
            }
        }
    }

    fn call(&mut self, journal: JournalKey, id: CallId, call: Call) {
        match self.journals.get_mut(&journal).map(|m| &mut m.role) {
            Some(Role::Voter(v)) => v.propose(id, call),
            // A replica takes no calls and knows no leader to name.
            Some(Role::Replica(_)) => self.pending_answers.push((id, CallAnswer::Redirect { leader: None })),
            None => {}
        }
    }

    fn read(&mut self, journal: JournalKey, id: ReadId, request: ReadRequest) {
        match self.journals.get_mut(&journal).map(|m| &mut m.role) {
            Some(Role::Voter(v)) => v.read(id, request),
            Some(Role::Replica(r)) => r.read(id, request),
            None => {}
        }
    }

    fn has_work(&self) -> bool {
        !self.pending_packets.is_empty()
            || !self.pending_answers.is_empty()
            || self.journals.values().any(Member::has_ready)
    }

    fn start_round(&mut self, disk: &mut SimDisk) -> Option<RoundStarted> {
        assert!(self.in_flight.is_none(), "one round is in flight at a time");
        if !self.has_work() {
            return None;
        }
        let mut batch: Vec<(JournalKey, Vec<WriteOp>)> = Vec::new();
        let mut early = RoundOutput {
            packets: std::mem::take(&mut self.pending_packets),
            answers: std::mem::take(&mut self.pending_answers),
            ..RoundOutput::default()
        };
        let mut late = RoundOutput::default();
        for (key, member) in &mut self.journals {
            if !member.has_ready() {
                continue;
            }
            let ready = member.ready();
            if !ready.writes.is_empty() {
                batch.push((*key, ready.writes));
            }
            for o in ready.messages {
                let packet = (o.to, Packet::Protocol(Envelope { journal: *key, message: o.message }));
                match packet.1 {
                    Packet::Protocol(ref e) if e.message.needs_durable_sender() => late.packets.push(packet),
                    _ => early.packets.push(packet),
                }
            }
            early.answers.extend(ready.answers);
            early.reads.extend(ready.reads);
            late.applied.extend(ready.applied.into_iter().map(|a| (*key, a)));
            member.advance_pending = true;
        }
        let writes = batch.iter().flat_map(|(_, w)| w).filter(|w| w.needs_sync()).count();
        disk.write(&batch);
        self.in_flight = Some((late, writes > 0));
        Some(RoundStarted { writes, early })
    }

    fn finish_round(&mut self, disk: &mut SimDisk) -> Result<RoundOutput, StorageFault> {
        let (out, needs_sync) = self.in_flight.take().expect("finish_round follows start_round");
        if needs_sync {
            disk.sync().map_err(|_| StorageFault)?;
        }
        for member in self.journals.values_mut() {
            if std::mem::take(&mut member.advance_pending) {
                member.advance();
            }
        }
        Ok(out)
    }

    fn probe(&self, journal: &JournalKey) -> Option<JournalProbe> {
        Some(match &self.journals.get(journal)?.role {
            Role::Voter(v) => JournalProbe {
                state: *v.state(),
                chosen_up_to: v.chosen_up_to(),
                floor: v.floor(),
                promised: Some(v.promised()),
                leader: v.is_leader(),
                leader_hint: v.leader_hint(),
            },
            Role::Replica(r) => JournalProbe {
                state: *r.state(),
                chosen_up_to: r.chosen_up_to(),
                floor: r.floor(),
                promised: None,
                leader: false,
                leader_hint: None,
            },
        })
    }

    fn command_at(&self, journal: &JournalKey, slot: Slot) -> Option<Command> {
        let log = match &self.journals.get(journal)?.role {
            Role::Voter(v) => v.log(),
            Role::Replica(r) => r.log(),
        };
        log.get(slot).map(|e| e.command.clone())
    }
}

impl CoreHost {
    #[must_use]
    pub fn id(&self) -> NodeId {
        self.id
    }

    #[must_use]
    pub fn role(&self) -> MachineRole {
        self.role
    }
}
