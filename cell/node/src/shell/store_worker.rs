//! A node's storage thread: writes and syncs one round's batch at a time, so the node thread
//! never blocks on the disk.

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::poll::{micros, spin_for};
use crate::ports::{LogStore, Placement, StoreError};
use crate::pump::Batch;
use crate::schedule::{Spin, Wake};

/// What one round's persistence took on the storage thread.
pub(super) struct Spent {
    pub(super) write: Duration,
    pub(super) sync: Option<Duration>,
    pub(super) ended: Instant,
}

/// A round's batch once written and synced, with the store it was written to.
pub(super) type Done<S> = (S, Batch, Result<Spent, StoreError>);
/// A round's batch being written and synced on the storage thread; the store comes back with it.
pub(super) type Persisting<S> = tokio::sync::oneshot::Receiver<Done<S>>;

/// One round's persistence, handed to the storage thread.
struct Job<S> {
    store: S,
    placements: Vec<Placement>,
    batch: Batch,
    needs_sync: bool,
    done: tokio::sync::oneshot::Sender<Done<S>>,
}

/// The storage thread. A thread of its own (not a pool's): it polls for the next round as its
/// [`Spin`] says before it sleeps. Invariant: one round at a time (its queue holds one job,
/// and the node thread sends the next only once the last came back).
pub(super) struct StoreWorker<S> {
    jobs: std::sync::mpsc::SyncSender<Job<S>>,
    thread: JoinHandle<()>,
}

impl<S: LogStore> StoreWorker<S> {
    pub(super) fn spawn(node: paros_core::NodeId, mut spin: Spin) -> Self {
        // One round persists at a time: a queue of one never fills.
        let (jobs, queue) = std::sync::mpsc::sync_channel::<Job<S>>(1);
        let thread = std::thread::Builder::new()
            .name(format!("paros-store-{node}"))
            .spawn(move || {
                loop {
                    let poll_us = spin.poll_us();
                    let waited = Instant::now();
                    let next = spin_for(Duration::from_micros(poll_us), || match queue.try_recv() {
                        Ok(job) => Some(Some(job)),
                        Err(std::sync::mpsc::TryRecvError::Empty) => None,
                        Err(std::sync::mpsc::TryRecvError::Disconnected) => Some(None),
                    });
                    let Some(job) = next.unwrap_or_else(|| queue.recv().ok()) else { return };
                    spin.woke(micros(waited.elapsed()), Wake::Work);
                    let Job { mut store, placements, batch, needs_sync, done } = job;
                    spin.round(batch.len());
                    let result = persist(&mut store, &placements, &batch, needs_sync);
                    let _ = done.send((store, batch, result));
                }
            })
            .expect("spawn the storage thread");
        StoreWorker { jobs, thread }
    }

    pub(super) fn persist(
        &self,
        store: S,
        placements: Vec<Placement>,
        batch: Batch,
        needs_sync: bool,
    ) -> Persisting<S> {
        let (done, persisted) = tokio::sync::oneshot::channel();
        self.jobs.send(Job { store, placements, batch, needs_sync, done }).expect("the storage thread does not panic");
        persisted
    }

    pub(super) fn stop(self) {
        drop(self.jobs);
        self.thread.join().expect("the storage thread does not panic");
    }
}

/// Writes a round's placements and batch, then syncs if the round needs it.
fn persist<S: LogStore>(
    store: &mut S,
    placements: &[Placement],
    batch: &Batch,
    needs_sync: bool,
) -> Result<Spent, StoreError> {
    let started = Instant::now();
    store.place(placements)?;
    store.write(batch)?;
    let written = Instant::now();
    let sync = if needs_sync {
        store.sync()?;
        Some(written.elapsed())
    } else {
        None
    };
    Ok(Spent { write: written.duration_since(started), sync, ended: Instant::now() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem_store::MemStore;
    use crate::shell::{IDLE_SPIN, SPIN_ROUND_JOURNALS_MAX};

    #[test]
    fn the_storage_thread_writes_and_syncs_each_round_and_hands_the_store_back() {
        for spin in [Duration::ZERO, IDLE_SPIN] {
            let disk = MemStore::new();
            let worker = StoreWorker::spawn(paros_core::NodeId(1), Spin::new(micros(spin), SPIN_ROUND_JOURNALS_MAX));
            let mut store = disk.clone();
            for round in 1..=3u64 {
                let mut persisted = worker.persist(store, Vec::new(), Vec::new(), round != 2);
                // Waited on as the node thread waits once its spin is over.
                let (back, batch, result) = loop {
                    match persisted.try_recv() {
                        Ok(done) => break done,
                        Err(tokio::sync::oneshot::error::TryRecvError::Empty) => {
                            std::thread::sleep(Duration::from_millis(1))
                        }
                        Err(e) => panic!("the storage thread answered: {e}"),
                    }
                };
                let spent = result.expect("a memory disk does not fail");
                assert_eq!(spent.sync.is_some(), round != 2, "round {round} syncs only when asked");
                assert!(batch.is_empty());
                store = back;
            }
            assert_eq!(disk.counts(), (3, 2), "three rounds written, two of them synced");
            worker.stop();
        }
    }
}
