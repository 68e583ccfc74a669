//! Store reads out with workers: the journals' fetches (read pages below a window, catch-up
//! answers) and the wakes of dormant journals handed out as [`FetchJob`]s, and their answers on
//! the way back (see [`crate::fetch`]).

use std::collections::{BTreeMap, VecDeque};

use paros_core::{Durable, Fetch, JournalKey, NodeId, Tunables};

use super::{Early, Host};
use crate::fetch::{FETCHES_MAX, FetchJob, Fetched, FetchedAnswer};
use crate::ports::{Envelope, LogStore};
use crate::rpc::NodeAnswer;

/// The answer of a wake handed back: what dormant journal `key` wakes with, for its wake
/// numbered `wake` (`durable` is `None` when the store could not read it).
#[derive(Debug)]
pub(super) struct Woken {
    pub(super) key: JournalKey,
    pub(super) wake: u64,
    pub(super) durable: Option<Box<Durable>>,
}

/// The fetches and wakes asked for, out, and answered.
///
/// Invariant: at most `max` jobs are out (handed out and not answered), wakes included; a fetch
/// past the bound is refused at hand-out, never queued without bound nor held; a wake past it
/// waits for room (one per journal waking, see `dormancy`), never refused.
#[derive(Debug)]
pub(super) struct Fetches {
    /// Fetches taken from the journals and not yet handed out.
    pending: Vec<(JournalKey, Fetch)>,
    /// Wakes asked for and not yet handed out, oldest first.
    wakes: VecDeque<(JournalKey, u64)>,
    out: usize,
    max: usize,
    /// Answers handed back, released by the next step.
    answered: Vec<Fetched>,
    /// Wakes answered, taken by the next step's wake pass.
    woken: Vec<Woken>,
}

impl Default for Fetches {
    fn default() -> Self {
        Fetches {
            pending: Vec::new(),
            wakes: VecDeque::new(),
            out: 0,
            max: FETCHES_MAX,
            answered: Vec::new(),
            woken: Vec::new(),
        }
    }
}

impl Fetches {
    /// `key` asks for `fetches`.
    pub(super) fn ask(&mut self, key: JournalKey, fetches: Vec<Fetch>) {
        self.pending.extend(fetches.into_iter().map(|f| (key, f)));
    }

    /// Dormant journal `key` is to be read back from the store for its wake numbered `wake`.
    pub(super) fn ask_wake(&mut self, key: JournalKey, wake: u64) {
        self.wakes.push_back((key, wake));
    }

    /// `key` left this machine: its wake, if not handed out yet, is not.
    pub(super) fn forget_wakes(&mut self, key: &JournalKey) {
        self.wakes.retain(|(k, _)| k != key);
    }

    /// The wakes answered since the last call.
    pub(super) fn take_woken(&mut self) -> Vec<Woken> {
        std::mem::take(&mut self.woken)
    }

    /// The jobs to hand out, and the answers of those refused for want of room.
    fn hand_out(&mut self, me: NodeId, tunables: Tunables) -> (Vec<FetchJob>, Vec<Fetched>) {
        let mut jobs = Vec::new();
        let mut refused = Vec::new();
        // Wakes first, and only while there is room: the inputs stashed for a waking journal
        // are owed an answer, so its wake waits for room rather than being refused.
        while self.out < self.max {
            let Some((key, wake)) = self.wakes.pop_front() else { break };
            self.out += 1;
            jobs.push(FetchJob::wake(key, me, wake, tunables));
        }
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
        match fetched.answer {
            // No worker had room: asked again, ahead of later wakes.
            FetchedAnswer::Woken(wake, _) if fetched.refused => self.wakes.push_front((fetched.key, wake)),
            FetchedAnswer::Woken(wake, durable) => self.woken.push(Woken { key: fetched.key, wake, durable }),
            _ => self.answered.push(fetched),
        }
    }

    /// True when answers wait to be released (or wakes answered, to be taken).
    pub(super) fn has_answers(&self) -> bool {
        !self.answered.is_empty() || !self.woken.is_empty()
    }
}

impl<S: LogStore> Host<S> {
    /// Hands out the store reads the journals asked for since the last call (see [`Fetch`]),
    /// and the wakes of dormant journals ([`Host::wake_dormant`]), to run off this thread
    /// ([`FetchJob::run`]) and hand back with [`Host::fetched`]. At most
    /// [`Host::set_fetches_max`] are out at once; past that a wake waits for a later call, and
    /// the other reads are refused at once (a page is answered `Unserved` through `early`, a
    /// catch-up sends nothing and the laggard asks again), so the round never waits for the
    /// disk nor for a worker.
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

    /// Store reads handed out and not answered yet (wakes included).
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
                FetchedAnswer::CatchUp(None) | FetchedAnswer::Woken(..) => {}
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
        Fetch::CatchUp {
            to,
            life: Life(1),
            from: Slot(0),
            end: Slot(1),
            chosen_up_to: Slot(1),
            slots_max: 1,
            bytes_max: 1,
        }
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

    #[test]
    fn a_wake_past_the_bound_waits_for_room_and_a_refused_one_is_asked_again() {
        let key = JournalKey::default();
        let mut f = Fetches { max: 1, ..Fetches::default() };
        f.ask(key, vec![catch_up()]);
        let (out, _) = f.hand_out(NodeId(1), Tunables::default());
        f.ask_wake(key, 7);
        f.ask(key, vec![catch_up()]);
        let (none, refused) = f.hand_out(NodeId(1), Tunables::default());
        assert!(none.is_empty(), "no room");
        assert_eq!(refused.len(), 1, "the catch-up is refused at once, the wake is kept");
        for job in out {
            f.answer(job.refuse());
        }
        let (jobs, refused) = f.hand_out(NodeId(1), Tunables::default());
        assert!(refused.is_empty());
        let wake = jobs.into_iter().next().expect("the wake, once there is room");
        assert!(wake.is_wake());
        // No worker took it: it is asked again, not answered.
        f.answer(wake.refuse());
        assert!(f.take_woken().is_empty() && f.wakes.len() == 1, "asked again");
        let (jobs, _) = f.hand_out(NodeId(1), Tunables::default());
        let wake = jobs.into_iter().next().expect("handed out again");
        f.answer(wake.run(&crate::mem_store::MemStore::new()));
        assert!(f.has_answers(), "a wake answered wants a step");
        let woken = f.take_woken();
        assert_eq!(woken.len(), 1);
        assert_eq!((woken[0].key, woken[0].wake, woken[0].durable.is_some()), (key, 7, true));
        assert_eq!(f.out, 0);
    }
}
