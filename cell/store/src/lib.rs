//! paros-store: the machine's [`LogStore`](paros_node::ports::LogStore) on fjall (the only crate that links fjall).
//!
//! # Layout
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
//! | `meta` | `incarnation` | the store's `Incarnation`, `u64` big-endian (raw), written once with the identity |
//! | `meta` | `config/ ‖ tenant ‖ journal` | `JournalConfig` |
//! | `meta` | `reclaimed` | passes of the reclaimer that dropped tables since open, `u64` big-endian (raw) |
//!
//! Never one keyspace per journal: idle journals cost nothing here.
//!
//! # Writes
//!
//! [`FjallStore`] is meant to have a single committer (the host).
//! [`LogStore::write`](paros_node::ports::LogStore::write) turns a whole round of every
//! journal's [`WriteOp`](paros_core::WriteOp)s into **one** record of the store's own
//! write-ahead log (`wal/` beside fjall's files, see [`wal`]);
//! [`LogStore::sync`](paros_node::ports::LogStore::sync) then issues
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
//!
//! # Modules
//!
//! - `options`: [`StoreOptions`] and the tuned defaults.
//! - `open`: opening a directory: the database, the format marker, upgrade, the log's replay,
//!   the background threads.
//! - `store`: [`FjallStore`], the single committer's `LogStore`.
//! - `read`: reading a journal back, and [`FjallReader`].
//! - `probe`: [`StoreProbe`], the store's background activity.
//! - `wal`: the store's own write-ahead log.
//! - `apply`: rounds pending between the log and fjall, and the applier thread.
//! - `view`: reads through the pending rounds, the applier's buffer and fjall.
//! - `gens`: log entries by generation.
//! - `floors`: durable floors and incarnations, shared by every reader and writer.
//! - `reclaim`: the reclaimer thread and the compaction filter that give the disk back.
//! - `spaces`, `keys`, `values`: the keyspaces, their hand-encoded keys, their postcard values.
//! - `error`: the engine's and the file system's errors as `StoreError`s.
//! - [`priority`]: background threads' CPU priority; [`baseline`]: the raw-fjall benchmark.

mod apply;
pub mod baseline;
mod error;
mod floors;
mod gens;
mod keys;
mod open;
mod options;
pub mod priority;
mod probe;
mod read;
mod reclaim;
mod spaces;
mod store;
mod values;
mod view;
mod wal;

pub use open::{FORMAT, FORMATS_UPGRADED};
pub use options::{
    APPLY_BYTES, APPLY_INTERVAL, BACKGROUND_NICE, CACHE_BYTES, COLLECT_DEAD_PERCENT, JOURNAL_BYTES_MAX, L0_TABLES_MAX,
    LOG_BLOCK_BYTES, MEMBER_SPREAD_PCT, MEMTABLE_BYTES_MAX, META_MEMTABLE_BYTES_MAX, PENDING_BYTES_MAX,
    RECLAIM_INTERVAL, StoreOptions, TABLE_BYTES, WAL_SEGMENT_BYTES, WAL_SPARES, WORKER_THREADS,
};
/// A store's background work; the type lives with the ports so a dashboard can show it.
pub use paros_node::ports::StoreActivity;
pub use probe::StoreProbe;
pub use read::FjallReader;
pub use store::{FjallStore, StoreStats};
