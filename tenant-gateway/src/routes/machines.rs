//! A machine's readiness (`GET /readyz/{node}`) and, where the cell lets an operator stop and
//! start its machines by hand (the embedded cell of `paros dev`: its read replicas), the admin
//! routes that do (`POST /v1/admin/machines/{node}/stop|start`), to try failures.

use std::sync::Arc;

use axum::Extension;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use paros_core::NodeId;
use serde::Serialize;
use utoipa::ToSchema;

use crate::access::path_name;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::nodes::{ControlError, NodeCounters, ReplicaStateName};
use crate::state::Gateway;
use crate::wire::{json, no_query};

/// A machine's readiness: whether it may be sent work now, and where it stands.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ReadyBody {
    /// The node id (16 lowercase hex digits).
    pub node: String,
    pub ready: bool,
    /// `serving` (a running voter, or a read replica that has caught up), `bootstrapping` or
    /// `catching_up` (a replica that serves no read yet), `down` (a machine of the cell that
    /// reports nothing now), `unknown` (no machine of the cell has this id).
    pub state: &'static str,
}

/// A machine an operator stopped or started, and where it stands now.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct MachineStateBody {
    pub node: String,
    /// As in [`ReadyBody`].
    pub state: &'static str,
}

/// A node id written as 1 to 16 hex digits.
pub(crate) fn node_id(raw: &str) -> Option<NodeId> {
    if raw.is_empty() || raw.len() > 16 || !raw.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(raw, 16).ok().map(NodeId)
}

/// The node id a path names (16 hex digits), or 400.
pub(crate) fn node_of(path: Result<Path<String>, PathRejection>) -> ApiResult<NodeId> {
    node_id(&path_name(path)?).ok_or_else(|| ApiError::malformed("a node id is 1 to 16 hex digits"))
}

/// Where `node` stands, from the counters the cell reports and the machines the registry lists.
fn state_of(g: &Gateway, node: NodeId) -> &'static str {
    let reported: Option<NodeCounters> =
        g.inner.metrics.node_stats().and_then(|all| all.into_iter().find(|c| c.node == node));
    match reported {
        Some(NodeCounters { replica: Some(r), .. }) => r.state.as_str(),
        Some(_) => ReplicaStateName::Serving.as_str(),
        None if g.directory().is_ok_and(|d| d.machine(node).is_some()) => "down",
        None => "unknown",
    }
}

/// 200 when machine `node` may be sent work now: a running voter, or a read replica that has
/// caught up since it started (DESIGN §7: it refuses reads until then); else 503. The same body
/// either way. A readiness probe for load balancers and orchestrators; no token.
#[utoipa::path(get, path = "/readyz/{node}",
    params(("node" = String, Path, description = "the machine's node id, 16 hex digits")),
    responses(
        (status = 200, body = ReadyBody, description = "ready"),
        (status = 400, body = paros_api::ErrorBody, description = "malformed: not a node id"),
        (status = 503, body = ReadyBody, description = "not ready: catching up, down or unknown"),
    ))]
pub(crate) async fn readyz(
    State(g): State<Gateway>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let node = node_of(path)?;
    no_query(query.as_deref())?;
    let state = state_of(&g, node);
    let ready = state == ReplicaStateName::Serving.as_str();
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let body = ReadyBody { node: node.to_string(), ready, state };
    Ok(json(status, &body))
}

/// What `/stop` takes: `wipe=true` deletes the machine's store as well (it relearns under a new
/// incarnation when started).
fn wipe_of(query: Option<&str>) -> ApiResult<bool> {
    match query {
        None | Some("") => Ok(false),
        Some("wipe=true") => Ok(true),
        Some("wipe=false") => Ok(false),
        Some(_) => Err(ApiError::malformed("this route takes only `wipe=true` or `wipe=false`")),
    }
}

fn admin(p: &Principal) -> ApiResult<()> {
    match p {
        Principal::Admin { .. } => Ok(()),
        _ => Err(ApiError::forbidden("stopping and starting machines is the operator's: it needs an admin token")),
    }
}

fn controlled(
    g: &Gateway,
    node: NodeId,
    act: impl FnOnce(&dyn crate::nodes::MachineControl) -> Result<(), ControlError>,
) -> ApiResult<Response> {
    let Some(control) = g.inner.control.get() else {
        return Err(ApiError::malformed("this cell does not let its machines be stopped by hand"));
    };
    match act(control.as_ref()) {
        Ok(()) => Ok(json(StatusCode::OK, &MachineStateBody { node: node.to_string(), state: state_of(g, node) })),
        Err(ControlError::NotControlled) => {
            Err(ApiError::malformed(format!("{node} is not a machine this cell can stop and start by hand")))
        }
        Err(ControlError::Failed(why)) => Err(ApiError::unavailable(why)),
    }
}

/// Stops machine `node` as a crash would (`wipe=true`: and deletes its store). Only where the
/// cell allows it (`paros dev`: its read replicas); elsewhere 400.
#[utoipa::path(post, path = "/v1/admin/machines/{node}/stop",
    params(("node" = String, Path, description = "the machine's node id, 16 hex digits"),
        ("wipe" = Option<bool>, Query, description = "delete its store too")),
    responses(
        (status = 200, body = MachineStateBody, description = "stopped"),
        (status = 400, body = paros_api::ErrorBody,
            description = "malformed: not a node id, a bad query, or a machine this cell cannot stop by hand"),
        (status = 401, body = paros_api::ErrorBody), (status = 403, body = paros_api::ErrorBody),
        (status = 503, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn stop(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    admin(&p)?;
    let node = node_of(path)?;
    let wipe = wipe_of(query.as_deref())?;
    controlled(&g, node, |c| c.stop(node, wipe))
}

/// Starts stopped machine `node` again; one whose store was wiped relearns before it serves.
#[utoipa::path(post, path = "/v1/admin/machines/{node}/start",
    params(("node" = String, Path, description = "the machine's node id, 16 hex digits")),
    responses(
        (status = 200, body = MachineStateBody, description = "started (or running already)"),
        (status = 400, body = paros_api::ErrorBody,
            description = "malformed: not a node id, or a machine this cell cannot start by hand"),
        (status = 401, body = paros_api::ErrorBody), (status = 403, body = paros_api::ErrorBody),
        (status = 503, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn start(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    admin(&p)?;
    let node = node_of(path)?;
    no_query(query.as_deref())?;
    controlled(&g, node, |c| c.start(node))
}
