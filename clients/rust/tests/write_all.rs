//! `Writer::write_all` against the fake service: batches pipelined within the window, each
//! position reported in order as it is acknowledged, and the stream stopping at the first error.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use paros_client::fake::{FakeService, Fault};
use paros_client::{Client, ClientConfig, Writer, WriterConfig, WriterError, Written};
use paros_core::{LeaderUuid, Seq};

fn setup(config: WriterConfig) -> (Arc<FakeService>, Writer<Arc<FakeService>>) {
    let fake = Arc::new(FakeService::new("j", vec![]));
    let client = Client::with_seed(Arc::clone(&fake), ClientConfig::default(), 1).expect("valid");
    let writer = Writer::with_seed(client, "j".to_owned(), config, 99).expect("valid");
    (fake, writer)
}

/// Batch `k`: `k + 1` records of two bytes each.
fn batch(k: usize) -> Vec<Bytes> {
    (0..=k).map(|i| Bytes::from(format!("{}{}", k % 10, i % 10))).collect()
}

fn other() -> LeaderUuid {
    LeaderUuid::new(0xdead).expect("non-zero")
}

#[tokio::test(start_paused = true)]
async fn write_all_reports_every_batch_in_order_and_pipelines_within_the_window() {
    let config = WriterConfig { batches_in_flight_max: 3, ..WriterConfig::default() };
    let (fake, mut writer) = setup(config);
    writer.claim().await.expect("claims");
    fake.set_call_delay(Duration::from_millis(10));
    let batches: Vec<Vec<Bytes>> = (0..8).map(|_| vec![Bytes::from_static(b"xx")]).collect();
    let reports: Vec<_> = writer.write_all(futures_util::stream::iter(batches)).collect().await;
    let expected: Vec<_> = (0..8).map(|k| Ok(Written { seq: Seq(k), count: 1 })).collect();
    assert_eq!(reports, expected);
    assert_eq!(fake.view().next_seq, Seq(8));
    let peak = fake.peak_bytes_in_flight();
    assert!(peak > 2, "batches were pipelined (peak {peak} bytes in flight)");
    assert!(peak <= 6, "never more than three batches of two bytes in flight (peak {peak})");
    assert_eq!(writer.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn write_all_keeps_the_bytes_in_flight_within_the_bound() {
    let config = WriterConfig { bytes_in_flight_max: 7, ..WriterConfig::default() };
    let (fake, mut writer) = setup(config);
    writer.claim().await.expect("claims");
    fake.set_call_delay(Duration::from_millis(10));
    let reports: Vec<_> = writer.write_all(futures_util::stream::iter((0..4).map(batch))).collect().await;
    let seqs: Vec<_> = reports.into_iter().map(|r| r.expect("acknowledged")).map(|w| (w.seq.0, w.count)).collect();
    assert_eq!(seqs, vec![(0, 1), (1, 2), (3, 3), (6, 4)]);
    let peak = fake.peak_bytes_in_flight();
    assert!(peak <= 8, "at most 7 bytes in flight, or one batch (of 8) alone: peak {peak}");
    assert!(peak > 4, "batches were pipelined: peak {peak}");
}

#[tokio::test(start_paused = true)]
async fn write_all_yields_each_position_as_it_is_acknowledged_while_the_input_waits() {
    let (fake, mut writer) = setup(WriterConfig::default());
    writer.claim().await.expect("claims");
    fake.set_call_delay(Duration::from_millis(10));
    // Two batches, then an input that never ends and never gives another.
    let input = futures_util::stream::iter([batch(0), batch(1)]).chain(futures_util::stream::pending());
    let mut reports = writer.write_all(input);
    for expected in [Written { seq: Seq(0), count: 1 }, Written { seq: Seq(1), count: 2 }] {
        let report = tokio::time::timeout(Duration::from_secs(5), reports.next()).await;
        assert_eq!(report.expect("reported before the input ends"), Some(Ok(expected)));
    }
    assert!(
        tokio::time::timeout(Duration::from_secs(5), reports.next()).await.is_err(),
        "with nothing in flight and no batch, the stream waits for the input"
    );
}

#[tokio::test(start_paused = true)]
async fn write_all_stops_at_a_batch_that_fails_midway() {
    let (fake, mut writer) = setup(WriterConfig::default());
    writer.claim().await.expect("claims");
    fake.set_call_delay(Duration::from_millis(10));
    // The third write meets another writer's claim: it and every batch after it are superseded.
    fake.script([Fault::Pass, Fault::Pass, Fault::ClaimedBefore(other())]);
    let mut reports = writer.write_all(futures_util::stream::iter((0..6).map(|_| batch(0))));
    assert_eq!(reports.next().await, Some(Ok(Written { seq: Seq(0), count: 1 })));
    assert_eq!(reports.next().await, Some(Ok(Written { seq: Seq(1), count: 1 })));
    match reports.next().await {
        Some(Err(WriterError::Superseded { view })) => assert_eq!(view.leader, Some(other())),
        other => panic!("expected the third batch superseded, got {other:?}"),
    }
    assert_eq!(reports.next().await, None, "the stream ends at its first error");
    assert_eq!(reports.next().await, None);
    drop(reports);
    assert_eq!(fake.view().next_seq, Seq(2), "nothing after the failure was written");
    // Later batches still in flight are the writer's to report.
    while let Some((_, report)) = writer.next_report().await {
        assert!(matches!(report, Err(WriterError::Superseded { .. })), "{report:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn write_all_reports_a_refused_batch_after_the_batches_before_it() {
    let (fake, mut writer) = setup(WriterConfig::default());
    writer.claim().await.expect("claims");
    fake.set_call_delay(Duration::from_millis(10));
    let input = futures_util::stream::iter([batch(0), batch(1), vec![], batch(2)]);
    let reports: Vec<_> = writer.write_all(input).collect().await;
    assert_eq!(
        reports,
        vec![
            Ok(Written { seq: Seq(0), count: 1 }),
            Ok(Written { seq: Seq(1), count: 2 }),
            Err(WriterError::EmptyBatch)
        ]
    );
    assert_eq!(fake.view().next_seq, Seq(3), "the batch after the refused one was not written");
}

#[tokio::test(start_paused = true)]
async fn write_all_of_a_writer_that_has_not_claimed_reports_not_claimed() {
    let (fake, mut writer) = setup(WriterConfig::default());
    let reports: Vec<_> = writer.write_all(futures_util::stream::iter([batch(0)])).collect().await;
    assert_eq!(reports, vec![Err(WriterError::NotClaimed)]);
    assert_eq!(fake.view().next_seq, Seq(0));
}

#[tokio::test(start_paused = true)]
async fn write_all_of_no_batches_ends_at_once() {
    let (_fake, mut writer) = setup(WriterConfig::default());
    writer.claim().await.expect("claims");
    let reports: Vec<_> = writer.write_all(futures_util::stream::iter(Vec::<Vec<Bytes>>::new())).collect().await;
    assert!(reports.is_empty());
}
