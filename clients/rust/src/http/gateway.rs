//! [`GatewayClient`]: the tenant's calls to a gateway besides the journal service's.

use std::fmt;
use std::time::Duration;

use paros_api::outcome::plain;
use paros_api::{
    ApiError, CreateJournalRequest, JournalInfo, JournalList, JournalName, MintTokenRequest, ReadOutcome, ReadQuery,
    Seq, SetLeaderOutcome, SetLeaderRequest, SignupAnswer, SignupRequest, TenantName, Token, TokenAnswer, TokenId,
    TruncateOutcome, TruncateRequest, WriteOutcome, WriteRequest,
};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, RequestBuilder, Url};

use super::{Answer, GatewayError, HttpConfig, HttpService, api, retry_after, served_by, transport};
use crate::{Client, ClientConfig};

/// A new tenant, as [`GatewayClient::signup`] made it.
#[derive(Debug)]
pub struct SignedUp {
    /// What the gateway answered: the tenant, its owner token and the token's id and expiry.
    pub answer: SignupAnswer,
    /// The gateway as the new owner: create journals, mint tokens, and
    /// [`client`](GatewayClient::client) for writers and readers.
    pub client: GatewayClient,
}

/// `Authorization: Bearer <token>`, marked sensitive (never logged by the HTTP stack).
fn bearer(token: &Token) -> Result<HeaderValue, GatewayError> {
    let mut v = HeaderValue::from_str(&format!("Bearer {}", token.as_str())).map_err(|_| GatewayError::BadToken)?;
    v.set_sensitive(true);
    Ok(v)
}

/// The body of a call that sends none.
const NO_BODY: Option<&()> = None;

/// When one of [`GatewayClient`]'s own calls answered `a`, `waited` into its waits so far, is
/// sent again: after a 429, following its `Retry-After` (1 s when it names none or 0), unless
/// that would take the waits past `max` (`None`: `a` is the answer).
fn quota_resend(a: &Answer, waited: Duration, max: Duration) -> Option<Duration> {
    let wait = Duration::from_secs(a.retry_after_s.unwrap_or(1).max(1));
    (a.status == 429 && waited.saturating_add(wait) <= max).then_some(wait)
}

/// A connection to one gateway as one tenant token: every route of the contract's tenant side.
///
/// Cheap to clone (the connection pool is shared).
#[derive(Clone)]
pub struct GatewayClient {
    pub(super) http: reqwest::Client,
    pub(super) base: Url,
    pub(super) token: Option<HeaderValue>,
    pub(super) config: HttpConfig,
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
        GatewayClient::trusting(url, token, config, &[])
    }

    /// As [`new`](Self::new), trusting the certificates of `roots_pem` (PEM, any number of
    /// them) beside the system's roots: for an `https://` gateway whose certificate a private
    /// authority signed, or that signed its own.
    ///
    /// # Errors
    /// As [`new`](Self::new); [`GatewayError::Roots`] when `roots_pem` holds no certificate
    /// or one that does not parse.
    pub fn trusting(
        url: &str,
        token: Option<&Token>,
        config: HttpConfig,
        roots_pem: &[u8],
    ) -> Result<GatewayClient, GatewayError> {
        let bad = |reason: String| GatewayError::Url { url: url.to_owned(), reason };
        let base = Url::parse(url).map_err(|e| bad(e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(bad("not an http or https URL".into()));
        }
        if base.query().is_some() || base.fragment().is_some() {
            return Err(bad("a gateway URL has no query or fragment".into()));
        }
        let token = token.map(bearer).transpose()?;
        // TLS runs on ring: the process's provider when one is installed, else ring, installed
        // here (a lost race with another installer leaves that one in force, which is fine).
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let mut builder = reqwest::Client::builder().connect_timeout(config.connect_timeout);
        if !roots_pem.is_empty() {
            let roots =
                reqwest::Certificate::from_pem_bundle(roots_pem).map_err(|e| GatewayError::Roots(e.to_string()))?;
            if roots.is_empty() {
                return Err(GatewayError::Roots("no PEM certificate".into()));
            }
            builder = builder.tls_certs_merge(roots);
        }
        // Over TLS, ALPN picks HTTP/2 when both ends speak it; in the clear there is nothing to
        // negotiate with, so HTTP/2 is spoken from the first byte (the gateway serves both).
        let builder = match (config.http2, base.scheme()) {
            (false, _) => builder.http1_only(),
            (true, "http") => builder.http2_prior_knowledge(),
            (true, _) => builder,
        };
        let http = builder.build().map_err(|e| bad(e.to_string()))?;
        Ok(GatewayClient { http, base, token, config })
    }

    /// A client of the gateway at `url` with no token, and the default bounds: for
    /// [`signup`](Self::signup), which needs none (on a gateway with open signup).
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn connect(url: &str) -> Result<GatewayClient, GatewayError> {
        GatewayClient::new(url, None, HttpConfig::default())
    }

    /// The same gateway as `token`, sharing this client's connections and bounds.
    ///
    /// # Errors
    /// [`GatewayError::BadToken`] for a token that cannot travel in a header.
    pub fn with_token(&self, token: &Token) -> Result<GatewayClient, GatewayError> {
        Ok(GatewayClient { token: Some(bearer(token)?), ..self.clone() })
    }

    /// The journal client over this gateway as this client's token, with the default
    /// [`ClientConfig`]: what [`Writer`](crate::Writer)s and [`Reader`](crate::Reader)s are
    /// built from. It shares this client's connections.
    #[must_use]
    pub fn client(&self) -> Client<HttpService> {
        Client::new(HttpService::from_gateway(self.clone()), ClientConfig::default())
            .expect("the default client configuration is valid")
    }

    /// The bounds this client was built with.
    #[must_use]
    pub fn config(&self) -> &HttpConfig {
        &self.config
    }

    /// `base` + `/` + the segments, each percent-encoded as a path segment.
    pub(super) fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    pub(super) fn request(&self, method: Method, url: Url, timeout: Option<Duration>) -> RequestBuilder {
        let mut req = self.http.request(method, url);
        if let Some(t) = timeout {
            req = req.timeout(t);
        }
        if let Some(token) = &self.token {
            req = req.header(AUTHORIZATION, token.clone());
        }
        req
    }

    pub(super) fn json<T: serde::Serialize>(req: RequestBuilder, body: &T) -> RequestBuilder {
        let bytes = serde_json::to_vec(body).expect("API bodies serialize infallibly");
        req.header(CONTENT_TYPE, "application/json").body(bytes)
    }

    /// Sends and reads the whole answer.
    pub(super) async fn send(&self, req: RequestBuilder) -> Result<Answer, GatewayError> {
        let resp = req.send().await.map_err(transport)?;
        let status = resp.status().as_u16();
        let retry_after_s = retry_after(&resp);
        let served_by = served_by(&resp);
        let body = resp.bytes().await.map_err(|e| GatewayError::NoAnswer(e.to_string()))?;
        Ok(Answer { status, retry_after_s, served_by, body })
    }

    /// One journal call's `POST`, sent once: its retries are the journal client's policy.
    async fn post<T: serde::Serialize>(&self, segments: &[&str], body: &T) -> Result<Answer, GatewayError> {
        let req = self.request(Method::POST, self.url(segments), Some(self.config.request_timeout));
        self.send(Self::json(req, body)).await
    }

    /// One of this client's own calls (a JSON `body` when given), sent again after a 429 while
    /// [`quota_resend`] allows; any other answer, or the 429 past the bound, is returned.
    async fn own<T: serde::Serialize>(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<&T>,
    ) -> Result<Answer, GatewayError> {
        let mut waited = Duration::ZERO;
        loop {
            let req = self.request(method.clone(), self.url(segments), Some(self.config.request_timeout));
            let a = self
                .send(match body {
                    Some(b) => Self::json(req, b),
                    None => req,
                })
                .await?;
            match quota_resend(&a, waited, self.config.over_quota_wait_max) {
                Some(wait) => {
                    tokio::time::sleep(wait).await;
                    waited += wait;
                }
                None => return Ok(a),
            }
        }
    }

    /// `POST /v1/signup`: a new tenant and its owner token, with a client of this gateway that
    /// speaks as that owner ([`SignedUp::client`]).
    ///
    /// # Errors
    /// [`GatewayError`]; `name_taken` as a [`GatewayError::Denied`].
    pub async fn signup(&self, name: &TenantName) -> Result<SignedUp, GatewayError> {
        let a = self.own(Method::POST, &["v1", "signup"], Some(&SignupRequest { name: name.clone() })).await?;
        let answer = api(&a, plain::signup(a.status, &a.body))?;
        let client = self.with_token(&answer.token)?;
        Ok(SignedUp { answer, client })
    }

    /// `POST /v1/tokens`: mints a token no wider than this client's.
    ///
    /// # Errors
    /// [`GatewayError`].
    pub async fn mint_token(&self, request: &MintTokenRequest) -> Result<TokenAnswer, GatewayError> {
        let a = self.own(Method::POST, &["v1", "tokens"], Some(request)).await?;
        api(&a, plain::mint_token(a.status, &a.body))
    }

    /// `DELETE /v1/tokens/{token_id}` (revoking again succeeds too).
    ///
    /// # Errors
    /// [`GatewayError`]; `unknown_token` as a [`GatewayError::Denied`].
    pub async fn revoke_token(&self, token_id: &TokenId) -> Result<(), GatewayError> {
        let a = self.own(Method::DELETE, &["v1", "tokens", token_id.as_str()], NO_BODY).await?;
        api(&a, plain::revoke_token(a.status, &a.body))
    }

    /// `POST /v1/journals`: a journal named `request` (a [`JournalName`] makes a single-writer
    /// journal; a [`CreateJournalRequest`] names the mode).
    ///
    /// # Errors
    /// [`GatewayError`]; `name_taken` as a [`GatewayError::Denied`].
    pub async fn create_journal(&self, request: impl Into<CreateJournalRequest>) -> Result<JournalInfo, GatewayError> {
        let a = self.own(Method::POST, &["v1", "journals"], Some(&request.into())).await?;
        api(&a, plain::create_journal(a.status, &a.body))
    }

    /// `GET /v1/journals`: this tenant's journals (or the one a restricted token names).
    ///
    /// # Errors
    /// [`GatewayError`].
    pub async fn list_journals(&self) -> Result<JournalList, GatewayError> {
        let a = self.own(Method::GET, &["v1", "journals"], NO_BODY).await?;
        api(&a, plain::list_journals(a.status, &a.body))
    }

    /// `GET /v1/journals/{name}`.
    ///
    /// # Errors
    /// [`GatewayError`]; `unknown_journal` as a [`GatewayError::Denied`].
    pub async fn show_journal(&self, name: &JournalName) -> Result<JournalInfo, GatewayError> {
        let a = self.own(Method::GET, &["v1", "journals", name.as_str()], NO_BODY).await?;
        api(&a, plain::show_journal(a.status, &a.body))
    }

    /// `DELETE /v1/journals/{name}`.
    ///
    /// # Errors
    /// [`GatewayError`]; `unknown_journal` as a [`GatewayError::Denied`].
    pub async fn delete_journal(&self, name: &JournalName) -> Result<(), GatewayError> {
        let a = self.own(Method::DELETE, &["v1", "journals", name.as_str()], NO_BODY).await?;
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
        self.read_served(name, query).await.map(|(outcome, _)| outcome)
    }

    /// [`read`](Self::read), and the server that answered as the gateway named it
    /// (`paros-served-by`: a replica's or a voter's id; `None` when the answer names none).
    ///
    /// # Errors
    /// As [`read`](Self::read).
    pub async fn read_served(
        &self,
        name: &JournalName,
        query: &ReadQuery,
    ) -> Result<(ReadOutcome, Option<String>), GatewayError> {
        let mut url = self.url(&["v1", "journals", name.as_str(), "records"]);
        url.set_query(Some(&query.to_query()));
        let timeout = self.config.request_timeout + Duration::from_millis(u64::from(query.wait_ms.get()));
        let a = self.send(self.request(Method::GET, url, Some(timeout))).await?;
        let outcome = api(&a, ReadOutcome::from_response(a.status, &a.body))?;
        Ok((outcome, a.served_by))
    }
    /// `GET` on an operator route outside the tenant contract (`/v1/admin/…`, the path
    /// `segments`): the status and the body as they came back, whatever the status — the
    /// operator routes' error codes are not the contract's, so the caller reads them.
    ///
    /// # Errors
    /// [`GatewayError::NotSent`] or [`GatewayError::NoAnswer`]: no answer came.
    pub async fn operator_get(&self, segments: &[&str]) -> Result<(u16, bytes::Bytes), GatewayError> {
        self.own(Method::GET, segments, NO_BODY).await.map(|a| (a.status, a.body))
    }

    /// `POST` on an operator route outside the tenant contract, with `body` as JSON when given;
    /// as [`operator_get`](Self::operator_get).
    ///
    /// # Errors
    /// As [`operator_get`](Self::operator_get).
    pub async fn operator_post<T: serde::Serialize>(
        &self,
        segments: &[&str],
        body: Option<&T>,
    ) -> Result<(u16, bytes::Bytes), GatewayError> {
        let a = self.own(Method::POST, segments, body).await?;
        Ok((a.status, a.body))
    }

    pub(super) async fn open_tail(
        &self,
        name: &JournalName,
        from: Option<Seq>,
        last: Option<Seq>,
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
        Err(GatewayError::Denied(super::denial(status, error, retry_after_s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, retry_after_s: Option<u64>) -> Answer {
        Answer { status, retry_after_s, served_by: None, body: bytes::Bytes::new() }
    }

    #[test]
    fn a_429_is_sent_again_after_its_retry_after_while_the_waits_fit_their_bound() {
        let max = Duration::from_secs(10);
        let s = Duration::from_secs;
        assert_eq!(quota_resend(&answer(429, Some(3)), s(0), max), Some(s(3)));
        assert_eq!(quota_resend(&answer(429, Some(3)), s(7), max), Some(s(3)), "exactly at the bound");
        assert_eq!(quota_resend(&answer(429, Some(3)), s(8), max), None, "past the bound: the 429 stands");
        assert_eq!(quota_resend(&answer(429, None), s(0), max), Some(s(1)), "no Retry-After: 1 s");
        assert_eq!(quota_resend(&answer(429, Some(0)), s(0), max), Some(s(1)), "never at once");
        assert_eq!(quota_resend(&answer(429, Some(1)), s(0), Duration::ZERO), None, "a zero bound: at once");
        for status in [200, 201, 204, 400, 401, 403, 404, 409, 503] {
            assert_eq!(quota_resend(&answer(status, Some(1)), s(0), max), None, "{status} is an answer");
        }
    }
}
