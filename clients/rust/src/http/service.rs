//! [`HttpService`]: the [`JournalService`] over a gateway.

use std::num::NonZeroU64;
use std::sync::Arc;

use bytes::Bytes;
use paros_api::{
    ApiError, ErrorCode, JournalName, Page, ReadOutcome, ReadQuery, Record, SetLeaderOutcome, SetLeaderRequest, Token,
    TruncateOutcome, TruncateRequest, WaitMs, WriteOutcome, WriteRequest,
};
use paros_core::journal::{Outcome, TooLarge};
use paros_core::{Call, CallAnswer, CallId, NodeId};
use reqwest::Method;
use reqwest::header::CONTENT_TYPE;

use super::gateway::GatewayClient;
use super::session::{LineReply, Sessions};
use super::{Answer, GatewayError, HttpConfig};
use crate::convert::api_consistency;
use crate::service::{CallReply, Denial, JournalService, ReadAnswer, ReadParams, Route};

/// [`JournalService`] over a gateway: journals are named by paros-api's [`JournalName`], the
/// gateway routes every request (no servers to name), and answers map as the
/// [module table](crate::http) says.
#[derive(Debug, Clone)]
pub struct HttpService {
    gateway: GatewayClient,
    /// The append sessions Writes travel on ([`HttpConfig::sessions`]).
    sessions: Arc<Sessions>,
}

impl HttpService {
    /// The service of the gateway at `url`, as `token`.
    ///
    /// # Errors
    /// As [`GatewayClient::new`].
    pub fn new(url: &str, token: Option<&Token>, config: HttpConfig) -> Result<HttpService, GatewayError> {
        Ok(HttpService::from_gateway(GatewayClient::new(url, token, config)?))
    }

    /// The service over an existing gateway client (sharing its connection pool).
    #[must_use]
    pub fn from_gateway(gateway: GatewayClient) -> HttpService {
        HttpService { gateway, sessions: Arc::default() }
    }

    /// The gateway client underneath, for the calls that are not journal calls.
    #[must_use]
    pub fn gateway(&self) -> &GatewayClient {
        &self.gateway
    }

    async fn do_call(&self, journal: &JournalName, call: &Call) -> CallReply {
        let (segment, body) = match call {
            Call::SetLeader { new, old } => ("leader", serde_json::to_vec(&SetLeaderRequest { new: *new, old: *old })),
            Call::Write { leader, seq, records } => {
                let records: Vec<Record> = records.iter().map(|r| Record(r.to_vec())).collect();
                let request = match leader {
                    Some(l) => WriteRequest::fenced(*l, *seq, records),
                    None => WriteRequest::append(records),
                };
                ("records", serde_json::to_vec(&request))
            }
            Call::Truncate { leader, up_to } => {
                ("truncate", serde_json::to_vec(&TruncateRequest { leader: *leader, up_to: *up_to }))
            }
            // The registry's coordinator sends it to a node; the tenant door has no such route.
            Call::Reconfigure { .. } => return CallReply::NotSent,
        };
        let mut body = body.expect("API bodies serialize infallibly");
        body.push(b'\n');
        let line = Bytes::from(body);
        let g = &self.gateway;
        if matches!(call, Call::Write { .. }) && g.config.sessions {
            match self.sessions.send(g, journal, line.clone()).await {
                LineReply::Answer { status, retry_after_s, outcome } => {
                    return reply(status, retry_after_s, outcome.map(write_verdict));
                }
                LineReply::NotSent => return CallReply::NotSent,
                LineReply::NoAnswer => return CallReply::NoAnswer,
                LineReply::Unoffered => {}
            }
        }
        let body = line.slice(..line.len() - 1);
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
            from: read.from,
            limit: NonZeroU64::new(u64::from(read.limit)),
            max_bytes: NonZeroU64::new(u64::from(read.max_bytes)),
            wait_ms: WaitMs::new(wait).unwrap_or_default(),
            consistency: api_consistency(read.consistency),
        };
        match self.gateway.read(journal, &query).await {
            Ok(ReadOutcome::Page(page)) => page_answer(page),
            Ok(ReadOutcome::Truncated(view)) => ReadAnswer::Truncated { view },
            Ok(ReadOutcome::Unserved { applied_to }) => ReadAnswer::Unserved { applied_to },
            Err(GatewayError::Denied(d)) => match refusal(d) {
                Refusal::UnknownJournal => ReadAnswer::UnknownJournal,
                Refusal::Denied(d) => ReadAnswer::Denied(d),
                Refusal::Busy | Refusal::Lost => ReadAnswer::Unserved { applied_to: None },
            },
            Err(_) => ReadAnswer::Unserved { applied_to: None },
        }
    }
}

impl JournalService for HttpService {
    type Journal = JournalName;

    fn servers(&self) -> Vec<NodeId> {
        Vec::new()
    }

    /// The HTTP contract carries no call id: the gateway's own client draws one per request.
    async fn call(&self, journal: &JournalName, _id: CallId, call: &Call, _route: Route) -> CallReply {
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

fn refusal(d: Denial) -> Refusal {
    // `from_name` knows every contract code and nothing else: `None` is an answer outside it.
    match (ErrorCode::from_name(d.code), d.status) {
        (Some(ErrorCode::UnknownJournal), _) => Refusal::UnknownJournal,
        (Some(ErrorCode::Unavailable), _) => Refusal::Busy,
        (Some(ErrorCode::Ambiguous), _) => Refusal::Lost,
        // A 503 from a proxy is as good as the gateway's; any other 5xx (a proxy's 502 page),
        // or a 2xx whose body is not the call's, may have come after the call took effect.
        (None, 503) => Refusal::Busy,
        (None, 200..=299 | 500..=599) => Refusal::Lost,
        _ => Refusal::Denied(d),
    }
}

fn call_reply(call: &Call, a: &Answer) -> CallReply {
    let verdict = |o: Outcome| CallReply::Answer(CallAnswer::Verdict(o));
    let parsed = match call {
        Call::SetLeader { .. } => SetLeaderOutcome::from_response(a.status, &a.body).map(|o| match o {
            SetLeaderOutcome::Won(v) => verdict(Outcome::Won(v)),
            SetLeaderOutcome::Lost(v) => verdict(Outcome::Lost(v)),
            SetLeaderOutcome::WrongMode(v) => verdict(Outcome::WrongMode(v)),
            SetLeaderOutcome::Ambiguous => CallReply::NoAnswer,
        }),
        Call::Write { .. } => WriteOutcome::from_response(a.status, &a.body).map(write_verdict),
        Call::Truncate { .. } => TruncateOutcome::from_response(a.status, &a.body).map(|o| match o {
            TruncateOutcome::Trimmed(v) => verdict(Outcome::Trimmed(v)),
            TruncateOutcome::TruncateRefused(v) => verdict(Outcome::TruncateRefused(v)),
            TruncateOutcome::WrongMode(v) => verdict(Outcome::WrongMode(v)),
            TruncateOutcome::Ambiguous => CallReply::NoAnswer,
        }),
        Call::Reconfigure { .. } => return CallReply::NotSent,
    };
    reply(a.status, a.retry_after_s, parsed)
}

/// A Write's outcome as the library's reply.
fn write_verdict(o: WriteOutcome) -> CallReply {
    let verdict = |o: Outcome| CallReply::Answer(CallAnswer::Verdict(o));
    match o {
        WriteOutcome::Accepted { seq, count, view } => verdict(Outcome::Accepted { seq, count, view }),
        WriteOutcome::Duplicate { seq, count, view } => verdict(Outcome::Duplicate { seq, count, view }),
        WriteOutcome::Refused(v) => verdict(Outcome::Refused(v)),
        WriteOutcome::WrongMode(v) => verdict(Outcome::WrongMode(v)),
        WriteOutcome::Truncated(v) => verdict(Outcome::Truncated(v)),
        WriteOutcome::TooLarge { limits, .. } => CallReply::Answer(CallAnswer::TooLarge(TooLarge {
            max_records: u32::try_from(limits.max_records).unwrap_or(u32::MAX),
            max_bytes: limits.max_bytes,
        })),
        WriteOutcome::Ambiguous => CallReply::NoAnswer,
    }
}

/// A call's answer, its parsed outcome or the error it is, as the library's reply.
fn reply(status: u16, retry_after_s: Option<u64>, parsed: Result<CallReply, ApiError>) -> CallReply {
    match parsed {
        Ok(reply) => reply,
        Err(error) => match refusal(super::denial(status, error, retry_after_s)) {
            Refusal::UnknownJournal => CallReply::UnknownJournal,
            Refusal::Busy => CallReply::Answer(CallAnswer::Busy),
            Refusal::Lost => CallReply::NoAnswer,
            Refusal::Denied(d) => CallReply::Denied(d),
        },
    }
}

fn page_answer(page: Page) -> ReadAnswer {
    ReadAnswer::Page {
        from: page.from,
        records: page.records.into_iter().map(|r| Bytes::from(r.0)).collect(),
        view: page.view,
    }
}
