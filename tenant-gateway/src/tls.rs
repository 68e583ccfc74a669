//! The gateway over TLS: a certificate chain and its key from PEM files, HTTP/2 and HTTP/1.1
//! offered by ALPN (`h2` first), and a listener whose handshakes run beside one another, so a
//! slow or silent client never holds up the next connection.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::GatewayConfig;
use crate::coalesce::Coalesced;

/// The protocols the gateway offers by ALPN, preferred first.
pub const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// Why the gateway cannot serve TLS with the files it was given.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The certificate file holds no PEM certificate, or one that does not parse.
    #[error("{path}: no certificate in PEM ({reason})")]
    Certificates { path: PathBuf, reason: String },
    /// The key file holds no PEM private key (PKCS#8, PKCS#1 or SEC1), or one that does not parse.
    #[error("{path}: no private key in PEM ({reason})")]
    Key { path: PathBuf, reason: String },
    /// rustls refused the pair (the key does not match the certificate, an unsupported key).
    #[error("the certificate and key cannot serve: {0}")]
    Config(#[from] rustls::Error),
}

/// A server configuration for the certificate chain in `cert` (the leaf first, then its
/// intermediates) and the private key in `key`, both PEM, offering [`ALPN`]. It runs on ring,
/// the one crypto provider of the workspace.
///
/// # Errors
/// [`TlsError`] when a file is missing, holds no certificate or key, or the two do not match.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let read = |path: &Path| std::fs::read(path).map_err(|source| TlsError::Read { path: path.to_owned(), source });
    let (cert_pem, key_pem) = (read(cert)?, read(key)?);
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Certificates { path: cert.to_owned(), reason: e.to_string() })?;
    if chain.is_empty() {
        return Err(TlsError::Certificates { path: cert.to_owned(), reason: "the file holds none".into() });
    }
    let key_der = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| TlsError::Key { path: key.to_owned(), reason: e.to_string() })?;
    let mut config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)?;
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// The gateway's TLS listener: each TCP connection it accepts (with `TCP_NODELAY`, as in the
/// clear) shakes hands in a task of its own, at most `handshakes_max` at once and each within
/// `handshake_timeout`; `accept` hands out the connections whose handshake completed. A
/// handshake that fails or times out drops its connection and nothing else.
pub(crate) struct TlsAccepted {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    coalesce_max: usize,
    handshakes_max: usize,
    handshake_timeout: Duration,
    handshakes: JoinSet<Option<(TlsStream<TcpStream>, SocketAddr)>>,
}

impl TlsAccepted {
    /// Serves `tls` on `listener` within `config`'s bounds (handshakes, their timeout, the
    /// answers coalesced).
    pub(crate) fn new(listener: TcpListener, tls: Arc<ServerConfig>, config: &GatewayConfig) -> TlsAccepted {
        TlsAccepted {
            listener,
            acceptor: TlsAcceptor::from(tls),
            coalesce_max: config.response_coalesce_bytes,
            handshakes_max: config.tls_handshakes_max,
            handshake_timeout: config.tls_handshake_timeout,
            handshakes: JoinSet::new(),
        }
    }
}

impl axum::serve::Listener for TlsAccepted {
    type Io = Coalesced<TlsStream<TcpStream>>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let room = self.handshakes.len() < self.handshakes_max.max(1);
            tokio::select! {
                Some(done) = self.handshakes.join_next(), if !self.handshakes.is_empty() => {
                    if let Ok(Some((stream, addr))) = done {
                        return (Coalesced::new(stream, self.coalesce_max), addr);
                    }
                }
                (stream, addr) = axum::serve::Listener::accept(&mut self.listener), if room => {
                    // Best effort: a socket that refuses the option still serves, only later.
                    let _ = stream.set_nodelay(true);
                    let (acceptor, timeout) = (self.acceptor.clone(), self.handshake_timeout);
                    self.handshakes.spawn(async move {
                        let shaken = tokio::time::timeout(timeout, acceptor.accept(stream)).await;
                        shaken.ok()?.ok().map(|s| (s, addr))
                    });
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::serve::Listener as _;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls").join(name)
    }

    /// A listener on a free port with the test certificate: at most `max` handshakes at once,
    /// each within `timeout`. Every connection it hands out is answered `ok` and closed.
    async fn serving(max: usize, timeout: Duration) -> SocketAddr {
        let config = server_config(&fixture("server.pem"), &fixture("server.key")).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let bounds = GatewayConfig {
            response_coalesce_bytes: 0,
            tls_handshakes_max: max,
            tls_handshake_timeout: timeout,
            ..GatewayConfig::default()
        };
        let mut accepted = TlsAccepted::new(listener, config, &bounds);
        tokio::spawn(async move {
            loop {
                let (mut io, _) = accepted.accept().await;
                tokio::spawn(async move {
                    let _ = io.write_all(b"ok").await;
                    let _ = io.shutdown().await;
                });
            }
        });
        addr
    }

    /// Shakes hands with `addr` trusting the test authority and reads its answer.
    async fn talk(addr: SocketAddr) -> (Vec<u8>, Option<Vec<u8>>) {
        let mut roots = rustls::RootCertStore::empty();
        let ca = std::fs::read(fixture("ca.pem")).unwrap();
        roots.add(CertificateDer::from_pem_slice(&ca).unwrap()).unwrap();
        let mut config =
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut tls = connector.connect(name, tcp).await.expect("the handshake completes");
        let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        let mut answer = vec![];
        tls.read_to_end(&mut answer).await.unwrap();
        (answer, alpn)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_silent_client_holds_up_no_other_handshake_while_there_is_room() {
        let addr = serving(2, Duration::from_secs(30)).await;
        let _silent = TcpStream::connect(addr).await.unwrap();
        let talked = tokio::time::timeout(Duration::from_secs(10), talk(addr)).await;
        assert_eq!(talked.expect("served beside the silent one"), (b"ok".to_vec(), Some(b"h2".to_vec())));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn handshakes_are_bounded_and_a_silent_one_gives_its_room_back_at_the_timeout() {
        let timeout = Duration::from_millis(700);
        let addr = serving(1, timeout).await;
        let _silent = TcpStream::connect(addr).await.unwrap();
        // Let the listener take the silent connection into its one handshake slot.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = std::time::Instant::now();
        let talked = tokio::time::timeout(Duration::from_secs(20), talk(addr)).await;
        assert_eq!(talked.expect("served once the silent one timed out").0, b"ok");
        let waited = started.elapsed();
        assert!(waited >= timeout - Duration::from_millis(150), "the one slot was taken: waited {waited:?}");
    }

    #[test]
    fn files_that_cannot_serve_are_typed_errors() {
        let (cert, key, ca) = (fixture("server.pem"), fixture("server.key"), fixture("ca.pem"));
        let missing = fixture("missing.pem");
        assert!(matches!(server_config(&missing, &key), Err(TlsError::Read { .. })));
        assert!(matches!(server_config(&key, &key), Err(TlsError::Certificates { .. })));
        assert!(matches!(server_config(&cert, &ca), Err(TlsError::Key { .. })));
        assert!(server_config(&cert, &key).is_ok());
    }
}
