//! The operator's cell routes (issue 34): `GET /v1/admin/cell` (machines, seats per machine,
//! seat moves in progress, journals below full strength), `POST /v1/admin/machines` (admit),
//! `POST /v1/admin/machines/{node}/drain|retire` and
//! `POST /v1/admin/journals/{tenant}/{journal}/move`. Each change is one registry command
//! (`Admit`, `SetStanding`, `MoveSeat`) judged by the fold; its refusals map to the operator
//! codes ([`OperatorCode`]); input that does not parse is 400 and sends nothing.
//!
//! A route records intent: the registry records a move (`MoveSeat`), and its mover, beside the
//! coordinator, carries it out — the journal decides `Reconfigure` in its own log, the new
//! voters confirm, and the mover records `MoveDone` (docs/reconfiguration.md). Nothing here
//! sends `MoveDone`.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use paros_core::NodeId;
use paros_registry::{
    BusAddress, Command, Directory, Incarnation, Machine, MoveRefusal, Op, Refusal, Role, Standing, TenantName,
    Verdict, VoterRefusal, Zone,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::access::parse_name;
use crate::auth::{Principal, tenant_text};
use crate::error::{ApiError, ApiResult, OperatorCode};
use crate::fleet::{self, Liveness, Seats};
use crate::routes::machines::{node_id, node_of};
use crate::state::Gateway;
use crate::wire::{json, json_body, no_query};

/// A machine of the cell, as the registry records it, with its seats and its liveness.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct CellMachineBody {
    /// The node id (16 lowercase hex digits).
    pub node: String,
    /// `node`, `replica` or `gateway`.
    pub role: &'static str,
    pub zone: String,
    pub bus_address: String,
    /// A read replica's tier; null for any other machine.
    pub tier: Option<String>,
    /// `registered` (in service), `draining` or `retired`.
    pub standing: &'static str,
    /// Its store's incarnation (16 hex digits), once admitted with one; null before.
    pub incarnation: Option<String>,
    /// The new identity this machine came back as (it is retired and never votes again).
    pub replaced_by: Option<String>,
    /// The old identity this machine replaces.
    pub replaces: Option<String>,
    /// `alive` (the cell's node port reports it now), `unseen` (it does not), `unknown` (this
    /// gateway has no node port, or the machine is a gateway).
    pub liveness: &'static str,
    /// Seconds since this gateway last saw the node port report it; null when it never did.
    pub seen_s_ago: Option<u64>,
    /// Live journals it votes for.
    pub seats: u64,
    /// Seat moves in progress that target it.
    pub joining: u64,
}

/// A seat move the registry recorded and has not recorded done: pending.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct SeatMoveBody {
    /// `tenant-name/journal-name`.
    pub journal: String,
    /// The tenant id (16 lowercase hex digits).
    pub tenant: String,
    pub from: String,
    pub to: String,
    /// The journal's configuration epoch once the move is done (its epoch now plus one).
    pub epoch: u64,
    /// The registry position of the `MoveSeat` that recorded it.
    pub recorded_at: u64,
}

/// A voter that does not count toward its journal's full strength, and why.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct WeakVoterBody {
    pub node: String,
    /// `retired`, `replaced`, `unseen` (the node port does not report it) or `unknown_machine`.
    pub why: &'static str,
}

/// A live journal with at least one voter that does not count toward its full strength.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct WeakJournalBody {
    /// `tenant-name/journal-name`.
    pub journal: String,
    pub tenant: String,
    pub voters: Vec<String>,
    pub weak: Vec<WeakVoterBody>,
    /// Whether a seat move of it is in progress.
    pub moving: bool,
}

/// `GET /v1/admin/cell`. Every list holds at most `cell_list_max` entries; the `_total`s count
/// them all.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct CellStatusBody {
    /// The gateway's clock when it assembled the answer (Unix milliseconds).
    pub generated_at_ms: u64,
    /// Whether this gateway was given its cell's node port (else every liveness is `unknown`).
    pub node_counters: bool,
    /// The machines, by id.
    pub machines: Vec<CellMachineBody>,
    pub machines_total: u64,
    /// Seat moves in progress (recorded, not yet recorded done), by journal key.
    pub moves: Vec<SeatMoveBody>,
    pub moves_total: u64,
    /// Seat moves the registry recorded done, ever.
    pub moves_done: u64,
    /// Live journals below full strength, by journal key.
    pub below_full_strength: Vec<WeakJournalBody>,
    pub below_full_strength_total: u64,
    /// The bound on each list (`cell_list_max`).
    pub list_max: u64,
}

/// A machine's role, as an admit names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RoleName {
    Node,
    Replica,
    Gateway,
}

impl From<RoleName> for Role {
    fn from(r: RoleName) -> Role {
        match r {
            RoleName::Node => Role::Node,
            RoleName::Replica => Role::Replica,
            RoleName::Gateway => Role::Gateway,
        }
    }
}

/// `POST /v1/admin/machines`: admit a machine with its store's incarnation (registry `Admit`).
#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdmitRequest {
    /// The machine's id: 1 to 16 hex digits, not 0.
    #[schema(pattern = "^[0-9a-fA-F]{1,16}$")]
    pub id: String,
    pub role: RoleName,
    /// Where it listens on the bus: 1 to 255 printable ASCII characters, no spaces.
    #[schema(pattern = "^[!-~]{1,255}$")]
    pub bus_address: String,
    /// Its failure zone, `^[a-z0-9][a-z0-9-]{0,62}$`.
    #[schema(pattern = "^[a-z0-9][a-z0-9-]{0,62}$")]
    pub zone: String,
    /// Its store's incarnation, as the machine's store recorded it: 1 to 16 hex digits, not 0.
    #[schema(pattern = "^[0-9a-fA-F]{1,16}$")]
    pub incarnation: String,
}

/// `POST /v1/admin/journals/{tenant}/{journal}/move`: move the journal's seat from voter `from`
/// to node `to` (registry `MoveSeat`: intent only).
#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveRequest {
    /// The voter giving its seat up: 1 to 16 hex digits.
    #[schema(pattern = "^[0-9a-fA-F]{1,16}$")]
    pub from: String,
    /// The node taking it: 1 to 16 hex digits.
    #[schema(pattern = "^[0-9a-fA-F]{1,16}$")]
    pub to: String,
}

fn admin(p: &Principal) -> ApiResult<()> {
    match p {
        Principal::Admin { .. } => Ok(()),
        Principal::Tenant(_) => {
            Err(ApiError::forbidden("the cell's machines are the operator's: it needs an admin token"))
        }
    }
}

fn hex(n: u64) -> String {
    format!("{n:016x}")
}

/// A non-zero id or incarnation in hex (1 to 16 digits), or 400.
fn nonzero_hex(raw: &str, what: &str) -> ApiResult<u64> {
    match node_id(raw) {
        Some(NodeId(0)) | None => Err(ApiError::malformed(format!("{what} is 1 to 16 hex digits, not 0"))),
        Some(NodeId(n)) => Ok(n),
    }
}

/// The ids the node port reports now (`None`: no port), noting each as seen.
fn reported(g: &Gateway) -> Option<BTreeSet<NodeId>> {
    g.inner.metrics.node_stats().map(|all| all.into_iter().map(|c| c.node).collect())
}

fn machine_body(g: &Gateway, m: &Machine, seats: Seats, reported: Option<&BTreeSet<NodeId>>) -> CellMachineBody {
    CellMachineBody {
        node: m.id.to_string(),
        role: fleet::role_text(m.role),
        zone: m.zone.as_str().to_owned(),
        bus_address: m.bus_address.as_str().to_owned(),
        tier: m.tier.as_ref().map(|t| t.as_str().to_owned()),
        standing: fleet::standing_text(m.standing),
        incarnation: m.incarnation.map(|i| hex(i.0)),
        replaced_by: m.replaced_by.map(|n| n.to_string()),
        replaces: m.replaces.map(|n| n.to_string()),
        liveness: Liveness::of(m, reported).as_str(),
        seen_s_ago: g.inner.metrics.seen_ago(m.id).map(|d| d.as_secs()),
        seats: seats.voting,
        joining: seats.joining,
    }
}

/// The cell's machines, seats, moves in progress and journals below full strength.
#[utoipa::path(get, path = "/v1/admin/cell",
    responses((status = 200, description = "the cell's machines, seats and seat moves", body = CellStatusBody),
        (status = 400, body = paros_api::ErrorBody, description = "malformed: a query string"),
        (status = 401, body = paros_api::ErrorBody), (status = 403, body = paros_api::ErrorBody),
        (status = 503, body = paros_api::ErrorBody)))]
pub(crate) async fn cell_status(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    admin(&p)?;
    no_query(query.as_deref())?;
    let d = g.directory()?;
    let reported = reported(&g);
    let max = usize::try_from(g.inner.config.cell_list_max).unwrap_or(usize::MAX).max(1);
    let live = |m: &Machine| Liveness::of(m, reported.as_ref());
    let s = fleet::survey(&d, &live, max);
    let machines = d
        .machines()
        .take(max)
        .map(|m| machine_body(&g, m, s.seats.get(&m.id).copied().unwrap_or_default(), reported.as_ref()))
        .collect();
    let moves = s
        .moves
        .iter()
        .map(|(j, m)| SeatMoveBody {
            journal: fleet::journal_path(&d, j),
            tenant: tenant_text(j.key.tenant),
            from: m.from.to_string(),
            to: m.to.to_string(),
            epoch: m.epoch.0,
            recorded_at: m.at.0,
        })
        .collect();
    let below_full_strength = s
        .weak
        .iter()
        .map(|(j, weak)| WeakJournalBody {
            journal: fleet::journal_path(&d, j),
            tenant: tenant_text(j.key.tenant),
            voters: j.voters.iter().map(ToString::to_string).collect(),
            weak: weak.iter().map(|(n, w)| WeakVoterBody { node: n.to_string(), why: w.as_str() }).collect(),
            moving: j.moving.is_some(),
        })
        .collect();
    let body = CellStatusBody {
        generated_at_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        node_counters: reported.is_some(),
        machines,
        machines_total: d.machines().count() as u64,
        moves,
        moves_total: s.moves_total,
        moves_done: s.moves_done,
        below_full_strength,
        below_full_strength_total: s.weak_total,
        list_max: max as u64,
    };
    Ok(json(StatusCode::OK, &body))
}

/// A registry refusal of an operator command, as its answer.
fn refused(r: Refusal) -> ApiError {
    use OperatorCode as C;
    let op = ApiError::operator;
    match r {
        Refusal::UnknownMachine { machine } => {
            op(C::UnknownMachine, format!("the registry knows no machine {machine}"))
        }
        Refusal::MachineRetired { machine } => {
            op(C::MachineRetired, format!("machine {machine} is retired: its id is never used again"))
        }
        Refusal::RoleChange { machine, registered } => op(
            C::RoleChange,
            format!("machine {machine} is registered as a {}: a role is fixed", fleet::role_text(registered)),
        ),
        Refusal::IncarnationChanged { machine, recorded, offered } => op(
            C::IncarnationChanged,
            format!(
                "machine {machine} was admitted with store incarnation {}, not {}: its store is foreign, and it \
                 joins again only as a new identity",
                hex(recorded.0),
                hex(offered.0)
            ),
        ),
        Refusal::MachineIsAFeed { machine, tier } => {
            op(C::IdIsAFeed, format!("{machine} is the feed of replica tier {tier}, not a machine's id"))
        }
        Refusal::Move(m) => match m {
            MoveRefusal::UnknownJournal { .. } => ApiError::unknown_journal(),
            MoveRefusal::InProgress { epoch, .. } => op(
                C::MoveInProgress,
                format!("a move of this journal to epoch {} is recorded and not done: one at a time", epoch.0),
            ),
            MoveRefusal::NotAVoter { node, .. } => op(C::NotAVoter, format!("{node} holds no seat of this journal")),
            MoveRefusal::AlreadyAVoter { node, .. } => {
                op(C::AlreadyAVoter, format!("{node} holds a seat of this journal already"))
            }
            MoveRefusal::Target(VoterRefusal::Unknown { node }) => {
                op(C::UnknownMachine, format!("the registry knows no machine {node}"))
            }
            MoveRefusal::Target(t) => op(C::TargetIneligible, format!("the target may not take a seat: {t:?}")),
            MoveRefusal::HeldASeat { node, .. } => op(
                C::TargetIneligible,
                format!("{node} held a seat of this journal once (refused by an older registry)"),
            ),
            other => ApiError::unavailable(format!("the registry refused the move: {other:?}")),
        },
        Refusal::NotInitialized => ApiError::unavailable("the cell is not formed"),
        other => ApiError::unavailable(format!("the registry refused: {other:?}")),
    }
}

/// Sends `command`; a refusal is its operator answer.
async fn decide(g: &Gateway, command: Command) -> ApiResult<paros_registry::Accepted> {
    match g.registry(Op::Command(command)).await? {
        Verdict::Accepted(a) => Ok(a),
        Verdict::Refused(r) => Err(refused(r)),
    }
}

/// The machine as the directory shows it once `ready` holds for it.
async fn machine_once(
    g: &Gateway,
    node: NodeId,
    ready: impl Fn(&Machine) -> bool,
) -> ApiResult<(Arc<Directory>, CellMachineBody)> {
    let d = g.wait_directory(g.inner.config.registry_wait, |d| d.machine(node).is_some_and(&ready)).await?;
    let m = d.machine(node).expect("the wait found it");
    let on = || d.journals_on(node);
    let seats = Seats {
        voting: on().filter(|j| j.voters.contains(&node)).count() as u64,
        joining: on().filter(|j| j.is_joining(node)).count() as u64,
    };
    let body = machine_body(g, m, seats, reported(g).as_ref());
    Ok((Arc::clone(&d), body))
}

/// Admit a machine with its store's incarnation: 201 when new, 200 when it was registered
/// already (its address and zone are updated; a machine registered without an incarnation, a
/// founder, gets this one).
#[utoipa::path(post, path = "/v1/admin/machines", request_body = AdmitRequest,
    responses(
        (status = 201, body = CellMachineBody, description = "admitted: a new machine"),
        (status = 200, body = CellMachineBody, description = "admitted again: address and zone updated"),
        (status = 400, body = paros_api::ErrorBody,
            description = "malformed: a bad body, id, incarnation, bus address or zone, or a query string"),
        (status = 409, body = crate::error::OperatorErrorBody,
            description = "machine_retired, role_change, incarnation_changed or id_is_a_feed"),
        (status = 503, body = paros_api::ErrorBody), (status = 504, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn admit(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    admin(&p)?;
    let req: AdmitRequest = json_body(&g, &headers, body).await?;
    no_query(query.as_deref())?;
    let id = NodeId(nonzero_hex(&req.id, "`id`")?);
    let incarnation = Incarnation(nonzero_hex(&req.incarnation, "`incarnation`")?);
    let bus_address =
        BusAddress::new(req.bus_address).map_err(|e| ApiError::malformed(format!("bad bus_address: {e}")))?;
    let zone = Zone::new(req.zone).map_err(|e| ApiError::malformed(format!("bad zone: {e}")))?;
    let command =
        Command::Admit { id, role: req.role.into(), bus_address: bus_address.clone(), zone: zone.clone(), incarnation };
    let updated = match decide(&g, command).await? {
        paros_registry::Accepted::MachineRegistered { updated, .. } => updated,
        other => return Err(ApiError::unavailable(format!("the registry answered the admit {other:?}"))),
    };
    let shown = |m: &Machine| m.incarnation == Some(incarnation) && m.bus_address == bus_address && m.zone == zone;
    let (_, body) = machine_once(&g, id, shown).await?;
    Ok(json(if updated { StatusCode::OK } else { StatusCode::CREATED }, &body))
}

async fn set_standing(
    g: &Gateway,
    p: &Principal,
    path: Result<Path<String>, PathRejection>,
    query: Option<&str>,
    standing: Standing,
) -> ApiResult<Response> {
    admin(p)?;
    let node = node_of(path)?;
    if g.directory()?.machine(node).is_none() {
        return Err(ApiError::operator(OperatorCode::UnknownMachine, format!("the registry knows no machine {node}")));
    }
    no_query(query)?;
    decide(g, Command::SetStanding { machine: node, standing }).await?;
    let (_, body) = machine_once(g, node, |m| m.standing == standing).await?;
    Ok(json(StatusCode::OK, &body))
}

/// Drain a machine: no new seat is placed on it (`SetStanding Draining`), and the planner moves
/// its seats off, a bounded number at a time. Draining again is 200.
#[utoipa::path(post, path = "/v1/admin/machines/{node}/drain",
    params(("node" = String, Path, description = "the machine's node id, 1 to 16 hex digits")),
    responses(
        (status = 200, body = CellMachineBody, description = "draining"),
        (status = 400, body = paros_api::ErrorBody, description = "malformed: not a node id, or a query string"),
        (status = 404, body = crate::error::OperatorErrorBody,
            description = "unknown_machine: the registry knows no machine of that id"),
        (status = 409, body = crate::error::OperatorErrorBody,
            description = "machine_retired: a retired machine stays retired"),
        (status = 503, body = paros_api::ErrorBody), (status = 504, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn drain(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    set_standing(&g, &p, path, query.as_deref(), Standing::Draining).await
}

/// Retire a machine for good (`SetStanding Retired`): its id is never used again, and its
/// seats count below full strength until moved. Retiring again is 200.
#[utoipa::path(post, path = "/v1/admin/machines/{node}/retire",
    params(("node" = String, Path, description = "the machine's node id, 1 to 16 hex digits")),
    responses(
        (status = 200, body = CellMachineBody, description = "retired"),
        (status = 400, body = paros_api::ErrorBody, description = "malformed: not a node id, or a query string"),
        (status = 404, body = crate::error::OperatorErrorBody,
            description = "unknown_machine: the registry knows no machine of that id"),
        (status = 503, body = paros_api::ErrorBody), (status = 504, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn retire(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    set_standing(&g, &p, path, query.as_deref(), Standing::Retired).await
}

/// Move a journal's seat from voter `from` to node `to` (`MoveSeat`): 202 once the registry
/// recorded it; the registry's mover carries it out and records it done once the target holds
/// the journal (docs/reconfiguration.md). `GET /v1/admin/cell` lists it until then.
#[utoipa::path(post, path = "/v1/admin/journals/{tenant}/{journal}/move", request_body = MoveRequest,
    params(("tenant" = String, Path, description = "the tenant's name"),
        ("journal" = String, Path, description = "the journal's name")),
    responses(
        (status = 202, body = SeatMoveBody, description = "recorded: the move is pending"),
        (status = 400, body = paros_api::ErrorBody,
            description = "malformed: a bad tenant or journal name, body or node id, or a query string"),
        (status = 404, body = crate::error::OperatorErrorBody,
            description = "unknown_journal (no live journal of that name in that tenant) or unknown_machine"),
        (status = 409, body = crate::error::OperatorErrorBody,
            description = "move_in_progress, not_a_voter, already_a_voter or target_ineligible"),
        (status = 503, body = paros_api::ErrorBody), (status = 504, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn move_seat(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    path: Result<Path<(String, String)>, PathRejection>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    admin(&p)?;
    let (tenant, journal) = path.map(|Path(p)| p).map_err(|e| ApiError::malformed(format!("bad path: {e}")))?;
    let tenant = TenantName::parse(&tenant).map_err(|e| ApiError::malformed(format!("bad tenant name: {e}")))?;
    let journal = parse_name(&journal)?;
    let d = g.directory()?;
    let key = d
        .tenant_by_name(&tenant)
        .and_then(|t| d.journal_by_name(t.id, &journal))
        .map(|j| j.key)
        .ok_or_else(ApiError::unknown_journal)?;
    let req: MoveRequest = json_body(&g, &headers, body).await?;
    no_query(query.as_deref())?;
    let from = node_id(&req.from).ok_or_else(|| ApiError::malformed("`from` is 1 to 16 hex digits"))?;
    let to = node_id(&req.to).ok_or_else(|| ApiError::malformed("`to` is 1 to 16 hex digits"))?;
    for n in [from, to] {
        if d.machine(n).is_none() {
            return Err(ApiError::operator(OperatorCode::UnknownMachine, format!("the registry knows no machine {n}")));
        }
    }
    let (epoch, at) = match decide(&g, Command::MoveSeat { journal: key, from, to }).await? {
        paros_registry::Accepted::SeatMoving { epoch, .. } => {
            let d = g
                .wait_directory(g.inner.config.registry_wait, |d| {
                    d.journal(key).and_then(|j| j.moving).is_some_and(|m| m.epoch == epoch && m.to == to)
                })
                .await?;
            let at = d.journal(key).and_then(|j| j.moving).map_or(0, |m| m.at.0);
            (epoch, at)
        }
        other => return Err(ApiError::unavailable(format!("the registry answered the move {other:?}"))),
    };
    let body = SeatMoveBody {
        journal: format!("{tenant}/{journal}"),
        tenant: tenant_text(key.tenant),
        from: from.to_string(),
        to: to.to_string(),
        epoch: epoch.0,
        recorded_at: at,
    };
    Ok(json(StatusCode::ACCEPTED, &body))
}
