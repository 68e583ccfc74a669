//! Checkpoints: `restore(checkpoint(s)) == s`, the encoding is a pure function of the state,
//! and folding a whole sequence equals restoring a checkpoint mid-way and folding the rest.

mod common;

use bytes::Bytes;
use common::strategy::records;
use common::*;
use paros_client::{Checkpointable, Folder, FolderConfig, Seq};
use paros_registry::{Command, Directory, RestoreError};
use proptest::prelude::*;

fn fold_all(records: &[Bytes]) -> Directory {
    let mut dir = Directory::new();
    for (i, r) in (0u64..).zip(records) {
        dir.apply(Seq(i), r);
    }
    dir
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn restoring_a_checkpoint_gives_the_same_directory(records in records()) {
        let dir = fold_all(&records);
        prop_assert!(dir.index_is_consistent(), "the index matches the state");
        let bytes = dir.checkpoint();
        let back = Directory::restore(&bytes);
        prop_assert_eq!(back.as_ref(), Ok(&dir), "restore(checkpoint(s)) == s");
        prop_assert_eq!(back.map(|d| d.checkpoint()), Ok(bytes), "and it encodes the same bytes");
    }

    #[test]
    fn folding_equals_restoring_mid_way_then_folding_the_rest(
        records in records(),
        cut in any::<prop::sample::Index>(),
    ) {
        let whole = fold_all(&records);
        let cut = cut.index(records.len() + 1);
        let head = fold_all(&records[..cut]);
        let mut resumed = Directory::restore(&head.checkpoint()).expect("a checkpoint restores");
        for (i, r) in (cut as u64..).zip(&records[cut..]) {
            resumed.apply(Seq(i), r);
        }
        prop_assert_eq!(&resumed, &whole, "the same directory either way");
        prop_assert_eq!(resumed.checkpoint(), whole.checkpoint(), "and the same encoding");
    }

    #[test]
    fn a_folder_that_meets_a_checkpoint_run_restores_to_the_same_directory(
        records in records(),
        cut in any::<prop::sample::Index>(),
    ) {
        // The owner folds everything, writing a run of its state after `cut` records; a reader
        // that jumps over the prefix restores from that run and folds the rest.
        let cut = cut.index(records.len() + 1);
        let head = fold_all(&records[..cut]);
        let mut checkpointer = paros_client::Checkpointer::new(paros_client::CheckpointerConfig {
            chunk_bytes: 64,
            ..Default::default()
        }).expect("a valid config");
        let run = checkpointer.begin(&head, Seq(cut as u64)).expect("a run");
        let mut journal: Vec<Bytes> = records[..cut].to_vec();
        journal.extend(run.records.iter().cloned());
        journal.extend(records[cut..].iter().cloned());
        let mut owner = Folder::new(Directory::new(), Seq(0), FolderConfig::default());
        owner.fold_page(Seq(0), &journal).expect("contiguous");
        let mut reader = Folder::new(Directory::new(), Seq(0), FolderConfig::default());
        reader.gap(Seq(0), Seq(cut as u64)).expect("a gap from the start");
        reader.fold_page(Seq(cut as u64), &journal[cut..]).expect("contiguous");
        prop_assert!(reader.is_whole(), "the reader restored from the run");
        prop_assert_eq!(reader.state(), owner.state(), "both reach the same directory");
    }

    #[test]
    fn garbage_never_restores_into_a_directory_that_encodes_differently(
        bytes in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        if let Ok(dir) = Directory::restore(&bytes) {
            let canonical = dir.checkpoint() == bytes
                || dir.checkpoint_v4().as_ref() == Some(&bytes)
                || dir.checkpoint_v3().as_ref() == Some(&bytes)
                || dir.checkpoint_v2().as_ref() == Some(&bytes);
            prop_assert!(canonical, "whatever restores is canonical (in its format, 5, 4, 3 or 2)");
        }
    }

    /// A directory that format 2 can say (no incarnation, no replacement, no move) restores
    /// from its format 2 checkpoint to the same directory: a registry truncated behind a
    /// checkpoint written before issue 34 still folds.
    #[test]
    fn a_format_2_checkpoint_restores_to_the_same_directory(records in records()) {
        let dir = fold_all(&records);
        if let Some(old) = dir.checkpoint_v2() {
            prop_assert_eq!(old[0], 2, "format 2");
            prop_assert_eq!(Directory::restore(&old), Ok(dir.clone()), "restores to the same directory");
            let mut trailing = old.clone();
            trailing.push(0);
            prop_assert_eq!(Directory::restore(&trailing), Err(RestoreError::Trailing(1)), "trailing bytes refused");
        }
    }

    /// A directory whose registry journal's seats never moved restores from its format 4
    /// checkpoint (written before the registry journal was recorded among the journals) to
    /// the same directory: restore records the registry journal as formation did.
    #[test]
    fn a_format_4_checkpoint_restores_to_the_same_directory(records in records()) {
        let dir = fold_all(&records);
        if let Some(old) = dir.checkpoint_v4() {
            prop_assert_eq!(old[0], 4, "format 4");
            prop_assert_eq!(Directory::restore(&old), Ok(dir.clone()), "restores to the same directory");
        }
    }

    /// A directory whose journals never moved restores from its format 3 checkpoint (written
    /// before journals kept their founders) to the same directory, each journal's founders its
    /// voters.
    #[test]
    fn a_format_3_checkpoint_restores_to_the_same_directory(records in records()) {
        let dir = fold_all(&records);
        if let Some(old) = dir.checkpoint_v3() {
            prop_assert_eq!(old[0], 3, "format 3");
            prop_assert_eq!(Directory::restore(&old), Ok(dir.clone()), "restores to the same directory");
        }
    }

}

#[test]
fn equal_directories_encode_equal_bytes_whatever_order_their_maps_were_filled() {
    // A window of one verdict, so only the last record's verdict remains: the same in both.
    let init = Command::InitCell {
        cell: paros_registry::CellId(1),
        members: vec![member(1, "a")],
        registry: paros_core::ids::JournalId(2),
        limits: paros_registry::Limits { verdicts_max: 1, ..Default::default() },
    };
    let last = encode(9, sign_up(300, "zed"));
    let one = fold_all(&[
        encode(1, init.clone()),
        encode(2, sign_up(300, "zed")),
        encode(3, sign_up(200, "why")),
        last.clone(),
    ]);
    let two = fold_all(&[encode(1, init), encode(3, sign_up(200, "why")), encode(2, sign_up(300, "zed")), last]);
    assert_eq!(one, two, "the same directory, filled in another order");
    assert_eq!(one.checkpoint(), two.checkpoint(), "encodes to the same bytes");
}

#[test]
fn restore_refuses_bad_bytes_with_typed_errors() {
    let dir = Book::formed().dir;
    let good = dir.checkpoint();
    assert_eq!(Directory::restore(&[]), Err(RestoreError::Empty), "empty");
    let mut wrong_version = good.clone();
    wrong_version[0] = 9;
    assert_eq!(Directory::restore(&wrong_version), Err(RestoreError::UnknownVersion(9)), "version");
    let mut trailing = good.clone();
    trailing.push(0);
    assert_eq!(Directory::restore(&trailing), Err(RestoreError::Trailing(1)), "trailing");
    let cut = &good[..good.len() - 1];
    assert!(matches!(Directory::restore(cut), Err(RestoreError::Malformed(_))), "cut short");
}

#[test]
fn the_verdict_window_travels_in_the_checkpoint() {
    let mut b = Book::formed();
    let id = 4242;
    let v = b.run_as(id, sign_up(300, "zed"));
    let restored = Directory::restore(&b.dir.checkpoint()).expect("restores");
    assert_eq!(restored.answer(paros_registry::RequestId(id)), Some(v), "a restored fold answers the id");
}
