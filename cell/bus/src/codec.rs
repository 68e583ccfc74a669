//! The wire codec for bus messages that leave the process.
//!
//! A bus message is one version byte ([`WIRE_VERSION`]) followed by the postcard encoding of
//! the value: a `Vec<Envelope>` batch on `node.<id>` subjects, a
//! [`NodeRequest`](paros_node::rpc::NodeRequest) or [`NodeAnswer`](paros_node::rpc::NodeAnswer)
//! on `rpc.<id>`. A message with any other version byte is rejected, never guessed at.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The wire format version this build writes and the only one it reads.
pub const WIRE_VERSION: u8 = 6;

/// Why a bus message could not be decoded.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum CodecError {
    /// The message has no bytes at all, not even a version byte.
    #[error("empty bus message")]
    Empty,
    /// The message names a wire version this build does not read.
    #[error("unknown wire version {seen} (this build reads version {WIRE_VERSION})")]
    Version { seen: u8 },
    /// The body does not decode as the expected type: truncated, or not that type at all.
    #[error("bus message does not decode: {0}")]
    Decode(#[source] postcard::Error),
    /// The body decodes, with bytes left over after the value.
    #[error("bus message has {extra} bytes after its value")]
    TrailingBytes { extra: usize },
}

/// Encodes `value` as one bus message: the version byte, then postcard.
///
/// # Panics
/// If `value`'s `Serialize` impl cannot be written by postcard (a sequence of unknown length,
/// or a serializer error raised by the impl itself). No paros wire type does either.
#[must_use]
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    postcard::to_extend(value, vec![WIRE_VERSION]).expect("postcard serializes every paros wire type")
}

/// Decodes one bus message written by [`encode`].
///
/// # Errors
/// [`CodecError::Empty`] for empty input; [`CodecError::Version`] for an unknown version byte;
/// [`CodecError::Decode`] for a body that does not decode as `T`; [`CodecError::TrailingBytes`]
/// for a body with bytes left over after `T`.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    let (&version, body) = bytes.split_first().ok_or(CodecError::Empty)?;
    if version != WIRE_VERSION {
        return Err(CodecError::Version { seen: version });
    }
    let (value, rest) = postcard::take_from_bytes(body).map_err(CodecError::Decode)?;
    if !rest.is_empty() {
        return Err(CodecError::TrailingBytes { extra: rest.len() });
    }
    Ok(value)
}
