//! The append session's client half: every Write of one journal travels as a line of one
//! streaming request (`POST /v1/journals/{name}/session`), sent without waiting; the answers come
//! back in the same order, and each is matched to the oldest write still waiting.
//!
//! What a write learns, line by line:
//! - an answer line: the Write route's own answer, judged as [`call_reply`](super::service) judges it;
//! - no answer, and the stream ended with its end line: the gateway never read the line, so it
//!   took no effect ([`LineReply::NotSent`]: the policy sends it again, on a new session);
//! - no answer, and the stream broke off: it may have been written ([`LineReply::NoAnswer`]);
//! - the gateway offers no session (its router answers the route `404`/`405` with no API body), or
//!   refused this one as a whole: [`LineReply::Unoffered`], and the write goes as a plain
//!   `POST …/records`. A journal whose session was refused is not asked again for
//!   [`SHUNNED_FOR`]; a gateway without the route is never asked again.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use paros_api::session::gather;
use paros_api::{ApiError, JournalName, SESSION_CONTENT_TYPE, WriteLine, WriteOutcome};
use reqwest::Method;
use reqwest::header::CONTENT_TYPE;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::gateway::GatewayClient;

/// How long a journal whose session the gateway refused writes by plain requests.
pub(super) const SHUNNED_FOR: Duration = Duration::from_secs(1);

/// The header the gateway's router marks a route it does not have with.
const NO_ROUTE: &str = "x-paros-no-route";

/// What became of one write sent as a session line.
#[derive(Debug)]
pub(super) enum LineReply {
    /// Its answer line, read once ([`WriteLine`]).
    Answer {
        status: u16,
        retry_after_s: Option<u64>,
        outcome: Result<WriteOutcome, ApiError>,
    },
    NotSent,
    NoAnswer,
    Unoffered,
}

struct Pending {
    line: Bytes,
    reply: oneshot::Sender<LineReply>,
}

enum Link {
    Open(mpsc::Sender<Pending>),
    Shunned(Instant),
}

/// One client's sessions, one per journal written to.
#[derive(Default)]
pub(super) struct Sessions {
    links: Mutex<HashMap<JournalName, Link>>,
    /// The gateway has no session route.
    unoffered: Arc<AtomicBool>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let open = self.lock().values().filter(|l| matches!(l, Link::Open(_))).count();
        f.debug_struct("Sessions").field("open", &open).field("unoffered", &self.unoffered).finish()
    }
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<JournalName, Link>> {
        self.links.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The open session of `journal` (opened now if there is none), or `None` while it is shunned.
    fn link(&self, gateway: &GatewayClient, journal: &JournalName) -> Option<mpsc::Sender<Pending>> {
        let mut links = self.lock();
        match links.get(journal) {
            Some(Link::Open(tx)) if !tx.is_closed() => return Some(tx.clone()),
            Some(Link::Shunned(until)) if Instant::now() < *until => return None,
            _ => {}
        }
        let cap = gateway.config.session_in_flight_max.max(1);
        let (tx, rx) = mpsc::channel(cap);
        let task = Task { gateway: gateway.clone(), journal: journal.clone(), unoffered: Arc::clone(&self.unoffered) };
        tokio::spawn(task.run(rx, cap));
        links.insert(journal.clone(), Link::Open(tx.clone()));
        Some(tx)
    }

    fn shun(&self, journal: &JournalName) {
        self.lock().insert(journal.clone(), Link::Shunned(Instant::now() + SHUNNED_FOR));
    }

    /// Sends `line` (one Write request body and its newline) on `journal`'s session and waits
    /// for its answer, within the request timeout.
    pub(super) async fn send(&self, gateway: &GatewayClient, journal: &JournalName, line: Bytes) -> LineReply {
        if self.unoffered.load(Ordering::Relaxed) {
            return LineReply::Unoffered;
        }
        let (reply, answer) = oneshot::channel();
        let mut pending = Pending { line, reply };
        // A session that ended between the lookup and the send is replaced once.
        for _ in 0..2 {
            let Some(link) = self.link(gateway, journal) else { return LineReply::Unoffered };
            match link.send(pending).await {
                Ok(()) => {
                    return match tokio::time::timeout(gateway.config.request_timeout, answer).await {
                        Ok(Ok(LineReply::Unoffered)) => {
                            self.shun(journal);
                            LineReply::Unoffered
                        }
                        Ok(Ok(reply)) => reply,
                        Ok(Err(_)) | Err(_) => LineReply::NoAnswer,
                    };
                }
                Err(mpsc::error::SendError(p)) => pending = p,
            }
        }
        LineReply::NotSent
    }
}

/// The request body: the lines as the task hands them over, those ready together in one frame.
struct LineBody(mpsc::Receiver<Bytes>);

impl http_body::Body for LineBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        let rx = &mut self.0;
        rx.poll_recv(cx).map(|line| line.map(|l| Ok(http_body::Frame::data(gather(l, || rx.try_recv().ok())))))
    }
}

/// One session: the request it streams and the answers it matches.
struct Task {
    gateway: GatewayClient,
    journal: JournalName,
    unoffered: Arc<AtomicBool>,
}

/// The writes sent and not yet answered, oldest first.
struct Waiting {
    replies: VecDeque<oneshot::Sender<LineReply>>,
    body: Option<mpsc::Sender<Bytes>>,
}

impl Waiting {
    /// Hands `p`'s line to the request body, or tells it that it was not sent.
    async fn forward(&mut self, p: Pending) {
        let sent = match &self.body {
            Some(body) => body.send(p.line).await.is_ok(),
            None => false,
        };
        if sent {
            self.replies.push_back(p.reply);
        } else {
            let _ = p.reply.send(LineReply::NotSent);
        }
    }

    /// Every write still waiting is told `settled`; every one queued behind them, never
    /// handed to the request, is told it was not sent (or, `Unoffered`, to go by plain request).
    fn settle(&mut self, rx: &mut mpsc::Receiver<Pending>, settled: Settled) {
        rx.close();
        for r in self.replies.drain(..) {
            let _ = r.send(settled.reply());
        }
        let queued = if settled == Settled::Unoffered { Settled::Unoffered } else { Settled::NotSent };
        while let Ok(p) = rx.try_recv() {
            let _ = p.reply.send(queued.reply());
        }
    }
}

/// How a session's waiting writes end when it ends without their answers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Settled {
    NotSent,
    NoAnswer,
    Unoffered,
}

impl Settled {
    fn reply(self) -> LineReply {
        match self {
            Settled::NotSent => LineReply::NotSent,
            Settled::NoAnswer => LineReply::NoAnswer,
            Settled::Unoffered => LineReply::Unoffered,
        }
    }
}

impl Task {
    async fn run(self, mut rx: mpsc::Receiver<Pending>, cap: usize) {
        let (body, lines) = mpsc::channel::<Bytes>(cap);
        let mut waiting = Waiting { replies: VecDeque::new(), body: Some(body) };
        let g = &self.gateway;
        let url = g.url(&["v1", "journals", self.journal.as_str(), "session"]);
        let request = g
            .request(Method::POST, url, None)
            .header(CONTENT_TYPE, SESSION_CONTENT_TYPE)
            .body(reqwest::Body::wrap(LineBody(lines)));
        let send = request.send();
        tokio::pin!(send);
        // Lines go out before the answer's head is back: the first write waits no extra trip.
        let response = loop {
            tokio::select! {
                response = &mut send => break response,
                p = rx.recv(), if waiting.body.is_some() && waiting.replies.len() < cap => match p {
                    Some(p) => waiting.forward(p).await,
                    None => waiting.body = None,
                },
            }
        };
        let mut response = match response {
            Ok(r) => r,
            Err(e) if e.is_connect() => return waiting.settle(&mut rx, Settled::NotSent),
            Err(_) => return waiting.settle(&mut rx, Settled::NoAnswer),
        };
        let streams =
            response.headers().get(CONTENT_TYPE).is_some_and(|v| v.as_bytes() == SESSION_CONTENT_TYPE.as_bytes());
        if response.status() != reqwest::StatusCode::OK || !streams {
            // Refused whole, before any line was read: the lines go by plain requests.
            if response.headers().contains_key(NO_ROUTE) {
                self.unoffered.store(true, Ordering::Relaxed);
            }
            return waiting.settle(&mut rx, Settled::Unoffered);
        }
        let mut buf = BytesMut::new();
        let mut ended = false;
        loop {
            tokio::select! {
                chunk = response.chunk() => match chunk {
                    Ok(Some(chunk)) => {
                        buf.extend_from_slice(&chunk);
                        while let Some(i) = buf.iter().position(|&b| b == b'\n') {
                            let line = buf.split_to(i + 1);
                            match WriteLine::parse(&line[..i]) {
                                Ok(WriteLine::Answer { status, retry_after_s, outcome }) if !ended => {
                                    let Some(reply) = waiting.replies.pop_front() else {
                                        // An answer to no write: the stream cannot be trusted.
                                        return waiting.settle(&mut rx, Settled::NoAnswer);
                                    };
                                    let _ = reply.send(LineReply::Answer { status, retry_after_s, outcome });
                                }
                                Ok(WriteLine::End(_)) if !ended => {
                                    ended = true;
                                    waiting.body = None;
                                }
                                _ => return waiting.settle(&mut rx, Settled::NoAnswer),
                            }
                        }
                    }
                    // The end line says the gateway read nothing more: what waits was not sent.
                    Ok(None) if ended => return waiting.settle(&mut rx, Settled::NotSent),
                    Ok(None) | Err(_) => return waiting.settle(&mut rx, Settled::NoAnswer),
                },
                p = rx.recv(), if !ended && waiting.body.is_some() && waiting.replies.len() < cap => match p {
                    Some(p) => waiting.forward(p).await,
                    None => waiting.body = None,
                },
            }
        }
    }
}
