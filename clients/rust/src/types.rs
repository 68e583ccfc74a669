//! Positions and views: paros-core's own [`Seq`] and [`JournalView`], re-exported, plus the few
//! checked helpers this crate needs over them.
//!
//! Core's `Seq::plus` panics on overflow — right for a fold that only ever adds counts it
//! accepted, wrong for a client that adds counts taken from a server's answer. The free
//! functions here are the non-panicking forms the client judges answers with (core cannot be
//! extended from this crate, so they are functions, not methods).

pub use paros_core::Seq;
pub use paros_core::journal::JournalView;

/// The position `n` records after `seq`, or `None` if that would overflow.
#[must_use]
pub fn seq_checked_add(seq: Seq, n: u64) -> Option<Seq> {
    seq.0.checked_add(n).map(Seq)
}

/// The position after `seq`, or `None` at the end of the position space.
#[must_use]
pub fn seq_next(seq: Seq) -> Option<Seq> {
    seq_checked_add(seq, 1)
}

/// Whether a view could describe a journal at all (`first_seq ≤ next_seq`).
#[must_use]
pub fn view_is_consistent(view: &JournalView) -> bool {
    view.first_seq <= view.next_seq
}
