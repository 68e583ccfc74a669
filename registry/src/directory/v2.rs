//! Restoring a checkpoint of format 2 (before issue 34): the same state without machines'
//! incarnations and replacements nor journals' epochs and seat moves. It is restored as the
//! state a fold of the same records gives today: no incarnation recorded, nothing replaced,
//! every journal at epoch 0 with no move in progress. The bytes must be canonical format 2
//! (what that build encoded for the state they hold).

use std::collections::BTreeMap;

use paros_client::Seq;
use paros_core::ids::{JournalKey, NodeId, TenantId};
use paros_core::journal::WriterMode;
use serde::{Deserialize, Serialize};

use super::{Cell, Journal, Judged, Machine, RestoreError, SigningKey, State, Tenant, Tier};
use crate::command::{Epoch, RequestId, Role, Standing};
use crate::names::{BusAddress, JournalName, KeyId, TierName, Zone};

/// The format this module restores.
pub(super) const VERSION: u8 = 2;

#[derive(Serialize, Deserialize)]
struct StateV2 {
    cell: Option<Cell>,
    machines: BTreeMap<NodeId, MachineV2>,
    tiers: BTreeMap<TierName, Tier>,
    tenants: BTreeMap<TenantId, Tenant>,
    keys: BTreeMap<KeyId, SigningKey>,
    journals: BTreeMap<JournalKey, JournalV2>,
    verdicts: BTreeMap<RequestId, Judged>,
    undecodable: u64,
}

#[derive(Serialize, Deserialize)]
struct MachineV2 {
    id: NodeId,
    role: Role,
    bus_address: BusAddress,
    zone: Zone,
    standing: Standing,
    #[serde(with = "crate::seq_serde")]
    registered_at: Seq,
    tier: Option<TierName>,
}

#[derive(Serialize, Deserialize)]
struct JournalV2 {
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
}

/// The state a format 2 checkpoint's `body` (after its version byte) holds.
pub(super) fn restore(body: &[u8]) -> Result<State, RestoreError> {
    let (old, rest) = postcard::take_from_bytes::<StateV2>(body).map_err(|e| RestoreError::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(RestoreError::Trailing(rest.len()));
    }
    if postcard::to_allocvec(&old).map_err(|e| RestoreError::Malformed(e.to_string()))? != body {
        return Err(RestoreError::NotCanonical);
    }
    let machines = old.machines.into_iter().map(|(id, m)| (id, machine(m))).collect();
    let journals = old.journals.into_iter().map(|(key, j)| (key, journal(j))).collect();
    Ok(State {
        cell: old.cell,
        machines,
        tiers: old.tiers,
        tenants: old.tenants,
        keys: old.keys,
        journals,
        verdicts: old.verdicts,
        undecodable: old.undecodable,
    })
}

fn machine(m: MachineV2) -> Machine {
    let MachineV2 { id, role, bus_address, zone, standing, registered_at, tier } = m;
    let (incarnation, replaced_by, replaces) = (None, None, None);
    Machine { id, role, bus_address, zone, standing, registered_at, tier, incarnation, replaced_by, replaces }
}

fn journal(j: JournalV2) -> Journal {
    let JournalV2 { key, name, mode, voters, tier, feed, created_at, deleted_at } = j;
    let founders = voters.clone();
    let (left, epoch, moving) = (Box::new([]), Epoch(0), None);
    Journal { key, name, mode, voters, founders, left, tier, feed, created_at, deleted_at, epoch, moving }
}

/// A state's format 2 checkpoint, for the tests of the upgrade: `None` when the state holds
/// what format 2 cannot say (an incarnation, a replacement, an epoch, a move).
pub(super) fn encode(state: &State) -> Option<Vec<u8>> {
    let machines = state.machines.iter().map(|(id, m)| {
        let fits = m.incarnation.is_none() && m.replaced_by.is_none() && m.replaces.is_none();
        fits.then(|| {
            let (role, standing, registered_at) = (m.role, m.standing, m.registered_at);
            let (bus_address, zone, tier) = (m.bus_address.clone(), m.zone.clone(), m.tier.clone());
            (*id, MachineV2 { id: m.id, role, bus_address, zone, standing, registered_at, tier })
        })
    });
    let machines = machines.collect::<Option<BTreeMap<_, _>>>()?;
    let journals = state.journals.iter().map(|(key, j)| {
        (j.epoch == Epoch(0) && j.moving.is_none()).then(|| {
            let v2 = JournalV2 {
                key: j.key,
                name: j.name.clone(),
                mode: j.mode,
                voters: j.voters.clone(),
                tier: j.tier.clone(),
                feed: j.feed,
                created_at: j.created_at,
                deleted_at: j.deleted_at,
            };
            (*key, v2)
        })
    });
    let journals = journals.collect::<Option<BTreeMap<_, _>>>()?;
    let old = StateV2 {
        cell: state.cell.clone(),
        machines,
        tiers: state.tiers.clone(),
        tenants: state.tenants.clone(),
        keys: state.keys.clone(),
        journals,
        verdicts: state.verdicts.clone(),
        undecodable: state.undecodable,
    };
    postcard::to_extend(&old, vec![VERSION]).ok()
}
