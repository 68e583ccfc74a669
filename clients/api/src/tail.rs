//! Tail: `GET /v1/journals/{name}/tail?from=n`, a `text/event-stream` of three events.

use paros_core::journal::JournalView;
use paros_core::{InvalidPosition, Seq};
use serde::{Deserialize, Serialize};

use crate::query::{self, InvalidQuery};
use crate::read::Page;

crate::object::objects_only!(Gap, Heartbeat);

/// Where a tail starts, from its query and its `Last-Event-ID` header.
///
/// `Last-Event-ID` overrides `from`; with neither the tail starts at the journal's `next_seq`
/// (`None` here). Either one that is not a u64 is 400.
///
/// # Errors
/// [`InvalidQuery`] for a malformed query or `Last-Event-ID`.
pub fn tail_start(raw_query: &str, last_event_id: Option<&str>) -> Result<Option<Seq>, InvalidQuery> {
    let p = query::parse(raw_query, &["from"])?;
    let bad = |name: &'static str| move |e: InvalidPosition| InvalidQuery::BadValue { name, reason: e.to_string() };
    let from = p.get("from").map(|v| Seq::parse(v).map_err(bad("from"))).transpose()?;
    let resumed = last_event_id.map(|v| Seq::parse(v).map_err(bad("Last-Event-ID"))).transpose()?;
    Ok(resumed.or(from))
}

/// `gap`: the journal was truncated past the cursor; reading resumes at `resumed_at`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self")]
pub struct Gap {
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schema::SeqSchema))]
    pub from: Seq,
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schema::SeqSchema))]
    pub resumed_at: Seq,
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schema::JournalViewSchema))]
    pub view: JournalView,
}

/// `heartbeat`: the tail as the server knows it, at least every 5 s.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self")]
pub struct Heartbeat {
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schema::JournalViewSchema))]
    pub view: JournalView,
    pub caught_up: bool,
}

/// One tail event's payload, named by its SSE `event:` field.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum TailEvent {
    /// `records`: `{"from", "records", "view"}`.
    Records(Page),
    /// `gap`: `{"from", "resumed_at", "view"}`.
    Gap(Gap),
    /// `heartbeat`: `{"view", "caught_up"}`.
    Heartbeat(Heartbeat),
}

/// Why an SSE event is not a tail event.
#[derive(Debug, thiserror::Error)]
pub enum InvalidTailEvent {
    /// An `event:` name the tail never sends.
    #[error("unknown tail event {0:?}")]
    UnknownEvent(String),
    /// A payload that does not deserialize.
    #[error("bad {event} payload: {source}")]
    Payload { event: &'static str, source: serde_json::Error },
    /// An `id:` that is not a position.
    #[error("bad event id: {0}")]
    Id(InvalidPosition),
}

impl TailEvent {
    /// The SSE `event:` name.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            TailEvent::Records(_) => "records",
            TailEvent::Gap(_) => "gap",
            TailEvent::Heartbeat(_) => "heartbeat",
        }
    }

    /// The view the event carries.
    #[must_use]
    pub fn view(&self) -> &JournalView {
        match self {
            TailEvent::Records(p) => &p.view,
            TailEvent::Gap(g) => &g.view,
            TailEvent::Heartbeat(h) => &h.view,
        }
    }

    /// The event's SSE `data:` payload, one line of JSON.
    #[must_use]
    pub fn data(&self) -> String {
        let json = match self {
            TailEvent::Records(p) => serde_json::to_string(p),
            TailEvent::Gap(g) => serde_json::to_string(g),
            TailEvent::Heartbeat(h) => serde_json::to_string(h),
        };
        json.expect("tail payloads hold no map with non-string keys and serialize infallibly")
    }

    /// Reads an event from its SSE `event:` name and `data:` payload.
    ///
    /// # Errors
    /// [`InvalidTailEvent`] for an unknown name or a payload that does not deserialize.
    pub fn parse(name: &str, data: &str) -> Result<TailEvent, InvalidTailEvent> {
        fn payload<T: serde::de::DeserializeOwned>(event: &'static str, data: &str) -> Result<T, InvalidTailEvent> {
            serde_json::from_str(data).map_err(|source| InvalidTailEvent::Payload { event, source })
        }
        match name {
            "records" => payload("records", data).map(TailEvent::Records),
            "gap" => payload("gap", data).map(TailEvent::Gap),
            "heartbeat" => payload("heartbeat", data).map(TailEvent::Heartbeat),
            other => Err(InvalidTailEvent::UnknownEvent(other.to_owned())),
        }
    }
}

/// One SSE frame of a tail: the event and its `id`, the next position to read.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct TailFrame {
    pub id: Seq,
    pub event: TailEvent,
}

impl TailFrame {
    /// The frame as it travels: `event:`, `id:`, one `data:` line, then a blank line.
    #[must_use]
    pub fn to_sse(&self) -> String {
        format!("event: {}\nid: {}\ndata: {}\n\n", self.event.name(), self.id, self.event.data())
    }

    /// Reads a frame from the fields an SSE parser collected for one event.
    ///
    /// # Errors
    /// [`InvalidTailEvent`] for a bad id, an unknown event name or a bad payload.
    pub fn parse(name: &str, id: &str, data: &str) -> Result<TailFrame, InvalidTailEvent> {
        let id = Seq::parse(id).map_err(InvalidTailEvent::Id)?;
        Ok(TailFrame { id, event: TailEvent::parse(name, data)? })
    }
}
