//! Record bytes by generation.
//!
//! Every bulk ingestion of `log` entries (the applier's buffer, boot's replay, an upgrade's
//! copy, the collector's rewrite) writes one *generation*: a sorted run whose keys are
//! `generation ‖ journal ‖ slot` in the `records` keyspace. Generations are numbered in the
//! order they are written, so each run's keys lie above every key written before it: no table
//! of `records` ever overlaps another, fjall's compaction only moves tables between levels and
//! never rewrites record bytes (`journal ‖ slot` keys made every ingested run overlap all the
//! others, and each level-0 compaction rewrote level 1, docs/storage.md §3).
//!
//! Which generations hold a journal is kept in the `gens` keyspace:
//! - `j ‖ journal ‖ generation` → first slot, last slot, bytes: one row per journal per
//!   generation it has entries in (the per-journal index every read goes through);
//! - `t ‖ generation` → bytes written, bytes known dead: one row per live generation (the
//!   reclaimer's account, and the proof that a generation's tables are meant to exist);
//! - `x ‖ journal` → generation: the journal was removed before that generation, so its
//!   entries in older generations belong to a previous incarnation.
//!
//! A slot can be in more than one generation (an accepted value replaced at a higher ballot,
//! or a learned value after the accepted one): the newest generation wins. Tables of a
//! generation without a `t` row are leftovers of a crash between an ingestion and its rows
//! (or between a collection's rows and its drop) and are dropped at open.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use fjall::{AbstractTree, Keyspace, Readable, Snapshot};
use paros_node::ports::{StoreError, StoreOp};

use crate::error::{corrupt, engine};
use crate::keys::{self, JOURNAL_LEN, LOG_LEN, u64_at};

/// `generation ‖ journal ‖ slot`: the key of `records`.
pub(crate) const RECORD_LEN: usize = 8 + JOURNAL_LEN + 8;

const ROW_JOURNAL: u8 = b'j';
const ROW_TOTAL: u8 = b't';
const ROW_SINCE: u8 = b'x';

pub(crate) fn record_key(generation: u64, journal: &[u8; JOURNAL_LEN], slot: u64) -> [u8; RECORD_LEN] {
    let mut out = [0u8; RECORD_LEN];
    out[..8].copy_from_slice(&generation.to_be_bytes());
    out[8..8 + JOURNAL_LEN].copy_from_slice(journal);
    out[8 + JOURNAL_LEN..].copy_from_slice(&slot.to_be_bytes());
    out
}

/// The generation, journal and slot of a `records` key; `None` if malformed.
pub(crate) fn split_record(key: &[u8]) -> Option<(u64, [u8; JOURNAL_LEN], u64)> {
    if key.len() != RECORD_LEN {
        return None;
    }
    let generation = u64::from_be_bytes(key[..8].try_into().ok()?);
    let journal = key[8..8 + JOURNAL_LEN].try_into().ok()?;
    let slot = u64::from_be_bytes(key[8 + JOURNAL_LEN..].try_into().ok()?);
    Some((generation, journal, slot))
}

/// Every key of `generation`: from its first key to the first key of the next one.
pub(crate) fn generation_range(generation: u64) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let hi = generation.checked_add(1).map_or(Bound::Unbounded, |g| Bound::Excluded(g.to_be_bytes().to_vec()));
    (Bound::Included(generation.to_be_bytes().to_vec()), hi)
}

/// Drops every table of `generation` (its files are unlinked once no version refers to them).
pub(crate) fn drop_generation(records: &Keyspace, generation: u64) -> Result<(), StoreError> {
    records.tree.drop_range(generation_range(generation)).map_err(engine(StoreOp::Write))
}

pub(crate) fn journal_row_key(journal: &[u8; JOURNAL_LEN], generation: u64) -> [u8; 1 + JOURNAL_LEN + 8] {
    let mut out = [0u8; 1 + JOURNAL_LEN + 8];
    out[0] = ROW_JOURNAL;
    out[1..=JOURNAL_LEN].copy_from_slice(journal);
    out[1 + JOURNAL_LEN..].copy_from_slice(&generation.to_be_bytes());
    out
}

pub(crate) fn total_row_key(generation: u64) -> [u8; 9] {
    let mut out = [ROW_TOTAL; 9];
    out[1..].copy_from_slice(&generation.to_be_bytes());
    out
}

pub(crate) fn since_row_key(journal: &[u8; JOURNAL_LEN]) -> [u8; 1 + JOURNAL_LEN] {
    let mut out = [ROW_SINCE; 1 + JOURNAL_LEN];
    out[1..].copy_from_slice(journal);
    out
}

/// What a generation holds of each journal in it, journals in key order.
pub(crate) type Rows = Vec<([u8; JOURNAL_LEN], Row)>;

/// What one generation holds of one journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) first: u64,
    pub(crate) last: u64,
    /// Key and value bytes of its entries.
    pub(crate) bytes: u64,
}

impl Row {
    pub(crate) fn encode(self) -> [u8; 24] {
        let mut out = [0u8; 24];
        out[..8].copy_from_slice(&self.first.to_be_bytes());
        out[8..16].copy_from_slice(&self.last.to_be_bytes());
        out[16..].copy_from_slice(&self.bytes.to_be_bytes());
        out
    }

    fn decode(raw: &[u8]) -> Option<Row> {
        if raw.len() != 24 {
            return None;
        }
        Some(Row { first: u64_at(raw, 0)?, last: u64_at(raw, 8)?, bytes: u64_at(raw, 16)? })
    }
}

/// A generation's account: bytes written, and bytes of rows found dead since.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Total {
    pub(crate) bytes: u64,
    pub(crate) dead: u64,
}

impl Total {
    pub(crate) fn encode(self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.bytes.to_be_bytes());
        out[8..].copy_from_slice(&self.dead.to_be_bytes());
        out
    }

    pub(crate) fn decode(raw: &[u8]) -> Option<Total> {
        if raw.len() != 16 {
            return None;
        }
        Some(Total { bytes: u64_at(raw, 0)?, dead: u64_at(raw, 8)? })
    }
}

/// Every row of `journal` in `gens`, by generation.
pub(crate) fn journal_rows(
    snap: &Snapshot,
    gens: &Keyspace,
    journal: &[u8; JOURNAL_LEN],
) -> Result<Vec<(u64, Row)>, StoreError> {
    let lo = journal_row_key(journal, 0);
    let hi = journal_row_key(journal, u64::MAX);
    let mut out = Vec::new();
    for item in snap.range(gens, lo..=hi) {
        let (k, v) = item.into_inner().map_err(engine(StoreOp::Read))?;
        let generation = u64_at(&k, 1 + JOURNAL_LEN).ok_or_else(|| corrupt("gens journal row", &k))?;
        out.push((generation, Row::decode(&v).ok_or_else(|| corrupt("gens journal row", &k))?));
    }
    Ok(out)
}

/// The generation a removal of `journal` set (its older generations are a previous
/// incarnation's), if any.
pub(crate) fn since_rows(gens: &Keyspace) -> Result<Vec<([u8; JOURNAL_LEN], u64)>, StoreError> {
    let mut out = Vec::new();
    for item in gens.prefix([ROW_SINCE]) {
        let (k, v) = item.into_inner().map_err(engine(StoreOp::Read))?;
        let journal: [u8; JOURNAL_LEN] =
            k.get(1..).and_then(|j| j.try_into().ok()).ok_or_else(|| corrupt("gens since row", &k))?;
        out.push((journal, u64_at(&v, 0).ok_or_else(|| corrupt("gens since row", &k))?));
    }
    Ok(out)
}

/// Every generation with a `t` row, with its account.
pub(crate) fn totals(gens: &Keyspace) -> Result<BTreeMap<u64, Total>, StoreError> {
    let mut out = BTreeMap::new();
    for item in gens.prefix([ROW_TOTAL]) {
        let (k, v) = item.into_inner().map_err(engine(StoreOp::Read))?;
        let generation = u64_at(&k, 1).ok_or_else(|| corrupt("gens total row", &k))?;
        out.insert(generation, Total::decode(&v).ok_or_else(|| corrupt("gens total row", &k))?);
    }
    Ok(out)
}

/// Up to `limit` entries of one journal from `from` to `to` (inclusive) in `records`, through
/// its rows, as `(journal ‖ slot, value)` in slot order; generations before `since` are a
/// previous incarnation's and are skipped.
///
/// Rows are visited by first slot; a generation whose first slot lies past the `limit`-th slot
/// found cannot add to the answer, so the walk stops there. Where generations overlap, the
/// newest wins.
pub(crate) fn read_journal(
    snap: &Snapshot,
    records: &Keyspace,
    gens: &Keyspace,
    journal: &[u8; JOURNAL_LEN],
    since: u64,
    (from, to): (u64, u64),
    limit: usize,
) -> Result<Vec<([u8; LOG_LEN], fjall::Slice)>, StoreError> {
    if limit == 0 || from > to {
        return Ok(Vec::new());
    }
    let mut rows: Vec<(u64, Row)> = journal_rows(snap, gens, journal)?
        .into_iter()
        .filter(|(g, r)| *g >= since && r.last >= from && r.first <= to)
        .collect();
    rows.sort_unstable_by_key(|(g, r)| (r.first, *g));
    let mut found: BTreeMap<u64, (u64, fjall::Slice)> = BTreeMap::new();
    for (generation, row) in rows {
        if found.len() >= limit && found.keys().nth(limit - 1).is_some_and(|s| row.first > *s) {
            break;
        }
        let lo = record_key(generation, journal, from.max(row.first));
        let hi = record_key(generation, journal, to.min(row.last));
        for item in snap.range(records, lo..=hi).take(limit) {
            let (k, v) = item.into_inner().map_err(engine(StoreOp::Read))?;
            let (_, _, slot) = split_record(&k).ok_or_else(|| corrupt("records key", &k))?;
            match found.get(&slot) {
                Some((newer, _)) if *newer > generation => {}
                _ => {
                    found.insert(slot, (generation, v));
                }
            }
        }
    }
    Ok(found.into_iter().take(limit).map(|(slot, (_, v))| (keys::log_at(journal, slot), v)).collect())
}

/// Writes one generation: `items` (in key order: journals ascending, slots ascending within)
/// as one sorted run of `records`, and returns what each journal has in it (nothing is
/// ingested, and `None` returned, when `items` is empty).
pub(crate) fn ingest(
    records: &Keyspace,
    generation: u64,
    items: impl Iterator<Item = ([u8; JOURNAL_LEN], u64, fjall::Slice)>,
) -> Result<Option<Rows>, StoreError> {
    let mut items = items.peekable();
    if items.peek().is_none() {
        return Ok(None);
    }
    let err = engine::<fjall::Error>(StoreOp::Write);
    let mut ingestion = records.start_ingestion().map_err(err)?;
    let mut rows: Rows = Vec::new();
    for (journal, slot, value) in items {
        let bytes = (RECORD_LEN + value.len()) as u64;
        match rows.last_mut() {
            Some((j, row)) if *j == journal => {
                row.last = slot;
                row.bytes += bytes;
            }
            _ => rows.push((journal, Row { first: slot, last: slot, bytes })),
        }
        ingestion.write(&record_key(generation, &journal, slot)[..], value).map_err(err)?;
    }
    ingestion.finish().map_err(err)?;
    Ok(Some(rows))
}

/// Adds the rows of a generation just ingested (and its `t` row) to `batch`.
pub(crate) fn stage_rows(
    batch: &mut fjall::OwnedWriteBatch,
    gens: &Keyspace,
    generation: u64,
    rows: &[([u8; JOURNAL_LEN], Row)],
) {
    let mut total = Total::default();
    for (journal, row) in rows {
        total.bytes += row.bytes;
        batch.insert(gens, journal_row_key(journal, generation), row.encode());
    }
    batch.insert(gens, total_row_key(generation), total.encode());
}

/// The generation counter: the next one to write.
#[derive(Debug)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    pub(crate) fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }

    /// The generation the next ingestion will take (a removal marks everything below it).
    pub(crate) fn peek(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// At open: drops the tables of generations without a `t` row (a crash came between their
/// ingestion and their rows, or between a collection's rows and its drop), and returns the
/// counter, past every generation on disk.
pub(crate) fn recover(records: &Keyspace, gens: &Keyspace) -> Result<Counter, StoreError> {
    let totals = totals(gens)?;
    let mut on_disk = BTreeSet::new();
    for table in records.tree.current_version().iter_tables() {
        let range = &table.metadata.key_range;
        for key in [range.min(), range.max()] {
            if let Some((generation, _, _)) = split_record(key) {
                on_disk.insert(generation);
            }
        }
    }
    for generation in on_disk.iter().filter(|g| !totals.contains_key(g)) {
        drop_generation(records, *generation)?;
    }
    let newest = on_disk.last().copied().into_iter().chain(totals.keys().last().copied()).max();
    Ok(Counter(AtomicU64::new(newest.map_or(1, |g| g + 1))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_keys_sort_by_generation_then_journal_then_slot() {
        let (a, b) = ([1u8; JOURNAL_LEN], [2u8; JOURNAL_LEN]);
        assert!(record_key(1, &b, u64::MAX) < record_key(2, &a, 0));
        assert!(record_key(1, &a, u64::MAX) < record_key(1, &b, 0));
        assert!(record_key(1, &a, 255) < record_key(1, &a, 256));
        assert_eq!(split_record(&record_key(7, &a, 9)), Some((7, a, 9)));
        assert_eq!(split_record(&keys::log_at(&a, 9)), None, "a log key is not a records key");
        let row = Row { first: 3, last: 9, bytes: 120 };
        assert_eq!(Row::decode(&row.encode()), Some(row));
        let total = Total { bytes: 10, dead: 4 };
        assert_eq!(Total::decode(&total.encode()), Some(total));
        assert!(journal_row_key(&a, u64::MAX) < journal_row_key(&b, 0));
    }
}
