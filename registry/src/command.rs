//! The registry journal's records: one [`Command`] each, with its [`RequestId`].
//!
//! A record is one version byte ([`COMMAND_VERSION`]) followed by the postcard encoding of a
//! [`Record`]. Records are read back by every gateway, node and replica, and anyone able to
//! write the registry journal could have written anything, so decoding treats the bytes as
//! untrusted: an unknown version, a body that does not decode (names are checked against
//! their grammar while decoding), and trailing bytes are all typed errors, never guesses and
//! never panics. The first byte is never the checkpoint magic's `0xC0`, so a registry record is
//! never mistaken for a checkpoint run record.

use bytes::Bytes;
use paros_core::ids::{JournalId, JournalKey, NodeId, TenantId};
use paros_core::journal::WriterMode;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::names::{BusAddress, JournalName, KeyId, TenantName, TierName, TokenId, Zone};

/// The record format version this crate writes and the only one it reads.
pub const COMMAND_VERSION: u8 = 1;

/// A caller's idempotency id: the same id names the same request, however often it is sent.
///
/// Drawn at random by the caller (the gateway, the CLI) and kept across its retries; the fold
/// keeps the verdict of recent ids ([`Limits::verdicts_max`]) so a retry is answered from the
/// fold instead of being applied twice.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct RequestId(pub u128);

/// A cell's identity, drawn once by `paros cell init`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct CellId(pub u64);

/// A machine's store incarnation (`paros_node::Incarnation`, minted once when the store takes
/// its identity): recorded by [`Command::Admit`] and [`Command::Rejoin`], so that a store wiped
/// or replaced under a known id is told apart from the one whose promises that id made.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct Incarnation(pub u64);

/// A journal's configuration epoch: 0 for the voters it was created with, one more for each
/// seat move the registry recorded done.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize, Deserialize)]
pub struct Epoch(pub u64);

impl Epoch {
    /// The epoch after this one.
    #[must_use]
    pub fn next(self) -> Epoch {
        Epoch(self.0 + 1)
    }
}

/// What a machine does in the cell.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum Role {
    /// A voter: journals are placed on it.
    Node,
    /// A learner-only read replica.
    Replica,
    /// A tenant gateway.
    Gateway,
}

/// A machine's standing: whether new work may be placed on it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum Standing {
    /// In service: eligible for new placements.
    Registered,
    /// Still serving what it holds, but no new journal is placed on it.
    Draining,
    /// Gone for good: its id is never registered again (a node that lost its disk returns
    /// under a new id).
    Retired,
}

/// A tenant's standing.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum TenantStatus {
    /// Served normally.
    Active,
    /// Refused new journals by the fold; the gateway refuses its calls.
    Suspended,
}

/// A tenant's quotas, enforced by the gateway (rates) and by the fold (journal count).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Quotas {
    /// Requests per second the gateway admits for the tenant.
    pub requests_per_s: u32,
    /// Record bytes per second the gateway admits for the tenant.
    pub bytes_per_s: u64,
    /// The most live journals the tenant may hold; a `CreateJournal` past it is refused.
    pub journals_max: u32,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas { requests_per_s: 1_000, bytes_per_s: 16 << 20, journals_max: 100 }
    }
}

/// Whose signing key: the cell's (tokens the gateway mints) or one tenant's.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum KeyScope {
    Cell,
    Tenant(TenantId),
}

/// The length of an Ed25519 public key, the only kind the gateway verifies (EdDSA).
pub const PUBLIC_KEY_LEN: usize = 32;

/// The fold's own bounds. They are decided in the log (carried by `InitCell`), never read
/// from local configuration, so every reader of the registry applies the same ones.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Limits {
    /// How many recent request ids keep their verdict: the idempotency window. The oldest
    /// verdict is forgotten when a newer one would exceed it.
    pub verdicts_max: u32,
    /// The most voters a journal (the registry included) may have.
    pub voters_max: u32,
    /// The most revoked token ids one tenant may hold.
    pub revoked_per_tenant_max: u32,
    /// The most signing keys (live or retired) one scope may hold.
    pub keys_per_scope_max: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { verdicts_max: 4_096, voters_max: 7, revoked_per_tenant_max: 10_000, keys_per_scope_max: 16 }
    }
}

/// A founding member of the cell: a node registered by `InitCell` itself.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Member {
    pub id: NodeId,
    pub bus_address: BusAddress,
    pub zone: Zone,
}

/// One registry mutation. Each is judged by the fold ([`crate::Directory`]) and refused in
/// place when invalid; the rules are written on the fold.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Command {
    /// Forms the cell: its id, its founding nodes (which host the registry journal) and the
    /// fold's limits. Every other command is refused until this one is folded.
    InitCell {
        cell: CellId,
        members: Vec<Member>,
        registry: JournalId,
        limits: Limits,
    },
    RegisterMachine {
        id: NodeId,
        role: Role,
        bus_address: BusAddress,
        zone: Zone,
    },
    SetStanding {
        machine: NodeId,
        standing: Standing,
    },
    SignUp {
        tenant: TenantId,
        name: TenantName,
        quotas: Quotas,
    },
    SetTenantStatus {
        tenant: TenantId,
        status: TenantStatus,
    },
    SetQuotas {
        tenant: TenantId,
        quotas: Quotas,
    },
    AddSigningKey {
        scope: KeyScope,
        kid: KeyId,
        public_key: Bytes,
    },
    RetireSigningKey {
        kid: KeyId,
    },
    RevokeToken {
        tenant: TenantId,
        jti: TokenId,
    },
    CreateJournal {
        tenant: TenantId,
        journal: JournalId,
        name: JournalName,
        mode: WriterMode,
        voters: Vec<NodeId>,
    },
    DeleteJournal {
        tenant: TenantId,
        name: JournalName,
    },
    // The variants below were added after the first registry logs were written: postcard
    // encodes a variant by its index, so new variants only ever go at the end, and the ones
    // above keep their fields byte for byte.
    /// Creates a replica tier named `tier`, fed at `feed`: the bus address (an id drawn at
    /// random by the requester, never a machine's) the voters of the tier's journals send
    /// their chosen batches to, fanned out by the bus to the tier's replicas.
    CreateTier {
        tier: TierName,
        feed: NodeId,
    },
    /// Registers a machine of role [`Role::Replica`] on `tier`.
    RegisterReplica {
        id: NodeId,
        tier: TierName,
        bus_address: BusAddress,
        zone: Zone,
    },
    /// A `CreateJournal` that names the journal's tier.
    CreateJournalOnTier {
        tenant: TenantId,
        journal: JournalId,
        name: JournalName,
        mode: WriterMode,
        voters: Vec<NodeId>,
        tier: TierName,
    },
    // Issue 34 (a cell that heals): machines' incarnations and moving a journal's seats. The
    // registry records intent; the journal's own log decides the change
    // (docs/reconfiguration.md).
    /// Admits a machine with its store's incarnation: `RegisterMachine`'s rules, and the
    /// incarnation is recorded; an id already recorded under another incarnation is refused
    /// (its store is foreign: the machine comes back only through [`Command::Rejoin`]).
    /// Draining and retiring a machine are `SetStanding`.
    Admit {
        id: NodeId,
        role: Role,
        bus_address: BusAddress,
        zone: Zone,
        incarnation: Incarnation,
    },
    /// `new` is machine `old` come back with a wiped or replaced store, under a new identity:
    /// `old` is retired for good and marked replaced by `new` (it never votes again and is
    /// never placed again); `new` is registered in `old`'s role (and tier), in service.
    Rejoin {
        old: NodeId,
        new: NodeId,
        bus_address: BusAddress,
        zone: Zone,
        incarnation: Incarnation,
    },
    /// Records the registry's intent to move `journal`'s seat from voter `from` to `to`: its
    /// next configuration, at the next epoch. The journal's own log decides the change; the
    /// move stays in progress until [`Command::MoveDone`]. Not to be sent to a live cell before
    /// the journal's side (`Reconfigure` in cell/core) exists: see docs/reconfiguration.md.
    MoveSeat {
        journal: JournalKey,
        from: NodeId,
        to: NodeId,
    },
    /// Records the move of `journal` to `epoch` complete: the new configuration holds the
    /// prefix (docs/reconfiguration.md rule 6), so the journal's voters are now the target's.
    MoveDone {
        journal: JournalKey,
        epoch: Epoch,
    },
}

/// One registry record: a command and the request it answers.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Record {
    pub id: RequestId,
    pub command: Command,
}

/// Why bytes are not a registry record.
#[derive(Clone, PartialEq, Eq, Debug, Error)]
pub enum DecodeError {
    /// The record is empty.
    #[error("an empty registry record")]
    Empty,
    /// A version byte this build does not read.
    #[error("registry record version {0} is not one this build reads (it reads {COMMAND_VERSION})")]
    UnknownVersion(u8),
    /// The body does not decode as a record. `id` is the request id when at least that much
    /// decoded, so the fold can still give that request a verdict.
    #[error("malformed registry record: {reason}")]
    Malformed { reason: String, id: Option<RequestId> },
    /// Bytes after the record.
    #[error("a registry record with {extra} trailing bytes")]
    Trailing { extra: usize, id: RequestId },
}

impl DecodeError {
    /// The request id the bytes named, when at least that much decoded.
    pub fn request_id(&self) -> Option<RequestId> {
        match self {
            DecodeError::Malformed { id, .. } => *id,
            DecodeError::Trailing { id, .. } => Some(*id),
            DecodeError::Empty | DecodeError::UnknownVersion(_) => None,
        }
    }
}

impl Record {
    /// Encodes the record: the version byte, then postcard.
    ///
    /// # Panics
    /// Never for these types: postcard writes every one of them (no sequence of unknown
    /// length, no fallible `Serialize`).
    pub fn encode(&self) -> Bytes {
        let out = postcard::to_extend(self, vec![COMMAND_VERSION]).expect("postcard writes every registry record");
        Bytes::from(out)
    }

    /// Decodes a record written by [`encode`](Self::encode), treating the bytes as untrusted.
    ///
    /// # Errors
    /// [`DecodeError`], carrying the request id whenever it decoded.
    pub fn decode(bytes: &[u8]) -> Result<Record, DecodeError> {
        let (&version, body) = bytes.split_first().ok_or(DecodeError::Empty)?;
        if version != COMMAND_VERSION {
            return Err(DecodeError::UnknownVersion(version));
        }
        match postcard::take_from_bytes::<Record>(body) {
            Ok((record, [])) => Ok(record),
            Ok((record, rest)) => Err(DecodeError::Trailing { extra: rest.len(), id: record.id }),
            Err(e) => Err(DecodeError::Malformed { reason: e.to_string(), id: Self::peek_id(bytes) }),
        }
    }

    /// The request id a record names, decoding nothing else (`None` when even that fails).
    pub fn peek_id(bytes: &[u8]) -> Option<RequestId> {
        match bytes.split_first() {
            Some((&COMMAND_VERSION, body)) => postcard::take_from_bytes::<RequestId>(body).ok().map(|(id, _)| id),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Record {
        Record {
            id: RequestId(7),
            command: Command::SignUp {
                tenant: TenantId(9),
                name: TenantName::parse("acme").expect("a valid name"),
                quotas: Quotas::default(),
            },
        }
    }

    #[test]
    fn a_record_round_trips() {
        let r = sample();
        assert_eq!(Record::decode(&r.encode()), Ok(r), "decode(encode(r)) == r");
    }

    #[test]
    fn an_unknown_version_is_refused() {
        let mut bytes = sample().encode().to_vec();
        bytes[0] = 2;
        assert_eq!(Record::decode(&bytes), Err(DecodeError::UnknownVersion(2)), "version 2 is not read");
    }

    #[test]
    fn trailing_bytes_are_refused_with_the_id() {
        let mut bytes = sample().encode().to_vec();
        bytes.push(0);
        assert_eq!(
            Record::decode(&bytes),
            Err(DecodeError::Trailing { extra: 1, id: RequestId(7) }),
            "one trailing byte is refused and the id is still known"
        );
    }

    #[test]
    fn a_truncated_body_is_malformed_but_keeps_its_id() {
        let bytes = sample().encode();
        let cut = &bytes[..bytes.len() - 3];
        let err = Record::decode(cut).expect_err("a cut record does not decode");
        assert_eq!(err.request_id(), Some(RequestId(7)), "the id decoded");
    }

    /// A `CreateJournal` as the first registry logs wrote it: its encoding is pinned, so a
    /// change to the variant (or a variant inserted before it) fails here.
    #[test]
    fn an_old_create_journal_record_still_decodes() {
        let bytes = [
            COMMAND_VERSION,
            5, // RequestId(5)
            9, // variant 9: CreateJournal
            100,
            7, // tenant 100, journal 7
            1,
            b'o', // the name "o"
            0,    // WriterMode::Single
            3,
            1,
            2,
            3, // voters 1, 2, 3
        ];
        let want = Record {
            id: RequestId(5),
            command: Command::CreateJournal {
                tenant: TenantId(100),
                journal: JournalId(7),
                name: JournalName::parse("o").expect("a valid name"),
                mode: WriterMode::Single,
                voters: vec![NodeId(1), NodeId(2), NodeId(3)],
            },
        };
        assert_eq!(Record::decode(&bytes), Ok(want.clone()), "the old bytes decode as before");
        assert_eq!(want.encode()[..], bytes[..], "and are still what this build writes");
    }

    #[test]
    fn a_record_is_never_a_checkpoint_run_record() {
        assert!(
            paros_client::check_application_record(&sample().encode()).is_ok(),
            "the version byte is not the magic's first byte"
        );
    }
}
