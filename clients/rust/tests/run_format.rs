//! The run records' binary format: round trips, and refusal of every malformed record.

use bytes::Bytes;
use paros_client::run::{FORMAT_VERSION, RunRecord};
use paros_client::{MAGIC, RunDecodeError, Seq};
use proptest::prelude::*;

fn any_run_record() -> impl Strategy<Value = RunRecord> {
    prop_oneof![
        any::<u64>().prop_map(|s| RunRecord::Begin { covers_up_to: Seq(s) }),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(|b| RunRecord::Chunk(Bytes::from(b))),
        (any::<u64>(), any::<u32>()).prop_map(|(chunks, checksum)| RunRecord::End { chunks, checksum }),
    ]
}

proptest! {
    #[test]
    fn every_run_record_decodes_to_itself(record in any_run_record()) {
        let encoded = record.encode();
        prop_assert_eq!(encoded.len(), record.encoded_len(), "the encoding has the length the format names");
        prop_assert_eq!(RunRecord::decode(&encoded), Ok(record), "a run record decodes to itself");
    }

    #[test]
    fn every_truncation_of_a_run_record_is_refused(record in any_run_record()) {
        let encoded = record.encode();
        for len in 0..encoded.len() {
            prop_assert!(RunRecord::decode(&encoded[..len]).is_err(), "a record cut to {} bytes is refused", len);
        }
    }

    #[test]
    fn a_run_record_with_trailing_bytes_is_refused(
        record in any_run_record(),
        extra in proptest::collection::vec(any::<u8>(), 1..8),
    ) {
        let mut encoded = record.encode().to_vec();
        encoded.extend_from_slice(&extra);
        prop_assert_eq!(
            RunRecord::decode(&encoded),
            Err(RunDecodeError::Trailing { extra: extra.len() }),
            "bytes after the last field are refused"
        );
    }

    #[test]
    fn random_bytes_after_the_magic_decode_or_are_refused_without_panic(
        version in prop_oneof![Just(FORMAT_VERSION), any::<u8>()],
        kind in 0u8..5,
        body in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        let mut record = MAGIC.to_vec();
        record.extend_from_slice(&[version, kind]);
        record.extend_from_slice(&body);
        if let Ok(decoded) = RunRecord::decode(&record) {
            let reencoded = decoded.encode();
            prop_assert_eq!(reencoded.as_ref(), &record[..], "whatever decodes is exactly a valid encoding");
        }
    }

    #[test]
    fn random_bytes_without_the_magic_are_not_run_records(record in proptest::collection::vec(any::<u8>(), 0..40)) {
        prop_assume!(!record.starts_with(&MAGIC));
        prop_assert_eq!(
            RunRecord::decode(&record),
            Err(RunDecodeError::NoMagic),
            "a record without the magic is an application record"
        );
    }
}

#[test]
fn an_unknown_version_is_refused() {
    let mut record = RunRecord::End { chunks: 0, checksum: 0 }.encode().to_vec();
    record[MAGIC.len()] = FORMAT_VERSION + 1;
    assert_eq!(
        RunRecord::decode(&record),
        Err(RunDecodeError::UnknownVersion(FORMAT_VERSION + 1)),
        "a version this library does not read is refused"
    );
}

#[test]
fn an_unknown_kind_is_refused() {
    let mut record = RunRecord::End { chunks: 0, checksum: 0 }.encode().to_vec();
    record[MAGIC.len() + 1] = 9;
    assert_eq!(
        RunRecord::decode(&record),
        Err(RunDecodeError::UnknownKind(9)),
        "a kind byte naming no record is refused"
    );
}

#[test]
fn a_chunk_declaring_more_bytes_than_it_holds_is_refused() {
    let mut record = RunRecord::Chunk(Bytes::from_static(b"abcd")).encode().to_vec();
    record[MAGIC.len() + 2] = 5;
    assert!(
        matches!(RunRecord::decode(&record), Err(RunDecodeError::Short { .. })),
        "a chunk whose length field exceeds its bytes is refused"
    );
}

#[test]
fn the_encoding_is_the_documented_layout() {
    let begin = RunRecord::Begin { covers_up_to: Seq(0x0102) }.encode();
    let mut expected = MAGIC.to_vec();
    expected.extend_from_slice(&[1, 1, 0x02, 0x01, 0, 0, 0, 0, 0, 0]);
    assert_eq!(begin.as_ref(), &expected[..], "Begin is magic, version 1, kind 1, covers_up_to little-endian");
    let end = RunRecord::End { chunks: 2, checksum: 0xAABBCCDD }.encode();
    let mut expected = MAGIC.to_vec();
    expected.extend_from_slice(&[1, 3, 2, 0, 0, 0, 0, 0, 0, 0, 0xDD, 0xCC, 0xBB, 0xAA]);
    assert_eq!(end.as_ref(), &expected[..], "End is magic, version 1, kind 3, chunks then checksum little-endian");
}
