//! The runtime shell: runs a [`Host`] on its own OS thread (fsync never blocks an async
//! worker) under a [`Pump`] — the event loop the simulation runs too — feeding it the bus
//! inbox and readings of a [`Clock`], persisting each round's batch on a blocking thread, and
//! sending what each step releases.
//! No protocol or durability logic lives here: it only moves inputs in and outputs out.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use paros_core::{JournalConfig, JournalKey};

use crate::host::{Host, HostStats, PlaceError, Ticket};
use crate::ports::StoreError;
use crate::ports::{Clock, LogStore, Placement, Transport};
use crate::pump::{Batch, Persist, Pump};
use crate::rpc::{Incoming, Responder};
use crate::timing::RoundTimes;

/// Exit code for a storage fault: restart the process, it recovers from disk.
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
    /// average (a running average over about the last eight rounds, [`RoundSizes`]). Rounds of
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
}

/// The default [`ShellConfig::dormant_after`].
pub const DORMANT_AFTER: Duration = Duration::from_secs(60);
/// The default [`ShellConfig::idle_spin`].
pub const IDLE_SPIN: Duration = Duration::from_micros(500);
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
        }
    }
}

/// A change of which journals run on a node, from the process hosting it (the registry
/// follower, or the embedded cell at boot).
#[derive(Debug)]
pub enum Control {
    /// Place journals here; the reply says, for each, whether it was placed.
    Place {
        journals: Vec<(JournalKey, JournalConfig)>,
        reply: tokio::sync::oneshot::Sender<Vec<Result<(), PlaceError>>>,
    },
    /// Remove a journal from here (its waiting callers are answered `UnknownJournal`).
    Remove { key: JournalKey, reply: tokio::sync::oneshot::Sender<()> },
    /// Ask this node's voter of a journal to campaign now.
    Campaign { key: JournalKey },
}

/// Why a control request got no answer: the node stopped.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[error("the node stopped")]
pub struct NodeStopped;

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
        let mut results = self.place_all(vec![(key, config)]).await?;
        Ok(results.pop().unwrap_or(Ok(())))
    }

    /// Places many journals in one request (they ride the same round): one result each, in
    /// order. Where this node is a journal's first voter, it campaigns at once.
    ///
    /// # Errors
    /// [`NodeStopped`].
    pub async fn place_all(
        &self,
        journals: Vec<(JournalKey, JournalConfig)>,
    ) -> Result<Vec<Result<(), PlaceError>>, NodeStopped> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.tx.send(Control::Place { journals, reply }).await.map_err(|_| NodeStopped)?;
        answer.await.map_err(|_| NodeStopped)
    }

    /// Removes `key` from the node.
    ///
    /// # Errors
    /// [`NodeStopped`].
    pub async fn remove(&self, key: JournalKey) -> Result<(), NodeStopped> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.tx.send(Control::Remove { key, reply }).await.map_err(|_| NodeStopped)?;
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

/// A running node: stop it to get its host back.
#[derive(Debug)]
pub struct NodeHandle<S: LogStore> {
    control: NodeControl,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<Host<S>>>,
    stats: Arc<Mutex<HostStats>>,
    times: Arc<Mutex<RoundTimes>>,
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
    #[must_use]
    pub fn round_times(&self) -> RoundTimes {
        self.times.lock().expect("times lock").clone()
    }

    /// Stops the node after its current round and returns its host (storage still open).
    ///
    /// # Panics
    /// If the node thread panicked.
    pub fn stop(mut self) -> Host<S> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        self.thread.take().expect("joined once").join().expect("the node thread does not panic")
    }
}

/// Starts `host` on its own thread, reading `inbox` and sending through `transport`.
///
/// A storage fault stops the whole process with [`EXIT_STORAGE_FAULT`]: a failed write or sync
/// is unknown, not "not done", and nothing of that round may leave.
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
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let (control, controls) = tokio::sync::mpsc::channel(config.control_queue_max.max(1));
    let stats = Arc::new(Mutex::new(host.stats()));
    let shared = Arc::clone(&stats);
    let times = Arc::new(Mutex::new(RoundTimes::default()));
    let shared_times = Arc::clone(&times);
    let thread = std::thread::Builder::new()
        .name(format!("paros-node-{}", host.id()))
        .spawn(move || {
            // A private single-threaded runtime: this thread does nothing but this node's rounds,
            // so blocking it on the disk sync stalls no one else.
            let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a node runtime");
            runtime.block_on(run(
                host,
                transport,
                Inputs { inbox, controls, stopped },
                &clock,
                config,
                (&shared, &shared_times),
            ))
        })
        .expect("spawn the node thread");
    NodeHandle { control: NodeControl { tx: control }, stop: Some(stop), thread: Some(thread), stats, times }
}

/// What a node's thread listens to.
struct Inputs {
    inbox: tokio::sync::mpsc::Receiver<Incoming>,
    controls: tokio::sync::mpsc::Receiver<Control>,
    stopped: tokio::sync::oneshot::Receiver<()>,
}

fn apply_control<S: LogStore>(pump: &mut Pump<S>, responders: &mut BTreeMap<Ticket, Responder>, control: Control) {
    match control {
        Control::Place { journals, reply } => {
            let host = pump.host_mut();
            let me = host.id();
            let results = journals
                .into_iter()
                .map(|(key, config)| {
                    // With dormancy a new journal is placed asleep: its first call elects.
                    if host.dormancy().is_some() {
                        return host.place_asleep(key, config);
                    }
                    let first = config.voters.first() == Some(&me);
                    let placed = host.place(key, config);
                    // The first leader is chosen by placement: the first voter campaigns at
                    // once, the others wait for its heartbeat (no election storm when
                    // thousands of journals are placed together).
                    if placed.is_ok() && first {
                        host.campaign(&key);
                    }
                    placed
                })
                .collect();
            let _ = reply.send(results);
        }
        Control::Remove { key, reply } => {
            for (ticket, answer) in pump.host_mut().remove(&key) {
                if let Some(r) = responders.remove(&ticket) {
                    let _ = r.send(answer);
                }
            }
            let _ = reply.send(());
        }
        Control::Campaign { key } => pump.host_mut().campaign(&key),
    }
}

async fn run<S: LogStore, T: Transport, C: Clock>(
    host: Host<S>,
    mut transport: T,
    inputs: Inputs,
    clock: &C,
    config: ShellConfig,
    (stats, times): (&Mutex<HostStats>, &Mutex<RoundTimes>),
) -> Host<S> {
    let Inputs { mut inbox, mut controls, mut stopped } = inputs;
    let me = host.id();
    let mut responders: BTreeMap<Ticket, Responder> = BTreeMap::new();
    let reader = host.store().reader();
    let mut pump = Pump::new(host, clock.now_ms());
    let spin = Spin::of(&config);
    let storage = StoreWorker::<S>::spawn(me, spin);
    // The round whose batch the storage thread is persisting, if any: inputs keep flowing and
    // answers keep leaving while the disk syncs.
    let mut persisting: Option<Persisting<S>> = None;
    // When the oldest input not yet in a round's batch arrived, and when the last sync ended.
    let mut first_input: Option<Instant> = None;
    let mut synced_at: Option<Instant> = None;
    // Whether the last wait ended with work (an input that `is_work`, a persisted round) within
    // `idle_spin`: only then is the next input likely soon enough to poll for. A quiet node
    // sleeps at once, and so does one whose only traffic is liveness (pings, heartbeats),
    // which comes in bursts a tick apart.
    let mut waits_are_short = false;
    // How many journals the recent rounds wrote (see `spin_round_journals_max`).
    let mut round_journals = RoundSizes::default();
    loop {
        let mut input = None;
        let mut done = None;
        if !pump.wants_step() || persisting.is_some() {
            // Look without sleeping first (bounded by `idle_spin`): the next input or the
            // round's end usually comes within it.
            let waited = Instant::now();
            match spin_for(spin.limit(waits_are_short, round_journals), || poll_once(&mut inbox, &mut persisting)) {
                Some(Woke::Input(m)) => input = Some(m),
                Some(Woke::Persisted(d)) => done = Some(d),
                None => tokio::select! {
                    m = inbox.recv() => match m {
                        Some(m) => input = Some(m),
                        None if persisting.is_none() => break,
                        None => {}
                    },
                    d = async { persisting.as_mut().expect("guarded").await }, if persisting.is_some() => {
                        persisting = None;
                        done = Some(d.expect("the storage thread does not panic"));
                    }
                    Some(c) = controls.recv() => apply_control(&mut pump, &mut responders, c),
                    () = tokio::time::sleep(Duration::from_millis(pump.next_due_ms().saturating_sub(clock.now_ms()))) => {}
                    _ = &mut stopped, if persisting.is_none() => break,
                },
            }
            // A timer's wake is not an input coming soon, nor is a ping or a heartbeat; a
            // persisted round is (its answers release more work).
            waits_are_short =
                (input.as_ref().is_some_and(is_work) || done.is_some()) && waited.elapsed() <= config.idle_spin;
        } else {
            input = inbox.try_recv().ok();
        }
        let synced = done.map(|(store, batch, result)| {
            let spent = match result {
                Ok(spent) => spent,
                Err(e) => storage_fault(me, &e),
            };
            {
                let mut t = times.lock().expect("times lock");
                t.write.record(micros(spent.write));
                if let Some(sync) = spent.sync {
                    t.sync.record(micros(sync));
                }
            }
            synced_at = Some(spent.ended);
            pump.host_mut().return_store(store);
            batch
        });
        for _ in 0..config.control_queue_max {
            let Ok(c) = controls.try_recv() else { break };
            apply_control(&mut pump, &mut responders, c);
        }
        let mut absorbed = 0;
        if input.is_some() && first_input.is_none() {
            first_input = Some(Instant::now());
        }
        while let Some(i) = input {
            match i {
                Incoming::Protocol { from, envelopes } => pump.deliver(from, envelopes),
                Incoming::Request { request, reply } => match pump.request(request) {
                    Ok(ticket) => {
                        responders.insert(ticket, reply);
                    }
                    Err(answer) => {
                        let _ = reply.send(answer);
                    }
                },
            }
            absorbed += 1;
            if absorbed >= config.inputs_per_round_max {
                break;
            }
            input = inbox.try_recv().ok();
        }
        let effects = pump.step(clock.now_ms(), synced, &reader);
        if let Some(Persist { placements, batch, needs_sync }) = effects.persist {
            if let Some(at) = first_input.take() {
                times.lock().expect("times lock").queue.record(micros(at.elapsed()));
            }
            round_journals.record(batch.len());
            persisting = Some(storage.persist(pump.host_mut().lend_store(), placements, batch, needs_sync));
        }
        for peer in effects.pings {
            transport.send(peer, Vec::new());
        }
        for (to, envelopes) in effects.messages {
            transport.send(to, envelopes);
        }
        for (ticket, answer) in effects.answers {
            if let Some(r) = responders.remove(&ticket) {
                let _ = r.send(answer);
            }
        }
        if let Some(at) = synced_at.take() {
            times.lock().expect("times lock").hop.record(micros(at.elapsed()));
        }
        *stats.lock().expect("stats lock") = pump.host().stats();
    }
    storage.stop();
    pump.into_host()
}

/// What woke a waiting node thread without a sleep.
enum Woke<S> {
    Input(Incoming),
    Persisted(Done<S>),
}

/// One look at what a waiting node thread waits for.
fn poll_once<S>(
    inbox: &mut tokio::sync::mpsc::Receiver<Incoming>,
    persisting: &mut Option<Persisting<S>>,
) -> Option<Woke<S>> {
    if let Some(p) = persisting.as_mut() {
        match p.try_recv() {
            Ok(done) => {
                *persisting = None;
                return Some(Woke::Persisted(done));
            }
            Err(tokio::sync::oneshot::error::TryRecvError::Empty) => {}
            Err(tokio::sync::oneshot::error::TryRecvError::Closed) => panic!("the storage thread does not panic"),
        }
    }
    inbox.try_recv().ok().map(Woke::Input)
}

/// Whether an input is work that more input usually follows soon (a request, or a protocol
/// message other than liveness), rather than a ping or a heartbeat.
fn is_work(input: &Incoming) -> bool {
    match input {
        Incoming::Request { .. } => true,
        Incoming::Protocol { envelopes, .. } => envelopes.iter().any(|e| !e.message.is_liveness()),
    }
}

/// When a node's threads poll before they sleep ([`ShellConfig::idle_spin`],
/// [`ShellConfig::spin_round_journals_max`]).
#[derive(Clone, Copy, Debug)]
struct Spin {
    idle: Duration,
    round_journals_max: usize,
}

impl Spin {
    fn of(config: &ShellConfig) -> Spin {
        Spin { idle: config.idle_spin, round_journals_max: config.spin_round_journals_max }
    }

    /// How long to poll before sleeping: `idle` while work comes that often and the recent
    /// rounds were small, else none.
    fn limit(self, waits_are_short: bool, rounds: RoundSizes) -> Duration {
        if waits_are_short && rounds.at_most(self.round_journals_max) { self.idle } else { Duration::ZERO }
    }
}

/// A running average of how many journals a node's rounds wrote: each round moves it an eighth
/// of the way to its own size, so one small round among large ones does not make a busy
/// node's threads poll.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoundSizes {
    /// The average in sixteenths of a journal.
    sixteenths: u64,
}

impl RoundSizes {
    const SCALE: u64 = 16;
    /// The weight of the newest round is 1/WEIGHT.
    const WEIGHT: u64 = 8;

    /// Adds a round that wrote `journals` journals.
    pub fn record(&mut self, journals: usize) {
        // Capped, so the sums below cannot overflow (no round comes near it).
        let sample = u64::try_from(journals).unwrap_or(u64::MAX).min(u64::from(u32::MAX)) * Self::SCALE;
        self.sixteenths = (self.sixteenths * (Self::WEIGHT - 1) + sample) / Self::WEIGHT;
    }

    /// Whether the average is at most `journals`.
    #[must_use]
    pub fn at_most(self, journals: usize) -> bool {
        self.sixteenths <= u64::try_from(journals).unwrap_or(u64::MAX).saturating_mul(Self::SCALE)
    }
}

/// Calls `poll` until it yields something or `limit` has passed, giving the core to any other
/// runnable thread between calls.
fn spin_for<T>(limit: Duration, mut poll: impl FnMut() -> Option<T>) -> Option<T> {
    if limit.is_zero() {
        return None;
    }
    let started = Instant::now();
    loop {
        if let Some(t) = poll() {
            return Some(t);
        }
        if started.elapsed() >= limit {
            return None;
        }
        std::thread::yield_now();
    }
}

/// What one round's persistence took on the storage thread.
struct Spent {
    write: Duration,
    sync: Option<Duration>,
    ended: Instant,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A round's batch once written and synced, with the store it was written to.
type Done<S> = (S, Batch, Result<Spent, StoreError>);
/// A round's batch being written and synced on the storage thread; the store comes back with it.
type Persisting<S> = tokio::sync::oneshot::Receiver<Done<S>>;

/// One round's persistence, handed to the storage thread.
struct Job<S> {
    store: S,
    placements: Vec<Placement>,
    batch: Batch,
    needs_sync: bool,
    done: tokio::sync::oneshot::Sender<Done<S>>,
}

/// A node's storage thread: writes and syncs one round's batch at a time, so the node thread
/// never blocks on the disk. A thread of its own (not a pool's): it polls for the next round
/// for [`ShellConfig::idle_spin`] before it sleeps.
struct StoreWorker<S> {
    jobs: std::sync::mpsc::SyncSender<Job<S>>,
    thread: JoinHandle<()>,
}

impl<S: LogStore> StoreWorker<S> {
    fn spawn(node: paros_core::NodeId, spin: Spin) -> Self {
        // One round persists at a time: a queue of one never fills.
        let (jobs, queue) = std::sync::mpsc::sync_channel::<Job<S>>(1);
        let thread = std::thread::Builder::new()
            .name(format!("paros-store-{node}"))
            .spawn(move || {
                let mut waits_are_short = false;
                let mut round_journals = RoundSizes::default();
                loop {
                    let waited = Instant::now();
                    let next = spin_for(spin.limit(waits_are_short, round_journals), || match queue.try_recv() {
                        Ok(job) => Some(Some(job)),
                        Err(std::sync::mpsc::TryRecvError::Empty) => None,
                        Err(std::sync::mpsc::TryRecvError::Disconnected) => Some(None),
                    });
                    let Some(job) = next.unwrap_or_else(|| queue.recv().ok()) else { return };
                    waits_are_short = waited.elapsed() <= spin.idle;
                    let Job { mut store, placements, batch, needs_sync, done } = job;
                    round_journals.record(batch.len());
                    let result = persist(&mut store, &placements, &batch, needs_sync);
                    let _ = done.send((store, batch, result));
                }
            })
            .expect("spawn the storage thread");
        StoreWorker { jobs, thread }
    }

    fn persist(&self, store: S, placements: Vec<Placement>, batch: Batch, needs_sync: bool) -> Persisting<S> {
        let (done, persisted) = tokio::sync::oneshot::channel();
        self.jobs.send(Job { store, placements, batch, needs_sync, done }).expect("the storage thread does not panic");
        persisted
    }

    fn stop(self) {
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

fn storage_fault(me: paros_core::NodeId, e: &StoreError) -> ! {
    eprintln!("paros: storage fault on node {me}: {e}; stopping (exit {EXIT_STORAGE_FAULT})");
    std::process::exit(EXIT_STORAGE_FAULT);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem_store::MemStore;

    #[test]
    fn a_spin_returns_what_the_poll_yields_and_gives_up_at_its_limit() {
        let mut calls = 0;
        assert_eq!(
            spin_for(Duration::from_secs(5), || {
                calls += 1;
                (calls == 3).then_some(calls)
            }),
            Some(3)
        );
        let mut calls = 0;
        assert_eq!(
            spin_for(Duration::ZERO, || {
                calls += 1;
                Some(())
            }),
            None,
            "no spin: sleep at once"
        );
        assert_eq!(calls, 0, "a zero spin never polls");
        let started = Instant::now();
        assert_eq!(spin_for(Duration::from_millis(20), || None::<()>), None);
        let spent = started.elapsed();
        assert!(spent >= Duration::from_millis(20) && spent < Duration::from_secs(2), "gave up after {spent:?}");
    }

    #[test]
    fn a_thread_polls_only_after_short_waits_and_small_rounds() {
        let steady = |journals: usize| {
            let mut rounds = RoundSizes::default();
            for _ in 0..64 {
                rounds.record(journals);
            }
            rounds
        };
        let spin = Spin { idle: IDLE_SPIN, round_journals_max: 4 };
        assert_eq!(spin.limit(true, RoundSizes::default()), IDLE_SPIN, "no round yet: poll");
        assert_eq!(spin.limit(true, steady(1)), IDLE_SPIN, "one writer: poll");
        assert_eq!(spin.limit(true, steady(4)), IDLE_SPIN, "at the bound: poll");
        assert_eq!(spin.limit(true, steady(5)), Duration::ZERO, "rounds of many journals: sleep");
        assert_eq!(spin.limit(false, steady(1)), Duration::ZERO, "the last wait was long: sleep");
        let config = ShellConfig { spin_round_journals_max: 9, ..ShellConfig::default() };
        assert_eq!(Spin::of(&config).limit(true, steady(9)), IDLE_SPIN, "the bound is configuration");
        assert_eq!(Spin::of(&config).limit(true, steady(10)), Duration::ZERO);
    }

    #[test]
    fn one_small_round_among_large_ones_does_not_start_a_poll() {
        let spin = Spin { idle: IDLE_SPIN, round_journals_max: 2 };
        let mut rounds = RoundSizes::default();
        for _ in 0..32 {
            rounds.record(12);
        }
        rounds.record(1);
        assert_eq!(spin.limit(true, rounds), Duration::ZERO, "busy node, one small round: still sleep");
        // The average follows the rounds: once a busy node's load goes, it polls again.
        for _ in 0..32 {
            rounds.record(1);
        }
        assert_eq!(spin.limit(true, rounds), IDLE_SPIN, "the load went: poll again");
        let mut huge = RoundSizes::default();
        for _ in 0..64 {
            huge.record(usize::MAX);
        }
        assert!(huge.at_most(usize::MAX) && !huge.at_most(1 << 20), "no overflow at the extremes");
    }

    #[test]
    fn only_inputs_that_carry_work_keep_a_node_polling() {
        use crate::ports::Envelope;
        use paros_core::{Ballot, JournalKey, Message, NodeId, Slot};
        let from = NodeId(2);
        let envelope = |message| Envelope { journal: JournalKey::default(), from, message };
        let protocol = |envelopes| Incoming::Protocol { from, envelopes };
        let ballot = Ballot { round: 1, node: from };
        let heartbeat = envelope(Message::Heartbeat { ballot, commit: Slot(3), quiesce: false });
        let ack = envelope(Message::HeartbeatAck { ballot, chosen_up_to: Slot(3) });
        let accept = envelope(Message::Accept { ballot, entries: Vec::new(), commit: Slot(3) });
        assert!(!is_work(&protocol(Vec::new())), "a ping");
        assert!(!is_work(&protocol(vec![heartbeat.clone(), ack])), "liveness only");
        assert!(is_work(&protocol(vec![heartbeat, accept])), "an accept among heartbeats");
        let (reply, _answer) = tokio::sync::oneshot::channel();
        let read = crate::rpc::NodeRequest::Read {
            journal: JournalKey::default(),
            read: paros_core::wire::ReadRequest {
                from: paros_core::Seq(0),
                limit: 1,
                max_bytes: 0,
                wait_ticks: 0,
                consistency: paros_core::wire::Consistency::Linearizable,
            },
        };
        assert!(is_work(&Incoming::Request { request: read, reply }), "a request");
    }

    #[test]
    fn the_storage_thread_writes_and_syncs_each_round_and_hands_the_store_back() {
        for spin in [Duration::ZERO, IDLE_SPIN] {
            let disk = MemStore::new();
            let worker = StoreWorker::spawn(
                paros_core::NodeId(1),
                Spin { idle: spin, round_journals_max: SPIN_ROUND_JOURNALS_MAX },
            );
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
