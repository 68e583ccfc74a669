//! The gateway's shared state: the cell, the registry, the directory, keys, quotas, metrics.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use paros_api::JournalName;
use paros_client::{AnswerError, Client, Decided, JournalService, ReadAnswer, ReadDeadline, ReadParams};
use paros_core::journal::JournalView;
use paros_core::{Call, Consistency, JournalKey, Seq, TenantId};
use paros_registry::daemon::{CoordinatorHandle, Followed};
use paros_registry::{Answer, Command, Directory, KeyScope, Op, Refusal, Request, RequestId, Verdict};
use tokio::sync::watch;

use crate::auth::{KeyPair, TokenCache, random_bytes};
use crate::cell::{CellPort, ClientPort};
use crate::config::GatewayConfig;
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::nodes::NodeStats;
use crate::quota::QuotaBook;

/// The private halves of the cell's signing keys: `active` signs new tokens; `others` (keys
/// being rotated in or out) are registered too, so tokens they signed keep verifying.
#[derive(Clone, Debug)]
pub struct SigningKeys {
    pub active: KeyPair,
    pub others: Vec<KeyPair>,
}

impl SigningKeys {
    #[must_use]
    pub fn new(active: KeyPair) -> SigningKeys {
        SigningKeys { active, others: Vec::new() }
    }
}

/// Why the gateway did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the registry refused signing key {kid}: {refusal:?}")]
    KeyRefused { kid: String, refusal: Refusal },
    #[error("the registry could not record signing key {kid}: {answer}")]
    KeyUndecided { kid: String, answer: String },
    #[error("signing key {0} did not show in the directory in time")]
    KeyNotFolded(String),
    #[error("the registry coordinator is gone")]
    CoordinatorGone,
    #[error("signing key {0} is retired: a retired key never signs again (rotate to a new key)")]
    ActiveKeyRetired(String),
}

/// How the registry holds a signing key the gateway started with.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Held {
    Live,
    Retired,
}

/// Why a signing key was not retired.
#[derive(Debug, thiserror::Error)]
pub enum RetireError {
    #[error("signing key {0} is the key this gateway signs with: rotate to another key first")]
    Active(String),
    #[error("the registry holds no signing key {0}")]
    Unknown(String),
    #[error("the registry did not retire key {kid}: {error:?}")]
    Registry { kid: String, error: ApiError },
}

pub(crate) struct Inner {
    pub(crate) cell: Box<dyn CellPort>,
    pub(crate) coordinator: CoordinatorHandle,
    pub(crate) directory: watch::Receiver<Followed>,
    pub(crate) config: GatewayConfig,
    pub(crate) keys: SigningKeys,
    pub(crate) quotas: QuotaBook,
    pub(crate) tokens: TokenCache,
    pub(crate) metrics: Metrics,
    pub(crate) tails: Mutex<HashMap<TenantId, Arc<AtomicUsize>>>,
    pub(crate) sessions: Mutex<HashMap<TenantId, Arc<AtomicUsize>>>,
    /// Refused bodies being drained ([`crate::wire`]), at most `body_drains_max`.
    pub(crate) drains: Arc<tokio::sync::Semaphore>,
    /// Stops and starts machines by hand, where the cell allows it ([`Gateway::control_machines`]).
    pub(crate) control: std::sync::OnceLock<Arc<dyn crate::nodes::MachineControl>>,
}

/// A running gateway's state; cheap to clone. Build one with [`Gateway::start`], serve
/// [`Gateway::router`].
#[derive(Clone)]
pub struct Gateway {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").field("config", &self.inner.config).finish_non_exhaustive()
    }
}

/// An open tail's (or session's) claim on its tenant's budget; released when dropped.
#[derive(Debug)]
pub(crate) struct TailSlot(Arc<AtomicUsize>);

impl Drop for TailSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One more of `tenant`'s streams counted in `book`, unless it holds `max` already.
fn claim_slot(
    book: &Mutex<HashMap<TenantId, Arc<AtomicUsize>>>,
    tenant: TenantId,
    max: usize,
    what: &str,
) -> Result<TailSlot, ApiError> {
    let counter = {
        let mut book = book.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(book.entry(tenant).or_default())
    };
    let claimed = counter.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < max).then_some(n + 1));
    match claimed {
        Ok(_) => Ok(TailSlot(counter)),
        Err(_) => Err(ApiError::over_quota(format!("at most {max} {what} per tenant"), Duration::from_secs(1))),
    }
}

/// Hands each directory the gateway folds to its move clock (`Metrics::time_moves`), until
/// the gateway or the directory's sender is gone.
async fn time_moves(gateway: std::sync::Weak<Inner>, mut directory: watch::Receiver<Followed>) {
    loop {
        let folded = directory.borrow_and_update().directory.clone();
        let Some(inner) = gateway.upgrade() else { return };
        if let Some(d) = folded {
            inner.metrics.time_moves(&d);
        }
        drop(inner);
        if directory.changed().await.is_err() {
            return;
        }
    }
}

/// A fresh random u64 that is not zero.
pub(crate) fn random_id() -> u64 {
    u64::from_le_bytes(random_bytes::<8>()) | 1
}

impl Gateway {
    /// Starts a gateway over `client` (the cell), `coordinator` (registry requests) and
    /// `directory` (the registry as folded): records every signing key's public half in the
    /// registry (`AddSigningKey`, scope `Cell`) unless the directory already has it, and waits
    /// until the directory shows them. It shows no node counters; see
    /// [`start_with_nodes`](Self::start_with_nodes).
    ///
    /// # Errors
    /// [`StartError`] when a key cannot be recorded.
    pub async fn start<S>(
        client: Client<S>,
        coordinator: CoordinatorHandle,
        directory: watch::Receiver<Followed>,
        config: GatewayConfig,
        keys: SigningKeys,
    ) -> Result<Gateway, StartError>
    where
        S: JournalService<Journal = JournalKey> + 'static,
    {
        Gateway::start_with_nodes(client, coordinator, directory, config, keys, None).await
    }

    /// As [`start`](Self::start); `nodes` is the port through which `/metrics` and the
    /// dashboard learn the cell's node counters.
    ///
    /// # Errors
    /// [`StartError`] when a key cannot be recorded.
    pub async fn start_with_nodes<S>(
        client: Client<S>,
        coordinator: CoordinatorHandle,
        directory: watch::Receiver<Followed>,
        config: GatewayConfig,
        keys: SigningKeys,
        nodes: Option<Arc<dyn NodeStats>>,
    ) -> Result<Gateway, StartError>
    where
        S: JournalService<Journal = JournalKey> + 'static,
    {
        let gateway = Gateway {
            inner: Arc::new(Inner {
                cell: Box::new(ClientPort { client }),
                coordinator,
                directory,
                config,
                keys,
                quotas: QuotaBook::default(),
                tokens: TokenCache::new(config.token_cache_max),
                metrics: Metrics::new(nodes),
                tails: Mutex::new(HashMap::new()),
                sessions: Mutex::new(HashMap::new()),
                drains: Arc::new(tokio::sync::Semaphore::new(config.body_drains_max)),
                control: std::sync::OnceLock::new(),
            }),
        };
        tokio::spawn(time_moves(Arc::downgrade(&gateway.inner), gateway.inner.directory.clone()));
        let active = gateway.inner.keys.active.clone();
        if gateway.register_key(&active).await? == Held::Retired {
            return Err(StartError::ActiveKeyRetired(active.kid().to_string()));
        }
        // A retired key among the others is skipped: it still verifies nothing.
        for key in gateway.inner.keys.others.clone() {
            gateway.register_key(&key).await?;
        }
        Ok(gateway)
    }

    /// Lets an admin stop and start machines by hand through `control`
    /// (`POST /v1/admin/machines/{node}/stop|start`). Set once; a later call is ignored.
    pub fn control_machines(&self, control: Arc<dyn crate::nodes::MachineControl>) {
        let _ = self.inner.control.set(control);
    }

    /// Retires signing key `kid` in the registry: from the moment the directory shows it, every
    /// gateway refuses the tokens it signed (401), and it never signs again. Returns once this
    /// gateway's directory shows the retirement. Retiring a retired key again is `Ok`.
    ///
    /// # Errors
    /// [`RetireError`]: the key this gateway signs with, a key the registry does not hold, or
    /// a registry that did not decide.
    pub async fn retire_key(&self, kid: &paros_registry::KeyId) -> Result<(), RetireError> {
        if kid == self.inner.keys.active.kid() {
            return Err(RetireError::Active(kid.to_string()));
        }
        let registry = |error: ApiError| RetireError::Registry { kid: kid.to_string(), error };
        match self.registry(Op::Command(Command::RetireSigningKey { kid: kid.clone() })).await.map_err(registry)? {
            Verdict::Accepted(_) => {}
            Verdict::Refused(Refusal::UnknownKey { .. }) => return Err(RetireError::Unknown(kid.to_string())),
            Verdict::Refused(r) => return Err(registry(ApiError::unavailable(format!("the registry refused: {r:?}")))),
        }
        let wait = self.inner.config.registry_wait;
        self.wait_directory(wait, |d| d.signing_key(kid).is_some_and(|k| k.retired)).await.map(drop).map_err(registry)
    }

    /// Registers `key` unless the directory already holds it; says whether the registry holds
    /// it live or retired. A retired key is never registered again (the registry keeps its id
    /// forever).
    async fn register_key(&self, key: &KeyPair) -> Result<Held, StartError> {
        let kid = key.kid().clone();
        let public = key.public_key();
        // What the directory holds under `kid`: retired (whatever its public key), this key
        // live, or nothing usable.
        let held = |d: &Directory| match d.signing_key(&kid) {
            Some(k) if k.retired => Some(Held::Retired),
            Some(k) if k.public_key[..] == public[..] => Some(Held::Live),
            _ => None,
        };
        if let Some(found) = self.inner.directory.borrow().directory.as_deref().and_then(held) {
            return Ok(found);
        }
        let known = |d: &Directory| held(d) == Some(Held::Live);
        let folded_in_time = self.inner.config.registry_wait.max(Duration::from_secs(1));
        let command = Command::AddSigningKey {
            scope: KeyScope::Cell,
            kid: kid.clone(),
            public_key: Bytes::copy_from_slice(&public),
        };
        match self
            .inner
            .coordinator
            .request(Request { id: RequestId(u128::from_le_bytes(random_bytes::<16>())), op: Op::Command(command) })
            .await
        {
            Ok(Answer::Verdict(Verdict::Accepted(_))) => {}
            Ok(Answer::Verdict(Verdict::Refused(Refusal::KeyIdTaken { .. }))) => {
                // Registered by an earlier start, in a directory this one has not folded yet
                // (a restart over a large registry): what the registry holds decides.
                let folded = self
                    .wait_directory(folded_in_time, |d| d.signing_key(&kid).is_some())
                    .await
                    .map_err(|_| StartError::KeyNotFolded(kid.to_string()))?;
                return held(&folded).ok_or_else(|| StartError::KeyRefused {
                    kid: kid.to_string(),
                    refusal: Refusal::KeyIdTaken { kid: kid.clone() },
                });
            }
            Ok(Answer::Verdict(Verdict::Refused(refusal))) => {
                return Err(StartError::KeyRefused { kid: kid.to_string(), refusal });
            }
            Ok(other) => return Err(StartError::KeyUndecided { kid: kid.to_string(), answer: format!("{other:?}") }),
            Err(_) => return Err(StartError::CoordinatorGone),
        }
        self.wait_directory(folded_in_time, known)
            .await
            .map(|_| Held::Live)
            .map_err(|_| StartError::KeyNotFolded(kid.to_string()))
    }

    /// The gateway's configuration.
    #[must_use]
    pub fn config(&self) -> &GatewayConfig {
        &self.inner.config
    }

    /// The key new tokens are signed with (to mint an admin token: [`crate::mint_admin_token`]).
    #[must_use]
    pub fn active_key(&self) -> &KeyPair {
        &self.inner.keys.active
    }

    /// The directory as folded now.
    pub(crate) fn directory(&self) -> Result<Arc<Directory>, ApiError> {
        self.inner
            .directory
            .borrow()
            .directory
            .clone()
            .ok_or_else(|| ApiError::unavailable("the registry is not folded yet"))
    }

    /// Waits up to `timeout` for the directory to satisfy `ready`.
    pub(crate) async fn wait_directory(
        &self,
        timeout: Duration,
        ready: impl Fn(&Directory) -> bool,
    ) -> Result<Arc<Directory>, ApiError> {
        let mut rx = self.inner.directory.clone();
        let ok = |f: &Followed| f.directory.as_deref().is_some_and(&ready);
        let found = tokio::time::timeout(timeout, rx.wait_for(ok)).await;
        match found {
            Ok(Ok(f)) => Ok(f.directory.clone().expect("checked present")),
            _ => Err(ApiError::unavailable("the registry change did not show in time; retry")),
        }
    }

    /// Sends one registry command under a fresh request id.
    pub(crate) async fn registry(&self, op: Op) -> Result<Verdict, ApiError> {
        let request = Request { id: RequestId(u128::from_le_bytes(random_bytes::<16>())), op };
        match self.inner.coordinator.request(request).await {
            Ok(Answer::Verdict(v)) => Ok(v),
            Ok(Answer::Forgotten) => Err(ApiError::ambiguous()),
            Ok(other) => Err(ApiError::unavailable(format!("the registry could not take the request now: {other:?}"))),
            Err(_) => Err(ApiError::unavailable("the registry coordinator is gone")),
        }
    }

    /// Claims a tail slot for `tenant`.
    pub(crate) fn open_tail(&self, tenant: TenantId) -> Result<TailSlot, ApiError> {
        claim_slot(&self.inner.tails, tenant, self.inner.config.tails_per_tenant_max, "open tails")
    }

    /// An append session's claim on its tenant's session budget (429 beyond it).
    pub(crate) fn open_session(&self, tenant: TenantId) -> Result<TailSlot, ApiError> {
        claim_slot(&self.inner.sessions, tenant, self.inner.config.sessions_per_tenant_max, "open sessions")
    }

    /// One call on the journal `name` of `tenant` (its key `key`), through the cell port: a
    /// final `UnknownJournal` is 404 when the journal is gone meanwhile, 503 when it is listed
    /// but still hosted nowhere.
    pub(crate) async fn call(
        &self,
        tenant: TenantId,
        name: &JournalName,
        key: JournalKey,
        call: Call,
    ) -> Result<Result<Decided, AnswerError>, ApiError> {
        let listed = || self.directory().is_ok_and(|d| d.journal_by_name(tenant, name).is_some_and(|j| j.key == key));
        let decided = self.inner.cell.call(key, call).await;
        if matches!(decided, Ok(Decided::UnknownJournal)) {
            return Err(if listed() {
                ApiError::unavailable("the journal is not placed yet; retry")
            } else {
                ApiError::unknown_journal()
            });
        }
        Ok(decided)
    }

    /// One Read of the contract: `params` within their `wait_ms`; with `reach`, the read is served
    /// only once the journal's `next_seq` is at least `reach` (a linearizable read with
    /// `min_seq`: first the wait for that position, then the linearizable read, both within
    /// the same `wait_ms`).
    pub(crate) async fn read(&self, key: JournalKey, params: ReadParams, reach: Option<Seq>) -> Served {
        let started = tokio::time::Instant::now();
        let wait = Duration::from_millis(u64::from(params.wait_ms));
        let config = &self.inner.config;
        let deadline = |c| ReadDeadline::new(wait, c, config.read_reach_min, config.read_serve_max);
        if let Some(reach) = reach {
            // From 0, one record: never at the tail of a journal that reached `reach` ≥ 1, so
            // no server holds it for a long-poll.
            let reached = ReadParams {
                from: Seq(0),
                limit: 1,
                max_bytes: 1,
                wait_ms: params.wait_ms,
                consistency: Consistency::Reached(reach),
            };
            match self.inner.cell.read(key, reached, deadline(reached.consistency)).await {
                (ReadAnswer::Page { .. } | ReadAnswer::Truncated { .. }, _) => {}
                (answer, by) => return Served { answer, by },
            }
        }
        // What is left of the same wait.
        let (answer, by) =
            self.inner.cell.read(key, params, deadline(params.consistency).after(started.elapsed())).await;
        Served { answer, by }
    }

    /// The journal's view now (a linearizable read of at most one record).
    pub(crate) async fn view(&self, key: JournalKey) -> Result<JournalView, ApiError> {
        let params = ReadParams {
            from: paros_core::Seq(0),
            limit: 1,
            max_bytes: 1,
            wait_ms: 0,
            consistency: Consistency::Linearizable,
        };
        match self.read(key, params, None).await.answer {
            ReadAnswer::Page { view, .. } | ReadAnswer::Truncated { view } => Ok(view),
            ReadAnswer::Unserved { .. } | ReadAnswer::Denied(_) => {
                Err(ApiError::unavailable("no server could answer now; retry"))
            }
            ReadAnswer::UnknownJournal => Err(ApiError::unavailable("the journal is not placed yet; retry")),
        }
    }
}

/// A read's answer and the server whose answer it is (see [`crate::cell::CellPort::read`]).
#[derive(Debug)]
pub(crate) struct Served {
    pub(crate) answer: ReadAnswer,
    pub(crate) by: Option<paros_core::NodeId>,
}
