//! The three calls that change a journal: SetLeader, Write and Truncate — bodies and shapes.

use paros_core::journal::JournalView;
use paros_core::{LeaderUuid, Seq};
use serde::{Deserialize, Serialize};

use crate::journals::WriterMode;
use crate::record::Record;

crate::object::objects_only!(
    SetLeaderRequest,
    SetLeaderAnswer,
    WriteRequest,
    WriteAnswer,
    TruncateRequest,
    TruncateAnswer
);

/// `POST /v1/journals/{name}/leader` request: `{"new", "old"}`.
///
/// `old` is required and is the one nullable field of the API: `null` claims a journal never
/// led, a uuid claims it from that writer.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self")]
#[serde(deny_unknown_fields)]
pub struct SetLeaderRequest {
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schema::LeaderUuidSchema))]
    pub new: LeaderUuid,
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, schema_with = crate::schema::LeaderUuidSchema::nullable_schema)
    )]
    #[serde(deserialize_with = "crate::optional::nullable")]
    pub old: Option<LeaderUuid>,
}

/// The `outcome` of a SetLeader that answered 200.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = SetLeaderOutcome))]
#[serde(rename_all = "snake_case")]
pub enum SetLeaderVerdict {
    Won,
}

/// SetLeader → 200: `{"outcome": "won", "view"}`, the view after the change.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self")]
pub struct SetLeaderAnswer {
    pub outcome: SetLeaderVerdict,
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schema::JournalViewSchema))]
    pub view: JournalView,
}

/// `POST /v1/journals/{name}/records` request: `{"leader", "seq", "records"}` for a
/// single-writer journal, `{"records"}` for a multi-writer one.
///
/// Which fields must be present depends on the journal's mode, which only the server knows:
/// [`WriteRequest::shape`] judges that.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self")]
#[serde(deny_unknown_fields)]
pub struct WriteRequest {
    /// Single-writer journals only, with `seq`.
    #[cfg_attr(feature = "openapi", schema(nullable = false, value_type = Option<crate::schema::LeaderUuidSchema>))]
    #[serde(default, deserialize_with = "crate::optional::present", skip_serializing_if = "Option::is_none")]
    pub leader: Option<LeaderUuid>,
    /// The first position of the batch (single-writer journals only, with `leader`).
    #[cfg_attr(feature = "openapi", schema(nullable = false, value_type = Option<crate::schema::SeqSchema>))]
    #[serde(default, deserialize_with = "crate::optional::present", skip_serializing_if = "Option::is_none")]
    pub seq: Option<Seq>,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub records: Vec<Record>,
}

/// A Write body judged against its journal's mode.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WriteShape {
    /// A fenced write of the batch at exactly `seq`.
    Fenced { leader: LeaderUuid, seq: Seq },
    /// An unfenced append at the tail.
    Append,
}

/// Why a Write body does not fit its journal's mode.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum ShapeError {
    /// 400 `malformed`: a single-writer Write names its leader but not its position.
    #[error("a fenced write names its position: `leader` without `seq`")]
    LeaderWithoutSeq,
    /// 409 `wrong_mode`: the body is shaped for the other writer mode.
    #[error("the call is shaped for the other writer mode")]
    WrongMode,
}

impl WriteRequest {
    /// A fenced write for a single-writer journal.
    #[must_use]
    pub fn fenced(leader: LeaderUuid, seq: Seq, records: Vec<Record>) -> WriteRequest {
        WriteRequest { leader: Some(leader), seq: Some(seq), records }
    }

    /// An unfenced append for a multi-writer journal.
    #[must_use]
    pub fn append(records: Vec<Record>) -> WriteRequest {
        WriteRequest { leader: None, seq: None, records }
    }

    /// Judges the body against the journal's mode, as the contract's Write shapes say.
    ///
    /// Single-writer: no `leader` is `wrong_mode` (whatever `seq` says); `leader` without
    /// `seq` is `malformed`. Multi-writer: `leader` or `seq` is `wrong_mode`.
    ///
    /// # Errors
    /// [`ShapeError`] naming the answer the server gives.
    pub fn shape(&self, mode: WriterMode) -> Result<WriteShape, ShapeError> {
        match (mode, self.leader, self.seq) {
            (WriterMode::SingleWriter, None, _) => Err(ShapeError::WrongMode),
            (WriterMode::SingleWriter, Some(_), None) => Err(ShapeError::LeaderWithoutSeq),
            (WriterMode::SingleWriter, Some(leader), Some(seq)) => Ok(WriteShape::Fenced { leader, seq }),
            (WriterMode::MultiWriter, None, None) => Ok(WriteShape::Append),
            (WriterMode::MultiWriter, _, _) => Err(ShapeError::WrongMode),
        }
    }

    /// The decoded record bytes of the batch, what the write limits count.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.records.iter().map(|r| r.len() as u64).sum()
    }
}

/// The `outcome` of a Write that answered 200.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = WriteOutcome))]
#[serde(rename_all = "snake_case")]
pub enum WriteVerdict {
    /// The batch took `[seq, seq + count)`.
    Accepted,
    /// A byte-identical retry of the write accepted at `seq`: acknowledged, nothing moved.
    Duplicate,
}

/// Write → 200: `{"outcome", "seq", "count", "view"}`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self")]
pub struct WriteAnswer {
    pub outcome: WriteVerdict,
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schema::SeqSchema))]
    pub seq: Seq,
    pub count: u64,
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schema::JournalViewSchema))]
    pub view: JournalView,
}

/// `POST /v1/journals/{name}/truncate` request: `{"leader", "up_to"}`, or `{"up_to"}` on a
/// multi-writer journal.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self")]
#[serde(deny_unknown_fields)]
pub struct TruncateRequest {
    /// Single-writer journals only.
    #[cfg_attr(feature = "openapi", schema(nullable = false, value_type = Option<crate::schema::LeaderUuidSchema>))]
    #[serde(default, deserialize_with = "crate::optional::present", skip_serializing_if = "Option::is_none")]
    pub leader: Option<LeaderUuid>,
    /// The first position the caller still needs; past the tail it stops at `next_seq`.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schema::SeqSchema))]
    pub up_to: Seq,
}

impl TruncateRequest {
    /// Judges the body against the journal's mode: a single-writer Truncate names its leader,
    /// a multi-writer one does not.
    ///
    /// # Errors
    /// [`ShapeError::WrongMode`] for a body shaped for the other mode.
    pub fn shape(&self, mode: WriterMode) -> Result<Option<LeaderUuid>, ShapeError> {
        match (mode, self.leader) {
            (WriterMode::SingleWriter, Some(l)) => Ok(Some(l)),
            (WriterMode::MultiWriter, None) => Ok(None),
            _ => Err(ShapeError::WrongMode),
        }
    }
}

/// The `outcome` of a Truncate that answered 200.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(as = TruncateOutcome))]
#[serde(rename_all = "snake_case")]
pub enum TruncateVerdict {
    Trimmed,
}

/// Truncate → 200: `{"outcome": "trimmed", "view"}`, the view after the trim.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self")]
pub struct TruncateAnswer {
    pub outcome: TruncateVerdict,
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schema::JournalViewSchema))]
    pub view: JournalView,
}
