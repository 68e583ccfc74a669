//! Placement: which nodes vote for a new journal. A pure function of the directory.
//!
//! The eligible nodes are every registered `Node` machine standing `Registered` — the founders
//! and every machine admitted since; draining, retired and replaced nodes take nothing new
//! (a replaced node is retired). Voters are picked one at a time, each time the candidate with
//! the smallest `(voters already picked in its zone, load, id)`:
//! - **spread across zones first**: a node in a zone not yet used wins, so a journal survives
//!   the loss of a zone whenever the cell has as many zones as the journal has voters;
//! - **then least loaded**: load is the count of seats the node holds or is being moved to
//!   ([`Directory::load`]), plus what the caller adds for placements decided but not yet
//!   folded;
//! - **then by id**, so the choice is deterministic (the coordinator decides placement, every
//!   reader only checks it).
//!
//! The voters come back sorted by id: the set is what matters, and one spelling of it keeps
//! the records canonical. Moving seats of existing journals (drain, heal, rebalance) is the
//! [`crate::planner`]'s, by the same order.

use std::collections::{BTreeMap, BTreeSet};

use paros_core::ids::NodeId;
use thiserror::Error;

use crate::command::{Role, Standing};
use crate::directory::Directory;
use crate::names::Zone;

/// A node a journal may be placed on.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Candidate {
    pub id: NodeId,
    pub zone: Zone,
    /// Live journals it votes for.
    pub load: usize,
}

/// Why no voter set could be picked.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Error)]
pub enum PlacementError {
    /// Fewer eligible nodes than voters wanted.
    #[error("{wanted} voters wanted but only {eligible} nodes are eligible")]
    TooFewNodes { wanted: usize, eligible: usize },
    /// Zero voters wanted.
    #[error("a journal needs at least one voter")]
    NoVoters,
}

/// The eligible nodes of `directory`, with their load plus `pending` (placements decided but
/// not yet folded), by id.
pub fn candidates(directory: &Directory, pending: &BTreeMap<NodeId, usize>) -> Vec<Candidate> {
    directory
        .machines_by_role(Role::Node)
        .filter(|m| m.standing == Standing::Registered)
        .map(|m| Candidate {
            id: m.id,
            zone: m.zone.clone(),
            load: directory.load(m.id) + pending.get(&m.id).copied().unwrap_or(0),
        })
        .collect()
}

/// Picks `want` voters among `candidates` (see the module doc for the order), sorted by id.
///
/// # Errors
/// [`PlacementError::TooFewNodes`] when fewer than `want` distinct candidates exist;
/// [`PlacementError::NoVoters`] when `want` is zero.
pub fn place(candidates: &[Candidate], want: usize) -> Result<Vec<NodeId>, PlacementError> {
    if want == 0 {
        return Err(PlacementError::NoVoters);
    }
    let eligible = candidates.iter().map(|c| c.id).collect::<BTreeSet<_>>().len();
    if eligible < want {
        return Err(PlacementError::TooFewNodes { wanted: want, eligible });
    }
    let mut chosen = BTreeSet::new();
    let mut zone_uses: BTreeMap<&Zone, usize> = BTreeMap::new();
    for _ in 0..want {
        let pick = candidates
            .iter()
            .filter(|c| !chosen.contains(&c.id))
            .min_by_key(|c| (zone_uses.get(&c.zone).copied().unwrap_or(0), c.load, c.id))
            .ok_or(PlacementError::TooFewNodes { wanted: want, eligible })?;
        chosen.insert(pick.id);
        *zone_uses.entry(&pick.zone).or_insert(0) += 1;
    }
    Ok(chosen.into_iter().collect())
}
