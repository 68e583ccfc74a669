//! The SSE tail: [`Tail`] follows a journal over `text/event-stream`, parsed by [`SseParser`].

use std::time::Duration;

use paros_api::{JournalName, Seq, TailFrame};

use super::GatewayError;
use super::gateway::GatewayClient;
use crate::service::Denial;

impl GatewayClient {
    /// Opens `GET /v1/journals/{name}/tail`, from `from` (`None`: the journal's tail).
    ///
    /// # Errors
    /// [`GatewayError`] when the stream cannot be opened.
    pub async fn tail(&self, name: &JournalName, from: Option<Seq>) -> Result<Tail, GatewayError> {
        let mut tail = Tail {
            gateway: self.clone(),
            journal: name.clone(),
            from,
            last_event_id: None,
            response: None,
            parser: SseParser::default(),
            pending: std::collections::VecDeque::new(),
        };
        tail.connect().await?;
        Ok(tail)
    }
}

/// A live tail: frames in order, reconnecting with `Last-Event-ID` when the stream drops.
#[derive(Debug)]
pub struct Tail {
    pub(super) gateway: GatewayClient,
    pub(super) journal: JournalName,
    pub(super) from: Option<Seq>,
    pub(super) last_event_id: Option<Seq>,
    pub(super) response: Option<reqwest::Response>,
    pub(super) parser: SseParser,
    pub(super) pending: std::collections::VecDeque<SseEvent>,
}

impl Tail {
    /// The `id` of the last frame returned: where a reconnection resumes.
    #[must_use]
    pub fn last_event_id(&self) -> Option<Seq> {
        self.last_event_id
    }

    pub(super) async fn connect(&mut self) -> Result<(), GatewayError> {
        let resp = self.gateway.open_tail(&self.journal, self.from, self.last_event_id).await?;
        self.response = Some(resp);
        self.parser = SseParser::default();
        Ok(())
    }

    /// The next frame (`records`, `gap` or `heartbeat`). A dropped or silent stream, or a
    /// 503 or 429 while reopening, is reconnected after a short backoff (at least a 429's
    /// `Retry-After`), at most
    /// [`HttpConfig::tail_reconnects_max`](crate::HttpConfig::tail_reconnects_max) times in a row.
    ///
    /// # Errors
    /// [`GatewayError::Tail`] for a frame that is not a tail frame; any other error when
    /// reconnecting failed for good (401, 403, 404 at once).
    pub async fn next(&mut self) -> Result<TailFrame, GatewayError> {
        let mut failures = 0u32;
        loop {
            if let Some(ev) = self.pending.pop_front() {
                let id = ev.id.as_deref().unwrap_or("");
                let frame = TailFrame::parse(&ev.event, id, &ev.data).map_err(|e| GatewayError::Tail(e.to_string()))?;
                self.last_event_id = Some(frame.id);
                return Ok(frame);
            }
            let idle = self.gateway.config.tail_idle_timeout;
            let chunk = match self.response.as_mut() {
                Some(resp) => match tokio::time::timeout(idle, resp.chunk()).await {
                    Ok(Ok(Some(chunk))) => Ok(chunk),
                    Ok(Ok(None)) => Err(GatewayError::NoAnswer("the tail stream ended".into())),
                    Ok(Err(e)) => Err(GatewayError::NoAnswer(e.to_string())),
                    Err(_) => Err(GatewayError::NoAnswer("the tail stream went silent".into())),
                },
                None => Err(GatewayError::NoAnswer("not connected".into())),
            };
            match chunk {
                Ok(chunk) => {
                    self.pending.extend(self.parser.push(&chunk));
                    continue;
                }
                Err(e) => {
                    self.response = None;
                    failures += 1;
                    if failures > self.gateway.config.tail_reconnects_max {
                        return Err(e);
                    }
                }
            }
            // Reconnect until it opens, a refusal that will not pass, or the bound. A 429 (the
            // tenant over its requests/s, or holding its most tails while the gateway has not
            // yet seen the old stream go) passes later: its `Retry-After` is waited out first.
            let mut retry_after = Duration::ZERO;
            loop {
                let backoff = Duration::from_millis(100u64 << failures.min(5));
                tokio::time::sleep(backoff.max(retry_after)).await;
                match self.connect().await {
                    Ok(()) => break,
                    Err(e @ (GatewayError::NotSent(_) | GatewayError::NoAnswer(_)))
                    | Err(e @ GatewayError::Denied(Denial { status: 429 | 503, .. })) => {
                        retry_after = e.denial().map_or(Duration::ZERO, Denial::retry_after);
                        failures += 1;
                        if failures > self.gateway.config.tail_reconnects_max {
                            return Err(e);
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
        }
    }
}

/// One event a [`SseParser`] dispatched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, `message` when none was given.
    pub event: String,
    /// The last event id in force (`id:` persists across events, as the SSE rules say).
    pub id: Option<String>,
    /// The `data:` lines joined by `\n`.
    pub data: String,
}

/// An incremental `text/event-stream` parser: feed it chunks as they arrive, take the events.
///
/// Lines end in `\n`, `\r\n` or `\r`; `:` lines are comments; a blank line dispatches the
/// event gathered so far (none when it has no `data`); `retry:` and unknown fields are ignored.
#[derive(Debug, Default, Clone)]
pub struct SseParser {
    line: Vec<u8>,
    /// The previous chunk ended in `\r`: a `\n` at the start of the next one belongs to it.
    after_cr: bool,
    event: String,
    data: String,
    has_data: bool,
    id: Option<String>,
}

impl SseParser {
    /// Takes in `chunk` and returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        for &b in chunk {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(ev) = self.on_line(&String::from_utf8_lossy(&line)) {
                        out.push(ev);
                    }
                }
                _ => self.line.push(b),
            }
        }
        out
    }

    fn on_line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            let data = std::mem::take(&mut self.data);
            if !std::mem::replace(&mut self.has_data, false) {
                return None;
            }
            let event = if event.is_empty() { "message".to_owned() } else { event };
            return Some(SseEvent { event, id: self.id.clone(), data });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            _ => {}
        }
        None
    }
}
