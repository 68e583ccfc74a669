//! One client test suite, run twice: against the in-cell service (paros-client over the node
//! RPC, as the registry and `paros bench` use it) and against the HTTP service (the same
//! library over the gateway's API v1 with a tenant token). Each case is generic over
//! [`JournalService`]: the Writer claims, pipelines and is superseded; Truncate leaves a gap the
//! Reader reports; the Appender batches; a Checkpointer's run restores a Folder across the gap.

mod common;

use std::time::Duration;

use bytes::Bytes;
use paros_api::{JournalName, Token};
use paros_client::http::{HttpConfig, HttpService};
use paros_client::service::{ReadParams, Route};
use paros_client::{
    Appender, AppenderConfig, Checkpointable, Checkpointer, CheckpointerConfig, Client, ClientConfig, FoldEvent,
    Folder, FolderConfig, JournalService, ReadConsistency, Reader, ReaderConfig, ReaderOutcome, Writer, WriterConfig,
    WriterError,
};
use paros_core::{JournalKey, Seq};

use common::{create, signup, world};

/// A state that is a chained digest of what it folded, so equal states folded equal records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Tally {
    count: u64,
    digest: u32,
}

impl Checkpointable for Tally {
    type RestoreError = String;

    fn apply(&mut self, position: Seq, record: &[u8]) {
        self.count += 1;
        self.digest = crc32c::crc32c_append(crc32c::crc32c_append(self.digest, &position.0.to_le_bytes()), record);
    }

    fn checkpoint(&self) -> Vec<u8> {
        let mut out = self.count.to_le_bytes().to_vec();
        out.extend_from_slice(&self.digest.to_le_bytes());
        out
    }

    fn restore(bytes: &[u8]) -> Result<Self, String> {
        let b: [u8; 12] = bytes.try_into().map_err(|_| format!("{} bytes, not 12", bytes.len()))?;
        Ok(Tally {
            count: u64::from_le_bytes(b[..8].try_into().unwrap()),
            digest: u32::from_le_bytes(b[8..].try_into().unwrap()),
        })
    }
}

fn batch(tag: &str, from: u64, n: u64) -> Vec<Bytes> {
    (from..from + n).map(|i| Bytes::from(format!("{tag}-{i}"))).collect()
}

/// Everything from `from` to the tail, gaps reported as they come.
async fn read_through<S: JournalService + 'static>(
    client: &Client<S>,
    journal: &S::Journal,
    from: Seq,
) -> Vec<ReaderOutcome> {
    let mut reader =
        Reader::new(client.clone(), journal.clone(), from, ReaderConfig::default(), ReadConsistency::Linearizable, 0)
            .unwrap();
    let mut seen = Vec::new();
    for _ in 0..1000 {
        match reader.next().await.expect("answers are well formed") {
            ReaderOutcome::Records { records, .. } if records.is_empty() => return seen,
            o @ (ReaderOutcome::Records { .. } | ReaderOutcome::Gap { .. }) => seen.push(o),
            ReaderOutcome::Retry { .. } => tokio::time::sleep(Duration::from_millis(10)).await,
            other => panic!("the reader got {other:?}"),
        }
    }
    panic!("the reader never reached the tail");
}

fn records_of(outcomes: &[ReaderOutcome]) -> Vec<(u64, Bytes)> {
    let mut out = Vec::new();
    for o in outcomes {
        if let ReaderOutcome::Records { from, records, .. } = o {
            out.extend((from.0..).zip(records.iter().cloned()));
        }
    }
    out
}

/// The Writer: claim, pipelined writes at consecutive positions, a rival's claim supersedes it
/// (its next write is refused, naming the rival), the rival truncates, and a Reader from 0 reports
/// the truncated range as a gap, then the retained records in order.
async fn writer_is_superseded_and_the_reader_reports_the_gap<S: JournalService + 'static>(
    client: Client<S>,
    journal: S::Journal,
) {
    let mut first = Writer::with_seed(client.clone(), journal.clone(), WriterConfig::default(), 11).unwrap();
    let view = first.claim().await.expect("the first writer claims");
    assert_eq!(view.next_seq, Seq(0));
    for i in 0..4 {
        first.submit(batch("a", i * 3, 3)).expect("room for four batches");
    }
    for i in 0..4u64 {
        let (seq, written) = first.next_report().await.expect("a report per batch");
        assert_eq!(seq, Seq(i * 3), "batches land at consecutive positions");
        written.expect("accepted");
    }
    assert_eq!(first.write(batch("a", 12, 2)).await.expect("accepted").seq, Seq(12));

    let mut rival = Writer::with_seed(client.clone(), journal.clone(), WriterConfig::default(), 22).unwrap();
    let rival_view = rival.claim().await.expect("the rival claims");
    assert_eq!(rival_view.next_seq, Seq(14), "the rival learns the tail");
    match first.write(batch("a", 14, 1)).await {
        Err(WriterError::Superseded { view }) => {
            assert_eq!(view.leader, rival.core().uuid(), "the refusal names the new writer")
        }
        other => panic!("the superseded writer wrote: {other:?}"),
    }
    assert_eq!(rival.write(batch("b", 14, 2)).await.expect("the rival writes").seq, Seq(14));
    let trimmed = rival.truncate(Seq(9)).await.expect("the writer in force truncates");
    assert_eq!(trimmed.first_seq, Seq(9));
    assert!(first.truncate(Seq(12)).await.is_err(), "the superseded writer may not truncate");

    let outcomes = read_through(&client, &journal, Seq(0)).await;
    assert!(
        matches!(outcomes.first(), Some(ReaderOutcome::Gap { from: Seq(0), resumed_at: Seq(9), .. })),
        "the truncated range is reported as a gap first: {outcomes:?}"
    );
    let mut want: Vec<(u64, Bytes)> = (9..14).zip(batch("a", 9, 5)).collect();
    want.extend((14..16).zip(batch("b", 14, 2)));
    assert_eq!(records_of(&outcomes), want, "every retained record, in order, once");
}

/// The Appender batches records appended one by one, each acknowledged at its own position.
async fn the_appender_batches_and_acknowledges_each_record<S: JournalService + 'static>(
    client: Client<S>,
    journal: S::Journal,
) {
    let mut writer = Writer::with_seed(client.clone(), journal.clone(), WriterConfig::default(), 33).unwrap();
    writer.claim().await.expect("claims");
    let config = AppenderConfig { batch_records_max: 8, linger: Duration::from_millis(2), ..AppenderConfig::default() };
    let (appender, driver) = Appender::new(writer, config).unwrap();
    let driving = tokio::spawn(driver.run());
    let records = batch("x", 0, 40);
    let acks = futures_util::future::join_all(records.iter().cloned().map(|r| {
        let appender = appender.clone();
        async move { appender.append(r).await }
    }))
    .await;
    let mut positions: Vec<u64> = acks.into_iter().map(|a| a.expect("acknowledged").0).collect();
    positions.sort_unstable();
    assert_eq!(positions, (0..40).collect::<Vec<_>>(), "each record at its own position");
    drop(appender);
    driving.await.unwrap().expect("the driver ends cleanly");
    let read = records_of(&read_through(&client, &journal, Seq(0)).await);
    assert_eq!(read.len(), 40);
}

/// A Checkpointer's run, appended by the Writer, lets a Folder that meets the truncation's gap
/// restore the owner's state and fold on.
async fn a_checkpoint_run_restores_a_folder_across_the_gap<S: JournalService + 'static>(
    client: Client<S>,
    journal: S::Journal,
) {
    let mut writer = Writer::with_seed(client.clone(), journal.clone(), WriterConfig::default(), 44).unwrap();
    writer.claim().await.expect("claims");
    let mut owner = Tally::default();
    let written = writer.write(batch("e", 0, 10)).await.expect("accepted");
    for (at, r) in (written.seq.0..).zip(batch("e", 0, 10)) {
        owner.apply(Seq(at), &r);
    }
    let mut checkpointer =
        Checkpointer::new(CheckpointerConfig { chunk_bytes: 5, ..CheckpointerConfig::default() }).unwrap();
    let run = checkpointer.begin(&owner, Seq(10)).expect("a run is planned");
    let written = writer.write(run.records.clone()).await.expect("the run is appended");
    let truncate =
        checkpointer.acknowledged(written.seq, written.count).expect("an expected ack").expect("the run is whole");
    writer.truncate(truncate.up_to).await.expect("truncated to the run's Begin");
    checkpointer.truncate_settled();
    let after = writer.write(batch("e", 10, 3)).await.expect("accepted");
    for (at, r) in (after.seq.0..).zip(batch("e", 10, 3)) {
        owner.apply(Seq(at), &r);
    }

    let mut folder = Folder::new(Tally::default(), Seq(0), FolderConfig::default());
    let mut restored = false;
    for o in read_through(&client, &journal, Seq(0)).await {
        let events = match o {
            ReaderOutcome::Gap { from, resumed_at, .. } => folder.gap(from, resumed_at).unwrap(),
            ReaderOutcome::Records { from, records, .. } => folder.fold_page(from, &records).unwrap(),
            _ => unreachable!(),
        };
        restored |= events.iter().any(|e| matches!(e, FoldEvent::Restored { .. }));
    }
    assert!(restored, "the run restored the folder");
    assert!(folder.is_whole());
    assert_eq!(*folder.state(), owner, "the reader's fold equals the owner's state");
}

/// Unfenced appends on a multi-writer journal: concurrent ones land at distinct positions, each
/// acknowledged with its own count, and read back exactly once each.
async fn concurrent_appends_land_once_each<S: JournalService + 'static>(client: Client<S>, journal: S::Journal) {
    let appends = (0..8u64).map(|i| {
        let (client, journal) = (client.clone(), journal.clone());
        async move {
            client
                .call(&journal, paros_core::Call::Write { leader: None, seq: Seq(0), records: batch("m", i * 2, 2) })
                .await
        }
    });
    let mut at: Vec<u64> = Vec::new();
    for decided in futures_util::future::join_all(appends).await {
        match decided {
            Ok(paros_client::Decided::Verdict(paros_core::journal::Outcome::Accepted { seq, count: 2, .. })) => {
                at.push(seq.0)
            }
            other => panic!("an append answered {other:?}"),
        }
    }
    at.sort_unstable();
    assert_eq!(at, (0..8).map(|i| i * 2).collect::<Vec<_>>(), "eight appends of two, at distinct positions");
    let mut read: Vec<Bytes> =
        records_of(&read_through(&client, &journal, Seq(0)).await).into_iter().map(|(_, r)| r).collect();
    read.sort();
    let mut want = batch("m", 0, 16);
    want.sort();
    assert_eq!(read, want, "every appended record once");
}

/// Both services over one cell: the gateway listens on a loopback port for the HTTP one.
struct Services {
    _world: common::World,
    in_cell: Client<paros_embedded::CellService>,
    url: String,
    directory: tokio::sync::watch::Receiver<paros_registry::daemon::Followed>,
    tenant: paros_core::TenantId,
    token: String,
}

async fn services() -> Services {
    let w = world().await;
    let (tenant, token, _) = signup(&w.router, "suite").await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(paros_gateway::serve(listener, w.gateway.clone()));
    let tenant = paros_core::TenantId(u64::from_str_radix(&tenant, 16).unwrap());
    Services { in_cell: w.cell.client.clone(), url, directory: w.cell.directory(), _world: w, tenant, token }
}

impl Services {
    /// The HTTP service, speaking HTTP/2 or not, writing over append sessions or not.
    fn http(&self, http2: bool, sessions: bool) -> Client<HttpService> {
        let config = HttpConfig { http2, sessions, ..HttpConfig::default() };
        let service = HttpService::new(&self.url, Some(&Token::parse(&self.token).unwrap()), config).unwrap();
        Client::with_seed(service, ClientConfig::default(), 7).unwrap()
    }

    /// A fresh journal: its name (the HTTP service's handle) and its key (the cell's).
    async fn journal(&self, name: &str, mode: Option<&str>) -> (JournalName, JournalKey) {
        create(&self._world.router, &self.token, name, mode).await;
        let name = JournalName::parse(name).unwrap();
        let d = self.directory.borrow().directory.clone().expect("folded");
        let key = d.journal_by_name(self.tenant, &name).expect("created").key;
        // A create answers once one node hosts the journal; the in-cell client talks to every
        // node itself, so wait until each one serves a linearizable read of it.
        let service = self.in_cell.service();
        let read = ReadParams {
            from: Seq(0),
            limit: 1,
            max_bytes: 1,
            wait_ms: 0,
            consistency: paros_core::Consistency::Linearizable,
        };
        for server in service.servers() {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !matches!(
                service.read(&key, read, Route { server: Some(server), attempt: 0 }).await,
                paros_client::ReadAnswer::Page { .. }
            ) {
                assert!(std::time::Instant::now() < deadline, "node {server:?} never served the new journal");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        (name, key)
    }
}

macro_rules! both {
    ($case:ident) => {
        both!($case, None);
    };
    ($case:ident, $mode:expr) => {
        mod $case {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn in_cell() {
                let s = services().await;
                let (_, key) = s.journal("j", $mode).await;
                super::$case(s.in_cell.clone(), key).await;
            }

            /// The library's default: HTTP/2, writes on append sessions.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn over_http2_sessions() {
                let s = services().await;
                let (name, _) = s.journal("j", $mode).await;
                super::$case(s.http(true, true), name).await;
            }

            /// Sessions over HTTP/1.1: the request streams while the answer does.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn over_http1_sessions() {
                let s = services().await;
                let (name, _) = s.journal("j", $mode).await;
                super::$case(s.http(false, true), name).await;
            }

            /// One plain request per call, over HTTP/1.1.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn over_http1_requests() {
                let s = services().await;
                let (name, _) = s.journal("j", $mode).await;
                super::$case(s.http(false, false), name).await;
            }
        }
    };
}

both!(writer_is_superseded_and_the_reader_reports_the_gap);
both!(the_appender_batches_and_acknowledges_each_record);
both!(a_checkpoint_run_restores_a_folder_across_the_gap);
both!(concurrent_appends_land_once_each, Some("multi_writer"));
