//! An in-memory [`LogStore`] with crash semantics: writes not yet synced are lost by a crash.
//! Used by tests and by the simulation.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use paros_core::{Durable, JournalConfig, JournalKey, NodeId, WriteOp};

use crate::ports::{LogStore, StoreError, StoredJournal};

#[derive(Debug, Default)]
struct Disk {
    identity: Option<NodeId>,
    configs: BTreeMap<JournalKey, JournalConfig>,
    synced: BTreeMap<JournalKey, Durable>,
    unsynced: Vec<(JournalKey, Vec<WriteOp>)>,
    fail_next_sync: bool,
    batches: u64,
    syncs: u64,
}

/// A machine's disk in memory. Clones share the disk, so a test can "crash" the process
/// holding one handle and boot a new host over another.
#[derive(Clone, Debug, Default)]
pub struct MemStore {
    disk: Arc<Mutex<Disk>>,
}

impl MemStore {
    #[must_use]
    pub fn new() -> MemStore {
        MemStore::default()
    }

    /// Loses every write not yet synced, as a power cut would.
    pub fn crash(&self) {
        self.disk.lock().expect("disk lock").unsynced.clear();
    }

    /// Wipes the disk entirely (a replaced drive).
    pub fn wipe(&self) {
        *self.disk.lock().expect("disk lock") = Disk::default();
    }

    /// Makes the next sync fail (fault injection).
    pub fn fail_next_sync(&self) {
        self.disk.lock().expect("disk lock").fail_next_sync = true;
    }

    /// `(batches written, syncs)` so far.
    #[must_use]
    pub fn counts(&self) -> (u64, u64) {
        let d = self.disk.lock().expect("disk lock");
        (d.batches, d.syncs)
    }
}

impl LogStore for MemStore {
    fn identity(&self) -> Result<Option<NodeId>, StoreError> {
        Ok(self.disk.lock().expect("disk lock").identity)
    }

    fn set_identity(&mut self, node: NodeId) -> Result<(), StoreError> {
        self.disk.lock().expect("disk lock").identity = Some(node);
        Ok(())
    }

    fn put_config(&mut self, key: JournalKey, config: &JournalConfig) -> Result<(), StoreError> {
        let mut d = self.disk.lock().expect("disk lock");
        d.configs.insert(key, config.clone());
        d.synced.entry(key).or_default();
        Ok(())
    }

    fn write(&mut self, batch: &[(JournalKey, Vec<WriteOp>)]) -> Result<(), StoreError> {
        let mut d = self.disk.lock().expect("disk lock");
        d.batches += 1;
        d.unsynced.extend(batch.iter().cloned());
        Ok(())
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        let mut d = self.disk.lock().expect("disk lock");
        if std::mem::take(&mut d.fail_next_sync) {
            d.unsynced.clear();
            return Err(StoreError::Sync("injected sync failure".into()));
        }
        d.syncs += 1;
        let pending = std::mem::take(&mut d.unsynced);
        for (key, ops) in pending {
            let durable = d.synced.entry(key).or_default();
            for op in &ops {
                durable.apply(op);
            }
        }
        Ok(())
    }

    fn load(&self) -> Result<Vec<StoredJournal>, StoreError> {
        let d = self.disk.lock().expect("disk lock");
        Ok(d.configs
            .iter()
            .map(|(key, config)| StoredJournal {
                key: *key,
                config: config.clone(),
                durable: d.synced.get(key).cloned().unwrap_or_default(),
            })
            .collect())
    }
}
