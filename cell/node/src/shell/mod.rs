//! The runtime shell: runs a [`Host`] on its own OS thread (fsync never blocks an async
//! worker) under a [`Pump`](crate::Pump) — the event loop the simulation runs too — feeding it
//! the bus inbox and readings of a [`Clock`], persisting each round's batch on a storage thread,
//! reading entries evicted from memory on a pool of read threads, and sending what each step
//! releases. No protocol or durability logic lives here: it only moves inputs in and outputs
//! out, on the schedule [`crate::schedule`] decides.
//!
//! One concern a file: this one the settings, the control handle and the start;
//! `node_thread` the node thread's loop; `store_worker` the thread that writes and syncs each
//! round; `read_pool` the threads that read the store; `poll` the bounded poll before a sleep.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use paros_core::{Assignment, JournalConfig, JournalKey, NodeId};

use crate::host::{Host, HostStats, PlaceError};
use crate::ports::{Clock, LogStore, StoreError, Transport};
use crate::rpc::Incoming;
use crate::timing::RoundTimes;

mod node_thread;
mod poll;
mod read_pool;
mod store_worker;

/// Exit code for a storage fault: restart the process, it recovers from disk. The node
/// reports the fault to its owner ([`NodeHandle::faults`]); the process's `main` exits with it.
pub const EXIT_STORAGE_FAULT: i32 = 75;
/// Exit code for a refusal to boot: do not restart.
pub const EXIT_REFUSED: i32 = 78;

/// Shell settings; every bound is here.
#[derive(Clone, Copy, Debug)]
pub struct ShellConfig {
    /// One protocol tick, in the clock's milliseconds.
    pub tick: Duration,
    /// Inputs absorbed before a round is forced (bounds one round's batch).
    pub inputs_per_round_max: usize,
    /// Control requests (placements) queued for the node before senders wait.
    pub control_queue_max: usize,
    /// A journal quiet this long leaves memory until its next input (`None`: never; see
    /// `host::dormancy`). Rounded to ticks.
    pub dormant_after: Option<Duration>,
    /// How long the node thread and its storage thread poll for their next input before they
    /// sleep (`Duration::ZERO`: sleep at once). A thread woken from sleep on a virtual machine
    /// costs tens of microseconds per hand-off, and a write crosses six; polling yields the
    /// core to any other runnable thread between looks. A thread polls only while its last
    /// wait was no longer than this, so a quiet node sleeps at once.
    pub idle_spin: Duration,
    /// A thread polls only while the node's recent rounds wrote at most this many journals on
    /// average (a running average over about the last eight rounds,
    /// [`RoundSizes`](crate::schedule::RoundSizes)). Rounds of
    /// many journals mean many writers keep the cores busy: then the next input comes soon
    /// anyway, and a poll's yields hand the core to another polling thread at the cost of a
    /// context switch each, more than the sleep they save (measured in `docs/storage.md` §3).
    /// An average, not the last round alone: under load a round of one or two journals still
    /// comes now and then, and each used to start a poll.
    pub spin_round_journals_max: usize,
    /// Journals booted dormant woken per tick to check in with their peers
    /// (`Host::set_boot_wakes_per_tick`).
    pub boot_wakes_per_tick: usize,
    /// At most this many journals awake for check-ins at once (`Host::set_check_ins_max`).
    pub check_ins_max: usize,
    /// Threads that read the store for entries journals evicted from memory (read pages below
    /// a journal's window, catch-up answers for laggards) and for the wakes of dormant
    /// journals, off the node thread (at least one).
    pub read_workers: usize,
    /// Store reads out with the read workers at once, queued or reading
    /// (`Host::set_fetches_max`, and the workers' queue): past it a read page is answered
    /// `Unserved` (the caller retries), a catch-up is not sent (the laggard asks again), and a
    /// wake waits for room (the inputs of its journal stay held).
    pub reads_queued_max: usize,
    /// Store reads a read thread takes from the queue at once, runs in order and answers
    /// together (at least one): the node hands out a step's reads together and wakes one
    /// thread for them, and a batch's answers wake the node once. A thread that takes a batch
    /// while more wait wakes another.
    pub read_batch_max: usize,
    /// Publish the journals' windows for readers in this process
    /// ([`NodeHandle::read_cache`]), within these bounds; `None` (the default): every read goes
    /// through the node's thread. Publishing costs the node's thread a copy of every window's
    /// new records each step: the embedded cell keeps caches on its read replicas, not on its
    /// voters.
    pub read_cache: Option<crate::read_cache::ReadCacheConfig>,
}

/// The default [`ShellConfig::dormant_after`].
pub const DORMANT_AFTER: Duration = Duration::from_secs(60);
/// The default [`ShellConfig::idle_spin`].
pub const IDLE_SPIN: Duration = Duration::from_micros(500);
/// The default [`ShellConfig::read_workers`].
pub const READ_WORKERS: usize = 2;
/// The default [`ShellConfig::read_batch_max`].
pub const READ_BATCH_MAX: usize = 16;
/// The default [`ShellConfig::spin_round_journals_max`]. Measured averages on the embedded
/// cell at batch 1 (one writer per journal): one writer 0.6 journals a round, 8 writers 3–4,
/// 16 writers about 8, 64 writers about 31. 8 writers gain from polling, 16 and 64 lose.
pub const SPIN_ROUND_JOURNALS_MAX: usize = 6;

impl Default for ShellConfig {
    fn default() -> Self {
        ShellConfig {
            tick: Duration::from_millis(100),
            inputs_per_round_max: 4096,
            control_queue_max: 1024,
            dormant_after: Some(DORMANT_AFTER),
            idle_spin: IDLE_SPIN,
            spin_round_journals_max: SPIN_ROUND_JOURNALS_MAX,
            boot_wakes_per_tick: crate::host::BOOT_WAKES_PER_TICK,
            check_ins_max: crate::host::CHECK_INS_MAX,
            read_workers: READ_WORKERS,
            reads_queued_max: crate::fetch::FETCHES_MAX,
            read_batch_max: READ_BATCH_MAX,
            read_cache: None,
        }
    }
}

/// A change of which journals run on a node, from the process hosting it (the registry
/// follower, or the embedded cell at boot).
#[derive(Debug)]
pub enum Control {
    /// Place journals here; the reply says, for each, whether it was placed.
    Place { journals: Vec<Assignment>, reply: tokio::sync::oneshot::Sender<Vec<Result<(), PlaceError>>> },
    /// Remove a journal from here as a directory at configuration `epoch` asks (its waiting
    /// callers are answered `UnknownJournal`); the reply says whether it was removed.
    Remove { key: JournalKey, epoch: u64, reply: tokio::sync::oneshot::Sender<bool> },
    /// Ask this node's voter of a journal to campaign now.
    Campaign { key: JournalKey },
}

/// Why a control request got no answer: the node stopped.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[error("the node stopped")]
pub struct NodeStopped;

/// A node stopped by a storage fault: a round's write or sync failed. What that round wrote is
/// unknown, not "not done", so the node answered nothing more and sent nothing of the round;
/// the process must stop and recover from disk ([`EXIT_STORAGE_FAULT`]).
#[derive(Debug, thiserror::Error)]
#[error("storage fault on node {node}: {error}")]
pub struct NodeFault {
    pub node: NodeId,
    #[source]
    pub error: StoreError,
}

/// Watches one node for a storage fault (clonable; see [`NodeHandle::faults`]).
#[derive(Clone, Debug)]
pub struct FaultWatch {
    rx: tokio::sync::watch::Receiver<Option<Arc<NodeFault>>>,
}

impl FaultWatch {
    /// The node's storage fault, if it had one.
    #[must_use]
    pub fn fault(&self) -> Option<Arc<NodeFault>> {
        self.rx.borrow().clone()
    }

    /// Waits until the node stops: its storage fault, or `None` when it stopped without one
    /// ([`NodeHandle::stop`], or its inbox closed).
    pub async fn stopped(&mut self) -> Option<Arc<NodeFault>> {
        // A fault is published before the node thread ends, so it is seen even when the
        // thread ended before this wait began.
        let _ = self.rx.wait_for(Option::is_some).await;
        self.fault()
    }
}

/// A clonable handle that places, removes and wakes journals on a running node. Its queue is
/// bounded ([`ShellConfig::control_queue_max`]): a sender waits while it is full.
#[derive(Clone, Debug)]
pub struct NodeControl {
    tx: tokio::sync::mpsc::Sender<Control>,
}

impl NodeControl {
    /// Places `key` with `config` on the node.
    ///
    /// # Errors
    /// [`NodeStopped`], or (inner) the node's refusal.
    pub async fn place(&self, key: JournalKey, config: JournalConfig) -> Result<Result<(), PlaceError>, NodeStopped> {
        let mut results = self.place_all(vec![Assignment::founding(key, config)]).await?;
        Ok(results.pop().unwrap_or(Ok(())))
    }

    /// Places many journals in one request (they ride the same round), each as
    /// [`Host::assign`](crate::Host::assign) does: one result each, in order. Where this node
    /// is a journal's first voter, it campaigns at once.
    ///
    /// # Errors
    /// [`NodeStopped`].
    pub async fn place_all(&self, journals: Vec<Assignment>) -> Result<Vec<Result<(), PlaceError>>, NodeStopped> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.tx.send(Control::Place { journals, reply }).await.map_err(|_| NodeStopped)?;
        answer.await.map_err(|_| NodeStopped)
    }

    /// Removes `key` from the node as a directory at configuration `epoch` asks
    /// ([`Host::remove_at`](crate::Host::remove_at)): `false` when the node refused, its copy
    /// having promised in a later epoch.
    ///
    /// # Errors
    /// [`NodeStopped`].
    pub async fn remove(&self, key: JournalKey, epoch: u64) -> Result<bool, NodeStopped> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.tx.send(Control::Remove { key, epoch, reply }).await.map_err(|_| NodeStopped)?;
        answer.await.map_err(|_| NodeStopped)
    }

    /// Asks the node's voter of `key` to campaign now.
    ///
    /// # Errors
    /// [`NodeStopped`].
    pub async fn campaign(&self, key: JournalKey) -> Result<(), NodeStopped> {
        self.tx.send(Control::Campaign { key }).await.map_err(|_| NodeStopped)
    }
}

/// A running node: stop it to get its host back. A node stops by itself on a storage fault,
/// and says so here ([`NodeHandle::fault`], [`NodeHandle::faults`]).
#[derive(Debug)]
pub struct NodeHandle<S: LogStore> {
    control: NodeControl,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<Host<S>, Arc<NodeFault>>>>,
    faults: FaultWatch,
    stats: Arc<Mutex<HostStats>>,
    times: Arc<Mutex<RoundTimes>>,
    cache: Option<crate::read_cache::ReadCache>,
}

impl<S: LogStore> NodeHandle<S> {
    /// A handle that places and removes journals on this node while it runs.
    #[must_use]
    pub fn control(&self) -> NodeControl {
        self.control.clone()
    }

    /// The host's counters as of its last round.
    ///
    /// # Panics
    /// If the node thread panicked while holding the counters.
    #[must_use]
    pub fn stats(&self) -> HostStats {
        *self.stats.lock().expect("stats lock")
    }

    /// Where this node's rounds spent their time so far (queueing, store write, sync, hop).
    ///
    /// # Panics
    /// If the node thread panicked while holding them.
    /// The cache readers in this process serve `at_least` reads from without the node's
    /// thread (`None` unless [`ShellConfig::read_cache`]). It serves nothing once the node
    /// stopped.
    #[must_use]
    pub fn read_cache(&self) -> Option<crate::read_cache::ReadCache> {
        self.cache.clone()
    }

    #[must_use]
    pub fn round_times(&self) -> RoundTimes {
        self.times.lock().expect("times lock").clone()
    }

    /// The storage fault that stopped this node, if one did.
    #[must_use]
    pub fn fault(&self) -> Option<Arc<NodeFault>> {
        self.faults.fault()
    }

    /// A watch on this node's storage fault, for an owner that waits for one.
    #[must_use]
    pub fn faults(&self) -> FaultWatch {
        self.faults.clone()
    }

    /// Stops the node after its current round and returns its host (storage still open).
    ///
    /// # Errors
    /// The storage fault that stopped the node before: it has no host to give back (the
    /// round it was persisting is unknown).
    ///
    /// # Panics
    /// If the node thread panicked.
    pub fn stop(mut self) -> Result<Host<S>, Arc<NodeFault>> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        self.thread.take().expect("joined once").join().expect("the node thread does not panic")
    }
}

/// Starts `host` on its own thread, reading `inbox` and sending through `transport`.
///
/// A storage fault stops the node at once: a failed write or sync is unknown, not "not done",
/// so nothing of that round leaves and no request is answered after it (their callers see no
/// answer; the inbox and the control queue close). The fault goes to the owner as a
/// [`NodeFault`] ([`NodeHandle::faults`]), who stops the process ([`EXIT_STORAGE_FAULT`]).
pub fn spawn<S: LogStore, T: Transport, C: Clock>(
    mut host: Host<S>,
    transport: T,
    inbox: tokio::sync::mpsc::Receiver<Incoming>,
    clock: C,
    config: ShellConfig,
) -> NodeHandle<S> {
    let tick_ms = u64::try_from(config.tick.as_millis()).unwrap_or(u64::MAX).max(1);
    host.set_tick_ms(tick_ms);
    host.set_dormancy(
        config.dormant_after.map(|d| (u64::try_from(d.as_millis()).unwrap_or(u64::MAX) / tick_ms).max(1)),
    );
    host.set_boot_wakes_per_tick(config.boot_wakes_per_tick);
    host.set_check_ins_max(config.check_ins_max);
    host.set_fetches_max(config.reads_queued_max);
    let cache = config.read_cache.map(|c| crate::read_cache::ReadCache::new(c, host.tunables()));
    host.publish_reads(cache.is_some());
    let published = cache.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let (control, controls) = tokio::sync::mpsc::channel(config.control_queue_max.max(1));
    let stats = Arc::new(Mutex::new(host.stats()));
    let shared = Arc::clone(&stats);
    let times = Arc::new(Mutex::new(RoundTimes::default()));
    let shared_times = Arc::clone(&times);
    let (fault, faults) = tokio::sync::watch::channel(None);
    let thread = std::thread::Builder::new()
        .name(format!("paros-node-{}", host.id()))
        .spawn(move || {
            // A private single-threaded runtime: this thread does nothing but this node's rounds,
            // so blocking it on the disk sync stalls no one else.
            let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a node runtime");
            let ran = runtime.block_on(node_thread::run(
                host,
                transport,
                node_thread::Inputs { inbox, controls, stopped },
                &clock,
                config,
                (&shared, &shared_times),
                published.as_ref(),
            ));
            ran.map_err(|f| {
                let f = Arc::new(f);
                fault.send_replace(Some(Arc::clone(&f)));
                f
            })
        })
        .expect("spawn the node thread");
    NodeHandle {
        control: NodeControl { tx: control },
        stop: Some(stop),
        thread: Some(thread),
        faults: FaultWatch { rx: faults },
        stats,
        times,
        cache,
    }
}
