//! Journals: `POST /v1/journals`, `GET /v1/journals`, `GET|DELETE /v1/journals/{name}`.

use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use paros_api::{
    CreateJournalRequest, ErrorCode, JournalInfo, JournalList, JournalName, JournalView, Scope, WriterMode,
};
use paros_core::journal::WriterMode as CoreMode;
use paros_core::{JournalId, JournalKey};
use paros_registry::{Accepted, Command, Op, Refusal, TierName, Verdict};

use crate::access::{named_journal, parse_name, path_name, require, resolve, tenant_of, unrestricted};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::state::{Gateway, random_id};
use crate::wire::{api_mode, json, json_body, no_query};

/// Create a journal.
#[utoipa::path(post, path = "/v1/journals", request_body = paros_api::CreateJournalRequest,
    responses(
        (status = 201, body = paros_api::JournalInfo,
            description = "the journal, created"),
        (status = 400, body = paros_api::ErrorBody,
            description = "malformed: a bad body, or a tier the cell does not have"),
        (status = 401, body = paros_api::ErrorBody),
        (status = 403, body = paros_api::ErrorBody),
        (status = 409, body = paros_api::ErrorBody,
            description = "name_taken: a live journal of this tenant has that name"),
        (status = 429, body = paros_api::ErrorBody),
        (status = 504, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn create_journal(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let t = tenant_of(&p)?;
    require(t, Scope::Owner, None)?;
    unrestricted(t)?;
    let req: CreateJournalRequest = json_body(&g, &headers, body).await?;
    no_query(query.as_deref())?;
    let mode = match req.mode() {
        WriterMode::SingleWriter => CoreMode::Single,
        WriterMode::MultiWriter => CoreMode::Multi,
    };
    // paros-api checked the grammar; the registry's type checks it again.
    let tier = req.tier.as_deref().map(TierName::new).transpose().map_err(|e| ApiError::malformed(e.to_string()))?;
    let tenant = t.tenant;
    let journal = JournalId(random_id());
    let op = Op::CreateJournal { tenant, journal, name: req.name.clone(), mode, tier };
    match g.registry(op).await? {
        Verdict::Accepted(Accepted::JournalCreated { .. } | _) => {}
        Verdict::Refused(Refusal::JournalNameTaken { .. }) => {
            return Err(ApiError::new(ErrorCode::NameTaken, "the journal name is taken"));
        }
        Verdict::Refused(Refusal::OverJournalQuota { journals_max, .. }) => {
            return Err(ApiError::over_quota(
                format!("the tenant holds its {journals_max} journals already"),
                Duration::from_secs(60),
            ));
        }
        Verdict::Refused(Refusal::TenantSuspended { .. }) => {
            return Err(ApiError::forbidden("the tenant is suspended"));
        }
        Verdict::Refused(Refusal::UnknownTier { tier }) => {
            return Err(ApiError::malformed(format!("the cell has no tier named {tier:?}")));
        }
        Verdict::Refused(r) => return Err(ApiError::unavailable(format!("the registry refused the journal: {r:?}"))),
    }
    let key = JournalKey { tenant, journal };
    let name = req.name.clone();
    let d = g
        .wait_directory(g.inner.config.registry_wait, move |d| {
            d.journal_by_name(tenant, &name).is_some_and(|j| j.key == key)
        })
        .await?;
    let tier = d.journal(key).and_then(tier_of);
    let mode = req.mode();
    let info = JournalInfo { name: req.name, mode, view: JournalView::NEW, tier };
    Ok(json(StatusCode::CREATED, &info))
}

/// List this tenant's journals.
#[utoipa::path(get, path = "/v1/journals",
    responses(
        (status = 200, body = paros_api::JournalList,
            description = "this tenant's journals"),
        (status = 401, body = paros_api::ErrorBody),
        (status = 403, body = paros_api::ErrorBody),
        (status = 429, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn list_journals(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let t = tenant_of(&p)?;
    require(t, Scope::Read, None)?;
    no_query(query.as_deref())?;
    let d = g.directory()?;
    let listed: Vec<(JournalName, JournalKey, CoreMode, Option<String>)> = d
        .journals_of(t.tenant)
        .filter(|j| t.journal.as_ref().is_none_or(|only| *only == j.name))
        .map(|j| (j.name.clone(), j.key, j.mode, tier_of(j)))
        .collect();
    let views = futures_util::future::join_all(listed.iter().map(|(_, key, _, _)| g.view(*key))).await;
    let mut journals = Vec::with_capacity(listed.len());
    for ((name, _, mode, tier), view) in listed.into_iter().zip(views) {
        journals.push(JournalInfo { name, mode: api_mode(mode), view: view?, tier });
    }
    Ok(json(StatusCode::OK, &JournalList { journals }))
}

/// Show one journal.
#[utoipa::path(get, path = "/v1/journals/{name}", params(("name" = inline(paros_api::JournalName), Path)),
    responses(
        (status = 200, body = paros_api::JournalInfo,
            description = "the journal"),
        (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody),
        (status = 403, body = paros_api::ErrorBody),
        (status = 404, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn show_journal(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let (_, name, key, mode) = named_journal(&g, &p, path, Scope::Read)?;
    no_query(query.as_deref())?;
    let tier = g.directory()?.journal(key).and_then(tier_of);
    let view = g.view(key).await?;
    Ok(json(StatusCode::OK, &JournalInfo { name, mode: api_mode(mode), view, tier }))
}

/// A journal's tier as it travels: its name, or `null`.
fn tier_of(j: &paros_registry::Journal) -> Option<String> {
    j.tier.as_ref().map(|t| t.as_str().to_owned())
}

/// Delete a journal.
#[utoipa::path(delete, path = "/v1/journals/{name}", params(("name" = inline(paros_api::JournalName), Path)),
    responses(
        (status = 204,
            description = "deleted"),
        (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody),
        (status = 403, body = paros_api::ErrorBody),
        (status = 404, body = paros_api::ErrorBody),
        (status = 504, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn delete_journal(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let t = tenant_of(&p)?;
    let raw = path_name(path)?;
    require(t, Scope::Owner, Some(&raw))?;
    unrestricted(t)?;
    let name = parse_name(&raw)?;
    let tenant = t.tenant;
    resolve(&g, tenant, &name)?;
    no_query(query.as_deref())?;
    match g.registry(Op::Command(Command::DeleteJournal { tenant, name: name.clone() })).await? {
        Verdict::Accepted(_) => {}
        Verdict::Refused(Refusal::UnknownJournal { .. }) => return Err(ApiError::unknown_journal()),
        Verdict::Refused(r) => return Err(ApiError::unavailable(format!("the registry refused the deletion: {r:?}"))),
    }
    g.wait_directory(g.inner.config.registry_wait, move |d| d.journal_by_name(tenant, &name).is_none()).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
