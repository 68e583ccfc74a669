//! The view every journal answer carries.

use serde::{Deserialize, Deserializer, Serialize};

use crate::leader::LeaderUuid;
use crate::position::Seq;

/// A journal's writer in force and retained range: `{"leader", "first_seq", "next_seq"}`.
///
/// `leader` is `null` for a journal never led (and always for a multi-writer journal).
/// Records `[first_seq, next_seq)` are retained. A view with `first_seq > next_seq` is refused
/// when deserialized: no server state looks like that.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct View {
    #[cfg_attr(feature = "openapi", schema(required = true, schema_with = LeaderUuid::nullable_schema))]
    pub leader: Option<LeaderUuid>,
    pub first_seq: Seq,
    pub next_seq: Seq,
}

impl View {
    /// A new journal's view: no leader, nothing written.
    pub const NEW: View = View { leader: None, first_seq: Seq(0), next_seq: Seq(0) };
}

/// The wire shape, before its invariant is checked.
#[derive(Deserialize)]
#[serde(remote = "Self")]
struct ViewWire {
    #[serde(deserialize_with = "crate::optional::nullable")]
    leader: Option<LeaderUuid>,
    first_seq: Seq,
    next_seq: Seq,
}

impl<'de> Deserialize<'de> for View {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = ViewWire::deserialize(crate::object::ObjectOnly(d))?;
        if w.first_seq > w.next_seq {
            return Err(serde::de::Error::custom(format_args!(
                "a view's first_seq ({}) never passes its next_seq ({})",
                w.first_seq, w.next_seq
            )));
        }
        Ok(View { leader: w.leader, first_seq: w.first_seq, next_seq: w.next_seq })
    }
}
