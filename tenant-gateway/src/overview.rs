//! The operator's dashboard: `GET /ui` (a page, no token) and the admin-only JSON it polls,
//! `GET /v1/admin/overview` — the machines with their counters, the tenants with their
//! traffic, and one page of journals with their views and the node that last led each.
//!
//! Every list is bounded by the configuration (`overview_list_max` machines and tenants,
//! `overview_journals_max` journals a page). Counters are cumulative; the page computes rates
//! between its polls from them and from `generated_at_ms` (the gateway's clock, not the
//! browser's).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Extension;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use paros_core::{JournalKey, NodeId};
use paros_registry::Directory;
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::{Principal, tenant_text};
use crate::error::{ApiError, ApiResult};
use crate::fleet::{role_text, standing_text};
use crate::metrics::Traffic;
use crate::nodes::NodeCounters;
use crate::state::Gateway;
use crate::wire::no_query;

/// The dashboard page: plain HTML and JavaScript, no build step, nothing fetched from
/// elsewhere.
const PAGE: &str = include_str!("ui.html");

/// The page runs only its own inline script and talks only to this gateway.
const CONTENT_SECURITY_POLICY: &str = concat!(
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; ",
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
);

/// Which page of journals `GET /v1/admin/overview` answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverviewQuery {
    /// Journals skipped, in the directory's order (by tenant id, then journal id).
    pub offset: u64,
    /// Journals listed at most (≥ 1; clamped to `overview_journals_max`).
    pub limit: Option<u64>,
}

impl OverviewQuery {
    /// Parses the query string: `offset` and `limit`, each at most once, `limit` ≥ 1; anything
    /// else is refused.
    ///
    /// # Errors
    /// A description of what is wrong.
    pub fn parse(raw: &str) -> Result<OverviewQuery, String> {
        let mut q = OverviewQuery { offset: 0, limit: None };
        let (mut offset_seen, mut limit_seen) = (false, false);
        if raw.is_empty() {
            return Ok(q);
        }
        for pair in raw.split('&') {
            if pair.is_empty() {
                return Err("an empty parameter (`&&` or a trailing `&`)".into());
            }
            let (name, value) = pair.split_once('=').ok_or_else(|| format!("`{pair}` is not name=value"))?;
            let number =
                || value.parse::<u64>().map_err(|_| format!("`{name}` is a non-negative integer, not `{value}`"));
            match name {
                "offset" if !offset_seen => {
                    offset_seen = true;
                    q.offset = number()?;
                }
                "limit" if !limit_seen => {
                    limit_seen = true;
                    let n = number()?;
                    if n == 0 {
                        return Err("`limit` is at least 1".into());
                    }
                    q.limit = Some(n);
                }
                "offset" | "limit" => return Err(format!("`{name}` is given twice")),
                other => return Err(format!("unknown query parameter `{other}`")),
            }
        }
        Ok(q)
    }
}

/// A machine of the cell, as the registry records it, with its counters when known.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct MachineBody {
    /// The node id (16 lowercase hex digits).
    pub node: String,
    /// `node`, `replica` or `gateway`; null for a node that reports counters but that the
    /// registry does not list.
    pub role: Option<&'static str>,
    pub zone: Option<String>,
    /// `registered`, `draining` or `retired`; null as for `role`.
    pub standing: Option<&'static str>,
    /// A read replica's tier; null for any other machine.
    pub tier: Option<String>,
    /// Null when the gateway was given no node counters, or this node reported none. A read
    /// replica's carry its state and lag (`replica`).
    pub counters: Option<NodeCounters>,
}

/// Records and decoded bytes through this gateway, cumulative since it started.
#[derive(Clone, Copy, Debug, Serialize, ToSchema)]
pub struct TrafficBody {
    pub records_written: u64,
    pub bytes_written: u64,
    pub records_read: u64,
    pub bytes_read: u64,
}

impl From<Traffic> for TrafficBody {
    fn from(t: Traffic) -> TrafficBody {
        TrafficBody {
            records_written: t.records_written,
            bytes_written: t.bytes_written,
            records_read: t.records_read,
            bytes_read: t.bytes_read,
        }
    }
}

#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct TenantBody {
    /// The tenant id (16 lowercase hex digits).
    pub tenant: String,
    pub name: String,
    /// Live journals.
    pub journals: u64,
    pub traffic: TrafficBody,
}

/// The node whose verdict on the journal came back last through this gateway: it led the
/// journal then (only a leader answers a verdict).
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct LeaderNodeBody {
    pub node: String,
    /// How long ago that verdict came back.
    pub seen_ms_ago: u64,
}

#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct JournalBody {
    pub tenant: String,
    pub tenant_name: String,
    pub name: String,
    /// `single_writer` or `multi_writer`.
    pub mode: &'static str,
    /// The journal's view now; null when no server could answer in time.
    #[schema(value_type = Option<paros_api::schema::JournalViewSchema>)]
    pub view: Option<paros_api::JournalView>,
    /// Null when no verdict on the journal came back through this gateway: unknown.
    pub leader_node: Option<LeaderNodeBody>,
}

/// `GET /v1/admin/overview`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct OverviewBody {
    /// The gateway's clock when it assembled the answer (Unix milliseconds): rates are
    /// computed between two answers' `generated_at_ms`.
    pub generated_at_ms: u64,
    /// Whether this gateway was given its cell's node counters.
    pub node_counters: bool,
    /// At most `overview_list_max` machines.
    pub machines: Vec<MachineBody>,
    pub machines_total: u64,
    /// Every tenant's traffic added up.
    pub traffic: TrafficBody,
    /// At most `overview_list_max` tenants, by id.
    pub tenants: Vec<TenantBody>,
    pub tenants_total: u64,
    /// One page of live journals, by tenant id then journal id.
    pub journals: Vec<JournalBody>,
    pub journals_total: u64,
    pub offset: u64,
    /// The page size used (the requested `limit`, clamped).
    pub limit: u64,
}

fn machines(d: &Directory, counters: Option<Vec<NodeCounters>>, max: usize) -> (Vec<MachineBody>, u64) {
    let mut by_node: BTreeMap<NodeId, NodeCounters> =
        counters.unwrap_or_default().into_iter().map(|c| (c.node, c)).collect();
    let mut out: Vec<MachineBody> = Vec::new();
    let mut total = 0u64;
    for m in d.machines() {
        total += 1;
        let counters = by_node.remove(&m.id);
        if out.len() < max {
            out.push(MachineBody {
                node: m.id.to_string(),
                role: Some(role_text(m.role)),
                zone: Some(m.zone.as_str().to_owned()),
                standing: Some(standing_text(m.standing)),
                tier: m.tier.as_ref().map(|t| t.as_str().to_owned()),
                counters,
            });
        }
    }
    for (node, c) in by_node {
        total += 1;
        if out.len() < max {
            let body = MachineBody {
                node: node.to_string(),
                role: None,
                zone: None,
                standing: None,
                tier: None,
                counters: Some(c),
            };
            out.push(body);
        }
    }
    (out, total)
}

/// The operator's view of the cell: machines, tenants, one page of journals.
#[utoipa::path(get, path = "/v1/admin/overview",
    params(("offset" = Option<u64>, Query), ("limit" = Option<u64>, Query)),
    responses((status = 200, description = "machines, tenants and one page of journals", body = OverviewBody),
        (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody), (status = 403, body = paros_api::ErrorBody),
        (status = 503, body = paros_api::ErrorBody)))]
pub(crate) async fn admin_overview(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    if !matches!(*p, Principal::Admin { .. }) {
        return Err(ApiError::forbidden("the overview is the operator's: it needs an admin token"));
    }
    let q = OverviewQuery::parse(query.as_deref().unwrap_or("")).map_err(ApiError::malformed)?;
    let cfg = g.inner.config;
    let list_max = usize::try_from(cfg.overview_list_max).unwrap_or(usize::MAX);
    let limit =
        q.limit.map_or(u64::from(cfg.overview_journals_max), |l| l.min(u64::from(cfg.overview_journals_max))).max(1);
    let d = g.directory()?;
    let metrics = &g.inner.metrics;
    let counters = metrics.node_stats();
    let node_counters = counters.is_some();
    let (machines, machines_total) = machines(&d, counters, list_max);

    let tenants: Vec<TenantBody> = d
        .tenants()
        .take(list_max)
        .map(|t| TenantBody {
            tenant: tenant_text(t.id),
            name: t.name.as_str().to_owned(),
            journals: u64::from(d.live_journals(t.id)),
            traffic: metrics.traffic(t.id).into(),
        })
        .collect();

    // The tenants' journals: the registry journal is the cell's (its seats show in the cell
    // status, `GET /v1/admin/cell`).
    let live = || d.journals().filter(|j| j.is_live() && j.key.tenant != paros_registry::CELL_TENANT);
    let journals_total = live().count() as u64;
    let skip = usize::try_from(q.offset).unwrap_or(usize::MAX);
    let page: Vec<&paros_registry::Journal> =
        live().skip(skip).take(usize::try_from(limit).unwrap_or(usize::MAX)).collect();
    let views = futures_util::future::join_all(page.iter().map(|j| g.view(j.key))).await;
    let journals = page
        .iter()
        .zip(views)
        .map(|(j, view)| JournalBody {
            tenant: tenant_text(j.key.tenant),
            tenant_name: d.tenant(j.key.tenant).map_or_else(String::new, |t| t.name.as_str().to_owned()),
            name: j.name.as_str().to_owned(),
            mode: match j.mode {
                paros_core::journal::WriterMode::Single => "single_writer",
                paros_core::journal::WriterMode::Multi => "multi_writer",
            },
            view: view.ok(),
            leader_node: leader(&g, j.key),
        })
        .collect();

    let body = OverviewBody {
        generated_at_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        node_counters,
        machines,
        machines_total,
        traffic: metrics.total().into(),
        tenants,
        tenants_total: d.tenants().count() as u64,
        journals,
        journals_total,
        offset: q.offset,
        limit,
    };
    let bytes = serde_json::to_vec(&body).expect("the overview serializes");
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], bytes).into_response())
}

fn leader(g: &Gateway, key: JournalKey) -> Option<LeaderNodeBody> {
    g.inner.cell.leader(key).map(|(node, age)| LeaderNodeBody {
        node: node.to_string(),
        seen_ms_ago: u64::try_from(age.as_millis()).unwrap_or(u64::MAX),
    })
}

/// The operator's dashboard page (no token: it asks for the admin token and polls
/// `/v1/admin/overview` with it).
#[utoipa::path(get, path = "/ui",
    responses((status = 200, description = "the dashboard page", content_type = "text/html", body = String),
        (status = 400, body = paros_api::ErrorBody)))]
pub(crate) async fn ui(RawQuery(query): RawQuery) -> ApiResult<Response> {
    no_query(query.as_deref())?;
    Ok((
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8")),
            // The page runs only its own inline script and talks only to this gateway.
            (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY)),
            (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        PAGE,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overview_query_is_parsed_strictly() {
        assert_eq!(OverviewQuery::parse(""), Ok(OverviewQuery { offset: 0, limit: None }));
        assert_eq!(OverviewQuery::parse("offset=5&limit=2"), Ok(OverviewQuery { offset: 5, limit: Some(2) }));
        for bad in [
            "limit=0",
            "offset=-1",
            "offset=1&offset=2",
            "limit=x",
            "page=1",
            "offset",
            "limit=1&limit=1",
            "&",
            "limit=1&",
        ] {
            assert!(OverviewQuery::parse(bad).is_err(), "{bad} is refused");
        }
    }
}
