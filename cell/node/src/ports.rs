//! The host's ports: storage, transport, clock. Implemented by paros-store (fjall), paros-bus
//! (in-process, NATS) and by the simulation; the round logic never knows which.

use std::path::PathBuf;
use std::sync::Arc;

use paros_core::{Ballot, Durable, JournalConfig, JournalKey, LogEntry, Message, NodeId, Slot, WriteOp};
use serde::{Deserialize, Serialize};

/// A store's incarnation: a random non-zero id recorded once, when the store first takes its
/// machine's identity. A machine id names a machine; the incarnation names the one store whose
/// promises that id made. A wiped store under a known id has none (it refuses to boot,
/// [`crate::BootError::Wiped`]); a foreign or re-formatted one has another
/// ([`crate::BootError::WrongIncarnation`]). The registry records each machine's incarnation.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct Incarnation(pub u64);

impl Incarnation {
    /// The incarnation minted from a boot's fresh `seed` for machine `node`: a non-zero
    /// mix of both (splitmix64), so two stores formatted under one id differ whenever their
    /// boots' seeds differ.
    #[must_use]
    pub fn mint(seed: u64, node: NodeId) -> Incarnation {
        let mut z = seed ^ node.0.rotate_left(32) ^ 0x9e37_79b9_7f4a_7c15;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        Incarnation(z.max(1))
    }
}

/// A storage fault. Unknown, not "not done": the process must stop and recover from disk.
///
/// One variant per reason; the engine's or the file system's own error, where there is one,
/// is the [`source`](std::error::Error::source). The message repeats the source's own after a
/// colon: the edges (the binary's `main` on a node's storage fault, the embedded cell) print the
/// message alone, and an operator must read why (a full disk) there.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The storage engine (fjall, in paros-store) failed while doing `op`.
    #[error("storage engine failed {op}: {source}")]
    Engine {
        op: StoreOp,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A file or directory of the store's own (its write-ahead log) failed while doing `op`.
    #[error("storage file {} failed {op}: {source}", path.display())]
    File {
        op: StoreOp,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// One of the store's background threads could not be started.
    #[error("storage thread {thread} could not start: {source}")]
    Spawn {
        thread: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// A value could not be encoded for the store.
    #[error("encoding {what} for the store failed: {source}")]
    Encode {
        what: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Bytes read back from the store are not what their place says they hold: a key that
    /// does not parse, or a value that does not decode (`source`: the decoder's error).
    #[error("stored {what} under key {key:02x?} is corrupt{}", Cause(.source.as_deref()))]
    Corrupt {
        what: &'static str,
        key: Vec<u8>,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A file of the store's write-ahead log is damaged in a way a crash cannot explain.
    #[error("write-ahead log file {} is corrupt: {damage}", path.display())]
    CorruptLog { path: PathBuf, damage: LogDamage },
    /// A key, a value or a whole round is larger than the store can frame.
    #[error("{what} of {bytes} bytes is over the bound of {bytes_max} bytes")]
    TooLarge { what: &'static str, bytes: usize, bytes_max: u64 },
    /// A log read whose bounds do not lie in one journal (every read of the log names one).
    #[error("a log read from {lo:02x?} to {hi:02x?} does not lie in one journal")]
    RangeAcrossJournals { lo: Vec<u8>, hi: Vec<u8> },
    /// The store records another machine identity: the promises on disk were made under it.
    #[error("store already belongs to node {recorded}, refusing to record {offered}")]
    IdentityTaken { recorded: NodeId, offered: NodeId },
    /// The store records another incarnation: it was formatted once, and only once.
    #[error("store already has incarnation {recorded:?}, refusing to record {offered:?}")]
    IncarnationTaken { recorded: Incarnation, offered: Incarnation },
    /// The store's format marker names a layout this build does not read.
    #[error("storage format {found} is not the supported {supported}")]
    Format { found: u32, supported: u32 },
    /// An option the store was opened with is below the least the engine accepts.
    #[error("store option {option} is {value}, below its minimum {min}")]
    OptionTooSmall { option: &'static str, value: u64, min: u64 },
    /// The store's background applier failed earlier (`source`: how); every write since fails.
    #[error("the store stopped applying its write-ahead log: {0}")]
    Stopped(#[source] Arc<StoreError>),
}

/// `: <the error>` after a message, when there is an error; nothing when there is none.
struct Cause<'e>(Option<&'e (dyn std::error::Error + Send + Sync)>);

impl std::fmt::Display for Cause<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(e) => write!(f, ": {e}"),
            None => Ok(()),
        }
    }
}

/// What a store was doing when its engine or one of its files failed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum StoreOp {
    /// Opening the database, a keyspace or a file.
    Open,
    Read,
    /// Writing, renaming or removing (not yet durable).
    Write,
    /// Making what was written durable (fdatasync).
    Sync,
}

impl std::fmt::Display for StoreOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StoreOp::Open => "opening",
            StoreOp::Read => "reading",
            StoreOp::Write => "writing",
            StoreOp::Sync => "syncing",
        })
    }
}

/// How a write-ahead log file is damaged (a record cut short by a crash is no damage).
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum LogDamage {
    /// A record whose checksum holds does not parse.
    #[error("the record at byte {offset} does not parse")]
    Record { offset: usize },
    /// A segment that is not the newest ends without its seal.
    #[error("a closed segment ends without its seal")]
    Unsealed,
    /// A file in the log's directory that is neither a segment nor a spare.
    #[error("neither a segment nor a spare")]
    Stray,
}

/// A store's background work and its size on disk, sampled while it runs (paros-store's
/// `StoreProbe`); a dashboard shows it beside the node's counters.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct StoreActivity {
    /// Compactions finished since the database opened (every keyspace).
    pub compactions_completed: u64,
    /// Time spent compacting since the database opened, in microseconds.
    pub compacting_us: u64,
    /// Compactions running now.
    pub compactions_active: u64,
    /// Sealed memtables waiting to be flushed now.
    pub flushes_outstanding: u64,
    /// Tables holding the log (every level) and at level 0.
    pub log_tables: u64,
    pub log_l0_tables: u64,
    /// The database's own journal (write-ahead log) files.
    pub journal_files: u64,
    /// Writes that waited because the store's limit of synced-but-unapplied bytes was
    /// reached, since the store opened; and their wait in all, in microseconds. The one way
    /// the store's background work holds up a round.
    pub room_waits: u64,
    pub room_waited_us: u64,
    /// Bytes the store holds on disk now: the blocks allocated to every file in its directory
    /// (tables, the database's journal, the store's own write-ahead segments and their spares),
    /// as `du` counts them. Files sized ahead of their contents count only what is written.
    pub disk_bytes: u64,
}

/// Everything one journal holds on disk, as read back at boot.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct StoredJournal {
    pub key: JournalKey,
    pub config: JournalConfig,
    pub durable: Durable,
}

/// A change of which journals live on a machine, persisted with a round.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Placement {
    /// The journal, not here before, lives here with this configuration, and its acceptor
    /// starts promised to the ballot (written with the configuration, in the same atomic
    /// change: [`Ballot::ZERO`], or the floor of the epoch this machine's seat begins in; see
    /// [`paros_core::Assignment`]).
    Put(JournalKey, JournalConfig, Ballot),
    /// The journal no longer lives here: its data goes.
    Remove(JournalKey),
}

/// Reads a machine's retained log entries: what a journal evicted from memory (catch-up answers
/// and read pages below its window, see [`paros_core::Fetch`]).
pub trait LogRead {
    /// Up to `slots_max` retained entries of `journal` from `from` on, in slot order: never
    /// below its floor (the first may lie past `from` when `from` was truncated), never an
    /// entry of a journal not placed here.
    ///
    /// # Errors
    /// A read fault ([`StoreError::Engine`]) or stored bytes that do not decode
    /// ([`StoreError::Corrupt`]).
    fn read_range(&self, journal: &JournalKey, from: Slot, slots_max: u32)
    -> Result<Vec<(Slot, LogEntry)>, StoreError>;

    /// What boot would read for `journal` (promise, state row, anchors, the entries from
    /// [`Durable::boot_start`]): how a dormant journal comes back. `None` for a journal with
    /// nothing stored. Called only for a journal whose writes are all synced.
    ///
    /// # Errors
    /// A read fault ([`StoreError::Engine`]) or stored bytes that do not decode
    /// ([`StoreError::Corrupt`]).
    fn load_journal(&self, journal: &JournalKey) -> Result<Option<Durable>, StoreError>;
}

impl Placement {
    /// The journal placed or removed.
    #[must_use]
    pub fn key(&self) -> &JournalKey {
        match self {
            Placement::Put(k, ..) | Placement::Remove(k) => k,
        }
    }
}

/// A machine's durable storage for every journal placed on it.
///
/// The host is the single committer: each round it calls `write` once with every journal's
/// writes (one atomic batch), then `sync` once, and only then lets messages leave.
pub trait LogStore: LogRead + Send + 'static {
    /// A read handle usable from another thread while the store itself is lent out for a
    /// round's write and sync. It sees at least every write synced before it reads.
    type Reader: LogRead + Send + 'static;

    fn reader(&self) -> Self::Reader;

    /// The machine identity recorded at first start, if any.
    ///
    /// # Errors
    /// A read fault ([`StoreError::Engine`]) or an identity that does not decode
    /// ([`StoreError::Corrupt`]).
    fn identity(&self) -> Result<Option<NodeId>, StoreError>;

    /// Records the machine identity (first start only) and makes it durable.
    ///
    /// # Errors
    /// Any storage fault.
    fn set_identity(&mut self, node: NodeId) -> Result<(), StoreError>;

    /// The store's incarnation, recorded once with its first identity (or, for a store an
    /// older build formatted, at its first boot by this one): a wiped or re-formatted store
    /// reads back another one, or none. `None` by default: a store that records none (the
    /// simulation's disk, for now).
    ///
    /// # Errors
    /// A read fault or an incarnation that does not decode.
    fn incarnation(&self) -> Result<Option<Incarnation>, StoreError> {
        Ok(None)
    }

    /// Records the store's incarnation (once) and makes it durable. The default records
    /// nothing (see [`LogStore::incarnation`]).
    ///
    /// # Errors
    /// Any storage fault; [`StoreError::IncarnationTaken`] for a store that records another.
    fn set_incarnation(&mut self, incarnation: Incarnation) -> Result<(), StoreError> {
        let _ = incarnation;
        Ok(())
    }

    /// Places and removes journals: a `Put` records a journal's configuration (and its
    /// starting promise, when not [`Ballot::ZERO`]), a `Remove`
    /// deletes its configuration and every row it holds (promise, state, log). Applied in
    /// order, before the round's [`LogStore::write`], and like it not durable until
    /// [`LogStore::sync`]: placing ten thousand journals costs one sync, not ten thousand.
    ///
    /// # Errors
    /// Any storage fault; the node then stops and reports it to its owner (`shell::NodeFault`).
    fn place(&mut self, placements: &[Placement]) -> Result<(), StoreError>;

    /// Writes one atomic batch of many journals' writes. Not durable until [`LogStore::sync`].
    ///
    /// # Errors
    /// Any storage fault; the node then stops and reports it to its owner (`shell::NodeFault`).
    fn write(&mut self, batch: &[(JournalKey, Vec<WriteOp>)]) -> Result<(), StoreError>;

    /// Makes every write so far durable (fdatasync).
    ///
    /// # Errors
    /// Any storage fault; the node then stops and reports it to its owner (`shell::NodeFault`).
    fn sync(&mut self) -> Result<(), StoreError>;

    /// Reads back every journal placed here: config, promise, floor, sealed state, chosen
    /// index, anchors, and the entries from where boot resumes the fold
    /// ([`Durable::boot_start`]) on — not the retained log below it.
    ///
    /// # Errors
    /// Any storage fault.
    fn load(&self) -> Result<Vec<StoredJournal>, StoreError>;

    /// The configuration of every journal placed here, without its state (a host that boots
    /// its journals dormant reads nothing else).
    ///
    /// # Errors
    /// Any storage fault.
    fn load_configs(&self) -> Result<Vec<(JournalKey, JournalConfig)>, StoreError> {
        Ok(self.load()?.into_iter().map(|j| (j.key, j.config)).collect())
    }
}

/// One protocol message about one journal, as it travels between machines.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Envelope {
    pub journal: JournalKey,
    pub from: NodeId,
    pub message: Message,
}

/// Sends protocol messages. Lossy: may drop, delay, reorder or duplicate (Paxos tolerates it).
/// Many envelopes for one destination travel as one bus message.
pub trait Transport: Send + 'static {
    fn send(&mut self, to: NodeId, envelopes: Vec<Envelope>);
}

/// The machine's clock: milliseconds since an arbitrary start, never decreasing. The shell
/// reads it before each step and hands the reading to [`Host::on_clock`](crate::Host::on_clock),
/// which turns it into ticks; the simulation implements it with simulated time.
pub trait Clock: Send + 'static {
    fn now_ms(&self) -> u64;
}

/// The process's monotonic clock.
#[derive(Clone, Copy, Debug)]
pub struct MonotonicClock {
    start: std::time::Instant,
}

impl MonotonicClock {
    #[must_use]
    pub fn new() -> MonotonicClock {
        MonotonicClock { start: std::time::Instant::now() }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock::new()
    }
}

impl Clock for MonotonicClock {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}
