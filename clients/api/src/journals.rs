//! Journal administration: create, list, show (delete has no body).

use paros_core::journal::JournalView;
use serde::{Deserialize, Serialize};

use crate::names::JournalName;

crate::object::objects_only!(CreateJournalRequest, JournalInfo, JournalList);

/// How a journal is written, fixed when it is created.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum WriterMode {
    /// One writer at a time, fenced by a leader uuid; writes land exactly at `next_seq`.
    #[default]
    SingleWriter,
    /// Anyone appends at the tail, unfenced, at least once.
    MultiWriter,
}

/// `POST /v1/journals` request: `{"name", "mode"?}`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self")]
#[serde(deny_unknown_fields)]
pub struct CreateJournalRequest {
    pub name: JournalName,
    /// Omitted: [`WriterMode::SingleWriter`]. Kept as sent so the body re-encodes identically.
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(default, deserialize_with = "crate::optional::present", skip_serializing_if = "Option::is_none")]
    pub mode: Option<WriterMode>,
}

impl CreateJournalRequest {
    /// The mode the journal will have.
    #[must_use]
    pub fn mode(&self) -> WriterMode {
        self.mode.unwrap_or_default()
    }
}

/// One journal: the answer to create (201) and show (200), and each entry of a list.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self")]
pub struct JournalInfo {
    pub name: JournalName,
    pub mode: WriterMode,
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schema::JournalViewSchema))]
    pub view: JournalView,
}

/// `GET /v1/journals` → 200: `{"journals": [...]}`, this tenant's only.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self")]
pub struct JournalList {
    pub journals: Vec<JournalInfo>,
}

/// A single-writer journal of this name.
impl From<JournalName> for CreateJournalRequest {
    fn from(name: JournalName) -> CreateJournalRequest {
        CreateJournalRequest { name, mode: None }
    }
}

/// A single-writer journal of this name.
impl From<&JournalName> for CreateJournalRequest {
    fn from(name: &JournalName) -> CreateJournalRequest {
        CreateJournalRequest { name: name.clone(), mode: None }
    }
}

/// The same request again.
impl From<&CreateJournalRequest> for CreateJournalRequest {
    fn from(request: &CreateJournalRequest) -> CreateJournalRequest {
        request.clone()
    }
}
