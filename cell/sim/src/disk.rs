//! A simulated disk for one machine: writes land in a volatile buffer, a sync makes them durable,
//! a crash loses whatever was not synced, and a failed sync is unknown (the batch may or may not
//! have reached the platter) and stops the process.
//!
//! The surface mirrors the node host's `LogStore` port (`write` one atomic batch of many
//! journals, `sync` once, `load` at boot), so a host written against that port can run on it.

use std::collections::BTreeMap;

use paros_core::{Durable, JournalKey, WriteOp};

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
    unsynced: Vec<(JournalKey, WriteOp)>,
    armed: Option<SyncFault>,
    /// Writes that became durable since the auditor last looked, in order.
    observed: Vec<(JournalKey, WriteOp)>,
    syncs: u64,
}

impl SimDisk {
    /// Writes one batch of many journals' writes. Volatile until [`SimDisk::sync`].
    pub fn write(&mut self, batch: &[(JournalKey, Vec<WriteOp>)]) {
        for (key, ops) in batch {
            self.unsynced.extend(ops.iter().map(|op| (*key, op.clone())));
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
        for (key, op) in std::mem::take(&mut self.unsynced) {
            self.synced.entry(key).or_default().apply(&op);
            self.observed.push((key, op));
        }
    }

    /// The process died: everything written and not synced is gone.
    pub fn crash(&mut self) {
        self.unsynced.clear();
        self.armed = None;
    }

    /// The disk is replaced by an empty one (only ever done to a replica, which holds no promise).
    pub fn wipe(&mut self) {
        self.synced.clear();
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

    /// Writes waiting for a sync.
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

#[cfg(test)]
mod tests {
    use super::*;
    use paros_core::{Ballot, NodeId, Slot};

    fn key() -> JournalKey {
        JournalKey::default()
    }

    #[test]
    fn a_crash_loses_what_was_not_synced() {
        let mut d = SimDisk::default();
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
        let mut d = SimDisk::default();
        d.write(&[(key(), vec![WriteOp::Chosen { up_to: Slot(2) }])]);
        d.arm(SyncFault::FailPersisted);
        assert_eq!(d.sync(), Err(SyncFailed));
        assert_eq!(d.load(&key()).chosen_up_to, Slot(2));
        d.write(&[(key(), vec![WriteOp::Chosen { up_to: Slot(5) }])]);
        d.arm(SyncFault::FailLost);
        assert_eq!(d.sync(), Err(SyncFailed));
        assert_eq!(d.load(&key()).chosen_up_to, Slot(2));
    }
}
