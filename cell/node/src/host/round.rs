//! The round pipeline: one `Ready` per journal with work, one batch, one sync, then release.

use std::collections::BTreeMap;

use paros_core::{JournalKey, NodeId, Ready, WriteOp};

use super::{Early, Host, PendingRound, RoundOutput};
use crate::fetch::{FetchJob, Fetched, FetchedAnswer};
use crate::ports::{Envelope, LogStore, StoreError};
use crate::rpc::NodeAnswer;

impl<S: LogStore> Host<S> {
    /// One round, persisted on this thread: [`Host::begin_round`], one storage batch and one
    /// sync for every journal with work, then [`Host::complete_round`].
    ///
    /// # Errors
    /// A storage fault. Nothing in the `RoundOutput` may then leave: stop the process.
    pub fn round(&mut self, mut early: impl FnMut(Early)) -> Result<RoundOutput, StoreError> {
        let reader = self.store().reader();
        self.wake_dormant(&reader, &mut early);
        let pending = self.begin_round(&mut early);
        for job in self.take_fetches(&mut early) {
            self.fetched(job.run(&reader));
        }
        let fetched = std::mem::take(&mut self.fetched);
        self.release_fetched(fetched, &mut early);
        if !pending.batch.is_empty() || !pending.placements.is_empty() {
            let store = self.store_mut();
            store.place(&pending.placements)?;
            store.write(&pending.batch)?;
            if pending.needs_sync {
                store.sync()?;
            }
        }
        Ok(self.complete_round(pending))
    }

    /// Hands out what may leave now from every journal touched since the last call, even
    /// journals whose round is in flight: proposer messages, heartbeats, chosen values and
    /// answers (see [`Ready`]). The shell calls it after absorbing inputs while a sync runs.
    pub fn release(&mut self, mut early: impl FnMut(Early)) {
        let fetched = std::mem::take(&mut self.fetched);
        self.release_fetched(fetched, &mut early);
        let mut out: BTreeMap<NodeId, Vec<Envelope>> = BTreeMap::new();
        for key in std::mem::take(&mut self.touched) {
            let j = self.journals.get_mut(&key).expect("a touched journal is hosted");
            let released = j.take_released();
            self.fetches.extend(released.fetches.into_iter().map(|f| (key, f)));
            for o in released.messages {
                out.entry(o.to).or_default().push(Envelope { journal: key, from: self.me, message: o.message });
            }
            self.answer(key, released.answers, released.reads, &mut early);
        }
        for (to, envelopes) in out {
            early(Early::Messages(to, envelopes));
        }
    }

    /// Starts a round: takes the `Ready` of every journal with work, hands `early` what may
    /// leave before the sync, and returns the writes to persist as one batch. The caller makes
    /// `batch` durable (one write, one sync when `needs_sync`), then calls
    /// [`Host::complete_round`]. Inputs may be delivered meanwhile; no round may begin until
    /// this one completes.
    pub fn begin_round(&mut self, mut early: impl FnMut(Early)) -> PendingRound {
        assert!(!self.in_flight, "one round in flight at a time");
        self.in_flight = true;
        self.stats.rounds += 1;
        self.touched.clear();
        let mut readies: Vec<(JournalKey, Ready)> = Vec::new();
        for key in std::mem::take(&mut self.dirty) {
            let j = self.journals.get_mut(&key).expect("a dirty journal is hosted");
            self.stats.journals_visited += 1;
            if j.has_ready() {
                readies.push((key, j.ready()));
                self.stats.readies += 1;
            }
        }
        let batch: Vec<(JournalKey, Vec<WriteOp>)> = readies
            .iter_mut()
            .filter(|(_, r)| !r.writes.is_empty())
            .map(|(k, r)| (*k, std::mem::take(&mut r.writes)))
            .collect();
        let placements = std::mem::take(&mut self.placements);
        self.round_keys = readies.iter().map(|(k, _)| *k).chain(placements.iter().map(|p| *p.key())).collect();
        let needs_sync = !placements.is_empty() || batch.iter().any(|(_, w)| w.iter().any(WriteOp::needs_sync));
        if !batch.is_empty() || !placements.is_empty() {
            self.stats.writes += batch.iter().map(|(_, w)| w.len() as u64).sum::<u64>();
            if needs_sync {
                self.stats.syncs += 1;
            }
        }
        let mut early_out: BTreeMap<NodeId, Vec<Envelope>> = BTreeMap::new();
        for (key, ready) in &mut readies {
            let (wait, go): (Vec<_>, Vec<_>) =
                std::mem::take(&mut ready.messages).into_iter().partition(|o| o.message.waits_for_sync());
            ready.messages = wait;
            for o in go {
                early_out.entry(o.to).or_default().push(Envelope { journal: *key, from: self.me, message: o.message });
            }
            self.fetches.extend(std::mem::take(&mut ready.fetches).into_iter().map(|f| (*key, f)));
            let (answers, reads) = (std::mem::take(&mut ready.answers), std::mem::take(&mut ready.reads));
            self.answer(*key, answers, reads, &mut early);
        }
        for (to, envelopes) in early_out {
            early(Early::Messages(to, envelopes));
        }
        PendingRound { placements, batch, needs_sync, readies }
    }

    /// Completes a round whose batch is durable: releases the acceptor replies and advances
    /// every journal of the round.
    pub fn complete_round(&mut self, pending: PendingRound) -> RoundOutput {
        assert!(self.in_flight, "complete_round follows begin_round");
        self.in_flight = false;
        self.round_keys.clear();
        let mut out = RoundOutput::default();
        for (key, ready) in pending.readies {
            for o in ready.messages {
                out.messages.entry(o.to).or_default().push(Envelope {
                    journal: key,
                    from: self.me,
                    message: o.message,
                });
            }
            out.applied.extend(ready.applied.into_iter().map(|a| (key, a)));
            // Removed while its round was in flight: nothing more of it runs.
            let Some(j) = self.journals.get_mut(&key) else { continue };
            j.advance(&mut self.stats);
            self.touched.insert(key);
            if j.has_ready() {
                self.dirty.insert(key);
            }
            if !j.is_quiet() {
                self.awake.insert(key);
            }
        }
        if self.keep_writes {
            out.writes = pending.batch;
        }
        out
    }

    /// Hands out the store reads the journals asked for since the last call (see [`Fetch`]),
    /// to run off this thread ([`FetchJob::run`]) and hand back with [`Host::fetched`]. At most
    /// [`Host::set_fetches_max`] are out at once; the rest are refused at once (a page is
    /// answered `Unserved` through `early`, a catch-up sends nothing and the laggard asks
    /// again), so the round never waits for the disk nor for a worker.
    pub fn take_fetches(&mut self, mut early: impl FnMut(Early)) -> Vec<FetchJob> {
        let mut jobs = Vec::new();
        let mut refused = Vec::new();
        for (key, fetch) in std::mem::take(&mut self.fetches) {
            let job = FetchJob::new(key, self.me, fetch, self.tunables);
            if self.fetches_out < self.fetches_max {
                self.fetches_out += 1;
                jobs.push(job);
            } else {
                refused.push(job.refuse());
            }
        }
        self.release_fetched(refused, &mut early);
        jobs
    }

    /// The answer of a job from [`Host::take_fetches`], run (or refused) by a worker: released
    /// by the next step.
    ///
    /// # Panics
    /// When no job is out.
    pub fn fetched(&mut self, fetched: Fetched) {
        assert!(self.fetches_out > 0, "a fetched answer belongs to a job handed out");
        self.fetches_out -= 1;
        self.fetched.push(fetched);
    }

    /// Store reads handed out and not answered yet.
    #[must_use]
    pub fn fetches_out(&self) -> usize {
        self.fetches_out
    }

    /// At most `n` store reads are out with workers at once (at least one).
    pub fn set_fetches_max(&mut self, n: usize) {
        self.fetches_max = n.max(1);
    }

    /// Releases fetched answers: catch-up answers leave as messages, pages answer their reads.
    pub(super) fn release_fetched(&mut self, fetched: Vec<Fetched>, early: &mut impl FnMut(Early)) {
        let mut out: BTreeMap<NodeId, Vec<Envelope>> = BTreeMap::new();
        for f in fetched {
            if f.refused {
                self.stats.fetches_refused += 1;
            } else {
                self.stats.fetches += 1;
                self.stats.fetched_entries += f.entries;
                self.stats.fetch_errors += u64::from(f.failed);
            }
            match f.answer {
                FetchedAnswer::CatchUp(Some((to, envelope))) => out.entry(to).or_default().push(envelope),
                FetchedAnswer::CatchUp(None) => {}
                FetchedAnswer::Page(read, answer) => {
                    if let Some(t) = self.reads.remove(&(f.key, read)) {
                        early(Early::Answer(t, NodeAnswer::Read(answer)));
                    }
                }
            }
        }
        for (to, envelopes) in out {
            early(Early::Messages(to, envelopes));
        }
    }

    /// True when some journal has effects waiting for a round.
    #[must_use]
    pub fn has_work(&self) -> bool {
        !self.dirty.is_empty() || !self.placements.is_empty()
    }

    /// True when some journal was stepped since the last [`Host::release`].
    #[must_use]
    pub fn has_release(&self) -> bool {
        !self.touched.is_empty() || !self.stash.is_empty() || !self.fetched.is_empty()
    }
}
