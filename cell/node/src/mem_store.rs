//! An in-memory [`LogStore`] with crash semantics: writes not yet synced are lost by a crash.
//! Used by tests and by the simulation.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use paros_core::{Durable, JournalConfig, JournalKey, LogEntry, NodeId, Slot, WriteOp};

use crate::ports::{Incarnation, LogRead, LogStore, Placement, StoreError, StoreOp, StoredJournal};

/// A change written and not yet synced, in write order.
#[derive(Debug)]
enum Unsynced {
    Place(Placement),
    Ops(JournalKey, Vec<WriteOp>),
}

#[derive(Debug, Default)]
struct Disk {
    identity: Option<NodeId>,
    incarnation: Option<Incarnation>,
    configs: BTreeMap<JournalKey, JournalConfig>,
    synced: BTreeMap<JournalKey, Durable>,
    unsynced: Vec<Unsynced>,
    fail_next_sync: bool,
    batches: u64,
    syncs: u64,
    reads: u64,
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

    /// Range reads served so far ([`LogRead::read_range`]).
    #[must_use]
    pub fn reads(&self) -> u64 {
        self.disk.lock().expect("disk lock").reads
    }

    /// `(batches written, syncs)` so far.
    #[must_use]
    pub fn counts(&self) -> (u64, u64) {
        let d = self.disk.lock().expect("disk lock");
        (d.batches, d.syncs)
    }
}

impl LogRead for MemStore {
    fn read_range(
        &self,
        journal: &JournalKey,
        from: Slot,
        slots_max: u32,
    ) -> Result<Vec<(Slot, LogEntry)>, StoreError> {
        let mut d = self.disk.lock().expect("disk lock");
        d.reads += 1;
        Ok(d.synced.get(journal).map(|j| j.read_range(from, slots_max)).unwrap_or_default())
    }

    /// What was written, synced or not (as fjall reads its memtables).
    fn load_journal(&self, journal: &JournalKey) -> Result<Option<Durable>, StoreError> {
        let d = self.disk.lock().expect("disk lock");
        let mut durable = d.synced.get(journal).cloned();
        for change in &d.unsynced {
            match change {
                Unsynced::Ops(key, ops) if key == journal => {
                    let j = durable.get_or_insert_with(Durable::default);
                    for op in ops {
                        j.apply(op);
                    }
                }
                Unsynced::Place(Placement::Put(key, _, promise)) if key == journal => {
                    let j = durable.get_or_insert_with(Durable::default);
                    j.promise = j.promise.max(*promise);
                }
                _ => {}
            }
        }
        Ok(durable.map(|j| j.for_boot()))
    }
}

impl LogStore for MemStore {
    type Reader = MemStore;

    fn reader(&self) -> MemStore {
        self.clone()
    }

    fn identity(&self) -> Result<Option<NodeId>, StoreError> {
        Ok(self.disk.lock().expect("disk lock").identity)
    }

    fn set_identity(&mut self, node: NodeId) -> Result<(), StoreError> {
        self.disk.lock().expect("disk lock").identity = Some(node);
        Ok(())
    }

    fn incarnation(&self) -> Result<Option<Incarnation>, StoreError> {
        Ok(self.disk.lock().expect("disk lock").incarnation)
    }

    fn set_incarnation(&mut self, incarnation: Incarnation) -> Result<(), StoreError> {
        let mut d = self.disk.lock().expect("disk lock");
        match d.incarnation {
            Some(recorded) if recorded != incarnation => {
                Err(StoreError::IncarnationTaken { recorded, offered: incarnation })
            }
            _ => {
                d.incarnation = Some(incarnation);
                Ok(())
            }
        }
    }

    fn place(&mut self, placements: &[Placement]) -> Result<(), StoreError> {
        let mut d = self.disk.lock().expect("disk lock");
        d.unsynced.extend(placements.iter().cloned().map(Unsynced::Place));
        Ok(())
    }

    fn write(&mut self, batch: &[(JournalKey, Vec<WriteOp>)]) -> Result<(), StoreError> {
        let mut d = self.disk.lock().expect("disk lock");
        d.batches += 1;
        d.unsynced.extend(batch.iter().cloned().map(|(key, ops)| Unsynced::Ops(key, ops)));
        Ok(())
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        let mut d = self.disk.lock().expect("disk lock");
        if std::mem::take(&mut d.fail_next_sync) {
            d.unsynced.clear();
            return Err(StoreError::Engine { op: StoreOp::Sync, source: "injected sync failure".into() });
        }
        d.syncs += 1;
        let pending = std::mem::take(&mut d.unsynced);
        for change in pending {
            match change {
                Unsynced::Place(Placement::Put(key, config, promise)) => {
                    d.configs.insert(key, config);
                    let durable = d.synced.entry(key).or_default();
                    durable.promise = durable.promise.max(promise);
                }
                Unsynced::Place(Placement::Remove(key)) => {
                    d.configs.remove(&key);
                    d.synced.remove(&key);
                }
                // Writes of a journal that is not placed (removed earlier) are dropped: the
                // host removes a journal only after its last round left.
                Unsynced::Ops(key, ops) if d.configs.contains_key(&key) => {
                    let durable = d.synced.entry(key).or_default();
                    for op in &ops {
                        durable.apply(op);
                    }
                }
                Unsynced::Ops(..) => {}
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
                durable: d.synced.get(key).map(Durable::for_boot).unwrap_or_default(),
            })
            .collect())
    }
}
