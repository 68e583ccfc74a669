//! Rounds that are in the write-ahead log but not yet in fjall, and the thread that applies
//! them.
//!
//! A round written by [`FjallStore`](crate::store::FjallStore) is appended to the [`crate::wal`] and pushed here;
//! once the log's fdatasync covers it, it is *synced*. The applier takes synced rounds many at
//! a time: their `promise`, `state`, `anchor` and `meta` rows go to fjall as one batch without
//! sync, and their `log` entries to a sorted buffer, which is bulk-ingested into fjall's
//! `records` as one generation (no fjall journal, no memtable, see [`crate::gens`]) whenever a
//! log segment closes. Reads see the pending rounds and the buffer over fjall
//! ([`View`](crate::view::View)), so a round is readable the moment it was written, whether or
//! not it was applied.
//!
//! The applier applies only synced rounds: what fjall holds is then always a prefix of what the
//! log holds durably, and replaying the log over fjall at boot restores exactly the synced
//! rounds. A closed segment is retired (kept as a spare to be reused, or deleted: `wal`'s
//! "Recycling") once its entries are ingested and fjall's own journal has been made durable
//! over its other rows.
//!
//! Bounded: [`StoreOptions::pending_bytes_max`](crate::options::StoreOptions) of rounds wait
//! here at most; past it, the writer waits for the applier.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fjall::{Database, PersistMode};
use paros_node::ports::{StoreError, StoreOp};

use crate::error::{corrupt, engine, file};
use crate::floors::Floors;
use crate::gens::{self, Counter};
use crate::keys::{self, JOURNAL_LEN, LOG_LEN};
use crate::spaces::{Space, Spaces};
use crate::wal::{Change, Spares};

/// One round's changes, sorted by `(space, key)`, each key once.
#[derive(Debug)]
pub(crate) struct Round {
    id: u64,
    bytes: u64,
    changes: Vec<Change>,
}

impl Round {
    /// `changes` must be sorted by `(space, key)` with each key once.
    pub(crate) fn new(id: u64, changes: Vec<Change>) -> Round {
        debug_assert!(changes.windows(2).all(|w| (w[0].space, &w[0].key) < (w[1].space, &w[1].key)));
        let bytes = changes.iter().map(|c| (c.key.len() + c.value.as_ref().map_or(0, Vec::len) + 48) as u64).sum();
        Round { id, bytes, changes }
    }

    /// The change of `key` in `space`, if this round has one.
    pub(crate) fn find(&self, space: Space, key: &[u8]) -> Option<&Change> {
        self.changes.binary_search_by(|c| (c.space, c.key.as_slice()).cmp(&(space, key))).ok().map(|i| &self.changes[i])
    }

    /// The changes of `space` with keys in `lo..=hi`.
    pub(crate) fn range(&self, space: Space, lo: &[u8], hi: &[u8]) -> &[Change] {
        let start = self.changes.partition_point(|c| (c.space, c.key.as_slice()) < (space, lo));
        let end = self.changes.partition_point(|c| (c.space, c.key.as_slice()) <= (space, hi));
        &self.changes[start..end.max(start)]
    }
}

#[derive(Default)]
struct Pending {
    /// Written rounds not yet applied, oldest first.
    rounds: VecDeque<Arc<Round>>,
    /// The newest round the log's fdatasync covers.
    synced_through: u64,
    /// Bytes of the pending rounds that are synced, and of those that are not.
    synced_bytes: u64,
    unsynced_bytes: u64,
    /// Closed segments, oldest first, each with the newest round it holds.
    closed: VecDeque<(PathBuf, u64)>,
    /// The newest round applied (its `log` changes to the buffer, the rest to fjall).
    applied_through: u64,
    /// The newest round whose `log` changes fjall holds (ingested, durable).
    ingested_through: u64,
    /// A caller of [`Shared::settle`] waits for the buffer to be ingested.
    flush_wanted: bool,
    /// Journals whose floors a round raised, with that round: the reclaimer looks at them once
    /// the round is in fjall (tables below a floor can be dropped only once they exist).
    reclaim: VecDeque<(u64, Vec<[u8; JOURNAL_LEN]>)>,
    stop: bool,
    /// Why the applier stopped, if it failed: every later write fails with it.
    failed: Option<Arc<StoreError>>,
    /// Writes that waited for the applier to make room, and how long they waited in all.
    room_waits: u64,
    room_waited: Duration,
}

/// `log` changes applied but not yet in fjall: fjall's `records` keyspace is written only by bulk
/// ingestion of whole sorted runs (no journal, no memtable), once per closed segment.
#[derive(Default)]
pub(crate) struct LogBuffer {
    /// Changes applied since the last ingestion began.
    pub(crate) active: Run,
    /// The run being ingested now.
    pub(crate) sealed: Option<Arc<Run>>,
}

/// `log` keys (`journal ‖ slot`) with their newest value, or their removal (`None`), held by
/// journal, then by slot: a change costs one hash lookup and an integer-keyed insert (most
/// often at the end), not a byte-string comparison per tree level. Values are fjall's shared
/// slices: a read hands out a reference, and ingestion passes it on, neither copies it.
#[derive(Default)]
pub(crate) struct Run {
    journals: HashMap<[u8; JOURNAL_LEN], Slots>,
}

/// One journal's changes in a [`Run`], by slot.
type Slots = BTreeMap<u64, Option<fjall::Slice>>;

/// A change of a [`Run`], with its whole key.
pub(crate) type RunItem<'r> = ([u8; LOG_LEN], &'r Option<fjall::Slice>);

impl Run {
    /// Records the newest change of a `log` key.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] when `key` is not a `log` key.
    pub(crate) fn insert(&mut self, key: &[u8], value: Option<fjall::Slice>) -> Result<(), StoreError> {
        let (journal, slot) = keys::split_log(key).ok_or_else(|| corrupt("log key", key))?;
        self.journals.entry(journal).or_default().insert(slot, value);
        Ok(())
    }

    /// Whether the run has a change (a value or a removal) for `journal` at `slot`.
    pub(crate) fn holds(&self, journal: &[u8; JOURNAL_LEN], slot: u64) -> bool {
        self.journals.get(journal).is_some_and(|slots| slots.contains_key(&slot))
    }

    /// Each journal's changes by slot, journals in key order.
    fn by_journal(&self) -> Vec<(&[u8; JOURNAL_LEN], &Slots)> {
        let mut journals: Vec<_> = self.journals.iter().collect();
        journals.sort_unstable_by_key(|(j, _)| **j);
        journals
    }

    /// Every change, in key order.
    fn iter(&self) -> impl Iterator<Item = RunItem<'_>> {
        self.by_journal().into_iter().flat_map(|(j, slots)| slots.iter().map(move |(s, v)| (keys::log_at(j, *s), v)))
    }

    /// The changes with keys in `lo..=hi`, in key order: one journal's slots when both bounds
    /// are `log` keys of that journal (every read of `log` is), else a filtered walk of all.
    pub(crate) fn range<'r>(&'r self, lo: &[u8], hi: &[u8]) -> Box<dyn Iterator<Item = RunItem<'r>> + 'r> {
        match (keys::split_log(lo), keys::split_log(hi)) {
            (Some((journal, from)), Some((same, to))) if journal == same => match self.journals.get(&journal) {
                Some(slots) if from <= to => {
                    Box::new(slots.range(from..=to).map(move |(s, v)| (keys::log_at(&journal, *s), v)))
                }
                _ => Box::new(std::iter::empty()),
            },
            _ => {
                let (lo, hi) = (lo.to_vec(), hi.to_vec());
                Box::new(
                    self.iter().filter(move |(k, _)| lo.as_slice() <= k.as_slice() && k.as_slice() <= hi.as_slice()),
                )
            }
        }
    }
}

/// What the store and its applier share.
pub(crate) struct Shared {
    pending: Mutex<Pending>,
    /// Lock order: `pending` is never taken while `logs` is held.
    logs: RwLock<LogBuffer>,
    /// Wakes the applier.
    wake: Condvar,
    /// Wakes a writer waiting for room.
    room: Condvar,
    /// Durable floors and removals: what reads and ingestion leave out.
    pub(crate) floors: Arc<Floors>,
    /// Numbers the generations.
    pub(crate) counter: Arc<Counter>,
}

/// When the applier runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pace {
    /// How long synced rounds may wait before the applier takes them.
    pub(crate) interval: Duration,
    /// Synced bytes that wake the applier at once.
    pub(crate) bytes: u64,
}

fn failed(why: &Arc<StoreError>) -> StoreError {
    StoreError::Stopped(Arc::clone(why))
}

impl Shared {
    pub(crate) fn new(floors: Arc<Floors>, counter: Arc<Counter>) -> Arc<Shared> {
        Arc::new(Shared {
            pending: Mutex::new(Pending::default()),
            logs: RwLock::new(LogBuffer::default()),
            wake: Condvar::new(),
            room: Condvar::new(),
            floors,
            counter,
        })
    }

    /// The `log` buffer, read-locked: the active run and the one being ingested.
    pub(crate) fn logs(&self) -> RwLockReadGuard<'_, LogBuffer> {
        self.logs.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The run being ingested, if any: its generation has no rows yet.
    pub(crate) fn sealed(&self) -> Option<Arc<Run>> {
        self.logs.read().unwrap_or_else(std::sync::PoisonError::into_inner).sealed.clone()
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Bytes of rounds written and not yet applied.
    pub(crate) fn pending_bytes(&self) -> u64 {
        let p = self.lock();
        p.synced_bytes + p.unsynced_bytes
    }

    /// Waits while more than `bytes_max` of synced rounds are pending.
    ///
    /// # Errors
    /// The applier's failure.
    pub(crate) fn wait_for_room(&self, bytes_max: u64) -> Result<(), StoreError> {
        let mut p = self.lock();
        if p.synced_bytes > bytes_max && p.failed.is_none() {
            let started = Instant::now();
            while p.synced_bytes > bytes_max && p.failed.is_none() {
                p = self.room.wait(p).unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            p.room_waits += 1;
            p.room_waited += started.elapsed();
        }
        p.failed.as_ref().map_or(Ok(()), |why| Err(failed(why)))
    }

    /// Writes that waited for room since the store opened, and their wait in all.
    pub(crate) fn room_waits(&self) -> (u64, Duration) {
        let p = self.lock();
        (p.room_waits, p.room_waited)
    }

    /// Waits until fjall holds every synced round, its `log` changes included.
    ///
    /// # Errors
    /// The applier's failure.
    pub(crate) fn settle(&self) -> Result<(), StoreError> {
        let mut p = self.lock();
        p.flush_wanted = true;
        self.wake.notify_one();
        while (p.synced_bytes > 0 || p.flush_wanted || p.ingested_through < p.applied_through) && p.failed.is_none() {
            p = self.room.wait(p).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        p.failed.as_ref().map_or(Ok(()), |why| Err(failed(why)))
    }

    /// Adds a written (not yet synced) round.
    ///
    /// # Errors
    /// The applier's failure.
    pub(crate) fn push(&self, round: Round) -> Result<(), StoreError> {
        let mut p = self.lock();
        if let Some(why) = &p.failed {
            return Err(failed(why));
        }
        p.unsynced_bytes += round.bytes;
        p.rounds.push_back(Arc::new(round));
        Ok(())
    }

    /// Every round up to `through` is durable in the log; `closed` is the segment the sync
    /// closed, if any, with `through` its newest round.
    pub(crate) fn synced(&self, through: u64, closed: Option<PathBuf>, pace: Pace) {
        let mut p = self.lock();
        let was = p.synced_bytes;
        p.synced_through = through;
        p.synced_bytes += std::mem::take(&mut p.unsynced_bytes);
        if let Some(path) = closed {
            p.closed.push_back((path, through));
        }
        // Wake the applier only when it may be asleep with nothing to do, or has enough.
        if (was == 0 && p.synced_bytes > 0) || p.synced_bytes >= pace.bytes || !p.closed.is_empty() {
            self.wake.notify_one();
        }
    }

    /// Asks the applier to wake the reclaimer for `journals` once round `round` is in fjall.
    pub(crate) fn reclaim_after(&self, round: u64, journals: Vec<[u8; JOURNAL_LEN]>) {
        self.lock().reclaim.push_back((round, journals));
    }

    /// The pending rounds, oldest first: what reads see over fjall.
    pub(crate) fn overlay(&self) -> Vec<Arc<Round>> {
        self.lock().rounds.iter().cloned().collect()
    }

    /// Asks the applier to apply what is synced and stop.
    pub(crate) fn stop(&self) {
        self.lock().stop = true;
        self.wake.notify_one();
    }
}

/// Commits `rounds` of changes (oldest first) to fjall as one batch, without sync: the newest
/// change of each key wins. `log` changes are left out (they go to a generation); a `gens`
/// change is a removal's mark (`x ‖ journal`), written with the generation the journal's next
/// incarnation starts at and published to `shared.floors` at once.
///
/// Returns the journals removed, for the reclaimer.
pub(crate) fn commit<'c>(
    db: &Database,
    spaces: &Spaces,
    shared: &Shared,
    rounds: impl IntoIterator<Item = &'c [Change]>,
) -> Result<Vec<[u8; JOURNAL_LEN]>, StoreError> {
    let mut newest: BTreeMap<(Space, &[u8]), Option<&[u8]>> = BTreeMap::new();
    for changes in rounds {
        for c in changes.iter().filter(|c| c.space != Space::Log) {
            newest.insert((c.space, c.key.as_slice()), c.value.as_deref());
        }
    }
    if newest.is_empty() {
        return Ok(Vec::new());
    }
    let mut wb = db.batch();
    let mut removed = Vec::new();
    for ((space, key), value) in newest {
        if space == Space::Gens {
            removed.push(
                key.get(1..)
                    .and_then(|j| <[u8; JOURNAL_LEN]>::try_from(j).ok())
                    .ok_or_else(|| corrupt("removal mark", key))?,
            );
            continue;
        }
        match value {
            Some(v) => wb.insert(spaces.of(space), key, v),
            None => wb.remove(spaces.of(space), key),
        }
    }
    if !removed.is_empty() {
        // Under the gate, so no collection numbers a generation meanwhile: every generation
        // below `since` was numbered before the removal, and only the new incarnation's
        // entries reach the ones from `since` on.
        let _gate = shared.floors.gate.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let since = shared.counter.peek();
        for journal in &removed {
            wb.insert(&spaces.gens, gens::since_row_key(journal), since.to_be_bytes());
        }
        shared.floors.publish_since(removed.iter().map(|j| (*j, since)));
    }
    wb.commit().map_err(engine(StoreOp::Write))?;
    Ok(removed)
}

/// Ingests `run` (its values at or above their journal's floor and of its current
/// incarnation; removals need no entry, since a removal hides older generations) as one
/// generation, and commits that generation's rows. Not durable until fjall's journal is.
pub(crate) fn ingest_run(db: &Database, spaces: &Spaces, shared: &Shared, run: &Run) -> Result<(), StoreError> {
    let generation = shared.counter.next();
    let floors = &shared.floors;
    let items = run.by_journal().into_iter().flat_map(|(journal, slots)| {
        slots
            .range(floors.get(journal).unwrap_or(0)..)
            .filter_map(move |(slot, value)| value.as_ref().map(|v| (*journal, *slot, v.clone())))
    });
    let Some(rows) = gens::ingest(&spaces.records, generation, items)? else { return Ok(()) };
    let mut wb = db.batch();
    gens::stage_rows(&mut wb, &spaces.gens, generation, &rows);
    wb.commit().map_err(engine(StoreOp::Write))
}

/// The applier's thread.
pub(crate) struct Applier {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Applier {
    /// Starts the thread, at `nice` (`None`: the caller's priority); `reclaimer` is woken for
    /// journals whose raised floors are applied.
    pub(crate) fn start(
        shared: Arc<Shared>,
        db: Database,
        spaces: Spaces,
        (pace, spares): (Pace, Spares),
        reclaimer: Option<Reclaim>,
        nice: Option<i32>,
    ) -> std::io::Result<Applier> {
        let for_thread = Arc::clone(&shared);
        let thread = std::thread::Builder::new().name("paros-store-apply".into()).spawn(move || {
            if let Some(nice) = nice {
                // Best effort: at the caller's priority the applier only competes with the rounds.
                let _ = crate::priority::lower_this_thread(nice);
            }
            let applier =
                Thread { shared: &for_thread, db: &db, spaces: &spaces, reclaimer: reclaimer.as_ref(), spares };
            applier.run(pace);
        })?;
        Ok(Applier { shared, thread: Some(thread) })
    }

    /// Applies every synced round, then stops the thread.
    pub(crate) fn finish(&mut self) {
        self.shared.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Applier {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Waits for synced rounds (gathering them for up to `pace.interval`), and returns them; `None`
/// once stopped with nothing synced left.
fn next_batch(shared: &Shared, pace: Pace) -> Option<Vec<Arc<Round>>> {
    let mut p = shared.lock();
    let mut first_seen: Option<Instant> = None;
    loop {
        if p.failed.is_some() {
            return None;
        }
        let ingest_due = p.ingested_through < p.applied_through && (p.flush_wanted || p.stop);
        if p.synced_bytes > 0
            || p.flush_wanted
            || ingest_due
            || p.closed.front().is_some_and(|(_, last)| *last <= p.applied_through)
        {
            let seen = *first_seen.get_or_insert_with(Instant::now);
            let waited = seen.elapsed();
            if p.stop
                || p.flush_wanted
                || p.synced_bytes >= pace.bytes
                || !p.closed.is_empty()
                || waited >= pace.interval
            {
                break;
            }
            p = shared
                .wake
                .wait_timeout(p, pace.interval - waited)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
            continue;
        }
        if p.stop {
            return None;
        }
        p = shared.wake.wait(p).unwrap_or_else(std::sync::PoisonError::into_inner);
    }
    let through = p.synced_through;
    Some(p.rounds.iter().take_while(|r| r.id <= through).cloned().collect())
}

/// Where the applier sends journals for the reclaimer to look at.
pub(crate) type Reclaim = std::sync::mpsc::Sender<Vec<[u8; JOURNAL_LEN]>>;

/// The applier's thread and what it writes to.
struct Thread<'a> {
    shared: &'a Shared,
    db: &'a Database,
    spaces: &'a Spaces,
    reclaimer: Option<&'a Reclaim>,
    spares: Spares,
}

impl Thread<'_> {
    fn run(&self, pace: Pace) {
        while let Some(batch) = next_batch(self.shared, pace) {
            if let Err(e) = self.apply(&batch) {
                let mut p = self.shared.lock();
                p.failed = Some(Arc::new(e));
                self.shared.room.notify_all();
                return;
            }
        }
    }

    fn apply(&self, batch: &[Arc<Round>]) -> Result<(), StoreError> {
        let removed = commit(self.db, self.spaces, self.shared, batch.iter().map(|r| r.changes.as_slice()))?;
        {
            let mut logs = self.shared.logs.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            for c in batch.iter().flat_map(|r| &r.changes).filter(|c| c.space == Space::Log) {
                logs.active.insert(&c.key, c.value.as_deref().map(fjall::Slice::from))?;
            }
        }
        // Only now may the rounds leave: a reader that no longer finds them finds their
        // changes in fjall or in the buffer.
        // A removed journal's older generations are dead now.
        let mut reclaim = removed;
        let ingest = {
            let mut p = self.shared.lock();
            for _ in batch {
                let r = p.rounds.pop_front().expect("applied rounds were pending");
                p.synced_bytes -= r.bytes;
            }
            if let Some(last) = batch.last() {
                p.applied_through = last.id;
            }
            self.shared.room.notify_all();
            while p.reclaim.front().is_some_and(|(round, _)| *round <= p.applied_through) {
                reclaim.extend(p.reclaim.pop_front().expect("checked").1);
            }
            let segment_waits = p.closed.front().is_some_and(|(_, last)| *last <= p.applied_through);
            (p.ingested_through < p.applied_through && (segment_waits || p.flush_wanted || p.stop))
                .then_some(p.applied_through)
        };
        if let Some(tx) = self.reclaimer.filter(|_| !reclaim.is_empty()) {
            // A reclaimer gone loses nothing: compaction still destroys what lies below floors.
            let _ = tx.send(reclaim);
        }
        if let Some(through) = ingest {
            self.ingest()?;
            let mut p = self.shared.lock();
            p.ingested_through = through;
        }
        let done: Vec<PathBuf> = {
            let mut p = self.shared.lock();
            if p.flush_wanted && p.ingested_through >= p.applied_through && p.synced_bytes == 0 {
                p.flush_wanted = false;
                self.shared.room.notify_all();
            }
            let mut done = Vec::new();
            while p.closed.front().is_some_and(|(_, last)| *last <= p.ingested_through) {
                done.push(p.closed.pop_front().expect("checked").0);
            }
            done
        };
        if !done.is_empty() {
            // The closed segments' `log` changes are in ingested tables (durable) and the rest
            // in fjall's journal: make that durable, then drop them.
            self.db.persist(PersistMode::SyncData).map_err(engine(StoreOp::Sync))?;
            for path in done {
                self.spares.retire(&path).map_err(file(StoreOp::Write, &path))?;
            }
        }
        Ok(())
    }

    /// Writes the buffer into fjall's `records` as one generation, leaving out records below
    /// their journal's durable floor (they would only be reclaimed again). The run stays
    /// readable as `sealed` until its generation's rows are committed.
    fn ingest(&self) -> Result<(), StoreError> {
        let run = {
            let mut logs = self.shared.logs.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            let run = Arc::new(std::mem::take(&mut logs.active));
            logs.sealed = Some(Arc::clone(&run));
            run
        };
        ingest_run(self.db, self.spaces, self.shared, &run)?;
        self.shared.logs.write().unwrap_or_else(std::sync::PoisonError::into_inner).sealed = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(journal: u8, slot: u64) -> [u8; LOG_LEN] {
        keys::log_at(&[journal; JOURNAL_LEN], slot)
    }

    #[test]
    fn a_run_reads_in_key_order_within_and_across_journals() {
        let mut run = Run::default();
        for (j, s) in [(2, 5), (1, 9), (2, 1), (1, 0), (3, 7), (2, 3)] {
            run.insert(&key(j, s), Some(fjall::Slice::from(&[j, u8::try_from(s).unwrap()][..]))).unwrap();
        }
        run.insert(&key(2, 3), None).unwrap();
        let all: Vec<_> = run.iter().map(|(k, v)| (k, v.clone())).collect();
        let mut sorted = all.clone();
        sorted.sort_by_key(|a| a.0);
        assert_eq!(all, sorted, "key order");
        assert_eq!(all.len(), 6, "each key once, its newest change");
        assert_eq!(all.iter().find(|(k, _)| *k == key(2, 3)).map(|(_, v)| v.clone()), Some(None), "the removal won");
        let one: Vec<_> = run.range(&key(2, 2), &key(2, 5)).map(|(k, _)| k).collect();
        assert_eq!(one, vec![key(2, 3), key(2, 5)]);
        assert_eq!(run.range(&key(2, 6), &key(2, 5)).count(), 0, "an empty range");
        assert_eq!(run.range(&key(4, 0), &key(4, 9)).count(), 0, "a journal with nothing buffered");
        let across: Vec<_> = run.range(&key(1, 5), &key(2, 2)).map(|(k, _)| k).collect();
        assert_eq!(across, vec![key(1, 9), key(2, 1)], "bounds in two journals walk the keys between");
        assert!(run.insert(&[0u8; JOURNAL_LEN], None).is_err(), "a key that is not a log key is refused");
    }
}
