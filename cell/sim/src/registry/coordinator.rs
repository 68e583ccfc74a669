//! The registry coordinator on one node: paros-registry's `Coordinator` driven by paros-client's
//! `WriterCore` (the fence) and `CallPolicy` (retries, redirects, settling) over the simulated
//! network, sans-IO.
//!
//! Its life, as the coordinator's module doc asks: read the journal's view; claim it with
//! `SetLeader(fresh, current)` (fencing whoever wrote before); fold it from the floor to the
//! claimed tail (restoring from the checkpoint at the floor); then submit the caller's requests,
//! write the batches the coordinator hands out (one at a time), acknowledge them, checkpoint and
//! truncate when due. A refusal naming another leader ends it for good (`superseded`); any other
//! failure of a write ends it too (its tail is no longer known): the node claims afresh while it
//! leads the registry's consensus.

use std::time::Duration;

use paros_client::JournalView;
use paros_client::{
    AnswerError, CallPolicy, CallReply, ClientConfig, Decided, Folder, FolderConfig, ReadAnswer, ReadParams,
    ReaderConfig, ReaderCursor, ReaderOutcome, Route, Seq, Step, WriterConfig, WriterCore, WriterError,
};
use paros_core::rng::Rng;
use paros_core::{Call, Consistency, LeaderUuid, NodeId, ReadRequest};
use paros_registry::{Coordinator, CoordinatorConfig, Directory, Submitted};

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
struct CallOp {
    policy: CallPolicy,
    began: u64,
    due: Option<(u64, Pending)>,
    waiting: Option<(u64, bool)>,
}

type Done = Result<Decided, AnswerError>;

impl CallOp {
    fn start(call: Call, servers: &[NodeId], hint: NodeId, rng: &mut SimRng, now: u64) -> (CallOp, Option<Done>) {
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
        let mut op = CallOp { policy, began: now, due: None, waiting: None };
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

    fn poll(&mut self, now: u64, servers: &[NodeId], token: &mut u64, sends: &mut Vec<Send>) {
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
            Pending::Send(route) => (pick(route), RegRequest::Call(self.policy.call().clone()), false),
            Pending::Read(p, route) => {
                let r = ReadRequest {
                    from: p.from,
                    limit: p.limit,
                    max_bytes: p.max_bytes,
                    wait_ticks: 0,
                    consistency: p.consistency,
                };
                (pick(route), RegRequest::Read(r), true)
            }
        };
        self.waiting = Some((*token, read));
        sends.push(Send { token: *token, to, request });
    }

    /// The answer to `token` (`None`: timed out), if it is this call's.
    fn on_reply(&mut self, now: u64, token: u64, reply: Option<&RegReply>) -> Option<Done> {
        let (t, read) = self.waiting?;
        if t != token {
            return None;
        }
        self.waiting = None;
        let elapsed = Duration::from_nanos(now - self.began);
        let step = match (read, reply) {
            (false, Some(RegReply::Call(a))) => self.policy.on_reply(CallReply::Answer(*a), elapsed),
            (false, _) => self.policy.on_reply(CallReply::NoAnswer, elapsed),
            (true, Some(RegReply::Read(a))) => self.policy.on_read(ReadAnswer::from_node(a.clone()), elapsed),
            (true, _) => self.policy.on_read(ReadAnswer::Unserved, elapsed),
        };
        self.absorb(step, now)
    }
}

/// A read the actor sends itself (the view before a claim, or a page while catching up).
#[derive(Debug, Default)]
struct ReadLoop {
    waiting: Option<u64>,
    next_at: u64,
    at: usize,
}

#[derive(Debug)]
enum Phase {
    /// Reading the journal's view for the claim's compare-and-set.
    Inspect(ReadLoop),
    Claim {
        new: LeaderUuid,
        old: Option<LeaderUuid>,
        op: CallOp,
    },
    /// Folding from the floor up to the claimed tail.
    CatchUp {
        tail: Seq,
        cursor: ReaderCursor,
        folder: Folder<Directory>,
        read: ReadLoop,
    },
    Run(Box<Running>),
    /// Superseded, or failed: the node starts a new actor while it leads.
    Over,
}

#[derive(Debug)]
struct Running {
    coordinator: Coordinator,
    write: Option<(Seq, CallOp)>,
    truncate: Option<CallOp>,
}

/// The registry coordinator of one node, one term.
#[derive(Debug)]
pub struct CoordinatorActor {
    pub name: String,
    me: NodeId,
    servers: Vec<NodeId>,
    config: CoordinatorConfig,
    writer: WriterCore,
    rng: SimRng,
    token: u64,
    phase: Phase,
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
        CoordinatorActor {
            name,
            me,
            servers,
            config,
            writer,
            rng,
            token: 0,
            phase: Phase::Inspect(ReadLoop { at, ..ReadLoop::default() }),
        }
    }

    /// Whether this term is over (superseded or failed).
    #[must_use]
    pub fn is_over(&self) -> bool {
        matches!(self.phase, Phase::Over)
    }

    /// The coordinator's counters, while it runs.
    #[must_use]
    pub fn stats(&self) -> Option<paros_registry::Stats> {
        match &self.phase {
            Phase::Run(r) => Some(r.coordinator.stats()),
            _ => None,
        }
    }

    /// Whether it is still before its first write (inspecting, claiming, catching up).
    #[must_use]
    pub fn is_starting(&self) -> bool {
        matches!(self.phase, Phase::Inspect(_) | Phase::Claim { .. } | Phase::CatchUp { .. })
    }

    fn over(&mut self, ctx: &mut Ctx<'_>, why: String) {
        ctx.notes.push(format!("{} over: {why}", self.name));
        if let Phase::Run(r) = &mut self.phase {
            let s = r.coordinator.stats();
            ctx.audit.figures.runs_planned += s.runs_planned;
            ctx.audit.figures.truncations += s.truncations;
        }
        self.phase = Phase::Over;
    }

    fn read(&mut self, from: Seq, limit: u32, max_bytes: u32, sends: &mut Vec<Send>) -> u64 {
        self.token += 1;
        let at = match &self.phase {
            Phase::Inspect(r) | Phase::CatchUp { read: r, .. } => r.at,
            _ => 0,
        };
        let request = ReadRequest { from, limit, max_bytes, wait_ticks: 0, consistency: Consistency::Linearizable };
        sends.push(Send {
            token: self.token,
            to: self.servers[at % self.servers.len()],
            request: RegRequest::Read(request),
        });
        self.token
    }

    /// One step at `ctx.now`.
    pub fn wake(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        match &mut self.phase {
            Phase::Inspect(r) if r.waiting.is_none() && r.next_at <= now => {
                let token = self.read(Seq(0), 1, 1, &mut ctx.sends);
                if let Phase::Inspect(r) = &mut self.phase {
                    r.waiting = Some(token);
                }
            }
            Phase::CatchUp { cursor, read, .. } if read.waiting.is_none() && read.next_at <= now => {
                let r = cursor.next_request();
                let token = self.read(r.from, r.limit, r.max_bytes, &mut ctx.sends);
                if let Phase::CatchUp { read, .. } = &mut self.phase {
                    read.waiting = Some(token);
                }
            }
            Phase::Claim { op, .. } => op.poll(now, &self.servers, &mut self.token, &mut ctx.sends),
            Phase::Run(_) => self.run(ctx),
            _ => {}
        }
    }

    /// The answer to `token` (`None`: timed out).
    pub fn on_reply(&mut self, ctx: &mut Ctx<'_>, token: u64, reply: Option<RegReply>) {
        let now = ctx.now;
        match &mut self.phase {
            Phase::Inspect(r) if r.waiting == Some(token) => {
                r.waiting = None;
                match reply {
                    Some(RegReply::Read(a)) => match ReadAnswer::from_node(a) {
                        ReadAnswer::Page { view, .. } | ReadAnswer::Truncated { view } => self.claim(ctx, view),
                        _ => {
                            r.at += 1;
                            r.next_at = now + RETRY_NS;
                        }
                    },
                    _ => {
                        r.at += 1;
                        r.next_at = now + RETRY_NS;
                    }
                }
            }
            Phase::Claim { new, old, op } => {
                let (new, old) = (*new, *old);
                if let Some(done) = op.on_reply(now, token, reply.as_ref()) {
                    self.claimed(ctx, new, old, done);
                } else {
                    self.wake(ctx);
                }
            }
            Phase::CatchUp { read, .. } if read.waiting == Some(token) => {
                read.waiting = None;
                if reply.is_none() {
                    read.at += 1;
                    read.next_at = now + RETRY_NS;
                }
                self.catch_up(ctx, reply);
            }
            Phase::Run(_) => self.run_reply(ctx, token, reply.as_ref()),
            _ => {}
        }
    }

    fn claim(&mut self, ctx: &mut Ctx<'_>, view: JournalView) {
        let new = loop {
            let raw = u128::from(self.rng.u64()) << 64 | u128::from(self.rng.u64());
            if let Some(u) = LeaderUuid::new(raw) {
                break u;
            }
        };
        let call = match self.writer.claim_call(new, view) {
            Ok(c) => c,
            Err(e) => return self.over(ctx, format!("no claim: {e}")),
        };
        ctx.audit.on_claim_sent(new);
        let (op, done) = CallOp::start(call, &self.servers, self.me, &mut self.rng, ctx.now);
        self.phase = Phase::Claim { new, old: view.leader, op };
        match done {
            Some(done) => self.claimed(ctx, new, view.leader, done),
            None => self.wake(ctx),
        }
    }

    fn claimed(&mut self, ctx: &mut Ctx<'_>, new: LeaderUuid, old: Option<LeaderUuid>, done: Done) {
        match self.writer.on_claimed(new, done) {
            Ok(view) => {
                ctx.audit.on_won(ctx.claims, new, old, view.next_seq);
                ctx.notes.push(format!("{} claimed {new:?} over {old:?} at seq{}", self.name, view.next_seq.0));
                let config = ReaderConfig {
                    page_records_max: PAGE_RECORDS,
                    page_bytes_max: PAGE_BYTES,
                    wait_ms: 0,
                    unserved_retries_max: 3,
                };
                let cursor = ReaderCursor::new(Seq(0), config).expect("valid page bounds");
                let folder = Folder::new(Directory::new(), Seq(0), FolderConfig::default());
                let at = self.servers.iter().position(|s| *s == self.me).unwrap_or(0);
                self.phase = Phase::CatchUp {
                    tail: view.next_seq,
                    cursor,
                    folder,
                    read: ReadLoop { at, ..ReadLoop::default() },
                };
                self.catch_up(ctx, None);
            }
            Err(WriterError::Lost { .. } | WriterError::Undecided { .. }) => {
                let at = self.servers.iter().position(|s| *s == self.me).unwrap_or(0);
                self.phase = Phase::Inspect(ReadLoop { at, next_at: ctx.now + RETRY_NS, waiting: None });
            }
            Err(e) => self.over(ctx, format!("the claim failed: {e}")),
        }
    }

    /// Takes in a catch-up page (`None`: nothing yet, or timed out) and moves on once the
    /// folder reached the claimed tail.
    fn catch_up(&mut self, ctx: &mut Ctx<'_>, reply: Option<RegReply>) {
        let now = ctx.now;
        let name = self.name.clone();
        let Phase::CatchUp { tail, cursor, folder, read } = &mut self.phase else { return };
        if let Some(RegReply::Read(a)) = reply {
            match cursor.absorb(ReadAnswer::from_node(a)) {
                Ok(ReaderOutcome::Records { from, records, view }) => {
                    ctx.audit.on_records(ctx.claims, &name, from, &records);
                    ctx.audit.on_view(view);
                    let events = folder.fold_page(from, &records).expect("pages at the folder's position");
                    ctx.audit.on_events(ctx.claims, &name, &events);
                    if !records.is_empty() {
                        ctx.audit.on_folded(ctx.claims, &name, folder.next(), folder.is_whole(), folder.state());
                    }
                    read.next_at = now;
                }
                Ok(ReaderOutcome::Gap { from, resumed_at, view }) => {
                    ctx.audit.on_view(view);
                    let events = folder.gap(from, resumed_at).expect("a gap at the folder's position");
                    ctx.audit.on_events(ctx.claims, &name, &events);
                    read.next_at = now;
                }
                _ => {
                    read.at += 1;
                    read.next_at = now + RETRY_NS;
                }
            }
        }
        if cursor.cursor() < *tail {
            return self.wake(ctx);
        }
        let Phase::CatchUp { folder, .. } = std::mem::replace(&mut self.phase, Phase::Over) else { return };
        match Coordinator::new(folder, self.config) {
            Ok(coordinator) => {
                self.phase = Phase::Run(Box::new(Running { coordinator, write: None, truncate: None }));
                self.run(ctx);
            }
            Err(e) => self.over(ctx, format!("no coordinator at the claimed tail: {e}")),
        }
    }

    fn run(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now;
        let Phase::Run(r) = &mut self.phase else { return };
        let mut replies = Vec::new();
        let due: Vec<_> = ctx.script.due(now).cloned().collect();
        for request in due {
            let id = request.id;
            match r.coordinator.submit(request) {
                Submitted::Answered(answer) => {
                    if matches!(answer, paros_registry::Answer::Busy) {
                        break;
                    }
                    replies.push(paros_registry::Reply { id, answer });
                }
                Submitted::Waiting => {}
            }
        }
        r.coordinator.due_checkpoint(now / MS);
        let mut failed = None;
        if r.write.is_none()
            && self.writer.in_flight() == 0
            && let Some(batch) = r.coordinator.next_append()
        {
            match self.writer.begin_write(batch) {
                Ok(call) => {
                    let Call::Write { seq, .. } = call else { unreachable!("a write") };
                    let (op, done) = CallOp::start(call, &self.servers, self.me, &mut self.rng, now);
                    r.write = Some((seq, op));
                    if done.is_some() {
                        failed = Some("a write ended before it was sent".to_owned());
                    }
                }
                Err(e) => failed = Some(format!("no write: {e}")),
            }
        }
        if failed.is_none()
            && r.truncate.is_none()
            && let Some(t) = r.coordinator.next_truncate()
        {
            match self.writer.truncate_call(t.up_to) {
                Ok(call) => {
                    ctx.notes.push(format!("{} truncates to seq{}", self.name, t.up_to.0));
                    let (op, done) = CallOp::start(call, &self.servers, self.me, &mut self.rng, now);
                    r.truncate = Some(op);
                    if done.is_some() {
                        r.truncate = None;
                        r.coordinator.truncate_settled();
                    }
                }
                Err(e) => failed = Some(format!("no truncation: {e}")),
            }
        }
        if let Some((_, op)) = &mut r.write {
            op.poll(now, &self.servers, &mut self.token, &mut ctx.sends);
        }
        if let Some(op) = &mut r.truncate {
            op.poll(now, &self.servers, &mut self.token, &mut ctx.sends);
        }
        self.answer(ctx, replies);
        if let Some(why) = failed {
            self.over(ctx, why);
        }
    }

    fn answer(&mut self, ctx: &mut Ctx<'_>, replies: Vec<paros_registry::Reply>) {
        for reply in replies {
            if ctx.script.answer(reply.id, &reply.answer) {
                ctx.audit.figures.verdicts += 1;
            }
        }
    }

    fn run_reply(&mut self, ctx: &mut Ctx<'_>, token: u64, reply: Option<&RegReply>) {
        let now = ctx.now;
        let Some(uuid) = self.writer.uuid() else { return };
        let Phase::Run(r) = &mut self.phase else { return };
        let mut outcome: Result<Vec<paros_registry::Reply>, String> = Ok(Vec::new());
        if let Some((seq, op)) = &mut r.write
            && let Some(done) = op.on_reply(now, token, reply)
        {
            let seq = *seq;
            r.write = None;
            // The fence is the core's: a write it *accepted* under our uuid. A `Duplicate` may
            // come from the policy's read-back, which compares bytes only, and a successor
            // writing the same request writes the same bytes.
            if let Ok(Decided::Verdict(paros_core::journal::Outcome::Accepted { seq, count, .. })) = &done {
                ctx.audit.on_written(ctx.claims, uuid, *seq, *count);
            }
            let completion = self.writer.complete(seq, done);
            if !completion.resend.is_empty() {
                outcome = Err("a write must be re-sent".to_owned());
            }
            while let Some((_, report)) = self.writer.next_report() {
                match report {
                    Ok(w) => match r.coordinator.acknowledged(w.seq, w.count) {
                        Ok(mut replies) => {
                            if let Ok(all) = &mut outcome {
                                all.append(&mut replies);
                            }
                        }
                        Err(e) => outcome = Err(format!("acknowledged: {e}")),
                    },
                    Err(WriterError::Superseded { view }) => {
                        ctx.audit.on_superseded(ctx.claims, uuid, view);
                        let mut replies = r.coordinator.superseded();
                        if let Ok(all) = &mut outcome {
                            all.append(&mut replies);
                        }
                        outcome = Err(format!("superseded by {:?}", view.leader));
                    }
                    Err(e) => outcome = Err(format!("a write failed: {e}")),
                }
            }
        }
        if let Some(op) = &mut r.truncate
            && let Some(done) = op.on_reply(now, token, reply)
        {
            r.truncate = None;
            match self.writer.on_truncated(done) {
                Ok(view) => {
                    ctx.audit.on_view(view);
                    r.coordinator.truncate_settled();
                }
                Err(WriterError::Superseded { view }) => {
                    ctx.audit.on_superseded(ctx.claims, uuid, view);
                    let _ = r.coordinator.superseded();
                    outcome = Err(format!("superseded by {:?} (truncating)", view.leader));
                }
                Err(_) => r.coordinator.truncate_settled(),
            }
        }
        match outcome {
            Ok(replies) => {
                self.answer(ctx, replies);
                self.run(ctx);
            }
            Err(why) => self.over(ctx, why),
        }
    }
}
