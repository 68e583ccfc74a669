//! `paros dev`: the embedded cell — three nodes, the registry, and the tenant gateway on
//! 127.0.0.1 — in one process, on fjall under a data directory. Restartable on the same data;
//! SIGINT or SIGTERM stops it cleanly.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use paros_embedded::{CellError, EmbeddedCell};
use paros_gateway::{Gateway, GatewayConfig, KeyPair, NodeCounters, NodeStats, SigningKeys};

/// How long the admin token `paros dev` prints stays valid.
const ADMIN_TOKEN_VALID_S: u64 = 24 * 3600;

/// How long requests in progress (open tails included) get to finish after a stop signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The gateway's signing key, under the data directory.
const KEY_FILE: &str = "gateway-key.json";

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
}

impl DevError {
    /// The exit code (DESIGN §5: 75 storage fault, 78 refused to boot).
    #[must_use]
    pub fn exit_code(&self) -> i32 {
        match self {
            DevError::Cell(c) => c.exit_code(),
            DevError::Listen(..) | DevError::Key(..) => 2,
            DevError::Gateway(_) => 1,
        }
    }
}

/// The key under `dir`, generated on first start.
fn signing_key(dir: &Path) -> Result<KeyPair, DevError> {
    let path = dir.join(KEY_FILE);
    let key = if path.exists() { KeyPair::load(&path) } else { paros_gateway::generate_key_file(&path, "dev-1") };
    key.map_err(|e| DevError::Key(path, e.to_string()))
}

/// Runs `paros dev` until SIGINT or SIGTERM.
///
/// # Errors
/// [`DevError`] when the cell, the key or the listener will not come up.
/// `quota_requests_per_s`: the requests/s quota new tenants get instead of the gateway's
/// default (a benchmark's tenant, say).
pub async fn run(dir: &Path, listen: SocketAddr, quota_requests_per_s: Option<u32>) -> Result<(), DevError> {
    let cell = EmbeddedCell::open(dir).await?;
    match cell.init().await {
        Ok(_) | Err(CellError::AlreadyFormed(_)) => {}
        Err(e) => return Err(e.into()),
    }
    let key = signing_key(dir)?;
    let mut config = GatewayConfig::default();
    if let Some(rate) = quota_requests_per_s {
        config.quotas_default.requests_per_s = rate;
    }
    // The dashboard and /metrics read the nodes' counters through this port.
    let reader = cell.stats_reader();
    let nodes: Arc<dyn NodeStats> = Arc::new(move || reader.read().iter().map(|(id, s)| NodeCounters::of_host(*id, s)).collect::<Vec<_>>());
    let gateway = Gateway::start_with_nodes(cell.client.clone(), cell.coordinator(), cell.directory(), config, SigningKeys::new(key), Some(nodes))
        .await
        .map_err(|e| DevError::Gateway(e.to_string()))?;
    let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| DevError::Listen(listen, e))?;
    let addr = listener.local_addr().map_err(|e| DevError::Listen(listen, e))?;
    let token = paros_gateway::mint_admin_token(gateway.active_key(), ADMIN_TOKEN_VALID_S);
    println!("paros dev: serving http://{addr} (data in {})", dir.display());
    println!("admin token (valid 24 h): {token}");
    println!("dashboard: http://{addr}/ui#token={token}");
    println!("try: export PAROS_URL=http://{addr}; eval \"$(paros signup acme | grep ^export)\"; paros journal create orders && paros write orders hello");
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
    let served = paros_gateway::serve_until(listener, gateway, signal);
    tokio::select! {
        result = served => result.map_err(|e| DevError::Listen(addr, e))?,
        () = async { stopping.notified().await; tokio::time::sleep(SHUTDOWN_GRACE).await } => {}
    }
    eprintln!("paros dev: stopping");
    drop(cell.stop());
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
