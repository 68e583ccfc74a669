//! The workload's clients: thin drivers over `paros-client`'s sans-IO machines (the library the
//! cell's users run). A writer is a [`paros_client::WriterCore`] whose every call is carried by a
//! [`paros_client::CallPolicy`] (retries, redirects, backoff and the settling of ambiguous calls
//! are the library's); a checkpointing writer also folds its journal with a
//! [`paros_client::Folder`] and checkpoints it with a [`paros_client::Checkpointer`]; a reader is a
//! [`paros_client::ReaderCursor`] feeding a `Folder`. A multi-writer journal has several
//! [`Appender`]s instead of a writer, each append an unfenced Write carried by a
//! `CallPolicy` (the library has no sans-IO appender core for that mode; see `appender.rs`). The
//! prober (adversarial reads) is the workload's own.
//!
//! Clients are sans-IO like the core: the world wakes them (the time) and hands them replies (a
//! reply that never comes is [`Reply::TimedOut`] after the world's call timeout); they answer
//! with requests to send (through [`ClientIo`]) and with what they learned, for the audit.

mod appender;
mod call;
mod prober;
mod reader;
mod state;
mod writer;

pub use appender::{Appender, AppenderParams};
pub use prober::{Prober, ProberParams};
pub use reader::{Reader, ReaderParams};
pub use state::Chain;
pub use writer::{CheckpointParams, Writer, WriterParams};

use bytes::Bytes;
use paros_core::{Call, CallAnswer, NodeId, ReadAnswer, ReadRequest};

use crate::check::{Probe, ReadReport};

/// The client that writes a journal: the single-writer [`Writer`] of a single-writer journal, or
/// one of the racing [`Appender`]s of a multi-writer journal.
#[derive(Debug)]
pub enum WriterClient {
    Single(Box<Writer>),
    Multi(Box<Appender>),
}

impl WriterClient {
    /// True while a call is under way.
    #[must_use]
    pub fn busy(&self) -> bool {
        match self {
            WriterClient::Single(w) => w.busy(),
            WriterClient::Multi(a) => a.busy(),
        }
    }

    /// A checkpointing writer folding the journal: the first position its whole state lacks
    /// (appenders fold nothing).
    #[must_use]
    pub fn folding_at(&self) -> Option<u64> {
        match self {
            WriterClient::Single(w) => w.folding_at(),
            WriterClient::Multi(_) => None,
        }
    }

    /// The journal's voters changed: the calls from now on ask these.
    pub fn set_voters(&mut self, voters: Vec<paros_core::NodeId>) {
        match self {
            WriterClient::Single(w) => w.set_voters(voters),
            WriterClient::Multi(a) => a.set_voters(voters),
        }
    }

    /// Time passed.
    pub fn wake(&mut self, now: u64, ctx: ClientCtx, io: &mut ClientIo) {
        match self {
            WriterClient::Single(w) => w.wake(now, ctx, io),
            WriterClient::Multi(a) => a.wake(now, ctx, io),
        }
    }

    /// The reply to `token` arrived from `from` (`None` for a timeout).
    pub fn on_reply(&mut self, now: u64, token: u64, from: Option<NodeId>, reply: Reply, io: &mut ClientIo) {
        match self {
            WriterClient::Single(w) => w.on_reply(now, token, from, reply, io),
            WriterClient::Multi(a) => a.on_reply(now, token, reply, io),
        }
    }
}

/// A request a client sends to one machine.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Request {
    /// A call under its own id (a `CallPolicy`'s, the same on every send of the call), or
    /// under the send's own (`None`: the world's request number).
    Call(Option<paros_core::CallId>, Call),
    Read(ReadRequest),
}

/// What came back for a request.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Reply {
    Call(CallAnswer),
    Read(ReadAnswer),
    /// No answer within the client's timeout: the call may or may not have taken effect.
    TimedOut,
    /// The server does not host the journal (a seat moved away from it): nothing was done.
    UnknownJournal,
    /// The connection was refused (the machine is gone for good: its wiped store refused to
    /// boot): the request never reached a server, and another may be asked.
    Refused,
}

/// A request the client wants sent; `token` comes back with its reply.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Outgoing {
    pub token: u64,
    pub to: NodeId,
    pub request: Request,
    /// Set for the workload's deliberate odd inputs (recorded in the history).
    pub probe: Option<Probe>,
}

/// What a client learned, for the audit.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum ClientEvent {
    /// A write was acknowledged (`Accepted` or `Duplicate`): `records` hold `[seq, seq + len)`.
    Acked { seq: u64, records: Vec<Bytes> },
    /// A page handed the client `record` at `seq` (a reader, or a checkpointing writer catching
    /// up).
    Delivered { seq: u64, record: Bytes },
    /// The application record at `seq` was applied: the folded state's chain after it (every
    /// folded state covers the whole journal below `seq`, restored from a run or not).
    Folded { seq: u64, chain: u64 },
    /// A complete run opened at `begin` was compared with the client's own whole state.
    RunChecked { begin: u64, agreed: bool },
    /// The client's state was replaced by the run opened at `begin`.
    Restored { begin: u64 },
    /// The journal was truncated past the cursor: positions `[from, resumed_at)` were skipped.
    Gap { from: u64, resumed_at: u64 },
    /// The library refused an answer as contradicting its request or itself.
    Refused { why: String },
    /// What a cursor reader reported of the reply just handed to it (recorded on its line).
    Reported(ReadReport),
}

/// What the world tells a client when it wakes it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ClientCtx {
    /// The lowest cursor of every reader of this journal still folding (`None`: no such reader).
    /// Truncations stay at or below it.
    pub clamp: Option<u64>,
    /// The run is winding down: start nothing new, finish what is in flight.
    pub stopping: bool,
}

/// A client's requests and observations from one callback.
#[derive(Debug, Default)]
pub struct ClientIo {
    pub sends: Vec<Outgoing>,
    pub events: Vec<ClientEvent>,
    next_token: u64,
}

impl ClientIo {
    /// An outbox whose tokens continue from `next_token`.
    #[must_use]
    pub fn new(next_token: u64) -> ClientIo {
        ClientIo { sends: Vec::new(), events: Vec::new(), next_token }
    }

    /// Queues `request` to `to` and returns its token.
    pub fn send(&mut self, to: NodeId, request: Request) -> u64 {
        self.push(to, request, None)
    }

    /// Queues `request`, one of the workload's deliberate odd inputs, to `to` and returns its
    /// token.
    pub fn send_probe(&mut self, to: NodeId, request: Request, probe: Probe) -> u64 {
        self.push(to, request, Some(probe))
    }

    fn push(&mut self, to: NodeId, request: Request, probe: Option<Probe>) -> u64 {
        let token = self.next_token;
        self.next_token += 1;
        self.sends.push(Outgoing { token, to, request, probe });
        token
    }

    /// The next unused token.
    #[must_use]
    pub fn next_token(&self) -> u64 {
        self.next_token
    }
}

/// The position a single-writer workload record was written for (every such record names it after
/// its last `@`; an appender's records name no position).
#[must_use]
pub fn record_position(record: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(record).ok()?;
    s.rsplit_once('@')?.1.parse().ok()
}

/// One step of a client's hash chain.
#[must_use]
pub fn chain_step(chain: u64, seq: u64, record: &[u8]) -> u64 {
    let mut h = chain ^ 0xcbf2_9ce4_8422_2325;
    for b in seq.to_be_bytes().iter().chain(record) {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The chain of an empty journal.
#[must_use]
pub fn chain_origin() -> u64 {
    chain_step(0x0123_4567_89ab_cdef, 0, b"origin")
}
