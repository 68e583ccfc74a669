//! The OpenAPI schemas of the types this crate takes from paros-core, which knows nothing of
//! OpenAPI: a field of one of them names its mirror here (`#[schema(value_type = …)]`), and the
//! document calls the three `Seq`, `LeaderUuid` and `View`. The mirrors are never built; they
//! only carry a schema.

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{Schema, SchemaType, Type};

// Only rustdoc reads it: the link in `LeaderUuidSchema`'s doc, which the document also carries.
#[allow(unused_imports)]
use crate::LeaderUuid;

/// A record position (`seq`, `first_seq`, `next_seq`, `from`, `up_to`, `min_seq`, `resumed_at`).
///
/// Travels as a bare JSON integer, the full u64 range: a value above 2^53 stays an integer
/// (serde_json never routes a u64 through f64), and a float, a negative number or a string is
/// refused.
#[derive(Debug, utoipa::ToSchema)]
#[schema(as = Seq)]
pub struct SeqSchema(pub u64);

/// A leader uuid: the non-zero u128 a writer fences its journal with.
///
/// Only [`LeaderUuid::parse`] (and the serde impls, which call it) turn text into one, so an
/// uppercase, braced, urn or nil spelling never gets in. Any uuid version or variant is
/// accepted: the server compares the 128 bits and nothing else.
#[derive(Debug, utoipa::ToSchema)]
#[schema(
    as = LeaderUuid,
    value_type = String,
    pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
)]
pub struct LeaderUuidSchema(pub u128);

impl LeaderUuidSchema {
    /// The schema of a required `Option<LeaderUuid>` that travels as `null` when `None` (the
    /// view's `leader`, SetLeader's `old`): the string schema with `null` added to its type, so
    /// the field reads `{"type": ["string", "null"], "pattern": …}`.
    #[must_use]
    pub fn nullable_schema() -> RefOr<Schema> {
        let mut schema = <LeaderUuidSchema as utoipa::PartialSchema>::schema();
        if let RefOr::T(Schema::Object(object)) = &mut schema {
            object.schema_type = SchemaType::Array(vec![Type::String, Type::Null]);
        }
        schema
    }
}

/// A journal's writer in force and retained range: `{"leader", "first_seq", "next_seq"}`.
///
/// `leader` is `null` for a journal never led (and always for a multi-writer journal).
/// Records `[first_seq, next_seq)` are retained. A view with `first_seq > next_seq` is refused
/// when deserialized: no server state looks like that.
#[derive(Debug, utoipa::ToSchema)]
#[schema(as = View)]
pub struct JournalViewSchema {
    #[schema(required = true, schema_with = LeaderUuidSchema::nullable_schema)]
    pub leader: Option<LeaderUuidSchema>,
    pub first_seq: SeqSchema,
    pub next_seq: SeqSchema,
}
