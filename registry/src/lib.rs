//! paros-registry: the cell's control journal.
//!
//! The registry is an ordinary single-writer paros journal. This crate is what
//! its records mean and who writes them:
//! - [`command`]: the records — one [`Command`] and its [`RequestId`] each, versioned postcard,
//!   decoded as untrusted input;
//! - [`Directory`]: the fold — machines, replica tiers, tenants, signing keys, journals and
//!   the verdict of every recent request; every command is judged there and refused in place
//!   when invalid; it is [`paros_client::Checkpointable`], so every reader folds it with the same
//!   [`paros_client::Folder`] and meets checkpoints the same way;
//! - [`placement`]: which nodes vote for a new journal; [`planner`]: which seats move next
//!   (drain, heal, rebalance), sans-IO;
//! - [`Coordinator`]: the registry's writer logic, sans-IO — requests in, records to append
//!   out, answers read from the fold, checkpoint-and-truncate through
//!   [`paros_client::Checkpointer`];
//! - [`term`]: one coordinator term, sans-IO (claim, catch up, serve, end) and the restart
//!   policy; [`follower`]: the follower every node runs, sans-IO (fold, then place and remove);
//! - [`daemon`]: the async loops that carry out their effects; the simulation carries out the
//!   same effects in simulated time.

pub mod command;
pub mod coordinator;
pub mod daemon;
pub mod directory;
pub mod follow;
pub mod follower;
pub mod mover;
pub mod names;
pub mod placement;
pub mod planner;
mod seq_serde;
pub mod term;
pub mod verdict;

pub use command::{
    COMMAND_VERSION, CellId, Command, DecodeError, Epoch, Incarnation, KeyScope, Limits, Member, Quotas, Record,
    RequestId, Role, Standing, TenantStatus,
};
pub use coordinator::{Answer, Coordinator, CoordinatorConfig, CoordinatorError, Op, Reply, Request, Stats, Submitted};
pub use directory::{
    CELL_TENANT, Cell, Directory, Journal, Judged, Machine, RestoreError, SeatMove, SharedDirectory, SigningKey,
    Tenant, Tier,
};
pub use names::{BusAddress, JournalName, KeyId, NameError, TenantName, TierName, TokenId, Zone};
pub use placement::{Candidate, PlacementError, place};
pub use planner::{PlanConfig, PlannedMove, Seen, Why, plan};
pub use verdict::{Accepted, LimitField, MoveRefusal, Refusal, Verdict, VoterRefusal};
