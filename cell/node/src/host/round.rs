//! The round pipeline: one `Ready` per journal with work, one batch, one sync, then release;
//! and [`Round`], the part that knows which journals have work.

use std::collections::{BTreeMap, BTreeSet};

use paros_core::{JournalKey, NodeId, Ready, WriteOp};

use super::{Early, Host, PendingRound, RoundOutput};
use crate::ports::Placement;
use crate::ports::{Envelope, LogStore, StoreError};

/// Which journals have work, and the round in flight.
///
/// Invariants: at most one round is in flight (`begin`/`complete` alternate); `keys` is empty
/// unless a round is in flight; a journal forgotten (removed) is in none of the sets.
#[derive(Debug, Default)]
pub(super) struct Round {
    /// Journals that may have a `Ready` this round.
    pub(super) dirty: BTreeSet<JournalKey>,
    /// Journals that need ticks (not quiet).
    pub(super) awake: BTreeSet<JournalKey>,
    /// Journals stepped since the last release.
    pub(super) touched: BTreeSet<JournalKey>,
    /// Journals stepped, advanced, put to sleep or forgotten since their readers were last
    /// told (`Host::take_publications`); `None` on a machine that publishes nothing, which
    /// then keeps no such set.
    pub(super) publish: Option<BTreeSet<JournalKey>>,
    pub(super) in_flight: bool,
    /// Journals with writes or a placement in the round being persisted.
    pub(super) keys: BTreeSet<JournalKey>,
    /// Placements and removals not yet handed to a round.
    pub(super) placements: Vec<Placement>,
    /// Keep each round's writes in [`RoundOutput::writes`] (audits).
    pub(super) keep_writes: bool,
}

impl Round {
    /// `key` was given an input: it may have a `Ready` and something to release, and needs
    /// ticks unless it is `quiet`.
    pub(super) fn stepped(&mut self, key: JournalKey, quiet: bool) {
        self.dirty.insert(key);
        self.touched.insert(key);
        self.changed_for_readers(key);
        if !quiet {
            self.awake.insert(key);
        }
    }

    /// `key` left this machine: nothing of it is pending here.
    pub(super) fn forget(&mut self, key: &JournalKey) {
        self.dirty.remove(key);
        self.awake.remove(key);
        self.touched.remove(key);
        self.changed_for_readers(*key);
    }

    /// `key` changed for its readers off the node's thread, if this machine publishes.
    pub(super) fn changed_for_readers(&mut self, key: JournalKey) {
        if let Some(publish) = &mut self.publish {
            publish.insert(key);
        }
    }

    /// A round begins: the journals that may have a `Ready`.
    ///
    /// # Panics
    /// While a round is in flight.
    pub(super) fn begin(&mut self) -> BTreeSet<JournalKey> {
        assert!(!self.in_flight, "one round in flight at a time");
        self.in_flight = true;
        self.touched.clear();
        std::mem::take(&mut self.dirty)
    }

    /// The round in flight completed.
    ///
    /// # Panics
    /// With no round in flight.
    pub(super) fn complete(&mut self) {
        assert!(self.in_flight, "complete_round follows begin_round");
        self.in_flight = false;
        self.keys.clear();
    }
}

impl<S: LogStore> Host<S> {
    /// One round, persisted on this thread: [`Host::begin_round`], one storage batch and one
    /// sync for every journal with work, then [`Host::complete_round`].
    ///
    /// # Errors
    /// A storage fault. Nothing in the `RoundOutput` may then leave: stop the process.
    pub fn round(&mut self, mut early: impl FnMut(Early)) -> Result<RoundOutput, StoreError> {
        let reader = self.store().reader();
        // Wakes of dormant journals (and any other store read out) run here, each at once, so
        // the journals they wake run in this round as they would have.
        loop {
            self.wake_dormant(&mut early);
            let jobs = self.take_fetches(&mut early);
            if jobs.is_empty() {
                break;
            }
            for job in jobs {
                self.fetched(job.run(&reader));
            }
        }
        let pending = self.begin_round(&mut early);
        for job in self.take_fetches(&mut early) {
            self.fetched(job.run(&reader));
        }
        self.release_fetched(&mut early);
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
        self.release_fetched(&mut early);
        let mut out: BTreeMap<NodeId, Vec<Envelope>> = BTreeMap::new();
        for key in std::mem::take(&mut self.round.touched) {
            let j = self.journals.get_mut(&key).expect("a touched journal is hosted");
            let released = j.take_released();
            self.fetches.ask(key, released.fetches);
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
        let dirty = self.round.begin();
        self.stats.rounds += 1;
        let mut readies: Vec<(JournalKey, Ready)> = Vec::new();
        for key in dirty {
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
        let placements = std::mem::take(&mut self.round.placements);
        self.round.keys = readies.iter().map(|(k, _)| *k).chain(placements.iter().map(|p| *p.key())).collect();
        let needs_sync = !placements.is_empty() || batch.iter().any(|(_, w)| w.iter().any(WriteOp::needs_sync));
        if !batch.is_empty() || !placements.is_empty() {
            self.stats.writes += batch.iter().map(|(_, w)| w.len() as u64).sum::<u64>();
            if needs_sync {
                self.stats.syncs += 1;
            }
        }
        let mut early_out: BTreeMap<NodeId, Vec<Envelope>> = self.marks.take_pending();
        for (key, ready) in &mut readies {
            let (wait, go): (Vec<_>, Vec<_>) =
                std::mem::take(&mut ready.messages).into_iter().partition(|o| o.message.waits_for_sync());
            ready.messages = wait;
            for o in go {
                early_out.entry(o.to).or_default().push(Envelope { journal: *key, from: self.me, message: o.message });
            }
            self.fetches.ask(*key, std::mem::take(&mut ready.fetches));
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
        self.round.complete();
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
            self.round.touched.insert(key);
            self.round.changed_for_readers(key);
            if j.has_ready() {
                self.round.dirty.insert(key);
            }
            if !j.is_quiet() {
                self.round.awake.insert(key);
            }
        }
        if self.round.keep_writes {
            out.writes = pending.batch;
        }
        out
    }

    /// True when some journal has effects waiting for a round.
    #[must_use]
    pub fn has_work(&self) -> bool {
        !self.round.dirty.is_empty() || !self.round.placements.is_empty() || self.marks.has_pending()
    }

    /// True when some journal was stepped since the last [`Host::release`].
    #[must_use]
    pub fn has_release(&self) -> bool {
        !self.round.touched.is_empty() || !self.dormancy.stash.is_empty() || self.fetches.has_answers()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_alternate_and_a_forgotten_journal_has_no_work() {
        let (a, b) = (JournalKey::default(), JournalKey { journal: paros_core::JournalId(2), ..JournalKey::default() });
        let mut round = Round::default();
        round.stepped(a, true);
        round.stepped(b, false);
        assert!(round.awake.contains(&b) && !round.awake.contains(&a), "only a journal not quiet needs ticks");
        round.forget(&b);
        assert!(!round.dirty.contains(&b) && !round.touched.contains(&b) && !round.awake.contains(&b));
        assert_eq!(round.begin(), BTreeSet::from([a]), "the round takes every journal with work");
        assert!(round.dirty.is_empty() && round.touched.is_empty());
        assert!(std::panic::catch_unwind(move || round.begin()).is_err(), "no second round in flight");
        let mut round = Round::default();
        let _ = round.begin();
        round.complete();
        let _ = round.begin();
    }
}
