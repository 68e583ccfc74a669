//! The gateway's one error type and its one mapping to (status, code, view).

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use paros_api::{ErrorBody, ErrorCode, JournalView, Limits};

/// Every refusal the gateway answers: a code of the contract's table, a message, and what the code
/// carries (the view, the limits, a retry delay). Boxed: errors travel up every handler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError(Box<Repr>);

#[derive(Clone, Debug, PartialEq, Eq)]
struct Repr {
    code: ErrorCode,
    message: String,
    view: Option<JournalView>,
    limits: Option<Limits>,
    /// `Retry-After`, on `over_quota`.
    retry_after: Option<Duration>,
    /// On a Read's `unavailable`: how far the closest server had applied the journal.
    applied_to: Option<paros_core::Seq>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError(Box::new(Repr {
            code,
            message: message.into(),
            view: None,
            limits: None,
            retry_after: None,
            applied_to: None,
        }))
    }

    #[must_use]
    pub fn with_view(mut self, view: JournalView) -> ApiError {
        self.0.view = Some(view);
        self
    }

    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> ApiError {
        self.0.limits = Some(limits);
        self
    }

    /// A Read's `unavailable` saying how far the server that came closest had applied the
    /// journal (`None`: no server said, and the body leaves the field out).
    #[must_use]
    pub fn with_applied_to(mut self, applied_to: Option<paros_core::Seq>) -> ApiError {
        self.0.applied_to = applied_to;
        self
    }

    #[must_use]
    pub fn with_message(mut self, message: impl Into<String>) -> ApiError {
        self.0.message = message.into();
        self
    }

    /// The code answered.
    #[must_use]
    pub fn code(&self) -> ErrorCode {
        self.0.code
    }

    pub fn malformed(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Malformed, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Unauthorized, message)
    }

    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Forbidden, message)
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::Unavailable, message)
    }

    #[must_use]
    pub fn unknown_journal() -> ApiError {
        ApiError::new(ErrorCode::UnknownJournal, "no such journal in this tenant")
    }

    pub fn over_quota(message: impl Into<String>, retry_after: Duration) -> ApiError {
        let mut e = ApiError::new(ErrorCode::OverQuota, message);
        e.0.retry_after = Some(retry_after);
        e
    }

    #[must_use]
    pub fn ambiguous() -> ApiError {
        ApiError::new(ErrorCode::Ambiguous, "the call may or may not have taken effect: retry the identical request")
    }

    /// The body answered.
    #[must_use]
    pub fn body(&self) -> ErrorBody {
        let mut body = ErrorBody::new(self.0.code, self.0.message.clone());
        body.view = self.0.view;
        if let Some(l) = self.0.limits {
            body = body.with_limits(l);
        }
        body.with_applied_to(self.0.applied_to)
    }

    /// The status answered.
    #[must_use]
    pub fn status(&self) -> u16 {
        self.0.code.status()
    }

    /// `Retry-After` in whole seconds (at least 1), on `over_quota`.
    #[must_use]
    pub fn retry_after_s(&self) -> Option<u64> {
        self.0.retry_after.map(|after| (after.as_secs() + u64::from(after.subsec_nanos() > 0)).max(1))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let json = serde_json::to_vec(&self.body()).unwrap_or_default();
        let mut response =
            (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], json).into_response();
        if let Some(v) = self.retry_after_s().and_then(|secs| HeaderValue::from_str(&secs.to_string()).ok()) {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        response
    }
}

/// What every handler returns.
pub type ApiResult<T> = Result<T, ApiError>;
