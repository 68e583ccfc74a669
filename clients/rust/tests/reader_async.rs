//! The async Reader against the fake: pages, gaps across truncations (from `next` and from
//! `follow`, at a page boundary and during a long poll), unavailability, following; and a
//! `Client::read` below the first retained position; `read_to_tail`; a read past the tail.

mod common;

use common::{fake_with, reader};

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use paros_client::fake::{FakeService, ReadFault};
use paros_client::{
    Client, ClientConfig, ReadAnswer, ReadConsistency, ReadDeadline, ReadItem, ReadParams, Reader, ReaderConfig,
    ReaderOutcome,
};
use paros_core::{Consistency, Seq};
use proptest::prelude::*;

#[tokio::test(start_paused = true)]
async fn next_reads_pages_in_order_and_catches_up() {
    let fake = fake_with(5);
    let mut r = reader(&fake, 0, 2);
    let mut got = vec![];
    while !r.caught_up() {
        match r.next().await.expect("a good answer") {
            ReaderOutcome::Records { from, records, .. } => {
                assert_eq!(from.0 as usize, got.len());
                got.extend(records);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(got, fake.records());
    assert_eq!(r.tail(), Some(Seq(5)));
}

#[tokio::test(start_paused = true)]
async fn a_truncation_behind_the_reader_is_reported_as_a_gap() {
    let fake = fake_with(10);
    let mut r = reader(&fake, 0, 3);
    assert!(matches!(r.next().await, Ok(ReaderOutcome::Records { .. })));
    assert_eq!(r.cursor(), Seq(3));
    fake.truncate_to(Seq(7));
    match r.next().await.expect("a good answer") {
        ReaderOutcome::Gap { from, resumed_at, view } => {
            assert_eq!((from, resumed_at), (Seq(3), Seq(7)));
            assert_eq!(view.first_seq, Seq(7));
        }
        other => panic!("expected a gap, got {other:?}"),
    }
    match r.next().await.expect("a good answer") {
        ReaderOutcome::Records { from, records, .. } => {
            assert_eq!(from, Seq(7));
            assert_eq!(records[0], Bytes::from_static(b"r7"));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn unserved_reads_are_retried_then_reported_unavailable() {
    let fake = fake_with(2);
    let mut r = reader(&fake, 0, 10);
    fake.script_reads([ReadFault::Unserved, ReadFault::Unserved]);
    assert!(matches!(r.next().await, Ok(ReaderOutcome::Records { .. })), "two unserved reads are retried");
    let retries = ReaderConfig::default().unserved_retries_max as usize;
    fake.script_reads(std::iter::repeat_n(ReadFault::Unserved, retries + 1));
    assert_eq!(
        r.next().await,
        Ok(ReaderOutcome::Unavailable { attempts: retries as u32 + 1, applied_to: Some(Seq(2)) }),
        "the fake says it has applied its two records"
    );
}

#[tokio::test(start_paused = true)]
async fn an_unknown_journal_is_reported() {
    let fake = fake_with(0);
    let client = Client::with_seed(Arc::clone(&fake), ClientConfig::default(), 3).expect("valid");
    let mut r = Reader::new(client, "nope".to_owned(), Seq(0), ReaderConfig::default(), ReadConsistency::Monotonic, 0)
        .expect("valid");
    assert_eq!(r.next().await, Ok(ReaderOutcome::UnknownJournal));
}

#[tokio::test(start_paused = true)]
async fn follow_long_polls_at_the_tail_until_a_record_arrives() {
    let fake = fake_with(1);
    let mut r = reader(&fake, 0, 10);
    assert!(matches!(r.follow().await, Ok(ReaderOutcome::Records { .. })));
    assert!(r.caught_up());
    let writer = Arc::clone(&fake);
    let late = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        writer.write_as(vec![Bytes::from_static(b"late")]);
    });
    let reads_before = fake.reads();
    let start = tokio::time::Instant::now();
    match r.follow().await.expect("a good answer") {
        ReaderOutcome::Records { from, records, .. } => {
            assert_eq!((from, records), (Seq(1), vec![Bytes::from_static(b"late")]));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(start.elapsed() >= Duration::from_secs(3));
    let polls = fake.reads() - reads_before;
    assert!(polls <= 20, "follow long-polls ({polls} reads in 3 s at 200 ms waits), it does not spin");
    late.await.expect("no panic");
}

/// The next outcome `follow` reports, within a minute of paused time (it never returns at a
/// quiet tail).
async fn follow_within_a_minute(r: &mut Reader<Arc<FakeService>>) -> ReaderOutcome {
    tokio::time::timeout(Duration::from_secs(60), r.follow())
        .await
        .expect("follow reports within a minute")
        .expect("a good answer")
}

#[tokio::test(start_paused = true)]
async fn follow_reports_a_truncation_behind_it_as_a_gap_before_the_records_after_it() {
    let fake = fake_with(10);
    let mut r = reader(&fake, 0, 3);
    assert!(matches!(follow_within_a_minute(&mut r).await, ReaderOutcome::Records { from: Seq(0), .. }));
    assert_eq!(r.cursor(), Seq(3));
    fake.truncate_to(Seq(7));
    match follow_within_a_minute(&mut r).await {
        ReaderOutcome::Gap { from, resumed_at, view } => {
            assert_eq!((from, resumed_at), (Seq(3), Seq(7)));
            assert_eq!(view.first_seq, Seq(7));
        }
        other => panic!("expected the gap [3, 7), got {other:?}"),
    }
    match follow_within_a_minute(&mut r).await {
        ReaderOutcome::Records { from, records, .. } => {
            assert_eq!(from, Seq(7));
            assert_eq!(records, fake.records());
        }
        other => panic!("expected the records from 7, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn follow_at_the_tail_reports_records_truncated_during_its_long_poll_as_a_gap() {
    let fake = fake_with(2);
    let mut r = reader(&fake, 0, 10);
    assert!(matches!(follow_within_a_minute(&mut r).await, ReaderOutcome::Records { .. }));
    assert!(r.caught_up());
    // While the reader waits at the tail (2), five records arrive and the first three of them
    // are truncated before it sees any.
    let writer = Arc::clone(&fake);
    let behind = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        writer.write_as((2..7).map(|i| Bytes::from(format!("r{i}"))).collect());
        writer.truncate_to(Seq(5));
    });
    match follow_within_a_minute(&mut r).await {
        ReaderOutcome::Gap { from, resumed_at, .. } => assert_eq!((from, resumed_at), (Seq(2), Seq(5))),
        other => panic!("expected the gap [2, 5), got {other:?}"),
    }
    match follow_within_a_minute(&mut r).await {
        ReaderOutcome::Records { from, records, .. } => {
            assert_eq!(from, Seq(5));
            assert_eq!(records, vec![Bytes::from_static(b"r5"), Bytes::from_static(b"r6")]);
        }
        other => panic!("expected the records from 5, got {other:?}"),
    }
    behind.await.expect("no panic");
}

#[tokio::test(start_paused = true)]
async fn a_client_read_below_the_first_retained_position_answers_truncated() {
    let fake = fake_with(10);
    fake.truncate_to(Seq(7));
    let client = Client::with_seed(Arc::clone(&fake), ClientConfig::default(), 3).expect("valid");
    let params =
        ReadParams { from: Seq(3), limit: 10, max_bytes: 1024, wait_ms: 0, consistency: Consistency::Linearizable };
    let deadline = ReadDeadline { wait_until: Duration::from_millis(200), give_up_at: Duration::from_secs(2) };
    match client.read(&"j".to_owned(), params, deadline).await {
        ReadAnswer::Truncated { view } => assert_eq!((view.first_seq, view.next_seq), (Seq(7), Seq(10))),
        other => panic!("expected Truncated, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn read_to_tail_returns_the_records_and_the_gaps_up_to_the_tail_in_order() {
    let fake = fake_with(12);
    let mut r = reader(&fake, 0, 3);
    assert!(matches!(r.next().await, Ok(ReaderOutcome::Records { from: Seq(0), .. })));
    fake.truncate_to(Seq(5));
    let items = r.read_to_tail().await.expect("good answers");
    let records = |from: u64, to: u64| {
        (from..to).map(move |i| ReadItem::Record { seq: Seq(i), data: Bytes::from(format!("r{i}")) })
    };
    let mut want = vec![ReadItem::Gap { from: Seq(3), to: Seq(5) }];
    want.extend(records(5, 12));
    assert_eq!(items, want);
    assert!(r.caught_up());
    assert_eq!(r.read_to_tail().await, Ok(vec![]), "at the tail there is nothing to read");
    fake.write_as(vec![Bytes::from_static(b"r12")]);
    fake.truncate_to(Seq(13));
    let gap = r.read_to_tail().await.expect("a good answer");
    assert_eq!(gap, vec![ReadItem::Gap { from: Seq(12), to: Seq(13) }], "a journal truncated to its tail is one gap");
}

#[tokio::test(start_paused = true)]
async fn read_to_tail_ends_with_an_unavailable_read_and_resumes_at_the_cursor() {
    let fake = fake_with(4);
    let mut r = reader(&fake, 0, 2);
    let retries = ReaderConfig::default().unserved_retries_max as usize;
    fake.script_reads(std::iter::repeat_n(ReadFault::Unserved, retries + 1));
    let first = r.read_to_tail().await;
    let unavailable = paros_client::ReaderError::Unavailable { attempts: retries as u32 + 1, applied_to: Some(Seq(4)) };
    assert_eq!(first, Err(unavailable), "the error says how far the server had applied");
    let rest = r.read_to_tail().await.expect("good answers");
    let seqs: Vec<_> = rest.iter().map(ReadItem::start).collect();
    assert_eq!(seqs, vec![Seq(0), Seq(1), Seq(2), Seq(3)]);
}

#[tokio::test(start_paused = true)]
async fn a_read_past_the_tail_is_reported_past_tail_not_at_the_tail() {
    let fake = fake_with(3);
    let mut r = reader(&fake, 7, 10);
    let past = Err(paros_client::ReaderError::PastTail { cursor: Seq(7), next_seq: Seq(3), view: fake.view() });
    assert_eq!(r.next().await, past.clone());
    assert_eq!(
        r.read_to_tail().await,
        past.clone().map(|_: ReaderOutcome| Vec::<ReadItem>::new()),
        "there is no tail to read to"
    );
    assert!(!r.caught_up(), "a reader past the tail has not caught up with anything");
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(60), r.follow()).await.expect("follow says it at once"),
        past,
        "a reader not built to wait past the tail says so when following too"
    );
    assert_eq!(r.cursor(), Seq(7), "the cursor is unchanged");
    fake.write_as((3..8).map(|i| Bytes::from(format!("r{i}"))).collect());
    match r.next().await.expect("the journal reached the cursor") {
        ReaderOutcome::Records { from, records, .. } => assert_eq!((from, records), (Seq(7), vec![Bytes::from("r7")])),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn follow_built_to_wait_past_the_tail_waits_for_the_journal_to_grow() {
    let fake = fake_with(3);
    let client = Client::with_seed(Arc::clone(&fake), ClientConfig::default(), 3).expect("valid");
    let mut r = Reader::builder(client, "j".to_owned())
        .from(Seq(4))
        .follow_wait_ms(200)
        .wait_past_tail(true)
        .build()
        .expect("valid");
    let writer = Arc::clone(&fake);
    let late = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        writer.write_as((3..6).map(|i| Bytes::from(format!("r{i}"))).collect());
    });
    let start = tokio::time::Instant::now();
    match follow_within_a_minute(&mut r).await {
        ReaderOutcome::Records { from, records, .. } => {
            assert_eq!((from, records), (Seq(4), vec![Bytes::from("r4"), Bytes::from("r5")]));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(start.elapsed() >= Duration::from_secs(5));
    assert!(fake.reads() <= 40, "waiting past the tail does not spin: {} reads", fake.reads());
    late.await.expect("no panic");
}

#[derive(Debug, Clone)]
enum Op {
    Write(usize),
    Truncate(u8),
    Read,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1usize..5).prop_map(Op::Write),
        1 => any::<u8>().prop_map(Op::Truncate),
        4 => Just(Op::Read),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Under random truncations, every position below the cursor was either delivered (with
    /// the record written there) or lies inside a reported gap; none is delivered twice, and
    /// each outcome starts where the one before it ended. So for `next` (path 0), `follow`
    /// (path 1: only asked when there is something to report, as it never returns at a quiet
    /// tail), `read_to_tail` (path 2) and the stream (path 3: one item, only when there is
    /// something to report, as for `follow`) alike.
    #[test]
    fn every_position_below_the_cursor_was_delivered_or_inside_a_gap(
        ops in proptest::collection::vec(op(), 1..60),
        page in 1u32..4,
        path in 0u8..4,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        rt.block_on(async {
            let fake = fake_with(0);
            let mut r = reader(&fake, 0, page);
            let mut written: Vec<Bytes> = vec![];
            let mut delivered = BTreeSet::new();
            let mut gaps = BTreeSet::new();
            let mut expected = Seq(0);
            let tail = ops.len();
            let drain = std::iter::repeat_n(&Op::Read, 500);
            for (k, op) in ops.iter().chain(drain).enumerate() {
                match op {
                    Op::Write(n) => {
                        let batch: Vec<Bytes> =
                            (0..*n).map(|i| Bytes::from(format!("w{}-{i}", written.len()))).collect();
                        fake.write_as(batch.clone());
                        written.extend(batch);
                    }
                    Op::Truncate(f) => {
                        let view = fake.view();
                        let span = view.next_seq.0 - view.first_seq.0;
                        let up_to = view.first_seq.0 + span * u64::from(*f) / 255;
                        fake.truncate_to(Seq(up_to));
                    }
                    Op::Read => {
                        let quiet = r.cursor() >= fake.view().next_seq;
                        if k >= tail && quiet {
                            break;
                        }
                        if (path == 1 || path == 3) && quiet {
                            continue;
                        }
                        let outcomes = match path {
                            0 => vec![r.next().await.expect("the fake answers consistently")],
                            1 => vec![r.follow().await.expect("the fake answers consistently")],
                            2 => r
                                .read_to_tail()
                                .await
                                .expect("the fake answers consistently")
                                .into_iter()
                                .map(|item| match item {
                                    ReadItem::Record { seq, data } => {
                                        ReaderOutcome::Records { from: seq, records: vec![data], view: fake.view() }
                                    }
                                    ReadItem::Gap { from, to } => {
                                        ReaderOutcome::Gap { from, resumed_at: to, view: fake.view() }
                                    }
                                })
                                .collect(),
                            _ => {
                                let item = futures_util::StreamExt::next(&mut r).await.expect("the stream goes on");
                                vec![match item.expect("the fake answers consistently") {
                                    ReadItem::Record { seq, data } => {
                                        ReaderOutcome::Records { from: seq, records: vec![data], view: fake.view() }
                                    }
                                    ReadItem::Gap { from, to } => {
                                        ReaderOutcome::Gap { from, resumed_at: to, view: fake.view() }
                                    }
                                }]
                            }
                        };
                        for outcome in outcomes {
                            match outcome {
                                ReaderOutcome::Records { from, records, .. } => {
                                    prop_assert!(path == 0 || !records.is_empty(), "no records returned");
                                    prop_assert_eq!(from, expected, "records not where the last outcome ended");
                                    expected = Seq(from.0 + records.len() as u64);
                                    for (i, rec) in (0u64..).zip(&records) {
                                        let at = from.0 + i;
                                        prop_assert!(delivered.insert(at), "position {} delivered twice", at);
                                        prop_assert_eq!(rec, &written[at as usize]);
                                    }
                                }
                                ReaderOutcome::Gap { from, resumed_at, .. } => {
                                    prop_assert!(from < resumed_at);
                                    prop_assert_eq!(from, expected, "a gap not where the last outcome ended");
                                    expected = resumed_at;
                                    for at in from.0..resumed_at.0 {
                                        prop_assert!(!delivered.contains(&at), "a gap over delivered position {}", at);
                                        gaps.insert(at);
                                    }
                                }
                                other => prop_assert!(false, "unexpected {:?}", other),
                            }
                        }
                    }
                }
            }
            for at in 0..r.cursor().0 {
                prop_assert!(delivered.contains(&at) || gaps.contains(&at), "position {} skipped silently", at);
            }
            prop_assert_eq!(r.cursor(), fake.view().next_seq, "the reader caught up at the end");
            Ok(())
        })?;
    }
}
