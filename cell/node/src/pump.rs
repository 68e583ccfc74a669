//! One machine's event loop as a sans-IO state machine: what each input does, when a round
//! starts, what leaves before its sync and what only after. The thread shell
//! ([`crate::shell`]) drives it with a real bus, clock and store; the simulation drives the
//! very same code with simulated ones, so the daemon's schedule is the one the sweep checks.
//!
//! A driver feeds inputs ([`Pump::deliver`], [`Pump::request`]) and calls [`Pump::step`] with a
//! clock reading whenever it likes — after each input, after a batch of them, when the next
//! tick is due — and once more with the batch of a [`Persist`] it was handed, when that batch
//! is durable. Each step returns [`Effects`] to perform: messages to send, answers to give,
//! at most one batch to persist (one round in flight at a time), and store reads to run off
//! the driver's thread ([`FetchJob`]), whose answers it hands back with [`Pump::fetched`] for
//! a later step to release. No step reads the store: not for a page, a catch-up, nor the wake
//! of a dormant journal.

use paros_core::{Applied, JournalKey, NodeId, WriteOp};

use crate::fetch::{FetchJob, Fetched};
use crate::host::{Early, Host, Owed, PendingRound, RoundOutput};
use crate::ports::{Envelope, LogStore};
use crate::rpc::{NodeAnswer, NodeRequest};

/// One round's writes, every journal's, to persist as one atomic batch.
pub type Batch = Vec<(JournalKey, Vec<WriteOp>)>;

/// A round's batch the driver must write (and sync when `needs_sync`), then hand back to
/// [`Pump::step`] as `synced`. A failed write or sync is unknown, not "not done": the driver
/// must stop the machine without handing it back, and nothing of the round may leave.
#[derive(Debug)]
#[must_use = "a round's batch must be persisted and handed back"]
pub struct Persist {
    /// Journals placed and removed: apply with [`LogStore::place`] before writing `batch`.
    pub placements: Vec<crate::ports::Placement>,
    pub batch: Batch,
    pub needs_sync: bool,
}

/// What one step asks the driver to do, in this order: persist (if any), send, answer.
#[derive(Debug, Default)]
pub struct Effects {
    /// Protocol envelopes per peer machine. Those addressed to this machine never appear here:
    /// the pump hands them back to its own host within the step.
    pub messages: Vec<(NodeId, Vec<Envelope>)>,
    /// Answers owed to requests from [`Pump::request`].
    pub answers: Vec<(Owed, NodeAnswer)>,
    /// The clock reading delivered a tick.
    pub ticked: bool,
    /// A tick happened: every peer machine should hear an empty message (machine liveness).
    pub pings: Vec<NodeId>,
    /// The batch of the round this step began, if it has writes.
    pub persist: Option<Persist>,
    /// Slots applied by the rounds this step completed (for audits and metrics).
    pub applied: Vec<(JournalKey, Applied)>,
    /// True when this step completed a round.
    pub completed: bool,
    /// Store reads to run off the node's thread ([`FetchJob::run`]): pages and catch-ups below
    /// a window, wakes of dormant journals; hand each answer back with [`Pump::fetched`].
    pub fetches: Vec<FetchJob>,
    /// What readers off the node's thread may serve now, in order ([`crate::ReadCache::publish`]);
    /// empty unless the host publishes ([`Host::publish_reads`]).
    pub published: Vec<(JournalKey, crate::read_cache::Publication)>,
}

impl Effects {
    fn released(&mut self, me: NodeId, looped: &mut Vec<Vec<Envelope>>, e: Early) {
        match e {
            Early::Messages(to, envelopes) if to == me => looped.push(envelopes),
            Early::Messages(to, envelopes) => self.messages.push((to, envelopes)),
            Early::Answer(owed, answer) => self.answers.push((owed, answer)),
        }
    }

    fn completed_round(&mut self, me: NodeId, looped: &mut Vec<Vec<Envelope>>, out: RoundOutput) {
        self.completed = true;
        for (to, envelopes) in out.messages {
            self.released(me, looped, Early::Messages(to, envelopes));
        }
        self.applied.extend(out.applied);
    }
}

/// A host and its round in flight.
#[derive(Debug)]
pub struct Pump<S: LogStore> {
    host: Host<S>,
    /// The round whose batch the driver is persisting.
    syncing: Option<PendingRound>,
    next_due_ms: u64,
}

impl<S: LogStore> Pump<S> {
    /// Takes `host`; the first clock reading `now_ms` arms its tick timer.
    pub fn new(mut host: Host<S>, now_ms: u64) -> Pump<S> {
        let clocked = host.on_clock(now_ms);
        Pump { host, syncing: None, next_due_ms: clocked.next_due_ms }
    }

    #[must_use]
    pub fn host(&self) -> &Host<S> {
        &self.host
    }

    /// The host, for placement and inspection between steps.
    pub fn host_mut(&mut self) -> &mut Host<S> {
        &mut self.host
    }

    /// Gives the host back.
    ///
    /// # Panics
    /// While a round's batch is being persisted.
    #[must_use]
    pub fn into_host(self) -> Host<S> {
        assert!(self.syncing.is_none(), "a host leaves its pump only between rounds");
        self.host
    }

    /// True while a round's batch is out with the driver.
    #[must_use]
    pub fn is_syncing(&self) -> bool {
        self.syncing.is_some()
    }

    /// True when a step now would begin a round or release something.
    #[must_use]
    pub fn wants_step(&self) -> bool {
        self.host.has_release() || (self.syncing.is_none() && self.host.has_work())
    }

    /// The clock reading at which the next tick is due.
    #[must_use]
    pub fn next_due_ms(&self) -> u64 {
        self.next_due_ms
    }

    /// Protocol envelopes from machine `from` (an empty list is a liveness ping).
    pub fn deliver(&mut self, from: NodeId, envelopes: Vec<Envelope>) {
        self.host.deliver(from, envelopes);
    }

    /// A client request: owed an answer by a later step, or answered now.
    ///
    /// # Errors
    /// The immediate answer (unknown journal, too large, busy…) when the request goes no further.
    pub fn request(&mut self, request: NodeRequest) -> Result<Owed, NodeAnswer> {
        self.host.request(request)
    }

    /// The answer of a store read a step handed out ([`Effects::fetches`]), run by a worker:
    /// released by the next step.
    pub fn fetched(&mut self, fetched: Fetched) {
        self.host.fetched(fetched);
    }

    /// One turn of the loop at clock reading `now_ms`. `synced` is the batch of the last
    /// [`Persist`], now durable. The store is not read here: a dormant journal an input wakes,
    /// and entries journals evicted from memory, are handed out ([`Effects::fetches`]), and
    /// a later step takes their answers ([`Pump::fetched`]).
    ///
    /// # Panics
    /// When `synced` is handed back with no round in flight.
    pub fn step(&mut self, now_ms: u64, synced: Option<Batch>) -> Effects {
        let me = self.host.id();
        let mut effects = Effects::default();
        let mut looped: Vec<Vec<Envelope>> = Vec::new();
        let clocked = self.host.on_clock(now_ms);
        self.next_due_ms = clocked.next_due_ms;
        effects.ticked = clocked.ticked;
        if clocked.ticked {
            effects.pings = self.host.peers().collect();
        }
        // What inputs since the last step applied, before a round's completion lets the
        // window evict anything.
        effects.published = self.host.take_publications();
        if let Some(batch) = synced {
            let mut pending = self.syncing.take().expect("a synced batch belongs to the round in flight");
            pending.batch = batch;
            let out = self.host.complete_round(pending);
            effects.completed_round(me, &mut looped, out);
        }
        self.host.wake_dormant(|e| effects.released(me, &mut looped, e));
        if self.host.has_release() {
            self.host.release(|e| effects.released(me, &mut looped, e));
        }
        if self.syncing.is_none() && self.host.has_work() {
            let mut pending = self.host.begin_round(|e| effects.released(me, &mut looped, e));
            if pending.batch.is_empty() && pending.placements.is_empty() {
                let out = self.host.complete_round(pending);
                effects.completed_round(me, &mut looped, out);
            } else {
                let batch = std::mem::take(&mut pending.batch);
                let placements = std::mem::take(&mut pending.placements);
                effects.persist = Some(Persist { placements, batch, needs_sync: pending.needs_sync });
                self.syncing = Some(pending);
            }
        }
        effects.fetches = self.host.take_fetches(|e| effects.released(me, &mut looped, e));
        for envelopes in looped {
            self.host.deliver(me, envelopes);
        }
        effects.published.extend(self.host.take_publications());
        effects
    }
}
