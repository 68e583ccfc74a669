//! Write and Truncate bodies judged against the journal's writer mode, as the contract's shapes say.

use paros_api::{LeaderUuid, Record, Seq, ShapeError, TruncateRequest, WriteRequest, WriteShape, WriterMode};

fn leader() -> LeaderUuid {
    LeaderUuid::new(7).expect("non-zero")
}

fn write(leader: Option<LeaderUuid>, seq: Option<Seq>) -> WriteRequest {
    WriteRequest { leader, seq, records: vec![Record::from(&b"x"[..])] }
}

#[test]
fn a_single_writer_write_names_its_leader_and_its_position() {
    let w = WriteRequest::fenced(leader(), Seq(4), vec![]);
    assert_eq!(w.shape(WriterMode::SingleWriter), Ok(WriteShape::Fenced { leader: leader(), seq: Seq(4) }));
}

#[test]
fn a_single_writer_write_without_a_leader_is_wrong_mode_whatever_its_seq() {
    assert_eq!(write(None, None).shape(WriterMode::SingleWriter), Err(ShapeError::WrongMode));
    assert_eq!(write(None, Some(Seq(1))).shape(WriterMode::SingleWriter), Err(ShapeError::WrongMode));
}

#[test]
fn a_single_writer_write_with_a_leader_but_no_seq_is_malformed() {
    assert_eq!(write(Some(leader()), None).shape(WriterMode::SingleWriter), Err(ShapeError::LeaderWithoutSeq));
}

#[test]
fn a_multi_writer_write_with_a_leader_or_a_seq_is_wrong_mode() {
    assert_eq!(WriteRequest::append(vec![]).shape(WriterMode::MultiWriter), Ok(WriteShape::Append));
    for (l, s) in [(Some(leader()), None), (None, Some(Seq(0))), (Some(leader()), Some(Seq(0)))] {
        assert_eq!(write(l, s).shape(WriterMode::MultiWriter), Err(ShapeError::WrongMode), "{l:?} {s:?}");
    }
}

#[test]
fn a_truncate_names_a_leader_exactly_on_a_single_writer_journal() {
    let fenced = TruncateRequest { leader: Some(leader()), up_to: Seq(3) };
    let unfenced = TruncateRequest { leader: None, up_to: Seq(3) };
    assert_eq!(fenced.shape(WriterMode::SingleWriter), Ok(Some(leader())));
    assert_eq!(unfenced.shape(WriterMode::MultiWriter), Ok(None));
    assert_eq!(unfenced.shape(WriterMode::SingleWriter), Err(ShapeError::WrongMode));
    assert_eq!(fenced.shape(WriterMode::MultiWriter), Err(ShapeError::WrongMode));
}
