//! Helpers the node's integration tests share.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use paros_core::{Durable, JournalKey, LogEntry, NodeId, Slot, WriteOp};
use paros_node::MemStore;
use paros_node::ports::{LogRead, LogStore, Placement, StoreError, StoredJournal};

/// A fresh id for each request a test sends (the ids callers draw; unique in this process).
pub fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A gate a store's operations wait at while it is shut: a disk that stalls on demand.
#[derive(Debug, Default)]
pub struct Gate {
    shut: Mutex<bool>,
    opened: Condvar,
    /// Operations waiting at the gate now.
    pub waiting: AtomicUsize,
}

impl Gate {
    pub fn set(&self, shut: bool) {
        *self.shut.lock().expect("gate lock") = shut;
        self.opened.notify_all();
    }

    /// Waits here while the gate is shut.
    pub fn pass(&self) {
        let mut shut = self.shut.lock().expect("gate lock");
        self.waiting.fetch_add(1, Ordering::SeqCst);
        while *shut {
            shut = self.opened.wait(shut).expect("gate lock");
        }
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a [`GatedStore`] holds at its gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stall {
    /// Every sync (and a sync fails when the memory store is told to:
    /// [`MemStore::fail_next_sync`]).
    Syncs,
    /// Every range read, and the reads of `wake_of` for a wake.
    Reads { wake_of: JournalKey },
}

/// A memory store that waits at `gate` for what `stall` names: a disk that stalls on demand.
#[derive(Clone, Debug)]
pub struct GatedStore {
    pub disk: MemStore,
    pub gate: Arc<Gate>,
    pub stall: Stall,
}

impl LogRead for GatedStore {
    fn read_range(
        &self,
        journal: &JournalKey,
        from: Slot,
        slots_max: u32,
    ) -> Result<Vec<(Slot, LogEntry)>, StoreError> {
        if matches!(self.stall, Stall::Reads { .. }) {
            self.gate.pass();
        }
        self.disk.read_range(journal, from, slots_max)
    }

    fn load_journal(&self, journal: &JournalKey) -> Result<Option<Durable>, StoreError> {
        if self.stall == (Stall::Reads { wake_of: *journal }) {
            self.gate.pass();
        }
        self.disk.load_journal(journal)
    }
}

impl LogStore for GatedStore {
    type Reader = GatedStore;

    fn reader(&self) -> GatedStore {
        self.clone()
    }
    fn identity(&self) -> Result<Option<NodeId>, StoreError> {
        self.disk.identity()
    }
    fn set_identity(&mut self, node: NodeId) -> Result<(), StoreError> {
        self.disk.set_identity(node)
    }
    fn place(&mut self, placements: &[Placement]) -> Result<(), StoreError> {
        self.disk.place(placements)
    }
    fn write(&mut self, batch: &[(JournalKey, Vec<WriteOp>)]) -> Result<(), StoreError> {
        self.disk.write(batch)
    }
    fn sync(&mut self) -> Result<(), StoreError> {
        if self.stall == Stall::Syncs {
            self.gate.pass();
        }
        self.disk.sync()
    }
    fn load(&self) -> Result<Vec<StoredJournal>, StoreError> {
        self.disk.load()
    }
}
