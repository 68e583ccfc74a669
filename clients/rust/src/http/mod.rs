//! The library over a gateway's HTTP API v1 (`docs/http-api.md`): [`HttpService`], a
//! [`JournalService`](crate::JournalService) for [`Client`](crate::Client), [`Writer`](crate::Writer) and
//! [`Reader`](crate::Reader); [`GatewayClient`], the tenant's other calls (signup, tokens,
//! journals, one-shot calls, the SSE tail); and [`SseParser`], the `text/event-stream` reader.
//!
//! Every body, name, position and outcome is paros-api's: this module only moves bytes and
//! maps statuses to the library's replies.
//!
//! | answer | [`CallReply`](crate::CallReply) | [`ReadAnswer`](crate::ReadAnswer) |
//! |---|---|---|
//! | 200, 409, 410 with a view | `Answer(Verdict(..))` | `Page` / `Truncated` |
//! | 413 `too_large` | `Answer(TooLarge(..))` | — |
//! | 404 `unknown_journal` | `UnknownJournal` | `UnknownJournal` |
//! | 503 `unavailable` | `Answer(Busy)`: nothing was done, retry | `Unserved` |
//! | 504 `ambiguous`, a timeout or a drop after sending, another 5xx | `NoAnswer` | `Unserved` |
//! | connection refused, DNS failure, connect timeout | `NotSent` | `Unserved` |
//! | 400, 401, 403, 429, a 4xx outside the contract | `Denied` | `Denied` |
//!
//! Consistency travels as [`convert::api_consistency`](crate::convert::api_consistency) says.

use std::time::Duration;

use bytes::Bytes;
use paros_api::{ApiError, ErrorCode};
use reqwest::header::RETRY_AFTER;

use crate::service::Denial;

mod gateway;
mod service;
mod session;
mod sse;

pub use gateway::{GatewayClient, SignedUp};
pub use service::HttpService;
pub use sse::{SseEvent, SseParser, Tail};

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
    /// Speak HTTP/2: every call to one gateway multiplexed over one connection (cleartext
    /// `http://` with prior knowledge, `https://` offering `h2` and `http/1.1` by ALPN). Off:
    /// HTTP/1.1 only, one connection per call in flight (for a proxy that speaks no HTTP/2).
    pub http2: bool,
    /// Send writes over an append session (`POST /v1/journals/{name}/session`) where the
    /// gateway offers one: batches are pipelined on one stream and acknowledged in order.
    /// Off, or against a gateway without sessions: one `POST …/records` per batch.
    pub sessions: bool,
    /// Writes queued on one journal's session and not yet acknowledged, at most: a write
    /// beyond it waits for room.
    pub session_in_flight_max: usize,
    /// How long, in all, one of [`GatewayClient`]'s own calls (sign-up, tokens, journals, the
    /// operator's routes) waits out `429 over_quota`: it is sent again, identically, after each
    /// answer's `Retry-After` (1 s when it names none or 0) while the waits add up to no more
    /// than this; past it the 429 is the answer. A 429 took no effect, so any call may be sent
    /// again. Zero: a 429 is answered at once. Journal calls (writes, reads, leaders,
    /// truncations) wait by [`ClientConfig`](crate::ClientConfig)'s policy instead.
    pub over_quota_wait_max: Duration,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            tail_idle_timeout: Duration::from_secs(15),
            tail_reconnects_max: 8,
            http2: true,
            sessions: true,
            session_in_flight_max: 1024,
            over_quota_wait_max: Duration::from_secs(10),
        }
    }
}

/// Why a request to the gateway did not come to an answer of its call.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The gateway URL cannot be used.
    #[error("bad gateway URL {url:?}: {reason}")]
    Url {
        /// The URL as given.
        url: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// The token cannot travel in a header.
    #[error("the token is not a valid header value")]
    BadToken,
    /// The certificates given to trust ([`GatewayClient::trusting`]) hold none, or one that
    /// does not parse.
    #[error("the certificates to trust cannot be used: {0}")]
    Roots(String),
    /// The request never reached the gateway (connection refused, no such host, connect
    /// timeout): nothing happened.
    #[error("the gateway could not be reached: {0}")]
    NotSent(String),
    /// The request left and no answer came (a timeout, a dropped connection): it may or may
    /// not have taken effect.
    #[error("no answer from the gateway: {0}")]
    NoAnswer(String),
    /// The gateway answered an error this call does not turn into an outcome (its code,
    /// message and `Retry-After` in the [`Denial`]), or an answer outside the contract (code
    /// `contract`): the same shape a [`Writer`](crate::Writer) or a [`Reader`](crate::Reader)
    /// reports a refusal in.
    #[error("{0}")]
    Denied(Denial),
    /// A tail stream that is not a tail (bad SSE frame, bad payload).
    #[error("bad tail stream: {0}")]
    Tail(String),
}

impl GatewayError {
    /// The HTTP status, for an error the gateway answered.
    #[must_use]
    pub fn status(&self) -> Option<u16> {
        self.denial().map(|d| d.status)
    }

    /// The API error code, for an error the gateway answered within the contract.
    #[must_use]
    pub fn code(&self) -> Option<ErrorCode> {
        self.denial().and_then(|d| ErrorCode::from_name(d.code))
    }

    /// The gateway's refusal, for an error it answered.
    #[must_use]
    pub fn denial(&self) -> Option<&Denial> {
        match self {
            GatewayError::Denied(d) => Some(d),
            _ => None,
        }
    }
}

/// An error answer as the library reports it: the body's code and message kept. (A body's view
/// belongs to the outcomes the calls parse it into; no error the library reports carries one.)
pub(crate) fn denial(status: u16, error: ApiError, retry_after_s: Option<u64>) -> Denial {
    match error {
        ApiError::Answered(body) => Denial { status, code: body.code.as_str(), message: body.message, retry_after_s },
        ApiError::Contract(c) => Denial { status, code: "contract", message: c.to_string(), retry_after_s },
    }
}

/// One answer as it came back: status, `Retry-After` (seconds), `paros-served-by` and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    retry_after_s: Option<u64>,
    served_by: Option<String>,
    body: Bytes,
}

fn transport(e: reqwest::Error) -> GatewayError {
    if e.is_connect() { GatewayError::NotSent(e.to_string()) } else { GatewayError::NoAnswer(e.to_string()) }
}

fn retry_after(resp: &reqwest::Response) -> Option<u64> {
    resp.headers().get(RETRY_AFTER)?.to_str().ok()?.trim().parse().ok()
}

/// The server that answered a read, as the gateway names it (`paros-served-by`, API.md).
fn served_by(resp: &reqwest::Response) -> Option<String> {
    Some(resp.headers().get("paros-served-by")?.to_str().ok()?.trim().to_owned()).filter(|s| !s.is_empty())
}

fn api<T>(a: &Answer, parsed: Result<T, ApiError>) -> Result<T, GatewayError> {
    parsed.map_err(|error| GatewayError::Denied(denial(a.status, error, a.retry_after_s)))
}
