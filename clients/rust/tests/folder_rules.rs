//! One test per rule of the Folder.

mod common;

use bytes::Bytes;
use common::{Journal, Tally, entry, folder};
use paros_client::run::RunRecord;
use paros_client::{DropReason, FoldError, FoldEvent, Folder, FolderConfig, Seq};

/// A folder that folded the whole journal, page by page.
fn fold_all(journal: &Journal) -> (Folder<Tally>, Vec<FoldEvent>) {
    let mut folder = folder();
    let events = folder.fold_page(Seq(0), &journal.records).expect("a page at the folder's position folds");
    (folder, events)
}

#[test]
fn overlapping_pages_fold_each_position_once() {
    let mut journal = Journal::new();
    journal.entries(6);
    let mut folder = folder();
    folder.fold_page(Seq(0), journal.slice(Seq(0), Seq(4))).expect("the first page folds");
    let events = folder.fold_page(Seq(2), journal.slice(Seq(2), Seq(6))).expect("an overlapping page folds");
    assert_eq!(
        events,
        vec![
            FoldEvent::Ignored { at: Seq(2) },
            FoldEvent::Ignored { at: Seq(3) },
            FoldEvent::Applied { at: Seq(4) },
            FoldEvent::Applied { at: Seq(5) },
        ],
        "positions already folded are ignored and only the new ones are applied"
    );
    assert_eq!(folder.state(), &journal.owner, "an overlap leaves the fold equal to the owner's");
}

#[test]
fn a_page_past_the_folders_position_is_refused_without_a_gap() {
    let mut journal = Journal::new();
    journal.entries(4);
    let mut folder = folder();
    let refused = folder.fold_page(Seq(2), journal.slice(Seq(2), Seq(4)));
    assert_eq!(
        refused,
        Err(FoldError::NotContiguous { expected: Seq(0), from: Seq(2) }),
        "a page that would skip positions unannounced is refused"
    );
    assert_eq!(folder.next(), Seq(0), "a refused page moves nothing");
}

#[test]
fn a_gap_jumps_to_the_floor_and_the_run_there_restores_the_state() {
    let mut journal = Journal::new();
    journal.entries(5);
    let floor = journal.checkpoint(5);
    journal.entries(3);
    // The owner truncated to the run's Begin; a folder at 0 learns of the gap.
    let mut folder = folder();
    let jumped = folder.gap(Seq(0), floor).expect("a gap from the folder's position is taken");
    assert_eq!(jumped, vec![FoldEvent::Jumped { from: Seq(0), to: floor }], "the gap is reported");
    assert!(!folder.is_whole(), "after a gap the folder no longer covers the prefix");
    let tail = journal.tail();
    let events = folder.fold_page(floor, journal.slice(floor, tail)).expect("the page at the floor folds");
    assert!(events.contains(&FoldEvent::Restored { at: floor }), "the run at the floor restores the state");
    assert!(folder.is_whole(), "a restored folder covers the prefix again");
    assert_eq!(folder.state(), &journal.owner, "restore then fold reaches the owner's state");
}

#[test]
fn application_records_after_a_gap_are_skipped_until_a_run_restores() {
    let mut journal = Journal::new();
    journal.entries(3);
    let mut folder = folder();
    folder.gap(Seq(0), Seq(2)).expect("a gap from the folder's position is taken");
    let events = folder.fold(Seq(2), &journal.records[2]).expect("the record at the floor folds");
    assert_eq!(events, vec![FoldEvent::Skipped { at: Seq(2) }], "a folder that is not whole applies nothing");
    assert_eq!(folder.state(), &Tally::default(), "a skipped record leaves the state as it was");
}

#[test]
fn an_application_record_inside_a_run_drops_the_run() {
    let mut journal = Journal::new();
    journal.entries(4);
    let begin = journal.tail();
    let mut run = journal.run_of(&journal.owner.clone(), 4);
    let end = run.pop().expect("a run ends with End");
    journal.raw(run).entries(1).raw([end]);
    let mut folder = folder();
    folder.gap(Seq(0), begin).expect("a gap from the folder's position is taken");
    let tail = journal.tail();
    let events = folder.fold_page(begin, journal.slice(begin, tail)).expect("the page folds");
    let inside = Seq(tail.0 - 2);
    assert!(
        events.contains(&FoldEvent::RunDropped { begin, why: DropReason::ApplicationRecord { at: inside } }),
        "an application record between Begin and End drops the run"
    );
    assert!(!events.contains(&FoldEvent::Restored { at: begin }), "a dropped run restores nothing");
    assert!(!folder.is_whole(), "a folder with no valid run stays not whole");
}

/// Writes two entries and a run (state in chunks of `chunk`) whose End `corrupt` rewrites, then
/// folds it from a gap at the run's start: the events, and whether the folder became whole.
fn fold_a_run_with_a_bad_end(
    chunk: usize,
    corrupt: impl FnOnce(u64, u32) -> RunRecord,
) -> (Seq, Vec<FoldEvent>, bool, u64, u32) {
    let mut journal = Journal::new();
    journal.entries(2);
    let begin = journal.tail();
    let mut run = journal.run_of(&journal.owner.clone(), chunk);
    let Ok(RunRecord::End { chunks, checksum }) = RunRecord::decode(run.last().expect("End")) else {
        panic!("a planned run ends with a decodable End");
    };
    *run.last_mut().expect("End") = corrupt(chunks, checksum).encode();
    journal.raw(run);
    let mut folder = folder();
    folder.gap(Seq(0), begin).expect("a gap from the folder's position is taken");
    let tail = journal.tail();
    let events = folder.fold_page(begin, journal.slice(begin, tail)).expect("the page folds");
    (begin, events, folder.is_whole(), chunks, checksum)
}

#[test]
fn a_run_with_a_bad_checksum_is_unreadable() {
    let (begin, events, whole, _, checksum) =
        fold_a_run_with_a_bad_end(64, |chunks, checksum| RunRecord::End { chunks, checksum: checksum ^ 1 });
    assert!(
        events.contains(&FoldEvent::RunDropped {
            begin,
            why: DropReason::Checksum { declared: checksum ^ 1, found: checksum }
        }),
        "an End whose checksum is not the CRC-32C of the chunks drops the run"
    );
    assert!(!whole, "an unreadable run is never restored");
}

#[test]
fn a_run_with_a_wrong_chunk_count_is_unreadable() {
    let (begin, events, whole, chunks, _) =
        fold_a_run_with_a_bad_end(5, |_, checksum| RunRecord::End { chunks: 2, checksum });
    assert_eq!(chunks, 3, "12 state bytes in chunks of 5 make 3 chunks");
    assert!(
        events.contains(&FoldEvent::RunDropped { begin, why: DropReason::ChunkCount { declared: 2, found: 3 } }),
        "an End naming another chunk count drops the run"
    );
    assert!(!whole, "an unreadable run is never restored");
}

#[test]
fn a_run_without_end_is_never_restored() {
    let mut journal = Journal::new();
    journal.entries(3);
    let begin = journal.tail();
    let mut run = journal.run_of(&journal.owner.clone(), 4);
    run.pop();
    journal.raw(run);
    let mut folder = folder();
    folder.gap(Seq(0), begin).expect("a gap from the folder's position is taken");
    let tail = journal.tail();
    let events = folder.fold_page(begin, journal.slice(begin, tail)).expect("the page folds");
    assert!(!events.iter().any(|e| matches!(e, FoldEvent::Restored { .. })), "a run without End restores nothing");
    assert_eq!(folder.open_run(), Some(begin), "the run stays open, waiting for an End");
    // The owner crashed inside the run; a new owner's Begin supersedes it and commits.
    journal.checkpoint(4);
    let next = folder.next();
    let events = folder.fold_page(next, journal.slice(next, journal.tail())).expect("the page folds");
    assert_eq!(
        events.first(),
        Some(&FoldEvent::RunDropped { begin, why: DropReason::NewBegin { at: next } }),
        "a new Begin drops the run left without End"
    );
    assert!(events.contains(&FoldEvent::Restored { at: next }), "the later complete run restores");
    assert_eq!(folder.state(), &journal.owner, "the restored state is the owner's");
}

#[test]
fn a_folder_that_holds_the_prefix_verifies_the_run_instead_of_restoring() {
    let mut journal = Journal::new();
    journal.entries(4);
    let begin = journal.checkpoint(3);
    journal.entries(2);
    let (folder, events) = fold_all(&journal);
    assert!(events.contains(&FoldEvent::Verified { at: begin }), "a whole folder verifies a matching run");
    assert!(!events.contains(&FoldEvent::Restored { at: begin }), "a whole folder does not restore");
    assert_eq!(folder.state(), &journal.owner, "verification leaves the fold equal to the owner's");
}

#[test]
fn a_whole_folder_reports_a_diverging_run_and_keeps_its_own_state() {
    let mut journal = Journal::new();
    journal.entries(4);
    let begin = journal.tail();
    let other = Tally { count: 99, digest: 7 };
    let run = journal.run_of(&other, 64);
    journal.raw(run).entries(1);
    let (folder, events) = fold_all(&journal);
    assert!(events.contains(&FoldEvent::Diverged { at: begin }), "a run unlike the folder's state is reported");
    assert_eq!(folder.state(), &journal.owner, "the folder keeps its own state over a diverging run");
}

#[test]
fn a_misplaced_begin_opens_no_run() {
    let mut journal = Journal::new();
    journal.entries(2);
    let at = journal.tail();
    let mut run = journal.run_of(&journal.owner.clone(), 64);
    run[0] = RunRecord::Begin { covers_up_to: Seq(at.0 - 1) }.encode();
    journal.raw(run);
    let mut folder = folder();
    folder.gap(Seq(0), at).expect("a gap from the folder's position is taken");
    let tail = journal.tail();
    let events = folder.fold_page(at, journal.slice(at, tail)).expect("the page folds");
    assert_eq!(
        events.first(),
        Some(&FoldEvent::MisplacedBegin { at, covers_up_to: Seq(at.0 - 1) }),
        "a Begin not at its own position is refused"
    );
    assert!(!folder.is_whole(), "a run without a valid Begin is never restored");
}

#[test]
fn a_run_longer_than_the_bound_is_dropped() {
    let mut journal = Journal::new();
    journal.entries(2);
    let begin = journal.checkpoint(4);
    let mut folder = Folder::new(Tally::default(), Seq(0), FolderConfig { run_bytes_max: 8 });
    folder.gap(Seq(0), begin).expect("a gap from the folder's position is taken");
    let tail = journal.tail();
    let events = folder.fold_page(begin, journal.slice(begin, tail)).expect("the page folds");
    assert!(
        events.contains(&FoldEvent::RunDropped { begin, why: DropReason::TooLarge { run_bytes_max: 8 } }),
        "a run of 12 state bytes is dropped under a bound of 8"
    );
    assert!(!folder.is_whole(), "a dropped run is never restored");
}

#[test]
fn a_state_that_refuses_the_runs_bytes_is_not_restored() {
    let mut journal = Journal::new();
    journal.entries(1);
    let begin = journal.tail();
    // A well-formed run of 3 state bytes, which are not a Tally.
    let bytes = Bytes::from_static(b"abc");
    let checksum = crc32c::crc32c(&bytes);
    journal.raw([
        RunRecord::Begin { covers_up_to: begin }.encode(),
        RunRecord::Chunk(bytes).encode(),
        RunRecord::End { chunks: 1, checksum }.encode(),
    ]);
    let mut folder = folder();
    folder.gap(Seq(0), begin).expect("a gap from the folder's position is taken");
    let events = folder.fold_page(begin, journal.slice(begin, journal.tail())).expect("the page folds");
    assert!(
        events.iter().any(|e| matches!(e, FoldEvent::RunDropped { why: DropReason::RestoreFailed { .. }, .. })),
        "bytes the state refuses drop the run"
    );
    assert!(!folder.is_whole(), "a refused run leaves the folder not whole");
}

#[test]
fn an_undecodable_run_record_drops_the_open_run() {
    let mut journal = Journal::new();
    journal.entries(1);
    let begin = journal.tail();
    let mut run = journal.run_of(&journal.owner.clone(), 4);
    let mut bad = run[1].to_vec();
    bad.push(0);
    run[1] = Bytes::from(bad);
    journal.raw(run);
    let mut folder = folder();
    folder.gap(Seq(0), begin).expect("a gap from the folder's position is taken");
    let events = folder.fold_page(begin, journal.slice(begin, journal.tail())).expect("the page folds");
    let at = Seq(begin.0 + 1);
    assert!(
        events.contains(&FoldEvent::RunDropped { begin, why: DropReason::Unreadable { at } }),
        "a run record that does not decode drops the run it sits in"
    );
    assert!(!folder.is_whole(), "a run with an unreadable record is never restored");
}

#[test]
fn an_application_record_with_the_magic_is_refused_before_it_is_sent() {
    let mut record = paros_client::MAGIC.to_vec();
    record.extend_from_slice(b"looks like a run");
    assert_eq!(
        paros_client::check_application_record(&record),
        Err(paros_client::RecordError::ReservedPrefix),
        "a record starting with the magic is refused"
    );
    assert_eq!(paros_client::check_application_record(&entry(1)), Ok(()), "an ordinary record is accepted");
    assert_eq!(
        paros_client::check_application_record(&paros_client::MAGIC[..7]),
        Ok(()),
        "a record shorter than the magic cannot carry it"
    );
}

#[test]
fn a_gap_drops_the_open_run() {
    let mut journal = Journal::new();
    journal.entries(2);
    let begin = journal.tail();
    let run = journal.run_of(&journal.owner.clone(), 64);
    let end = run[2].clone();
    // Begin and Chunk at 2 and 3, positions 4 and 5 truncated, then an End that would match.
    journal.raw(run).entries(1).raw([end]);
    let mut folder = folder();
    folder.fold_page(Seq(0), journal.slice(Seq(0), Seq(4))).expect("the first page folds");
    assert_eq!(folder.open_run(), Some(begin), "Begin opened a run");
    let events = folder.gap(Seq(4), Seq(6)).expect("a gap from the folder's position is taken");
    assert_eq!(
        events.first(),
        Some(&FoldEvent::RunDropped { begin, why: DropReason::Gap { resumed_at: Seq(6) } }),
        "a gap drops the run open across it"
    );
    let events = folder.fold(Seq(6), &journal.records[6]).expect("the record after the gap folds");
    assert_eq!(events, vec![FoldEvent::Stray { at: Seq(6) }], "an End after a gap closes no run");
    assert!(!folder.is_whole(), "a run broken by a gap is never restored");
}
