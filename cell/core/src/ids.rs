//! Identifiers and positions. Every id is its own type so a slot can never be passed where a
//! sequence number is expected.

use core::fmt;
use serde::{Deserialize, Serialize};

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
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Seq(pub u64);

impl Seq {
    /// The position `n` records further on.
    #[must_use]
    pub fn plus(self, n: u64) -> Seq {
        Seq(self.0.checked_add(n).expect("a sequence number never overflows u64"))
    }
}

impl fmt::Debug for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seq{}", self.0)
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
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Ballot {
    pub round: u64,
    pub node: NodeId,
}

impl Ballot {
    /// The ballot no proposer ever uses: every real ballot is above it.
    pub const ZERO: Ballot = Ballot { round: 0, node: NodeId(0) };
}

impl fmt::Debug for Ballot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b{}.{:x}", self.round, self.node.0)
    }
}

/// The writer's fence: a non-zero u128 chosen by the client, invisible to Paxos. Decoding goes
/// through [`LeaderUuid::new`]: a zero from the wire or the disk is refused, never held.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u128", into = "u128")]
pub struct LeaderUuid(u128);

/// A leader uuid of zero (the unset uuid, which never leads).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ZeroLeaderUuid;

impl fmt::Display for ZeroLeaderUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a leader uuid is never zero")
    }
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
}

impl fmt::Debug for LeaderUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "uuid{:x}", self.0)
    }
}

impl fmt::Display for LeaderUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
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
