//! The registry's mover on a node whose coordinator term runs: paros-registry's sans-IO `Mover`
//! (the one the daemon runs beside its coordinator, `daemon::spawn_mover`), fed the directory
//! the node's follower folded, its actions carried over the simulated network: a `Reconfigure`
//! by paros-client's `CallPolicy` (retries, redirects, settling), a confirmation by one
//! linearizable read at one new voter, a `MoveDone` handed to the registry's caller under the
//! move's own request id (`mover::done_id`), so a mover of a later term that drives the same move
//! again is judged once.

use std::collections::BTreeMap;

use paros_client::Seq;
use paros_core::journal::{Outcome, Voters};
use paros_core::{Call, Consistency, JournalKey, NodeId, ReadRequest};
use paros_registry::command::Epoch;
use paros_registry::mover::{MoveAction, MoveResult, Mover, MoverConfig};
use paros_registry::{Answer, Command, Directory, Op, PlanConfig, PlannedMove, Request, RequestId, Seen};

use super::coordinator::{CallOp, Done};
use super::plan::{Script, Scripted};
use super::{RegReply, RegRequest, Send};
use crate::rng::SimRng;

const MS: u64 = 1_000_000;

/// How often a coordinator's planner looks for seats to move.
pub const PLAN_EVERY_NS: u64 = 200 * MS;

/// What the mover's owner passes to every step.
#[derive(Debug)]
pub struct MoverCtx<'a> {
    pub now: u64,
    /// The directory the node's follower last published, if it published one.
    pub directory: Option<&'a Directory>,
    pub script: &'a mut Script,
    pub sends: Vec<Send>,
    /// Things worth a trace line.
    pub notes: Vec<String>,
    /// The moves (journal, epoch) this step asked a `Reconfigure` for.
    pub asked: Vec<(JournalKey, u64)>,
    /// The moves this step saw recorded done.
    pub recorded: Vec<(JournalKey, u64)>,
    /// When each machine was last seen up, in seconds (what the planner judges "gone" by).
    pub last_seen_s: &'a BTreeMap<NodeId, u64>,
    /// The moves the planner proposed this step (heal and drain), for the registry's caller.
    pub planned: Vec<PlannedMove>,
}

/// The mover of one coordinator term.
#[derive(Debug)]
pub struct MoverActor {
    pub name: String,
    me: NodeId,
    mover: Mover,
    rng: SimRng,
    token: u64,
    /// The `Reconfigure` calls in flight, and the servers each asks.
    calls: BTreeMap<JournalKey, (CallOp, Vec<NodeId>)>,
    /// The reads in flight, by token: a probe of a move's target (`true`) or a confirmation.
    reads: BTreeMap<u64, (JournalKey, NodeId, bool)>,
    /// The planner's bounds, and when it plans next (every [`PLAN_EVERY_NS`]).
    planner: PlanConfig,
    plan_at: u64,
    /// The `MoveDone`s handed to the registry's caller, waiting for its answer.
    recording: BTreeMap<JournalKey, (RequestId, u64)>,
}

impl MoverActor {
    #[must_use]
    pub fn new(name: String, me: NodeId, config: MoverConfig, planner: PlanConfig, rng: SimRng) -> MoverActor {
        MoverActor {
            name,
            me,
            mover: Mover::new(config),
            planner,
            plan_at: 0,
            rng,
            token: 0,
            calls: BTreeMap::new(),
            reads: BTreeMap::new(),
            recording: BTreeMap::new(),
        }
    }

    /// Moves this mover recorded done.
    #[must_use]
    pub fn done(&self) -> u64 {
        self.mover.done()
    }

    /// One step at `ctx.now`: the answers the registry gave, the actions due, the requests due.
    pub fn wake(&mut self, ctx: &mut MoverCtx<'_>) {
        let now_ms = ctx.now / MS;
        let recorded: Vec<(JournalKey, u64)> = self
            .recording
            .iter()
            .filter(|(_, (id, _))| matches!(ctx.script.answer_of(*id), Some(Answer::Verdict(_))))
            .map(|(k, (_, epoch))| (*k, *epoch))
            .collect();
        for (journal, epoch) in recorded {
            self.recording.remove(&journal);
            self.mover.on_result(MoveResult::Recorded { journal }, now_ms);
            ctx.recorded.push((journal, epoch));
        }
        if let Some(directory) = ctx.directory {
            if ctx.now >= self.plan_at {
                self.plan_at = ctx.now + PLAN_EVERY_NS;
                let seen = Seen { now_s: ctx.now / (1_000 * MS), last_seen_s: ctx.last_seen_s };
                ctx.planned.extend(paros_registry::plan(directory, &self.planner, seen));
            }
            for action in self.mover.poll(directory, now_ms) {
                self.carry_out(ctx, directory, action);
            }
        }
        for (op, servers) in self.calls.values_mut() {
            op.poll(ctx.now, servers, &mut self.token, &mut ctx.sends);
        }
    }

    fn carry_out(&mut self, ctx: &mut MoverCtx<'_>, directory: &Directory, action: MoveAction) {
        let now = ctx.now;
        match action {
            MoveAction::Reconfigure { journal, epoch, voters } => {
                let servers: Vec<NodeId> = directory.journal(journal).map(|j| j.voters.to_vec()).unwrap_or_default();
                let (Ok(set), Some(&hint)) = (Voters::new(&voters), servers.first()) else {
                    return self.mover.on_result(MoveResult::Failed { journal }, now / MS);
                };
                ctx.notes.push(format!("{} asks {journal:?} to reconfigure to {epoch:?} {voters:?}", self.name));
                ctx.asked.push((journal, epoch.0));
                let call = Call::Reconfigure { epoch: epoch.0, voters: set };
                let (op, done) = CallOp::start_on(Some(journal), call, &servers, hint, &mut self.rng, now);
                match done {
                    Some(done) => self.decided(journal, done, now),
                    None => {
                        self.calls.insert(journal, (op, servers));
                    }
                }
            }
            MoveAction::Probe { journal, node } | MoveAction::Confirm { journal, node } => {
                self.token += 1;
                let probe = matches!(action, MoveAction::Probe { .. });
                let consistency = if probe { Consistency::Reached(Seq(0)) } else { Consistency::Linearizable };
                let request = ReadRequest { from: Seq(0), limit: 1, max_bytes: 1, wait_ticks: 0, consistency };
                self.reads.insert(self.token, (journal, node, probe));
                ctx.sends.push(Send {
                    token: self.token,
                    to: node,
                    request: RegRequest::JournalRead(journal, request),
                });
            }
            MoveAction::Done { journal, epoch, id } => {
                ctx.notes.push(format!("{} records {journal:?} moved to {epoch:?}", self.name));
                let op = Op::Command(Command::MoveDone { journal, epoch: Epoch(epoch.0) });
                ctx.script.push(Scripted { at_ns: now, request: Request { id, op } });
                self.recording.insert(journal, (id, epoch.0));
            }
        }
    }

    fn decided(&mut self, journal: JournalKey, done: Done, now: u64) {
        let result = match done {
            Ok(paros_client::Decided::Verdict(
                Outcome::Reconfigured { epoch, .. } | Outcome::StaleEpoch { epoch, .. },
            )) => MoveResult::Decided { journal, in_force: Epoch(epoch) },
            _ => MoveResult::Failed { journal },
        };
        self.mover.on_result(result, now / MS);
    }

    /// The answer to `token` (`None`: timed out), if it is this mover's; then a step.
    pub fn on_reply(&mut self, ctx: &mut MoverCtx<'_>, token: u64, reply: Option<RegReply>) {
        let now = ctx.now;
        if let Some((journal, node, probe)) = self.reads.remove(&token) {
            let answer = match reply {
                Some(RegReply::Read(a)) => Some(paros_client::ReadAnswer::from_node(a)),
                Some(RegReply::UnknownJournal) => Some(paros_client::ReadAnswer::UnknownJournal),
                Some(RegReply::Call(_)) | None => None,
            };
            self.mover.on_result(MoveResult::of_read(journal, node, probe, answer.as_ref()), now / MS);
        } else {
            let done = self
                .calls
                .iter_mut()
                .find_map(|(key, (op, _))| op.on_reply(now, token, reply.as_ref()).map(|d| (*key, d)));
            if let Some((journal, done)) = done {
                self.calls.remove(&journal);
                self.decided(journal, done, now);
            }
        }
        self.wake(ctx);
    }

    /// The node this mover runs on.
    #[must_use]
    pub fn node(&self) -> NodeId {
        self.me
    }
}
