//! The journal: what a slot's command means once it is chosen.
//!
//! Acceptors and replication treat a [`Command`] as opaque bytes; only the learner's walk, in
//! slot order, folds commands into a [`JournalState`] with [`Fold::apply`]. Every node and
//! replica runs the same fold over the same chosen commands, so every one of them judges each
//! slot to the same [`Outcome`].

mod display;
mod fold;
mod types;

pub use fold::{Anchoring, Fold, Judged, Located};
pub use types::{
    Command, Control, Digested, Entry, JournalState, JournalView, Limits, Outcome, TooLarge, VOTERS_MAX, Voters,
    VotersError, WriterMode,
};
