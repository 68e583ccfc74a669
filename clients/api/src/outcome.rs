//! Client side: a (status, body) answer turned into the call's typed outcome.
//!
//! Verdicts a caller must handle — refused, truncated, wrong mode, lost, too large, ambiguous —
//! are [`Ok`] values of the call's outcome. Everything else the server can say (401, 403, 404,
//! 429, …) is [`ApiError::Answered`], and an answer that breaks the contract is
//! [`ApiError::Contract`].

use paros_core::Seq;
use paros_core::journal::JournalView;
use serde::de::DeserializeOwned;

use crate::calls::{SetLeaderAnswer, TruncateAnswer, WriteAnswer, WriteVerdict};
use crate::error::{ErrorBody, ErrorCode, Limits};
use crate::journals::{JournalInfo, JournalList};
use crate::read::Page;
use crate::tenants::{SignupAnswer, TokenAnswer};

/// A call's answer that is not one of its outcomes.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The server answered an error this call does not turn into an outcome.
    #[error("{} ({}): {}", .0.code, .0.code.status(), .0.message)]
    Answered(Box<ErrorBody>),
    /// The answer does not fit the contract.
    #[error("the answer breaks the API contract: {0}")]
    Contract(#[from] ContractError),
}

impl ApiError {
    /// The error code, for an error the server answered.
    #[must_use]
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ApiError::Answered(b) => Some(b.code),
            ApiError::Contract(_) => None,
        }
    }
}

/// How an answer breaks the contract.
#[derive(Debug, thiserror::Error)]
pub enum ContractError {
    /// A status this call never answers with (a 2xx other than its own, a 1xx or 3xx).
    #[error("status {0} is not an answer of this call")]
    UnexpectedStatus(u16),
    /// A body that does not deserialize as the status says it should.
    #[error("status {status} with a body that is not its JSON: {source}")]
    BadBody { status: u16, source: serde_json::Error },
    /// An error code answered with another status than the table's.
    #[error("{code} is answered with {}, not {status}", .code.status())]
    StatusMismatch { status: u16, code: ErrorCode },
    /// A journal verdict without the view the contract says it carries.
    #[error("{0} without its view")]
    MissingView(ErrorCode),
    /// A `too_large` without all three limits.
    #[error("too_large without max_records, max_bytes and max_body_bytes")]
    MissingLimits,
}

/// Parses a non-2xx body and checks it against the error table.
///
/// # Errors
/// [`ContractError`] for a body that is not an error body, a code answered with the wrong
/// status, or a `too_large` without its limits.
pub fn error_body(status: u16, body: &[u8]) -> Result<ErrorBody, ContractError> {
    let e: ErrorBody = serde_json::from_slice(body).map_err(|source| ContractError::BadBody { status, source })?;
    if e.code.status() != status {
        return Err(ContractError::StatusMismatch { status, code: e.code });
    }
    if e.code == ErrorCode::TooLarge && e.limits().is_none() {
        return Err(ContractError::MissingLimits);
    }
    Ok(e)
}

/// The body of the call's success status `ok`, or the answered error.
fn answer<T: DeserializeOwned>(ok: u16, status: u16, body: &[u8]) -> Result<Result<T, ErrorBody>, ContractError> {
    if status == ok {
        return serde_json::from_slice(body).map(Ok).map_err(|source| ContractError::BadBody { status, source });
    }
    failure(status, body).map(Err)
}

/// The error body of a status that is not the call's success status.
fn failure(status: u16, body: &[u8]) -> Result<ErrorBody, ContractError> {
    if status < 400 {
        return Err(ContractError::UnexpectedStatus(status));
    }
    error_body(status, body)
}

fn view_of(e: &ErrorBody) -> Result<JournalView, ContractError> {
    e.view.ok_or(ContractError::MissingView(e.code))
}

/// What a Write came to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WriteOutcome {
    /// 200 `accepted`: the batch took `[seq, seq + count)`.
    Accepted { seq: Seq, count: u64, view: JournalView },
    /// 200 `duplicate`: a byte-identical retry of the write accepted at `seq`.
    Duplicate { seq: Seq, count: u64, view: JournalView },
    /// 409 `refused`: refused in place (wrong leader, wrong position, not a retry, empty).
    Refused(JournalView),
    /// 409 `wrong_mode`: shaped for the other writer mode.
    WrongMode(JournalView),
    /// 410 `truncated`: `seq` is below `first_seq`; whether it was written is unknowable here.
    Truncated(JournalView),
    /// 413 `too_large`: over the write limits (with the view) or the body limit (maybe without).
    TooLarge { limits: Limits, view: Option<JournalView> },
    /// 504 `ambiguous`: may or may not have taken effect; retry the identical request.
    Ambiguous,
}

impl WriteOutcome {
    /// Turns a Write's answer into its outcome.
    ///
    /// # Errors
    /// [`ApiError`] for any other answer.
    pub fn from_response(status: u16, body: &[u8]) -> Result<WriteOutcome, ApiError> {
        let e = match answer::<WriteAnswer>(200, status, body)? {
            Ok(a) => {
                let WriteAnswer { outcome, seq, count, view } = a;
                return Ok(match outcome {
                    WriteVerdict::Accepted => WriteOutcome::Accepted { seq, count, view },
                    WriteVerdict::Duplicate => WriteOutcome::Duplicate { seq, count, view },
                });
            }
            Err(e) => e,
        };
        Ok(match e.code {
            ErrorCode::Refused => WriteOutcome::Refused(view_of(&e)?),
            ErrorCode::WrongMode => WriteOutcome::WrongMode(view_of(&e)?),
            ErrorCode::Truncated => WriteOutcome::Truncated(view_of(&e)?),
            ErrorCode::TooLarge => {
                WriteOutcome::TooLarge { limits: e.limits().ok_or(ContractError::MissingLimits)?, view: e.view }
            }
            ErrorCode::Ambiguous => WriteOutcome::Ambiguous,
            _ => return Err(ApiError::Answered(Box::new(e))),
        })
    }
}

/// What a Read came to.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum ReadOutcome {
    /// 200: records from `page.from` on (maybe none, at the tail).
    Page(Page),
    /// 410 `truncated`: `from` is below `first_seq`.
    Truncated(JournalView),
    /// 503 `unavailable`: not served within `wait_ms` (or no server could answer); retry.
    Unserved {
        /// The body's `applied_to`: how far the server that came closest had applied the
        /// journal (its `next_seq`), when one said.
        applied_to: Option<Seq>,
    },
}

impl ReadOutcome {
    /// Turns a Read's answer into its outcome.
    ///
    /// # Errors
    /// [`ApiError`] for any other answer.
    pub fn from_response(status: u16, body: &[u8]) -> Result<ReadOutcome, ApiError> {
        let e = match answer::<Page>(200, status, body)? {
            Ok(page) => return Ok(ReadOutcome::Page(page)),
            Err(e) => e,
        };
        Ok(match e.code {
            ErrorCode::Truncated => ReadOutcome::Truncated(view_of(&e)?),
            ErrorCode::Unavailable => ReadOutcome::Unserved { applied_to: e.applied_to },
            _ => return Err(ApiError::Answered(Box::new(e))),
        })
    }
}

/// What a Truncate came to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TruncateOutcome {
    /// 200 `trimmed`: the view after the trim.
    Trimmed(JournalView),
    /// 409 `truncate_refused`: the caller is not the writer in force.
    TruncateRefused(JournalView),
    /// 409 `wrong_mode`: shaped for the other writer mode.
    WrongMode(JournalView),
    /// 504 `ambiguous`: may or may not have taken effect; retry the identical request.
    Ambiguous,
}

impl TruncateOutcome {
    /// Turns a Truncate's answer into its outcome.
    ///
    /// # Errors
    /// [`ApiError`] for any other answer.
    pub fn from_response(status: u16, body: &[u8]) -> Result<TruncateOutcome, ApiError> {
        let e = match answer::<TruncateAnswer>(200, status, body)? {
            Ok(a) => return Ok(TruncateOutcome::Trimmed(a.view)),
            Err(e) => e,
        };
        Ok(match e.code {
            ErrorCode::TruncateRefused => TruncateOutcome::TruncateRefused(view_of(&e)?),
            ErrorCode::WrongMode => TruncateOutcome::WrongMode(view_of(&e)?),
            ErrorCode::Ambiguous => TruncateOutcome::Ambiguous,
            _ => return Err(ApiError::Answered(Box::new(e))),
        })
    }
}

/// What a SetLeader came to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SetLeaderOutcome {
    /// 200 `won`: the view after the change.
    Won(JournalView),
    /// 409 `lost`: the compare-and-set failed; the view it was judged against.
    Lost(JournalView),
    /// 409 `wrong_mode`: the journal is multi-writer.
    WrongMode(JournalView),
    /// 504 `ambiguous`: may or may not have taken effect; retry the identical request.
    Ambiguous,
}

impl SetLeaderOutcome {
    /// Turns a SetLeader's answer into its outcome.
    ///
    /// # Errors
    /// [`ApiError`] for any other answer.
    pub fn from_response(status: u16, body: &[u8]) -> Result<SetLeaderOutcome, ApiError> {
        let e = match answer::<SetLeaderAnswer>(200, status, body)? {
            Ok(a) => return Ok(SetLeaderOutcome::Won(a.view)),
            Err(e) => e,
        };
        Ok(match e.code {
            ErrorCode::Lost => SetLeaderOutcome::Lost(view_of(&e)?),
            ErrorCode::WrongMode => SetLeaderOutcome::WrongMode(view_of(&e)?),
            ErrorCode::Ambiguous => SetLeaderOutcome::Ambiguous,
            _ => return Err(ApiError::Answered(Box::new(e))),
        })
    }
}

/// The plain answers: one success status and body, every error an [`ApiError`].
pub mod plain {
    use super::{ApiError, JournalInfo, JournalList, SignupAnswer, TokenAnswer, answer, failure};

    fn only<T: serde::de::DeserializeOwned>(ok: u16, status: u16, body: &[u8]) -> Result<T, ApiError> {
        answer(ok, status, body)?.map_err(|e| ApiError::Answered(Box::new(e)))
    }

    fn no_content(status: u16, body: &[u8]) -> Result<(), ApiError> {
        if status == 204 {
            return Ok(());
        }
        Err(ApiError::Answered(Box::new(failure(status, body)?)))
    }

    /// `POST /v1/signup` → 200.
    ///
    /// # Errors
    /// [`ApiError`] for any other answer (`name_taken`, `unauthorized`, `forbidden`, …).
    pub fn signup(status: u16, body: &[u8]) -> Result<SignupAnswer, ApiError> {
        only(200, status, body)
    }

    /// `POST /v1/tokens` → 200.
    ///
    /// # Errors
    /// [`ApiError`] for any other answer.
    pub fn mint_token(status: u16, body: &[u8]) -> Result<TokenAnswer, ApiError> {
        only(200, status, body)
    }

    /// `DELETE /v1/tokens/{token_id}` → 204 (revoking again is 204 too).
    ///
    /// # Errors
    /// [`ApiError`] for any other answer (`unknown_token`, …).
    pub fn revoke_token(status: u16, body: &[u8]) -> Result<(), ApiError> {
        no_content(status, body)
    }

    /// `POST /v1/journals` → 201.
    ///
    /// # Errors
    /// [`ApiError`] for any other answer (`name_taken`, …).
    pub fn create_journal(status: u16, body: &[u8]) -> Result<JournalInfo, ApiError> {
        only(201, status, body)
    }

    /// `GET /v1/journals` → 200.
    ///
    /// # Errors
    /// [`ApiError`] for any other answer.
    pub fn list_journals(status: u16, body: &[u8]) -> Result<JournalList, ApiError> {
        only(200, status, body)
    }

    /// `GET /v1/journals/{name}` → 200.
    ///
    /// # Errors
    /// [`ApiError`] for any other answer (`unknown_journal`, …).
    pub fn show_journal(status: u16, body: &[u8]) -> Result<JournalInfo, ApiError> {
        only(200, status, body)
    }

    /// `DELETE /v1/journals/{name}` → 204.
    ///
    /// # Errors
    /// [`ApiError`] for any other answer (`unknown_journal`, …).
    pub fn delete_journal(status: u16, body: &[u8]) -> Result<(), ApiError> {
        no_content(status, body)
    }
}
