//! The runtime shell: runs a [`Host`] on its own OS thread (fsync never blocks an async
//! worker), feeds it the bus inbox and a clock, and sends what each round releases.
//! No protocol or durability logic lives here: it only moves inputs in and outputs out.

use std::collections::BTreeMap;
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::host::{Host, HostStats, Ticket};
use crate::ports::{LogStore, Transport};
use crate::rpc::{Incoming, Responder};

/// Exit code for a storage fault: restart the process, it recovers from disk.
pub const EXIT_STORAGE_FAULT: i32 = 75;
/// Exit code for a refusal to boot: do not restart.
pub const EXIT_REFUSED: i32 = 78;

/// Shell settings; every bound is here.
#[derive(Clone, Copy, Debug)]
pub struct ShellConfig {
    /// One protocol tick.
    pub tick: Duration,
    /// Inputs absorbed before a round is forced (bounds one round's batch).
    pub inputs_per_round_max: usize,
}

impl Default for ShellConfig {
    fn default() -> Self {
        ShellConfig { tick: Duration::from_millis(100), inputs_per_round_max: 4096 }
    }
}

enum Input {
    Bus(Incoming),
    Stop,
}

/// A running node: stop it to get its host back.
#[derive(Debug)]
pub struct NodeHandle<S: LogStore> {
    input: mpsc::Sender<Input>,
    thread: Option<JoinHandle<Host<S>>>,
    stats: Arc<Mutex<HostStats>>,
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Input::Bus(_) => "Bus",
            Input::Stop => "Stop",
        })
    }
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
        let _ = self.input.send(Input::Stop);
        self.thread.take().expect("joined once").join().expect("the node thread does not panic")
    }
}

/// Starts `host` on its own thread, reading `inbox` and sending through `transport`.
///
/// A storage fault stops the whole process with [`EXIT_STORAGE_FAULT`]: a failed write or sync
/// is unknown, not "not done", and nothing of that round may leave.
pub fn spawn<S: LogStore, T: Transport>(
    host: Host<S>,
    transport: T,
    mut inbox: tokio::sync::mpsc::Receiver<Incoming>,
    config: ShellConfig,
) -> NodeHandle<S> {
    let (tx, rx) = mpsc::channel::<Input>();
    let forward = tx.clone();
    std::thread::Builder::new()
        .name(format!("paros-inbox-{}", host.id()))
        .spawn(move || {
            while let Some(m) = inbox.blocking_recv() {
                if forward.send(Input::Bus(m)).is_err() {
                    break;
                }
            }
        })
        .expect("spawn the inbox thread");
    let stats = Arc::new(Mutex::new(host.stats()));
    let shared = Arc::clone(&stats);
    let thread = std::thread::Builder::new()
        .name(format!("paros-node-{}", host.id()))
        .spawn(move || run(host, transport, &rx, config, &shared))
        .expect("spawn the node thread");
    NodeHandle { input: tx, thread: Some(thread), stats }
}

fn run<S: LogStore, T: Transport>(
    mut host: Host<S>,
    mut transport: T,
    rx: &mpsc::Receiver<Input>,
    config: ShellConfig,
    stats: &Mutex<HostStats>,
) -> Host<S> {
    let mut responders: BTreeMap<Ticket, Responder> = BTreeMap::new();
    let mut next_tick = Instant::now() + config.tick;
    loop {
        let wait = if host.has_work() { Duration::ZERO } else { next_tick.saturating_duration_since(Instant::now()) };
        let first = match rx.recv_timeout(wait) {
            Ok(i) => Some(i),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => return host,
        };
        let mut absorbed = 0;
        let mut input = first;
        while let Some(i) = input {
            match i {
                Input::Stop => return host,
                Input::Bus(Incoming::Protocol { from, envelopes }) => host.deliver(from, envelopes),
                Input::Bus(Incoming::Request { request, reply }) => match host.request(request) {
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
            input = rx.try_recv().ok();
        }
        if Instant::now() >= next_tick {
            host.tick();
            next_tick = Instant::now() + config.tick;
        }
        let me = host.id();
        let mut looped: Vec<Vec<crate::ports::Envelope>> = Vec::new();
        let out = match host.round(|to, envelopes| if to == me { looped.push(envelopes) } else { transport.send(to, envelopes) }) {
            Ok(out) => out,
            Err(e) => {
                eprintln!("paros: storage fault on node {}: {e}; stopping (exit {EXIT_STORAGE_FAULT})", host.id());
                std::process::exit(EXIT_STORAGE_FAULT);
            }
        };
        for envelopes in looped {
            host.deliver(me, envelopes);
        }
        for (to, envelopes) in out.messages {
            if to == host.id() {
                host.deliver(to, envelopes);
            } else {
                transport.send(to, envelopes);
            }
        }
        for (ticket, answer) in out.answers {
            if let Some(r) = responders.remove(&ticket) {
                let _ = r.send(answer);
            }
        }
        *stats.lock().expect("stats lock") = host.stats();
    }
}
