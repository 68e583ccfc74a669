//! The registry's async loops: the coordinator (the registry journal's writer, over
//! paros-client's `Writer`) and the follower every node runs (a `Reader` of the registry that
//! places and removes the node's journals through a [`Placer`]). Thin: every decision is the
//! sans-IO [`CoordinatorTerm`]'s, [`Restarts`]' or [`Follower`]'s; these loops carry out their
//! effects.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use paros_client::{
    Client, JournalService, ReadConsistency, Reader, ReaderConfig, ReaderError, ReaderOutcome, Seq, Writer,
    WriterConfig,
};
use paros_core::{Assignment, JournalConfig, JournalKey, NodeId};
use tokio::sync::{mpsc, oneshot, watch};

use crate::coordinator::{Answer, CoordinatorConfig, Reply, Request, Submitted};
use crate::directory::Directory;
use crate::follow::Hosting;
use crate::follower::{FollowPolicy, FollowedMachine, Follower, FollowerEffect, NextRead};
use crate::term::{CoordinatorTerm, RestartConfig, Restarts, Succession, TermEffect, TermEnd, TermFailure};

/// A request and where its answer goes.
type Asked = (Request, oneshot::Sender<Answer>);

/// Sends requests to a running coordinator. Its queue is bounded; a sender waits while full.
#[derive(Clone, Debug)]
pub struct CoordinatorHandle {
    tx: mpsc::Sender<Asked>,
}

/// The coordinator loop stopped before answering.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[error("the registry coordinator stopped")]
pub struct CoordinatorGone;

impl CoordinatorHandle {
    /// Asks the coordinator and waits for the fold's answer.
    ///
    /// # Errors
    /// [`CoordinatorGone`] when the loop stopped (superseded, or failed).
    pub async fn request(&self, request: Request) -> Result<Answer, CoordinatorGone> {
        let (reply, answer) = oneshot::channel();
        self.tx.send((request, reply)).await.map_err(|_| CoordinatorGone)?;
        answer.await.map_err(|_| CoordinatorGone)
    }
}

/// The coordinator loop's bounds.
#[derive(Clone, Copy, Debug)]
pub struct CoordinatorLoopConfig {
    pub coordinator: CoordinatorConfig,
    pub writer: WriterConfig,
    /// Requests queued for the loop before senders wait.
    pub requests_queue_max: usize,
    /// How often the loop asks whether a checkpoint is due by time.
    pub checkpoint_poll: Duration,
    /// The pause before a failed term is started again.
    pub restart_backoff: Duration,
    /// Failed terms in a row after which the loop gives up.
    pub restarts_max: u32,
    /// The seat moves the registry plans (heal, drain, rebalance) and how often it plans.
    pub plan: crate::planner::PlanConfig,
    pub plan_interval: Duration,
    /// How the moves the registry records are carried out.
    pub mover: crate::mover::MoverConfig,
}

impl Default for CoordinatorLoopConfig {
    fn default() -> Self {
        CoordinatorLoopConfig {
            coordinator: CoordinatorConfig { checkpoint_interval: Some(60_000), ..CoordinatorConfig::default() },
            writer: WriterConfig::default(),
            requests_queue_max: 1024,
            checkpoint_poll: Duration::from_secs(1),
            restart_backoff: Duration::from_millis(200),
            restarts_max: 100,
            plan: crate::planner::PlanConfig::default(),
            plan_interval: Duration::from_secs(1),
            mover: crate::mover::MoverConfig::default(),
        }
    }
}

/// How the coordinator loop ended.
#[derive(Debug, thiserror::Error)]
pub enum CoordinatorStop {
    /// A successor claimed the registry journal: every waiting caller was told so.
    #[error("superseded by a successor")]
    Superseded,
    /// Every handle was dropped.
    #[error("no more requests")]
    Closed,
    /// The last term failed and the restart policy started no other.
    #[error(transparent)]
    Failed(#[from] TermFailure),
}

/// Starts the coordinator: claims the registry journal (fencing any earlier coordinator),
/// folds it from its floor, then serves requests until superseded or every handle is dropped.
/// Every decision is the sans-IO [`CoordinatorTerm`]'s and [`Restarts`]'; this loop carries out
/// its effects over a `Writer` and a `Reader`.
///
/// A term that fails (a write halted, the journal unreadable for a while) is started again
/// after [`CoordinatorLoopConfig::restart_backoff`], at most
/// [`CoordinatorLoopConfig::restarts_max`] times in a row: the next term claims anew, so it
/// learns the tail and fences the failed one. Callers waiting on a failed term see
/// [`CoordinatorGone`]; re-sending the same request id is answered from the fold. A term that
/// was superseded, or whose handles are all dropped, is not restarted. Each term's writer draws
/// its fence from the OS's random generator, so no other coordinator can hold the same one.
#[must_use]
pub fn spawn_coordinator<S>(
    client: Client<S>,
    journal: S::Journal,
    config: CoordinatorLoopConfig,
) -> (CoordinatorHandle, tokio::task::JoinHandle<CoordinatorStop>)
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    let (tx, mut rx) = mpsc::channel(config.requests_queue_max.max(1));
    let task = tokio::spawn(async move {
        let mut restarts = Restarts::new(RestartConfig {
            backoff: config.restart_backoff,
            failures_max: config.restarts_max,
            succession: Succession::Once,
        });
        let start = tokio::time::Instant::now();
        loop {
            let end = match coordinate(client.clone(), journal.clone(), config, start, &mut rx).await {
                Ok(end) => end,
                Err(closed) => return closed,
            };
            let Some(pause) = restarts.after(&end) else { return end.into() };
            tokio::time::sleep(pause).await;
        }
    });
    (CoordinatorHandle { tx }, task)
}

impl From<TermEnd> for CoordinatorStop {
    fn from(end: TermEnd) -> Self {
        match end {
            TermEnd::Superseded { .. } => CoordinatorStop::Superseded,
            TermEnd::Failed(failure) => CoordinatorStop::Failed(failure),
        }
    }
}

/// Milliseconds since the loop started: the coordinator's clock for time-based checkpoints.
fn millis(start: tokio::time::Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

type Waiters = BTreeMap<crate::RequestId, Vec<oneshot::Sender<Answer>>>;

/// Runs one term; `Ok` with how it ended, `Err` when every handle was dropped.
async fn coordinate<S>(
    client: Client<S>,
    journal: S::Journal,
    config: CoordinatorLoopConfig,
    start: tokio::time::Instant,
    requests: &mut mpsc::Receiver<Asked>,
) -> Result<TermEnd, CoordinatorStop>
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    let mut term = CoordinatorTerm::new(config.coordinator);
    let mut writer = match Writer::new(client.clone(), journal.clone(), config.writer) {
        Ok(w) => w,
        Err(_) => return Ok(TermEnd::Failed(TermFailure::Shell("invalid writer configuration"))),
    };
    let Ok(mut reader) =
        Reader::new(client, journal, Seq(0), ReaderConfig::default(), ReadConsistency::Linearizable, 0)
    else {
        return Ok(TermEnd::Failed(TermFailure::Shell("invalid reader configuration")));
    };
    let mut waiters = Waiters::new();
    let mut poll = tokio::time::interval(config.checkpoint_poll);
    loop {
        let effects = term.poll(millis(start), |bytes| writer.has_room(bytes));
        // At most one of these is handed out at a time, and the term waits for its answer.
        let mut claim = false;
        let mut read = None;
        let mut truncate = None;
        let mut wrote = false;
        for effect in effects {
            match effect {
                TermEffect::Claim => claim = true,
                TermEffect::Read { from } => read = Some(from),
                TermEffect::Write(batch) => {
                    wrote = true;
                    if let Err(e) = writer.submit(batch) {
                        term.written(Err(e));
                    }
                }
                TermEffect::Truncate { up_to } => truncate = Some(up_to),
                TermEffect::Answer(reply) => answer(reply, &mut waiters),
            }
        }
        if let Some(end) = term.ended() {
            if matches!(end, TermEnd::Superseded { .. }) {
                // Anyone still waiting asked this term: it is not the coordinator any more.
                for (_, ws) in std::mem::take(&mut waiters) {
                    for w in ws {
                        let _ = w.send(Answer::NotCoordinator);
                    }
                }
            }
            return Ok(end.clone());
        }
        if claim {
            term.claimed(writer.claim().await);
            continue;
        }
        if let Some(from) = read {
            debug_assert_eq!(reader.cursor(), from, "the reader reads where the term folded up to");
            term.page(reader.next().await);
            continue;
        }
        if let Some(up_to) = truncate {
            term.truncated(writer.truncate(up_to).await);
            continue;
        }
        if wrote {
            // The writer may have room for the next batch.
            continue;
        }
        tokio::select! {
            asked = requests.recv(), if term.is_serving() => {
                let Some(first) = asked else { return Err(CoordinatorStop::Closed) };
                // Everything already queued joins the same batch: records from many callers
                // share one slot (group commit), however they trickle in.
                let mut next_asked = Some(first);
                let mut taken = 0;
                while let Some((request, reply)) = next_asked.take() {
                    let id = request.id;
                    match term.submit(request) {
                        Submitted::Answered(answer) => drop(reply.send(answer)),
                        Submitted::Waiting => waiters.entry(id).or_default().push(reply),
                    }
                    taken += 1;
                    if taken < config.requests_queue_max {
                        next_asked = requests.try_recv().ok();
                    }
                }
            }
            report = writer.next_report(), if writer.in_flight() > 0 => {
                if let Some((_, result)) = report {
                    term.written(result);
                }
            }
            _ = poll.tick() => {}
        }
    }
}

fn answer(Reply { id, answer }: Reply, waiters: &mut Waiters) {
    for w in waiters.remove(&id).unwrap_or_default() {
        let _ = w.send(answer.clone());
    }
}

/// What a follower has done so far.
#[derive(Clone, Debug, Default)]
pub struct Followed {
    /// The registry position folded up to (exclusive).
    pub folded: Seq,
    /// The directory as folded (absent until the folder is whole).
    pub directory: Option<Arc<Directory>>,
    /// Journals placed on this node by the registry, and removed.
    pub placed: u64,
    pub removed: u64,
    /// Placements the node refused (a bad placement: logged and counted, never a panic).
    pub refused: u64,
}

/// The follower loop's bounds.
#[derive(Clone, Copy, Debug)]
pub struct FollowerConfig {
    /// How long a read at the registry's tail waits for a record.
    pub wait_ms: u32,
    /// Journals placed per control request.
    pub placements_per_request: usize,
    /// The shortest pause between two applications of the directory (placements computed and
    /// the directory published). Each one walks the whole directory, so the follower waits at
    /// least this, and at least `apply_cost_factor` times what the last one took, before the
    /// next: a burst of ten thousand creates is applied in a few steps, not one per page.
    pub apply_interval_min: Duration,
    pub apply_cost_factor: u32,
    /// The pause after a read that found the registry journal hosted nowhere it asked (its
    /// seats moving, or the machines that hold them not back yet): the follower asks again
    /// after it, never ends on it.
    pub unhosted_pause: Duration,
}

impl Default for FollowerConfig {
    fn default() -> Self {
        let policy = FollowPolicy::default();
        FollowerConfig {
            wait_ms: 500,
            placements_per_request: policy.placements_per_request,
            apply_interval_min: policy.apply_interval_min,
            apply_cost_factor: policy.apply_cost_factor,
            unhosted_pause: Duration::from_millis(100),
        }
    }
}

impl FollowerConfig {
    fn policy(&self) -> FollowPolicy {
        FollowPolicy {
            placements_per_request: self.placements_per_request,
            apply_interval_min: self.apply_interval_min,
            apply_cost_factor: self.apply_cost_factor,
        }
    }
}

/// The node stopped: it takes no more placements.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[error("the node stopped")]
pub struct PlacerStopped;

/// The port a follower places and removes journals through: a node of this process. The
/// registry defines it; the process that runs nodes implements it for their handles.
pub trait Placer: Send + Sync + 'static {
    /// Why the node refused one placement.
    type Refusal: std::error::Error + Send + 'static;

    /// Places `journals` in one request (they ride the node's next round): one result each,
    /// in order.
    fn place_all(
        &self,
        journals: Vec<Assignment>,
    ) -> impl Future<Output = Result<Vec<Result<(), Self::Refusal>>, PlacerStopped>> + Send;

    /// Removes `journal` from the node as the directory at configuration `epoch` asks: callers
    /// waiting on it are answered that it is unknown. `false` when the node refused: its copy
    /// promised in a later epoch, so the directory is behind the journal's own log there
    /// (docs/reconfiguration.md, rule 13); asked again when the directory moves.
    fn remove(&self, journal: JournalKey, epoch: u64) -> impl Future<Output = Result<bool, PlacerStopped>> + Send;
}

/// Starts the follower of node `me`: folds the registry journal `registry` from its floor
/// forever and makes the node host exactly the journals the directory places on it (`hosted`
/// is what it hosts at the start). Progress is published on the returned watch.
#[must_use]
pub fn spawn_follower<S, P>(
    client: Client<S>,
    registry: JournalKey,
    me: NodeId,
    placer: P,
    hosted: BTreeMap<JournalKey, JournalConfig>,
    config: FollowerConfig,
) -> (watch::Receiver<Followed>, tokio::task::JoinHandle<String>)
where
    S: JournalService<Journal = JournalKey> + 'static,
    P: Placer,
{
    spawn_follower_of(client, registry, vec![FollowedNode { id: me, placer, hosted }], config)
}

/// A node a follower places journals on, and what it hosts at the start.
#[derive(Debug)]
pub struct FollowedNode<P> {
    pub id: NodeId,
    pub placer: P,
    pub hosted: BTreeMap<JournalKey, JournalConfig>,
}

/// Starts one follower for several nodes of one process (the embedded cell's): the registry
/// is read and folded once, and each node is made to host what the directory places on it
/// before the directory is published. One directory in memory instead of one per node.
/// Every decision is the sans-IO [`Follower`]'s; this loop carries out its effects.
#[must_use]
pub fn spawn_follower_of<S, P>(
    client: Client<S>,
    registry: JournalKey,
    nodes: Vec<FollowedNode<P>>,
    config: FollowerConfig,
) -> (watch::Receiver<Followed>, tokio::task::JoinHandle<String>)
where
    S: JournalService<Journal = JournalKey> + 'static,
    P: Placer,
{
    let (tx, rx) = watch::channel(Followed::default());
    let task = tokio::spawn(async move { follow_loop(client, registry, nodes, config, tx).await });
    (rx, task)
}

async fn follow_loop<S, P>(
    client: Client<S>,
    registry: JournalKey,
    nodes: Vec<FollowedNode<P>>,
    config: FollowerConfig,
    progress: watch::Sender<Followed>,
) -> String
where
    S: JournalService<Journal = JournalKey> + 'static,
    P: Placer,
{
    let machines = nodes
        .iter()
        .map(|n| FollowedMachine { id: n.id, hosting: Hosting::voter(), hosted: n.hosted.clone() })
        .collect();
    let mut placers: BTreeMap<NodeId, P> = nodes.into_iter().map(|n| (n.id, n.placer)).collect();
    let mut follower = Follower::new(registry, machines, config.policy());
    let Ok(mut reader) =
        Reader::new(client, registry, Seq(0), ReaderConfig::default(), ReadConsistency::Linearizable, config.wait_ms)
    else {
        return "invalid reader configuration".into();
    };
    let start = tokio::time::Instant::now();
    let mut followed = Followed::default();
    loop {
        let outcome = match follower.next_read() {
            NextRead::Once => reader.next().await,
            NextRead::Follow => reader.follow().await,
        };
        let unhosted = matches!(outcome, Ok(ReaderOutcome::UnknownJournal) | Err(ReaderError::UnknownJournal));
        if let Err(e) = follower.read(outcome, reader.caught_up()) {
            return e.to_string();
        }
        if unhosted {
            tokio::time::sleep(config.unhosted_pause).await;
        }
        for effect in follower.poll(start.elapsed()) {
            match effect {
                FollowerEffect::Place { machine, journals } => {
                    let Some(placer) = placers.get(&machine) else { continue };
                    let Ok(results) = placer.place_all(journals.clone()).await else {
                        // A node stopped (killed, or failed): the others are still followed.
                        placers.remove(&machine);
                        if placers.is_empty() {
                            return "every node stopped".into();
                        }
                        continue;
                    };
                    let placed: Vec<bool> = results.iter().map(Result::is_ok).collect();
                    follower.placed(machine, &journals, &placed);
                }
                FollowerEffect::Remove { machine, journal, epoch } => {
                    let Some(placer) = placers.get(&machine) else { continue };
                    match placer.remove(journal, epoch).await {
                        Ok(true) => follower.removed(machine, journal),
                        // The node's copy is ahead of the directory: asked again once it moves.
                        Ok(false) => {}
                        Err(_) => {
                            placers.remove(&machine);
                            if placers.is_empty() {
                                return "every node stopped".into();
                            }
                        }
                    }
                }
                FollowerEffect::Publish => {
                    followed.directory = follower.directory();
                    follower.published(start.elapsed());
                }
            }
        }
        let stats = follower.stats();
        followed.folded = follower.folder().next();
        (followed.placed, followed.removed, followed.refused) = (stats.placed, stats.removed, stats.refused);
        progress.send_replace(followed.clone());
    }
}

/// Runs the [`Mover`](crate::mover::Mover) over the directory `followed` publishes: each
/// `Reconfigure` goes through `client`'s call rules, each confirmation is a linearizable read
/// pinned to the new voter, each `MoveDone` goes to the `coordinator`. Stops when the
/// follower's channel closes.
pub fn spawn_mover<S>(
    client: Client<S>,
    coordinator: CoordinatorHandle,
    mut followed: watch::Receiver<Followed>,
    config: crate::mover::MoverConfig,
) -> tokio::task::JoinHandle<()>
where
    S: JournalService<Journal = JournalKey> + 'static,
{
    use crate::mover::{MoveResult, Mover};
    tokio::spawn(async move {
        let mut mover = Mover::new(config);
        let start = tokio::time::Instant::now();
        let (done_tx, mut done_rx) = mpsc::channel::<MoveResult>(config.moves_max.max(1) * 8);
        let pause = Duration::from_millis(config.retry_ms.max(1));
        loop {
            let directory = followed.borrow().directory.clone();
            if let Some(directory) = directory {
                for action in mover.poll(&directory, millis(start)) {
                    let (client, coordinator, done) = (client.clone(), coordinator.clone(), done_tx.clone());
                    tokio::spawn(async move {
                        let result = carry_out(&client, &coordinator, action).await;
                        let _ = done.send(result).await;
                    });
                }
            }
            tokio::select! {
                changed = followed.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                Some(result) = done_rx.recv() => mover.on_result(result, millis(start)),
                () = tokio::time::sleep(pause) => {}
            }
        }
    })
}

/// Carries out one mover action and says how it ended.
async fn carry_out<S>(
    client: &Client<S>,
    coordinator: &CoordinatorHandle,
    action: crate::mover::MoveAction,
) -> crate::mover::MoveResult
where
    S: JournalService<Journal = JournalKey>,
{
    use paros_client::{Decided, ReadParams, Route};
    use paros_core::journal::{Outcome, Voters};
    use paros_core::{Call, Consistency};

    use crate::command::Epoch;
    use crate::mover::{MoveAction, MoveResult};
    match action {
        MoveAction::Reconfigure { journal, epoch, voters } => {
            let Ok(voters) = Voters::new(&voters) else { return MoveResult::Failed { journal } };
            match client.call(&journal, Call::Reconfigure { epoch: epoch.0, voters }).await {
                Ok(Decided::Verdict(Outcome::Reconfigured { epoch: e, .. } | Outcome::StaleEpoch { epoch: e, .. })) => {
                    MoveResult::Decided { journal, in_force: Epoch(e) }
                }
                _ => MoveResult::Failed { journal },
            }
        }
        MoveAction::Probe { journal, node } => {
            let params = ReadParams {
                from: Seq(0),
                limit: 1,
                max_bytes: 1,
                wait_ms: 0,
                consistency: Consistency::Reached(Seq(0)),
            };
            let route = Route { server: Some(node), attempt: 0 };
            let answer = client.service().read(&journal, params, route).await;
            MoveResult::of_read(journal, node, true, Some(&answer))
        }
        MoveAction::Confirm { journal, node } => {
            let params =
                ReadParams { from: Seq(0), limit: 1, max_bytes: 1, wait_ms: 0, consistency: Consistency::Linearizable };
            let route = Route { server: Some(node), attempt: 0 };
            let answer = client.service().read(&journal, params, route).await;
            MoveResult::of_read(journal, node, false, Some(&answer))
        }
        MoveAction::Done { journal, epoch, id } => {
            let request =
                Request { id, op: crate::coordinator::Op::Command(crate::Command::MoveDone { journal, epoch }) };
            match coordinator.request(request).await {
                Ok(Answer::Verdict(_)) => MoveResult::Recorded { journal },
                _ => MoveResult::Failed { journal },
            }
        }
    }
}

/// Plans seat moves every `interval` ([`crate::planner::plan`]: heal, drain, rebalance) over
/// the directory `followed` publishes and asks the `coordinator` to record each
/// (`MoveSeat`, under an id drawn from the move, so a plan repeated while the first request
/// is out is judged once). `alive` says which machines are up now; a machine is judged
/// unseen from the last time it was, counted from when this loop first saw it in the
/// directory. Stops when the follower's channel closes.
pub fn spawn_planner<A>(
    coordinator: CoordinatorHandle,
    mut followed: watch::Receiver<Followed>,
    alive: A,
    config: crate::planner::PlanConfig,
    interval: Duration,
) -> tokio::task::JoinHandle<()>
where
    A: Fn() -> Vec<NodeId> + Send + 'static,
{
    use crate::planner::{Seen, plan};
    tokio::spawn(async move {
        let start = tokio::time::Instant::now();
        let mut last_seen: BTreeMap<NodeId, u64> = BTreeMap::new();
        loop {
            tokio::select! {
                changed = followed.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(interval) => {}
            }
            let Some(directory) = followed.borrow().directory.clone() else { continue };
            let now_s = start.elapsed().as_secs();
            for id in alive() {
                last_seen.insert(id, now_s);
            }
            for m in directory.machines() {
                last_seen.entry(m.id).or_insert(now_s);
            }
            let moves = plan(&directory, &config, Seen { now_s, last_seen_s: &last_seen });
            for m in moves {
                let epoch = directory.journal(m.journal).map_or(crate::Epoch(0), |j| j.epoch.next());
                let id = crate::mover::seat_id(m.journal, m.from, m.to, epoch);
                let command = m.command();
                // A refusal (the move no longer fits the directory) is planned afresh next time.
                let _ = coordinator.request(Request { id, op: crate::coordinator::Op::Command(command) }).await;
            }
        }
    })
}
