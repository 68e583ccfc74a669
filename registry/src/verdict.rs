//! What the fold decided about one request: accepted (and what changed) or refused (and why).
//!
//! Verdicts are part of the directory's state (the idempotency window travels in every
//! checkpoint), so they are serde types and carry nothing a reader could judge differently.

use paros_client::Seq;
use paros_core::ids::{JournalKey, NodeId, TenantId};
use serde::{Deserialize, Serialize};

use crate::command::{CellId, Epoch, Incarnation, KeyScope, Role, Standing, TenantStatus};
use crate::names::{JournalName, KeyId, TenantName, TierName};

/// The fold's judgement of one request.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Verdict {
    Accepted(Accepted),
    Refused(Refusal),
}

impl Verdict {
    /// Whether the command took effect (possibly as an idempotent no-op).
    pub fn is_accepted(&self) -> bool {
        matches!(self, Verdict::Accepted(_))
    }

    /// The refusal, if it was one.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            Verdict::Refused(r) => Some(r),
            Verdict::Accepted(_) => None,
        }
    }
}

/// An accepted command and what it did.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Accepted {
    CellFormed {
        cell: CellId,
    },
    /// `updated`: the machine was already registered in this role, and its bus address and
    /// zone were replaced (a machine that moved).
    MachineRegistered {
        machine: NodeId,
        updated: bool,
    },
    /// `changed`: false when the machine already had that standing.
    StandingSet {
        machine: NodeId,
        standing: Standing,
        changed: bool,
    },
    SignedUp {
        tenant: TenantId,
    },
    TenantStatusSet {
        tenant: TenantId,
        status: TenantStatus,
    },
    QuotasSet {
        tenant: TenantId,
    },
    SigningKeyAdded {
        kid: KeyId,
    },
    /// `already`: the key was retired before; retiring is idempotent.
    SigningKeyRetired {
        kid: KeyId,
        already: bool,
    },
    /// `already`: the token was revoked before; revoking is idempotent (the contract: 204 again).
    TokenRevoked {
        tenant: TenantId,
        already: bool,
    },
    JournalCreated {
        key: JournalKey,
        voters: Vec<NodeId>,
        #[serde(with = "crate::seq_serde")]
        at: Seq,
    },
    JournalDeleted {
        key: JournalKey,
    },
    /// A `CreateTier` took effect. (A `RegisterReplica` is answered `MachineRegistered`, a
    /// `CreateJournalOnTier` `JournalCreated`.)
    TierCreated {
        tier: TierName,
        feed: NodeId,
    },
    // Issue 34. (An `Admit` is answered `MachineRegistered`.)
    /// A `Rejoin`: `old` is retired and replaced by `new`.
    Rejoined {
        old: NodeId,
        new: NodeId,
    },
    /// A `MoveSeat` recorded: the journal's next configuration is its voters with `from`
    /// replaced by `to`, at `epoch`.
    SeatMoving {
        key: JournalKey,
        from: NodeId,
        to: NodeId,
        epoch: Epoch,
    },
    /// A `MoveDone`: the journal's voters are the move's target at `epoch`. `already`: the
    /// move was recorded done before (a re-driven completion changes nothing).
    SeatMoved {
        key: JournalKey,
        epoch: Epoch,
        already: bool,
    },
}

/// Why the fold refused a command; the directory is unchanged.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Refusal {
    /// The record did not decode (its request id did).
    Malformed {
        reason: String,
    },
    /// The cell is not formed: only `InitCell` is judged before it.
    NotInitialized,
    /// A second `InitCell`: the cell is formed already, as `cell`.
    CellFormed {
        cell: CellId,
    },
    /// `InitCell` carried limits that cannot work (a zero bound).
    BadLimits {
        field: LimitField,
    },
    /// A journal's (or the registry's) voter set breaks a rule.
    Voters(VoterRefusal),
    /// The machine is retired: its id is never used again.
    MachineRetired {
        machine: NodeId,
    },
    /// The machine is registered in another role; a role is fixed at registration.
    RoleChange {
        machine: NodeId,
        registered: Role,
    },
    UnknownMachine {
        machine: NodeId,
    },
    /// A tenant with this id exists already.
    TenantIdTaken {
        tenant: TenantId,
    },
    /// A tenant with this name exists already (names are never freed).
    TenantNameTaken {
        name: TenantName,
    },
    UnknownTenant {
        tenant: TenantId,
    },
    /// The tenant is suspended: it may not create journals.
    TenantSuspended {
        tenant: TenantId,
    },
    /// A signing key with this id exists or existed (key ids are never reused).
    KeyIdTaken {
        kid: KeyId,
    },
    UnknownKey {
        kid: KeyId,
    },
    /// The scope already holds `max` live keys.
    TooManyKeys {
        scope: KeyScope,
        max: u32,
    },
    /// The public key is not a raw Ed25519 key.
    KeyLength {
        len: usize,
        want: usize,
    },
    /// The tenant already holds `max` revoked token ids.
    TooManyRevocations {
        tenant: TenantId,
        max: u32,
    },
    /// A journal with this id exists or existed in the tenant (ids are never reused).
    JournalIdTaken {
        key: JournalKey,
    },
    /// A live journal of the tenant has this name.
    JournalNameTaken {
        tenant: TenantId,
        name: JournalName,
    },
    /// The tenant holds `journals_max` live journals already.
    OverJournalQuota {
        tenant: TenantId,
        journals_max: u32,
    },
    /// No live journal of the tenant has this name.
    UnknownJournal {
        tenant: TenantId,
        name: JournalName,
    },
    /// A tier with this name exists already (tiers are never removed).
    TierNameTaken {
        tier: TierName,
    },
    /// The feed id is a machine's id (retired ones included) or another tier's feed: the bus
    /// could not tell a feed from a machine.
    FeedTaken {
        feed: NodeId,
    },
    /// The machine id is the feed of `tier`: a machine never takes a feed's id.
    MachineIsAFeed {
        machine: NodeId,
        tier: TierName,
    },
    /// No tier has this name.
    UnknownTier {
        tier: TierName,
    },
    /// The replica is registered on another tier (or on none, through `RegisterMachine`); a
    /// replica's tier is fixed at registration.
    TierChange {
        machine: NodeId,
        registered: Option<TierName>,
    },
    // Issue 34.
    /// `Admit` under an id recorded with another incarnation: the store is not the one that
    /// id's promises were made with; the machine joins again only as a new identity (`Rejoin`).
    IncarnationChanged {
        machine: NodeId,
        recorded: Incarnation,
        offered: Incarnation,
    },
    /// `Rejoin` of a machine already replaced by `by`.
    AlreadyReplaced {
        machine: NodeId,
        by: NodeId,
    },
    /// `Rejoin` under an id that is, or was, a machine's: a new identity is new.
    IdentityTaken {
        machine: NodeId,
    },
    /// A `MoveSeat` or `MoveDone` breaks a rule.
    Move(MoveRefusal),
}

/// Why a seat move (or its completion) is refused.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum MoveRefusal {
    /// No live journal has this key.
    UnknownJournal { key: JournalKey },
    /// A move of the journal to `epoch` is recorded and not done: one move at a time.
    InProgress { key: JournalKey, epoch: Epoch },
    /// `node` holds no seat of the journal.
    NotAVoter { key: JournalKey, node: NodeId },
    /// `node` holds a seat of the journal already: two seats on one machine are one.
    AlreadyAVoter { key: JournalKey, node: NodeId },
    /// The target cannot take a seat: unknown, not a node, draining, retired or replaced.
    Target(VoterRefusal),
    /// A `MoveDone` with no move of the journal in progress (and not the epoch it is at).
    NotMoving { key: JournalKey },
    /// A `MoveDone` naming another epoch than the move in progress.
    WrongEpoch { key: JournalKey, pending: Epoch, offered: Epoch },
    /// `node` held a seat of the journal once. Given only by builds before a placement
    /// carried the epoch its seat begins in (docs/reconfiguration.md, rule 13), which now
    /// makes such a move safe; kept so that a verdict recorded then still reads.
    HeldASeat { key: JournalKey, node: NodeId },
}

/// The limit `InitCell` set to zero.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum LimitField {
    VerdictsMax,
    VotersMax,
    RevokedPerTenantMax,
    KeysPerScopeMax,
}

/// Why a voter set is refused.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum VoterRefusal {
    /// Not in `1..=voters_max`.
    Count {
        count: usize,
        max: u32,
    },
    /// An even count: it tolerates no more failures than the odd count below it, and costs a
    /// voter more, so the fold refuses it rather than let placement drift into it.
    Even {
        count: usize,
    },
    Duplicate {
        node: NodeId,
    },
    Unknown {
        node: NodeId,
    },
    /// The machine is not a node (a replica or a gateway cannot vote).
    NotANode {
        node: NodeId,
        role: Role,
    },
    /// The node is draining or retired: nothing new is placed on it.
    NotInService {
        node: NodeId,
        standing: Standing,
    },
    /// The machine is an old identity, replaced by `by` (its store was wiped): it never votes
    /// again.
    Replaced {
        node: NodeId,
        by: NodeId,
    },
}
