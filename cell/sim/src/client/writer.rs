//! A single-writer client: claims the journal with SetLeader under a fresh uuid, writes pipelined
//! batches at the tail, retries identical writes when the outcome is unknown, truncates below
//! every folding reader, and stops once superseded (then, later, claims again as a new term).
//!
//! Beside its batches it sometimes sends a probe: an acknowledged batch re-sent with changed
//! bytes at its own position, at another position below the tail, or far past the tail. A
//! probe's answer changes nothing in the writer; the history records it for the checker.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use paros_core::journal::{JournalView, Outcome};
use paros_core::{Call, CallAnswer, LeaderUuid, NodeId, Seq};

use super::{ClientCtx, ClientEvent, ClientIo, Reply, Request};
use crate::check::Probe;
use crate::rng::SimRng;

/// How a writer behaves; drawn per writer from the seed.
#[derive(Clone, Copy, Debug)]
pub struct WriterParams {
    /// Batches in flight at once.
    pub pipeline: usize,
    pub batch_records_max: u64,
    pub record_bytes_max: u64,
    /// Pause between batches, in ns.
    pub batch_gap_ns: (u64, u64),
    /// Batches one term writes before the writer hands over to a fresh term of its own.
    pub term_batches: (u64, u64),
    /// Chance per batch that the writer process dies (abandoning what is in flight).
    pub abandon_ppm: u64,
    /// Pause between truncations, in ns.
    pub truncate_gap_ns: (u64, u64),
    /// Attempts of one write before the term gives up.
    pub attempts_max: u32,
    /// Pause before claiming again after a term ended, in ns.
    pub idle_ns: (u64, u64),
    /// Chances per new batch of also sending each probe (see the module doc).
    pub changed_bytes_ppm: u64,
    pub moved_batch_ppm: u64,
    pub past_tail_ppm: u64,
}

/// Acknowledged batches a writer remembers for its probes.
const ACKED_KEPT: usize = 8;

/// How far past the tail a past-tail probe lands at least: further than any run writes.
const PAST_TAIL_SEQ_MIN: u64 = 1 << 32;

#[derive(Clone, Debug)]
struct PendingWrite {
    records: Vec<Bytes>,
    in_flight: bool,
    retry_at: u64,
    attempts: u32,
}

#[derive(Clone, Debug)]
struct Term {
    uuid: LeaderUuid,
    next_assign: u64,
    pending: BTreeMap<u64, PendingWrite>,
    batches_left: u64,
    next_batch_at: u64,
    next_truncate_at: u64,
    truncating: bool,
}

#[derive(Clone, Debug)]
enum Phase {
    Idle { until: u64 },
    Claiming { uuid: LeaderUuid, old: Option<LeaderUuid>, in_flight: bool, retry_at: u64, attempts: u32 },
    Writing(Term),
}

#[derive(Clone, Copy, Debug)]
enum Purpose {
    Claim,
    Write(u64),
    Truncate,
    Probe,
}

/// One writer workload client.
#[derive(Debug)]
pub struct Writer {
    name: String,
    voters: Vec<NodeId>,
    leader_guess: Option<NodeId>,
    rng: SimRng,
    params: WriterParams,
    phase: Phase,
    /// Bumped whenever a term ends: replies to an older generation are stale.
    generation: u64,
    tokens: BTreeMap<u64, (u64, Purpose)>,
    view: JournalView,
    batch_no: u64,
    /// The latest acknowledged batches: their first position and records.
    acked: VecDeque<(u64, Vec<Bytes>)>,
}

impl Writer {
    #[must_use]
    pub fn new(name: String, voters: Vec<NodeId>, rng: SimRng, params: WriterParams, start_at: u64) -> Writer {
        Writer {
            name,
            voters,
            leader_guess: None,
            rng,
            params,
            phase: Phase::Idle { until: start_at },
            generation: 0,
            tokens: BTreeMap::new(),
            view: JournalView::default(),
            batch_no: 0,
            acked: VecDeque::new(),
        }
    }

    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True while a call of the current term waits for its answer.
    #[must_use]
    pub fn busy(&self) -> bool {
        match &self.phase {
            Phase::Idle { .. } => false,
            Phase::Claiming { in_flight, .. } => *in_flight,
            Phase::Writing(t) => !t.pending.is_empty() || t.truncating,
        }
    }

    fn target(&mut self) -> NodeId {
        match self.leader_guess {
            Some(l) => l,
            None => *self.rng.pick(&self.voters),
        }
    }

    fn fresh_uuid(&mut self) -> LeaderUuid {
        loop {
            let raw = (u128::from(self.rng.u64()) << 64) | u128::from(self.rng.u64());
            if let Some(u) = LeaderUuid::new(raw) {
                return u;
            }
        }
    }

    fn send(&mut self, purpose: Purpose, call: Call, io: &mut ClientIo) {
        let to = self.target();
        let token = io.send(to, Request::Call(call));
        self.tokens.insert(token, (self.generation, purpose));
    }

    fn end_term(&mut self, now: u64) {
        self.generation += 1;
        let (lo, hi) = self.params.idle_ns;
        self.phase = Phase::Idle { until: now + self.rng.between(lo, hi) };
    }

    /// Time passed: claim, write, retry or truncate as due.
    pub fn wake(&mut self, now: u64, ctx: ClientCtx, io: &mut ClientIo) {
        if let Phase::Idle { until } = self.phase {
            if ctx.stopping || now < until {
                return;
            }
            let uuid = self.fresh_uuid();
            self.phase = Phase::Claiming { uuid, old: self.view.leader, in_flight: false, retry_at: now, attempts: 0 };
        }
        if let Phase::Claiming { uuid, old, in_flight, retry_at, attempts } = self.phase {
            if !in_flight && now >= retry_at {
                if ctx.stopping || attempts >= self.params.attempts_max {
                    self.end_term(now);
                    return;
                }
                self.phase = Phase::Claiming { uuid, old, in_flight: true, retry_at, attempts: attempts + 1 };
                self.send(Purpose::Claim, Call::SetLeader { new: uuid, old }, io);
            }
            return;
        }
        let Phase::Writing(mut t) = std::mem::replace(&mut self.phase, Phase::Idle { until: 0 }) else { return };
        let ended = self.wake_writing(now, ctx, &mut t, io);
        if !ended {
            self.phase = Phase::Writing(t);
        }
    }

    /// Returns true when the term ended.
    fn wake_writing(&mut self, now: u64, ctx: ClientCtx, t: &mut Term, io: &mut ClientIo) -> bool {
        let uuid = t.uuid;
        let mut resend = Vec::new();
        for (seq, p) in &mut t.pending {
            if !p.in_flight && now >= p.retry_at {
                p.in_flight = true;
                p.attempts += 1;
                resend.push((*seq, p.records.clone()));
            }
        }
        for (seq, records) in resend {
            self.send(Purpose::Write(seq), Call::Write { leader: Some(uuid), seq: Seq(seq), records }, io);
        }
        if !ctx.stopping && t.batches_left > 0 && now >= t.next_batch_at && t.pending.len() < self.params.pipeline {
            let count = self.rng.between(1, self.params.batch_records_max);
            self.batch_no += 1;
            let records: Vec<Bytes> = (0..count).map(|i| self.record(t.next_assign + i)).collect();
            let seq = t.next_assign;
            t.pending.insert(seq, PendingWrite { records: records.clone(), in_flight: true, retry_at: 0, attempts: 1 });
            t.next_assign += count;
            t.batches_left -= 1;
            let (lo, hi) = self.params.batch_gap_ns;
            t.next_batch_at = now + self.rng.between(lo, hi);
            self.send(Purpose::Write(seq), Call::Write { leader: Some(uuid), seq: Seq(seq), records }, io);
            self.probe(uuid, io);
            if self.rng.chance(self.params.abandon_ppm) {
                // The writer process dies: whatever is in flight stays unknown.
                self.end_term(now);
                return true;
            }
        }
        if !ctx.stopping && !t.truncating && now >= t.next_truncate_at {
            let (lo, hi) = self.params.truncate_gap_ns;
            t.next_truncate_at = now + self.rng.between(lo, hi);
            let up_to = ctx.clamp.unwrap_or(self.view.next_seq.0).min(self.view.next_seq.0);
            if up_to > self.view.first_seq.0 {
                t.truncating = true;
                self.send(Purpose::Truncate, Call::Truncate { leader: Some(uuid), up_to: Seq(up_to) }, io);
            }
        }
        if t.batches_left == 0 && t.pending.is_empty() && !t.truncating {
            self.end_term(now);
            return true;
        }
        false
    }

    /// Maybe sends probes built from a remembered acknowledged batch, under `uuid`.
    fn probe(&mut self, uuid: LeaderUuid, io: &mut ClientIo) {
        if self.acked.is_empty() {
            return;
        }
        let pick = self.rng.below(self.acked.len() as u64) as usize;
        let (seq, records) = self.acked[pick].clone();
        if self.rng.chance(self.params.changed_bytes_ppm) {
            let changed = self.changed(seq, &records);
            self.send_probe(Probe::ChangedBytes, Call::Write { leader: Some(uuid), seq: Seq(seq), records: changed }, io);
        }
        // Every view this writer heard is a state the journal passed: its `next_seq` is a lower
        // bound of the tail from now on, so a batch sent below it can never be accepted.
        let tail = self.view.next_seq.0;
        if tail > 1 && self.rng.chance(self.params.moved_batch_ppm) {
            let mut to = self.rng.below(tail - 1);
            if to >= seq {
                to += 1;
            }
            self.send_probe(Probe::MovedBatch, Call::Write { leader: Some(uuid), seq: Seq(to), records: records.clone() }, io);
        }
        if self.rng.chance(self.params.past_tail_ppm) {
            let to = PAST_TAIL_SEQ_MIN + self.rng.below(1 << 20);
            self.send_probe(Probe::PastTail, Call::Write { leader: Some(uuid), seq: Seq(to), records }, io);
        }
    }

    /// `records`, acknowledged at `seq`, changed: a prefix, one record's bytes changed (its
    /// position tag kept), or one record more.
    fn changed(&mut self, seq: u64, records: &[Bytes]) -> Vec<Bytes> {
        let mut out = records.to_vec();
        match self.rng.below(3) {
            0 if out.len() > 1 => {
                out.pop();
            }
            0 | 1 => {
                let i = self.rng.below(out.len() as u64) as usize;
                let mut tweaked = b"~".to_vec();
                tweaked.extend_from_slice(&out[i]);
                out[i] = Bytes::from(tweaked);
            }
            _ => out.push(self.record(seq + out.len() as u64)),
        }
        out
    }

    fn send_probe(&mut self, probe: Probe, call: Call, io: &mut ClientIo) {
        let to = self.target();
        let token = io.send_probe(to, Request::Call(call), probe);
        self.tokens.insert(token, (self.generation, Purpose::Probe));
    }

    fn record(&mut self, position: u64) -> Bytes {
        let head = format!("{}.{}.{}", self.name, self.generation, self.batch_no);
        let pad = self.rng.below(self.params.record_bytes_max) as usize;
        Bytes::from(format!("{head}{}@{position}", "x".repeat(pad)))
    }

    fn start_term(&mut self, now: u64, uuid: LeaderUuid, view: JournalView) {
        let (lo, hi) = self.params.term_batches;
        let (tlo, thi) = self.params.truncate_gap_ns;
        self.view = view;
        self.phase = Phase::Writing(Term {
            uuid,
            next_assign: view.next_seq.0,
            pending: BTreeMap::new(),
            batches_left: self.rng.between(lo, hi),
            next_batch_at: now,
            next_truncate_at: now + self.rng.between(tlo, thi),
            truncating: false,
        });
    }

    /// The reply to `token` arrived from `from` (`None` for a timeout).
    pub fn on_reply(&mut self, now: u64, token: u64, from: Option<NodeId>, reply: Reply, io: &mut ClientIo) {
        let Some((generation, purpose)) = self.tokens.remove(&token) else { return };
        if generation != self.generation {
            return;
        }
        match (&reply, from) {
            (Reply::Call(CallAnswer::Redirect { leader }), _) => self.leader_guess = *leader,
            (Reply::Call(CallAnswer::Verdict(_)), Some(f)) => self.leader_guess = Some(f),
            (Reply::TimedOut | Reply::Call(CallAnswer::NoVerdict), _) => self.leader_guess = None,
            _ => {}
        }
        let retry_gap = match &reply {
            Reply::Call(CallAnswer::Redirect { leader: Some(_) }) => 1_000_000,
            _ => self.rng.between(2_000_000, 20_000_000),
        };
        match purpose {
            Purpose::Claim => self.on_claim_reply(now, reply, retry_gap),
            Purpose::Write(seq) => self.on_write_reply(now, seq, reply, retry_gap, io),
            Purpose::Truncate => self.on_truncate_reply(now, reply),
            Purpose::Probe => {}
        }
    }

    fn on_claim_reply(&mut self, now: u64, reply: Reply, retry_gap: u64) {
        let Phase::Claiming { uuid, mut old, attempts, .. } = self.phase else { return };
        match reply {
            Reply::Call(CallAnswer::Verdict(Outcome::Won(view))) => return self.start_term(now, uuid, view),
            // An earlier attempt of this very claim won: the uuid leads.
            Reply::Call(CallAnswer::Verdict(Outcome::Lost(view))) if view.leader == Some(uuid) => {
                return self.start_term(now, uuid, view);
            }
            Reply::Call(CallAnswer::Verdict(Outcome::Lost(view))) => {
                // Someone else leads: claim again, fencing the leader in force.
                self.view = view;
                old = view.leader;
            }
            Reply::Call(CallAnswer::Verdict(_) | CallAnswer::TooLarge(_)) => return self.end_term(now),
            Reply::Call(_) | Reply::TimedOut | Reply::Read(_) => {}
        }
        self.phase = Phase::Claiming { uuid, old, in_flight: false, retry_at: now + retry_gap, attempts };
    }

    fn on_write_reply(&mut self, now: u64, seq: u64, reply: Reply, retry_gap: u64, io: &mut ClientIo) {
        let Phase::Writing(t) = &mut self.phase else { return };
        let uuid = t.uuid;
        let Some(p) = t.pending.get_mut(&seq) else { return };
        p.in_flight = false;
        p.retry_at = now + retry_gap;
        let give_up = p.attempts >= self.params.attempts_max;
        let mut end = false;
        match reply {
            Reply::Call(CallAnswer::Verdict(Outcome::Accepted { seq: s, count } | Outcome::Duplicate { seq: s, count })) => {
                let p = t.pending.remove(&seq).expect("present");
                self.view.next_seq = self.view.next_seq.max(s.plus(count));
                if self.acked.len() == ACKED_KEPT {
                    self.acked.pop_front();
                }
                self.acked.push_back((s.0, p.records.clone()));
                io.events.push(ClientEvent::Acked { seq: s.0, records: p.records });
            }
            Reply::Call(CallAnswer::Verdict(Outcome::Refused(view))) => {
                self.view = view;
                if view.leader != Some(uuid) {
                    end = true; // superseded
                } else if seq < view.next_seq.0 {
                    // Only this term writes under this uuid, and only this batch at `seq`: it
                    // landed (a fold that jumped past it judges the retry blind).
                    t.pending.remove(&seq);
                } else {
                    end = give_up;
                }
            }
            Reply::Call(CallAnswer::Verdict(Outcome::Truncated(view))) => {
                self.view = view;
                t.pending.remove(&seq);
            }
            Reply::Call(CallAnswer::Verdict(_) | CallAnswer::TooLarge(_)) => {
                t.pending.remove(&seq);
            }
            Reply::Call(CallAnswer::Redirect { .. }) => end = give_up,
            Reply::Call(CallAnswer::NoVerdict | CallAnswer::Busy) | Reply::TimedOut | Reply::Read(_) => end = give_up,
        }
        if end {
            self.end_term(now);
        }
    }

    fn on_truncate_reply(&mut self, now: u64, reply: Reply) {
        let Phase::Writing(t) = &mut self.phase else { return };
        t.truncating = false;
        let uuid = t.uuid;
        match reply {
            Reply::Call(CallAnswer::Verdict(Outcome::Trimmed(view))) => self.view = view,
            Reply::Call(CallAnswer::Verdict(Outcome::TruncateRefused(view))) => {
                self.view = view;
                if view.leader != Some(uuid) {
                    self.end_term(now);
                }
            }
            _ => {}
        }
    }
}
