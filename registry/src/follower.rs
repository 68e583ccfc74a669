//! The registry's follower, sans-IO: folds the registry journal and says what the machines it
//! follows for must place and remove to host what the directory says.
//!
//! [`Follower`] is what both the async daemon (`daemon.rs`, over paros-client's `Reader` and a
//! [`Placer`](crate::daemon::Placer)) and the simulation run. The shell reads the registry as
//! [`next_read`](Follower::next_read) says and hands every outcome to
//! [`read`](Follower::read), then carries out what [`poll`](Follower::poll) returns:
//!
//! - [`FollowerEffect::Place`]: one placement request to a machine; reported with
//!   [`placed`](Follower::placed) (a placement the machine refuses is counted and not asked
//!   again until the directory changes it);
//! - [`FollowerEffect::Remove`]: reported with [`removed`](Follower::removed) once removed; a
//!   machine whose copy promised in a later epoch than the directory's refuses (rule 13), is
//!   not reported, and is asked again at the next application;
//! - [`FollowerEffect::Publish`]: after the placements, the directory is the machines' now
//!   ([`directory`](Follower::directory)); reported with [`published`](Follower::published).
//!
//! Nothing is applied before the fold first reaches the registry's tail (the shell's reader
//! says when its cursor reached the highest tail an answer named). The machines host what an
//! earlier run applied, which can be later than a directory folded part of the way from the
//! checkpoint after a restart: applied, that directory would remove the journals created since,
//! records and all. Once caught up, every directory folded is later than what they host.
//!
//! Each application walks the whole directory, so while pages keep coming the follower applies
//! at most once per [`FollowPolicy::apply_interval_min`], and at least
//! [`FollowPolicy::apply_cost_factor`] times what the last one took apart: a burst of ten
//! thousand creates is applied in a few steps, not one per page. An empty page (the tail) is
//! applied at once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use paros_client::{FoldError, FoldEvent, Folder, FolderConfig, ReaderError, ReaderOutcome, Seq};
use paros_core::{Assignment, ConfigPool, JournalConfig, JournalKey, NodeId};
use thiserror::Error;

use crate::directory::{Directory, SharedDirectory};
use crate::follow::{self, Hosting};

/// The follower's policy.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct FollowPolicy {
    /// Journals placed per placement request.
    pub placements_per_request: usize,
    /// The shortest pause between two applications while pages keep coming.
    pub apply_interval_min: Duration,
    /// The pause is also at least this many times what the last application took.
    pub apply_cost_factor: u32,
}

impl Default for FollowPolicy {
    fn default() -> Self {
        FollowPolicy {
            placements_per_request: 1024,
            apply_interval_min: Duration::from_millis(10),
            apply_cost_factor: 3,
        }
    }
}

/// A machine the follower places journals on.
#[derive(Clone, Debug)]
pub struct FollowedMachine {
    pub id: NodeId,
    pub hosting: Hosting,
    /// What it hosts at the start.
    pub hosted: BTreeMap<JournalKey, JournalConfig>,
}

/// The read the shell sends next.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum NextRead {
    /// Read on until something moves: long-poll at the tail, retry unavailability.
    Follow,
    /// One read, without waiting at the tail: something folded waits to be applied.
    Once,
}

/// What the follower asks its shell to do.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum FollowerEffect {
    /// Place these journals on `machine`, in one request.
    Place { machine: NodeId, journals: Vec<Assignment> },
    /// Remove `journal` from `machine`, as the directory at configuration `epoch` asks (the
    /// machine refuses while its copy promised in a later epoch: rule 13).
    Remove { machine: NodeId, journal: JournalKey, epoch: u64 },
    /// The machines host what [`Follower::directory`] places: publish it.
    Publish,
}

/// A read outcome the follower cannot go on from.
#[derive(Clone, PartialEq, Eq, Debug, Error)]
pub enum FollowError {
    #[error("reading the registry: {0}")]
    Read(#[source] ReaderError),
    #[error("folding the registry: {0}")]
    Fold(#[from] FoldError),
}

/// The follower's counters.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FollowStats {
    /// Journals placed by the registry, and removed.
    pub placed: u64,
    pub removed: u64,
    /// Placements a machine refused.
    pub refused: u64,
    /// Applications of the directory (placements computed, directory published).
    pub applications: u64,
}

/// One machine's placements as the follower knows them.
#[derive(Debug)]
struct Machine {
    id: NodeId,
    hosting: Hosting,
    /// What it hosts, each configuration shared with the equal ones (a machine with 100,000
    /// journals holds a handful of distinct memberships).
    hosted: BTreeMap<JournalKey, Arc<JournalConfig>>,
    /// Placements it refused: not asked again until the directory changes them.
    refused: BTreeMap<JournalKey, JournalConfig>,
}

/// The follower. See the module doc.
#[derive(Debug)]
pub struct Follower {
    policy: FollowPolicy,
    registry: JournalKey,
    /// The configuration formation placed the registry journal with, as a machine followed
    /// here hosts it: a machine its seat moves to is placed it so (with whatever learners
    /// formation gave it, which the directory does not record).
    registry_config: Option<JournalConfig>,
    /// Shared with what it publishes: at rest the follower holds one directory, not two.
    folder: Folder<SharedDirectory>,
    machines: Vec<Machine>,
    configs: ConfigPool,
    /// The fold reached the registry's tail once.
    caught_up: bool,
    /// Folded and not yet applied.
    unapplied: bool,
    /// The last read moved the fold (records or a gap).
    moved: bool,
    /// When the application handed out began, until it is published.
    applying: Option<Duration>,
    next_apply: Duration,
    stats: FollowStats,
}

impl Follower {
    /// The configuration formation placed the registry journal with, for a follower none of
    /// whose machines hosts it at the start (learned from them otherwise).
    #[must_use]
    pub fn with_registry_config(mut self, config: JournalConfig) -> Self {
        self.registry_config = Some(config);
        self
    }

    /// A follower of `registry` from its start, for `machines`.
    #[must_use]
    pub fn new(registry: JournalKey, machines: Vec<FollowedMachine>, policy: FollowPolicy) -> Self {
        let registry_config = machines.iter().find_map(|m| m.hosted.get(&registry)).cloned();
        let mut configs = ConfigPool::default();
        let machines = machines
            .into_iter()
            .map(|m| Machine {
                id: m.id,
                hosting: m.hosting,
                hosted: m.hosted.into_iter().map(|(k, c)| (k, configs.share(c))).collect(),
                refused: BTreeMap::new(),
            })
            .collect();
        Follower {
            policy,
            registry,
            registry_config,
            folder: Folder::new(SharedDirectory::default(), Seq(0), FolderConfig::default()),
            machines,
            configs,
            caught_up: false,
            unapplied: false,
            moved: false,
            applying: None,
            next_apply: Duration::ZERO,
            stats: FollowStats::default(),
        }
    }

    /// The folder (its position, whether it is whole, the directory folded so far).
    #[must_use]
    pub fn folder(&self) -> &Folder<SharedDirectory> {
        &self.folder
    }

    /// The directory, shared (no copy), once it is whole and the fold reached the tail.
    #[must_use]
    pub fn directory(&self) -> Option<Arc<Directory>> {
        (self.caught_up && self.folder.is_whole()).then(|| self.folder.state().share())
    }

    /// Whether the fold reached the registry's tail once.
    #[must_use]
    pub fn caught_up(&self) -> bool {
        self.caught_up
    }

    #[must_use]
    pub fn stats(&self) -> FollowStats {
        self.stats
    }

    /// The read to send next.
    #[must_use]
    pub fn next_read(&self) -> NextRead {
        if self.caught_up && self.unapplied && self.folder.is_whole() { NextRead::Once } else { NextRead::Follow }
    }

    /// Folds what a read came to. `reader_caught_up` is the shell's reader's judgement after
    /// it: its cursor reached the highest tail an answer named. Returns the fold's events.
    ///
    /// "Not hosted" from every server asked (`UnknownJournal`, as an outcome or as the
    /// reader's error) is a read that found nothing, as `Unavailable` is: the registry journal
    /// always exists, and its seats are hosted nowhere a follower asks only while they move or
    /// before the machines that hold them are back (the simulation's seed 12: a follower that
    /// stopped at it never placed a journal again, and the moves to its machine never ended).
    ///
    /// # Errors
    /// [`FollowError`] when the read failed (an answer that contradicts its read, a denial) or
    /// the page does not fold: the follower cannot go on.
    pub fn read(
        &mut self,
        outcome: Result<ReaderOutcome, ReaderError>,
        reader_caught_up: bool,
    ) -> Result<Vec<FoldEvent>, FollowError> {
        let outcome = match outcome {
            Err(ReaderError::UnknownJournal) => Ok(ReaderOutcome::UnknownJournal),
            other => other,
        };
        let (events, moved) = match outcome.map_err(FollowError::Read)? {
            ReaderOutcome::Records { from, records, .. } => {
                (self.folder.fold_page(from, &records)?, !records.is_empty())
            }
            ReaderOutcome::Gap { from, resumed_at, .. } => (self.folder.gap(from, resumed_at)?, true),
            ReaderOutcome::UnknownJournal | ReaderOutcome::Unavailable { .. } | ReaderOutcome::Retry { .. } => {
                (Vec::new(), false)
            }
        };
        self.caught_up |= reader_caught_up;
        self.moved = moved;
        self.unapplied |= moved;
        Ok(events)
    }

    /// What to do now, at `now` (the shell's clock): an application when one is due.
    pub fn poll(&mut self, now: Duration) -> Vec<FollowerEffect> {
        let due = !self.moved || now >= self.next_apply;
        if self.applying.is_some() || !self.caught_up || !self.folder.is_whole() || !self.unapplied || !due {
            return Vec::new();
        }
        self.applying = Some(now);
        let directory: &Directory = self.folder.state();
        let per_request = self.policy.placements_per_request.max(1);
        let mut effects = Vec::new();
        for m in &self.machines {
            let mut changes = follow::changes_for(directory, m.id, &m.hosting, &m.hosted, &self.registry);
            if let Some(formation) = &self.registry_config {
                for a in changes.place.iter_mut().filter(|a| a.key == self.registry) {
                    a.config.clone_from(formation);
                }
            }
            changes.place.retain(|a| m.refused.get(&a.key) != Some(&a.config));
            for chunk in changes.place.chunks(per_request) {
                effects.push(FollowerEffect::Place { machine: m.id, journals: chunk.to_vec() });
            }
            effects.extend(changes.remove.into_iter().map(|journal| FollowerEffect::Remove {
                machine: m.id,
                journal,
                epoch: directory.journal(journal).map_or(u64::MAX, |j| j.moving.map_or(j.epoch, |m| m.epoch).0),
            }));
        }
        effects.push(FollowerEffect::Publish);
        effects
    }

    fn machine(&mut self, id: NodeId) -> Option<&mut Machine> {
        self.machines.iter_mut().find(|m| m.id == id)
    }

    /// What `machine` answered a `Place`: one result per journal, `true` when placed.
    pub fn placed(&mut self, machine: NodeId, journals: &[Assignment], placed: &[bool]) {
        let Some(i) = self.machines.iter().position(|m| m.id == machine) else { return };
        for (Assignment { key, config, .. }, ok) in journals.iter().zip(placed) {
            if *ok {
                let shared = self.configs.share(config.clone());
                self.machines[i].hosted.insert(*key, shared);
                self.stats.placed += 1;
            } else {
                self.machines[i].refused.insert(*key, config.clone());
                self.stats.refused += 1;
            }
        }
    }

    /// `machine` removed `journal`.
    pub fn removed(&mut self, machine: NodeId, journal: JournalKey) {
        if let Some(m) = self.machine(machine) {
            m.hosted.remove(&journal);
            self.stats.removed += 1;
        }
    }

    /// The directory was published at `now`: the application is over.
    pub fn published(&mut self, now: Duration) {
        let Some(started) = self.applying.take() else { return };
        self.unapplied = false;
        self.stats.applications += 1;
        let spent = now.saturating_sub(started);
        self.next_apply = now + self.policy.apply_interval_min.max(spent * self.policy.apply_cost_factor);
    }
}
