//! The registry coordinator on one node: paros-registry's sans-IO `CoordinatorTerm` (the same
//! one the daemon runs), its effects carried over the simulated network with paros-client's
//! `WriterCore` (the fence) and `CallPolicy` (retries, redirects, settling).
//!
//! The term decides (claim, catch up, what to write, when to checkpoint and truncate, when the
//! term is over); this adapter only carries out its effects: a claim is a view read (rotating
//! over the founding nodes until one answers) and a `SetLeader` call; a catch-up read is a
//! `ReaderCursor` page; a write or a truncation is a call. It also reports to the audit what it
//! saw: claims sent and won, writes acknowledged, supersessions, pages folded.

use std::time::Duration;

use paros_client::{
    AnswerError, CallPolicy, CallReply, ClientConfig, Decided, JournalView, ReadAnswer, ReadParams, ReaderConfig,
    ReaderCursor, ReaderOutcome, Route, Seq, Step, WriterConfig, WriterCore, WriterError,
};
use paros_core::rng::Rng;
use paros_core::{Call, Consistency, JournalKey, LeaderUuid, NodeId, ReadRequest};
use paros_registry::term::{CoordinatorTerm, TermEffect, TermEnd};
use paros_registry::{Answer, CoordinatorConfig, Reply, Submitted};

use super::{PAGE_BYTES, PAGE_RECORDS, RegReply, RegRequest, RegistryAudit, Script, Send};
use crate::check::Claims;
use crate::rng::SimRng;

const MS: u64 = 1_000_000;
const RETRY_NS: u64 = 20 * MS;

/// What the actor's owner passes to every step.
#[derive(Debug)]
pub struct Ctx<'a> {
    pub now: u64,
    pub audit: &'a mut RegistryAudit,
    pub claims: &'a mut Claims,
    pub script: &'a mut Script,
    pub sends: Vec<Send>,
    /// Things worth a trace line.
    pub notes: Vec<String>,
}

/// A request a [`CallOp`] is waiting for or will send.
#[derive(Debug, Clone, Copy)]
enum Pending {
    Send(Route),
    Read(ReadParams, Route),
}

/// One decided call carried out by a `CallPolicy`.
#[derive(Debug)]
pub(crate) struct CallOp {
    /// The journal called: the registry's own (`None`), or another (the mover's calls).
    journal: Option<JournalKey>,
    policy: CallPolicy,
    began: u64,
    due: Option<(u64, Pending)>,
    waiting: Option<(u64, bool)>,
}

pub(crate) type Done = Result<Decided, AnswerError>;

impl CallOp {
    fn start(call: Call, servers: &[NodeId], hint: NodeId, rng: &mut SimRng, now: u64) -> (CallOp, Option<Done>) {
        Self::start_on(None, call, servers, hint, rng, now)
    }

    /// A call to `journal` (`None`: the registry journal).
    pub(crate) fn start_on(
        journal: Option<JournalKey>,
        call: Call,
        servers: &[NodeId],
        hint: NodeId,
        rng: &mut SimRng,
        now: u64,
    ) -> (CallOp, Option<Done>) {
        let config = ClientConfig {
            attempts_max: 12,
            redirects_max: 6,
            backoff_base: Duration::from_millis(10),
            backoff_max: Duration::from_millis(400),
            deadline: Duration::from_secs(6),
            read_back_records_max: PAGE_RECORDS,
            read_back_bytes_max: PAGE_BYTES,
            ..ClientConfig::default()
        };
        let policy = CallPolicy::new(call, servers.to_vec(), Some(hint), config, Rng::new(rng.u64()))
            .expect("a valid client config");
        let mut op = CallOp { journal, policy, began: now, due: None, waiting: None };
        let step = op.policy.start();
        let done = op.absorb(step, now);
        (op, done)
    }

    fn absorb(&mut self, step: Step, now: u64) -> Option<Done> {
        match step {
            Step::Send { route, after } => self.due = Some((now + after.as_nanos() as u64, Pending::Send(route))),
            Step::Read { params, route, after } => {
                self.due = Some((now + after.as_nanos() as u64, Pending::Read(params, route)))
            }
            Step::Done(result) => return Some(result),
        }
        None
    }

    pub(crate) fn poll(&mut self, now: u64, servers: &[NodeId], token: &mut u64, sends: &mut Vec<Send>) {
        if self.waiting.is_some() {
            return;
        }
        let Some((at, pending)) = self.due else { return };
        if at > now {
            return;
        }
        self.due = None;
        let pick = |route: Route| route.server.unwrap_or(servers[route.attempt as usize % servers.len()]);
        *token += 1;
        let (to, request, read) = match pending {
            Pending::Send(route) => {
                let (id, call) = (self.policy.id(), self.policy.call().clone());
                let request = match self.journal {
                    None => RegRequest::Call(id, call),
                    Some(key) => RegRequest::JournalCall(key, id, call),
                };
                (pick(route), request, false)
            }
            Pending::Read(p, route) => {
                let r = ReadRequest {
                    from: p.from,
                    limit: p.limit,
                    max_bytes: p.max_bytes,
                    wait_ticks: 0,
                    consistency: p.consistency,
                };
                let request = match self.journal {
                    None => RegRequest::Read(r),
                    Some(key) => RegRequest::JournalRead(key, r),
                };
                (pick(route), request, true)
            }
        };
        self.waiting = Some((*token, read));
        sends.push(Send { token: *token, to, request });
    }

    /// The answer to `token` (`None`: timed out), if it is this call's.
    pub(crate) fn on_reply(&mut self, now: u64, token: u64, reply: Option<&RegReply>) -> Option<Done> {
        let (t, read) = self.waiting?;
        if t != token {
            return None;
        }
        self.waiting = None;
        let elapsed = Duration::from_nanos(now - self.began);
        let step = match (read, reply) {
            (false, Some(RegReply::Call(a))) => self.policy.on_reply(CallReply::Answer(*a), elapsed),
            (false, Some(RegReply::UnknownJournal)) => self.policy.on_reply(CallReply::UnknownJournal, elapsed),
            (false, _) => self.policy.on_reply(CallReply::NoAnswer, elapsed),
            (true, Some(RegReply::Read(a))) => self.policy.on_read(ReadAnswer::from_node(a.clone()), elapsed),
            (true, Some(RegReply::UnknownJournal)) => self.policy.on_read(ReadAnswer::UnknownJournal, elapsed),
            (true, _) => self.policy.on_read(ReadAnswer::Unserved { applied_to: None }, elapsed),
        };
        self.absorb(step, now)
    }
}

/// The network side of a `Read` or of a claim's view read: which server, and when.
#[derive(Debug, Default)]
struct ReadLoop {
    waiting: Option<u64>,
    next_at: u64,
    at: usize,
}

impl ReadLoop {
    /// The answer did not come or did not serve: ask the next server a little later.
    fn rotate(&mut self, now: u64) {
        self.at += 1;
        self.next_at = now + RETRY_NS;
    }
}

/// How the term's `Claim` is being carried out.
#[derive(Debug)]
enum Claiming {
    /// Reading the journal's view for the claim's compare-and-set.
    Inspect(ReadLoop),
    Call {
        new: LeaderUuid,
        old: Option<LeaderUuid>,
        op: Box<CallOp>,
    },
}

/// The registry coordinator of one node, one term.
#[derive(Debug)]
pub struct CoordinatorActor {
    pub name: String,
    me: NodeId,
    servers: Vec<NodeId>,
    term: CoordinatorTerm,
    writer: WriterCore,
    rng: SimRng,
    token: u64,
    claim: Option<Claiming>,
    /// The catch-up reads: the cursor, the server and time of the next one, and whether the
    /// term wants one.
    cursor: ReaderCursor,
    read: ReadLoop,
    reading: bool,
    write: Option<(Seq, CallOp)>,
    truncate: Option<CallOp>,
    /// The term's end was reported (figures, trace).
    over: bool,
}

impl CoordinatorActor {
    #[must_use]
    pub fn new(
        name: String,
        me: NodeId,
        servers: Vec<NodeId>,
        config: CoordinatorConfig,
        rng: SimRng,
    ) -> CoordinatorActor {
        let writer = WriterCore::new(WriterConfig { batches_in_flight_max: 1, ..WriterConfig::default() })
            .expect("a valid writer config");
        let at = servers.iter().position(|s| *s == me).unwrap_or(0);
        let reader = ReaderConfig {
            page_records_max: PAGE_RECORDS,
            page_bytes_max: PAGE_BYTES,
            wait_ms: 0,
            unserved_retries_max: 3,
        };
        CoordinatorActor {
            name,
            me,
            servers,
            term: CoordinatorTerm::new(config),
            writer,
            rng,
            token: 0,
            claim: None,
            cursor: ReaderCursor::new(Seq(0), reader).expect("valid page bounds"),
            read: ReadLoop { at, ..ReadLoop::default() },
            reading: false,
            write: None,
            truncate: None,
            over: false,
        }
    }

    /// Whether this term is over (superseded or failed), and how.
    #[must_use]
    pub fn ended(&self) -> Option<&TermEnd> {
        self.term.ended()
    }

    /// The coordinator's counters, while it serves.
    #[must_use]
    pub fn stats(&self) -> Option<paros_registry::Stats> {
        self.term.is_serving().then(|| self.term.stats())
    }

    /// Whether it is still before its first write (claiming, catching up).
    #[must_use]
    pub fn is_starting(&self) -> bool {
        self.term.is_starting()
    }

    fn first_server(&self) -> usize {
        self.servers.iter().position(|s| *s == self.me).unwrap_or(0)
    }

    /// Sends a linearizable read of `[from, +limit)` to the server at `at` (rotating).
    fn send_read(&mut self, at: usize, from: Seq, limit: u32, max_bytes: u32, sends: &mut Vec<Send>) -> u64 {
        self.token += 1;
        let request = ReadRequest { from, limit, max_bytes, wait_ticks: 0, consistency: Consistency::Linearizable };
        sends.push(Send {
            token: self.token,
            to: self.servers[at % self.servers.len()],
            request: RegRequest::Read(request),
        });
        self.token
    }

    /// One step at `ctx.now`: the script's requests to a serving term, the term's effects, and
    /// the requests now due on the network.
    pub fn wake(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        if self.term.is_serving() {
            let mut replies = Vec::new();
            let due: Vec<_> = ctx.script.due(now).cloned().collect();
            for request in due {
                let id = request.id;
                match self.term.submit(request) {
                    Submitted::Answered(Answer::Busy) => break,
                    Submitted::Answered(answer) => replies.push(Reply { id, answer }),
                    Submitted::Waiting => {}
                }
            }
            answer(ctx, replies);
        }
        loop {
            let writer = &self.writer;
            let effects = self.term.poll(now / MS, |bytes| writer.has_room(bytes));
            if effects.is_empty() {
                break;
            }
            for effect in effects {
                self.carry_out(ctx, effect);
            }
        }
        self.end_if_over(ctx);
        self.send_due(ctx);
    }

    fn carry_out(&mut self, ctx: &mut Ctx<'_>, effect: TermEffect) {
        let now = ctx.now;
        match effect {
            TermEffect::Claim => {
                self.claim = Some(Claiming::Inspect(ReadLoop { at: self.first_server(), ..ReadLoop::default() }));
            }
            TermEffect::Read { from } => {
                debug_assert_eq!(self.cursor.cursor(), from, "the cursor reads where the term folded up to");
                self.reading = true;
            }
            TermEffect::Write(batch) => match self.writer.begin_write(batch) {
                Ok(call) => {
                    let Call::Write { seq, .. } = call else { unreachable!("a write") };
                    let (op, done) = CallOp::start(call, &self.servers, self.me, &mut self.rng, now);
                    self.write = Some((seq, op));
                    if let Some(done) = done {
                        self.written(ctx, done);
                    }
                }
                Err(e) => self.term.written(Err(e)),
            },
            TermEffect::Truncate { up_to } => match self.writer.truncate_call(up_to) {
                Ok(call) => {
                    ctx.notes.push(format!("{} truncates to seq{}", self.name, up_to.0));
                    let (op, done) = CallOp::start(call, &self.servers, self.me, &mut self.rng, now);
                    self.truncate = Some(op);
                    if let Some(done) = done {
                        self.truncated(ctx, done);
                    }
                }
                Err(e) => self.term.truncated(Err(e)),
            },
            TermEffect::Answer(reply) => answer(ctx, vec![reply]),
        }
    }

    /// Sends what is due: the claim's view read or call, a catch-up read, the write, the
    /// truncation.
    fn send_due(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        if self.term.ended().is_some() {
            return;
        }
        match &mut self.claim {
            Some(Claiming::Inspect(r)) if r.waiting.is_none() && r.next_at <= now => {
                let at = r.at;
                let token = self.send_read(at, Seq(0), 1, 1, &mut ctx.sends);
                if let Some(Claiming::Inspect(r)) = &mut self.claim {
                    r.waiting = Some(token);
                }
            }
            Some(Claiming::Call { op, .. }) => op.poll(now, &self.servers, &mut self.token, &mut ctx.sends),
            _ => {}
        }
        if self.reading && self.read.waiting.is_none() && self.read.next_at <= now {
            let q = self.cursor.next_request();
            let token = self.send_read(self.read.at, q.from, q.limit, q.max_bytes, &mut ctx.sends);
            self.read.waiting = Some(token);
        }
        if let Some((_, op)) = &mut self.write {
            op.poll(now, &self.servers, &mut self.token, &mut ctx.sends);
        }
        if let Some(op) = &mut self.truncate {
            op.poll(now, &self.servers, &mut self.token, &mut ctx.sends);
        }
    }

    /// The answer to `token` (`None`: timed out).
    pub fn on_reply(&mut self, ctx: &mut Ctx<'_>, token: u64, reply: Option<RegReply>) {
        let now = ctx.now;
        if self.read.waiting == Some(token) {
            self.read.waiting = None;
            self.page(ctx, reply);
            return self.wake(ctx);
        }
        match &mut self.claim {
            Some(Claiming::Inspect(r)) if r.waiting == Some(token) => {
                r.waiting = None;
                let view = match reply {
                    Some(RegReply::Read(a)) => match ReadAnswer::from_node(a) {
                        ReadAnswer::Page { view, .. } | ReadAnswer::Truncated { view } => Some(view),
                        _ => None,
                    },
                    _ => None,
                };
                match view {
                    Some(view) => self.send_claim(ctx, view),
                    None => r.rotate(now),
                }
                return self.wake(ctx);
            }
            Some(Claiming::Call { new, old, op }) => {
                let (new, old) = (*new, *old);
                if let Some(done) = op.on_reply(now, token, reply.as_ref()) {
                    self.claimed(ctx, new, old, done);
                }
            }
            _ => {}
        }
        if let Some((_, op)) = &mut self.write
            && let Some(done) = op.on_reply(now, token, reply.as_ref())
        {
            self.written(ctx, done);
        }
        if let Some(op) = &mut self.truncate
            && let Some(done) = op.on_reply(now, token, reply.as_ref())
        {
            self.truncated(ctx, done);
        }
        self.wake(ctx);
    }

    fn send_claim(&mut self, ctx: &mut Ctx<'_>, view: JournalView) {
        let new = loop {
            let raw = u128::from(self.rng.u64()) << 64 | u128::from(self.rng.u64());
            if let Some(u) = LeaderUuid::new(raw) {
                break u;
            }
        };
        let call = match self.writer.claim_call(new, view) {
            Ok(c) => c,
            Err(e) => {
                self.claim = None;
                return self.term.claimed(Err(e));
            }
        };
        ctx.audit.on_claim_sent(new);
        let (op, done) = CallOp::start(call, &self.servers, self.me, &mut self.rng, ctx.now);
        self.claim = Some(Claiming::Call { new, old: view.leader, op: Box::new(op) });
        if let Some(done) = done {
            self.claimed(ctx, new, view.leader, done);
        }
    }

    fn claimed(&mut self, ctx: &mut Ctx<'_>, new: LeaderUuid, old: Option<LeaderUuid>, done: Done) {
        self.claim = None;
        let result = self.writer.on_claimed(new, done);
        if let Ok(view) = &result {
            ctx.audit.on_won(ctx.claims, new, old, view.next_seq);
            ctx.notes.push(format!("{} claimed {new:?} over {old:?} at seq{}", self.name, view.next_seq.0));
        }
        self.term.claimed(result);
    }

    /// A catch-up page came back (`None`: timed out).
    fn page(&mut self, ctx: &mut Ctx<'_>, reply: Option<RegReply>) {
        let now = ctx.now;
        let Some(RegReply::Read(a)) = reply else {
            // Still reading: the same page, from the next server.
            self.read.rotate(now);
            return;
        };
        let outcome = self.cursor.absorb(ReadAnswer::from_node(a));
        let name = self.name.clone();
        let (records, retry) = match &outcome {
            Ok(ReaderOutcome::Records { from, records, view }) => {
                ctx.audit.on_records(ctx.claims, &name, *from, records);
                ctx.audit.on_view(*view);
                (!records.is_empty(), false)
            }
            Ok(ReaderOutcome::Gap { view, .. }) => {
                ctx.audit.on_view(*view);
                (false, false)
            }
            _ => (false, true),
        };
        if retry {
            self.read.rotate(now);
        } else {
            self.read.next_at = now;
        }
        self.reading = false;
        let events = self.term.page(outcome);
        ctx.audit.on_events(ctx.claims, &name, &events);
        if records && let Some(folder) = self.term.folder() {
            ctx.audit.on_folded(ctx.claims, &name, folder.next(), folder.is_whole(), folder.state());
        }
    }

    /// The write in flight ended with `done`.
    fn written(&mut self, ctx: &mut Ctx<'_>, done: Done) {
        let Some((seq, _)) = self.write.take() else { return };
        let Some(uuid) = self.writer.uuid() else { return };
        // The fence is the core's: a write it *accepted* under our uuid. A `Duplicate` may
        // come from the policy's read-back, which compares bytes only, and a successor
        // writing the same request writes the same bytes.
        if let Ok(Decided::Verdict(paros_core::journal::Outcome::Accepted { seq, count, .. })) = &done {
            ctx.audit.on_written(ctx.claims, uuid, *seq, *count);
        }
        let completion = self.writer.complete(seq, done);
        if !completion.resend.is_empty() {
            // One batch in flight at a time: one never arrives ahead of another.
            self.term.shell_failed("a write must be re-sent");
        }
        while let Some((_, report)) = self.writer.next_report() {
            if let Err(WriterError::Superseded { view }) = &report {
                ctx.audit.on_superseded(ctx.claims, uuid, *view);
            }
            self.term.written(report);
        }
    }

    /// The truncation in flight ended with `done`.
    fn truncated(&mut self, ctx: &mut Ctx<'_>, done: Done) {
        self.truncate = None;
        let Some(uuid) = self.writer.uuid() else { return };
        let result = self.writer.on_truncated(done);
        match &result {
            Ok(view) => ctx.audit.on_view(*view),
            Err(WriterError::Superseded { view }) => ctx.audit.on_superseded(ctx.claims, uuid, *view),
            Err(_) => {}
        }
        self.term.truncated(result);
    }

    /// Once the term ended: its figures and a trace line, once.
    fn end_if_over(&mut self, ctx: &mut Ctx<'_>) {
        let Some(end) = self.term.ended() else { return };
        if std::mem::replace(&mut self.over, true) {
            return;
        }
        ctx.notes.push(format!("{} over: {end}", self.name));
        let s = self.term.stats();
        ctx.audit.figures.runs_planned += s.runs_planned;
        ctx.audit.figures.truncations += s.truncations;
    }
}

fn answer(ctx: &mut Ctx<'_>, replies: Vec<Reply>) {
    for reply in replies {
        if ctx.script.answer(reply.id, &reply.answer) {
            ctx.audit.figures.verdicts += 1;
        }
    }
}
