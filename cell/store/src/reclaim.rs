//! Giving the disk back after a truncation or a removal.
//!
//! A truncation writes no tombstones: it moves the journal's floor in its `state` row, and
//! every read ignores slots below the floor. Record bytes live in generations (`gens`): runs
//! that fjall never rewrites. The [`Reclaimer`] thread, once the round that raised a floor is
//! durable and applied, finds the journal's generation rows that lie wholly below the floor
//! (or before its last removal), deletes them and adds their bytes to each generation's dead
//! count. A generation whose bytes are all dead is dropped whole (fjall's `drop_range`: its
//! files are unlinked, nothing is read or rewritten). A generation whose dead share reaches
//! [`StoreOptions::collect_dead_percent`](crate::StoreOptions) is *collected*: the entries still
//! live in it are written as a new generation, and the old one is dropped. So the bytes of a
//! truncated journal leave the disk even when they share generations with journals that never
//! truncate.
//!
//! Only floors that are durable are published: a crash before the round's sync must find
//! every record above the old floor still on disk. A compaction filter on `records` and
//! `anchor` destroys entries below their journal's floor too, whenever fjall does rewrite a
//! table (which move-only compaction of `records` seldom does).

use std::collections::{BTreeSet, HashMap};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fjall::compaction::filter::{CompactionFilter, CompactionFilterResult, Context, Factory, ItemAccessor, Verdict};
use fjall::{Database, Keyspace, PersistMode, Readable};
use paros_node::ports::{StoreError, StoreOp};

use crate::apply::Shared;
use crate::error::engine;
use crate::floors::Floors;
use crate::gens::{self, Counter, Total};
use crate::keys::{self, JOURNAL_LEN, LOG_LEN};

/// Makes a [`BelowFloor`] filter for each compaction of `records` and `anchor`.
pub(crate) struct BelowFloorFactory(pub(crate) Arc<Floors>);

impl std::panic::RefUnwindSafe for BelowFloorFactory {}

impl Factory for BelowFloorFactory {
    fn name(&self) -> &'static str {
        "paros-below-floor"
    }

    fn make_filter(&self, _: &Context) -> Box<dyn CompactionFilter> {
        Box::new(BelowFloor { floors: Arc::clone(&self.0) })
    }
}

/// Destroys `records` entries that are no longer live (below their journal's published floor,
/// or of an earlier incarnation) and `anchor` entries below the floor.
struct BelowFloor {
    floors: Arc<Floors>,
}

impl CompactionFilter for BelowFloor {
    fn filter_item(&mut self, item: ItemAccessor<'_>, _: &Context) -> CompactionFilterResult {
        let key = item.key();
        let live = if let Some((generation, journal, slot)) = gens::split_record(key) {
            self.floors.live(generation, &journal, slot)
        } else if let Some((journal, slot)) = keys::split_log(key).filter(|_| key.len() == LOG_LEN) {
            slot >= self.floors.get(&journal).unwrap_or(0)
        } else {
            true
        };
        Ok(if live { Verdict::Keep } else { Verdict::Destroy })
    }
}

/// What the reclaimer works on.
pub(crate) struct Disk {
    pub(crate) db: Database,
    pub(crate) records: Keyspace,
    pub(crate) gens: Keyspace,
    pub(crate) meta: Keyspace,
    pub(crate) floors: Arc<Floors>,
    pub(crate) counter: Arc<Counter>,
    pub(crate) shared: Arc<Shared>,
    /// A generation is collected once this share (percent) of its bytes is dead.
    pub(crate) collect_dead_percent: u8,
}

/// The thread that gives back the bytes of dead generation rows.
pub(crate) struct Reclaimer {
    tx: Option<Sender<Vec<[u8; JOURNAL_LEN]>>>,
    thread: Option<JoinHandle<()>>,
}

impl Reclaimer {
    /// Starts the thread. Journals sent to it are gathered for `interval` before one pass
    /// looks at each once. The thread runs at `nice` (`None`: the caller's priority).
    pub(crate) fn start(disk: Disk, interval: Duration, nice: Option<i32>) -> std::io::Result<Reclaimer> {
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new().name("paros-reclaim".into()).spawn(move || {
            if let Some(nice) = nice {
                // Best effort: at the caller's priority the passes only finish sooner.
                let _ = crate::priority::lower_this_thread(nice);
            }
            run(&disk, &rx, interval);
        })?;
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
            // A closed channel means the thread is gone; the bytes then stay until the next open.
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

/// How many reclaim intervals a journal stays watched after its floor was raised: a
/// generation ingested meanwhile with entries below the floor is still accounted.
const WATCH_INTERVALS: u32 = 150;

fn run(disk: &Disk, rx: &Receiver<Vec<[u8; JOURNAL_LEN]>>, interval: Duration) {
    // Journals whose floors rose lately, with when: their entries below the floor may still
    // be in the applier's buffer when the first pass runs, and reach a generation later.
    let mut watched: HashMap<[u8; JOURNAL_LEN], Instant> = HashMap::new();
    let mut generation_at_last_pass = None;
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
        } else if generation_at_last_pass == Some(disk.counter.peek()) {
            // No generation written since the last pass: no new row can lie below a floor.
            watched.retain(|_, since| since.elapsed() < interval * WATCH_INTERVALS);
            continue;
        }
        generation_at_last_pass = Some(disk.counter.peek());
        // A failure loses nothing: the bytes stay until a later pass or the next open.
        let mut touched = BTreeSet::new();
        for journal in watched.keys() {
            if let Ok(generations) = disk.account(journal) {
                touched.extend(generations);
            }
        }
        watched.retain(|_, since| since.elapsed() < interval * WATCH_INTERVALS);
        let mut dropped = false;
        for generation in touched {
            dropped |= disk.settle(generation).unwrap_or(false);
        }
        if dropped {
            passes += 1;
            // Dropped tables' files are unlinked once no version of the tree refers to them.
            // fjall forgets the versions older than its last published write when a memtable
            // rotates: one small write after the drop, then a rotation of `meta`, unlinks them
            // now rather than whenever the next flush comes.
            let _ = disk.meta.insert(keys::META_RECLAIMED, passes.to_be_bytes());
            let _ = disk.meta.rotate_memtable();
        }
    }
}

impl Disk {
    /// Deletes `journal`'s generation rows that are wholly dead and counts their bytes dead in
    /// their generations; returns those generations.
    fn account(&self, journal: &[u8; JOURNAL_LEN]) -> Result<Vec<u64>, StoreError> {
        let _gate = self.floors.gate.lock().unwrap_or_else(PoisonError::into_inner);
        let (floor, since) = (self.floors.get(journal).unwrap_or(0), self.floors.since(journal));
        if floor == 0 && since == 0 {
            return Ok(Vec::new());
        }
        let snap = self.db.snapshot();
        let dead: Vec<_> = gens::journal_rows(&snap, &self.gens, journal)?
            .into_iter()
            .filter(|(g, row)| *g < since || row.last < floor)
            .collect();
        if dead.is_empty() {
            return Ok(Vec::new());
        }
        let mut batch = self.db.batch();
        for (generation, row) in &dead {
            batch.remove(&self.gens, gens::journal_row_key(journal, *generation));
            if let Some(mut total) = self.total(*generation)? {
                total.dead = total.dead.saturating_add(row.bytes);
                batch.insert(&self.gens, gens::total_row_key(*generation), total.encode());
            }
        }
        batch.commit().map_err(engine(StoreOp::Write))?;
        Ok(dead.into_iter().map(|(g, _)| g).collect())
    }

    fn total(&self, generation: u64) -> Result<Option<Total>, StoreError> {
        let raw = self.gens.get(gens::total_row_key(generation)).map_err(engine(StoreOp::Read))?;
        Ok(raw.and_then(|raw| Total::decode(&raw)))
    }

    /// Drops `generation` if all of it is dead, collects it if enough of it is; returns
    /// whether tables were dropped.
    fn settle(&self, generation: u64) -> Result<bool, StoreError> {
        let Some(total) = self.total(generation)? else { return Ok(false) };
        if total.dead >= total.bytes {
            let mut batch = self.db.batch();
            batch.remove(&self.gens, gens::total_row_key(generation));
            batch.commit().map_err(engine(StoreOp::Write))?;
            self.db.persist(PersistMode::SyncData).map_err(engine(StoreOp::Sync))?;
            gens::drop_generation(&self.records, generation)?;
            return Ok(true);
        }
        if u128::from(total.dead) * 100 >= u128::from(total.bytes) * u128::from(self.collect_dead_percent) {
            self.collect(generation)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Writes what is still live in `generation` as a new generation, moves the rows over in
    /// one durable batch, and drops the old one.
    ///
    /// The new generation is numbered before anything is read: a run the applier numbered
    /// earlier is then either still in its buffer or already has rows, and an entry it holds
    /// for the same slot is newer than the one here, so that entry is left out (the newest
    /// generation wins, and the copy must not outrank it). Runs numbered later outrank the
    /// copy as they should.
    fn collect(&self, generation: u64) -> Result<(), StoreError> {
        let _gate = self.floors.gate.lock().unwrap_or_else(PoisonError::into_inner);
        let into = self.counter.next();
        // The sealed run before the snapshot: a run numbered before `into` is then either
        // still sealed here or has its rows in the snapshot (they are committed before it is
        // unsealed).
        let sealed = self.shared.sealed();
        let snap = self.db.snapshot();
        let mut journals: Vec<[u8; JOURNAL_LEN]> = Vec::new();
        let mut newer: Vec<(u64, gens::Row)> = Vec::new();
        let mut live = Vec::new();
        for item in snap.range(&self.records, gens::generation_range(generation)) {
            let (k, v) = item.into_inner().map_err(engine(StoreOp::Read))?;
            let Some((_, journal, slot)) = gens::split_record(&k) else { continue };
            if journals.last() != Some(&journal) {
                journals.push(journal);
                newer = gens::journal_rows(&snap, &self.gens, &journal)?
                    .into_iter()
                    .filter(|(g, _)| *g > generation)
                    .collect();
            }
            if !self.floors.live(generation, &journal, slot)
                || sealed.as_ref().is_some_and(|run| run.holds(&journal, slot))
            {
                continue;
            }
            let mut outranked = false;
            for (g, _) in newer.iter().filter(|(_, row)| row.first <= slot && slot <= row.last) {
                if snap
                    .get(&self.records, gens::record_key(*g, &journal, slot))
                    .map_err(engine(StoreOp::Read))?
                    .is_some()
                {
                    outranked = true;
                    break;
                }
            }
            if !outranked {
                live.push((journal, slot, v));
            }
        }
        let rows = gens::ingest(&self.records, into, live.into_iter())?;
        let mut batch = self.db.batch();
        if let Some(rows) = &rows {
            gens::stage_rows(&mut batch, &self.gens, into, rows);
        }
        for journal in &journals {
            batch.remove(&self.gens, gens::journal_row_key(journal, generation));
        }
        batch.remove(&self.gens, gens::total_row_key(generation));
        batch.commit().map_err(engine(StoreOp::Write))?;
        // The rows must point at the new generation durably before the old one's files go.
        self.db.persist(PersistMode::SyncData).map_err(engine(StoreOp::Sync))?;
        gens::drop_generation(&self.records, generation)
    }
}
