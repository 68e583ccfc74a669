//! Turning the engine's, the file system's and postcard's errors into [`StoreError`]s.

use std::path::Path;

use paros_node::ports::{StoreError, StoreOp};

/// Wraps an error of the engine (fjall) met while doing `op`.
pub(crate) fn engine<E>(op: StoreOp) -> impl Fn(E) -> StoreError + Copy
where
    E: std::error::Error + Send + Sync + 'static,
{
    move |e| StoreError::Engine { op, source: Box::new(e) }
}

/// Wraps an error of the file system on `path` met while doing `op`.
pub(crate) fn file(op: StoreOp, path: &Path) -> impl Fn(std::io::Error) -> StoreError + Copy + '_ {
    move |source| StoreError::File { op, path: path.to_path_buf(), source }
}

/// A stored key that does not parse as `what`, or a stored value under `key` that is not one.
pub(crate) fn corrupt(what: &'static str, key: &[u8]) -> StoreError {
    StoreError::Corrupt { what, key: key.to_vec(), source: None }
}
