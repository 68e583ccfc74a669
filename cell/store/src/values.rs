//! The postcard values the store keeps, and encoding and decoding them.

use paros_core::journal::{Command, JournalState};
use paros_core::{Ballot, Slot};
use paros_node::ports::StoreError;
use serde::{Deserialize, Serialize};

/// One journal's row in `state`: what truncation and learning leave behind.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub(crate) struct StateRow {
    pub(crate) floor: Slot,
    pub(crate) sealed: JournalState,
    pub(crate) chosen_up_to: Slot,
}

/// Serializes exactly like [`paros_core::LogEntry`] (same fields, same order) without cloning
/// the command.
#[derive(Serialize)]
struct LogEntryRef<'a> {
    ballot: Option<Ballot>,
    command: &'a Command,
}

/// `value` as stored, `what` naming it should encoding fail.
pub(crate) fn encode<T: Serialize + ?Sized>(value: &T, what: &'static str) -> Result<Vec<u8>, StoreError> {
    encode_into(value, Vec::new(), what)
}

fn encode_into<T: Serialize + ?Sized>(value: &T, out: Vec<u8>, what: &'static str) -> Result<Vec<u8>, StoreError> {
    postcard::to_extend(value, out).map_err(|e| StoreError::Encode { what, source: Box::new(e) })
}

/// A log value, encoded into one allocation of about its final size.
pub(crate) fn encode_log_entry(ballot: Option<Ballot>, command: &Command) -> Result<Vec<u8>, StoreError> {
    // Fixed fields (ballot, leader, seq, lengths) stay well under 64 bytes; each record adds
    // its bytes and a length prefix of at most 10.
    let records = command.entry().map_or(0, |e| e.records.iter().map(|r| r.len() + 10).sum::<usize>());
    encode_into(&LogEntryRef { ballot, command }, Vec::with_capacity(64 + records), "log entry")
}

/// The `what` stored under `key`, decoded from `bytes`.
///
/// # Errors
/// [`StoreError::Corrupt`] when `bytes` do not decode as a `T`.
pub(crate) fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &'static str, key: &[u8]) -> Result<T, StoreError> {
    postcard::from_bytes(bytes).map_err(|e| StoreError::Corrupt { what, key: key.to_vec(), source: Some(Box::new(e)) })
}
