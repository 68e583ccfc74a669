//! How a [`FjallStore`](crate::store::FjallStore) is tuned: [`StoreOptions`] and the defaults
//! it takes, each with the measurement that chose it.

use std::time::Duration;

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

/// How a [`FjallStore`](crate::store::FjallStore) is tuned. [`StoreOptions::default`] is what
/// [`FjallStore::open`](crate::store::FjallStore::open) uses.
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
    /// flushes and compactions take the cores the rounds leave idle (see [`priority`](crate::priority)).
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
