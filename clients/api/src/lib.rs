//! paros-api: the public HTTP contract of paros, API v1 (`docs/http-api.md`), as types.
//!
//! Everything that travels between a tenant and the gateway has one type here, and text
//! becomes a type only through a check: [`TenantName`], [`JournalName`], [`LeaderUuid`],
//! [`Seq`] and [`Record`] are parsed, never trusted, and their serde impls run the same check.
//! Request bodies refuse unknown fields, and an optional field is omitted or holds a value —
//! `null` is refused everywhere except SetLeader's `old` ([`optional`]).
//!
//! A tour:
//! - every journal answer carries a [`JournalView`];
//! - every error is an [`ErrorBody`] whose [`ErrorCode`] has one row in [`ErrorCode::TABLE`]
//!   (HTTP status and stable `code` string);
//! - requests and answers: [`tenants`] (signup, tokens), [`journals`] (create, list, show),
//!   [`calls`] (SetLeader, Write, Truncate), [`read`] (the Read query and its [`Page`]),
//!   [`tail`] (the SSE events), [`session`] (the append session's lines);
//! - a client turns `(status, body)` into a typed outcome with [`WriteOutcome::from_response`],
//!   [`ReadOutcome::from_response`], [`TruncateOutcome::from_response`],
//!   [`SetLeaderOutcome::from_response`], or the functions of [`outcome::plain`].
//!
//! JSON is written compactly, fields in the contract's order. [`Seq`], [`LeaderUuid`] and
//! [`JournalView`] are paros-core's own (their JSON is the contract's), so a client holds one
//! type of each; nothing else comes from the cell.

pub mod calls;
pub mod error;
pub mod journals;
pub mod names;
mod object;
pub mod optional;
pub mod outcome;
mod query;
pub mod read;
pub mod record;
#[cfg(feature = "openapi")]
pub mod schema;
pub mod session;
pub mod tail;
pub mod tenants;

pub use calls::{
    SetLeaderAnswer, SetLeaderRequest, SetLeaderVerdict, ShapeError, TruncateAnswer, TruncateRequest, TruncateVerdict,
    WriteAnswer, WriteRequest, WriteShape, WriteVerdict,
};
pub use error::{ErrorBody, ErrorCode, ErrorRow, Limits};
pub use journals::{CreateJournalRequest, JournalInfo, JournalList, WriterMode};
pub use names::{InvalidName, JournalName, TenantName, check_tier_name};
pub use outcome::{ApiError, ContractError, ReadOutcome, SetLeaderOutcome, TruncateOutcome, WriteOutcome};
pub use paros_core::journal::JournalView;
pub use paros_core::{InvalidPosition, InvalidUuid, LeaderUuid, Seq};
pub use query::InvalidQuery;
pub use read::{Consistency, Page, ReadQuery, WaitMs};
pub use record::{InvalidRecord, Record};
pub use session::{InvalidSessionLine, SESSION_CONTENT_TYPE, SessionEnd, SessionEndCode, SessionLine, WriteLine};
pub use tail::{Gap, Heartbeat, InvalidTailEvent, TailEvent, TailFrame, tail_start};
pub use tenants::{
    InvalidOpaque, MintTokenRequest, Scope, SignupAnswer, SignupRequest, TenantId, Token, TokenAnswer, TokenId,
};
