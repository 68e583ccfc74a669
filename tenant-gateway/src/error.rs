//! The gateway's one error type and its one mapping to (status, code, view).

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use paros_api::{ErrorBody, ErrorCode, JournalView, Limits};

/// Every refusal the gateway answers: a code of the contract's table (or, on the operator's cell
/// routes, an [`OperatorCode`]), a message, and what the code carries (the view, the limits, a
/// retry delay). Boxed: errors travel up every handler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError(Box<Repr>);

#[derive(Clone, Debug, PartialEq, Eq)]
struct Repr {
    code: ErrorCode,
    /// An operator route's own code, answered instead of `code` (which is then unused).
    operator: Option<OperatorCode>,
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
            operator: None,
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

    /// An operator route's refusal: its own code and status (outside the tenant contract's
    /// table; docs/cell-admin.md lists them).
    pub fn operator(code: OperatorCode, message: impl Into<String>) -> ApiError {
        let mut e = ApiError::new(ErrorCode::Malformed, message);
        e.0.operator = Some(code);
        e
    }

    /// The contract's code answered; `None` for an operator refusal ([`operator_code`](Self::operator_code)).
    #[must_use]
    pub fn code(&self) -> Option<ErrorCode> {
        match self.0.operator {
            Some(_) => None,
            None => Some(self.0.code),
        }
    }

    /// The operator code answered, if it is one.
    #[must_use]
    pub fn operator_code(&self) -> Option<OperatorCode> {
        self.0.operator
    }

    /// The stable `code` string answered, whichever table it comes from.
    #[must_use]
    pub fn code_name(&self) -> &'static str {
        self.0.operator.map_or_else(|| self.0.code.as_str(), OperatorCode::as_str)
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
        self.0.operator.map_or_else(|| self.0.code.status(), OperatorCode::status)
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
        let json = match self.0.operator {
            Some(code) => {
                serde_json::to_vec(&OperatorErrorBody { code: code.as_str(), message: self.0.message.clone() })
            }
            None => serde_json::to_vec(&self.body()),
        }
        .unwrap_or_default();
        let mut response =
            (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], json).into_response();
        if let Some(v) = self.retry_after_s().and_then(|secs| HeaderValue::from_str(&secs.to_string()).ok()) {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        response
    }
}

/// The operator's cell routes' own refusals (`/v1/admin/cell`, `/v1/admin/machines`,
/// `/v1/admin/journals/…/move`), each a registry refusal the fold judged: not part of the tenant
/// contract's table (a tenant never meets them), documented with those routes
/// (docs/cell-admin.md). Their body is [`OperatorErrorBody`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum OperatorCode {
    /// 404: the registry knows no machine of that id.
    UnknownMachine,
    /// 409: the machine is retired (or replaced by a new identity): its id is never used again.
    MachineRetired,
    /// 409: an admit under an id registered in another role; a role is fixed at registration.
    RoleChange,
    /// 409: an admit under an id recorded with another store incarnation: the store is foreign,
    /// and the machine joins again only as a new identity.
    IncarnationChanged,
    /// 409: an admit under the id of a replica tier's feed.
    IdIsAFeed,
    /// 409: the journal has a seat move recorded and not done; one move at a time.
    MoveInProgress,
    /// 409: `from` holds no seat of the journal.
    NotAVoter,
    /// 409: `to` holds a seat of the journal already.
    AlreadyAVoter,
    /// 409: `to` may not take a seat: not a node, draining, retired or replaced.
    TargetIneligible,
}

impl OperatorCode {
    /// Every code, in the order docs/cell-admin.md lists them.
    pub const ALL: [OperatorCode; 9] = [
        OperatorCode::UnknownMachine,
        OperatorCode::MachineRetired,
        OperatorCode::RoleChange,
        OperatorCode::IncarnationChanged,
        OperatorCode::IdIsAFeed,
        OperatorCode::MoveInProgress,
        OperatorCode::NotAVoter,
        OperatorCode::AlreadyAVoter,
        OperatorCode::TargetIneligible,
    ];

    /// The stable `code` string.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            OperatorCode::UnknownMachine => "unknown_machine",
            OperatorCode::MachineRetired => "machine_retired",
            OperatorCode::RoleChange => "role_change",
            OperatorCode::IncarnationChanged => "incarnation_changed",
            OperatorCode::IdIsAFeed => "id_is_a_feed",
            OperatorCode::MoveInProgress => "move_in_progress",
            OperatorCode::NotAVoter => "not_a_voter",
            OperatorCode::AlreadyAVoter => "already_a_voter",
            OperatorCode::TargetIneligible => "target_ineligible",
        }
    }

    /// The HTTP status it is answered with.
    #[must_use]
    pub fn status(self) -> u16 {
        match self {
            OperatorCode::UnknownMachine => 404,
            _ => 409,
        }
    }
}

/// The error body of an operator refusal: `{"code", "message"}`, as the contract's, with a code
/// of [`OperatorCode`] (or, on the same routes, of the contract's table).
#[derive(Clone, Debug, serde::Serialize, utoipa::ToSchema)]
pub struct OperatorErrorBody {
    /// A stable code: the contract's (`malformed`, `unknown_journal`, …) or an operator route's
    /// own (`unknown_machine`, `move_in_progress`, …).
    pub code: &'static str,
    pub message: String,
}

/// What every handler returns.
pub type ApiResult<T> = Result<T, ApiError>;
