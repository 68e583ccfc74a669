//! Who may call what: the bearer token (401), the tenant's quotas, the token's scope and
//! journal restriction (403), and the journal a path names (400, 404), in the contract's order.

use std::sync::Arc;

use axum::extract::Path;
use axum::extract::rejection::PathRejection;
use axum::http::{HeaderMap, header};
use paros_api::{JournalName, Scope};
use paros_core::journal::WriterMode as CoreMode;
use paros_core::{JournalKey, TenantId};
use paros_registry::{Directory, Quotas};

use crate::auth::{self, Principal, TenantToken, now_s};
use crate::error::{ApiError, ApiResult};
use crate::state::Gateway;

fn bearer(headers: &HeaderMap) -> Result<&str, auth::Refusal> {
    let value = headers.get(header::AUTHORIZATION).ok_or(auth::Refusal::Missing)?;
    let token = value.to_str().ok().and_then(|v| v.strip_prefix("Bearer ")).map(str::trim).filter(|t| !t.is_empty());
    token.ok_or(auth::Refusal::MalformedHeader)
}

/// The verified token, or 401 (counted by reason), and the directory it was checked against.
pub(crate) fn principal_of(g: &Gateway, headers: &HeaderMap) -> ApiResult<(Arc<Principal>, Arc<Directory>)> {
    let refused = |r: auth::Refusal| {
        g.inner.metrics.refused(r);
        ApiError::from(r)
    };
    let token = bearer(headers).map_err(refused)?;
    let directory = g.directory()?;
    let principal = g.inner.tokens.verify(&directory, token, now_s()).map_err(refused)?;
    Ok((principal, directory))
}

/// The tenant's quotas in `d` (the configured default for a tenant it does not list).
pub(crate) fn quotas_in(g: &Gateway, d: &Directory, tenant: TenantId) -> Quotas {
    d.tenant(tenant).map_or(g.inner.config.quotas_default, |t| t.quotas)
}

/// The tenant's quotas now.
pub(crate) fn tenant_quotas(g: &Gateway, tenant: TenantId) -> ApiResult<Quotas> {
    Ok(quotas_in(g, &*g.directory()?, tenant))
}

/// The tenant token, or 403 for an admin token on a tenant route.
pub(crate) fn tenant_of(p: &Principal) -> ApiResult<&TenantToken> {
    match p {
        Principal::Tenant(t) => Ok(t),
        Principal::Admin { .. } => {
            Err(ApiError::forbidden("an admin token is no tenant's: tenant routes need a tenant token"))
        }
    }
}

/// 403 unless the token's scope includes `need` and its restriction allows `journal`.
pub(crate) fn require(t: &TenantToken, need: Scope, journal: Option<&str>) -> ApiResult<()> {
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
pub(crate) fn unrestricted(t: &TenantToken) -> ApiResult<()> {
    if t.journal.is_some() {
        return Err(ApiError::forbidden("a journal-restricted token may not do this"));
    }
    Ok(())
}

/// The path's one segment, or 400.
pub(crate) fn path_name(path: Result<Path<String>, PathRejection>) -> ApiResult<String> {
    path.map(|Path(p)| p).map_err(|e| ApiError::malformed(format!("bad path: {e}")))
}

/// A journal name, or 400.
pub(crate) fn parse_name(raw: &str) -> ApiResult<JournalName> {
    JournalName::parse(raw).map_err(|e| ApiError::malformed(format!("bad journal name: {e}")))
}

/// The journal a tenant route names, in the contract's order: a tenant token (403 for admin), a path
/// (400), the scope and journal restriction (403), the name (400), the journal (404).
pub(crate) fn named_journal<'p>(
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

/// The live journal `name` of `tenant`: 404 when the directory does not know it.
pub(crate) fn resolve(g: &Gateway, tenant: TenantId, name: &JournalName) -> ApiResult<(JournalKey, CoreMode)> {
    let d = g.directory()?;
    let j = d.journal_by_name(tenant, name).ok_or_else(ApiError::unknown_journal)?;
    Ok((j.key, j.mode))
}
