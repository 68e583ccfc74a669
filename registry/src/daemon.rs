//! The registry's async loops: the coordinator (the registry journal's writer, over
//! paros-client's `Writer`) and the follower every node runs (a `Reader` and `Folder` of the
//! registry that places and removes the node's journals). Thin: every decision is the sans-IO
//! [`Coordinator`]'s, [`Folder`]'s or [`follow::changes`]'s.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use paros_client::{
    Client, Folder, FolderConfig, JournalService, ReadConsistency, Reader, ReaderConfig, ReaderOutcome, Seq, Writer,
    WriterConfig, WriterError,
};
use paros_core::{ConfigPool, JournalConfig, JournalKey, NodeId};
use paros_node::shell::NodeControl;
use tokio::sync::{mpsc, oneshot, watch};

use crate::coordinator::{Answer, Coordinator, CoordinatorConfig, CoordinatorError, Reply, Request, Submitted};
use crate::directory::{Directory, SharedDirectory};
use crate::follow;

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
    #[error("writing the registry: {0}")]
    Writer(#[from] WriterError),
    #[error("the registry journal is unknown to the cell")]
    UnknownJournal,
    #[error("reading the registry: {0}")]
    Read(String),
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),
}

/// Starts the coordinator: claims the registry journal (fencing any earlier coordinator),
/// folds it from its floor, then serves requests until superseded or every handle is dropped.
///
/// A term that fails (a write halted, the journal unreadable for a while) is started again
/// after [`CoordinatorLoopConfig::restart_backoff`], at most
/// [`CoordinatorLoopConfig::restarts_max`] times in a row: the next term claims anew, so it
/// learns the tail and fences the failed one. Callers waiting on a failed term see
/// [`CoordinatorGone`]; re-sending the same request id is answered from the fold. A term that
/// was superseded, or whose handles are all dropped, is not restarted.
#[must_use]
pub fn spawn_coordinator<S>(
    client: Client<S>,
    journal: S::Journal,
    config: CoordinatorLoopConfig,
    seed: u64,
) -> (CoordinatorHandle, tokio::task::JoinHandle<CoordinatorStop>)
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    let (tx, mut rx) = mpsc::channel(config.requests_queue_max.max(1));
    let task = tokio::spawn(async move {
        let mut failures = 0u32;
        let mut term_seed = seed;
        loop {
            match coordinate(client.clone(), journal.clone(), config, term_seed, &mut rx).await {
                Ok(stop) => return stop,
                Err(stop) if failures >= config.restarts_max => return stop,
                Err(_) => {
                    failures += 1;
                    term_seed = term_seed.rotate_left(17) ^ u64::from(failures);
                    tokio::time::sleep(config.restart_backoff).await;
                }
            }
        }
    });
    (CoordinatorHandle { tx }, task)
}

/// Milliseconds since the loop started: the coordinator's clock for time-based checkpoints.
fn millis(start: tokio::time::Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

async fn coordinate<S>(
    client: Client<S>,
    journal: S::Journal,
    config: CoordinatorLoopConfig,
    seed: u64,
    requests: &mut mpsc::Receiver<Asked>,
) -> Result<CoordinatorStop, CoordinatorStop>
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    let mut writer = Writer::new(client.clone(), journal.clone(), config.writer, seed)
        .map_err(|e| CoordinatorStop::Read(e.to_string()))?;
    let view = writer.claim().await?;
    let folder = Folder::new(Directory::new(), Seq(0), FolderConfig::default());
    let mut coordinator = Coordinator::new(folder, config.coordinator)?;
    // Fold everything before our claim: the directory our commands are judged against.
    let mut reader = Reader::new(client, journal, Seq(0), ReaderConfig::default(), ReadConsistency::Linearizable, 0)
        .map_err(|e| CoordinatorStop::Read(e.to_string()))?;
    while reader.cursor() < view.next_seq {
        match reader.next().await.map_err(|e| CoordinatorStop::Read(e.to_string()))? {
            ReaderOutcome::Records { from, records, .. } => drop(coordinator.fold_page(from, &records)?),
            ReaderOutcome::Gap { from, resumed_at, .. } => coordinator.gap(from, resumed_at)?,
            ReaderOutcome::UnknownJournal => return Err(CoordinatorStop::UnknownJournal),
            ReaderOutcome::Unavailable { .. } | ReaderOutcome::Retry { .. } => {}
        }
    }
    let start = tokio::time::Instant::now();
    let mut waiters: BTreeMap<crate::RequestId, Vec<oneshot::Sender<Answer>>> = BTreeMap::new();
    let mut next: Option<Vec<bytes::Bytes>> = None;
    let mut poll = tokio::time::interval(config.checkpoint_poll);
    loop {
        // Hand the writer everything it has room for, and the truncation a finished run asks.
        loop {
            if next.is_none() {
                next = coordinator.next_append();
            }
            let Some(batch) = next.take() else { break };
            let bytes = batch.iter().map(|r| r.len() as u64).sum();
            if !writer.has_room(bytes) {
                next = Some(batch);
                break;
            }
            writer.submit(batch)?;
        }
        if let Some(t) = coordinator.next_truncate() {
            match writer.truncate(t.up_to).await {
                Ok(_) => coordinator.truncate_settled(),
                Err(WriterError::Superseded { .. }) => return Ok(superseded(&mut coordinator, &mut waiters)),
                Err(e) => return Err(e.into()),
            }
            continue;
        }
        tokio::select! {
            asked = requests.recv() => {
                let Some(first) = asked else { return Ok(CoordinatorStop::Closed) };
                // Everything already queued joins the same batch: records from many callers
                // share one slot (group commit), however they trickle in.
                let mut next_asked = Some(first);
                let mut taken = 0;
                while let Some((request, reply)) = next_asked.take() {
                    let id = request.id;
                    match coordinator.submit(request) {
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
                let Some((_, result)) = report else { continue };
                match result {
                    Ok(written) => answer(coordinator.acknowledged(written.seq, written.count)?, &mut waiters),
                    Err(WriterError::Superseded { .. }) => return Ok(superseded(&mut coordinator, &mut waiters)),
                    Err(e) => return Err(e.into()),
                }
                coordinator.due_checkpoint(millis(start));
            }
            _ = poll.tick() => {
                coordinator.due_checkpoint(millis(start));
            }
        }
    }
}

fn answer(replies: Vec<Reply>, waiters: &mut BTreeMap<crate::RequestId, Vec<oneshot::Sender<Answer>>>) {
    for Reply { id, answer } in replies {
        for w in waiters.remove(&id).unwrap_or_default() {
            let _ = w.send(answer.clone());
        }
    }
}

fn superseded(
    coordinator: &mut Coordinator,
    waiters: &mut BTreeMap<crate::RequestId, Vec<oneshot::Sender<Answer>>>,
) -> CoordinatorStop {
    answer(coordinator.superseded(), waiters);
    for (_, ws) in std::mem::take(waiters) {
        for w in ws {
            let _ = w.send(Answer::NotCoordinator);
        }
    }
    CoordinatorStop::Superseded
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
}

impl Default for FollowerConfig {
    fn default() -> Self {
        FollowerConfig {
            wait_ms: 500,
            placements_per_request: 1024,
            apply_interval_min: Duration::from_millis(10),
            apply_cost_factor: 3,
        }
    }
}

/// Starts the follower of node `me`: folds the registry journal `registry` from its floor
/// forever and makes the node host exactly the journals the directory places on it (`hosted`
/// is what it hosts at the start). Progress is published on the returned watch.
#[must_use]
pub fn spawn_follower<S>(
    client: Client<S>,
    registry: JournalKey,
    me: NodeId,
    control: NodeControl,
    hosted: BTreeMap<JournalKey, JournalConfig>,
    config: FollowerConfig,
) -> (watch::Receiver<Followed>, tokio::task::JoinHandle<String>)
where
    S: JournalService<Journal = JournalKey> + 'static,
{
    spawn_follower_of(client, registry, vec![FollowedNode { id: me, control, hosted }], config)
}

/// A node a follower places journals on, and what it hosts at the start.
#[derive(Debug)]
pub struct FollowedNode {
    pub id: NodeId,
    pub control: NodeControl,
    pub hosted: BTreeMap<JournalKey, JournalConfig>,
}

/// Starts one follower for several nodes of one process (the embedded cell's): the registry
/// is read and folded once, and each node is made to host what the directory places on it
/// before the directory is published. One directory in memory instead of one per node.
#[must_use]
pub fn spawn_follower_of<S>(
    client: Client<S>,
    registry: JournalKey,
    nodes: Vec<FollowedNode>,
    config: FollowerConfig,
) -> (watch::Receiver<Followed>, tokio::task::JoinHandle<String>)
where
    S: JournalService<Journal = JournalKey> + 'static,
{
    let (tx, rx) = watch::channel(Followed::default());
    let task = tokio::spawn(async move { follow_loop(client, registry, nodes, config, tx).await });
    (rx, task)
}

/// One followed node's placements as the follower knows them.
struct Placed {
    id: NodeId,
    control: NodeControl,
    /// What the node hosts, each configuration shared with the equal ones (a machine with
    /// 100,000 journals holds a handful of distinct memberships).
    hosted: BTreeMap<JournalKey, Arc<JournalConfig>>,
    /// Placements the node refused: not asked again until the directory changes them.
    refused: BTreeMap<JournalKey, JournalConfig>,
}

/// Makes `node` host what `directory` places on it; `Err` when the node stopped.
async fn apply_to(
    node: &mut Placed,
    directory: &Directory,
    registry: &JournalKey,
    configs: &mut ConfigPool,
    per_request: usize,
    followed: &mut Followed,
) -> Result<(), ()> {
    let mut changes = follow::changes(directory, node.id, &node.hosted, registry);
    changes.place.retain(|(k, c)| node.refused.get(k) != Some(c));
    for chunk in changes.place.chunks(per_request.max(1)) {
        let results = node.control.place_all(chunk.to_vec()).await.map_err(drop)?;
        for ((key, config), result) in chunk.iter().zip(results) {
            match result {
                Ok(()) => {
                    node.hosted.insert(*key, configs.share(config.clone()));
                    followed.placed += 1;
                }
                Err(_) => {
                    node.refused.insert(*key, config.clone());
                    followed.refused += 1;
                }
            }
        }
    }
    for key in changes.remove {
        node.control.remove(key).await.map_err(drop)?;
        node.hosted.remove(&key);
        followed.removed += 1;
    }
    Ok(())
}

async fn follow_loop<S>(
    client: Client<S>,
    registry: JournalKey,
    nodes: Vec<FollowedNode>,
    config: FollowerConfig,
    progress: watch::Sender<Followed>,
) -> String
where
    S: JournalService<Journal = JournalKey> + 'static,
{
    let mut configs = ConfigPool::default();
    let mut nodes: Vec<Placed> = nodes
        .into_iter()
        .map(|n| Placed {
            id: n.id,
            control: n.control,
            hosted: n.hosted.into_iter().map(|(k, c)| (k, configs.share(c))).collect(),
            refused: BTreeMap::new(),
        })
        .collect();
    // Shared with what it publishes: at rest the follower holds one directory, not two.
    let mut folder = Folder::new(SharedDirectory::default(), Seq(0), FolderConfig::default());
    let Ok(mut reader) =
        Reader::new(client, registry, Seq(0), ReaderConfig::default(), ReadConsistency::Linearizable, config.wait_ms)
    else {
        return "invalid reader configuration".into();
    };
    let mut followed = Followed::default();
    // Folded and not yet applied (placements, published directory): the next read then does
    // not wait at the tail, so an empty page applies it at once.
    let mut unapplied = false;
    let mut next_apply = tokio::time::Instant::now();
    // Nothing is applied or published before the fold first reaches the registry's tail. The
    // nodes host what an earlier run of this follower applied, which can be later than a
    // directory folded part of the way from the checkpoint (after a restart): applied, that
    // directory would remove the journals created since the checkpoint, records and all, and
    // publish a directory that does not know them. Once caught up (the cursor reached the
    // highest tail an answer named), every directory folded is later than what the nodes host.
    let mut caught_up = false;
    loop {
        let outcome =
            if caught_up && unapplied && folder.is_whole() { reader.next().await } else { reader.follow().await };
        let outcome = match outcome {
            Ok(o) => o,
            Err(e) => return format!("reading the registry: {e}"),
        };
        let (folded, moved) = match outcome {
            ReaderOutcome::Records { from, records, .. } => {
                (folder.fold_page(from, &records).map(drop), !records.is_empty())
            }
            ReaderOutcome::Gap { from, resumed_at, .. } => (folder.gap(from, resumed_at).map(drop), true),
            ReaderOutcome::UnknownJournal => return "the registry journal is not hosted".into(),
            ReaderOutcome::Unavailable { .. } | ReaderOutcome::Retry { .. } => (Ok(()), false),
        };
        if let Err(e) = folded {
            return format!("folding the registry: {e}");
        }
        // The reader's own judgement, as the simulation's follower uses it.
        caught_up |= reader.caught_up();
        followed.folded = folder.next();
        unapplied |= moved;
        let due = !moved || tokio::time::Instant::now() >= next_apply;
        if caught_up && folder.is_whole() && unapplied && due {
            let started = tokio::time::Instant::now();
            for node in &mut nodes {
                if apply_to(node, folder.state(), &registry, &mut configs, config.placements_per_request, &mut followed)
                    .await
                    .is_err()
                {
                    return "the node stopped".into();
                }
            }
            followed.directory = Some(folder.state().share());
            unapplied = false;
            let spent = started.elapsed();
            next_apply = tokio::time::Instant::now() + config.apply_interval_min.max(spent * config.apply_cost_factor);
        }
        progress.send_replace(followed.clone());
    }
}
