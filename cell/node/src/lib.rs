//! paros-node: the node host. Many journals per machine, one storage batch and one sync per
//! round, ports for storage and transport, and an in-memory store with crash semantics.

pub mod fetch;
pub mod host;
pub mod mem_store;
pub mod ports;
pub mod pump;
pub mod read_cache;
pub mod rpc;
pub mod schedule;
pub mod shell;
pub mod timing;

pub use fetch::{FetchJob, Fetched};
pub use host::{BootError, Clocked, Early, Host, HostStats, LifeEvent, Owed, PendingRound, PlaceError, RoundOutput};
pub use mem_store::MemStore;
pub use ports::Incarnation;
pub use pump::{Effects, Persist, Pump};
pub use read_cache::{Publication, ReadCache, ReadCacheConfig, ReadCacheStats};
