//! A machine as the world sees it: the one seam between the simulation and the code under test.
//!
//! The world never touches a [`paros_core::Voter`] directly. It hands a machine packets, ticks,
//! calls and reads, asks it to run a round against its [`SimDisk`] (write the batch, later sync
//! it, then release what the round produced), crashes it by dropping it, and boots it again from
//! its disk. [`NodeHost`] implements this over the node host itself (`paros_node::Host`): the
//! same `begin_round` / `release` / `complete_round` the daemon's shell runs, with the simulated
//! disk in place of fjall. There is no simulation-only copy of round or protocol logic.

mod node_host;

pub use node_host::{BootStore, NodeHost};

use paros_core::journal::{Command, JournalState};
use paros_core::{
    Applied, Ballot, Call, CallAnswer, CallId, JournalConfig, JournalKey, Message, NodeId, ReadAnswer, ReadId,
    ReadRequest, Slot, Tunables,
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
    pub placements: Vec<Placement>,
    pub tunables: Tunables,
    /// Ticks between the liveness pings a machine sends every peer.
    pub alive_ticks: u32,
    /// A peer silent for this many ticks is suspected down: the journals it votes in are woken.
    pub suspect_ticks: u32,
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

/// A round was started: its batch is written (not yet synced).
#[derive(Debug, Default)]
pub struct RoundStarted {
    /// Write operations in the batch that need a sync; zero means the round needs none.
    pub writes: usize,
    /// What may leave before the sync (see `paros_core::Ready`): proposer messages, heartbeats,
    /// chosen values, catch-up, and answers to calls and reads (they report chosen slots).
    pub early: RoundOutput,
}

/// What a finished round releases, now that its writes are durable.
#[derive(Debug, Default)]
pub struct RoundOutput {
    pub packets: Vec<(NodeId, Packet)>,
    pub answers: Vec<(CallId, CallAnswer)>,
    pub reads: Vec<(ReadId, ReadAnswer)>,
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

/// A machine hosting many journals, driven one input at a time and one round at a time.
///
/// Contract (persist before send): `start_round` takes every journal's pending effects, writes
/// their durable operations to the disk as one batch and releases what does not depend on them;
/// `finish_round` syncs once and only then releases the acceptor replies and applied outcomes.
/// Inputs may arrive between the two; they belong to the next round. At most one round is in
/// flight.
pub trait Host: Sized {
    /// Boots from `disk` (empty on a first start); `seed` feeds every randomized timeout.
    fn boot(spec: &MachineSpec, disk: &SimDisk, seed: u64) -> Self;

    /// A packet from machine `from`.
    fn deliver(&mut self, from: NodeId, packet: Packet);

    /// One clock tick of the machine.
    fn tick(&mut self);

    /// A Write, Truncate or SetLeader for `journal`, answered in a later round.
    fn call(&mut self, journal: JournalKey, id: CallId, call: Call);

    /// A read of `journal`, answered in a later round.
    fn read(&mut self, journal: JournalKey, id: ReadId, request: ReadRequest);

    /// True when a round now would carry something.
    fn has_work(&self) -> bool;

    /// Starts a round: takes the effects and writes the batch. `None` when there is nothing to do.
    ///
    /// # Panics
    /// When a round is already in flight.
    fn start_round(&mut self, disk: &mut SimDisk) -> Option<RoundStarted>;

    /// Syncs the round's batch (when it has writes), then releases its effects.
    ///
    /// # Errors
    /// [`StorageFault`] when the sync failed; the machine must then be dropped.
    fn finish_round(&mut self, disk: &mut SimDisk) -> Result<RoundOutput, StorageFault>;

    /// The journal's state here, if it is placed here.
    fn probe(&self, journal: &JournalKey) -> Option<JournalProbe>;

    /// The command retained at `slot` of `journal`, if any.
    fn command_at(&self, journal: &JournalKey, slot: Slot) -> Option<Command>;
}
