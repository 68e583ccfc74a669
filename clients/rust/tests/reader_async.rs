//! The async Reader against the fake: pages, gaps across truncations, unavailability, following.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use paros_client::fake::{FakeService, ReadFault};
use paros_client::{Client, ClientConfig, ReadConsistency, Reader, ReaderConfig, ReaderOutcome};
use paros_core::{LeaderUuid, NodeId, Seq};
use proptest::prelude::*;

fn fake_with(n: usize) -> Arc<FakeService> {
    let fake = Arc::new(FakeService::new("j", vec![NodeId(1), NodeId(2)]));
    fake.claim_as(LeaderUuid::new(7).expect("non-zero"));
    if n > 0 {
        fake.write_as((0..n).map(|i| Bytes::from(format!("r{i}"))).collect());
    }
    fake
}

fn reader(fake: &Arc<FakeService>, from: u64, page: u32) -> Reader<Arc<FakeService>> {
    let client = Client::with_seed(Arc::clone(fake), ClientConfig::default(), 3).expect("valid");
    let config = ReaderConfig { page_records_max: page, ..ReaderConfig::default() };
    Reader::new(client, "j".to_owned(), Seq(from), config, ReadConsistency::Linearizable, 200).expect("valid")
}

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
    assert_eq!(r.next().await, Ok(ReaderOutcome::Unavailable { attempts: retries as u32 + 1 }));
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
    /// the record written there) or lies inside a reported gap; none is delivered twice.
    #[test]
    fn every_position_below_the_cursor_was_delivered_or_inside_a_gap(
        ops in proptest::collection::vec(op(), 1..60),
        page in 1u32..4,
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
                        if k >= tail && r.cursor() >= fake.view().next_seq {
                            break;
                        }
                        match r.next().await.expect("the fake answers consistently") {
                            ReaderOutcome::Records { from, records, .. } => {
                                for (i, rec) in (0u64..).zip(&records) {
                                    let at = from.0 + i;
                                    prop_assert!(delivered.insert(at), "position {} delivered twice", at);
                                    prop_assert_eq!(rec, &written[at as usize]);
                                }
                            }
                            ReaderOutcome::Gap { from, resumed_at, .. } => {
                                prop_assert!(from < resumed_at);
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
            for at in 0..r.cursor().0 {
                prop_assert!(delivered.contains(&at) || gaps.contains(&at), "position {} skipped silently", at);
            }
            prop_assert_eq!(r.cursor(), fake.view().next_seq, "the reader caught up at the end");
            Ok(())
        })?;
    }
}
