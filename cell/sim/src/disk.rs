//! A simulated disk for one machine: writes land in a volatile buffer, a sync makes them durable,
//! a crash loses whatever was not synced, and a failed sync is unknown (the batch may or may not
//! have reached the platter) and stops the process.
//!
//! The surface mirrors the node host's `LogStore` port (`place` and `write` one atomic batch of
//! many journals, `sync` once, `load` at boot), so a host written against that port can run on
//! it. Placements ride the same sync as writes: a machine reboots with exactly the journals it
//! durably placed (and not the ones it durably removed), and a journal's writes only become
//! durable while it is placed.

use std::collections::BTreeMap;

use paros_core::{Durable, JournalConfig, JournalKey, LogEntry, Slot, WriteOp};
use paros_node::ports::{LogRead, Placement, StoreError};

/// What the world decided the next sync does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SyncFault {
    /// The sync fails and the batch never became durable.
    FailLost,
    /// The sync fails, yet the batch did become durable (the failure is unknown, not "not done").
    FailPersisted,
}

/// The sync failed: the process must stop and recover from disk.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SyncFailed;

/// One machine's storage: every journal's durable state, plus written-but-unsynced batches.
#[derive(Clone, Debug, Default)]
pub struct SimDisk {
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

impl SimDisk {
    /// Places and removes journals (before the round's writes). Volatile until [`SimDisk::sync`].
    pub fn place(&mut self, placements: &[Placement]) {
        self.unsynced.extend(placements.iter().cloned().map(Unsynced::Place));
    }

    /// Writes one batch of many journals' writes. Volatile until [`SimDisk::sync`].
    pub fn write(&mut self, batch: &[(JournalKey, Vec<WriteOp>)]) {
        for (key, ops) in batch {
            self.unsynced.extend(ops.iter().map(|op| Unsynced::Op(*key, op.clone())));
        }
    }

    /// Makes every write so far durable.
    ///
    /// # Errors
    /// [`SyncFailed`] when the world armed a fault for this sync; the batch was then lost or
    /// persisted as the fault says, and the caller must stop.
    pub fn sync(&mut self) -> Result<(), SyncFailed> {
        self.syncs += 1;
        match self.armed.take() {
            None => {
                self.persist();
                Ok(())
            }
            Some(SyncFault::FailPersisted) => {
                self.persist();
                Err(SyncFailed)
            }
            Some(SyncFault::FailLost) => {
                self.unsynced.clear();
                Err(SyncFailed)
            }
        }
    }

    fn persist(&mut self) {
        for change in std::mem::take(&mut self.unsynced) {
            match change {
                Unsynced::Place(Placement::Put(key, config)) => {
                    self.placed.insert(key, config);
                    self.synced.entry(key).or_default();
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

    /// The journals durably placed here, with their configuration and durable state: what the
    /// machine boots with.
    #[must_use]
    pub fn placed(&self) -> Vec<(JournalKey, JournalConfig, Durable)> {
        self.placed.iter().map(|(k, c)| (*k, c.clone(), self.load(k).for_boot())).collect()
    }

    /// The process died: everything written and not synced is gone.
    pub fn crash(&mut self) {
        self.unsynced.clear();
        self.armed = None;
    }

    /// The disk is replaced by an empty one (only ever done to a replica, which holds no promise).
    pub fn wipe(&mut self) {
        self.synced.clear();
        self.placed.clear();
        self.unsynced.clear();
        self.armed = None;
    }

    /// Arms a fault for the next sync.
    pub fn arm(&mut self, fault: SyncFault) {
        self.armed = Some(fault);
    }

    /// What storage gives back for `key` at boot (empty for a journal never written here).
    #[must_use]
    pub fn load(&self, key: &JournalKey) -> Durable {
        self.synced.get(key).cloned().unwrap_or_default()
    }

    /// The durable state of `key`, without copying.
    #[must_use]
    pub fn durable(&self, key: &JournalKey) -> Option<&Durable> {
        self.synced.get(key)
    }

    /// Writes (and placements) waiting for a sync.
    #[must_use]
    pub fn unsynced_len(&self) -> usize {
        self.unsynced.len()
    }

    /// Syncs attempted so far.
    #[must_use]
    pub fn syncs(&self) -> u64 {
        self.syncs
    }

    /// The writes that became durable since the last call, in the order they were written.
    pub fn take_observed(&mut self) -> Vec<(JournalKey, WriteOp)> {
        std::mem::take(&mut self.observed)
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
        Ok(self.synced.get(journal).map(|d| d.read_range(from, slots_max)).unwrap_or_default())
    }

    /// What was written, synced or not (as fjall reads its memtables; a crash still loses
    /// what was not synced).
    fn load_journal(&self, journal: &JournalKey) -> Result<Option<Durable>, StoreError> {
        let mut durable = self.synced.get(journal).cloned();
        for change in &self.unsynced {
            if let Unsynced::Op(key, op) = change
                && key == journal
            {
                durable.get_or_insert_with(Durable::default).apply(op);
            }
        }
        Ok(durable.map(|d| d.for_boot()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use paros_core::{Ballot, NodeId, Slot};

    fn key() -> JournalKey {
        JournalKey::default()
    }

    fn placed() -> SimDisk {
        let mut d = SimDisk::default();
        let config =
            JournalConfig { mode: paros_core::journal::WriterMode::Single, voters: vec![NodeId(1)], learners: vec![] };
        d.place(&[Placement::Put(key(), config)]);
        d.sync().expect("no fault armed");
        d
    }

    #[test]
    fn a_crash_loses_what_was_not_synced() {
        let mut d = placed();
        let b = Ballot { round: 1, node: NodeId(1) };
        d.write(&[(key(), vec![WriteOp::Promise(b)])]);
        d.sync().expect("no fault armed");
        d.write(&[(key(), vec![WriteOp::Chosen { up_to: Slot(3) }])]);
        d.crash();
        let back = d.load(&key());
        assert_eq!((back.promise, back.chosen_up_to), (b, Slot(0)));
    }

    #[test]
    fn a_failed_sync_may_still_have_persisted_the_batch() {
        let mut d = placed();
        d.write(&[(key(), vec![WriteOp::Chosen { up_to: Slot(2) }])]);
        d.arm(SyncFault::FailPersisted);
        assert_eq!(d.sync(), Err(SyncFailed));
        assert_eq!(d.load(&key()).chosen_up_to, Slot(2));
        d.write(&[(key(), vec![WriteOp::Chosen { up_to: Slot(5) }])]);
        d.arm(SyncFault::FailLost);
        assert_eq!(d.sync(), Err(SyncFailed));
        assert_eq!(d.load(&key()).chosen_up_to, Slot(2));
    }

    #[test]
    fn placements_ride_the_sync_and_a_crash_loses_an_unsynced_one() {
        let mut d = SimDisk::default();
        let config =
            JournalConfig { mode: paros_core::journal::WriterMode::Single, voters: vec![NodeId(1)], learners: vec![] };
        d.place(&[Placement::Put(key(), config.clone())]);
        d.write(&[(key(), vec![WriteOp::Chosen { up_to: Slot(1) }])]);
        d.crash();
        assert!(d.placed().is_empty(), "an unsynced placement is lost in a crash");
        d.write(&[(key(), vec![WriteOp::Chosen { up_to: Slot(1) }])]);
        d.sync().expect("no fault armed");
        assert!(d.durable(&key()).is_none(), "the writes of a journal never placed are dropped");
        d.place(&[Placement::Put(key(), config.clone())]);
        d.write(&[(key(), vec![WriteOp::Chosen { up_to: Slot(2) }])]);
        d.sync().expect("no fault armed");
        assert_eq!(d.placed(), vec![(key(), config, d.load(&key()))]);
        assert_eq!(d.load(&key()).chosen_up_to, Slot(2));
        d.place(&[Placement::Remove(key())]);
        d.sync().expect("no fault armed");
        assert!(d.placed().is_empty() && d.durable(&key()).is_none(), "a durable removal drops the journal's data");
    }
}
