//! `GET /v1/journals/{name}/tail`: a journal followed as server-sent events.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use paros_api::{Gap, Heartbeat, Page, Record, Scope, TailEvent};
use paros_client::{ReadAnswer, ReadParams};
use paros_core::{Consistency, JournalKey, Seq, TenantId};

use crate::access::named_journal;
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::state::{Gateway, TailSlot};

/// Follow a journal as server-sent events: `records`, `gap` and `heartbeat`.
#[utoipa::path(get, path = "/v1/journals/{name}/tail",
    params(("name" = inline(paros_api::JournalName), Path), ("from" = Option<u64>, Query),
        ("Last-Event-ID" = Option<u64>, Header)),
    responses(
        (status = 200, content_type = "text/event-stream", body = String,
            description = "an SSE stream of records, gaps and heartbeats"),
        (status = 400, body = paros_api::ErrorBody),
        (status = 401, body = paros_api::ErrorBody),
        (status = 403, body = paros_api::ErrorBody),
        (status = 404, body = paros_api::ErrorBody),
        (status = 429, body = paros_api::ErrorBody),
    ))]
pub(crate) async fn tail(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
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
        Some(s) => s,
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
    _slot: TailSlot,
}

fn frame(id: Seq, event: &TailEvent) -> Event {
    Event::default().event(event.name()).id(id.0.to_string()).data(event.data())
}

/// The tail's events: each step is one read of the cell port that waits at the tail until
/// the next heartbeat is due, so a step answers records, a gap, or the heartbeat.
fn tail_stream(
    g: Gateway,
    tenant: TenantId,
    key: JournalKey,
    cursor: Seq,
    slot: TailSlot,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let state = TailState { g, tenant, key, cursor, last_sent: None, _slot: slot };
    futures_util::stream::unfold(state, |mut s| async move {
        let (event, id) = loop {
            if let Some(next) = next_event(&mut s).await? {
                break next;
            }
            // Not served (the port retried within its bounds): the journal may be deleted,
            // which ends the tail, or its servers busy, which the next step asks again.
            tokio::time::sleep(NOT_SERVED_PAUSE).await;
        };
        s.last_sent = Some(tokio::time::Instant::now());
        Some((Ok(frame(id, &event)), s))
    })
}

/// How long a tail pauses after a read its servers could not serve.
const NOT_SERVED_PAUSE: Duration = Duration::from_millis(100);

/// One read at the cursor: `Some(Some(event))` to send, `Some(None)` when not served, `None`
/// when the journal is gone (the tail ends).
async fn next_event(s: &mut TailState) -> Option<Option<(TailEvent, Seq)>> {
    let cfg = s.g.inner.config;
    // The first step of a tail reads without waiting: a cursor at the tail gets a heartbeat at
    // once (the view, and that the tail is live). After that, a long-poll until the heartbeat
    // is due; a node ends its own long-poll sooner (its cap), and then the read is asked again
    // for the rest of the wait.
    let next = loop {
        let due = s.last_sent.map_or(Duration::ZERO, |at| cfg.heartbeat_interval.saturating_sub(at.elapsed()));
        let params = ReadParams {
            from: s.cursor,
            limit: cfg.read_records_max,
            max_bytes: cfg.read_bytes_max,
            wait_ms: u32::try_from(due.as_millis()).unwrap_or(u32::MAX),
            consistency: Consistency::Linearizable,
        };
        let asked = tokio::time::Instant::now();
        break match s.g.read(s.key, params, None).await.answer {
            ReadAnswer::Page { from, records, view } if !records.is_empty() => {
                let next = Seq(from.0 + records.len() as u64);
                s.g.inner.metrics.read(s.tenant, &records);
                let page = Page { from, records: records.into_iter().map(|r| Record(r.to_vec())).collect(), view };
                s.cursor = next;
                (TailEvent::Records(page), next)
            }
            ReadAnswer::Truncated { view } => {
                let gap = Gap { from: s.cursor, resumed_at: view.first_seq, view };
                s.cursor = view.first_seq;
                (TailEvent::Gap(gap), view.first_seq)
            }
            ReadAnswer::Page { .. } if s.last_sent.is_some_and(|at| at.elapsed() < cfg.heartbeat_interval) => {
                // A server that answered at once rather than long-polling is not asked again
                // at once.
                if asked.elapsed() < NOT_SERVED_PAUSE {
                    tokio::time::sleep(NOT_SERVED_PAUSE).await;
                }
                continue;
            }
            ReadAnswer::Page { view, .. } => {
                let caught_up = s.cursor >= view.next_seq;
                (TailEvent::Heartbeat(Heartbeat { view, caught_up }), s.cursor)
            }
            ReadAnswer::Unserved { .. } | ReadAnswer::UnknownJournal | ReadAnswer::Denied(_) => {
                let live = s.g.directory().ok().is_some_and(|d| d.journal(s.key).is_some_and(|j| j.is_live()));
                return live.then_some(None);
            }
        };
    };
    Some(Some(next))
}
