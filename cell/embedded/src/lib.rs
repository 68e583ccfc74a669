//! paros-embedded: the embedded cell — three nodes in one process on the in-process bus, fjall
//! under a data directory, and the registry that says which journals exist. `paros bench`,
//! `paros verify` and `paros cell init` run on it (and `paros dev`, with the gateway).
//!
//! The data directory holds one fjall store per node and `cell.json`: the node ids and the
//! registry journal's id — everything needed to find the registry again. Every other journal
//! exists because the registry says so: each node runs a follower that folds the registry and
//! places and removes its journals; one coordinator (the registry journal's writer) serves
//! requests. Formation (`InitCell`) is a registry command like any other.

pub mod in_cell;
mod placer;
mod replicas;

pub use replicas::{ReplicaSample, Replicas};

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use in_cell::{InCell, InCellConfig, ReplicaReads};
use paros_bus::InProcessBus;
use paros_client::{Client, ClientConfig};
use paros_core::journal::WriterMode;
use paros_core::{JournalConfig, JournalId, JournalKey, NodeId, TenantId, Tunables};
use paros_node::ports::Incarnation;
use paros_node::ports::MonotonicClock;
use paros_node::shell::{self, NodeFault, NodeHandle, ShellConfig};
use paros_node::{BootError, Host};
use paros_registry::daemon::{
    CoordinatorHandle, CoordinatorLoopConfig, CoordinatorStop, Followed, FollowedNode, FollowerConfig,
    spawn_coordinator, spawn_follower_of, spawn_mover, spawn_planner,
};
use paros_registry::{
    Answer, BusAddress, CellId, Command, Directory, JournalName, Limits, Member, Op, Quotas, Refusal, Request,
    RequestId, TenantName, TierName, Verdict, Zone,
};
use paros_replica::{ReadRouter, RouterConfig};
use paros_store::FjallStore;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// The tenant id of the cell's own journals (the registry); no tenant is given it.
pub use paros_registry::CELL_TENANT;

/// How many nodes a new embedded cell has.
pub const EMBEDDED_MEMBERS: usize = 3;

/// How many read replicas a new embedded cell has, all on the default tier.
pub const EMBEDDED_REPLICAS: usize = 2;

/// A fresh random u64 from the OS-seeded hasher keys (ids are random, never constants).
#[must_use]
pub fn random_u64() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.finish() | 1
}

/// A fresh random u128 (request ids, uuids).
#[must_use]
pub fn random_u128() -> u128 {
    (u128::from(random_u64()) << 64) | u128::from(random_u64())
}

/// What the data directory remembers about the cell: its machines and where its registry is.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub cell: u64,
    pub nodes: Vec<NodeId>,
    pub registry: JournalId,
    /// The read replicas, on the default tier (none in a cell made before replicas existed).
    #[serde(default)]
    pub replicas: Vec<NodeId>,
    /// The default tier's feed, drawn with the cell (`None`: a cell made before replicas
    /// existed; its default tier, if any, has a feed of the registry's choosing).
    #[serde(default)]
    pub feed: Option<NodeId>,
}

/// Why the embedded cell would not start, or a registry request failed.
#[derive(Debug, thiserror::Error)]
pub enum CellError {
    #[error("cannot use the data directory {0}: {1}")]
    Dir(PathBuf, std::io::Error),
    #[error("the manifest {0} is unreadable: {1}")]
    Manifest(PathBuf, String),
    #[error("node {node:?} would not boot: {source}")]
    Boot { node: NodeId, source: BootError },
    #[error("storage fault: {0}")]
    Store(#[from] paros_node::ports::StoreError),
    /// A node of the running cell stopped on a storage fault.
    #[error("{0}")]
    NodeFault(Arc<NodeFault>),
    #[error("placement refused: {0}")]
    Place(#[from] paros_node::PlaceError),
    #[error("a node stopped while the cell was opening")]
    Stopped,
    #[error("the registry coordinator stopped")]
    CoordinatorGone,
    #[error("the registry refused the request: {0:?}")]
    Refused(Refusal),
    #[error("the registry did not decide the request: {0:?}")]
    Undecided(Answer),
    #[error("the cell is already formed (cell {:x}): a second init is refused", .0.0)]
    AlreadyFormed(CellId),
    #[error("the registry did not reach the expected state within {0:?}")]
    Timeout(Duration),
}

impl CellError {
    /// The daemon exit code this error maps to.
    #[must_use]
    pub fn exit_code(&self) -> i32 {
        match self {
            CellError::Boot {
                source: BootError::Wiped(_) | BootError::WrongIdentity { .. } | BootError::WrongIncarnation { .. },
                ..
            } => shell::EXIT_REFUSED,
            CellError::Manifest(..) | CellError::Place(_) | CellError::AlreadyFormed(_) | CellError::Refused(_) => 2,
            CellError::Store(_) | CellError::NodeFault(_) | CellError::Dir(..) => shell::EXIT_STORAGE_FAULT,
            _ => 1,
        }
    }
}

/// How long [`EmbeddedCell::journal`] waits for the registry to show what it asked for.
pub const JOURNAL_WAIT: Duration = Duration::from_secs(10);

/// The in-cell journal service every embedded client uses.
pub type CellService = InCell<InProcessBus>;

/// One running node: its id, its shell and a probe of its store (a probe holds its database
/// open).
#[derive(Debug)]
struct Running {
    id: NodeId,
    handle: NodeHandle<FjallStore>,
    probe: paros_store::StoreProbe,
    /// Its store's incarnation (docs/reconfiguration.md, rule 8), admitted to the registry.
    incarnation: Option<paros_node::ports::Incarnation>,
}

/// The founding voters of the registry journal among a cell's nodes (the other nodes are
/// admitted as nodes only): the longest odd prefix of up to four nodes; from five nodes on,
/// the largest odd number up to five that leaves two nodes spare, so that a node holding a
/// registry seat can be drained or healed (its seat needs a node that holds none).
fn registry_members(nodes: &[NodeId]) -> &[NodeId] {
    let n = nodes.len();
    let room = if n >= 5 { (n - 2).min(5) } else { n };
    let odd = if room.is_multiple_of(2) { room.saturating_sub(1) } else { room };
    &nodes[..odd]
}

/// How the cell sets up a node: its protocol tunables, its shell and its store options.
#[derive(Clone, Copy, Debug)]
struct NodeSetup {
    tunables: Tunables,
    shell: ShellConfig,
    store: paros_store::StoreOptions,
}

/// Forwards `node`'s storage fault, if it stops on one, to the cell's first-fault slot.
fn forward_faults(node: &NodeHandle<FjallStore>, faults: &watch::Sender<Option<Arc<NodeFault>>>) {
    let (mut watch, faults) = (node.faults(), faults.clone());
    tokio::spawn(async move {
        if let Some(fault) = watch.stopped().await {
            // The first fault stays: it is the one that stopped the cell.
            faults.send_if_modified(|first| {
                let fresh = first.is_none();
                if fresh {
                    *first = Some(fault);
                }
                fresh
            });
        }
    });
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A running embedded cell.
#[derive(Debug)]
pub struct EmbeddedCell {
    pub bus: InProcessBus,
    pub manifest: Manifest,
    /// The running nodes, in node order. Shared with the [`NodeStatsReader`]s handed out;
    /// emptied by [`stop`](EmbeddedCell::stop), one taken out by [`kill`](EmbeddedCell::kill).
    nodes: Arc<Mutex<Vec<Running>>>,
    /// A client of the cell's journals over the node RPC (retries, redirects, backoff).
    pub client: Client<CellService>,
    coordinator: CoordinatorHandle,
    coordinator_task: tokio::task::JoinHandle<CoordinatorStop>,
    /// The loops beside the coordinator: the mover (carries out the seat moves the registry
    /// records) and the planner (plans heal, drain and rebalance moves).
    registry_loops: Vec<tokio::task::JoinHandle<()>>,
    /// The cell's data directory, and how a node is set up (for a node that rejoins).
    dir: PathBuf,
    setup: NodeSetup,
    /// The read replica tier (`None` in a cell made without one).
    replicas: Option<Arc<Replicas>>,
    followers: Vec<watch::Receiver<Followed>>,
    follower_tasks: Vec<tokio::task::JoinHandle<String>>,
    /// The first storage fault of any node (`None` while there is none); each node's fault is
    /// forwarded here by a task that ends with the node.
    faults: watch::Sender<Option<Arc<NodeFault>>>,
}

/// Sends requests to the cell's registry coordinator.
#[derive(Clone, Debug)]
pub struct RegistryClient {
    coordinator: CoordinatorHandle,
}

impl RegistryClient {
    /// Sends one request under a fresh request id and waits for the fold's verdict.
    ///
    /// # Errors
    /// [`CellError::Refused`] with the fold's reason; [`CellError::Undecided`] when the
    /// coordinator could not decide (busy, superseded, unplaceable).
    pub async fn request(&self, op: Op) -> Result<paros_registry::Accepted, CellError> {
        let request = Request { id: RequestId(random_u128()), op };
        match self.coordinator.request(request).await.map_err(|_| CellError::CoordinatorGone)? {
            Answer::Verdict(Verdict::Accepted(a)) => Ok(a),
            Answer::Verdict(Verdict::Refused(r)) => Err(CellError::Refused(r)),
            other => Err(CellError::Undecided(other)),
        }
    }
}

/// Tunables of the embedded cell: a 20 ms tick (elections in 200–400 ms).
#[must_use]
pub fn embedded_tunables() -> (Tunables, ShellConfig) {
    let read_cache = Some(paros_node::ReadCacheConfig::default());
    (Tunables::default(), ShellConfig { tick: Duration::from_millis(20), read_cache, ..ShellConfig::default() })
}

/// A node's shell: as configured, without a read cache. The cell's reads go to its replicas,
/// and publishing the windows would cost every write on the voters' threads
/// (docs/lab/reads.md); a node's reads take the node's thread.
fn voter_shell(shell: ShellConfig) -> ShellConfig {
    ShellConfig { read_cache: None, ..shell }
}

fn member(id: NodeId, i: usize) -> Member {
    Member {
        id,
        bus_address: BusAddress::new(format!("in-process:{i}")).expect("a valid bus address"),
        zone: Zone::new(format!("local-{i}")).expect("a valid zone"),
    }
}

impl EmbeddedCell {
    /// Opens (or first creates) the cell under `dir`: boots the three nodes, places the
    /// registry journal on them when new, and starts the registry's followers and coordinator.
    /// A new cell is not formed until [`init`](Self::init).
    ///
    /// # Errors
    /// [`CellError`]; a wiped store under an existing identity refuses to boot.
    pub async fn open(dir: &Path) -> Result<EmbeddedCell, CellError> {
        Self::open_with(dir, EMBEDDED_MEMBERS).await
    }

    /// As [`open`](Self::open); a new cell gets `members` nodes (an existing one keeps its own).
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_with(dir: &Path, members: usize) -> Result<EmbeddedCell, CellError> {
        Self::open_configured(dir, members, CoordinatorLoopConfig::default()).await
    }

    /// As [`open_with`](Self::open_with); a new cell gets `members` nodes and `replicas` read
    /// replicas in its default tier (0: none). An existing cell keeps its own.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_sized(dir: &Path, (members, replicas): (usize, usize)) -> Result<EmbeddedCell, CellError> {
        let (coordinator, store) = (CoordinatorLoopConfig::default(), paros_store::StoreOptions::default());
        Self::open_replicated(dir, (members, replicas), coordinator, store, embedded_tunables().1).await
    }

    /// As [`open_with`](Self::open_with), with the registry coordinator's configuration (its
    /// checkpoint policy, its bounds).
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_configured(
        dir: &Path,
        members: usize,
        coordinator: CoordinatorLoopConfig,
    ) -> Result<EmbeddedCell, CellError> {
        Self::open_stores(dir, members, coordinator, paros_store::StoreOptions::default()).await
    }

    /// As [`open_configured`](Self::open_configured), with every node's store opened with
    /// `store`.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_stores(
        dir: &Path,
        members: usize,
        coordinator: CoordinatorLoopConfig,
        store: paros_store::StoreOptions,
    ) -> Result<EmbeddedCell, CellError> {
        Self::open_tuned(dir, members, coordinator, store, embedded_tunables().1).await
    }

    /// [`open_stores`](Self::open_stores) with the nodes' shell configuration (tick, dormancy…).
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_tuned(
        dir: &Path,
        members: usize,
        coordinator: CoordinatorLoopConfig,
        store: paros_store::StoreOptions,
        shell_config: ShellConfig,
    ) -> Result<EmbeddedCell, CellError> {
        Self::open_replicated(dir, (members, EMBEDDED_REPLICAS), coordinator, store, shell_config).await
    }

    /// [`open_tuned`](Self::open_tuned) with `(members, replicas)` machines for a new cell: its
    /// nodes and the read replicas of its default tier (0: none). An existing cell keeps its own.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_replicated(
        dir: &Path,
        (members, replicas): (usize, usize),
        coordinator: CoordinatorLoopConfig,
        store: paros_store::StoreOptions,
        shell_config: ShellConfig,
    ) -> Result<EmbeddedCell, CellError> {
        std::fs::create_dir_all(dir).map_err(|e| CellError::Dir(dir.into(), e))?;
        let manifest_path = dir.join("cell.json");
        let (manifest, fresh) = match std::fs::read(&manifest_path) {
            Ok(bytes) => {
                let m: Manifest = serde_json::from_slice(&bytes)
                    .map_err(|e| CellError::Manifest(manifest_path.clone(), e.to_string()))?;
                (m, false)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let m = Manifest {
                    cell: random_u64(),
                    nodes: (0..members.max(1)).map(|_| NodeId(random_u64())).collect(),
                    registry: JournalId(random_u64()),
                    replicas: (0..replicas).map(|_| NodeId(random_u64())).collect(),
                    feed: Some(NodeId(random_u64())),
                };
                (m, true)
            }
            Err(e) => return Err(CellError::Dir(manifest_path, e)),
        };
        let (tunables, _) = embedded_tunables();
        let registry = JournalKey { tenant: CELL_TENANT, journal: manifest.registry };
        let registry_config = JournalConfig {
            mode: WriterMode::Single,
            voters: registry_members(&manifest.nodes).to_vec(),
            learners: Vec::new(),
        };
        let bus = InProcessBus::new();
        let mut nodes = Vec::new();
        let mut hosted = Vec::new();
        // The stores open side by side: each replays its own write-ahead log and fjall's
        // journal (up to 64 MB of small rows), most of a restart's time (docs/storage.md §4).
        let stores: Vec<_> = std::thread::scope(|s| {
            let opening: Vec<_> = (0..manifest.nodes.len())
                .map(|i| {
                    let path = dir.join(format!("node-{i}"));
                    let options = store.for_member(i);
                    s.spawn(move || FjallStore::open_with(&path, options))
                })
                .collect();
            opening.into_iter().map(|o| o.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
        });
        for (node, store) in manifest.nodes.iter().zip(stores) {
            let store = store?;
            let probe = store.probe();
            let expected = if fresh { None } else { Some(*node) };
            let asleep = shell_config.dormant_after.is_some();
            // Formation places the registry journal on its members, durably before a fresh
            // store records its identity; from then on the registry moves its seats, and a
            // node's store holds it while the node has one.
            let formation = if fresh && registry_config.voters.contains(node) {
                vec![(registry, registry_config.clone())]
            } else {
                Vec::new()
            };
            let host = Host::form_node(store, expected, *node, &formation, tunables, random_u64(), asleep)
                .map_err(|source| CellError::Boot { node: *node, source })?;
            let incarnation = host.incarnation();
            hosted.push(host.journal_configs());
            let (endpoint, inbox) = bus.register(host.id(), 65_536);
            let handle = shell::spawn(host, endpoint, inbox, MonotonicClock::new(), voter_shell(shell_config));
            nodes.push(Running { id: *node, handle, probe, incarnation });
        }
        nodes[0].handle.control().campaign(registry).await.map_err(|_| CellError::Stopped)?;
        if fresh {
            let bytes = serde_json::to_vec_pretty(&manifest).expect("a manifest serializes");
            std::fs::write(&manifest_path, bytes).map_err(|e| CellError::Dir(manifest_path.clone(), e))?;
        }
        let tick_ms = u64::try_from(shell_config.tick.as_millis()).unwrap_or(u64::MAX);
        // Reads go to the journal's replicas first: its tier's feed, from the directory the
        // follower (started below) publishes.
        let directory: Arc<std::sync::OnceLock<watch::Receiver<Followed>>> = Arc::default();
        let reads = {
            let directory = Arc::clone(&directory);
            Arc::new(ReplicaReads::new(ReadRouter::new(RouterConfig::default()), move |key: &JournalKey| {
                directory.get()?.borrow().directory.as_ref()?.journal(*key)?.feed
            }))
        };
        let mut service =
            InCell::new(bus.clone(), manifest.nodes.clone(), InCellConfig { tick_ms, ..InCellConfig::default() });
        if !manifest.replicas.is_empty() {
            service = service.with_replicas(Arc::clone(&reads));
        }
        let client = Client::new(service, ClientConfig::default()).expect("the default client configuration is valid");
        // One follower for the three nodes: the registry is folded once in this process, and
        // the directory it publishes is the one every node hosts what it places.
        let followed = nodes
            .iter()
            .zip(hosted)
            .map(|(n, hosted)| FollowedNode { id: n.id, placer: placer::NodePlacer(n.handle.control()), hosted })
            .collect();
        let (progress, task) = spawn_follower_of(client.clone(), registry, followed, FollowerConfig::default());
        let _ = directory.set(progress.clone());
        let replicas = match manifest.feed {
            Some(feed) if !manifest.replicas.is_empty() => {
                let setup = replicas::Setup {
                    dir: dir.to_path_buf(),
                    bus: bus.clone(),
                    feed,
                    registry,
                    tunables,
                    // Replicas serve the cell's reads: each keeps the read cache the configuration
                    // asks for (`embedded_tunables`: one).
                    shell: shell_config,
                    store: store.for_member(manifest.nodes.len()),
                };
                Some(Replicas::start(setup, &manifest.replicas, reads, progress.clone())?)
            }
            _ => None,
        };
        let (followers, follower_tasks) = (vec![progress.clone()], vec![task]);
        let loops = coordinator;
        let (coordinator, coordinator_task) = spawn_coordinator(client.clone(), registry, loops);
        let mover = spawn_mover(client.clone(), coordinator.clone(), progress.clone(), loops.mover);
        let (faults, _) = watch::channel(None);
        for node in &nodes {
            forward_faults(&node.handle, &faults);
        }
        let nodes = Arc::new(Mutex::new(nodes));
        let alive = {
            let nodes = Arc::clone(&nodes);
            move || lock(&nodes).iter().map(|n| n.id).collect::<Vec<NodeId>>()
        };
        let planner = spawn_planner(coordinator.clone(), progress, alive, loops.plan, loops.plan_interval);
        Ok(EmbeddedCell {
            bus,
            manifest,
            dir: dir.to_path_buf(),
            setup: NodeSetup { tunables, shell: shell_config, store },
            nodes,
            client,
            coordinator,
            coordinator_task,
            registry_loops: vec![mover, planner],
            replicas,
            followers,
            follower_tasks,
            faults,
        })
    }

    /// Waits until a node of the cell stops on a storage fault, and returns the first such
    /// fault. Never ends while no node faults. The cell does not stop by itself: the process
    /// running it should (`main` exits with [`shell::EXIT_STORAGE_FAULT`]); the other nodes
    /// keep serving meanwhile.
    pub async fn fault(&self) -> Arc<NodeFault> {
        let mut faults = self.faults.subscribe();
        let fault = faults.wait_for(Option::is_some).await.expect("the cell holds the sender").clone();
        fault.expect("waited for a fault")
    }

    /// The first storage fault of a node of the cell, if any node had one.
    #[must_use]
    pub fn faulted(&self) -> Option<Arc<NodeFault>> {
        self.faults.borrow().clone()
    }

    /// The registry journal's key.
    #[must_use]
    pub fn registry(&self) -> JournalKey {
        JournalKey { tenant: CELL_TENANT, journal: self.manifest.registry }
    }

    /// Forms the cell: `InitCell` with the founding members, then the `default` replica tier
    /// (`CreateTier`, its feed a random id). A second init of a formed cell is refused
    /// ([`CellError::AlreadyFormed`]); a retry of the same request (an init cut short) has one
    /// effect.
    ///
    /// # Errors
    /// [`CellError::AlreadyFormed`], or the registry's failure to decide.
    pub async fn init(&self) -> Result<CellId, CellError> {
        let members = registry_members(&self.manifest.nodes).iter().enumerate().map(|(i, n)| member(*n, i)).collect();
        let command = Command::InitCell {
            cell: CellId(self.manifest.cell),
            members,
            registry: self.manifest.registry,
            limits: Limits::default(),
        };
        let formed = match self.request(Op::Command(command)).await {
            Ok(_) => None,
            Err(CellError::Refused(Refusal::CellFormed { cell })) => Some(cell),
            Err(e) => return Err(e),
        };
        // Formation is finished (every node admitted with its store's incarnation, a default
        // tier, the replicas on it) however often it was cut short before: each step is taken
        // at most once.
        self.admit_nodes().await?;
        self.form_tier().await?;
        match formed {
            Some(cell) => Err(CellError::AlreadyFormed(cell)),
            None => Ok(CellId(self.manifest.cell)),
        }
    }

    /// Admits every running node with its store's incarnation: the founders get it recorded,
    /// the nodes past the registry's members are registered.
    async fn admit_nodes(&self) -> Result<(), CellError> {
        let running: Vec<(NodeId, Option<paros_node::ports::Incarnation>)> =
            lock(&self.nodes).iter().map(|n| (n.id, n.incarnation)).collect();
        for (id, incarnation) in running {
            let (Some(i), Some(Incarnation(incarnation))) =
                (self.manifest.nodes.iter().position(|n| *n == id), incarnation)
            else {
                continue;
            };
            let m = member(id, i);
            let admit = Command::Admit {
                id,
                role: paros_registry::Role::Node,
                bus_address: m.bus_address,
                zone: m.zone,
                incarnation: paros_registry::Incarnation(incarnation),
            };
            self.request(Op::Command(admit)).await?;
        }
        Ok(())
    }

    /// Stops node `id` as a crash would (its store stays as it is on disk): it answers nothing
    /// any more, and the registry's planner judges it unseen from now on. The other nodes go on.
    ///
    /// # Errors
    /// [`CellError::Stopped`] when no such node runs.
    pub fn kill(&self, id: NodeId) -> Result<(), CellError> {
        let running = {
            let mut nodes = lock(&self.nodes);
            let at = nodes.iter().position(|n| n.id == id).ok_or(CellError::Stopped)?;
            nodes.remove(at)
        };
        self.bus.unregister(id);
        drop(running.handle.stop());
        Ok(())
    }

    /// Brings back node `old`'s machine with its store wiped, as a new identity (rule 8: a
    /// store that lost its promises never votes under its old id): a fresh store in `old`'s
    /// directory, a new node id, its own registry follower, and `Rejoin { old, new }` — the
    /// registry retires `old` for good and never places it again. Kill `old` first.
    ///
    /// # Errors
    /// [`CellError`] when the store cannot be made or the registry refuses the rejoin.
    pub async fn rejoin_wiped(&mut self, old: NodeId) -> Result<NodeId, CellError> {
        let i = self.manifest.nodes.iter().position(|n| *n == old).ok_or(CellError::Stopped)?;
        let path = self.dir.join(format!("node-{i}"));
        std::fs::remove_dir_all(&path).map_err(|e| CellError::Dir(path.clone(), e))?;
        let store = FjallStore::open_with(&path, self.setup.store.for_member(i))?;
        let probe = store.probe();
        let new = NodeId(random_u64());
        let asleep = self.setup.shell.dormant_after.is_some();
        let host = Host::boot_node(store, None, new, self.setup.tunables, random_u64(), asleep)
            .map_err(|source| CellError::Boot { node: new, source })?;
        let incarnation = host.incarnation();
        let (endpoint, inbox) = self.bus.register(new, 65_536);
        let handle = shell::spawn(host, endpoint, inbox, MonotonicClock::new(), voter_shell(self.setup.shell));
        forward_faults(&handle, &self.faults);
        let followed = vec![FollowedNode {
            id: new,
            placer: placer::NodePlacer(handle.control()),
            hosted: std::collections::BTreeMap::new(),
        }];
        let (progress, task) =
            spawn_follower_of(self.client.clone(), self.registry(), followed, FollowerConfig::default());
        self.followers.push(progress);
        self.follower_tasks.push(task);
        lock(&self.nodes).push(Running { id: new, handle, probe, incarnation });
        self.manifest.nodes[i] = new;
        let manifest_path = self.dir.join("cell.json");
        let bytes = serde_json::to_vec_pretty(&self.manifest).expect("a manifest serializes");
        std::fs::write(&manifest_path, bytes).map_err(|e| CellError::Dir(manifest_path, e))?;
        let m = member(new, i);
        let Some(Incarnation(incarnation)) = incarnation else { return Err(CellError::Stopped) };
        let rejoin = Command::Rejoin {
            old,
            new,
            bus_address: m.bus_address,
            zone: m.zone,
            incarnation: paros_registry::Incarnation(incarnation),
        };
        self.request(Op::Command(rejoin)).await?;
        Ok(new)
    }

    /// Creates the default tier (with the manifest's feed) if missing, and registers the
    /// replicas on it. A cell with no replicas gets no tier: its journals are on none, so
    /// their leaders send their chosen batches to no feed (`tier` is `null` for them).
    async fn form_tier(&self) -> Result<(), CellError> {
        if self.manifest.replicas.is_empty() {
            return Ok(());
        }
        // The feed is an id no machine has: a random one is drawn again in the unlikely case
        // it is taken; the manifest's is the one its replicas subscribe to.
        let mut draws = 1;
        loop {
            let feed = self.manifest.feed.unwrap_or_else(|| NodeId(random_u64()));
            let tier = Command::CreateTier { tier: TierName::default_tier(), feed };
            match self.request(Op::Command(tier)).await {
                Ok(_) | Err(CellError::Refused(Refusal::TierNameTaken { .. })) => break,
                Err(CellError::Refused(Refusal::FeedTaken { .. })) if draws < 4 && self.manifest.feed.is_none() => {
                    draws += 1;
                }
                Err(e) => return Err(e),
            }
        }
        for (i, id) in self.manifest.replicas.iter().enumerate() {
            let m = member(*id, self.manifest.nodes.len() + i);
            let register = Command::RegisterReplica {
                id: m.id,
                tier: TierName::default_tier(),
                bus_address: m.bus_address,
                zone: m.zone,
            };
            self.request(Op::Command(register)).await?;
        }
        Ok(())
    }

    /// The read replica tier, when the cell has one.
    #[must_use]
    pub fn replicas(&self) -> Option<&Arc<Replicas>> {
        self.replicas.as_ref()
    }

    /// The key of `tenant`'s journal `name`, for [`client`](Self::client)'s writers and readers:
    /// forms the cell, signs the tenant up and creates the journal (single-writer) where
    /// missing, and waits until every node hosts what the registry places — the in-cell
    /// counterpart of signing up and creating a journal at a gateway. Calling it again returns
    /// the same key.
    ///
    /// # Errors
    /// [`CellError::Timeout`] when the registry does not show the tenant or the journal within
    /// [`JOURNAL_WAIT`]; the registry's refusal (a quota) or failure to decide.
    pub async fn journal(&self, tenant: &TenantName, name: &JournalName) -> Result<JournalKey, CellError> {
        match self.init().await {
            Ok(_) | Err(CellError::AlreadyFormed(_)) => {}
            Err(e) => return Err(e),
        }
        let dir = self.wait_followers(JOURNAL_WAIT, |d| d.cell().is_some()).await?;
        let tenant = match dir.tenant_by_name(tenant) {
            Some(t) => t.id,
            None => {
                let id = TenantId(random_u64());
                let signup = Command::SignUp { tenant: id, name: tenant.clone(), quotas: Quotas::default() };
                match self.request(Op::Command(signup)).await {
                    Ok(_) => id,
                    // Signed up by someone else meanwhile: theirs is the tenant of that name.
                    Err(CellError::Refused(Refusal::TenantNameTaken { .. })) => {
                        let dir = self.wait_followers(JOURNAL_WAIT, |d| d.tenant_by_name(tenant).is_some()).await?;
                        dir.tenant_by_name(tenant).map(|t| t.id).ok_or(CellError::Timeout(JOURNAL_WAIT))?
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        let dir = self.wait_followers(JOURNAL_WAIT, |d| d.tenant(tenant).is_some()).await?;
        if let Some(journal) = dir.journal_by_name(tenant, name) {
            return Ok(journal.key);
        }
        let op = Op::CreateJournal {
            tenant,
            journal: JournalId(random_u64()),
            name: name.clone(),
            mode: WriterMode::Single,
            tier: None,
        };
        match self.request(op).await {
            Ok(_) | Err(CellError::Refused(Refusal::JournalNameTaken { .. })) => {}
            Err(e) => return Err(e),
        }
        let dir = self.wait_followers(JOURNAL_WAIT, |d| d.journal_by_name(tenant, name).is_some()).await?;
        dir.journal_by_name(tenant, name).map(|j| j.key).ok_or(CellError::Timeout(JOURNAL_WAIT))
    }

    /// Sends one request to the registry coordinator; see [`RegistryClient::request`].
    ///
    /// # Errors
    /// As [`RegistryClient::request`].
    pub async fn request(&self, op: Op) -> Result<paros_registry::Accepted, CellError> {
        self.request_handle().request(op).await
    }

    /// A clonable handle for registry requests (to send them from many tasks).
    #[must_use]
    pub fn request_handle(&self) -> RegistryClient {
        RegistryClient { coordinator: self.coordinator.clone() }
    }

    /// Waits until the cell's follower has folded a directory for which `ready` holds (and so
    /// every node hosts what that directory places on it).
    ///
    /// # Errors
    /// [`CellError::Timeout`] after `timeout`.
    pub async fn wait_followers(
        &self,
        timeout: Duration,
        ready: impl Fn(&Directory) -> bool,
    ) -> Result<Arc<Directory>, CellError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut last = None;
        for follower in &self.followers {
            let mut follower = follower.clone();
            let seen =
                tokio::time::timeout_at(deadline, follower.wait_for(|f| f.directory.as_deref().is_some_and(&ready)))
                    .await
                    .map_err(|_| CellError::Timeout(timeout))?
                    .map_err(|_| CellError::Stopped)?;
            last = seen.directory.clone();
        }
        last.ok_or(CellError::Stopped)
    }

    /// The registry as the cell's follower has folded it (the directory a gateway resolves
    /// names with).
    #[must_use]
    pub fn directory(&self) -> watch::Receiver<Followed> {
        self.followers[0].clone()
    }

    /// The coordinator's request handle (a gateway's registry requests go through it).
    #[must_use]
    pub fn coordinator(&self) -> CoordinatorHandle {
        self.coordinator.clone()
    }

    /// Each node's counters as of its last round.
    #[must_use]
    pub fn node_stats(&self) -> Vec<paros_node::HostStats> {
        self.stats_reader().read_nodes().into_iter().map(|s| s.host).collect()
    }

    /// Reads answered from the read caches of the cell's running replicas (its nodes keep
    /// none, see `voter_shell`) without a trip to their threads, and reads the caches declined.
    #[must_use]
    pub fn read_cache_counts(&self) -> (u64, u64) {
        let samples = self.replicas.as_ref().map(|r| r.samples()).unwrap_or_default();
        samples.iter().filter_map(|s| s.cache).fold((0, 0), |(s, d), c| (s + c.served, d + c.declined))
    }

    /// A clonable reader of every node's counters (a gateway's dashboard holds one); it reads
    /// nothing once the cell stopped.
    #[must_use]
    pub fn stats_reader(&self) -> NodeStatsReader {
        NodeStatsReader { nodes: Arc::clone(&self.nodes), replicas: self.replicas.clone() }
    }

    /// Every node's round time split so far, in node order.
    #[must_use]
    pub fn round_times(&self) -> Vec<paros_node::timing::RoundTimes> {
        lock(&self.nodes).iter().map(|n| n.handle.round_times()).collect()
    }

    /// Handles on every node's store, for sampling fjall's background activity.
    #[must_use]
    pub fn store_probes(&self) -> Vec<paros_store::StoreProbe> {
        lock(&self.nodes).iter().map(|n| n.probe.clone()).collect()
    }

    /// Stops the registry loops and every node; returns the hosts (stores still open).
    ///
    /// # Errors
    /// The storage fault of a node that stopped on one (the first, in node order): it has no
    /// host to give back. Every node is stopped all the same.
    pub fn stop(self) -> Result<Vec<Host<FjallStore>>, Arc<NodeFault>> {
        if let Some(r) = &self.replicas {
            r.stop();
        }
        self.coordinator_task.abort();
        for t in &self.registry_loops {
            t.abort();
        }
        for t in &self.follower_tasks {
            t.abort();
        }
        for n in &self.manifest.nodes {
            self.bus.unregister(*n);
        }
        let nodes = std::mem::take(&mut *lock(&self.nodes));
        let stopped: Vec<_> = nodes.into_iter().map(|n| n.handle.stop()).collect();
        stopped.into_iter().collect()
    }
}

/// Reads the embedded cell's node counters from anywhere; see [`EmbeddedCell::stats_reader`].
#[derive(Clone)]
pub struct NodeStatsReader {
    nodes: Arc<Mutex<Vec<Running>>>,
    replicas: Option<Arc<Replicas>>,
}

/// One running node's counters and its store's activity, read together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeSample {
    pub node: NodeId,
    /// The tier feed a read replica is joined to, and its state (`None` for a voter).
    pub replica: Option<(NodeId, paros_replica::State)>,
    /// The node's counters as of its last round.
    pub host: paros_node::HostStats,
    /// Its store's background work and size on disk now.
    pub store: paros_store::StoreActivity,
    /// Reads its read cache answered (0: it keeps none, as the cell's nodes do).
    pub reads_cached: u64,
}

impl std::fmt::Debug for NodeStatsReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<NodeId> = lock(&self.nodes).iter().map(|n| n.id).collect();
        f.debug_struct("NodeStatsReader").field("nodes", &ids).finish_non_exhaustive()
    }
}

impl NodeStatsReader {
    /// Each running node's counters and store activity (none once the cell stopped), then each
    /// running read replica's.
    #[must_use]
    pub fn read(&self) -> Vec<NodeSample> {
        let mut samples = self.read_nodes();
        if let Some(r) = &self.replicas {
            samples.extend(r.samples().into_iter().map(|r| NodeSample {
                node: r.id,
                replica: Some((r.feed, r.state())),
                host: r.host,
                store: r.store,
                reads_cached: r.cache.map_or(0, |c| c.served),
            }));
        }
        samples
    }

    fn read_nodes(&self) -> Vec<NodeSample> {
        lock(&self.nodes)
            .iter()
            .map(|n| NodeSample {
                node: n.id,
                replica: None,
                host: n.handle.stats(),
                store: n.probe.sample(),
                reads_cached: 0,
            })
            .collect()
    }
}

/// Every retained record of `key`, by position, read to the tail with paros-client's `Reader`
/// (a truncated range is a gap: its positions are absent from the map).
///
/// # Errors
/// A description of the read that failed.
pub async fn read_all(
    client: &Client<CellService>,
    key: JournalKey,
) -> Result<std::collections::BTreeMap<u64, bytes::Bytes>, String> {
    use paros_client::ReadItem;
    let mut out = std::collections::BTreeMap::new();
    let mut reader = client.reader(key).build().map_err(|e| e.to_string())?;
    loop {
        // A call that met an unserved read after reading something returns what it read; the
        // next one meets that read again, and fails if it is still unserved.
        let items = reader.read_to_tail().await.map_err(|e| format!("read at {}: {e}", reader.cursor()))?;
        let empty = items.is_empty();
        for item in items {
            if let ReadItem::Record { seq, data } = item {
                out.insert(seq.0, data);
            }
        }
        if empty || reader.caught_up() {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    //! The embedded cell's registry end to end: formation, journals that follow the registry,
    //! checkpoint-and-truncate across restarts, and a coordinator fenced by its successor.

    use super::*;
    use paros_client::{CheckpointerConfig, WriterConfig};
    use paros_registry::{Command, JournalName, Quotas, TenantName};

    async fn formed(dir: &Path, coordinator: CoordinatorLoopConfig) -> EmbeddedCell {
        let cell = EmbeddedCell::open_configured(dir, EMBEDDED_MEMBERS, coordinator).await.expect("opens");
        cell.init().await.expect("forms");
        cell
    }

    async fn sign_up(cell: &EmbeddedCell, name: &str, journals_max: u32) -> TenantId {
        let quotas = Quotas { journals_max, ..Quotas::default() };
        let op = Op::Command(Command::SignUp {
            tenant: TenantId(random_u64()),
            name: TenantName::parse(name).unwrap(),
            quotas,
        });
        match cell.request(op).await.expect("signs up") {
            paros_registry::Accepted::SignedUp { tenant } => tenant,
            other => panic!("{other:?}"),
        }
    }

    fn create(tenant: TenantId, name: &str) -> Op {
        Op::CreateJournal {
            tenant,
            journal: JournalId(random_u64()),
            name: JournalName::parse(name).unwrap(),
            mode: WriterMode::Single,
            tier: None,
        }
    }

    fn small_checkpoints() -> CoordinatorLoopConfig {
        let mut c = CoordinatorLoopConfig::default();
        c.coordinator.checkpoint = CheckpointerConfig { factor: 4, interval_records: 24, chunk_bytes: 256 };
        c
    }

    /// The in-cell one-call setup: an unformed cell, one call for a tenant's journal, then the
    /// cell's client writes and reads it; asked again, the same journal.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_call_gives_a_tenants_journal_that_the_cells_client_writes_and_reads() {
        use paros_client::{ReadItem, Seq};
        let dir = tempfile::tempdir().unwrap();
        let cell = EmbeddedCell::open(dir.path()).await.expect("opens");
        let (acme, orders) = (TenantName::parse("acme").unwrap(), JournalName::parse("orders").unwrap());
        let key = cell.journal(&acme, &orders).await.expect("signs up, creates and places");
        let mut writer = cell.client.writer(key).claim().await.expect("claims");
        writer.write(vec!["a".into(), "b".into()]).await.expect("writes");
        let items = cell.client.reader(key).build().unwrap().read_to_tail().await.expect("reads");
        assert_eq!(items.last(), Some(&ReadItem::Record { seq: Seq(1), data: "b".into() }));
        let d = cell.directory().borrow().directory.clone().expect("a directory is published");
        let journal = d.journal(key).expect("in the directory");
        assert_eq!(journal.tier, Some(TierName::default_tier()), "placed on the default tier");
        assert_eq!(journal.config().learners, journal.feed.into_iter().collect::<Vec<_>>(), "fed at its feed");
        assert_eq!(cell.journal(&acme, &orders).await.expect("exists"), key, "the same journal again");
        let other = cell.journal(&acme, &JournalName::parse("refunds").unwrap()).await.expect("a second one");
        assert_ne!(other, key);
        let _ = cell.stop();
    }

    /// A cell opened with no replicas has no tier: its journals are on none, and their
    /// leaders publish no chosen batch to a feed nobody joined (a cell with replicas does).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cell_without_replicas_places_journals_on_no_tier_and_publishes_to_no_feed() {
        use paros_client::{ReadItem, Seq};
        for replicas in [0, EMBEDDED_REPLICAS] {
            let dir = tempfile::tempdir().unwrap();
            let cell = EmbeddedCell::open_sized(dir.path(), (EMBEDDED_MEMBERS, replicas)).await.expect("opens");
            let (acme, orders) = (TenantName::parse("acme").unwrap(), JournalName::parse("orders").unwrap());
            let key = cell.journal(&acme, &orders).await.expect("signs up, creates and places");
            let mut writer = cell.client.writer(key).claim().await.expect("claims");
            for i in 0..5 {
                writer.write(vec![format!("r{i}").into()]).await.expect("writes");
            }
            let items = cell.client.reader(key).build().unwrap().read_to_tail().await.expect("reads");
            assert_eq!(items.last(), Some(&ReadItem::Record { seq: Seq(4), data: "r4".into() }));
            let d = cell.directory().borrow().directory.clone().expect("a directory is published");
            let journal = d.journal(key).expect("in the directory");
            let publishes = cell.bus.stats().feed_publishes;
            if replicas == 0 {
                assert_eq!((journal.tier.clone(), journal.feed), (None, None), "on no tier");
                assert!(journal.config().learners.is_empty());
                assert!(d.tier(&TierName::default_tier()).is_none(), "the cell has no tier");
                assert_eq!(publishes, 0, "nothing published to a feed");
            } else {
                assert_eq!(journal.tier, Some(TierName::default_tier()));
                assert!(publishes > 0, "the leader feeds the tier");
            }
            let _ = cell.stop();
        }
    }

    #[test]
    fn the_registry_journal_founders_leave_two_nodes_spare_from_five_nodes_on() {
        let nodes: Vec<NodeId> = (1..=9).map(NodeId).collect();
        let sizes: Vec<usize> = (1..=9).map(|n| registry_members(&nodes[..n]).len()).collect();
        assert_eq!(sizes, vec![1, 1, 3, 3, 3, 3, 5, 5, 5]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_second_init_is_refused_and_the_directory_names_the_founders() {
        let dir = tempfile::tempdir().unwrap();
        let cell = formed(dir.path(), CoordinatorLoopConfig::default()).await;
        assert!(matches!(cell.init().await, Err(CellError::AlreadyFormed(c)) if c.0 == cell.manifest.cell));
        let default = TierName::default_tier();
        let d = cell.wait_followers(Duration::from_secs(20), |d| d.tier(&default).is_some()).await.unwrap();
        assert_eq!(d.cell().unwrap().members, cell.manifest.nodes);
        let feed = d.tier(&default).expect("the formation created the default tier").feed;
        assert!(!cell.manifest.nodes.contains(&feed), "its feed is no node's id");
        let _ = cell.stop();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn journals_exist_because_the_registry_says_so_and_a_deleted_one_leaves_every_node() {
        let dir = tempfile::tempdir().unwrap();
        let cell = formed(dir.path(), CoordinatorLoopConfig::default()).await;
        let tenant = sign_up(&cell, "acme", 10).await;
        let paros_registry::Accepted::JournalCreated { .. } = cell.request(create(tenant, "orders")).await.unwrap()
        else {
            panic!()
        };
        let name = JournalName::parse("orders").unwrap();
        let d =
            cell.wait_followers(Duration::from_secs(20), |d| d.journal_by_name(tenant, &name).is_some()).await.unwrap();
        let key = d.journal_by_name(tenant, &name).unwrap().key;
        // Every voter hosts it now: a writer claims it and writes.
        let mut w = paros_client::Writer::with_seed(cell.client.clone(), key, WriterConfig::default(), 5).unwrap();
        w.claim().await.expect("claims");
        let written = w.write(vec![bytes::Bytes::from_static(b"first")]).await.expect("writes");
        assert_eq!(written.seq, paros_core::Seq(0));
        // A taken name is refused by the fold, in place.
        assert!(matches!(cell.request(create(tenant, "orders")).await, Err(CellError::Refused(_))));

        cell.request(Op::Command(Command::DeleteJournal { tenant, name: name.clone() })).await.expect("deletes");
        cell.wait_followers(Duration::from_secs(20), |d| d.journal_by_name(tenant, &name).is_none()).await.unwrap();
        let registry = cell.registry();
        // The follower removes it right after folding the delete; give the rounds a moment.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let hosts = cell.stop().expect("no node faulted");
        for h in &hosts {
            assert!(h.voter(&key).is_none(), "{:?} no longer hosts the deleted journal", h.id());
            assert!(h.voter(&registry).is_some(), "the registry journal stays");
        }
        drop(hosts);
        for i in 0..EMBEDDED_MEMBERS {
            let store = FjallStore::open(&dir.path().join(format!("node-{i}"))).unwrap();
            let stored: Vec<JournalKey> =
                paros_node::ports::LogStore::load(&store).unwrap().into_iter().map(|j| j.key).collect();
            assert_eq!(stored, vec![registry], "node {i}'s store holds nothing of the deleted journal");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_registry_truncated_many_times_serves_the_same_directory_after_every_node_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let cell = formed(dir.path(), small_checkpoints()).await;
        let tenant = sign_up(&cell, "churn", 1000).await;
        for i in 0..120 {
            cell.request(create(tenant, &format!("j{i}"))).await.expect("creates");
            if i % 3 == 0 {
                let name = JournalName::parse(&format!("j{i}")).unwrap();
                cell.request(Op::Command(Command::DeleteJournal { tenant, name })).await.expect("deletes");
            }
        }
        let live = |d: &Directory| d.journals_of(tenant).count() == 80;
        let before = cell.wait_followers(Duration::from_secs(30), live).await.unwrap();
        let view = match paros_client::JournalService::inspect(
            cell.client.service(),
            &cell.registry(),
            paros_client::Route::default(),
        )
        .await
        {
            paros_client::ReadAnswer::Page { view, .. } | paros_client::ReadAnswer::Truncated { view } => view,
            other => panic!("{other:?}"),
        };
        assert!(view.first_seq.0 > 100, "the registry was truncated many times: first_seq {:?}", view.first_seq);
        let state = paros_client::Checkpointable::checkpoint(&*before).len() as u64;
        let retained: u64 =
            read_all(&cell.client, cell.registry()).await.unwrap().values().map(|r| r.len() as u64).sum();
        // One run (the state, in chunks, with Begin/End) plus what came after it: under 4 ×
        // state by the factor rule, or 24 records by the interval rule, whichever came first.
        let bound = 4 * state + (state + 1024) + 24 * 512;
        assert!(retained <= bound, "retained {retained} bytes for a state of {state} bytes (bound {bound})");
        let _ = cell.stop();

        // Every node restarts: followers and the coordinator fold from the floor, restoring
        // from the checkpoint there.
        let cell = EmbeddedCell::open_configured(dir.path(), EMBEDDED_MEMBERS, small_checkpoints()).await.unwrap();
        let after = cell.wait_followers(Duration::from_secs(30), live).await.unwrap();
        assert_eq!(*after, *before, "the same directory, from the checkpoint");
        // The coordinator serves requests on the restored directory.
        cell.request(create(tenant, "after-restart")).await.expect("creates after the restart");
        let _ = cell.stop();
    }

    /// After a restart the followers fold the registry from its checkpoint, a page at a time.
    /// A directory folded only part of the way lacks the journals created after the checkpoint
    /// in later pages; applied to the nodes, it removed them (and their records) until a later
    /// page placed them again, empty. Nothing is applied or published before the follower
    /// reaches the registry's tail.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restart_keeps_the_records_of_journals_created_after_the_registry_checkpoint() {
        // One checkpoint after 400 commands, then about 380 more in the registry's tail: more
        // than one follower page (256 records) past the checkpoint.
        let mut coordinator = CoordinatorLoopConfig::default();
        coordinator.coordinator.checkpoint =
            CheckpointerConfig { factor: 1 << 20, interval_records: 400, ..CheckpointerConfig::default() };
        let dir = tempfile::tempdir().unwrap();
        let cell = formed(dir.path(), coordinator).await;
        let tenant = sign_up(&cell, "late", 1000).await;
        let mut creates = tokio::task::JoinSet::new();
        for i in 0..780 {
            let request = cell.request_handle();
            creates.spawn(async move { request.request(create(tenant, &format!("j{i}"))).await.expect("creates") });
            if creates.len() >= 32 {
                creates.join_next().await.unwrap().unwrap();
            }
        }
        while let Some(done) = creates.join_next().await {
            done.unwrap();
        }
        cell.request(create(tenant, "last")).await.expect("creates");
        let name = JournalName::parse("last").unwrap();
        let d =
            cell.wait_followers(Duration::from_secs(30), |d| d.journal_by_name(tenant, &name).is_some()).await.unwrap();
        let key = d.journal_by_name(tenant, &name).unwrap().key;
        let mut w = paros_client::Writer::with_seed(cell.client.clone(), key, WriterConfig::default(), 5).unwrap();
        w.claim().await.expect("claims");
        w.write(vec![bytes::Bytes::from_static(b"kept")]).await.expect("writes");
        let view = match paros_client::JournalService::inspect(
            cell.client.service(),
            &cell.registry(),
            paros_client::Route::default(),
        )
        .await
        {
            paros_client::ReadAnswer::Page { view, .. } | paros_client::ReadAnswer::Truncated { view } => view,
            other => panic!("{other:?}"),
        };
        assert!(
            view.first_seq.0 > 0 && view.next_seq.0 - view.first_seq.0 > 256 + 16,
            "a checkpoint, and more than a page after it: {view:?}"
        );
        let _ = cell.stop();

        let cell = EmbeddedCell::open_configured(dir.path(), EMBEDDED_MEMBERS, coordinator).await.unwrap();
        let d = cell.wait_followers(Duration::from_secs(30), |d| d.cell().is_some()).await.unwrap();
        let records = read_all(&cell.client, key).await.unwrap();
        assert_eq!(
            records.values().cloned().collect::<Vec<_>>(),
            vec![bytes::Bytes::from_static(b"kept")],
            "the record survives the restart"
        );
        assert_eq!(d.journals_of(tenant).count(), 781, "the first directory published is the whole one");
        let removed: u64 = cell.directory().borrow().removed;
        assert_eq!(removed, 0, "no journal was removed");
        let _ = cell.stop();
    }

    /// The shell's check-in settings reach every node's host: with no boot wakes, or no room
    /// for a check-in, a restart checks no journal in; with the defaults it checks in every
    /// one on every node.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_shells_check_in_settings_reach_the_nodes() {
        let dir = tempfile::tempdir().unwrap();
        let cell = formed(dir.path(), CoordinatorLoopConfig::default()).await;
        let tenant = sign_up(&cell, "quiet", 100).await;
        for i in 0..20 {
            cell.request(create(tenant, &format!("j{i}"))).await.expect("creates");
        }
        cell.wait_followers(Duration::from_secs(20), |d| d.journals_of(tenant).count() == 20).await.unwrap();
        let _ = cell.stop();
        let wakes_after_a_restart = |shell: ShellConfig| {
            let dir = dir.path().to_path_buf();
            async move {
                let cell = EmbeddedCell::open_tuned(
                    &dir,
                    EMBEDDED_MEMBERS,
                    CoordinatorLoopConfig::default(),
                    paros_store::StoreOptions::default(),
                    shell,
                )
                .await
                .unwrap();
                cell.wait_followers(Duration::from_secs(20), |d| d.journals_of(tenant).count() == 20).await.unwrap();
                tokio::time::sleep(Duration::from_millis(1500)).await;
                let wakes: u64 = cell.node_stats().iter().map(|s| s.wakes).sum();
                let _ = cell.stop();
                wakes
            }
        };
        let defaults = embedded_tunables().1;
        let none = wakes_after_a_restart(ShellConfig { boot_wakes_per_tick: 0, ..defaults }).await;
        let no_room = wakes_after_a_restart(ShellConfig { check_ins_max: 0, ..defaults }).await;
        let all = wakes_after_a_restart(defaults).await;
        // Only the registry journal (read by the follower and the coordinator) wakes without
        // check-ins; with them, each of the 20 journals wakes on each of the 3 nodes.
        assert!(none < 20, "no check-ins: {none} wakes");
        assert!(no_room < 20, "no room for check-ins: {no_room} wakes");
        assert!(all >= 60, "every journal checked in on every node: {all} wakes");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_coordinator_is_fenced_by_its_successor() {
        let dir = tempfile::tempdir().unwrap();
        let cell = formed(dir.path(), CoordinatorLoopConfig::default()).await;
        let first = cell.request_handle();
        let (successor, _task) =
            spawn_coordinator(cell.client.clone(), cell.registry(), CoordinatorLoopConfig::default());
        let successor = RegistryClient { coordinator: successor };
        let tenant = match successor
            .request(Op::Command(Command::SignUp {
                tenant: TenantId(7),
                name: TenantName::parse("late").unwrap(),
                quotas: Quotas::default(),
            }))
            .await
        {
            Ok(paros_registry::Accepted::SignedUp { tenant }) => tenant,
            other => panic!("the successor serves: {other:?}"),
        };
        assert_eq!(tenant, TenantId(7));
        // The first coordinator's next write is refused by the successor's fence.
        let answer = first
            .request(Op::Command(Command::SignUp {
                tenant: TenantId(8),
                name: TenantName::parse("early").unwrap(),
                quotas: Quotas::default(),
            }))
            .await;
        assert!(
            matches!(answer, Err(CellError::CoordinatorGone | CellError::Undecided(Answer::NotCoordinator))),
            "{answer:?}"
        );
        let d = cell.wait_followers(Duration::from_secs(20), |d| d.tenant(TenantId(7)).is_some()).await.unwrap();
        assert!(d.tenant(TenantId(8)).is_none(), "nothing the fenced coordinator sent took effect");
        let _ = cell.stop();
    }
}
