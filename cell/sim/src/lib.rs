//! paros-sim: a seeded, single-threaded world that drives the real paros code through message
//! loss, crashes and long outages, replays any seed bit for bit, and checks named claims
//! on every run.
//!
//! - [`host`]: the seam to the code under test. A machine is a [`host::Host`]; today
//!   [`host::NodeHost`] runs the node host (`paros_node::Host`) over a simulated disk.
//! - [`disk`]: a machine's simulated disk (volatile writes, sync, crash, failed sync).
//! - [`client`]: the workload's writers, checkpointers and readers: thin drivers over
//!   `paros-client`'s sans-IO machines; and the adversarial prober.
//! - [`check`]: the claims, the client histories, the sequential journal model and the
//!   linearizability checker.
//! - [`registry`]: the registry journal in the world: its coordinator, every machine's
//!   follower, and the registry's claims.
//! - [`world`]: the event loop, the fault schedule and the audit.
//! - [`sweep`]: many seeds, in parallel, summed.

pub mod check;
pub mod client;
pub mod disk;
pub mod host;
pub mod registry;
pub mod rng;
pub mod sweep;
pub mod world;

pub use world::{RunOptions, RunReport, run_seed};
