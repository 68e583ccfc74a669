//! The wire codec: round trips, versions, garbage.

use bytes::Bytes;
use paros_bus::{CodecError, WIRE_VERSION, decode, encode};
use paros_core::journal::{Command, Control, Digested, Entry};
use paros_core::{
    Ballot, Call, CallAnswer, JournalId, JournalKey, LeaderUuid, Life, Message, NodeId, Seq, Slot, TenantId,
};
use paros_node::ports::Envelope;
use paros_node::rpc::{NodeAnswer, NodeRequest};
use proptest::prelude::*;

fn key() -> JournalKey {
    JournalKey { tenant: TenantId(0xdead_beef), journal: JournalId(0x1234_5678_9abc) }
}

fn write_envelope(records: Vec<Bytes>) -> Envelope {
    let node = NodeId(0x42);
    Envelope {
        journal: key(),
        from: node,
        message: Message::CatchUpResponse {
            entries: vec![(Slot(17), Command::Write(Entry { leader: LeaderUuid::new(99), seq: Seq(1000), records }))],
            chosen_up_to: Slot(18),
            life: Life(0x5eed),
        },
    }
}

#[test]
fn an_envelope_batch_with_a_write_round_trips() {
    let batch = vec![
        write_envelope(vec![Bytes::from_static(b"first"), Bytes::new(), Bytes::from(vec![0u8, 255, 7, 1])]),
        write_envelope(vec![Bytes::from(vec![0xab; 4096])]),
    ];
    let wire = encode(&batch);
    assert_eq!(wire[0], WIRE_VERSION);
    assert_eq!(decode::<Vec<Envelope>>(&wire), Ok(batch));
}

#[test]
fn requests_and_answers_round_trip() {
    let request = NodeRequest::Call {
        journal: key(),
        id: paros_core::CallId(u64::MAX - 3),
        call: Call::Write { leader: LeaderUuid::new(5), seq: Seq(0), records: vec![Bytes::from_static(b"x")] },
    };
    assert_eq!(decode::<NodeRequest>(&encode(&request)), Ok(request));
    let answer = NodeAnswer::Call(CallAnswer::Redirect { leader: Some(NodeId(3)) });
    assert_eq!(decode::<NodeAnswer>(&encode(&answer)), Ok(answer));
}

/// `Message` as far as `Accept`, with bare commands: the layout an `Accept` has on the wire.
#[derive(serde::Serialize)]
enum BareAccept {
    _Prepare,
    _Promise,
    _Nack,
    Accept { ballot: Ballot, entries: Vec<(Slot, Command)>, commit: Slot },
}

#[test]
fn an_accept_carries_bare_commands_on_the_wire_and_decoding_computes_their_digests() {
    let write = Command::Write(Entry {
        leader: LeaderUuid::new(7),
        seq: Seq(40),
        records: vec![Bytes::from_static(b"one"), Bytes::from(vec![9u8; 300])],
    });
    let entries = vec![(Slot(5), write), (Slot(6), Command::Control(Control::Noop))];
    let (ballot, commit) = (Ballot { round: 3, node: NodeId(2) }, Slot(5));
    let digested = entries.iter().map(|(s, c)| (*s, Digested::new(c.clone()))).collect();
    let accept = Message::Accept { ballot, entries: digested, commit };
    let wire = encode(&accept);
    assert_eq!(wire, encode(&BareAccept::Accept { ballot, entries: entries.clone(), commit }), "no digest is sent");
    let Ok(Message::Accept { entries: decoded, .. }) = decode::<Message>(&wire) else { panic!("an Accept") };
    for ((slot, command), (decoded_slot, d)) in entries.iter().zip(&decoded) {
        assert_eq!((decoded_slot, d.command()), (slot, command));
        assert_eq!(d.digest(), command.digest(), "the receiver computes the digest as it decodes");
    }
    assert_eq!(decode::<Message>(&wire), Ok(accept));
}

#[test]
fn an_unknown_version_is_rejected() {
    let mut wire = encode(&vec![write_envelope(vec![Bytes::from_static(b"r")])]);
    for version in [0u8, 1, WIRE_VERSION + 1, 255] {
        wire[0] = version;
        assert_eq!(decode::<Vec<Envelope>>(&wire), Err(CodecError::Version { seen: version }));
    }
}

#[test]
fn empty_input_is_empty() {
    assert_eq!(decode::<Vec<Envelope>>(&[]), Err(CodecError::Empty));
}

#[test]
fn garbage_does_not_decode_and_says_why() {
    // A version byte, then a variant index no NodeRequest has.
    let bad_variant = decode::<NodeRequest>(&[WIRE_VERSION, 0x7f]);
    assert!(matches!(bad_variant, Err(CodecError::Decode(_))), "{bad_variant:?}");
    // Truncated: a valid message cut short.
    let wire = encode(&vec![write_envelope(vec![Bytes::from_static(b"record")])]);
    assert_eq!(
        decode::<Vec<Envelope>>(&wire[..wire.len() - 1]),
        Err(CodecError::Decode(postcard::Error::DeserializeUnexpectedEnd))
    );
    // Trailing bytes after a whole value.
    let mut long = encode(&NodeAnswer::UnknownJournal);
    long.extend_from_slice(&[0, 0]);
    assert_eq!(decode::<NodeAnswer>(&long), Err(CodecError::TrailingBytes { extra: 2 }));
    // A version byte alone.
    assert_eq!(
        decode::<NodeAnswer>(&[WIRE_VERSION]),
        Err(CodecError::Decode(postcard::Error::DeserializeUnexpectedEnd))
    );
}

#[test]
fn a_decode_failure_carries_postcards_error_as_its_source() {
    use std::error::Error as _;
    let err = decode::<NodeAnswer>(&[WIRE_VERSION]).unwrap_err();
    let source = err.source().expect("a decode failure has a source");
    assert_eq!(source.downcast_ref::<postcard::Error>(), Some(&postcard::Error::DeserializeUnexpectedEnd));
    assert!(err.to_string().ends_with(&format!(": {source}")), "the message says why: {err}");
    assert!(CodecError::Version { seen: 9 }.source().is_none(), "a version mismatch has no source");
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode::<Vec<Envelope>>(&bytes);
        let _ = decode::<NodeRequest>(&bytes);
        let _ = decode::<NodeAnswer>(&bytes);
        let mut versioned = bytes.clone();
        versioned.insert(0, WIRE_VERSION);
        let _ = decode::<Vec<Envelope>>(&versioned);
        let _ = decode::<NodeRequest>(&versioned);
        let _ = decode::<NodeAnswer>(&versioned);
    }

    #[test]
    fn arbitrary_write_records_round_trip(
        records in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..16),
    ) {
        let batch = vec![write_envelope(records.into_iter().map(Bytes::from).collect())];
        prop_assert_eq!(decode::<Vec<Envelope>>(&encode(&batch)), Ok(batch));
    }
}

#[test]
fn a_zero_leader_uuid_on_the_wire_is_refused() {
    let wire = encode(&vec![write_envelope(vec![Bytes::from_static(b"r")])]);
    // The uuid 99 is one varint byte (0x63); no other byte of this batch has that value.
    let at: Vec<usize> = wire.iter().enumerate().filter(|(_, b)| **b == 0x63).map(|(i, _)| i).collect();
    assert_eq!(at.len(), 1, "the test batch holds the uuid byte once: {wire:?}");
    let mut zeroed = wire.clone();
    zeroed[at[0]] = 0;
    assert!(decode::<Vec<Envelope>>(&zeroed).is_err(), "a zero leader uuid does not decode");
    assert!(decode::<Vec<Envelope>>(&wire).is_ok(), "the same batch with its uuid decodes");
}
