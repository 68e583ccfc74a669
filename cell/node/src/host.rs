//! The host: every journal placed on one machine, driven in rounds.
//!
//! A round gathers the [`Ready`] of every journal with work, writes **one** storage batch,
//! syncs **once**, and only then hands out messages (grouped per destination) and answers.
//! Journals that are quiet (idle, caught up, nothing waiting) are neither ticked nor asked
//! for a `Ready`: ten thousand idle journals cost memory, not work. All of this is sans-IO
//! apart from the [`LogStore`] port, so the simulation drives the same code the daemon runs.

use std::collections::{BTreeMap, BTreeSet};

use paros_core::{
    Applied, Call, CallId, JournalConfig, JournalKey, Message, NodeId, ReadAnswer, ReadId, ReadRequest, Ready, Replica,
    Tunables, Voter, WriteOp,
};

use crate::ports::{Envelope, LogStore, StoreError};
use crate::rpc::{NodeAnswer, NodeRequest};

/// One journal as hosted here.
#[derive(Debug)]
enum Hosted {
    Voter(Box<Voter>),
    Replica(Box<Replica>),
}

impl Hosted {
    fn step(&mut self, from: NodeId, m: Message) {
        match self {
            Hosted::Voter(v) => v.step(from, m),
            Hosted::Replica(r) => r.step(from, m),
        }
    }
    fn tick(&mut self) {
        match self {
            Hosted::Voter(v) => v.tick(),
            Hosted::Replica(r) => r.tick(),
        }
    }
    fn read(&mut self, id: ReadId, req: ReadRequest) {
        match self {
            Hosted::Voter(v) => v.read(id, req),
            Hosted::Replica(r) => r.read(id, req),
        }
    }
    fn ready(&mut self) -> Ready {
        match self {
            Hosted::Voter(v) => v.ready(),
            Hosted::Replica(r) => r.ready(),
        }
    }
    fn take_released(&mut self) -> paros_core::Released {
        match self {
            Hosted::Voter(v) => v.take_released(),
            Hosted::Replica(r) => r.take_released(),
        }
    }
    fn advance(&mut self) {
        match self {
            Hosted::Voter(v) => v.advance(),
            Hosted::Replica(r) => r.advance(),
        }
    }
    fn has_ready(&self) -> bool {
        match self {
            Hosted::Voter(v) => v.has_ready(),
            Hosted::Replica(r) => r.has_ready(),
        }
    }
    fn is_quiet(&self) -> bool {
        match self {
            Hosted::Voter(v) => v.is_quiet(),
            Hosted::Replica(r) => r.is_quiet(),
        }
    }
}

/// A request ticket: the host's handle for an answer it owes.
pub type Ticket = u64;

/// Counters a test or a dashboard reads. Cumulative since boot.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct HostStats {
    pub rounds: u64,
    /// Machine ticks (from [`Host::on_clock`] or [`Host::tick`]).
    pub ticks: u64,
    /// Rounds that wrote a batch and synced.
    pub syncs: u64,
    /// Write ops persisted.
    pub writes: u64,
    /// `Ready`s taken (journal-rounds with work).
    pub readies: u64,
    /// Journals a round looked at for a `Ready` (work that must track the busy journals, not
    /// every journal hosted).
    pub journals_visited: u64,
    /// Journal ticks delivered.
    pub journal_ticks: u64,
    /// Envelopes for journals this host does not know: dropped, never used to create one.
    pub unknown_journal_drops: u64,
    /// Records in write verdicts answered `Accepted` here.
    pub records_accepted: u64,
    /// Times a peer machine went silent past an election timeout.
    pub peers_lost: u64,
}

/// A round whose batch is being made durable.
#[derive(Debug)]
#[must_use = "a pending round must be persisted and completed"]
pub struct PendingRound {
    /// Every journal's writes of the round: persist as one atomic batch.
    pub batch: Vec<(JournalKey, Vec<WriteOp>)>,
    /// False when the batch holds only writes that need no sync of their own.
    pub needs_sync: bool,
    readies: Vec<(JournalKey, Ready)>,
}

/// What a round releases before its sync.
#[derive(Debug)]
pub enum Early {
    /// Protocol messages for one peer that state nothing this round's writes make true.
    Messages(NodeId, Vec<Envelope>),
    /// The answer owed on a ticket.
    Answer(Ticket, NodeAnswer),
}

/// What one round hands to the shell after its sync: safe to send now.
#[derive(Debug, Default)]
pub struct RoundOutput {
    /// Acceptor replies, grouped per destination.
    pub messages: BTreeMap<NodeId, Vec<Envelope>>,
    pub applied: Vec<(JournalKey, Applied)>,
    /// The writes this round made durable (for audits); empty unless `keep_writes` is set.
    pub writes: Vec<(JournalKey, Vec<WriteOp>)>,
}

/// Why a host would not boot.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The store holds no identity but the machine was told it has one: its disk was wiped.
    /// It must never rejoin under that identity (its promises are gone).
    #[error("the store is empty but this machine is {0:?}: refusing to boot a wiped store under an existing identity")]
    Wiped(NodeId),
    /// The store belongs to another machine.
    #[error("the store belongs to {found:?}, not {expected:?}")]
    WrongIdentity { expected: NodeId, found: NodeId },
}

/// Every journal on one machine, and the machine's store.
#[derive(Debug)]
pub struct Host<S: LogStore> {
    me: NodeId,
    /// `None` while lent to a storage thread for a round's write and sync.
    store: Option<S>,
    tunables: Tunables,
    journals: BTreeMap<JournalKey, Hosted>,
    /// Journals that may have a `Ready` this round.
    dirty: BTreeSet<JournalKey>,
    /// Journals that need ticks (not quiet).
    awake: BTreeSet<JournalKey>,
    /// Journals stepped since the last release.
    touched: BTreeSet<JournalKey>,
    in_flight: bool,
    calls: BTreeMap<(JournalKey, CallId), Ticket>,
    reads: BTreeMap<(JournalKey, ReadId), Ticket>,
    next_id: u64,
    seed: u64,
    stats: HostStats,
    keep_writes: bool,
    /// Every machine that shares a journal with this one, and when it was last heard.
    peers: BTreeMap<NodeId, Peer>,
    /// When the next tick is due, in the [`Clock`](crate::ports::Clock)'s milliseconds.
    timer: Timer,
}

/// Tick timing against the machine's clock.
#[derive(Clone, Copy, Debug)]
struct Timer {
    tick_ms: u64,
    /// `None` until the clock is first read.
    next_due_ms: Option<u64>,
}

/// What reading the clock did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Clocked {
    /// A tick was delivered: the shell sends its liveness heartbeat to every peer.
    pub ticked: bool,
    /// When the next tick is due, in the clock's milliseconds.
    pub next_due_ms: u64,
}

/// The tick period a host starts with.
pub const TICK_MS_DEFAULT: u64 = 100;

/// Machine-level liveness of one peer: any message, or the empty heartbeat batch the shell
/// sends each tick, counts as hearing it.
#[derive(Clone, Copy, Debug)]
struct Peer {
    heard_tick: u64,
    down: bool,
}

impl<S: LogStore> Host<S> {
    /// Boots over `store`. `expected` is the identity this machine was given before (from its
    /// data directory or configuration), `fresh` the id to mint if it has none.
    ///
    /// # Errors
    /// [`BootError::Wiped`] when the store is empty under an existing identity,
    /// [`BootError::WrongIdentity`] for another machine's store, or a storage fault.
    pub fn boot(mut store: S, expected: Option<NodeId>, fresh: NodeId, tunables: Tunables, seed: u64) -> Result<Host<S>, BootError> {
        let me = match (store.identity()?, expected) {
            (Some(found), Some(expected)) if found != expected => return Err(BootError::WrongIdentity { expected, found }),
            (Some(found), _) => found,
            (None, Some(expected)) => return Err(BootError::Wiped(expected)),
            (None, None) => {
                store.set_identity(fresh)?;
                fresh
            }
        };
        let mut host = Host {
            me,
            store: Some(store),
            tunables,
            journals: BTreeMap::new(),
            dirty: BTreeSet::new(),
            awake: BTreeSet::new(),
            touched: BTreeSet::new(),
            in_flight: false,
            calls: BTreeMap::new(),
            reads: BTreeMap::new(),
            next_id: 1,
            seed,
            stats: HostStats::default(),
            keep_writes: false,
            peers: BTreeMap::new(),
            timer: Timer { tick_ms: TICK_MS_DEFAULT, next_due_ms: None },
        };
        for stored in host.store_mut().load()? {
            host.install(stored.key, stored.config, stored.durable);
        }
        Ok(host)
    }

    /// This machine's identity.
    #[must_use]
    pub fn id(&self) -> NodeId {
        self.me
    }

    #[must_use]
    pub fn stats(&self) -> HostStats {
        self.stats
    }

    /// # Panics
    /// While the store is lent out.
    #[must_use]
    pub fn store(&self) -> &S {
        self.store.as_ref().expect("the store is not lent out")
    }

    fn store_mut(&mut self) -> &mut S {
        self.store.as_mut().expect("the store is not lent out")
    }

    /// Lends the store to the thread that persists a round's batch.
    ///
    /// # Panics
    /// When it is already lent out.
    pub fn lend_store(&mut self) -> S {
        self.store.take().expect("the store is lent once")
    }

    /// Takes the store back after a round's batch is durable.
    pub fn return_store(&mut self, store: S) {
        assert!(self.store.is_none(), "only a lent store comes back");
        self.store = Some(store);
    }

    /// Keep each round's writes in [`RoundOutput::writes`] (audits in the simulation).
    pub fn keep_writes(&mut self, keep: bool) {
        self.keep_writes = keep;
    }

    /// The number of journals hosted here.
    #[must_use]
    pub fn journal_count(&self) -> usize {
        self.journals.len()
    }

    /// The number of journals that currently need ticks.
    #[must_use]
    pub fn awake_count(&self) -> usize {
        self.awake.len()
    }

    /// The voter of `key`, if this machine votes in it.
    #[must_use]
    pub fn voter(&self, key: &JournalKey) -> Option<&Voter> {
        match self.journals.get(key) {
            Some(Hosted::Voter(v)) => Some(v),
            _ => None,
        }
    }

    /// The replica of `key`, if this machine is one of its learners.
    #[must_use]
    pub fn replica(&self, key: &JournalKey) -> Option<&Replica> {
        match self.journals.get(key) {
            Some(Hosted::Replica(r)) => Some(r),
            _ => None,
        }
    }

    /// Every journal key hosted here.
    pub fn journal_keys(&self) -> impl Iterator<Item = &JournalKey> {
        self.journals.keys()
    }

    fn journal_seed(&self, key: &JournalKey) -> u64 {
        self.seed ^ key.tenant.0.rotate_left(17) ^ key.journal.0.rotate_left(41) ^ self.me.0
    }

    fn install(&mut self, key: JournalKey, config: JournalConfig, durable: paros_core::Durable) {
        let seed = self.journal_seed(&key);
        for n in config.voters.iter().chain(&config.learners).filter(|n| **n != self.me) {
            self.peers.entry(*n).or_insert(Peer { heard_tick: self.stats.ticks, down: false });
        }
        let hosted = if config.voters.contains(&self.me) {
            Hosted::Voter(Box::new(Voter::recover(self.me, config, self.tunables, seed, durable)))
        } else {
            Hosted::Replica(Box::new(Replica::recover(self.me, config, self.tunables, durable)))
        };
        self.journals.insert(key, hosted);
        self.dirty.insert(key);
        self.awake.insert(key);
    }

    /// Places a journal here with its configuration (the registry will call this later).
    /// Placing a journal that is already here changes nothing.
    ///
    /// # Errors
    /// A storage fault writing the configuration.
    pub fn place(&mut self, key: JournalKey, config: JournalConfig) -> Result<(), StoreError> {
        if self.journals.contains_key(&key) {
            return Ok(());
        }
        assert!(
            config.voters.contains(&self.me) || config.learners.contains(&self.me),
            "a journal is placed only on its members"
        );
        self.store_mut().put_config(key, &config)?;
        self.install(key, config, paros_core::Durable::default());
        Ok(())
    }

    /// Asks this machine's voter of `key` to campaign now (first leader, no timeout wait).
    pub fn campaign(&mut self, key: &JournalKey) {
        if let Some(Hosted::Voter(v)) = self.journals.get_mut(key) {
            v.campaign();
            self.dirty.insert(*key);
            self.touched.insert(*key);
            self.awake.insert(*key);
        }
    }

    /// Protocol messages from a peer. A message for a journal not hosted here is dropped and
    /// counted; it never creates one.
    pub fn deliver(&mut self, from: NodeId, envelopes: Vec<Envelope>) {
        if let Some(p) = self.peers.get_mut(&from) {
            p.heard_tick = self.stats.ticks;
            p.down = false;
        }
        for e in envelopes {
            let Some(j) = self.journals.get_mut(&e.journal) else {
                self.stats.unknown_journal_drops += 1;
                continue;
            };
            j.step(from, e.message);
            self.dirty.insert(e.journal);
            self.touched.insert(e.journal);
            if !j.is_quiet() {
                self.awake.insert(e.journal);
            }
        }
    }

    /// A request from the bus. Returns the ticket its answer will carry, or the answer itself
    /// when it is immediate (unknown journal).
    pub fn request(&mut self, request: NodeRequest) -> Result<Ticket, NodeAnswer> {
        let ticket = self.next_id;
        self.next_id += 1;
        match request {
            NodeRequest::Call { journal, call } => self.call(ticket, journal, call),
            NodeRequest::Read { journal, read } => {
                let Some(j) = self.journals.get_mut(&journal) else { return Err(NodeAnswer::UnknownJournal) };
                j.read(ReadId(ticket), read);
                self.reads.insert((journal, ReadId(ticket)), ticket);
                self.dirty.insert(journal);
                self.touched.insert(journal);
                self.awake.insert(journal);
                Ok(ticket)
            }
        }
    }

    fn call(&mut self, ticket: Ticket, journal: JournalKey, call: Call) -> Result<Ticket, NodeAnswer> {
        match self.journals.get_mut(&journal) {
            None => Err(NodeAnswer::UnknownJournal),
            Some(Hosted::Replica(_)) => Err(NodeAnswer::Call(paros_core::CallAnswer::Redirect { leader: None })),
            Some(Hosted::Voter(v)) => {
                v.propose(CallId(ticket), call);
                self.calls.insert((journal, CallId(ticket)), ticket);
                self.dirty.insert(journal);
                self.touched.insert(journal);
                self.awake.insert(journal);
                Ok(ticket)
            }
        }
    }

    /// The machines to send the per-tick liveness heartbeat (an empty batch) to.
    pub fn peers(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.peers.keys().copied()
    }

    /// Sets the tick period (milliseconds of the clock; at least 1). Takes effect from the
    /// next tick.
    ///
    /// # Panics
    /// For a zero period.
    pub fn set_tick_ms(&mut self, tick_ms: u64) {
        assert!(tick_ms > 0, "a tick lasts at least a millisecond");
        self.timer.tick_ms = tick_ms;
    }

    /// Reads the machine's clock (`now_ms` from a [`Clock`](crate::ports::Clock)) and delivers
    /// a tick when one is due. At most one tick per reading: a thread that stalled for many
    /// periods does not burst ticks (a burst would look like a long silence of every peer);
    /// the schedule restarts from `now_ms`. A clock that goes backwards delays the next tick,
    /// never repeats one.
    pub fn on_clock(&mut self, now_ms: u64) -> Clocked {
        let tick_ms = self.timer.tick_ms;
        let due = *self.timer.next_due_ms.get_or_insert(now_ms.saturating_add(tick_ms));
        if now_ms < due {
            return Clocked { ticked: false, next_due_ms: due };
        }
        self.tick();
        let next_due_ms = now_ms.saturating_add(tick_ms);
        self.timer.next_due_ms = Some(next_due_ms);
        Clocked { ticked: true, next_due_ms }
    }

    /// One clock tick, delivered only to journals that are awake. A peer machine silent for
    /// longer than an election timeout wakes every journal it is a member of, so quiet
    /// journals it led elect a new leader without waiting for a call.
    pub fn tick(&mut self) {
        self.stats.ticks += 1;
        let silence = u64::from(self.tunables.election_ticks_max);
        let mut lost = Vec::new();
        for (id, p) in &mut self.peers {
            if !p.down && self.stats.ticks - p.heard_tick > silence {
                p.down = true;
                lost.push(*id);
            }
        }
        if !lost.is_empty() {
            self.stats.peers_lost += lost.len() as u64;
            for (key, j) in &mut self.journals {
                if let Hosted::Voter(v) = j
                    && v.config().voters.iter().any(|n| lost.contains(n))
                {
                    v.wake();
                    self.awake.insert(*key);
                }
            }
        }
        let mut asleep = Vec::new();
        for key in &self.awake {
            let j = self.journals.get_mut(key).expect("an awake journal is hosted");
            j.tick();
            self.stats.journal_ticks += 1;
            self.dirty.insert(*key);
            self.touched.insert(*key);
            if j.is_quiet() {
                asleep.push(*key);
            }
        }
        for key in asleep {
            self.awake.remove(&key);
        }
    }

    /// Wakes every hosted journal (e.g. when a peer machine stops answering).
    pub fn wake_all(&mut self) {
        for (key, j) in &mut self.journals {
            if let Hosted::Voter(v) = j {
                v.wake();
            }
            self.awake.insert(*key);
        }
    }

    /// One round, persisted on this thread: [`Host::begin_round`], one storage batch and one
    /// sync for every journal with work, then [`Host::complete_round`].
    ///
    /// # Errors
    /// A storage fault. Nothing in the `RoundOutput` may then leave: stop the process.
    pub fn round(&mut self, early: impl FnMut(Early)) -> Result<RoundOutput, StoreError> {
        let pending = self.begin_round(early);
        if !pending.batch.is_empty() {
            let store = self.store_mut();
            store.write(&pending.batch)?;
            if pending.needs_sync {
                store.sync()?;
            }
        }
        Ok(self.complete_round(pending))
    }

    /// Hands out what may leave now from every journal touched since the last call, even
    /// journals whose round is in flight: proposer messages, heartbeats, chosen values and
    /// answers (see [`Ready`]). The shell calls it after absorbing inputs while a sync runs.
    pub fn release(&mut self, mut early: impl FnMut(Early)) {
        let mut out: BTreeMap<NodeId, Vec<Envelope>> = BTreeMap::new();
        for key in std::mem::take(&mut self.touched) {
            let j = self.journals.get_mut(&key).expect("a touched journal is hosted");
            let released = j.take_released();
            for o in released.messages {
                out.entry(o.to).or_default().push(Envelope { journal: key, from: self.me, message: o.message });
            }
            self.answer(key, released.answers, released.reads, &mut early);
        }
        for (to, envelopes) in out {
            early(Early::Messages(to, envelopes));
        }
    }

    fn answer(
        &mut self,
        key: JournalKey,
        answers: Vec<(CallId, paros_core::CallAnswer)>,
        reads: Vec<(ReadId, ReadAnswer)>,
        early: &mut impl FnMut(Early),
    ) {
        for (call, answer) in answers {
            if let paros_core::CallAnswer::Verdict(paros_core::journal::Outcome::Accepted { count, .. }) = answer {
                self.stats.records_accepted += count;
            }
            if let Some(t) = self.calls.remove(&(key, call)) {
                early(Early::Answer(t, NodeAnswer::Call(answer)));
            }
        }
        for (read, answer) in reads {
            if let Some(t) = self.reads.remove(&(key, read)) {
                early(Early::Answer(t, NodeAnswer::Read(answer)));
            }
        }
    }

    /// Starts a round: takes the `Ready` of every journal with work, hands `early` what may
    /// leave before the sync, and returns the writes to persist as one batch. The caller makes
    /// `batch` durable (one write, one sync when `needs_sync`), then calls
    /// [`Host::complete_round`]. Inputs may be delivered meanwhile; no round may begin until
    /// this one completes.
    pub fn begin_round(&mut self, mut early: impl FnMut(Early)) -> PendingRound {
        assert!(!self.in_flight, "one round in flight at a time");
        self.in_flight = true;
        self.stats.rounds += 1;
        self.touched.clear();
        let mut readies: Vec<(JournalKey, Ready)> = Vec::new();
        for key in std::mem::take(&mut self.dirty) {
            let j = self.journals.get_mut(&key).expect("a dirty journal is hosted");
            self.stats.journals_visited += 1;
            if j.has_ready() {
                readies.push((key, j.ready()));
                self.stats.readies += 1;
            }
        }
        let batch: Vec<(JournalKey, Vec<WriteOp>)> = readies
            .iter_mut()
            .filter(|(_, r)| !r.writes.is_empty())
            .map(|(k, r)| (*k, std::mem::take(&mut r.writes)))
            .collect();
        let needs_sync = batch.iter().any(|(_, w)| w.iter().any(WriteOp::needs_sync));
        if !batch.is_empty() {
            self.stats.writes += batch.iter().map(|(_, w)| w.len() as u64).sum::<u64>();
            if needs_sync {
                self.stats.syncs += 1;
            }
        }
        let mut early_out: BTreeMap<NodeId, Vec<Envelope>> = BTreeMap::new();
        for (key, ready) in &mut readies {
            let (wait, go): (Vec<_>, Vec<_>) =
                std::mem::take(&mut ready.messages).into_iter().partition(|o| o.message.needs_durable_sender());
            ready.messages = wait;
            for o in go {
                early_out.entry(o.to).or_default().push(Envelope { journal: *key, from: self.me, message: o.message });
            }
            let (answers, reads) = (std::mem::take(&mut ready.answers), std::mem::take(&mut ready.reads));
            self.answer(*key, answers, reads, &mut early);
        }
        for (to, envelopes) in early_out {
            early(Early::Messages(to, envelopes));
        }
        PendingRound { batch, needs_sync, readies }
    }

    /// Completes a round whose batch is durable: releases the acceptor replies and advances
    /// every journal of the round.
    pub fn complete_round(&mut self, pending: PendingRound) -> RoundOutput {
        assert!(self.in_flight, "complete_round follows begin_round");
        self.in_flight = false;
        let mut out = RoundOutput::default();
        for (key, ready) in pending.readies {
            for o in ready.messages {
                out.messages.entry(o.to).or_default().push(Envelope { journal: key, from: self.me, message: o.message });
            }
            out.applied.extend(ready.applied.into_iter().map(|a| (key, a)));
            let j = self.journals.get_mut(&key).expect("hosted");
            j.advance();
            self.touched.insert(key);
            if j.has_ready() {
                self.dirty.insert(key);
            }
            if !j.is_quiet() {
                self.awake.insert(key);
            }
        }
        if self.keep_writes {
            out.writes = pending.batch;
        }
        out
    }

    /// True when some journal has effects waiting for a round.
    #[must_use]
    pub fn has_work(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// True when some journal was stepped since the last [`Host::release`].
    #[must_use]
    pub fn has_release(&self) -> bool {
        !self.touched.is_empty()
    }
}

/// A read answer for a ticket, for shells that want to match on it.
#[must_use]
pub fn read_answer(answer: &NodeAnswer) -> Option<&ReadAnswer> {
    match answer {
        NodeAnswer::Read(r) => Some(r),
        _ => None,
    }
}
