//! The async [`Client`]: carries a [`CallPolicy`]'s and a [`ReadPolicy`]'s steps out over a
//! [`JournalService`] and sleeps the delays the policy returns. Every decision is the policy's
//! (`crate::policy`).
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use paros_core::rng::Rng;
use paros_core::{Call, NodeId};
use tokio::time::{Instant, sleep, timeout_at};

use crate::policy::{
    AnswerError, CallPolicy, ClientConfig, ClientConfigError, Decided, ReadDeadline, ReadPolicy, ReadStep, Step,
};
use crate::service::{JournalService, ReadAnswer, ReadParams};

/// The async client: carries a [`CallPolicy`]'s and a [`ReadPolicy`]'s steps out over a
/// [`JournalService`], sleeping the delays they return. Cheap to clone (the service is
/// shared), so a [`Writer`](crate::Writer) can keep several calls in flight.
pub struct Client<S: JournalService> {
    inner: Arc<Inner<S>>,
}

struct Inner<S: JournalService> {
    service: S,
    config: ClientConfig,
    /// Seeds each call's own jitter generator: one draw per call, so calls stay independent.
    rng: Mutex<Rng>,
    /// Per journal, the server whose verdict came back last: the likely leader, asked first
    /// next time by a call. A call on a journal without a hint asks a drawn server; a read
    /// asks the last verdict's server first (`preferred_server`).
    hints: Mutex<LeaderHints<S::Journal>>,
}

/// A bounded map journal → likely leader, forgetting in insertion order.
struct LeaderHints<J> {
    max: usize,
    by_journal: HashMap<J, (NodeId, Instant)>,
    order: VecDeque<J>,
    last: Option<NodeId>,
}

impl<J: Clone + Eq + Hash> LeaderHints<J> {
    fn new(max: usize) -> LeaderHints<J> {
        LeaderHints { max, by_journal: HashMap::new(), order: VecDeque::new(), last: None }
    }

    fn get(&self, journal: &J) -> Option<NodeId> {
        self.own(journal).or(self.last)
    }

    fn own(&self, journal: &J) -> Option<NodeId> {
        self.by_journal.get(journal).map(|(node, _)| *node)
    }

    fn put(&mut self, journal: &J, server: NodeId) {
        self.last = Some(server);
        if self.max == 0 {
            return;
        }
        if let Some(known) = self.by_journal.get_mut(journal) {
            *known = (server, Instant::now());
            return;
        }
        while self.by_journal.len() >= self.max {
            let Some(oldest) = self.order.pop_front() else { break };
            self.by_journal.remove(&oldest);
        }
        self.by_journal.insert(journal.clone(), (server, Instant::now()));
        self.order.push_back(journal.clone());
    }
}

impl<S: JournalService> Clone for Client<S> {
    fn clone(&self) -> Self {
        Client { inner: Arc::clone(&self.inner) }
    }
}

impl<S: JournalService> fmt::Debug for Client<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("config", &self.inner.config).finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<S: JournalService> Client<S> {
    /// A client over `service`; its backoff jitter is seeded from the OS's random generator.
    ///
    /// # Errors
    /// [`ClientConfigError`] when `config` is invalid.
    ///
    /// # Panics
    /// When the OS has no random generator.
    pub fn new(service: S, config: ClientConfig) -> Result<Client<S>, ClientConfigError> {
        Client::with_seed(service, config, crate::entropy::os_u64())
    }

    /// For simulations and tests: a client whose backoff jitter (and every draw made from it,
    /// see [`draw`](Self::draw)) follows `seed`, so a run can be replayed.
    ///
    /// # Errors
    /// [`ClientConfigError`] when `config` is invalid.
    pub fn with_seed(service: S, config: ClientConfig, seed: u64) -> Result<Client<S>, ClientConfigError> {
        config.validate()?;
        Ok(Client {
            inner: Arc::new(Inner {
                service,
                config,
                rng: Mutex::new(Rng::new(seed)),
                hints: Mutex::new(LeaderHints::new(config.leader_hints_max)),
            }),
        })
    }

    /// A [`Writer`](crate::Writer) of `journal` over this client, to configure and claim:
    /// `client.writer(journal).claim().await?`.
    pub fn writer(&self, journal: S::Journal) -> crate::WriterBuilder<S>
    where
        S: 'static,
    {
        crate::Writer::builder(self.clone(), journal)
    }

    /// A [`Reader`](crate::Reader) of `journal` over this client, from position 0 unless the
    /// builder says otherwise: `client.reader(journal).build()?`.
    pub fn reader(&self, journal: S::Journal) -> crate::ReaderBuilder<S> {
        crate::Reader::builder(self.clone(), journal)
    }

    /// The service this client talks through.
    pub fn service(&self) -> &S {
        &self.inner.service
    }

    /// The client's bounds.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// The server whose verdict on `journal` came back last (its likely leader), else the
    /// server of the last verdict on any journal: where a read that must see that verdict is
    /// cheapest to serve.
    pub fn preferred_server(&self, journal: &S::Journal) -> Option<NodeId> {
        lock(&self.inner.hints).get(journal)
    }

    /// The server whose verdict on `journal` came back last and how long ago, if this client
    /// remembers one: that server led the journal then (only a leader answers a verdict), and
    /// may have been superseded since. No guess for a journal it does not remember.
    pub fn leader_hint(&self, journal: &S::Journal) -> Option<(NodeId, Duration)> {
        lock(&self.inner.hints).by_journal.get(journal).map(|(node, at)| (*node, at.elapsed()))
    }

    /// A fresh draw from the client's generator (for seeding a caller's own generator).
    pub fn draw(&self) -> u64 {
        lock(&self.inner.rng).next_u64()
    }

    /// Sends `call` and retries, follows redirects and settles ambiguity by the [`CallPolicy`]
    /// rules until it is decided or a bound runs out.
    ///
    /// # Errors
    /// [`AnswerError`] when an answer cannot be an answer to `call`.
    pub async fn call(&self, journal: &S::Journal, call: Call) -> Result<Decided, AnswerError> {
        let started = Instant::now();
        // Only this journal's own hint: a journal this client never heard from goes to a drawn
        // server, not to the last verdict's. Where the first call elects (a journal woken from
        // dormancy campaigns on the server asked), that spreads leadership over the cell
        // instead of piling every journal's leader on one machine.
        let hint = lock(&self.inner.hints).own(journal);
        let rng = Rng::new(self.draw());
        let mut policy = match CallPolicy::new(call, self.inner.service.servers(), hint, self.inner.config, rng) {
            Ok(policy) => policy,
            // The config was validated by `new`; a policy cannot refuse it.
            Err(_) => return Ok(Decided::Unavailable),
        };
        let mut step = policy.start();
        loop {
            step = match step {
                Step::Send { route, after } => {
                    if !after.is_zero() {
                        sleep(after).await;
                    }
                    let reply = self.inner.service.call(journal, policy.id(), policy.call(), route).await;
                    policy.on_reply(reply, started.elapsed())
                }
                Step::Read { params, route, after } => {
                    if !after.is_zero() {
                        sleep(after).await;
                    }
                    let answer = self.inner.service.read(journal, params, route).await;
                    policy.on_read(answer, started.elapsed())
                }
                Step::Done(result) => {
                    if let Some(server) = policy.answered_by() {
                        lock(&self.inner.hints).put(journal, server);
                    }
                    return result;
                }
            };
        }
    }

    /// Reads one page of `journal` by the [`ReadPolicy`] rules, within `deadline` counted from
    /// now: the first answer that serves it (a page, `Truncated`, a denial), an empty page at
    /// the tail once `deadline.wait_until` passed, else `Unserved` (or `UnknownJournal` while
    /// no server hosts the journal) once the deadline or the client's bounds end it. The first
    /// try goes to [`preferred_server`](Self::preferred_server); each try asks for what is left
    /// of `deadline.wait_until` (`params.wait_ms` is not used) and is cut off at the policy's
    /// bound.
    pub async fn read(&self, journal: &S::Journal, params: ReadParams, deadline: ReadDeadline) -> ReadAnswer {
        self.read_served(journal, params, deadline).await.0
    }

    /// [`read`](Self::read), and the server whose answer it is (when the service names
    /// servers): a replica, or a voter when no replica served it. A ranked service
    /// ([`ReadServers::Ranked`](crate::ReadServers::Ranked)) is asked in its order instead.
    pub async fn read_served(
        &self,
        journal: &S::Journal,
        params: ReadParams,
        deadline: ReadDeadline,
    ) -> (ReadAnswer, Option<NodeId>) {
        let started = Instant::now();
        let hint = self.preferred_server(journal);
        let rng = Rng::new(self.draw());
        let servers = self.inner.service.read_servers(journal);
        let mut policy = match ReadPolicy::over(params, deadline, servers, hint, self.inner.config, rng) {
            Ok(policy) => policy,
            // The config was validated by `new`; a policy cannot refuse it.
            Err(_) => return (ReadAnswer::Unserved { applied_to: None }, None),
        };
        let mut step = policy.start();
        loop {
            step = match step {
                ReadStep::Send { params, route, after, cut_off } => {
                    if !after.is_zero() {
                        sleep(after).await;
                    }
                    let trip = self.inner.service.read(journal, params, route);
                    let answer = match started.checked_add(cut_off) {
                        Some(at) => timeout_at(at, trip).await.ok(),
                        None => Some(trip.await),
                    };
                    match answer {
                        Some(answer) => policy.on_answer(answer, started.elapsed()),
                        None => policy.on_cut_off(),
                    }
                }
                ReadStep::Done(answer) => return (answer, policy.served_by()),
            };
        }
    }
}

#[cfg(feature = "http")]
impl Client<crate::http::HttpService> {
    /// The client of the paros gateway at `url` (`http://host:port`), speaking as `token`,
    /// with the default bounds: the one call to start from when you hold a token. To sign up
    /// first, see [`GatewayClient::signup`](crate::GatewayClient::signup).
    ///
    /// # Errors
    /// [`GatewayError::Url`](crate::GatewayError::Url) for a URL that is not `http` or
    /// `https`; [`GatewayError::BadToken`](crate::GatewayError::BadToken) for a token that is
    /// not one.
    pub fn connect(url: &str, token: &str) -> Result<Self, crate::GatewayError> {
        let token = paros_api::Token::parse(token.trim()).map_err(|_| crate::GatewayError::BadToken)?;
        Ok(crate::GatewayClient::new(url, Some(&token), crate::HttpConfig::default())?.client())
    }

    /// The gateway this client talks to, for the calls that are not journal calls (journals,
    /// tokens, the SSE tail).
    #[must_use]
    pub fn gateway(&self) -> &crate::GatewayClient {
        self.service().gateway()
    }
}
