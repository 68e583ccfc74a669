//! What a machine changes to host what the directory places on it, in the world's terms.
//!
//! A voter applies `paros_registry::follow::changes` as is. The directory knows voters only;
//! the world's convention is that every replica learns every journal, so the learners are the
//! world's replicas: hosted configurations are compared without their learners, and the
//! placements get them. A replica is nobody's voter: it hosts every live journal.

use std::collections::BTreeMap;

use paros_core::{JournalConfig, JournalKey, NodeId};
use paros_registry::Directory;
use paros_registry::follow::{self, Changes};

use crate::host::MachineRole;

/// The changes `node` (a `role`), hosting `hosted`, makes; `keep` (the registry journal) stays.
#[must_use]
pub fn for_machine(
    directory: &Directory,
    node: NodeId,
    role: MachineRole,
    hosted: &BTreeMap<JournalKey, JournalConfig>,
    keep: &JournalKey,
    learners: &[NodeId],
) -> Changes {
    match role {
        MachineRole::Voter => {
            let bare = hosted.iter().map(|(k, c)| (*k, JournalConfig { learners: Vec::new(), ..c.clone() })).collect();
            let mut changes = follow::changes(directory, node, &bare, keep);
            for (_, config) in &mut changes.place {
                config.learners = learners.to_vec();
            }
            changes
        }
        MachineRole::Replica => {
            let wanted: BTreeMap<JournalKey, JournalConfig> = directory
                .journals()
                .filter(|j| j.is_live())
                .map(|j| {
                    (j.key, JournalConfig { mode: j.mode, voters: j.voters.to_vec(), learners: learners.to_vec() })
                })
                .collect();
            let place =
                wanted.iter().filter(|(k, c)| hosted.get(*k) != Some(*c)).map(|(k, c)| (*k, c.clone())).collect();
            let remove = hosted.keys().filter(|k| *k != keep && !wanted.contains_key(*k)).copied().collect();
            Changes { place, remove }
        }
    }
}
