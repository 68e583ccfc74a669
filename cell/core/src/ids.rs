//! Identifiers and positions. Every id is its own type so a slot can never be passed where a
//! sequence number is expected.

use core::fmt;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

macro_rules! id_u64 {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
        pub struct $name(pub u64);

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:x})", stringify!($name), self.0)
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:016x}", self.0)
            }
        }
    };
}

id_u64!(
    /// A voter or replica machine. Minted at random on first start; never reused.
    NodeId
);
id_u64!(
    /// A customer. Random, drawn by the registry.
    TenantId
);
id_u64!(
    /// A journal within its tenant. Random, drawn by the registry.
    JournalId
);

/// The full name of a journal on the wire and in storage: `(tenant, journal)`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct JournalKey {
    pub tenant: TenantId,
    pub journal: JournalId,
}

impl fmt::Debug for JournalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.tenant, self.journal)
    }
}

/// A record position. Dense, assigned at apply; never shown as a Paxos slot.
///
/// In JSON (`seq`, `first_seq`, `next_seq`, `from`, `up_to`, `min_seq`, `resumed_at`) it is a
/// bare integer, the full u64 range: a value above 2^53 stays an integer (serde_json never
/// routes a u64 through f64), and a float, a negative number or a string is refused.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Seq(pub u64);

impl Seq {
    /// The position `n` records further on.
    #[must_use]
    pub fn plus(self, n: u64) -> Seq {
        Seq(self.0.checked_add(n).expect("a sequence number never overflows u64"))
    }

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

impl core::str::FromStr for Seq {
    type Err = InvalidPosition;
    fn from_str(raw: &str) -> Result<Seq, InvalidPosition> {
        Seq::parse(raw)
    }
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

/// A Paxos log index of one journal. Internal: tenants never see slots.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Slot(pub u64);

impl Slot {
    /// The next slot.
    #[must_use]
    pub fn next(self) -> Slot {
        Slot(self.0.checked_add(1).expect("a slot never overflows u64"))
    }
}

impl fmt::Debug for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "slot{}", self.0)
    }
}

/// A Paxos ballot, ordered by round, then node.
///
/// The round's high bits are the configuration epoch the ballot campaigns in
/// ([`Ballot::epoch`], docs/reconfiguration.md rules 2 and 10), so ballots order by epoch
/// first, and a store or a message from before configurations existed reads as epoch 0.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Ballot {
    pub round: u64,
    pub node: NodeId,
}

impl Ballot {
    /// The ballot no proposer ever uses: every real ballot is above it.
    pub const ZERO: Ballot = Ballot { round: 0, node: NodeId(0) };

    /// Where the epoch starts in a round: 2^40 rounds per epoch, 2^24 epochs.
    pub const EPOCH_SHIFT: u32 = 40;

    /// The configuration epoch this ballot campaigns in.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.round >> Self::EPOCH_SHIFT
    }

    /// The first round of `epoch`.
    #[must_use]
    pub fn epoch_start(epoch: u64) -> u64 {
        epoch << Self::EPOCH_SHIFT
    }

    /// The promise a seat that begins in `epoch` starts with: below every ballot of `epoch`
    /// a proposer uses, above every ballot of an earlier epoch ([`Ballot::ZERO`] for epoch 0).
    /// An acceptor holding it refuses every earlier epoch, and its node does not campaign
    /// until its walk reaches `epoch` (docs/reconfiguration.md, rule 13).
    #[must_use]
    pub fn seat_floor(epoch: u64) -> Ballot {
        Ballot { round: Self::epoch_start(epoch), node: NodeId(0) }
    }
}

impl fmt::Debug for Ballot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b{}.{:x}", self.round, self.node.0)
    }
}

/// The writer's fence: a non-zero u128 chosen by the client, invisible to Paxos.
///
/// Text is the canonical lowercase hyphenated spelling (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`),
/// and only [`LeaderUuid::parse`] turns text into one, so an uppercase, braced, urn or nil
/// spelling never gets in. Any uuid version or variant is accepted: the server compares the 128
/// bits and nothing else.
///
/// serde: a human-readable format (JSON) carries that text; any other (postcard: the bus and
/// the store) the u128. Decoding either goes through the same checks: a zero from the wire or
/// the disk is refused, never held.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaderUuid(u128);

/// A leader uuid of zero (the unset uuid, which never leads).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ZeroLeaderUuid;

impl fmt::Display for ZeroLeaderUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a leader uuid is never zero")
    }
}

/// Why text is not a leader uuid.
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

impl TryFrom<u128> for LeaderUuid {
    type Error = ZeroLeaderUuid;

    fn try_from(raw: u128) -> Result<LeaderUuid, ZeroLeaderUuid> {
        LeaderUuid::new(raw).ok_or(ZeroLeaderUuid)
    }
}

impl From<LeaderUuid> for u128 {
    fn from(u: LeaderUuid) -> u128 {
        u.0
    }
}

const UUID_HYPHENS: [usize; 4] = [8, 13, 18, 23];
const UUID_TEXT_LEN: usize = 36;

impl LeaderUuid {
    /// The uuid `raw`, or `None` for zero (the unset uuid never leads).
    #[must_use]
    pub fn new(raw: u128) -> Option<LeaderUuid> {
        (raw != 0).then_some(LeaderUuid(raw))
    }

    /// The raw non-zero value.
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
        if bytes.len() != UUID_TEXT_LEN {
            return Err(InvalidUuid::BadLength { len: raw.chars().count() });
        }
        let mut bits = 0u128;
        for (at, &b) in bytes.iter().enumerate() {
            if UUID_HYPHENS.contains(&at) {
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

impl fmt::Debug for LeaderUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "uuid{:x}", self.0)
    }
}

impl fmt::Display for LeaderUuid {
    /// The canonical spelling, the only one that travels as text.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = format!("{:032x}", self.0);
        write!(f, "{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
    }
}

impl Serialize for LeaderUuid {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() { s.collect_str(self) } else { s.serialize_u128(self.0) }
    }
}

impl<'de> Deserialize<'de> for LeaderUuid {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            let raw = <std::borrow::Cow<'de, str>>::deserialize(d)?;
            LeaderUuid::parse(&raw).map_err(serde::de::Error::custom)
        } else {
            LeaderUuid::try_from(u128::deserialize(d)?).map_err(serde::de::Error::custom)
        }
    }
}

/// One life of one journal on one machine: a nonce the host draws each time it builds the
/// journal's voter or replica (at boot, on a wake from dormancy, on placement). A request that
/// expects a reply (a catch-up request, a watermark round) carries it and the reply echoes it,
/// so an answer addressed to an earlier life — sent before a crash, a sleep or a removal, and
/// delivered late — never counts for a request of this one (seed 41003456: a watermark from
/// before a wake closed a read round of the woken journal that reused its round id).
///
/// Ballots need no life: a candidate's `Prepare` leaves only once its own promise of the
/// ballot is durable, so every ballot a journal's earlier life sent is at or below the promise
/// the next life boots with, and the next campaign goes above it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Life(pub u64);

impl fmt::Debug for Life {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "life{:x}", self.0)
    }
}

impl Life {
    /// The `n`-th life a host mints from its boot nonce `boot`: distinct for distinct `n`
    /// within one boot (the mix is a bijection), and unrelated across boots drawn from
    /// independent nonces.
    #[must_use]
    pub fn mint(boot: u64, n: u64) -> Life {
        let mut z = boot.wrapping_add(n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Life(z ^ (z >> 31))
    }
}

/// One call's id, minted by its caller (paros-client's `CallPolicy` draws one per call) and
/// kept to the answer: every send of the call carries it, the node owes its answer under it,
/// and the voter holds the proposal under it. A resend with the same id to a node still owing
/// the call waits for the same answer instead of proposing the call again.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct CallId(pub u64);

/// One read's id, minted by its sender for each send and kept to the answer.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct ReadId(pub u64);

#[cfg(test)]
mod tests {
    use super::{InvalidPosition, InvalidUuid, LeaderUuid, Seq};

    const SAMPLE: &str = "0f8b1c2e-4a5d-4e6f-9a0b-1c2d3e4f5a6b";

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

    #[test]
    fn a_position_past_u64_is_none_not_a_panic() {
        assert_eq!(Seq(5).checked_plus(3), Some(Seq(8)));
        assert_eq!(Seq(u64::MAX).checked_plus(1), None);
    }

    #[test]
    fn a_position_is_a_bare_json_integer() {
        assert_eq!(serde_json::to_string(&Seq(u64::MAX)).unwrap(), "18446744073709551615");
        assert_eq!(serde_json::from_str::<Seq>("7").unwrap(), Seq(7));
        for bad in ["1.0", "-1", "\"5\"", "null"] {
            assert!(serde_json::from_str::<Seq>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_canonical_spelling_parses_and_prints_back_identically() {
        let u = LeaderUuid::parse(SAMPLE).expect("the sample uuid is canonical");
        assert_eq!(u.get(), 0x0f8b_1c2e_4a5d_4e6f_9a0b_1c2d_3e4f_5a6b);
        assert_eq!(u.to_string(), SAMPLE);
        assert_eq!(SAMPLE.parse::<LeaderUuid>(), Ok(u));
    }

    #[test]
    fn the_uuid_crate_agrees_on_the_bits_and_the_spelling() {
        let u = LeaderUuid::parse(SAMPLE).expect("canonical");
        let v = uuid::Uuid::from_u128(u.get());
        assert_eq!(v.hyphenated().to_string(), SAMPLE);
        assert_eq!(LeaderUuid::new(v.as_u128()), Some(u));
        assert_eq!(LeaderUuid::new(uuid::Uuid::nil().as_u128()), None);
        assert_eq!(LeaderUuid::parse(&uuid::Uuid::nil().hyphenated().to_string()), Err(InvalidUuid::Nil));
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

    #[test]
    fn json_carries_the_canonical_spelling() {
        let u = LeaderUuid::parse(SAMPLE).expect("canonical");
        assert_eq!(serde_json::to_string(&u).unwrap(), format!("\"{SAMPLE}\""));
        assert_eq!(serde_json::from_str::<LeaderUuid>(&format!("\"{SAMPLE}\"")).unwrap(), u);
        assert!(serde_json::from_str::<LeaderUuid>(&format!("\"{}\"", SAMPLE.to_uppercase())).is_err());
        assert!(serde_json::from_str::<LeaderUuid>(&u.get().to_string()).is_err(), "not the number");
    }
}
