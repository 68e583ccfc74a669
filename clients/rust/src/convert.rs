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

/// paros-core's read consistency as the HTTP contract's: `Reached(s)` asks for `next_seq ≥ s`,
/// `at_least` with `min_seq = m` for `next_seq > m`, so `Reached(s)` travels as
/// `min_seq = s − 1`, and `Reached(0)` (which any server meets) as the default, linearizable.
#[must_use]
pub fn api_consistency(c: Consistency) -> paros_api::Consistency {
    match c {
        Consistency::Linearizable | Consistency::Reached(Seq(0)) => {
            paros_api::Consistency::Linearizable { min_seq: None }
        }
        Consistency::Reached(Seq(s)) => paros_api::Consistency::AtLeast { min_seq: paros_api::Seq(s - 1) },
    }
}

/// The HTTP contract's read consistency as paros-core's, and the `next_seq` a linearizable read
/// must also reach (`consistency=linearizable&min_seq=m` waits for both: the core read is
/// linearizable, and the journal must have reached `next_seq ≥ m + 1`).
#[must_use]
pub fn core_consistency(c: paros_api::Consistency) -> (Consistency, Option<Seq>) {
    match c {
        paros_api::Consistency::Linearizable { min_seq } => {
            (Consistency::Linearizable, min_seq.map(|m| Seq(m.0.saturating_add(1))))
        }
        paros_api::Consistency::AtLeast { min_seq } => (Consistency::Reached(Seq(min_seq.0.saturating_add(1))), None),
    }
}
