//! Tenant and journal names: checked by hand against the contract's patterns, the only way in.

use core::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a string is not a valid name.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum InvalidName {
    /// The empty string names nothing.
    #[error("a name is at least one character")]
    Empty,
    /// Longer than the pattern allows.
    #[error("a name is at most {max} bytes, this one is {len}")]
    TooLong { len: usize, max: usize },
    /// The first character must be a letter or digit of the allowed set.
    #[error("a name starts with {allowed}, not {found:?}")]
    BadFirst { found: char, allowed: &'static str },
    /// A later character is outside the allowed set.
    #[error("a name holds only {allowed}: {found:?} at byte {at} is not one of them")]
    BadChar { found: char, at: usize, allowed: &'static str },
}

/// The pattern one kind of name follows: `^[first][rest]{0,len_max-1}$`.
struct Pattern {
    len_max: usize,
    first: fn(u8) -> bool,
    first_allowed: &'static str,
    rest: fn(u8) -> bool,
    rest_allowed: &'static str,
}

impl Pattern {
    fn check(&self, raw: &str) -> Result<(), InvalidName> {
        let bytes = raw.as_bytes();
        let Some(&head) = bytes.first() else { return Err(InvalidName::Empty) };
        if !(self.first)(head) {
            let found = raw.chars().next().expect("a non-empty string has a first char");
            return Err(InvalidName::BadFirst { found, allowed: self.first_allowed });
        }
        // Characters before length, so `"-"`-style mistakes in long names are named precisely.
        if let Some((at, found)) = raw.char_indices().skip(1).find(|&(_, c)| !c.is_ascii() || !(self.rest)(c as u8)) {
            return Err(InvalidName::BadChar { found, at, allowed: self.rest_allowed });
        }
        if bytes.len() > self.len_max {
            return Err(InvalidName::TooLong { len: bytes.len(), max: self.len_max });
        }
        Ok(())
    }
}

const TENANT: Pattern = Pattern {
    len_max: TenantName::LEN_MAX,
    first: |b| b.is_ascii_lowercase() || b.is_ascii_digit(),
    first_allowed: "[a-z0-9]",
    rest: |b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-',
    rest_allowed: "[a-z0-9-]",
};

const JOURNAL: Pattern = Pattern {
    len_max: JournalName::LEN_MAX,
    first: |b| b.is_ascii_alphanumeric(),
    first_allowed: "[A-Za-z0-9]",
    rest: |b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'),
    rest_allowed: "[A-Za-z0-9._-]",
};

/// Checks a replica tier's name, `^[a-z0-9][a-z0-9-]{0,62}$` (the tenant pattern). The
/// registry's `TierName` is the type; the wire carries the string, checked here so that a
/// body the schema refuses is refused by the parser too.
///
/// # Errors
/// [`InvalidName`] saying which rule `raw` breaks.
pub fn check_tier_name(raw: &str) -> Result<(), InvalidName> {
    TENANT.check(raw)
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $pattern:ident, $len_max:expr, $regex:tt) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[cfg_attr(feature = "openapi", schema(value_type = String, pattern = $regex))]
        pub struct $name(String);

        impl $name {
            /// The longest name the pattern allows, in bytes (all allowed characters are ASCII).
            pub const LEN_MAX: usize = $len_max;

            /// Checks `raw` against the pattern.
            ///
            /// # Errors
            /// [`InvalidName`] saying which rule `raw` breaks.
            pub fn parse(raw: &str) -> Result<Self, InvalidName> {
                $pattern.check(raw)?;
                Ok(Self(raw.to_owned()))
            }

            /// The name as it travels.
            #[must_use]
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<&str> for $name {
            type Error = InvalidName;
            fn try_from(raw: &str) -> Result<Self, InvalidName> {
                Self::parse(raw)
            }
        }

        impl TryFrom<String> for $name {
            type Error = InvalidName;
            fn try_from(raw: String) -> Result<Self, InvalidName> {
                $pattern.check(&raw)?;
                Ok(Self(raw))
            }
        }

        impl core::str::FromStr for $name {
            type Err = InvalidName;
            fn from_str(raw: &str) -> Result<Self, InvalidName> {
                Self::parse(raw)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(d)?;
                Self::try_from(raw).map_err(serde::de::Error::custom)
            }
        }
    };
}

name_type!(
    /// A tenant's name, `^[a-z0-9][a-z0-9-]{0,62}$`: what signup claims.
    TenantName,
    TENANT,
    63,
    "^[a-z0-9][a-z0-9-]{0,62}$"
);

name_type!(
    /// A journal's name inside its tenant, `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`.
    ///
    /// Resolved inside the token's tenant: a journal name never reaches another tenant.
    JournalName,
    JOURNAL,
    128,
    "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
);

#[cfg(test)]
mod tests {
    use super::{InvalidName, JournalName, TenantName};

    #[test]
    fn a_tenant_name_of_sixty_three_bytes_passes_and_sixty_four_does_not() {
        assert!(TenantName::parse(&"a".repeat(63)).is_ok());
        assert_eq!(TenantName::parse(&"a".repeat(64)), Err(InvalidName::TooLong { len: 64, max: 63 }));
    }

    #[test]
    fn a_journal_name_may_hold_dots_underscores_and_capitals_after_its_first_character() {
        assert_eq!(JournalName::parse("Orders.v2_eu-1").map(|n| n.to_string()), Ok("Orders.v2_eu-1".to_owned()));
        assert!(matches!(JournalName::parse(".hidden"), Err(InvalidName::BadFirst { found: '.', .. })));
    }

    #[test]
    fn a_non_ascii_character_is_named_with_its_byte_offset() {
        assert!(matches!(TenantName::parse("aé"), Err(InvalidName::BadChar { found: 'é', at: 1, .. })));
        assert!(matches!(TenantName::parse("é"), Err(InvalidName::BadFirst { found: 'é', .. })));
    }
}
