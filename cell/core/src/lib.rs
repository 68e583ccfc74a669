//! paros-core: the sans-IO heart of paros.
//!
//! One [`journal::Fold`] judges chosen commands; one Multi-Paxos instance per journal chooses
//! them, written as three roles — [`Acceptor`], [`Proposer`], [`Learner`] — and two wirings:
//! [`Voter`] (all three roles, on a node) and [`Replica`] (learner only). Inputs are `step`,
//! `tick`, `propose` and `read`; output is one [`Ready`] per round, then `advance()`.
//! Nothing here does IO, reads a clock, draws randomness, or spawns a task.

mod acceptor;
mod effects;
mod learner;
mod proposer;
pub mod reads;
mod replica;
mod voter;

pub mod config;
pub mod ids;
pub mod journal;
pub mod log;
pub mod message;
pub mod object;
pub mod ready;
pub mod rng;
pub mod wire;

pub use acceptor::Acceptor;
pub use config::{Assignment, ConfigPool, JournalConfig, Tunables};
pub use ids::{
    Ballot, CallId, InvalidPosition, InvalidUuid, JournalId, JournalKey, LeaderUuid, Life, NodeId, ReadId, Seq, Slot,
    TenantId,
};
pub use learner::{ByteBound, CHOSEN_PERSIST_SLOTS, Learner, Served, Walked, Window};
pub use log::{Durable, LogEntry, WriteOp};
pub use message::{Message, Outbound};
pub use proposer::{Elected, Merged, Proposer, merge_promises};
pub use reads::Fetch;
pub use ready::{Applied, Ready, Released};
pub use replica::{Replica, ReplicaState};
pub use voter::Voter;
pub use wire::{Call, CallAnswer, Consistency, NodeAnswer, NodeRequest, ReadAnswer, ReadRequest, RpcError};
