//! The records of a checkpoint run, and their binary format (version 1).
//!
//! A run is `Begin`, zero or more `Chunk`s, then `End`, appended as ordinary, consecutive
//! journal records. Every run record starts with the 8-byte [`MAGIC`]; every other record is an
//! application record. After the magic:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 8 | 1 | format version, `1` |
//! | 9 | 1 | kind: `1` Begin, `2` Chunk, `3` End |
//! | 10 | … | the kind's body, integers little-endian |
//!
//! Bodies: `Begin` — `covers_up_to: u64` (18 bytes in all); `Chunk` — `len: u32` then exactly
//! `len` state bytes (14 + len); `End` — `chunks: u64`, `checksum: u32`, the CRC-32C of the
//! state bytes, that is of every chunk's bytes concatenated (22 bytes in all). A record is
//! decoded whole or refused: a short record, an unknown version or kind, a chunk whose length
//! disagrees with its bytes, and trailing bytes are all refusals, never guesses.

use bytes::{BufMut, Bytes, BytesMut};
use thiserror::Error;

use crate::Seq;

/// The prefix that marks a checkpoint run record: `0xC0` then ASCII `parosck`.
///
/// `0xC0` never occurs in UTF-8, so no text record (JSON, plain text) can start with it.
/// Applications may not write records that start with it ([`check_application_record`]).
pub const MAGIC: [u8; 8] = [0xC0, b'p', b'a', b'r', b'o', b's', b'c', b'k'];

/// The format version this crate writes and reads.
pub const FORMAT_VERSION: u8 = 1;

const KIND_BEGIN: u8 = 1;
const KIND_CHUNK: u8 = 2;
const KIND_END: u8 = 3;
const HEADER_LEN: usize = MAGIC.len() + 2;
const BEGIN_LEN: usize = HEADER_LEN + 8;
/// The bytes a `Chunk` record adds to the state bytes it carries.
pub const CHUNK_HEADER_LEN: usize = HEADER_LEN + 4;
const END_LEN: usize = HEADER_LEN + 8 + 4;

/// One record of a checkpoint run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunRecord {
    /// Opens a run; the state that follows covers every application record below
    /// `covers_up_to`, which is also the position this record must sit at.
    Begin {
        /// The journal's tail when the run was planned: the state covers every record below it.
        covers_up_to: Seq,
    },
    /// A piece of the encoded state, in order.
    Chunk(Bytes),
    /// Closes a run: the commit point. `chunks` counts the run's chunks; `checksum` is the
    /// CRC-32C of their bytes concatenated.
    End {
        /// How many `Chunk` records the run holds.
        chunks: u64,
        /// The CRC-32C of the state's bytes.
        checksum: u32,
    },
}

/// Why a record that starts with [`MAGIC`] is not a run record.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RunDecodeError {
    /// The record does not start with the magic: it is an application record.
    #[error("the record does not start with the checkpoint magic")]
    NoMagic,
    /// The record ends before its fields do.
    #[error("the record holds {have} bytes where its kind needs at least {need}")]
    Short {
        /// The bytes the record needs.
        need: usize,
        /// The bytes it has.
        have: usize,
    },
    /// A version this crate does not read.
    #[error("checkpoint format version {0} is not one this library reads")]
    UnknownVersion(u8),
    /// A kind byte that names no run record.
    #[error("kind byte {0} names no checkpoint run record")]
    UnknownKind(u8),
    /// Bytes after the last field.
    #[error("the record has {extra} bytes after its last field")]
    Trailing {
        /// The bytes after the record's end.
        extra: usize,
    },
}

/// Why an application record may not be written.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecordError {
    /// The record starts with the checkpoint magic and would be read as a run record.
    #[error("an application record may not start with the checkpoint magic")]
    ReservedPrefix,
}

/// Refuses an application record that starts with [`MAGIC`].
///
/// Every writer in this library calls it before sending an application record, so a record
/// the Folder would read as part of a run never reaches the journal through it.
///
/// # Errors
/// [`RecordError::ReservedPrefix`] when the record starts with the magic.
pub fn check_application_record(record: &[u8]) -> Result<(), RecordError> {
    if is_run_record(record) { Err(RecordError::ReservedPrefix) } else { Ok(()) }
}

/// Whether a record claims to be a run record (starts with the magic), decodable or not.
pub fn is_run_record(record: &[u8]) -> bool {
    record.starts_with(&MAGIC)
}

impl RunRecord {
    /// Encodes the record in format version 1.
    ///
    /// # Panics
    /// When a chunk holds more than `u32::MAX` bytes: the Checkpointer bounds chunks far below.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(self.encoded_len());
        out.put_slice(&MAGIC);
        out.put_u8(FORMAT_VERSION);
        match self {
            RunRecord::Begin { covers_up_to } => {
                out.put_u8(KIND_BEGIN);
                out.put_u64_le(covers_up_to.0);
            }
            RunRecord::Chunk(bytes) => {
                let len = u32::try_from(bytes.len()).expect("a chunk holds at most u32::MAX bytes");
                out.put_u8(KIND_CHUNK);
                out.put_u32_le(len);
                out.put_slice(bytes);
            }
            RunRecord::End { chunks, checksum } => {
                out.put_u8(KIND_END);
                out.put_u64_le(*chunks);
                out.put_u32_le(*checksum);
            }
        }
        out.freeze()
    }

    /// The length of the record's encoding.
    pub fn encoded_len(&self) -> usize {
        match self {
            RunRecord::Begin { .. } => BEGIN_LEN,
            RunRecord::Chunk(bytes) => CHUNK_HEADER_LEN + bytes.len(),
            RunRecord::End { .. } => END_LEN,
        }
    }

    /// Decodes a run record, or says why the bytes are not one.
    ///
    /// # Errors
    /// [`RunDecodeError::NoMagic`] for an application record; any other variant for a record
    /// that carries the magic but is not a valid version-1 run record.
    pub fn decode(record: &[u8]) -> Result<RunRecord, RunDecodeError> {
        let body = record.strip_prefix(&MAGIC).ok_or(RunDecodeError::NoMagic)?;
        let short = |need: usize| RunDecodeError::Short { need, have: record.len() };
        let (&version, body) = body.split_first().ok_or(short(HEADER_LEN))?;
        if version != FORMAT_VERSION {
            return Err(RunDecodeError::UnknownVersion(version));
        }
        let (&kind, body) = body.split_first().ok_or(short(HEADER_LEN))?;
        let mut fields = Fields { rest: body };
        let decoded = match kind {
            KIND_BEGIN => RunRecord::Begin { covers_up_to: Seq(fields.u64().ok_or(short(BEGIN_LEN))?) },
            KIND_CHUNK => {
                let len = fields.u32().ok_or(short(CHUNK_HEADER_LEN))? as usize;
                let need = CHUNK_HEADER_LEN.saturating_add(len);
                RunRecord::Chunk(Bytes::copy_from_slice(fields.take(len).ok_or(short(need))?))
            }
            KIND_END => {
                let chunks = fields.u64().ok_or(short(END_LEN))?;
                let checksum = fields.u32().ok_or(short(END_LEN))?;
                RunRecord::End { chunks, checksum }
            }
            other => return Err(RunDecodeError::UnknownKind(other)),
        };
        match fields.rest.len() {
            0 => Ok(decoded),
            extra => Err(RunDecodeError::Trailing { extra }),
        }
    }
}

/// A cursor over a record's remaining bytes; every read is checked.
struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.rest.len() < n {
            return None;
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Some(head)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.take(8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes)
    }
}

/// The CRC-32C of a state's bytes, as `End` carries it.
pub fn checksum(state: &[u8]) -> u32 {
    crc32c::crc32c(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_the_documented_length() {
        let begin = RunRecord::Begin { covers_up_to: Seq(7) }.encode();
        let chunk = RunRecord::Chunk(Bytes::from_static(b"abc")).encode();
        let end = RunRecord::End { chunks: 1, checksum: 9 }.encode();
        assert_eq!(begin.len(), 18, "a Begin record is 18 bytes");
        assert_eq!(chunk.len(), 17, "a Chunk record is 14 bytes plus its state bytes");
        assert_eq!(end.len(), 22, "an End record is 22 bytes");
        assert!(begin.starts_with(&MAGIC), "a run record starts with the magic");
    }
}
