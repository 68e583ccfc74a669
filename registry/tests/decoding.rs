//! Registry records are untrusted input: whatever bytes a record holds, the fold gives a
//! typed verdict or counts it undecodable, and never panics.

mod common;

use bytes::Bytes;
use common::*;
use paros_client::{Checkpointable, Seq};
use paros_registry::{COMMAND_VERSION, Command, DecodeError, Record, Refusal, RequestId, Verdict};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic_the_fold(
        body in prop::collection::vec(any::<u8>(), 0..96),
        versioned in any::<bool>(),
    ) {
        let mut b = Book::formed();
        let mut bytes = body;
        if versioned {
            bytes.insert(0, COMMAND_VERSION);
        }
        let before = b.dir.undecodable();
        b.raw(&bytes);
        match Record::decode(&bytes) {
            Ok(record) => prop_assert!(b.dir.answer(record.id).is_some(), "a decoded record has a verdict"),
            Err(e) => {
                prop_assert_eq!(b.dir.undecodable(), before + 1, "an undecodable record is counted");
                if let Some(id) = e.request_id() {
                    let refused_malformed =
                        matches!(b.dir.answer(id), Some(Verdict::Refused(Refusal::Malformed { .. })));
                    let decided_before = id == RequestId(1_000_000) || id == RequestId(1_000_001);
                    prop_assert!(refused_malformed || decided_before, "refused under its id: {:?}", b.dir.answer(id));
                }
            }
        }
    }

    #[test]
    fn a_flipped_byte_in_a_valid_record_is_judged_or_refused(at in any::<prop::sample::Index>(), to in any::<u8>()) {
        let mut bytes = encode(5, create(100, 1, "orders", &[1, 2, 3])).to_vec();
        let i = at.index(bytes.len());
        bytes[i] = to;
        let mut b = Book::formed();
        b.raw(&bytes);
        prop_assert!(b.dir.index_is_consistent(), "the fold stays consistent");
    }
}

#[test]
fn an_unknown_version_is_counted_without_a_verdict() {
    let mut bytes = encode(5, sign_up(1, "a")).to_vec();
    bytes[0] = COMMAND_VERSION + 1;
    assert_eq!(Record::decode(&bytes), Err(DecodeError::UnknownVersion(COMMAND_VERSION + 1)), "typed");
    let mut dir = paros_registry::Directory::new();
    dir.apply(Seq(0), &bytes);
    assert_eq!(dir.undecodable(), 1, "counted");
    assert_eq!(dir.answer(RequestId(5)), None, "no id could be trusted");
}

#[test]
fn every_command_round_trips() {
    let commands: Vec<Command> = vec![
        init_cell(vec![member(1, "a")]),
        register(2, paros_registry::Role::Gateway, "b"),
        sign_up(3, "c"),
        create(3, 4, "d", &[1]),
        delete(3, "d"),
        admit(5, paros_registry::Role::Node, "e", u64::MAX),
        rejoin(5, 6, "f", 7),
        move_seat(3, 4, 1, 6),
        move_done(3, 4, 1),
    ];
    for c in commands {
        let r = Record { id: RequestId(u128::MAX), command: c };
        assert_eq!(Record::decode(&r.encode()), Ok(r.clone()), "round trip of {r:?}");
        let _: Bytes = r.encode();
    }
}

/// The variants issue 34 appended keep every older variant's bytes: an old record decodes as
/// before (`an_old_create_journal_record_still_decodes` in `command.rs`), and the new ones
/// are numbered after `CreateJournalOnTier` (13). Their bytes are pinned here; a merge that
/// appends other variants before them renumbers them, and must do so before any registry
/// log holds one.
#[test]
fn the_issue_34_commands_are_appended_after_the_others() {
    let cases: [(Command, u8); 4] = [
        (admit(5, paros_registry::Role::Node, "e", 9), 14),
        (rejoin(5, 6, "f", 7), 15),
        (move_seat(3, 4, 1, 6), 16),
        (move_done(3, 4, 1), 17),
    ];
    for (command, index) in cases {
        let bytes = encode(5, command.clone());
        assert_eq!(bytes[..3], [COMMAND_VERSION, 5, index], "{command:?} is variant {index}");
    }
    // MoveSeat, byte for byte: tenant 3, journal 4, from 1, to 6.
    let bytes = [COMMAND_VERSION, 5, 16, 3, 4, 1, 6];
    let want = Record { id: RequestId(5), command: move_seat(3, 4, 1, 6) };
    assert_eq!(Record::decode(&bytes), Ok(want.clone()), "decodes");
    assert_eq!(want.encode()[..], bytes[..], "and is what this build writes");
    // A MoveDone cut short is malformed under its id; one with a byte more is trailing.
    let done = encode(5, move_done(3, 4, 1));
    assert!(matches!(Record::decode(&done[..done.len() - 1]), Err(DecodeError::Malformed { id: Some(_), .. })));
    let mut longer = done.to_vec();
    longer.push(0);
    assert_eq!(Record::decode(&longer), Err(DecodeError::Trailing { extra: 1, id: RequestId(5) }));
}
