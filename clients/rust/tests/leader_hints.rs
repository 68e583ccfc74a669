//! The Client remembers each journal's likely leader: with journals led by different servers, a
//! second call on each goes straight to its leader, and the memory is bounded.

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;
use paros_client::service::{CallReply, JournalService, ReadParams, Route};
use paros_client::{Client, ClientConfig, Decided, ReadAnswer, Writer, WriterConfig};
use paros_core::journal::{JournalView, Outcome};
use paros_core::{Call, CallAnswer, CallId, NodeId, Seq};

/// The first record of a multi-writer journal, accepted.
fn accepted_first() -> Outcome {
    Outcome::Accepted { seq: Seq(0), count: 1, view: JournalView { leader: None, first_seq: Seq(0), next_seq: Seq(1) } }
}

/// Journals named by strings; journal `j` is led by `leaders[j]`, every other server redirects
/// to it. Counts the requests each call took.
struct Led {
    leaders: HashMap<&'static str, NodeId>,
    sent: Mutex<Vec<(&'static str, Option<NodeId>)>>,
}

impl JournalService for Led {
    type Journal = &'static str;

    fn servers(&self) -> Vec<NodeId> {
        vec![NodeId(1), NodeId(2), NodeId(3)]
    }

    async fn call(&self, journal: &&'static str, _id: CallId, _call: &Call, route: Route) -> CallReply {
        self.sent.lock().unwrap().push((journal, route.server));
        let leader = self.leaders[journal];
        if route.server == Some(leader) {
            CallReply::Answer(CallAnswer::Verdict(accepted_first()))
        } else {
            CallReply::Answer(CallAnswer::Redirect { leader: Some(leader) })
        }
    }

    async fn read(&self, _journal: &&'static str, _read: ReadParams, _route: Route) -> ReadAnswer {
        ReadAnswer::Unserved { applied_to: None }
    }
}

fn write() -> Call {
    Call::Write {
        leader: Some(paros_core::LeaderUuid::new(7).unwrap()),
        seq: Seq(0),
        records: vec![Bytes::from_static(b"x")],
    }
}

fn client(max: usize) -> Client<Led> {
    let leaders = HashMap::from([("a", NodeId(1)), ("b", NodeId(2)), ("c", NodeId(3))]);
    let config = ClientConfig { leader_hints_max: max, ..ClientConfig::default() };
    Client::with_seed(Led { leaders, sent: Mutex::new(Vec::new()) }, config, 5).unwrap()
}

async fn sends_for(c: &Client<Led>, journal: &'static str) -> usize {
    let before = c.service().sent.lock().unwrap().len();
    assert!(matches!(c.call(&journal, write()).await, Ok(Decided::Verdict(Outcome::Accepted { .. }))));
    c.service().sent.lock().unwrap().len() - before
}

#[tokio::test]
async fn each_journal_is_asked_first_at_its_own_last_leader() {
    let c = client(16);
    for j in ["a", "b", "c"] {
        sends_for(&c, j).await;
    }
    for j in ["a", "b", "c", "a", "c", "b"] {
        assert_eq!(sends_for(&c, j).await, 1, "journal {j} goes straight to its leader");
    }
    assert_eq!(c.preferred_server(&"b"), Some(NodeId(2)));
    assert_eq!(c.preferred_server(&"c"), Some(NodeId(3)));
}

#[tokio::test]
async fn the_hints_are_bounded_and_forget_the_oldest_first() {
    let c = client(2);
    for j in ["a", "b", "c"] {
        sends_for(&c, j).await;
    }
    // "a" was forgotten: it falls back to the last verdict's server (3), which redirects.
    assert_eq!(c.preferred_server(&"a"), Some(NodeId(3)));
    assert_eq!(sends_for(&c, "a").await, 2);
    assert_eq!(sends_for(&c, "c").await, 1, "c is still remembered");
}

/// Journals nobody leads yet: the first server a call or a read reaches becomes the leader (as
/// a journal woken from dormancy campaigns on the server asked), every other server redirects
/// to it or cannot serve.
struct Electing {
    leaders: Mutex<HashMap<u32, NodeId>>,
}

impl Electing {
    fn elect(&self, journal: u32, route: Route) -> bool {
        let asked = route.server.expect("the client names a server when it knows the servers");
        *self.leaders.lock().unwrap().entry(journal).or_insert(asked) == asked
    }

    fn led_by(&self, server: NodeId) -> usize {
        self.leaders.lock().unwrap().values().filter(|l| **l == server).count()
    }
}

impl JournalService for Electing {
    type Journal = u32;

    fn servers(&self) -> Vec<NodeId> {
        vec![NodeId(1), NodeId(2), NodeId(3)]
    }

    async fn call(&self, journal: &u32, _id: CallId, call: &Call, route: Route) -> CallReply {
        if !self.elect(*journal, route) {
            let leader = self.leaders.lock().unwrap()[journal];
            return CallReply::Answer(CallAnswer::Redirect { leader: Some(leader) });
        }
        let outcome = match call {
            Call::SetLeader { new, .. } => {
                Outcome::Won(JournalView { leader: Some(*new), first_seq: Seq(0), next_seq: Seq(0) })
            }
            _ => accepted_first(),
        };
        CallReply::Answer(CallAnswer::Verdict(outcome))
    }

    async fn read(&self, journal: &u32, _read: ReadParams, route: Route) -> ReadAnswer {
        if self.elect(*journal, route) {
            ReadAnswer::Page {
                from: Seq(0),
                records: Vec::new(),
                view: JournalView { leader: None, first_seq: Seq(0), next_seq: Seq(0) },
            }
        } else {
            ReadAnswer::Unserved { applied_to: None }
        }
    }
}

/// Drawn uniformly, each of three servers leads about a third of `n` journals; sent to one
/// server (the first, or the last verdict's), one would lead nearly all.
fn assert_spread(service: &Electing, n: usize) {
    for server in service.servers() {
        let led = service.led_by(server);
        assert!(led >= n / 6 && led <= n * 3 / 5, "server {server:?} leads {led} of {n} journals");
    }
}

#[tokio::test]
async fn journals_the_client_never_called_are_spread_over_the_servers() {
    let c = Client::with_seed(Electing { leaders: Mutex::new(HashMap::new()) }, ClientConfig::default(), 11).unwrap();
    for j in 0..60 {
        assert!(matches!(c.call(&j, write()).await, Ok(Decided::Verdict(Outcome::Accepted { .. }))));
    }
    assert_spread(c.service(), 60);
    // A read still prefers the last verdict's server for a journal it never read.
    assert_eq!(c.preferred_server(&1000), c.leader_hint(&59).map(|(s, _)| s));
}

#[tokio::test]
async fn writers_claiming_fresh_journals_elect_on_drawn_servers() {
    let c = Client::with_seed(Electing { leaders: Mutex::new(HashMap::new()) }, ClientConfig::default(), 12).unwrap();
    for j in 0..60 {
        let mut writer = Writer::with_seed(c.clone(), j, WriterConfig::default(), u64::from(j) + 1).unwrap();
        let view = writer.claim().await.expect("the claim wins");
        assert!(view.leader.is_some());
    }
    assert_spread(c.service(), 60);
}
