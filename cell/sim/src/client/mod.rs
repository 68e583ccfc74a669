//! The workload's clients: a stand-in for `paros-client`'s `Writer` and `Reader` until that crate
//! exists (then this module is replaced by thin drivers over it; the world only sees the types
//! below).
//!
//! Clients are sans-IO like the core: the world wakes them and hands them replies; they answer
//! with requests to send (through [`ClientIo`]) and with what they learned, for the audit.

mod prober;
mod reader;
mod writer;

pub use prober::{Prober, ProberParams};
pub use reader::{Reader, ReaderParams};
pub use writer::{Writer, WriterParams};

use bytes::Bytes;
use paros_core::{Call, CallAnswer, NodeId, ReadAnswer, ReadRequest};

use crate::check::Probe;

/// A request a client sends to one machine.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Request {
    Call(Call),
    Read(ReadRequest),
}

/// What came back for a request.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Reply {
    Call(CallAnswer),
    Read(ReadAnswer),
    /// No answer within the client's timeout: the call may or may not have taken effect.
    TimedOut,
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
    /// The client folded `record` at `seq` into its hash chain, which started at `origin`.
    Folded { seq: u64, record: Bytes, origin: u64, chain: u64 },
    /// The journal was truncated past the cursor: positions `[from, resumed_at)` were skipped.
    Gap { from: u64, resumed_at: u64 },
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

/// The position a workload record was written for (every record names it after its last `@`).
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

/// The chain a client starts at `origin` with (after a gap, or at the start of the journal).
#[must_use]
pub fn chain_origin(origin: u64) -> u64 {
    chain_step(0x0123_4567_89ab_cdef, origin, b"origin")
}
