//! A node's read threads: they run the store reads the node hands out ([`FetchJob`]) — read
//! pages below a journal's in-memory window, catch-up answers for laggards, the wakes of
//! dormant journals — so a cold read never stalls the node thread and every other journal
//! with it.
//!
//! Bounded: the queue holds at most [`ShellConfig::reads_queued_max`](super::ShellConfig)
//! jobs, and the host hands out no more than that at once (`Host::set_fetches_max`), so
//! [`ReadPool::submit`] never blocks; a job that finds the queue full anyway is refused (its
//! answer says so: a wake is asked again later), never dropped.
//!
//! Batched: the node hands out a step's jobs together and wakes one thread for them; a thread
//! takes up to [`ShellConfig::read_batch_max`](super::ShellConfig) jobs at a time (waking
//! another while more wait), runs them in order and hands their answers back together, in
//! that order — one wake-up of the node for a batch, not one per read. No lock is held while
//! a thread waits or reads.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use crate::fetch::{FetchJob, Fetched};
use crate::ports::LogRead;

/// The jobs waiting for a read thread.
#[derive(Default)]
struct Queue {
    jobs: VecDeque<FetchJob>,
    /// No more jobs come: the threads finish those queued and end.
    closed: bool,
}

/// The queue and the read threads' bell.
struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
    queued_max: usize,
    batch_max: usize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // Nothing panics while holding the lock; a poisoned queue is still a valid queue.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next batch, oldest first (waiting for one); `None` once closed and empty.
    fn take(&self) -> Option<Vec<FetchJob>> {
        let mut queue = self.lock();
        while queue.jobs.is_empty() {
            if queue.closed {
                return None;
            }
            queue = self.ready.wait(queue).unwrap_or_else(PoisonError::into_inner);
        }
        let n = queue.jobs.len().min(self.batch_max);
        let batch: Vec<FetchJob> = queue.jobs.drain(..n).collect();
        if !queue.jobs.is_empty() {
            // More than one batch waits: another thread takes the next.
            self.ready.notify_one();
        }
        Some(batch)
    }

    /// Queues what fits of `jobs`, in order, and wakes a thread; returns the refused answers
    /// of the rest ([`FetchJob::refuse`]).
    fn put(&self, jobs: Vec<FetchJob>) -> Vec<Fetched> {
        let mut refused = Vec::new();
        let mut queued = false;
        {
            let mut queue = self.lock();
            for job in jobs {
                if queue.closed || queue.jobs.len() >= self.queued_max {
                    refused.push(job.refuse());
                } else {
                    queue.jobs.push_back(job);
                    queued = true;
                }
            }
        }
        if queued {
            self.ready.notify_one();
        }
        refused
    }

    fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }
}

/// The read threads and their queue.
pub(super) struct ReadPool {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl ReadPool {
    /// One thread per reader in `readers` (each reads through its own handle), taking jobs
    /// from a queue of `queued_max`, at most `batch_max` at a time, and handing each batch's
    /// answers to `answers` as one message. `answers` must hold as many messages as jobs may be
    /// out ([`ShellConfig::reads_queued_max`](super::ShellConfig)): a worker never waits on it
    /// then.
    pub(super) fn spawn<R: LogRead + Send + 'static>(
        node: paros_core::NodeId,
        readers: Vec<R>,
        (queued_max, batch_max): (usize, usize),
        answers: &tokio::sync::mpsc::Sender<Vec<Fetched>>,
    ) -> ReadPool {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            queued_max: queued_max.max(1),
            batch_max: batch_max.max(1),
        });
        let threads = readers
            .into_iter()
            .enumerate()
            .map(|(i, reader)| {
                let shared = Arc::clone(&shared);
                let answers = answers.clone();
                std::thread::Builder::new()
                    .name(format!("paros-read-{node}-{i}"))
                    .spawn(move || {
                        while let Some(batch) = shared.take() {
                            let answered = batch.into_iter().map(|job| job.run(&reader)).collect();
                            if answers.blocking_send(answered).is_err() {
                                return;
                            }
                        }
                    })
                    .expect("spawn a read thread")
            })
            .collect();
        ReadPool { shared, threads }
    }

    /// Queues `jobs` (one step's, in order) for the threads and wakes one. Returns the refused
    /// answers ([`FetchJob::refuse`]) of those that found the queue full: hand them back to the
    /// host as if a worker had answered.
    #[must_use = "a refused job's answer goes back to the host"]
    pub(super) fn submit(&self, jobs: Vec<FetchJob>) -> Vec<Fetched> {
        if jobs.is_empty() {
            return Vec::new();
        }
        self.shared.put(jobs)
    }

    /// Lets the threads finish the jobs queued, then joins them.
    pub(super) fn stop(self) {
        self.shared.close();
        for t in self.threads {
            t.join().expect("a read thread does not panic");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem_store::MemStore;
    use paros_core::{Fetch, JournalId, JournalKey, Life, NodeId, Slot, TenantId, Tunables};

    /// A catch-up job of journal `n` (its answer names the journal, so answers can be told
    /// apart).
    fn job(n: u64) -> FetchJob {
        let fetch = Fetch::CatchUp {
            to: NodeId(2),
            life: Life(1),
            from: Slot(0),
            end: Slot(1),
            chosen_up_to: Slot(1),
            slots_max: 1,
            bytes_max: 1,
        };
        FetchJob::new(key(n), NodeId(1), fetch, Tunables::default())
    }

    fn key(n: u64) -> JournalKey {
        JournalKey { tenant: TenantId(1), journal: JournalId(n) }
    }

    #[test]
    fn a_steps_jobs_come_back_in_batches_of_at_most_the_bound_each_in_order() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let pool = ReadPool::spawn(NodeId(1), vec![MemStore::new()], (64, 3), &tx);
        drop(tx);
        assert!(pool.submit((10..17).map(job).collect()).is_empty(), "room for all seven");
        let mut batches = Vec::new();
        let mut answered = 0;
        while answered < 7 {
            let batch = rx.blocking_recv().expect("a batch");
            answered += batch.len();
            assert!(batch.iter().all(|f| !f.was_refused()), "run, not refused");
            batches.push(batch.iter().map(|f| f.key().journal.0).collect::<Vec<_>>());
        }
        pool.stop();
        assert!(batches.iter().all(|b| !b.is_empty() && b.len() <= 3), "batches of 1 to 3: {batches:?}");
        assert_eq!(batches.concat(), (10..17).collect::<Vec<_>>(), "one thread answers the jobs in the order given");
        assert!(rx.blocking_recv().is_none(), "the threads ended");
    }

    #[test]
    fn jobs_past_the_queue_bound_are_refused_not_dropped_and_stop_finishes_those_queued() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        // No thread: nothing is taken, so the queue fills.
        let pool = ReadPool::spawn::<MemStore>(NodeId(1), Vec::new(), (2, 8), &tx);
        let refused = pool.submit((1..=5).map(job).collect());
        let keys: Vec<u64> = refused.iter().map(|f| f.key().journal.0).collect();
        assert_eq!(keys, vec![3, 4, 5], "two queued, the three past the bound refused");
        assert!(refused.iter().all(Fetched::was_refused));
        pool.stop();
        drop(tx);
        assert!(rx.blocking_recv().is_none());
        // With threads, a stop lets them finish what was queued.
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let pool = ReadPool::spawn(NodeId(1), vec![MemStore::new(), MemStore::new()], (8, 1), &tx);
        drop(tx);
        assert!(pool.submit((1..=4).map(job).collect()).is_empty());
        pool.stop();
        let mut answered = Vec::new();
        while let Some(batch) = rx.blocking_recv() {
            assert_eq!(batch.len(), 1, "a bound of one: one answer a batch");
            answered.extend(batch.iter().map(|f| f.key().journal.0));
        }
        answered.sort_unstable();
        assert_eq!(answered, vec![1, 2, 3, 4], "every job queued before the stop is answered");
    }
}
