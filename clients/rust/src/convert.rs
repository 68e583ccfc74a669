//! The one place paros-api's contract types and paros-core's meet: the conversions between the
//! two that still differ (writer mode, read consistency), for the HTTP service, the gateway and
//! the CLI. Positions, leader uuids and views are paros-core's on both sides.

use paros_core::journal::WriterMode;
use paros_core::{Consistency, Seq};

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

/// paros-core's read consistency as the HTTP contract's: `Reached(s)` asks for `next_seq ≥ s`,
/// `at_least` with `min_seq = m` for `next_seq > m`, so `Reached(s)` travels as
/// `min_seq = s − 1`, and `Reached(0)` (which any server meets) as the default, linearizable.
#[must_use]
pub fn api_consistency(c: Consistency) -> paros_api::Consistency {
    match c {
        Consistency::Linearizable | Consistency::Reached(Seq(0)) => {
            paros_api::Consistency::Linearizable { min_seq: None }
        }
        Consistency::Reached(Seq(s)) => paros_api::Consistency::AtLeast { min_seq: Seq(s - 1) },
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
