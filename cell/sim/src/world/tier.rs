//! The replica tier in the world: a replica that joins during the run, one removed from the
//! tier during the run, and the readers' read router.
//!
//! A replica joins as an operator adds one: a machine never seen before boots on an empty disk,
//! joined to the tier's feed, and is registered on the tier (`RegisterReplica`, scripted at the
//! same moment); its registry follower places the tier's journals; it bootstraps, catches up
//! and serves. A replica leaves as an operator removes one: it is retired (`SetStanding` to
//! `Retired`); once its follower folds that, it removes every journal of the tier
//! (paros-registry's `changes_for`) and the world takes it off the tier's feed.
//!
//! The readers rank read servers as the gateway and the in-cell service do: one paros-replica
//! `ReadRouter`, told every [`SEEN_EVERY_NS`] how the replicas registered on the tier stand (from
//! their hosts' counters, as the embedded cell tells its router), skipping a replica that
//! left a read unserved; paros-client's `ReadServers::replicas_first` puts the voters after the
//! ranked replicas and `ReadServers::pick` chooses the server of each try.

use std::collections::{BTreeMap, BTreeSet};

use paros_client::ReadServers;
use paros_core::{JournalConfig, JournalKey, NodeId, ReadAnswer};
use paros_registry::RequestId;
use paros_replica::{ReadRouter, ReplicaSeen, RouterConfig, State};

use super::{MS, World};
use crate::check::{Claim, Claims};
use crate::host::{Host, MachineRole};
use crate::registry::Plan;

/// How often the router is told how the replicas stand (the embedded cell's `SEEN_EVERY`).
const SEEN_EVERY_NS: u64 = 20 * MS;

/// The tier's part of the world.
#[derive(Debug)]
pub(super) struct TierWorld {
    /// The tier's feed (`None`: the world has no tier).
    feed: Option<NodeId>,
    router: ReadRouter,
    config: RouterConfig,
    /// When the router was last told how the replicas stand, and what.
    told_at: Option<u64>,
    seen: Vec<ReplicaSeen>,
    /// Replicas retired (as the operator was told) when the router was last told.
    retired_then: BTreeSet<NodeId>,
    /// Replicas the router was told left a read unserved, and until when (ms) it skips them.
    skipped: BTreeMap<NodeId, u64>,
    /// Reads ranked so far: the voters after the replicas take turns by it.
    turn: u64,
    /// The replica machine that joins during the run, and when.
    pub joiner: Option<(usize, u64)>,
    /// The replica machine retired during the run, and its retirement's request.
    retiree: Option<(usize, RequestId)>,
    /// Each replica machine's registration request.
    registrations: BTreeMap<usize, RequestId>,
    /// Replica machines that left the tier: their follower applied a directory retiring them.
    left: BTreeSet<usize>,
    /// When a replica that left the tier had dropped each journal of it for good (no longer
    /// hosted, no longer placed on its disk).
    dropped: BTreeMap<(NodeId, JournalKey), u64>,
    /// Replicas that served a reader a page of a journal.
    served: BTreeSet<(NodeId, JournalKey)>,
    /// Removals reached already.
    reached: BTreeSet<(NodeId, JournalKey)>,
}

impl TierWorld {
    pub fn new(
        plan: &Plan,
        tiered: bool,
        joiner: Option<(NodeId, u64)>,
        leaver: Option<(NodeId, u64)>,
        index: &BTreeMap<NodeId, usize>,
    ) -> TierWorld {
        let config = RouterConfig::default();
        let machine = |id: &NodeId| index.get(id).copied().expect("a replica of the world");
        TierWorld {
            feed: tiered.then_some(plan.feed),
            router: ReadRouter::new(config),
            config,
            told_at: None,
            seen: Vec::new(),
            retired_then: BTreeSet::new(),
            skipped: BTreeMap::new(),
            turn: 0,
            joiner: joiner.map(|(id, at)| (machine(&id), at)),
            retiree: leaver.and(plan.retirement).map(|(id, request)| (machine(&id), request)),
            registrations: plan.registrations.iter().map(|(id, request)| (machine(id), *request)).collect(),
            left: BTreeSet::new(),
            dropped: BTreeMap::new(),
            served: BTreeSet::new(),
            reached: BTreeSet::new(),
        }
    }

    /// The servers a reader of a journal configured `config` asks for its next read, as
    /// paros-client's in-cell service gives them: the replicas the router ranks, then the
    /// voters from one in turn. The ranking is audited against what the router was told.
    pub fn read_servers(&mut self, claims: &mut Claims, now: u64, config: &JournalConfig) -> ReadServers {
        let now_ms = now / MS;
        let feed = config.learners.first().copied();
        let ranked = self.router.ranked(feed, now_ms);
        self.audit_ranking(claims, feed, now_ms, &ranked);
        self.turn += 1;
        ReadServers::replicas_first(ranked, &config.voters, self.turn)
    }

    /// The ranking must be exactly what the router was told allows: the replicas of the
    /// journal's tier seen serving, within the lag bound, not skipped and not retired, least
    /// behind first, as many as a read may try.
    fn audit_ranking(&self, claims: &mut Claims, feed: Option<NodeId>, now_ms: u64, ranked: &[NodeId]) {
        let eligible: Vec<&ReplicaSeen> = self
            .seen
            .iter()
            .filter(|r| {
                Some(r.feed) == feed
                    && r.state == State::Serving
                    && r.lag_slots <= self.config.lag_slots_max
                    && self.skipped.get(&r.id).is_none_or(|until| *until <= now_ms)
                    && !self.retired_then.contains(&r.id)
            })
            .collect();
        let lags: Option<Vec<u64>> =
            ranked.iter().map(|id| eligible.iter().find(|r| r.id == *id).map(|r| r.lag_slots)).collect();
        let distinct = ranked.iter().collect::<BTreeSet<_>>().len() == ranked.len();
        let holds = lags.is_some_and(|lags| {
            let worst_ranked = lags.last().copied().unwrap_or(0);
            lags.windows(2).all(|w| w[0] <= w[1])
                && ranked.len() == eligible.len().min(self.config.replicas_per_read_max)
                && eligible.iter().filter(|r| !ranked.contains(&r.id)).all(|r| r.lag_slots >= worst_ranked)
        }) && distinct;
        claims.check(Claim::ReadRouted, holds, || {
            format!(
                "at {now_ms} ms the router ranked {ranked:?} for a journal fed at {feed:?}; it was told {:?} \
                 (skipped until {:?}, retired {:?})",
                self.seen, self.skipped, self.retired_then
            )
        });
    }

    /// Replica `replica` left a reader's read unserved (or unanswered) at `now`: the router skips
    /// it for a while, as the in-cell service tells it.
    pub fn unserved(&mut self, replica: NodeId, now: u64) {
        let now_ms = now / MS;
        self.router.unserved(replica, now_ms);
        if self.seen.iter().any(|r| r.id == replica) {
            self.skipped.insert(replica, now_ms + self.config.skip_ms);
        }
    }
}

impl<H: Host> World<H> {
    /// Replica machine `m` joins the cell: it boots for the first time, on an empty disk (its
    /// registration on the tier is scripted for this moment).
    pub(super) fn on_join(&mut self, m: usize) {
        if self.machines[m].present {
            return;
        }
        self.machines[m].present = true;
        let id = self.machines[m].spec.id;
        self.trace.event(self.now, "join", &[id.0], || format!("{id:?} joins the tier"));
        self.boot(m);
    }

    /// Whether replica machine `m` is on the tier as the operator was told: its registration
    /// accepted, its retirement (if any) not.
    fn on_tier(&self, m: usize) -> bool {
        let script = &self.registry.script;
        self.tier.registrations.get(&m).is_some_and(|id| script.accepted(*id)) && !self.retired(m)
    }

    /// Whether replica machine `m`'s retirement was accepted.
    fn retired(&self, m: usize) -> bool {
        self.tier.retiree.is_some_and(|(r, id)| r == m && self.registry.script.accepted(id))
    }

    /// Tells the router how the replicas on the tier stand, when it is due: each one up, its
    /// state from its journals' (bootstrapping until its follower placed its tier's journals
    /// once), its lag the most chosen slots one of its journals has not applied.
    pub(super) fn tell_router(&mut self) {
        let Some(feed) = self.tier.feed else { return };
        if self.tier.told_at.is_some_and(|t| self.now < t + SEEN_EVERY_NS) {
            return;
        }
        let seen: Vec<ReplicaSeen> = (0..self.machines.len())
            .filter(|m| self.machines[*m].spec.role == MachineRole::Replica && self.on_tier(*m))
            .filter_map(|m| {
                let host = self.machines[m].host.as_ref()?;
                let journals = host.replica_states();
                let state = if self.registry.has_applied(m) { State::of(&journals) } else { State::Bootstrapping };
                Some(ReplicaSeen { id: self.machines[m].spec.id, feed, state, lag_slots: journals.lag_slots_max })
            })
            .collect();
        self.tier.retired_then = (0..self.machines.len())
            .filter(|m| self.machines[*m].spec.role == MachineRole::Replica && self.retired(*m))
            .map(|m| self.machines[m].spec.id)
            .collect();
        self.tier.router.update(seen.clone());
        self.tier.seen = seen;
        self.tier.told_at = Some(self.now);
    }

    /// `m`'s registry follower published a directory in which `m` is `retired`: a retired replica
    /// leaves the tier: off the feed, expected to host none of the tier's journals.
    pub(super) fn tier_published(&mut self, m: usize, retired: bool) {
        if !retired || self.machines[m].spec.role != MachineRole::Replica || !self.tier.left.insert(m) {
            return;
        }
        let registry = self.registry.plan.key;
        let mach = &mut self.machines[m];
        mach.spec.feeds.clear();
        mach.spec.placements.retain(|p| p.key == registry);
        let id = mach.spec.id;
        self.trace.event(self.now, "leave", &[id.0], || format!("{id:?} leaves the tier"));
        self.tier_observe_drops(m);
    }

    /// The workload journals on the tier.
    fn tier_journals(&self) -> impl Iterator<Item = JournalKey> + '_ {
        let registry = self.registry.plan.key;
        self.journals.iter().filter(move |(k, c)| *k != registry && !c.learners.is_empty()).map(|(k, _)| *k)
    }

    /// Notes which journals of the tier replica `m`, if it left the tier, no longer hosts and no
    /// longer holds placed on its disk: dropped for good from now (a reboot would not host them).
    pub(super) fn tier_observe_drops(&mut self, m: usize) {
        if !self.tier.left.contains(&m) {
            return;
        }
        let mach = &self.machines[m];
        let id = mach.spec.id;
        let gone: Vec<JournalKey> = self
            .tier_journals()
            .filter(|key| !self.tier.dropped.contains_key(&(id, *key)))
            .filter(|key| !mach.host.as_ref().is_some_and(|h| h.hosts(key)) && !mach.disk.is_placed(key))
            .collect();
        for key in gone {
            self.tier.dropped.insert((id, key), self.now);
            self.trace.event(self.now, "dropped", &[id.0, key.journal.0], || format!("{id:?} dropped {key:?}"));
        }
    }

    /// A read of `key` by client `c`, sent to `to` at `sent`, came back from `from` with `answer`
    /// (`None`: no answer): the router hears of an unserved reader's read to a replica; the
    /// tier's claims judge the rest.
    pub(super) fn tier_on_read(
        &mut self,
        c: usize,
        key: JournalKey,
        (to, sent): (NodeId, u64),
        from: Option<NodeId>,
        answer: Option<&ReadAnswer>,
    ) {
        let reader = matches!(self.clients[c].kind, super::ClientKind::Reader(_));
        let served = matches!(answer, Some(ReadAnswer::Page { .. } | ReadAnswer::Truncated(_)));
        let replica =
            |id: NodeId| self.index.get(&id).copied().filter(|m| self.machines[*m].spec.role == MachineRole::Replica);
        if reader && !served && replica(to).is_some() {
            self.tier.unserved(to, self.now);
        }
        // A read sent to a removed replica after it dropped the journal is never served.
        if let Some(at) = self.tier.dropped.get(&(to, key)).copied()
            && sent >= at
        {
            self.audit.claims.check(Claim::ReplicaLeaves, !served, || {
                format!("{to:?} served a read of {key:?} sent at {sent} ns, after it dropped the journal at {at} ns")
            });
        }
        let (Some(from), Some(ReadAnswer::Page { .. })) = (from, answer) else { return };
        if !reader {
            return;
        }
        if let Some(m) = replica(from) {
            self.tier.served.insert((from, key));
            self.audit.claims.reach(Claim::ReadRouted);
            if self.tier.joiner.is_some_and(|(j, _)| j == m) {
                self.audit.claims.reach(Claim::ReplicaJoins);
            }
        }
        // Readers a removed replica served before it left read on elsewhere.
        let fresh: Vec<(NodeId, JournalKey)> = self
            .tier
            .dropped
            .iter()
            .filter(|((r, k), at)| *k == key && *r != from && **at <= sent && self.tier.served.contains(&(*r, *k)))
            .map(|(rk, _)| *rk)
            .filter(|rk| !self.tier.reached.contains(rk))
            .collect();
        for rk in fresh {
            self.tier.reached.insert(rk);
            self.audit.claims.reach(Claim::ReplicaLeaves);
        }
    }

    /// The replica that joined during the run, and the one whose retirement was accepted.
    pub(super) fn tier_changed(&self) -> (Option<NodeId>, Option<NodeId>) {
        let joined = self.tier.joiner.filter(|(m, _)| self.machines[*m].present).map(|(m, _)| self.machines[m].spec.id);
        let retired = self.tier.retiree.filter(|(m, _)| self.retired(*m)).map(|(m, _)| self.machines[m].spec.id);
        (joined, retired)
    }

    /// The retired replica has dropped every journal of the tier, if its retirement was accepted.
    pub(super) fn removal_settled(&self) -> bool {
        let Some((m, _)) = self.tier.retiree.filter(|(m, _)| self.retired(*m)) else { return true };
        let id = self.machines[m].spec.id;
        self.tier_journals().all(|key| self.tier.dropped.contains_key(&(id, key)))
    }

    /// At the end of the run: the replica retired has dropped every journal of its tier, and the
    /// one that joined (and was not retired) hosts every one.
    pub(super) fn tier_finish(&mut self) {
        let keys: Vec<JournalKey> = self.tier_journals().collect();
        if let Some((m, _)) = self.tier.retiree.filter(|(m, _)| self.retired(*m)) {
            let id = self.machines[m].spec.id;
            for key in &keys {
                let dropped = self.tier.dropped.contains_key(&(id, *key));
                let left = self.tier.left.contains(&m);
                self.audit.claims.check(Claim::ReplicaLeaves, dropped, || {
                    format!("{id:?} was retired (left the tier: {left}) and still holds {key:?} at the end")
                });
            }
        }
        if let Some((m, _)) = self
            .tier
            .joiner
            .filter(|(m, _)| self.machines[*m].present && self.on_tier(*m) && !self.tier.left.contains(m))
        {
            let mach = &self.machines[m];
            let id = mach.spec.id;
            for key in &keys {
                let hosted = mach.host.as_ref().is_some_and(|h| h.hosts(key));
                self.audit.claims.check(Claim::ReplicaJoins, hosted, || {
                    format!("{id:?} joined the tier and does not host {key:?} at the end")
                });
            }
        }
    }
}
