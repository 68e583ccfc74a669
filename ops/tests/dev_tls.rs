//! `paros dev --tls-cert --tls-key`: the gateway over TLS, HTTP/2 and HTTP/1.1 offered by ALPN;
//! the CLI trusting a private authority with `PAROS_CA_FILE`; a bad certificate refused before
//! anything opens.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::{paros, start_with, stop};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tenant-gateway/tests/fixtures/tls").join(name)
}

/// The CLI against `url`, trusting the test authority when `trust` is set: exit code and stdout.
fn cli(url: &str, token: Option<&str>, trust: bool, args: &[&str]) -> (i32, String) {
    let mut cmd = paros();
    cmd.args(args).env("PAROS_URL", url).env_remove("PAROS_TOKEN").env_remove("PAROS_CA_FILE");
    if let Some(t) = token {
        cmd.env("PAROS_TOKEN", t);
    }
    if trust {
        cmd.env("PAROS_CA_FILE", fixture("ca.pem"));
    }
    let out = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).output().expect("the CLI runs");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `GET url/healthz` with a client trusting the test authority: the HTTP version it was
/// answered in, and the status.
async fn healthz(url: &str, http1_only: bool) -> (reqwest::Version, u16) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ca = reqwest::Certificate::from_pem(&std::fs::read(fixture("ca.pem")).unwrap()).unwrap();
    let mut builder = reqwest::Client::builder().tls_certs_only([ca]);
    if http1_only {
        builder = builder.http1_only();
    }
    let answer = builder.build().unwrap().get(format!("{url}/healthz")).send().await.expect("an answer over TLS");
    (answer.version(), answer.status().as_u16())
}

#[test]
fn paros_dev_serves_https_with_http2_and_http1_by_alpn_and_the_cli_trusts_a_private_authority() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (fixture("server.pem"), fixture("server.key"));
    let flags = ["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()];
    let (dev, url) = start_with(&dir.path().join("data"), &flags);
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");

    // A client that connects and never starts its handshake holds up no one else.
    let silent = std::net::TcpStream::connect(url.trim_start_matches("https://")).unwrap();
    // ALPN: a client offering both gets HTTP/2, one offering HTTP/1.1 only gets HTTP/1.1.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    assert_eq!(runtime.block_on(healthz(&url, false)), (reqwest::Version::HTTP_2, 200));
    assert_eq!(runtime.block_on(healthz(&url, true)), (reqwest::Version::HTTP_11, 200));
    drop(silent);

    // Nothing is served in the clear on the TLS port.
    let plain = url.replace("https://", "http://");
    let (code, _) = cli(&plain, None, false, &["signup", "plain"]);
    assert_ne!(code, 0, "a cleartext call to the TLS port is not served");

    // The CLI refuses a certificate it cannot verify, and talks once told to trust its issuer:
    // a tenant signs up, creates a journal, writes over an append session and reads back.
    let (code, _) = cli(&url, None, false, &["signup", "acme"]);
    assert_ne!(code, 0, "a certificate of an unknown authority is not trusted");
    let (code, out) = cli(&url, None, true, &["signup", "acme", "--json"]);
    assert_eq!(code, 0, "signup over TLS: {out}");
    let signup: serde_json::Value = serde_json::from_str(&out).unwrap();
    let token = signup["token"].as_str().unwrap();
    assert_eq!(cli(&url, Some(token), true, &["journal", "create", "orders"]).0, 0);
    assert_eq!(cli(&url, Some(token), true, &["write", "orders", "first", "second"]).0, 0);
    let (code, out) = cli(&url, Some(token), true, &["read", "orders", "--from", "0"]);
    assert_eq!((code, out.as_str()), (0, "0\tfirst\n1\tsecond\n"));

    // `paros bench --target https://… --ca-file`: the writers on sessions over TLS, every record
    // verified, and the gateway's CPU read from its `/metrics` over the same connection.
    let ca = fixture("ca.pem");
    let args = ["bench", "--target", &url, "--ca-file", ca.to_str().unwrap(), "--session", "--writers", "2"];
    let out = paros()
        .args(args)
        .args(["--journals", "2", "--duration-s", "1", "--json"])
        .stdin(Stdio::null())
        .output()
        .expect("paros bench runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let acked = report["acked_records"].as_u64().unwrap();
    assert!(acked > 0 && report["verified_records"].as_u64() == Some(acked), "{report}");
    assert_eq!(report["transport"], "http2+session", "{report}");
    assert!(report["target_cpu_split"]["runtime"].as_f64().unwrap() > 0.0, "{report}");
    stop(dev);
}

#[test]
fn paros_dev_refuses_a_certificate_it_cannot_serve_before_it_opens_anything() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let (cert, key, ca) = (fixture("server.pem"), fixture("server.key"), fixture("ca.pem"));
    let cases: [(&Path, &Path, &str); 3] = [
        (&dir.path().join("missing.pem"), &key, "reading"),
        (&garbage, &key, "no certificate"),
        // A certificate with no private key in the key file.
        (&cert, &ca, "no private key"),
    ];
    for (cert, key, says) in cases {
        let out = paros()
            .args(["dev", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data)
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .stdin(Stdio::null())
            .output()
            .expect("paros dev runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cert:?} {key:?}: {stderr}");
        assert!(stderr.contains(says), "{says:?} in {stderr}");
        assert!(!data.exists(), "nothing opened: the data directory was not created");
    }
    // One flag without the other is refused by the argument parser.
    let out = paros().args(["dev", "--tls-cert"]).arg(&cert).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
