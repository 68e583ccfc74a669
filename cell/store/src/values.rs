//! The postcard values the store keeps, and encoding and decoding them.

use paros_core::journal::{Command, JournalState};
use paros_core::{Ballot, LeaderUuid, Seq, Slot};
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

/// A `state` row as format 4 and earlier wrote it, before the sealed state held the journal's
/// configuration.
#[derive(Deserialize)]
struct StateRowV4 {
    floor: Slot,
    sealed: JournalStateV4,
    chosen_up_to: Slot,
}

/// A [`JournalState`] as format 4 and earlier wrote it (no `epoch`, no `voters`): every journal
/// was still in its founding configuration then.
#[derive(Deserialize)]
struct JournalStateV4 {
    leader: Option<LeaderUuid>,
    term: u64,
    next_seq: Seq,
    first_seq: Seq,
}

impl From<JournalStateV4> for JournalState {
    fn from(old: JournalStateV4) -> JournalState {
        let JournalStateV4 { leader, term, next_seq, first_seq } = old;
        JournalState { leader, term, next_seq, first_seq, epoch: 0, voters: None }
    }
}

/// `T` decoded from exactly all of `bytes`, if they are one.
fn exactly<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Option<T> {
    match postcard::take_from_bytes::<T>(bytes) {
        Ok((value, [])) => Some(value),
        _ => None,
    }
}

/// Bytes that are no `what` of either shape.
fn neither<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &'static str, key: &[u8]) -> StoreError {
    match postcard::take_from_bytes::<T>(bytes) {
        Err(e) => StoreError::Corrupt { what, key: key.to_vec(), source: Some(Box::new(e)) },
        // It decodes, with bytes left over.
        Ok(_) => StoreError::Corrupt { what, key: key.to_vec(), source: None },
    }
}

/// A `state` row in this format's shape, or in format 4's (a store upgraded from format 4
/// keeps such rows until the journal's row is written again). Each shape is taken only when
/// it spans the bytes exactly: a row of one shape always leaves bytes over, or runs out, when
/// read as the other.
///
/// # Errors
/// [`StoreError::Corrupt`] when the bytes are neither.
pub(crate) fn decode_state_row(bytes: &[u8], key: &[u8]) -> Result<StateRow, StoreError> {
    if let Some(row) = exactly::<StateRow>(bytes) {
        return Ok(row);
    }
    match exactly::<StateRowV4>(bytes) {
        Some(old) => Ok(StateRow { floor: old.floor, sealed: old.sealed.into(), chosen_up_to: old.chosen_up_to }),
        None => Err(neither::<StateRow>(bytes, "state row", key)),
    }
}

/// An anchor's state in this format's shape or in format 4's (see [`decode_state_row`]).
///
/// # Errors
/// [`StoreError::Corrupt`] when the bytes are neither.
pub(crate) fn decode_anchor(bytes: &[u8], key: &[u8]) -> Result<JournalState, StoreError> {
    if let Some(state) = exactly::<JournalState>(bytes) {
        return Ok(state);
    }
    match exactly::<JournalStateV4>(bytes) {
        Some(old) => Ok(old.into()),
        None => Err(neither::<JournalState>(bytes, "anchor", key)),
    }
}

#[cfg(test)]
mod tests {
    use paros_core::NodeId;
    use paros_core::journal::Voters;
    use serde::Serialize;

    use super::*;

    /// Format 4's shapes, as that build wrote them.
    #[derive(Serialize)]
    struct OldState {
        leader: Option<LeaderUuid>,
        term: u64,
        next_seq: Seq,
        first_seq: Seq,
    }

    #[derive(Serialize)]
    struct OldRow {
        floor: Slot,
        sealed: OldState,
        chosen_up_to: Slot,
    }

    fn reconfigured() -> JournalState {
        let voters = Voters::new(&[NodeId(4), NodeId(2), NodeId(9)]).unwrap();
        JournalState {
            leader: LeaderUuid::new(0x5eed),
            term: 3,
            next_seq: Seq(700),
            first_seq: Seq(12),
            epoch: 2,
            voters: Some(voters),
        }
    }

    #[test]
    fn format_4_rows_read_as_the_founding_configuration_and_this_format_reads_back_exactly() {
        let old = OldState { leader: LeaderUuid::new(0xab), term: 1, next_seq: Seq(90), first_seq: Seq(40) };
        let expected =
            JournalState { leader: old.leader, term: 1, next_seq: Seq(90), first_seq: Seq(40), epoch: 0, voters: None };
        let anchor = postcard::to_allocvec(&old).unwrap();
        assert_eq!(decode_anchor(&anchor, b"k").unwrap(), expected);
        let row = postcard::to_allocvec(&OldRow { floor: Slot(5), sealed: old, chosen_up_to: Slot(300) }).unwrap();
        let read = decode_state_row(&row, b"k").unwrap();
        assert_eq!(read, StateRow { floor: Slot(5), sealed: expected, chosen_up_to: Slot(300) });

        // This format's rows, with and without a decided configuration, are never taken for
        // format 4's.
        for sealed in [expected, reconfigured()] {
            let row = StateRow { floor: Slot(5), sealed, chosen_up_to: Slot(300) };
            assert_eq!(decode_state_row(&encode(&row, "row").unwrap(), b"k").unwrap(), row);
            assert_eq!(decode_anchor(&encode(&sealed, "anchor").unwrap(), b"k").unwrap(), sealed);
        }
    }

    #[test]
    fn bytes_of_neither_shape_are_corrupt_and_a_bad_voter_list_is_refused() {
        let mut bytes = encode(&reconfigured(), "anchor").unwrap();
        bytes.push(0);
        assert!(matches!(decode_anchor(&bytes, b"k"), Err(StoreError::Corrupt { .. })), "a trailing byte");
        assert!(matches!(decode_state_row(&[0xff; 3], b"k"), Err(StoreError::Corrupt { .. })));
        // The voters' list is checked as it decodes: a repeated voter is no configuration.
        let mut repeated = reconfigured();
        repeated.voters = None;
        let mut bytes = encode(&repeated, "anchor").unwrap();
        bytes.pop();
        bytes.extend([1, 2, 7, 7]); // Some, two voters, both machine 7
        assert!(matches!(decode_anchor(&bytes, b"k"), Err(StoreError::Corrupt { .. })));
    }
}
