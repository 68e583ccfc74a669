//! A single-writer client over paros-client's [`WriterCore`]: claims the journal with SetLeader
//! under a fresh uuid, writes pipelined batches at the tail, truncates under its fence, and stops
//! once superseded or halted (then, later, claims again as a new term with a new core). Every
//! call is carried by a [`CallPolicy`]: retries, redirects, backoff and the settling of ambiguous
//! calls are the library's.
//!
//! A *checkpointing* writer (the checkpointer kind) is the journal's owner in the library's
//! sense: it folds the journal into a [`Chain`] with a [`Folder`] (after winning a term it reads
//! what it does not know up to the won tail, then folds its own acknowledged batches), and when
//! its [`Checkpointer`] says a checkpoint is due it appends a run (`Begin`, `Chunk`s, `End`) and,
//! once `End` is acknowledged, truncates to the run's `Begin`. A plain writer truncates below
//! every folding reader instead.
//!
//! Beside its batches it sometimes sends a probe: an acknowledged batch re-sent with changed
//! bytes at its own position, at another position below the tail, or far past the tail. A
//! probe's answer changes nothing in the writer; the history records it for the checker.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use paros_client::{
    AnswerError, CallPolicy, Checkpointable, Checkpointer, CheckpointerConfig, ClientConfig, Decided, Folder,
    FolderConfig, ReadAnswer, ReaderConfig, ReaderCursor, ReaderOutcome, Seq, WriterConfig, WriterCore, WriterError,
    Written,
};
use paros_core::journal::JournalView;
use paros_core::rng::Rng;
use paros_core::{Call, Consistency, LeaderUuid, NodeId, ReadRequest};

use super::call::Flight;
use super::reader::{fold_record, note_fold};
use super::{Chain, ClientCtx, ClientEvent, ClientIo, Reply, Request};
use crate::check::Probe;
use crate::rng::SimRng;

/// Salts the sub-range probe's stream (`SimRng::side`).
const SUB_RANGE_SALT: u64 = 0x7375_6272_616e_6765;

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
    /// Pause between truncations, in ns (plain writers).
    pub truncate_gap_ns: (u64, u64),
    /// Claims lost in a row before the writer idles.
    pub claims_max: u32,
    /// Pause before claiming again after a term ended, in ns.
    pub idle_ns: (u64, u64),
    /// Chances per new batch of also sending each probe (see the module doc).
    pub changed_bytes_ppm: u64,
    pub moved_batch_ppm: u64,
    pub past_tail_ppm: u64,
    /// The bounds of every call's retries.
    pub call: ClientConfig,
    /// Set for the checkpointer kind.
    pub checkpoint: Option<CheckpointParams>,
    /// Chance per new batch of the sub-range probe (drawn from its own stream: the writer's
    /// other draws stay what they were).
    pub sub_range_ppm: u64,
}

/// How a checkpointing writer checkpoints.
#[derive(Clone, Copy, Debug)]
pub struct CheckpointParams {
    pub config: CheckpointerConfig,
    /// Run records per write at most (a run may span several batches).
    pub run_batch_max: u64,
}

/// Acknowledged batches a writer remembers for its probes.
const ACKED_KEPT: usize = 8;

/// How far past the tail a past-tail probe lands at least: further than any run writes.
const PAST_TAIL_SEQ_MIN: u64 = 1 << 32;

/// The journal's owner state of a checkpointing writer; it outlives terms.
#[derive(Debug)]
struct Owner {
    folder: Folder<Chain>,
    checkpointer: Checkpointer,
    params: CheckpointParams,
}

/// A batch handed to the core: its call (re-sent identically) and the flight carrying it.
#[derive(Debug)]
struct Write {
    call: Call,
    records: Vec<Bytes>,
    run: bool,
    flight: Option<Flight>,
}

/// A checkpointing writer reading what it does not know up to the tail its claim won at.
#[derive(Debug)]
struct CatchUp {
    target: Seq,
    cursor: ReaderCursor,
    in_flight: Option<u64>,
    next_at: u64,
    attempts: u32,
}

#[derive(Debug)]
struct Term {
    core: WriterCore,
    uuid: LeaderUuid,
    catch_up: Option<CatchUp>,
    writes: BTreeMap<u64, Write>,
    truncate: Option<Flight>,
    batches_left: u64,
    next_batch_at: u64,
    next_truncate_at: u64,
    /// Run records planned and not handed out yet.
    run_queue: VecDeque<Bytes>,
    /// A run is being appended (planned, `End` not acknowledged).
    run_open: bool,
    /// Superseded or halted: start nothing new, end once drained.
    ending: bool,
}

#[derive(Debug)]
enum Phase {
    Idle { until: u64 },
    Claiming { uuid: LeaderUuid, core: Box<WriterCore>, flight: Box<Flight> },
    Writing(Box<Term>),
}

/// One writer workload client.
#[derive(Debug)]
pub struct Writer {
    name: String,
    voters: Vec<NodeId>,
    rng: SimRng,
    backoff_rng: Rng,
    params: WriterParams,
    tick_ns: u64,
    hint: Option<NodeId>,
    /// The latest view this writer heard (every one is a state the journal passed).
    view: JournalView,
    /// Bumped whenever a term ends (names the records of each term).
    generation: u64,
    batch_no: u64,
    lost_claims: u32,
    /// The process died handing out a batch: the term ends at once.
    abandoned: bool,
    phase: Phase,
    /// The latest acknowledged application batches: their first position and records.
    acked: VecDeque<(u64, Vec<Bytes>)>,
    /// The sub-range probe's draws, apart from `rng`.
    probe_rng: SimRng,
    owner: Option<Owner>,
}

fn ns(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Writer {
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
        params: WriterParams,
        tick_ns: u64,
        start_at: u64,
    ) -> Writer {
        let owner = params.checkpoint.map(|c| Owner {
            folder: Folder::new(Chain::default(), Seq(0), FolderConfig::default()),
            checkpointer: Checkpointer::new(c.config).expect("the drawn checkpoint policy is valid"),
            params: c,
        });
        let probe_rng = rng.side(SUB_RANGE_SALT);
        let backoff_rng = Rng::new(rng.u64());
        Writer {
            name,
            voters,
            rng,
            backoff_rng,
            params,
            tick_ns,
            hint: None,
            view: JournalView::default(),
            generation: 0,
            batch_no: 0,
            lost_claims: 0,
            abandoned: false,
            phase: Phase::Idle { until: start_at },
            acked: VecDeque::new(),
            probe_rng,
            owner,
        }
    }

    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True while a call of the current term is under way (sent, or waiting for its retry).
    #[must_use]
    pub fn busy(&self) -> bool {
        match &self.phase {
            Phase::Idle { .. } => false,
            Phase::Claiming { .. } => true,
            Phase::Writing(t) => !t.writes.is_empty() || t.truncate.is_some(),
        }
    }

    /// A checkpointing writer folding the journal: the first position its whole state lacks
    /// (the plain writers' truncations stay at or below it).
    #[must_use]
    pub fn folding_at(&self) -> Option<u64> {
        self.owner.as_ref().filter(|o| o.folder.is_whole()).map(|o| o.folder.next().0)
    }

    fn fresh_uuid(&mut self) -> LeaderUuid {
        loop {
            let raw = (u128::from(self.rng.u64()) << 64) | u128::from(self.rng.u64());
            if let Some(u) = LeaderUuid::new(raw) {
                return u;
            }
        }
    }

    fn policy(&mut self, call: Call) -> CallPolicy {
        let rng = Rng::new(self.rng.u64());
        CallPolicy::new(call, self.voters.clone(), self.hint, self.params.call, rng)
            .expect("the drawn call bounds are valid")
    }

    fn end_term(&mut self, now: u64) {
        self.generation += 1;
        if let Some(o) = &mut self.owner {
            o.checkpointer.abandon();
            o.checkpointer.truncate_settled();
        }
        let (lo, hi) = self.params.idle_ns;
        self.phase = Phase::Idle { until: now + self.rng.between(lo, hi) };
    }

    /// Time passed: claim, write, retry or truncate as due.
    pub fn wake(&mut self, now: u64, ctx: ClientCtx, io: &mut ClientIo) {
        match std::mem::replace(&mut self.phase, Phase::Idle { until: 0 }) {
            Phase::Idle { until } => {
                self.phase = Phase::Idle { until };
                if !ctx.stopping && now >= until {
                    self.claim(now, io);
                }
            }
            Phase::Claiming { uuid, core, mut flight } => {
                flight.wake(now, io);
                self.phase = Phase::Claiming { uuid, core, flight };
            }
            Phase::Writing(mut t) => {
                let ended = self.wake_writing(now, ctx, &mut t, io);
                if !ended {
                    self.phase = Phase::Writing(t);
                }
            }
        }
    }

    fn claim(&mut self, now: u64, io: &mut ClientIo) {
        let uuid = self.fresh_uuid();
        let config = WriterConfig {
            batches_in_flight_max: u32::try_from(self.params.pipeline).unwrap_or(1).max(1),
            ..WriterConfig::default()
        };
        let mut core = WriterCore::new(config).expect("the drawn writer bounds are valid");
        let call = core.claim_call(uuid, self.view).expect("a fresh core claims");
        let policy = self.policy(call);
        let (flight, done) = Flight::start(policy, now, self.tick_ns, io);
        self.phase = Phase::Claiming { uuid, core: Box::new(core), flight: Box::new(flight) };
        if let Some(decided) = done {
            self.on_claimed(now, decided, io);
        }
    }

    fn on_claimed(&mut self, now: u64, decided: Result<Decided, AnswerError>, io: &mut ClientIo) {
        let Phase::Claiming { uuid, mut core, flight } = std::mem::replace(&mut self.phase, Phase::Idle { until: now })
        else {
            return;
        };
        if let Some(s) = flight.answered_by() {
            self.hint = Some(s);
        }
        match core.on_claimed(uuid, decided) {
            Ok(view) => {
                self.lost_claims = 0;
                self.view = view;
                let (lo, hi) = self.params.term_batches;
                let (tlo, thi) = self.params.truncate_gap_ns;
                let catch_up = self.owner.as_ref().filter(|o| o.folder.next() < view.next_seq).map(|o| {
                    let config = ReaderConfig { wait_ms: 0, ..ReaderConfig::default() };
                    CatchUp {
                        target: view.next_seq,
                        cursor: ReaderCursor::new(o.folder.next(), config)
                            .expect("the default reader bounds are valid"),
                        in_flight: None,
                        next_at: now,
                        attempts: 0,
                    }
                });
                self.phase = Phase::Writing(Box::new(Term {
                    core: *core,
                    uuid,
                    catch_up,
                    writes: BTreeMap::new(),
                    truncate: None,
                    batches_left: self.rng.between(lo, hi),
                    next_batch_at: now,
                    next_truncate_at: now + self.rng.between(tlo, thi),
                    run_queue: VecDeque::new(),
                    run_open: false,
                    ending: false,
                }));
            }
            Err(WriterError::Lost { view }) => {
                self.view = view;
                self.lost_claims += 1;
                if self.lost_claims < self.params.claims_max {
                    let d = paros_client::policy::backoff(&self.params.call, self.lost_claims, &mut self.backoff_rng);
                    self.phase = Phase::Idle { until: now + ns(d) };
                } else {
                    self.lost_claims = 0;
                    self.end_term(now);
                }
            }
            Err(_) => self.end_term(now),
        }
        let _ = io;
    }

    /// Returns true when the term ended.
    fn wake_writing(&mut self, now: u64, ctx: ClientCtx, t: &mut Term, io: &mut ClientIo) -> bool {
        for w in t.writes.values_mut() {
            if let Some(f) = &mut w.flight {
                f.wake(now, io);
            }
        }
        if let Some(f) = &mut t.truncate {
            f.wake(now, io);
        }
        if t.catch_up.is_some() {
            if ctx.stopping {
                return self.finish_if_drained(now, t, true);
            }
            self.wake_catch_up(now, t, io);
            return false;
        }
        let starting = !ctx.stopping && !t.ending;
        if starting {
            self.next_write(now, t, io);
        }
        if self.abandoned {
            self.abandoned = false;
            self.end_term(now);
            return true;
        }
        if starting && self.owner.is_none() && t.truncate.is_none() && now >= t.next_truncate_at {
            let (lo, hi) = self.params.truncate_gap_ns;
            t.next_truncate_at = now + self.rng.between(lo, hi);
            let up_to = ctx.clamp.unwrap_or(self.view.next_seq.0).min(self.view.next_seq.0);
            if up_to > self.view.first_seq.0
                && let Ok(call) = t.core.truncate_call(Seq(up_to))
            {
                self.start_truncate(now, t, call, io);
            }
        }
        let done = ctx.stopping || t.ending || (t.batches_left == 0 && t.run_queue.is_empty() && !t.run_open);
        self.finish_if_drained(now, t, done)
    }

    fn finish_if_drained(&mut self, now: u64, t: &Term, done: bool) -> bool {
        if done
            && t.writes.is_empty()
            && t.truncate.is_none()
            && t.catch_up.as_ref().is_none_or(|c| c.in_flight.is_none())
        {
            self.end_term(now);
            return true;
        }
        false
    }

    /// Hands out the next batch if one is due: a run's records, a run when a checkpoint is due,
    /// or application records.
    fn next_write(&mut self, now: u64, t: &mut Term, io: &mut ClientIo) {
        if let Some(o) = &mut self.owner
            && t.run_queue.is_empty()
            && !t.run_open
            && t.writes.is_empty()
            && t.truncate.is_none()
            && o.folder.is_whole()
            && o.folder.next() == t.core.next_seq()
            && o.checkpointer.due(o.folder.state().checkpoint().len())
            && let Ok(run) = o.checkpointer.begin(o.folder.state(), t.core.next_seq())
        {
            t.run_queue = run.records.into();
            t.run_open = true;
        }
        if !t.run_queue.is_empty() {
            let max = self.owner.as_ref().map_or(1, |o| o.params.run_batch_max);
            let n = self.rng.between(1, max).min(t.run_queue.len() as u64) as usize;
            let records: Vec<Bytes> = t.run_queue.iter().take(n).cloned().collect();
            let bytes = records.iter().map(|r| r.len() as u64).sum();
            if t.core.has_room(bytes) {
                t.run_queue.drain(..n);
                self.begin_write(now, t, records, true, io);
            }
            return;
        }
        if t.run_open || t.batches_left == 0 || now < t.next_batch_at || t.core.in_flight() >= self.params.pipeline {
            return;
        }
        let count = self.rng.between(1, self.params.batch_records_max);
        self.batch_no += 1;
        let next = t.core.next_seq().0;
        let records: Vec<Bytes> = (0..count).map(|i| self.record(next + i)).collect();
        let bytes = records.iter().map(|r| r.len() as u64).sum();
        if !t.core.has_room(bytes) {
            return;
        }
        t.batches_left -= 1;
        let (lo, hi) = self.params.batch_gap_ns;
        t.next_batch_at = now + self.rng.between(lo, hi);
        self.begin_write(now, t, records, false, io);
        self.probe(t.uuid, io);
        if self.rng.chance(self.params.abandon_ppm) {
            // The writer process dies: whatever is in flight stays unknown.
            self.abandoned = true;
        }
    }

    fn begin_write(&mut self, now: u64, t: &mut Term, records: Vec<Bytes>, run: bool, io: &mut ClientIo) {
        let Ok(call) = t.core.begin_write(records.clone()) else { return };
        let Call::Write { seq, .. } = call else { unreachable!("begin_write hands out a write") };
        let policy = self.policy(call.clone());
        let (flight, done) = Flight::start(policy, now, self.tick_ns, io);
        t.writes.insert(seq.0, Write { call, records, run, flight: Some(flight) });
        if let Some(decided) = done {
            self.on_write_done(now, t, seq.0, decided, io);
        }
    }

    fn start_truncate(&mut self, now: u64, t: &mut Term, call: Call, io: &mut ClientIo) {
        let policy = self.policy(call);
        let (flight, done) = Flight::start(policy, now, self.tick_ns, io);
        t.truncate = Some(flight);
        if let Some(decided) = done {
            self.on_truncate_done(now, t, decided, io);
        }
    }

    /// Maybe sends probes built from a remembered acknowledged batch, under `uuid`.
    fn probe(&mut self, uuid: LeaderUuid, io: &mut ClientIo) {
        self.probe_sub_range(uuid, io);
        if self.acked.is_empty() {
            return;
        }
        let pick = self.rng.below(self.acked.len() as u64) as usize;
        let (seq, records) = self.acked[pick].clone();
        if self.rng.chance(self.params.changed_bytes_ppm) {
            let changed = self.changed(seq, &records);
            self.send_probe(
                Probe::ChangedBytes,
                Call::Write { leader: Some(uuid), seq: Seq(seq), records: changed },
                io,
            );
        }
        // Every view this writer heard is a state the journal passed: its `next_seq` is a lower
        // bound of the tail from now on, so a batch sent below it can never be accepted.
        let tail = self.view.next_seq.0;
        if tail > 1 && self.rng.chance(self.params.moved_batch_ppm) {
            let mut to = self.rng.below(tail - 1);
            if to >= seq {
                to += 1;
            }
            self.send_probe(
                Probe::MovedBatch,
                Call::Write { leader: Some(uuid), seq: Seq(to), records: records.clone() },
                io,
            );
        }
        if self.rng.chance(self.params.past_tail_ppm) {
            let to = PAST_TAIL_SEQ_MIN + self.rng.below(1 << 20);
            self.send_probe(Probe::PastTail, Call::Write { leader: Some(uuid), seq: Seq(to), records }, io);
        }
    }

    /// `records`, acknowledged at `seq`, changed: a prefix (which the fold answers `Duplicate`
    /// by range), one record's bytes changed (its position tag kept), or one record more.
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

    /// Maybe sends a range of the newest acknowledged records, cut anywhere: inside the last
    /// batch, or across the last two when they are contiguous, under `uuid`.
    fn probe_sub_range(&mut self, uuid: LeaderUuid, io: &mut ClientIo) {
        if !self.probe_rng.chance(self.params.sub_range_ppm) {
            return;
        }
        let Some((last_at, last)) = self.acked.back() else { return };
        let (mut start, mut records) = (*last_at, last.clone());
        if let Some((at, before)) = self.acked.iter().rev().nth(1)
            && at + before.len() as u64 == start
        {
            start = *at;
            records = before.iter().chain(last).cloned().collect();
        }
        let n = records.len() as u64;
        let from = self.probe_rng.below(n);
        let to = from + 1 + self.probe_rng.below(n - from);
        let records = records[from as usize..to as usize].to_vec();
        let call = Call::Write { leader: Some(uuid), seq: Seq(start + from), records };
        let server = match self.hint {
            Some(l) => l,
            None => *self.probe_rng.pick(&self.voters),
        };
        io.send_probe(server, Request::Call(None, call), Probe::SubRange);
    }

    /// A probe goes straight to a server: its answer is for the checker, not the writer.
    fn send_probe(&mut self, probe: Probe, call: Call, io: &mut ClientIo) {
        let to = match self.hint {
            Some(l) => l,
            None => *self.rng.pick(&self.voters),
        };
        io.send_probe(to, Request::Call(None, call), probe);
    }

    fn record(&mut self, position: u64) -> Bytes {
        let head = format!("{}.{}.{}", self.name, self.generation, self.batch_no);
        let pad = self.rng.below(self.params.record_bytes_max) as usize;
        Bytes::from(format!("{head}{}@{position}", "x".repeat(pad)))
    }

    /// The reply to `token` arrived from `from` (`None` for a timeout).
    pub fn on_reply(&mut self, now: u64, token: u64, _from: Option<NodeId>, reply: Reply, io: &mut ClientIo) {
        match std::mem::replace(&mut self.phase, Phase::Idle { until: 0 }) {
            Phase::Idle { until } => self.phase = Phase::Idle { until },
            Phase::Claiming { uuid, core, mut flight } => {
                let done = flight.on_reply(token, now, reply, io);
                self.phase = Phase::Claiming { uuid, core, flight };
                if let Some(decided) = done {
                    self.on_claimed(now, decided, io);
                }
            }
            Phase::Writing(mut t) => {
                self.on_term_reply(now, &mut t, token, reply, io);
                self.phase = Phase::Writing(t);
            }
        }
    }

    fn on_term_reply(&mut self, now: u64, t: &mut Term, token: u64, reply: Reply, io: &mut ClientIo) {
        if t.catch_up.as_ref().is_some_and(|c| c.in_flight == Some(token)) {
            return self.on_catch_up_reply(now, t, reply, io);
        }
        if t.truncate.as_ref().is_some_and(|f| f.token() == Some(token)) {
            let done = t.truncate.as_mut().and_then(|f| f.on_reply(token, now, reply, io));
            if let Some(decided) = done {
                self.on_truncate_done(now, t, decided, io);
            }
            return;
        }
        let Some(seq) =
            t.writes.iter().find(|(_, w)| w.flight.as_ref().is_some_and(|f| f.token() == Some(token))).map(|(s, _)| *s)
        else {
            return; // a probe's answer, or one for a call given up
        };
        let done =
            t.writes.get_mut(&seq).and_then(|w| w.flight.as_mut()).and_then(|f| f.on_reply(token, now, reply, io));
        if let Some(decided) = done {
            self.on_write_done(now, t, seq, decided, io);
        }
    }

    fn on_write_done(
        &mut self,
        now: u64,
        t: &mut Term,
        seq: u64,
        decided: Result<Decided, AnswerError>,
        io: &mut ClientIo,
    ) {
        if let Some(w) = t.writes.get_mut(&seq)
            && let Some(f) = w.flight.take()
            && let Some(s) = f.answered_by()
        {
            self.hint = Some(s);
        }
        let completion = t.core.complete(Seq(seq), decided);
        for s in completion.resend {
            let Some(call) = t.writes.get(&s.0).map(|w| w.call.clone()) else { continue };
            let policy = self.policy(call);
            let (flight, done) = Flight::start(policy, now, self.tick_ns, io);
            if let Some(w) = t.writes.get_mut(&s.0) {
                w.flight = Some(flight);
            }
            if let Some(decided) = done {
                self.on_write_done(now, t, s.0, decided, io);
            }
        }
        for s in completion.abandon {
            if let Some(w) = t.writes.get_mut(&s.0) {
                w.flight = None;
            }
        }
        self.drain_reports(now, t, io);
    }

    /// Takes every report the core has, in position order.
    fn drain_reports(&mut self, now: u64, t: &mut Term, io: &mut ClientIo) {
        while let Some((seq, result)) = t.core.next_report() {
            let Some(w) = t.writes.remove(&seq.0) else { continue };
            match result {
                Ok(Written { seq, count }) => {
                    self.view.next_seq = self.view.next_seq.max(Seq(seq.0 + count));
                    io.events.push(ClientEvent::Acked { seq: seq.0, records: w.records.clone() });
                    if !w.run {
                        if self.acked.len() == ACKED_KEPT {
                            self.acked.pop_front();
                        }
                        self.acked.push_back((seq.0, w.records.clone()));
                    }
                    self.owner_fold(now, t, seq.0, &w.records, w.run, io);
                }
                Err(e) => {
                    if let WriterError::Superseded { view } = e {
                        self.view = view;
                    }
                    t.ending = true;
                    if w.run || t.run_open {
                        t.run_queue.clear();
                        t.run_open = false;
                        if let Some(o) = &mut self.owner {
                            o.checkpointer.abandon();
                        }
                    }
                }
            }
        }
        if t.core.superseded().is_some() {
            t.ending = true;
        }
    }

    /// A checkpointing writer folds its own acknowledged batch and tells its Checkpointer.
    fn owner_fold(&mut self, now: u64, t: &mut Term, seq: u64, records: &[Bytes], run: bool, io: &mut ClientIo) {
        let Some(o) = &mut self.owner else { return };
        if o.folder.next() != Seq(seq) {
            return; // the fold does not reach the batch: a gap it could not cross
        }
        for (i, r) in records.iter().enumerate() {
            fold_record(&mut o.folder, seq + i as u64, r, io);
        }
        let count = records.len() as u64;
        if !run {
            let bytes = records.iter().map(|r| r.len() as u64).sum();
            let _ = o.checkpointer.appended(count, bytes);
            return;
        }
        if let Ok(Some(truncate)) = o.checkpointer.acknowledged(Seq(seq), count) {
            t.run_open = false;
            if t.truncate.is_none()
                && let Ok(call) = t.core.truncate_call(truncate.up_to)
            {
                self.start_truncate(now, t, call, io);
            } else if let Some(o) = &mut self.owner {
                o.checkpointer.truncate_settled();
            }
        }
    }

    fn on_truncate_done(&mut self, now: u64, t: &mut Term, decided: Result<Decided, AnswerError>, io: &mut ClientIo) {
        if let Some(f) = t.truncate.take()
            && let Some(s) = f.answered_by()
        {
            self.hint = Some(s);
        }
        match t.core.on_truncated(decided) {
            Ok(view) => self.view = view,
            Err(WriterError::Superseded { view }) => {
                self.view = view;
                t.ending = true;
            }
            Err(_) => {}
        }
        if let Some(o) = &mut self.owner {
            o.checkpointer.truncate_settled();
        }
        // A supersession marks every batch in flight: their requests are abandoned.
        if t.core.superseded().is_some() {
            for w in t.writes.values_mut() {
                w.flight = None;
            }
        }
        self.drain_reports(now, t, io);
    }

    fn wake_catch_up(&mut self, now: u64, t: &mut Term, io: &mut ClientIo) {
        let Some(c) = &mut t.catch_up else { return };
        if c.in_flight.is_some() || now < c.next_at {
            return;
        }
        let r = c.cursor.next_request();
        let request = ReadRequest {
            from: r.from,
            limit: r.limit,
            max_bytes: r.max_bytes,
            wait_ticks: 0,
            consistency: Consistency::Reached(c.target),
        };
        let to = match self.hint.filter(|_| r.attempt == 0) {
            Some(h) => h,
            None => *self.rng.pick(&self.voters),
        };
        c.in_flight = Some(io.send(to, Request::Read(request)));
    }

    fn on_catch_up_reply(&mut self, now: u64, t: &mut Term, reply: Reply, io: &mut ClientIo) {
        let (Some(c), Some(o)) = (&mut t.catch_up, &mut self.owner) else { return };
        c.in_flight = None;
        let answer = match reply {
            Reply::Read(a) => ReadAnswer::from_node(a),
            Reply::Call(_) | Reply::TimedOut | Reply::UnknownJournal | Reply::Refused => {
                ReadAnswer::Unserved { applied_to: None }
            }
        };
        let mut retry = None;
        match c.cursor.absorb(answer) {
            Ok(ReaderOutcome::Records { from, records, .. }) => {
                for (i, r) in records.iter().enumerate() {
                    let at = from.0 + i as u64;
                    io.events.push(ClientEvent::Delivered { seq: at, record: r.clone() });
                    fold_record(&mut o.folder, at, r, io);
                }
                c.attempts = 0;
                if records.is_empty() {
                    retry = Some(1);
                }
            }
            Ok(ReaderOutcome::Gap { from, resumed_at, .. }) => {
                if let Ok(events) = o.folder.gap(from, resumed_at) {
                    note_fold(&o.folder, &events, io);
                }
                io.events.push(ClientEvent::Gap { from: from.0, resumed_at: resumed_at.0 });
            }
            Ok(ReaderOutcome::Retry { attempt }) => retry = Some(attempt),
            Ok(ReaderOutcome::Unavailable { .. } | ReaderOutcome::UnknownJournal) => {
                c.attempts += 1;
                retry = Some(c.attempts);
            }
            Err(e) => {
                io.events.push(ClientEvent::Refused { why: e.to_string() });
                c.attempts += 1;
                retry = Some(c.attempts);
            }
        }
        c.next_at = match retry {
            Some(a) => now + ns(paros_client::policy::backoff(&self.params.call, a, &mut self.backoff_rng)),
            None => now,
        };
        if o.folder.next() >= c.target {
            t.catch_up = None;
        } else if c.attempts > self.params.call.attempts_max {
            // The journal cannot be read now: give the term up.
            t.catch_up = None;
            t.ending = true;
        }
    }
}
