//! paros-store: the machine's [`LogStore`] on fjall (the only crate that links fjall).
//!
//! # Layout (DESIGN §5)
//!
//! One fjall `Database` per machine with four fixed keyspaces. Ids are encoded by hand,
//! big-endian and fixed width, so keys sort by `(tenant, journal, slot)` numerically and one
//! journal's keys are never a prefix of another's. Values are postcard-encoded serde types.
//!
//! | keyspace | key | value |
//! |---|---|---|
//! | `promise` | `tenant ‖ journal` | `Ballot` |
//! | `log` | `tenant ‖ journal ‖ slot` | `LogEntry` (ballot + command) |
//! | `state` | `tenant ‖ journal` | floor, sealed `JournalState`, chosen index |
//! | `meta` | `format` | format marker, `u32` big-endian (raw, not postcard) = [`FORMAT`] |
//! | `meta` | `identity` | `NodeId` |
//! | `meta` | `config/ ‖ tenant ‖ journal` | `JournalConfig` |
//!
//! Never one keyspace per journal: idle journals cost nothing here.
//!
//! # Writes
//!
//! [`FjallStore`] is meant to have a single committer (the host). [`LogStore::write`] turns a
//! whole round of every journal's [`WriteOp`]s into **one** fjall write batch (atomic across
//! keyspaces) committed without sync; [`LogStore::sync`] then issues one fdatasync for all of
//! it. Each journal's state row is cached in memory, so `write` reads the disk only to find
//! the log keys a truncation drops (fjall has no range delete: each dropped slot gets a
//! tombstone in the same batch).

pub mod baseline;
mod keys;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode, Readable};
use paros_core::journal::{Command, JournalState};
use paros_core::{Ballot, Durable, JournalConfig, JournalKey, LogEntry, NodeId, Slot, WriteOp};
use paros_node::ports::{LogStore, Placement, StoreError, StoredJournal};
use serde::{Deserialize, Serialize};

/// The storage format this build reads and writes, recorded in `meta` at first open.
pub const FORMAT: u32 = 1;

/// The memtable bound of each keyspace. Smaller than fjall's 64 MiB default: every round
/// inserts into the `log` memtable, and a shallower skiplist keeps those inserts in cache.
pub const MEMTABLE_BYTES_MAX: u64 = 8 << 20;

/// Level-0 tables gathered before they are compacted into level 1 (fjall's default is 4).
/// Journal keys interleave, so every level-0 table overlaps all of level 1 and each compaction
/// rewrites it: gathering more tables first rewrites it less often.
pub const L0_TABLES_MAX: u8 = 8;

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

/// One journal's row in `state`: what truncation and learning leave behind.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
struct StateRow {
    floor: Slot,
    sealed: JournalState,
    chosen_up_to: Slot,
}

/// Serializes exactly like [`LogEntry`] (same fields, same order) without cloning the command.
#[derive(Serialize)]
struct LogEntryRef<'a> {
    ballot: Option<Ballot>,
    command: &'a Command,
}

/// The keyspace a staged change goes to.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Space {
    Promise,
    Log,
    State,
}

/// A [`LogStore`] on one fjall database. See the crate docs for the layout.
pub struct FjallStore {
    path: PathBuf,
    db: Database,
    promise: Keyspace,
    log: Keyspace,
    state: Keyspace,
    meta: Keyspace,
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

fn read_err(e: impl fmt::Display) -> StoreError {
    StoreError::Read(e.to_string())
}

fn write_err(e: impl fmt::Display) -> StoreError {
    StoreError::Write(e.to_string())
}

fn sync_err(e: impl fmt::Display) -> StoreError {
    StoreError::Sync(e.to_string())
}

fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, StoreError> {
    encode_into(value, Vec::new())
}

fn encode_into<T: Serialize + ?Sized>(value: &T, out: Vec<u8>) -> Result<Vec<u8>, StoreError> {
    postcard::to_extend(value, out).map_err(|e| StoreError::Write(format!("encoding: {e}")))
}

/// A log value, encoded into one allocation of about its final size.
fn encode_log_entry(ballot: Option<Ballot>, command: &Command) -> Result<Vec<u8>, StoreError> {
    // Fixed fields (ballot, leader, seq, lengths) stay well under 64 bytes; each record adds
    // its bytes and a length prefix of at most 10.
    let records = command.entry().map_or(0, |e| e.records.iter().map(|r| r.len() + 10).sum::<usize>());
    encode_into(&LogEntryRef { ballot, command }, Vec::with_capacity(64 + records))
}

fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<T, StoreError> {
    postcard::from_bytes(bytes).map_err(|e| StoreError::Read(format!("decoding {what}: {e}")))
}

fn malformed(space: &str, key: &[u8]) -> StoreError {
    StoreError::Read(format!("malformed {space} key {key:02x?}"))
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
    /// no marker: `found: 0`); [`StoreError::Read`] when fjall cannot open or read it;
    /// [`StoreError::Write`]/[`StoreError::Sync`] when the marker cannot be made durable.
    pub fn open(path: &Path) -> Result<FjallStore, StoreError> {
        // The host syncs once per round itself: batches stay in fjall's journal buffer until then.
        let db = Database::builder(path).manual_journal_persist(true).open().map_err(read_err)?;
        let options = || {
            KeyspaceCreateOptions::default()
                .manual_journal_persist(true)
                .max_memtable_size(MEMTABLE_BYTES_MAX)
                .compaction_strategy(std::sync::Arc::new(fjall::compaction::Leveled::default().with_l0_threshold(L0_TABLES_MAX)))
        };
        let open = |name: &str| db.keyspace(name, options).map_err(read_err);
        let promise = open("promise")?;
        let log = open("log")?;
        let state = open("state")?;
        let meta = open("meta")?;

        let mut store = FjallStore {
            path: path.to_path_buf(),
            db,
            promise,
            log,
            state,
            meta,
            rows: HashMap::new(),
            fresh: false,
            stats: StoreStats::default(),
        };

        match store.meta.get(keys::META_FORMAT).map_err(read_err)? {
            Some(raw) => {
                let raw: [u8; 4] = raw
                    .as_ref()
                    .try_into()
                    .map_err(|_| StoreError::Read(format!("format marker is {} bytes, not 4", raw.len())))?;
                let found = u32::from_be_bytes(raw);
                if found != FORMAT {
                    return Err(StoreError::Format { found, supported: FORMAT });
                }
            }
            None => {
                for ks in [&store.meta, &store.promise, &store.log, &store.state] {
                    if !ks.is_empty().map_err(read_err)? {
                        return Err(StoreError::Format { found: 0, supported: FORMAT });
                    }
                }
                store.fresh = true;
                store.meta.insert(keys::META_FORMAT, FORMAT.to_be_bytes()).map_err(write_err)?;
                store.persist()?;
            }
        }

        for item in store.state.iter() {
            let (k, v) = item.into_inner().map_err(read_err)?;
            let key = keys::decode_journal(&k).ok_or_else(|| malformed("state", &k))?;
            store.rows.insert(key, decode(&v, "state row")?);
        }
        Ok(store)
    }

    /// Whether this handle found the store empty (no format marker, no data) and created it.
    ///
    /// A node that already has an identity elsewhere (peers, configuration) and opens a fresh
    /// store has lost its disk, and with it its promises: it must not rejoin under that
    /// identity (DESIGN §4.1, exit code 78).
    #[must_use]
    pub fn is_fresh(&self) -> bool {
        self.fresh
    }

    /// The directory this store lives in.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What this handle has written and synced since it was opened.
    #[must_use]
    pub fn stats(&self) -> StoreStats {
        self.stats
    }

    fn persist(&mut self) -> Result<(), StoreError> {
        self.db.persist(PersistMode::SyncData).map_err(sync_err)?;
        self.stats.syncs += 1;
        Ok(())
    }

    /// Stages tombstones for every log key of `journal` in `[from, to)`: those on disk and
    /// those staged earlier in this batch.
    fn stage_drop(
        &self,
        staged: &mut BTreeMap<(Space, Vec<u8>), Option<Vec<u8>>>,
        journal: JournalKey,
        from: Slot,
        to: Slot,
    ) -> Result<(), StoreError> {
        let lo = keys::log(journal, from);
        let hi = keys::log(journal, to);
        for item in self.log.range(lo..hi) {
            let k = item.key().map_err(read_err)?;
            staged.insert((Space::Log, k.to_vec()), None);
        }
        let pending: Vec<Vec<u8>> = staged
            .range((Space::Log, lo.to_vec())..(Space::Log, hi.to_vec()))
            .map(|((_, k), _)| k.clone())
            .collect();
        for k in pending {
            staged.insert((Space::Log, k), None);
        }
        Ok(())
    }
}

impl LogStore for FjallStore {
    fn identity(&self) -> Result<Option<NodeId>, StoreError> {
        match self.meta.get(keys::META_IDENTITY).map_err(read_err)? {
            Some(raw) => Ok(Some(decode(&raw, "identity")?)),
            None => Ok(None),
        }
    }

    /// Records `node` and syncs. Idempotent for the identity already recorded; refuses
    /// ([`StoreError::Write`]) to replace a different one, since the promises on disk were
    /// made under it.
    fn set_identity(&mut self, node: NodeId) -> Result<(), StoreError> {
        match self.identity()? {
            Some(have) if have == node => return Ok(()),
            Some(have) => {
                return Err(StoreError::Write(format!(
                    "store already belongs to node {have}, refusing to record {node}"
                )));
            }
            None => {}
        }
        self.meta.insert(keys::META_IDENTITY, encode(&node)?).map_err(write_err)?;
        self.persist()
    }

    /// One fjall batch for all of `placements`, committed without sync: a `Put` writes the
    /// config row; a `Remove` tombstones the config, promise and state rows and every log key
    /// the journal holds on disk.
    fn place(&mut self, placements: &[Placement]) -> Result<(), StoreError> {
        if placements.is_empty() {
            return Ok(());
        }
        let mut wb = self.db.batch();
        for p in placements {
            match p {
                Placement::Put(key, config) => wb.insert(&self.meta, keys::config(*key), encode(config)?),
                Placement::Remove(key) => {
                    let prefix = keys::journal(*key);
                    wb.remove(&self.meta, keys::config(*key));
                    wb.remove(&self.promise, prefix);
                    wb.remove(&self.state, prefix);
                    for item in self.log.prefix(prefix) {
                        wb.remove(&self.log, item.key().map_err(read_err)?.to_vec());
                    }
                    self.rows.remove(key);
                }
            }
        }
        wb.commit().map_err(write_err)?;
        self.stats.batches += 1;
        Ok(())
    }

    fn write(&mut self, batch: &[(JournalKey, Vec<WriteOp>)]) -> Result<(), StoreError> {
        // Every change of this call, last one per key wins: fjall gives a whole batch one
        // sequence number, so the batch itself must name each key at most once.
        let mut staged: BTreeMap<(Space, Vec<u8>), Option<Vec<u8>>> = BTreeMap::new();
        let mut rows: HashMap<JournalKey, StateRow> = HashMap::with_capacity(batch.len());
        let mut ops = 0u64;

        for (journal, journal_ops) in batch {
            let mut row = rows.get(journal).or_else(|| self.rows.get(journal)).copied().unwrap_or_default();
            let before = row;
            for op in journal_ops {
                ops += 1;
                match op {
                    WriteOp::Promise(ballot) => {
                        staged.insert(
                            (Space::Promise, keys::journal(*journal).to_vec()),
                            Some(encode(ballot)?),
                        );
                    }
                    WriteOp::Accept { slot, ballot, command } => {
                        if *slot >= row.floor {
                            let value = encode_log_entry(Some(*ballot), command)?;
                            staged.insert((Space::Log, keys::log(*journal, *slot).to_vec()), Some(value));
                        }
                    }
                    WriteOp::Learn { slot, command } => {
                        if *slot >= row.floor {
                            let value = encode_log_entry(None, command)?;
                            staged.insert((Space::Log, keys::log(*journal, *slot).to_vec()), Some(value));
                        }
                    }
                    WriteOp::Chosen { up_to } => row.chosen_up_to = row.chosen_up_to.max(*up_to),
                    WriteOp::Truncate { floor, sealed }
                    | WriteOp::TrimmedTo { point: floor, state: sealed } => {
                        if *floor > row.floor {
                            // Nothing is held below the current floor, on disk or staged.
                            self.stage_drop(&mut staged, *journal, row.floor, *floor)?;
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
                staged.insert((Space::State, keys::journal(*journal).to_vec()), Some(encode(&row)?));
            }
            rows.insert(*journal, row);
        }

        if staged.is_empty() {
            self.stats.ops += ops;
            return Ok(());
        }
        let mut wb = self.db.batch();
        for ((space, key), value) in staged {
            let ks = match space {
                Space::Promise => &self.promise,
                Space::Log => &self.log,
                Space::State => &self.state,
            };
            match value {
                Some(v) => wb.insert(ks, key, v),
                None => wb.remove(ks, key),
            }
        }
        wb.commit().map_err(write_err)?;

        self.rows.extend(rows);
        self.stats.batches += 1;
        self.stats.ops += ops;
        Ok(())
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        self.persist()
    }

    /// Reads every journal that has a config, from one consistent snapshot, ordered by key.
    fn load(&self) -> Result<Vec<StoredJournal>, StoreError> {
        let snap = self.db.snapshot();
        let mut out = Vec::new();
        for item in snap.prefix(&self.meta, keys::META_CONFIG) {
            let (k, v) = item.into_inner().map_err(read_err)?;
            let key = keys::decode_config(&k).ok_or_else(|| malformed("meta config", &k))?;
            let config: JournalConfig = decode(&v, "journal config")?;
            let prefix = keys::journal(key);

            let promise = match snap.get(&self.promise, prefix).map_err(read_err)? {
                Some(raw) => decode(&raw, "promise")?,
                None => Ballot::ZERO,
            };
            let row: StateRow = match snap.get(&self.state, prefix).map_err(read_err)? {
                Some(raw) => decode(&raw, "state row")?,
                None => StateRow::default(),
            };
            let mut entries = Vec::new();
            for item in snap.prefix(&self.log, prefix) {
                let (k, v) = item.into_inner().map_err(read_err)?;
                let slot = keys::decode_slot(&k).ok_or_else(|| malformed("log", &k))?;
                let entry: LogEntry = decode(&v, "log entry")?;
                entries.push((slot, entry));
            }
            out.push(StoredJournal {
                key,
                config,
                durable: Durable {
                    promise,
                    floor: row.floor,
                    sealed: row.sealed,
                    chosen_up_to: row.chosen_up_to,
                    entries,
                },
            });
        }
        Ok(out)
    }
}
