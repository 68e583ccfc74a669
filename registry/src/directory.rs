//! The Directory: the registry journal folded — machines, tenants, signing keys, journals —
//! and the verdict of every recent request.
//!
//! Every gateway, node and replica folds the registry with the same
//! [`Folder`](paros_client::Folder)`<Directory>`, so each one computes the same directory from
//! the same records. Every command is judged here and **refused in place** when invalid: the
//! record still takes its position, the directory is unchanged, and the refusal becomes the
//! request's verdict. The rules, per command:
//!
//! - every command but `InitCell` is refused `NotInitialized` until the cell is formed;
//! - `InitCell`: a second one is refused `CellFormed` (the CLI's `cell init` is idempotent by
//!   re-sending the same [`RequestId`], or by reading the refusal, which names the formed
//!   cell); no limit may be zero; the members follow the voter-count rules below and are
//!   registered as nodes, in service;
//! - `RegisterMachine`: a retired id is refused (`MachineRetired`); a registered id in another
//!   role is refused (`RoleChange`); an id that is a tier's feed is refused (`MachineIsAFeed`);
//!   the same id in the same role replaces its address and zone (accepted, `updated`) and
//!   keeps its standing (and a replica its tier). A replica registered this way is on no tier;
//! - `CreateTier`: a taken tier name is refused (`TierNameTaken`; tiers are never removed); a
//!   feed id that is any machine's id (retired ones included) or another tier's feed is refused
//!   (`FeedTaken`). A tier's feed never changes;
//! - `RegisterReplica`: an unknown tier is refused (`UnknownTier`); then the rules of
//!   `RegisterMachine` for role `Replica`; a replica already registered on another tier (or on
//!   none) is refused (`TierChange`): a replica's tier is fixed at registration. Accepted as
//!   `MachineRegistered`;
//! - `SetStanding`: unknown machine refused; `Registered ⇄ Draining` and anything `→ Retired`
//!   are accepted, the same standing is an accepted no-op, and leaving `Retired` is refused.
//!   Retiring a replica removes it from its tier: it hosts none of the tier's journals any more
//!   ([`changes_for`](crate::follow::changes_for)), and it stays listed, retired, on its tier;
//! - `SignUp`: a taken tenant id or a taken name (names are never freed) is refused;
//! - `SetTenantStatus`, `SetQuotas`, `RevokeToken`: the tenant must exist; revoking an already
//!   revoked token id is accepted again (`already`, the contract's "revoking again is 204"); a new
//!   revocation past `revoked_per_tenant_max` is refused;
//! - `AddSigningKey`: a tenant scope must name a known tenant; the key must be a raw Ed25519
//!   key (32 bytes); a key id is unique in the cell and never reused; a scope holds at most
//!   `keys_per_scope_max` live keys. `RetireSigningKey`: unknown kid refused, retiring again is
//!   accepted (`already`); a retired key keeps its id (never reused) and drops its bytes;
//! - `CreateJournal`: unknown tenant refused; a suspended tenant refused; the journal id is
//!   unique in the tenant, deleted journals included; the name is unique among the tenant's
//!   live journals; the tenant's live journals stay within `journals_max`; the voters are
//!   1..=`voters_max`, odd, distinct, each a registered `Node` machine standing `Registered`.
//!   The journal is placed on the `default` tier when that tier exists, else on no tier;
//! - `CreateJournalOnTier`: the rules of `CreateJournal`, and an unknown tier is refused
//!   (`UnknownTier`, judged after the tenant and journal-id rules, before the name, quota and
//!   voter rules: the gateway answers it 400, which the contract puts before 409).
//!   A journal's tier and feed (copied from its tier) are fixed at creation, so the
//!   configuration its voters run it with never changes;
//! - `DeleteJournal`: no live journal of that name in the tenant (never created, or deleted
//!   already) is refused `UnknownJournal`; deleting frees the name and keeps a tombstone (the
//!   id is never reused, and nodes learn to drop the journal's data);
//! - `Admit`, `Rejoin`, `MoveSeat`, `MoveDone` (issue 34: identities and seat moves): the rules
//!   are written on `directory/seats.rs`.
//!
//! **Idempotency window.** The verdict of each request id is kept, for the last
//! [`Limits::verdicts_max`] ids judged (bounded, FIFO by position). A record whose id is still
//! in the window changes nothing and keeps the first verdict, so a command appended twice (a
//! retried write, a new coordinator re-sending) takes effect once. The window is part of the
//! state, so it survives checkpoints. An id older than the window is judged again; the
//! commands that create things carry their own ids (tenant, journal, key), so a replay of one
//! of those is refused as taken rather than applied twice.
//!
//! A record that does not decode is refused `Malformed` under its request id when that much
//! decoded, and counted in [`Directory::undecodable`] either way.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use paros_client::{Checkpointable, Seq};
use paros_core::ids::{JournalId, JournalKey, NodeId, TenantId};
use paros_core::journal::WriterMode;
use paros_core::{Assignment, JournalConfig};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::command::{
    CellId, Command, Epoch, Incarnation, KeyScope, Limits, Member, PUBLIC_KEY_LEN, Quotas, Record, RequestId, Role,
    Standing, TenantStatus,
};
use crate::names::{BusAddress, JournalName, KeyId, TenantName, TierName, TokenId, Zone};
use crate::verdict::{Accepted, LimitField, Refusal, Verdict, VoterRefusal};

mod seats;
mod v2;
mod v3;

/// The checkpoint format version this crate writes. Version 2 added tiers (and the tier of
/// machines and journals); version 3 machines' incarnations and replacements and journals'
/// epochs and seat moves; version 4 journals' founding voters. A version 3 checkpoint is
/// restored with every journal's founders its voters (one that moved is refused); a version 2
/// one as a state with no incarnation recorded, every journal at epoch 0 and no move in
/// progress; a version 1 checkpoint is refused (`UnknownVersion`). Version 5 records the
/// registry journal among the journals (its seats move as any journal's do); a checkpoint of
/// an earlier version is restored with it added, as formation records it.
pub const CHECKPOINT_VERSION: u8 = 5;

/// The tenant of the cell's own journal, the registry journal; no tenant is given it.
pub const CELL_TENANT: TenantId = TenantId(0);

/// The formed cell.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Cell {
    pub id: CellId,
    /// The registry journal's id (its tenant is `TenantId(0)`, which no tenant is given).
    pub registry: JournalId,
    /// The founding nodes, the registry journal's voters.
    pub members: Vec<NodeId>,
    pub limits: Limits,
    #[serde(with = "crate::seq_serde")]
    pub formed_at: Seq,
}

impl Cell {
    /// The registry journal's key.
    pub fn registry_key(&self) -> JournalKey {
        JournalKey { tenant: CELL_TENANT, journal: self.registry }
    }

    /// The registry journal as formation records it: named `registry`, single-writer, its
    /// members its founding voters, on no tier. From then on its seats move as any journal's
    /// (docs/reconfiguration.md); no tenant can address it.
    fn registry_journal(&self) -> Journal {
        let voters: Box<[NodeId]> = self.members.clone().into();
        Journal {
            key: self.registry_key(),
            name: JournalName::parse("registry").expect("a valid journal name"),
            mode: WriterMode::Single,
            founders: voters.clone(),
            voters,
            left: Box::new([]),
            tier: None,
            feed: None,
            created_at: self.formed_at,
            deleted_at: None,
            epoch: Epoch(0),
            moving: None,
        }
    }
}

/// A registered machine.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub id: NodeId,
    pub role: Role,
    pub bus_address: BusAddress,
    pub zone: Zone,
    pub standing: Standing,
    #[serde(with = "crate::seq_serde")]
    pub registered_at: Seq,
    /// A replica's tier, fixed at registration: `None` for nodes and gateways, and for a
    /// replica registered by `RegisterMachine`.
    pub tier: Option<TierName>,
    /// Its store's incarnation, recorded by `Admit` or `Rejoin`; `None` for a machine
    /// registered otherwise and never admitted since (the founders, `RegisterMachine`).
    pub incarnation: Option<Incarnation>,
    /// The new identity this machine came back as (`Rejoin`): it is retired, and never votes
    /// or is placed again.
    pub replaced_by: Option<NodeId>,
    /// The old identity this machine replaces (`Rejoin`).
    pub replaces: Option<NodeId>,
}

impl Machine {
    /// Whether it is an old identity, replaced by a new one.
    pub fn is_replaced(&self) -> bool {
        self.replaced_by.is_some()
    }
}

/// A replica tier: a feed and the replicas registered on it ([`Directory::replicas_of`]).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Tier {
    pub name: TierName,
    /// The bus address the voters of the tier's journals send their chosen batches to; the bus
    /// fans each one out to the tier's replicas. Never a machine's id; never changes.
    pub feed: NodeId,
    /// The registry position of the `CreateTier` that created it.
    #[serde(with = "crate::seq_serde")]
    pub created_at: Seq,
}

/// A tenant.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Tenant {
    pub id: TenantId,
    pub name: TenantName,
    pub status: TenantStatus,
    pub quotas: Quotas,
    /// Revoked token ids; the gateway refuses tokens carrying one.
    pub revoked: BTreeSet<TokenId>,
}

/// A signing key, live or retired.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct SigningKey {
    pub kid: KeyId,
    pub scope: KeyScope,
    /// The raw Ed25519 public key; empty once retired.
    pub public_key: Bytes,
    pub retired: bool,
}

/// A journal, live or deleted.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Journal {
    pub key: JournalKey,
    pub name: JournalName,
    pub mode: WriterMode,
    pub voters: Box<[NodeId]>,
    /// The voters it was created with, fixed for life: every machine that hosts it is placed
    /// with them ([`Journal::config`]), and its own log moves its voters from there
    /// (docs/reconfiguration.md).
    pub founders: Box<[NodeId]>,
    /// The machines a seat of it moved off (`MoveDone`'s `from`), each once, in the order they
    /// first left: bounded by the machines the cell admitted. Such a machine may take a seat
    /// again; it is placed from the epoch in force ([`Journal::seat_epoch`]).
    pub left: Box<[NodeId]>,
    /// The tier it is placed on, fixed at creation.
    pub tier: Option<TierName>,
    /// Its tier's feed, copied at creation (a tier's feed never changes, and the journal's
    /// configuration does not either): the journal's only learner.
    pub feed: Option<NodeId>,
    /// The registry position of the `CreateJournal` that created it.
    #[serde(with = "crate::seq_serde")]
    pub created_at: Seq,
    /// The registry position of the `DeleteJournal` that deleted it.
    #[serde(with = "crate::seq_serde::option")]
    pub deleted_at: Option<Seq>,
    /// The epoch of `voters`: 0 at creation, one more for each seat move recorded done.
    pub epoch: Epoch,
    /// The seat move in progress, if any: the registry's intent, decided in the journal's own
    /// log and recorded done by `MoveDone`.
    pub moving: Option<SeatMove>,
}

/// A seat move in progress: the journal's next configuration is its voters with `from`
/// replaced by `to` (in place: the first voter stays first unless it is the one moved), at
/// `epoch` (the journal's epoch plus one).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct SeatMove {
    pub from: NodeId,
    pub to: NodeId,
    pub epoch: Epoch,
    /// The registry position of the `MoveSeat` that recorded it.
    #[serde(with = "crate::seq_serde")]
    pub at: Seq,
}

impl Journal {
    /// Whether the journal is live (not deleted).
    pub fn is_live(&self) -> bool {
        self.deleted_at.is_none()
    }

    /// Whether the journal is live and `node` hosts it: one of its voters, or the machine a
    /// seat of it is moving to (it hosts the journal to catch up before it votes; rule 5).
    pub fn is_placed_on(&self, node: NodeId) -> bool {
        self.is_live() && (self.voters.contains(&node) || self.moving.is_some_and(|m| m.to == node))
    }

    /// Whether the journal is live and fed at `feed` (a replica of that tier hosts it).
    pub fn is_fed_at(&self, feed: NodeId) -> bool {
        self.is_live() && self.feed == Some(feed)
    }

    /// The configuration every machine hosting it is placed with, for its whole life: its
    /// founding voters (its log decides the voters in force from there), and its tier's feed
    /// as learner, or none.
    pub fn config(&self) -> JournalConfig {
        JournalConfig { mode: self.mode, voters: self.founders.to_vec(), learners: self.feed.into_iter().collect() }
    }

    /// The voters of the next configuration while a seat move is in progress.
    pub fn next_voters(&self) -> Option<Vec<NodeId>> {
        let m = self.moving?;
        Some(self.voters.iter().map(|&v| if v == m.from { m.to } else { v }).collect())
    }

    /// Whether the journal is live and a seat of it is moving to `node`.
    pub fn is_joining(&self, node: NodeId) -> bool {
        self.is_live() && self.moving.is_some_and(|m| m.to == node)
    }

    /// The epoch `node`'s part in the journal begins in, were the journal placed there now on
    /// a store that holds nothing of it: a move's target begins in the move's epoch, any other
    /// machine in the epoch in force (0 until the journal first moved). A store placed so
    /// answers no ballot of an earlier configuration — whose promises it never made, or gave
    /// back with the journal's bytes when a seat moved off it (docs/reconfiguration.md, rule
    /// 13) — so a machine may take a seat of a journal it held before. The directory's epoch
    /// only follows the journal's (a `MoveDone` is recorded after the stop-sign is decided), so
    /// it never names an epoch the journal has not reached.
    pub fn seat_epoch(&self, node: NodeId) -> u64 {
        match self.moving {
            Some(m) if m.to == node => m.epoch.0,
            _ => self.epoch.0,
        }
    }

    /// How `node` is placed with the journal: its [`config`](Self::config), from its
    /// [`seat_epoch`](Self::seat_epoch).
    pub fn assignment(&self, node: NodeId) -> Assignment {
        Assignment { key: self.key, config: self.config(), epoch: self.seat_epoch(node) }
    }

    /// Whether `config` is [`config`](Self::config) (compared in place, no copy).
    pub fn runs_as(&self, config: &JournalConfig) -> bool {
        config.mode == self.mode
            && config.voters[..] == self.founders[..]
            && config.learners[..] == self.feed.as_slice()[..]
    }
}

/// A request's verdict and the position of the record that earned it.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Judged {
    #[serde(with = "crate::seq_serde")]
    pub at: Seq,
    pub verdict: Verdict,
}

/// What a checkpoint holds: every map sorted by its key, so the encoding is a pure function of
/// the state.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
struct State {
    cell: Option<Cell>,
    machines: BTreeMap<NodeId, Machine>,
    tiers: BTreeMap<TierName, Tier>,
    tenants: BTreeMap<TenantId, Tenant>,
    keys: BTreeMap<KeyId, SigningKey>,
    journals: BTreeMap<JournalKey, Journal>,
    verdicts: BTreeMap<RequestId, Judged>,
    undecodable: u64,
}

/// What is derived from [`State`] to answer queries quickly; rebuilt on restore, never encoded.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
struct Index {
    tenant_names: BTreeMap<TenantName, TenantId>,
    /// Live journals only, by tenant, then name (a lookup by a borrowed name copies nothing).
    journal_names: BTreeMap<TenantId, BTreeMap<JournalName, JournalId>>,
    /// The request ids of the window, oldest first.
    verdict_order: VecDeque<(Seq, RequestId)>,
    /// Live journals where the node is a voter, or the target of a seat move in progress.
    load: BTreeMap<NodeId, usize>,
    live_journals: BTreeMap<TenantId, u32>,
    live_keys: BTreeMap<KeyScope, u32>,
}

/// Why bytes are not a checkpoint of a directory.
#[derive(Clone, PartialEq, Eq, Debug, Error)]
pub enum RestoreError {
    #[error("an empty directory checkpoint")]
    Empty,
    #[error("directory checkpoint version {0} is not one this build restores")]
    UnknownVersion(u8),
    #[error("malformed directory checkpoint: {0}")]
    Malformed(String),
    #[error("a directory checkpoint with {0} trailing bytes")]
    Trailing(usize),
    #[error("an inconsistent directory checkpoint: {0}")]
    Inconsistent(&'static str),
    /// The bytes decode, but are not what this build encodes for the state they hold; refused
    /// so that `checkpoint(restore(b)) == b` always holds.
    #[error("a directory checkpoint that is not in canonical form")]
    NotCanonical,
}

/// The registry's fold. Build an empty one with [`Directory::default`].
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Directory {
    state: State,
    index: Index,
}

impl Directory {
    /// The empty directory of a registry journal nothing was written to.
    pub fn new() -> Self {
        Self::default()
    }

    /// The limits in force: the cell's, or the defaults before it is formed.
    pub fn limits(&self) -> Limits {
        self.state.cell.as_ref().map(|c| c.limits).unwrap_or_default()
    }

    /// The verdict of a request id still in the window.
    pub fn answer(&self, id: RequestId) -> Option<Verdict> {
        self.state.verdicts.get(&id).map(|j| j.verdict.clone())
    }

    /// The verdict of a request id still in the window, and the position that earned it.
    pub fn judged(&self, id: RequestId) -> Option<&Judged> {
        self.state.verdicts.get(&id)
    }

    /// How many request ids the window holds now.
    pub fn verdicts_len(&self) -> usize {
        self.state.verdicts.len()
    }

    /// How many records did not decode.
    pub fn undecodable(&self) -> u64 {
        self.state.undecodable
    }

    /// The formed cell, if any.
    pub fn cell(&self) -> Option<&Cell> {
        self.state.cell.as_ref()
    }

    pub fn machine(&self, id: NodeId) -> Option<&Machine> {
        self.state.machines.get(&id)
    }

    /// Every machine, by id.
    pub fn machines(&self) -> impl Iterator<Item = &Machine> {
        self.state.machines.values()
    }

    /// The machines of one role, by id (retired ones included: check the standing).
    pub fn machines_by_role(&self, role: Role) -> impl Iterator<Item = &Machine> {
        self.machines().filter(move |m| m.role == role)
    }

    /// Every tier, by name; its replicas are [`replicas_of`](Self::replicas_of).
    pub fn tiers(&self) -> impl Iterator<Item = &Tier> {
        self.state.tiers.values()
    }

    /// The tier named `name`.
    pub fn tier(&self, name: &TierName) -> Option<&Tier> {
        self.state.tiers.get(name)
    }

    /// The tier fed at `feed`.
    pub fn tier_fed_at(&self, feed: NodeId) -> Option<&Tier> {
        self.tiers().find(|t| t.feed == feed)
    }

    /// The replicas registered on `tier`, by id (retired ones included: check the standing).
    pub fn replicas_of<'a>(&'a self, tier: &'a TierName) -> impl Iterator<Item = &'a Machine> + 'a {
        self.machines_by_role(Role::Replica).filter(move |m| m.tier.as_ref() == Some(tier))
    }

    /// The live journals fed at `feed` (the journals of that feed's tier), by key.
    pub fn journals_fed_at(&self, feed: NodeId) -> impl Iterator<Item = &Journal> {
        self.state.journals.values().filter(move |j| j.is_fed_at(feed))
    }

    pub fn tenant(&self, id: TenantId) -> Option<&Tenant> {
        self.state.tenants.get(&id)
    }

    pub fn tenant_by_name(&self, name: &TenantName) -> Option<&Tenant> {
        self.index.tenant_names.get(name).and_then(|id| self.tenant(*id))
    }

    /// Every tenant, by id.
    pub fn tenants(&self) -> impl Iterator<Item = &Tenant> {
        self.state.tenants.values()
    }

    /// Whether the tenant revoked the token id.
    pub fn is_revoked(&self, tenant: TenantId, jti: &TokenId) -> bool {
        self.tenant(tenant).is_some_and(|t| t.revoked.contains(jti))
    }

    pub fn signing_key(&self, kid: &KeyId) -> Option<&SigningKey> {
        self.state.keys.get(kid)
    }

    /// The keys of one scope (retired ones included), by kid.
    pub fn signing_keys(&self, scope: KeyScope) -> impl Iterator<Item = &SigningKey> {
        self.state.keys.values().filter(move |k| k.scope == scope)
    }

    /// The registry journal, once the cell is formed.
    pub fn registry_journal(&self) -> Option<&Journal> {
        self.journal(self.state.cell.as_ref()?.registry_key())
    }

    /// A journal by key, live or deleted.
    pub fn journal(&self, key: JournalKey) -> Option<&Journal> {
        self.state.journals.get(&key)
    }

    /// The live journal of `tenant` named `name`.
    pub fn journal_by_name(&self, tenant: TenantId, name: &JournalName) -> Option<&Journal> {
        let journal = *self.index.journal_names.get(&tenant)?.get(name)?;
        self.journal(JournalKey { tenant, journal })
    }

    /// The live journals of a tenant, by id.
    pub fn journals_of(&self, tenant: TenantId) -> impl Iterator<Item = &Journal> {
        let from = JournalKey { tenant, journal: JournalId(0) };
        let to = JournalKey { tenant, journal: JournalId(u64::MAX) };
        self.state.journals.range(from..=to).map(|(_, j)| j).filter(|j| j.is_live())
    }

    /// How many live journals a tenant holds: the count its journal quota is judged against.
    pub fn live_journals(&self, tenant: TenantId) -> u32 {
        self.index.live_journals.get(&tenant).copied().unwrap_or(0)
    }

    /// Every journal, live or deleted, by key.
    pub fn journals(&self) -> impl Iterator<Item = &Journal> {
        self.state.journals.values()
    }

    /// The live journals placed on `node` (it is one of their voters, or a seat of theirs is
    /// moving to it), by key. The registry journal itself is the cell's ([`Cell::members`]),
    /// not listed here.
    pub fn journals_on(&self, node: NodeId) -> impl Iterator<Item = &Journal> {
        self.state.journals.values().filter(move |j| j.is_placed_on(node))
    }

    /// How many seats of live journals `node` holds, or is the target of a move for.
    pub fn load(&self, node: NodeId) -> usize {
        self.index.load.get(&node).copied().unwrap_or(0)
    }

    /// The size of the encoded state: what a checkpoint costs, and the base of the
    /// checkpoint policy.
    pub fn state_len(&self) -> usize {
        self.encode().len()
    }

    fn encode(&self) -> Vec<u8> {
        encode_state(CHECKPOINT_VERSION, &self.state)
    }

    /// Folds one registry record at `at`; the verdict is then [`answer`](Self::answer)`(id)`.
    pub fn apply_record(&mut self, at: Seq, bytes: &[u8]) {
        match Record::decode(bytes) {
            Ok(record) => {
                if self.state.verdicts.contains_key(&record.id) {
                    return;
                }
                let verdict = self.judge(at, record.command);
                self.keep(record.id, at, verdict);
            }
            Err(e) => {
                self.state.undecodable += 1;
                if let Some(id) = e.request_id()
                    && !self.state.verdicts.contains_key(&id)
                {
                    let reason = e.to_string();
                    self.keep(id, at, Verdict::Refused(Refusal::Malformed { reason }));
                }
            }
        }
    }

    fn keep(&mut self, id: RequestId, at: Seq, verdict: Verdict) {
        self.state.verdicts.insert(id, Judged { at, verdict });
        self.index.verdict_order.push_back((at, id));
        let max = self.limits().verdicts_max as usize;
        while self.index.verdict_order.len() > max {
            if let Some((_, old)) = self.index.verdict_order.pop_front() {
                self.state.verdicts.remove(&old);
            }
        }
    }

    /// Judges `command` at `at`, applying it when it is accepted.
    fn judge(&mut self, at: Seq, command: Command) -> Verdict {
        let result = match command {
            Command::InitCell { cell, members, registry, limits } => {
                self.init_cell(at, cell, members, registry, limits)
            }
            _ if self.state.cell.is_none() => Err(Refusal::NotInitialized),
            Command::RegisterMachine { id, role, bus_address, zone } => {
                self.register_machine(at, id, role, bus_address, zone)
            }
            Command::SetStanding { machine, standing } => self.set_standing(machine, standing),
            Command::SignUp { tenant, name, quotas } => self.sign_up(tenant, name, quotas),
            Command::SetTenantStatus { tenant, status } => self.tenant_mut(tenant).map(|t| {
                t.status = status;
                Accepted::TenantStatusSet { tenant, status }
            }),
            Command::SetQuotas { tenant, quotas } => self.tenant_mut(tenant).map(|t| {
                t.quotas = quotas;
                Accepted::QuotasSet { tenant }
            }),
            Command::AddSigningKey { scope, kid, public_key } => self.add_key(scope, kid, public_key),
            Command::RetireSigningKey { kid } => self.retire_key(kid),
            Command::RevokeToken { tenant, jti } => self.revoke(tenant, jti),
            Command::CreateJournal { tenant, journal, name, mode, voters } => {
                let new = NewJournal { tenant, journal, name, mode, voters };
                self.create_journal(at, new, None)
            }
            Command::DeleteJournal { tenant, name } => self.delete_journal(at, tenant, name),
            Command::CreateTier { tier, feed } => self.create_tier(at, tier, feed),
            Command::RegisterReplica { id, tier, bus_address, zone } => {
                self.register_replica(at, id, tier, bus_address, zone)
            }
            Command::CreateJournalOnTier { tenant, journal, name, mode, voters, tier } => {
                let new = NewJournal { tenant, journal, name, mode, voters };
                self.create_journal(at, new, Some(tier))
            }
            Command::Admit { id, role, bus_address, zone, incarnation } => {
                self.register(at, id, role, None, bus_address, zone, Some(incarnation))
            }
            Command::Rejoin { old, new, bus_address, zone, incarnation } => {
                self.rejoin(at, old, new, bus_address, zone, incarnation)
            }
            Command::MoveSeat { journal, from, to } => self.move_seat(at, journal, from, to),
            Command::MoveDone { journal, epoch } => self.move_done(journal, epoch),
        };
        match result {
            Ok(accepted) => Verdict::Accepted(accepted),
            Err(refusal) => Verdict::Refused(refusal),
        }
    }

    fn init_cell(
        &mut self,
        at: Seq,
        cell: CellId,
        members: Vec<Member>,
        registry: JournalId,
        limits: Limits,
    ) -> Result<Accepted, Refusal> {
        if let Some(formed) = &self.state.cell {
            return Err(Refusal::CellFormed { cell: formed.id });
        }
        let zero = [
            (limits.verdicts_max, LimitField::VerdictsMax),
            (limits.voters_max, LimitField::VotersMax),
            (limits.revoked_per_tenant_max, LimitField::RevokedPerTenantMax),
            (limits.keys_per_scope_max, LimitField::KeysPerScopeMax),
        ];
        if let Some((_, field)) = zero.iter().find(|(v, _)| *v == 0) {
            return Err(Refusal::BadLimits { field: *field });
        }
        let ids: Vec<NodeId> = members.iter().map(|m| m.id).collect();
        voter_shape(&ids, limits.voters_max).map_err(Refusal::Voters)?;
        for m in members {
            self.state.machines.insert(
                m.id,
                Machine {
                    id: m.id,
                    role: Role::Node,
                    bus_address: m.bus_address,
                    zone: m.zone,
                    standing: Standing::Registered,
                    registered_at: at,
                    tier: None,
                    incarnation: None,
                    replaced_by: None,
                    replaces: None,
                },
            );
        }
        let formed = Cell { id: cell, registry, members: ids, limits, formed_at: at };
        self.record_registry_journal(&formed);
        self.state.cell = Some(formed);
        Ok(Accepted::CellFormed { cell })
    }

    fn register_machine(
        &mut self,
        at: Seq,
        id: NodeId,
        role: Role,
        bus_address: BusAddress,
        zone: Zone,
    ) -> Result<Accepted, Refusal> {
        self.register(at, id, role, None, bus_address, zone, None)
    }

    /// `RegisterMachine`'s rules; `tier` is `Some` for a `RegisterReplica` (its tier is known),
    /// `incarnation` for an `Admit` (recorded the first time, refused when another is).
    #[allow(clippy::too_many_arguments)]
    fn register(
        &mut self,
        at: Seq,
        id: NodeId,
        role: Role,
        tier: Option<TierName>,
        bus_address: BusAddress,
        zone: Zone,
        incarnation: Option<Incarnation>,
    ) -> Result<Accepted, Refusal> {
        if let Some(t) = self.tier_fed_at(id) {
            return Err(Refusal::MachineIsAFeed { machine: id, tier: t.name.clone() });
        }
        if let Some(m) = self.state.machines.get_mut(&id) {
            if m.standing == Standing::Retired {
                return Err(Refusal::MachineRetired { machine: id });
            }
            if m.role != role {
                return Err(Refusal::RoleChange { machine: id, registered: m.role });
            }
            if tier.is_some() && m.tier != tier {
                return Err(Refusal::TierChange { machine: id, registered: m.tier.clone() });
            }
            if let (Some(recorded), Some(offered)) = (m.incarnation, incarnation)
                && recorded != offered
            {
                return Err(Refusal::IncarnationChanged { machine: id, recorded, offered });
            }
            m.bus_address = bus_address;
            m.zone = zone;
            m.incarnation = m.incarnation.or(incarnation);
            return Ok(Accepted::MachineRegistered { machine: id, updated: true });
        }
        let standing = Standing::Registered;
        let (replaced_by, replaces) = (None, None);
        let machine = Machine {
            id,
            role,
            bus_address,
            zone,
            standing,
            registered_at: at,
            tier,
            incarnation,
            replaced_by,
            replaces,
        };
        self.state.machines.insert(id, machine);
        Ok(Accepted::MachineRegistered { machine: id, updated: false })
    }

    fn register_replica(
        &mut self,
        at: Seq,
        id: NodeId,
        tier: TierName,
        bus_address: BusAddress,
        zone: Zone,
    ) -> Result<Accepted, Refusal> {
        if !self.state.tiers.contains_key(&tier) {
            return Err(Refusal::UnknownTier { tier });
        }
        self.register(at, id, Role::Replica, Some(tier), bus_address, zone, None)
    }

    fn create_tier(&mut self, at: Seq, tier: TierName, feed: NodeId) -> Result<Accepted, Refusal> {
        if self.state.tiers.contains_key(&tier) {
            return Err(Refusal::TierNameTaken { tier });
        }
        if self.state.machines.contains_key(&feed) || self.tier_fed_at(feed).is_some() {
            return Err(Refusal::FeedTaken { feed });
        }
        self.state.tiers.insert(tier.clone(), Tier { name: tier.clone(), feed, created_at: at });
        Ok(Accepted::TierCreated { tier, feed })
    }

    fn set_standing(&mut self, machine: NodeId, standing: Standing) -> Result<Accepted, Refusal> {
        let m = self.state.machines.get_mut(&machine).ok_or(Refusal::UnknownMachine { machine })?;
        let changed = m.standing != standing;
        if changed && m.standing == Standing::Retired {
            return Err(Refusal::MachineRetired { machine });
        }
        m.standing = standing;
        Ok(Accepted::StandingSet { machine, standing, changed })
    }

    /// Records the registry journal of `cell` among the journals, with the index entries any
    /// live journal has.
    fn record_registry_journal(&mut self, cell: &Cell) {
        let j = cell.registry_journal();
        for v in j.voters.iter() {
            *self.index.load.entry(*v).or_insert(0) += 1;
        }
        self.index.journal_names.entry(CELL_TENANT).or_default().insert(j.name.clone(), j.key.journal);
        *self.index.live_journals.entry(CELL_TENANT).or_insert(0) += 1;
        self.state.journals.insert(j.key, j);
    }

    fn sign_up(&mut self, tenant: TenantId, name: TenantName, quotas: Quotas) -> Result<Accepted, Refusal> {
        // The cell's own tenant is taken from the start: a tenant of that id could address
        // the registry journal.
        if self.state.tenants.contains_key(&tenant) || tenant == CELL_TENANT {
            return Err(Refusal::TenantIdTaken { tenant });
        }
        if self.index.tenant_names.contains_key(&name) {
            return Err(Refusal::TenantNameTaken { name });
        }
        self.index.tenant_names.insert(name.clone(), tenant);
        self.state.tenants.insert(
            tenant,
            Tenant { id: tenant, name, status: TenantStatus::Active, quotas, revoked: BTreeSet::new() },
        );
        Ok(Accepted::SignedUp { tenant })
    }

    fn tenant_mut(&mut self, tenant: TenantId) -> Result<&mut Tenant, Refusal> {
        self.state.tenants.get_mut(&tenant).ok_or(Refusal::UnknownTenant { tenant })
    }

    fn add_key(&mut self, scope: KeyScope, kid: KeyId, public_key: Bytes) -> Result<Accepted, Refusal> {
        if let KeyScope::Tenant(tenant) = scope {
            self.tenant_mut(tenant)?;
        }
        if public_key.len() != PUBLIC_KEY_LEN {
            return Err(Refusal::KeyLength { len: public_key.len(), want: PUBLIC_KEY_LEN });
        }
        if self.state.keys.contains_key(&kid) {
            return Err(Refusal::KeyIdTaken { kid });
        }
        let max = self.limits().keys_per_scope_max;
        let live = self.index.live_keys.entry(scope).or_insert(0);
        if *live >= max {
            return Err(Refusal::TooManyKeys { scope, max });
        }
        *live += 1;
        self.state.keys.insert(kid.clone(), SigningKey { kid: kid.clone(), scope, public_key, retired: false });
        Ok(Accepted::SigningKeyAdded { kid })
    }

    fn retire_key(&mut self, kid: KeyId) -> Result<Accepted, Refusal> {
        let Some(key) = self.state.keys.get_mut(&kid) else {
            return Err(Refusal::UnknownKey { kid });
        };
        let already = key.retired;
        if !already {
            key.retired = true;
            key.public_key = Bytes::new();
            decrement(&mut self.index.live_keys, key.scope);
        }
        Ok(Accepted::SigningKeyRetired { kid, already })
    }

    fn revoke(&mut self, tenant: TenantId, jti: TokenId) -> Result<Accepted, Refusal> {
        let max = self.limits().revoked_per_tenant_max;
        let t = self.tenant_mut(tenant)?;
        if t.revoked.contains(&jti) {
            return Ok(Accepted::TokenRevoked { tenant, already: true });
        }
        if t.revoked.len() >= max as usize {
            return Err(Refusal::TooManyRevocations { tenant, max });
        }
        t.revoked.insert(jti);
        Ok(Accepted::TokenRevoked { tenant, already: false })
    }

    /// `CreateJournal` (`tier` is `None`: the default tier when it exists) and
    /// `CreateJournalOnTier` (the tier named, which must exist).
    fn create_journal(&mut self, at: Seq, new: NewJournal, tier: Option<TierName>) -> Result<Accepted, Refusal> {
        let NewJournal { tenant, journal, name, mode, voters } = new;
        let t = self.state.tenants.get(&tenant).ok_or(Refusal::UnknownTenant { tenant })?;
        if t.status == TenantStatus::Suspended {
            return Err(Refusal::TenantSuspended { tenant });
        }
        let key = JournalKey { tenant, journal };
        if self.state.journals.contains_key(&key) {
            return Err(Refusal::JournalIdTaken { key });
        }
        let tier = match tier {
            Some(tier) => Some(self.state.tiers.get(&tier).ok_or(Refusal::UnknownTier { tier })?),
            None => self.state.tiers.get(&TierName::default_tier()),
        };
        let (tier, feed) = (tier.map(|t| t.name.clone()), tier.map(|t| t.feed));
        if self.index.journal_names.get(&tenant).is_some_and(|names| names.contains_key(&name)) {
            return Err(Refusal::JournalNameTaken { tenant, name });
        }
        let live = self.index.live_journals.get(&tenant).copied().unwrap_or(0);
        if live >= t.quotas.journals_max {
            return Err(Refusal::OverJournalQuota { tenant, journals_max: t.quotas.journals_max });
        }
        self.check_voters(&voters).map_err(Refusal::Voters)?;
        *self.index.live_journals.entry(tenant).or_insert(0) += 1;
        for v in &voters {
            *self.index.load.entry(*v).or_insert(0) += 1;
        }
        self.index.journal_names.entry(tenant).or_default().insert(name.clone(), journal);
        let (epoch, moving, deleted_at) = (Epoch(0), None, None);
        let voters_here: Box<[NodeId]> = voters.as_slice().into();
        let founders = voters_here.clone();
        let journal = Journal {
            key,
            name,
            mode,
            voters: voters_here,
            founders,
            left: Box::new([]),
            tier,
            feed,
            created_at: at,
            deleted_at,
            epoch,
            moving,
        };
        self.state.journals.insert(key, journal);
        Ok(Accepted::JournalCreated { key, voters, at })
    }

    /// The voter rules for a new journal: the shape, then each voter a node in service.
    fn check_voters(&self, voters: &[NodeId]) -> Result<(), VoterRefusal> {
        voter_shape(voters, self.limits().voters_max)?;
        for &node in voters {
            self.check_seat(node)?;
        }
        Ok(())
    }

    /// Whether `node` may take a new seat: a known node, not replaced, standing `Registered`.
    fn check_seat(&self, node: NodeId) -> Result<(), VoterRefusal> {
        let m = self.state.machines.get(&node).ok_or(VoterRefusal::Unknown { node })?;
        if m.role != Role::Node {
            return Err(VoterRefusal::NotANode { node, role: m.role });
        }
        if let Some(by) = m.replaced_by {
            return Err(VoterRefusal::Replaced { node, by });
        }
        if m.standing != Standing::Registered {
            return Err(VoterRefusal::NotInService { node, standing: m.standing });
        }
        Ok(())
    }

    fn delete_journal(&mut self, at: Seq, tenant: TenantId, name: JournalName) -> Result<Accepted, Refusal> {
        self.tenant_mut(tenant)?;
        let Some(names) = self.index.journal_names.get_mut(&tenant) else {
            return Err(Refusal::UnknownJournal { tenant, name });
        };
        let Some(journal) = names.remove(&name) else {
            return Err(Refusal::UnknownJournal { tenant, name });
        };
        // A tenant without live journals has no entry, as a rebuilt index has none.
        if names.is_empty() {
            self.index.journal_names.remove(&tenant);
        }
        let key = JournalKey { tenant, journal };
        if let Some(j) = self.state.journals.get_mut(&key) {
            j.deleted_at = Some(at);
            for v in j.voters.iter().chain(j.moving.as_ref().map(|m| &m.to)) {
                decrement(&mut self.index.load, *v);
            }
        }
        decrement(&mut self.index.live_journals, tenant);
        Ok(Accepted::JournalDeleted { key })
    }

    /// Rebuilds the index from the state, refusing a state no fold could have produced.
    fn reindex(state: State) -> Result<Directory, RestoreError> {
        use RestoreError::Inconsistent;
        let mut index = Index::default();
        let mut feeds = BTreeSet::new();
        for (name, t) in &state.tiers {
            if *name != t.name {
                return Err(Inconsistent("a tier filed under another name"));
            }
            if !feeds.insert(t.feed) || state.machines.contains_key(&t.feed) {
                return Err(Inconsistent("a feed shared with another tier or a machine"));
            }
        }
        for (id, m) in &state.machines {
            if *id != m.id {
                return Err(Inconsistent("a machine filed under another id"));
            }
            if let Some(tier) = &m.tier
                && (m.role != Role::Replica || !state.tiers.contains_key(tier))
            {
                return Err(Inconsistent("a machine on a tier that is not a replica or not a tier"));
            }
            if let Some(by) = m.replaced_by
                && (m.standing != Standing::Retired || state.machines.get(&by).and_then(|n| n.replaces) != Some(*id))
            {
                return Err(Inconsistent("a replaced machine not retired, or not named by its replacement"));
            }
            if let Some(old) = m.replaces
                && state.machines.get(&old).and_then(|o| o.replaced_by) != Some(*id)
            {
                return Err(Inconsistent("a replacement its old identity does not name"));
            }
        }
        for (id, t) in &state.tenants {
            if *id != t.id {
                return Err(Inconsistent("a tenant filed under another id"));
            }
            if index.tenant_names.insert(t.name.clone(), t.id).is_some() {
                return Err(Inconsistent("two tenants share a name"));
            }
        }
        for (kid, k) in &state.keys {
            if *kid != k.kid {
                return Err(Inconsistent("a key filed under another id"));
            }
            if let KeyScope::Tenant(t) = k.scope
                && !state.tenants.contains_key(&t)
            {
                return Err(Inconsistent("a key of an unknown tenant"));
            }
            if !k.retired {
                *index.live_keys.entry(k.scope).or_insert(0) += 1;
            }
        }
        for (key, j) in &state.journals {
            if *key != j.key {
                return Err(Inconsistent("a journal filed under another key"));
            }
            let registry = state.cell.as_ref().is_some_and(|c| c.registry_key() == *key);
            if !state.tenants.contains_key(&key.tenant) && !registry {
                return Err(Inconsistent("a journal of an unknown tenant"));
            }
            let tier_feed = match &j.tier {
                Some(t) => Some(state.tiers.get(t).ok_or(Inconsistent("a journal on an unknown tier"))?.feed),
                None => None,
            };
            if j.feed != tier_feed {
                return Err(Inconsistent("a journal whose feed is not its tier's"));
            }
            if j.is_live() {
                if index.journal_names.entry(key.tenant).or_default().insert(j.name.clone(), key.journal).is_some() {
                    return Err(Inconsistent("two live journals share a name"));
                }
                *index.live_journals.entry(key.tenant).or_insert(0) += 1;
                for v in j.voters.iter().chain(j.moving.as_ref().map(|m| &m.to)) {
                    *index.load.entry(*v).or_insert(0) += 1;
                }
            }
            if let Some(m) = &j.moving
                && (m.epoch != j.epoch.next() || !j.voters.contains(&m.from) || j.voters.contains(&m.to))
            {
                return Err(Inconsistent("a seat move that is not from a voter to a non-voter at the next epoch"));
            }
        }
        if let Some(c) = &state.cell
            && !state.journals.get(&c.registry_key()).is_some_and(Journal::is_live)
        {
            return Err(Inconsistent("a formed cell whose registry journal is not recorded"));
        }
        if state
            .journals
            .keys()
            .any(|k| k.tenant == CELL_TENANT && state.cell.as_ref().is_none_or(|c| c.registry != k.journal))
        {
            return Err(Inconsistent("a journal of the cell's tenant that is not its registry journal"));
        }
        let mut order: Vec<(Seq, RequestId)> = state.verdicts.iter().map(|(id, j)| (j.at, *id)).collect();
        order.sort();
        if order.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(Inconsistent("two verdicts earned at one position"));
        }
        let max = state.cell.as_ref().map(|c| c.limits).unwrap_or_default().verdicts_max;
        if order.len() > max as usize {
            return Err(Inconsistent("more verdicts than the window holds"));
        }
        index.verdict_order = order.into();
        Ok(Directory { state, index })
    }

    /// The directory as a format 2 checkpoint (the format before issue 34), for the tests of
    /// the upgrade; `None` when it holds what format 2 cannot say.
    #[doc(hidden)]
    pub fn checkpoint_v2(&self) -> Option<Vec<u8>> {
        v2::encode(&self.state)
    }

    /// The directory as a format 3 checkpoint (before journals kept their founders), for the
    /// tests of the upgrade; `None` when a journal moved.
    #[doc(hidden)]
    pub fn checkpoint_v3(&self) -> Option<Vec<u8>> {
        v3::encode(&self.state)
    }

    /// The directory as a format 4 checkpoint (before the registry journal was recorded among
    /// the journals), for the tests of the upgrade; `None` when its seats moved.
    #[doc(hidden)]
    pub fn checkpoint_v4(&self) -> Option<Vec<u8>> {
        let mut state = self.state.clone();
        if let Some(c) = &state.cell {
            let formed = c.registry_journal();
            if state.journals.remove(&formed.key) != Some(formed) {
                return None;
            }
        }
        Some(encode_state(V4, &state))
    }

    /// Whether the derived index agrees with a rebuild from the state (tests call it after
    /// every record; it costs a copy of the state, so the fold itself does not).
    #[doc(hidden)]
    pub fn index_is_consistent(&self) -> bool {
        Self::reindex(self.state.clone()).is_ok_and(|d| d.index == self.index)
    }
}

/// `state` after the version byte `version`.
fn encode_state(version: u8, state: &State) -> Vec<u8> {
    postcard::to_extend(state, vec![version]).expect("postcard writes every directory state")
}

/// The checkpoint version before the registry journal was recorded among the journals.
const V4: u8 = 4;

/// A state of a checkpoint written before the registry journal was recorded among the
/// journals, with it added as formation records it (nothing could have moved its seats).
fn with_registry_journal(mut state: State) -> State {
    if let Some(c) = &state.cell {
        let j = c.registry_journal();
        state.journals.entry(j.key).or_insert(j);
    }
    state
}

/// What `CreateJournal` and `CreateJournalOnTier` share.
struct NewJournal {
    tenant: TenantId,
    journal: JournalId,
    name: JournalName,
    mode: WriterMode,
    voters: Vec<NodeId>,
}

/// Counts one fewer under `key`, dropping the entry at zero (the index never holds zeros, so
/// it equals a rebuild from the state).
fn decrement<K: Ord, N: Copy + PartialEq + From<u8> + std::ops::Sub<Output = N>>(map: &mut BTreeMap<K, N>, key: K) {
    if let Some(n) = map.get_mut(&key) {
        if *n == N::from(1) {
            map.remove(&key);
        } else {
            *n = *n - N::from(1);
        }
    }
}

/// The shape rules every voter set follows: 1..=max voters, odd, distinct.
fn voter_shape(voters: &[NodeId], max: u32) -> Result<(), VoterRefusal> {
    let count = voters.len();
    if count == 0 || count > max as usize {
        return Err(VoterRefusal::Count { count, max });
    }
    if count.is_multiple_of(2) {
        return Err(VoterRefusal::Even { count });
    }
    let mut seen = BTreeSet::new();
    for &node in voters {
        if !seen.insert(node) {
            return Err(VoterRefusal::Duplicate { node });
        }
    }
    Ok(())
}

impl Checkpointable for Directory {
    type RestoreError = RestoreError;

    fn apply(&mut self, position: Seq, record: &[u8]) {
        self.apply_record(position, record);
    }

    /// The version byte, then the postcard encoding of the state; every map is sorted by key,
    /// so equal directories encode to equal bytes.
    fn checkpoint(&self) -> Vec<u8> {
        self.encode()
    }

    fn restore(bytes: &[u8]) -> Result<Self, RestoreError> {
        let (&version, body) = bytes.split_first().ok_or(RestoreError::Empty)?;
        if version == v2::VERSION {
            return Self::reindex(with_registry_journal(v2::restore(body)?));
        }
        if version == v3::VERSION {
            return Self::reindex(with_registry_journal(v3::restore(body)?));
        }
        if version != CHECKPOINT_VERSION && version != V4 {
            return Err(RestoreError::UnknownVersion(version));
        }
        let (state, rest) =
            postcard::take_from_bytes::<State>(body).map_err(|e| RestoreError::Malformed(e.to_string()))?;
        if !rest.is_empty() {
            return Err(RestoreError::Trailing(rest.len()));
        }
        // Version 4 is version 5's shape without the registry journal: canonical as it was
        // written, then given it.
        let canonical = encode_state(version, &state) == bytes;
        let state = if version == V4 { with_registry_journal(state) } else { state };
        if !canonical {
            return Err(RestoreError::NotCanonical);
        }
        Self::reindex(state)
    }
}

/// A directory shared with its readers: folding it copies it only while a reader still holds
/// the version published before (copy on write), so a follower that publishes what it folded
/// keeps one directory at rest, not two.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct SharedDirectory(std::sync::Arc<Directory>);

impl SharedDirectory {
    /// The directory as folded so far, to publish: a reference, not a copy.
    #[must_use]
    pub fn share(&self) -> std::sync::Arc<Directory> {
        std::sync::Arc::clone(&self.0)
    }
}

impl std::ops::Deref for SharedDirectory {
    type Target = Directory;

    fn deref(&self) -> &Directory {
        &self.0
    }
}

impl Checkpointable for SharedDirectory {
    type RestoreError = RestoreError;

    fn apply(&mut self, position: Seq, record: &[u8]) {
        std::sync::Arc::make_mut(&mut self.0).apply(position, record);
    }

    fn checkpoint(&self) -> Vec<u8> {
        self.0.checkpoint()
    }

    fn restore(bytes: &[u8]) -> Result<Self, RestoreError> {
        Directory::restore(bytes).map(|d| SharedDirectory(std::sync::Arc::new(d)))
    }
}
