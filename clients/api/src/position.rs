//! Record positions: JSON integers on the wire, decimal digits in queries and SSE ids.

use core::fmt;

use serde::{Deserialize, Serialize};

/// A record position (`seq`, `first_seq`, `next_seq`, `from`, `up_to`, `min_seq`, `resumed_at`).
///
/// Travels as a bare JSON integer, the full u64 range: a value above 2^53 stays an integer
/// (serde_json never routes a u64 through f64), and a float, a negative number or a string is
/// refused.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(transparent)]
pub struct Seq(pub u64);

impl Seq {
    /// The position `n` records further on, or `None` past u64.
    #[must_use]
    pub fn checked_plus(self, n: u64) -> Option<Seq> {
        self.0.checked_add(n).map(Seq)
    }

    /// Parses a position given as text (a query parameter or `Last-Event-ID`).
    ///
    /// Decimal ASCII digits only, at least one, within u64: no sign, no spaces, no exponent.
    /// Leading zeros are read as the decimal value they spell.
    ///
    /// # Errors
    /// [`InvalidPosition`] for anything else.
    pub fn parse(raw: &str) -> Result<Seq, InvalidPosition> {
        if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
            return Err(InvalidPosition::NotDigits);
        }
        raw.parse::<u64>().map(Seq).map_err(|_| InvalidPosition::Overflow)
    }
}

/// Why text is not a position.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum InvalidPosition {
    /// Empty, or a character that is not a decimal digit (`+`, `-`, `.`, space, …).
    #[error("a position is one or more decimal digits")]
    NotDigits,
    /// More than u64 holds.
    #[error("a position is at most 18446744073709551615")]
    Overflow,
}

impl fmt::Debug for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seq{}", self.0)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl From<u64> for Seq {
    fn from(n: u64) -> Seq {
        Seq(n)
    }
}

#[cfg(test)]
mod tests {
    use super::{InvalidPosition, Seq};

    #[test]
    fn text_positions_are_bare_decimal_digits_within_u64() {
        assert_eq!(Seq::parse("0"), Ok(Seq(0)));
        assert_eq!(Seq::parse("007"), Ok(Seq(7)));
        assert_eq!(Seq::parse("18446744073709551615"), Ok(Seq(u64::MAX)));
        assert_eq!(Seq::parse("18446744073709551616"), Err(InvalidPosition::Overflow));
        for bad in ["", "+5", "-1", " 5", "5 ", "5.0", "1e3", "0x10"] {
            assert_eq!(Seq::parse(bad), Err(InvalidPosition::NotDigits), "{bad:?}");
        }
    }
}
