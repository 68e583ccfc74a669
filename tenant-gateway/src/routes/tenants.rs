//! Tenants and tokens: `POST /v1/signup`, `POST /v1/tokens`, `DELETE /v1/tokens/{token_id}`.

use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use paros_api::{
    ErrorCode, MintTokenRequest, Scope, SignupAnswer, SignupRequest, TenantId as ApiTenantId, Token, TokenAnswer,
    TokenId as ApiTokenId,
};
use paros_core::TenantId;
use paros_registry::{Command, Op, Refusal, TokenId, Verdict};

use crate::access::{path_name, principal_of, require, tenant_of, unrestricted};
use crate::auth::{self, Principal, now_s, tenant_text};
use crate::error::{ApiError, ApiResult};
use crate::state::{Gateway, random_id};
use crate::wire::{json, json_body, no_query};

/// Sign up a tenant.
#[utoipa::path(post, path = "/v1/signup", request_body = paros_api::SignupRequest,
    responses(
        (status = 200, body = paros_api::SignupAnswer,
            description = "the tenant and its owner token"),
        (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody),
        (status = 403, body = paros_api::ErrorBody),
        (status = 409, body = paros_api::ErrorBody,
            description = "name_taken: a tenant has that name"),
        (status = 413, body = paros_api::ErrorBody,
            description = "too_large: over the write limits, which the body carries, or the body limit"),
        (status = 503, body = paros_api::ErrorBody),
        (status = 504, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn signup(
    State(g): State<Gateway>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    if !g.inner.config.open_signup {
        match *principal_of(&g, &headers)?.0 {
            Principal::Admin { .. } => {}
            Principal::Tenant(_) => {
                return Err(ApiError::forbidden("with open signup off, only an admin token signs up tenants"));
            }
        }
    }
    let req: SignupRequest = json_body(&g, &headers, body).await?;
    no_query(query.as_deref())?;
    let mut tenant = TenantId(random_id());
    for _ in 0..3 {
        let verdict = g
            .registry(Op::Command(Command::SignUp {
                tenant,
                name: req.name.clone(),
                quotas: g.inner.config.quotas_default,
            }))
            .await?;
        match verdict {
            Verdict::Accepted(_) => break,
            Verdict::Refused(Refusal::TenantIdTaken { .. }) => tenant = TenantId(random_id()),
            Verdict::Refused(Refusal::TenantNameTaken { .. }) => {
                return Err(ApiError::new(ErrorCode::NameTaken, "the tenant name is taken"));
            }
            Verdict::Refused(r) => {
                return Err(ApiError::unavailable(format!("the registry refused the signup: {r:?}")));
            }
        }
    }
    g.wait_directory(g.inner.config.registry_wait, |d| d.tenant(tenant).is_some()).await?;
    let exp = now_s().saturating_add(g.inner.config.signup_token_expiry.as_secs());
    let (token, jti) = auth::mint_tenant_token(&g.inner.keys.active, tenant, Scope::Owner, None, exp);
    let answer = SignupAnswer {
        tenant: ApiTenantId::parse(&tenant_text(tenant)).expect("hex is opaque text"),
        name: req.name,
        token: Token::parse(&token).expect("a JWT is printable ASCII"),
        token_id: ApiTokenId::parse(jti.as_str()).expect("a token id is printable ASCII"),
        expires_at: exp,
    };
    Ok(json(StatusCode::OK, &answer))
}

/// Mint a token no wider than the caller's.
#[utoipa::path(post, path = "/v1/tokens", request_body = paros_api::MintTokenRequest,
    responses(
        (status = 200, body = paros_api::TokenAnswer,
            description = "the token"),
        (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody),
        (status = 403, body = paros_api::ErrorBody),
        (status = 429, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn mint_token(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let t = tenant_of(&p)?;
    require(t, Scope::Owner, None)?;
    unrestricted(t)?;
    let req: MintTokenRequest = json_body(&g, &headers, body).await?;
    no_query(query.as_deref())?;
    if !t.scope.includes(req.scope) {
        return Err(ApiError::forbidden("a minted token never exceeds its parent's scope"));
    }
    let now = now_s();
    let exp = match req.expires_in_s {
        Some(n) => {
            let exp = now.saturating_add(n.get());
            if exp > t.exp {
                return Err(ApiError::forbidden("a minted token never outlives its parent"));
            }
            exp
        }
        None => now.saturating_add(g.inner.config.token_expiry_default.as_secs()).min(t.exp),
    };
    let (token, jti) = auth::mint_tenant_token(&g.inner.keys.active, t.tenant, req.scope, req.journal.as_ref(), exp);
    let answer = TokenAnswer {
        token: Token::parse(&token).expect("a JWT is printable ASCII"),
        token_id: ApiTokenId::parse(jti.as_str()).expect("a token id is printable ASCII"),
        expires_at: exp,
    };
    Ok(json(StatusCode::OK, &answer))
}

/// Revoke a token by id.
#[utoipa::path(delete, path = "/v1/tokens/{token_id}", params(("token_id" = String, Path)),
    responses(
        (status = 204,
            description = "revoked"),
        (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody),
        (status = 403, body = paros_api::ErrorBody),
        (status = 404, body = paros_api::ErrorBody,
            description = "unknown_token: this tenant never minted a token of that id"),
        (status = 504, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn revoke_token(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let t = tenant_of(&p)?;
    require(t, Scope::Owner, None)?;
    unrestricted(t)?;
    let raw = path_name(path)?;
    let jti = TokenId::new(raw).map_err(|e| ApiError::malformed(format!("bad token id: {e}")))?;
    let tenant = t.tenant;
    if !auth::jti_minted_for(&*g.directory()?, tenant, &jti) {
        return Err(ApiError::new(ErrorCode::UnknownToken, "this tenant never minted that token id"));
    }
    no_query(query.as_deref())?;
    match g.registry(Op::Command(Command::RevokeToken { tenant, jti: jti.clone() })).await? {
        Verdict::Accepted(_) => {}
        Verdict::Refused(Refusal::TooManyRevocations { .. }) => {
            return Err(ApiError::over_quota("the tenant holds too many revoked tokens", Duration::from_secs(60)));
        }
        Verdict::Refused(r) => {
            return Err(ApiError::unavailable(format!("the registry refused the revocation: {r:?}")));
        }
    }
    g.wait_directory(g.inner.config.registry_wait, |d| d.is_revoked(tenant, &jti)).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
