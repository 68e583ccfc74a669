//! Booting a replica machine.

use paros_core::{NodeId, Tunables};
use paros_node::Host;
use paros_node::host::BootError;
use paros_node::ports::LogStore;

/// A replica host, booted, and whether its store started empty.
#[derive(Debug)]
pub struct Booted<S: LogStore> {
    pub host: Host<S>,
    /// The store held no identity: a first start, or a replica that lost its disk. It relearns
    /// every journal of its tier under a new incarnation (fresh lives, every gate closed).
    pub fresh: bool,
}

/// Boots replica `id` of the tier fed at `feed` over `store` (every journal dormant when
/// `asleep`). `seed` must be fresh for every boot, as for [`Host::boot`].
///
/// Unlike a voter, a replica whose store is empty under its own id boots: it promised nothing,
/// so forgetting is safe, and it serves no read of a journal before it has caught up again.
///
/// # Errors
/// [`BootError::WrongIdentity`] for a store that belongs to another machine; a storage fault.
pub fn boot<S: LogStore>(
    store: S,
    id: NodeId,
    feed: NodeId,
    tunables: Tunables,
    seed: u64,
    asleep: bool,
) -> Result<Booted<S>, BootError> {
    let fresh = store.identity()?.is_none();
    let boot = if asleep { Host::boot_asleep } else { Host::boot };
    let mut host = boot(store, None, id, tunables, seed)?;
    if host.id() != id {
        return Err(BootError::WrongIdentity { expected: id, found: host.id() });
    }
    host.join_feed(feed);
    Ok(Booted { host, fresh })
}
