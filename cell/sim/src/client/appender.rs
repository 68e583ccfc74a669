//! A multi-writer client: one of several appenders racing for the tail of a multi-writer journal.
//!
//! paros-client has no sans-IO appender for multi-writer journals: its `Appender` batches over the
//! fenced `Writer` (a `WriterCore`), and an unfenced append is `Client::call` with
//! `Call::Write { leader: None, .. }`, carried by a [`CallPolicy`]. This client drives exactly
//! that: every append is one `CallPolicy` over an unfenced Write, so retries, redirects, backoff
//! and the rule that an append that may have landed is never re-sent (the fold cannot tell a
//! retry from a second append: `NoVerdict` or no answer end it [`Decided::Ambiguous`]) are the
//! library's. What the library leaves to its caller is the appender's own:
//! - A batch's `seq` is the tail the appender last heard of (the fold ignores it: the batch lands
//!   at the tail, wherever that is); now and then any position, below the floor or past the tail.
//! - An append that ended ambiguous is sometimes appended again as a new call with the identical
//!   request (at-least-once: both may land), an `Unavailable` one always (nothing happened), up to
//!   a bound of sends per batch.
//! - Some appenders truncate now and then (`Truncate { leader: None, .. }`), at or below every
//!   folding reader's cursor and the tail they heard of.
//!
//! Beside its batches it sometimes sends a probe: a call shaped for a single-writer journal (a
//! fenced Write or Truncate under a fresh uuid, or a SetLeader), which must be `WrongMode`, or an
//! empty append, which must be `Refused`. A probe's answer changes nothing in the appender.
//!
//! Records name their appender and batch (`a0.1.17.2~xx`), not a position: the appender cannot
//! know where its batch lands until it is acknowledged.

use std::collections::BTreeMap;

use bytes::Bytes;
use paros_client::{AnswerError, CallPolicy, ClientConfig, Decided};
use paros_core::journal::{JournalView, Outcome};
use paros_core::rng::Rng;
use paros_core::{Call, LeaderUuid, NodeId, Seq};

use super::call::Flight;
use super::{ClientCtx, ClientEvent, ClientIo, Reply, Request};
use crate::check::Probe;
use crate::rng::SimRng;

/// How an appender behaves; drawn per appender from the seed.
#[derive(Clone, Copy, Debug)]
pub struct AppenderParams {
    /// Appends in flight at once.
    pub pipeline: usize,
    pub batch_records_max: u64,
    pub record_bytes_max: u64,
    /// Pause between batches, in ns.
    pub batch_gap_ns: (u64, u64),
    /// Chance that a batch whose append ended ambiguous is appended again.
    pub reappend_ppm: u64,
    /// Sends of one batch at most (its first append counts).
    pub appends_per_batch_max: u32,
    /// Chance per batch that its `seq` is a stray position instead of the tail heard of.
    pub stray_seq_ppm: u64,
    /// Pause between truncations, in ns (`None`: this appender never truncates).
    pub truncate_gap_ns: Option<(u64, u64)>,
    /// Chances per batch of also sending each probe (see the module doc).
    pub wrong_mode_ppm: u64,
    pub empty_append_ppm: u64,
    /// The bounds of every call's retries.
    pub call: ClientConfig,
}

/// One batch's append in flight.
#[derive(Debug)]
struct Append {
    call: Call,
    records: Vec<Bytes>,
    flight: Flight,
    /// Appends of this batch so far, this one included.
    sends: u32,
}

/// One appender workload client.
#[derive(Debug)]
pub struct Appender {
    name: String,
    voters: Vec<NodeId>,
    rng: SimRng,
    params: AppenderParams,
    tick_ns: u64,
    hint: Option<NodeId>,
    /// The newest journal state this appender heard of (`next_seq` and `first_seq` only grow).
    view: JournalView,
    batch_no: u64,
    next_batch_at: u64,
    next_truncate_at: u64,
    appends: BTreeMap<u64, Append>,
    next_append: u64,
    truncate: Option<Flight>,
    stopping: bool,
}

impl Appender {
    /// The journal's voters changed (a seat moved, as the registry the gateway folds says): the
    /// calls from now on ask these.
    pub fn set_voters(&mut self, voters: Vec<NodeId>) {
        self.voters = voters;
    }

    #[must_use]
    pub fn new(
        name: String,
        voters: Vec<NodeId>,
        mut rng: SimRng,
        params: AppenderParams,
        tick_ns: u64,
        start_at: u64,
    ) -> Appender {
        let next_truncate_at = params.truncate_gap_ns.map_or(u64::MAX, |(lo, hi)| start_at + rng.between(lo, hi));
        Appender {
            name,
            voters,
            rng,
            params,
            tick_ns,
            hint: None,
            view: JournalView::default(),
            batch_no: 0,
            next_batch_at: start_at,
            next_truncate_at,
            appends: BTreeMap::new(),
            next_append: 0,
            truncate: None,
            stopping: false,
        }
    }

    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True while a call is under way (sent, or waiting for its retry).
    #[must_use]
    pub fn busy(&self) -> bool {
        !self.appends.is_empty() || self.truncate.is_some()
    }

    fn policy(&mut self, call: Call) -> CallPolicy {
        let rng = Rng::new(self.rng.u64());
        CallPolicy::new(call, self.voters.clone(), self.hint, self.params.call, rng)
            .expect("the drawn call bounds are valid")
    }

    /// Every view this appender hears is a state the journal passed: keep the newest bounds.
    fn heard(&mut self, view: JournalView) {
        self.view.first_seq = self.view.first_seq.max(view.first_seq);
        self.view.next_seq = self.view.next_seq.max(view.next_seq).max(self.view.first_seq);
    }

    /// Time passed: append, retry or truncate as due.
    pub fn wake(&mut self, now: u64, ctx: ClientCtx, io: &mut ClientIo) {
        self.stopping = ctx.stopping;
        for a in self.appends.values_mut() {
            a.flight.wake(now, io);
        }
        if let Some(f) = &mut self.truncate {
            f.wake(now, io);
        }
        if ctx.stopping {
            return;
        }
        if self.appends.len() < self.params.pipeline && now >= self.next_batch_at {
            let (lo, hi) = self.params.batch_gap_ns;
            self.next_batch_at = now + self.rng.between(lo, hi);
            self.batch_no += 1;
            let count = self.rng.between(1, self.params.batch_records_max);
            let records: Vec<Bytes> = (0..count).map(|i| self.record(i)).collect();
            let seq = if self.rng.chance(self.params.stray_seq_ppm) {
                self.rng.below(self.view.next_seq.0 + 16)
            } else {
                self.view.next_seq.0
            };
            self.start_append(
                now,
                Call::Write { leader: None, seq: Seq(seq), records: records.clone() },
                records,
                1,
                io,
            );
            self.probe(io);
        }
        if let Some((lo, hi)) = self.params.truncate_gap_ns
            && self.truncate.is_none()
            && now >= self.next_truncate_at
        {
            self.next_truncate_at = now + self.rng.between(lo, hi);
            let next = self.view.next_seq.0;
            let up_to = ctx.clamp.unwrap_or(next).min(next);
            if up_to > self.view.first_seq.0 {
                let policy = self.policy(Call::Truncate { leader: None, up_to: Seq(up_to) });
                let (flight, done) = Flight::start(policy, now, self.tick_ns, io);
                self.truncate = Some(flight);
                if let Some(decided) = done {
                    self.on_truncate_done(decided, io);
                }
            }
        }
    }

    fn start_append(&mut self, now: u64, call: Call, records: Vec<Bytes>, sends: u32, io: &mut ClientIo) {
        let policy = self.policy(call.clone());
        let (flight, done) = Flight::start(policy, now, self.tick_ns, io);
        let id = self.next_append;
        self.next_append += 1;
        self.appends.insert(id, Append { call, records, flight, sends });
        if let Some(decided) = done {
            self.on_append_done(now, id, decided, io);
        }
    }

    fn record(&mut self, i: u64) -> Bytes {
        let pad = self.rng.below(self.params.record_bytes_max) as usize;
        Bytes::from(format!("{}.{}.{i}~{}", self.name, self.batch_no, "x".repeat(pad)))
    }

    fn fresh_uuid(&mut self) -> LeaderUuid {
        loop {
            let raw = (u128::from(self.rng.u64()) << 64) | u128::from(self.rng.u64());
            if let Some(u) = LeaderUuid::new(raw) {
                return u;
            }
        }
    }

    /// Maybe sends probes: a call shaped for a single-writer journal, an empty append.
    fn probe(&mut self, io: &mut ClientIo) {
        let tail = self.view.next_seq;
        if self.rng.chance(self.params.wrong_mode_ppm) {
            let uuid = self.fresh_uuid();
            let call = match self.rng.below(3) {
                0 => {
                    let record = Bytes::from(format!("{}.{}.fenced", self.name, self.batch_no));
                    Call::Write { leader: Some(uuid), seq: tail, records: vec![record] }
                }
                1 => Call::Truncate { leader: Some(uuid), up_to: tail },
                _ => Call::SetLeader { new: uuid, old: None },
            };
            self.send_probe(Probe::WrongMode, call, io);
        }
        if self.rng.chance(self.params.empty_append_ppm) {
            self.send_probe(Probe::EmptyAppend, Call::Write { leader: None, seq: tail, records: Vec::new() }, io);
        }
    }

    /// A probe goes straight to a server: its answer is for the checker, not the appender.
    fn send_probe(&mut self, probe: Probe, call: Call, io: &mut ClientIo) {
        let to = match self.hint {
            Some(l) => l,
            None => *self.rng.pick(&self.voters),
        };
        io.send_probe(to, Request::Call(None, call), probe);
    }

    /// The reply to `token` arrived (or timed out).
    pub fn on_reply(&mut self, now: u64, token: u64, reply: Reply, io: &mut ClientIo) {
        if self.truncate.as_ref().is_some_and(|f| f.token() == Some(token)) {
            let done = self.truncate.as_mut().and_then(|f| f.on_reply(token, now, reply, io));
            if let Some(decided) = done {
                self.on_truncate_done(decided, io);
            }
            return;
        }
        let Some(id) = self.appends.iter().find(|(_, a)| a.flight.token() == Some(token)).map(|(id, _)| *id) else {
            return; // a probe's answer
        };
        let done = self.appends.get_mut(&id).and_then(|a| a.flight.on_reply(token, now, reply, io));
        if let Some(decided) = done {
            self.on_append_done(now, id, decided, io);
        }
    }

    fn on_append_done(&mut self, now: u64, id: u64, decided: Result<Decided, AnswerError>, io: &mut ClientIo) {
        let Some(a) = self.appends.remove(&id) else { return };
        if let Some(s) = a.flight.answered_by() {
            self.hint = Some(s);
        }
        let again = match decided {
            Ok(Decided::Verdict(Outcome::Accepted { seq, count, .. })) => {
                self.heard(JournalView { leader: None, first_seq: self.view.first_seq, next_seq: Seq(seq.0 + count) });
                io.events.push(ClientEvent::Acked { seq: seq.0, records: a.records.clone() });
                false
            }
            // A verdict other than `Accepted` for a non-empty unfenced append is the checker's
            // to judge (the model gives `Accepted`); the batch is not appended again.
            Ok(Decided::Verdict(o)) => {
                if let Some(v) = o.view() {
                    self.heard(v);
                }
                false
            }
            // It may have landed: at-least-once appends it again, sometimes.
            Ok(Decided::Ambiguous) => self.rng.chance(self.params.reappend_ppm),
            // Nothing happened: append it again.
            Ok(Decided::Unavailable) => true,
            Ok(Decided::TooLarge(_) | Decided::UnknownJournal | Decided::Denied { .. }) => false,
            Err(e) => {
                io.events.push(ClientEvent::Refused { why: e.to_string() });
                false
            }
        };
        if again && !self.stopping && a.sends < self.params.appends_per_batch_max {
            self.start_append(now, a.call, a.records, a.sends + 1, io);
        }
    }

    fn on_truncate_done(&mut self, decided: Result<Decided, AnswerError>, io: &mut ClientIo) {
        if let Some(f) = self.truncate.take()
            && let Some(s) = f.answered_by()
        {
            self.hint = Some(s);
        }
        match decided {
            Ok(Decided::Verdict(o)) => {
                if let Some(v) = o.view() {
                    self.heard(v);
                }
            }
            Ok(_) => {}
            Err(e) => io.events.push(ClientEvent::Refused { why: e.to_string() }),
        }
    }
}
