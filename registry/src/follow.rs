//! What a node must change to host exactly the journals the directory places on it.
//!
//! Every node folds the registry and, after each page, compares the journals the directory
//! places on it with the ones it hosts: journals placed and not hosted are created, journals
//! hosted and no longer placed (deleted, or moved) are removed. A replica does the same with
//! the live journals of its tier (those fed at its tier's feed), until it is retired
//! (`SetStanding` to `Retired`: the replica is removed from its tier), when it hosts none of
//! them any more. The registry journal is placed by the cell's formation on its members;
//! the directory records it from formation on, so its seats move as any journal's do (see
//! [`changes`]); a replica never removes it. Pure: the async follower applies the result
//! through the node's control handle.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use paros_core::{Assignment, JournalConfig, JournalKey, NodeId};

use crate::Directory;

/// The changes one node must make.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Changes {
    /// Journals to place, each with its configuration and the epoch its seat begins in.
    pub place: Vec<Assignment>,
    /// Journals to remove.
    pub remove: Vec<JournalKey>,
}

impl Changes {
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.place.is_empty() && self.remove.is_empty()
    }
}

/// The configuration every live journal of `directory` placed on `node` runs with.
#[must_use]
pub fn placed_on(directory: &Directory, node: NodeId) -> BTreeMap<JournalKey, JournalConfig> {
    directory.journals_on(node).map(|j| (j.key, j.config())).collect()
}

/// What `node`, hosting `hosted`, must change to host what `directory` places on it. `keep` is
/// the registry journal: placed by the cell's formation on its members, and from then on, once
/// the directory records it, placed and removed by its seats like any journal — except that a
/// node hosting it keeps it as formation placed it (the registry journal of a simulated cell
/// has learners the directory does not record), and that a directory that does not record it
/// yet (not formed) removes it from nowhere.
///
/// Walks the directory without copying what it places: only the journals to change are
/// allocated (a directory of 100,000 journals is compared many times while it is built, and a
/// copy of every configuration each time is memory the allocator keeps).
#[must_use]
pub fn changes<C: Borrow<JournalConfig>>(
    directory: &Directory,
    node: NodeId,
    hosted: &BTreeMap<JournalKey, C>,
    keep: &JournalKey,
) -> Changes {
    let place = directory
        .journals_on(node)
        .filter(|j| match hosted.get(&j.key) {
            Some(c) => j.key != *keep && !j.runs_as(c.borrow()),
            None => true,
        })
        .map(|j| j.assignment(node))
        .collect();
    let placed_here = |k: &JournalKey| match directory.journal(*k) {
        Some(j) => j.is_placed_on(node),
        None => k == keep,
    };
    let remove = hosted.keys().filter(|k| !placed_here(k)).copied().collect();
    Changes { place, remove }
}

/// What a followed machine hosts, by its role.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Hosting {
    /// A node: the live journals it votes for.
    Voter,
    /// A replica of the tier fed at `feed`: every live journal of that tier, none once the
    /// directory says the replica is retired.
    Replica { feed: NodeId },
}

impl Hosting {
    /// A node.
    #[must_use]
    pub fn voter() -> Self {
        Hosting::Voter
    }

    /// Whether a machine hosting so, with id `node`, hosts `journal` (`retired`: the
    /// directory says the machine is retired).
    fn hosts(&self, node: NodeId, journal: &crate::Journal, retired: bool) -> bool {
        match self {
            Hosting::Voter => journal.is_placed_on(node),
            Hosting::Replica { feed } => !retired && journal.is_fed_at(*feed),
        }
    }
}

/// Whether the directory says `node` is retired: a retired replica leaves its tier.
fn is_retired(directory: &Directory, node: NodeId) -> bool {
    directory.machine(node).is_some_and(|m| m.standing == crate::Standing::Retired)
}

/// What `node`, a machine `hosting` so and hosting `hosted`, must change to host what
/// `directory` says it hosts, each journal with its [`config`](crate::Journal::config). `keep`
/// is never removed (the registry journal). A voter's changes are [`changes`]; a replica the
/// directory retired is removed from its tier: it places nothing and removes every journal but
/// `keep`.
#[must_use]
pub fn changes_for<C: Borrow<JournalConfig>>(
    directory: &Directory,
    node: NodeId,
    hosting: &Hosting,
    hosted: &BTreeMap<JournalKey, C>,
    keep: &JournalKey,
) -> Changes {
    let feed = match hosting {
        Hosting::Voter => return changes(directory, node, hosted, keep),
        Hosting::Replica { feed } => *feed,
    };
    let retired = is_retired(directory, node);
    let place = directory
        .journals_fed_at(feed)
        .filter(|j| !retired && !hosted.get(&j.key).is_some_and(|c| j.runs_as(c.borrow())))
        .map(|j| Assignment::founding(j.key, j.config()))
        .collect();
    let stays = |k: &JournalKey| directory.journal(*k).is_some_and(|j| hosting.hosts(node, j, retired));
    let remove = hosted.keys().filter(|k| *k != keep && !stays(k)).copied().collect();
    Changes { place, remove }
}
