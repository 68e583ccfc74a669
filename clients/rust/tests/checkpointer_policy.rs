//! The Checkpointer's policy and the order of its effects.

mod common;

use common::{Journal, Tally, folder};
use paros_client::{
    Checkpointable, Checkpointer, CheckpointerConfig, CheckpointerError, ConfigError, FoldEvent, Seq, Truncate,
};

fn checkpointer(factor: u64, interval_records: u64, chunk_bytes: usize) -> Checkpointer {
    Checkpointer::new(CheckpointerConfig { factor, interval_records, chunk_bytes })
        .expect("a configuration with non-zero bounds is valid")
}

#[test]
fn a_checkpoint_is_due_once_k_times_the_state_size_was_written() {
    let mut c = checkpointer(4, u64::MAX, 8);
    let state_len = 12;
    c.appended(1, 47).expect("an idle checkpointer counts appends");
    assert!(!c.due(state_len), "47 bytes since the last checkpoint are below 4 × 12");
    c.appended(1, 1).expect("an idle checkpointer counts appends");
    assert!(c.due(state_len), "48 bytes since the last checkpoint reach 4 × 12");
}

#[test]
fn the_factor_is_configuration() {
    let mut c = checkpointer(2, u64::MAX, 8);
    c.appended(1, 24).expect("an idle checkpointer counts appends");
    assert!(c.due(12), "with k = 2, 24 bytes reach 2 × 12");
    let mut c = checkpointer(4, u64::MAX, 8);
    c.appended(1, 24).expect("an idle checkpointer counts appends");
    assert!(!c.due(12), "with k = 4, 24 bytes are below 4 × 12");
}

#[test]
fn a_checkpoint_is_due_after_the_record_interval_however_small_the_records() {
    let mut c = checkpointer(4, 3, 8);
    c.appended(2, 2).expect("an idle checkpointer counts appends");
    assert!(!c.due(1 << 20), "two records are below an interval of three");
    c.appended(1, 1).expect("an idle checkpointer counts appends");
    assert!(c.due(1 << 20), "three records reach an interval of three");
}

#[test]
fn nothing_appended_means_no_checkpoint_is_due() {
    let c = checkpointer(4, 1, 8);
    assert!(!c.due(0), "a journal with nothing since its last checkpoint needs none");
}

#[test]
fn truncate_comes_only_once_end_is_acknowledged() {
    let mut journal = Journal::new();
    journal.entries(3);
    let mut c = checkpointer(4, 1, 5);
    c.appended(3, 21).expect("an idle checkpointer counts appends");
    let tail = journal.tail();
    let run = c.begin(&journal.owner, tail).expect("an idle checkpointer plans a run");
    assert_eq!(run.begin, tail, "the run begins at the journal's tail");
    assert_eq!(run.records.len(), 5, "Begin, three chunks of at most 5 of the 12 state bytes, End");
    let before_end = run.records.len() as u64 - 1;
    assert_eq!(c.acknowledged(tail, before_end), Ok(None), "no truncation before End is acknowledged");
    assert!(!c.due(0), "no checkpoint is due while one is in flight");
    let end = Seq(tail.0 + before_end);
    assert_eq!(
        c.acknowledged(end, 1),
        Ok(Some(Truncate { up_to: tail })),
        "End's acknowledgement asks to truncate to Begin's position"
    );
    assert_eq!(c.since_checkpoint(), (0, 0), "the committed checkpoint restarts the counters");
    assert_eq!(c.in_flight(), Some(tail), "the run awaits its truncation");
    c.truncate_settled();
    assert_eq!(c.in_flight(), None, "a settled truncation frees the checkpointer");
}

#[test]
fn application_records_inside_a_run_are_refused() {
    let mut c = checkpointer(4, 1, 8);
    c.begin(&Tally::default(), Seq(5)).expect("an idle checkpointer plans a run");
    assert_eq!(
        c.appended(1, 10),
        Err(CheckpointerError::RunInFlight { begin: Seq(5) }),
        "no application record may be appended inside a run"
    );
    assert!(
        matches!(c.begin(&Tally::default(), Seq(9)), Err(CheckpointerError::Busy { begin: Seq(5) })),
        "a second run may not begin while one is in flight"
    );
}

#[test]
fn an_acknowledgement_outside_the_run_is_refused() {
    let mut c = checkpointer(4, 1, 64);
    let run = c.begin(&Tally::default(), Seq(10)).expect("an idle checkpointer plans a run");
    assert_eq!(run.records.len(), 3, "12 state bytes fit one chunk");
    assert!(c.acknowledged(Seq(9), 1).is_err(), "a position below Begin is not part of the run");
    assert!(c.acknowledged(Seq(11), 1).is_err(), "an acknowledgement after a hole is refused");
    assert!(c.acknowledged(Seq(10), 4).is_err(), "a position past End is not part of the run");
    assert_eq!(c.acknowledged(Seq(10), 1), Ok(None), "Begin's acknowledgement is taken");
    assert_eq!(c.acknowledged(Seq(10), 1), Ok(None), "a duplicate acknowledgement is harmless");
    assert_eq!(c.acknowledged(Seq(11), 2), Ok(Some(Truncate { up_to: Seq(10) })), "the rest commits the run");
}

#[test]
fn an_abandoned_run_keeps_the_counters_and_is_due_again() {
    let mut c = checkpointer(1, u64::MAX, 8);
    c.appended(2, 100).expect("an idle checkpointer counts appends");
    c.begin(&Tally::default(), Seq(2)).expect("an idle checkpointer plans a run");
    c.abandon();
    assert_eq!(c.in_flight(), None, "an abandoned run is no longer in flight");
    assert!(c.due(12), "the checkpoint abandoned is still due");
}

#[test]
fn a_planned_run_restores_the_state_it_was_planned_from() {
    let mut journal = Journal::new();
    journal.entries(7);
    let begin = journal.tail();
    let mut c = checkpointer(4, 1, 1);
    let run = c.begin(&journal.owner, begin).expect("an idle checkpointer plans a run");
    journal.raw(run.records);
    let mut f = folder();
    f.gap(Seq(0), begin).expect("a gap from the folder's position is taken");
    let events = f.fold_page(begin, journal.slice(begin, journal.tail())).expect("the page folds");
    assert!(events.contains(&FoldEvent::Restored { at: begin }), "a run of one-byte chunks restores");
    assert_eq!(f.state().checkpoint(), journal.owner.checkpoint(), "the restored state encodes as the owner's");
}

#[test]
fn zero_bounds_are_refused() {
    let base = CheckpointerConfig::default();
    assert_eq!(
        Checkpointer::new(CheckpointerConfig { factor: 0, ..base }).err(),
        Some(ConfigError::FactorZero),
        "a factor of zero is refused"
    );
    assert_eq!(
        Checkpointer::new(CheckpointerConfig { interval_records: 0, ..base }).err(),
        Some(ConfigError::IntervalZero),
        "an interval of zero records is refused"
    );
    assert!(
        matches!(Checkpointer::new(CheckpointerConfig { chunk_bytes: 0, ..base }), Err(ConfigError::ChunkBytes { .. })),
        "a chunk of zero bytes is refused"
    );
}
