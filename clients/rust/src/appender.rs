//! The batching appender: single records in, batches out, each record's position back.
//!
//! [`BatchBuilder`] is the sans-IO part: it gathers records into a batch until the batch holds
//! [`AppenderConfig::batch_records_max`] records, or the next record would take it past
//! [`AppenderConfig::batch_bytes_max`], or the batch's first record has waited
//! [`AppenderConfig::linger`]. It has no clock: the caller passes the time.
//!
//! The async part is two halves. [`Appender`] is the cheap, clonable handle callers append
//! through; [`AppenderDriver`] owns the [`Writer`] and does the work. The driver is a future the
//! caller runs — `join` it with the appending code, spawn [`AppenderDriver::run`] on a runtime
//! of its choice, or let [`AppenderBuilder::spawn`] spawn it on the current tokio one. `run` returns
//! once every handle is dropped and every record appended so far is reported, or once the writer
//! stops (superseded, halted).
//!
//! Back-pressure: every record holds `max(len, 1)` units of a semaphore of
//! [`AppenderConfig::bytes_in_flight_max`] from the moment it is handed to the driver until its
//! batch is reported. [`Appender::append`] waits for units, so the bytes buffered and in flight
//! together never exceed the bound, and the channel between the halves holds at most that many
//! records: no queue is unbounded.
//!
//! ```
//! # use paros_client::fake::FakeService;
//! # use paros_client::{Appender, Client, ClientConfig, Seq};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let client = Client::new(FakeService::new("j", vec![]), ClientConfig::default())?;
//! let writer = client.writer("j".to_owned()).claim().await?;
//! let (appender, task) = Appender::builder(writer).spawn()?;
//! // Appends from many tasks at once are gathered into batches; each gets its own position.
//! let (a, b) = tokio::join!(appender.append("a".into()), appender.append("b".into()));
//! let mut positions = [a?, b?];
//! positions.sort();
//! assert_eq!(positions, [Seq(0), Seq(1)]);
//! drop(appender); // the driver reports what is left, then gives the writer back
//! let writer = task.await??;
//! assert_eq!(writer.core().next_seq(), Seq(2));
//! # Ok(())
//! # }
//! ```

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use paros_core::Seq;
use thiserror::Error;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};

use crate::run::{RecordError, check_application_record};
use crate::service::JournalService;
use crate::writer::{Writer, WriterError};

/// The appender's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppenderConfig {
    /// Records per batch at most.
    pub batch_records_max: u32,
    /// Record bytes per batch at most (a batch of one record may hold more).
    pub batch_bytes_max: u64,
    /// How long a batch's first record waits for company before the batch is sent.
    pub linger: Duration,
    /// Record bytes appended and not yet reported, at most: `append` waits at this bound.
    pub bytes_in_flight_max: u64,
}

impl Default for AppenderConfig {
    fn default() -> Self {
        AppenderConfig {
            batch_records_max: 1024,
            batch_bytes_max: 1 << 20,
            linger: Duration::from_millis(5),
            bytes_in_flight_max: 8 << 20,
        }
    }
}

/// An [`AppenderConfig`] that is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum AppenderConfigError {
    #[error("a batch must be allowed at least one record")]
    /// A batch would be allowed no record (`batch_records_max` is 0).
    BatchRecordsZero,
    #[error("a batch must be allowed at least one byte")]
    /// A batch would be allowed no byte (`batch_bytes_max` is 0).
    BatchBytesZero,
    /// A full batch could never be in flight.
    #[error("bytes_in_flight_max {in_flight} is below batch_bytes_max {batch}")]
    InFlightBelowBatch {
        /// The `bytes_in_flight_max` asked for.
        in_flight: u64,
        /// The `batch_bytes_max` it must reach.
        batch: u64,
    },
    /// The bound must fit the semaphore that enforces it.
    #[error("bytes_in_flight_max {0} is beyond what can be counted (at most 2^32 - 1)")]
    InFlightTooLarge(u64),
}

impl AppenderConfig {
    /// Checks every bound.
    ///
    /// # Errors
    /// The first [`AppenderConfigError`] found.
    pub fn validate(&self) -> Result<(), AppenderConfigError> {
        if self.batch_records_max == 0 {
            return Err(AppenderConfigError::BatchRecordsZero);
        }
        if self.batch_bytes_max == 0 {
            return Err(AppenderConfigError::BatchBytesZero);
        }
        if self.bytes_in_flight_max < self.batch_bytes_max {
            return Err(AppenderConfigError::InFlightBelowBatch {
                in_flight: self.bytes_in_flight_max,
                batch: self.batch_bytes_max,
            });
        }
        if self.bytes_in_flight_max > u64::from(u32::MAX) {
            return Err(AppenderConfigError::InFlightTooLarge(self.bytes_in_flight_max));
        }
        Ok(())
    }
}

/// A batch the builder sealed: the records and one tag per record, in order.
#[derive(Debug, PartialEq, Eq)]
pub struct Batch<T> {
    /// The records, in append order.
    pub records: Vec<Bytes>,
    /// Each record's tag (the caller's, e.g. where to send its position), in the same order.
    pub tags: Vec<T>,
    /// The records' bytes in all.
    pub bytes: u64,
}

/// Gathers records into batches by count, bytes and linger time. Sans-IO: `now` is any
/// monotonic time the caller keeps (the driver's time since it started).
#[derive(Debug)]
pub struct BatchBuilder<T> {
    records_max: u32,
    bytes_max: u64,
    linger: Duration,
    records: Vec<Bytes>,
    tags: Vec<T>,
    bytes: u64,
    opened_at: Option<Duration>,
}

impl<T> BatchBuilder<T> {
    /// A builder with `config`'s batch bounds.
    ///
    /// # Errors
    /// [`AppenderConfigError`] when `config` is invalid.
    pub fn new(config: &AppenderConfig) -> Result<Self, AppenderConfigError> {
        config.validate()?;
        Ok(BatchBuilder {
            records_max: config.batch_records_max,
            bytes_max: config.batch_bytes_max,
            linger: config.linger,
            records: vec![],
            tags: vec![],
            bytes: 0,
            opened_at: None,
        })
    }

    /// Records gathered and not sealed.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no record is gathered.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Whether a record of `len` bytes may join the open batch (an empty batch takes any
    /// record). When it may not, [`seal`](Self::seal) first.
    pub fn fits(&self, len: usize) -> bool {
        self.records.is_empty()
            || (self.records.len() < self.records_max as usize
                && self.bytes.saturating_add(len as u64) <= self.bytes_max)
    }

    /// Whether the open batch is full by count or bytes: seal it now.
    pub fn is_full(&self) -> bool {
        self.records.len() >= self.records_max as usize || self.bytes >= self.bytes_max
    }

    /// Adds a record to the open batch.
    ///
    /// # Errors
    /// Gives the record and tag back when it does not [`fit`](Self::fits).
    pub fn push(&mut self, record: Bytes, tag: T, now: Duration) -> Result<(), (Bytes, T)> {
        if !self.fits(record.len()) {
            return Err((record, tag));
        }
        if self.records.is_empty() {
            self.opened_at = Some(now);
        }
        self.bytes += record.len() as u64;
        self.records.push(record);
        self.tags.push(tag);
        Ok(())
    }

    /// When the open batch's linger ends, if a batch is open.
    pub fn deadline(&self) -> Option<Duration> {
        self.opened_at.map(|t| t.saturating_add(self.linger))
    }

    /// Whether the open batch should be sent at `now`: full, or lingered long enough.
    pub fn is_due(&self, now: Duration) -> bool {
        !self.records.is_empty() && (self.is_full() || self.deadline().is_some_and(|d| now >= d))
    }

    /// Seals and returns the open batch, if any.
    pub fn seal(&mut self) -> Option<Batch<T>> {
        if self.records.is_empty() {
            return None;
        }
        self.opened_at = None;
        let bytes = std::mem::take(&mut self.bytes);
        Some(Batch { records: std::mem::take(&mut self.records), tags: std::mem::take(&mut self.tags), bytes })
    }
}

/// Why an append did not get a position.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AppendError {
    /// The record starts with the checkpoint magic.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// The record alone is over the bytes-in-flight bound: it could never be sent.
    #[error("a record of {len} bytes is over bytes_in_flight_max {max}")]
    RecordTooLarge {
        /// The record's length in bytes.
        len: usize,
        /// The appender's `bytes_in_flight_max`.
        max: u64,
    },
    /// The record's batch was not acknowledged, or the writer stopped.
    #[error(transparent)]
    Writer(#[from] WriterError),
    /// The driver is gone (it stopped, or was dropped).
    #[error("the appender's driver has stopped")]
    Closed,
}

impl AppendError {
    /// The service's refusal, when that is why the append failed.
    #[must_use]
    pub fn denial(&self) -> Option<&crate::Denial> {
        match self {
            AppendError::Writer(e) => e.denial(),
            _ => None,
        }
    }
}

/// One record on its way to the driver, with its reply and its share of the bound.
struct Item {
    record: Bytes,
    reply: oneshot::Sender<Result<Seq, AppendError>>,
    permit: OwnedSemaphorePermit,
}

/// A record's place in a batch: where to send its position.
struct Ticket {
    reply: oneshot::Sender<Result<Seq, AppendError>>,
    _permit: OwnedSemaphorePermit,
}

/// The handle records are appended through. Clone it freely; the driver stops once every
/// handle is dropped and everything appended is reported.
#[derive(Debug, Clone)]
pub struct Appender {
    tx: mpsc::Sender<Item>,
    units: Arc<Semaphore>,
    max: u64,
    stopped: Arc<Mutex<Option<AppendError>>>,
}

/// The half that runs the writer. Run [`run`](Self::run) to completion.
pub struct AppenderDriver<S: JournalService + 'static> {
    writer: Writer<S>,
    rx: mpsc::Receiver<Item>,
    builder: BatchBuilder<Ticket>,
    stopped: Arc<Mutex<Option<AppendError>>>,
}

impl<S: JournalService + 'static> std::fmt::Debug for AppenderDriver<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppenderDriver")
            .field("writer", &self.writer)
            .field("gathered", &self.builder.len())
            .finish_non_exhaustive()
    }
}

/// A spawned [`AppenderDriver`]: its writer back once every handle is dropped and all is
/// reported, or the error that stopped it.
pub type AppenderTask<S> = JoinHandle<Result<Writer<S>, AppendError>>;

/// An [`Appender`] to be, over a claimed [`Writer`], with [`AppenderConfig::default`] unless
/// [`config`](Self::config) says otherwise. From [`Appender::builder`].
#[must_use = "a builder does nothing until it is built or spawned"]
pub struct AppenderBuilder<S: JournalService + 'static> {
    writer: Writer<S>,
    config: AppenderConfig,
}

impl<S: JournalService + 'static> std::fmt::Debug for AppenderBuilder<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppenderBuilder").field("writer", &self.writer).field("config", &self.config).finish()
    }
}

impl<S: JournalService + 'static> AppenderBuilder<S>
where
    S::Journal: 'static,
{
    /// The appender's bounds, instead of the defaults.
    pub fn config(mut self, config: AppenderConfig) -> Self {
        self.config = config;
        self
    }

    /// The appender and its driver, for a caller that runs [`AppenderDriver::run`] itself.
    ///
    /// # Errors
    /// [`AppenderConfigError`] when the configuration is invalid.
    pub fn build(self) -> Result<(Appender, AppenderDriver<S>), AppenderConfigError> {
        Appender::new(self.writer, self.config)
    }

    /// The appender, its driver spawned on the current tokio runtime. The task ends once
    /// every [`Appender`] handle is dropped and everything appended is reported (giving the
    /// writer back), or with the error that stopped the driver.
    ///
    /// # Errors
    /// [`AppenderConfigError`] when the configuration is invalid.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn spawn(self) -> Result<(Appender, AppenderTask<S>), AppenderConfigError>
    where
        S::Journal: Send,
    {
        let (appender, driver) = self.build()?;
        Ok((appender, tokio::spawn(driver.run())))
    }
}

impl Appender {
    /// An appender over `writer`, which must have claimed the journal:
    /// `let (appender, task) = Appender::builder(writer).spawn()?;`.
    pub fn builder<S: JournalService + 'static>(writer: Writer<S>) -> AppenderBuilder<S>
    where
        S::Journal: 'static,
    {
        AppenderBuilder { writer, config: AppenderConfig::default() }
    }

    /// An appender over `writer` (which must have claimed the journal), and its driver.
    ///
    /// # Errors
    /// [`AppenderConfigError`] when `config` is invalid.
    pub fn new<S: JournalService + 'static>(
        writer: Writer<S>,
        config: AppenderConfig,
    ) -> Result<(Appender, AppenderDriver<S>), AppenderConfigError>
    where
        S::Journal: 'static,
    {
        let builder = BatchBuilder::new(&config)?;
        let max = config.bytes_in_flight_max;
        // Every queued record holds at least one unit, so the channel never holds more records
        // than there are units; its capacity is the same bound, capped to something allocatable.
        let capacity = usize::try_from(max).unwrap_or(usize::MAX).min(1 << 16);
        let (tx, rx) = mpsc::channel(capacity);
        let stopped = Arc::new(Mutex::new(None));
        let units = Arc::new(Semaphore::new(usize::try_from(max).unwrap_or(usize::MAX)));
        Ok((
            Appender { tx, units, max, stopped: Arc::clone(&stopped) },
            AppenderDriver { writer, rx, builder, stopped },
        ))
    }

    /// Appends `record`; resolves to its position once its batch is acknowledged. Waits first
    /// while the bytes in flight are at the bound.
    ///
    /// # Errors
    /// [`AppendError`].
    pub async fn append(&self, record: Bytes) -> Result<Seq, AppendError> {
        check_application_record(&record)?;
        let weight = record.len().max(1);
        if weight as u64 > self.max {
            return Err(AppendError::RecordTooLarge { len: record.len(), max: self.max });
        }
        let closed =
            || self.stopped.lock().unwrap_or_else(PoisonError::into_inner).clone().unwrap_or(AppendError::Closed);
        let Ok(units) = u32::try_from(weight) else {
            return Err(AppendError::RecordTooLarge { len: record.len(), max: self.max });
        };
        let Ok(permit) = Arc::clone(&self.units).acquire_many_owned(units).await else {
            return Err(closed());
        };
        let (reply, answer) = oneshot::channel();
        if self.tx.send(Item { record, reply, permit }).await.is_err() {
            return Err(closed());
        }
        answer.await.unwrap_or_else(|_| Err(closed()))
    }
}

impl<S: JournalService + 'static> AppenderDriver<S>
where
    S::Journal: 'static,
{
    /// Gathers, sends and reports until every handle is dropped and all is reported (`Ok`,
    /// giving the writer back), or the writer stops: then every record not yet sent gets the
    /// stopping error at once, the batches already in flight still get their own outcome (a
    /// batch after a failed one may have been written), and `run` returns that error.
    ///
    /// # Errors
    /// The [`AppendError`] that stopped the driver.
    pub async fn run(mut self) -> Result<Writer<S>, AppendError> {
        let epoch = Instant::now();
        let mut sealed: Option<Batch<Ticket>> = None;
        let mut sent: VecDeque<(Seq, Vec<Ticket>)> = VecDeque::new();
        let mut input_open = true;
        let mut stopping: Option<AppendError> = None;
        loop {
            let now = epoch.elapsed();
            if stopping.is_none() {
                if sealed.is_none() && (self.builder.is_due(now) || (!input_open && !self.builder.is_empty())) {
                    sealed = self.builder.seal();
                }
                if let Some(batch) = sealed.take() {
                    if let Some(view) = self.writer.core().superseded() {
                        sealed = Some(batch);
                        stopping = Some(self.stop(AppendError::Writer(WriterError::Superseded { view }), &mut sealed));
                    } else if self.writer.has_room(batch.bytes) {
                        match self.writer.submit(batch.records) {
                            Ok(seq) => sent.push_back((seq, batch.tags)),
                            Err(e) => {
                                fail(batch.tags, &AppendError::Writer(e.clone()));
                                stopping = Some(self.stop(AppendError::Writer(e), &mut sealed));
                            }
                        }
                    } else {
                        sealed = Some(batch);
                    }
                }
            }
            if (stopping.is_some() || !input_open) && sealed.is_none() && self.builder.is_empty() && sent.is_empty() {
                return match stopping {
                    Some(e) => Err(e),
                    None => Ok(self.writer),
                };
            }
            let linger = self.builder.deadline().filter(|_| sealed.is_none() && stopping.is_none()).map(|d| epoch + d);
            let taking = input_open && sealed.is_none() && stopping.is_none();
            tokio::select! {
                biased;
                report = self.writer.next_report(), if self.writer.in_flight() > 0 => {
                    let Some((seq, result)) = report else { continue };
                    let Some((first, tickets)) = sent.pop_front() else { continue };
                    debug_assert_eq!(first, seq, "reports come in position order");
                    match result {
                        Ok(written) => {
                            for (i, ticket) in (0u64..).zip(tickets) {
                                let _ = ticket.reply.send(Ok(Seq(written.seq.0 + i)));
                            }
                        }
                        Err(e) => {
                            fail(tickets, &AppendError::Writer(e.clone()));
                            if stopping.is_none() {
                                stopping = Some(self.stop(AppendError::Writer(e), &mut sealed));
                            }
                        }
                    }
                }
                item = self.rx.recv(), if taking => {
                    match item {
                        None => input_open = false,
                        Some(Item { record, reply, permit }) => {
                            let ticket = Ticket { reply, _permit: permit };
                            let now = epoch.elapsed();
                            if let Err((record, ticket)) = self.builder.push(record, ticket, now) {
                                sealed = self.builder.seal();
                                // An empty builder takes any record.
                                if let Err((_, ticket)) = self.builder.push(record, ticket, now) {
                                    let _ = ticket.reply.send(Err(AppendError::Closed));
                                }
                            }
                        }
                    }
                }
                () = sleep_until(linger.unwrap_or(epoch)), if linger.is_some() => {}
            }
        }
    }

    /// Starts stopping with `e`: every record not yet sent gets it, later appends get it too.
    fn stop(&mut self, e: AppendError, sealed: &mut Option<Batch<Ticket>>) -> AppendError {
        *self.stopped.lock().unwrap_or_else(PoisonError::into_inner) = Some(e.clone());
        if let Some(batch) = sealed.take() {
            fail(batch.tags, &e);
        }
        if let Some(batch) = self.builder.seal() {
            fail(batch.tags, &e);
        }
        self.rx.close();
        while let Ok(item) = self.rx.try_recv() {
            let _ = item.reply.send(Err(e.clone()));
        }
        e
    }
}

fn fail(tickets: Vec<Ticket>, e: &AppendError) {
    for ticket in tickets {
        let _ = ticket.reply.send(Err(e.clone()));
    }
}
