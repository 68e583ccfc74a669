//! The network between machines: drops, duplicates, delays with spikes, partitions.

use paros_core::{Message, NodeId};

use super::{Event, NetParams, World};
use crate::check::Claim;
use crate::host::{Host, Packet};

impl<H: Host> World<H> {
    pub(super) fn net(&self) -> NetParams {
        if self.chaos { self.params.net } else { self.params.net.calm() }
    }

    pub(super) fn delay(&mut self) -> u64 {
        let net = self.net();
        let mut d = self.rng.between(net.delay_ns.0, net.delay_ns.1);
        if self.rng.chance(net.spike_ppm) {
            d += self.rng.between(net.spike_ns.0, net.spike_ns.1);
        }
        d
    }

    pub(super) fn send_packet(&mut self, from: NodeId, to: usize, packet: Packet) {
        let net = self.net();
        if self.rng.chance(net.drop_ppm) {
            return;
        }
        // Proposals lost on their way to some acceptors leave minority acceptances behind, so
        // later campaigns meet different values for one slot at different ballots.
        if net.accept_drop_ppm > 0
            && matches!(&packet, Packet::Protocol(e) if matches!(e.message, Message::Accept { .. }))
            && self.rng.chance(net.accept_drop_ppm)
        {
            return;
        }
        let copies = if self.rng.chance(net.dup_ppm) { 2 } else { 1 };
        for _ in 0..copies {
            if let Packet::Protocol(e) = &packet {
                self.answers.sent(from, self.machines[to].spec.id, e.journal, &e.message);
            }
            let d = self.delay();
            self.after(d, Event::Packet { to, from, packet: packet.clone() });
        }
    }

    pub(super) fn cut(&self, a: NodeId, b: NodeId) -> bool {
        self.partition.as_ref().is_some_and(|p| p.get(&a) != p.get(&b))
    }

    pub(super) fn on_packet(&mut self, to: usize, from: NodeId, packet: Packet) {
        let id = self.machines[to].spec.id;
        if self.cut(from, id) {
            return;
        }
        let mach = &mut self.machines[to];
        let Some(host) = mach.host.as_mut() else { return };
        match &packet {
            Packet::Protocol(e) => {
                if matches!(e.message, Message::Promise { .. }) {
                    // Only a Promise needs the recipient's role and disk: probe for nothing else.
                    let candidate = host.probe(&mach.disk, &e.journal).is_some_and(|p| !p.leader);
                    self.audit.on_promise_delivered(
                        id,
                        e.journal,
                        &e.message,
                        candidate,
                        mach.disk.durable(&e.journal).as_deref(),
                    );
                }
                self.audit.on_accept_delivered(e.journal, &e.message);
                let (kind, a, b) = message_fields(&e.message);
                self.trace.event(self.now, "deliver", &[from.0, id.0, kind, a, b], || {
                    format!("{from:?} -> {id:?} {:?}: {}", e.journal.journal, describe(&e.message))
                });
            }
            Packet::Alive => self.trace.quiet(self.now, "alive", &[from.0, id.0]),
        }
        // An answer to a request of an earlier life of its journal here must be dropped, and
        // one to the current life taken (judged only while the journal is hosted here).
        let judged = match &packet {
            Packet::Protocol(e) if host.hosts(&e.journal) => {
                self.answers.delivered(from, id, e.journal, &e.message).map(|stale| (stale, e.journal))
            }
            _ => None,
        };
        let dropped_before = host.stale_answers();
        host.deliver(from, packet);
        if let Some((stale, journal)) = judged {
            let dropped = host.stale_answers() > dropped_before;
            if stale && dropped {
                self.audit.claims.reach(Claim::AnswerForItsRequest);
            }
            self.audit.claims.check(Claim::AnswerForItsRequest, dropped == stale, || {
                let what = if stale {
                    "an answer to an earlier life was taken"
                } else {
                    "an answer to the current life was dropped"
                };
                format!("{id:?} {journal:?}: {what} (from {from:?})")
            });
        }
        self.kick(to);
    }
}

/// A message's kind and two numbers that identify it, for the trace digest.
fn message_fields(m: &Message) -> (u64, u64, u64) {
    match m {
        Message::Prepare { ballot, from } => (1, ballot.round, from.0),
        Message::Promise { ballot, from, accepted, .. } => (2, ballot.round, from.0 ^ accepted.len() as u64),
        Message::Nack { ballot, promised, floor } => (3, ballot.round ^ promised.round, floor.0),
        Message::Accept { ballot, entries, commit } => {
            (4, ballot.round, entries.first().map_or(0, |e| e.0.0) ^ commit.0)
        }
        Message::Accepted { ballot, slots } => (5, ballot.round, slots.first().map_or(0, |s| s.1)),
        Message::Heartbeat { ballot, commit, quiesce } => (6, ballot.round, commit.0 * 2 + u64::from(*quiesce)),
        Message::HeartbeatAck { ballot, chosen_up_to } => (7, ballot.round, chosen_up_to.0),
        Message::Chosen { entries } => (8, entries.len() as u64, entries.first().map_or(0, |e| e.0.0)),
        Message::CatchUpRequest { from, life } => (9, from.0, life.0),
        Message::CatchUpResponse { entries, chosen_up_to, .. } => {
            (10, entries.len() as u64, entries.first().map_or(0, |e| e.0.0) ^ (chosen_up_to.0 << 32))
        }
        Message::TrimmedTo { from, point, .. } => (11, from.0, point.0),
        Message::WatermarkRequest { read, life } => (12, *read, life.0),
        Message::Watermark { read, up_to, .. } => (13, *read, up_to.0),
        Message::FeedMark { chosen_up_to } => (14, chosen_up_to.0, 0),
    }
}

fn describe(m: &Message) -> String {
    match m {
        Message::Accept { ballot, entries, commit } => {
            let slots: Vec<u64> = entries.iter().map(|e| e.0.0).collect();
            format!("Accept {ballot:?} slots {slots:?} commit {commit:?}")
        }
        Message::Chosen { entries } => {
            format!("Chosen slots {:?}", entries.iter().map(|e| e.0.0).collect::<Vec<u64>>())
        }
        Message::CatchUpResponse { entries, chosen_up_to, .. } => {
            let slots: Vec<u64> = entries.iter().map(|e| e.0.0).collect();
            format!("CatchUpResponse slots {slots:?} chosen_up_to {chosen_up_to:?}")
        }
        Message::Promise { ballot, from, chosen_up_to, accepted, .. } => {
            let slots: Vec<u64> = accepted.iter().map(|r| r.slot.0).collect();
            format!("Promise {ballot:?} from {from:?} chosen_up_to {chosen_up_to:?} reported {slots:?}")
        }
        other => format!("{other:?}"),
    }
}
