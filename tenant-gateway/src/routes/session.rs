//! `POST /v1/journals/{name}/session`: the append session. Write request bodies come in as
//! lines without waiting; each is judged and sent on exactly as `POST …/records` would be, in the
//! order read, several in the cell at once; the answers go out in the same order, one line each
//! (`paros_api::session`). The first answer that is not 200 ends the session: no line is read
//! after it, the lines read before the end are answered, and an end line closes the stream.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::Extension;
use axum::body::{Body, BodyDataStream};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use futures_util::stream::FuturesOrdered;
use futures_util::{FutureExt as _, StreamExt as _};
use paros_api::{
    ErrorCode, JournalName, SESSION_CONTENT_TYPE, Scope, SessionEnd, SessionEndCode, SessionLine, WriteAnswer,
    WriteRequest,
};
use paros_core::journal::WriterMode;
use paros_core::{JournalKey, TenantId};
use paros_registry::Quotas;
use paros_registry::daemon::Followed;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::records::{Admitted, DoorRefusal, Group, Turn, judge_write, send_lines};
use crate::access::{named_journal, quotas_in};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::quota::{Over, TenantQuota};
use crate::state::{Gateway, TailSlot};
use crate::wire::{media_type_is, no_query};

/// Open an append session: pipelined writes on one stream, answered in order.
#[utoipa::path(post, path = "/v1/journals/{name}/session", params(("name" = inline(paros_api::JournalName), Path)),
    request_body(content = String, content_type = "application/x-ndjson",
        description = "Write request bodies (`WriteRequest`), one JSON object per line"),
    responses(
        (status = 200, content_type = "application/x-ndjson", body = String,
            description = "one line per request line, in order: `{\"status\", \"body\"}` as the Write route \
                answers it (`retry_after_s` on a 429); after the first that is not 200, an end line \
                (`{\"end\": SessionEnd}`) closes the stream"),
        // The refusals of the whole session (400, 401, 403, 404, 429, 503) are the ones every
        // authenticated `{name}` route with a body answers: `openapi::refine` adds them.
    ))]
pub(crate) async fn session(
    State(g): State<Gateway>,
    Extension(p): Extension<Arc<Principal>>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let (t, name, key, mode) = named_journal(&g, &p, path, Scope::Write)?;
    no_query(query.as_deref())?;
    if !media_type_is(&headers, SESSION_CONTENT_TYPE) {
        return Err(ApiError::malformed(format!("a session's body is {SESSION_CONTENT_TYPE}")));
    }
    let slot = g.open_session(t.tenant)?;
    // The tenant's quotas as of the directory now; read again only when the directory changes.
    let mut directory = g.inner.directory.clone();
    let d = directory.borrow_and_update().directory.clone();
    let quotas = d.map_or(g.inner.config.quotas_default, |d| quotas_in(&g, &d, t.tenant));
    let (out, answers) = mpsc::channel::<Bytes>(g.inner.config.session_in_flight_max.max(1));
    let session = Session {
        quota: g.inner.quotas.tenant(t.tenant),
        g: g.clone(),
        tenant: t.tenant,
        name: Arc::new(name),
        key,
        mode,
        directory,
        quotas,
        last_group: None,
        held: None,
        _slot: slot,
    };
    tokio::spawn(session.run(body.into_data_stream(), out));
    // The answers ready together leave as one chunk.
    let stream = futures_util::stream::unfold(answers, |mut answers| async move {
        let first = answers.recv().await?;
        let chunk = paros_api::session::gather(first, || answers.try_recv().ok());
        Some((Ok::<_, Infallible>(chunk), answers))
    });
    let content_type = [(header::CONTENT_TYPE, HeaderValue::from_static(SESSION_CONTENT_TYPE))];
    Ok((StatusCode::OK, content_type, Body::from_stream(stream)).into_response())
}

/// The answers of consecutive lines, in order: one Write (several lines the cell takes as one,
/// [`send_lines`]) or one line the door refused.
type Answering = Pin<Box<dyn Future<Output = Vec<ApiResult<WriteAnswer>>> + Send>>;

struct Session {
    g: Gateway,
    tenant: TenantId,
    name: Arc<JournalName>,
    key: JournalKey,
    mode: WriterMode,
    /// The tenant's rate buckets: one lock a line, no lookup.
    quota: TenantQuota,
    /// The directory `quotas` were read from, to notice when it changes.
    directory: watch::Receiver<Followed>,
    quotas: Quotas,
    /// The end of the group of lines sent last ([`Turn`]).
    last_group: Option<oneshot::Receiver<bool>>,
    /// A line over a quota, waiting for it ([`GatewayConfig::session_quota_wait_max`]): no
    /// further line is read meanwhile.
    ///
    /// [`GatewayConfig::session_quota_wait_max`]: crate::GatewayConfig::session_quota_wait_max
    held: Option<Held>,
    /// Held until the session's task ends.
    _slot: TailSlot,
}

impl Session {
    async fn run(mut self, body: BodyDataStream, out: mpsc::Sender<Bytes>) {
        let cfg = self.g.inner.config;
        let mut lines = Lines::new(body, usize::try_from(cfg.body_limit_bytes).unwrap_or(usize::MAX));
        let mut in_flight: FuturesOrdered<Answering> = FuturesOrdered::new();
        // Lines read and not yet answered (`in_flight` holds them in groups).
        let mut unanswered = 0usize;
        let mut answered = 0u64;
        // Why no further line is read; the first refusal answered, which names the end.
        let mut end: Option<(SessionEndCode, String)> = None;
        let mut first_refusal: Option<String> = None;
        // The idle timer is armed once and moved only when it fires early, not once per line.
        let mut idle_since = Instant::now();
        let idle = tokio::time::sleep_until(idle_since + cfg.session_idle_timeout);
        tokio::pin!(idle);
        let room = cfg.session_in_flight_max.max(1);
        // The end of a held line's wait (armed when a line is held).
        let quota_wait = tokio::time::sleep_until(Instant::now());
        tokio::pin!(quota_wait);
        loop {
            if end.is_some() && in_flight.is_empty() {
                break;
            }
            let reading = end.is_none() && self.held.is_none() && unanswered < room;
            tokio::select! {
                biased;
                Some(answers) = in_flight.next(), if !in_flight.is_empty() => {
                    unanswered -= answers.len();
                    for answer in answers {
                        let (line, refused) = answer_line(answer);
                        if out.send(line).await.is_err() {
                            return; // the caller hung up: nothing left to tell
                        }
                        answered += 1;
                        if let Some(e) = refused.filter(|_| first_refusal.is_none()) {
                            first_refusal = Some(refused_at(answered - 1, &e));
                            end.get_or_insert((SessionEndCode::Refused, String::new()));
                        }
                    }
                    idle_since = tokio::time::Instant::now();
                }
                next = lines.next(), if reading => {
                    idle_since = Instant::now();
                    unanswered += self.take_lines(next, &mut lines, &mut in_flight, unanswered, &mut end);
                }
                () = &mut quota_wait, if end.is_none() && self.held.is_some() => {
                    let held = self.held.as_ref().map(|h| h.line.clone());
                    unanswered += self.take_lines(held.map(Ok), &mut lines, &mut in_flight, unanswered, &mut end);
                }
                () = &mut idle, if reading && in_flight.is_empty() => {
                    let idle_at = idle_since + cfg.session_idle_timeout;
                    if Instant::now() < idle_at {
                        idle.as_mut().reset(idle_at);
                    } else {
                        let idle = cfg.session_idle_timeout.as_millis();
                        end = Some((SessionEndCode::Idle, format!("no line for {idle} ms")));
                    }
                }
            }
            if let Some(held) = self.held.as_ref().filter(|_| end.is_none()) {
                quota_wait.as_mut().reset(held.retry_at);
            }
        }
        // The first refusal names the end, even when the body had ended before it.
        let (code, message) = match (first_refusal, end) {
            (Some(message), _) => (SessionEndCode::Refused, message),
            (None, end) => end.unwrap_or((SessionEndCode::Closed, String::new())),
        };
        let line = SessionLine::End(SessionEnd { code, answered, message }).encode();
        let _ = out.send(Bytes::from(line)).await;
    }

    /// The tenant's quotas: those read last, unless the directory changed since.
    fn quotas(&mut self) -> Quotas {
        if self.directory.has_changed().unwrap_or(false)
            && let Some(d) = self.directory.borrow_and_update().directory.clone()
        {
            self.quotas = quotas_in(&self.g, &d, self.tenant);
        }
        self.quotas
    }

    /// Takes the line `first` read and the lines already readable after it, without waiting:
    /// consecutive admitted lines travel together (a group is sent when no further line is
    /// ready, one does not fit, or one is refused); a line over a quota is held and ends the
    /// taking. The lines sent.
    fn take_lines(
        &mut self,
        first: Option<Result<Bytes, LineError>>,
        lines: &mut Lines,
        in_flight: &mut FuturesOrdered<Answering>,
        unanswered: usize,
        end: &mut Option<(SessionEndCode, String)>,
    ) -> usize {
        let cfg = self.g.inner.config;
        let room = cfg.session_in_flight_max.max(1);
        let mut sent = 0;
        let mut group = Group::default();
        let mut next = Some(first);
        while let Some(read) = next.take() {
            match self.read(read, end) {
                Ok(line) => {
                    if let Err(line) = group.take(line, &cfg) {
                        let full = std::mem::replace(&mut group, Group::of(line));
                        sent += self.send(in_flight, full);
                    }
                }
                Err(Some(refusal)) => {
                    sent += self.send(in_flight, std::mem::take(&mut group)) + 1;
                    in_flight.push_back(refusal);
                }
                Err(None) => {}
            }
            if end.is_none() && self.held.is_none() && unanswered + sent + group.len() < room {
                next = lines.next().now_or_never();
            }
        }
        sent + self.send(in_flight, group)
    }

    /// One read from the body: an admitted line; a refusal to answer in its place (which ends
    /// the reading); or nothing: the line is held for a quota ([`Session::held`]), or the body
    /// ended (which ends the reading).
    fn read(
        &mut self,
        read: Option<Result<Bytes, LineError>>,
        end: &mut Option<(SessionEndCode, String)>,
    ) -> Result<Admitted, Option<Answering>> {
        let refused = |e: ApiError| -> Answering { Box::pin(std::future::ready(vec![Err(e)])) };
        let cfg = self.g.inner.config;
        match read {
            Some(Ok(line)) => match self.admit(&line, Instant::now()) {
                Ok(admitted) => Ok(admitted),
                Err(Door::Hold(held)) => {
                    self.held = Some(held);
                    Err(None)
                }
                Err(Door::Refused(refusal)) => {
                    *end = Some((SessionEndCode::Refused, String::new()));
                    Err(Some(refusal))
                }
            },
            Some(Err(e)) => {
                let e = match e {
                    LineError::TooLong => {
                        ApiError::new(ErrorCode::TooLarge, format!("a line is over {} bytes", cfg.body_limit_bytes))
                            .with_limits(cfg.limits())
                    }
                    LineError::Read(e) => ApiError::malformed(format!("reading the body: {e}")),
                };
                *end = Some((SessionEndCode::Refused, String::new()));
                Err(Some(refused(e)))
            }
            None => {
                *end = Some((SessionEndCode::Closed, "the request body ended".into()));
                Err(None)
            }
        }
    }

    /// Sends `group` (if it holds a line) to the cell, after the group sent last; the lines
    /// sent.
    fn send(&mut self, in_flight: &mut FuturesOrdered<Answering>, group: Group) -> usize {
        let n = group.len();
        if n > 0 {
            let g = self.g.clone();
            g.inner.metrics.session_write(n as u64);
            let (done, next) = oneshot::channel();
            let turn = Turn { after: self.last_group.replace(next), done };
            let (tenant, name, key) = (self.tenant, Arc::clone(&self.name), self.key);
            in_flight.push_back(Box::pin(async move { send_lines(&g, tenant, &name, key, group, turn).await }));
        }
        n
    }

    /// What the door judges of one line as it is read, in the Write route's order (the quotas
    /// first, then the body), so that a line refused here ends the session before another is
    /// read; the line admitted, held for a quota, or the future that answers its refusal. The
    /// line is parsed before the quotas are taken, so that both buckets and the charge of its
    /// bytes take one lock, and judged after: a 429 still wins over a 400, and a line refused
    /// or held for a quota charges nothing. A line over a quota waits while its wait, counted
    /// from when it was first held, stays within `session_quota_wait_max`.
    fn admit(&mut self, line: &Bytes, now: Instant) -> Result<Admitted, Door> {
        let refuse = |e: ApiError| Door::Refused(Box::pin(std::future::ready(vec![Err(e)])));
        let judged = serde_json::from_slice::<WriteRequest>(line)
            .map_err(|e| DoorRefusal::Malformed(ApiError::malformed(format!("bad line: {e}"))))
            .and_then(|req| judge_write(self.mode, req));
        let quotas = self.quotas();
        let held_since = self.held.take().map_or(now, |h| h.since);
        let over = match self.quota.admit(&quotas, now.into_std(), judged.as_ref().ok().map(|j| j.bytes)) {
            Ok(()) => None,
            Err(Over::Requests(wait)) => Some((wait, "over the tenant's requests/s")),
            Err(Over::Bytes(wait)) => Some((wait, "over the tenant's bytes/s")),
        };
        if let Some((wait, message)) = over {
            let retry_at = now + wait;
            if retry_at.saturating_duration_since(held_since) <= self.g.inner.config.session_quota_wait_max {
                self.g.inner.metrics.session_quota_wait();
                return Err(Door::Hold(Held { line: line.clone(), since: held_since, retry_at }));
            }
            return Err(refuse(ApiError::over_quota(message, wait)));
        }
        let (g, key) = (self.g.clone(), self.key);
        judged
            .and_then(|j| j.admit(&g))
            .map_err(|refusal| Door::Refused(Box::pin(async move { vec![Err(refusal.answer(&g, key).await)] })))
    }
}

/// A line of a session over a quota, waiting for it.
struct Held {
    line: Bytes,
    /// When it was first held: its waits together stay within `session_quota_wait_max`.
    since: Instant,
    /// When the quota should admit it.
    retry_at: Instant,
}

/// What the door does with a line it does not admit now.
enum Door {
    /// Hold it until the quota admits it.
    Hold(Held),
    /// Answer it with a refusal (which ends the session).
    Refused(Answering),
}

/// The end's message for a refusal of the line at `index` (from 0).
fn refused_at(index: u64, e: &ApiError) -> String {
    format!("line {} was answered {} ({})", index + 1, e.code_name(), e.status())
}

/// The answer line, and the refusal (which ends the session).
fn answer_line(answer: ApiResult<WriteAnswer>) -> (Bytes, Option<ApiError>) {
    let (line, refused) = match answer {
        Ok(a) => (paros_api::session::answer_line(200, None, &a), None),
        Err(e) => (paros_api::session::answer_line(e.status(), e.retry_after_s(), &e.body()), Some(e)),
    };
    (Bytes::from(line.expect("API bodies serialize")), refused)
}

/// Why the request body yields no more lines.
enum LineError {
    /// A line passed the body limit without ending.
    TooLong,
    /// The body failed (the connection broke mid-line).
    Read(String),
}

/// The request body cut into lines: blank lines are skipped, the last line may lack its
/// newline, and a line longer than the body limit is refused (413) once it passes the limit.
struct Lines {
    body: BodyDataStream,
    buf: BytesMut,
    limit: usize,
    /// Where the search for the next newline resumes.
    scanned: usize,
    done: bool,
}

impl Lines {
    fn new(body: BodyDataStream, limit: usize) -> Lines {
        Lines { body, buf: BytesMut::new(), limit, scanned: 0, done: false }
    }

    /// Ends the reading with `e`: nothing more is read.
    fn fail(&mut self, e: LineError) -> Option<Result<Bytes, LineError>> {
        self.done = true;
        self.buf.clear();
        self.scanned = 0;
        Some(Err(e))
    }

    /// The next line, an error that ends the reading, or `None` at the end of the body.
    async fn next(&mut self) -> Option<Result<Bytes, LineError>> {
        loop {
            if let Some(i) = self.buf[self.scanned..].iter().position(|&b| b == b'\n') {
                if self.scanned + i > self.limit {
                    return self.fail(LineError::TooLong);
                }
                let line = self.buf.split_to(self.scanned + i + 1).freeze();
                self.scanned = 0;
                let line = line.slice(..line.len() - 1);
                if line.trim_ascii().is_empty() {
                    continue;
                }
                return Some(Ok(line));
            }
            self.scanned = self.buf.len();
            if self.buf.len() > self.limit {
                return self.fail(LineError::TooLong);
            }
            if self.done {
                let rest = std::mem::take(&mut self.buf).freeze();
                self.scanned = 0;
                return (!rest.trim_ascii().is_empty()).then_some(Ok(rest));
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.buf.extend_from_slice(&chunk),
                Some(Err(e)) => return self.fail(LineError::Read(e.to_string())),
                None => self.done = true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(chunks: Vec<&'static [u8]>, limit: usize) -> Vec<Result<Bytes, String>> {
        let body = Body::from_stream(futures_util::stream::iter(chunks.into_iter().map(Ok::<_, Infallible>)));
        let mut lines = Lines::new(body.into_data_stream(), limit);
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let mut out = vec![];
            while let Some(line) = lines.next().await {
                out.push(line.map_err(|e| match e {
                    LineError::TooLong => "too long".to_owned(),
                    LineError::Read(e) => e,
                }));
            }
            out
        })
    }

    #[test]
    fn a_body_is_cut_into_the_same_lines_however_it_is_chunked() {
        let body: &'static [u8] = b"{\"a\":1}\n\n  \n{\"b\":2}\r\n{\"c\":3}";
        let want: Vec<Result<Bytes, String>> = vec![
            Ok(Bytes::from_static(b"{\"a\":1}")),
            Ok(Bytes::from_static(b"{\"b\":2}\r")),
            Ok(Bytes::from_static(b"{\"c\":3}")),
        ];
        assert_eq!(lines_of(vec![body], 64), want, "blank lines skipped, the last needs no newline");
        for cut in 0..=body.len() {
            assert_eq!(lines_of(vec![&body[..cut], &body[cut..]], 64), want, "cut at {cut}");
        }
        let bytes: Vec<&'static [u8]> = body.chunks(1).collect();
        assert_eq!(lines_of(bytes, 64), want, "byte by byte");
    }

    #[test]
    fn a_line_over_the_limit_ends_the_reading() {
        let got = lines_of(vec![b"short\n", b"0123456789", b"0123456789\nnever\n"], 12);
        assert_eq!(got, vec![Ok(Bytes::from_static(b"short")), Err("too long".to_owned())]);
    }
}
