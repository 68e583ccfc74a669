//! The journals hosted here: placement, installation at boot, and protocol dispatch.

use paros_core::{Assignment, Ballot, JournalConfig, JournalKey, Life, NodeId, Replica, Voter};

use super::{Host, Hosted, Owed};
use crate::ports::{Envelope, LogStore, Placement};
use crate::rpc::NodeAnswer;

/// Why a journal was not placed here. Nothing changed.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum PlaceError {
    #[error("journal {0:?}: invalid configuration: {1}")]
    Invalid(JournalKey, paros_core::config::MembershipError),
    #[error("journal {0:?} does not name this machine {1:?} as a voter or learner")]
    NotAMember(JournalKey, NodeId),
    #[error("journal {0:?} is already placed here with another configuration")]
    Reconfigure(JournalKey),
}

impl<S: LogStore> Host<S> {
    /// The number of journals hosted here.
    #[must_use]
    pub fn journal_count(&self) -> usize {
        self.journals.len()
    }

    /// The number of journals that currently need ticks.
    #[must_use]
    pub fn awake_count(&self) -> usize {
        self.round.awake.len()
    }

    /// The voter of `key`, if this machine votes in it.
    #[must_use]
    pub fn voter(&self, key: &JournalKey) -> Option<&Voter> {
        match self.journals.get(key) {
            Some(Hosted::Voter(v)) => Some(v),
            _ => None,
        }
    }

    /// The replica of `key`, if this machine is one of its learners.
    #[must_use]
    pub fn replica(&self, key: &JournalKey) -> Option<&Replica> {
        match self.journals.get(key) {
            Some(Hosted::Replica(r)) => Some(r),
            _ => None,
        }
    }

    /// Where this machine's replicas stand (DESIGN §7): how many journals are still
    /// bootstrapping (a journal booted dormant and not yet run counts here), catching up or
    /// serving, and how far the furthest behind lags. A machine is ready to serve once none
    /// bootstraps or catches up.
    #[must_use]
    pub fn replica_states(&self) -> ReplicaStates {
        let mut states = ReplicaStates::default();
        for (key, j) in &self.journals {
            if let Some(heard) = self.feed_heard.get(key) {
                let age = (self.stats.ticks - heard).saturating_mul(self.tick_ms());
                states.feed_age_ms_max = states.feed_age_ms_max.max(age);
            }
            match j {
                Hosted::Replica(r) => {
                    match r.serving_state() {
                        paros_core::ReplicaState::Bootstrapping => states.bootstrapping += 1,
                        paros_core::ReplicaState::CatchingUp { .. } => states.catching_up += 1,
                        paros_core::ReplicaState::Serving => states.serving += 1,
                    }
                    let (slots, ms) = (r.lag_slots(), r.behind_ticks().saturating_mul(self.tick_ms()));
                    states.count_lag(*key, slots, ms, self.lag_top);
                }
                // Booted dormant: not run since the machine started. Any other dormant replica
                // went to sleep caught up, or was placed asleep and never asked anything (its
                // gate closes when it wakes, see `wake`).
                Hosted::Dormant(c) if !c.voters.contains(&self.me) => {
                    if self.dormancy.boot_wakes.contains(key) {
                        states.bootstrapping += 1;
                    } else {
                        states.serving += 1;
                    }
                    states.count_lag(*key, 0, 0, self.lag_top);
                }
                Hosted::Voter(_) | Hosted::Dormant(_) => {}
            }
        }
        states
    }

    /// How many of the furthest behind replica journals [`ReplicaStates::top`] names (at most
    /// [`LAG_TOP_MAX`]; default [`LAG_TOP_DEFAULT`]).
    pub fn set_lag_top(&mut self, n: usize) {
        self.lag_top = n.min(LAG_TOP_MAX);
    }

    /// Every journal hosted here, with its configuration.
    #[must_use]
    pub fn journal_configs(&self) -> std::collections::BTreeMap<JournalKey, JournalConfig> {
        self.journals.iter().map(|(k, j)| (*k, j.placed().clone())).collect()
    }

    /// The configuration a journal hosted here (dormant or not) was placed with: its founding
    /// one, whatever voters its log has decided since ([`Voter::config`] has those).
    #[must_use]
    pub fn journal_config(&self, key: &JournalKey) -> Option<&JournalConfig> {
        self.journals.get(key).map(Hosted::placed)
    }

    /// Every journal key hosted here.
    pub fn journal_keys(&self) -> impl Iterator<Item = &JournalKey> {
        self.journals.keys()
    }

    fn journal_seed(&self, key: &JournalKey) -> u64 {
        self.seed ^ key.tenant.0.rotate_left(17) ^ key.journal.0.rotate_left(41) ^ self.me.0
    }

    /// Subscribes this machine to a replica tier's feed: journals whose learners name `feed`
    /// may be placed here, as replicas. (The bus delivers the feed's messages; this only
    /// decides what the host accepts.)
    pub fn join_feed(&mut self, feed: NodeId) {
        self.feeds.insert(feed);
    }

    /// Whether learner address `learner` is this machine or a feed it subscribes to.
    fn is_fed(&self, learner: NodeId) -> bool {
        learner == self.me || self.feeds.contains(&learner)
    }

    /// Whether this machine hosts a journal placed with `config` as a voter: when the config
    /// names it a voter, and always on a node ([`Host::boot_node`]) — a node placed with a
    /// configuration that does not name it holds a seat the journal's log is moving to it: it
    /// hosts the journal as acceptor and learner and votes once its walk applies the
    /// `Reconfigure` that names it (docs/reconfiguration.md, rule 5).
    fn hosts_as_voter(&self, config: &JournalConfig) -> bool {
        self.node || config.voters.contains(&self.me)
    }

    fn note_peers(&mut self, config: &JournalConfig) {
        self.liveness.note(config, self.me, self.stats.ticks);
    }

    /// Hosts a journal dormant: its state stays in the store until its first input.
    pub(super) fn install_dormant(&mut self, key: JournalKey, config: JournalConfig) {
        self.note_peers(&config);
        if !self.hosts_as_voter(&config) {
            self.feed_heard.entry(key).or_insert(self.stats.ticks);
        }
        let config = self.dormancy.configs.share(config);
        self.journals.insert(key, Hosted::Dormant(config));
        self.dormancy.count += 1;
    }

    /// Builds a journal here — placed, booted or woken — in a new life (see [`Life`]). A replica
    /// starts `serving` only when woken from a sleep it went to in this boot (see
    /// [`Replica::recover`]).
    pub(super) fn install(
        &mut self,
        key: JournalKey,
        config: JournalConfig,
        durable: paros_core::Durable,
        serving: bool,
    ) {
        let seed = self.journal_seed(&key);
        let life = Life::mint(self.seed, self.lives);
        self.lives += 1;
        self.dormancy.woken.remove(&key);
        self.note_peers(&config);
        let hosted = if self.hosts_as_voter(&config) {
            Hosted::Voter(Box::new(Voter::recover(self.me, config, self.tunables, seed, life, durable)))
        } else {
            self.feed_heard.entry(key).or_insert(self.stats.ticks);
            Hosted::Replica(Box::new(Replica::recover(self.me, config, self.tunables, life, durable, serving)))
        };
        self.journals.insert(key, hosted);
        self.round.dirty.insert(key);
        self.round.awake.insert(key);
    }

    /// Places a journal here with its configuration. It runs at once; its configuration
    /// rides the next round's batch and sync (no sync of its own), and nothing it says that
    /// needs a durable sender leaves before that sync. Placing a journal that is already here
    /// with the same configuration changes nothing.
    ///
    /// # Errors
    /// [`PlaceError`] for a configuration that is invalid, that does not name a machine that
    /// is not a node nor is fed at this machine's tiers, or
    /// that differs from the one the journal was placed with here (a journal is placed with its
    /// founding configuration for life; its log, not its placement, moves its voters).
    pub fn place(&mut self, key: JournalKey, config: JournalConfig) -> Result<(), PlaceError> {
        self.assign(Assignment::founding(key, config), false)
    }

    /// [`Host::place`], with the new journal dormant: it costs a map entry and its config row
    /// until its first input (a call elects its first leader then), instead of an election
    /// now. Placing a hundred thousand journals then costs no protocol work at all.
    ///
    /// # Errors
    /// As [`Host::place`].
    pub fn place_asleep(&mut self, key: JournalKey, config: JournalConfig) -> Result<(), PlaceError> {
        self.assign(Assignment::founding(key, config), true)
    }

    /// Places a journal as the registry assigns it: [`Host::place`] (or, `asleep`,
    /// [`Host::place_asleep`]) of `assignment.config`, where a journal not here yet starts
    /// promised to the floor of `assignment.epoch` (recorded with its configuration, in the
    /// same atomic change): a seat that begins after the journal moved answers no ballot of
    /// an earlier configuration (docs/reconfiguration.md, rule 13). Such a journal is placed
    /// awake, never dormant: its floor is in memory from the first message on. A journal
    /// already here keeps its own promise: the epoch is not compared.
    ///
    /// # Errors
    /// As [`Host::place`].
    pub fn assign(&mut self, assignment: Assignment, asleep: bool) -> Result<(), PlaceError> {
        let promise = assignment.promise();
        let Assignment { key, config, .. } = assignment;
        if let Some(j) = self.journals.get(&key) {
            return if *j.placed() == config { Ok(()) } else { Err(PlaceError::Reconfigure(key)) };
        }
        config.validate().map_err(|e| PlaceError::Invalid(key, e))?;
        let fed_here = config.learners.iter().any(|l| self.is_fed(*l));
        if !(self.hosts_as_voter(&config) || fed_here) {
            return Err(PlaceError::NotAMember(key, self.me));
        }
        self.round.placements.push(Placement::Put(key, config.clone(), promise));
        if asleep && promise == Ballot::ZERO {
            self.install_dormant(key, config);
        } else {
            self.install(key, config, paros_core::Durable { promise, ..paros_core::Durable::default() }, false);
        }
        Ok(())
    }

    /// Removes `key` as a directory at configuration `epoch` asks (rule 13 of
    /// docs/reconfiguration.md), unless this machine's copy promised in a later epoch: then the
    /// directory is behind the journal's own log here — a lagging follower removing a journal
    /// whose log has since named this machine a voter again — and removing it would forget
    /// that promise, while the seat given back would begin at an epoch below it. Refused, the
    /// journal stays (`None`); the follower asks again once its directory has moved. A dormant
    /// journal's promise is read from the store; a read that fails refuses too.
    pub fn remove_at(&mut self, key: &JournalKey, epoch: u64) -> Option<Vec<(Owed, NodeAnswer)>> {
        let Some(hosted) = self.journals.get(key) else { return Some(Vec::new()) };
        let promised = match hosted {
            Hosted::Voter(v) => Some(v.promised()),
            Hosted::Replica(_) => Some(Ballot::ZERO),
            Hosted::Dormant(_) => self.reader.0.load_journal(key).ok().map(|d| d.map_or(Ballot::ZERO, |d| d.promise)),
        };
        if promised.is_none_or(|p| p.epoch() > epoch) {
            return None;
        }
        Some(self.remove(key))
    }

    /// Removes a journal from this machine: it stops at once (its pending calls and reads,
    /// those held for its wake too, are answered `UnknownJournal`, returned here for the
    /// caller to deliver), and the removal of its data rides the next round. Removing a
    /// journal not hosted here does nothing.
    pub fn remove(&mut self, key: &JournalKey) -> Vec<(Owed, NodeAnswer)> {
        match self.journals.remove(key) {
            None => return Vec::new(),
            Some(Hosted::Dormant(_)) => self.dormancy.count -= 1,
            Some(_) => {}
        }
        self.dormancy.quiet_at.remove(key);
        self.dormancy.woken.remove(key);
        self.dormancy.slept_serving.remove(key);
        self.dormancy.voter_marks.remove(key);
        self.feed_heard.remove(key);
        self.dormancy.checking_in.remove(key);
        self.round.forget(key);
        self.round.placements.push(Placement::Remove(*key));
        // Calls and reads held while it was being woken are owed too, and counted there.
        self.forget_held(key);
        self.owing.forget(key).into_iter().map(|o| (o, NodeAnswer::UnknownJournal)).collect()
    }

    /// Asks this machine's voter of `key` to campaign now (first leader, no timeout wait).
    pub fn campaign(&mut self, key: &JournalKey) {
        if let Some(Hosted::Dormant(_)) = self.journals.get(key) {
            self.dormancy.stash.push(super::dormancy::Stashed::Campaign(*key));
            return;
        }
        if let Some(j @ Hosted::Voter(_)) = self.journals.get_mut(key) {
            j.campaign(&mut self.stats);
            self.dormancy.checking_in.remove(key);
            self.round.stepped(*key, false);
        }
    }

    /// Protocol messages from a peer. A message for a journal not hosted here is dropped and
    /// counted; it never creates one.
    pub fn deliver(&mut self, from: NodeId, envelopes: Vec<Envelope>) {
        self.liveness.heard(from, self.stats.ticks);
        for e in envelopes {
            let Some(j) = self.journals.get_mut(&e.journal) else {
                self.stats.unknown_journal_drops += 1;
                continue;
            };
            // The variant first: most envelopes (a voter's whole traffic) are neither.
            if matches!(e.message, paros_core::Message::Chosen { .. } | paros_core::Message::FeedMark { .. })
                && let Some(heard) = self.feed_heard.get_mut(&e.journal)
            {
                *heard = self.stats.ticks;
            }
            if let Some(answered) = e.message.answers_life()
                && j.life() != Some(answered)
            {
                // An answer to a request of an earlier life of this journal here (before a
                // crash, a sleep or a removal): it counts for nothing, and does not wake a
                // dormant journal (which has asked nothing).
                let dormant = j.life().is_none();
                let after_wake = !dormant && self.dormancy.woken.contains(&e.journal);
                if dormant {
                    self.stats.stale_answers_dormant += 1;
                } else {
                    self.stats.stale_answers += 1;
                    self.stats.stale_answers_after_wake += u64::from(after_wake);
                }
                self.note_life(e.journal, super::LifeEvent::StaleAnswer { from, dormant, after_wake });
                continue;
            }
            if let Hosted::Dormant(_) = j {
                if let paros_core::Message::FeedMark { chosen_up_to } = e.message
                    && self.dormancy.slept_serving.get(&e.journal).is_some_and(|at| chosen_up_to <= at.chosen_up_to)
                {
                    // A repeated mark of what this sleeping replica has applied: no news.
                    self.stats.feed_marks_asleep += 1;
                    continue;
                }
                self.dormancy.stash.push(super::dormancy::Stashed::Deliver(from, e));
                continue;
            }
            // Checked only while some journal is here for a check-in: every Accept passes here.
            if !self.dormancy.checking_in.is_empty()
                && matches!(&e.message, paros_core::Message::Accept { entries, .. } if !entries.is_empty())
            {
                // A leader writes through this journal: it is no longer here only for a check-in.
                self.dormancy.checking_in.remove(&e.journal);
            }
            j.step(from, e.message, &mut self.stats);
            self.round.stepped(e.journal, j.is_quiet());
        }
    }
}

/// How many of a machine's replica journals stand where (see [`Host::replica_states`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct ReplicaStates {
    pub bootstrapping: u64,
    pub catching_up: u64,
    pub serving: u64,
    /// Awake replica journals that know of chosen slots they have not applied, and the most
    /// such slots one of them has.
    pub behind: u64,
    pub lag_slots_max: u64,
    /// How long the furthest behind has known of slots it has not applied, in ms (whole ticks).
    pub lag_ms_max: u64,
    /// The oldest watermark among the replica journals here (dormant ones too): ms since its
    /// tier's feed last told one of them anything (whole ticks; a journal placed here starts
    /// its clock when placed).
    pub feed_age_ms_max: u64,
    /// Every replica journal here by its lag in slots: `lag_slots_journals[i]` counts those
    /// lagging at most [`LAG_SLOTS_BOUNDS`]`[i]` slots and more than the bound before it; the
    /// last counts those past every bound. A dormant journal lags 0.
    pub lag_slots_journals: [u64; LAG_BUCKETS],
    /// The same by lag in ms, over [`LAG_MS_BOUNDS`].
    pub lag_ms_journals: [u64; LAG_BUCKETS],
    /// The journals furthest behind, most slots first (ties: longest behind, then key): at
    /// most [`Host::set_lag_top`] of them, in the first `top_len` places.
    pub top: [Lagging; LAG_TOP_MAX],
    pub top_len: usize,
}

/// The upper bounds (inclusive) of [`ReplicaStates::lag_slots_journals`]' buckets.
pub const LAG_SLOTS_BOUNDS: [u64; LAG_BUCKETS - 1] = [0, 1, 16, 256, 4_096, 65_536];
/// The upper bounds (inclusive) of [`ReplicaStates::lag_ms_journals`]' buckets.
pub const LAG_MS_BOUNDS: [u64; LAG_BUCKETS - 1] = [0, 10, 100, 1_000, 10_000, 60_000];
/// Buckets in each lag histogram: one per bound and one past them all.
pub const LAG_BUCKETS: usize = 7;
/// The most journals [`ReplicaStates::top`] can name (a fixed ceiling keeps the counters `Copy`).
pub const LAG_TOP_MAX: usize = 8;
/// The journals [`ReplicaStates::top`] names unless [`Host::set_lag_top`] says otherwise.
pub const LAG_TOP_DEFAULT: usize = 5;

/// One replica journal's lag: chosen slots it knows of and has not applied, and for how long
/// (ms, whole ticks).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Lagging {
    pub journal: JournalKey,
    pub slots: u64,
    pub ms: u64,
}

fn bucket(bounds: &[u64], value: u64) -> usize {
    bounds.iter().position(|b| value <= *b).unwrap_or(bounds.len())
}

impl ReplicaStates {
    /// Counts one replica journal's lag into the maxima, the histograms and the top `top`.
    fn count_lag(&mut self, journal: JournalKey, slots: u64, ms: u64, top: usize) {
        self.lag_slots_journals[bucket(&LAG_SLOTS_BOUNDS, slots)] += 1;
        self.lag_ms_journals[bucket(&LAG_MS_BOUNDS, ms)] += 1;
        if slots == 0 {
            return;
        }
        self.behind += 1;
        self.lag_slots_max = self.lag_slots_max.max(slots);
        self.lag_ms_max = self.lag_ms_max.max(ms);
        let this = Lagging { journal, slots, ms };
        let rank = |l: &Lagging| (std::cmp::Reverse(l.slots), std::cmp::Reverse(l.ms), l.journal);
        let at = self.top[..self.top_len].partition_point(|l| rank(l) < rank(&this));
        let top = top.min(LAG_TOP_MAX);
        if at >= top {
            return;
        }
        let end = (self.top_len + 1).min(top);
        self.top.copy_within(at..end - 1, at + 1);
        self.top[at] = this;
        self.top_len = end;
    }

    /// The journals furthest behind, most first.
    #[must_use]
    pub fn top(&self) -> &[Lagging] {
        &self.top[..self.top_len]
    }

    /// Every replica journal here has caught up once since the machine started.
    #[must_use]
    pub fn is_serving(&self) -> bool {
        self.bootstrapping == 0 && self.catching_up == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(j: u64) -> JournalKey {
        JournalKey { tenant: paros_core::TenantId(1), journal: paros_core::JournalId(j) }
    }

    #[test]
    fn lags_fill_the_histograms_and_the_top_keeps_the_furthest_behind_in_order() {
        let mut s = ReplicaStates::default();
        for (j, slots, ms) in [(1, 0, 0), (2, 5, 100), (3, 300, 20), (4, 5, 300), (5, 70_000, 90_000), (6, 1, 10)] {
            s.count_lag(key(j), slots, ms, 3);
        }
        assert_eq!(s.lag_slots_journals, [1, 1, 2, 0, 1, 0, 1]);
        assert_eq!(s.lag_ms_journals, [1, 1, 2, 1, 0, 0, 1]);
        assert_eq!((s.behind, s.lag_slots_max, s.lag_ms_max), (5, 70_000, 90_000));
        let top: Vec<_> = s.top().iter().map(|l| (l.journal.journal.0, l.slots, l.ms)).collect();
        assert_eq!(top, [(5, 70_000, 90_000), (3, 300, 20), (4, 5, 300)], "ties go to the longest behind");
    }

    #[test]
    fn the_top_is_never_longer_than_asked_nor_than_its_ceiling() {
        let mut none = ReplicaStates::default();
        none.count_lag(key(1), 9, 9, 0);
        assert!(none.top().is_empty());
        let mut all = ReplicaStates::default();
        for j in 0..20 {
            all.count_lag(key(j), j + 1, 0, 100);
        }
        assert_eq!(all.top().len(), LAG_TOP_MAX);
        assert_eq!(all.top()[0].slots, 20);
        assert_eq!(all.top()[LAG_TOP_MAX - 1].slots, 20 - LAG_TOP_MAX as u64 + 1);
    }
}
