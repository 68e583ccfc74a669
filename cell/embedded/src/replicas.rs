//! The embedded cell's read replica tier: replica machines in this process, each over its own
//! fjall store under the data directory, joined to the default tier's feed on the in-process bus.
//!
//! Each replica is made to host what the directory puts on its tier by a small task of its own
//! (the registry's sans-IO [`changes_for`] over the directory the cell's follower publishes),
//! so a replica can be killed, wiped and started again while the rest of the cell runs: the
//! new boot's task starts from what that boot hosts. A task every [`SEEN_EVERY`] tells the
//! cell's [`ReplicaReads`] how each replica stands, for the router that picks who serves reads.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use paros_bus::InProcessBus;
use paros_core::{JournalConfig, JournalKey, NodeId, Tunables};
use paros_node::ports::MonotonicClock;
use paros_node::shell::{self, NodeControl, NodeHandle, ShellConfig};
use paros_registry::daemon::Followed;
use paros_registry::follow::{Hosting, changes_for};
use paros_replica::{ReplicaSeen, State};
use paros_store::FjallStore;
use tokio::sync::watch;

use crate::CellError;
use crate::in_cell::ReplicaReads;

/// How often the router is told how the replicas stand.
pub const SEEN_EVERY: Duration = Duration::from_millis(20);

/// One replica machine of the embedded cell, running or not.
struct Slot {
    id: NodeId,
    running: Option<Running>,
}

struct Running {
    node: NodeHandle<FjallStore>,
    probe: paros_store::StoreProbe,
    follow: tokio::task::JoinHandle<()>,
    /// Its follow task has placed what the directory put on its tier once: until then the
    /// replica is bootstrapping whatever its journals say (it may host none of them yet).
    placed: Arc<AtomicBool>,
}

/// What a replica needs to boot, shared by every start.
pub(crate) struct Setup {
    pub(crate) dir: PathBuf,
    pub(crate) bus: InProcessBus,
    pub(crate) feed: NodeId,
    pub(crate) registry: JournalKey,
    pub(crate) tunables: Tunables,
    pub(crate) shell: ShellConfig,
    pub(crate) store: paros_store::StoreOptions,
}

/// The replica tier: its machines, and the reads routed to them.
pub struct Replicas {
    setup: Setup,
    slots: Mutex<Vec<Slot>>,
    reads: Arc<ReplicaReads>,
    directory: watch::Receiver<Followed>,
    seen_task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for Replicas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replicas").field("feed", &self.setup.feed).finish_non_exhaustive()
    }
}

/// One replica's counters as the cell samples them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaSample {
    pub id: NodeId,
    pub feed: NodeId,
    /// It hosts what the directory puts on its tier (it has followed the directory once).
    pub placed: bool,
    pub host: paros_node::HostStats,
    pub store: paros_store::StoreActivity,
    /// How its read cache has served (`None`: it keeps none).
    pub cache: Option<paros_node::ReadCacheStats>,
}

impl ReplicaSample {
    /// The replica's state: bootstrapping until it has placed its tier's journals once, then
    /// as its journals stand.
    #[must_use]
    pub fn state(&self) -> State {
        state_of(self.placed, &self.host)
    }
}

/// A replica's state: bootstrapping until it has placed its tier's journals once (`placed`),
/// then as its journals stand.
fn state_of(placed: bool, host: &paros_node::HostStats) -> State {
    if placed { State::of(&host.replicas) } else { State::Bootstrapping }
}

/// Whom a follow task places journals for.
struct Target {
    id: NodeId,
    feed: NodeId,
    registry: JournalKey,
    placed: Arc<AtomicBool>,
}

impl Replicas {
    /// Starts replicas `ids` (each over `dir/replica-{i}`), following `directory`.
    pub(crate) fn start(
        setup: Setup,
        ids: &[NodeId],
        reads: Arc<ReplicaReads>,
        directory: watch::Receiver<Followed>,
    ) -> Result<Arc<Replicas>, CellError> {
        let slots = ids.iter().map(|id| Slot { id: *id, running: None }).collect();
        let replicas =
            Arc::new(Replicas { setup, slots: Mutex::new(slots), reads, directory, seen_task: Mutex::new(None) });
        for i in 0..ids.len() {
            replicas.boot(i)?;
        }
        let watcher = Arc::clone(&replicas);
        let task = tokio::spawn(async move {
            loop {
                watcher.tell_router();
                tokio::time::sleep(SEEN_EVERY).await;
            }
        });
        *replicas.seen_task.lock().unwrap_or_else(PoisonError::into_inner) = Some(task);
        Ok(replicas)
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, Vec<Slot>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The replicas' ids, in order.
    #[must_use]
    pub fn ids(&self) -> Vec<NodeId> {
        self.slots().iter().map(|s| s.id).collect()
    }

    /// The tier's feed.
    #[must_use]
    pub fn feed(&self) -> NodeId {
        self.setup.feed
    }

    fn path(&self, i: usize) -> PathBuf {
        self.setup.dir.join(format!("replica-{i}"))
    }

    /// Boots replica `i` over its store (an empty one relearns), unless it runs.
    ///
    /// # Errors
    /// [`CellError`] when its store does not open or belongs to another machine.
    pub fn boot(&self, i: usize) -> Result<(), CellError> {
        let Some(id) = self.slots().get(i).filter(|s| s.running.is_none()).map(|s| s.id) else { return Ok(()) };
        let s = &self.setup;
        let store = FjallStore::open_with(&self.path(i), s.store)?;
        let probe = store.probe();
        let asleep = s.shell.dormant_after.is_some();
        let booted = paros_replica::boot(store, id, s.feed, s.tunables, crate::random_u64(), asleep)
            .map_err(|source| CellError::Boot { node: id, source })?;
        let hosted = booted.host.journal_configs();
        let (endpoint, inbox) = s.bus.register(id, 65_536);
        s.bus.subscribe(s.feed, id);
        let node = shell::spawn(booted.host, endpoint, inbox, MonotonicClock::new(), s.shell);
        if let Some(cache) = node.read_cache() {
            s.bus.attach_cache(id, cache);
        }
        let placed = Arc::new(AtomicBool::new(false));
        let target = Target { id, feed: s.feed, registry: s.registry, placed: Arc::clone(&placed) };
        let follow = tokio::spawn(follow(node.control(), target, hosted, self.directory.clone()));
        if let Some(slot) = self.slots().get_mut(i) {
            slot.running = Some(Running { node, probe, follow, placed });
        }
        Ok(())
    }

    /// Stops replica `i` as a crash would look to the rest of the cell: off the bus and the feed
    /// at once. Its store stays as it is (see [`Replicas::wipe`]).
    pub fn kill(&self, i: usize) {
        let Some((id, running)) = self.slots().get_mut(i).and_then(|s| Some((s.id, s.running.take()?))) else {
            return;
        };
        self.setup.bus.unsubscribe(self.setup.feed, id);
        self.setup.bus.unregister(id);
        running.follow.abort();
        // A node that stopped on a storage fault has nothing more to give back.
        let _ = running.node.stop();
        self.tell_router();
    }

    /// Deletes stopped replica `i`'s store: it boots next on an empty disk.
    ///
    /// # Errors
    /// [`CellError::Dir`] when the directory cannot be removed.
    pub fn wipe(&self, i: usize) -> Result<(), CellError> {
        let path = self.path(i);
        match std::fs::remove_dir_all(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(CellError::Dir(path, e)),
        }
    }

    /// Every running replica's counters.
    #[must_use]
    pub fn samples(&self) -> Vec<ReplicaSample> {
        self.slots()
            .iter()
            .filter_map(|s| {
                let r = s.running.as_ref()?;
                Some(ReplicaSample {
                    id: s.id,
                    feed: self.setup.feed,
                    placed: r.placed.load(Ordering::Acquire),
                    host: r.node.stats(),
                    store: r.probe.sample(),
                    cache: r.node.read_cache().map(|c| c.stats()),
                })
            })
            .collect()
    }

    /// Tells the router how every running replica stands now.
    /// Reads the hosts' counters only: sampling a store walks its directory, which the router
    /// needs not and this runs every [`SEEN_EVERY`].
    fn tell_router(&self) {
        let seen = self
            .slots()
            .iter()
            .filter(|s| self.setup.bus.is_registered(s.id))
            .filter_map(|s| {
                let r = s.running.as_ref()?;
                let host = r.node.stats();
                let state = state_of(r.placed.load(Ordering::Acquire), &host);
                Some(ReplicaSeen { id: s.id, feed: self.setup.feed, state, lag_slots: host.replicas.lag_slots_max })
            })
            .collect();
        self.reads.update(seen);
    }

    /// Stops every replica.
    pub(crate) fn stop(&self) {
        if let Some(task) = self.seen_task.lock().unwrap_or_else(PoisonError::into_inner).take() {
            task.abort();
        }
        let count = self.slots().len();
        for i in 0..count {
            self.kill(i);
        }
    }
}

/// Makes replica `id` host what the directory puts on its tier, from `hosted` (what its boot
/// hosts), each time the directory changes; ends when the replica stops.
async fn follow(
    control: NodeControl,
    target: Target,
    mut hosted: BTreeMap<JournalKey, JournalConfig>,
    mut directory: watch::Receiver<Followed>,
) {
    let hosting = Hosting::Replica { feed: target.feed };
    loop {
        let dir = directory.borrow_and_update().directory.clone();
        if let Some(dir) = dir {
            let changes = changes_for(&dir, target.id, &hosting, &hosted, &target.registry);
            for key in changes.remove {
                // A replica promises nothing: no epoch holds its removal back.
                match control.remove(key, u64::MAX).await {
                    Err(_) => return,
                    Ok(true) => {
                        hosted.remove(&key);
                    }
                    Ok(false) => {}
                }
            }
            if !changes.place.is_empty() {
                let Ok(results) = control.place_all(changes.place.clone()).await else { return };
                for (assignment, placed) in changes.place.into_iter().zip(results) {
                    if placed.is_ok() {
                        hosted.insert(assignment.key, assignment.config);
                    }
                }
            }
            target.placed.store(true, Ordering::Release);
        }
        if directory.changed().await.is_err() {
            return;
        }
    }
}
