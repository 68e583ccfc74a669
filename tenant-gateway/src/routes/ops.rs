//! Operations: `GET /healthz` and `GET /metrics`.

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use paros_client::{ReadAnswer, ReadParams};
use paros_core::{Consistency, JournalKey, Seq, TenantId};

use crate::error::{ApiError, ApiResult};
use crate::exposition::Exposition;
use crate::state::Gateway;
use crate::wire::no_query;

/// 200 when the registry answers a linearizable read (a quorum of it is reachable).
#[utoipa::path(get, path = "/healthz",
    responses(
        (status = 200, content_type = "text/plain", body = String,
            description = "serving"),
        (status = 400, body = paros_api::ErrorBody),
        (status = 503, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn healthz(State(g): State<Gateway>, RawQuery(query): RawQuery) -> ApiResult<Response> {
    no_query(query.as_deref())?;
    let d = g.directory()?;
    let cell = d.cell().ok_or_else(|| ApiError::unavailable("the cell is not formed"))?;
    let key = JournalKey { tenant: TenantId(0), journal: cell.registry };
    let params =
        ReadParams { from: Seq(0), limit: 1, max_bytes: 1, wait_ms: 0, consistency: Consistency::Linearizable };
    match g.read(key, params, None).await.answer {
        ReadAnswer::Page { .. } | ReadAnswer::Truncated { .. } => Ok((StatusCode::OK, "ok\n").into_response()),
        _ => Err(ApiError::unavailable("the registry is not reachable now")),
    }
}

/// The gateway's metrics: Prometheus text, or OpenMetrics when `Accept` prefers it.
#[utoipa::path(get, path = "/metrics",
    responses(
        (status = 200, description = "the metrics",
            content((String = "text/plain"), (String = "application/openmetrics-text"))),
        (status = 400, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn metrics(
    State(g): State<Gateway>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> ApiResult<Response> {
    no_query(query.as_deref())?;
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = Exposition::negotiate(accept);
    g.inner.metrics.name_journals(g.directory().ok());
    let text = g.inner.metrics.render(format);
    Ok(([(header::CONTENT_TYPE, format.content_type())], text).into_response())
}
