//! The batching appender: the sans-IO builder's rules, and the async appender against the fake.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use paros_client::fake::{FakeService, Fault};
use paros_client::{
    AppendError, Appender, AppenderConfig, AppenderConfigError, BatchBuilder, Client, ClientConfig, MAGIC, RecordError,
    Writer, WriterConfig, WriterError,
};
use paros_core::{Call, LeaderUuid, Seq};
use tokio::task::JoinHandle;

const T0: Duration = Duration::ZERO;

fn config() -> AppenderConfig {
    AppenderConfig {
        batch_records_max: 4,
        batch_bytes_max: 16,
        linger: Duration::from_millis(5),
        bytes_in_flight_max: 64,
    }
}

#[test]
fn the_builder_seals_by_count() {
    let mut b = BatchBuilder::new(&config()).expect("valid");
    for i in 0..4u32 {
        assert!(b.fits(1));
        b.push(Bytes::from_static(b"x"), i, T0).expect("fits");
    }
    assert!(b.is_full() && b.is_due(T0) && !b.fits(1));
    let batch = b.seal().expect("a batch");
    assert_eq!((batch.records.len(), batch.tags, batch.bytes), (4, vec![0, 1, 2, 3], 4));
    assert!(b.is_empty() && b.seal().is_none());
}

#[test]
fn the_builder_seals_before_a_record_that_would_pass_the_byte_bound() {
    let mut b = BatchBuilder::new(&config()).expect("valid");
    b.push(Bytes::from(vec![0u8; 10]), (), T0).expect("fits");
    assert!(!b.fits(7), "10 + 7 > 16");
    assert!(b.push(Bytes::from(vec![0u8; 7]), (), T0).is_err(), "the record is given back");
    assert!(b.fits(6));
    let batch = b.seal().expect("a batch");
    assert_eq!(batch.bytes, 10);
    assert!(b.fits(1000), "an empty batch takes any record");
}

#[test]
fn the_builder_is_due_once_the_first_record_lingered() {
    let mut b = BatchBuilder::new(&config()).expect("valid");
    assert_eq!(b.deadline(), None);
    b.push(Bytes::from_static(b"a"), (), Duration::from_millis(100)).expect("fits");
    b.push(Bytes::from_static(b"b"), (), Duration::from_millis(103)).expect("fits");
    assert_eq!(b.deadline(), Some(Duration::from_millis(105)), "the linger runs from the first record");
    assert!(!b.is_due(Duration::from_millis(104)));
    assert!(b.is_due(Duration::from_millis(105)));
}

#[test]
fn appender_config_validation_names_the_bad_bound() {
    let ok = config();
    assert_eq!(ok.validate(), Ok(()));
    assert_eq!(AppenderConfig { batch_records_max: 0, ..ok }.validate(), Err(AppenderConfigError::BatchRecordsZero));
    assert_eq!(AppenderConfig { batch_bytes_max: 0, ..ok }.validate(), Err(AppenderConfigError::BatchBytesZero));
    assert!(matches!(
        AppenderConfig { bytes_in_flight_max: 8, ..ok }.validate(),
        Err(AppenderConfigError::InFlightBelowBatch { .. })
    ));
    assert!(matches!(
        AppenderConfig { bytes_in_flight_max: 1 << 40, ..ok }.validate(),
        Err(AppenderConfigError::InFlightTooLarge(_))
    ));
}

async fn claimed(fake: &Arc<FakeService>) -> Writer<Arc<FakeService>> {
    let client = Client::with_seed(Arc::clone(fake), ClientConfig::default(), 1).expect("valid");
    let config = WriterConfig { batches_in_flight_max: 64, ..WriterConfig::default() };
    let mut writer = Writer::with_seed(client, "j".to_owned(), config, 2).expect("valid");
    writer.claim().await.expect("claims");
    writer
}

fn record(i: usize) -> Bytes {
    Bytes::from(format!("rec{i:05}"))
}

fn spawn_appends(appender: &Appender, n: usize) -> Vec<(Bytes, JoinHandle<Result<Seq, AppendError>>)> {
    (0..n)
        .map(|i| {
            let a = appender.clone();
            let r = record(i);
            let r2 = r.clone();
            (r, tokio::spawn(async move { a.append(r2).await }))
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn every_record_gets_the_position_it_was_written_at() {
    let fake = Arc::new(FakeService::new("j", vec![]));
    let writer = claimed(&fake).await;
    fake.set_call_delay(Duration::from_millis(3));
    let (appender, driver) = Appender::new(writer, config()).expect("valid");
    let driver = tokio::spawn(driver.run());
    let appends = spawn_appends(&appender, 50);
    drop(appender);
    let held = {
        let mut results = vec![];
        for (r, h) in appends {
            results.push((r, h.await.expect("no panic").expect("a position")));
        }
        results
    };
    driver.await.expect("no panic").expect("the driver ends cleanly");
    let records = fake.records();
    assert_eq!(records.len(), 50);
    for (r, seq) in held {
        assert_eq!(records[seq.0 as usize], r, "the record is at the position append returned");
    }
    for (call, _) in fake.calls() {
        if let Call::Write { records, .. } = call {
            assert!(records.len() <= 4, "batches hold at most batch_records_max records");
            assert!(records.iter().map(Bytes::len).sum::<usize>() <= 16, "and at most batch_bytes_max bytes");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_back_pressure_bound_holds_bytes_in_flight_never_exceed_it() {
    let fake = Arc::new(FakeService::new("j", vec![]));
    let writer = claimed(&fake).await;
    fake.set_call_delay(Duration::from_millis(10));
    let (appender, driver) = Appender::new(writer, config()).expect("valid");
    let driver = tokio::spawn(driver.run());
    let appends = spawn_appends(&appender, 200);
    drop(appender);
    for (_, h) in appends {
        h.await.expect("no panic").expect("a position");
    }
    driver.await.expect("no panic").expect("clean");
    let peak = fake.peak_bytes_in_flight();
    assert!(peak <= config().bytes_in_flight_max, "peak {peak} over the bound");
    assert!(peak > config().batch_bytes_max, "batches were pipelined (peak {peak})");
    assert_eq!(fake.records().len(), 200);
}

#[tokio::test(start_paused = true)]
async fn a_lone_record_is_sent_after_the_linger() {
    let fake = Arc::new(FakeService::new("j", vec![]));
    let writer = claimed(&fake).await;
    let (appender, driver) = Appender::new(writer, config()).expect("valid");
    let driver = tokio::spawn(driver.run());
    let start = tokio::time::Instant::now();
    assert_eq!(appender.append(Bytes::from_static(b"alone")).await, Ok(Seq(0)));
    assert!(start.elapsed() >= config().linger, "{:?}", start.elapsed());
    drop(appender);
    driver.await.expect("no panic").expect("clean");
}

#[tokio::test(start_paused = true)]
async fn a_record_with_the_checkpoint_magic_is_refused() {
    let fake = Arc::new(FakeService::new("j", vec![]));
    let writer = claimed(&fake).await;
    let (appender, _driver) = Appender::new(writer, config()).expect("valid");
    let mut r = MAGIC.to_vec();
    r.extend_from_slice(b"spoof");
    assert_eq!(appender.append(Bytes::from(r)).await, Err(AppendError::Record(RecordError::ReservedPrefix)));
    assert!(matches!(appender.append(Bytes::from(vec![0u8; 65])).await, Err(AppendError::RecordTooLarge { .. })));
}

#[tokio::test(start_paused = true)]
async fn a_superseded_appender_fails_every_pending_append_and_stops() {
    let fake = Arc::new(FakeService::new("j", vec![]));
    let writer = claimed(&fake).await;
    fake.set_call_delay(Duration::from_millis(10));
    let other = LeaderUuid::new(0xbeef).expect("non-zero");
    fake.script([Fault::Pass, Fault::ClaimedBefore(other)]);
    let (appender, driver) = Appender::new(writer, config()).expect("valid");
    let driver = tokio::spawn(driver.run());
    let appends = spawn_appends(&appender, 40);
    let mut ok = 0;
    let mut superseded = 0;
    for (_, h) in appends {
        match h.await.expect("no panic") {
            Ok(_) => ok += 1,
            Err(AppendError::Writer(WriterError::Superseded { view })) => {
                assert_eq!(view.leader, Some(other));
                superseded += 1;
            }
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!(ok, fake.records().len(), "exactly the records written got positions");
    assert_eq!(ok + superseded, 40, "no append was dropped silently");
    assert!(superseded > 0);
    assert!(matches!(driver.await.expect("no panic"), Err(AppendError::Writer(WriterError::Superseded { .. }))));
    assert!(matches!(
        appender.append(Bytes::from_static(b"late")).await,
        Err(AppendError::Writer(WriterError::Superseded { .. }))
    ));
}
