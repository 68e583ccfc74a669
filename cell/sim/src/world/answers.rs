//! The answers audit: an answer counts only for the request it answers (issue 29, seed
//! 41003456). The world sees every request a journal sends (a catch-up request, a watermark
//! round) and every life boundary of that journal on its machine (a boot, a sleep, a wake); for
//! each answer delivered it finds the request it answers and judges whether that request came
//! from the journal's current life. The host must drop exactly the answers to earlier lives.
//!
//! Requests are matched by everything the answer echoes (asker, peer, journal, kind, round id,
//! life), oldest first: with lives that never repeat, only requests of one life share a key, so
//! the oldest is as good as any; a host that reused ids across lives would pair a late answer
//! with the earlier life's request, and the audit then sees it taken.

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;

use paros_core::{JournalKey, Life, Message, NodeId};

/// What an answer echoes of its request: who asked whom, about which journal, which kind of
/// request (0: catch-up, 1: watermark round), the round id (0 for catch-up) and the life.
type RequestKey = (NodeId, NodeId, JournalKey, u8, u64, Life);

/// The key of a request `from` sends `to`, if the message is one answered by life.
fn request_key(from: NodeId, to: NodeId, journal: JournalKey, m: &Message) -> Option<RequestKey> {
    match m {
        Message::CatchUpRequest { life, .. } => Some((from, to, journal, 0, 0, *life)),
        Message::WatermarkRequest { read, life } => Some((from, to, journal, 1, *read, *life)),
        _ => None,
    }
}

/// The key of the request the answer `from` sends `to` answers, if it answers one by life.
fn answer_key(from: NodeId, to: NodeId, journal: JournalKey, m: &Message) -> Option<RequestKey> {
    match m {
        Message::CatchUpResponse { life, .. } | Message::TrimmedTo { life, .. } => {
            Some((to, from, journal, 0, 0, *life))
        }
        Message::Watermark { read, life, .. } => Some((to, from, journal, 1, *read, *life)),
        _ => None,
    }
}

/// Requests in flight and the journals' life boundaries, on one logical clock.
#[derive(Debug, Default)]
pub struct Answers {
    clock: u64,
    /// Each request copy handed to the network, by key: the clock it left at.
    sent: HashMap<RequestKey, VecDeque<u64>>,
    /// The last boot of each machine, and the last sleep or wake of each journal on one.
    booted: HashMap<NodeId, u64>,
    bounds: HashMap<(NodeId, JournalKey), u64>,
}

impl Answers {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Machine `node` booted: every journal on it begins a new life.
    pub fn booted(&mut self, node: NodeId) {
        let t = self.tick();
        self.booted.insert(node, t);
    }

    /// `journal` went to sleep or woke on `node`: its life there ended or began.
    pub fn life_bound(&mut self, node: NodeId, journal: JournalKey) {
        let t = self.tick();
        self.bounds.insert((node, journal), t);
    }

    /// A copy of a message left `from` for `to`.
    pub fn sent(&mut self, from: NodeId, to: NodeId, journal: JournalKey, m: &Message) {
        if let Some(key) = request_key(from, to, journal, m) {
            let t = self.tick();
            self.sent.entry(key).or_default().push_back(t);
        }
    }

    /// An answer from `from` reaches `to`: `Some(true)` when the request it answers came from an
    /// earlier life of the journal there, `Some(false)` when from the current one, `None` when it
    /// answers no request by life (or one this audit never saw leave).
    pub fn delivered(&mut self, from: NodeId, to: NodeId, journal: JournalKey, m: &Message) -> Option<bool> {
        let key = answer_key(from, to, journal, m)?;
        let queue = self.sent.get_mut(&key)?;
        let asked = queue.pop_front()?;
        if queue.is_empty() {
            self.sent.remove(&key);
        }
        let began =
            self.booted.get(&to).copied().unwrap_or(0).max(self.bounds.get(&(to, journal)).copied().unwrap_or(0));
        Some(asked < began)
    }
}
