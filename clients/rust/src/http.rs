//! The library over a gateway's HTTP API v1 (`shared/API.md`): [`HttpService`], a
//! [`JournalService`] for [`Client`](crate::Client), [`Writer`](crate::Writer) and
//! [`Reader`](crate::Reader); [`GatewayClient`], the tenant's other calls (signup, tokens,
//! journals, one-shot calls, the SSE tail); and [`SseParser`], the `text/event-stream` reader.
//!
//! Every body, name, position and outcome is paros-api's: this module only moves bytes and
//! maps statuses to the library's replies.
//!
//! | answer | [`CallReply`] | [`ReadAnswer`] |
//! |---|---|---|
//! | 200, 409, 410 with a view | `Answer(Verdict(..))` | `Page` / `Truncated` |
//! | 413 `too_large` | `Answer(TooLarge(..))` | — |
//! | 404 `unknown_journal` | `UnknownJournal` | `UnknownJournal` |
//! | 503 `unavailable` | `Answer(Busy)`: nothing was done, retry | `Unserved` |
//! | 504 `ambiguous`, a timeout or a drop after sending, another 5xx | `NoAnswer` | `Unserved` |
//! | connection refused, DNS failure, connect timeout | `NotSent` | `Unserved` |
//! | 400, 401, 403, 429, a 4xx outside the contract | `Denied` | `Denied` |
//!
//! Consistency: paros-core's `AtLeast(s)` asks for `next_seq ≥ s`, API.md's `min_seq = m` for
//! `next_seq > m`; so `AtLeast(s)` travels as `min_seq = s − 1`, and `AtLeast(0)` (which any
//! server meets) as the default, linearizable.

use std::fmt;
use std::num::NonZeroU64;
use std::time::Duration;

use bytes::Bytes;
use paros_api::outcome::plain;
use paros_api::{
    ApiError, CreateJournalRequest, ErrorCode, JournalInfo, JournalList, JournalName, MintTokenRequest, Page,
    ReadOutcome, ReadQuery, Record, SetLeaderOutcome, SetLeaderRequest, SignupAnswer, SignupRequest, TailFrame,
    TenantName, Token, TokenAnswer, TokenId, TruncateOutcome, TruncateRequest, WaitMs, WriteOutcome, WriteRequest,
};
use paros_core::journal::{JournalView, Outcome, TooLarge};
use paros_core::{Call, CallAnswer, Consistency, LeaderUuid, NodeId, Seq};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use reqwest::{Method, RequestBuilder, Url};

use crate::reader::ReadAnswer;
use crate::service::{CallReply, Denial, JournalService, ReadParams, Route};

/// The bounds of every request to the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpConfig {
    /// Establishing a connection (TCP and TLS) at most; past it the request was not sent.
    pub connect_timeout: Duration,
    /// One request and its whole answer at most, on top of a read's `wait_ms`.
    pub request_timeout: Duration,
    /// The longest silence a tail accepts between two chunks (the gateway sends a heartbeat
    /// at least every 5 s) before it reconnects.
    pub tail_idle_timeout: Duration,
    /// Reconnections of a tail in a row (without a frame between them) before it gives up.
    pub tail_reconnects_max: u32,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            tail_idle_timeout: Duration::from_secs(15),
            tail_reconnects_max: 8,
        }
    }
}

/// Why a request to the gateway did not come to an answer of its call.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The gateway URL cannot be used.
    #[error("bad gateway URL {url:?}: {reason}")]
    Url { url: String, reason: String },
    /// The token cannot travel in a header.
    #[error("the token is not a valid header value")]
    BadToken,
    /// The request never reached the gateway (connection refused, no such host, connect
    /// timeout): nothing happened.
    #[error("the gateway could not be reached: {0}")]
    NotSent(String),
    /// The request left and no answer came (a timeout, a dropped connection): it may or may
    /// not have taken effect.
    #[error("no answer from the gateway: {0}")]
    NoAnswer(String),
    /// The gateway answered an error this call does not turn into an outcome, or an answer
    /// outside the contract. `retry_after_s` is a 429's `Retry-After`.
    #[error("{error}")]
    Api { status: u16, error: ApiError, retry_after_s: Option<u64> },
    /// A tail stream that is not a tail (bad SSE frame, bad payload).
    #[error("bad tail stream: {0}")]
    Tail(String),
}

impl GatewayError {
    /// The HTTP status, for an error the gateway answered.
    #[must_use]
    pub fn status(&self) -> Option<u16> {
        match self {
            GatewayError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The API error code, for an error the gateway answered within the contract.
    #[must_use]
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            GatewayError::Api { error, .. } => error.code(),
            _ => None,
        }
    }
}

/// One answer as it came back: status, `Retry-After` (seconds) and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    retry_after_s: Option<u64>,
    body: Bytes,
}

/// A connection to one gateway as one tenant token: every route of API.md's tenant side.
///
/// Cheap to clone (the connection pool is shared).
#[derive(Clone)]
pub struct GatewayClient {
    http: reqwest::Client,
    base: Url,
    token: Option<HeaderValue>,
    config: HttpConfig,
}

impl fmt::Debug for GatewayClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GatewayClient")
            .field("base", &self.base.as_str())
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("config", &self.config)
            .finish()
    }
}

impl GatewayClient {
    /// A client of the gateway at `url` (`http://host:port`, maybe with a path prefix),
    /// sending `token` as `Authorization: Bearer` when given.
    ///
    /// # Errors
    /// [`GatewayError::Url`] for a URL that is not `http` or `https`, [`GatewayError::BadToken`].
    pub fn new(url: &str, token: Option<&Token>, config: HttpConfig) -> Result<GatewayClient, GatewayError> {
        let bad = |reason: String| GatewayError::Url { url: url.to_owned(), reason };
        let base = Url::parse(url).map_err(|e| bad(e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(bad("not an http or https URL".into()));
        }
        if base.query().is_some() || base.fragment().is_some() {
            return Err(bad("a gateway URL has no query or fragment".into()));
        }
        let token = token
            .map(|t| {
                let mut v =
                    HeaderValue::from_str(&format!("Bearer {}", t.as_str())).map_err(|_| GatewayError::BadToken)?;
                v.set_sensitive(true);
                Ok(v)
            })
            .transpose()?;
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|e| bad(e.to_string()))?;
        Ok(GatewayClient { http, base, token, config })
    }

    /// The bounds this client was built with.
    #[must_use]
    pub fn config(&self) -> &HttpConfig {
        &self.config
    }

    /// `base` + `/` + the segments, each percent-encoded as a path segment.
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    fn request(&self, method: Method, url: Url, timeout: Option<Duration>) -> RequestBuilder {
        let mut req = self.http.request(method, url);
        if let Some(t) = timeout {
            req = req.timeout(t);
        }
        if let Some(token) = &self.token {
            req = req.header(AUTHORIZATION, token.clone());
        }
        req
    }

    fn json<T: serde::Serialize>(req: RequestBuilder, body: &T) -> RequestBuilder {
        let bytes = serde_json::to_vec(body).expect("API bodies serialize infallibly");
        req.header(CONTENT_TYPE, "application/json").body(bytes)
    }

    /// Sends and reads the whole answer.
    async fn send(&self, req: RequestBuilder) -> Result<Answer, GatewayError> {
        let resp = req.send().await.map_err(transport)?;
        let status = resp.status().as_u16();
        let retry_after_s = retry_after(&resp);
        let body = resp.bytes().await.map_err(|e| GatewayError::NoAnswer(e.to_string()))?;
        Ok(Answer { status, retry_after_s, body })
    }

    async fn post<T: serde::Serialize>(&self, segments: &[&str], body: &T) -> Result<Answer, GatewayError> {
        let req = self.request(Method::POST, self.url(segments), Some(self.config.request_timeout));
        self.send(Self::json(req, body)).await
    }

    async fn get(&self, segments: &[&str]) -> Result<Answer, GatewayError> {
        self.send(self.request(Method::GET, self.url(segments), Some(self.config.request_timeout))).await
    }

    async fn delete(&self, segments: &[&str]) -> Result<Answer, GatewayError> {
        self.send(self.request(Method::DELETE, self.url(segments), Some(self.config.request_timeout))).await
    }

    /// `POST /v1/signup`: a new tenant and its owner token.
    ///
    /// # Errors
    /// [`GatewayError`]; `name_taken` as [`GatewayError::Api`].
    pub async fn signup(&self, name: &TenantName) -> Result<SignupAnswer, GatewayError> {
        let a = self.post(&["v1", "signup"], &SignupRequest { name: name.clone() }).await?;
        api(&a, plain::signup(a.status, &a.body))
    }

    /// `POST /v1/tokens`: mints a token no wider than this client's.
    ///
    /// # Errors
    /// [`GatewayError`].
    pub async fn mint_token(&self, request: &MintTokenRequest) -> Result<TokenAnswer, GatewayError> {
        let a = self.post(&["v1", "tokens"], request).await?;
        api(&a, plain::mint_token(a.status, &a.body))
    }

    /// `DELETE /v1/tokens/{token_id}` (revoking again succeeds too).
    ///
    /// # Errors
    /// [`GatewayError`]; `unknown_token` as [`GatewayError::Api`].
    pub async fn revoke_token(&self, token_id: &TokenId) -> Result<(), GatewayError> {
        let a = self.delete(&["v1", "tokens", token_id.as_str()]).await?;
        api(&a, plain::revoke_token(a.status, &a.body))
    }

    /// `POST /v1/journals`.
    ///
    /// # Errors
    /// [`GatewayError`]; `name_taken` as [`GatewayError::Api`].
    pub async fn create_journal(&self, request: &CreateJournalRequest) -> Result<JournalInfo, GatewayError> {
        let a = self.post(&["v1", "journals"], request).await?;
        api(&a, plain::create_journal(a.status, &a.body))
    }

    /// `GET /v1/journals`: this tenant's journals (or the one a restricted token names).
    ///
    /// # Errors
    /// [`GatewayError`].
    pub async fn list_journals(&self) -> Result<JournalList, GatewayError> {
        let a = self.get(&["v1", "journals"]).await?;
        api(&a, plain::list_journals(a.status, &a.body))
    }

    /// `GET /v1/journals/{name}`.
    ///
    /// # Errors
    /// [`GatewayError`]; `unknown_journal` as [`GatewayError::Api`].
    pub async fn show_journal(&self, name: &JournalName) -> Result<JournalInfo, GatewayError> {
        let a = self.get(&["v1", "journals", name.as_str()]).await?;
        api(&a, plain::show_journal(a.status, &a.body))
    }

    /// `DELETE /v1/journals/{name}`.
    ///
    /// # Errors
    /// [`GatewayError`]; `unknown_journal` as [`GatewayError::Api`].
    pub async fn delete_journal(&self, name: &JournalName) -> Result<(), GatewayError> {
        let a = self.delete(&["v1", "journals", name.as_str()]).await?;
        api(&a, plain::delete_journal(a.status, &a.body))
    }

    /// One `POST /v1/journals/{name}/records`, no retry (for a multi-writer append, which a
    /// retry would append again).
    ///
    /// # Errors
    /// [`GatewayError`] for an answer that is not a Write outcome (503 included).
    pub async fn write(&self, name: &JournalName, request: &WriteRequest) -> Result<WriteOutcome, GatewayError> {
        let a = self.post(&["v1", "journals", name.as_str(), "records"], request).await?;
        api(&a, WriteOutcome::from_response(a.status, &a.body))
    }

    /// One `POST /v1/journals/{name}/leader`, no retry.
    ///
    /// # Errors
    /// [`GatewayError`] for an answer that is not a SetLeader outcome.
    pub async fn set_leader(
        &self,
        name: &JournalName,
        request: &SetLeaderRequest,
    ) -> Result<SetLeaderOutcome, GatewayError> {
        let a = self.post(&["v1", "journals", name.as_str(), "leader"], request).await?;
        api(&a, SetLeaderOutcome::from_response(a.status, &a.body))
    }

    /// One `POST /v1/journals/{name}/truncate`, no retry.
    ///
    /// # Errors
    /// [`GatewayError`] for an answer that is not a Truncate outcome.
    pub async fn truncate(
        &self,
        name: &JournalName,
        request: &TruncateRequest,
    ) -> Result<TruncateOutcome, GatewayError> {
        let a = self.post(&["v1", "journals", name.as_str(), "truncate"], request).await?;
        api(&a, TruncateOutcome::from_response(a.status, &a.body))
    }

    /// One `GET /v1/journals/{name}/records?…`, no retry; waits `query.wait_ms` on top of the
    /// request timeout.
    ///
    /// # Errors
    /// [`GatewayError`] for an answer that is not a Read outcome.
    pub async fn read(&self, name: &JournalName, query: &ReadQuery) -> Result<ReadOutcome, GatewayError> {
        let mut url = self.url(&["v1", "journals", name.as_str(), "records"]);
        url.set_query(Some(&query.to_query()));
        let timeout = self.config.request_timeout + Duration::from_millis(u64::from(query.wait_ms.get()));
        let a = self.send(self.request(Method::GET, url, Some(timeout))).await?;
        api(&a, ReadOutcome::from_response(a.status, &a.body))
    }

    /// Opens `GET /v1/journals/{name}/tail`, from `from` (`None`: the journal's tail).
    ///
    /// # Errors
    /// [`GatewayError`] when the stream cannot be opened.
    pub async fn tail(&self, name: &JournalName, from: Option<paros_api::Seq>) -> Result<Tail, GatewayError> {
        let mut tail = Tail {
            gateway: self.clone(),
            journal: name.clone(),
            from,
            last_event_id: None,
            response: None,
            parser: SseParser::default(),
            pending: std::collections::VecDeque::new(),
        };
        tail.connect().await?;
        Ok(tail)
    }

    async fn open_tail(
        &self,
        name: &JournalName,
        from: Option<paros_api::Seq>,
        last: Option<paros_api::Seq>,
    ) -> Result<reqwest::Response, GatewayError> {
        let mut url = self.url(&["v1", "journals", name.as_str(), "tail"]);
        if let Some(from) = from {
            url.set_query(Some(&format!("from={from}")));
        }
        // No total timeout: a tail lasts; silence is bounded chunk by chunk instead.
        let mut req = self.request(Method::GET, url, None).header(reqwest::header::ACCEPT, "text/event-stream");
        if let Some(id) = last {
            req = req.header("Last-Event-ID", id.to_string());
        }
        let resp = tokio::time::timeout(self.config.request_timeout, req.send())
            .await
            .map_err(|_| GatewayError::NoAnswer("the tail did not open in time".into()))?
            .map_err(transport)?;
        let status = resp.status().as_u16();
        if status == 200 {
            return Ok(resp);
        }
        let retry_after_s = retry_after(&resp);
        let body = resp.bytes().await.map_err(|e| GatewayError::NoAnswer(e.to_string()))?;
        let error = match paros_api::outcome::error_body(status, &body) {
            Ok(e) => ApiError::Answered(Box::new(e)),
            Err(c) => ApiError::Contract(c),
        };
        Err(GatewayError::Api { status, error, retry_after_s })
    }
}

fn transport(e: reqwest::Error) -> GatewayError {
    if e.is_connect() { GatewayError::NotSent(e.to_string()) } else { GatewayError::NoAnswer(e.to_string()) }
}

fn retry_after(resp: &reqwest::Response) -> Option<u64> {
    resp.headers().get(RETRY_AFTER)?.to_str().ok()?.trim().parse().ok()
}

fn api<T>(a: &Answer, parsed: Result<T, ApiError>) -> Result<T, GatewayError> {
    parsed.map_err(|error| GatewayError::Api { status: a.status, error, retry_after_s: a.retry_after_s })
}

/// A live tail: frames in order, reconnecting with `Last-Event-ID` when the stream drops.
#[derive(Debug)]
pub struct Tail {
    gateway: GatewayClient,
    journal: JournalName,
    from: Option<paros_api::Seq>,
    last_event_id: Option<paros_api::Seq>,
    response: Option<reqwest::Response>,
    parser: SseParser,
    pending: std::collections::VecDeque<SseEvent>,
}

impl Tail {
    /// The `id` of the last frame returned: where a reconnection resumes.
    #[must_use]
    pub fn last_event_id(&self) -> Option<paros_api::Seq> {
        self.last_event_id
    }

    async fn connect(&mut self) -> Result<(), GatewayError> {
        let resp = self.gateway.open_tail(&self.journal, self.from, self.last_event_id).await?;
        self.response = Some(resp);
        self.parser = SseParser::default();
        Ok(())
    }

    /// The next frame (`records`, `gap` or `heartbeat`). A dropped or silent stream, or a
    /// 503 while reopening, is reconnected after a short backoff, at most
    /// [`HttpConfig::tail_reconnects_max`] times in a row.
    ///
    /// # Errors
    /// [`GatewayError::Tail`] for a frame that is not a tail frame; any other error when
    /// reconnecting failed for good (401, 403, 404 at once).
    pub async fn next(&mut self) -> Result<TailFrame, GatewayError> {
        let mut failures = 0u32;
        loop {
            if let Some(ev) = self.pending.pop_front() {
                let id = ev.id.as_deref().unwrap_or("");
                let frame = TailFrame::parse(&ev.event, id, &ev.data).map_err(|e| GatewayError::Tail(e.to_string()))?;
                self.last_event_id = Some(frame.id);
                return Ok(frame);
            }
            let idle = self.gateway.config.tail_idle_timeout;
            let chunk = match self.response.as_mut() {
                Some(resp) => match tokio::time::timeout(idle, resp.chunk()).await {
                    Ok(Ok(Some(chunk))) => Ok(chunk),
                    Ok(Ok(None)) => Err(GatewayError::NoAnswer("the tail stream ended".into())),
                    Ok(Err(e)) => Err(GatewayError::NoAnswer(e.to_string())),
                    Err(_) => Err(GatewayError::NoAnswer("the tail stream went silent".into())),
                },
                None => Err(GatewayError::NoAnswer("not connected".into())),
            };
            match chunk {
                Ok(chunk) => {
                    self.pending.extend(self.parser.push(&chunk));
                    continue;
                }
                Err(e) => {
                    self.response = None;
                    failures += 1;
                    if failures > self.gateway.config.tail_reconnects_max {
                        return Err(e);
                    }
                }
            }
            // Reconnect until it opens, a refusal that will not pass, or the bound.
            loop {
                let backoff = Duration::from_millis(100u64 << failures.min(5));
                tokio::time::sleep(backoff).await;
                match self.connect().await {
                    Ok(()) => break,
                    Err(e @ (GatewayError::NotSent(_) | GatewayError::NoAnswer(_)))
                    | Err(e @ GatewayError::Api { status: 503, .. }) => {
                        failures += 1;
                        if failures > self.gateway.config.tail_reconnects_max {
                            return Err(e);
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }
}

/// One event a [`SseParser`] dispatched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, `message` when none was given.
    pub event: String,
    /// The last event id in force (`id:` persists across events, as the SSE rules say).
    pub id: Option<String>,
    /// The `data:` lines joined by `\n`.
    pub data: String,
}

/// An incremental `text/event-stream` parser: feed it chunks as they arrive, take the events.
///
/// Lines end in `\n`, `\r\n` or `\r`; `:` lines are comments; a blank line dispatches the
/// event gathered so far (none when it has no `data`); `retry:` and unknown fields are ignored.
#[derive(Debug, Default, Clone)]
pub struct SseParser {
    line: Vec<u8>,
    /// The previous chunk ended in `\r`: a `\n` at the start of the next one belongs to it.
    after_cr: bool,
    event: String,
    data: String,
    has_data: bool,
    id: Option<String>,
}

impl SseParser {
    /// Takes in `chunk` and returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        for &b in chunk {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(ev) = self.on_line(&String::from_utf8_lossy(&line)) {
                        out.push(ev);
                    }
                }
                _ => self.line.push(b),
            }
        }
        out
    }

    fn on_line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            let data = std::mem::take(&mut self.data);
            if !std::mem::replace(&mut self.has_data, false) {
                return None;
            }
            let event = if event.is_empty() { "message".to_owned() } else { event };
            return Some(SseEvent { event, id: self.id.clone(), data });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            _ => {}
        }
        None
    }
}

/// [`JournalService`] over a gateway: journals are named by paros-api's [`JournalName`], the
/// gateway routes every request (no servers to name), and answers map as the
/// [module table](self) says.
#[derive(Debug, Clone)]
pub struct HttpService {
    gateway: GatewayClient,
}

impl HttpService {
    /// The service of the gateway at `url`, as `token`.
    ///
    /// # Errors
    /// As [`GatewayClient::new`].
    pub fn new(url: &str, token: Option<&Token>, config: HttpConfig) -> Result<HttpService, GatewayError> {
        Ok(HttpService { gateway: GatewayClient::new(url, token, config)? })
    }

    /// The service over an existing gateway client (sharing its connection pool).
    #[must_use]
    pub fn from_gateway(gateway: GatewayClient) -> HttpService {
        HttpService { gateway }
    }

    /// The gateway client underneath, for the calls that are not journal calls.
    #[must_use]
    pub fn gateway(&self) -> &GatewayClient {
        &self.gateway
    }

    async fn do_call(&self, journal: &JournalName, call: &Call) -> CallReply {
        let (segment, body) = match call {
            Call::SetLeader { new, old } => {
                ("leader", serde_json::to_vec(&SetLeaderRequest { new: api_uuid(*new), old: old.map(api_uuid) }))
            }
            Call::Write { leader, seq, records } => {
                let records: Vec<Record> = records.iter().map(|r| Record(r.to_vec())).collect();
                let request = match leader {
                    Some(l) => WriteRequest::fenced(api_uuid(*l), paros_api::Seq(seq.0), records),
                    None => WriteRequest::append(records),
                };
                ("records", serde_json::to_vec(&request))
            }
            Call::Truncate { leader, up_to } => (
                "truncate",
                serde_json::to_vec(&TruncateRequest { leader: leader.map(api_uuid), up_to: paros_api::Seq(up_to.0) }),
            ),
        };
        let body = body.expect("API bodies serialize infallibly");
        let g = &self.gateway;
        let req = g
            .request(
                Method::POST,
                g.url(&["v1", "journals", journal.as_str(), segment]),
                Some(g.config.request_timeout),
            )
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        let a = match g.send(req).await {
            Ok(a) => a,
            Err(GatewayError::NotSent(_)) => return CallReply::NotSent,
            Err(_) => return CallReply::NoAnswer,
        };
        call_reply(call, &a)
    }

    async fn do_read(&self, journal: &JournalName, read: ReadParams) -> ReadAnswer {
        let wait = u64::from(read.wait_ms).min(u64::from(WaitMs::MAX));
        let query = ReadQuery {
            from: paros_api::Seq(read.from.0),
            limit: NonZeroU64::new(u64::from(read.limit)),
            max_bytes: NonZeroU64::new(u64::from(read.max_bytes)),
            wait_ms: WaitMs::new(wait).unwrap_or_default(),
            consistency: api_consistency(read.consistency),
        };
        match self.gateway.read(journal, &query).await {
            Ok(ReadOutcome::Page(page)) => page_answer(page),
            Ok(ReadOutcome::Truncated(view)) => ReadAnswer::Truncated { view: core_view(view) },
            Ok(ReadOutcome::Unserved) => ReadAnswer::Unserved,
            Err(GatewayError::Api { status, error, retry_after_s }) => match refusal(status, &error, retry_after_s) {
                Refusal::UnknownJournal => ReadAnswer::UnknownJournal,
                Refusal::Denied(d) => ReadAnswer::Denied(d),
                Refusal::Busy | Refusal::Lost => ReadAnswer::Unserved,
            },
            Err(_) => ReadAnswer::Unserved,
        }
    }
}

impl JournalService for HttpService {
    type Journal = JournalName;

    fn servers(&self) -> Vec<NodeId> {
        Vec::new()
    }

    async fn call(&self, journal: &JournalName, call: &Call, _route: Route) -> CallReply {
        self.do_call(journal, call).await
    }

    async fn read(&self, journal: &JournalName, read: ReadParams, _route: Route) -> ReadAnswer {
        self.do_read(journal, read).await
    }
}

/// What an error answer means to a caller that retries.
enum Refusal {
    UnknownJournal,
    /// Nothing was done; ask again.
    Busy,
    /// Maybe done, maybe not.
    Lost,
    Denied(Denial),
}

fn refusal(status: u16, error: &ApiError, retry_after_s: Option<u64>) -> Refusal {
    match error {
        ApiError::Answered(e) => match e.code {
            ErrorCode::UnknownJournal => Refusal::UnknownJournal,
            ErrorCode::Unavailable => Refusal::Busy,
            ErrorCode::Ambiguous => Refusal::Lost,
            code => Refusal::Denied(Denial { status, code: code.as_str(), retry_after_s }),
        },
        // A 503 from a proxy is as good as the gateway's; any other 5xx (a proxy's 502 page),
        // or a 2xx whose body is not the call's, may have come after the call took effect.
        ApiError::Contract(_) => match status {
            503 => Refusal::Busy,
            200..=299 | 500..=599 => Refusal::Lost,
            _ => Refusal::Denied(Denial { status, code: "contract", retry_after_s }),
        },
    }
}

fn call_reply(call: &Call, a: &Answer) -> CallReply {
    let verdict = |o: Outcome| CallReply::Answer(CallAnswer::Verdict(o));
    let parsed = match call {
        Call::SetLeader { .. } => SetLeaderOutcome::from_response(a.status, &a.body).map(|o| match o {
            SetLeaderOutcome::Won(v) => verdict(Outcome::Won(core_view(v))),
            SetLeaderOutcome::Lost(v) => verdict(Outcome::Lost(core_view(v))),
            SetLeaderOutcome::WrongMode(v) => verdict(Outcome::WrongMode(core_view(v))),
            SetLeaderOutcome::Ambiguous => CallReply::NoAnswer,
        }),
        Call::Write { .. } => WriteOutcome::from_response(a.status, &a.body).map(|o| match o {
            WriteOutcome::Accepted { seq, count, .. } => verdict(Outcome::Accepted { seq: Seq(seq.0), count }),
            WriteOutcome::Duplicate { seq, count, .. } => verdict(Outcome::Duplicate { seq: Seq(seq.0), count }),
            WriteOutcome::Refused(v) => verdict(Outcome::Refused(core_view(v))),
            WriteOutcome::WrongMode(v) => verdict(Outcome::WrongMode(core_view(v))),
            WriteOutcome::Truncated(v) => verdict(Outcome::Truncated(core_view(v))),
            WriteOutcome::TooLarge { limits, .. } => CallReply::Answer(CallAnswer::TooLarge(TooLarge {
                max_records: u32::try_from(limits.max_records).unwrap_or(u32::MAX),
                max_bytes: limits.max_bytes,
            })),
            WriteOutcome::Ambiguous => CallReply::NoAnswer,
        }),
        Call::Truncate { .. } => TruncateOutcome::from_response(a.status, &a.body).map(|o| match o {
            TruncateOutcome::Trimmed(v) => verdict(Outcome::Trimmed(core_view(v))),
            TruncateOutcome::TruncateRefused(v) => verdict(Outcome::TruncateRefused(core_view(v))),
            TruncateOutcome::WrongMode(v) => verdict(Outcome::WrongMode(core_view(v))),
            TruncateOutcome::Ambiguous => CallReply::NoAnswer,
        }),
    };
    match parsed {
        Ok(reply) => reply,
        Err(error) => match refusal(a.status, &error, a.retry_after_s) {
            Refusal::UnknownJournal => CallReply::UnknownJournal,
            Refusal::Busy => CallReply::Answer(CallAnswer::Busy),
            Refusal::Lost => CallReply::NoAnswer,
            Refusal::Denied(d) => CallReply::Denied(d),
        },
    }
}

fn page_answer(page: Page) -> ReadAnswer {
    ReadAnswer::Page {
        from: Seq(page.from.0),
        records: page.records.into_iter().map(|r| Bytes::from(r.0)).collect(),
        view: core_view(page.view),
    }
}

/// paros-api's view as paros-core's.
#[must_use]
pub fn core_view(v: paros_api::View) -> JournalView {
    JournalView {
        leader: v.leader.and_then(|l| LeaderUuid::new(l.get())),
        first_seq: Seq(v.first_seq.0),
        next_seq: Seq(v.next_seq.0),
    }
}

/// paros-core's leader uuid as paros-api's (both are non-zero u128s).
#[must_use]
pub fn api_uuid(u: LeaderUuid) -> paros_api::LeaderUuid {
    paros_api::LeaderUuid::new(u.get()).expect("a core leader uuid is never zero")
}

/// paros-api's leader uuid as paros-core's.
#[must_use]
pub fn core_uuid(u: paros_api::LeaderUuid) -> LeaderUuid {
    LeaderUuid::new(u.get()).expect("an API leader uuid is never nil")
}

/// paros-core's read consistency as API.md's (see the [module documentation](self)).
#[must_use]
pub fn api_consistency(c: Consistency) -> paros_api::Consistency {
    match c {
        Consistency::Linearizable | Consistency::AtLeast(Seq(0)) => {
            paros_api::Consistency::Linearizable { min_seq: None }
        }
        Consistency::AtLeast(Seq(s)) => paros_api::Consistency::AtLeast { min_seq: paros_api::Seq(s - 1) },
    }
}
