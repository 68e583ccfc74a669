//! The acceptor: a durable promise and the accepted values of one journal's slots.

use crate::ids::{Ballot, Slot};
use crate::journal::Digested;
use crate::log::{Log, LogEntry, WriteOp};
use crate::message::{Message, Reported};

/// The acceptor role. Its promise is a scalar beside the log: truncation never touches it.
#[derive(Clone, Debug)]
pub struct Acceptor {
    promised: Ballot,
}

impl Acceptor {
    /// An acceptor that has durably promised `promised` (`Ballot::ZERO` on a fresh journal).
    #[must_use]
    pub fn new(promised: Ballot) -> Acceptor {
        Acceptor { promised }
    }

    /// The highest ballot promised. Never decreases.
    #[must_use]
    pub fn promised(&self) -> Ballot {
        self.promised
    }

    fn raise(&mut self, ballot: Ballot, writes: &mut Vec<WriteOp>) {
        if ballot > self.promised {
            self.promised = ballot;
            writes.push(WriteOp::Promise(ballot));
        }
    }

    fn nack(&self, ballot: Ballot, log: &Log) -> Message {
        Message::Nack { ballot, promised: self.promised, floor: log.floor() }
    }

    /// Phase 1: promise `ballot` for every slot from `from` on, reporting every value held there.
    ///
    /// `chosen_up_to` is the chosen index this node keeps across a reboot: the campaign skips
    /// the slots below it and fetches them later by catch-up, so it must never be a fact this
    /// node can forget (an in-memory index above it would strand those slots if we crash).
    ///
    /// A `from` below the floor is refused with the floor: this acceptor no longer knows those
    /// slots, and "nothing accepted here" would let a second value be chosen.
    ///
    /// `epoch` is the configuration this node's walk has reached, told to the campaign.
    pub fn on_prepare(
        &mut self,
        log: &Log,
        chosen_up_to: Slot,
        epoch: u64,
        ballot: Ballot,
        from: Slot,
        writes: &mut Vec<WriteOp>,
    ) -> Message {
        if from < log.floor() || ballot < self.promised {
            return self.nack(ballot, log);
        }
        self.raise(ballot, writes);
        let accepted = log
            .range_from(from.max(chosen_up_to))
            .map(|(slot, e)| Reported { slot: *slot, ballot: e.ballot, command: e.command.clone() })
            .collect();
        Message::Promise { ballot, from, chosen_up_to, accepted, epoch }
    }

    /// Phase 2: accept each slot's command under `ballot` unless a higher ballot was promised.
    ///
    /// A slot already known chosen here and held in memory (below `chosen_up_to`) keeps its
    /// chosen command; the reply carries that command's digest, so a leader proposing anything
    /// else there is not credited. A slot below the log's start is credited blind (see below).
    pub fn on_accept(
        &mut self,
        log: &mut Log,
        chosen_up_to: Slot,
        ballot: Ballot,
        entries: &[(Slot, Digested)],
        writes: &mut Vec<WriteOp>,
    ) -> Message {
        if ballot < self.promised {
            return self.nack(ballot, log);
        }
        self.raise(ballot, writes);
        let mut slots = Vec::with_capacity(entries.len());
        for (slot, command) in entries {
            let digest = command.digest();
            if *slot < log.start() {
                // Chosen and compacted, or chosen and evicted from memory: the command is not at
                // hand to compare, and the proposal is credited. That credit may be for another
                // command — a deposed leader's, at a ballot below the one that chose the slot,
                // reaching an acceptor that learned the slot without voting for it (simulation
                // seed 80014893) — and still never makes a second command chosen: the quorum
                // that chose the slot promised at least its ballot, every quorum of the
                // configuration meets it, and those acceptors refuse the lower ballot. Leaving
                // the slot out instead would strand a legitimate leader whose campaign
                // re-proposed slots that every acceptor's floor then passed (a trim-point jump
                // mid-campaign, seed 90011106): it cannot settle them itself, not knowing the
                // values, and a commit past a slot it did not win may be taken as chosen.
                slots.push((*slot, digest));
                continue;
            }
            // Kept: a slot known chosen here, or one this ballot already put there.
            let keep = |held: &LogEntry| *slot < chosen_up_to || held.ballot.is_none() || held.ballot == Some(ballot);
            match log.put_unless(*slot, keep, || (Some(ballot), command.clone())) {
                Some((held, held_digest)) if *slot < chosen_up_to || held.ballot.is_none() => {
                    slots.push((*slot, held_digest));
                }
                Some((_, held_digest)) => {
                    assert_eq!(held_digest, digest, "one ballot proposes one command per slot");
                    slots.push((*slot, digest));
                }
                None => {
                    writes.push(WriteOp::Accept { slot: *slot, ballot, command: command.command().clone() });
                    slots.push((*slot, digest));
                }
            }
        }
        Message::Accepted { ballot, slots }
    }

    /// Every slot this acceptor knows chosen, or accepted at a ballot of configuration `epoch`
    /// (its walk's) or later, lies below the returned slot.
    ///
    /// An entry accepted in an earlier configuration above the chosen prefix lies past the
    /// stop-sign that ended it, where nothing of that configuration is chosen
    /// (docs/reconfiguration.md, rule 11): counting it would have a linearizable read wait for
    /// a slot that may not be decided until long after (found by the test of seats moving under
    /// crashes). A reader behind this acceptor's epoch needs nothing above its chosen prefix
    /// but the later configuration's slots, which count.
    #[must_use]
    pub fn watermark(&self, log: &Log, chosen_up_to: Slot, epoch: u64) -> Slot {
        let counts = |e: &LogEntry| e.ballot.is_none_or(|b| b.epoch() >= epoch);
        let held = log.range_from(chosen_up_to).rev().find(|(_, e)| counts(e)).map_or(Slot(0), |(s, _)| s.next());
        held.max(log.floor()).max(chosen_up_to)
    }
}
