//! The embedded cell: three nodes in one process on the in-process bus, fjall under a data
//! directory. `paros bench` (and later `paros dev`) run on it.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::time::Duration;

use paros_bus::InProcessBus;
use paros_core::journal::WriterMode;
use paros_core::{JournalConfig, JournalId, JournalKey, NodeId, TenantId, Tunables};
use paros_node::ports::MonotonicClock;
use paros_node::shell::{self, NodeHandle, ShellConfig};
use paros_node::{BootError, Host};
use paros_store::FjallStore;
use serde::{Deserialize, Serialize};

/// A fresh random u64 from the OS-seeded hasher keys (ids are random, never constants).
#[must_use]
pub fn random_u64() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.finish() | 1
}

/// What the data directory remembers about the cell: its machines and its journals.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub nodes: Vec<NodeId>,
    pub journals: Vec<JournalKey>,
}

/// Why the embedded cell would not start.
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
    #[error("placement refused: {0}")]
    Place(#[from] paros_node::PlaceError),
    #[error("a node stopped while the cell was opening")]
    Stopped,
}

impl CellError {
    /// The daemon exit code this error maps to (DESIGN §5).
    #[must_use]
    pub fn exit_code(&self) -> i32 {
        match self {
            CellError::Boot { source: BootError::Wiped(_) | BootError::WrongIdentity { .. }, .. } => shell::EXIT_REFUSED,
            CellError::Manifest(..) | CellError::Place(_) => 2,
            _ => shell::EXIT_STORAGE_FAULT,
        }
    }
}

/// Journals placed per control request to a node.
const PLACEMENTS_PER_REQUEST: usize = 1024;

/// A running embedded cell.
#[derive(Debug)]
pub struct EmbeddedCell {
    pub bus: InProcessBus,
    pub manifest: Manifest,
    nodes: Vec<NodeHandle<FjallStore>>,
    /// How long placing the journals that were not yet on disk took, on the running nodes
    /// (zero on a reopen that found them all).
    pub placement: Duration,
}

/// Tunables of the embedded cell: a 20 ms tick (elections in 200–400 ms).
#[must_use]
pub fn embedded_tunables() -> (Tunables, ShellConfig) {
    (Tunables::default(), ShellConfig { tick: Duration::from_millis(20), ..ShellConfig::default() })
}

impl EmbeddedCell {
    /// Opens (or first creates, with `journals` fresh single-writer journals) the cell under
    /// `dir`. On reopen the journal count is read from the manifest.
    ///
    /// # Errors
    /// [`CellError`]; a wiped store under an existing identity refuses to boot.
    pub async fn open(dir: &Path, journals: usize) -> Result<EmbeddedCell, CellError> {
        std::fs::create_dir_all(dir).map_err(|e| CellError::Dir(dir.into(), e))?;
        let manifest_path = dir.join("cell.json");
        let (manifest, fresh) = match std::fs::read(&manifest_path) {
            Ok(bytes) => {
                let m: Manifest = serde_json::from_slice(&bytes).map_err(|e| CellError::Manifest(manifest_path.clone(), e.to_string()))?;
                (m, false)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let m = Manifest {
                    nodes: (0..3).map(|_| NodeId(random_u64())).collect(),
                    journals: (0..journals).map(|_| JournalKey { tenant: TenantId(random_u64()), journal: JournalId(random_u64()) }).collect(),
                };
                (m, true)
            }
            Err(e) => return Err(CellError::Dir(manifest_path, e)),
        };
        let (tunables, shell_config) = embedded_tunables();
        let config = JournalConfig { mode: WriterMode::Single, voters: manifest.nodes.clone(), learners: Vec::new() };
        let bus = InProcessBus::new();
        let mut nodes = Vec::new();
        let mut missing = Vec::new();
        for (i, node) in manifest.nodes.iter().enumerate() {
            let store = FjallStore::open(&dir.join(format!("node-{i}")))?;
            let expected = if fresh { None } else { Some(*node) };
            let host = Host::boot(store, expected, *node, tunables, random_u64()).map_err(|source| CellError::Boot { node: *node, source })?;
            let held: std::collections::BTreeSet<JournalKey> = host.journal_keys().copied().collect();
            missing.push(manifest.journals.iter().copied().filter(|k| !held.contains(k)).collect::<Vec<_>>());
            let (endpoint, inbox) = bus.register(host.id(), 65_536);
            nodes.push(shell::spawn(host, endpoint, inbox, MonotonicClock::new(), shell_config));
        }
        // Placement rides each node's rounds: one sync per round for all the journals placed
        // in it, on the three nodes at once.
        let started = std::time::Instant::now();
        let placing: Vec<_> = nodes
            .iter()
            .zip(missing)
            .map(|(node, keys)| {
                let (control, config) = (node.control(), config.clone());
                tokio::spawn(async move {
                    for chunk in keys.chunks(PLACEMENTS_PER_REQUEST) {
                        let journals = chunk.iter().map(|k| (*k, config.clone())).collect();
                        for result in control.place_all(journals).await.map_err(|_| CellError::Stopped)? {
                            result?;
                        }
                    }
                    Ok::<(), CellError>(())
                })
            })
            .collect();
        for task in placing {
            task.await.map_err(|_| CellError::Stopped)??;
        }
        for (j, key) in manifest.journals.iter().enumerate() {
            nodes[j % nodes.len()].control().campaign(*key).await.map_err(|_| CellError::Stopped)?;
        }
        let placement = started.elapsed();
        if fresh {
            let bytes = serde_json::to_vec_pretty(&manifest).expect("a manifest serializes");
            std::fs::write(&manifest_path, bytes).map_err(|e| CellError::Dir(manifest_path.clone(), e))?;
        }
        Ok(EmbeddedCell { bus, manifest, nodes, placement })
    }

    /// Each node's counters as of its last round.
    #[must_use]
    pub fn node_stats(&self) -> Vec<paros_node::HostStats> {
        self.nodes.iter().map(NodeHandle::stats).collect()
    }

    /// Stops every node and returns their hosts (stores still open, for counters).
    #[must_use]
    pub fn stop(self) -> Vec<Host<FjallStore>> {
        for n in &self.manifest.nodes {
            self.bus.unregister(*n);
        }
        self.nodes.into_iter().map(NodeHandle::stop).collect()
    }
}

