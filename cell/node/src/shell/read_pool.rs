//! A node's read threads: they run the store reads the node hands out ([`FetchJob`]) — read
//! pages below a journal's in-memory window, catch-up answers for laggards, the wakes of
//! dormant journals — so a cold read never stalls the node thread and every other journal
//! with it.
//!
//! Bounded: the queue holds at most [`ShellConfig::reads_queued_max`](super::ShellConfig)
//! jobs, and the host hands out no more than that at once (`Host::set_fetches_max`), so
//! [`ReadPool::submit`] never blocks; a job that finds the queue full anyway is refused (its
//! answer says so: a wake is asked again later), never dropped.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::fetch::{FetchJob, Fetched};
use crate::ports::LogRead;

/// The read threads and their queue.
pub(super) struct ReadPool {
    jobs: std::sync::mpsc::SyncSender<FetchJob>,
    threads: Vec<JoinHandle<()>>,
}

impl ReadPool {
    /// One thread per reader in `readers` (each reads through its own handle), taking jobs
    /// from a queue of `queued_max` and handing each answer to `answers`. `answers` must hold
    /// as many answers as jobs may be out ([`ShellConfig::reads_queued_max`](super::ShellConfig)):
    /// a worker never waits on it then.
    pub(super) fn spawn<R: LogRead + Send + 'static>(
        node: paros_core::NodeId,
        readers: Vec<R>,
        queued_max: usize,
        answers: &tokio::sync::mpsc::Sender<Fetched>,
    ) -> ReadPool {
        let (jobs, queue) = std::sync::mpsc::sync_channel::<FetchJob>(queued_max.max(1));
        let queue = Arc::new(Mutex::new(queue));
        let threads = readers
            .into_iter()
            .enumerate()
            .map(|(i, reader)| {
                let queue = Arc::clone(&queue);
                let answers = answers.clone();
                std::thread::Builder::new()
                    .name(format!("paros-read-{node}-{i}"))
                    .spawn(move || {
                        loop {
                            // The lock is held only to take the next job, never while reading.
                            let job = queue.lock().expect("the read queue's lock").recv();
                            let Ok(job) = job else { return };
                            if answers.blocking_send(job.run(&reader)).is_err() {
                                return;
                            }
                        }
                    })
                    .expect("spawn a read thread")
            })
            .collect();
        ReadPool { jobs, threads }
    }

    /// Queues `job` for the next free thread. Returns the refused answer
    /// ([`FetchJob::refuse`]) when the queue is full: hand it back to the host as if a worker
    /// had answered.
    #[must_use = "a refused job's answer goes back to the host"]
    pub(super) fn submit(&self, job: FetchJob) -> Option<Fetched> {
        match self.jobs.try_send(job) {
            Ok(()) => None,
            Err(std::sync::mpsc::TrySendError::Full(job) | std::sync::mpsc::TrySendError::Disconnected(job)) => {
                Some(job.refuse())
            }
        }
    }

    /// Lets the threads finish the jobs queued, then joins them.
    pub(super) fn stop(self) {
        drop(self.jobs);
        for t in self.threads {
            t.join().expect("a read thread does not panic");
        }
    }
}
