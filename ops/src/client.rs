//! A minimal cell client over the node RPC: follows redirects, bounds every retry.
//! (The full client library with Writer/Reader arrives with clients/rust.)

use std::time::Duration;

use paros_bus::InProcessBus;
use paros_core::journal::JournalView;
use paros_core::{Call, CallAnswer, Consistency, JournalKey, NodeId, ReadAnswer, ReadRequest, Seq};
use paros_node::rpc::{NodeAnswer, NodeRequest, Rpc};

/// Client bounds.
#[derive(Clone, Copy, Debug)]
pub struct ClientConfig {
    pub request_timeout: Duration,
    pub redirects_max: u32,
    pub redirect_backoff: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig { request_timeout: Duration::from_secs(2), redirects_max: 64, redirect_backoff: Duration::from_millis(10) }
    }
}

/// How a decided call ended for the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decided {
    Verdict(paros_core::journal::Outcome),
    TooLarge,
    /// No verdict: the call may or may not have taken effect.
    Ambiguous,
    /// No node would take it within the redirect bound.
    Unavailable,
    UnknownJournal,
}

/// A client of the embedded cell.
#[derive(Clone, Debug)]
pub struct CellClient {
    bus: InProcessBus,
    nodes: Vec<NodeId>,
    config: ClientConfig,
}

impl CellClient {
    #[must_use]
    pub fn new(bus: InProcessBus, nodes: Vec<NodeId>, config: ClientConfig) -> CellClient {
        CellClient { bus, nodes, config }
    }

    fn next_node(&self, at: usize) -> usize {
        (at + 1) % self.nodes.len()
    }

    /// Sends `call` to the node at `*hint`, following redirects; `*hint` ends at the node that
    /// answered with a verdict.
    pub async fn call(&self, journal: JournalKey, call: &Call, hint: &mut usize) -> Decided {
        for _ in 0..self.config.redirects_max {
            let to = self.nodes[*hint];
            let request = NodeRequest::Call { journal, call: call.clone() };
            match self.bus.request(to, request, self.config.request_timeout).await {
                Ok(NodeAnswer::Call(CallAnswer::Verdict(o))) => return Decided::Verdict(o),
                Ok(NodeAnswer::Call(CallAnswer::TooLarge(_))) => return Decided::TooLarge,
                Ok(NodeAnswer::Call(CallAnswer::Redirect { leader: Some(l) })) if l != to => {
                    *hint = self.nodes.iter().position(|n| *n == l).unwrap_or_else(|| self.next_node(*hint));
                }
                Ok(NodeAnswer::Call(CallAnswer::Redirect { .. } | CallAnswer::Busy)) => {
                    *hint = self.next_node(*hint);
                    tokio::time::sleep(self.config.redirect_backoff).await;
                }
                Ok(NodeAnswer::Call(CallAnswer::NoVerdict)) | Err(_) => return Decided::Ambiguous,
                Ok(NodeAnswer::UnknownJournal) => return Decided::UnknownJournal,
                Ok(NodeAnswer::Read(_)) => return Decided::Ambiguous,
            }
        }
        Decided::Unavailable
    }

    /// A linearizable page from `from`, trying each node in turn.
    pub async fn read(&self, journal: JournalKey, from: Seq, hint: usize) -> Option<ReadAnswer> {
        for i in 0..self.nodes.len() * 4 {
            let to = self.nodes[(hint + i) % self.nodes.len()];
            let read = ReadRequest { from, limit: 0, max_bytes: 0, wait_ticks: 0, consistency: Consistency::Linearizable };
            match self.bus.request(to, NodeRequest::Read { journal, read }, self.config.request_timeout).await {
                Ok(NodeAnswer::Read(ReadAnswer::Unserved)) | Err(_) => tokio::time::sleep(self.config.redirect_backoff).await,
                Ok(NodeAnswer::Read(a)) => return Some(a),
                Ok(_) => return None,
            }
        }
        None
    }

    /// The journal's current view, from a linearizable read at its start.
    pub async fn view(&self, journal: JournalKey, hint: usize) -> Option<JournalView> {
        match self.read(journal, Seq(0), hint).await? {
            ReadAnswer::Page { view, .. } | ReadAnswer::Truncated(view) => Some(view),
            ReadAnswer::Unserved => None,
        }
    }
}
