//! `Client::read` carries the read policy out on a paused clock: the first try goes to the
//! server of the last verdict, later tries rotate, a try is cut off at the deadline, a held
//! empty page answers at the end of the wait, and a journal one server does not host yet is
//! read from another.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use paros_client::service::{CallReply, JournalService, ReadParams, Route};
use paros_client::{Client, ClientConfig, Decided, ReadAnswer, ReadDeadline};
use paros_core::journal::{JournalView, Outcome};
use paros_core::{Call, CallAnswer, Consistency, LeaderUuid, NodeId, Seq};
use tokio::time::Instant;

/// What one server does with a read.
#[derive(Clone, Debug)]
enum Serve {
    /// Answers this after that long.
    After(Duration, ReadAnswer),
    /// Never answers.
    Hang,
}

/// Three servers; each answers reads by its script (the last entry repeats) and calls with an
/// acknowledgement of the first record. Records every read as (server, wait_ms, when).
struct Scripted {
    started: Instant,
    scripts: Mutex<HashMap<NodeId, Vec<Serve>>>,
    reads: Mutex<Vec<(NodeId, u32, Duration)>>,
}

fn view(next: u64) -> JournalView {
    JournalView { leader: None, first_seq: Seq(0), next_seq: Seq(next) }
}

impl Scripted {
    fn new(scripts: [(u64, Vec<Serve>); 3]) -> Scripted {
        let scripts = scripts.into_iter().map(|(n, s)| (NodeId(n), s)).collect();
        Scripted { started: Instant::now(), scripts: Mutex::new(scripts), reads: Mutex::new(Vec::new()) }
    }

    fn reads(&self) -> Vec<(NodeId, u32, Duration)> {
        self.reads.lock().unwrap().clone()
    }
}

impl JournalService for Scripted {
    type Journal = &'static str;

    fn servers(&self) -> Vec<NodeId> {
        vec![NodeId(1), NodeId(2), NodeId(3)]
    }

    async fn call(&self, _journal: &&'static str, _id: paros_core::CallId, _call: &Call, _route: Route) -> CallReply {
        CallReply::Answer(CallAnswer::Verdict(Outcome::Accepted { seq: Seq(0), count: 1, view: view(1) }))
    }

    async fn read(&self, _journal: &&'static str, read: ReadParams, route: Route) -> ReadAnswer {
        let server = route.server.expect("the client names a server");
        self.reads.lock().unwrap().push((server, read.wait_ms, self.started.elapsed()));
        let serve = {
            let mut scripts = self.scripts.lock().unwrap();
            let script = scripts.get_mut(&server).expect("a known server");
            if script.len() > 1 { script.remove(0) } else { script[0].clone() }
        };
        match serve {
            Serve::After(delay, answer) => {
                tokio::time::sleep(delay).await;
                answer
            }
            Serve::Hang => std::future::pending().await,
        }
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn params() -> ReadParams {
    ReadParams { from: Seq(1), limit: 10, max_bytes: 1024, wait_ms: 0, consistency: Consistency::Linearizable }
}

fn page() -> ReadAnswer {
    ReadAnswer::Page { from: Seq(1), records: vec![Bytes::from_static(b"b")], view: view(2) }
}

fn empty() -> ReadAnswer {
    ReadAnswer::Page { from: Seq(1), records: vec![], view: view(1) }
}

/// A client over `service` whose last verdict came from the server it asked first.
async fn client_after_a_write(service: Scripted) -> (Client<Scripted>, NodeId) {
    let client = Client::with_seed(service, ClientConfig::default(), 9).expect("valid");
    let write = Call::Write { leader: LeaderUuid::new(7), seq: Seq(0), records: vec![Bytes::from_static(b"a")] };
    assert!(matches!(client.call(&"j", write).await, Ok(Decided::Verdict(_))));
    let leader = client.preferred_server(&"j").expect("the verdict's server");
    (client, leader)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_first_try_goes_to_the_last_verdicts_server_and_unserved_rotates_after_a_backoff() {
    let unserved = || vec![Serve::After(ms(5), ReadAnswer::Unserved { applied_to: None })];
    let service = Scripted::new([(1, unserved()), (2, unserved()), (3, unserved())]);
    let (client, leader) = client_after_a_write(service).await;
    client.service().scripts.lock().unwrap().insert(NodeId(leader.0 % 3 + 1), vec![Serve::After(ms(5), page())]);
    let started = Instant::now();
    let answer = client.read(&"j", params(), ReadDeadline { wait_until: ms(200), give_up_at: ms(2200) }).await;
    assert_eq!(answer, page());
    let reads = client.service().reads();
    assert_eq!(reads.iter().map(|r| r.0).collect::<Vec<_>>(), vec![leader, NodeId(leader.0 % 3 + 1)]);
    assert_eq!(reads[0].1, 200, "the first try waits the whole wait");
    assert!(reads[1].1 < 195, "the second waits what is left: {}", reads[1].1);
    let took = started.elapsed();
    let backoff = ClientConfig::default().backoff_base;
    assert!(took >= ms(10) + backoff, "the second try waited a backoff: {took:?}");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_try_no_server_answers_is_cut_off_at_give_up_at_and_its_grace() {
    let service = Scripted::new([(1, vec![Serve::Hang]), (2, vec![Serve::Hang]), (3, vec![Serve::Hang])]);
    let client = Client::with_seed(service, ClientConfig::default(), 3).expect("valid");
    let started = Instant::now();
    let reached = ReadParams { consistency: Consistency::Reached(Seq(50)), ..params() };
    let answer = client.read(&"j", reached, ReadDeadline { wait_until: ms(200), give_up_at: ms(200) }).await;
    assert_eq!(answer, ReadAnswer::Unserved { applied_to: None }, "no server said how far it had applied");
    let grace = ClientConfig::default().read_answer_grace;
    assert_eq!(
        started.elapsed(),
        ms(200) + grace,
        "the server was asked to wait until the deadline: its answer had the grace to come back, to the millisecond"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_server_that_answers_just_after_the_deadline_it_was_asked_to_wait_for_is_heard() {
    // The server's clock ticks past the wait before it answers: 15 ms late.
    let late = || vec![Serve::After(ms(215), ReadAnswer::Unserved { applied_to: Some(Seq(4)) })];
    let service = Scripted::new([(1, late()), (2, late()), (3, late())]);
    let client = Client::with_seed(service, ClientConfig::default(), 3).expect("valid");
    let started = Instant::now();
    let reached = ReadParams { consistency: Consistency::Reached(Seq(50)), ..params() };
    let answer = client.read(&"j", reached, ReadDeadline { wait_until: ms(200), give_up_at: ms(200) }).await;
    assert_eq!(answer, ReadAnswer::Unserved { applied_to: Some(Seq(4)) }, "its answer, not a cut-off");
    assert_eq!(started.elapsed(), ms(215), "answered when it came back");
    assert_eq!(client.service().reads().len(), 1, "and no server asked after the deadline");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_unserved_read_ends_carrying_the_furthest_applied_position_a_server_named() {
    let unserved =
        |applied_to: Option<u64>| vec![Serve::After(ms(5), ReadAnswer::Unserved { applied_to: applied_to.map(Seq) })];
    let service = Scripted::new([(1, unserved(Some(3))), (2, unserved(Some(7))), (3, unserved(None))]);
    let client = Client::with_seed(service, ClientConfig::default(), 3).expect("valid");
    let reached = ReadParams { consistency: Consistency::Reached(Seq(50)), ..params() };
    let answer = client.read(&"j", reached, ReadDeadline { wait_until: ms(200), give_up_at: ms(200) }).await;
    let asked: std::collections::BTreeSet<NodeId> = client.service().reads().iter().map(|r| r.0).collect();
    assert_eq!(asked.len(), 3, "every server was asked: {asked:?}");
    assert_eq!(answer, ReadAnswer::Unserved { applied_to: Some(Seq(7)) }, "the furthest any server had applied");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_early_empty_page_is_the_answer_at_the_end_of_the_wait() {
    // Every server caps its long-poll at 30 ms and then hangs (a slow server): the page held
    // from the first answers at wait_until, not at give_up_at.
    let capped = || vec![Serve::After(ms(30), empty()), Serve::Hang];
    let service = Scripted::new([(1, capped()), (2, capped()), (3, capped())]);
    let client = Client::with_seed(service, ClientConfig::default(), 3).expect("valid");
    let started = Instant::now();
    let answer = client.read(&"j", params(), ReadDeadline { wait_until: ms(200), give_up_at: ms(2200) }).await;
    assert_eq!(answer, empty());
    assert_eq!(started.elapsed(), ms(200));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_journal_one_server_does_not_host_yet_is_read_from_another() {
    let unknown = || vec![Serve::After(ms(1), ReadAnswer::UnknownJournal)];
    let service = Scripted::new([(1, unknown()), (2, unknown()), (3, unknown())]);
    let (client, leader) = client_after_a_write(service).await;
    client.service().scripts.lock().unwrap().insert(NodeId((leader.0 + 1) % 3 + 1), vec![Serve::After(ms(1), page())]);
    let started = Instant::now();
    let answer = client.read(&"j", params(), ReadDeadline { wait_until: ms(200), give_up_at: ms(2200) }).await;
    assert_eq!(answer, page());
    assert_eq!(client.service().reads().len(), 3, "the three servers in a row");
    assert_eq!(started.elapsed(), ms(3), "without a backoff");
}
