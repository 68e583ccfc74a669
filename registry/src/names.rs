//! Validated names: the strings the registry stores and the gateway serves.
//!
//! Every name type checks its grammar when it is built, including when it is decoded from a
//! record or a checkpoint (serde goes through the same check), so a directory never holds a
//! name the gateway would refuse in a path. The grammars for tenant and journal names are
//! The contract's; the others are this crate's and are written down on each type.

use core::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Why a string is not a valid name of some kind.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NameError {
    /// The name is empty.
    #[error("a {kind} may not be empty")]
    Empty { kind: &'static str },
    /// The name is longer than its grammar allows.
    #[error("a {kind} is at most {max} bytes, this one has {len}")]
    TooLong { kind: &'static str, max: usize, len: usize },
    /// A character the grammar does not allow at that place.
    #[error("a {kind} may not hold {ch:?} at byte {at}")]
    BadChar { kind: &'static str, at: usize, ch: char },
}

/// The shape of a name: its first character, the others, and the longest length in bytes.
struct Grammar {
    kind: &'static str,
    max: usize,
    first: fn(char) -> bool,
    rest: fn(char) -> bool,
}

impl Grammar {
    fn check(&self, s: &str) -> Result<(), NameError> {
        let kind = self.kind;
        if s.is_empty() {
            return Err(NameError::Empty { kind });
        }
        if s.len() > self.max {
            return Err(NameError::TooLong { kind, max: self.max, len: s.len() });
        }
        for (at, ch) in s.char_indices() {
            let ok = if at == 0 { (self.first)(ch) } else { (self.rest)(ch) };
            if !ok {
                return Err(NameError::BadChar { kind, at, ch });
            }
        }
        Ok(())
    }
}

fn lower_digit(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}
fn lower_digit_dash(c: char) -> bool {
    lower_digit(c) || c == '-'
}
fn alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}
fn alnum_dot_dash_underscore(c: char) -> bool {
    alnum(c) || matches!(c, '.' | '_' | '-')
}
/// Printable ASCII without space: enough for `host:port`, `nats://…`, `[::1]:4222`.
fn printable(c: char) -> bool {
    c.is_ascii_graphic()
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $grammar:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            const GRAMMAR: Grammar = $grammar;

            /// The name `s`, if it follows the grammar.
            ///
            /// # Errors
            /// [`NameError`] naming the first rule `s` breaks.
            pub fn new(s: impl Into<String>) -> Result<Self, NameError> {
                let s = s.into();
                Self::GRAMMAR.check(&s)?;
                Ok($name(s))
            }

            /// The name as a string.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = NameError;
            fn try_from(s: String) -> Result<Self, NameError> {
                $name::new(s)
            }
        }

        impl From<$name> for String {
            fn from(n: $name) -> String {
                n.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:?}", self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

// Tenant and journal names are the public contract's: paros-api's types, validated once for
// every crate (re-exported from this crate's root).
pub use paros_api::{JournalName, TenantName};

name_type!(
    /// A signing key's id (the JWT `kid`), `^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`; unique in the
    /// cell and never reused, even once retired, so a token can never be checked against a
    /// key it was not signed with.
    KeyId,
    Grammar { kind: "key id", max: 64, first: alnum, rest: alnum_dot_dash_underscore }
);
name_type!(
    /// A token's id (the JWT `jti`), `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`.
    TokenId,
    Grammar { kind: "token id", max: 128, first: alnum, rest: alnum_dot_dash_underscore }
);
name_type!(
    /// A failure zone (rack, availability zone), `^[a-z0-9][a-z0-9-]{0,62}$`; placement spreads
    /// a journal's voters across zones.
    Zone,
    Grammar { kind: "zone", max: 63, first: lower_digit, rest: lower_digit_dash }
);
name_type!(
    /// A replica tier's name, `^[a-z0-9][a-z0-9-]{0,62}$`: replicas register on a tier, and
    /// each journal is placed on one tier (or none) when it is created.
    TierName,
    Grammar { kind: "tier name", max: 63, first: lower_digit, rest: lower_digit_dash }
);
name_type!(
    /// Where a machine listens on the bus: 1..=255 bytes of printable ASCII, no spaces. The
    /// registry does not parse it; the bus does.
    BusAddress,
    Grammar { kind: "bus address", max: 255, first: printable, rest: printable }
);

impl TierName {
    /// The name of the tier a cell forms with, `default`: a journal created without naming a
    /// tier is placed on it when it exists.
    #[must_use]
    pub fn default_tier() -> TierName {
        TierName(String::from("default"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_checks_the_grammar() {
        let bytes = postcard::to_allocvec(&"Bad Name".to_owned()).expect("a string encodes");
        assert!(postcard::from_bytes::<TenantName>(&bytes).is_err(), "a decoded name goes through the same check");
    }

    #[test]
    fn tier_names_follow_their_grammar() {
        assert_eq!(TierName::new("default"), Ok(TierName::default_tier()), "the default tier's name is valid");
        assert!(TierName::new("eu-west-1").is_ok());
        assert_eq!(TierName::new(""), Err(NameError::Empty { kind: "tier name" }));
        assert_eq!(TierName::new("-a"), Err(NameError::BadChar { kind: "tier name", at: 0, ch: '-' }));
        assert_eq!(TierName::new("Gold"), Err(NameError::BadChar { kind: "tier name", at: 0, ch: 'G' }));
        assert_eq!(TierName::new("a".repeat(64)), Err(NameError::TooLong { kind: "tier name", max: 63, len: 64 }));
        assert!(TierName::new("a".repeat(63)).is_ok(), "63 bytes is the longest");
    }
}
