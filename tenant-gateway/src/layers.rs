//! The layers every request passes: metrics around everything, then authentication and quotas
//! in front of the authenticated routes (401 → 429 → 403 for a suspended tenant).

use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use paros_registry::TenantStatus;

use crate::access::{principal_of, quotas_in};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::state::Gateway;

/// Counts every answer by method, matched route and status, with its latency.
pub(crate) async fn observe(State(g): State<Gateway>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    // A method and a matched path are kept without copying their text (a standard method is
    // no allocation, a matched path is shared).
    let method = request.method().clone();
    let route = request.extensions().get::<MatchedPath>().cloned();
    let response = next.run(request).await;
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    g.inner.metrics.observe(method.as_str(), route, response.status().as_u16(), started.elapsed().as_secs_f64());
    response
}

/// 401 for a bad token, then 429 for a tenant over its quotas, then 403 for a suspended one.
pub(crate) async fn authenticate(State(g): State<Gateway>, mut request: Request, next: Next) -> Response {
    let (principal, d) = match principal_of(&g, request.headers()) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    if let Principal::Tenant(t) = &*principal {
        let quotas = quotas_in(&g, &d, t.tenant);
        if let Err(wait) = g.inner.quotas.admit_request(t.tenant, &quotas, Instant::now()) {
            return ApiError::over_quota("over the tenant's requests/s", wait).into_response();
        }
        // The other quotas answer before anything of the request is judged (the contract: 429 wins
        // over 403 and over every body check): a Write while the bytes/s bucket is in debt, a
        // create while the tenant holds its journal quota (the registry stays the authority).
        let route = request.extensions().get::<MatchedPath>().map(MatchedPath::as_str);
        let post = request.method() == axum::http::Method::POST;
        if post
            && route == Some("/v1/journals/{name}/records")
            && let Err(wait) = g.inner.quotas.check_bytes(t.tenant, &quotas, Instant::now())
        {
            return ApiError::over_quota("over the tenant's bytes/s", wait).into_response();
        }
        if post && route == Some("/v1/journals") && d.live_journals(t.tenant) >= quotas.journals_max {
            let message = format!("the tenant holds its {} journals already", quotas.journals_max);
            return ApiError::over_quota(message, Duration::from_secs(60)).into_response();
        }
        if d.tenant(t.tenant).is_some_and(|t| t.status == TenantStatus::Suspended) {
            return ApiError::forbidden("the tenant is suspended").into_response();
        }
    }
    request.extensions_mut().insert(principal);
    next.run(request).await
}
