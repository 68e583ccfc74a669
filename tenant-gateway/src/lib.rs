//! paros-gateway: the tenant gateway — API v1 (`docs/http-api.md`) over HTTP, on axum.
//!
//! The gateway is the only door for tenants. It authenticates every request
//! (EdDSA JWTs, [`auth`]), applies the tenant's quotas ([`quota`]), resolves journal names
//! inside the token's tenant through its fold of the registry (a `watch` of
//! [`paros_registry::daemon::Followed`]), forwards the four calls with a
//! [`paros_client::Client`] (which follows redirects and settles ambiguity), and answers with
//! `paros-api`'s bodies and its one error table ([`error::ApiError`]).
//!
//! Running one:
//! ```ignore
//! let keys = SigningKeys::new(KeyPair::load(path)?);
//! let gateway = Gateway::start(client, coordinator, directory, GatewayConfig::default(), keys).await?;
//! axum::serve(listener, gateway.router()).await?;
//! ```

mod access;
pub mod auth;
mod cell;
pub mod coalesce;
pub mod config;
pub mod error;
pub mod exposition;
mod fleet;
mod layers;
pub mod metrics;
pub mod nodes;
pub mod openapi;
mod overview;
pub mod quota;
mod router;
mod routes;
mod state;
pub mod threads;
pub mod tls;
mod wire;

pub use auth::{KeyError, KeyPair, Principal, mint_admin_token};
pub use cell::CellPort;
pub use config::GatewayConfig;
pub use error::{ApiError, OperatorCode, OperatorErrorBody};
pub use nodes::{
    ControlError, LAG_BUCKETS, LAG_TOP_MAX, LagHistogram, LaggingJournal, MachineControl, NodeCounters, NodeStats,
    ReplicaCounters, ReplicaStateName, StoreCounters,
};
pub use overview::OverviewQuery;
pub use router::router;
pub use routes::machines::{MachineStateBody, ReadyBody};
pub use routes::seats::{
    AdmitRequest, CellMachineBody, CellStatusBody, MoveRequest, RoleName, SeatMoveBody, WeakJournalBody, WeakVoterBody,
};
pub use state::{Gateway, RetireError, SigningKeys, StartError};

/// Writes a fresh signing key file to `path` (never overwriting one) and returns the key.
///
/// # Errors
/// [`KeyError`] when the file exists or cannot be written.
pub fn generate_key_file(path: &std::path::Path, kid: &str) -> Result<KeyPair, KeyError> {
    let kid = paros_registry::KeyId::new(kid).map_err(|e| KeyError::Format(e.to_string()))?;
    let key = KeyPair::generate(kid);
    key.write_key_file(path)?;
    Ok(key)
}

/// Serves `gateway` on `listener` until the future is dropped or the listener fails.
///
/// # Errors
/// The listener's IO error.
pub async fn serve(listener: tokio::net::TcpListener, gateway: Gateway) -> std::io::Result<()> {
    let listener = Accepted { listener, coalesce_max: gateway.config().response_coalesce_bytes };
    axum::serve(listener, gateway.router()).await
}

/// The gateway's listener: every connection it accepts has `TCP_NODELAY` (answers leave at once,
/// a small response or an SSE event never held back by Nagle's algorithm waiting for the peer's
/// delayed ACK) and writes the answers ready together at once ([`coalesce`]).
struct Accepted {
    listener: tokio::net::TcpListener,
    coalesce_max: usize,
}

impl axum::serve::Listener for Accepted {
    type Io = coalesce::Coalesced<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (stream, addr) = axum::serve::Listener::accept(&mut self.listener).await;
        // Best effort: a socket that refuses the option still serves, only later.
        let _ = stream.set_nodelay(true);
        (coalesce::Coalesced::new(stream, self.coalesce_max), addr)
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// Serves `gateway` on `listener` until `shutdown` completes, then stops taking connections
/// and lets the requests in progress finish (open tails end with the process).
///
/// # Errors
/// The listener's IO error.
pub async fn serve_until(
    listener: tokio::net::TcpListener,
    gateway: Gateway,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = Accepted { listener, coalesce_max: gateway.config().response_coalesce_bytes };
    axum::serve(listener, gateway.router()).with_graceful_shutdown(shutdown).await
}

/// Serves `gateway` over TLS on `listener` until `shutdown` completes, as [`serve_until`] does
/// in the clear: `tls` (see [`tls::server_config`]) offers HTTP/2 and HTTP/1.1 by ALPN, and
/// handshakes run beside one another within the configuration's bounds
/// ([`GatewayConfig::tls_handshakes_max`], [`GatewayConfig::tls_handshake_timeout`]).
///
/// # Errors
/// The listener's IO error.
pub async fn serve_tls_until(
    listener: tokio::net::TcpListener,
    gateway: Gateway,
    tls: std::sync::Arc<rustls::ServerConfig>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = tls::TlsAccepted::new(listener, tls, gateway.config());
    axum::serve(listener, gateway.router()).with_graceful_shutdown(shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_round_trips_and_is_never_overwritten() {
        let dir = std::env::temp_dir().join(format!("paros-gw-key-{}", u64::from_le_bytes(auth::random_bytes::<8>())));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("key.json");
        let key = generate_key_file(&path, "k-2024.1").unwrap();
        let back = KeyPair::load(&path).unwrap();
        assert_eq!((back.kid(), back.public_key()), (key.kid(), key.public_key()));
        assert!(generate_key_file(&path, "k2").is_err(), "an existing key file is kept");
        assert!(KeyPair::from_json(br#"{"kid":"k","private_key":"AAAA"}"#).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
