//! [`FjallStore`]: the machine's [`LogStore`], the single committer's side of the store.
//!
//! `write` and `place` turn a round into one record of the write-ahead log, `sync` makes it
//! durable with one fdatasync; the applier ([`crate::apply`]) takes it into fjall later. Each
//! journal's `state` row is cached here, so a write never reads the disk.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fjall::{Database, PersistMode};
use paros_core::{Ballot, Durable, JournalConfig, JournalKey, LogEntry, NodeId, Slot, WriteOp};
use paros_node::ports::{Incarnation, LogRead, LogStore, Placement, StoreError, StoreOp, StoredJournal};

use crate::apply::{self, Applier, Pace, Shared};
use crate::error::{corrupt, engine};
use crate::floors::Floors;
use crate::gens;
use crate::keys;
use crate::open::{self, Opened};
use crate::options::StoreOptions;
use crate::probe::StoreProbe;
use crate::read::{FjallReader, read_durable, read_log_range};
use crate::reclaim::Reclaimer;
use crate::spaces::{Space, Spaces};
use crate::values::{StateRow, decode, decode_state_row, encode, encode_log_entry};
use crate::view::View;
use crate::wal::{self, Spares, Wal};

/// Counters of what this handle has done since it was opened.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct StoreStats {
    /// Non-empty [`LogStore::write`] calls, each one atomic fjall batch.
    pub batches: u64,
    /// fdatasyncs issued: [`LogStore::sync`] calls plus the syncs of `set_identity` and of
    /// writing the format marker at first open.
    pub syncs: u64,
    /// [`WriteOp`]s passed to [`LogStore::write`].
    pub ops: u64,
}

/// A [`LogStore`] on one fjall database behind a write-ahead log of its own (see
/// [`crate::wal`] and [`crate::apply`]). See the crate docs for the layout.
pub struct FjallStore {
    /// First, so its thread (which holds a handle on `log`) stops before the database closes.
    reclaimer: Reclaimer,
    /// Applies synced rounds to fjall; finished (every synced round applied) in `drop`.
    applier: Applier,
    /// Rounds written but not yet in fjall, shared with the applier and the readers.
    shared: Arc<Shared>,
    wal: Wal,
    /// The newest round written (rounds are numbered from 1 within one open).
    round: u64,
    pace: Pace,
    /// How many retired log segments are kept for reuse.
    spares: Spares,
    pending_bytes_max: u64,
    /// Durable floors, read by the compaction filter and the reclaimer.
    floors: Arc<Floors>,
    /// Floors this round's `write` raised, published once `sync` made them durable.
    unsynced_floors: Vec<([u8; keys::JOURNAL_LEN], u64)>,
    path: PathBuf,
    db: Database,
    spaces: Spaces,
    /// Every journal's `state` row as committed: `write` never reads it from disk.
    rows: HashMap<JournalKey, StateRow>,
    fresh: bool,
    stats: StoreStats,
}

impl fmt::Debug for FjallStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FjallStore")
            .field("path", &self.path)
            .field("journals_with_state", &self.rows.len())
            .field("fresh", &self.fresh)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl FjallStore {
    /// Opens (or creates) the store at `path`.
    ///
    /// A store with nothing in it is initialised with the format marker (made durable before
    /// this returns) and reports [`FjallStore::is_fresh`]. Every journal's state row is read
    /// into memory.
    ///
    /// # Errors
    /// [`StoreError::Format`] when the store was written in another format (or holds data but
    /// no marker: `found: 0`); [`StoreError::Engine`] or [`StoreError::File`] when fjall or the
    /// write-ahead log cannot be opened, read, written or synced; [`StoreError::Corrupt`] or
    /// [`StoreError::CorruptLog`] for stored bytes that do not parse.
    pub fn open(path: &Path) -> Result<FjallStore, StoreError> {
        FjallStore::open_with(path, StoreOptions::default())
    }

    /// [`FjallStore::open`] with these options.
    ///
    /// # Errors
    /// As [`FjallStore::open`]; [`StoreError::OptionTooSmall`] too when `journal_bytes_max` is
    /// below 64 MiB, and [`StoreError::Spawn`] when a background thread cannot start.
    pub fn open_with(path: &Path, opts: StoreOptions) -> Result<FjallStore, StoreError> {
        let Opened { db, spaces, shared, floors, wal, pace, spares, reclaimer, applier, fresh } =
            open::open(path, opts)?;
        let mut store = FjallStore {
            reclaimer,
            applier,
            shared,
            wal,
            round: 0,
            pace,
            spares,
            pending_bytes_max: opts.pending_bytes_max,
            floors,
            unsynced_floors: Vec::new(),
            path: path.to_path_buf(),
            db,
            spaces,
            rows: HashMap::new(),
            fresh,
            stats: StoreStats::default(),
        };
        if fresh {
            store.stats.syncs += 1;
        }
        store.load_rows()?;
        Ok(store)
    }

    /// Reads every journal's `state` row into memory, publishes the floors they hold (durable,
    /// being on disk) and has the reclaimer look below them: a crash may have come before.
    fn load_rows(&mut self) -> Result<(), StoreError> {
        for item in self.spaces.state.iter() {
            let (k, v) = item.into_inner().map_err(engine(StoreOp::Read))?;
            let key = keys::decode_journal(&k).ok_or_else(|| corrupt("state key", &k))?;
            self.rows.insert(key, decode_state_row(&v, &k)?);
        }
        let floors: Vec<_> =
            self.rows.iter().filter(|(_, r)| r.floor > Slot(0)).map(|(k, r)| (keys::journal(*k), r.floor.0)).collect();
        self.floors.publish(floors.iter().copied());
        let mut wake: Vec<_> = floors.into_iter().map(|(k, _)| k).collect();
        wake.extend(gens::since_rows(&self.spaces.gens)?.into_iter().map(|(k, _)| k));
        self.reclaimer.wake(wake);
        Ok(())
    }

    /// Whether this handle found the store empty (no format marker, no data) and created it.
    ///
    /// A node that already has an identity elsewhere (peers, configuration) and opens a fresh
    /// store has lost its disk, and with it its promises: it must not rejoin under that
    /// identity (exit code 78).
    #[must_use]
    pub fn is_fresh(&self) -> bool {
        self.fresh
    }

    /// The directory this store lives in.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A handle on this store's background activity.
    #[must_use]
    pub fn probe(&self) -> StoreProbe {
        StoreProbe::new(self.db.clone(), self.spaces.records.clone(), Arc::clone(&self.shared), self.path.clone())
    }

    /// What this handle has written and synced since it was opened.
    #[must_use]
    pub fn stats(&self) -> StoreStats {
        self.stats
    }

    fn view(&self) -> View<'_> {
        View::new(&self.shared, &self.db, &self.spaces)
    }

    fn persist(&mut self) -> Result<(), StoreError> {
        self.db.persist(PersistMode::SyncData).map_err(engine(StoreOp::Sync))?;
        self.stats.syncs += 1;
        Ok(())
    }

    /// Bytes of written rounds that fjall does not hold yet (read from memory until it does).
    #[must_use]
    pub fn pending_bytes(&self) -> u64 {
        self.shared.pending_bytes()
    }

    /// Waits until fjall holds every synced round (none is read from memory any more).
    ///
    /// # Errors
    /// The applier's failure.
    pub fn settle(&self) -> Result<(), StoreError> {
        self.shared.settle()
    }

    /// Appends `changes` (sorted by `(space, key)`, each key once) to the log as one round and
    /// hands it to the applier; waits first while too much is pending.
    fn append_round(&mut self, changes: Vec<wal::Change>) -> Result<(), StoreError> {
        if self.shared.pending_bytes() > self.pending_bytes_max {
            // What is pending may all be unsynced, and the applier takes only synced rounds.
            if self.wal.has_unsynced() {
                self.sync_log()?;
            }
            self.shared.wait_for_room(self.pending_bytes_max)?;
        }
        self.wal.append(&changes)?;
        self.round += 1;
        self.shared.push(apply::Round::new(self.round, changes))
    }

    /// Makes every round written so far durable in the log.
    fn sync_log(&mut self) -> Result<(), StoreError> {
        let closed = self.wal.sync()?;
        self.shared.synced(self.round, closed, self.pace);
        self.stats.syncs += 1;
        Ok(())
    }
}

impl Drop for FjallStore {
    /// Syncs the log, lets the applier apply every round, makes fjall durable over them and
    /// removes the log's last segment, so the next open has nothing to replay. Any failure
    /// leaves the log in place for that open to replay.
    fn drop(&mut self) {
        let synced = self.sync_log().is_ok();
        self.applier.finish();
        if synced && self.shared.pending_bytes() == 0 && self.db.persist(PersistMode::SyncData).is_ok() {
            let _ = self.wal.retire_current(self.spares);
        }
    }
}

impl LogRead for FjallStore {
    fn read_range(
        &self,
        journal: &JournalKey,
        from: Slot,
        slots_max: u32,
    ) -> Result<Vec<(Slot, LogEntry)>, StoreError> {
        let floor = self.rows.get(journal).map_or(Slot(0), |r| r.floor);
        read_log_range(&self.view(), &self.floors, journal, from.max(floor), slots_max)
    }

    fn load_journal(&self, journal: &JournalKey) -> Result<Option<Durable>, StoreError> {
        read_durable(&self.view(), *journal).map(Some)
    }
}

impl LogStore for FjallStore {
    type Reader = FjallReader;

    fn reader(&self) -> FjallReader {
        FjallReader::new(self.db.clone(), self.spaces.clone(), Arc::clone(&self.shared), Arc::clone(&self.floors))
    }

    fn identity(&self) -> Result<Option<NodeId>, StoreError> {
        match self.spaces.meta.get(keys::META_IDENTITY).map_err(engine(StoreOp::Read))? {
            Some(raw) => Ok(Some(decode(&raw, "identity", keys::META_IDENTITY)?)),
            None => Ok(None),
        }
    }

    /// Records `node` and syncs. Idempotent for the identity already recorded; refuses
    /// ([`StoreError::IdentityTaken`]) to replace a different one, since the promises on disk
    /// were made under it.
    fn set_identity(&mut self, node: NodeId) -> Result<(), StoreError> {
        match self.identity()? {
            Some(have) if have == node => return Ok(()),
            Some(recorded) => return Err(StoreError::IdentityTaken { recorded, offered: node }),
            None => {}
        }
        self.spaces.meta.insert(keys::META_IDENTITY, encode(&node, "identity")?).map_err(engine(StoreOp::Write))?;
        self.persist()
    }

    fn incarnation(&self) -> Result<Option<Incarnation>, StoreError> {
        let key = keys::META_INCARNATION;
        match self.spaces.meta.get(key).map_err(engine(StoreOp::Read))? {
            Some(raw) => {
                let raw: [u8; 8] = raw.as_ref().try_into().map_err(|_| corrupt("incarnation", key))?;
                Ok(Some(Incarnation(u64::from_be_bytes(raw))))
            }
            None => Ok(None),
        }
    }

    /// Records `incarnation` and syncs. Idempotent for the one already recorded; refuses
    /// ([`StoreError::IncarnationTaken`]) another: a store is formatted once.
    fn set_incarnation(&mut self, incarnation: Incarnation) -> Result<(), StoreError> {
        match self.incarnation()? {
            Some(have) if have == incarnation => return Ok(()),
            Some(recorded) => return Err(StoreError::IncarnationTaken { recorded, offered: incarnation }),
            None => {}
        }
        let raw = incarnation.0.to_be_bytes();
        self.spaces.meta.insert(keys::META_INCARNATION, raw).map_err(engine(StoreOp::Write))?;
        self.persist()
    }

    /// One round in the log for all of `placements`, not synced: a `Put` writes the config
    /// row; a `Remove` removes the config, promise and state rows and every log key the
    /// journal holds.
    fn place(&mut self, placements: &[Placement]) -> Result<(), StoreError> {
        if placements.is_empty() {
            return Ok(());
        }
        let mut staged: BTreeMap<(Space, Vec<u8>), Option<Vec<u8>>> = BTreeMap::new();
        {
            let view = self.view();
            for p in placements {
                match p {
                    Placement::Put(key, config, promise) => {
                        staged.insert((Space::Meta, keys::config(*key)), Some(encode(config, "journal config")?));
                        // A seat that begins after the journal's founding: its floor rides the
                        // same atomic change as the configuration, never one without the other.
                        if *promise != Ballot::ZERO {
                            let row = keys::journal(*key).to_vec();
                            staged.insert((Space::Promise, row), Some(encode(promise, "promise")?));
                        }
                    }
                    Placement::Remove(key) => {
                        let prefix = keys::journal(*key);
                        staged.insert((Space::Meta, keys::config(*key)), None);
                        staged.insert((Space::Promise, prefix.to_vec()), None);
                        staged.insert((Space::State, prefix.to_vec()), None);
                        // Hides every generation written so far from the next incarnation.
                        staged.insert((Space::Gens, gens::since_row_key(&prefix).to_vec()), None);
                        // Everything under the prefix, below the floor too: a later
                        // incarnation of this key starts at floor 0 and must not see the old
                        // records.
                        let (lo, hi) = (keys::log(*key, Slot(0)), keys::log(*key, Slot(u64::MAX)));
                        for space in [Space::Log, Space::Anchor] {
                            for (k, _) in view.range(space, &lo, &hi, usize::MAX)? {
                                staged.insert((space, k), None);
                            }
                        }
                    }
                }
            }
        }
        for p in placements {
            if let Placement::Remove(key) = p {
                let prefix = keys::journal(*key);
                self.rows.remove(key);
                self.floors.forget(&prefix);
                self.unsynced_floors.retain(|(j, _)| *j != prefix);
            }
        }
        let changes = staged.into_iter().map(|((space, key), value)| wal::Change { space, key, value }).collect();
        self.append_round(changes)?;
        self.stats.batches += 1;
        Ok(())
    }

    fn write(&mut self, batch: &[(JournalKey, Vec<WriteOp>)]) -> Result<(), StoreError> {
        // Every change of this call, last one per key wins: a round names each key at most once.
        let mut staged: BTreeMap<(Space, Vec<u8>), Vec<u8>> = BTreeMap::new();
        let mut rows: HashMap<JournalKey, StateRow> = HashMap::with_capacity(batch.len());
        let mut ops = 0u64;

        for (journal, journal_ops) in batch {
            let mut row = rows.get(journal).or_else(|| self.rows.get(journal)).copied().unwrap_or_default();
            let before = row;
            for op in journal_ops {
                ops += 1;
                match op {
                    WriteOp::Promise(ballot) => {
                        staged.insert((Space::Promise, keys::journal(*journal).to_vec()), encode(ballot, "promise")?);
                    }
                    WriteOp::Accept { slot, ballot, command } => {
                        if *slot >= row.floor {
                            let value = encode_log_entry(Some(*ballot), command)?;
                            staged.insert((Space::Log, keys::log(*journal, *slot).to_vec()), value);
                        }
                    }
                    WriteOp::Learn { slot, command } => {
                        if *slot >= row.floor {
                            let value = encode_log_entry(None, command)?;
                            staged.insert((Space::Log, keys::log(*journal, *slot).to_vec()), value);
                        }
                    }
                    WriteOp::Chosen { up_to } => row.chosen_up_to = row.chosen_up_to.max(*up_to),
                    WriteOp::Anchor { slot, state } => {
                        if *slot > row.floor {
                            let value = encode(state, "anchor")?;
                            staged.insert((Space::Anchor, keys::log(*journal, *slot).to_vec()), value);
                        }
                    }
                    WriteOp::Truncate { floor, sealed } | WriteOp::TrimmedTo { point: floor, state: sealed } => {
                        if *floor > row.floor {
                            // No tombstones: reads ignore what lies below the floor, and the
                            // reclaimer removes it once this floor is durable.
                            self.unsynced_floors.push((keys::journal(*journal), floor.0));
                            // What this batch staged below the new floor need not be written.
                            let lo = (Space::Log, keys::log(*journal, row.floor).to_vec());
                            let hi = (Space::Log, keys::log(*journal, *floor).to_vec());
                            let dead: Vec<_> = staged.range(lo..hi).map(|(k, _)| k.clone()).collect();
                            for k in dead {
                                staged.remove(&k);
                            }
                            row.floor = *floor;
                            row.sealed = *sealed;
                        }
                        if matches!(op, WriteOp::TrimmedTo { .. }) {
                            row.chosen_up_to = row.chosen_up_to.max(*floor);
                        }
                    }
                }
            }
            if row != before {
                staged.insert((Space::State, keys::journal(*journal).to_vec()), encode(&row, "state row")?);
            }
            rows.insert(*journal, row);
        }

        if staged.is_empty() {
            self.stats.ops += ops;
            return Ok(());
        }
        let changes =
            staged.into_iter().map(|((space, key), value)| wal::Change { space, key, value: Some(value) }).collect();
        self.append_round(changes)?;

        self.rows.extend(rows);
        self.stats.batches += 1;
        self.stats.ops += ops;
        Ok(())
    }

    /// One fdatasync of the write-ahead log; fjall takes the rounds later, off this thread.
    fn sync(&mut self) -> Result<(), StoreError> {
        self.sync_log()?;
        if !self.unsynced_floors.is_empty() {
            let raised = std::mem::take(&mut self.unsynced_floors);
            let journals = raised.iter().map(|(j, _)| *j).collect();
            self.floors.publish(raised);
            self.shared.reclaim_after(self.round, journals);
        }
        Ok(())
    }

    fn load_configs(&self) -> Result<Vec<(JournalKey, JournalConfig)>, StoreError> {
        let (lo, hi) = keys::config_bounds();
        let mut out = Vec::new();
        for (k, v) in self.view().range(Space::Meta, &lo, &hi, usize::MAX)? {
            let key = keys::decode_config(&k).ok_or_else(|| corrupt("meta config key", &k))?;
            out.push((key, decode(&v, "journal config", &k)?));
        }
        Ok(out)
    }

    /// Reads every journal that has a config, from one consistent view, ordered by key.
    fn load(&self) -> Result<Vec<StoredJournal>, StoreError> {
        let view = self.view();
        let (lo, hi) = keys::config_bounds();
        let mut out = Vec::new();
        for (k, v) in view.range(Space::Meta, &lo, &hi, usize::MAX)? {
            let key = keys::decode_config(&k).ok_or_else(|| corrupt("meta config key", &k))?;
            let config: JournalConfig = decode(&v, "journal config", &k)?;
            let durable = read_durable(&view, key)?;
            out.push(StoredJournal { key, config, durable });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use paros_core::journal::{Command, Control, JournalState};
    use paros_core::{Ballot, JournalId, TenantId};

    use super::*;

    fn jk(journal: u64) -> JournalKey {
        JournalKey { tenant: TenantId(1), journal: JournalId(journal) }
    }

    /// Entries of `key` in `records`, whatever their generation, read or not.
    fn raw_log_keys(store: &FjallStore, key: JournalKey) -> usize {
        let journal = keys::journal(key);
        store
            .spaces
            .records
            .iter()
            .filter_map(|item| item.key().ok())
            .filter(|k| gens::split_record(k).is_some_and(|(_, j, _)| j == journal))
            .count()
    }

    /// Journals whose keys share every table: when fjall does rewrite one, the compaction
    /// filter destroys what lies below a durable floor.
    #[test]
    fn compaction_destroys_records_below_a_durable_floor_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = FjallStore::open(dir.path()).unwrap();
        let (a, b) = (jk(1), jk(2));
        let ballot = Ballot { round: 1, node: NodeId(1) };
        let noop = || Command::Control(Control::Noop);
        for slot in 0..100 {
            let op = || WriteOp::Accept { slot: Slot(slot), ballot, command: noop() };
            store.write(&[(a, vec![op()]), (b, vec![op()])]).unwrap();
            store.sync().unwrap();
        }
        store.settle().unwrap();
        store.spaces.records.rotate_memtable_and_wait().unwrap();
        let sealed = JournalState::default();
        store.write(&[(a, vec![WriteOp::Truncate { floor: Slot(60), sealed }])]).unwrap();

        // Not yet durable: a compaction now must keep every record.
        store.spaces.records.major_compact().unwrap();
        assert_eq!(raw_log_keys(&store, a), 100, "a floor not yet synced destroys nothing");

        store.sync().unwrap();
        store.spaces.records.major_compact().unwrap();
        assert_eq!(raw_log_keys(&store, a), 40, "records below a's durable floor are gone");
        assert_eq!(raw_log_keys(&store, b), 100, "b keeps every record");
    }

    /// The point of generations: however many runs are ingested and however often fjall
    /// compacts, `records` tables are only moved, never merged (a merge would write a table
    /// spanning several generations). Fails if an fjall upgrade starts rewriting them.
    #[test]
    fn records_tables_are_moved_never_merged() {
        let dir = tempfile::tempdir().unwrap();
        let opts = StoreOptions { wal_segment_bytes: 64 << 10, l0_tables: 4, ..StoreOptions::default() };
        let mut store = FjallStore::open_with(dir.path(), opts).unwrap();
        let (a, b) = (jk(1), jk(2));
        let ballot = Ballot { round: 1, node: NodeId(1) };
        let command = |slot: u64| {
            Command::Write(paros_core::journal::Entry {
                leader: paros_core::LeaderUuid::new(7),
                seq: paros_core::Seq(slot),
                records: vec![bytes::Bytes::from(vec![7u8; 1000])],
            })
        };
        for slot in 0..2000u64 {
            let op = || WriteOp::Accept { slot: Slot(slot), ballot, command: command(slot) };
            store.write(&[(a, vec![op()]), (b, vec![op()])]).unwrap();
            store.sync().unwrap();
            if slot % 50 == 49 {
                // One generation at least every 50 slots, however the applier batches.
                store.settle().unwrap();
            }
        }
        let records = &store.spaces.records;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while records.l0_table_count() >= usize::from(opts.l0_tables) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let generations = gens::totals(&store.spaces.gens).unwrap().len();
        let version = fjall::AbstractTree::current_version(&records.tree);
        let tables: Vec<_> = version.iter_tables().collect();
        assert!(generations >= 20, "the writes made many generations ({generations})");
        assert!(records.l0_table_count() < tables.len(), "fjall compacted: tables left level 0");
        assert_eq!(tables.len(), generations, "one table per (small) generation: none merged");
        for t in tables {
            let range = &t.metadata.key_range;
            let (lo, hi) = (gens::split_record(range.min()).unwrap().0, gens::split_record(range.max()).unwrap().0);
            assert_eq!(lo, hi, "table {} spans generations {lo}..={hi}: it was rewritten", t.id());
        }
        assert_eq!(store.read_range(&a, Slot(0), 5000).unwrap().len(), 2000, "and every entry reads back");
    }
}
