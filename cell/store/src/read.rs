//! Reading a journal back: what boot needs of it ([`read_durable`]), a range of its retained
//! log ([`read_log_range`]), and [`FjallReader`], the handle that does both from another
//! thread.

use std::fmt;
use std::sync::Arc;

use fjall::Database;
use paros_core::{Ballot, Durable, JournalKey, LogEntry, Slot};
use paros_node::ports::{LogRead, StoreError};

use crate::apply::Shared;
use crate::error::corrupt;
use crate::floors::Floors;
use crate::keys;
use crate::spaces::{Space, Spaces};
use crate::values::{StateRow, decode, decode_anchor, decode_state_row};
use crate::view::View;

/// What boot reads for `key`: promise, state row, anchors above the floor, and the entries
/// from [`Durable::boot_start`] on (the retained log below it is never read).
pub(crate) fn read_durable(view: &View<'_>, key: JournalKey) -> Result<Durable, StoreError> {
    let prefix = keys::journal(key);
    let promise = match view.get(Space::Promise, &prefix)? {
        Some(raw) => decode(&raw, "promise", &prefix)?,
        None => Ballot::ZERO,
    };
    let row: StateRow = match view.get(Space::State, &prefix)? {
        Some(raw) => decode_state_row(&raw, &prefix)?,
        None => StateRow::default(),
    };
    let last = keys::log(key, Slot(u64::MAX));
    // Slots below the floor may still be on disk (reclaimed later): never read them.
    let mut anchors = Vec::new();
    for (k, v) in view.range(Space::Anchor, &keys::log(key, Slot(row.floor.0.saturating_add(1))), &last, usize::MAX)? {
        let slot = keys::decode_slot(&k).ok_or_else(|| corrupt("anchor key", &k))?;
        anchors.push((slot, decode_anchor(&v, &k)?));
    }
    let mut durable = Durable {
        promise,
        floor: row.floor,
        sealed: row.sealed,
        chosen_up_to: row.chosen_up_to,
        anchors,
        entries: Vec::new(),
    };
    for (k, v) in view.range(Space::Log, &keys::log(key, durable.boot_start()), &last, usize::MAX)? {
        let slot = keys::decode_slot(&k).ok_or_else(|| corrupt("log key", &k))?;
        durable.entries.push((slot, decode(&v, "log entry", &k)?));
    }
    Ok(durable)
}

/// A read handle on a [`FjallStore`](crate::store::FjallStore)'s keyspaces, for the node thread while the store is lent
/// to the storage thread.
#[derive(Clone)]
pub struct FjallReader {
    db: Database,
    spaces: Spaces,
    shared: Arc<Shared>,
    floors: Arc<Floors>,
}

impl fmt::Debug for FjallReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FjallReader").finish_non_exhaustive()
    }
}

/// Up to `slots_max` entries of `journal` from `from` on, never below its durable floor.
pub(crate) fn read_log_range(
    view: &View<'_>,
    floors: &Floors,
    journal: &JournalKey,
    from: Slot,
    slots_max: u32,
) -> Result<Vec<(Slot, LogEntry)>, StoreError> {
    let prefix = keys::journal(*journal);
    // Below a durable floor, dropped data may resurface (drops leave no tombstone): start at it.
    let from = from.max(Slot(floors.get(&prefix).unwrap_or(0)));
    let mut out = Vec::new();
    for (k, v) in
        view.range(Space::Log, &keys::log(*journal, from), &keys::log(*journal, Slot(u64::MAX)), slots_max as usize)?
    {
        let slot = keys::decode_slot(&k).ok_or_else(|| corrupt("log key", &k))?;
        out.push((slot, decode(&v, "log entry", &k)?));
    }
    Ok(out)
}

impl FjallReader {
    /// A reader of `db`'s `spaces`, the pending rounds in `shared` over them.
    pub(crate) fn new(db: Database, spaces: Spaces, shared: Arc<Shared>, floors: Arc<Floors>) -> FjallReader {
        FjallReader { db, spaces, shared, floors }
    }

    fn view(&self) -> View<'_> {
        View::new(&self.shared, &self.db, &self.spaces)
    }
}

impl LogRead for FjallReader {
    fn read_range(
        &self,
        journal: &JournalKey,
        from: Slot,
        slots_max: u32,
    ) -> Result<Vec<(Slot, LogEntry)>, StoreError> {
        read_log_range(&self.view(), &self.floors, journal, from, slots_max)
    }

    fn load_journal(&self, journal: &JournalKey) -> Result<Option<Durable>, StoreError> {
        read_durable(&self.view(), *journal).map(Some)
    }
}
