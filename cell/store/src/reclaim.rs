//! Giving the disk back after a truncation.
//!
//! A truncation writes no tombstones: it moves the journal's floor in its `state` row, and
//! every read of the `log` keyspace ignores slots below the floor. The bytes below the floor
//! leave the disk in two ways, both running off the round's thread:
//!
//! - **Whole tables.** Once the round that raised a floor is durable and in fjall, the
//!   [`Reclaimer`] thread drops every `log` table whose keys all lie in
//!   `[journal ‖ 0, journal ‖ floor)` (fjall's `drop_range`: the files are unlinked, nothing is
//!   rewritten), and keeps watching the journal for a while: a table below the floor that a
//!   later flush or compaction writes is dropped at the next pass. A journal that wrote a lot
//!   and truncated it has its old records in such tables, since tables below level 0 are cut
//!   in key order.
//! - **Compaction.** A compaction filter on `log` destroys every entry below its journal's
//!   published floor whenever fjall compacts the table holding it, which reclaims the records
//!   of journals whose keys share tables with others.
//!
//! Only floors that are durable are published to either: a crash before the round's sync
//! must find every record above the old floor still on disk. Dropping or destroying an entry
//! leaves no tombstone, so an older version of the same key in a deeper table may become
//! visible again; it lies below the floor too, so reads ignore it and the next compaction or
//! drop that reaches it removes it.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fjall::compaction::filter::{CompactionFilter, CompactionFilterResult, Context, Factory, ItemAccessor, Verdict};
use fjall::{AbstractTree, Keyspace};

use crate::keys::{self, JOURNAL_LEN, LOG_LEN};

/// The durable floor of every journal that has one above slot 0, keyed by the journal's key
/// prefix, shared by the store, the compaction filter and the reclaimer.
#[derive(Debug, Default)]
pub(crate) struct Floors {
    floors: RwLock<HashMap<[u8; JOURNAL_LEN], u64>>,
    /// Held by the reclaimer while it drops one journal's tables and by the store while it
    /// removes a journal, so a drop never reaches a later incarnation of the same key.
    gate: Mutex<()>,
}

impl Floors {
    pub(crate) fn get(&self, journal: &[u8; JOURNAL_LEN]) -> Option<u64> {
        self.floors.read().unwrap_or_else(PoisonError::into_inner).get(journal).copied()
    }

    /// Publishes durable floors (only ever raises one).
    pub(crate) fn publish(&self, floors: impl IntoIterator<Item = ([u8; JOURNAL_LEN], u64)>) {
        let mut map = self.floors.write().unwrap_or_else(PoisonError::into_inner);
        for (journal, floor) in floors {
            let at = map.entry(journal).or_insert(0);
            *at = (*at).max(floor);
        }
    }

    /// Forgets a removed journal's floor, waiting for a drop of its tables in progress.
    pub(crate) fn forget(&self, journal: &[u8; JOURNAL_LEN]) {
        let _gate = self.gate.lock().unwrap_or_else(PoisonError::into_inner);
        self.floors.write().unwrap_or_else(PoisonError::into_inner).remove(journal);
    }
}

/// Makes a [`BelowFloor`] filter for each compaction of `log`.
pub(crate) struct BelowFloorFactory(pub(crate) Arc<Floors>);

impl std::panic::RefUnwindSafe for BelowFloorFactory {}

impl Factory for BelowFloorFactory {
    fn name(&self) -> &'static str {
        "paros-below-floor"
    }

    fn make_filter(&self, _: &Context) -> Box<dyn CompactionFilter> {
        Box::new(BelowFloor { floors: Arc::clone(&self.0), journal: [0; JOURNAL_LEN], floor: 0, known: false })
    }
}

/// Destroys `log` entries below their journal's published floor. Keys arrive in order, so
/// the floor is looked up once per journal, not per entry.
struct BelowFloor {
    floors: Arc<Floors>,
    journal: [u8; JOURNAL_LEN],
    floor: u64,
    known: bool,
}

impl CompactionFilter for BelowFloor {
    fn filter_item(&mut self, item: ItemAccessor<'_>, _: &Context) -> CompactionFilterResult {
        let key = item.key();
        if key.len() != LOG_LEN {
            return Ok(Verdict::Keep);
        }
        let (journal, slot) = key.split_at(JOURNAL_LEN);
        if !self.known || journal != self.journal {
            self.journal.copy_from_slice(journal);
            self.floor = self.floors.get(&self.journal).unwrap_or(0);
            self.known = true;
        }
        let slot = u64::from_be_bytes(slot.try_into().unwrap_or([0xff; 8]));
        Ok(if slot < self.floor { Verdict::Destroy } else { Verdict::Keep })
    }
}

/// The thread that drops whole `log` tables below published floors.
pub(crate) struct Reclaimer {
    tx: Option<Sender<Vec<[u8; JOURNAL_LEN]>>>,
    thread: Option<JoinHandle<()>>,
}

impl Reclaimer {
    /// Starts the thread. Journals sent to it are gathered for `interval` before one pass
    /// looks at each once.
    pub(crate) fn start(log: Keyspace, meta: Keyspace, floors: Arc<Floors>, interval: Duration) -> std::io::Result<Reclaimer> {
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("paros-reclaim".into())
            .spawn(move || run(&log, &meta, &floors, &rx, interval))?;
        Ok(Reclaimer { tx: Some(tx), thread: Some(thread) })
    }

    /// A handle that asks for passes from another thread (the applier's, once the rounds that
    /// raised the floors are in fjall). The thread stops only once every handle is gone.
    pub(crate) fn waker(&self) -> Option<Sender<Vec<[u8; JOURNAL_LEN]>>> {
        self.tx.clone()
    }

    /// Asks for a pass over these journals (their floors were just published).
    pub(crate) fn wake(&self, journals: Vec<[u8; JOURNAL_LEN]>) {
        if let Some(tx) = &self.tx {
            // A closed channel means the thread is gone; reclaiming then waits for compaction.
            let _ = tx.send(journals);
        }
    }
}

impl Drop for Reclaimer {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// How many reclaim intervals a journal stays watched after its floor was raised: a table
/// below the floor that fjall flushes or compacts within that time is still dropped.
const WATCH_INTERVALS: u32 = 150;

fn run(log: &Keyspace, meta: &Keyspace, floors: &Floors, rx: &Receiver<Vec<[u8; JOURNAL_LEN]>>, interval: Duration) {
    // Journals whose floors rose lately, with when: their records below the floor may still
    // be in memtables when the first pass runs, and reach tables only at a later flush.
    let mut watched: HashMap<[u8; JOURNAL_LEN], Instant> = HashMap::new();
    let mut tables_at_last_pass: Option<(usize, usize)> = None;
    let mut passes = 0u64;
    loop {
        let woken = if watched.is_empty() {
            match rx.recv() {
                Ok(more) => Some(more),
                Err(_) => return,
            }
        } else {
            match rx.recv_timeout(interval) {
                Ok(more) => Some(more),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        };
        let now = Instant::now();
        if let Some(more) = woken {
            watched.extend(more.into_iter().map(|j| (j, now)));
            // Gather what else arrives within the interval: one pass then covers it all.
            let until = now + interval;
            loop {
                let left = until.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
                    Ok(more) => watched.extend(more.into_iter().map(|j| (j, Instant::now()))),
                    Err(RecvTimeoutError::Timeout) => break,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
        } else if tables_at_last_pass == Some((log.table_count(), log.l0_table_count())) {
            // No flush or compaction since the last pass: no new table can lie below a floor.
            watched.retain(|_, since| since.elapsed() < interval * WATCH_INTERVALS);
            continue;
        }
        tables_at_last_pass = Some((log.table_count(), log.l0_table_count()));
        let mut dropped = false;
        for journal in watched.keys() {
            // The gate spans the look-up and the drop: a journal removed meanwhile (and
            // perhaps placed afresh) is never dropped below its old floor.
            let _gate = floors.gate.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(floor) = floors.get(journal) else { continue };
            let lo = keys::log_at(journal, 0);
            let hi = keys::log_at(journal, floor);
            // A failure here loses nothing: the records stay until compaction or the next drop.
            if holds_a_table_within(log, &lo, &hi) && log.tree.drop_range(lo..hi).is_ok() {
                dropped = true;
            }
        }
        watched.retain(|_, since| since.elapsed() < interval * WATCH_INTERVALS);
        if dropped {
            passes += 1;
            // The dropped tables' files are unlinked once no version of the tree refers to
            // them. fjall forgets the versions older than its last published write when a
            // memtable rotates: one small write after the drop, then a rotation of `meta`,
            // unlinks them now rather than whenever the next flush comes.
            let _ = meta.insert(keys::META_RECLAIMED, passes.to_be_bytes());
            let _ = meta.rotate_memtable();
            tables_at_last_pass = Some((log.table_count(), log.l0_table_count()));
        }
    }
}

/// Whether some table of `log` holds only keys in `[lo, hi)`. `drop_range` writes a new
/// version of the tree even when it drops nothing, so it is called only when this holds.
fn holds_a_table_within(log: &Keyspace, lo: &[u8], hi: &[u8]) -> bool {
    let version = log.tree.current_version();
    version.iter_tables().any(|t| {
        let range = &t.metadata.key_range;
        range.min().as_ref() >= lo && range.max().as_ref() < hi
    })
}
