//! paros-client: the client library's decisions, as sans-IO state machines under thin async
//! wrappers.
//!
//! Every decision is a deterministic state machine the caller drives: no IO, no clock, no
//! randomness of its own (jitter and uuids come from a seeded [`paros_core::rng::Rng`], time is
//! passed in), no async — so the simulation drives the very same machines. The async wrappers
//! ([`Client`], [`Writer`], [`Appender`], [`Reader`]) only carry the machines' steps out over a
//! [`JournalService`] and sleep the delays they return (`tokio::time`, so a paused test clock
//! drives them); they spawn nothing. Their ordinary constructors seed the jitter and draw the
//! writers' fences from the OS's random generator, so two writers never draw the same fence;
//! a simulation or a test passes its seeds through the `with_seed` constructors instead.
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
//! Positions and views are paros-core's [`Seq`] and [`JournalView`] (see [`types`]), so the
//! library judges exactly the values the cell answers with. Records are [`bytes::Bytes`].

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
pub use service::{CallReply, Denial, JournalService, ReadAnswer, ReadParams, Route};
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
