//! The four calls but the tail: SetLeader, Write, Read and Truncate on
//! `/v1/journals/{name}/…`.

use std::sync::Arc;
use std::time::Instant;

use axum::Extension;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use paros_api::{
    ErrorCode, JournalName, JournalView, Page, ReadQuery, Record, Scope, SetLeaderAnswer, SetLeaderRequest,
    SetLeaderVerdict, ShapeError, TruncateAnswer, TruncateRequest, TruncateVerdict, WriteAnswer, WriteRequest,
    WriteVerdict,
};
use paros_client::{AnswerError, Decided, ReadAnswer, ReadParams};
use paros_core::journal::Outcome;
use paros_core::journal::WriterMode;
use paros_core::{Call, Consistency, JournalKey, Seq, TenantId};
use paros_registry::Quotas;

use crate::access::{named_journal, tenant_quotas};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::state::Gateway;
use crate::wire::{api_mode, json, json_body, no_query};

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

/// Claim or hand over a single-writer journal.
#[utoipa::path(post, path = "/v1/journals/{name}/leader", params(("name" = inline(paros_api::JournalName), Path)),
    request_body = paros_api::SetLeaderRequest,
    responses(
        (status = 200, body = paros_api::SetLeaderAnswer,
            description = "won: the new leader is in force"),
        (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody),
        (status = 403, body = paros_api::ErrorBody),
        (status = 404, body = paros_api::ErrorBody),
        (status = 409, body = paros_api::ErrorBody,
            description = "lost: the compare-and-set failed; the view names the leader in force"),
        (status = 503, body = paros_api::ErrorBody),
        (status = 504, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn set_leader(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let (t, name, key, _) = named_journal(&g, &p, path, Scope::Write)?;
    let req: SetLeaderRequest = json_body(&g, &headers, body).await?;
    no_query(query.as_deref())?;
    let call = Call::SetLeader { new: req.new, old: req.old };
    match g.call(t.tenant, &name, key, call).await? {
        Ok(Decided::Verdict(Outcome::Won(v))) => {
            Ok(json(StatusCode::OK, &SetLeaderAnswer { outcome: SetLeaderVerdict::Won, view: v }))
        }
        Ok(Decided::Verdict(Outcome::Lost(v))) => {
            Err(ApiError::new(ErrorCode::Lost, "SetLeader lost its compare-and-set").with_view(v))
        }
        Ok(Decided::Verdict(Outcome::WrongMode(v))) => Err(wrong_mode(v)),
        other => Err(undecided(&g, other)),
    }
}

fn wrong_mode(view: JournalView) -> ApiError {
    ApiError::new(ErrorCode::WrongMode, "the call is shaped for the other writer mode").with_view(view)
}

/// Write a batch of records.
#[utoipa::path(post, path = "/v1/journals/{name}/records", params(("name" = inline(paros_api::JournalName), Path)),
    request_body = paros_api::WriteRequest,
    responses(
        (status = 200, body = paros_api::WriteAnswer,
            description = "accepted or duplicate: the records are at seq"),
        (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody),
        (status = 403, body = paros_api::ErrorBody),
        (status = 404, body = paros_api::ErrorBody),
        (status = 409, body = paros_api::ErrorBody,
            description = "refused, lost or wrong_mode: judged and refused; the view says why"),
        (status = 410, body = paros_api::ErrorBody,
            description = "truncated: starts below the journal's first retained position, given in the view"),
        (status = 413, body = paros_api::ErrorBody,
            description = "too_large: over the write limits, which the body carries, or the body limit"),
        (status = 429, body = paros_api::ErrorBody),
        (status = 503, body = paros_api::ErrorBody),
        (status = 504, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn write(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let (t, name, key, mode) = named_journal(&g, &p, path, Scope::Write)?;
    let req: WriteRequest = json_body(&g, &headers, body).await?;
    no_query(query.as_deref())?;
    let quotas = tenant_quotas(&g, t.tenant)?;
    let admitted = match admit_write(&g, t.tenant, &quotas, mode, req) {
        Ok(a) => a,
        Err(refusal) => return Err(refusal.answer(&g, key).await),
    };
    let answer = send_write(&g, t.tenant, &name, key, admitted).await?;
    Ok(json(StatusCode::OK, &answer))
}

/// A Write body the door let through: its fence and position, its records, its bytes.
pub(crate) struct Admitted {
    leader: Option<paros_core::LeaderUuid>,
    seq: Seq,
    records: Vec<Bytes>,
    bytes: u64,
}

/// Why the door refused a Write body. Over the limits and the other writer mode answer with the
/// journal's view, which takes a read: [`answer`](Self::answer).
pub(crate) enum DoorRefusal {
    Malformed(ApiError),
    TooLarge,
    WrongMode,
}

impl DoorRefusal {
    /// The refusal as the Write route answers it.
    pub(crate) async fn answer(self, g: &Gateway, key: JournalKey) -> ApiError {
        let view = match self {
            DoorRefusal::Malformed(e) => return e,
            DoorRefusal::TooLarge | DoorRefusal::WrongMode => match g.view(key).await {
                Ok(v) => v,
                Err(e) => return e,
            },
        };
        match self {
            DoorRefusal::TooLarge => ApiError::new(ErrorCode::TooLarge, "the batch is over the write limits")
                .with_limits(g.inner.config.limits())
                .with_view(view),
            _ => wrong_mode(view),
        }
    }
}

/// What the door judges of a parsed Write body, in the contract's order, without waiting: its
/// shape, the bytes charged to the tenant, the write limits, the writer mode. The route's.
pub(crate) fn admit_write(
    g: &Gateway,
    tenant: TenantId,
    quotas: &Quotas,
    mode: WriterMode,
    req: WriteRequest,
) -> Result<Admitted, DoorRefusal> {
    let judged = judge_write(mode, req)?;
    g.inner.quotas.charge_bytes(tenant, quotas, judged.bytes, Instant::now());
    judged.admit(g)
}

/// A parsed Write body whose shape the door has seen, before its bytes are charged.
pub(crate) struct Judged {
    shape: Result<paros_api::WriteShape, ShapeError>,
    records: Vec<Record>,
    /// Its decoded record bytes: what the tenant's bytes/s bucket is charged.
    pub(crate) bytes: u64,
}

/// The first of the door's judgements of a Write body: a fenced write without its position is
/// 400 (and charged nothing).
pub(crate) fn judge_write(mode: WriterMode, req: WriteRequest) -> Result<Judged, DoorRefusal> {
    let shape = req.shape(api_mode(mode));
    if shape == Err(ShapeError::LeaderWithoutSeq) {
        let e = ApiError::malformed("a fenced write names its position: `leader` without `seq`");
        return Err(DoorRefusal::Malformed(e));
    }
    let bytes = req.bytes();
    Ok(Judged { shape, records: req.records, bytes })
}

impl Judged {
    /// The rest, once the bytes are charged: the write limits, then the writer mode.
    pub(crate) fn admit(self, g: &Gateway) -> Result<Admitted, DoorRefusal> {
        let cfg = g.inner.config;
        if self.records.len() as u64 > u64::from(cfg.write_records_max) || self.bytes > cfg.write_bytes_max {
            return Err(DoorRefusal::TooLarge);
        }
        let (leader, seq) = match self.shape {
            Ok(paros_api::WriteShape::Fenced { leader, seq }) => (Some(leader), seq),
            Ok(paros_api::WriteShape::Append) => (None, Seq(0)),
            Err(_) => return Err(DoorRefusal::WrongMode),
        };
        let records = self.records.into_iter().map(|Record(r)| Bytes::from(r)).collect();
        Ok(Admitted { leader, seq, records, bytes: self.bytes })
    }
}

/// Consecutive admitted lines of one append session that travel to the cell as one Write
/// ([`send_lines`]): the same writer at consecutive positions (or all unfenced), within the write
/// limits and `session_lines_per_write_max`; and their records and bytes together.
#[derive(Default)]
pub(crate) struct Group {
    lines: Vec<Admitted>,
    records: usize,
    bytes: u64,
}

impl Group {
    pub(crate) fn of(line: Admitted) -> Group {
        Group { records: line.records.len(), bytes: line.bytes, lines: vec![line] }
    }

    /// The lines held.
    pub(crate) fn len(&self) -> usize {
        self.lines.len()
    }

    /// Adds `line` if it travels with the lines held; else hands it back.
    pub(crate) fn take(&mut self, line: Admitted, cfg: &crate::GatewayConfig) -> Result<(), Admitted> {
        if let Some(first) = self.lines.first() {
            let fits = self.lines.len() < cfg.session_lines_per_write_max
                && (self.records + line.records.len()) as u64 <= u64::from(cfg.write_records_max)
                && self.bytes + line.bytes <= cfg.write_bytes_max;
            let follows = line.leader == first.leader
                && (first.leader.is_none() || line.seq == first.seq.plus(self.records as u64));
            if !(fits && follows) {
                return Err(line);
            }
        }
        self.records += line.records.len();
        self.bytes += line.bytes;
        self.lines.push(line);
        Ok(())
    }
}

/// A group of lines' place among the groups of one append session: the end of the group sent
/// before it (whether that group was judged line by line), and its own end, for the next.
pub(crate) struct Turn {
    pub(crate) after: Option<tokio::sync::oneshot::Receiver<bool>>,
    pub(crate) done: tokio::sync::oneshot::Sender<bool>,
}

/// A [`Group`] of lines of an append session sent to the cell as one Write, and one answer a
/// line: what the Write route would
/// have answered each, had they been sent apart and applied one after another.
/// - `accepted` or `duplicate` for the whole is that for each line, at its own positions (an
///   accepted line's view ends at its own last record, as it would alone);
/// - any other verdict is judged line by line: once the group before has ended, each line is
///   sent alone, in order (a retry of positions already written answers `duplicate` by range,
///   docs/decisions.md). A lone line's verdict stands, unless the group before was judged line
///   by line: it may have been refused only because it overtook those lines, so it is sent
///   again after them. Re-sending is safe: a verdict other than `accepted` wrote nothing;
/// - no verdict (ambiguous, unavailable) is the same answer for every line.
pub(crate) async fn send_lines(
    g: &Gateway,
    tenant: TenantId,
    name: &JournalName,
    key: JournalKey,
    group: Group,
    turn: Turn,
) -> Vec<ApiResult<WriteAnswer>> {
    let (Turn { after, done }, lines) = (turn, group.lines);
    let (leader, seq) = (lines[0].leader, lines[0].seq);
    let records: Vec<Bytes> = lines.iter().flat_map(|l| l.records.iter().cloned()).collect();
    let total = records.len() as u64;
    let decided = g.call(tenant, name, key, Call::Write { leader, seq, records }).await;
    let (outcome, at, view) = match decided {
        Ok(Ok(Decided::Verdict(Outcome::Accepted { seq, count, view }))) if count == total => {
            (WriteVerdict::Accepted, seq, view)
        }
        Ok(Ok(Decided::Verdict(Outcome::Duplicate { seq, count, view }))) if count == total => {
            (WriteVerdict::Duplicate, seq, view)
        }
        Ok(Ok(decided @ (Decided::Verdict(_) | Decided::TooLarge(_)))) => {
            let before_split = match after {
                Some(after) => after.await.unwrap_or(false),
                None => false,
            };
            if lines.len() == 1 && !before_split {
                let answer = write_answer(g, tenant, key, Ok(decided), lines[0].bytes).await;
                let _ = done.send(false);
                return vec![answer];
            }
            let mut answers = Vec::with_capacity(lines.len());
            for line in lines {
                answers.push(send_write(g, tenant, name, key, line).await);
            }
            let _ = done.send(true);
            return answers;
        }
        Ok(other) => {
            let _ = done.send(false);
            return vec![Err(undecided(g, other)); lines.len()];
        }
        Err(e) => {
            let _ = done.send(false);
            return vec![Err(e); lines.len()];
        }
    };
    let _ = done.send(false);
    let mut next = at;
    lines
        .into_iter()
        .map(|line| {
            let (seq, count) = (next, line.records.len() as u64);
            next = seq.plus(count);
            let view = if outcome == WriteVerdict::Accepted {
                g.inner.metrics.written(tenant, count, line.bytes);
                JournalView { next_seq: next, ..view }
            } else {
                view
            };
            Ok(WriteAnswer { outcome, seq, count, view })
        })
        .collect()
}

/// An admitted Write sent to the cell, and its verdict as the route answers it.
pub(crate) async fn send_write(
    g: &Gateway,
    tenant: TenantId,
    name: &JournalName,
    key: JournalKey,
    admitted: Admitted,
) -> ApiResult<WriteAnswer> {
    let Admitted { leader, seq, records, bytes } = admitted;
    let decided = g.call(tenant, name, key, Call::Write { leader, seq, records }).await?;
    write_answer(g, tenant, key, decided, bytes).await
}

/// A Write's verdict as the route answers it (`bytes`: the write's, counted when accepted).
async fn write_answer(
    g: &Gateway,
    tenant: TenantId,
    key: JournalKey,
    decided: Result<Decided, AnswerError>,
    bytes: u64,
) -> ApiResult<WriteAnswer> {
    let (outcome, at, count, view) = match decided {
        Ok(Decided::Verdict(Outcome::Accepted { seq, count, view })) => (WriteVerdict::Accepted, seq, count, view),
        Ok(Decided::Verdict(Outcome::Duplicate { seq, count, view })) => (WriteVerdict::Duplicate, seq, count, view),
        Ok(Decided::Verdict(Outcome::Refused(v))) => {
            return Err(ApiError::new(ErrorCode::Refused, "the write was refused in place").with_view(v));
        }
        Ok(Decided::Verdict(Outcome::Truncated(v))) => {
            return Err(ApiError::new(ErrorCode::Truncated, "the write starts below first_seq").with_view(v));
        }
        Ok(Decided::Verdict(Outcome::WrongMode(v))) => return Err(wrong_mode(v)),
        Ok(Decided::TooLarge(tl)) => {
            let view = g.view(key).await?;
            return Err(undecided(g, Ok(Decided::TooLarge(tl))).with_view(view));
        }
        other => return Err(undecided(g, other)),
    };
    if outcome == WriteVerdict::Accepted {
        g.inner.metrics.written(tenant, count, bytes);
    }
    // One trip: the verdict carries the view the write was applied in.
    Ok(WriteAnswer { outcome, seq: at, count, view })
}

/// Read records from a position.
#[utoipa::path(get, path = "/v1/journals/{name}/records",
    params(("name" = inline(paros_api::JournalName), Path), ("from" = u64, Query), ("limit" = Option<u64>, Query),
        ("max_bytes" = Option<u64>, Query), ("wait_ms" = Option<u64>, Query), ("consistency" = Option<String>, Query),
        ("min_seq" = Option<u64>, Query)),
    responses(
        (status = 200, body = paros_api::Page,
            description = "a page of records, maybe empty at the tail",
            headers(("paros-served-by" = String,
                description = "the server whose answer this is (a read replica, else a voter), 16 hex digits"))),
        (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody),
        (status = 403, body = paros_api::ErrorBody),
        (status = 404, body = paros_api::ErrorBody),
        (status = 410, body = paros_api::ErrorBody,
            description = "truncated: starts below the journal's first retained position, given in the view"),
        (status = 503, body = paros_api::ErrorBody,
            description = "unavailable: not served within wait_ms (an at_least read: the record at min_seq \
                is not applied); applied_to, when present, is how far the closest server had applied"),
    ))]
pub(crate) async fn read(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let (t, _, key, _) = named_journal(&g, &p, path, Scope::Read)?;
    let q = ReadQuery::parse(query.as_deref().unwrap_or("")).map_err(|e| ApiError::malformed(e.to_string()))?;
    let cfg = g.inner.config;
    let clamp = |v: Option<std::num::NonZeroU64>, max: u32| {
        v.map_or(max, |v| u32::try_from(v.get()).unwrap_or(u32::MAX).min(max))
    };
    let (consistency, reach) = paros_client::convert::core_consistency(q.consistency);
    let params = ReadParams {
        from: q.from,
        limit: clamp(q.limit, cfg.read_records_max),
        max_bytes: clamp(q.max_bytes, cfg.read_bytes_max),
        wait_ms: u32::from(q.wait_ms.get()),
        consistency,
    };
    let served = g.read(key, params, reach).await;
    match served.answer {
        ReadAnswer::Page { from, records, view } => {
            g.inner.metrics.read(t.tenant, &records);
            let page = Page { from, records: records.into_iter().map(|r| Record(r.to_vec())).collect(), view };
            let mut response = json(StatusCode::OK, &page);
            if let Some(by) = served.by
                && let Ok(value) = axum::http::HeaderValue::from_str(&by.to_string())
            {
                response.headers_mut().insert(SERVED_BY, value);
            }
            Ok(response)
        }
        ReadAnswer::Truncated { view } => {
            Err(ApiError::new(ErrorCode::Truncated, "from is below first_seq").with_view(view))
        }
        // A read at least at `min_seq` not served within `wait_ms` (the contract: 503), saying
        // how far the closest server had applied the journal when one said.
        ReadAnswer::Unserved { applied_to } if consistency != Consistency::Linearizable || reach.is_some() => {
            Err(ApiError::unavailable("the record at min_seq is not applied within wait_ms; retry")
                .with_applied_to(applied_to))
        }
        ReadAnswer::Unserved { applied_to } => {
            Err(ApiError::unavailable("the read was not served in time; retry").with_applied_to(applied_to))
        }
        // The cell never denies (authorization happened here); a denial is a cell that could
        // not answer.
        ReadAnswer::Denied(_) => Err(ApiError::unavailable("the read was not served in time; retry")),
        ReadAnswer::UnknownJournal => Err(ApiError::unavailable("the journal is not placed yet; retry")),
    }
}

/// The response header of a served read that names the server whose answer it is (a read
/// replica, else a voter), as 16 hex digits.
pub(crate) const SERVED_BY: axum::http::HeaderName = axum::http::HeaderName::from_static("paros-served-by");

/// Truncate a journal's prefix.
#[utoipa::path(post, path = "/v1/journals/{name}/truncate", params(("name" = inline(paros_api::JournalName), Path)),
    request_body = paros_api::TruncateRequest,
    responses(
        (status = 200, body = paros_api::TruncateAnswer,
            description = "trimmed: the journal now starts at up_to or later"),
        (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody),
        (status = 403, body = paros_api::ErrorBody),
        (status = 404, body = paros_api::ErrorBody),
        (status = 409, body = paros_api::ErrorBody,
            description = "truncate_refused or wrong_mode: not the writer in force, or the other mode"),
        (status = 503, body = paros_api::ErrorBody),
        (status = 504, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn truncate(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let (t, name, key, mode) = named_journal(&g, &p, path, Scope::Write)?;
    let req: TruncateRequest = json_body(&g, &headers, body).await?;
    no_query(query.as_deref())?;
    let Ok(leader) = req.shape(api_mode(mode)) else { return Err(wrong_mode(g.view(key).await?)) };
    let call = Call::Truncate { leader, up_to: req.up_to };
    match g.call(t.tenant, &name, key, call).await? {
        Ok(Decided::Verdict(Outcome::Trimmed(v))) => {
            Ok(json(StatusCode::OK, &TruncateAnswer { outcome: TruncateVerdict::Trimmed, view: v }))
        }
        Ok(Decided::Verdict(Outcome::TruncateRefused(v))) => {
            Err(ApiError::new(ErrorCode::TruncateRefused, "the caller is not the writer in force").with_view(v))
        }
        Ok(Decided::Verdict(Outcome::WrongMode(v))) => Err(wrong_mode(v)),
        other => Err(undecided(&g, other)),
    }
}
