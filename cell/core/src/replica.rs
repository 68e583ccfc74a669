//! The learner-only wiring: a read replica of one journal. It votes in nothing and answers no
//! Prepare or Accept; it learns chosen commands from the leader's feed and from voters'
//! catch-up answers, jumps to a trim point like a voter, and serves reads.

use crate::config::{JournalConfig, Tunables};
use crate::effects::{CatchUp, Effects, catch_up_request};
use crate::ids::{Life, NodeId, ReadId, Slot};
use crate::journal::JournalState;
use crate::learner::Learner;
use crate::log::{Durable, Log, WriteOp};
use crate::message::Message;
use crate::reads::{Gate, GateStage, Reads};
use crate::ready::Ready;
use crate::wire::ReadRequest;

/// One journal on one learner-only replica.
#[derive(Debug)]
pub struct Replica {
    me: NodeId,
    /// This life of the journal here (see [`Life`]): answers echoing another are ignored.
    life: Life,
    cfg: JournalConfig,
    /// The configuration it was placed with, once the fold's voters left it.
    placed: Option<Box<JournalConfig>>,
    tunables: Tunables,
    log: Log,
    learner: Learner,
    reads: Reads,
    effects: Effects,
    catch_up: CatchUp,
    leader: Option<NodeId>,
    tick: u64,
    /// Reads refused because the replica had not caught up since it started.
    refused_unready: u64,
    /// The tick since which it has known of chosen slots it has not applied (`None`: it has
    /// applied all it knows of).
    behind_since: Option<u64>,
}

/// Where a replica of one journal stands (DESIGN §7): it serves no read before `Serving`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ReplicaState {
    /// Started, asking a quorum of voters how far the journal may be chosen.
    Bootstrapping,
    /// Learning up to `target`, the highest slot a quorum had accepted after it started.
    CatchingUp { target: Slot },
    /// Caught up once since it started: reads are served (each still waits for its own bound).
    Serving,
}

impl Replica {
    /// A replica rebuilt from storage (`Durable::default()` for a fresh one), in its life
    /// `life` here (see [`Life`]). A replica holds no promise; one that lost its disk simply
    /// relearns. It starts [`ReplicaState::Bootstrapping`]: it refuses reads until its fold
    /// covers a quorum's watermark taken after it started. `serving` skips that wait, for a
    /// journal that was serving in this process and only left memory while quiet (dormancy).
    ///
    /// `me` is this machine; the journal's learners are its tiers' feeds, not machines.
    #[must_use]
    pub fn recover(
        me: NodeId,
        cfg: JournalConfig,
        tunables: Tunables,
        life: Life,
        durable: Durable,
        serving: bool,
    ) -> Replica {
        cfg.assert_valid();
        tunables.assert_valid();
        assert!(!cfg.voters.contains(&me), "a replica is none of the journal's voters");
        let (log, learner, effects) = crate::effects::recover(cfg.mode, &tunables, durable);
        let mut cfg = cfg;
        let mut placed = None;
        cfg.follow(learner.state(), &mut placed);
        Replica {
            me,
            life,
            cfg,
            placed,
            tunables,
            log,
            learner,
            reads: if serving { Reads::new(life) } else { Reads::gated(life) },
            effects,
            catch_up: CatchUp::default(),
            leader: None,
            tick: 0,
            refused_unready: 0,
            behind_since: None,
        }
    }

    /// Where this replica stands (see [`ReplicaState`]).
    #[must_use]
    pub fn serving_state(&self) -> ReplicaState {
        match self.reads.gate() {
            Gate::Open => ReplicaState::Serving,
            Gate::Closed(GateStage::Covering(target)) => ReplicaState::CatchingUp { target },
            Gate::Closed(GateStage::Unconfirmed | GateStage::Confirming(_)) => ReplicaState::Bootstrapping,
        }
    }

    /// The records its window holds from `from` on (see [`crate::reads::window_records`]).
    #[must_use]
    pub fn window_records(&self, from: crate::ids::Seq) -> (crate::ids::Seq, Vec<bytes::Bytes>) {
        crate::reads::window_records(self.learner.fold(), &self.log, from)
    }

    /// Chosen slots this replica knows of (from its feed, its marks, a voter's answer) and has
    /// not applied yet.
    #[must_use]
    pub fn lag_slots(&self) -> u64 {
        self.learner.known_chosen().0.saturating_sub(self.learner.chosen_up_to().0)
    }

    /// Ticks since this replica first knew of a chosen slot it has still not applied (0 when
    /// it has applied all it knows of): its lag in time.
    #[must_use]
    pub fn behind_ticks(&self) -> u64 {
        self.behind_since.map_or(0, |since| self.tick - since)
    }

    /// Reads refused (`Unserved` at once) because the replica had not caught up.
    #[must_use]
    pub fn refused_unready(&self) -> u64 {
        self.refused_unready
    }

    #[must_use]
    pub fn state(&self) -> &JournalState {
        self.learner.state()
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

    #[must_use]
    pub fn chosen_up_to(&self) -> Slot {
        self.learner.chosen_up_to()
    }

    #[must_use]
    pub fn floor(&self) -> Slot {
        self.log.floor()
    }

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

    /// True when nothing here needs a tick.
    #[must_use]
    pub fn is_quiet(&self) -> bool {
        self.reads.is_empty() && !self.learner.is_behind() && self.reads.gate() == Gate::Open
    }

    #[must_use]
    pub fn has_ready(&self) -> bool {
        !self.effects.ready.is_empty() || self.reads.wants_round()
    }

    /// A protocol message from `from`.
    pub fn step(&mut self, from: NodeId, message: Message) {
        if message.answers_life().is_some_and(|life| life != self.life) {
            // An answer to a request of an earlier life of this journal here: it counts for
            // no read round (nor for the gate's).
            return;
        }
        let writes = &mut self.effects.ready.writes;
        match message {
            Message::Chosen { entries } => {
                self.leader = Some(from);
                self.learner.learn_page(&mut self.log, &entries, None, writes);
                self.walk();
            }
            Message::FeedMark { chosen_up_to } => {
                self.leader = Some(from);
                self.learner.note_chosen(chosen_up_to);
            }
            Message::CatchUpResponse { entries, chosen_up_to, life: _ } => {
                // A page that moved us and left us behind is followed by the next request at
                // once; an answer that brought nothing waits for the catch-up timer.
                let before = self.learner.chosen_up_to();
                self.learner.learn_page(&mut self.log, &entries, Some(chosen_up_to), writes);
                self.walk();
                if self.learner.chosen_up_to() > before && self.learner.is_behind() {
                    self.effects.send(from, catch_up_request(self.learner.chosen_up_to(), self.life));
                }
            }
            Message::TrimmedTo { point, state, .. } if self.learner.jump(&mut self.log, point, state, writes) => {
                self.effects.send(from, catch_up_request(point, self.life));
            }
            Message::Watermark { read, life, up_to } => self.reads.on_watermark(&self.cfg, from, read, life, up_to),
            // A replica is in no quorum and heartbeated by no leader: it ignores Phase 1/2
            // traffic and liveness, and serves no catch-up.
            _ => {}
        }
        self.settle();
    }

    /// A read of this journal.
    pub fn read(&mut self, id: ReadId, request: ReadRequest) {
        if self.reads.gate() != Gate::Open {
            // Not caught up since it started: another server answers (never a page from here).
            // The refusal still says how far this replica has applied.
            self.refused_unready += 1;
            let applied_to = self.learner.state().next_seq;
            self.effects.ready.reads.push((id, crate::wire::ReadAnswer::unserved_at(applied_to)));
            return;
        }
        let applied_to = self.learner.state().next_seq;
        self.reads.add(id, request, applied_to, &self.tunables, &mut self.effects.ready.reads);
        self.settle();
    }

    /// One clock tick.
    pub fn tick(&mut self) {
        self.tick += 1;
        self.reads.tick(self.learner.state().next_seq, &mut self.effects.ready.reads);
        // Behind as told (a feed mark, a catch-up answer), or a read (the gate among them)
        // waits for what this replica has not learned: the feed may have lost it.
        let fold = self.learner.fold();
        let read_waits =
            self.reads.waits_past(fold.next_slot()) || self.reads.waits_for_seq_past(fold.state().next_seq);
        if read_waits {
            self.catch_up.hurry(self.tick, &self.tunables);
        }
        if (read_waits || self.learner.is_behind())
            && let Some(to) = self.catch_up.due(
                self.tick,
                self.learner.chosen_up_to(),
                &self.tunables,
                &self.cfg,
                self.me,
                self.leader,
            )
        {
            self.effects.send(to, catch_up_request(self.learner.chosen_up_to(), self.life));
        }
        self.settle();
    }

    /// See [`Ready`].
    ///
    /// # Panics
    /// When the previous `Ready` was not advanced.
    pub fn ready(&mut self) -> Ready {
        self.flush();
        let ready = self.effects.take();
        self.learner.round_taken(ready.writes.iter().any(WriteOp::needs_sync));
        ready
    }

    /// Takes what may leave now, even while a `Ready` is in flight
    /// (see [`Voter::take_released`](crate::Voter::take_released)).
    pub fn take_released(&mut self) -> crate::ready::Released {
        self.flush();
        self.effects.release()
    }

    fn flush(&mut self) {
        let mut out = Vec::new();
        self.reads.start_round(&self.cfg, &mut out);
        for o in out {
            self.effects.send(o.to, o.message);
        }
    }

    /// # Panics
    /// Without a `ready()` before it.
    pub fn advance(&mut self) {
        self.effects.advance();
        self.learner.round_synced();
        self.learner.evict(&mut self.log);
    }

    fn walk(&mut self) {
        let mut walked = Vec::new();
        self.learner.walk(&mut self.log, &mut self.effects.ready.writes, &mut walked);
        self.effects.applied(&walked);
        self.follow_configuration();
    }

    /// Linearizable reads ask a quorum of the configuration the walk reached; one that crossed
    /// a stop-sign asks again in the new one (docs/reconfiguration.md, rule 7).
    fn follow_configuration(&mut self) {
        if self.cfg.follow(self.learner.state(), &mut self.placed) {
            self.reads.reconfigured();
        }
    }

    fn settle(&mut self) {
        self.walk();
        self.behind_since = match (self.lag_slots(), self.behind_since) {
            (0, _) => None,
            (_, Some(since)) => Some(since),
            (_, None) => Some(self.tick),
        };
        self.reads.poll(
            self.learner.fold(),
            &self.log,
            &self.tunables,
            &mut self.effects.ready.reads,
            &mut self.effects.ready.fetches,
        );
    }
}
