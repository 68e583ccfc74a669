//! A reader cursor driving a folder over a journal that checkpoints and truncates reaches the
//! owner's state, whether it reads the whole history or jumps to the floor.

mod common;

use common::{Journal, folder};
use paros_client::{FoldEvent, JournalView, ReadAnswer, ReaderConfig, ReaderCursor, ReaderOutcome, Seq};
use proptest::prelude::*;

/// A server holding `journal` from `first_seq` on, answering pages of at most `limit` records.
fn answer(journal: &Journal, first_seq: Seq, from: Seq, limit: u32) -> ReadAnswer {
    let view = JournalView { leader: None, first_seq, next_seq: journal.tail() };
    if from < first_seq {
        return ReadAnswer::Truncated { view };
    }
    let to = Seq(journal.tail().0.min(from.0 + u64::from(limit)));
    ReadAnswer::Page { from, records: journal.slice(from, to).to_vec(), view }
}

/// Reads the journal to its tail with a cursor from 0 and folds what it reads.
fn read_and_fold(
    journal: &Journal,
    first_seq: Seq,
    page: u32,
) -> (paros_client::Folder<common::Tally>, Vec<FoldEvent>) {
    let config = ReaderConfig { page_records_max: page, ..ReaderConfig::default() };
    let mut reader = ReaderCursor::new(Seq(0), config).expect("non-zero page bounds are valid");
    let mut f = folder();
    let mut events = Vec::new();
    while !reader.caught_up() {
        let request = reader.next_request();
        let outcome = reader
            .absorb(answer(journal, first_seq, request.from, request.limit))
            .expect("an honest server's answer is taken");
        match outcome {
            ReaderOutcome::Records { from, records, .. } => {
                events.extend(f.fold_page(from, &records).expect("pages arrive in order"))
            }
            ReaderOutcome::Gap { from, resumed_at, .. } => {
                events.extend(f.gap(from, resumed_at).expect("gaps start at the folder's position"))
            }
            other => {
                panic!("an honest server that holds the journal answers every read, not {other:?}")
            }
        }
    }
    (f, events)
}

proptest! {
    #[test]
    fn every_reader_folds_to_the_owners_state(
        steps in proptest::collection::vec((0u64..6, any::<bool>()), 1..12),
        chunk_bytes in 1usize..16,
        page in 1u32..7,
    ) {
        let mut journal = Journal::new();
        let mut floor = Seq(0);
        for (entries, checkpoint) in steps {
            journal.entries(entries);
            if checkpoint {
                floor = journal.checkpoint(chunk_bytes);
            }
        }
        let (whole, events) = read_and_fold(&journal, Seq(0), page);
        prop_assert_eq!(whole.state(), &journal.owner, "a reader of the whole history reaches the owner's state");
        prop_assert!(
            !events.iter().any(|e| matches!(e, FoldEvent::Restored { .. } | FoldEvent::Diverged { .. })),
            "a reader of the whole history only verifies runs"
        );
        let (jumped, events) = read_and_fold(&journal, floor, page);
        prop_assert!(jumped.is_whole(), "a reader that jumped to the floor restores from the run there");
        prop_assert_eq!(jumped.state(), &journal.owner, "a reader that jumped reaches the owner's state");
        if floor > Seq(0) {
            prop_assert!(
                events.contains(&FoldEvent::Restored { at: floor }),
                "the jump restores from the run at the floor"
            );
        }
    }
}
