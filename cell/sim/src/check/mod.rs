//! What a run is judged by: the claims, the client histories, the sequential journal model and
//! the linearizability checker.

pub mod claims;
pub mod gaps;
pub mod history;
pub mod linearizability;
pub mod model;
pub mod multi;

pub use claims::{Claim, Claims, Count, MUST_REACH_SEEDS_MIN};
pub use history::{HistoryHeader, HistoryOp, JournalHeader, OpInput, OpOutput, Probe, ProbeCounts, ReadReport};
pub use linearizability::Verdict;
pub use model::{JournalModel, PageBounds};
