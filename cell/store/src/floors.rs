//! Durable floors and incarnations: what no reader, ingestion or compaction may keep.
//!
//! A journal's floor is published here only once the round that raised it is synced, and the
//! generation a removed journal's next incarnation starts at once its removal is applied (see
//! [`crate::reclaim`]).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError, RwLock};

use crate::keys::JOURNAL_LEN;

/// The durable floor of every journal that has one above slot 0, and the generation each
/// removed journal's current incarnation starts at, keyed by the journal's key prefix; shared
/// by the store, the applier, the readers, the compaction filter and the reclaimer.
#[derive(Debug, Default)]
pub(crate) struct Floors {
    floors: RwLock<HashMap<[u8; JOURNAL_LEN], u64>>,
    since: RwLock<HashMap<[u8; JOURNAL_LEN], u64>>,
    /// Held by the reclaimer while it judges one journal's rows or collects a generation, by
    /// the store while it removes a journal and by the applier while it marks a removal, so
    /// nothing of a later incarnation of the same key is ever judged by an earlier one's floor.
    pub(crate) gate: Mutex<()>,
}

impl Floors {
    pub(crate) fn get(&self, journal: &[u8; JOURNAL_LEN]) -> Option<u64> {
        self.floors.read().unwrap_or_else(PoisonError::into_inner).get(journal).copied()
    }

    /// The first generation of the journal's current incarnation (0 if it was never removed).
    pub(crate) fn since(&self, journal: &[u8; JOURNAL_LEN]) -> u64 {
        self.since.read().unwrap_or_else(PoisonError::into_inner).get(journal).copied().unwrap_or(0)
    }

    /// Whether an entry of `journal` at `slot` in `generation` may still be read.
    pub(crate) fn live(&self, generation: u64, journal: &[u8; JOURNAL_LEN], slot: u64) -> bool {
        generation >= self.since(journal) && slot >= self.get(journal).unwrap_or(0)
    }

    /// Publishes durable floors (only ever raises one).
    pub(crate) fn publish(&self, floors: impl IntoIterator<Item = ([u8; JOURNAL_LEN], u64)>) {
        raise(&self.floors, floors);
    }

    /// Publishes where removed journals' current incarnations start (only ever raises one).
    /// The caller holds `gate`.
    pub(crate) fn publish_since(&self, since: impl IntoIterator<Item = ([u8; JOURNAL_LEN], u64)>) {
        raise(&self.since, since);
    }

    /// Forgets a removed journal's floor, waiting for a judgement of its rows in progress.
    pub(crate) fn forget(&self, journal: &[u8; JOURNAL_LEN]) {
        let _gate = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
        self.floors.write().unwrap_or_else(PoisonError::into_inner).remove(journal);
    }
}

/// Raises each journal's value in `map` to the one given, never lowers it.
fn raise(map: &RwLock<HashMap<[u8; JOURNAL_LEN], u64>>, values: impl IntoIterator<Item = ([u8; JOURNAL_LEN], u64)>) {
    let mut map = map.write().unwrap_or_else(PoisonError::into_inner);
    for (journal, value) in values {
        let at = map.entry(journal).or_insert(0);
        *at = (*at).max(value);
    }
}
