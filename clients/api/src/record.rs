//! Records: opaque bytes, one standard-base64 string (with padding) each on the wire.

use core::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One record's bytes. May be empty (`""` on the wire).
///
/// Decoding is strict: the standard alphabet (`+`, `/`), canonical `=` padding, no whitespace,
/// no line breaks, no URL-safe alphabet and no non-zero trailing bits. Limits (`max_bytes`)
/// count [`Record::len`], the decoded bytes.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(value_type = String, pattern = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$")
)]
pub struct Record(pub Vec<u8>);

/// Why a string is not a record.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("a record is standard base64 with padding: {0}")]
pub struct InvalidRecord(String);

impl Record {
    /// Decodes one record from its wire text.
    ///
    /// # Errors
    /// [`InvalidRecord`] when `text` is not strict standard base64 with padding.
    pub fn from_base64(text: &str) -> Result<Record, InvalidRecord> {
        STANDARD.decode(text).map(Record).map_err(|e| InvalidRecord(e.to_string()))
    }

    /// The record's wire text.
    #[must_use]
    pub fn to_base64(&self) -> String {
        STANDARD.encode(&self.0)
    }

    /// The decoded length in bytes: what `max_bytes` limits count.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the record holds no bytes (allowed).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The bytes.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl From<Vec<u8>> for Record {
    fn from(b: Vec<u8>) -> Record {
        Record(b)
    }
}

impl From<&[u8]> for Record {
    fn from(b: &[u8]) -> Record {
        Record(b.to_vec())
    }
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Record({}B)", self.0.len())
    }
}

impl Serialize for Record {
    /// The wire text, encoded as it is written (no string of its own in between).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&base64::display::Base64Display::new(&self.0, &STANDARD))
    }
}

impl<'de> Deserialize<'de> for Record {
    /// Decoded from the text where it lies (no string of its own in between).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = Record;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Record, E> {
                Record::from_base64(text).map_err(E::custom)
            }
        }
        d.deserialize_str(Text)
    }
}

#[cfg(test)]
mod tests {
    use super::Record;

    #[test]
    fn every_tail_length_round_trips_through_padded_base64() {
        for (bytes, text) in
            [(&b""[..], ""), (b"f", "Zg=="), (b"fo", "Zm8="), (b"foo", "Zm9v"), (&[0xfb, 0xff][..], "+/8=")]
        {
            assert_eq!(Record::from(bytes).to_base64(), text);
            assert_eq!(Record::from_base64(text).map(|r| r.0), Ok(bytes.to_vec()));
        }
    }

    #[test]
    fn records_travel_as_json_strings_and_anything_else_is_refused() {
        let r = Record::from(&b"foo"[..]);
        assert_eq!(serde_json::to_string(&r).unwrap(), "\"Zm9v\"");
        assert_eq!(serde_json::from_str::<Record>("\"Zm9v\"").unwrap(), r);
        assert_eq!(serde_json::from_str::<Record>("\"Zm\\/v\"").unwrap(), Record(vec![0x66, 0x6f, 0xef]), "escaped");
        for bad in ["5", "null", "[]", "\"Zg\""] {
            assert!(serde_json::from_str::<Record>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn unpadded_url_safe_spaced_and_sloppy_base64_is_refused() {
        for bad in ["Zg", "Zg=", "Zm8", "-_8=", "Zm9v\n", "Zm 9v", "Zh==", "====", "Z==="] {
            assert!(Record::from_base64(bad).is_err(), "{bad:?} must be refused");
        }
    }
}
