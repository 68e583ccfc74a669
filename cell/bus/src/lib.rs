//! paros-bus: the [`Transport`](paros_node::ports::Transport) and [`Rpc`](paros_node::rpc::Rpc)
//! ports of the node host, implemented over a message bus.
//!
//! - [`InProcessBus`]: bounded tokio channels inside one process — the embedded default
//!   (`paros dev`) and most tests. Every node registers an inbox and gets a [`BusEndpoint`]
//!   that sends protocol batches (lossy, never blocking) and makes requests (waiting, bounded
//!   by a deadline).
//! - [`codec`]: the wire format for bus messages that leave the process (a version byte, then
//!   postcard), used by the NATS implementation.
//!
//! Both implementations hand a node the same thing: a receiver of
//! [`Incoming`](paros_node::rpc::Incoming) items, one per protocol batch or request.

pub mod codec;
pub mod in_process;

pub use codec::{CodecError, WIRE_VERSION, decode, encode};
pub use in_process::{BusEndpoint, BusStats, InProcessBus};
