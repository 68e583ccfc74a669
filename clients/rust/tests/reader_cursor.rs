//! The reader cursor: gaps, monotonicity, the Unserved bound, catching up.

use bytes::Bytes;
use paros_client::{JournalView, ReadAnswer, ReaderConfig, ReaderCursor, ReaderError, ReaderOutcome, Seq};

fn view(first_seq: u64, next_seq: u64) -> JournalView {
    JournalView { leader: None, first_seq: Seq(first_seq), next_seq: Seq(next_seq) }
}

fn records(n: usize) -> Vec<Bytes> {
    (0..n).map(|i| Bytes::from(format!("r{i}"))).collect()
}

fn page(from: u64, n: usize, v: JournalView) -> ReadAnswer {
    ReadAnswer::Page { from: Seq(from), records: records(n), view: v }
}

#[test]
fn a_truncation_past_the_cursor_is_reported_as_a_gap() {
    let mut reader = ReaderCursor::new(Seq(3), ReaderConfig::default()).expect("non-zero page bounds are valid");
    let outcome =
        reader.absorb(ReadAnswer::Truncated { view: view(10, 12) }).expect("a truncation past the cursor is taken");
    assert_eq!(
        outcome,
        ReaderOutcome::Gap { from: Seq(3), resumed_at: Seq(10), view: view(10, 12) },
        "the truncated range is named, not skipped silently"
    );
    assert_eq!(reader.next_request().from, Seq(10), "the next read starts at the first retained position");
}

#[test]
fn an_empty_page_whose_view_starts_past_the_cursor_is_a_gap() {
    let mut reader = ReaderCursor::new(Seq(3), ReaderConfig::default()).expect("non-zero page bounds are valid");
    let outcome = reader.absorb(page(3, 0, view(8, 8))).expect("an empty page at the cursor is taken");
    assert_eq!(
        outcome,
        ReaderOutcome::Gap { from: Seq(3), resumed_at: Seq(8), view: view(8, 8) },
        "an empty page from a journal truncated past the cursor reports the gap"
    );
}

#[test]
fn a_page_moves_the_cursor_past_its_records() {
    let mut reader = ReaderCursor::new(Seq(0), ReaderConfig::default()).expect("non-zero page bounds are valid");
    let outcome = reader.absorb(page(0, 4, view(0, 9))).expect("a page at the cursor is taken");
    assert!(
        matches!(outcome, ReaderOutcome::Records { from: Seq(0), ref records, .. } if records.len() == 4),
        "the page's records are yielded"
    );
    assert_eq!(reader.cursor(), Seq(4), "the cursor moves past the page's records");
}

#[test]
fn the_cursor_never_moves_backwards() {
    let mut reader = ReaderCursor::new(Seq(5), ReaderConfig::default()).expect("non-zero page bounds are valid");
    assert_eq!(
        reader.absorb(page(2, 3, view(0, 9))),
        Err(ReaderError::PageNotAtCursor { cursor: Seq(5), from: Seq(2) }),
        "a page from below the cursor is refused"
    );
    assert_eq!(
        reader.absorb(ReadAnswer::Truncated { view: view(4, 9) }),
        Err(ReaderError::NotTruncated { cursor: Seq(5), first_seq: Seq(4) }),
        "a truncation that would move the cursor back is refused"
    );
    assert_eq!(reader.cursor(), Seq(5), "refused answers leave the cursor where it was");
}

#[test]
fn a_page_that_skips_ahead_of_the_cursor_is_refused() {
    let mut reader = ReaderCursor::new(Seq(5), ReaderConfig::default()).expect("non-zero page bounds are valid");
    assert_eq!(
        reader.absorb(page(7, 1, view(0, 9))),
        Err(ReaderError::PageNotAtCursor { cursor: Seq(5), from: Seq(7) }),
        "a page past the cursor would skip positions and is refused"
    );
    assert_eq!(reader.cursor(), Seq(5), "a refused page moves nothing");
}

#[test]
fn pages_that_contradict_their_view_or_request_are_refused() {
    let config = ReaderConfig { page_records_max: 3, page_bytes_max: 4, ..ReaderConfig::default() };
    let mut reader = ReaderCursor::new(Seq(0), config).expect("non-zero page bounds are valid");
    assert!(
        matches!(reader.absorb(page(0, 4, view(0, 9))), Err(ReaderError::PageTooLong { .. })),
        "more records than the limit are refused"
    );
    assert!(
        matches!(reader.absorb(page(0, 3, view(0, 9))), Err(ReaderError::PageTooLarge { .. })),
        "three 2-byte records exceed 4 bytes"
    );
    assert!(
        matches!(reader.absorb(page(0, 2, view(0, 1))), Err(ReaderError::PageBeyondTail { .. })),
        "records past the view's tail are refused"
    );
    assert!(
        matches!(reader.absorb(page(0, 0, view(3, 1))), Err(ReaderError::InconsistentView { .. })),
        "a view with first_seq past next_seq is refused"
    );
    assert_eq!(reader.tail(), None, "refused answers teach nothing about the tail");
}

#[test]
fn unserved_is_retried_up_to_the_bound_then_unavailable() {
    let config = ReaderConfig { unserved_retries_max: 2, ..ReaderConfig::default() };
    let mut reader = ReaderCursor::new(Seq(0), config).expect("non-zero page bounds are valid");
    let unserved = |applied_to: Option<u64>| ReadAnswer::Unserved { applied_to: applied_to.map(Seq) };
    assert_eq!(
        reader.absorb(unserved(Some(3))),
        Ok(ReaderOutcome::Retry { attempt: 1 }),
        "the first unserved read is retried"
    );
    assert_eq!(reader.next_request().attempt, 1, "the retry says which attempt it is");
    assert_eq!(
        reader.absorb(unserved(None)),
        Ok(ReaderOutcome::Retry { attempt: 2 }),
        "the second unserved read is retried"
    );
    assert_eq!(
        reader.absorb(unserved(Some(2))),
        Ok(ReaderOutcome::Unavailable { attempts: 3, applied_to: Some(Seq(3)) }),
        "past the bound of two retries the journal is reported unavailable, with the furthest applied position named"
    );
    assert_eq!(reader.next_request().attempt, 0, "after reporting unavailable the count starts over");
    reader.absorb(unserved(None)).expect("an unserved answer is taken");
    reader.absorb(unserved(None)).expect("an unserved answer is taken");
    assert_eq!(
        reader.absorb(unserved(None)),
        Ok(ReaderOutcome::Unavailable { attempts: 3, applied_to: None }),
        "a streak that named nothing names nothing: the last streak's position is not carried over"
    );
}

#[test]
fn a_served_answer_resets_the_unserved_count() {
    let config = ReaderConfig { unserved_retries_max: 1, ..ReaderConfig::default() };
    let mut reader = ReaderCursor::new(Seq(0), config).expect("non-zero page bounds are valid");
    reader.absorb(ReadAnswer::Unserved { applied_to: None }).expect("an unserved answer is taken");
    reader.absorb(page(0, 1, view(0, 5))).expect("a page at the cursor is taken");
    assert_eq!(
        reader.absorb(ReadAnswer::Unserved { applied_to: None }),
        Ok(ReaderOutcome::Retry { attempt: 1 }),
        "a served page restarts the retry count"
    );
}

#[test]
fn caught_up_means_the_cursor_reached_the_last_known_tail() {
    let mut reader = ReaderCursor::new(Seq(0), ReaderConfig::default()).expect("non-zero page bounds are valid");
    assert!(!reader.caught_up(), "a reader that has heard no view is not caught up");
    reader.absorb(page(0, 2, view(0, 4))).expect("a page at the cursor is taken");
    assert!(!reader.caught_up(), "a cursor at 2 is behind a tail of 4");
    assert_eq!(reader.tail(), Some(Seq(4)), "the tail is the view's next_seq");
    reader.absorb(page(2, 2, view(0, 4))).expect("a page at the cursor is taken");
    assert!(reader.caught_up(), "a cursor at 4 has reached a tail of 4");
    reader.absorb(page(4, 0, view(0, 3))).expect("an empty page from a lagging server is taken");
    assert_eq!(reader.tail(), Some(Seq(4)), "a lagging server's view does not lower the known tail");
}

#[test]
fn unknown_journal_is_reported() {
    let mut reader = ReaderCursor::new(Seq(0), ReaderConfig::default()).expect("non-zero page bounds are valid");
    assert_eq!(
        reader.absorb(ReadAnswer::UnknownJournal),
        Ok(ReaderOutcome::UnknownJournal),
        "an unknown journal is its own outcome"
    );
}

/// A node outside a journal's voters answers `UnknownJournal`: the next named server is asked,
/// and only when each of them said so in a row is the journal unknown (a registry follower in a
/// cell of four nodes, three of them the registry's voters, stopped on the fourth's answer).
#[test]
fn unknown_journal_from_one_named_server_asks_the_next_until_every_one_said_so() {
    let mut reader = ReaderCursor::new(Seq(0), ReaderConfig::default()).expect("valid");
    assert_eq!(reader.absorb_from(ReadAnswer::UnknownJournal, 4), Ok(ReaderOutcome::Retry { attempt: 1 }));
    assert_eq!(reader.next_request().attempt, 1, "the next server in rotation");
    assert_eq!(reader.absorb_from(ReadAnswer::UnknownJournal, 4), Ok(ReaderOutcome::Retry { attempt: 2 }));
    let page = ReadAnswer::Page { from: Seq(0), records: vec![bytes::Bytes::from_static(b"a")], view: view(0, 1) };
    assert!(matches!(reader.absorb_from(page, 4), Ok(ReaderOutcome::Records { .. })));
    assert_eq!(reader.next_request().attempt, 0, "a served page ends the run");
    for attempt in 1..4 {
        assert_eq!(reader.absorb_from(ReadAnswer::UnknownJournal, 4), Ok(ReaderOutcome::Retry { attempt }));
    }
    assert_eq!(reader.absorb_from(ReadAnswer::UnknownJournal, 4), Ok(ReaderOutcome::UnknownJournal), "all four");
}

#[test]
fn a_truncation_answer_that_names_the_cursor_as_retained_is_refused() {
    let mut reader = ReaderCursor::new(Seq(5), ReaderConfig::default()).expect("non-zero page bounds are valid");
    assert_eq!(
        reader.absorb(ReadAnswer::Truncated { view: view(5, 9) }),
        Err(ReaderError::NotTruncated { cursor: Seq(5), first_seq: Seq(5) }),
        "a truncation whose view still retains the cursor's position contradicts itself"
    );
    assert_eq!(reader.tail(), None, "a refused answer teaches nothing about the tail");
}

#[test]
fn zero_page_bounds_are_refused() {
    let zero_records = ReaderConfig { page_records_max: 0, ..ReaderConfig::default() };
    let zero_bytes = ReaderConfig { page_bytes_max: 0, ..ReaderConfig::default() };
    assert_eq!(
        ReaderCursor::new(Seq(0), zero_records).err(),
        Some(paros_client::ReaderConfigError::PageRecordsZero),
        "a reader allowed no record per page is refused"
    );
    assert_eq!(
        ReaderCursor::new(Seq(0), zero_bytes).err(),
        Some(paros_client::ReaderConfigError::PageBytesZero),
        "a reader allowed no byte per page is refused"
    );
}

#[test]
fn an_empty_page_whose_view_ends_before_the_cursor_is_past_the_tail() {
    let mut reader = ReaderCursor::new(Seq(9), ReaderConfig::default()).expect("non-zero page bounds are valid");
    assert_eq!(
        reader.absorb(page(9, 0, view(2, 5))),
        Err(ReaderError::PastTail { cursor: Seq(9), next_seq: Seq(5), view: view(2, 5) }),
        "an empty page at a position never written is not the tail"
    );
    assert_eq!((reader.cursor(), reader.tail()), (Seq(9), None), "the cursor is unchanged");
    let outcome = reader.absorb(page(9, 0, view(2, 9))).expect("an empty page at the tail is taken");
    assert_eq!(
        outcome,
        ReaderOutcome::Records { from: Seq(9), records: vec![], view: view(2, 9) },
        "once the journal grows to the cursor, an empty page is the tail"
    );
    assert!(reader.caught_up());
    let outcome = reader.absorb(page(9, 2, view(2, 11))).expect("records at the cursor are taken");
    assert!(matches!(outcome, ReaderOutcome::Records { from: Seq(9), .. }));
    assert_eq!(reader.cursor(), Seq(11));
    let lagging = reader.absorb(page(11, 0, view(2, 10))).expect("a lagging server's empty page is the tail");
    assert_eq!(lagging, ReaderOutcome::Records { from: Seq(11), records: vec![], view: view(2, 10) });
    assert_eq!(reader.tail(), Some(Seq(11)), "below a tail seen at the cursor, the view is a lagging server's");
}

#[test]
fn an_outcome_as_items_names_every_position_and_every_gap() {
    use paros_client::ReadItem;
    let records = ReaderOutcome::Records { from: Seq(4), records: records(2), view: view(0, 9) };
    assert_eq!(
        records.into_items(),
        Ok(vec![
            ReadItem::Record { seq: Seq(4), data: Bytes::from_static(b"r0") },
            ReadItem::Record { seq: Seq(5), data: Bytes::from_static(b"r1") },
        ])
    );
    let gap = ReaderOutcome::Gap { from: Seq(3), resumed_at: Seq(7), view: view(7, 9) };
    let items = gap.into_items().expect("a gap is an item");
    assert_eq!(items, vec![ReadItem::Gap { from: Seq(3), to: Seq(7) }]);
    assert_eq!((items[0].start(), items[0].end()), (Seq(3), Seq(7)));
    assert_eq!(ReaderOutcome::Unavailable { attempts: 4, applied_to: Some(Seq(1)) }.into_items(), Ok(vec![]));
    assert_eq!(ReaderOutcome::Retry { attempt: 1 }.into_items(), Ok(vec![]));
    assert_eq!(ReaderOutcome::UnknownJournal.into_items(), Err(ReaderError::UnknownJournal));
}
