//! The proposer: campaigns (Phase 1 over the whole unchosen suffix), then leads (pipelined
//! Phase 2, heartbeats, check-quorum, quiescence when idle).

use std::collections::{BTreeMap, BTreeSet};

use crate::config::{JournalConfig, Tunables};
use crate::ids::{Ballot, NodeId, Slot};
use crate::journal::{Command, Control, Digested};
use crate::message::{Message, Outbound, Reported};
use crate::rng::Rng;

/// A slot this leader proposed and has not yet seen chosen, with the digest an `Accepted` must
/// name to count for it.
#[derive(Clone, Debug)]
struct Inflight {
    command: Digested,
    acks: BTreeSet<NodeId>,
    sent_tick: u64,
}

#[derive(Clone, Debug)]
struct Campaign {
    from: Slot,
    promises: BTreeMap<NodeId, (Slot, Vec<Reported>)>,
}

#[derive(Clone, Debug)]
struct Leadership {
    next_slot: Slot,
    inflight: BTreeMap<Slot, Inflight>,
    /// Proposed this round, not yet sent.
    unsent: Vec<(Slot, Digested)>,
    /// The tick each voter was last heard at this ballot (check-quorum).
    heard: BTreeMap<NodeId, u64>,
    /// Each voter's chosen prefix as it last acknowledged a heartbeat.
    caught_up: BTreeMap<NodeId, Slot>,
    idle_ticks: u32,
    /// The slot of the stop-sign this leader proposed: it proposes nothing above it until the
    /// slot is applied (docs/reconfiguration.md, rule 3).
    stop: Option<Slot>,
}

#[derive(Clone, Debug)]
enum Role {
    Follower,
    Candidate(Campaign),
    Leader(Leadership),
}

/// What became of a Phase 1 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Elected {
    /// Still campaigning (or the reply was stale).
    NotYet,
    /// Won: the leader re-proposed the suffix; `learn_from` names an acceptor whose chosen
    /// prefix is ahead of ours up to `ahead_to` (catch up from it).
    Won { learn_from: Option<(NodeId, Slot)> },
    /// Void: `peer` has applied a configuration after the campaign's epoch (rule 9 of
    /// docs/reconfiguration.md): the campaign stopped; catch up from `peer`.
    Outdated { peer: NodeId },
}

/// The proposer role of one journal on one voter.
#[derive(Clone, Debug)]
pub struct Proposer {
    me: NodeId,
    ballot: Ballot,
    role: Role,
    leader_hint: Option<NodeId>,
    rng: Rng,
    tick: u64,
    election_elapsed: u32,
    election_due: u32,
    quiet: bool,
    /// The highest round heard from anyone: the next campaign goes above it.
    round_seen: u64,
}

impl Proposer {
    /// A follower that knows no leader; election timeouts are drawn from `seed`.
    #[must_use]
    pub fn new(me: NodeId, seed: u64, tunables: &Tunables) -> Proposer {
        let mut rng = Rng::new(seed);
        let election_due = rng.range(tunables.election_ticks_min, tunables.election_ticks_max);
        Proposer {
            me,
            ballot: Ballot::ZERO,
            role: Role::Follower,
            leader_hint: None,
            rng,
            tick: 0,
            election_elapsed: 0,
            election_due,
            quiet: false,
            round_seen: 0,
        }
    }

    #[must_use]
    pub fn is_leader(&self) -> bool {
        matches!(self.role, Role::Leader(_))
    }

    #[must_use]
    pub fn is_candidate(&self) -> bool {
        matches!(self.role, Role::Candidate(_))
    }

    /// The ballot of this proposer's latest campaign.
    #[must_use]
    pub fn ballot(&self) -> Ballot {
        self.ballot
    }

    /// The node this proposer believes leads (itself when leading).
    #[must_use]
    pub fn leader_hint(&self) -> Option<NodeId> {
        if self.is_leader() { Some(self.me) } else { self.leader_hint }
    }

    /// True when the journal is idle and caught up: no ticks are needed until woken.
    #[must_use]
    pub fn is_quiet(&self) -> bool {
        self.quiet
    }

    /// Leaves quiescence: the election timer runs again from zero.
    pub fn wake(&mut self) {
        if self.quiet {
            self.quiet = false;
            self.election_elapsed = 0;
            if let Role::Leader(l) = &mut self.role {
                l.idle_ticks = 0;
                for t in l.heard.values_mut() {
                    *t = self.tick;
                }
            }
        }
    }

    /// True when a leader has room in its pipeline window.
    #[must_use]
    pub fn window_open(&self, tunables: &Tunables) -> bool {
        match &self.role {
            Role::Leader(l) => l.stop.is_none() && l.inflight.len() < tunables.pipeline_slots_max as usize,
            _ => false,
        }
    }

    fn redraw(&mut self, tunables: &Tunables) {
        self.election_elapsed = 0;
        self.election_due = self.rng.range(tunables.election_ticks_min, tunables.election_ticks_max);
    }

    /// Starts a campaign now: Phase 1 from `chosen_up_to` at a ballot of `epoch` (the epoch
    /// of this node's fold) above anything seen. Returns false, campaigning not, when a ballot
    /// of a later epoch was seen: this node has a configuration to learn first (rule 10 of
    /// docs/reconfiguration.md).
    pub fn campaign(
        &mut self,
        cfg: &JournalConfig,
        tunables: &Tunables,
        promised: Ballot,
        chosen_up_to: Slot,
        epoch: u64,
        out: &mut Vec<Outbound>,
    ) -> bool {
        let round = self.ballot.round.max(promised.round).max(self.round_seen) + 1;
        if (Ballot { round, node: self.me }).epoch() > epoch {
            self.redraw(tunables);
            return false;
        }
        let round = round.max(Ballot::epoch_start(epoch) + 1);
        self.ballot = Ballot { round, node: self.me };
        self.role = Role::Candidate(Campaign { from: chosen_up_to, promises: BTreeMap::new() });
        self.leader_hint = None;
        self.quiet = false;
        self.redraw(tunables);
        for v in &cfg.voters {
            out.push(Outbound { to: *v, message: Message::Prepare { ballot: self.ballot, from: chosen_up_to } });
        }
        true
    }

    /// Whether this node has seen a ballot of an epoch after `epoch` that a proposer used: in
    /// a message, or promised by its own acceptor (`promised`). A seat's floor (the promise a
    /// seat placed for a later epoch starts with, [`Ballot::seat_floor`]) is no such ballot:
    /// a move's target holds one before the stop-sign that names it is decided.
    #[must_use]
    pub fn saw_later_epoch(&self, promised: Ballot, epoch: u64) -> bool {
        let used_later = |round: u64| {
            let seen = Ballot { round, node: self.me }.epoch();
            seen > epoch && round > Ballot::epoch_start(seen)
        };
        used_later(self.round_seen) || used_later(promised.round)
    }

    /// The configuration changed under this proposer (its walk applied a stop-sign): whatever
    /// it led or campaigned for was the old configuration's. It follows, knowing no leader.
    pub fn reconfigured(&mut self, tunables: &Tunables) {
        if !matches!(self.role, Role::Follower) {
            self.role = Role::Follower;
            self.leader_hint = None;
            self.redraw(tunables);
        }
    }

    /// A node that may not campaign (it votes in no configuration it knows) lets its election
    /// timeout pass: the timer starts over.
    pub fn hold_election(&mut self, tunables: &Tunables) {
        self.redraw(tunables);
    }

    /// The stop-sign this leader proposed at `slot` was applied without changing the
    /// configuration (its epoch did not follow): the leader proposes above it again.
    pub fn stop_passed(&mut self, slot: Slot) {
        if let Role::Leader(l) = &mut self.role
            && l.stop == Some(slot)
        {
            l.stop = None;
        }
    }

    /// The slot of the stop-sign this leader waits on, if any.
    #[must_use]
    pub fn stop(&self) -> Option<Slot> {
        match &self.role {
            Role::Leader(l) => l.stop,
            _ => None,
        }
    }

    /// A leader at `ballot` (≥ our promise) was heard from `from`: follow it.
    pub fn observe_leader(&mut self, from: NodeId, ballot: Ballot, tunables: &Tunables) {
        self.round_seen = self.round_seen.max(ballot.round);
        if from == self.me || (self.is_leader() && ballot <= self.ballot) {
            return;
        }
        self.role = Role::Follower;
        self.leader_hint = Some(from);
        self.redraw(tunables);
    }

    /// A Promise for our campaign arrived; `epoch` is the configuration the acceptor's own
    /// walk has reached.
    #[allow(clippy::too_many_arguments)]
    pub fn on_promise(
        &mut self,
        cfg: &JournalConfig,
        tunables: &Tunables,
        from: NodeId,
        ballot: Ballot,
        chosen_up_to: Slot,
        accepted: Vec<Reported>,
        epoch: u64,
        own_chosen: Slot,
    ) -> Elected {
        let Role::Candidate(c) = &mut self.role else { return Elected::NotYet };
        if ballot != self.ballot {
            return Elected::NotYet;
        }
        // A stop-sign known chosen but not yet applied there (a new voter told of it, rule 12)
        // says as much as one applied: a `Reconfigure` naming `k` was proposed in epoch `k - 1`.
        let told = accepted
            .iter()
            .filter(|r| r.ballot.is_none())
            .filter_map(|r| r.command.names_epoch())
            .map(|k| k.saturating_sub(1))
            .max();
        if epoch.max(told.unwrap_or(0)) > ballot.epoch() {
            // A stop-sign below the acceptor's prefix ended our epoch: the slots this campaign
            // would lead are another configuration's.
            self.role = Role::Follower;
            self.leader_hint = None;
            self.redraw(tunables);
            return Elected::Outdated { peer: from };
        }
        c.promises.insert(from, (chosen_up_to, accepted));
        if c.promises.len() < cfg.quorum() {
            return Elected::NotYet;
        }
        let merged = merge_promises(own_chosen, c.from, ballot.epoch(), &c.promises);
        let mut leadership = Leadership {
            next_slot: merged.commands.last().map_or(merged.start, |(s, _)| s.next()),
            inflight: BTreeMap::new(),
            unsent: Vec::new(),
            heard: cfg.voters.iter().map(|v| (*v, self.tick)).collect(),
            caught_up: BTreeMap::new(),
            idle_ticks: 0,
            stop: None,
        };
        for (slot, command) in merged.commands {
            if command.ends_epoch(ballot.epoch()) {
                leadership.stop = Some(slot);
            }
            leadership.add(slot, Digested::new(command), self.tick);
        }
        self.role = Role::Leader(leadership);
        self.leader_hint = Some(self.me);
        self.quiet = false;
        Elected::Won { learn_from: merged.ahead }
    }

    /// A Nack for our ballot: someone promised higher. Returns true if we stepped down.
    pub fn on_nack(&mut self, ballot: Ballot, promised: Ballot, tunables: &Tunables) -> bool {
        self.round_seen = self.round_seen.max(promised.round);
        if ballot != self.ballot || promised <= ballot || matches!(self.role, Role::Follower) {
            return false;
        }
        self.role = Role::Follower;
        self.leader_hint = None;
        self.redraw(tunables);
        true
    }

    /// Proposes `command` in the next slot. The caller checked [`Proposer::window_open`].
    pub fn propose(&mut self, command: Digested) -> Slot {
        let tick = self.tick;
        let Role::Leader(l) = &mut self.role else { panic!("only a leader proposes") };
        let slot = l.next_slot;
        l.next_slot = slot.next();
        if command.command().ends_epoch(self.ballot.epoch()) {
            l.stop = Some(slot);
        }
        l.add(slot, command, tick);
        l.idle_ticks = 0;
        slot
    }

    /// An `Accepted` arrived; returns the slots it made chosen, with their commands.
    pub fn on_accepted(
        &mut self,
        cfg: &JournalConfig,
        from: NodeId,
        ballot: Ballot,
        slots: &[(Slot, u64)],
    ) -> Vec<(Slot, Digested)> {
        let tick = self.tick;
        let Role::Leader(l) = &mut self.role else { return Vec::new() };
        if ballot != self.ballot {
            return Vec::new();
        }
        l.heard.insert(from, tick);
        let mut chosen = Vec::new();
        for (slot, digest) in slots {
            let Some(f) = l.inflight.get_mut(slot) else { continue };
            if f.command.digest() != *digest {
                continue; // never credit an ack for another command at this (slot, ballot)
            }
            f.acks.insert(from);
            if f.acks.len() >= cfg.quorum() {
                let f = l.inflight.remove(slot).expect("present");
                chosen.push((*slot, f.command));
            }
        }
        chosen
    }

    /// A voter acknowledged our heartbeat.
    pub fn on_heartbeat_ack(&mut self, from: NodeId, ballot: Ballot, chosen_up_to: Slot) {
        let tick = self.tick;
        if let Role::Leader(l) = &mut self.role
            && ballot == self.ballot
        {
            l.heard.insert(from, tick);
            l.caught_up.insert(from, chosen_up_to);
        }
    }

    /// Sends this round's proposals as one `Accept` per voter.
    pub fn flush(&mut self, cfg: &JournalConfig, commit: Slot, out: &mut Vec<Outbound>) {
        let Role::Leader(l) = &mut self.role else { return };
        if l.unsent.is_empty() {
            return;
        }
        let entries = std::mem::take(&mut l.unsent);
        for v in &cfg.voters {
            out.push(Outbound {
                to: *v,
                message: Message::Accept { ballot: self.ballot, entries: entries.clone(), commit },
            });
        }
    }

    /// One clock tick. A follower may start an election; a leader heartbeats, re-sends what
    /// was not acknowledged, checks that it still hears a quorum, and may quiesce.
    ///
    /// Returns true when the caller should start a campaign.
    pub fn tick(
        &mut self,
        cfg: &JournalConfig,
        tunables: &Tunables,
        commit: Slot,
        idle: bool,
        out: &mut Vec<Outbound>,
    ) -> bool {
        self.tick += 1;
        let tick = self.tick;
        let ballot = self.ballot;
        match &mut self.role {
            Role::Follower | Role::Candidate(_) => {
                if self.quiet {
                    return false;
                }
                self.election_elapsed += 1;
                self.election_elapsed >= self.election_due
            }
            Role::Leader(_) if self.quiet => false,
            Role::Leader(l) => {
                let window = u64::from(tunables.election_ticks_min);
                let heard = cfg
                    .voters
                    .iter()
                    .filter(|v| **v == self.me || l.heard.get(v).is_some_and(|t| tick - t <= window))
                    .count();
                if heard < cfg.quorum() {
                    self.role = Role::Follower;
                    self.leader_hint = None;
                    self.redraw(tunables);
                    return false;
                }
                l.resend(cfg, ballot, commit, tick, self.me, out);
                let caught_up = |n: &NodeId| *n == self.me || l.caught_up.get(n).is_some_and(|c| *c >= commit);
                // Quiet only when every voter acknowledged the commit: a voter that lags (or
                // is down) keeps the journal heartbeating until it is back. Replicas are not
                // heartbeated and never hold a journal awake: they learn from the tier's feed
                // and its marks (`Voter::tick`), and ask voters when behind.
                let settled = l.inflight.is_empty() && l.unsent.is_empty() && cfg.voters.iter().all(caught_up);
                l.idle_ticks = if idle && settled { l.idle_ticks + 1 } else { 0 };
                let quiesce = l.idle_ticks >= 3;
                for n in cfg.voters.iter().filter(|n| **n != self.me) {
                    out.push(Outbound { to: *n, message: Message::Heartbeat { ballot, commit, quiesce } });
                }
                if quiesce {
                    self.quiet = true;
                }
                false
            }
        }
    }

    /// A quiescing heartbeat from the leader we follow: stop the election timer.
    pub fn quiesce_as_follower(&mut self) {
        if matches!(self.role, Role::Follower) {
            self.quiet = true;
        }
    }

    /// True when proposals wait to be sent.
    #[must_use]
    pub fn has_unsent(&self) -> bool {
        matches!(&self.role, Role::Leader(l) if !l.unsent.is_empty())
    }

    /// Every slot below this one is chosen as far as this leader knows: below its lowest
    /// proposal still in flight (slots below its campaign's start were reported chosen).
    #[must_use]
    pub fn commit_point(&self) -> Slot {
        match &self.role {
            Role::Leader(l) => l.inflight.keys().next().copied().unwrap_or(l.next_slot),
            _ => Slot(0),
        }
    }

    /// The slots proposed and not yet chosen (for answering held calls on step-down).
    #[must_use]
    pub fn inflight_len(&self) -> usize {
        match &self.role {
            Role::Leader(l) => l.inflight.len(),
            _ => 0,
        }
    }
}

/// What a won campaign re-proposes: the P2c merge of a quorum's promises.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merged {
    /// The first slot the new leader proposes: every slot below it is chosen (below the
    /// campaign's start, below our own prefix, or below the prefix of the acceptor `ahead`).
    pub start: Slot,
    /// One command per slot from `start` on, contiguous: the value reported for the slot, or
    /// `Noop` for a hole below the highest reported slot.
    pub commands: Vec<(Slot, Command)>,
    /// The acceptor whose chosen prefix is furthest ahead of `own_chosen`, and where it ends
    /// (the new leader catches up from it); `None` when no acceptor is ahead of us.
    pub ahead: Option<(NodeId, Slot)>,
}

/// The P2c merge over the promises of a campaign of configuration `epoch` that started at
/// `campaign_from`, on a node whose own chosen prefix ends at `own_chosen`.
///
/// For each slot, a value an acceptor knows chosen (reported with no ballot) wins; otherwise
/// the value reported at the highest ballot. A value accepted at a ballot of an earlier epoch
/// is no candidate: every slot the merge covers lies above the stop-sign that ended that epoch
/// (the campaigner's walk applied it), where nothing was chosen in it (docs/reconfiguration.md
/// rules 2 and 11). Then the stop-sign rule (11): the lowest slot holding a `Reconfigure` ends
/// the re-proposals there, unless a slot above it was reported at a higher ballot, which shows
/// that stop-sign was never chosen: it becomes a `Noop`, and the next one is looked at.
/// Pure: the caller checked the promises are a quorum for one ballot.
#[must_use]
pub fn merge_promises(
    own_chosen: Slot,
    campaign_from: Slot,
    epoch: u64,
    promises: &BTreeMap<NodeId, (Slot, Vec<Reported>)>,
) -> Merged {
    let mut merged: BTreeMap<Slot, (Option<Ballot>, Command)> = BTreeMap::new();
    let mut ahead: Option<(NodeId, Slot)> = None;
    for (node, (chosen, reported)) in promises {
        if *chosen > own_chosen && ahead.is_none_or(|(_, s)| *chosen > s) {
            ahead = Some((*node, *chosen));
        }
        for r in reported {
            if r.ballot.is_some_and(|b| b.epoch() < epoch) {
                continue;
            }
            let better = match merged.get(&r.slot) {
                None => true,
                Some((Some(b), _)) => r.ballot.is_none_or(|rb| rb > *b),
                Some((None, _)) => false,
            };
            if better {
                merged.insert(r.slot, (r.ballot, r.command.clone()));
            }
        }
    }
    let start = campaign_from.max(ahead.map_or(own_chosen, |(_, s)| s)).max(own_chosen);
    merged = merged.split_off(&start);
    honour_stop_signs(&mut merged, epoch);
    let end = merged.keys().next_back().map_or(start, |s| s.next()).max(start);
    let mut commands = Vec::new();
    let mut slot = start;
    while slot < end {
        let command = merged.remove(&slot).map_or(Command::Control(Control::Noop), |(_, c)| c);
        commands.push((slot, command));
        slot = slot.next();
    }
    Merged { start, commands, ahead }
}

/// Rule 11 over a merge's values by slot: keeps the lowest stop-sign of `epoch` that may have
/// been chosen and drops every value above it; a stop-sign outranked by a value above it becomes
/// a `Noop`. A ballot of `None` (known chosen) outranks every ballot. A `Reconfigure` that does
/// not end `epoch` is no stop-sign: its leader went on above it once the fold refused it, and
/// what it chose there stands (found by the test of seats moving under crashes: such a one cut
/// the merge below two chosen writes, which the new leader then proposed over).
fn honour_stop_signs(merged: &mut BTreeMap<Slot, (Option<Ballot>, Command)>, epoch: u64) {
    let rank = |b: Option<Ballot>| b.map_or((1, Ballot::ZERO), |b| (0, b));
    let stops: Vec<Slot> = merged.iter().filter(|(_, (_, c))| c.ends_epoch(epoch)).map(|(s, _)| *s).collect();
    for s in stops {
        let (ballot, _) = merged[&s];
        let outranked = merged.range(s.next()..).any(|(_, (b, _))| rank(*b) > rank(ballot));
        if outranked {
            merged.insert(s, (ballot, Command::Control(Control::Noop)));
        } else {
            merged.split_off(&s.next());
            return;
        }
    }
}

impl Leadership {
    fn add(&mut self, slot: Slot, command: Digested, tick: u64) {
        self.unsent.push((slot, command.clone()));
        let previous = self.inflight.insert(slot, Inflight { command, acks: BTreeSet::new(), sent_tick: tick });
        assert!(previous.is_none(), "a leader proposes each slot once per ballot");
    }

    /// Re-sends every proposal older than a tick to the voters that have not acknowledged it.
    fn resend(
        &mut self,
        cfg: &JournalConfig,
        ballot: Ballot,
        commit: Slot,
        tick: u64,
        me: NodeId,
        out: &mut Vec<Outbound>,
    ) {
        let mut per_voter: BTreeMap<NodeId, Vec<(Slot, Digested)>> = BTreeMap::new();
        for (slot, f) in &mut self.inflight {
            if tick.saturating_sub(f.sent_tick) < 2 {
                continue;
            }
            f.sent_tick = tick;
            for v in cfg.voters.iter().filter(|v| !f.acks.contains(v)) {
                if *v != me || !f.acks.contains(&me) {
                    per_voter.entry(*v).or_default().push((*slot, f.command.clone()));
                }
            }
        }
        for (to, entries) in per_voter {
            out.push(Outbound { to, message: Message::Accept { ballot, entries, commit } });
        }
    }
}
