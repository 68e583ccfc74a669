//! The read replica tier (DESIGN §7): learner-only machines that take reads off the voters.
//!
//! A replica machine is the node host ([`paros_node::Host`]) — the same rounds, the same
//! group commit, the same store and dormancy — joined to its tier's feed: every journal whose
//! learners name the feed is hosted here as a [`paros_core::Replica`], which votes in nothing,
//! learns from the leader's one publish per tier and from voters' catch-up answers, and serves
//! reads. What this crate adds over the node host is what only a replica needs:
//!
//! - [`boot`]: a replica's store may come back empty under its machine id (it lost its disk):
//!   it holds no promise, so it simply relearns under a new incarnation, where a voter must
//!   refuse to boot.
//! - [`State`]: `bootstrapping → catching_up → serving`, the machine's readiness. A replica
//!   refuses every read of a journal until that journal has applied through a quorum's
//!   watermark taken after it started (the gate is in the core, per journal).
//! - [`ReadRouter`]: which replica a read goes to — one of the journal's tier that is serving
//!   and least behind, skipping one that just answered `Unserved` — before the voters. Pure
//!   and clock-free: the in-cell service and the simulation make the same decision.

mod boot;
mod router;
mod state;

pub use boot::{Booted, boot};
pub use router::{ReadRouter, ReplicaSeen, RouterConfig};
pub use state::State;
