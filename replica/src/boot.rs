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
    // Subscribed before its journals are restored: each comes back as a replica of the tier,
    // not as a joining voter (what a machine fed by no tier hosts a journal not naming it as).
    let host = Host::boot_fed(store, id, tunables, seed, asleep, &[feed])?;
    if host.id() != id {
        return Err(BootError::WrongIdentity { expected: id, found: host.id() });
    }
    Ok(Booted { host, fresh })
}
