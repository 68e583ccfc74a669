//! Reading through the layers a round passes on its way into fjall.
//!
//! A round is readable the moment it is written: first as a pending round (see
//! [`crate::apply`]), then as a change in the applier's `log` buffer or the run being ingested,
//! then in fjall. A [`View`] reads all of them, newest first.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::Arc;

use fjall::{Database, Readable};
use paros_node::ports::{StoreError, StoreOp};

use crate::apply::{Round, Shared};
use crate::error::engine;
use crate::gens;
use crate::keys;
use crate::spaces::{Space, Spaces};

/// Records `value` for `key` unless a newer layer already did.
fn first_wins<'v>(merged: &mut BTreeMap<Vec<u8>, Option<Val<'v>>>, key: &[u8], value: Option<Val<'v>>) {
    if let std::collections::btree_map::Entry::Vacant(e) = merged.entry(key.to_vec()) {
        e.insert(value);
    }
}

/// A value read through a [`View`]: from fjall or from a pending round.
pub(crate) enum Val<'a> {
    /// From fjall, or from the `log` buffer (a shared slice).
    Disk(fjall::Slice),
    Mem(&'a [u8]),
}

impl Deref for Val<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Val::Disk(s) => s,
            Val::Mem(b) => b,
        }
    }
}

/// fjall with the pending rounds and the `log` buffer over it. The rounds are taken first, then
/// (at each read) the buffer, then a fjall snapshot: a change that leaves one of them reached
/// the next before it left.
pub(crate) struct View<'s> {
    db: &'s Database,
    shared: &'s Shared,
    spaces: &'s Spaces,
    mem: Vec<Arc<Round>>,
}

impl<'s> View<'s> {
    pub(crate) fn new(shared: &'s Shared, db: &'s Database, spaces: &'s Spaces) -> View<'s> {
        let mem = shared.overlay();
        View { db, shared, spaces, mem }
    }

    /// A key of any keyspace but `log`.
    pub(crate) fn get(&self, space: Space, key: &[u8]) -> Result<Option<Val<'_>>, StoreError> {
        debug_assert!(space != Space::Log, "log keys are read by range");
        for round in self.mem.iter().rev() {
            if let Some(c) = round.find(space, key) {
                return Ok(c.value.as_deref().map(Val::Mem));
            }
        }
        Ok(self.db.snapshot().get(self.spaces.of(space), key).map_err(engine(StoreOp::Read))?.map(Val::Disk))
    }

    /// Up to `limit` keys of `space` in `lo..=hi` with their values, in key order.
    ///
    /// Layers are read newest first (pending rounds, the buffer, the run being ingested,
    /// fjall), the first version of a key found wins. A removal in a newer layer can hide one
    /// key of each older one, so an older layer is read for `limit` plus the removals seen so
    /// far: the smallest `limit` live keys are then always among what was read.
    pub(crate) fn range(
        &self,
        space: Space,
        lo: &[u8],
        hi: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Val<'_>)>, StoreError> {
        let ks = self.spaces.of(space);
        let mut merged: BTreeMap<Vec<u8>, Option<Val<'_>>> = BTreeMap::new();
        let mut removals = 0usize;
        for c in self.mem.iter().rev().flat_map(|r| r.range(space, lo, hi)) {
            removals += usize::from(c.value.is_none());
            first_wins(&mut merged, &c.key, c.value.as_deref().map(Val::Mem));
        }
        if space == Space::Log {
            let logs = self.shared.logs();
            for run in std::iter::once(&logs.active).chain(logs.sealed.iter().map(|r| &**r)) {
                let want = limit.saturating_add(removals);
                let (mut puts, mut seen_removals) = (0usize, 0usize);
                for (k, v) in run.range(lo, hi) {
                    if puts >= want {
                        break;
                    }
                    match v {
                        Some(v) => {
                            puts += 1;
                            first_wins(&mut merged, &k, Some(Val::Disk(v.clone())));
                        }
                        None => {
                            seen_removals += 1;
                            first_wins(&mut merged, &k, None);
                        }
                    }
                }
                removals += seen_removals;
            }
        }
        let snap = self.db.snapshot();
        if space == Space::Log {
            let (Some((journal, from)), Some((same, to))) = (keys::split_log(lo), keys::split_log(hi)) else {
                return Err(StoreError::RangeAcrossJournals { lo: lo.to_vec(), hi: hi.to_vec() });
            };
            if journal != same {
                return Err(StoreError::RangeAcrossJournals { lo: lo.to_vec(), hi: hi.to_vec() });
            }
            let since = self.shared.floors.since(&journal);
            let want = limit.saturating_add(removals);
            for (k, v) in
                gens::read_journal(&snap, &self.spaces.records, &self.spaces.gens, &journal, since, (from, to), want)?
            {
                first_wins(&mut merged, &k, Some(Val::Disk(v)));
            }
            return Ok(merged.into_iter().filter_map(|(k, v)| Some((k, v?))).take(limit).collect());
        }
        if merged.is_empty() {
            let mut out = Vec::new();
            for item in snap.range(ks, lo..=hi).take(limit) {
                let (k, v) = item.into_inner().map_err(engine(StoreOp::Read))?;
                out.push((k.to_vec(), Val::Disk(v)));
            }
            return Ok(out);
        }
        for item in snap.range(ks, lo..=hi).take(limit.saturating_add(removals)) {
            let (k, v) = item.into_inner().map_err(engine(StoreOp::Read))?;
            first_wins(&mut merged, &k, Some(Val::Disk(v)));
        }
        Ok(merged.into_iter().filter_map(|(k, v)| Some((k, v?))).take(limit).collect())
    }
}
