//! paros-store: the machine's [`LogStore`] on fjall (the only crate that links fjall).
//!
//! # Layout (DESIGN §5)
//!
//! One fjall `Database` per machine with six fixed keyspaces. Ids are encoded by hand,
//! big-endian and fixed width, so keys sort by `(tenant, journal, slot)` numerically and one
//! journal's keys are never a prefix of another's. Values are postcard-encoded serde types.
//! Log entries are kept by generation (see [`gens`]): the store's API still speaks of a
//! journal's `log` keys `tenant ‖ journal ‖ slot`.
//!
//! | keyspace | key | value |
//! |---|---|---|
//! | `promise` | `tenant ‖ journal` | `Ballot` |
//! | `records` | `generation ‖ tenant ‖ journal ‖ slot` | `LogEntry` (ballot + command) |
//! | `gens` | `j ‖ tenant ‖ journal ‖ generation` | first slot, last slot, bytes (raw) |
//! | `gens` | `t ‖ generation` | bytes written, bytes dead (raw) |
//! | `gens` | `x ‖ tenant ‖ journal` | the generation the journal's current incarnation starts at |
//! | `state` | `tenant ‖ journal` | floor, sealed `JournalState`, chosen index |
//! | `anchor` | `tenant ‖ journal ‖ slot` | `JournalState` before `slot` (a fold checkpoint) |
//! | `meta` | `format` | format marker, `u32` big-endian (raw, not postcard) = [`FORMAT`] |
//! | `meta` | `identity` | `NodeId` |
//! | `meta` | `config/ ‖ tenant ‖ journal` | `JournalConfig` |
//! | `meta` | `reclaimed` | passes of the reclaimer that dropped tables since open, `u64` big-endian (raw) |
//!
//! Never one keyspace per journal: idle journals cost nothing here.
//!
//! # Writes
//!
//! [`FjallStore`] is meant to have a single committer (the host). [`LogStore::write`] turns a
//! whole round of every journal's [`WriteOp`]s into **one** record of the store's own
//! write-ahead log (`wal/` beside fjall's files, see [`wal`]); [`LogStore::sync`] then issues
//! one fdatasync of it. The round never touches fjall: an applier thread ([`apply`]) commits
//! synced rounds' `promise`, `state`, `anchor` and `meta` rows as fjall batches, and
//! bulk-ingests their `log` entries as one generation per closed log segment. Reads see the
//! rounds and entries fjall does not hold yet. Each journal's state row is cached in memory,
//! so `write` never reads the disk.
//!
//! # Truncation
//!
//! A truncation moves the floor in the journal's `state` row and writes nothing else: reads
//! ignore `log` keys below the floor, and the [`reclaim`] machinery removes their bytes from
//! the disk in the background once the floor is durable (dead generations dropped whole,
//! mostly dead ones collected). See `docs/storage.md`.

mod apply;
pub mod baseline;
mod gens;
mod keys;
pub mod priority;
mod reclaim;
mod wal;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use paros_core::journal::{Command, JournalState};
use paros_core::{Ballot, Durable, JournalConfig, JournalKey, LogEntry, NodeId, Slot, WriteOp};
/// A store's background work; the type lives with the ports so a dashboard can show it.
pub use paros_node::ports::StoreActivity;
use paros_node::ports::{LogRead, LogStore, Placement, StoreError, StoredJournal};
use serde::{Deserialize, Serialize};

/// The storage format this build writes, recorded in `meta` at first open.
///
/// - 1: fjall alone; a round is one fjall batch synced with fjall's journal.
/// - 2: a round goes to the store's own write-ahead log (`wal/`) first, and fjall takes it
///   later. A build that reads only format 1 would ignore `wal/` and miss the rounds fjall
///   does not hold yet, so it must refuse such a directory: the marker says 2.
/// - 3: log entries in generations (`records` and `gens`), not in `log`.
/// - 4: write-ahead log segments carry a salt and a seal and are reused (`wal`'s
///   "Recycling"). A build that reads only format 3's segments would take a salted segment for
///   an empty one and miss its rounds, so it must refuse the directory: the marker says 4.
///   Opening a format 3 store replays its unsalted segments and raises the marker.
pub const FORMAT: u32 = 4;

/// Older formats this build opens and upgrades to [`FORMAT`]: the entries of their `log`
/// keyspace are copied into one generation, `wal/` (format 2; format 1 has none) is replayed
/// into the next, and `log` is deleted once both are durable, with the marker raised. Format 3
/// has no `log`: its `wal/` is replayed and the marker raised.
pub const FORMATS_UPGRADED: &[u32] = &[1, 2, 3];

/// The memtable bound of each keyspace. Smaller than fjall's 64 MiB default, which would hold
/// too much of the process's memory (three embedded nodes, several keyspaces each). 16 MiB, not
/// 8: every flush stalls the round's memtable insert while lsm-tree fsyncs its new version
/// (docs/storage.md §3), so half the flushes cut the 64-writer p999 by a fifth; the 2 GiB
/// journal's resident set rose from 170 to 251 MiB while writing (the bound is 300).
pub const MEMTABLE_BYTES_MAX: u64 = 16 << 20;

/// The memtable bound of `meta` (journal configurations, the format): written when journals
/// are placed, read at boot, so a small memtable costs nothing on the write path and keeps
/// placing 100,000 journals from holding their configurations in memory until a flush.
pub const META_MEMTABLE_BYTES_MAX: u64 = 1 << 20;

/// Level-0 tables gathered before they are compacted into level 1 (fjall's default is 4).
/// Chosen when `log` keys interleaved (every level-0 table overlapped all of level 1, and each
/// compaction rewrote it: 16 halved the compaction time of a 60 s 64-writer run against 8,
/// docs/storage.md §3). `records` tables never overlap and only move; the bound now matters
/// for the small keyspaces, and stays below the 20 level-0 runs at which fjall starts to slow
/// writers down (30 halt them).
pub const L0_TABLES_MAX: u8 = 16;

/// How a [`FjallStore`] is tuned. [`StoreOptions::default`] is what [`FjallStore::open`] uses.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct StoreOptions {
    /// The memtable bound of each keyspace, in bytes.
    pub memtable_bytes: u64,
    /// Level-0 tables gathered before they are compacted into level 1.
    pub l0_tables: u8,
    /// The size a compaction cuts its output tables at, in bytes; level 1 holds
    /// `l0_tables` of them before it spills into level 2.
    pub table_bytes: u64,
    /// The bound on fjall's write-ahead journal, in bytes (at least 64 MiB): past it, fjall
    /// flushes the keyspaces that keep the oldest journal file alive so it can be deleted.
    /// Record bytes stay on disk in the journal until then, truncated or not.
    pub journal_bytes_max: u64,
    /// How long the reclaimer gathers newly durable floors before one pass drops the tables
    /// that lie wholly below them.
    pub reclaim_interval: Duration,
    /// `log` values of at least this many bytes go to fjall's blob files (key-value
    /// separation), so compaction rewrites only their keys and pointers; `None` keeps every
    /// value in the tree.
    pub blob_bytes_min: Option<u32>,
    /// fjall's background threads (flushes and compactions) for this database.
    pub worker_threads: usize,
    /// fjall's block cache, in bytes: the bounded cache reads of entries evicted from the
    /// journals' in-memory windows go through (catch-up answers, old read pages).
    pub cache_bytes: u64,
    /// The nice value fjall's background threads run at (`None`: the process's own), so
    /// flushes and compactions take the cores the rounds leave idle (see [`priority`]).
    pub background_nice: Option<i32>,
    /// The nice value of the store's own background threads, the applier (which moves synced
    /// rounds from the log into fjall) and the reclaimer (`None`, the default: the opener's
    /// own). The round's path never waits for them unless [`StoreOptions::pending_bytes_max`]
    /// is reached. At nice 19, 64 writers of 100-byte records acknowledged more, but one writer
    /// of 16 KiB records kept the applier behind until its bound: pending rounds grew the
    /// resident set by 80–150 MB, past the issue-10 bound of 300 MiB (docs/storage.md §3).
    pub apply_nice: Option<i32>,
    /// For stores of one process that share a disk (the embedded cell's nodes, which hold the
    /// same data): the `i`-th store's memtables are `memtable_bytes × (100 + i × this) / 100`
    /// (see [`StoreOptions::for_member`]), so the stores flush and compact at different moments
    /// instead of all at once. 0: every store alike.
    pub member_spread_pct: u16,
    /// The write-ahead log's segment size, in bytes: past it, a sync starts the next segment,
    /// and the closed one is retired (kept to be reused, see [`StoreOptions::wal_spares`], or
    /// deleted) once fjall holds its rounds durably. Boot replays at most about two segments.
    pub wal_segment_bytes: u64,
    /// Segments kept, once fjall holds their rounds, to be reused as later segments (see
    /// `wal`'s "Recycling"): a round's sync into a reused file writes data only. 0: remove
    /// them. Each costs [`StoreOptions::wal_segment_bytes`] of disk.
    pub wal_spares: usize,
    /// Bytes of synced rounds that may wait for the applier (the rounds' changes as read
    /// from memory until fjall holds them); past it, a write waits.
    pub pending_bytes_max: u64,
    /// How long synced rounds may gather before the applier commits them to fjall as one batch.
    pub apply_interval: Duration,
    /// Synced bytes that start the applier at once, however short the wait so far.
    pub apply_bytes: u64,
    /// A generation is collected (what is still live in it rewritten as a new one, the rest
    /// given back) once this percentage of its bytes lies below floors or belongs to removed
    /// journals. 1–100.
    pub collect_dead_percent: u8,
}

/// The default [`StoreOptions::collect_dead_percent`]: half. A collection then rewrites at most
/// as many bytes as it gives back.
pub const COLLECT_DEAD_PERCENT: u8 = 50;

/// The data block size of `log`'s tables (fjall's default is 4 KiB, sized for point reads):
/// `log` is read in ranges, so larger blocks cost nothing there and mean fewer blocks to encode,
/// checksum and index on every ingestion and compaction. Set when a store is created; a store
/// keeps the size it was created with.
pub const LOG_BLOCK_BYTES: u32 = 32 << 10;

/// The default [`StoreOptions::table_bytes`]: fjall's own (64 MiB).
pub const TABLE_BYTES: u64 = 64 << 20;

/// The default [`StoreOptions::wal_segment_bytes`].
pub const WAL_SEGMENT_BYTES: u64 = 16 << 20;

/// The default [`StoreOptions::wal_spares`]: the applier retires about one segment while the
/// next fills, so two keep every new segment a reused one.
pub const WAL_SPARES: usize = 2;

/// The default [`StoreOptions::pending_bytes_max`].
pub const PENDING_BYTES_MAX: u64 = 32 << 20;

/// The default [`StoreOptions::apply_interval`]: a few rounds' worth, so the applier wakes a
/// few hundred times a second, not once per round.
pub const APPLY_INTERVAL: Duration = Duration::from_millis(2);

/// The default [`StoreOptions::apply_bytes`].
pub const APPLY_BYTES: u64 = 1 << 20;

/// The default [`StoreOptions::worker_threads`]: one, not fjall's one per core. With two or
/// more, fjall 3.1's first worker keeps handing compaction messages back to the queue while
/// another worker compacts (a busy loop for the length of every compaction); with one, a flush
/// waits behind a running compaction. At [`BACKGROUND_NICE`] and [`L0_TABLES_MAX`] that did not
/// make fjall halt writes in the measured batch-1 runs; 64 writers at batch 4 (~105k records/s)
/// saw single round writes of 216–348 ms (docs/storage.md §3).
pub const WORKER_THREADS: usize = 1;

/// The default [`StoreOptions::member_spread_pct`].
pub const MEMBER_SPREAD_PCT: u16 = 25;

/// The default [`StoreOptions::background_nice`]: the lowest priority. Once the rounds stopped
/// polling at 64 writers (more throughput, and so more to compact in a run), compactions at
/// nice 10 still cut into the round's tail; at 19 two 60 s pairs measured a p999 of 13.3 /
/// 16.0 ms against 17.2 / 18.6 ms, and 64 writers at batch 4 (~147k records/s) kept level 0
/// as short as at 10 (docs/storage.md §3).
pub const BACKGROUND_NICE: i32 = 19;

/// The default [`StoreOptions::cache_bytes`].
pub const CACHE_BYTES: u64 = 32 << 20;

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            memtable_bytes: MEMTABLE_BYTES_MAX,
            l0_tables: L0_TABLES_MAX,
            table_bytes: TABLE_BYTES,
            journal_bytes_max: JOURNAL_BYTES_MAX,
            reclaim_interval: RECLAIM_INTERVAL,
            blob_bytes_min: None,
            worker_threads: WORKER_THREADS,
            cache_bytes: CACHE_BYTES,
            background_nice: Some(BACKGROUND_NICE),
            apply_nice: None,
            member_spread_pct: MEMBER_SPREAD_PCT,
            wal_segment_bytes: WAL_SEGMENT_BYTES,
            wal_spares: WAL_SPARES,
            pending_bytes_max: PENDING_BYTES_MAX,
            apply_interval: APPLY_INTERVAL,
            apply_bytes: APPLY_BYTES,
            collect_dead_percent: COLLECT_DEAD_PERCENT,
        }
    }
}

impl StoreOptions {
    /// The options of the `member`-th of several stores sharing a disk: its memtables grow
    /// [`StoreOptions::member_spread_pct`] percent larger per member, so one store's flushes
    /// and level-0 compactions fall between the others' (three stores that take the same
    /// writes would otherwise flush and compact in the same second and stall every round).
    #[must_use]
    pub fn for_member(self, member: usize) -> StoreOptions {
        let pct = 100 + u64::from(self.member_spread_pct).saturating_mul(u64::try_from(member).unwrap_or(u64::MAX));
        StoreOptions {
            memtable_bytes: self.memtable_bytes.saturating_mul(pct) / 100,
            wal_segment_bytes: self.wal_segment_bytes.saturating_mul(pct) / 100,
            ..self
        }
    }
}

/// The default [`StoreOptions::journal_bytes_max`]: fjall's smallest, 64 MiB (its default,
/// 512 MiB, keeps half a gigabyte of records on disk after they were truncated).
pub const JOURNAL_BYTES_MAX: u64 = 64 << 20;

/// The default [`StoreOptions::reclaim_interval`].
pub const RECLAIM_INTERVAL: Duration = Duration::from_millis(200);

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

/// A handle that reads a [`FjallStore`]'s background activity from any thread while the
/// store itself is owned by the host.
#[derive(Clone)]
pub struct StoreProbe {
    db: Database,
    records: Keyspace,
    shared: Arc<apply::Shared>,
    /// The store's directory, whose files are its bytes on disk.
    path: PathBuf,
}

impl fmt::Debug for StoreProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreProbe").finish_non_exhaustive()
    }
}

impl StoreProbe {
    /// fjall's activity now.
    #[must_use]
    pub fn sample(&self) -> StoreActivity {
        let n = |x: usize| u64::try_from(x).unwrap_or(u64::MAX);
        let (room_waits, room_waited) = self.shared.room_waits();
        StoreActivity {
            room_waits,
            room_waited_us: u64::try_from(room_waited.as_micros()).unwrap_or(u64::MAX),
            compactions_completed: n(self.db.compactions_completed()),
            compacting_us: u64::try_from(self.db.time_compacting().as_micros()).unwrap_or(u64::MAX),
            compactions_active: n(self.db.active_compactions()),
            flushes_outstanding: n(self.db.outstanding_flushes()),
            log_tables: n(self.records.table_count()),
            log_l0_tables: n(self.records.l0_table_count()),
            journal_files: n(self.db.journal_count()),
            disk_bytes: bytes_under(&self.path),
        }
    }
}

/// The blocks allocated to every file under `dir`, as `du` counts a file: what the store
/// holds on disk, tables being written and tables not yet deleted included (fjall's own count
/// leaves them out), files sized ahead of their contents only as far as written. A file that
/// goes between the listing and its stat counts as nothing.
fn bytes_under(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for meta in entries.flatten().filter_map(|e| e.metadata().ok().map(|m| (e.path(), m))) {
            match meta {
                (path, m) if m.is_dir() => stack.push(path),
                (_, m) => total += m.blocks() * 512,
            }
        }
    }
    total
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
    Anchor,
    Meta,
    /// Only a removal's mark (`x ‖ journal`, see [`gens`]); `gens` rows are the applier's.
    Gens,
}

/// A [`LogStore`] on one fjall database behind a write-ahead log of its own (see
/// [`wal`] and [`apply`]). See the crate docs for the layout.
pub struct FjallStore {
    /// First, so its thread (which holds a handle on `log`) stops before the database closes.
    reclaimer: reclaim::Reclaimer,
    /// Applies synced rounds to fjall; finished (every synced round applied) in `drop`.
    applier: apply::Applier,
    /// Rounds written but not yet in fjall, shared with the applier and the readers.
    shared: Arc<apply::Shared>,
    wal: wal::Wal,
    /// The newest round written (rounds are numbered from 1 within one open).
    round: u64,
    pace: apply::Pace,
    /// How many retired log segments are kept for reuse.
    spares: wal::Spares,
    pending_bytes_max: u64,
    /// Durable floors, read by the compaction filter and the reclaimer.
    floors: Arc<reclaim::Floors>,
    /// Floors this round's `write` raised, published once `sync` made them durable.
    unsynced_floors: Vec<([u8; keys::JOURNAL_LEN], u64)>,
    path: PathBuf,
    db: Database,
    spaces: apply::Spaces,
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
        FjallStore::open_with(path, StoreOptions::default())
    }

    /// [`FjallStore::open`] with these options.
    ///
    /// # Errors
    /// As [`FjallStore::open`]; [`StoreError::Read`] too when `journal_bytes_max` is below
    /// 64 MiB or the reclaimer thread cannot start.
    pub fn open_with(path: &Path, opts: StoreOptions) -> Result<FjallStore, StoreError> {
        if opts.journal_bytes_max < JOURNAL_BYTES_MAX {
            return Err(StoreError::Read(format!(
                "journal_bytes_max {} is below fjall's minimum {JOURNAL_BYTES_MAX}",
                opts.journal_bytes_max
            )));
        }
        let floors = Arc::new(reclaim::Floors::default());
        let filter: Arc<dyn fjall::compaction::filter::Factory> =
            Arc::new(reclaim::BelowFloorFactory(Arc::clone(&floors)));
        let workers_before = priority::worker_threads().map_or(0, |t| t.len());
        // The host syncs once per round itself: batches stay in fjall's journal buffer until then.
        let db = Database::builder(path)
            .manual_journal_persist(true)
            .max_journaling_size(opts.journal_bytes_max)
            .worker_threads_unchecked(opts.worker_threads.max(1))
            .cache_size(opts.cache_bytes)
            .with_compaction_filter_factories(Arc::new(move |name| {
                (name == "records" || name == "anchor").then(|| Arc::clone(&filter))
            }))
            .open()
            .map_err(read_err)?;
        if let Some(nice) = opts.background_nice {
            // Best effort: a machine without /proc runs its compactions at full priority.
            let _ = priority::lower_background_threads(nice, workers_before + opts.worker_threads.max(1));
        }
        let options = || {
            KeyspaceCreateOptions::default()
                .manual_journal_persist(true)
                .max_memtable_size(opts.memtable_bytes)
                .compaction_strategy(Arc::new(
                    fjall::compaction::Leveled::default()
                        .with_l0_threshold(opts.l0_tables)
                        .with_table_target_size(opts.table_bytes),
                ))
        };
        let open = |name: &str| db.keyspace(name, options).map_err(read_err);
        let small = |name: &str| {
            db.keyspace(name, || options().max_memtable_size(opts.memtable_bytes.min(META_MEMTABLE_BYTES_MAX)))
                .map_err(read_err)
        };
        let had_log = db.keyspace_exists(LEGACY_LOG);
        let promise = open("promise")?;
        let records = db
            .keyspace("records", || {
                options()
                    .with_kv_separation(
                        opts.blob_bytes_min.map(|b| fjall::KvSeparationOptions::default().separation_threshold(b)),
                    )
                    // `records` is only ever read by range (`apply::View::get` refuses it): a
                    // bloom filter per table would be hashed on every ingestion and never asked.
                    .filter_policy(fjall::config::FilterPolicy::disabled())
                    .data_block_size_policy(fjall::config::BlockSizePolicy::all(LOG_BLOCK_BYTES))
            })
            .map_err(read_err)?;
        let gens_space = small("gens")?;
        let state = open("state")?;
        let meta = small("meta")?;
        let anchor = open("anchor")?;
        let spaces = apply::Spaces { promise, records, gens: gens_space, state, anchor, meta };

        let mut fresh = false;
        let mut upgrade = false;
        let wal_dir = path.join(wal::DIR);
        match spaces.meta.get(keys::META_FORMAT).map_err(read_err)? {
            Some(raw) => {
                let raw: [u8; 4] = raw
                    .as_ref()
                    .try_into()
                    .map_err(|_| StoreError::Read(format!("format marker is {} bytes, not 4", raw.len())))?;
                let found = u32::from_be_bytes(raw);
                upgrade = FORMATS_UPGRADED.contains(&found);
                if found != FORMAT && !upgrade {
                    return Err(StoreError::Format { found, supported: FORMAT });
                }
            }
            None => {
                for ks in [&spaces.meta, &spaces.promise, &spaces.records, &spaces.gens, &spaces.state] {
                    if !ks.is_empty().map_err(read_err)? {
                        return Err(StoreError::Format { found: 0, supported: FORMAT });
                    }
                }
                let wal_used = wal_dir.exists() && std::fs::read_dir(&wal_dir).map_err(read_err)?.next().is_some();
                if had_log || wal_used {
                    return Err(StoreError::Format { found: 0, supported: FORMAT });
                }
                fresh = true;
                spaces.meta.insert(keys::META_FORMAT, FORMAT.to_be_bytes()).map_err(write_err)?;
                db.persist(PersistMode::SyncData).map_err(sync_err)?;
            }
        }

        let counter = Arc::new(gens::recover(&spaces.records, &spaces.gens)?);
        {
            let _gate = floors.gate.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            floors.publish_since(gens::since_rows(&spaces.gens)?);
        }
        let shared = apply::Shared::new(Arc::clone(&floors), Arc::clone(&counter));

        // An older format's `log` keyspace: its entries become the first generation.
        let legacy = if had_log { Some(db.keyspace(LEGACY_LOG, options).map_err(read_err)?) } else { None };
        // A generation with an account in an older format's store is an earlier open's copy
        // (its rows come after the whole copy): do not copy twice.
        if let Some(log) = legacy.as_ref().filter(|_| upgrade)
            && gens::totals(&spaces.gens)?.is_empty()
        {
            copy_legacy_log(&db, &spaces, &counter, log)?;
        }
        // Rounds the log holds durably that fjall may not: apply them (their entries as one
        // generation), make fjall durable over them, and start the log afresh.
        let mut run = apply::Run::default();
        let spares = wal::Spares { max: opts.wal_spares };
        let replayed = wal::replay(&wal_dir, |changes| {
            apply::commit(&db, &spaces, &shared, [changes.as_slice()])?;
            for c in changes.iter().filter(|c| c.space == Space::Log) {
                run.insert(&c.key, c.value.as_deref().map(fjall::Slice::from))?;
            }
            Ok(())
        })?;
        apply::ingest_run(&db, &spaces, &shared, &run)?;
        drop(run);
        let next_segment = replayed.last().and_then(|p| wal::segment_number(p)).map_or(1, |n| n + 1);
        if upgrade {
            // Durable with the copied and replayed entries, before the segments and `log` go.
            spaces.meta.insert(keys::META_FORMAT, FORMAT.to_be_bytes()).map_err(write_err)?;
        }
        if !replayed.is_empty() || upgrade {
            db.persist(PersistMode::SyncData).map_err(sync_err)?;
            for p in &replayed {
                spares.retire(p).map_err(|e| StoreError::Write(format!("retiring {}: {e}", p.display())))?;
            }
        }
        if let Some(log) = legacy {
            // Copied (or left by an upgrade that stopped after raising the marker).
            db.delete_keyspace(log).map_err(write_err)?;
        }
        let wal = wal::Wal::create(&wal_dir, next_segment, opts.wal_segment_bytes)?;

        let disk = reclaim::Disk {
            db: db.clone(),
            records: spaces.records.clone(),
            gens: spaces.gens.clone(),
            meta: spaces.meta.clone(),
            floors: Arc::clone(&floors),
            counter: Arc::clone(&counter),
            shared: Arc::clone(&shared),
            collect_dead_percent: opts.collect_dead_percent.clamp(1, 100),
        };
        let reclaimer = reclaim::Reclaimer::start(disk, opts.reclaim_interval, opts.apply_nice)
            .map_err(|e| StoreError::Read(format!("starting the reclaimer: {e}")))?;
        let pace = apply::Pace { interval: opts.apply_interval, bytes: opts.apply_bytes };
        let applier = apply::Applier::start(
            Arc::clone(&shared),
            db.clone(),
            spaces.clone(),
            (pace, spares),
            reclaimer.waker(),
            opts.apply_nice,
        )
        .map_err(|e| StoreError::Read(format!("starting the applier: {e}")))?;

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

        for item in store.spaces.state.iter() {
            let (k, v) = item.into_inner().map_err(read_err)?;
            let key = keys::decode_journal(&k).ok_or_else(|| malformed("state", &k))?;
            store.rows.insert(key, decode(&v, "state row")?);
        }
        // Floors on disk are durable: reclaim below them (a crash may have come before).
        let floors: Vec<_> =
            store.rows.iter().filter(|(_, r)| r.floor > Slot(0)).map(|(k, r)| (keys::journal(*k), r.floor.0)).collect();
        store.floors.publish(floors.iter().copied());
        let mut wake: Vec<_> = floors.into_iter().map(|(k, _)| k).collect();
        wake.extend(gens::since_rows(&store.spaces.gens)?.into_iter().map(|(k, _)| k));
        store.reclaimer.wake(wake);
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

    /// A handle on this store's background activity.
    #[must_use]
    pub fn probe(&self) -> StoreProbe {
        StoreProbe {
            db: self.db.clone(),
            records: self.spaces.records.clone(),
            shared: Arc::clone(&self.shared),
            path: self.path.clone(),
        }
    }

    /// What this handle has written and synced since it was opened.
    #[must_use]
    pub fn stats(&self) -> StoreStats {
        self.stats
    }

    fn view(&self) -> apply::View<'_> {
        apply::View::new(&self.shared, &self.db, &self.spaces)
    }

    fn persist(&mut self) -> Result<(), StoreError> {
        self.db.persist(PersistMode::SyncData).map_err(sync_err)?;
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

/// What boot reads for `key`: promise, state row, anchors above the floor, and the entries
/// from [`Durable::boot_start`] on (the retained log below it is never read).
fn read_durable(view: &apply::View<'_>, key: JournalKey) -> Result<Durable, StoreError> {
    let prefix = keys::journal(key);
    let promise = match view.get(Space::Promise, &prefix)? {
        Some(raw) => decode(&raw, "promise")?,
        None => Ballot::ZERO,
    };
    let row: StateRow = match view.get(Space::State, &prefix)? {
        Some(raw) => decode(&raw, "state row")?,
        None => StateRow::default(),
    };
    let last = keys::log(key, Slot(u64::MAX));
    // Slots below the floor may still be on disk (reclaimed later): never read them.
    let mut anchors = Vec::new();
    for (k, v) in view.range(Space::Anchor, &keys::log(key, Slot(row.floor.0.saturating_add(1))), &last, usize::MAX)? {
        let slot = keys::decode_slot(&k).ok_or_else(|| malformed("anchor", &k))?;
        anchors.push((slot, decode(&v, "anchor")?));
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
        let slot = keys::decode_slot(&k).ok_or_else(|| malformed("log", &k))?;
        durable.entries.push((slot, decode(&v, "log entry")?));
    }
    Ok(durable)
}

/// A read handle on a [`FjallStore`]'s keyspaces, for the node thread while the store is lent
/// to the storage thread.
#[derive(Clone)]
pub struct FjallReader {
    db: Database,
    spaces: apply::Spaces,
    shared: Arc<apply::Shared>,
    floors: Arc<reclaim::Floors>,
}

impl fmt::Debug for FjallReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FjallReader").finish_non_exhaustive()
    }
}

fn read_log_range(
    view: &apply::View<'_>,
    floors: &reclaim::Floors,
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
        let slot = keys::decode_slot(&k).ok_or_else(|| malformed("log", &k))?;
        out.push((slot, decode(&v, "log entry")?));
    }
    Ok(out)
}

impl FjallReader {
    fn view(&self) -> apply::View<'_> {
        apply::View::new(&self.shared, &self.db, &self.spaces)
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
        FjallReader {
            db: self.db.clone(),
            spaces: self.spaces.clone(),
            shared: Arc::clone(&self.shared),
            floors: Arc::clone(&self.floors),
        }
    }

    fn identity(&self) -> Result<Option<NodeId>, StoreError> {
        match self.spaces.meta.get(keys::META_IDENTITY).map_err(read_err)? {
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
        self.spaces.meta.insert(keys::META_IDENTITY, encode(&node)?).map_err(write_err)?;
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
                    Placement::Put(key, config) => {
                        staged.insert((Space::Meta, keys::config(*key)), Some(encode(config)?));
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
                        staged.insert((Space::Promise, keys::journal(*journal).to_vec()), encode(ballot)?);
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
                            staged.insert((Space::Anchor, keys::log(*journal, *slot).to_vec()), encode(state)?);
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
                staged.insert((Space::State, keys::journal(*journal).to_vec()), encode(&row)?);
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
        let (lo, hi) = config_bounds();
        let mut out = Vec::new();
        for (k, v) in self.view().range(Space::Meta, &lo, &hi, usize::MAX)? {
            let key = keys::decode_config(&k).ok_or_else(|| malformed("meta config", &k))?;
            out.push((key, decode(&v, "journal config")?));
        }
        Ok(out)
    }

    /// Reads every journal that has a config, from one consistent view, ordered by key.
    fn load(&self) -> Result<Vec<StoredJournal>, StoreError> {
        let view = self.view();
        let (lo, hi) = config_bounds();
        let mut out = Vec::new();
        for (k, v) in view.range(Space::Meta, &lo, &hi, usize::MAX)? {
            let key = keys::decode_config(&k).ok_or_else(|| malformed("meta config", &k))?;
            let config: JournalConfig = decode(&v, "journal config")?;
            let durable = read_durable(&view, key)?;
            out.push(StoredJournal { key, config, durable });
        }
        Ok(out)
    }
}

/// The keyspace formats 1 and 2 kept log entries in (`tenant ‖ journal ‖ slot`).
const LEGACY_LOG: &str = "log";

/// Copies every entry of an older format's `log` keyspace into one generation, with its rows.
fn copy_legacy_log(
    db: &Database,
    spaces: &apply::Spaces,
    counter: &gens::Counter,
    log: &Keyspace,
) -> Result<(), StoreError> {
    let generation = counter.next();
    let mut failure = None;
    let items = log.iter().map_while(|item| match item.into_inner() {
        Ok((k, v)) => match keys::split_log(&k) {
            Some((journal, slot)) => Some((journal, slot, v)),
            None => {
                failure = Some(malformed("log", &k));
                None
            }
        },
        Err(e) => {
            failure = Some(read_err(e));
            None
        }
    });
    let rows = gens::ingest(&spaces.records, generation, items)?;
    if let Some(e) = failure {
        return Err(e);
    }
    if let Some(rows) = rows {
        let mut wb = db.batch();
        gens::stage_rows(&mut wb, &spaces.gens, generation, &rows);
        wb.commit().map_err(write_err)?;
    }
    Ok(())
}

/// The bounds of every `meta` config key.
fn config_bounds() -> (Vec<u8>, Vec<u8>) {
    let mut hi = keys::META_CONFIG.to_vec();
    hi.extend_from_slice(&[0xff; keys::JOURNAL_LEN]);
    (keys::META_CONFIG.to_vec(), hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use paros_core::journal::Control;
    use paros_core::{JournalId, TenantId};

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

    #[test]
    fn stores_sharing_a_disk_get_memtables_of_different_sizes() {
        let base = StoreOptions { memtable_bytes: 8 << 20, member_spread_pct: 25, ..StoreOptions::default() };
        let sizes: Vec<u64> = (0..3).map(|i| base.for_member(i).memtable_bytes).collect();
        assert_eq!(sizes, [8 << 20, 10 << 20, 12 << 20]);
        let segment = base.wal_segment_bytes * 3 / 2;
        assert_eq!(
            base.for_member(2),
            StoreOptions { memtable_bytes: 12 << 20, wal_segment_bytes: segment, ..base },
            "nothing else differs"
        );
        let alike = StoreOptions { member_spread_pct: 0, ..base };
        assert!((0..3).all(|i| alike.for_member(i) == alike), "a spread of 0 keeps every store alike");
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
