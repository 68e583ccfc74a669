//! Positions and views, as this crate sees them.
//!
//! These mirror paros-core's `Seq` and the HTTP contract's view so the state machines can be
//! written now; they are meant to be replaced by paros-api's types (a rename, not a redesign)
//! once that crate exists.

use std::fmt;

/// A record's position in a journal: dense, assigned when the record is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Seq(pub u64);

impl Seq {
    /// The position `n` records further on, or `None` if that would overflow.
    pub fn checked_add(self, n: u64) -> Option<Seq> {
        self.0.checked_add(n).map(Seq)
    }

    /// The next position, or `None` at the end of the position space.
    pub fn next(self) -> Option<Seq> {
        self.checked_add(1)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a server says about a journal alongside every answer: its retained range.
///
/// `first_seq` is the first position still retained, `next_seq` the next to be assigned. The
/// leader uuid of the full view is left out until paros-api's view replaces this one: nothing in
/// this crate judges by it yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JournalView {
    /// The first retained position: everything below it was truncated.
    pub first_seq: Seq,
    /// The next position to be assigned: the journal's tail.
    pub next_seq: Seq,
}

impl JournalView {
    /// Whether the view could describe a journal at all (`first_seq ≤ next_seq`).
    pub fn is_consistent(&self) -> bool {
        self.first_seq <= self.next_seq
    }
}
