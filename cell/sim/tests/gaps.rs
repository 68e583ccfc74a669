//! The claim "a reader reports every skipped position as a gap" has teeth: the checker passes a
//! reader that reported its gap and fails one that skipped silently or invented a report.

use bytes::Bytes;
use paros_core::journal::JournalView;
use paros_core::{Consistency, JournalKey, LeaderUuid, NodeId, ReadAnswer, Seq};
use paros_sim::check::gaps::check;
use paros_sim::check::{HistoryOp, OpInput, OpOutput, ReadReport};

fn view(first: u64, next: u64) -> JournalView {
    JournalView { leader: LeaderUuid::new(1), first_seq: Seq(first), next_seq: Seq(next) }
}

fn page(from: u64, n: u64, v: JournalView) -> ReadAnswer {
    ReadAnswer::Page {
        from: Seq(from),
        records: (from..from + n).map(|p| Bytes::from(format!("w0.0.1@{p}"))).collect(),
        view: v,
    }
}

/// A reader's read from `from` at call index `i`, answered `answer`, reported `report`.
fn read(i: u64, from: u64, answer: Option<ReadAnswer>, report: ReadReport) -> HistoryOp {
    HistoryOp {
        journal: JournalKey::default(),
        client: "r0.0".into(),
        input: OpInput::Read {
            from,
            limit: 16,
            max_bytes: 4096,
            wait_ticks: 0,
            consistency: Consistency::Linearizable,
        },
        return_ns: answer.as_ref().map(|_| 2 * i + 1),
        return_index: answer.as_ref().map(|_| 2 * i + 1),
        server: answer.as_ref().map(|_| NodeId(1)),
        output: answer.map(OpOutput::Read),
        call_ns: 2 * i,
        call_index: 2 * i,
        to: NodeId(1),
        probe: None,
        report: Some(report),
    }
}

/// Two records, a truncation to 5 reported as a gap, an unserved read, then reads from 5 on.
fn honest() -> Vec<HistoryOp> {
    vec![
        read(1, 0, Some(page(0, 2, view(0, 2))), ReadReport::Records { from: 0, count: 2 }),
        read(2, 2, Some(ReadAnswer::Truncated(view(5, 7))), ReadReport::Gap { from: 2, resumed_at: 5 }),
        read(3, 5, Some(ReadAnswer::Unserved { applied_to: None }), ReadReport::Nothing),
        read(4, 5, None, ReadReport::Nothing),
        read(5, 5, Some(page(5, 2, view(5, 7))), ReadReport::Records { from: 5, count: 2 }),
        read(6, 7, Some(page(7, 0, view(9, 9))), ReadReport::Gap { from: 7, resumed_at: 9 }),
        read(7, 9, Some(page(9, 0, view(9, 9))), ReadReport::Records { from: 9, count: 0 }),
    ]
}

#[test]
fn a_reader_that_reports_its_gaps_holds_the_claim() {
    let v = check(&honest());
    assert!(v.violations.is_empty(), "{:#?}", v.violations);
    assert_eq!(v.checked, 7);
    assert_eq!(v.gaps_crossed, 2, "both gaps were crossed by a later read");
}

#[test]
fn a_silent_skip_over_a_truncation_is_a_violation() {
    let mut h = honest();
    // The reader was told the journal starts at 5, moved its cursor there and said nothing.
    h[1].report = Some(ReadReport::Nothing);
    let v = check(&h);
    assert_eq!(v.violations.len(), 1, "{:#?}", v.violations);
    assert!(v.violations[0].contains("seq2..seq5") && v.violations[0].contains("silently"), "{}", v.violations[0]);
}

#[test]
fn a_cursor_that_runs_past_the_records_delivered_is_a_violation() {
    let mut h = honest();
    // A page of two records, reported as two, but the next read starts at 3.
    h[1] = read(2, 3, Some(ReadAnswer::Truncated(view(5, 7))), ReadReport::Gap { from: 3, resumed_at: 5 });
    let v = check(&h);
    assert_eq!(v.violations.len(), 1, "{:#?}", v.violations);
    assert!(v.violations[0].contains("seq2..seq3"), "{}", v.violations[0]);
}

#[test]
fn a_report_the_answer_does_not_allow_is_a_violation() {
    // More records than the page held.
    let mut h = honest();
    h[0].report = Some(ReadReport::Records { from: 0, count: 3 });
    let v = check(&h);
    assert!(v.violations[0].contains("reported 3 records"), "{:#?}", v.violations);
    // A gap from an answer that was not a truncation: it covers nothing, so the later read
    // from 5 skipped silently too.
    let mut h = honest();
    h[1].output = Some(OpOutput::Read(ReadAnswer::Unserved { applied_to: None }));
    let v = check(&h);
    assert_eq!(v.violations.len(), 2, "{:#?}", v.violations);
    // A gap that names another resume point than the answer's first position.
    let mut h = honest();
    h[1].report = Some(ReadReport::Gap { from: 2, resumed_at: 4 });
    assert!(!check(&h).violations.is_empty());
}

#[test]
fn reads_without_a_report_are_not_a_readers() {
    let mut h = honest();
    for op in &mut h {
        op.report = None;
    }
    h[2].input =
        OpInput::Read { from: 100, limit: 1, max_bytes: 1, wait_ticks: 0, consistency: Consistency::Linearizable };
    let v = check(&h);
    assert_eq!((v.checked, v.violations.len()), (0, 0));
}
