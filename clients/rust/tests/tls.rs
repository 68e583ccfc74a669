//! The client speaks TLS without a C crypto library: an `https` gateway client builds on the
//! ring provider the library installs (reqwest panics at build time when no provider is there).

use paros_client::http::{GatewayClient, HttpConfig};

#[test]
fn an_https_client_builds_on_ring() {
    let client = GatewayClient::new("https://gateway.example:7400", None, HttpConfig::default());
    assert!(client.is_ok(), "{client:?}");
    assert!(rustls::crypto::CryptoProvider::get_default().is_some(), "a provider is in force");
}
