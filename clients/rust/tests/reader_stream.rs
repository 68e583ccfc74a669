//! The Reader as a Stream of records and gaps, against the fake: it follows the tail, yields
//! every truncated range as a gap (behind it at a page boundary, and during its long poll), ends
//! after its first error, refuses to be mixed with the methods mid-page; and the builder.

mod common;

use common::{client, fake_with, reader};

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use paros_client::fake::{FakeService, ReadFault};
use paros_client::{
    DEFAULT_FOLLOW_WAIT_MS, ReadConsistency, ReadItem, Reader, ReaderConfig, ReaderConfigError, ReaderError,
    ReaderOutcome,
};
use paros_core::Seq;

fn record(seq: u64) -> ReadItem {
    ReadItem::Record { seq: Seq(seq), data: Bytes::from(format!("r{seq}")) }
}

/// The stream's next item, within a minute of paused time (it never ends at a quiet tail).
async fn item(r: &mut Reader<Arc<FakeService>>) -> Option<Result<ReadItem, ReaderError>> {
    tokio::time::timeout(Duration::from_secs(60), StreamExt::next(r)).await.expect("an item within a minute")
}

/// Whether the stream yields nothing for a minute of paused time.
async fn quiet(r: &mut Reader<Arc<FakeService>>) -> bool {
    tokio::time::timeout(Duration::from_secs(60), StreamExt::next(r)).await.is_err()
}

#[tokio::test(start_paused = true)]
async fn the_stream_yields_every_record_with_its_position_and_follows_the_tail() {
    let fake = fake_with(5);
    let mut r = reader(&fake, 0, 2);
    for seq in 0..5 {
        assert_eq!(item(&mut r).await, Some(Ok(record(seq))));
    }
    assert!(r.caught_up());
    let writer = Arc::clone(&fake);
    let late = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        writer.write_as(vec![Bytes::from_static(b"r5"), Bytes::from_static(b"r6")]);
    });
    let reads_before = fake.reads();
    assert_eq!(item(&mut r).await, Some(Ok(record(5))), "the stream waits at the tail for the next record");
    let polls = fake.reads() - reads_before;
    assert!(polls <= 20, "the stream long-polls ({polls} reads in 3 s at 200 ms waits), it does not spin");
    assert_eq!(item(&mut r).await, Some(Ok(record(6))));
    assert_eq!(r.cursor(), Seq(7));
    assert!(quiet(&mut r).await, "at a quiet tail the stream waits; it does not end");
    late.await.expect("no panic");
}

#[tokio::test(start_paused = true)]
async fn the_stream_yields_a_truncation_behind_it_as_a_gap_before_the_records_after_it() {
    let fake = fake_with(10);
    let mut r = reader(&fake, 0, 3);
    for seq in 0..3 {
        assert_eq!(item(&mut r).await, Some(Ok(record(seq))));
    }
    assert_eq!(r.cursor(), Seq(3));
    fake.truncate_to(Seq(7));
    assert_eq!(
        item(&mut r).await,
        Some(Ok(ReadItem::Gap { from: Seq(3), to: Seq(7) })),
        "the truncated range [3, 7) is yielded, not dropped"
    );
    for seq in 7..10 {
        assert_eq!(item(&mut r).await, Some(Ok(record(seq))));
    }
}

#[tokio::test(start_paused = true)]
async fn the_stream_yields_records_truncated_during_its_long_poll_as_a_gap() {
    let fake = fake_with(2);
    let mut r = reader(&fake, 0, 10);
    assert_eq!(item(&mut r).await, Some(Ok(record(0))));
    assert_eq!(item(&mut r).await, Some(Ok(record(1))));
    // While the stream waits at the tail (2), five records arrive and the first three of them
    // are truncated before it sees any.
    let writer = Arc::clone(&fake);
    let behind = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        writer.write_as((2..7).map(|i| Bytes::from(format!("r{i}"))).collect());
        writer.truncate_to(Seq(5));
    });
    assert_eq!(item(&mut r).await, Some(Ok(ReadItem::Gap { from: Seq(2), to: Seq(5) })));
    assert_eq!(item(&mut r).await, Some(Ok(record(5))));
    assert_eq!(item(&mut r).await, Some(Ok(record(6))));
    behind.await.expect("no panic");
}

#[tokio::test(start_paused = true)]
async fn every_item_of_the_stream_starts_where_the_one_before_it_ended_under_truncations() {
    let fake = fake_with(0);
    let mut r = reader(&fake, 0, 2);
    let mut expected = Seq(0);
    let mut gaps = 0;
    for round in 0u64..20 {
        fake.write_as((0..3).map(|i| Bytes::from(format!("w{round}-{i}"))).collect());
        if round % 3 == 1 {
            let view = fake.view();
            fake.truncate_to(Seq(view.next_seq.0 - 1));
        }
        while r.cursor() < fake.view().next_seq {
            let it = item(&mut r).await.expect("the stream does not end").expect("good answers");
            assert_eq!(it.start(), expected, "an item that does not start where the last one ended: {it:?}");
            assert!(it.end() > it.start());
            if matches!(it, ReadItem::Gap { .. }) {
                gaps += 1;
            }
            expected = it.end();
        }
    }
    assert_eq!(expected, fake.view().next_seq);
    assert!(gaps > 0, "the truncations behind the reader were yielded as gaps");
}

#[tokio::test(start_paused = true)]
async fn the_stream_ends_after_an_unknown_journal() {
    let fake = fake_with(3);
    let mut r = Reader::builder(client(&fake), "j".to_owned()).build().expect("valid");
    assert_eq!(item(&mut r).await, Some(Ok(record(0))));
    // Every server in a row says so (one alone only does not host it: the next is asked).
    let servers = paros_client::JournalService::servers(&*fake).len().max(1);
    fake.script_reads(vec![ReadFault::UnknownJournal; servers]);
    assert_eq!(item(&mut r).await, Some(Ok(record(1))), "the page already read is yielded first");
    assert_eq!(item(&mut r).await, Some(Ok(record(2))));
    assert_eq!(item(&mut r).await, Some(Err(ReaderError::UnknownJournal)));
    assert_eq!(item(&mut r).await, None, "an error ends the stream");
    assert_eq!(item(&mut r).await, None);
    assert_eq!(r.next().await, Ok(ReaderOutcome::Records { from: Seq(3), records: vec![], view: fake.view() }));
}

#[tokio::test(start_paused = true)]
async fn the_stream_reports_a_position_past_the_tail_and_ends() {
    let fake = fake_with(3);
    let mut r = reader(&fake, 8, 10);
    match item(&mut r).await {
        Some(Err(ReaderError::PastTail { cursor, next_seq, .. })) => assert_eq!((cursor, next_seq), (Seq(8), Seq(3))),
        other => panic!("expected PastTail, got {other:?}"),
    }
    assert_eq!(item(&mut r).await, None);
}

#[tokio::test(start_paused = true)]
async fn a_stream_built_to_wait_past_the_tail_waits_for_the_journal_to_grow_to_it() {
    let fake = fake_with(3);
    let mut r = Reader::builder(client(&fake), "j".to_owned())
        .from(Seq(5))
        .follow_wait_ms(200)
        .wait_past_tail(true)
        .build()
        .expect("valid");
    assert!(quiet(&mut r).await, "past the tail, the stream waits");
    fake.write_as((3..7).map(|i| Bytes::from(format!("r{i}"))).collect());
    assert_eq!(item(&mut r).await, Some(Ok(record(5))), "from the cursor, once the journal reaches it");
    assert_eq!(item(&mut r).await, Some(Ok(record(6))));
    let reads = fake.reads();
    assert!(reads < 200, "waiting past the tail does not spin: {reads} reads");
}

#[tokio::test(start_paused = true)]
async fn the_methods_refuse_while_the_stream_holds_a_page_and_work_after_it() {
    let fake = fake_with(6);
    let mut r = reader(&fake, 0, 3);
    assert_eq!(item(&mut r).await, Some(Ok(record(0))));
    assert_eq!(r.cursor(), Seq(1), "the cursor is where the stream's next item starts");
    assert_eq!(r.next().await, Err(ReaderError::StreamBusy));
    assert_eq!(r.read_to_tail().await, Err(ReaderError::StreamBusy));
    assert_eq!(r.follow().await, Err(ReaderError::StreamBusy));
    assert_eq!(item(&mut r).await, Some(Ok(record(1))));
    assert_eq!(item(&mut r).await, Some(Ok(record(2))));
    match r.next().await.expect("the page is yielded: the methods are free") {
        ReaderOutcome::Records { from, records, .. } => assert_eq!((from, records.len()), (Seq(3), 3)),
        other => panic!("unexpected {other:?}"),
    }
    fake.write_as(vec![Bytes::from_static(b"r6")]);
    assert_eq!(item(&mut r).await, Some(Ok(record(6))), "the stream goes on where the methods left the cursor");
}

#[tokio::test(start_paused = true)]
async fn the_methods_refuse_while_the_stream_has_a_read_in_flight() {
    let fake = fake_with(1);
    let mut r = reader(&fake, 0, 3);
    assert_eq!(item(&mut r).await, Some(Ok(record(0))));
    // A poll at the quiet tail leaves a long poll in flight when its future is dropped.
    assert!(tokio::time::timeout(Duration::from_millis(50), StreamExt::next(&mut r)).await.is_err());
    assert_eq!(r.cursor(), Seq(1));
    assert_eq!(r.tail(), Some(Seq(1)));
    assert_eq!(r.follow().await, Err(ReaderError::StreamBusy));
    fake.write_as(vec![Bytes::from_static(b"r1")]);
    assert_eq!(item(&mut r).await, Some(Ok(record(1))), "the read in flight is carried on");
    assert!(matches!(r.next().await, Ok(ReaderOutcome::Records { from: Seq(2), .. })));
}

#[tokio::test(start_paused = true)]
async fn the_builder_defaults_read_from_the_start_linearizably() {
    let fake = fake_with(2);
    let mut r = Reader::builder(client(&fake), "j".to_owned()).build().expect("valid");
    assert_eq!(r.cursor(), Seq(0));
    assert_eq!(r.read_to_tail().await.expect("good answers").len(), 2, "two records, one page");
    assert_eq!(r.cursor(), Seq(2));
    const { assert!(DEFAULT_FOLLOW_WAIT_MS <= 1000, "the contract caps the wait at 1000 ms") };
    let zero = ReaderConfig { page_records_max: 0, ..ReaderConfig::default() };
    let refused = Reader::builder(client(&fake), "j".to_owned()).config(zero).build();
    assert_eq!(refused.err(), Some(ReaderConfigError::PageRecordsZero));
    let r = Reader::builder(client(&fake), "j".to_owned())
        .from(Seq(1))
        .consistency(ReadConsistency::Monotonic)
        .build()
        .expect("valid");
    assert_eq!(r.cursor(), Seq(1));
}

#[tokio::test(start_paused = true)]
async fn next_item_is_the_streams_next_item() {
    let fake = fake_with(2);
    let mut r = reader(&fake, 0, 1);
    assert_eq!(r.next_item().await, Some(Ok(record(0))));
    assert_eq!(item(&mut r).await, Some(Ok(record(1))));
    fake.truncate_to(Seq(2));
    fake.write_as(vec![Bytes::from_static(b"r2")]);
    fake.truncate_to(Seq(3));
    assert_eq!(r.next_item().await, Some(Ok(ReadItem::Gap { from: Seq(2), to: Seq(3) })));
}

#[test]
fn a_reader_can_be_sent_and_shared_between_threads() {
    fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Reader<Arc<FakeService>>>();
}
