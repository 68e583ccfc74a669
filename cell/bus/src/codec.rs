//! The wire codec for bus messages that leave the process.
//!
//! A bus message is one version byte ([`WIRE_VERSION`]) followed by the postcard encoding of
//! the value: a `Vec<Envelope>` batch on `node.<id>` subjects, a
//! [`NodeRequest`](paros_node::rpc::NodeRequest) or [`NodeAnswer`](paros_node::rpc::NodeAnswer)
//! on `rpc.<id>`. A message with any other version byte is rejected, never guessed at.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The wire format version this build writes and the only one it reads.
pub const WIRE_VERSION: u8 = 4;

/// Why a bus message could not be decoded.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum CodecError {
    /// The message names a wire version this build does not read.
    #[error("unknown wire version {0} (this build reads version {WIRE_VERSION})")]
    Version(u8),
    /// The message is empty, truncated, has trailing bytes, or does not encode the expected
    /// type.
    #[error("malformed bus message: {0}")]
    Malformed(String),
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
/// [`CodecError::Version`] for an unknown version byte; [`CodecError::Malformed`] for empty
/// input, input that does not decode as `T`, or input with bytes left over after `T`.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    let (&version, body) = bytes.split_first().ok_or_else(|| CodecError::Malformed("empty message".to_owned()))?;
    if version != WIRE_VERSION {
        return Err(CodecError::Version(version));
    }
    let (value, rest) = postcard::take_from_bytes(body).map_err(|e| CodecError::Malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(CodecError::Malformed(format!("{} trailing bytes", rest.len())));
    }
    Ok(value)
}
