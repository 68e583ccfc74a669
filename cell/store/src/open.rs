//! Opening a store's directory: the database and its keyspaces, the format marker, recovery
//! (an older format's upgrade, the write-ahead log's replay), and the background threads.
//!
//! What [`open`] returns is consistent: fjall holds every round the log held durably, the log
//! starts afresh, and the applier and the reclaimer run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use paros_node::ports::{StoreError, StoreOp};

use crate::apply::{self, Applier, Pace, Shared};
use crate::error::{corrupt, engine, file};
use crate::floors::Floors;
use crate::gens::{self, Counter};
use crate::keys;
use crate::options::{JOURNAL_BYTES_MAX, LOG_BLOCK_BYTES, META_MEMTABLE_BYTES_MAX, StoreOptions};
use crate::priority;
use crate::reclaim::{self, Reclaimer};
use crate::spaces::{Space, Spaces};
use crate::wal::{self, Spares, Wal};

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
/// - 5: a sealed state and an anchor hold the journal's configuration (its epoch and voters,
///   docs/reconfiguration.md). A build that reads only format 4 would drop it and run a
///   reconfigured journal with its founding voters, so it must refuse the directory: the
///   marker says 5. Format 4's rows are read as they are (epoch 0, the founding voters) until
///   rewritten; opening a format 4 store only raises the marker.
pub const FORMAT: u32 = 5;

/// Older formats this build opens and upgrades to [`FORMAT`]: the entries of their `log`
/// keyspace are copied into one generation, `wal/` (format 2; format 1 has none) is replayed
/// into the next, and `log` is deleted once both are durable, with the marker raised. Format 3
/// has no `log`: its `wal/` is replayed and the marker raised.
pub const FORMATS_UPGRADED: &[u32] = &[1, 2, 3, 4];

/// The keyspace formats 1 and 2 kept log entries in (`tenant ‖ journal ‖ slot`).
const LEGACY_LOG: &str = "log";

/// A store's directory, open and recovered, with its threads running.
pub(crate) struct Opened {
    pub(crate) db: Database,
    pub(crate) spaces: Spaces,
    pub(crate) shared: Arc<Shared>,
    pub(crate) floors: Arc<Floors>,
    pub(crate) wal: Wal,
    pub(crate) pace: Pace,
    pub(crate) spares: Spares,
    pub(crate) reclaimer: Reclaimer,
    pub(crate) applier: Applier,
    /// The directory held nothing: it was initialised, its marker made durable.
    pub(crate) fresh: bool,
}

/// What the format marker said at open.
struct Marker {
    /// None was there, and no data either: the marker was written.
    fresh: bool,
    /// An older format this build upgrades.
    upgrade: bool,
}

/// Opens (or creates) the store in `path`, recovers it and starts its threads.
///
/// # Errors
/// [`StoreError::OptionTooSmall`] when `journal_bytes_max` is below 64 MiB;
/// [`StoreError::Format`] when the store was written in another format (or holds data but no
/// marker: `found: 0`); [`StoreError::Engine`] or [`StoreError::File`] when fjall or the
/// write-ahead log cannot be opened, read, written or synced; [`StoreError::Corrupt`] or
/// [`StoreError::CorruptLog`] for stored bytes that do not parse; [`StoreError::Spawn`] when a
/// thread cannot start.
pub(crate) fn open(path: &Path, opts: StoreOptions) -> Result<Opened, StoreError> {
    if opts.journal_bytes_max < JOURNAL_BYTES_MAX {
        return Err(StoreError::OptionTooSmall {
            option: "journal_bytes_max",
            value: opts.journal_bytes_max,
            min: JOURNAL_BYTES_MAX,
        });
    }
    let floors = Arc::new(Floors::default());
    let db = open_database(path, &opts, &floors)?;
    let keyspace = keyspace_options(&opts);
    let had_log = db.keyspace_exists(LEGACY_LOG);
    let spaces = open_spaces(&db, &opts)?;
    let wal_dir = path.join(wal::DIR);
    let marker = check_format(&db, &spaces, &wal_dir, had_log)?;

    let counter = Arc::new(gens::recover(&spaces.records, &spaces.gens)?);
    {
        let _gate = floors.gate.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        floors.publish_since(gens::since_rows(&spaces.gens)?);
    }
    let shared = Shared::new(Arc::clone(&floors), Arc::clone(&counter));

    // An older format's `log` keyspace: its entries become the first generation.
    let legacy = if had_log { Some(db.keyspace(LEGACY_LOG, keyspace).map_err(engine(StoreOp::Open))?) } else { None };
    // A generation with an account in an older format's store is an earlier open's copy
    // (its rows come after the whole copy): do not copy twice.
    if let Some(log) = legacy.as_ref().filter(|_| marker.upgrade)
        && gens::totals(&spaces.gens)?.is_empty()
    {
        copy_legacy_log(&db, &spaces, &counter, log)?;
    }
    let spares = Spares { max: opts.wal_spares };
    let next_segment = replay_log(&db, &spaces, &shared, &wal_dir, marker.upgrade, spares)?;
    if let Some(log) = legacy {
        // Copied (or left by an upgrade that stopped after raising the marker).
        db.delete_keyspace(log).map_err(engine(StoreOp::Write))?;
    }
    let wal = Wal::create(&wal_dir, next_segment, opts.wal_segment_bytes)?;

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
    let reclaimer = Reclaimer::start(disk, opts.reclaim_interval, opts.apply_nice)
        .map_err(|source| StoreError::Spawn { thread: "paros-reclaim", source })?;
    let pace = Pace { interval: opts.apply_interval, bytes: opts.apply_bytes };
    let applier = Applier::start(
        Arc::clone(&shared),
        db.clone(),
        spaces.clone(),
        (pace, spares),
        reclaimer.waker(),
        opts.apply_nice,
    )
    .map_err(|source| StoreError::Spawn { thread: "paros-store-apply", source })?;
    Ok(Opened { db, spaces, shared, floors, wal, pace, spares, reclaimer, applier, fresh: marker.fresh })
}

/// The fjall database in `path`, its compaction filter reading `floors`, its background
/// threads at `opts.background_nice`.
fn open_database(path: &Path, opts: &StoreOptions, floors: &Arc<Floors>) -> Result<Database, StoreError> {
    let filter: Arc<dyn fjall::compaction::filter::Factory> = Arc::new(reclaim::BelowFloorFactory(Arc::clone(floors)));
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
        .map_err(engine(StoreOp::Open))?;
    if let Some(nice) = opts.background_nice {
        // Best effort: a machine without /proc runs its compactions at full priority.
        let _ = priority::lower_background_threads(nice, workers_before + opts.worker_threads.max(1));
    }
    Ok(db)
}

/// How every keyspace is made: memtable and level-0 bounds, table size, fjall's journal
/// persisted by the store, not by each write.
fn keyspace_options(opts: &StoreOptions) -> impl Fn() -> KeyspaceCreateOptions + Copy + use<> {
    let (memtable_bytes, l0_tables, table_bytes) = (opts.memtable_bytes, opts.l0_tables, opts.table_bytes);
    move || {
        KeyspaceCreateOptions::default()
            .manual_journal_persist(true)
            .max_memtable_size(memtable_bytes)
            .compaction_strategy(Arc::new(
                fjall::compaction::Leveled::default().with_l0_threshold(l0_tables).with_table_target_size(table_bytes),
            ))
    }
}

/// The store's keyspaces, created where missing.
fn open_spaces(db: &Database, opts: &StoreOptions) -> Result<Spaces, StoreError> {
    let options = keyspace_options(opts);
    let err = engine::<fjall::Error>(StoreOp::Open);
    let open = |name: &str| db.keyspace(name, options).map_err(err);
    let small = |name: &str| {
        db.keyspace(name, || options().max_memtable_size(opts.memtable_bytes.min(META_MEMTABLE_BYTES_MAX))).map_err(err)
    };
    let promise = open("promise")?;
    let records = db
        .keyspace("records", || {
            options()
                .with_kv_separation(
                    opts.blob_bytes_min.map(|b| fjall::KvSeparationOptions::default().separation_threshold(b)),
                )
                // `records` is only ever read by range (`View::get` refuses it): a bloom filter
                // per table would be hashed on every ingestion and never asked.
                .filter_policy(fjall::config::FilterPolicy::disabled())
                .data_block_size_policy(fjall::config::BlockSizePolicy::all(LOG_BLOCK_BYTES))
        })
        .map_err(err)?;
    let gens = small("gens")?;
    let state = open("state")?;
    let meta = small("meta")?;
    let anchor = open("anchor")?;
    Ok(Spaces { promise, records, gens, state, anchor, meta })
}

/// Reads the format marker, or writes it (durably) into a store that holds nothing.
///
/// # Errors
/// [`StoreError::Format`] for a format this build neither reads nor upgrades, or for data
/// (in a keyspace, in `log`, in `wal/`) without a marker.
fn check_format(db: &Database, spaces: &Spaces, wal_dir: &Path, had_log: bool) -> Result<Marker, StoreError> {
    let read = engine::<fjall::Error>(StoreOp::Read);
    if let Some(raw) = spaces.meta.get(keys::META_FORMAT).map_err(read)? {
        let raw: [u8; 4] = raw.as_ref().try_into().map_err(|_| corrupt("format marker", keys::META_FORMAT))?;
        let found = u32::from_be_bytes(raw);
        let upgrade = FORMATS_UPGRADED.contains(&found);
        if found != FORMAT && !upgrade {
            return Err(StoreError::Format { found, supported: FORMAT });
        }
        return Ok(Marker { fresh: false, upgrade });
    }
    for ks in [&spaces.meta, &spaces.promise, &spaces.records, &spaces.gens, &spaces.state] {
        if !ks.is_empty().map_err(read)? {
            return Err(StoreError::Format { found: 0, supported: FORMAT });
        }
    }
    let wal_used =
        wal_dir.exists() && std::fs::read_dir(wal_dir).map_err(file(StoreOp::Read, wal_dir))?.next().is_some();
    if had_log || wal_used {
        return Err(StoreError::Format { found: 0, supported: FORMAT });
    }
    spaces.meta.insert(keys::META_FORMAT, FORMAT.to_be_bytes()).map_err(engine(StoreOp::Write))?;
    db.persist(PersistMode::SyncData).map_err(engine(StoreOp::Sync))?;
    Ok(Marker { fresh: true, upgrade: false })
}

/// Applies the rounds the log holds durably that fjall may not (their entries as one
/// generation), raises the marker of an `upgrade`, makes fjall durable over both and retires
/// the segments read; returns the number the next segment takes.
fn replay_log(
    db: &Database,
    spaces: &Spaces,
    shared: &Shared,
    wal_dir: &Path,
    upgrade: bool,
    spares: Spares,
) -> Result<u64, StoreError> {
    let mut run = apply::Run::default();
    let replayed: Vec<PathBuf> = wal::replay(wal_dir, |changes| {
        apply::commit(db, spaces, shared, [changes.as_slice()])?;
        for c in changes.iter().filter(|c| c.space == Space::Log) {
            run.insert(&c.key, c.value.as_deref().map(fjall::Slice::from))?;
        }
        Ok(())
    })?;
    apply::ingest_run(db, spaces, shared, &run)?;
    drop(run);
    let next_segment = replayed.last().and_then(|p| wal::segment_number(p)).map_or(1, |n| n + 1);
    if upgrade {
        // Durable with the copied and replayed entries, before the segments and `log` go.
        spaces.meta.insert(keys::META_FORMAT, FORMAT.to_be_bytes()).map_err(engine(StoreOp::Write))?;
    }
    if !replayed.is_empty() || upgrade {
        db.persist(PersistMode::SyncData).map_err(engine(StoreOp::Sync))?;
        for p in &replayed {
            spares.retire(p).map_err(file(StoreOp::Write, p))?;
        }
    }
    Ok(next_segment)
}

/// Copies every entry of an older format's `log` keyspace into one generation, with its rows.
fn copy_legacy_log(db: &Database, spaces: &Spaces, counter: &Counter, log: &Keyspace) -> Result<(), StoreError> {
    let generation = counter.next();
    let mut failure = None;
    let items = log.iter().map_while(|item| match item.into_inner() {
        Ok((k, v)) => match keys::split_log(&k) {
            Some((journal, slot)) => Some((journal, slot, v)),
            None => {
                failure = Some(corrupt("log key", &k));
                None
            }
        },
        Err(e) => {
            failure = Some(engine(StoreOp::Read)(e));
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
        wb.commit().map_err(engine(StoreOp::Write))?;
    }
    Ok(())
}
