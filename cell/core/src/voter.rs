//! The voter wiring: acceptor, proposer and learner of one journal on one node.

use std::collections::{BTreeMap, VecDeque};

use crate::acceptor::Acceptor;
use crate::config::{JournalConfig, Tunables};
use crate::effects::{CatchUp, Effects, catch_up_request};
use crate::ids::{Ballot, CallId, Life, NodeId, ReadId, Slot};
use crate::journal::{Command, Digested, JournalState, Outcome};
use crate::learner::{Learner, Walked};
use crate::log::{Durable, Log, WriteOp};
use crate::message::{Message, Outbound};
use crate::proposer::{Elected, Proposer};
use crate::reads::Reads;
use crate::ready::Ready;
use crate::wire::{Call, CallAnswer, ReadRequest};

/// A call waiting for its slot to apply.
#[derive(Clone, Copy, Debug)]
struct Held {
    call: CallId,
    digest: u64,
    /// The ballot this node proposed the call at.
    ballot: Ballot,
    deadline: u64,
}

/// One journal on one voter node: all three roles, one `Ready` per round.
#[derive(Debug)]
pub struct Voter {
    me: NodeId,
    /// This life of the journal here: catch-up requests and watermark rounds carry it, and an
    /// answer echoing another life is from before a crash, a sleep or a removal: it counts for
    /// nothing.
    life: Life,
    cfg: JournalConfig,
    /// The configuration it was placed with, once the fold's voters left it.
    placed: Option<Box<JournalConfig>>,
    tunables: Tunables,
    log: Log,
    acceptor: Acceptor,
    proposer: Proposer,
    learner: Learner,
    reads: Reads,
    held: BTreeMap<Slot, Held>,
    /// Admitted calls waiting for the pipeline window, as commands and their deadlines.
    queued: VecDeque<(CallId, Command, u64)>,
    effects: Effects,
    /// Self-addressed messages to handle before the round closes.
    loopback: VecDeque<Message>,
    /// Self-addressed acceptor replies whose writes are in the `Ready` being built.
    deferred: Vec<Message>,
    /// Self-addressed acceptor replies whose writes are in the `Ready` in flight: delivered at
    /// its `advance()`, once those writes are durable.
    deferred_in_flight: Vec<Message>,
    /// Newly applied slots to feed to learner-only replicas.
    feed: Vec<(Slot, Command)>,
    /// The chosen index the last [`Message::FeedMark`] told the replica tiers.
    fed_mark: Slot,
    catch_up: CatchUp,
    /// A check-in in progress: the peers that have not answered it yet.
    check_in: Option<CheckIn>,
    tick: u64,
    /// The configuration epoch `cfg.voters` belongs to: the fold's (docs/reconfiguration.md).
    /// `cfg.voters` is the placement's only at epoch 0; this node may be in it or not (a voter
    /// taken out keeps the journal as a catch-up source, and campaigns never).
    epoch: u64,
    /// The last stop-sign this node's walk applied: a voter taken out by it repeats it to the
    /// new voters at each election timeout, until the registry removes the journal here.
    last_stop: Option<(Slot, Command)>,
    /// The end of the log as the round in flight took it (every entry below is in that round's
    /// writes or an earlier one's), and as the last synced round left it: every entry below
    /// `durable_end` is on disk. A `Watermark` counts no slot past `durable_end` (see
    /// [`Voter::watermark`]).
    taken_end: Slot,
    durable_end: Slot,
}

/// A check-in (see [`Voter::check_in`]): asks every peer for what it holds beyond our chosen
/// prefix, again at the catch-up pace while any has not answered.
#[derive(Clone, Debug)]
struct CheckIn {
    unanswered: Vec<NodeId>,
    next_tick: u64,
    misses: u32,
}

impl Voter {
    /// A fresh journal on this node, in its life `life` here (see [`Life`]).
    #[must_use]
    pub fn new(me: NodeId, cfg: JournalConfig, tunables: Tunables, seed: u64, life: Life) -> Voter {
        Voter::recover(me, cfg, tunables, seed, life, Durable::default())
    }

    /// A journal rebuilt from storage: promise, retained log, floor, sealed state, chosen index.
    /// `life` must differ from every earlier life of this journal on this node (the host mints
    /// one each time it builds the journal: [`Life::mint`]).
    #[must_use]
    pub fn recover(
        me: NodeId,
        cfg: JournalConfig,
        tunables: Tunables,
        seed: u64,
        life: Life,
        durable: Durable,
    ) -> Voter {
        cfg.assert_valid();
        tunables.assert_valid();
        let promise = durable.promise;
        let (log, learner, effects) = crate::effects::recover(cfg.mode, &tunables, durable);
        let mut cfg = cfg;
        let mut placed = None;
        // The configuration the journal's own log decided governs, not the placement's.
        cfg.follow(learner.state(), &mut placed);
        let epoch = learner.state().epoch;
        let end = log_end(&log);
        Voter {
            me,
            life,
            acceptor: Acceptor::new(promise),
            proposer: Proposer::new(me, seed, &tunables),
            learner,
            cfg,
            placed,
            tunables,
            log,
            reads: Reads::new(life),
            held: BTreeMap::new(),
            queued: VecDeque::new(),
            effects,
            loopback: VecDeque::new(),
            deferred: Vec::new(),
            deferred_in_flight: Vec::new(),
            feed: Vec::new(),
            fed_mark: Slot(0),
            catch_up: CatchUp::default(),
            check_in: None,
            tick: 0,
            epoch,
            last_stop: None,
            taken_end: end,
            durable_end: end,
        }
    }

    #[must_use]
    pub fn id(&self) -> NodeId {
        self.me
    }

    #[must_use]
    pub fn config(&self) -> &JournalConfig {
        &self.cfg
    }

    /// The configuration this journal was placed with here (its founding one), whatever voters
    /// its log has decided since: what a placement is compared with.
    #[must_use]
    pub fn placed(&self) -> &JournalConfig {
        self.placed.as_deref().unwrap_or(&self.cfg)
    }

    /// This life of the journal here.
    #[must_use]
    pub fn life(&self) -> Life {
        self.life
    }

    /// The journal state this node has folded.
    #[must_use]
    pub fn state(&self) -> &JournalState {
        self.learner.state()
    }

    /// Every slot below this one is chosen and applied here.
    #[must_use]
    pub fn chosen_up_to(&self) -> Slot {
        self.learner.chosen_up_to()
    }

    /// The first retained slot.
    #[must_use]
    pub fn floor(&self) -> Slot {
        self.log.floor()
    }

    #[must_use]
    pub fn promised(&self) -> Ballot {
        self.acceptor.promised()
    }

    #[must_use]
    pub fn is_leader(&self) -> bool {
        self.proposer.is_leader()
    }

    #[must_use]
    pub fn leader_hint(&self) -> Option<NodeId> {
        self.proposer.leader_hint()
    }

    /// True for a quiet follower that knows no leader (woken to check in, or by a peer's
    /// message, and left asleep): no campaign it knows of is under way, and a call here would be
    /// redirected nowhere. A follower that saw a campaign or a leader is not quiet, or knows it.
    #[must_use]
    pub fn is_quiet_without_a_leader(&self) -> bool {
        // A candidate is never quiet, and a quiet leader names itself.
        self.proposer.is_quiet() && self.proposer.leader_hint().is_none()
    }

    /// The records its window holds from `from` on (see [`crate::reads::window_records`]).
    #[must_use]
    pub fn window_records(&self, from: crate::ids::Seq) -> (crate::ids::Seq, Vec<bytes::Bytes>) {
        crate::reads::window_records(self.learner.fold(), &self.log, from)
    }

    /// The retained log (for audits and inspection).
    #[must_use]
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// True when the chosen index in storage is the one applied here: the journal can leave
    /// memory and come back from its store as it is.
    #[must_use]
    pub fn chosen_is_written(&self) -> bool {
        self.learner.persisted_chosen() >= self.learner.chosen_up_to()
    }

    /// Writes the chosen index down with the next round (see [`Self::chosen_is_written`]).
    pub fn write_chosen(&mut self) {
        self.learner.persist_chosen(&mut self.effects.ready.writes);
    }

    /// True when nothing here needs a tick: idle, caught up, no call or read waiting.
    #[must_use]
    pub fn is_quiet(&self) -> bool {
        self.proposer.is_quiet()
            && self.held.is_empty()
            && self.queued.is_empty()
            && self.reads.is_empty()
            && !self.learner.is_behind()
            && self.check_in.is_none()
    }

    /// True while a check-in waits for a peer's answer.
    #[must_use]
    pub fn is_checking_in(&self) -> bool {
        self.check_in.is_some()
    }

    /// True when a `ready()` now would carry something.
    #[must_use]
    pub fn has_ready(&self) -> bool {
        !self.effects.ready.is_empty()
            || !self.feed.is_empty()
            || self.reads.wants_round()
            || self.proposer.has_unsent()
    }

    /// Quiesces as a follower (the host wakes a dormant journal this way: asleep, as it left,
    /// until an input that needs it wakes it).
    pub fn sleep(&mut self) {
        self.proposer.quiesce_as_follower();
    }

    /// Leaves quiescence (the host calls this when it suspects a peer machine is down).
    pub fn wake(&mut self) {
        self.proposer.wake();
    }

    /// Checks in with the peers without an election (the host does this once for each journal
    /// after a boot): quiet as a follower, asks every peer for the chosen commands past this
    /// node's prefix, and asks again at the catch-up pace until each has answered. A peer
    /// further along sends them (and a peer behind learns from the request that it is); the
    /// catch-up timer takes it from there. Only a journal that then still holds accepted
    /// entries past every answer's chosen prefix campaigns, so that a leader settles them: an
    /// idle journal's check-in writes nothing.
    pub fn check_in(&mut self) {
        self.proposer.quiesce_as_follower();
        let unanswered: Vec<NodeId> = self.cfg.voters.iter().copied().filter(|v| *v != self.me).collect();
        self.check_in = Some(CheckIn { unanswered, next_tick: self.tick, misses: 0 });
        self.ask_check_in();
        self.settle();
    }

    /// Sends the check-in's request to every peer yet to answer when due, or ends it.
    fn ask_check_in(&mut self) {
        let Some(c) = &mut self.check_in else { return };
        if c.unanswered.is_empty() {
            self.check_in = None;
            if self.log.last_slot().is_some_and(|s| s >= self.learner.known_chosen()) {
                self.start_campaign();
            }
            return;
        }
        if self.tick < c.next_tick {
            return;
        }
        c.next_tick = self.tick + u64::from(crate::effects::catch_up_pause(&self.tunables, c.misses));
        c.misses = c.misses.saturating_add(1);
        let from = self.learner.chosen_up_to();
        for to in c.unanswered.clone() {
            self.send(to, catch_up_request(from, self.life));
        }
    }

    /// A peer answered a catch-up request: it counts for the check-in (which ends at the next
    /// tick once all have).
    fn check_in_answered(&mut self, from: NodeId) {
        if let Some(c) = &mut self.check_in {
            c.unanswered.retain(|p| *p != from);
        }
    }

    /// Starts an election now (the host uses it to elect a first leader without waiting).
    pub fn campaign(&mut self) {
        self.start_campaign();
        self.settle();
    }

    /// True when this node votes in the configuration its walk has reached.
    #[must_use]
    pub fn is_voter(&self) -> bool {
        self.cfg.voters.contains(&self.me)
    }

    /// The configuration epoch this node's walk has reached.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    fn start_campaign(&mut self) {
        let mut out = Vec::new();
        self.campaign_into(&mut out);
        for o in out {
            self.send(o.to, o.message);
        }
    }

    /// Campaigns in the configuration the walk reached, if this node votes in it.
    fn campaign_into(&mut self, out: &mut Vec<Outbound>) {
        if !self.is_voter() {
            return;
        }
        let campaigned = self.proposer.campaign(
            &self.cfg,
            &self.tunables,
            self.acceptor.promised(),
            self.learner.chosen_up_to(),
            self.epoch,
            out,
        );
        if !campaigned && self.proposer.saw_later_epoch(self.acceptor.promised(), self.epoch) {
            // A ballot of a later configuration was used: the stop-sign that ended ours is
            // chosen, at or above our prefix (the walk applied everything below it), so the slot
            // at our prefix is chosen. Knowing that, this node catches up until it applies the
            // stop-sign — a voter the new configuration left out, which slept through it, would
            // otherwise sit in the old one for good, holding every call sent to it (simulation
            // seed 100009998: the mover's `Reconfigure`, routed to it first, never got a verdict).
            self.learner.note_chosen(self.learner.chosen_up_to().next());
        }
    }

    /// A protocol message from `from`.
    pub fn step(&mut self, from: NodeId, message: Message) {
        if matches!(
            message,
            Message::Prepare { .. } | Message::Accept { .. } | Message::Heartbeat { quiesce: false, .. }
        ) {
            self.proposer.wake();
        }
        self.handle(from, message);
        self.settle();
    }

    /// A Write, Truncate or SetLeader from a client. Answered in a later `Ready`.
    pub fn propose(&mut self, id: CallId, call: Call) {
        self.proposer.wake();
        let answer = self.admit(id, call);
        if let Some(a) = answer {
            self.effects.ready.answers.push((id, a));
        }
        self.settle();
    }

    fn admit(&mut self, id: CallId, call: Call) -> Option<CallAnswer> {
        if let Call::Write { leader, seq, records } = &call {
            let entry = crate::journal::Entry { leader: *leader, seq: *seq, records: records.clone() };
            if let Err(too_large) = self.tunables.limits.check(&entry) {
                return Some(CallAnswer::TooLarge(too_large));
            }
        }
        // A candidate holds the call for its campaign (a journal woken by it campaigns at once);
        // a campaign that does not win redirects what it held.
        if !self.proposer.is_leader() && !self.proposer.is_candidate() {
            return Some(CallAnswer::Redirect { leader: self.proposer.leader_hint() });
        }
        if self.held.len() + self.queued.len() >= self.tunables.calls_max as usize {
            return Some(CallAnswer::Busy);
        }
        let deadline = self.tick + u64::from(self.tunables.call_ticks_max);
        self.queued.push_back((id, call.into_command(), deadline));
        self.drain_queue();
        None
    }

    /// A read of this journal. Answered in a later `Ready`.
    pub fn read(&mut self, id: ReadId, request: ReadRequest) {
        let applied_to = self.learner.state().next_seq;
        self.reads.add(id, request, applied_to, &self.tunables, &mut self.effects.ready.reads);
        self.settle();
    }

    /// One clock tick.
    pub fn tick(&mut self) {
        self.tick += 1;
        // A read that waits for slots this node has not applied needs someone to settle them:
        // a quiet journal (no leader heartbeating) would never choose the values its acceptors
        // hold past the chosen prefix. Waking runs the election timer; a live leader's
        // heartbeats keep it from firing, and without one this node campaigns.
        if self.reads.waits_past(self.learner.fold().next_slot()) {
            self.proposer.wake();
        }
        let idle = self.held.is_empty() && self.queued.is_empty() && self.reads.is_empty();
        let mut out = Vec::new();
        let commit = self.proposer_commit();
        let was_leader = self.proposer.is_leader();
        let was_quiet = self.proposer.is_quiet();
        if self.proposer.tick(&self.cfg, &self.tunables, commit, idle, &mut out) {
            if self.is_voter() {
                self.campaign_into(&mut out);
            } else {
                // Taken out: no campaign, but the new voters may not know they vote yet.
                self.proposer.hold_election(&self.tunables);
                if let Some(entry) = self.last_stop.clone() {
                    self.announce_stop(entry);
                }
            }
        }
        for o in out {
            self.send(o.to, o.message);
        }
        self.mark_feed(!was_quiet && self.proposer.is_quiet());
        if (was_leader && !self.proposer.is_leader()) || self.lost_campaign_with_calls() {
            self.redirect_queued();
        }
        // The fold has not moved since the last `settle`: what it could serve was served.
        self.reads.tick(self.learner.state().next_seq, &mut self.effects.ready.reads);
        let tick = self.tick;
        let expired: Vec<Slot> = self.held.iter().filter(|(_, h)| tick > h.deadline).map(|(s, _)| *s).collect();
        for s in expired {
            let h = self.held.remove(&s).expect("present");
            self.effects.ready.answers.push((h.call, CallAnswer::NoVerdict));
        }
        while self.queued.front().is_some_and(|q| tick > q.2) {
            let (id, _, _) = self.queued.pop_front().expect("present");
            self.effects.ready.answers.push((id, CallAnswer::NoVerdict));
        }
        if self.learner.is_behind()
            && let Some(to) = self.catch_up.due(
                tick,
                self.learner.chosen_up_to(),
                &self.tunables,
                &self.cfg,
                self.me,
                self.proposer.leader_hint(),
            )
        {
            self.send(to, catch_up_request(self.learner.chosen_up_to(), self.life));
        }
        self.ask_check_in();
        self.settle();
    }

    /// A leader tells its replica tiers how far the journal is chosen when that moved since
    /// its last mark, and once more as the journal quiesces (`quiesced`): the last feed batch
    /// before an idle spell may be lost, and no heartbeat reaches a replica.
    fn mark_feed(&mut self, quiesced: bool) {
        if !self.proposer.is_leader() || self.cfg.learners.is_empty() {
            return;
        }
        let chosen = self.learner.chosen_up_to();
        if chosen > self.fed_mark || quiesced {
            self.fed_mark = chosen;
            for l in &self.cfg.learners {
                self.effects.send(*l, Message::FeedMark { chosen_up_to: chosen });
            }
        }
    }

    /// The effects of everything since the last `advance()`. See [`Ready`] for the contract.
    ///
    /// # Panics
    /// When the previous `Ready` was not advanced.
    pub fn ready(&mut self) -> Ready {
        self.flush();
        let ready = self.effects.take();
        self.taken_end = log_end(&self.log);
        self.learner.round_taken(ready.writes.iter().any(WriteOp::needs_sync));
        assert!(self.deferred_in_flight.is_empty(), "one round in flight at a time");
        self.deferred_in_flight = std::mem::take(&mut self.deferred);
        ready
    }

    /// Takes what may leave now — proposals, heartbeats, chosen values, catch-up, answers —
    /// even while a `Ready` is in flight. Writes and acceptor replies stay for the next `ready()`.
    pub fn take_released(&mut self) -> crate::ready::Released {
        self.flush();
        self.effects.release()
    }

    /// Sends this round's proposals and read rounds, and feeds newly applied slots to learners.
    fn flush(&mut self) {
        let mut out = Vec::new();
        self.proposer.flush(&self.cfg, self.proposer_commit(), &mut out);
        self.reads.start_round(&self.cfg, &mut out);
        for o in out {
            self.send(o.to, o.message);
        }
        self.settle();
        if !self.feed.is_empty() {
            // One copy per tier but the last, which takes the batch itself.
            let entries = std::mem::take(&mut self.feed);
            if let Some((last, rest)) = self.cfg.learners.split_last() {
                for l in rest {
                    self.effects.send(*l, Message::Chosen { entries: entries.clone() });
                }
                self.effects.send(*last, Message::Chosen { entries });
            }
        }
    }

    /// The last `Ready`'s writes are durable and its messages sent: deliver this node's own
    /// acceptor replies, which could not count before.
    ///
    /// # Panics
    /// Without a `ready()` before it.
    pub fn advance(&mut self) {
        self.effects.advance();
        self.durable_end = self.taken_end;
        self.learner.round_synced();
        self.learner.evict(&mut self.log);
        for m in std::mem::take(&mut self.deferred_in_flight) {
            self.handle(self.me, m);
        }
        self.settle();
    }

    fn send(&mut self, to: NodeId, message: Message) {
        if to != self.me {
            self.effects.send(to, message);
        } else if message.needs_durable_sender() {
            self.deferred.push(message);
        } else {
            self.loopback.push_back(message);
        }
    }

    /// Handles loopback, walks the chosen prefix, answers calls and reads, fills the window.
    fn settle(&mut self) {
        loop {
            while let Some(m) = self.loopback.pop_front() {
                self.handle(self.me, m);
            }
            let mut walked = Vec::new();
            self.learner.walk(&mut self.log, &mut self.effects.ready.writes, &mut walked);
            self.on_walked(&walked);
            self.drain_queue();
            if self.loopback.is_empty() {
                break;
            }
        }
        self.reads.poll(
            self.learner.fold(),
            &self.log,
            &self.tunables,
            &mut self.effects.ready.reads,
            &mut self.effects.ready.fetches,
        );
        self.check_invariants();
    }

    fn check_invariants(&self) {
        assert!(self.learner.chosen_up_to() >= self.log.floor(), "the chosen prefix reaches the floor");
        assert!(
            !self.proposer.is_leader() || self.acceptor.promised() == self.proposer.ballot(),
            "a leader's own acceptor promised exactly its ballot"
        );
        assert!(
            self.held.len() + self.queued.len() <= self.tunables.calls_max as usize,
            "held calls stay within calls_max"
        );
    }

    fn on_walked(&mut self, walked: &[Walked]) {
        self.effects.applied(walked);
        // The stop-sign this node decided as leader, if the walk applied one.
        let mut stop_sign = None;
        for w in walked {
            if let Some(h) = self.held.remove(&w.slot) {
                // A blind judgement (after a trim-point jump) may say Refused where the slot was
                // a Duplicate: this node cannot give that call a verdict. Nor can it when the
                // slot was chosen from anything but its own proposal of the call: an identical
                // command decided there by another leader may be an earlier attempt of the same
                // request, decided before this one was sent (seed 856).
                let own = w.ballot == Some(h.ballot);
                let answer = if h.digest == w.digest && !w.judged.blind && own {
                    CallAnswer::Verdict(w.judged.outcome)
                } else {
                    CallAnswer::NoVerdict
                };
                self.effects.ready.answers.push((h.call, answer));
            }
            if self.proposer.is_leader() && !self.cfg.learners.is_empty() {
                // A slot the same walk already compacted is not fed: a learner that misses it
                // asks for catch-up and is told the trim point.
                if let Some(e) = self.log.get(w.slot) {
                    self.feed.push((w.slot, e.command.clone()));
                }
            }
            if matches!(w.judged.outcome, Outcome::Trimmed(_)) {
                self.feed.retain(|(s, _)| *s >= self.log.floor());
            }
            if matches!(w.judged.outcome, Outcome::StaleEpoch { .. }) {
                self.proposer.stop_passed(w.slot);
            }
            if matches!(w.judged.outcome, Outcome::Reconfigured { .. })
                && let Some(e) = self.log.get(w.slot)
            {
                self.last_stop = Some((w.slot, e.command.clone()));
                if self.proposer.is_leader() {
                    stop_sign = self.last_stop.clone();
                }
            }
        }
        if self.learner.state().epoch != self.epoch {
            self.reconfigure(stop_sign);
        }
        // Calls whose slot fell below a trim-point jump never get a verdict here.
        let chosen = self.learner.chosen_up_to();
        while let Some((slot, _)) = self.held.first_key_value() {
            if *slot >= chosen {
                break;
            }
            let (_, h) = self.held.pop_first().expect("present");
            self.effects.ready.answers.push((h.call, CallAnswer::NoVerdict));
        }
    }

    /// The walk applied a stop-sign (or jumped past one): the configuration it reached governs
    /// every slot from here on (docs/reconfiguration.md, rules 3, 4 and 7). A leader or candidate
    /// of the old one stops; a voter of the new one campaigns in it at once, holding the calls
    /// that wait; reads being confirmed ask again in the new configuration.
    ///
    /// A leader that decided the stop-sign (`decided`) tells the new voters it is chosen: they
    /// hear no heartbeat of the old configuration, and until one of them has applied it none
    /// of them knows it votes. Knowing it chosen, each catches up to it.
    fn reconfigure(&mut self, decided: Option<(Slot, Command)>) {
        // The chosen index past the stop-sign is written with this round, and the campaign's
        // Prepare below leaves only once that round is synced: a node that campaigned in the
        // new configuration never boots back into the old one, where its own promise of a
        // later epoch would keep it from ever campaigning (found by the test of seats moving
        // under crashes).
        self.learner.persist_chosen(&mut self.effects.ready.writes);
        self.epoch = self.learner.state().epoch;
        self.cfg.follow(self.learner.state(), &mut self.placed);
        if let Some(entry) = decided {
            self.announce_stop(entry);
        }
        self.proposer.reconfigured(&self.tunables);
        self.reads.reconfigured();
        self.catch_up = CatchUp::default();
        if self.is_voter() {
            self.start_campaign();
        }
        if !self.proposer.is_candidate() {
            self.redirect_queued();
        }
    }

    /// Tells the voters of the configuration in force that the stop-sign `entry` which made it
    /// is chosen: they learn it, know they are behind, and catch up to it.
    fn announce_stop(&mut self, entry: (Slot, Command)) {
        for v in self.cfg.voters.clone().into_iter().filter(|v| *v != self.me) {
            self.effects.send(v, Message::Chosen { entries: vec![entry.clone()] });
        }
    }

    fn drain_queue(&mut self) {
        while self.proposer.window_open(&self.tunables) {
            let Some((id, command, deadline)) = self.queued.pop_front() else { break };
            // A `Reconfigure` that does not name the epoch after the one in force is judged here,
            // by the leader: the fold would refuse it, and proposing it would stop the journal
            // at a stop-sign for nothing. Only a leader judges it: a voter behind the epoch in
            // force (back from a crash, catching up) answered its own stale epoch as a verdict
            // (the simulation's seed 80019739: every Reconfigure `StaleEpoch` 0, and the move
            // never ended); it redirects, a candidate holds the call until it leads.
            if let Some(epoch) = command.names_epoch()
                && epoch != self.epoch + 1
            {
                let view = self.learner.state().view();
                self.effects
                    .ready
                    .answers
                    .push((id, CallAnswer::Verdict(Outcome::StaleEpoch { epoch: self.epoch, view })));
                continue;
            }
            // The one digest of this command: the proposer, this node's acceptor (the Accept
            // carries it) and the learner's walk all use it.
            let command = Digested::new(command);
            let digest = command.digest();
            let slot = self.proposer.propose(command);
            let ballot = self.proposer.ballot();
            // A call this node proposed at the slot before, at an earlier ballot, lost it: this
            // ballot found the slot free (past a stop-sign, or its own Accept never landed), so
            // that proposal is chosen nowhere. It gets no verdict rather than no answer (seed
            // 40007268: overwritten, it was never answered).
            if let Some(lost) = self.held.insert(slot, Held { call: id, digest, ballot, deadline }) {
                self.effects.ready.answers.push((lost.call, CallAnswer::NoVerdict));
            }
        }
    }

    fn redirect_queued(&mut self) {
        let leader = self.proposer.leader_hint();
        for (id, _, _) in std::mem::take(&mut self.queued) {
            self.effects.ready.answers.push((id, CallAnswer::Redirect { leader }));
        }
    }

    /// What a leader tells followers is chosen: its applied prefix, but never past its lowest
    /// proposal not yet chosen at its ballot. A follower applies what it holds at the commit's
    /// ballot below the commit; a slot where this leader's proposal lost to another leader's
    /// value (learned here by catch-up) would make a follower holding the losing proposal apply
    /// it.
    fn proposer_commit(&self) -> Slot {
        self.learner.chosen_up_to().min(self.proposer.commit_point())
    }

    /// Chosen commands from `from`: a leader's feed, or a catch-up answer from a peer whose
    /// chosen prefix ends at `peer_chosen`. A page that moved us and left us behind is followed
    /// at once by a request for the next one; anything else waits for the catch-up timer.
    fn on_chosen_entries(&mut self, from: NodeId, entries: &[(Slot, Command)], peer_chosen: Option<Slot>) {
        let before = self.learner.chosen_up_to();
        self.learner.learn_page(&mut self.log, entries, peer_chosen, &mut self.effects.ready.writes);
        let mut walked = Vec::new();
        self.learner.walk(&mut self.log, &mut self.effects.ready.writes, &mut walked);
        self.on_walked(&walked);
        let moved = self.learner.chosen_up_to() > before;
        if moved && peer_chosen.is_some() && self.learner.is_behind() && from != self.me {
            self.send(from, catch_up_request(self.learner.chosen_up_to(), self.life));
        }
    }

    fn handle(&mut self, from: NodeId, message: Message) {
        if message.answers_life().is_some_and(|life| life != self.life) {
            // An answer to a request of an earlier life of this journal here.
            return;
        }
        let was_leader = self.proposer.is_leader();
        let writes = &mut self.effects.ready.writes;
        match message {
            Message::Prepare { ballot, from: start } => {
                // The chosen index a campaign may trust to skip slots is the one a reboot keeps.
                let reply = self.acceptor.on_prepare(
                    &self.log,
                    self.learner.durable_chosen(),
                    self.epoch,
                    ballot,
                    start,
                    writes,
                );
                if self.acceptor.promised() > self.proposer.ballot() {
                    self.proposer.on_nack(self.proposer.ballot(), self.acceptor.promised(), &self.tunables);
                }
                self.send(from, reply);
            }
            Message::Promise { ballot, from: _, chosen_up_to, accepted, epoch } => {
                // Whatever becomes of the campaign, slots below the acceptor's chosen index are
                // chosen: a campaign that starts above our prefix leaves them to catch-up.
                self.learner.note_chosen(chosen_up_to);
                let elected = self.proposer.on_promise(
                    &self.cfg,
                    &self.tunables,
                    from,
                    ballot,
                    chosen_up_to,
                    accepted,
                    epoch,
                    self.learner.chosen_up_to(),
                );
                match elected {
                    Elected::Won { learn_from: Some((peer, _)) } | Elected::Outdated { peer } => {
                        self.send(peer, catch_up_request(self.learner.chosen_up_to(), self.life));
                    }
                    Elected::Won { learn_from: None } | Elected::NotYet => {}
                }
            }
            Message::Nack { ballot, promised, floor } => {
                self.proposer.on_nack(ballot, promised, &self.tunables);
                self.learner.note_chosen(floor);
                if floor > self.learner.chosen_up_to() {
                    self.send(from, catch_up_request(self.learner.chosen_up_to(), self.life));
                }
            }
            Message::Accept { ballot, entries, commit } => {
                let chosen = self.learner.chosen_up_to();
                let reply = self.acceptor.on_accept(&mut self.log, chosen, ballot, &entries, writes);
                if matches!(reply, Message::Accepted { .. }) {
                    self.proposer.observe_leader(from, ballot, &self.tunables);
                    self.learner.on_commit(ballot, commit);
                }
                self.send(from, reply);
            }
            Message::Accepted { ballot, slots } => {
                let chosen = self.proposer.on_accepted(&self.cfg, from, ballot, &slots);
                for (slot, command) in &chosen {
                    if self.log.get(*slot).is_none_or(|e| e.ballot != Some(ballot)) {
                        self.learner.learn_digested(&mut self.log, *slot, command, writes);
                    }
                }
                if !chosen.is_empty() {
                    self.learner.on_commit(ballot, self.proposer.commit_point());
                }
            }
            Message::Heartbeat { ballot, commit, quiesce } => {
                if ballot < self.acceptor.promised() {
                    let nack = Message::Nack { ballot, promised: self.acceptor.promised(), floor: self.log.floor() };
                    self.send(from, nack);
                    return;
                }
                self.proposer.observe_leader(from, ballot, &self.tunables);
                self.learner.on_commit(ballot, commit);
                let mut walked = Vec::new();
                self.learner.walk(&mut self.log, writes, &mut walked);
                self.on_walked(&walked);
                let chosen_up_to = self.learner.chosen_up_to();
                if quiesce && chosen_up_to >= commit {
                    self.proposer.quiesce_as_follower();
                }
                self.send(from, Message::HeartbeatAck { ballot, chosen_up_to });
            }
            Message::HeartbeatAck { ballot, chosen_up_to } => {
                self.learner.note_chosen(chosen_up_to);
                self.proposer.on_heartbeat_ack(from, ballot, chosen_up_to);
            }
            Message::Chosen { entries } => self.on_chosen_entries(from, &entries, None),
            Message::CatchUpResponse { entries, chosen_up_to, life: _ } => {
                self.on_chosen_entries(from, &entries, Some(chosen_up_to));
                self.check_in_answered(from);
            }
            Message::CatchUpRequest { from: start, life } => {
                // The asker's chosen prefix ends at `start`: a node short of it is behind.
                if self.cfg.voters.contains(&from) {
                    self.learner.note_chosen(start);
                }
                match self
                    .learner
                    .serve_catch_up(
                        &self.log,
                        start,
                        life,
                        self.tunables.catch_up_slots_max,
                        self.tunables.catch_up_bytes_max,
                    )
                    .map(|s| s.for_peer(from))
                {
                    Some(Ok(reply)) => self.send(from, reply),
                    Some(Err(fetch)) => self.effects.ready.fetches.push(fetch),
                    None => {}
                }
            }
            Message::TrimmedTo { from: _, point, state, life: _ } => {
                if self.learner.jump(&mut self.log, point, state, writes) {
                    self.on_walked(&[]);
                    self.send(from, catch_up_request(point, self.life));
                }
                self.check_in_answered(from);
            }
            // A copy promised in a configuration after its walk's does not answer: it may be a
            // seat placed afresh (a move back to a machine the journal left), holding none of what
            // its earlier copy accepted, so its watermark would be below a stop-sign that copy
            // helped choose, and a reader still in that configuration would miss every write past
            // it (seed 130002648: a stale linearizable read on the re-placed machine itself). Once
            // its walk reaches the promised configuration its watermark lies past those stop-signs.
            Message::WatermarkRequest { read, life } => {
                if self.acceptor.promised().epoch() <= self.epoch {
                    let up_to = self.watermark();
                    self.send(from, Message::Watermark { read, life, up_to });
                }
            }
            Message::Watermark { read, life, up_to } => self.reads.on_watermark(&self.cfg, from, read, life, up_to),
            // Sent to replica tiers only; a voter learns the chosen prefix from its leader.
            Message::FeedMark { .. } => {}
        }
        if (was_leader && !self.proposer.is_leader()) || self.lost_campaign_with_calls() {
            self.redirect_queued();
        }
    }

    /// Calls held for a campaign that ended without winning.
    fn lost_campaign_with_calls(&self) -> bool {
        !self.queued.is_empty() && !self.proposer.is_leader() && !self.proposer.is_candidate()
    }

    /// The watermark this voter answers a linearizable read's round with: the acceptor's
    /// ([`Acceptor::watermark`]), counting no entry the last synced round did not make durable.
    ///
    /// Enough: a write was acknowledged only once a quorum's `Accepted` came back, and an
    /// acceptor sends `Accepted` only after the round holding the entry synced, so every
    /// voter of that quorum counts the write's slot here from then on — before the read that
    /// follows the acknowledgement asks. Counting the entries still in flight (the round being
    /// synced, the Accepts just taken) would have the reader wait for slots no write it must
    /// see depends on: under steady writes the highest accepted slot is always one in flight,
    /// so the read waited about one round more.
    fn watermark(&self) -> Slot {
        let chosen = self.learner.chosen_up_to();
        let held = self.acceptor.watermark(&self.log, chosen, self.epoch);
        held.min(self.durable_end.max(chosen).max(self.log.floor()))
    }
}

/// The slot after the highest entry `log` holds (its floor when it holds none).
fn log_end(log: &Log) -> Slot {
    log.last_slot().map_or(log.floor(), Slot::next).max(log.floor())
}
