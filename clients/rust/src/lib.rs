//! paros-client: the Rust library for paros journals — ordered, durable logs of opaque
//! records, each with one fenced writer (or many appenders) and any number of readers.
//!
//! # Start here
//!
//! Sign up at a gateway (`paros dev` serves one at `http://127.0.0.1:7400`), create a journal,
//! write, truncate, and read back — the reader reports the truncated range as a gap, never
//! silently:
//!
//! ```no_run
//! use paros_client::{GatewayClient, JournalName, ReadItem, Seq};
//!
//! # async fn story() -> Result<(), Box<dyn std::error::Error>> {
//! let owner = GatewayClient::connect("http://127.0.0.1:7400")?.signup(&"acme".parse()?).await?.client;
//! let orders: JournalName = "orders".parse()?;
//! owner.create_journal(&orders).await?;
//! let client = owner.client();
//! let mut writer = client.writer(orders.clone()).claim().await?;
//! for i in 0..100 {
//!     writer.write(vec![format!("record {i}").into()]).await?;
//! }
//! writer.truncate(Seq(50)).await?;
//! for item in client.reader(orders).build()?.read_to_tail().await? {
//!     match item {
//!         ReadItem::Gap { from, to } => println!("gap [{from}, {to})"),
//!         ReadItem::Record { seq, data } => println!("{seq}: {}", String::from_utf8_lossy(&data)),
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! With a token already in hand, [`Client::connect`]`(url, token)` is the one call to start
//! from. The same [`Client`], [`Writer`] and [`Reader`] run over any [`JournalService`]: over
//! HTTP ([`HttpService`]), inside the cell (paros-embedded's `InCell`), or over the in-memory
//! [`fake`] this example runs against:
//!
//! ```
//! use paros_client::fake::FakeService;
//! use paros_client::{Client, ClientConfig, ReadItem, Seq};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::new(FakeService::new("orders", vec![]), ClientConfig::default())?;
//! let mut writer = client.writer("orders".to_owned()).claim().await?;
//! let written = writer.write(vec!["a".into(), "b".into(), "c".into()]).await?;
//! assert_eq!((written.seq, written.count), (Seq(0), 3));
//! writer.truncate(Seq(2)).await?;
//!
//! let mut reader = client.reader("orders".to_owned()).build()?;
//! let items = reader.read_to_tail().await?;
//! assert_eq!(items[0], ReadItem::Gap { from: Seq(0), to: Seq(2) });
//! assert_eq!(items[1], ReadItem::Record { seq: Seq(2), data: "c".into() });
//! # Ok(())
//! # }
//! ```
//!
//! A [`Reader`] is also a [`Stream`] of records and gaps that follows the journal's tail;
//! [`Writer::write_all`] pipelines a stream of batches; an [`Appender`] takes one record at a
//! time and batches them; a [`Folder`] and a [`Checkpointer`] keep an application state small
//! by checkpoint-and-truncate. Every refusal — a bad token, a missing scope, a quota — is one
//! [`Denial`], with the gateway's message, whichever part meets it. The crate's examples
//! (`clients/rust/examples/`) run against `paros dev`.
//!
//! # How it is built
//!
//! Every decision is a deterministic state machine the caller drives: no IO, no clock, no
//! randomness of its own (jitter and uuids come from a seeded [`Rng`], time is passed in), no
//! async — so the simulation drives the very same machines. The async wrappers ([`Client`],
//! [`Writer`], [`Appender`], [`Reader`]) only carry the machines' steps out over a
//! [`JournalService`] and sleep the delays they return (`tokio::time`, so a paused test clock
//! drives them); only [`AppenderBuilder::spawn`] spawns a task. Their ordinary constructors
//! seed the jitter and draw the writers' fences from the OS's random generator, so two writers
//! never draw the same fence; a simulation or a test passes its seeds through the `with_seed`
//! constructors instead.
//!
//! A guided tour:
//! - [`run`]: the binary format of a *checkpoint run* — `Begin`, `Chunk`s, `End` — each an
//!   ordinary journal record marked by [`run::MAGIC`]; and [`check_application_record`], which
//!   refuses an application record that would be mistaken for one.
//! - [`Checkpointable`]: what an application state offers: apply a record, encode itself,
//!   decode itself.
//! - [`Folder`]: a pure fold of a journal's records into a [`Checkpointable`] state that
//!   recognises runs, jumps over gaps by restoring from a run, and verifies runs it could have
//!   written itself.
//! - [`Checkpointer`]: the owner's side: when a checkpoint is due, the records of a run to
//!   append, and the truncation to ask for once `End` is acknowledged.
//! - [`ReaderCursor`]: a read cursor that never moves backwards and reports every truncated
//!   range it skips as a gap; [`Reader`] reads with it over a service, and follows the tail.
//! - [`service`]: the port every async part talks through ([`JournalService`]).
//! - [`policy`]: the retry, redirect, backoff and ambiguity-settling policy of one call
//!   ([`CallPolicy`]), and the retry policy of one read within a deadline ([`ReadPolicy`]);
//!   [`client`]: the async [`Client`] that carries them out.
//! - [`writer`]: the fenced [`Writer`] — claim, pipelined writes at the tail, truncate, stop for
//!   good when superseded — over its sans-IO [`WriterCore`].
//! - [`appender`]: record-at-a-time appends gathered into batches ([`BatchBuilder`]) with a
//!   bytes-in-flight bound, over a [`Writer`].
//! - [`http`] (feature `http`, on by default): [`HttpService`], the service over a gateway's
//!   HTTP API v1, and [`GatewayClient`], the tenant's other calls and the SSE tail.
//! - [`fake`]: an in-memory service folding with paros-core's own fold, with scripted faults,
//!   for tests (here and in other crates).
//!
//! Positions, views and leader uuids are paros-core's [`Seq`], [`JournalView`] and
//! [`LeaderUuid`] — the same types paros-api's bodies carry — so the library judges exactly the
//! values the cell answers with. Records are [`Bytes`].

#![warn(missing_docs)]

pub mod appender;
pub mod checkpointable;
pub mod checkpointer;
pub mod client;
#[cfg(feature = "api")]
pub mod convert;
mod entropy;
pub mod fake;
pub mod folder;
#[cfg(feature = "http")]
pub mod http;
pub mod policy;
pub mod reader;
pub mod run;
pub mod service;
pub mod types;
pub mod write_all;
pub mod writer;

pub use appender::{
    AppendError, Appender, AppenderBuilder, AppenderConfig, AppenderConfigError, AppenderDriver, AppenderTask, Batch,
    BatchBuilder,
};
pub use checkpointable::Checkpointable;
pub use checkpointer::{
    Checkpointer, CheckpointerBuilder, CheckpointerConfig, CheckpointerError, ConfigError, PlannedRun, Truncate,
};
pub use client::Client;
pub use folder::{DropReason, FoldError, FoldEvent, Folder, FolderConfig};
#[cfg(feature = "http")]
pub use http::{GatewayClient, GatewayError, HttpConfig, HttpService, SignedUp, SseEvent, SseParser, Tail};
pub use policy::{
    AnswerError, CallPolicy, ClientConfig, ClientConfigError, Decided, ReadDeadline, ReadPolicy, ReadStep, Step,
};
pub use reader::{DEFAULT_FOLLOW_WAIT_MS, ReadItem, ReaderBuilder};
pub use reader::{
    ReadConsistency, ReadRequest, Reader, ReaderConfig, ReaderConfigError, ReaderCursor, ReaderError, ReaderOutcome,
};
pub use run::{MAGIC, RecordError, RunDecodeError, RunRecord, check_application_record};
pub use service::{CallReply, Denial, JournalService, ReadAnswer, ReadParams, ReadServers, Route};
pub use types::{JournalView, Seq};

// What the public signatures name, so a user needs no other crate to call them.
pub use bytes::{self, Bytes};
pub use futures_core::Stream;
#[cfg(feature = "api")]
pub use paros_api::{self, CreateJournalRequest, JournalName, TenantName, Token, WriterMode};
pub use paros_core::journal::{Outcome, TooLarge};
pub use paros_core::rng::Rng;
pub use paros_core::{self, Call, CallAnswer, CallId, Consistency, LeaderUuid, NodeId};
pub use write_all::WriteAll;
pub use writer::{
    Completion, Writer, WriterBuilder, WriterConfig, WriterConfigError, WriterCore, WriterError, Written,
};
