//! The application state a [`Folder`](crate::Folder) folds and a checkpoint run carries.

use crate::Seq;

/// An application state that can be folded from records and checkpointed into a journal.
///
/// The caller owes three properties, on which verification rests:
/// - `apply` is deterministic: the same records in the same order give the same state;
/// - `checkpoint` is a pure function of the state, so a state folded from the whole history
///   and one restored from a checkpoint encode to the same bytes;
/// - `restore(&s.checkpoint())` gives a state equal to `s`.
pub trait Checkpointable: Sized {
    /// Why some bytes are not a state of this type.
    type RestoreError: std::fmt::Display;

    /// Folds the application record at `position` into the state.
    fn apply(&mut self, position: Seq, record: &[u8]);

    /// Encodes the whole state.
    fn checkpoint(&self) -> Vec<u8>;

    /// Decodes a state from bytes a `checkpoint` produced.
    ///
    /// # Errors
    /// When the bytes are not an encoded state; a folder then refuses the run.
    fn restore(bytes: &[u8]) -> Result<Self, Self::RestoreError>;
}
