//! The host: every journal placed on one machine, driven in rounds.
//!
//! A round gathers the [`Ready`] of every journal with work, writes **one** storage batch,
//! syncs **once**, and only then hands out messages (grouped per destination) and answers.
//! Journals that are quiet (idle, caught up, nothing waiting) are neither ticked nor asked
//! for a `Ready`: ten thousand idle journals cost memory, not work. All of this is sans-IO
//! apart from the [`LogStore`] port, so the simulation drives the same code the daemon runs.
//!
//! One part a file, each owning its data: `journals` (the hosted journals, their placement and
//! protocol dispatch), `round` (which journals have work and the round pipeline), `owed`
//! (requests and the answers owed on them, under the callers' ids), `fetches` (store reads handed to workers and their
//! answers), `liveness` (ticks from the clock and peer machines heard), `dormancy` (journals
//! out of memory), `hosted` (a voter or a replica behind one face).

use std::collections::BTreeMap;

use paros_core::{Applied, JournalKey, NodeId, ReadAnswer, Ready, Tunables, WriteOp};

use crate::ports::{Envelope, Incarnation, LogStore, Placement, StoreError};
use crate::rpc::NodeAnswer;

mod dormancy;
mod feed;
mod fetches;
mod hosted;
mod journals;
mod liveness;
mod owed;
mod publish;
mod round;

use dormancy::Dormancy;
use fetches::Fetches;
use hosted::Hosted;
pub use journals::{
    LAG_BUCKETS, LAG_MS_BOUNDS, LAG_SLOTS_BOUNDS, LAG_TOP_DEFAULT, LAG_TOP_MAX, Lagging, PlaceError, ReplicaStates,
};
use liveness::Liveness;
pub use liveness::{Clocked, TICK_MS_DEFAULT};
pub use owed::Owed;
use owed::Owing;
use round::Round;

/// Ticks a journal stays quiet before it goes dormant, by default (60 s at the production
/// tick of 100 ms; see `dormancy`).
pub const DORMANT_AFTER_TICKS: u64 = 600;

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
    /// Campaigns this machine's voters started (a new ballot of their own, promised here).
    pub campaigns: u64,
    /// Campaigns that won: a voter here became its journal's leader.
    pub leaderships_won: u64,
    /// Fetches served from the store (catch-up answers and read pages below a journal's
    /// in-memory window), the entries they read, and those that failed to read.
    pub fetches: u64,
    pub fetched_entries: u64,
    pub fetch_errors: u64,
    /// Fetches refused because [`Host::set_fetches_max`] were already out with the workers
    /// (a page answered `Unserved`, a catch-up not sent).
    pub fetches_refused: u64,
    /// Journals that went dormant, and dormant journals woken by an input.
    pub dormancies: u64,
    pub wakes: u64,
    /// Journals dormant now (placed asleep, booted asleep or gone to sleep).
    pub dormant: u64,
    /// Answers to requests of an earlier life of their journal here (a catch-up answer or a
    /// watermark sent before a crash, a sleep or a removal, delivered late), dropped: those that
    /// found the journal awake in a later life, those of them whose life began with a wake from
    /// dormancy, and those that found it dormant (not woken for them).
    pub stale_answers: u64,
    pub stale_answers_after_wake: u64,
    pub stale_answers_dormant: u64,
    /// Reads a replica here refused because it had not caught up since it started.
    pub reads_refused_unready: u64,
    /// Feed marks this machine repeated for the journals it votes in (see `feed.rs`), and the
    /// marks a sleeping replica here took as no news (it had applied that much).
    pub feed_marks_repeated: u64,
    pub feed_marks_asleep: u64,
    /// Where this machine's replicas stand, as of its last tick (kept only on a machine that
    /// joined a replica tier's feed: [`Host::join_feed`]).
    pub replicas: ReplicaStates,
}

/// What became of a journal's life here, for a simulation's timeline and audits (recorded only
/// when asked: [`Host::record_lives`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LifeEvent {
    /// Quiet long enough: it left memory.
    Slept,
    /// Rebuilt from its store for an input, in a new life.
    Woke(paros_core::Life),
    /// An answer `from` a peer to a request of an earlier life arrived and was dropped: it found
    /// the journal dormant, or awake in a later life (`after_wake`: one that began with a wake).
    StaleAnswer { from: NodeId, dormant: bool, after_wake: bool },
}

/// A round whose batch is being made durable.
#[derive(Debug)]
#[must_use = "a pending round must be persisted and completed"]
pub struct PendingRound {
    /// Journals placed and removed since the last round: persist before `batch`.
    pub placements: Vec<Placement>,
    /// Every journal's writes of the round: persist as one atomic batch.
    pub batch: Vec<(JournalKey, Vec<WriteOp>)>,
    /// False when the batch holds only writes that need no sync of their own (and no
    /// placements).
    pub needs_sync: bool,
    readies: Vec<(JournalKey, Ready)>,
}

/// What a round releases before its sync.
#[derive(Debug)]
pub enum Early {
    /// Protocol messages for one peer that state nothing this round's writes make true.
    Messages(NodeId, Vec<Envelope>),
    /// The answer owed to a request.
    Answer(Owed, NodeAnswer),
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
    /// The store is this machine's id but another incarnation than the one recorded for it
    /// (by its data directory or the registry): a store formatted again, or copied from
    /// elsewhere. Its promises are not the ones this id made; it must join as a new identity.
    #[error("the store of {node:?} is incarnation {found:?}, not the recorded {recorded:?}: a foreign store")]
    WrongIncarnation { node: NodeId, recorded: Incarnation, found: Option<Incarnation> },
}

/// Every journal on one machine, and the machine's store.
///
/// The host wires its parts; each owns its fields and keeps its own invariants: [`Round`]
/// (which journals have work, the round in flight), [`Owing`] (calls and reads owed an
/// answer), [`Fetches`] (store reads out with workers), [`Liveness`] (the tick timer and the
/// peers heard), [`Dormancy`] (journals out of memory and the inputs waiting for them).
#[derive(Debug)]
pub struct Host<S: LogStore> {
    me: NodeId,
    /// The store's incarnation, as read back at boot (`None`: the store records none).
    incarnation: Option<Incarnation>,
    /// `None` while lent to a storage thread for a round's write and sync.
    store: Option<S>,
    tunables: Tunables,
    journals: BTreeMap<JournalKey, Hosted>,
    /// This boot's nonce: fresh randomness per boot (the simulation draws it from its seed).
    /// Journal lives are minted from it ([`paros_core::Life::mint`]).
    seed: u64,
    /// Lives minted so far in this boot.
    lives: u64,
    /// Journals' sleeps, wakes and stale answers, when recorded ([`Host::record_lives`]).
    life_events: Option<Vec<(JournalKey, LifeEvent)>>,
    stats: HostStats,
    round: Round,
    owing: Owing,
    fetches: Fetches,
    /// Reads the store while a round holds it: a dormant journal's promise, before removing it.
    reader: StoreReader,
    liveness: Liveness,
    dormancy: Dormancy,
    /// The replica tiers' feed addresses this machine subscribes to: a journal whose learners
    /// name one of them is hosted here as a replica.
    feeds: std::collections::BTreeSet<NodeId>,
    /// A node of the cell (booted by [`Host::boot_node`]): it hosts every journal placed on it
    /// as a voter, one whose configuration does not name it yet as a joining voter
    /// (docs/reconfiguration.md, rule 5). Otherwise only journals naming it vote here.
    node: bool,
    /// The feed marks this machine repeats for the journals it votes in.
    marks: feed::Marks,
    /// Per replica journal here: the machine tick its tier's feed last told it anything (a
    /// batch or a mark), or it was placed. The age of its watermark.
    feed_heard: std::collections::HashMap<JournalKey, u64>,
    /// How many of the furthest behind replica journals [`ReplicaStates::top`] names.
    lag_top: usize,
    /// What each journal's readers were last told (`None`: this machine publishes nothing;
    /// see [`Host::publish_reads`]).
    published: Option<std::collections::HashMap<JournalKey, publish::Told>>,
}

/// Ticks of quiet after which a journal woken only for a check-in (its own after a boot, or a
/// peer's) sleeps again (at most `dormant_after`).
pub const CHECK_IN_QUIET_TICKS: u64 = 10;

/// Journals booted dormant woken per tick, by default (`Host::set_boot_wakes_per_tick`).
pub const BOOT_WAKES_PER_TICK: usize = 64;

/// Journals awake for a check-in at once, at most, by default (`Host::set_check_ins_max`):
/// a check-in lasts an election timeout and [`CHECK_IN_QUIET_TICKS`] (about 30 ticks), so
/// this keeps the embedded cell's 20 ms ticks near [`BOOT_WAKES_PER_TICK`] a tick, with a
/// few MB of woken journals per machine.
pub const CHECK_INS_MAX: usize = 2048;

impl<S: LogStore> Host<S> {
    /// Boots over `store`. `expected` is the identity this machine was given before (from its
    /// data directory or configuration), `fresh` the id to mint if it has none. `seed` must be
    /// fresh for every boot (OS randomness; a simulation's seeded draw): the journals' lives
    /// here are minted from it, and a reply to an earlier boot's request is told apart by them.
    ///
    /// # Errors
    /// [`BootError::Wiped`] when the store is empty under an existing identity,
    /// [`BootError::WrongIdentity`] for another machine's store, or a storage fault.
    pub fn boot(
        store: S,
        expected: Option<NodeId>,
        fresh: NodeId,
        tunables: Tunables,
        seed: u64,
    ) -> Result<Host<S>, BootError> {
        Host::boot_as(store, expected, fresh, tunables, seed, Boot { asleep: false, node: false, feeds: &[] })
    }

    /// [`Host::boot`] (`asleep`: [`Host::boot_asleep`]) for a node of the cell: every journal
    /// placed here is hosted as a voter, including one placed with a configuration that does
    /// not name this machine — a seat its log is moving here, whose voter votes once its walk
    /// applies the `Reconfigure` naming it. The role must be known at boot: a joining voter
    /// recovered as a replica would never vote.
    ///
    /// # Errors
    /// As [`Host::boot`].
    pub fn boot_node(
        store: S,
        expected: Option<NodeId>,
        fresh: NodeId,
        tunables: Tunables,
        seed: u64,
        asleep: bool,
    ) -> Result<Host<S>, BootError> {
        Host::boot_as(store, expected, fresh, tunables, seed, Boot { asleep, node: true, feeds: &[] })
    }

    /// [`Host::boot_node`] of a node the cell forms with `formation` placed on it (the
    /// registry journal's founding seats; each configuration names this node as a voter).
    ///
    /// A fresh store (no identity, none expected) holds the formation durably *before* it
    /// records its identity: a store with an identity was formed. A crash between the two
    /// leaves a store with no identity, formed again at the next boot (placing the same
    /// configurations again changes nothing). Placing after the identity, as a round does,
    /// would let a crash before that round's sync leave a formed identity hosting nothing: a
    /// founder that never hosts the registry journal, and a cell whose founders all crashed
    /// there that never has one (simulation seed 80012083).
    ///
    /// # Errors
    /// As [`Host::boot`], and a storage fault writing the formation.
    pub fn form_node(
        mut store: S,
        expected: Option<NodeId>,
        fresh: NodeId,
        formation: &[(JournalKey, paros_core::JournalConfig)],
        tunables: Tunables,
        seed: u64,
        asleep: bool,
    ) -> Result<Host<S>, BootError> {
        if expected.is_none() && store.identity()?.is_none() && !formation.is_empty() {
            let placements: Vec<Placement> = formation
                .iter()
                .map(|(key, config)| Placement::Put(*key, config.clone(), paros_core::Ballot::ZERO))
                .collect();
            store.place(&placements)?;
            store.sync()?;
        }
        Host::boot_node(store, expected, fresh, tunables, seed, asleep)
    }

    /// [`Host::boot`] (or, `asleep`, [`Host::boot_asleep`]) of a replica subscribed to
    /// `feeds` ([`Host::join_feed`] before any journal is restored): a journal its store holds
    /// placed with learners it is fed at comes back as a replica.
    ///
    /// # Errors
    /// As [`Host::boot`].
    pub fn boot_fed(
        store: S,
        fresh: NodeId,
        tunables: Tunables,
        seed: u64,
        asleep: bool,
        feeds: &[NodeId],
    ) -> Result<Host<S>, BootError> {
        Host::boot_as(store, None, fresh, tunables, seed, Boot { asleep, node: false, feeds })
    }

    fn boot_as(
        mut store: S,
        expected: Option<NodeId>,
        fresh: NodeId,
        tunables: Tunables,
        seed: u64,
        Boot { asleep, node, feeds }: Boot<'_>,
    ) -> Result<Host<S>, BootError> {
        let me = match (store.identity()?, expected) {
            (Some(found), Some(expected)) if found != expected => {
                return Err(BootError::WrongIdentity { expected, found });
            }
            (Some(found), _) => found,
            (None, Some(expected)) => return Err(BootError::Wiped(expected)),
            (None, None) => {
                store.set_identity(fresh)?;
                fresh
            }
        };
        // Minted once: with the identity of a fresh store, or at the first boot by this build
        // of a store an older one formatted (its identity is intact, so its promises are).
        if store.incarnation()?.is_none() {
            store.set_incarnation(Incarnation::mint(seed, me))?;
        }
        let incarnation = store.incarnation()?;
        let reader = StoreReader(Box::new(store.reader()));
        let mut host = Host {
            me,
            incarnation,
            store: Some(store),
            tunables,
            journals: BTreeMap::new(),
            seed,
            lives: 0,
            life_events: None,
            stats: HostStats::default(),
            round: Round::default(),
            owing: Owing::default(),
            fetches: Fetches::default(),
            reader,
            liveness: Liveness::default(),
            dormancy: Dormancy::default(),
            feeds: feeds.iter().copied().collect(),
            node,
            marks: feed::Marks::default(),
            feed_heard: std::collections::HashMap::new(),
            lag_top: journals::LAG_TOP_DEFAULT,
            published: None,
        };
        if asleep {
            for (key, config) in host.store_mut().load_configs()? {
                host.install_dormant(key, config);
                host.dormancy.boot_wakes.insert(key);
            }
        } else {
            for stored in host.store_mut().load()? {
                host.install(stored.key, stored.config, stored.durable, false);
            }
        }
        Ok(host)
    }

    /// [`Host::boot`] with every journal dormant: only the configurations are read, and each
    /// journal comes back from the store on its first input (see `dormancy`), or when its turn
    /// comes to run once (`BOOT_WAKES_PER_TICK` a tick: it elects or hears its leader, so a
    /// machine that was down catches up, then it goes dormant again). Boot time then does not
    /// depend on how many journals are placed or what they hold.
    ///
    /// # Errors
    /// As [`Host::boot`].
    pub fn boot_asleep(
        store: S,
        expected: Option<NodeId>,
        fresh: NodeId,
        tunables: Tunables,
        seed: u64,
    ) -> Result<Host<S>, BootError> {
        Host::boot_as(store, expected, fresh, tunables, seed, Boot { asleep: true, node: false, feeds: &[] })
    }

    /// This machine's identity.
    #[must_use]
    pub fn id(&self) -> NodeId {
        self.me
    }

    /// The store's incarnation, read back at boot; `None` for a store that records none.
    #[must_use]
    pub fn incarnation(&self) -> Option<Incarnation> {
        self.incarnation
    }

    /// Checks the store against the incarnation recorded for this machine elsewhere (its
    /// data directory, the registry's directory); `None` recorded checks nothing.
    ///
    /// # Errors
    /// [`BootError::WrongIncarnation`] when the store is another incarnation (or none): the
    /// shell then refuses to run (exit 78), and the machine joins again as a new identity.
    pub fn check_incarnation(&self, recorded: Option<Incarnation>) -> Result<(), BootError> {
        match recorded {
            Some(recorded) if self.incarnation != Some(recorded) => {
                Err(BootError::WrongIncarnation { node: self.me, recorded, found: self.incarnation })
            }
            _ => Ok(()),
        }
    }

    #[must_use]
    pub fn stats(&self) -> HostStats {
        HostStats { dormant: self.dormancy.count as u64, ..self.stats }
    }

    /// # Panics
    /// While the store is lent out.
    #[must_use]
    pub fn store(&self) -> &S {
        self.store.as_ref().expect("the store is not lent out")
    }

    pub(super) fn store_mut(&mut self) -> &mut S {
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

    /// Record each journal's sleeps, wakes and stale answers for [`Host::take_life_events`]
    /// (a simulation's timeline and audits).
    pub fn record_lives(&mut self, record: bool) {
        self.life_events = record.then(Vec::new);
    }

    /// The journals' sleeps, wakes and stale answers since the last call, in order (empty unless
    /// recorded).
    pub fn take_life_events(&mut self) -> Vec<(JournalKey, LifeEvent)> {
        self.life_events.as_mut().map(std::mem::take).unwrap_or_default()
    }

    pub(super) fn note_life(&mut self, key: JournalKey, event: LifeEvent) {
        self.round.changed_for_readers(key);
        if let Some(events) = &mut self.life_events {
            events.push((key, event));
        }
    }

    /// Keep each round's writes in [`RoundOutput::writes`] (audits in the simulation).
    pub fn keep_writes(&mut self, keep: bool) {
        self.round.keep_writes = keep;
    }
}

/// A read answer, for shells that want to match on it.
#[must_use]
pub fn read_answer(answer: &NodeAnswer) -> Option<&ReadAnswer> {
    match answer {
        NodeAnswer::Read(r) => Some(r),
        _ => None,
    }
}

/// How a host boots: its journals dormant, whether it is a node of the cell, and the tier feeds
/// it is subscribed to before its journals are restored.
#[derive(Clone, Copy, Debug)]
struct Boot<'a> {
    asleep: bool,
    node: bool,
    feeds: &'a [NodeId],
}

/// The host's own reader of its store (see [`LogStore::reader`]).
struct StoreReader(Box<dyn crate::ports::LogRead + Send>);

impl std::fmt::Debug for StoreReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreReader")
    }
}
