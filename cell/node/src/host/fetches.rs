//! Store reads out with workers: the journals' fetches (read pages below a window, catch-up
//! answers) handed out as [`FetchJob`]s, and their answers on the way back (see
//! [`crate::fetch`]).

use std::collections::BTreeMap;

use paros_core::{Fetch, JournalKey, NodeId, Tunables};

use super::{Early, Host};
use crate::fetch::{FETCHES_MAX, FetchJob, Fetched, FetchedAnswer};
use crate::ports::{Envelope, LogStore};
use crate::rpc::NodeAnswer;

/// The fetches asked for, out, and answered.
///
/// Invariant: at most `max` jobs are out (handed out and not answered); a fetch past the bound
/// is refused at hand-out, never queued without bound nor held.
#[derive(Debug)]
pub(super) struct Fetches {
    /// Fetches taken from the journals and not yet handed out.
    pending: Vec<(JournalKey, Fetch)>,
    out: usize,
    max: usize,
    /// Answers handed back, released by the next step.
    answered: Vec<Fetched>,
}

impl Default for Fetches {
    fn default() -> Self {
        Fetches { pending: Vec::new(), out: 0, max: FETCHES_MAX, answered: Vec::new() }
    }
}

impl Fetches {
    /// `key` asks for `fetches`.
    pub(super) fn ask(&mut self, key: JournalKey, fetches: Vec<Fetch>) {
        self.pending.extend(fetches.into_iter().map(|f| (key, f)));
    }

    /// The jobs to hand out, and the answers of those refused for want of room.
    fn hand_out(&mut self, me: NodeId, tunables: Tunables) -> (Vec<FetchJob>, Vec<Fetched>) {
        let mut jobs = Vec::new();
        let mut refused = Vec::new();
        for (key, fetch) in std::mem::take(&mut self.pending) {
            let job = FetchJob::new(key, me, fetch, tunables);
            if self.out < self.max {
                self.out += 1;
                jobs.push(job);
            } else {
                refused.push(job.refuse());
            }
        }
        (jobs, refused)
    }

    fn answer(&mut self, fetched: Fetched) {
        assert!(self.out > 0, "a fetched answer belongs to a job handed out");
        self.out -= 1;
        self.answered.push(fetched);
    }

    /// True when answers wait to be released.
    pub(super) fn has_answers(&self) -> bool {
        !self.answered.is_empty()
    }
}

impl<S: LogStore> Host<S> {
    /// Hands out the store reads the journals asked for since the last call (see [`Fetch`]),
    /// to run off this thread ([`FetchJob::run`]) and hand back with [`Host::fetched`]. At most
    /// [`Host::set_fetches_max`] are out at once; the rest are refused at once (a page is
    /// answered `Unserved` through `early`, a catch-up sends nothing and the laggard asks
    /// again), so the round never waits for the disk nor for a worker.
    pub fn take_fetches(&mut self, mut early: impl FnMut(Early)) -> Vec<FetchJob> {
        let (jobs, refused) = self.fetches.hand_out(self.me, self.tunables);
        self.release_answers(refused, &mut early);
        jobs
    }

    /// The answer of a job from [`Host::take_fetches`], run (or refused) by a worker: released
    /// by the next step.
    ///
    /// # Panics
    /// When no job is out.
    pub fn fetched(&mut self, fetched: Fetched) {
        self.fetches.answer(fetched);
    }

    /// Store reads handed out and not answered yet.
    #[must_use]
    pub fn fetches_out(&self) -> usize {
        self.fetches.out
    }

    /// At most `n` store reads are out with workers at once (at least one).
    pub fn set_fetches_max(&mut self, n: usize) {
        self.fetches.max = n.max(1);
    }

    /// Releases the answers handed back: catch-up answers leave as messages, pages answer
    /// their reads.
    pub(super) fn release_fetched(&mut self, early: &mut impl FnMut(Early)) {
        let answered = std::mem::take(&mut self.fetches.answered);
        self.release_answers(answered, early);
    }

    fn release_answers(&mut self, fetched: Vec<Fetched>, early: &mut impl FnMut(Early)) {
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
                    if let Some(t) = self.owing.take_read(f.key, read) {
                        early(Early::Answer(t, NodeAnswer::Read(answer)));
                    }
                }
            }
        }
        for (to, envelopes) in out {
            early(Early::Messages(to, envelopes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use paros_core::{Life, Slot};

    fn catch_up() -> Fetch {
        let to = NodeId(2);
        Fetch::CatchUp { to, life: Life(1), from: Slot(0), end: Slot(1), chosen_up_to: Slot(1), slots_max: 1 }
    }

    #[test]
    fn at_most_max_fetches_are_out_and_the_rest_are_refused_not_held() {
        let mut f = Fetches { max: 2, ..Fetches::default() };
        f.ask(JournalKey::default(), vec![catch_up(), catch_up(), catch_up()]);
        let (jobs, refused) = f.hand_out(NodeId(1), Tunables::default());
        assert_eq!((jobs.len(), refused.len()), (2, 1), "two out, one refused");
        assert!(refused.iter().all(Fetched::was_refused));
        let (none, refused) = f.hand_out(NodeId(1), Tunables::default());
        assert!(none.is_empty() && refused.is_empty(), "nothing is held for later");
        let mut jobs = jobs.into_iter();
        f.answer(jobs.next().expect("two out").refuse());
        assert!(f.has_answers());
        f.ask(JournalKey::default(), vec![catch_up(), catch_up()]);
        let (more, refused) = f.hand_out(NodeId(1), Tunables::default());
        assert_eq!((more.len(), refused.len()), (1, 1), "room for the one answered");
        drop((jobs, more));
    }
}
