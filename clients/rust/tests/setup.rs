//! The one-call setup: `Client::connect`, the builders and their defaults, and what each
//! refuses.

use std::sync::Arc;

use bytes::Bytes;
use paros_client::fake::FakeService;
use paros_client::{
    Appender, AppenderConfig, AppenderConfigError, Checkpointer, CheckpointerConfig, Client, ClientConfig, ConfigError,
    GatewayError, LeaderUuid, Seq, WriterConfig, WriterConfigError, WriterError, Written,
};

fn client(fake: &Arc<FakeService>) -> Client<Arc<FakeService>> {
    Client::with_seed(Arc::clone(fake), ClientConfig::default(), 3).expect("valid")
}

#[cfg(feature = "http")]
#[test]
fn connect_refuses_a_url_that_is_not_http_and_a_token_that_is_not_one() {
    assert!(matches!(Client::connect("ftp://127.0.0.1:7400", "tok.en"), Err(GatewayError::Url { .. })));
    assert!(matches!(Client::connect("http://127.0.0.1:7400", "a token"), Err(GatewayError::BadToken)));
    assert!(matches!(Client::connect("http://127.0.0.1:7400", ""), Err(GatewayError::BadToken)));
    let client = Client::connect("http://127.0.0.1:7400", " tok.en\n").expect("a token is trimmed");
    assert_eq!(client.config(), &ClientConfig::default());
}

#[tokio::test]
async fn a_writer_built_with_the_defaults_claims_and_writes_at_the_tail() {
    let fake = Arc::new(FakeService::new("j", vec![]));
    fake.claim_as(LeaderUuid::new(9).expect("non-zero"));
    fake.write_as(vec![Bytes::from_static(b"before")]);
    let mut writer = client(&fake).writer("j".into()).claim().await.expect("claims");
    assert_eq!(writer.core().next_seq(), Seq(1), "the claim learned the tail");
    assert_eq!(writer.write(vec![Bytes::from_static(b"x")]).await, Ok(Written { seq: Seq(1), count: 1 }));
}

#[tokio::test]
async fn a_writer_builder_refuses_a_bad_config_before_it_sends_anything() {
    let fake = Arc::new(FakeService::new("j", vec![]));
    let bad = WriterConfig { batches_in_flight_max: 0, ..WriterConfig::default() };
    let claimed = client(&fake).writer("j".into()).config(bad).claim().await;
    assert!(matches!(claimed, Err(WriterError::Config(WriterConfigError::BatchesZero))), "{claimed:?}");
    assert!(fake.calls().is_empty() && fake.reads() == 0, "nothing was sent");
}

#[tokio::test]
async fn a_spawned_appender_reports_positions_and_gives_the_writer_back_when_dropped() {
    let fake = Arc::new(FakeService::new("j", vec![]));
    let writer = client(&fake).writer("j".into()).claim().await.expect("claims");
    let (appender, task) = Appender::builder(writer).spawn().expect("the defaults are valid");
    let (a, b) = tokio::join!(appender.append(Bytes::from_static(b"a")), appender.append(Bytes::from_static(b"b")));
    let mut got = [a.expect("appended"), b.expect("appended")];
    got.sort();
    assert_eq!(got, [Seq(0), Seq(1)]);
    drop(appender);
    let writer = task.await.expect("the driver ran").expect("the driver ended cleanly");
    assert_eq!(writer.core().next_seq(), Seq(2));
    assert_eq!(fake.records().len(), 2);

    let writer = client(&fake).writer("j".into()).claim().await.expect("claims again");
    let bad = AppenderConfig { batch_records_max: 0, ..AppenderConfig::default() };
    assert!(matches!(Appender::builder(writer).config(bad).spawn(), Err(AppenderConfigError::BatchRecordsZero)));
}

#[test]
fn the_checkpointer_builder_starts_from_the_defaults_and_refuses_what_new_refuses() {
    let built = Checkpointer::builder().interval_records(10).build().expect("valid");
    assert_eq!(built.config(), &CheckpointerConfig { interval_records: 10, ..CheckpointerConfig::default() });
    assert_eq!(Checkpointer::builder().factor(0).build().unwrap_err(), ConfigError::FactorZero);
    assert!(matches!(Checkpointer::builder().chunk_bytes(0).build(), Err(ConfigError::ChunkBytes { .. })));
}
