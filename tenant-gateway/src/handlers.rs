//! The routes of API.md, each a handler that checks in API.md's "which error wins" order:
//! 401 → 429 (the auth layer) → 403 → 400 (path name) → 404 → 413 (body) → 400 (body, query)
//! → 403 (minting past the parent) → 413 (write limits) → 409 / 410.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{MatchedPath, Path, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use bytes::Bytes;
use futures_util::Stream;
use http_body_util::BodyExt as _;
use paros_api::{
    CreateJournalRequest, ErrorCode, Gap, Heartbeat, JournalInfo, JournalList, JournalName, MintTokenRequest, Page,
    ReadQuery, Record, Scope, SetLeaderAnswer, SetLeaderRequest, SetLeaderVerdict, ShapeError, SignupAnswer,
    SignupRequest, TailEvent, TenantId as ApiTenantId, Token, TokenAnswer, TokenId as ApiTokenId, TruncateAnswer,
    TruncateRequest, TruncateVerdict, View, WriteAnswer, WriteRequest, WriteVerdict, WriterMode,
};
use paros_client::{AnswerError, Decided, ReadAnswer, ReadParams};
use paros_core::journal::{Outcome, WriterMode as CoreMode};
use paros_core::{Call, Consistency, JournalId, JournalKey, Seq, TenantId};
use paros_registry::{Accepted, Command, Directory, Op, Quotas, Refusal, TenantStatus, TokenId, Verdict};
use serde::Serialize;

use crate::auth::{self, Principal, TenantToken, now_s, tenant_text};
use crate::error::{ApiError, ApiResult};
use crate::state::{Gateway, api_view, core_leader, random_id};

/// A route that does not exist: 404 with no API body (it is no API answer).
const NO_ROUTE: &str = "x-paros-no-route";

pub(crate) fn router(g: Gateway) -> Router {
    let authed = Router::new()
        .route("/v1/tokens", post(mint_token))
        .route("/v1/tokens/{token_id}", axum::routing::delete(revoke_token))
        .route("/v1/journals", post(create_journal).get(list_journals))
        .route("/v1/journals/{name}", get(show_journal).delete(delete_journal))
        .route("/v1/journals/{name}/leader", post(set_leader))
        .route("/v1/journals/{name}/records", post(write).get(read))
        .route("/v1/journals/{name}/truncate", post(truncate))
        .route("/v1/journals/{name}/tail", get(tail))
        .route("/v1/admin/overview", get(crate::overview::admin_overview))
        .route_layer(middleware::from_fn_with_state(g.clone(), authenticate));
    Router::new()
        .route("/v1/signup", post(signup))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/v1/openapi.json", get(openapi_json))
        .route("/ui", get(crate::overview::ui))
        .merge(authed)
        .fallback(|| async { (StatusCode::NOT_FOUND, [(NO_ROUTE, "1")]) })
        .method_not_allowed_fallback(|| async { (StatusCode::METHOD_NOT_ALLOWED, [(NO_ROUTE, "1")]) })
        .layer(middleware::from_fn_with_state(g.clone(), observe))
        .with_state(g)
}

// ---------------------------------------------------------------------------------------------
// Layers: metrics, authentication and quotas.

async fn observe(State(g): State<Gateway>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().as_str().to_owned();
    let route =
        request.extensions().get::<MatchedPath>().map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let response = next.run(request).await;
    g.inner.metrics.observe(&method, &route, response.status().as_u16(), started.elapsed().as_secs_f64());
    response
}

fn bearer(headers: &HeaderMap) -> Result<&str, auth::Refusal> {
    let value = headers.get(header::AUTHORIZATION).ok_or(auth::Refusal::Missing)?;
    let token = value.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")).map(str::trim).filter(|t| !t.is_empty());
    token.ok_or(auth::Refusal::MalformedHeader)
}

/// The verified token, or 401 (counted by reason), and the directory it was checked against.
fn principal_of(g: &Gateway, headers: &HeaderMap) -> ApiResult<(Principal, Arc<Directory>)> {
    let refused = |r: auth::Refusal| {
        g.inner.metrics.refused(r);
        ApiError::from(r)
    };
    let token = bearer(headers).map_err(refused)?;
    let directory = g.directory()?;
    let principal = g.inner.tokens.verify(&directory, token, now_s()).map_err(refused)?;
    Ok((principal, directory))
}

fn quotas_in(g: &Gateway, d: &Directory, tenant: TenantId) -> Quotas {
    d.tenant(tenant).map_or(g.inner.config.quotas_default, |t| t.quotas)
}

fn tenant_quotas(g: &Gateway, tenant: TenantId) -> ApiResult<Quotas> {
    Ok(quotas_in(g, &*g.directory()?, tenant))
}

/// 401 for a bad token, then 429 for a tenant over its quotas, then 403 for a suspended one.
async fn authenticate(State(g): State<Gateway>, mut request: Request, next: Next) -> Response {
    let (principal, d) = match principal_of(&g, request.headers()) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    if let Principal::Tenant(t) = &principal {
        let quotas = quotas_in(&g, &d, t.tenant);
        if let Err(wait) = g.inner.quotas.admit_request(t.tenant, &quotas, Instant::now()) {
            return ApiError::over_quota("over the tenant's requests/s", wait).into_response();
        }
        // The other quotas answer before anything of the request is judged (API.md: 429 wins
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

// ---------------------------------------------------------------------------------------------
// Checks shared by the handlers.

/// The tenant token, or 403 for an admin token on a tenant route.
fn tenant_of(p: &Principal) -> ApiResult<&TenantToken> {
    match p {
        Principal::Tenant(t) => Ok(t),
        Principal::Admin { .. } => {
            Err(ApiError::forbidden("an admin token is no tenant's: tenant routes need a tenant token"))
        }
    }
}

/// 403 unless the token's scope includes `need` and its restriction allows `journal`.
fn require(t: &TenantToken, need: Scope, journal: Option<&str>) -> ApiResult<()> {
    if !t.scope.includes(need) {
        return Err(ApiError::forbidden(format!("this call needs scope {need:?}")));
    }
    if let (Some(only), Some(raw)) = (&t.journal, journal)
        && only.as_str() != raw
    {
        return Err(ApiError::forbidden("this token is restricted to another journal"));
    }
    Ok(())
}

/// 403 for a journal-restricted token on a tenant-wide call (create, delete, tokens).
fn unrestricted(t: &TenantToken) -> ApiResult<()> {
    if t.journal.is_some() {
        return Err(ApiError::forbidden("a journal-restricted token may not do this"));
    }
    Ok(())
}

fn path_name(path: Result<Path<String>, PathRejection>) -> ApiResult<String> {
    path.map(|Path(p)| p).map_err(|e| ApiError::malformed(format!("bad path: {e}")))
}

fn parse_name(raw: &str) -> ApiResult<JournalName> {
    JournalName::parse(raw).map_err(|e| ApiError::malformed(format!("bad journal name: {e}")))
}

fn api_mode(m: CoreMode) -> WriterMode {
    match m {
        CoreMode::Single => WriterMode::SingleWriter,
        CoreMode::Multi => WriterMode::MultiWriter,
    }
}

/// The live journal `name` of `tenant`: 404 when the directory does not know it.
/// The journal a tenant route names, in API.md's order: a tenant token (403 for admin), a path
/// (400), the scope and journal restriction (403), the name (400), the journal (404).
fn named_journal<'p>(
    g: &Gateway,
    p: &'p Principal,
    path: Result<Path<String>, PathRejection>,
    need: Scope,
) -> ApiResult<(&'p TenantToken, JournalName, JournalKey, CoreMode)> {
    let t = tenant_of(p)?;
    let raw = path_name(path)?;
    require(t, need, Some(&raw))?;
    let name = parse_name(&raw)?;
    let (key, mode) = resolve(g, t.tenant, &name)?;
    Ok((t, name, key, mode))
}

fn resolve(g: &Gateway, tenant: TenantId, name: &JournalName) -> ApiResult<(JournalKey, CoreMode)> {
    let d = g.directory()?;
    let j = d.journal_by_name(tenant, name).ok_or_else(ApiError::unknown_journal)?;
    Ok((j.key, j.mode))
}

/// Reads the body, refusing (413) one over the limit before it is buffered whole, then (400)
/// one that is not JSON.
async fn json_body<T: serde::de::DeserializeOwned>(g: &Gateway, headers: &HeaderMap, body: Body) -> ApiResult<T> {
    let limit = g.inner.config.body_limit_bytes;
    let too_large = || {
        ApiError::new(ErrorCode::TooLarge, format!("the body is over {limit} bytes"))
            .with_limits(g.inner.config.limits())
    };
    if let Some(len) =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok())
        && len > limit
    {
        return Err(too_large());
    }
    let limit_usize = usize::try_from(limit).unwrap_or(usize::MAX);
    let bytes: Bytes = match http_body_util::Limited::new(body, limit_usize).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => return Err(too_large()),
        Err(e) => return Err(ApiError::malformed(format!("reading the body: {e}"))),
    };
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return Err(ApiError::malformed("the body is application/json"));
    }
    serde_json::from_slice(&bytes).map_err(|e| ApiError::malformed(format!("bad body: {e}")))
}

fn json<T: Serialize>(status: StatusCode, body: &T) -> Response {
    let bytes = serde_json::to_vec(body).expect("API bodies serialize");
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], bytes).into_response()
}

/// Forwards a call, retrying while the directory knows the journal but no node hosts it yet.
async fn forward(
    g: &Gateway,
    tenant: TenantId,
    name: &JournalName,
    key: JournalKey,
    call: Call,
) -> ApiResult<Result<Decided, AnswerError>> {
    let deadline = tokio::time::Instant::now() + g.inner.config.placement_wait;
    loop {
        let decided = g.inner.cell.call(key, call.clone()).await;
        if !matches!(decided, Ok(Decided::UnknownJournal)) {
            return Ok(decided);
        }
        // Deleted meanwhile: 404. Created but not yet placed everywhere: wait a little.
        if g.directory()?.journal_by_name(tenant, name).is_none_or(|j| j.key != key) {
            return Err(ApiError::unknown_journal());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ApiError::unavailable("the journal is not placed yet; retry"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What every call answers for the outcomes it does not name itself.
fn undecided(g: &Gateway, d: Result<Decided, AnswerError>) -> ApiError {
    match d {
        Ok(Decided::Ambiguous) => ApiError::ambiguous(),
        Ok(Decided::Unavailable) => ApiError::unavailable("no server took the call now; it took no effect, retry"),
        Ok(Decided::UnknownJournal) => ApiError::unknown_journal(),
        Ok(Decided::TooLarge(t)) => ApiError::new(ErrorCode::TooLarge, t.to_string()).with_limits(paros_api::Limits {
            max_records: u64::from(t.max_records),
            max_bytes: t.max_bytes,
            max_body_bytes: g.inner.config.body_limit_bytes,
        }),
        Ok(Decided::Verdict(o)) => ApiError::ambiguous().with_message(format!("an unexpected verdict {o:?}")),
        // The cell never denies (authorization happened here): treat it as no answer.
        Ok(Decided::Denied { ambiguous: true, .. }) => ApiError::ambiguous(),
        Ok(Decided::Denied { ambiguous: false, .. }) => {
            ApiError::unavailable("the cell refused to serve the call now; retry")
        }
        Err(e) => ApiError::ambiguous().with_message(format!("the cell's answer could not be judged: {e}")),
    }
}

// ---------------------------------------------------------------------------------------------
// Tenants and tokens.

/// Sign up a tenant.
#[utoipa::path(post, path = "/v1/signup", request_body = paros_api::SignupRequest,
    responses((status = 200, body = paros_api::SignupAnswer), (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody), (status = 403, body = paros_api::ErrorBody),
        (status = 409, body = paros_api::ErrorBody), (status = 413, body = paros_api::ErrorBody),
        (status = 503, body = paros_api::ErrorBody), (status = 504, body = paros_api::ErrorBody)))]
pub(crate) async fn signup(State(g): State<Gateway>, headers: HeaderMap, body: Body) -> ApiResult<Response> {
    if !g.inner.config.open_signup {
        match principal_of(&g, &headers)?.0 {
            Principal::Admin { .. } => {}
            Principal::Tenant(_) => {
                return Err(ApiError::forbidden("with open signup off, only an admin token signs up tenants"));
            }
        }
    }
    let req: SignupRequest = json_body(&g, &headers, body).await?;
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
    responses((status = 200, body = paros_api::TokenAnswer), (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody), (status = 403, body = paros_api::ErrorBody),
        (status = 429, body = paros_api::ErrorBody)))]
pub(crate) async fn mint_token(
    State(g): State<Gateway>,
    Extension(p): Extension<Principal>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let t = tenant_of(&p)?;
    require(t, Scope::Owner, None)?;
    unrestricted(t)?;
    let req: MintTokenRequest = json_body(&g, &headers, body).await?;
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
    responses((status = 204), (status = 400, body = paros_api::ErrorBody), (status = 401, body = paros_api::ErrorBody),
        (status = 403, body = paros_api::ErrorBody), (status = 404, body = paros_api::ErrorBody),
        (status = 504, body = paros_api::ErrorBody)))]
pub(crate) async fn revoke_token(
    State(g): State<Gateway>,
    Extension(p): Extension<Principal>,
    path: Result<Path<String>, PathRejection>,
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

// ---------------------------------------------------------------------------------------------
// Journals.

/// Create a journal.
#[utoipa::path(post, path = "/v1/journals", request_body = paros_api::CreateJournalRequest,
    responses((status = 201, body = paros_api::JournalInfo), (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody), (status = 403, body = paros_api::ErrorBody),
        (status = 409, body = paros_api::ErrorBody), (status = 429, body = paros_api::ErrorBody),
        (status = 504, body = paros_api::ErrorBody)))]
pub(crate) async fn create_journal(
    State(g): State<Gateway>,
    Extension(p): Extension<Principal>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let t = tenant_of(&p)?;
    require(t, Scope::Owner, None)?;
    unrestricted(t)?;
    let req: CreateJournalRequest = json_body(&g, &headers, body).await?;
    let mode = match req.mode() {
        WriterMode::SingleWriter => CoreMode::Single,
        WriterMode::MultiWriter => CoreMode::Multi,
    };
    let tenant = t.tenant;
    let journal = JournalId(random_id());
    let op = Op::CreateJournal { tenant, journal, name: req.name.clone(), mode };
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
        Verdict::Refused(r) => return Err(ApiError::unavailable(format!("the registry refused the journal: {r:?}"))),
    }
    let key = JournalKey { tenant, journal };
    let name = req.name.clone();
    g.wait_directory(g.inner.config.registry_wait, move |d| {
        d.journal_by_name(tenant, &name).is_some_and(|j| j.key == key)
    })
    .await?;
    let mode = req.mode();
    let info = JournalInfo { name: req.name, mode, view: View::NEW };
    Ok(json(StatusCode::CREATED, &info))
}

/// List this tenant's journals.
#[utoipa::path(get, path = "/v1/journals",
    responses((status = 200, body = paros_api::JournalList), (status = 401, body = paros_api::ErrorBody),
        (status = 403, body = paros_api::ErrorBody), (status = 429, body = paros_api::ErrorBody)))]
pub(crate) async fn list_journals(State(g): State<Gateway>, Extension(p): Extension<Principal>) -> ApiResult<Response> {
    let t = tenant_of(&p)?;
    require(t, Scope::Read, None)?;
    let d = g.directory()?;
    let listed: Vec<(JournalName, JournalKey, CoreMode)> = d
        .journals_of(t.tenant)
        .filter(|j| t.journal.as_ref().is_none_or(|only| *only == j.name))
        .map(|j| (j.name.clone(), j.key, j.mode))
        .collect();
    let views = futures_util::future::join_all(listed.iter().map(|(_, key, _)| g.view(*key))).await;
    let mut journals = Vec::with_capacity(listed.len());
    for ((name, _, mode), view) in listed.into_iter().zip(views) {
        journals.push(JournalInfo { name, mode: api_mode(mode), view: view? });
    }
    Ok(json(StatusCode::OK, &JournalList { journals }))
}

/// Show one journal.
#[utoipa::path(get, path = "/v1/journals/{name}", params(("name" = inline(paros_api::JournalName), Path)),
    responses((status = 200, body = paros_api::JournalInfo), (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody), (status = 403, body = paros_api::ErrorBody),
        (status = 404, body = paros_api::ErrorBody)))]
pub(crate) async fn show_journal(
    State(g): State<Gateway>,
    Extension(p): Extension<Principal>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Response> {
    let (_, name, key, mode) = named_journal(&g, &p, path, Scope::Read)?;
    let view = g.view(key).await?;
    Ok(json(StatusCode::OK, &JournalInfo { name, mode: api_mode(mode), view }))
}

/// Delete a journal.
#[utoipa::path(delete, path = "/v1/journals/{name}", params(("name" = inline(paros_api::JournalName), Path)),
    responses((status = 204), (status = 400, body = paros_api::ErrorBody), (status = 401, body = paros_api::ErrorBody),
        (status = 403, body = paros_api::ErrorBody), (status = 404, body = paros_api::ErrorBody),
        (status = 504, body = paros_api::ErrorBody)))]
pub(crate) async fn delete_journal(
    State(g): State<Gateway>,
    Extension(p): Extension<Principal>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Response> {
    let t = tenant_of(&p)?;
    let raw = path_name(path)?;
    require(t, Scope::Owner, Some(&raw))?;
    unrestricted(t)?;
    let name = parse_name(&raw)?;
    let tenant = t.tenant;
    resolve(&g, tenant, &name)?;
    match g.registry(Op::Command(Command::DeleteJournal { tenant, name: name.clone() })).await? {
        Verdict::Accepted(_) => {}
        Verdict::Refused(Refusal::UnknownJournal { .. }) => return Err(ApiError::unknown_journal()),
        Verdict::Refused(r) => return Err(ApiError::unavailable(format!("the registry refused the deletion: {r:?}"))),
    }
    g.wait_directory(g.inner.config.registry_wait, move |d| d.journal_by_name(tenant, &name).is_none()).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

// ---------------------------------------------------------------------------------------------
// The four calls.

/// Claim or hand over a single-writer journal.
#[utoipa::path(post, path = "/v1/journals/{name}/leader", params(("name" = inline(paros_api::JournalName), Path)), request_body = paros_api::SetLeaderRequest,
    responses((status = 200, body = paros_api::SetLeaderAnswer), (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody), (status = 403, body = paros_api::ErrorBody),
        (status = 404, body = paros_api::ErrorBody), (status = 409, body = paros_api::ErrorBody),
        (status = 503, body = paros_api::ErrorBody), (status = 504, body = paros_api::ErrorBody)))]
pub(crate) async fn set_leader(
    State(g): State<Gateway>,
    Extension(p): Extension<Principal>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let (t, name, key, _) = named_journal(&g, &p, path, Scope::Write)?;
    let req: SetLeaderRequest = json_body(&g, &headers, body).await?;
    let call = Call::SetLeader { new: core_leader(req.new), old: req.old.map(core_leader) };
    match forward(&g, t.tenant, &name, key, call).await? {
        Ok(Decided::Verdict(Outcome::Won(v))) => {
            Ok(json(StatusCode::OK, &SetLeaderAnswer { outcome: SetLeaderVerdict::Won, view: api_view(v) }))
        }
        Ok(Decided::Verdict(Outcome::Lost(v))) => {
            Err(ApiError::new(ErrorCode::Lost, "SetLeader lost its compare-and-set").with_view(api_view(v)))
        }
        Ok(Decided::Verdict(Outcome::WrongMode(v))) => Err(wrong_mode(api_view(v))),
        other => Err(undecided(&g, other)),
    }
}

fn wrong_mode(view: View) -> ApiError {
    ApiError::new(ErrorCode::WrongMode, "the call is shaped for the other writer mode").with_view(view)
}

/// Write a batch of records.
#[utoipa::path(post, path = "/v1/journals/{name}/records", params(("name" = inline(paros_api::JournalName), Path)), request_body = paros_api::WriteRequest,
    responses((status = 200, body = paros_api::WriteAnswer), (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody), (status = 403, body = paros_api::ErrorBody),
        (status = 404, body = paros_api::ErrorBody), (status = 409, body = paros_api::ErrorBody),
        (status = 410, body = paros_api::ErrorBody), (status = 413, body = paros_api::ErrorBody),
        (status = 429, body = paros_api::ErrorBody), (status = 503, body = paros_api::ErrorBody),
        (status = 504, body = paros_api::ErrorBody)))]
pub(crate) async fn write(
    State(g): State<Gateway>,
    Extension(p): Extension<Principal>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let (t, name, key, mode) = named_journal(&g, &p, path, Scope::Write)?;
    let req: WriteRequest = json_body(&g, &headers, body).await?;
    let shape = req.shape(api_mode(mode));
    if shape == Err(ShapeError::LeaderWithoutSeq) {
        return Err(ApiError::malformed("a fenced write names its position: `leader` without `seq`"));
    }
    let bytes = req.bytes();
    let quotas = tenant_quotas(&g, t.tenant)?;
    g.inner.quotas.charge_bytes(t.tenant, &quotas, bytes, Instant::now());
    let cfg = g.inner.config;
    if req.records.len() as u64 > u64::from(cfg.write_records_max) || bytes > cfg.write_bytes_max {
        let view = g.view(key).await?;
        return Err(ApiError::new(ErrorCode::TooLarge, "the batch is over the write limits")
            .with_limits(cfg.limits())
            .with_view(view));
    }
    let shape = match shape {
        Ok(s) => s,
        Err(_) => return Err(wrong_mode(g.view(key).await?)),
    };
    let records: Vec<Bytes> = req.records.into_iter().map(|Record(r)| Bytes::from(r)).collect();
    let (leader, seq) = match shape {
        paros_api::WriteShape::Fenced { leader, seq } => (Some(core_leader(leader)), Seq(seq.0)),
        paros_api::WriteShape::Append => (None, Seq(0)),
    };
    let decided = forward(&g, t.tenant, &name, key, Call::Write { leader, seq, records }).await?;
    let (outcome, at, count) = match decided {
        Ok(Decided::Verdict(Outcome::Accepted { seq, count, .. })) => (WriteVerdict::Accepted, seq, count),
        Ok(Decided::Verdict(Outcome::Duplicate { seq, count, .. })) => (WriteVerdict::Duplicate, seq, count),
        Ok(Decided::Verdict(Outcome::Refused(v))) => {
            return Err(ApiError::new(ErrorCode::Refused, "the write was refused in place").with_view(api_view(v)));
        }
        Ok(Decided::Verdict(Outcome::Truncated(v))) => {
            return Err(ApiError::new(ErrorCode::Truncated, "the write starts below first_seq").with_view(api_view(v)));
        }
        Ok(Decided::Verdict(Outcome::WrongMode(v))) => return Err(wrong_mode(api_view(v))),
        Ok(Decided::TooLarge(tl)) => {
            let view = g.view(key).await?;
            return Err(undecided(&g, Ok(Decided::TooLarge(tl))).with_view(view));
        }
        other => return Err(undecided(&g, other)),
    };
    if outcome == WriteVerdict::Accepted {
        g.inner.metrics.written(t.tenant, count, bytes);
    }
    let view = view_after(&g, key, at.0.saturating_add(count)).await?;
    let answer = WriteAnswer { outcome, seq: paros_api::Seq(at.0), count, view };
    Ok(json(StatusCode::OK, &answer))
}

/// The view once the journal holds positions below `next` (read-your-writes on any server).
async fn view_after(g: &Gateway, key: JournalKey, next: u64) -> ApiResult<View> {
    let params = ReadParams {
        from: Seq(0),
        limit: 1,
        max_bytes: 1,
        wait_ms: 1000,
        consistency: Consistency::Reached(Seq(next)),
    };
    match g.read(key, params).await {
        ReadAnswer::Page { view, .. } | ReadAnswer::Truncated { view } => Ok(api_view(view)),
        _ => g.view(key).await,
    }
}

/// Read records from a position.
#[utoipa::path(get, path = "/v1/journals/{name}/records",
    params(("name" = inline(paros_api::JournalName), Path), ("from" = u64, Query), ("limit" = Option<u64>, Query), ("max_bytes" = Option<u64>, Query),
        ("wait_ms" = Option<u64>, Query), ("consistency" = Option<String>, Query), ("min_seq" = Option<u64>, Query)),
    responses((status = 200, body = paros_api::Page), (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody), (status = 403, body = paros_api::ErrorBody),
        (status = 404, body = paros_api::ErrorBody), (status = 410, body = paros_api::ErrorBody),
        (status = 503, body = paros_api::ErrorBody)))]
pub(crate) async fn read(
    State(g): State<Gateway>,
    Extension(p): Extension<Principal>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let (t, _, key, _) = named_journal(&g, &p, path, Scope::Read)?;
    let q = ReadQuery::parse(query.as_deref().unwrap_or("")).map_err(|e| ApiError::malformed(e.to_string()))?;
    let cfg = g.inner.config;
    let clamp = |v: Option<std::num::NonZeroU64>, max: u32| {
        v.map_or(max, |v| u32::try_from(v.get()).unwrap_or(u32::MAX).min(max))
    };
    let limit = clamp(q.limit, cfg.read_records_max);
    let max_bytes = clamp(q.max_bytes, cfg.read_bytes_max);
    let wait_ms = u32::from(q.wait_ms.get());
    let (consistency, min_seq) = paros_client::convert::core_consistency(q.consistency);
    let started = tokio::time::Instant::now();
    let mut params = ReadParams { from: Seq(q.from.0), limit, max_bytes, wait_ms, consistency };
    loop {
        match g.read(key, params).await {
            ReadAnswer::Page { from, records, view } => {
                if let Some(m) = min_seq
                    && view.next_seq <= m
                {
                    // Linearizable and at least `min_seq`: wait for the record there too.
                    let left = Duration::from_millis(u64::from(wait_ms)).saturating_sub(started.elapsed());
                    if left.is_zero() {
                        return Err(ApiError::unavailable("the record at min_seq is not applied yet; retry"));
                    }
                    params.consistency = Consistency::Reached(m.plus(1));
                    params.wait_ms = u32::try_from(left.as_millis()).unwrap_or(wait_ms);
                    continue;
                }
                // A node caps its own long-poll; the gateway polls again until `wait_ms` passed.
                let left = Duration::from_millis(u64::from(wait_ms)).saturating_sub(started.elapsed());
                if records.is_empty() && !left.is_zero() {
                    params.wait_ms = u32::try_from(left.as_millis()).unwrap_or(wait_ms);
                    continue;
                }
                g.inner.metrics.read(t.tenant, &records);
                let page = Page {
                    from: paros_api::Seq(from.0),
                    records: records.into_iter().map(|r| Record(r.to_vec())).collect(),
                    view: api_view(view),
                };
                return Ok(json(StatusCode::OK, &page));
            }
            ReadAnswer::Truncated { view } => {
                return Err(ApiError::new(ErrorCode::Truncated, "from is below first_seq").with_view(api_view(view)));
            }
            // The cell never denies (authorization happened here); a denial is a cell that
            // could not answer.
            ReadAnswer::Unserved | ReadAnswer::Denied(_) => {
                return Err(ApiError::unavailable("the read was not served in time; retry"));
            }
            ReadAnswer::UnknownJournal => return Err(ApiError::unavailable("the journal is not placed yet; retry")),
        }
    }
}

/// Truncate a journal's prefix.
#[utoipa::path(post, path = "/v1/journals/{name}/truncate", params(("name" = inline(paros_api::JournalName), Path)), request_body = paros_api::TruncateRequest,
    responses((status = 200, body = paros_api::TruncateAnswer), (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody), (status = 403, body = paros_api::ErrorBody),
        (status = 404, body = paros_api::ErrorBody), (status = 409, body = paros_api::ErrorBody),
        (status = 503, body = paros_api::ErrorBody), (status = 504, body = paros_api::ErrorBody)))]
pub(crate) async fn truncate(
    State(g): State<Gateway>,
    Extension(p): Extension<Principal>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let (t, name, key, mode) = named_journal(&g, &p, path, Scope::Write)?;
    let req: TruncateRequest = json_body(&g, &headers, body).await?;
    let Ok(leader) = req.shape(api_mode(mode)) else { return Err(wrong_mode(g.view(key).await?)) };
    let call = Call::Truncate { leader: leader.map(core_leader), up_to: Seq(req.up_to.0) };
    match forward(&g, t.tenant, &name, key, call).await? {
        Ok(Decided::Verdict(Outcome::Trimmed(v))) => {
            Ok(json(StatusCode::OK, &TruncateAnswer { outcome: TruncateVerdict::Trimmed, view: api_view(v) }))
        }
        Ok(Decided::Verdict(Outcome::TruncateRefused(v))) => {
            Err(ApiError::new(ErrorCode::TruncateRefused, "the caller is not the writer in force")
                .with_view(api_view(v)))
        }
        Ok(Decided::Verdict(Outcome::WrongMode(v))) => Err(wrong_mode(api_view(v))),
        other => Err(undecided(&g, other)),
    }
}

/// Follow a journal as server-sent events: `records`, `gap` and `heartbeat`.
#[utoipa::path(get, path = "/v1/journals/{name}/tail", params(("name" = inline(paros_api::JournalName), Path), ("from" = Option<u64>, Query),
        ("Last-Event-ID" = Option<u64>, Header)),
    responses((status = 200, content_type = "text/event-stream", body = String), (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody), (status = 403, body = paros_api::ErrorBody),
        (status = 404, body = paros_api::ErrorBody), (status = 429, body = paros_api::ErrorBody)))]
pub(crate) async fn tail(
    State(g): State<Gateway>,
    Extension(p): Extension<Principal>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let (t, _, key, _) = named_journal(&g, &p, path, Scope::Read)?;
    let last = match headers.get("last-event-id") {
        None => None,
        Some(v) => Some(v.to_str().map_err(|_| ApiError::malformed("Last-Event-ID is a position"))?),
    };
    let start =
        paros_api::tail_start(query.as_deref().unwrap_or(""), last).map_err(|e| ApiError::malformed(e.to_string()))?;
    let slot = g.open_tail(t.tenant)?;
    let cursor = match start {
        Some(s) => Seq(s.0),
        None => Seq(g.view(key).await?.next_seq.0),
    };
    let stream = tail_stream(g, t.tenant, key, cursor, slot);
    Ok(Sse::new(stream).into_response())
}

struct TailState {
    g: Gateway,
    tenant: TenantId,
    key: JournalKey,
    cursor: Seq,
    last_sent: Option<tokio::time::Instant>,
    _slot: crate::state::TailSlot,
}

fn frame(id: Seq, event: &TailEvent) -> Event {
    Event::default().event(event.name()).id(id.0.to_string()).data(event.data())
}

fn tail_stream(
    g: Gateway,
    tenant: TenantId,
    key: JournalKey,
    cursor: Seq,
    slot: crate::state::TailSlot,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let state = TailState { g, tenant, key, cursor, last_sent: None, _slot: slot };
    futures_util::stream::unfold(state, |mut s| async move {
        let heartbeat = s.g.inner.config.heartbeat_interval;
        loop {
            let due = s.last_sent.map_or(Duration::ZERO, |at| heartbeat.saturating_sub(at.elapsed()));
            let wait_ms = u32::try_from(due.as_millis()).unwrap_or(u32::MAX).min(1000);
            let cfg = s.g.inner.config;
            let params = ReadParams {
                from: s.cursor,
                limit: cfg.read_records_max,
                max_bytes: cfg.read_bytes_max,
                wait_ms,
                consistency: Consistency::Linearizable,
            };
            let (event, id) = match s.g.read(s.key, params).await {
                ReadAnswer::Page { from, records, view } if !records.is_empty() => {
                    let next = Seq(from.0 + records.len() as u64);
                    s.g.inner.metrics.read(s.tenant, &records);
                    let page = Page {
                        from: paros_api::Seq(from.0),
                        records: records.into_iter().map(|r| Record(r.to_vec())).collect(),
                        view: api_view(view),
                    };
                    s.cursor = next;
                    (TailEvent::Records(page), next)
                }
                ReadAnswer::Truncated { view } => {
                    let gap = Gap {
                        from: paros_api::Seq(s.cursor.0),
                        resumed_at: paros_api::Seq(view.first_seq.0),
                        view: api_view(view),
                    };
                    s.cursor = view.first_seq;
                    (TailEvent::Gap(gap), view.first_seq)
                }
                ReadAnswer::Page { view, .. } => {
                    if s.last_sent.is_some_and(|at| at.elapsed() < heartbeat) {
                        continue;
                    }
                    let caught_up = s.cursor >= view.next_seq;
                    (TailEvent::Heartbeat(Heartbeat { view: api_view(view), caught_up }), s.cursor)
                }
                ReadAnswer::Unserved | ReadAnswer::UnknownJournal | ReadAnswer::Denied(_) => {
                    if s.g.directory().ok().is_none_or(|d| d.journal(s.key).is_none_or(|j| !j.is_live())) {
                        return None;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            s.last_sent = Some(tokio::time::Instant::now());
            return Some((Ok(frame(id, &event)), s));
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Operations.

/// 200 when the registry answers a linearizable read (a quorum of it is reachable).
#[utoipa::path(get, path = "/healthz", responses((status = 200, content_type = "text/plain", body = String), (status = 503, body = paros_api::ErrorBody)))]
pub(crate) async fn healthz(State(g): State<Gateway>) -> ApiResult<Response> {
    let d = g.directory()?;
    let cell = d.cell().ok_or_else(|| ApiError::unavailable("the cell is not formed"))?;
    let key = JournalKey { tenant: TenantId(0), journal: cell.registry };
    let params =
        ReadParams { from: Seq(0), limit: 1, max_bytes: 1, wait_ms: 0, consistency: Consistency::Linearizable };
    match tokio::time::timeout(Duration::from_secs(2), g.inner.cell.read(key, params, 0)).await {
        Ok(ReadAnswer::Page { .. } | ReadAnswer::Truncated { .. }) => Ok((StatusCode::OK, "ok\n").into_response()),
        _ => Err(ApiError::unavailable("the registry is not reachable now")),
    }
}

/// Prometheus text.
#[utoipa::path(get, path = "/metrics", responses((status = 200, content_type = "application/openmetrics-text", body = String)))]
pub(crate) async fn metrics(State(g): State<Gateway>) -> Response {
    let text = g.inner.metrics.render();
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text).into_response()
}

/// This document.
#[utoipa::path(get, path = "/v1/openapi.json", responses((status = 200, content_type = "application/json", body = Object)))]
pub(crate) async fn openapi_json() -> Response {
    let doc = crate::openapi::document();
    json(StatusCode::OK, &doc)
}
