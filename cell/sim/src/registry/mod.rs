//! The registry in the world: the cell's control journal (tenant `TenantId(0)`), placed on the
//! founding nodes at formation, with a coordinator on whichever node leads its consensus and a
//! follower on every machine.
//!
//! - [`plan`]: what a seed decides up front: the registry journal, the founding nodes, and the
//!   scripted stream of requests (register machines, sign up tenants, create the workload's
//!   journals under the ids the world drew, create and delete scratch journals);
//! - [`follower`]: a machine's reader of the registry (`ReaderCursor` + `Folder<Directory>`);
//!   once caught up it says what to place and remove ([`changes`]);
//! - [`coordinator`]: paros-registry's sans-IO `Coordinator` driven by paros-client's
//!   `WriterCore` and `CallPolicy` over the simulated network: claim, catch up, write,
//!   checkpoint, truncate, stop for good once superseded;
//! - [`audit`]: the registry's four claims.
//!
//! Every actor here is sans-IO: it hands out [`Send`]s and takes answers; the world
//! (`world/registry.rs`) carries them over the network and owns the clock.

pub mod audit;
pub mod changes;
pub mod coordinator;
pub mod follower;
pub mod plan;

pub use audit::{RegistryAudit, RegistryFigures};
pub use coordinator::CoordinatorActor;
pub use follower::Follower;
pub use plan::{Plan, Script};

use paros_core::{Call, CallAnswer, NodeId, ReadAnswer, ReadRequest};

/// A request of a registry actor.
#[derive(Clone, Debug)]
pub enum RegRequest {
    Call(Call),
    Read(ReadRequest),
}

/// What came back for a [`RegRequest`] (`None` at the actor: timed out).
#[derive(Clone, Debug)]
pub enum RegReply {
    Call(CallAnswer),
    Read(ReadAnswer),
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
