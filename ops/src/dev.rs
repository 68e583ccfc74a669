//! `paros dev`: the embedded cell — three nodes (`--nodes N` for more), two read replicas
//! (`--replicas N`), the registry, and the tenant gateway on 127.0.0.1 — in one process, on
//! fjall under a data directory. Restartable on the same data; SIGINT or SIGTERM stops it cleanly.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use paros_embedded::{CellError, EmbeddedCell, NodeSample};
use paros_gateway::{
    ControlError, Gateway, GatewayConfig, KeyPair, LagHistogram, LaggingJournal, MachineControl, NodeCounters,
    NodeStats, ReplicaCounters, ReplicaStateName, SigningKeys, StoreCounters,
};

/// One embedded node's sample as the gateway's port shows it.
#[must_use]
pub fn node_counters(s: &NodeSample) -> NodeCounters {
    let (h, st) = (&s.host, &s.store);
    NodeCounters {
        node: s.node,
        rounds: h.rounds,
        syncs: h.syncs,
        writes: h.writes,
        records_accepted: h.records_accepted,
        campaigns: h.campaigns,
        leaderships_won: h.leaderships_won,
        dormant: h.dormant,
        store: None,
        replica: s.replica.map(|(feed, state)| replica_counters(feed, state, h, s.reads_cached)),
    }
    .with_store(StoreCounters {
        compactions_completed: st.compactions_completed,
        compacting_us: st.compacting_us,
        compactions_active: st.compactions_active,
        flushes_outstanding: st.flushes_outstanding,
        log_tables: st.log_tables,
        log_l0_tables: st.log_l0_tables,
        journal_files: st.journal_files,
        room_waits: st.room_waits,
        room_waited_us: st.room_waited_us,
        disk_bytes: st.disk_bytes,
    })
}

/// A read replica's state and lag as the gateway's port shows them.
fn replica_counters(
    feed: paros_core::NodeId,
    state: paros_replica::State,
    h: &paros_node::HostStats,
    reads_cached: u64,
) -> ReplicaCounters {
    let r = &h.replicas;
    ReplicaCounters {
        feed,
        state: match state {
            paros_replica::State::Bootstrapping => ReplicaStateName::Bootstrapping,
            paros_replica::State::CatchingUp => ReplicaStateName::CatchingUp,
            paros_replica::State::Serving => ReplicaStateName::Serving,
        },
        bootstrapping: r.bootstrapping,
        catching_up: r.catching_up,
        serving: r.serving,
        behind: r.behind,
        lag_slots_max: r.lag_slots_max,
        lag_ms_max: r.lag_ms_max,
        feed_age_ms_max: r.feed_age_ms_max,
        reads_refused_unready: h.reads_refused_unready,
        reads_cached,
        lag_slots_journals: LagHistogram { bounds: paros_node::host::LAG_SLOTS_BOUNDS, counts: r.lag_slots_journals },
        lag_ms_journals: LagHistogram { bounds: paros_node::host::LAG_MS_BOUNDS, counts: r.lag_ms_journals },
        top: r.top.map(|l| LaggingJournal { journal: l.journal, slots: l.slots, ms: l.ms }),
        top_len: r.top_len,
    }
}

/// Stops and starts the embedded cell's read replicas by hand, for an operator trying failures
/// (`paros cell stop|start`).
pub struct ReplicaControl(pub Arc<paros_embedded::Replicas>);

impl ReplicaControl {
    fn index(&self, node: paros_core::NodeId) -> Result<usize, ControlError> {
        self.0.ids().iter().position(|id| *id == node).ok_or(ControlError::NotControlled)
    }
}

impl MachineControl for ReplicaControl {
    fn stop(&self, node: paros_core::NodeId, wipe: bool) -> Result<(), ControlError> {
        let i = self.index(node)?;
        self.0.kill(i);
        if wipe {
            self.0.wipe(i).map_err(|e| ControlError::Failed(e.to_string()))?;
        }
        Ok(())
    }

    fn start(&self, node: paros_core::NodeId) -> Result<(), ControlError> {
        let i = self.index(node)?;
        self.0.boot(i).map_err(|e| ControlError::Failed(e.to_string()))
    }
}

/// How long the admin token `paros dev` prints stays valid.
const ADMIN_TOKEN_VALID_S: u64 = 24 * 3600;

/// How long requests in progress (open tails included) get to finish after a stop signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The gateway's signing key, under the data directory.
const KEY_FILE: &str = "gateway-key.json";

/// Keys rotated out, still verifying the tokens they signed until retired: `<kid>.json` each.
const OLD_KEYS_DIR: &str = "gateway-keys";

/// `paros dev --tls-cert --tls-key`: serve HTTPS with this certificate chain and key (PEM).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// How `paros dev` treats its signing keys at start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyOptions {
    /// Sign with a fresh key from now on; the current one keeps verifying its tokens.
    pub rotate: bool,
    /// Retire these key ids once started: their tokens are refused from then on.
    pub retire: Vec<String>,
}

/// Why `paros dev` stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum DevError {
    #[error(transparent)]
    Cell(#[from] CellError),
    #[error("the gateway's signing key {0}: {1}")]
    Key(PathBuf, String),
    #[error("the gateway would not start: {0}")]
    Gateway(String),
    #[error("cannot listen on {0}: {1}")]
    Listen(SocketAddr, std::io::Error),
    #[error("signing key {0} was not retired: {1}")]
    Retire(String, String),
    #[error("TLS: {0}")]
    Tls(#[from] paros_gateway::tls::TlsError),
}

impl DevError {
    /// The exit code (75 storage fault, 78 refused to boot).
    #[must_use]
    pub fn exit_code(&self) -> i32 {
        match self {
            DevError::Cell(c) => c.exit_code(),
            DevError::Listen(..) | DevError::Key(..) | DevError::Retire(..) | DevError::Tls(_) => 2,
            DevError::Gateway(_) => 1,
        }
    }
}

fn key_error(path: &Path, e: impl std::fmt::Display) -> DevError {
    DevError::Key(path.to_owned(), e.to_string())
}

/// The keys under `dir`: the active one (generated on first start, or fresh when `rotate`,
/// the previous one then moving to `gateway-keys/`) and every rotated-out one.
fn signing_keys(dir: &Path, rotate: bool) -> Result<SigningKeys, DevError> {
    let path = dir.join(KEY_FILE);
    let old_dir = dir.join(OLD_KEYS_DIR);
    if rotate && path.exists() {
        let current = KeyPair::load(&path).map_err(|e| key_error(&path, e))?;
        std::fs::create_dir_all(&old_dir).map_err(|e| key_error(&old_dir, e))?;
        let kept = old_dir.join(format!("{}.json", current.kid()));
        std::fs::rename(&path, &kept).map_err(|e| key_error(&kept, e))?;
    }
    let active = if path.exists() {
        KeyPair::load(&path)
    } else {
        // A fresh id each time: the registry never takes a retired id back.
        let nonce = u16::from_le_bytes(paros_gateway::auth::random_bytes::<2>());
        let kid = format!("dev-{}-{nonce:04x}", paros_gateway::auth::now_s());
        paros_gateway::generate_key_file(&path, &kid)
    }
    .map_err(|e| key_error(&path, e))?;
    let mut others = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&old_dir) {
        for entry in entries {
            let file = entry.map_err(|e| key_error(&old_dir, e))?.path();
            if file.extension().is_some_and(|x| x == "json") {
                others.push(KeyPair::load(&file).map_err(|e| key_error(&file, e))?);
            }
        }
    }
    others.sort_by(|a, b| a.kid().as_str().cmp(b.kid().as_str()));
    Ok(SigningKeys { active, others })
}

/// Retires each of `kids`, then drops its file from `gateway-keys/` (it verifies nothing more).
async fn retire(gateway: &Gateway, dir: &Path, kids: &[String]) -> Result<(), DevError> {
    for raw in kids {
        let kid = paros_registry::KeyId::new(raw.as_str()).map_err(|e| DevError::Retire(raw.clone(), e.to_string()))?;
        gateway.retire_key(&kid).await.map_err(|e| DevError::Retire(raw.clone(), e.to_string()))?;
        let file = dir.join(OLD_KEYS_DIR).join(format!("{raw}.json"));
        if file.exists() {
            std::fs::remove_file(&file).map_err(|e| key_error(&file, e))?;
        }
        eprintln!("paros dev: signing key {raw} retired; its tokens are refused from now on");
    }
    Ok(())
}

/// Runs `paros dev` until SIGINT or SIGTERM, or until a node stops on a storage fault.
///
/// # Errors
/// [`DevError`] when the cell, the key or the listener will not come up;
/// [`CellError::NodeFault`] when a node stopped on a storage fault.
/// `quota_requests_per_s`: the requests/s quota new tenants get instead of the gateway's
/// default (a benchmark's tenant, say).
/// `keys`: rotate the signing key, retire old ones. `(nodes, replicas)`: how many nodes and
/// read replicas a new cell gets (an existing one keeps its own).
pub async fn run(
    dir: &Path,
    listen: SocketAddr,
    quota_requests_per_s: Option<u32>,
    keys: KeyOptions,
    (nodes, replicas): (usize, usize),
    lab_null_writes: bool,
    tls: Option<&TlsFiles>,
) -> Result<(), DevError> {
    // The certificate is checked before anything opens: a bad one changes nothing.
    let tls = tls.map(|f| paros_gateway::tls::server_config(&f.cert, &f.key)).transpose()?;
    let cell = EmbeddedCell::open_sized(dir, (nodes, replicas)).await?;
    // A node's storage fault ends the run (the caller exits with 75), whatever it was doing.
    let ran = tokio::select! {
        ran = serve(&cell, dir, (listen, tls), quota_requests_per_s, keys, lab_null_writes) => ran,
        fault = cell.fault() => Err(CellError::NodeFault(fault).into()),
    };
    if ran.is_ok() {
        eprintln!("paros dev: stopping");
    }
    drop(cell.stop());
    ran
}

/// The cell formed, the gateway up and serving until SIGINT or SIGTERM.
async fn serve(
    cell: &EmbeddedCell,
    dir: &Path,
    (listen, tls): (SocketAddr, Option<Arc<paros_gateway::tls::ServerConfig>>),
    quota_requests_per_s: Option<u32>,
    keys: KeyOptions,
    lab_null_writes: bool,
) -> Result<(), DevError> {
    match cell.init().await {
        Ok(_) | Err(CellError::AlreadyFormed(_)) => {}
        Err(e) => return Err(e.into()),
    }
    let signing = signing_keys(dir, keys.rotate)?;
    let mut config = GatewayConfig::default();
    if let Some(rate) = quota_requests_per_s {
        config.quotas_default.requests_per_s = rate;
    }
    // The dashboard and /metrics read the nodes' counters through this port.
    let reader = cell.stats_reader();
    let nodes: Arc<dyn NodeStats> = Arc::new(move || reader.read().iter().map(node_counters).collect::<Vec<_>>());
    let started = if lab_null_writes {
        eprintln!("paros dev: --lab-null-writes: tenant journals are held in memory, unreplicated and unsynced");
        let service = crate::lab::NullWrites::new(cell.client.service().clone());
        let client = paros_client::Client::new(service, paros_client::ClientConfig::default())
            .expect("the default client configuration is valid");
        Gateway::start_with_nodes(client, cell.coordinator(), cell.directory(), config, signing, Some(nodes)).await
    } else {
        Gateway::start_with_nodes(
            cell.client.clone(),
            cell.coordinator(),
            cell.directory(),
            config,
            signing,
            Some(nodes),
        )
        .await
    };
    let gateway = started.map_err(|e| DevError::Gateway(e.to_string()))?;
    if let Some(replicas) = cell.replicas() {
        gateway.control_machines(Arc::new(ReplicaControl(Arc::clone(replicas))));
    }
    retire(&gateway, dir, &keys.retire).await?;
    let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| DevError::Listen(listen, e))?;
    let addr = listener.local_addr().map_err(|e| DevError::Listen(listen, e))?;
    let token = paros_gateway::mint_admin_token(gateway.active_key(), ADMIN_TOKEN_VALID_S);
    let scheme = if tls.is_some() { "https" } else { "http" };
    println!("paros dev: serving {scheme}://{addr} (data in {})", dir.display());
    println!("admin token (valid 24 h): {token}");
    println!("dashboard: {scheme}://{addr}/ui#token={token}");
    println!(
        "try: export PAROS_URL={scheme}://{addr}; eval \"$(paros signup acme | grep ^export)\"; \
         paros journal create orders && paros write orders hello"
    );
    use std::io::Write as _;
    let _ = std::io::stdout().flush();

    let stopping = Arc::new(tokio::sync::Notify::new());
    let signal = {
        let stopping = Arc::clone(&stopping);
        async move {
            stop_signal().await;
            stopping.notify_one();
        }
    };
    let served = async move {
        match tls {
            Some(tls) => paros_gateway::serve_tls_until(listener, gateway, tls, signal).await,
            None => paros_gateway::serve_until(listener, gateway, signal).await,
        }
    };
    tokio::select! {
        result = served => result.map_err(|e| DevError::Listen(addr, e))?,
        () = async { stopping.notified().await; tokio::time::sleep(SHUTDOWN_GRACE).await } => {}
    }
    Ok(())
}

/// SIGINT (Ctrl-C) or SIGTERM.
async fn stop_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
