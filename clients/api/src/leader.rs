//! The writer's fence as it travels: a canonical lowercase hyphenated uuid, never nil.

use core::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a string is not a leader uuid the contract accepts.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum InvalidUuid {
    /// Not 36 bytes: braces, a `urn:uuid:` prefix or the simple (unhyphenated) form.
    #[error("a leader uuid is 36 characters (8-4-4-4-12), not {len}")]
    BadLength { len: usize },
    /// A hyphen is missing from, or misplaced in, the 8-4-4-4-12 groups.
    #[error("a leader uuid has hyphens at bytes 8, 13, 18 and 23; byte {at} is wrong")]
    BadHyphen { at: usize },
    /// A digit that is not lowercase hex (uppercase is refused, not folded).
    #[error("a leader uuid holds lowercase hex digits only: {found:?} at byte {at} is not one")]
    BadDigit { found: char, at: usize },
    /// `00000000-0000-0000-0000-000000000000`: the unset uuid never leads.
    #[error("the nil uuid never leads")]
    Nil,
}

/// A leader uuid: the non-zero u128 a writer fences its journal with.
///
/// Only [`LeaderUuid::parse`] (and the serde impls, which call it) turn text into one, so an
/// uppercase, braced, urn or nil spelling never gets in. Any uuid version or variant is
/// accepted: the server compares the 128 bits and nothing else.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(value_type = String, pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
)]
pub struct LeaderUuid(u128);

const HYPHENS: [usize; 4] = [8, 13, 18, 23];
const TEXT_LEN: usize = 36;

impl LeaderUuid {
    /// The uuid with bits `raw`, or `None` for zero (the nil uuid never leads).
    #[must_use]
    pub fn new(raw: u128) -> Option<LeaderUuid> {
        (raw != 0).then_some(LeaderUuid(raw))
    }

    /// The non-zero bits.
    #[must_use]
    pub fn get(self) -> u128 {
        self.0
    }

    /// Parses the canonical spelling `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, lowercase hex.
    ///
    /// # Errors
    /// [`InvalidUuid`] for any other spelling, and for the nil uuid.
    pub fn parse(raw: &str) -> Result<LeaderUuid, InvalidUuid> {
        let bytes = raw.as_bytes();
        if bytes.len() != TEXT_LEN {
            return Err(InvalidUuid::BadLength { len: raw.chars().count() });
        }
        let mut bits = 0u128;
        for (at, &b) in bytes.iter().enumerate() {
            if HYPHENS.contains(&at) {
                if b != b'-' {
                    return Err(InvalidUuid::BadHyphen { at });
                }
                continue;
            }
            let digit = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                b'-' => return Err(InvalidUuid::BadHyphen { at }),
                _ => {
                    let found = raw.get(at..).and_then(|r| r.chars().next()).unwrap_or(char::REPLACEMENT_CHARACTER);
                    return Err(InvalidUuid::BadDigit { found, at });
                }
            };
            bits = (bits << 4) | u128::from(digit);
        }
        LeaderUuid::new(bits).ok_or(InvalidUuid::Nil)
    }
}

impl TryFrom<&str> for LeaderUuid {
    type Error = InvalidUuid;
    fn try_from(raw: &str) -> Result<Self, InvalidUuid> {
        LeaderUuid::parse(raw)
    }
}

impl core::str::FromStr for LeaderUuid {
    type Err = InvalidUuid;
    fn from_str(raw: &str) -> Result<Self, InvalidUuid> {
        LeaderUuid::parse(raw)
    }
}

impl TryFrom<uuid::Uuid> for LeaderUuid {
    type Error = InvalidUuid;
    fn try_from(u: uuid::Uuid) -> Result<Self, InvalidUuid> {
        LeaderUuid::new(u.as_u128()).ok_or(InvalidUuid::Nil)
    }
}

impl From<LeaderUuid> for uuid::Uuid {
    fn from(l: LeaderUuid) -> uuid::Uuid {
        uuid::Uuid::from_u128(l.0)
    }
}

impl fmt::Display for LeaderUuid {
    /// The canonical spelling, the only one that travels.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = format!("{:032x}", self.0);
        write!(f, "{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
    }
}

impl fmt::Debug for LeaderUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LeaderUuid({self})")
    }
}

impl Serialize for LeaderUuid {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for LeaderUuid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        LeaderUuid::parse(&raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(feature = "openapi")]
impl LeaderUuid {
    /// The schema of a required `Option<LeaderUuid>` that travels as `null` when `None` (the
    /// View's `leader`, SetLeader's `old`): the derived string schema with `null` added to its
    /// type, so the field reads `{"type": ["string", "null"], "pattern": …}`.
    pub(crate) fn nullable_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::RefOr;
        use utoipa::openapi::schema::{Schema, SchemaType, Type};
        let mut schema = <LeaderUuid as utoipa::PartialSchema>::schema();
        if let RefOr::T(Schema::Object(object)) = &mut schema {
            object.schema_type = SchemaType::Array(vec![Type::String, Type::Null]);
        }
        schema
    }
}

#[cfg(test)]
mod tests {
    use super::{InvalidUuid, LeaderUuid};

    const SAMPLE: &str = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";

    #[test]
    fn the_canonical_spelling_parses_and_prints_back_identically() {
        let u = LeaderUuid::parse(SAMPLE).expect("the contract's sample uuid is canonical");
        assert_eq!(u.get(), 0x0f8b_1c2e_4a5d_4e6f_9a0b_1c2d_3e4f_5a6b);
        assert_eq!(u.to_string(), SAMPLE);
    }

    #[test]
    fn the_uuid_crate_agrees_on_the_bits_and_the_spelling() {
        let u = LeaderUuid::parse(SAMPLE).expect("canonical");
        let v: uuid::Uuid = u.into();
        assert_eq!(v.hyphenated().to_string(), SAMPLE);
        assert_eq!(LeaderUuid::try_from(v), Ok(u));
        assert_eq!(LeaderUuid::try_from(uuid::Uuid::nil()), Err(InvalidUuid::Nil));
    }

    #[test]
    fn a_hyphen_in_a_digit_place_is_a_misplaced_hyphen() {
        assert_eq!(LeaderUuid::parse("0f8b1c2-e4a5d-4e6f-9a0b-1c2d3e4f5a6b"), Err(InvalidUuid::BadHyphen { at: 7 }));
    }

    #[test]
    fn a_multibyte_character_is_refused_without_panicking() {
        let raw = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5aé";
        assert_eq!(raw.len(), 36);
        assert!(matches!(LeaderUuid::parse(raw), Err(InvalidUuid::BadDigit { at: 34, .. })));
    }
}
