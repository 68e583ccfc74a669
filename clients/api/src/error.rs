//! Error codes, their HTTP statuses and stable strings (one table), and the error body.

use core::fmt;

use paros_core::Seq;
use paros_core::journal::JournalView;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

crate::object::objects_only!(ErrorBody);

/// Every stable error `code` of API v1.
///
/// The discriminant indexes [`ErrorCode::TABLE`]; a unit test holds the two in step.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum ErrorCode {
    Malformed,
    Unauthorized,
    Forbidden,
    UnknownJournal,
    UnknownToken,
    Refused,
    Lost,
    TruncateRefused,
    WrongMode,
    NameTaken,
    Truncated,
    TooLarge,
    OverQuota,
    Unavailable,
    Ambiguous,
}

/// One row of the contract's error table.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ErrorRow {
    pub code: ErrorCode,
    pub status: u16,
    /// The stable `code` string in the error body.
    pub name: &'static str,
    /// When the server answers it.
    pub when: &'static str,
}

const fn row(code: ErrorCode, status: u16, name: &'static str, when: &'static str) -> ErrorRow {
    ErrorRow { code, status, name, when }
}

impl ErrorCode {
    /// The contract's table: the one place a code meets its status and its string.
    pub const TABLE: [ErrorRow; 15] = [
        row(
            ErrorCode::Malformed,
            400,
            "malformed",
            "bad JSON, bad base64, unknown field, bad name, bad uuid, bad query",
        ),
        row(
            ErrorCode::Unauthorized,
            401,
            "unauthorized",
            "missing, malformed, forged, expired, revoked token; wrong algorithm",
        ),
        row(ErrorCode::Forbidden, 403, "forbidden", "the token's scope or journal restriction does not allow the call"),
        row(ErrorCode::UnknownJournal, 404, "unknown_journal", "no such journal in this tenant (or it was deleted)"),
        row(ErrorCode::UnknownToken, 404, "unknown_token", "revoking a token id this tenant never minted"),
        row(ErrorCode::Refused, 409, "refused", "Write refused in place (wrong leader, wrong position, not a retry)"),
        row(ErrorCode::Lost, 409, "lost", "SetLeader lost its compare-and-set"),
        row(
            ErrorCode::TruncateRefused,
            409,
            "truncate_refused",
            "Truncate from a caller that is not the writer in force",
        ),
        row(ErrorCode::WrongMode, 409, "wrong_mode", "call shaped for the other writer mode"),
        row(ErrorCode::NameTaken, 409, "name_taken", "signup or journal create with a name in use"),
        row(ErrorCode::Truncated, 410, "truncated", "Write or Read below first_seq"),
        row(ErrorCode::TooLarge, 413, "too_large", "batch over the write limits, or request body over the body limit"),
        row(
            ErrorCode::OverQuota,
            429,
            "over_quota",
            "tenant over its requests/s, bytes/s or journal quota; Retry-After header",
        ),
        row(
            ErrorCode::Unavailable,
            503,
            "unavailable",
            "no quorum / election / no server could answer now; safe to retry",
        ),
        row(
            ErrorCode::Ambiguous,
            504,
            "ambiguous",
            "the call may or may not have taken effect (retry the identical request)",
        ),
    ];

    /// Every code, in table order.
    pub const ALL: [ErrorCode; 15] = {
        let mut all = [ErrorCode::Malformed; 15];
        let mut i = 0;
        while i < 15 {
            all[i] = ErrorCode::TABLE[i].code;
            i += 1;
        }
        all
    };

    /// This code's row of the table.
    #[must_use]
    pub fn row(self) -> &'static ErrorRow {
        &Self::TABLE[self as usize]
    }

    /// The HTTP status the code is answered with.
    #[must_use]
    pub fn status(self) -> u16 {
        self.row().status
    }

    /// The stable `code` string.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        self.row().name
    }

    /// The code spelled `name`, if any.
    #[must_use]
    pub fn from_name(name: &str) -> Option<ErrorCode> {
        Self::TABLE.iter().find(|r| r.name == name).map(|r| r.code)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        ErrorCode::from_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format_args!("{name:?} is not an API v1 error code")))
    }
}

/// The `code` strings of [`ErrorCode::TABLE`], which the serde impls above read and write;
/// written by hand because the strings come from the table, not from the variant names.
#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for ErrorCode {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some("The contract's stable error codes."))
            .enum_values(Some(ErrorCode::TABLE.iter().map(|r| r.name)))
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for ErrorCode {}

/// The three limits every `too_large` names.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Limits {
    /// Records per Write.
    pub max_records: u64,
    /// Decoded record bytes per Write.
    pub max_bytes: u64,
    /// Request body bytes, as sent (JSON, base64 and all).
    pub max_body_bytes: u64,
}

/// The body of every non-2xx answer.
///
/// `{"code", "message"}`, then `"view"` where a view is known, then — on every `too_large` —
/// `"max_records"`, `"max_bytes"` and `"max_body_bytes"`, then — on a Read's 503 `unavailable`,
/// when a server said — `"applied_to"`. Absent fields are omitted, never `null`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self")]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
    #[cfg_attr(feature = "openapi", schema(nullable = false, value_type = Option<crate::schema::JournalViewSchema>))]
    #[serde(default, deserialize_with = "crate::optional::present", skip_serializing_if = "Option::is_none")]
    pub view: Option<JournalView>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(default, deserialize_with = "crate::optional::present", skip_serializing_if = "Option::is_none")]
    pub max_records: Option<u64>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(default, deserialize_with = "crate::optional::present", skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(default, deserialize_with = "crate::optional::present", skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<u64>,
    /// On a Read's 503 `unavailable` only: how far the server that came closest to serving the
    /// read had applied the journal — the end of its applied prefix (its `next_seq`: every
    /// record below it is applied there, the one at it is not). A server that waited out an
    /// `at_least` read of `min_seq = m` says `applied_to ≤ m`; one that refused for another
    /// reason (not caught up since it started, too busy) may have applied further. Omitted when
    /// no server said.
    #[cfg_attr(feature = "openapi", schema(nullable = false, value_type = Option<crate::schema::SeqSchema>))]
    #[serde(default, deserialize_with = "crate::optional::present", skip_serializing_if = "Option::is_none")]
    pub applied_to: Option<Seq>,
}

impl ErrorBody {
    /// A body with no view and no limits.
    #[must_use]
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorBody {
        ErrorBody {
            code,
            message: message.into(),
            view: None,
            max_records: None,
            max_bytes: None,
            max_body_bytes: None,
            applied_to: None,
        }
    }

    /// The body with `view` attached.
    #[must_use]
    pub fn with_view(mut self, view: JournalView) -> ErrorBody {
        self.view = Some(view);
        self
    }

    /// The body with the three limits attached (what every `too_large` carries).
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> ErrorBody {
        self.max_records = Some(limits.max_records);
        self.max_bytes = Some(limits.max_bytes);
        self.max_body_bytes = Some(limits.max_body_bytes);
        self
    }

    /// The body with `applied_to` attached, when it is known (what a Read's 503 carries).
    #[must_use]
    pub fn with_applied_to(mut self, applied_to: Option<Seq>) -> ErrorBody {
        self.applied_to = applied_to;
        self
    }

    /// The three limits, when all three are present.
    #[must_use]
    pub fn limits(&self) -> Option<Limits> {
        Some(Limits {
            max_records: self.max_records?,
            max_bytes: self.max_bytes?,
            max_body_bytes: self.max_body_bytes?,
        })
    }

    /// The HTTP status this body is answered with.
    #[must_use]
    pub fn status(&self) -> u16 {
        self.code.status()
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    #[test]
    fn each_codes_discriminant_indexes_its_own_row() {
        for (i, row) in ErrorCode::TABLE.iter().enumerate() {
            assert_eq!(row.code as usize, i, "{row:?} sits at its discriminant");
            assert_eq!(ErrorCode::from_name(row.name), Some(row.code));
        }
    }

    #[test]
    fn code_strings_are_unique_snake_case() {
        let mut names: Vec<_> = ErrorCode::TABLE.iter().map(|r| r.name).collect();
        assert!(names.iter().all(|n| n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')));
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorCode::TABLE.len());
    }
}
