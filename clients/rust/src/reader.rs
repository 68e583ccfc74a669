//! The reader's cursor: what to read next, and what an answer means, sans-IO.
//!
//! The cursor is the next position the reader wants. It never moves backwards: a page moves it
//! to the end of the page's records, a truncation to the journal's first retained position —
//! reported as a [`ReaderOutcome::Gap`], never skipped silently. Answers are parsed, not
//! trusted: a page that does not start at the cursor, or that contradicts its own view, is
//! refused with a [`ReaderError`] and changes nothing. `Unserved` answers are retried (the
//! wrapper asks another server) up to [`ReaderConfig::unserved_retries_max`] times in a row,
//! then reported as [`ReaderOutcome::Unavailable`], with the furthest position any of those
//! servers said it had applied (`applied_to`). An empty page whose view ends below the
//! cursor is not "at the tail": unless an earlier answer named a tail at or past the cursor (then
//! the server lags), the cursor lies past the tail, at a position never written, and says so
//! with [`ReaderError::PastTail`].
//!
//! [`Reader`] is the thin async wrapper: it sends the cursor's requests over a
//! [`JournalService`](crate::JournalService), sleeps a jittered backoff between retries, and
//! long-polls at the tail in [`Reader::follow`]. It is also a
//! [`Stream`](futures_core::Stream) of [`ReadItem`]s — records with their positions, and gaps —
//! that follows the journal; [`Reader::builder`] makes one with defaults.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use thiserror::Error;

use crate::service::ReadAnswer;
use crate::types::{seq_checked_add, view_is_consistent};
use crate::{JournalView, Seq};

/// The reader's bounds and read parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderConfig {
    /// The most records one page may hold (the request's `limit`).
    pub page_records_max: u32,
    /// The most record bytes one page may hold, unless it holds a single record.
    pub page_bytes_max: u32,
    /// How long a read at the tail waits for a record, in milliseconds.
    pub wait_ms: u32,
    /// How many `Unserved` answers in a row are retried before reporting `Unavailable`.
    pub unserved_retries_max: u32,
}

impl Default for ReaderConfig {
    fn default() -> Self {
        ReaderConfig { page_records_max: 256, page_bytes_max: 64 << 10, wait_ms: 0, unserved_retries_max: 3 }
    }
}

/// The read to send next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRequest {
    /// The first position wanted: the cursor.
    pub from: Seq,
    /// The most records wanted.
    pub limit: u32,
    /// The most record bytes wanted (a page holds at least one record when one is there).
    pub max_bytes: u32,
    /// How long to wait at the tail, in milliseconds.
    pub wait_ms: u32,
    /// How many `Unserved` answers came in a row before this request: a wrapper asks a
    /// different server for each.
    pub attempt: u32,
}

/// What the reader learned from an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReaderOutcome {
    /// Records at `from`, `from + 1`, … (possibly none, at the tail).
    Records {
        /// The first record's position.
        from: Seq,
        /// The records, at `from`, `from + 1`, …
        records: Vec<Bytes>,
        /// The journal's view as the answer named it.
        view: JournalView,
    },
    /// Positions `[from, resumed_at)` were truncated; the cursor resumed at `resumed_at`.
    Gap {
        /// The first truncated position (where the cursor was).
        from: Seq,
        /// The first retained position, where the cursor is now.
        resumed_at: Seq,
        /// The journal's view as the answer named it.
        view: JournalView,
    },
    /// The read was not served; ask again (another server): this is retry `attempt`.
    Retry {
        /// How many reads in a row were not served.
        attempt: u32,
    },
    /// `attempts` reads in a row were not served; the retry count starts over.
    Unavailable {
        /// How many reads in a row were not served.
        attempts: u32,
        /// The furthest any of those servers said it had applied the journal (its `next_seq`),
        /// if one said.
        applied_to: Option<Seq>,
    },
    /// No such journal.
    UnknownJournal,
}

impl ReaderOutcome {
    /// The outcome as the items a stream of records yields: each record with its position, a
    /// gap as one [`ReadItem::Gap`], nothing for `Retry` and `Unavailable` (the reader reads
    /// again).
    ///
    /// # Errors
    /// [`ReaderError::UnknownJournal`] for `UnknownJournal`.
    pub fn into_items(self) -> Result<Vec<ReadItem>, ReaderError> {
        match self {
            ReaderOutcome::Records { from, records, .. } => {
                Ok((from.0..).zip(records).map(|(seq, data)| ReadItem::Record { seq: Seq(seq), data }).collect())
            }
            ReaderOutcome::Gap { from, resumed_at, .. } => Ok(vec![ReadItem::Gap { from, to: resumed_at }]),
            ReaderOutcome::Retry { .. } | ReaderOutcome::Unavailable { .. } => Ok(vec![]),
            ReaderOutcome::UnknownJournal => Err(ReaderError::UnknownJournal),
        }
    }
}

/// One item of a journal as a [`Reader`]'s stream yields it: a record at its position, or a
/// range of positions truncated before the reader got to them. Items come in position order,
/// each starting where the one before it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadItem {
    /// The record at `seq`.
    Record {
        /// The record's position.
        seq: Seq,
        /// The record.
        data: Bytes,
    },
    /// Positions `[from, to)` were truncated: their records are gone.
    Gap {
        /// The first truncated position (where the reader was).
        from: Seq,
        /// The first retained position, where reading resumed.
        to: Seq,
    },
}

impl ReadItem {
    /// The first position the item covers.
    pub fn start(&self) -> Seq {
        match self {
            ReadItem::Record { seq, .. } => *seq,
            ReadItem::Gap { from, .. } => *from,
        }
    }

    /// The position after the item: where the next item starts.
    pub fn end(&self) -> Seq {
        match self {
            ReadItem::Record { seq, .. } => Seq(seq.0.saturating_add(1)),
            ReadItem::Gap { to, .. } => *to,
        }
    }
}

/// An answer the cursor refuses; the cursor is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReaderError {
    /// A page that does not start at the cursor (it would skip or repeat positions).
    #[error("a page from {} does not start at the cursor {}", .from.0, .cursor.0)]
    PageNotAtCursor {
        /// The cursor.
        cursor: Seq,
        /// Where the page began.
        from: Seq,
    },
    /// A view whose first retained position is past its tail.
    #[error("a view with first_seq {} past next_seq {} describes no journal", .view.first_seq.0, .view.next_seq.0)]
    InconsistentView {
        /// The view that came back.
        view: JournalView,
    },
    /// A page holding records past the tail its own view names.
    #[error("a page from {} of {len} records runs past its view's next_seq {}", .from.0, .next_seq.0)]
    PageBeyondTail {
        /// Where the page began.
        from: Seq,
        /// How many records it held.
        len: usize,
        /// The tail its view named.
        next_seq: Seq,
    },
    /// A page holding more records than were asked for.
    #[error("a page of {records} records exceeds the limit of {limit}")]
    PageTooLong {
        /// How many records the page held.
        records: usize,
        /// The limit asked for.
        limit: u32,
    },
    /// A page of several records holding more bytes than were asked for.
    #[error("a page of {bytes} bytes exceeds max_bytes {max_bytes}")]
    PageTooLarge {
        /// The page's record bytes.
        bytes: usize,
        /// The bound asked for.
        max_bytes: u32,
    },
    /// A truncation answer whose view does not put the first retained position past the cursor.
    #[error("a truncation with first_seq {} does not lie past the cursor {}", .first_seq.0, .cursor.0)]
    NotTruncated {
        /// The cursor.
        cursor: Seq,
        /// The first retained position the answer named.
        first_seq: Seq,
    },
    /// The service refused the read (unauthorized, forbidden, over quota, malformed): reading
    /// on would be refused too. The cursor is unchanged.
    #[error("the read was denied: {0}")]
    Denied(crate::service::Denial),
    /// The cursor lies past the journal's tail: the answer is an empty page whose view's
    /// `next_seq` is below the position asked for. Not a fault of the answer — no record was
    /// ever written at the cursor (a position taken from elsewhere, a write not yet applied, or
    /// a journal deleted and created again). The cursor is unchanged, and the same read gets
    /// the same answer until the journal grows to the cursor. (Once an answer named a tail at
    /// or past the cursor, an empty page with a lower tail is a lagging server's, and is taken
    /// as the tail.) A [`Reader`] reading [`ReadConsistency::Monotonic`]ally asks, before it
    /// has seen a tail, for a server that reached the cursor: past the tail, no server has, so
    /// its reads end [`ReaderOutcome::Unavailable`] instead.
    #[error("the cursor {} lies past the journal's tail {}", .cursor.0, .next_seq.0)]
    PastTail {
        /// The position asked for.
        cursor: Seq,
        /// The journal's tail as the answer names it (below `cursor`).
        next_seq: Seq,
        /// The answer's view.
        view: JournalView,
    },
    /// No such journal (reported as an error where the reader yields items, as its stream does).
    #[error("no such journal")]
    UnknownJournal,
    /// `attempts` reads in a row were not served (where the reader yields items and does not
    /// retry for ever, as [`Reader::read_to_tail`]). Nothing changed; reading again may succeed.
    #[error("{attempts} reads in a row were not served{}", applied_suffix(*.applied_to))]
    Unavailable {
        /// How many reads in a row were not served.
        attempts: u32,
        /// The furthest any of those servers said it had applied the journal (its `next_seq`:
        /// every record below it is applied there), if one said. Reading again from a server
        /// that reached it is not promised.
        applied_to: Option<Seq>,
    },
    /// The [`Reader`]'s stream holds a read in flight or items of a page not yet yielded: the
    /// reader's own methods would read past them. Poll the stream until it yields its next
    /// item (and the items of that page), then the methods are free again. Nothing changed.
    #[error("the reader's stream holds a read in flight or items not yet yielded")]
    StreamBusy,
}

/// `ReaderError::Unavailable`'s message tail: how far a server had applied, when one said.
fn applied_suffix(applied_to: Option<Seq>) -> String {
    applied_to.map_or_else(String::new, |a| format!(" (the furthest server had applied up to {})", a.0))
}

impl ReaderError {
    /// The service's refusal, when that is why the read failed.
    #[must_use]
    pub fn denial(&self) -> Option<&crate::Denial> {
        match self {
            ReaderError::Denied(denial) => Some(denial),
            _ => None,
        }
    }
}

/// A reader configuration that is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReaderConfigError {
    /// `page_records_max` is 0.
    #[error("a page must be allowed at least one record")]
    PageRecordsZero,
    /// `page_bytes_max` is 0.
    #[error("a page must be allowed at least one byte")]
    PageBytesZero,
}

/// The reader's cursor and what it knows of the journal's tail.
#[derive(Debug)]
pub struct ReaderCursor {
    config: ReaderConfig,
    cursor: Seq,
    tail: Option<Seq>,
    unserved: u32,
    /// The furthest `applied_to` the unserved answers in a row named.
    unserved_applied: Option<Seq>,
    /// Named servers in a row that answered `UnknownJournal` (see
    /// [`absorb_from`](Self::absorb_from)).
    unknown: u32,
}

impl ReaderCursor {
    /// A cursor that wants `from` next.
    ///
    /// # Errors
    /// [`ReaderConfigError`] when a page bound is zero: such a reader could never move.
    pub fn new(from: Seq, config: ReaderConfig) -> Result<Self, ReaderConfigError> {
        if config.page_records_max == 0 {
            return Err(ReaderConfigError::PageRecordsZero);
        }
        if config.page_bytes_max == 0 {
            return Err(ReaderConfigError::PageBytesZero);
        }
        Ok(ReaderCursor { config, cursor: from, tail: None, unserved: 0, unserved_applied: None, unknown: 0 })
    }

    /// The next position wanted.
    pub fn cursor(&self) -> Seq {
        self.cursor
    }

    /// The highest tail (`next_seq`) any answer named, if any answer named one.
    pub fn tail(&self) -> Option<Seq> {
        self.tail
    }

    /// Whether the cursor has reached the last known tail (false before any view is known).
    pub fn caught_up(&self) -> bool {
        self.tail.is_some_and(|tail| self.cursor >= tail)
    }

    /// The read to send next.
    pub fn next_request(&self) -> ReadRequest {
        ReadRequest {
            from: self.cursor,
            limit: self.config.page_records_max,
            max_bytes: self.config.page_bytes_max,
            wait_ms: self.config.wait_ms,
            attempt: self.unserved + self.unknown,
        }
    }

    /// Takes in the answer to the read [`next_request`](Self::next_request) described.
    ///
    /// # Errors
    /// [`ReaderError`] when the answer contradicts the request or itself; nothing changes.
    pub fn absorb(&mut self, answer: ReadAnswer) -> Result<ReaderOutcome, ReaderError> {
        self.absorb_from(answer, 0)
    }

    /// [`absorb`](Self::absorb), for a read sent to one of `servers` named servers (0: a
    /// service that routes by itself). `UnknownJournal` from a named server means "not hosted
    /// here" — a node outside the journal's voters, or one it is not placed on yet — so the
    /// next server is asked ([`ReaderOutcome::Retry`]) until every one of them said so in a
    /// row; only then, or at once from a service that routes by itself, is it
    /// [`ReaderOutcome::UnknownJournal`].
    ///
    /// # Errors
    /// As [`absorb`](Self::absorb).
    pub fn absorb_from(&mut self, answer: ReadAnswer, servers: usize) -> Result<ReaderOutcome, ReaderError> {
        if matches!(answer, ReadAnswer::UnknownJournal) && (self.unknown as usize) + 1 < servers {
            self.unknown += 1;
            return Ok(ReaderOutcome::Retry { attempt: self.unserved + self.unknown });
        }
        self.unknown = 0;
        let before = self.cursor;
        let outcome = match answer {
            ReadAnswer::Page { from, records, view } => self.on_page(from, records, view)?,
            ReadAnswer::Truncated { view } => self.on_truncated(view)?,
            ReadAnswer::Unserved { applied_to } => self.on_unserved(applied_to),
            ReadAnswer::UnknownJournal => {
                self.unserved = 0;
                self.unserved_applied = None;
                ReaderOutcome::UnknownJournal
            }
            ReadAnswer::Denied(denial) => return Err(ReaderError::Denied(denial)),
        };
        assert!(self.cursor >= before, "the reader's cursor never moves backwards");
        assert!(
            self.unserved <= self.config.unserved_retries_max,
            "unserved reads in a row never exceed the retry bound"
        );
        Ok(outcome)
    }

    fn on_page(&mut self, from: Seq, records: Vec<Bytes>, view: JournalView) -> Result<ReaderOutcome, ReaderError> {
        let cursor = self.cursor;
        if from != cursor {
            return Err(ReaderError::PageNotAtCursor { cursor, from });
        }
        check_view(view)?;
        let len = records.len();
        let limit = self.config.page_records_max;
        if len > limit as usize {
            return Err(ReaderError::PageTooLong { records: len, limit });
        }
        let bytes: usize = records.iter().map(Bytes::len).sum();
        let max_bytes = self.config.page_bytes_max;
        if len > 1 && bytes > max_bytes as usize {
            return Err(ReaderError::PageTooLarge { bytes, max_bytes });
        }
        let beyond = ReaderError::PageBeyondTail { from, len, next_seq: view.next_seq };
        let end = seq_checked_add(from, len as u64).ok_or(beyond.clone())?;
        if len > 0 && end > view.next_seq {
            return Err(beyond);
        }
        // Below a tail already seen at or past the cursor, the view is a lagging server's.
        if len == 0 && view.next_seq < cursor && self.tail.is_none_or(|tail| tail < cursor) {
            return Err(ReaderError::PastTail { cursor, next_seq: view.next_seq, view });
        }
        self.learn(view);
        if len == 0 && view.first_seq > cursor {
            self.cursor = view.first_seq;
            return Ok(ReaderOutcome::Gap { from: cursor, resumed_at: view.first_seq, view });
        }
        self.cursor = end;
        Ok(ReaderOutcome::Records { from, records, view })
    }

    fn on_truncated(&mut self, view: JournalView) -> Result<ReaderOutcome, ReaderError> {
        check_view(view)?;
        let cursor = self.cursor;
        if view.first_seq <= cursor {
            return Err(ReaderError::NotTruncated { cursor, first_seq: view.first_seq });
        }
        self.learn(view);
        self.cursor = view.first_seq;
        Ok(ReaderOutcome::Gap { from: cursor, resumed_at: view.first_seq, view })
    }

    fn on_unserved(&mut self, applied_to: Option<Seq>) -> ReaderOutcome {
        self.unserved_applied = self.unserved_applied.max(applied_to);
        if self.unserved < self.config.unserved_retries_max {
            self.unserved += 1;
            ReaderOutcome::Retry { attempt: self.unserved }
        } else {
            let attempts = self.unserved + 1;
            self.unserved = 0;
            ReaderOutcome::Unavailable { attempts, applied_to: self.unserved_applied.take() }
        }
    }

    fn learn(&mut self, view: JournalView) {
        self.unserved = 0;
        self.unserved_applied = None;
        self.tail = Some(self.tail.map_or(view.next_seq, |tail| tail.max(view.next_seq)));
    }
}

fn check_view(view: JournalView) -> Result<(), ReaderError> {
    if view_is_consistent(&view) { Ok(()) } else { Err(ReaderError::InconsistentView { view }) }
}

/// How fresh the async [`Reader`]'s reads must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadConsistency {
    /// Every read sees every write acknowledged before it started (the server confirms with a
    /// quorum): the default, and what a node serves.
    #[default]
    Linearizable,
    /// Every read is served by a server that has applied at least the highest tail this reader
    /// has seen: monotonic reads, cheap at replicas.
    Monotonic,
}

/// The async reader: a [`ReaderCursor`] over a [`JournalService`](crate::JournalService).
///
/// [`next`](Self::next) reads one page and says what it meant; `Unserved` answers are retried
/// against the next server after a jittered backoff (the client's bounds) until the cursor says
/// `Unavailable`. [`read_to_tail`](Self::read_to_tail) reads every page up to the tail, gaps
/// included. [`follow`](Self::follow) reads forever: it long-polls at the tail and returns only
/// records, gaps and `UnknownJournal`.
///
/// A reader is also a [`Stream`](futures_core::Stream) of [`ReadItem`]s: every record with its
/// position and every truncated range as a [`ReadItem::Gap`], in order, following the journal
/// as [`follow`](Self::follow) does (it long-polls at the tail, so it does not end on its own).
/// Its first error (a refused answer, [`ReaderError::UnknownJournal`], a denial,
/// [`ReaderError::PastTail`] unless the reader was built to wait past the tail) is its last
/// item: the stream yields `None` after it. The stream and the methods read through the same
/// cursor, one at a time: while the stream holds a read in flight (a poll returned `Pending`
/// and its future was dropped) or items of a page not yet yielded, the methods refuse with
/// [`ReaderError::StreamBusy`]; once the stream has yielded a page's last item they are free,
/// and the stream goes on from where they left the cursor.
///
/// The stream needs `S: 'static` (its read in flight owns the reader's state);
/// [`next_item`](Self::next_item) is its next item without a stream combinator crate.
///
/// ```
/// # use paros_client::fake::FakeService;
/// # use paros_client::{Client, ClientConfig, ReadItem, Seq};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let client = Client::new(FakeService::new("j", vec![]), ClientConfig::default())?;
/// # let mut writer = client.writer("j".to_owned()).claim().await?;
/// # writer.write(vec!["a".into(), "b".into(), "c".into()]).await?;
/// # writer.truncate(Seq(1)).await?;
/// let mut reader = client.reader("j".to_owned()).from(Seq(0)).build()?;
/// let mut seen = vec![];
/// while let Some(item) = reader.next_item().await {
///     match item? {
///         ReadItem::Record { seq, data } => seen.push(format!("{seq}: {}", String::from_utf8_lossy(&data))),
///         ReadItem::Gap { from, to } => seen.push(format!("gap [{from}, {to})")),
///     }
///     if reader.caught_up() {
///         break; // the stream would follow the tail for ever
///     }
/// }
/// assert_eq!(seen, ["gap [0, 1)", "1: b", "2: c"]);
/// # Ok(())
/// # }
/// ```
/// (`StreamExt::next` and the inherent [`Reader::next`] share a name, and the inherent one wins:
/// call the stream's as `StreamExt::next(&mut reader)`.)
pub struct Reader<S: crate::JournalService> {
    /// The reader's state; `None` while the stream's read in flight holds it.
    state: Option<Box<ReaderState<S>>>,
    /// The stream's read in flight: it hands the state back with its outcome. (In a mutex only
    /// to keep the reader `Sync`: it is reached through `&mut self` alone, never locked.)
    in_flight: Option<Mutex<StreamRead<S>>>,
    /// Items of the stream's last page not yet yielded.
    pending: VecDeque<ReadItem>,
    /// The cursor and tail when the read in flight started.
    launched: (Seq, Option<Seq>),
    /// The stream yielded its error: it yields nothing more.
    ended: bool,
}

type StreamRead<S> = Pin<Box<dyn Future<Output = (Box<ReaderState<S>>, Result<ReaderOutcome, ReaderError>)> + Send>>;

/// What the reader's methods read with: the cursor, the client, and the reader's settings.
struct ReaderState<S: crate::JournalService> {
    client: crate::Client<S>,
    journal: S::Journal,
    cursor: ReaderCursor,
    consistency: ReadConsistency,
    follow_wait_ms: u32,
    wait_past_tail: bool,
    rng: paros_core::rng::Rng,
    start: usize,
    /// How many servers the service names (0: it routes by itself), counted once.
    servers: usize,
}

impl<S: crate::JournalService> std::fmt::Debug for Reader<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Reader");
        if let Some(state) = &self.state {
            d.field("cursor", &state.cursor).field("consistency", &state.consistency);
        } else {
            d.field("launched", &self.launched);
        }
        d.field("pending", &self.pending.len()).field("ended", &self.ended).finish_non_exhaustive()
    }
}

/// The default long-poll wait of a [`Reader`] built by [`Reader::builder`], in milliseconds
/// (the server caps it, ≤ 1000 by contract).
pub const DEFAULT_FOLLOW_WAIT_MS: u32 = 1000;

/// Builds a [`Reader`] with defaults: from position 0, [`ReaderConfig::default`],
/// [`ReadConsistency::Linearizable`], a long-poll of [`DEFAULT_FOLLOW_WAIT_MS`], and a position
/// past the tail reported as [`ReaderError::PastTail`] by every path.
pub struct ReaderBuilder<S: crate::JournalService> {
    client: crate::Client<S>,
    journal: S::Journal,
    from: Seq,
    config: ReaderConfig,
    consistency: ReadConsistency,
    follow_wait_ms: u32,
    wait_past_tail: bool,
}

impl<S: crate::JournalService> std::fmt::Debug for ReaderBuilder<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReaderBuilder")
            .field("journal", &self.journal)
            .field("from", &self.from)
            .field("config", &self.config)
            .field("consistency", &self.consistency)
            .field("follow_wait_ms", &self.follow_wait_ms)
            .field("wait_past_tail", &self.wait_past_tail)
            .finish_non_exhaustive()
    }
}

impl<S: crate::JournalService> ReaderBuilder<S> {
    /// The first position to read (default 0).
    #[must_use]
    pub fn from(mut self, from: Seq) -> Self {
        self.from = from;
        self
    }

    /// The page bounds and read parameters (default [`ReaderConfig::default`]).
    #[must_use]
    pub fn config(mut self, config: ReaderConfig) -> Self {
        self.config = config;
        self
    }

    /// How fresh reads must be (default [`ReadConsistency::Linearizable`]).
    #[must_use]
    pub fn consistency(mut self, consistency: ReadConsistency) -> Self {
        self.consistency = consistency;
        self
    }

    /// The long-poll wait [`Reader::follow`] and the stream ask for at the tail, in
    /// milliseconds (default [`DEFAULT_FOLLOW_WAIT_MS`]; the server caps it, ≤ 1000 by contract).
    #[must_use]
    pub fn follow_wait_ms(mut self, wait_ms: u32) -> Self {
        self.follow_wait_ms = wait_ms;
        self
    }

    /// Whether [`Reader::follow`] and the stream wait, long-polling, for a journal whose tail is
    /// below the cursor to grow to it (as for a position a writer was handed and has not had
    /// acknowledged yet), instead of reporting [`ReaderError::PastTail`] (default `false`: a
    /// position past the tail is most often a mistake, and waiting would hide it). The one-shot
    /// [`Reader::next`] and [`Reader::read_to_tail`] always report it.
    #[must_use]
    pub fn wait_past_tail(mut self, wait: bool) -> Self {
        self.wait_past_tail = wait;
        self
    }

    /// The reader.
    ///
    /// # Errors
    /// [`ReaderConfigError`] as [`ReaderCursor::new`].
    pub fn build(self) -> Result<Reader<S>, ReaderConfigError> {
        let mut reader =
            Reader::new(self.client, self.journal, self.from, self.config, self.consistency, self.follow_wait_ms)?;
        if let Some(state) = reader.state.as_mut() {
            state.wait_past_tail = self.wait_past_tail;
        }
        Ok(reader)
    }
}

impl<S: crate::JournalService> Reader<S> {
    /// A reader of `journal` from `from`. `follow_wait_ms` is the long-poll wait
    /// [`follow`](Self::follow) asks for at the tail (the server caps it, ≤ 1000 by contract).
    /// [`builder`](Self::builder) names the same settings, with defaults.
    ///
    /// # Errors
    /// [`ReaderConfigError`] as [`ReaderCursor::new`].
    pub fn new(
        client: crate::Client<S>,
        journal: S::Journal,
        from: Seq,
        config: ReaderConfig,
        consistency: ReadConsistency,
        follow_wait_ms: u32,
    ) -> Result<Self, ReaderConfigError> {
        let cursor = ReaderCursor::new(from, config)?;
        let mut rng = paros_core::rng::Rng::new(client.draw());
        let servers = client.service().servers().len();
        let start = (rng.next_u64() % servers.max(1) as u64) as usize;
        let state = ReaderState {
            client,
            journal,
            cursor,
            consistency,
            follow_wait_ms,
            wait_past_tail: false,
            rng,
            start,
            servers,
        };
        Ok(Reader {
            state: Some(Box::new(state)),
            in_flight: None,
            pending: VecDeque::new(),
            launched: (from, None),
            ended: false,
        })
    }

    /// A builder of a reader of `journal`, with defaults for everything else (see
    /// [`ReaderBuilder`]).
    pub fn builder(client: crate::Client<S>, journal: S::Journal) -> ReaderBuilder<S> {
        ReaderBuilder {
            client,
            journal,
            from: Seq(0),
            config: ReaderConfig::default(),
            consistency: ReadConsistency::default(),
            follow_wait_ms: DEFAULT_FOLLOW_WAIT_MS,
            wait_past_tail: false,
        }
    }

    /// The next position wanted: where the next item this reader hands out (from its methods
    /// or its stream) starts.
    pub fn cursor(&self) -> Seq {
        match (self.pending.front(), &self.state) {
            (Some(item), _) => item.start(),
            (None, Some(state)) => state.cursor.cursor(),
            (None, None) => self.launched.0,
        }
    }

    /// The highest tail any answer named.
    pub fn tail(&self) -> Option<Seq> {
        match &self.state {
            Some(state) => state.cursor.tail(),
            None => self.launched.1,
        }
    }

    /// Whether the cursor has reached the last known tail.
    pub fn caught_up(&self) -> bool {
        self.tail().is_some_and(|tail| self.cursor() >= tail)
    }

    /// The state, unless the stream holds it or has items not yet yielded.
    fn state(&mut self) -> Result<&mut ReaderState<S>, ReaderError> {
        if !self.pending.is_empty() {
            return Err(ReaderError::StreamBusy);
        }
        self.state.as_deref_mut().ok_or(ReaderError::StreamBusy)
    }

    /// Reads one page and says what it meant: `Records` (possibly none, at the tail), `Gap`,
    /// `Unavailable` or `UnknownJournal`; never `Retry` (retries happen here).
    ///
    /// # Errors
    /// [`ReaderError`] when the answer contradicts the request; the cursor is unchanged.
    /// [`ReaderError::PastTail`] when the cursor lies past the journal's tail (an empty page at
    /// a position that was never written is not "at the tail").
    /// [`ReaderError::StreamBusy`] while the stream holds the reader.
    pub async fn next(&mut self) -> Result<ReaderOutcome, ReaderError> {
        self.state()?.next().await
    }

    /// Reads from the cursor to the journal's tail as the first answer names it (records
    /// written after that are left for the next read) and returns what it read, in position
    /// order: each record with its position, and every truncated range met on the way as a
    /// [`ReadItem::Gap`]. An empty list means the cursor was at the tail already.
    ///
    /// A read that is not served within the bounds, or that finds no such journal, ends the
    /// list with what was read before it; a later call resumes at the cursor and meets it again.
    ///
    /// # Errors
    /// When nothing was read: [`ReaderError::Unavailable`] or [`ReaderError::UnknownJournal`]
    /// for such a read, [`ReaderError::PastTail`] when the cursor lies past the journal's tail
    /// (there is no tail to read to), another [`ReaderError`] when an answer contradicts the
    /// request (the cursor is unchanged), [`ReaderError::StreamBusy`] while the stream holds
    /// the reader.
    pub async fn read_to_tail(&mut self) -> Result<Vec<ReadItem>, ReaderError> {
        let outcomes = self.state()?.read_to_tail().await?;
        let mut items = Vec::new();
        for outcome in outcomes {
            let end = match outcome {
                ReaderOutcome::Unavailable { attempts, applied_to } => {
                    Err(ReaderError::Unavailable { attempts, applied_to })
                }
                outcome => outcome.into_items(),
            };
            match end {
                Ok(more) => items.extend(more),
                Err(e) if items.is_empty() => return Err(e),
                Err(_) => break,
            }
        }
        Ok(items)
    }

    /// Reads until there is something to report, forever: long-polls at the tail and retries
    /// unavailability after a backoff. Returns non-empty `Records`, a `Gap`, or
    /// `UnknownJournal`.
    ///
    /// # Errors
    /// [`ReaderError`] when an answer contradicts the request; the cursor is unchanged.
    /// [`ReaderError::PastTail`] when the cursor lies past the journal's tail, unless the
    /// reader was built to [wait past the tail](ReaderBuilder::wait_past_tail).
    /// [`ReaderError::StreamBusy`] while the stream holds the reader.
    pub async fn follow(&mut self) -> Result<ReaderOutcome, ReaderError> {
        self.state()?.follow().await
    }
}

impl<S: crate::JournalService> ReaderState<S> {
    async fn read_once(&mut self, wait_ms: u32, long_poll: bool) -> Result<ReaderOutcome, ReaderError> {
        loop {
            let request = self.cursor.next_request();
            // Ranked servers (read replicas first) from the best on each new request; others in
            // rotation from this reader's own start.
            let server = self.client.service().read_servers(&self.journal).pick(self.start, request.attempt);
            let consistency = match self.consistency {
                ReadConsistency::Linearizable => paros_core::Consistency::Linearizable,
                ReadConsistency::Monotonic => {
                    paros_core::Consistency::Reached(self.cursor.tail().unwrap_or(request.from))
                }
            };
            let at_tail = long_poll || self.cursor.caught_up();
            let params = crate::ReadParams {
                from: request.from,
                limit: request.limit,
                max_bytes: request.max_bytes,
                wait_ms: if at_tail { wait_ms.max(request.wait_ms) } else { request.wait_ms },
                consistency,
            };
            let route = crate::Route { server, attempt: request.attempt };
            let answer = self.client.service().read(&self.journal, params, route).await;
            match self.cursor.absorb_from(answer, self.servers)? {
                ReaderOutcome::Retry { attempt } => {
                    let delay = crate::policy::backoff(self.client.config(), attempt, &mut self.rng);
                    tokio::time::sleep(delay).await;
                }
                outcome => return Ok(outcome),
            }
        }
    }

    async fn next(&mut self) -> Result<ReaderOutcome, ReaderError> {
        self.read_once(0, false).await
    }

    async fn read_to_tail(&mut self) -> Result<Vec<ReaderOutcome>, ReaderError> {
        let mut items = Vec::new();
        let mut target = None;
        loop {
            if target.is_some_and(|tail| self.cursor.cursor() >= tail) {
                return Ok(items);
            }
            let outcome = match self.next().await {
                Ok(outcome) => outcome,
                Err(e) if items.is_empty() => return Err(e),
                Err(_) => return Ok(items),
            };
            match outcome {
                // An empty page is the tail as its server sees it: nothing more to read now.
                ReaderOutcome::Records { ref records, .. } if records.is_empty() => return Ok(items),
                ReaderOutcome::Records { view, .. } => {
                    target.get_or_insert(view.next_seq);
                    items.push(outcome);
                }
                ReaderOutcome::Gap { view, .. } => {
                    target.get_or_insert(view.next_seq);
                    items.push(outcome);
                }
                ReaderOutcome::Unavailable { .. } | ReaderOutcome::UnknownJournal | ReaderOutcome::Retry { .. } => {
                    items.push(outcome);
                    return Ok(items);
                }
            }
        }
    }

    async fn follow(&mut self) -> Result<ReaderOutcome, ReaderError> {
        let mut unavailable = 0u32;
        let mut past_tail = 0u32;
        loop {
            match self.read_once(self.follow_wait_ms, past_tail > 0).await {
                Ok(ReaderOutcome::Records { records, .. }) if records.is_empty() => {}
                Ok(ReaderOutcome::Unavailable { .. }) => {
                    unavailable = unavailable.saturating_add(1);
                    let delay = crate::policy::backoff(self.client.config(), unavailable, &mut self.rng);
                    tokio::time::sleep(delay).await;
                }
                // Waiting for the journal to grow to the cursor: long-poll there, and back off
                // too, in case the server answers a read past its tail without waiting.
                Err(ReaderError::PastTail { .. }) if self.wait_past_tail => {
                    past_tail = past_tail.saturating_add(1);
                    let delay = crate::policy::backoff(self.client.config(), past_tail, &mut self.rng);
                    tokio::time::sleep(delay).await;
                }
                outcome => return outcome,
            }
        }
    }
}

impl<S> Reader<S>
where
    S: crate::JournalService + 'static,
    S::Journal: 'static,
{
    /// The stream's next item (as `StreamExt::next` gives it): a record or a gap, following
    /// the journal; the stream's error, then `None` for good. Cancel-safe: dropping the future
    /// loses nothing (a read in flight is carried on by the next poll).
    pub async fn next_item(&mut self) -> Option<Result<ReadItem, ReaderError>> {
        std::future::poll_fn(|cx| futures_core::Stream::poll_next(Pin::new(&mut *self), cx)).await
    }
}

/// The reader as a stream of [`ReadItem`]s; see [`Reader`].
impl<S> futures_core::Stream for Reader<S>
where
    S: crate::JournalService + 'static,
    S::Journal: 'static,
{
    type Item = Result<ReadItem, ReaderError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(item) = this.pending.pop_front() {
                return Poll::Ready(Some(Ok(item)));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            let in_flight = match &mut this.in_flight {
                Some(in_flight) => in_flight.get_mut().unwrap_or_else(PoisonError::into_inner),
                None => {
                    let Some(mut state) = this.state.take() else {
                        unreachable!("the state is the reader's or the read in flight's")
                    };
                    this.launched = (state.cursor.cursor(), state.cursor.tail());
                    let read: StreamRead<S> = Box::pin(async move {
                        let outcome = state.follow().await;
                        (state, outcome)
                    });
                    this.in_flight.insert(Mutex::new(read)).get_mut().unwrap_or_else(PoisonError::into_inner)
                }
            };
            let Poll::Ready((state, outcome)) = in_flight.as_mut().poll(cx) else {
                return Poll::Pending;
            };
            this.in_flight = None;
            this.state = Some(state);
            match outcome.and_then(ReaderOutcome::into_items) {
                Ok(items) => this.pending.extend(items),
                Err(e) => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
    }
}
