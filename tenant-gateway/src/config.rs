//! The gateway's configuration: every bound it enforces, none of them a constant in the code.

use std::time::Duration;

use paros_registry::Quotas;

/// How the gateway behaves, independent of where it listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GatewayConfig {
    /// Whether `POST /v1/signup` is open to anyone (off: only an `admin` token may call it).
    pub open_signup: bool,
    /// The most bytes a request body may hold, as sent (413 beyond, before it is buffered).
    pub body_limit_bytes: u64,
    /// What is left of a body refused 413 is read and dropped, up to this many more bytes and
    /// for at most `body_drain_time_max`, so that a client still sending it reads the 413:
    /// over HTTP/2 a body dropped unread ends in a reset stream (`RST_STREAM NO_ERROR`, RFC
    /// 9113 §8.1), which some clients (curl 7.88, Python's h2) report as an error instead of
    /// the answer sent before it. 0: dropped unread.
    pub body_drain_bytes_max: u64,
    /// How long one refused body is drained at most (see `body_drain_bytes_max`).
    pub body_drain_time_max: Duration,
    /// The most refused bodies drained at once; past it a refused body is dropped unread.
    pub body_drains_max: usize,
    /// The most records one Write may carry (413 beyond).
    pub write_records_max: u32,
    /// The most decoded record bytes one Write may carry (413 beyond).
    pub write_bytes_max: u64,
    /// The most records one Read page holds (a larger `limit` is clamped). At most the cell's
    /// own page bound (`Tunables::page_records_max`): the contract says a page ends early only
    /// at the tail, at `limit` or at `max_bytes`, so a larger bound here would have the cell end
    /// pages early where a client may take a short page for the tail.
    pub read_records_max: u32,
    /// The most decoded record bytes one Read page holds (a larger `max_bytes` is clamped). At
    /// most the cell's own (`Tunables::page_bytes_max`), as above.
    pub read_bytes_max: u32,
    /// How long a minted token lives when `expires_in_s` is omitted (capped by its parent).
    pub token_expiry_default: Duration,
    /// How long the token signup answers with lives.
    pub signup_token_expiry: Duration,
    /// The quotas a new tenant gets at signup.
    pub quotas_default: Quotas,
    /// How often a tail sends a heartbeat when nothing else was sent (the contract: at most 5 s).
    pub heartbeat_interval: Duration,
    /// The most tails one tenant may hold open at once (429 beyond).
    pub tails_per_tenant_max: usize,
    /// The most append sessions one tenant may hold open at once (429 beyond).
    pub sessions_per_tenant_max: usize,
    /// The most lines one append session has read and not yet answered: it reads the next
    /// once the oldest is answered.
    pub session_in_flight_max: usize,
    /// The most consecutive lines of one append session that travel to the cell as one Write,
    /// when they are read together and fit one (same writer, consecutive positions, within
    /// `write_records_max` and `write_bytes_max`). Each is still answered as its own Write:
    /// docs/http-session.md. 1: every line is a Write of its own.
    pub session_lines_per_write_max: usize,
    /// How long an append session waits for its next line, with none in flight, before it
    /// ends (`idle`).
    pub session_idle_timeout: Duration,
    /// How long one line of an append session over the tenant's requests/s or bytes/s quota
    /// may wait for the quota to admit it, reading no further line meanwhile (the stream's
    /// backpressure); a line that would wait longer is answered 429 `over_quota`, which ends
    /// the session. Zero: every line over a quota is answered 429 at once.
    pub session_quota_wait_max: Duration,
    /// The most answer bytes a connection holds to send together with the answers other tasks
    /// have ready ([`crate::coalesce`]); past it they are sent at once. Between bursts a
    /// connection keeps room for a quarter of it at most. 0: every write goes straight to the
    /// socket.
    pub response_coalesce_bytes: usize,
    /// Over TLS: the most handshakes in progress at once; the listener accepts the next
    /// connection once one of them ends.
    pub tls_handshakes_max: usize,
    /// Over TLS: how long a connection may take to complete its handshake before it is dropped.
    pub tls_handshake_timeout: Duration,
    /// How long a registry change (signup, create, delete, revoke) may take to show in the
    /// directory the gateway resolves with before the request is answered 503.
    pub registry_wait: Duration,
    /// How long past its `wait_ms` a linearizable read may take to be served (a quorum round,
    /// another server after one that did not answer) before it is answered 503. The retries
    /// within it, and the wait for a journal no server hosts yet, are the client's
    /// (`paros_client::ClientConfig`: `read_attempts_max`, `placement_wait`).
    pub read_serve_max: Duration,
    /// The least time a read with `min_seq` is given to reach a server that has applied it
    /// (one trip), even with a shorter `wait_ms`; past `wait_ms` and this, it is answered 503.
    pub read_reach_min: Duration,
    /// Bearer tokens whose signature check is remembered (0: verify every request). A
    /// remembered token is still checked on every use for expiry, revocation, its key's
    /// retirement and its tenant.
    pub token_cache_max: usize,
    /// The most journals one page of `GET /v1/admin/overview` lists (a larger `limit` is
    /// clamped); each costs one view read per page.
    pub overview_journals_max: u32,
    /// The most tenants, and the most machines, one overview lists.
    pub overview_list_max: u32,
    /// The most entries each list of `GET /v1/admin/cell` holds (machines, seat moves in
    /// progress, journals below full strength); each list says its total.
    pub cell_list_max: u32,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            open_signup: true,
            body_limit_bytes: 2 << 20,
            body_drain_bytes_max: 16 << 20,
            body_drain_time_max: Duration::from_secs(10),
            body_drains_max: 64,
            write_records_max: 1024,
            write_bytes_max: 1 << 20,
            read_records_max: paros_core::Tunables::default().page_records_max,
            read_bytes_max: paros_core::Tunables::default().page_bytes_max,
            token_expiry_default: Duration::from_secs(24 * 3600),
            signup_token_expiry: Duration::from_secs(30 * 24 * 3600),
            quotas_default: Quotas::default(),
            heartbeat_interval: Duration::from_secs(5),
            tails_per_tenant_max: 64,
            sessions_per_tenant_max: 64,
            session_in_flight_max: 1024,
            session_lines_per_write_max: 256,
            session_idle_timeout: Duration::from_secs(30),
            session_quota_wait_max: Duration::from_secs(5),
            response_coalesce_bytes: 64 << 10,
            tls_handshakes_max: 256,
            tls_handshake_timeout: Duration::from_secs(10),
            registry_wait: Duration::from_secs(5),
            read_serve_max: Duration::from_secs(2),
            read_reach_min: Duration::from_millis(100),
            token_cache_max: 10_000,
            overview_journals_max: 50,
            overview_list_max: 100,
            cell_list_max: 200,
        }
    }
}

impl GatewayConfig {
    /// The three limits every `too_large` names.
    #[must_use]
    pub fn limits(&self) -> paros_api::Limits {
        paros_api::Limits {
            max_records: u64::from(self.write_records_max),
            max_bytes: self.write_bytes_max,
            max_body_bytes: self.body_limit_bytes,
        }
    }
}
