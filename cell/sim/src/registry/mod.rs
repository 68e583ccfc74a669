//! The registry in the world: the cell's control journal (tenant `TenantId(0)`), placed on the
//! founding nodes at formation, with a coordinator on whichever node leads its consensus and a
//! follower on every machine.
//!
//! - [`plan`]: what a seed decides up front: the registry journal, the founding nodes, and the
//!   scripted stream of requests (register machines, sign up tenants, create the workload's
//!   journals under the ids the world drew, create and delete scratch journals);
//! - [`follower`]: a machine's follower: paros-registry's sans-IO `Follower` (the daemon's),
//!   its reads carried by a `ReaderCursor`;
//! - [`coordinator`]: a node's coordinator term: paros-registry's sans-IO `CoordinatorTerm`
//!   (the daemon's), its claim, reads, writes and truncations carried by paros-client's
//!   `WriterCore` and `CallPolicy` over the simulated network;
//! - [`audit`]: the registry's four claims.
//!
//! What the registry decides is decided in paros-registry, as in the daemon; these adapters
//! only hand out [`Send`]s and take answers; the world (`world/registry.rs`) carries them over
//! the network, places and removes what the followers say, and owns the clock.

pub mod audit;
pub mod coordinator;
pub mod follower;
pub mod mover;
pub mod plan;

pub use audit::{RegistryAudit, RegistryFigures};
pub use coordinator::CoordinatorActor;
pub use follower::Follower;
pub use mover::MoverActor;
pub use plan::{Plan, Script, TierChanges};

use paros_core::{Call, CallAnswer, NodeId, ReadAnswer, ReadRequest};

/// A request of a registry actor.
#[derive(Clone, Debug)]
pub enum RegRequest {
    /// A call under its `CallPolicy`'s id.
    Call(paros_core::CallId, Call),
    Read(ReadRequest),
    /// A call to another journal (the mover's `Reconfigure`).
    JournalCall(paros_core::JournalKey, paros_core::CallId, Call),
    /// A read of another journal (the mover's confirmation at one new voter).
    JournalRead(paros_core::JournalKey, ReadRequest),
}

/// What came back for a [`RegRequest`] (`None` at the actor: timed out).
#[derive(Clone, Debug)]
pub enum RegReply {
    Call(CallAnswer),
    Read(ReadAnswer),
    /// The server hosts no such journal (a registry seat moved away, or not placed yet),
    /// answered at once as the node's shell answers it over the bus.
    UnknownJournal,
}

/// One request to send: `token` names it when its answer comes back.
#[derive(Clone, Debug)]
pub struct Send {
    pub token: u64,
    pub to: NodeId,
    pub request: RegRequest,
}

/// The page bounds every registry reader asks for.
pub const PAGE_RECORDS: u32 = 16;
pub const PAGE_BYTES: u32 = 4096;
