//! The store's fjall keyspaces: [`Space`] names one, [`Spaces`] holds the open handles.

use fjall::Keyspace;

/// The keyspace a staged change goes to.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) enum Space {
    Promise,
    /// A journal's `log` keys; their entries are kept by generation in `records` (see
    /// [`crate::gens`]).
    Log,
    State,
    Anchor,
    Meta,
    /// Only a removal's mark (`x ‖ journal`, see [`crate::gens`]); `gens` rows are the applier's.
    Gens,
}

/// The open keyspaces: what the applier writes and every reader reads.
#[derive(Clone)]
pub(crate) struct Spaces {
    pub(crate) promise: Keyspace,
    pub(crate) records: Keyspace,
    pub(crate) gens: Keyspace,
    pub(crate) state: Keyspace,
    pub(crate) anchor: Keyspace,
    pub(crate) meta: Keyspace,
}

impl Spaces {
    /// The keyspace `space`'s changes go to (`log` entries to `records`).
    pub(crate) fn of(&self, space: Space) -> &Keyspace {
        match space {
            Space::Promise => &self.promise,
            Space::Log => &self.records,
            Space::Gens => &self.gens,
            Space::State => &self.state,
            Space::Anchor => &self.anchor,
            Space::Meta => &self.meta,
        }
    }
}
