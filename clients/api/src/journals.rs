//! Journal administration: create, list, show (delete has no body).

use paros_core::journal::JournalView;
use serde::{Deserialize, Deserializer, Serialize};

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

/// `POST /v1/journals` request: `{"name", "mode"?, "tier"?}`.
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
    /// The replica tier to place the journal on, `^[a-z0-9][a-z0-9-]{0,62}$`. Omitted: the
    /// cell's `default` tier (none in a cell without one). A tier the cell does not have is
    /// 400 `malformed`, and nothing is created.
    #[cfg_attr(feature = "openapi", schema(nullable = false, pattern = "^[a-z0-9][a-z0-9-]{0,62}$"))]
    #[serde(default, deserialize_with = "present_tier", skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
}

/// A present `tier`: not `null`, and a valid tier name.
fn present_tier<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let tier: Option<String> = crate::optional::present(d)?;
    if let Some(t) = &tier {
        crate::names::check_tier_name(t).map_err(serde::de::Error::custom)?;
    }
    Ok(tier)
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
    /// The replica tier the journal is placed on, or `null` when it is on none. Always sent;
    /// read as `null` from a gateway that predates tiers.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    #[serde(default)]
    pub tier: Option<String>,
}

/// `GET /v1/journals` → 200: `{"journals": [...]}`, this tenant's only.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self")]
pub struct JournalList {
    pub journals: Vec<JournalInfo>,
}

/// A single-writer journal of this name, on the default tier.
impl From<JournalName> for CreateJournalRequest {
    fn from(name: JournalName) -> CreateJournalRequest {
        CreateJournalRequest { name, mode: None, tier: None }
    }
}

/// A single-writer journal of this name, on the default tier.
impl From<&JournalName> for CreateJournalRequest {
    fn from(name: &JournalName) -> CreateJournalRequest {
        CreateJournalRequest { name: name.clone(), mode: None, tier: None }
    }
}

/// The same request again.
impl From<&CreateJournalRequest> for CreateJournalRequest {
    fn from(request: &CreateJournalRequest) -> CreateJournalRequest {
        request.clone()
    }
}
