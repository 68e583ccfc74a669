//! Reads served without the node's thread: each machine publishes, after its steps, the
//! records its journals' windows hold and each journal's view ([`Publication`], from
//! `Host::take_publications`), and a reader in the same process answers an `at_least` read of
//! them from this [`ReadCache`] in its own task — no hand-off to the node thread, a read thread
//! and back. What the cache cannot answer exactly as the node would (a linearizable read, a
//! read at or past the tail, a position it does not hold, a reach the journal has not applied,
//! a replica not yet serving) it declines, and the read goes to the node as before.
//!
//! Why an answer from here is the node's answer: a record's position never changes once it is
//! applied, and the cache holds, per journal, the records `[base, end)` of one life of the
//! journal here with the view the fold had when it had applied exactly through `end`. A read
//! `Reached(s)` with `s ≤ view.next_seq` is one the node would serve at once, from a fold at
//! least that far; served from here it reflects the fold at `end`, a state the node had.
//!
//! Bounded: at most [`ReadCacheConfig::journal_bytes_max`] per journal and a journal's even
//! share of [`ReadCacheConfig::bytes_max`] (each record counted with [`RECORD_OVERHEAD`]),
//! the oldest records first. A journal is held to its share when it next grows: the machine
//! holds at most `bytes_max` plus what journals held before others joined. A journal that goes to sleep,
//! leaves the machine or starts a new life is forgotten; a machine that stops closes its cache.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use bytes::Bytes;
use paros_core::journal::JournalView;
use paros_core::{Consistency, JournalKey, Life, ReadAnswer, ReadRequest, Seq, Slot, Tunables};

/// Bytes a cached record is counted for besides its own.
pub const RECORD_OVERHEAD: usize = 32;

/// A machine's cache bounds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ReadCacheConfig {
    /// Bytes cached over all the machine's journals, at most.
    pub bytes_max: usize,
    /// Bytes cached for one journal, at most.
    pub journal_bytes_max: usize,
}

impl Default for ReadCacheConfig {
    fn default() -> Self {
        ReadCacheConfig { bytes_max: 64 << 20, journal_bytes_max: 8 << 20 }
    }
}

/// What one journal's host tells its readers after a step.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Publication {
    /// The journal as applied here now, in life `life`: its view, whether it serves reads
    /// (a replica not yet caught up does not), and the records from `start` through
    /// `view.next_seq` the last publication of this life did not carry (all the window holds,
    /// when `start` is not where that one ended); every slot below `applied` is applied.
    Applied { life: Life, view: JournalView, serving: bool, applied: Slot, start: Seq, records: Vec<Bytes> },
    /// Not awake here any more (asleep, removed): serve nothing of it.
    Gone,
}

/// One journal's records as published.
#[derive(Debug)]
struct JournalCache {
    life: Life,
    view: JournalView,
    serving: bool,
    /// Every slot below it was applied when `view` was the fold's.
    applied: Slot,
    /// The position of `records[0]`; `base + records.len()` is `view.next_seq`.
    base: Seq,
    records: VecDeque<Bytes>,
    bytes: usize,
}

impl JournalCache {
    fn end(&self) -> Seq {
        self.base.plus(self.records.len() as u64)
    }

    /// Takes a publication of this journal's life in.
    fn apply(&mut self, (view, serving, applied): (JournalView, bool, Slot), start: Seq, records: Vec<Bytes>) {
        if start != self.end() {
            // Not the continuation of what is held: start again from `start`.
            self.records.clear();
            self.bytes = 0;
            self.base = start;
        }
        for r in records {
            self.bytes += r.len() + RECORD_OVERHEAD;
            self.records.push_back(r);
        }
        self.view = view;
        self.serving = serving;
        self.applied = applied;
        if self.end() != view.next_seq {
            // Published short of the fold (it cannot be, but an exact answer is the rule): hold
            // nothing rather than a page that would end early.
            self.records.clear();
            self.bytes = 0;
            self.base = view.next_seq;
        }
        // Records below the floor are never served: let them go.
        while self.base < view.first_seq && self.pop() {}
    }

    /// Drops the oldest record; false when there is none.
    fn pop(&mut self) -> bool {
        let Some(r) = self.records.pop_front() else { return false };
        self.bytes -= r.len() + RECORD_OVERHEAD;
        self.base = self.base.plus(1);
        true
    }

    fn trim_to(&mut self, bytes_max: usize) {
        while self.bytes > bytes_max && self.pop() {}
    }

    /// The node's answer to `request` from what is held, or `None` when only the node may give it.
    fn serve(&self, request: &ReadRequest, tunables: &Tunables) -> Option<ReadAnswer> {
        let Consistency::Reached(reach) = request.consistency else { return None };
        if !self.serving || reach > self.view.next_seq {
            return None;
        }
        if request.from < self.view.first_seq {
            return Some(ReadAnswer::Truncated(self.view));
        }
        let records = paros_core::reads::page_of(request, tunables, self.base, &self.records, self.records.len())?;
        Some(ReadAnswer::Page { from: request.from, records, view: self.view })
    }
}

/// The machine's journals as published, shared with the readers in its process.
#[derive(Debug)]
struct Shared {
    journals: RwLock<HashMap<JournalKey, JournalCache>>,
    /// False once the machine stopped: nothing is served.
    open: AtomicBool,
    config: ReadCacheConfig,
    tunables: Tunables,
    served: AtomicU64,
    declined: AtomicU64,
}

/// A machine's read cache: the node thread publishes into it, readers serve from it. Cloning
/// shares it.
#[derive(Clone, Debug)]
pub struct ReadCache {
    shared: Arc<Shared>,
}

/// How a cache has served.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct ReadCacheStats {
    /// Reads answered from the cache.
    pub served: u64,
    /// Reads it declined (they went to the node).
    pub declined: u64,
    /// Journals and bytes held now.
    pub journals: u64,
    pub bytes: u64,
}

impl ReadCache {
    /// An empty, open cache that pages as `tunables` bound pages.
    #[must_use]
    pub fn new(config: ReadCacheConfig, tunables: Tunables) -> ReadCache {
        ReadCache {
            shared: Arc::new(Shared {
                journals: RwLock::new(HashMap::new()),
                open: AtomicBool::new(true),
                config,
                tunables,
                served: AtomicU64::new(0),
                declined: AtomicU64::new(0),
            }),
        }
    }

    /// Takes a step's publications in, each journal's in order.
    pub fn publish(&self, publications: Vec<(JournalKey, Publication)>) {
        if publications.is_empty() {
            return;
        }
        let mut journals = self.shared.journals.write().unwrap_or_else(PoisonError::into_inner);
        let mut touched = Vec::with_capacity(publications.len());
        for (key, publication) in publications {
            match publication {
                Publication::Gone => {
                    journals.remove(&key);
                }
                Publication::Applied { life, view, serving, applied, start, records } => {
                    let fresh = || JournalCache {
                        life,
                        view,
                        serving,
                        applied,
                        base: start,
                        records: VecDeque::new(),
                        bytes: 0,
                    };
                    let cache = journals.entry(key).or_insert_with(fresh);
                    if cache.life != life {
                        *cache = fresh();
                    }
                    cache.apply((view, serving, applied), start, records);
                    touched.push(key);
                }
            }
        }
        // Only what grew is trimmed: a journal's share falls as others join, and it is held to
        // it the next time it grows (or goes, asleep or removed).
        let share = self.shared.config.bytes_max / journals.len().max(1);
        let bound = self.shared.config.journal_bytes_max.min(share);
        for key in touched {
            if let Some(cache) = journals.get_mut(&key) {
                cache.trim_to(bound);
            }
        }
    }

    /// The answer the node would give `request` for `journal`, when the cache holds it.
    #[must_use]
    pub fn serve(&self, journal: &JournalKey, request: &ReadRequest) -> Option<ReadAnswer> {
        self.serve_applied(journal, request).map(|(answer, _)| answer)
    }

    /// As [`ReadCache::serve`], with how far the journal was applied where it answered from:
    /// every slot below the slot returned (for audits).
    #[must_use]
    pub fn serve_applied(&self, journal: &JournalKey, request: &ReadRequest) -> Option<(ReadAnswer, Slot)> {
        let answer = if self.shared.open.load(Ordering::Acquire) {
            let journals = self.shared.journals.read().unwrap_or_else(PoisonError::into_inner);
            journals.get(journal).and_then(|c| Some((c.serve(request, &self.shared.tunables)?, c.applied)))
        } else {
            None
        };
        let counter = if answer.is_some() { &self.shared.served } else { &self.shared.declined };
        counter.fetch_add(1, Ordering::Relaxed);
        answer
    }

    /// The machine stopped: nothing more is served, and what was held is let go.
    pub fn close(&self) {
        self.shared.open.store(false, Ordering::Release);
        self.shared.journals.write().unwrap_or_else(PoisonError::into_inner).clear();
    }

    #[must_use]
    pub fn stats(&self) -> ReadCacheStats {
        let journals = self.shared.journals.read().unwrap_or_else(PoisonError::into_inner);
        ReadCacheStats {
            served: self.shared.served.load(Ordering::Relaxed),
            declined: self.shared.declined.load(Ordering::Relaxed),
            journals: journals.len() as u64,
            bytes: journals.values().map(|c| c.bytes as u64).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use paros_core::{JournalId, LeaderUuid, TenantId};

    fn key(n: u64) -> JournalKey {
        JournalKey { tenant: TenantId(1), journal: JournalId(n) }
    }

    fn view(first: u64, next: u64) -> JournalView {
        JournalView { leader: LeaderUuid::new(7), first_seq: Seq(first), next_seq: Seq(next) }
    }

    fn records(from: u64, to: u64) -> Vec<Bytes> {
        (from..to).map(|i| Bytes::from(format!("r{i}"))).collect()
    }

    /// Records `[start, next)` of life `life`, with the floor at `first`.
    fn applied(life: u64, (first, next): (u64, u64), start: u64, serving: bool) -> Publication {
        Publication::Applied {
            life: Life(life),
            view: view(first, next),
            serving,
            applied: Slot(next),
            start: Seq(start),
            records: records(start, next),
        }
    }

    fn read(from: u64, reach: u64, limit: u32) -> ReadRequest {
        ReadRequest {
            from: Seq(from),
            limit,
            max_bytes: 0,
            wait_ticks: 0,
            consistency: Consistency::Reached(Seq(reach)),
        }
    }

    fn page(answer: Option<ReadAnswer>) -> Option<(u64, Vec<Bytes>, JournalView)> {
        match answer? {
            ReadAnswer::Page { from, records, view } => Some((from.0, records, view)),
            other => panic!("a page, not {other:?}"),
        }
    }

    fn cache() -> ReadCache {
        ReadCache::new(ReadCacheConfig::default(), Tunables::default())
    }

    #[test]
    fn a_read_the_node_would_serve_at_once_is_answered_from_what_was_published() {
        let c = cache();
        c.publish(vec![(key(1), applied(1, (0, 5), 0, true))]);
        c.publish(vec![(key(1), applied(1, (0, 8), 5, true))]);
        let (from, got, v) = page(c.serve(&key(1), &read(3, 8, 2))).expect("held");
        assert_eq!((from, got, v), (3, records(3, 5), view(0, 8)), "two records from 3, the latest view");
        let (_, got, _) = page(c.serve(&key(1), &read(6, 1, 0))).expect("held");
        assert_eq!(got, records(6, 8), "a page ends at the tail");
        assert_eq!(c.stats().served, 2);
    }

    #[test]
    fn what_only_the_node_may_answer_is_declined() {
        let c = cache();
        c.publish(vec![(key(1), applied(1, (0, 5), 2, true)), (key(2), applied(1, (0, 5), 0, false))]);
        assert!(c.serve(&key(1), &read(3, 6, 1)).is_none(), "a reach not applied: the node waits for it");
        assert!(c.serve(&key(1), &read(5, 5, 1)).is_none(), "at the tail: the node long-polls");
        assert!(c.serve(&key(1), &read(1, 1, 1)).is_none(), "below what is held: the node reads its store");
        let linearizable = ReadRequest { consistency: Consistency::Linearizable, ..read(3, 0, 1) };
        assert!(c.serve(&key(1), &linearizable).is_none(), "a linearizable read asks a quorum");
        assert!(c.serve(&key(2), &read(3, 1, 1)).is_none(), "a replica not serving yet serves nothing");
        assert!(c.serve(&key(3), &read(0, 0, 1)).is_none(), "a journal never published");
        assert!(page(c.serve(&key(1), &read(3, 5, 1))).is_some());
        assert_eq!(c.stats().declined, 6);
    }

    #[test]
    fn below_the_floor_is_truncated_and_the_records_under_it_are_let_go() {
        let c = cache();
        c.publish(vec![(key(1), applied(1, (0, 6), 0, true))]);
        // A truncation to 4: the view moves, no record comes.
        c.publish(vec![(
            key(1),
            Publication::Applied {
                life: Life(1),
                view: view(4, 6),
                serving: true,
                applied: Slot(7),
                start: Seq(6),
                records: Vec::new(),
            },
        )]);
        assert_eq!(c.serve(&key(1), &read(2, 1, 1)), Some(ReadAnswer::Truncated(view(4, 6))));
        assert_eq!(page(c.serve(&key(1), &read(4, 1, 0))).map(|p| p.1), Some(records(4, 6)));
        let held = c.stats().bytes as usize;
        assert_eq!(held, records(4, 6).iter().map(|r| r.len() + RECORD_OVERHEAD).sum::<usize>(), "only 4 and 5 held");
    }

    #[test]
    fn a_new_life_a_gap_or_a_short_publication_starts_again() {
        let c = cache();
        c.publish(vec![(key(1), applied(1, (0, 6), 0, true))]);
        // A new life (woken, relearned) holding only its window from 4.
        c.publish(vec![(key(1), applied(2, (0, 6), 4, true))]);
        assert!(c.serve(&key(1), &read(2, 1, 1)).is_none(), "the old life's records are gone");
        assert!(page(c.serve(&key(1), &read(4, 1, 1))).is_some());
        // Not the continuation (a trim-point jump): only what came is held.
        c.publish(vec![(key(1), applied(2, (0, 20), 15, true))]);
        assert!(c.serve(&key(1), &read(5, 1, 1)).is_none());
        assert!(page(c.serve(&key(1), &read(15, 1, 1))).is_some());
        // Records that do not reach the view's end: nothing is served.
        let short = Publication::Applied {
            life: Life(2),
            view: view(0, 30),
            serving: true,
            applied: Slot(30),
            start: Seq(20),
            records: records(20, 25),
        };
        c.publish(vec![(key(1), short)]);
        assert!(c.serve(&key(1), &read(21, 1, 1)).is_none(), "a page could end short of the node's");
        assert_eq!(c.stats().bytes, 0);
    }

    #[test]
    fn bytes_are_bounded_per_journal_and_over_the_machine_oldest_first() {
        let one = 2 + RECORD_OVERHEAD; // "rN" for N < 10
        let c = ReadCache::new(ReadCacheConfig { bytes_max: 8 * one, journal_bytes_max: 3 * one }, Tunables::default());
        c.publish(vec![(key(1), applied(1, (0, 9), 0, true))]);
        assert!(c.serve(&key(1), &read(5, 1, 1)).is_none(), "the oldest went");
        assert_eq!(page(c.serve(&key(1), &read(6, 1, 0))).map(|p| p.1), Some(records(6, 9)), "three kept");
        // Four journals share the machine's eight records, two each: the three that came get
        // two, and the first is held to two when it next grows.
        c.publish((2..=4).map(|n| (key(n), applied(1, (0, 9), 0, true))).collect());
        assert_eq!(c.stats().bytes as usize, 9 * one, "the first still holds its three");
        c.publish(vec![(key(1), applied(1, (0, 10), 9, true))]);
        let s = c.stats();
        assert_eq!((s.journals, s.bytes as usize), (4, 8 * one));
        assert!(c.serve(&key(1), &read(7, 1, 1)).is_none());
        assert_eq!(page(c.serve(&key(1), &read(8, 1, 0))).map(|p| p.1), Some(records(8, 10)));
    }

    #[test]
    fn a_journal_gone_and_a_closed_cache_serve_nothing() {
        let c = cache();
        c.publish(vec![(key(1), applied(1, (0, 3), 0, true)), (key(2), applied(1, (0, 3), 0, true))]);
        c.publish(vec![(key(1), Publication::Gone)]);
        assert!(c.serve(&key(1), &read(0, 0, 1)).is_none(), "asleep or removed");
        assert!(page(c.serve(&key(2), &read(0, 0, 1))).is_some());
        let reader = c.clone();
        c.close();
        assert!(reader.serve(&key(2), &read(0, 0, 1)).is_none(), "the machine stopped");
        assert_eq!(reader.stats().journals, 0);
    }
}
