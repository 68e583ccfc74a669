//! Which replica a read goes to.

use std::collections::BTreeMap;

use paros_core::NodeId;

use crate::State;

/// The router's bounds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RouterConfig {
    /// A replica that knows of more chosen slots than this it has not applied is skipped.
    pub lag_slots_max: u64,
    /// How long a replica that answered `Unserved` (or did not answer) is skipped, in ms. Short:
    /// `Unserved` is often one journal's (a gate that just closed on a new placement), and a
    /// replica that is gone or behind leaves the ranking by the next [`ReadRouter::update`].
    pub skip_ms: u64,
    /// Replicas one read tries at most before the voters.
    pub replicas_per_read_max: usize,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig { lag_slots_max: 1_024, skip_ms: 100, replicas_per_read_max: 2 }
    }
}

/// One replica machine as last seen: its tier's feed, its state and how far it lags.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ReplicaSeen {
    pub id: NodeId,
    pub feed: NodeId,
    pub state: State,
    /// The most chosen slots one of its journals knows of and has not applied.
    pub lag_slots: u64,
}

/// Picks, per read, the replicas of the journal's tier to ask first: serving, least behind,
/// not skipped; replicas equally behind take turns. Sans-IO: the caller feeds it what it saw
/// ([`ReadRouter::update`], [`ReadRouter::unserved`]) and the time.
#[derive(Clone, Debug)]
pub struct ReadRouter {
    config: RouterConfig,
    replicas: Vec<ReplicaSeen>,
    /// Replicas skipped until the time given (ms).
    skipped: BTreeMap<NodeId, u64>,
    turn: usize,
}

impl ReadRouter {
    #[must_use]
    pub fn new(config: RouterConfig) -> ReadRouter {
        ReadRouter { config, replicas: Vec::new(), skipped: BTreeMap::new(), turn: 0 }
    }

    /// What the replicas look like now (replaces what was seen before).
    pub fn update(&mut self, seen: Vec<ReplicaSeen>) {
        self.replicas = seen;
    }

    /// Every replica as last seen.
    #[must_use]
    pub fn replicas(&self) -> &[ReplicaSeen] {
        &self.replicas
    }

    /// `replica` answered `Unserved` (or nothing) at `now_ms`: it is skipped for `skip_ms`.
    pub fn unserved(&mut self, replica: NodeId, now_ms: u64) {
        if self.replicas.iter().any(|r| r.id == replica) {
            self.skipped.insert(replica, now_ms.saturating_add(self.config.skip_ms));
        }
    }

    /// The replicas to ask for a read of a journal fed at `feed` (`None`: on no tier), best
    /// first, at most `replicas_per_read_max`; the caller asks the voters after them.
    pub fn ranked(&mut self, feed: Option<NodeId>, now_ms: u64) -> Vec<NodeId> {
        let Some(feed) = feed else { return Vec::new() };
        self.skipped.retain(|_, until| *until > now_ms);
        let mut fit: Vec<&ReplicaSeen> = self
            .replicas
            .iter()
            .filter(|r| {
                r.feed == feed
                    && r.state == State::Serving
                    && r.lag_slots <= self.config.lag_slots_max
                    && !self.skipped.contains_key(&r.id)
            })
            .collect();
        if fit.is_empty() {
            return Vec::new();
        }
        // Equally behind replicas take turns: rotate, then a stable sort by lag keeps the turn.
        self.turn = self.turn.wrapping_add(1);
        let n = fit.len();
        fit.rotate_left(self.turn % n);
        fit.sort_by_key(|r| r.lag_slots);
        fit.into_iter().take(self.config.replicas_per_read_max).map(|r| r.id).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FEED: NodeId = NodeId(0xfeed);
    const OTHER: NodeId = NodeId(0xf00d);

    fn seen(id: u64, feed: NodeId, state: State, lag_slots: u64) -> ReplicaSeen {
        ReplicaSeen { id: NodeId(id), feed, state, lag_slots }
    }

    fn router() -> ReadRouter {
        let mut r = ReadRouter::new(RouterConfig { lag_slots_max: 10, skip_ms: 100, replicas_per_read_max: 3 });
        r.update(vec![
            seen(1, FEED, State::Serving, 4),
            seen(2, FEED, State::Serving, 0),
            seen(3, FEED, State::CatchingUp, 0),
            seen(4, OTHER, State::Serving, 0),
            seen(5, FEED, State::Serving, 11),
            seen(6, FEED, State::Bootstrapping, 0),
        ]);
        r
    }

    #[test]
    fn only_serving_replicas_of_the_journals_tier_within_the_lag_bound_least_behind_first() {
        let mut r = router();
        assert_eq!(r.ranked(Some(FEED), 0), vec![NodeId(2), NodeId(1)]);
        assert_eq!(r.ranked(None, 0), Vec::<NodeId>::new(), "a journal on no tier reads from its voters");
        assert_eq!(r.ranked(Some(NodeId(0xdead)), 0), Vec::<NodeId>::new(), "a tier without replicas");
    }

    #[test]
    fn a_replica_that_answered_unserved_is_skipped_for_a_while() {
        let mut r = router();
        r.unserved(NodeId(2), 1_000);
        assert_eq!(r.ranked(Some(FEED), 1_050), vec![NodeId(1)], "skipped");
        assert_eq!(r.ranked(Some(FEED), 1_100), vec![NodeId(2), NodeId(1)], "and back after skip_ms");
        r.unserved(NodeId(99), 1_100);
        assert_eq!(r.ranked(Some(FEED), 1_100).len(), 2, "an unknown replica changes nothing");
    }

    #[test]
    fn replicas_equally_behind_take_turns_and_a_read_tries_a_bounded_number() {
        let mut r = ReadRouter::new(RouterConfig { replicas_per_read_max: 1, ..RouterConfig::default() });
        r.update((1..=3).map(|i| seen(i, FEED, State::Serving, 0)).collect());
        let firsts: std::collections::BTreeSet<NodeId> = (0..6).map(|_| r.ranked(Some(FEED), 0)[0]).collect();
        assert_eq!(firsts.len(), 3, "every replica gets turns: {firsts:?}");
        assert_eq!(r.ranked(Some(FEED), 0).len(), 1, "replicas_per_read_max");
    }
}
