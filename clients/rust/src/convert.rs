//! The one place paros-api's contract types and paros-core's meet: every conversion between
//! them, for the HTTP service, the gateway and the CLI.

use paros_core::journal::{JournalView, WriterMode};
use paros_core::{Consistency, LeaderUuid, Seq};

/// paros-core's view as paros-api's.
#[must_use]
pub fn api_view(v: JournalView) -> paros_api::View {
    paros_api::View {
        leader: v.leader.map(api_uuid),
        first_seq: paros_api::Seq(v.first_seq.0),
        next_seq: paros_api::Seq(v.next_seq.0),
    }
}

/// paros-core's writer mode as paros-api's.
#[must_use]
pub fn api_mode(m: WriterMode) -> paros_api::WriterMode {
    match m {
        WriterMode::Single => paros_api::WriterMode::SingleWriter,
        WriterMode::Multi => paros_api::WriterMode::MultiWriter,
    }
}

/// paros-api's writer mode as paros-core's.
#[must_use]
pub fn core_mode(m: paros_api::WriterMode) -> WriterMode {
    match m {
        paros_api::WriterMode::SingleWriter => WriterMode::Single,
        paros_api::WriterMode::MultiWriter => WriterMode::Multi,
    }
}

/// paros-api's view as paros-core's.
#[must_use]
pub fn core_view(v: paros_api::View) -> JournalView {
    JournalView {
        leader: v.leader.and_then(|l| LeaderUuid::new(l.get())),
        first_seq: Seq(v.first_seq.0),
        next_seq: Seq(v.next_seq.0),
    }
}

/// paros-core's leader uuid as paros-api's (both are non-zero u128s).
#[must_use]
pub fn api_uuid(u: LeaderUuid) -> paros_api::LeaderUuid {
    paros_api::LeaderUuid::new(u.get()).expect("a core leader uuid is never zero")
}

/// paros-api's leader uuid as paros-core's.
#[must_use]
pub fn core_uuid(u: paros_api::LeaderUuid) -> LeaderUuid {
    LeaderUuid::new(u.get()).expect("an API leader uuid is never nil")
}

/// paros-core's read consistency as API.md's (see the [HTTP module documentation](crate::http)).
#[must_use]
pub fn api_consistency(c: Consistency) -> paros_api::Consistency {
    match c {
        Consistency::Linearizable | Consistency::AtLeast(Seq(0)) => {
            paros_api::Consistency::Linearizable { min_seq: None }
        }
        Consistency::AtLeast(Seq(s)) => paros_api::Consistency::AtLeast { min_seq: paros_api::Seq(s - 1) },
    }
}
