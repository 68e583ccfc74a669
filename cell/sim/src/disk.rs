//! A simulated disk for one machine: writes land in a volatile buffer, a sync makes them durable,
//! a crash loses whatever was not synced, and a failed sync is unknown (the batch may or may not
//! have reached the platter) and stops the process.
//!
//! It is a `LogStore`, the port the daemon's fjall store implements: the node host boots from
//! it, writes each round's batch through it and reads evicted entries back through its
//! `LogRead`. Placements ride the same sync as writes: a machine reboots with exactly the
//! journals it durably placed (and not the ones it durably removed), and a journal's writes only
//! become durable while it is placed.
//!
//! Clones share one disk (as `paros_node::MemStore`'s do): the world keeps a handle that
//! outlives the machine's crashes and arms faults on it; the host holds another.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use paros_core::{Durable, JournalConfig, JournalKey, LogEntry, NodeId, Slot, WriteOp};
use paros_node::ports::{Incarnation, LogRead, LogStore, Placement, StoreError, StoreOp, StoredJournal};

/// What the world decided the next sync does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SyncFault {
    /// The sync fails and the batch never became durable.
    FailLost,
    /// The sync fails, yet the batch did become durable (the failure is unknown, not "not done").
    FailPersisted,
}

/// One machine's storage: a shared handle (see the module's doc).
#[derive(Clone, Debug, Default)]
pub struct SimDisk {
    state: Arc<Mutex<DiskState>>,
}

/// Every journal's durable state, plus written-but-unsynced batches.
#[derive(Debug, Default)]
struct DiskState {
    /// The machine's identity, durable once recorded.
    identity: Option<NodeId>,
    /// The store's incarnation, durable once recorded (with the identity).
    incarnation: Option<Incarnation>,
    synced: BTreeMap<JournalKey, Durable>,
    /// The journals durably placed here, with their configuration.
    placed: BTreeMap<JournalKey, JournalConfig>,
    unsynced: Vec<Unsynced>,
    armed: Option<SyncFault>,
    /// Writes that became durable since the auditor last looked, in order.
    observed: Vec<(JournalKey, WriteOp)>,
    syncs: u64,
}

/// One change waiting for a sync, in the order it was written.
#[derive(Clone, Debug)]
enum Unsynced {
    Place(Placement),
    Op(JournalKey, WriteOp),
}

/// One journal's durable state, read in place: the disk stays locked while it is held, so
/// drop it before touching the disk again.
#[derive(Debug)]
pub struct DurableRef<'a> {
    state: MutexGuard<'a, DiskState>,
    key: JournalKey,
}

impl std::ops::Deref for DurableRef<'_> {
    type Target = Durable;

    fn deref(&self) -> &Durable {
        self.state.synced.get(&self.key).expect("a durable ref is made only for a journal on the disk")
    }
}

impl DiskState {
    fn persist(&mut self) {
        for change in std::mem::take(&mut self.unsynced) {
            match change {
                Unsynced::Place(Placement::Put(key, config, promise)) => {
                    self.placed.insert(key, config);
                    let durable = self.synced.entry(key).or_default();
                    durable.promise = durable.promise.max(promise);
                }
                Unsynced::Place(Placement::Remove(key)) => {
                    self.placed.remove(&key);
                    self.synced.remove(&key);
                }
                // The writes of a journal not placed (removed in an earlier round) are dropped,
                // as the node's stores do.
                Unsynced::Op(key, op) if self.placed.contains_key(&key) => {
                    self.synced.entry(key).or_default().apply(&op);
                    self.observed.push((key, op));
                }
                Unsynced::Op(..) => {}
            }
        }
    }
}

impl SimDisk {
    fn state(&self) -> MutexGuard<'_, DiskState> {
        // Single-threaded: a poisoned lock only follows a panic that already failed the run.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The journals durably placed here, with their configuration and durable state: what the
    /// machine boots with.
    #[must_use]
    pub fn placed(&self) -> Vec<(JournalKey, JournalConfig, Durable)> {
        let state = self.state();
        state
            .placed
            .iter()
            .map(|(k, c)| (*k, c.clone(), state.synced.get(k).cloned().unwrap_or_default().for_boot()))
            .collect()
    }

    /// Whether `key` is durably placed here (a reboot would host it).
    #[must_use]
    pub fn is_placed(&self, key: &JournalKey) -> bool {
        self.state().placed.contains_key(key)
    }

    /// The process died: everything written and not synced is gone.
    pub fn crash(&self) {
        let mut state = self.state();
        state.unsynced.clear();
        state.armed = None;
    }

    /// The disk is replaced by an empty one (only ever done to a replica, which holds no promise).
    pub fn wipe(&self) {
        let mut state = self.state();
        let observed = std::mem::take(&mut state.observed);
        let syncs = state.syncs;
        *state = DiskState { observed, syncs, ..DiskState::default() };
    }

    /// Arms a fault for the next sync.
    pub fn arm(&self, fault: SyncFault) {
        self.state().armed = Some(fault);
    }

    /// What storage gives back for `key` at boot (empty for a journal never written here).
    #[must_use]
    pub fn load(&self, key: &JournalKey) -> Durable {
        self.state().synced.get(key).cloned().unwrap_or_default()
    }

    /// The durable state of `key`, without copying (see [`DurableRef`]).
    #[must_use]
    pub fn durable(&self, key: &JournalKey) -> Option<DurableRef<'_>> {
        let state = self.state();
        state.synced.contains_key(key).then_some(DurableRef { state, key: *key })
    }

    /// Writes (and placements) waiting for a sync.
    #[must_use]
    pub fn unsynced_len(&self) -> usize {
        self.state().unsynced.len()
    }

    /// Syncs attempted so far.
    #[must_use]
    pub fn syncs(&self) -> u64 {
        self.state().syncs
    }

    /// The writes that became durable since the last call, in the order they were written.
    pub fn take_observed(&self) -> Vec<(JournalKey, WriteOp)> {
        std::mem::take(&mut self.state().observed)
    }
}

/// Reads what is durable: a journal reads back only entries it evicted after they were synced.
impl LogRead for SimDisk {
    fn read_range(
        &self,
        journal: &JournalKey,
        from: Slot,
        slots_max: u32,
    ) -> Result<Vec<(Slot, LogEntry)>, StoreError> {
        Ok(self.state().synced.get(journal).map(|d| d.read_range(from, slots_max)).unwrap_or_default())
    }

    /// What was written, synced or not (as fjall reads its memtables; a crash still loses
    /// what was not synced).
    fn load_journal(&self, journal: &JournalKey) -> Result<Option<Durable>, StoreError> {
        let state = self.state();
        let mut durable = state.synced.get(journal).cloned();
        for change in &state.unsynced {
            match change {
                Unsynced::Op(key, op) if key == journal => durable.get_or_insert_with(Durable::default).apply(op),
                Unsynced::Place(Placement::Put(key, _, promise)) if key == journal => {
                    let d = durable.get_or_insert_with(Durable::default);
                    d.promise = d.promise.max(*promise);
                }
                _ => {}
            }
        }
        Ok(durable.map(|d| d.for_boot()))
    }
}

impl LogStore for SimDisk {
    type Reader = SimDisk;

    fn reader(&self) -> SimDisk {
        self.clone()
    }

    fn identity(&self) -> Result<Option<NodeId>, StoreError> {
        Ok(self.state().identity)
    }

    /// Durable at once, as the trait asks.
    fn set_identity(&mut self, node: NodeId) -> Result<(), StoreError> {
        self.state().identity = Some(node);
        Ok(())
    }

    fn incarnation(&self) -> Result<Option<Incarnation>, StoreError> {
        Ok(self.state().incarnation)
    }

    /// Durable at once, as the trait asks; recorded once.
    fn set_incarnation(&mut self, offered: Incarnation) -> Result<(), StoreError> {
        let mut state = self.state();
        match state.incarnation {
            Some(recorded) if recorded != offered => Err(StoreError::IncarnationTaken { recorded, offered }),
            _ => {
                state.incarnation = Some(offered);
                Ok(())
            }
        }
    }

    /// Places and removes journals (before the round's writes). Volatile until the sync.
    fn place(&mut self, placements: &[Placement]) -> Result<(), StoreError> {
        self.state().unsynced.extend(placements.iter().cloned().map(Unsynced::Place));
        Ok(())
    }

    /// Writes one batch of many journals' writes. Volatile until the sync.
    fn write(&mut self, batch: &[(JournalKey, Vec<WriteOp>)]) -> Result<(), StoreError> {
        let mut state = self.state();
        for (key, ops) in batch {
            state.unsynced.extend(ops.iter().map(|op| Unsynced::Op(*key, op.clone())));
        }
        Ok(())
    }

    /// Makes every write so far durable.
    ///
    /// # Errors
    /// [`StoreError::Engine`] (a failed sync) when the world armed a fault for this sync; the batch was then lost
    /// or persisted as the fault says, and the caller must stop.
    fn sync(&mut self) -> Result<(), StoreError> {
        let mut state = self.state();
        state.syncs += 1;
        let fault = state.armed.take();
        match fault {
            None | Some(SyncFault::FailPersisted) => state.persist(),
            Some(SyncFault::FailLost) => state.unsynced.clear(),
        }
        match fault {
            None => Ok(()),
            Some(f) => Err(StoreError::Engine { op: StoreOp::Sync, source: format!("injected fault: {f:?}").into() }),
        }
    }

    fn load(&self) -> Result<Vec<StoredJournal>, StoreError> {
        Ok(self.placed().into_iter().map(|(key, config, durable)| StoredJournal { key, config, durable }).collect())
    }

    fn load_configs(&self) -> Result<Vec<(JournalKey, JournalConfig)>, StoreError> {
        Ok(self.state().placed.iter().map(|(k, c)| (*k, c.clone())).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use paros_core::Ballot;

    fn key() -> JournalKey {
        JournalKey::default()
    }

    fn placed() -> SimDisk {
        let mut d = SimDisk::default();
        let config =
            JournalConfig { mode: paros_core::journal::WriterMode::Single, voters: vec![NodeId(1)], learners: vec![] };
        d.place(&[Placement::Put(key(), config, Ballot::ZERO)]).expect("a write to memory");
        d.sync().expect("no fault armed");
        d
    }

    #[test]
    fn a_crash_loses_what_was_not_synced() {
        let mut d = placed();
        let b = Ballot { round: 1, node: NodeId(1) };
        d.write(&[(key(), vec![WriteOp::Promise(b)])]).expect("a write to memory");
        d.sync().expect("no fault armed");
        d.write(&[(key(), vec![WriteOp::Chosen { up_to: Slot(3) }])]).expect("a write to memory");
        d.crash();
        let back = d.load(&key());
        assert_eq!((back.promise, back.chosen_up_to), (b, Slot(0)));
    }

    #[test]
    fn a_failed_sync_may_still_have_persisted_the_batch() {
        let mut d = placed();
        d.write(&[(key(), vec![WriteOp::Chosen { up_to: Slot(2) }])]).expect("a write to memory");
        d.arm(SyncFault::FailPersisted);
        assert!(d.sync().is_err(), "an armed fault fails the sync");
        assert_eq!(d.load(&key()).chosen_up_to, Slot(2));
        d.write(&[(key(), vec![WriteOp::Chosen { up_to: Slot(5) }])]).expect("a write to memory");
        d.arm(SyncFault::FailLost);
        assert!(d.sync().is_err(), "an armed fault fails the sync");
        assert_eq!(d.load(&key()).chosen_up_to, Slot(2));
    }

    #[test]
    fn placements_ride_the_sync_and_a_crash_loses_an_unsynced_one() {
        let mut d = SimDisk::default();
        let config =
            JournalConfig { mode: paros_core::journal::WriterMode::Single, voters: vec![NodeId(1)], learners: vec![] };
        d.place(&[Placement::Put(key(), config.clone(), Ballot::ZERO)]).expect("a write to memory");
        d.write(&[(key(), vec![WriteOp::Chosen { up_to: Slot(1) }])]).expect("a write to memory");
        d.crash();
        assert!(d.placed().is_empty(), "an unsynced placement is lost in a crash");
        d.write(&[(key(), vec![WriteOp::Chosen { up_to: Slot(1) }])]).expect("a write to memory");
        d.sync().expect("no fault armed");
        assert!(d.durable(&key()).is_none(), "the writes of a journal never placed are dropped");
        d.place(&[Placement::Put(key(), config.clone(), Ballot::ZERO)]).expect("a write to memory");
        d.write(&[(key(), vec![WriteOp::Chosen { up_to: Slot(2) }])]).expect("a write to memory");
        d.sync().expect("no fault armed");
        assert_eq!(d.placed(), vec![(key(), config, d.load(&key()))]);
        assert_eq!(d.load(&key()).chosen_up_to, Slot(2));
        d.place(&[Placement::Remove(key())]).expect("a write to memory");
        d.sync().expect("no fault armed");
        assert!(d.placed().is_empty() && d.durable(&key()).is_none(), "a durable removal drops the journal's data");
    }

    #[test]
    fn clones_share_one_disk_and_the_identity_survives_a_crash_but_not_a_wipe() {
        let mut host_side = placed();
        let world_side = host_side.clone();
        host_side.set_identity(NodeId(7)).expect("a write to memory");
        host_side.write(&[(key(), vec![WriteOp::Chosen { up_to: Slot(4) }])]).expect("a write to memory");
        assert_eq!(world_side.unsynced_len(), 1, "the world sees the host's writes");
        world_side.arm(SyncFault::FailLost);
        assert!(host_side.sync().is_err(), "the world's fault fails the host's sync");
        world_side.crash();
        assert_eq!(host_side.identity().expect("memory"), Some(NodeId(7)), "the identity is durable at once");
        world_side.wipe();
        assert_eq!(host_side.identity().expect("memory"), None, "a new drive has no identity");
        assert!(LogStore::load(&host_side).expect("memory").is_empty(), "nor any journal");
    }
}
