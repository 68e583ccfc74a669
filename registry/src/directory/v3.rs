//! Restoring a checkpoint of format 3 (issue 34's registry side, before journals kept their
//! founding voters): the same state without `Journal::founders`. Nothing sent `MoveDone` to a
//! live cell while format 3 was written, so every journal it holds runs its founding voters;
//! one that moved (epoch above 0) cannot say who its founders were and is refused. The bytes
//! must be canonical format 3.

use std::collections::BTreeMap;

use paros_client::Seq;
use paros_core::ids::{JournalKey, NodeId, TenantId};
use paros_core::journal::WriterMode;
use serde::{Deserialize, Serialize};

use super::{Cell, Journal, Judged, Machine, RestoreError, SeatMove, SigningKey, State, Tenant, Tier};
use crate::command::{Epoch, RequestId};
use crate::names::{JournalName, KeyId, TierName};

/// The format this module restores.
pub(super) const VERSION: u8 = 3;

#[derive(Serialize, Deserialize)]
struct StateV3 {
    cell: Option<Cell>,
    machines: BTreeMap<NodeId, Machine>,
    tiers: BTreeMap<TierName, Tier>,
    tenants: BTreeMap<TenantId, Tenant>,
    keys: BTreeMap<KeyId, SigningKey>,
    journals: BTreeMap<JournalKey, JournalV3>,
    verdicts: BTreeMap<RequestId, Judged>,
    undecodable: u64,
}

#[derive(Serialize, Deserialize)]
struct JournalV3 {
    key: JournalKey,
    name: JournalName,
    mode: WriterMode,
    voters: Box<[NodeId]>,
    tier: Option<TierName>,
    feed: Option<NodeId>,
    #[serde(with = "crate::seq_serde")]
    created_at: Seq,
    #[serde(with = "crate::seq_serde::option")]
    deleted_at: Option<Seq>,
    epoch: Epoch,
    moving: Option<SeatMove>,
}

/// The state a format 3 checkpoint's `body` (after its version byte) holds.
pub(super) fn restore(body: &[u8]) -> Result<State, RestoreError> {
    let (old, rest) = postcard::take_from_bytes::<StateV3>(body).map_err(|e| RestoreError::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(RestoreError::Trailing(rest.len()));
    }
    if postcard::to_allocvec(&old).map_err(|e| RestoreError::Malformed(e.to_string()))? != body {
        return Err(RestoreError::NotCanonical);
    }
    let mut journals = BTreeMap::new();
    for (key, j) in old.journals {
        if j.epoch != Epoch(0) {
            return Err(RestoreError::Inconsistent("a format 3 journal that moved: its founders are unknown"));
        }
        journals.insert(key, journal(j));
    }
    Ok(State {
        cell: old.cell,
        machines: old.machines,
        tiers: old.tiers,
        tenants: old.tenants,
        keys: old.keys,
        journals,
        verdicts: old.verdicts,
        undecodable: old.undecodable,
    })
}

fn journal(j: JournalV3) -> Journal {
    let JournalV3 { key, name, mode, voters, tier, feed, created_at, deleted_at, epoch, moving } = j;
    let founders = voters.clone();
    let left = Box::new([]);
    Journal { key, name, mode, voters, founders, left, tier, feed, created_at, deleted_at, epoch, moving }
}

/// A state's format 3 checkpoint, for the tests of the upgrade: `None` when a journal moved.
pub(super) fn encode(state: &State) -> Option<Vec<u8>> {
    let journals = state.journals.iter().map(|(key, j)| {
        (j.epoch == Epoch(0) && j.left.is_empty()).then(|| {
            let v3 = JournalV3 {
                key: j.key,
                name: j.name.clone(),
                mode: j.mode,
                voters: j.voters.clone(),
                tier: j.tier.clone(),
                feed: j.feed,
                created_at: j.created_at,
                deleted_at: j.deleted_at,
                epoch: j.epoch,
                moving: j.moving,
            };
            (*key, v3)
        })
    });
    let journals = journals.collect::<Option<BTreeMap<_, _>>>()?;
    let old = StateV3 {
        cell: state.cell.clone(),
        machines: state.machines.clone(),
        tiers: state.tiers.clone(),
        tenants: state.tenants.clone(),
        keys: state.keys.clone(),
        journals,
        verdicts: state.verdicts.clone(),
        undecodable: state.undecodable,
    };
    postcard::to_extend(&old, vec![VERSION]).ok()
}
