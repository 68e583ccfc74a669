//! What each journal's readers off the node's thread may serve (see [`crate::read_cache`]):
//! after a step, every journal stepped, advanced, put to sleep or forgotten since the last
//! publication is told again, when anything a reader sees of it changed.

use paros_core::journal::JournalView;
use paros_core::{JournalKey, Life, ReplicaState, Seq, Slot};

use super::Host;
use super::hosted::Hosted;
use crate::ports::LogStore;
use crate::read_cache::Publication;

/// What a journal's readers were last told of it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Told {
    life: Life,
    view: JournalView,
    serving: bool,
    applied: Slot,
}

impl<S: LogStore> Host<S> {
    /// Publish what readers off the node's thread may serve ([`Host::take_publications`]), or
    /// stop publishing (and forget what was told).
    pub fn publish_reads(&mut self, on: bool) {
        self.published = on.then(std::collections::HashMap::new);
        self.round.publish = on.then(std::collections::BTreeSet::new);
    }

    /// The tunables its journals run with (a read cache pages by them).
    #[must_use]
    pub fn tunables(&self) -> paros_core::Tunables {
        self.tunables
    }

    /// What changed for readers since the last call, per journal, in the order to apply it.
    /// Empty unless [`Host::publish_reads`] is on.
    pub fn take_publications(&mut self) -> Vec<(JournalKey, Publication)> {
        let (Some(keys), Some(published)) = (self.round.publish.as_mut(), &mut self.published) else {
            return Vec::new();
        };
        let keys = std::mem::take(keys);
        let mut out = Vec::new();
        for key in keys {
            let publication = match self.journals.get(&key) {
                Some(Hosted::Voter(v)) => {
                    let told =
                        Told { life: v.life(), view: v.state().view(), serving: true, applied: v.chosen_up_to() };
                    tell(published, key, told, |from| v.window_records(from))
                }
                Some(Hosted::Replica(r)) => {
                    let serving = r.serving_state() == ReplicaState::Serving;
                    let told = Told { life: r.life(), view: r.state().view(), serving, applied: r.chosen_up_to() };
                    tell(published, key, told, |from| r.window_records(from))
                }
                Some(Hosted::Dormant(_)) | None => published.remove(&key).map(|_| Publication::Gone),
            };
            out.extend(publication.map(|p| (key, p)));
        }
        out
    }
}

/// The publication that brings `key`'s readers from what they were told to `told`, if it
/// changed: the records from where the last one of the same life ended (all the window holds,
/// in a new life).
fn tell(
    published: &mut std::collections::HashMap<JournalKey, Told>,
    key: JournalKey,
    told: Told,
    records: impl FnOnce(Seq) -> (Seq, Vec<bytes::Bytes>),
) -> Option<Publication> {
    let last = published.insert(key, told);
    if last == Some(told) {
        return None;
    }
    let from = match last {
        Some(last) if last.life == told.life => last.view.next_seq,
        _ => Seq(0),
    };
    let (start, records) = records(from);
    Some(Publication::Applied {
        life: told.life,
        view: told.view,
        serving: told.serving,
        applied: told.applied,
        start,
        records,
    })
}
