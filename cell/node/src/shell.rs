//! The runtime shell: runs a [`Host`] on its own OS thread (fsync never blocks an async
//! worker), feeds it the bus inbox and readings of a [`Clock`], and sends what each round
//! releases.
//! No protocol or durability logic lives here: it only moves inputs in and outputs out.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::host::{Early, Host, HostStats, PendingRound, Ticket};
use crate::ports::StoreError;
use crate::ports::{Clock, LogStore, Transport};
use crate::rpc::{Incoming, Responder};

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
}

impl Default for ShellConfig {
    fn default() -> Self {
        ShellConfig { tick: Duration::from_millis(100), inputs_per_round_max: 4096 }
    }
}

/// A running node: stop it to get its host back.
#[derive(Debug)]
pub struct NodeHandle<S: LogStore> {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<Host<S>>>,
    stats: Arc<Mutex<HostStats>>,
}

impl<S: LogStore> NodeHandle<S> {
    /// The host's counters as of its last round.
    ///
    /// # Panics
    /// If the node thread panicked while holding the counters.
    #[must_use]
    pub fn stats(&self) -> HostStats {
        *self.stats.lock().expect("stats lock")
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
    host.set_tick_ms(u64::try_from(config.tick.as_millis()).unwrap_or(u64::MAX).max(1));
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let stats = Arc::new(Mutex::new(host.stats()));
    let shared = Arc::clone(&stats);
    let thread = std::thread::Builder::new()
        .name(format!("paros-node-{}", host.id()))
        .spawn(move || {
            // A private single-threaded runtime: this thread does nothing but this node's rounds,
            // so blocking it on the disk sync stalls no one else.
            let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a node runtime");
            runtime.block_on(run(host, transport, inbox, &clock, config, &shared, stopped))
        })
        .expect("spawn the node thread");
    NodeHandle { stop: Some(stop), thread: Some(thread), stats }
}

async fn run<S: LogStore, T: Transport, C: Clock>(
    mut host: Host<S>,
    mut transport: T,
    mut inbox: tokio::sync::mpsc::Receiver<Incoming>,
    clock: &C,
    config: ShellConfig,
    stats: &Mutex<HostStats>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) -> Host<S> {
    let me = host.id();
    let mut responders: BTreeMap<Ticket, Responder> = BTreeMap::new();
    let mut clocked = host.on_clock(clock.now_ms());
    // The round whose batch a blocking thread is persisting, if any: inputs keep flowing and
    // answers keep leaving while the disk syncs.
    let mut syncing: Option<(PendingRound, Persisting<S>)> = None;
    loop {
        let mut input = None;
        let mut synced = None;
        let idle = !host.has_work() || syncing.is_some();
        if idle {
            tokio::select! {
                m = inbox.recv() => match m {
                    Some(m) => input = Some(m),
                    None if syncing.is_none() => return host,
                    None => {}
                },
                done = async { (&mut syncing.as_mut().expect("guarded").1).await }, if syncing.is_some() => {
                    synced = Some(done.expect("the storage thread does not panic"));
                }
                _ = tokio::time::sleep(Duration::from_millis(clocked.next_due_ms.saturating_sub(clock.now_ms()))) => {}
                _ = &mut stopped, if syncing.is_none() => return host,
            }
        } else {
            input = inbox.try_recv().ok();
        }
        let mut absorbed = 0;
        while let Some(i) = input {
            match i {
                Incoming::Protocol { from, envelopes } => host.deliver(from, envelopes),
                Incoming::Request { request, reply } => match host.request(request) {
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
        clocked = host.on_clock(clock.now_ms());
        if clocked.ticked {
            for peer in host.peers().collect::<Vec<_>>() {
                transport.send(peer, Vec::new());
            }
        }
        let mut looped: Vec<Vec<crate::ports::Envelope>> = Vec::new();
        let mut released = |e: Early| match e {
            Early::Messages(to, envelopes) if to == me => looped.push(envelopes),
            Early::Messages(to, envelopes) => transport.send(to, envelopes),
            Early::Answer(ticket, answer) => {
                if let Some(r) = responders.remove(&ticket) {
                    let _ = r.send(answer);
                }
            }
        };
        if let Some((store, batch, result)) = synced {
            let (mut pending, _) = syncing.take().expect("a round was syncing");
            if let Err(e) = result {
                storage_fault(me, &e);
            }
            host.return_store(store);
            pending.batch = batch;
            let out = host.complete_round(pending);
            for (to, envelopes) in out.messages {
                released(Early::Messages(to, envelopes));
            }
        }
        if host.has_release() {
            host.release(&mut released);
        }
        if syncing.is_none() && host.has_work() {
            let mut pending = host.begin_round(&mut released);
            if pending.batch.is_empty() {
                let out = host.complete_round(pending);
                for (to, envelopes) in out.messages {
                    released(Early::Messages(to, envelopes));
                }
            } else {
                let mut store = host.lend_store();
                let batch = std::mem::take(&mut pending.batch);
                let needs_sync = pending.needs_sync;
                let handle = tokio::task::spawn_blocking(move || {
                    let result = store.write(&batch).and_then(|()| if needs_sync { store.sync() } else { Ok(()) });
                    (store, batch, result)
                });
                syncing = Some((pending, handle));
            }
        }
        let _ = released;
        for envelopes in looped {
            host.deliver(me, envelopes);
        }
        *stats.lock().expect("stats lock") = host.stats();
    }
}

type Batch = Vec<(paros_core::JournalKey, Vec<paros_core::WriteOp>)>;

/// A round's batch being written and synced on a blocking thread; the store comes back with it.
type Persisting<S> = tokio::task::JoinHandle<(S, Batch, Result<(), StoreError>)>;

fn storage_fault(me: paros_core::NodeId, e: &StoreError) -> ! {
    eprintln!("paros: storage fault on node {me}: {e}; stopping (exit {EXIT_STORAGE_FAULT})");
    std::process::exit(EXIT_STORAGE_FAULT);
}
