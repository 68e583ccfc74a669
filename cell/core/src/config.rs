//! A journal's membership and the tunables every role reads. Every bound is named here.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ids::{Ballot, JournalKey, NodeId};
use crate::journal::{JournalState, Limits, WriterMode};

/// Who takes part in one journal.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct JournalConfig {
    pub mode: WriterMode,
    /// Acceptor + proposer + learner machines. A quorum is a strict majority of them.
    pub voters: Vec<NodeId>,
    /// Learner-only replicas: they receive chosen commands and never vote.
    pub learners: Vec<NodeId>,
}

/// The number of `voters` that make a quorum: a strict majority.
#[must_use]
pub fn quorum_of(voters: usize) -> usize {
    voters / 2 + 1
}

impl JournalConfig {
    /// The number of voters that make a quorum.
    #[must_use]
    pub fn quorum(&self) -> usize {
        quorum_of(self.voters.len())
    }

    /// Checks the membership is well formed: at least one voter, every member named once.
    ///
    /// # Errors
    /// The first rule broken.
    pub fn validate(&self) -> Result<(), MembershipError> {
        if self.voters.is_empty() {
            return Err(MembershipError::NoVoters);
        }
        let mut all: Vec<NodeId> = self.voters.iter().chain(&self.learners).copied().collect();
        all.sort();
        all.dedup();
        if all.len() != self.voters.len() + self.learners.len() {
            return Err(MembershipError::Repeated);
        }
        Ok(())
    }

    /// Takes the voters the journal's own log decided, once it decided any (its fold's state
    /// names them from the first `Reconfigure` on; docs/reconfiguration.md). Returns true when
    /// they changed. The first time they leave the configuration the journal was placed with,
    /// that one is kept in `placed`: the host compares placements against it, never against
    /// the live voters (every machine of a journal is placed with the same configuration, its
    /// founding one, for the journal's whole life).
    pub fn follow(&mut self, state: &JournalState, placed: &mut Option<Box<JournalConfig>>) -> bool {
        match state.voters {
            Some(voters) if self.voters.as_slice() != voters.as_slice() => {
                if placed.is_none() {
                    *placed = Some(Box::new(self.clone()));
                }
                self.voters = voters.as_slice().to_vec();
                true
            }
            _ => false,
        }
    }

    /// Panics unless the membership is well formed (see [`validate`](Self::validate)).
    pub fn assert_valid(&self) {
        if let Err(e) = self.validate() {
            panic!("invalid membership {self:?}: {e}");
        }
    }
}

/// A journal as placed on one machine: the configuration it is placed with for life (its
/// founding one; see [`JournalConfig::follow`]), and the configuration epoch this machine's
/// part in it begins in. A machine that takes a seat the journal's log moved to it, or that
/// is placed a journal it never held after the journal moved, begins in the epoch in force:
/// its acceptor starts promised to [`Ballot::seat_floor`] of it, so it answers no ballot of an
/// earlier configuration, whose promises it never made or no longer holds
/// (docs/reconfiguration.md, rule 13). 0 for a journal's founders and its replicas.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Assignment {
    pub key: JournalKey,
    pub config: JournalConfig,
    pub epoch: u64,
}

impl Assignment {
    /// A placement that begins at the journal's creation (epoch 0).
    #[must_use]
    pub fn founding(key: JournalKey, config: JournalConfig) -> Assignment {
        Assignment { key, config, epoch: 0 }
    }

    /// The promise the journal starts with on a machine that has never held it.
    #[must_use]
    pub fn promise(&self) -> Ballot {
        Ballot::seat_floor(self.epoch)
    }
}

/// A membership that is not well formed.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum MembershipError {
    #[error("a journal has at least one voter")]
    NoVoters,
    #[error("a member is named twice")]
    Repeated,
}

/// Timing and size bounds. Ticks are the host's clock unit (100 ms in production).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Tunables {
    /// A follower that hears no leader for a draw in `[election_ticks_min, election_ticks_max)`
    /// starts an election; a leader that hears no quorum for `election_ticks_min` steps down.
    pub election_ticks_min: u32,
    pub election_ticks_max: u32,
    /// Slots a leader may have proposed but not yet seen chosen.
    pub pipeline_slots_max: u32,
    /// Calls a leader may hold waiting for the window, plus calls waiting for their slot.
    pub calls_max: u32,
    /// Ticks a held call waits for its slot to apply before it is answered `NoVerdict`.
    pub call_ticks_max: u32,
    /// Slots one catch-up answer carries.
    pub catch_up_slots_max: u32,
    /// Record bytes one catch-up answer carries (it always carries one slot): a laggard of a
    /// journal of large records is sent pages a bus can carry, not one message of every slot.
    pub catch_up_bytes_max: u32,
    /// Ticks between catch-up requests while behind and answered; each request that brings
    /// nothing doubles the pause, up to `catch_up_backoff_ticks_max`.
    pub catch_up_ticks: u32,
    pub catch_up_backoff_ticks_max: u32,
    /// Ticks a read may wait for its quorum round or its position before `Unserved`.
    pub read_ticks_max: u32,
    /// Reads held at once; more are answered `Unserved`.
    pub reads_max: u32,
    /// The page size: records and record bytes (a page holds at least one record).
    pub page_records_max: u32,
    pub page_bytes_max: u32,
    /// The longest long-poll at the tail, in ticks.
    pub wait_ticks_max: u32,
    /// The chosen entries a journal keeps in memory below its chosen index, in slots and in
    /// record bytes (whichever bound is hit first): reads, catch-up and duplicate checks
    /// inside this window never touch the store. Older entries are evicted once durable and
    /// are read back from the store on demand ([`crate::ready::Fetch`]).
    pub window_slots: u32,
    pub window_bytes: u32,
    /// A fold checkpoint (an anchor: a slot and the state before it) is taken every this many
    /// slots or record bytes since the last one, whichever comes first. Anchors are the sparse
    /// position index of evicted entries and where boot resumes the fold.
    pub anchor_slots: u32,
    pub anchor_bytes: u32,
    /// The exact positions a journal keeps of the newest writes evicted from its window, in at
    /// most this many runs (24 bytes each: a first seq, a slot, a number of writes and their
    /// record count; writes in consecutive slots with the same record count are one run, so a
    /// steady writer's history is one run and a run of one write the worst case): a read below
    /// the window inside them reads only the slots it returns, one below them re-folds from an
    /// anchor (up to `anchor_slots` slots). 0 keeps none.
    pub evicted_writes_max: u32,
    pub limits: Limits,
}

impl Default for Tunables {
    fn default() -> Self {
        Tunables {
            election_ticks_min: 10,
            election_ticks_max: 20,
            pipeline_slots_max: 256,
            calls_max: 4096,
            call_ticks_max: 50,
            catch_up_slots_max: 256,
            catch_up_bytes_max: 512 << 10,
            catch_up_ticks: 2,
            catch_up_backoff_ticks_max: 16,
            read_ticks_max: 20,
            reads_max: 4096,
            page_records_max: 256,
            page_bytes_max: 64 * 1024,
            wait_ticks_max: 10,
            window_slots: 1024,
            window_bytes: 1 << 20,
            anchor_slots: 1024,
            anchor_bytes: 256 << 10,
            evicted_writes_max: 4096,
            limits: Limits::default(),
        }
    }
}

impl Tunables {
    /// Panics unless every bound is usable.
    pub fn assert_valid(&self) {
        assert!(self.election_ticks_min >= 2, "an election timeout spans at least two ticks");
        assert!(self.election_ticks_max > self.election_ticks_min, "the election draw has a range");
        assert!(self.catch_up_backoff_ticks_max >= self.catch_up_ticks, "the catch-up backoff starts at its pace");
        for (v, name) in [
            (self.pipeline_slots_max, "pipeline_slots_max"),
            (self.calls_max, "calls_max"),
            (self.call_ticks_max, "call_ticks_max"),
            (self.catch_up_slots_max, "catch_up_slots_max"),
            (self.catch_up_bytes_max, "catch_up_bytes_max"),
            (self.catch_up_ticks, "catch_up_ticks"),
            (self.read_ticks_max, "read_ticks_max"),
            (self.reads_max, "reads_max"),
            (self.page_records_max, "page_records_max"),
            (self.page_bytes_max, "page_bytes_max"),
            (self.anchor_slots, "anchor_slots"),
            (self.anchor_bytes, "anchor_bytes"),
        ] {
            assert!(v > 0, "{name} is at least 1");
        }
    }
}

/// Journal configurations shared between the journals that have equal ones. A machine
/// hosting 100,000 journals holds a handful of distinct memberships, so each journal keeps a
/// pointer, not its own copy. Configurations no journal holds any more are forgotten once the
/// pool has doubled since it last looked (its size stays within twice the ones in use).
#[derive(Debug, Default)]
pub struct ConfigPool {
    pool: BTreeSet<Arc<JournalConfig>>,
    /// The pool's size after it last forgot the unused ones.
    kept: usize,
}

/// Below this many configurations the pool never looks for unused ones.
const POOL_PRUNE_MIN: usize = 64;

impl ConfigPool {
    /// The shared copy of `config`.
    pub fn share(&mut self, config: JournalConfig) -> Arc<JournalConfig> {
        if let Some(shared) = self.pool.get(&config) {
            return Arc::clone(shared);
        }
        if self.pool.len() >= 2 * self.kept.max(POOL_PRUNE_MIN) {
            self.pool.retain(|c| Arc::strong_count(c) > 1);
            self.kept = self.pool.len();
        }
        let shared = Arc::new(config);
        self.pool.insert(Arc::clone(&shared));
        shared
    }

    /// Distinct configurations held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.pool.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.pool.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{ConfigPool, JournalConfig, POOL_PRUNE_MIN};
    use crate::ids::NodeId;
    use crate::journal::WriterMode;

    fn config(voters: &[u64]) -> JournalConfig {
        JournalConfig {
            mode: WriterMode::default(),
            voters: voters.iter().map(|v| NodeId(*v)).collect(),
            learners: Vec::new(),
        }
    }

    #[test]
    fn equal_configurations_share_one_copy_and_unused_ones_are_forgotten() {
        let mut pool = ConfigPool::default();
        let a = pool.share(config(&[1, 2, 3]));
        let b = pool.share(config(&[1, 2, 3]));
        assert!(Arc::ptr_eq(&a, &b), "equal configurations are one allocation");
        let c = pool.share(config(&[2, 3, 1]));
        assert!(!Arc::ptr_eq(&a, &c), "another voter order is another membership");
        assert_eq!(*c, config(&[2, 3, 1]));
        // Many memberships held by no journal: the pool forgets them instead of growing.
        for v in 10..10 + 4 * POOL_PRUNE_MIN as u64 {
            drop(pool.share(config(&[v])));
        }
        assert!(pool.len() <= 2 * POOL_PRUNE_MIN, "unused configurations are forgotten: {}", pool.len());
        let again = pool.share(config(&[1, 2, 3]));
        assert!(Arc::ptr_eq(&a, &again), "one still held survives a pruning");
    }
}
