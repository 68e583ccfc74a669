//! A machine as the world sees it: the one seam between the simulation and the code under test.
//!
//! The world never touches a [`paros_core::Voter`] directly. It hands a machine packets, ticks,
//! calls and reads, asks it to take a step of its event loop (a step may write a round's batch
//! to its [`SimDisk`]; the world syncs the disk later and steps again), crashes it by dropping
//! it, and boots it again from its disk. [`NodeHost`] implements this over `paros_node::Pump`,
//! the event loop the daemon's shell runs, on the shell's schedule, around the node host
//! itself, with the simulated disk as its `LogStore` in place of fjall. There is no
//! simulation-only copy of loop, round or protocol logic.

mod node_host;

use std::collections::BTreeMap;

pub use node_host::NodeHost;

use paros_core::journal::{Command, JournalState};
use paros_core::{
    Applied, Ballot, Call, CallAnswer, CallId, JournalConfig, JournalKey, Message, NodeId, ReadAnswer, ReadRequest,
    Slot, Tunables,
};

use crate::disk::SimDisk;

/// Whether a machine votes or only learns.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum MachineRole {
    Voter,
    Replica,
}

/// One journal placed on a machine.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Placement {
    pub key: JournalKey,
    pub config: JournalConfig,
}

/// Everything a machine is told at boot besides its disk.
#[derive(Clone, Debug)]
pub struct MachineSpec {
    pub id: NodeId,
    pub role: MachineRole,
    /// The replica tiers' feeds this machine subscribes to (a replica's one tier; none on a
    /// voter): the network hands it a copy of everything sent to them.
    pub feeds: Vec<NodeId>,
    /// The journals the world expects this machine to host once it follows the registry (what
    /// the audits probe and the finale judges).
    pub placements: Vec<Placement>,
    /// The journals placed at boot by the cell's formation (the registry journal): everything
    /// else comes from the disk (what was durably placed) and from following the registry.
    pub formation: Vec<Placement>,
    pub tunables: Tunables,
    /// Ticks between the liveness pings a machine sends every peer.
    pub alive_ticks: u32,
    /// A peer silent for this many ticks is suspected down: the journals it votes in are woken.
    pub suspect_ticks: u32,
    /// Ticks of quiet before a journal goes dormant (`None`: never).
    pub dormant_after_ticks: Option<u64>,
    /// The machine keeps a read cache ([`paros_node::ReadCache`]): reads it holds are answered
    /// on arrival, without a step.
    pub read_cache: bool,
    /// The machine's shell knows its identity from an earlier boot (as a daemon's data
    /// directory or configuration records it): a node then boots asserting it, and a store
    /// wiped under it refuses to boot (issue 34, rule 8). False until the first boot formats it.
    pub asserts_identity: bool,
}

/// A protocol message about one journal.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Envelope {
    pub journal: JournalKey,
    pub message: Message,
}

/// What travels between machines.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Packet {
    Protocol(Envelope),
    /// Machine-level liveness: "I am up". Lets a host wake quiesced journals when a peer dies.
    Alive,
}

/// What one step of a machine's event loop did.
#[derive(Debug, Default)]
pub struct Stepped {
    /// The step began a round and wrote its batch to the disk (not yet synced): the number of
    /// its write operations that need a sync (zero: it needs none).
    pub persisting: Option<usize>,
    /// True when the step completed a round (its applied slots are in `output`).
    pub completed: bool,
    /// What may leave now (see `paros_core::Ready` and `paros_node::Pump`).
    pub output: RoundOutput,
    /// Fetches of entries evicted from memory the step served from the disk, and dormant
    /// journals it woke.
    pub fetches: u64,
    pub wakes: u64,
    /// Journals that went dormant, woke, or dropped an answer to an earlier life in the step.
    pub lives: Vec<(JournalKey, paros_node::LifeEvent)>,
    /// The step handed out store reads (entries evicted from memory, wakes of dormant
    /// journals) to the machine's read workers: the world runs them a moment later
    /// ([`Host::run_reads`]).
    pub reading: bool,
}

/// What a step releases: messages, answers, and the slots its completed rounds applied.
#[derive(Debug, Default)]
pub struct RoundOutput {
    pub packets: Vec<(NodeId, Packet)>,
    /// Answers by the world's request number they answer.
    pub answers: Vec<(u64, CallAnswer)>,
    pub reads: Vec<(u64, ReadAnswer)>,
    /// Requests for a journal the machine does not host, answered `UnknownJournal` (a seat
    /// moved away, or not placed yet), by the world's request number.
    pub unknown: Vec<u64>,
    pub applied: Vec<(JournalKey, Applied)>,
}

/// The round's sync failed: the process stops and recovers from disk.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct StorageFault;

/// One journal's protocol state on one machine, for audits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct JournalProbe {
    pub state: JournalState,
    pub chosen_up_to: Slot,
    pub floor: Slot,
    /// The acceptor's promise (`None` on a replica).
    pub promised: Option<Ballot>,
    pub leader: bool,
    /// The node this one believes leads the journal.
    pub leader_hint: Option<NodeId>,
}

/// A machine hosting many journals, driven one input and one step at a time.
///
/// Contract (persist before send): a step that begins a round writes its batch to the disk and
/// releases only what does not depend on it; once the world has synced the disk, the next step
/// (`synced: true`) completes the round and releases the acceptor replies and applied outcomes.
/// Inputs may arrive in between; they belong to the next round. At most one round is in flight.
pub trait Host: Sized {
    /// Boots from `disk` (empty on a first start); `seed` feeds every randomized timeout.
    ///
    /// # Errors
    /// As the node's boot: a node asserting its identity ([`MachineSpec::asserts_identity`])
    /// on a wiped disk refuses to boot ([`paros_node::BootError::Wiped`]).
    fn boot(spec: &MachineSpec, disk: &SimDisk, seed: u64) -> Result<Self, paros_node::BootError>;

    /// The incarnation the machine's store was formatted with.
    fn incarnation(&self) -> Option<paros_node::Incarnation>;

    /// A packet from machine `from`.
    fn deliver(&mut self, from: NodeId, packet: Packet);

    /// One tick period of the machine's clock passed (the next step reads it).
    fn tick(&mut self);

    /// A Write, Truncate or SetLeader for `journal`, answered in a later step.
    fn call(&mut self, journal: JournalKey, req: u64, id: CallId, call: Call);

    /// A read of `journal`, answered in a later step.
    fn read(&mut self, journal: JournalKey, req: u64, request: ReadRequest);

    /// The answer to a read of `journal` from the machine's read cache, at once, with how far
    /// the journal was applied where it answered from; `None` when the read goes to
    /// [`Host::read`].
    fn read_locally(&self, journal: &JournalKey, request: &ReadRequest) -> Option<(ReadAnswer, Slot)>;

    /// True when a step now would do something.
    fn wants_step(&self) -> bool;

    /// True while a round's batch waits for its sync.
    fn is_syncing(&self) -> bool;

    /// One step of the event loop; `synced` says the round in flight is now durable on its disk.
    ///
    /// # Panics
    /// When `synced` is passed with no round in flight.
    fn step(&mut self, synced: bool) -> Stepped;

    /// The machine's read workers run the oldest batch of store reads a step handed out
    /// ([`Stepped::reading`]) against its disk, as it is now; their answers are released by
    /// the next step.
    fn run_reads(&mut self);

    /// The journal's state here, if it is placed here.
    fn probe(&self, disk: &crate::disk::SimDisk, journal: &JournalKey) -> Option<JournalProbe>;

    /// The command retained at `slot` of `journal`, if any.
    fn command_at(&self, disk: &crate::disk::SimDisk, journal: &JournalKey, slot: Slot) -> Option<Command>;

    /// Every journal hosted here, with its configuration.
    fn hosted(&self) -> BTreeMap<JournalKey, JournalConfig>;

    /// Places a journal here as the registry assigns it (it rides the next round's sync);
    /// false when the host refused it.
    fn place(&mut self, assignment: paros_core::Assignment) -> bool;

    /// Removes `journal` from here (its removal rides the next round's sync); its waiting calls
    /// and reads get no answer.
    fn remove(&mut self, journal: &JournalKey, epoch: u64) -> bool;

    /// True when `journal` is placed here (awake or dormant).
    fn hosts(&self, journal: &JournalKey) -> bool;

    /// Asks this machine's voter of `journal` to campaign now (the node's control request).
    fn campaign(&mut self, journal: &JournalKey);

    /// Answers to requests of an earlier life of their journal dropped here since boot.
    fn stale_answers(&self) -> u64;

    /// How the replica journals hosted here stand (all zero on a voter): what a read router
    /// is told of a replica machine.
    fn replica_states(&self) -> paros_node::host::ReplicaStates;
}
