//! The registry's placement port, for this process's nodes.

use paros_core::{Assignment, JournalKey};
use paros_node::PlaceError;
use paros_node::shell::NodeControl;
use paros_registry::daemon::{Placer, PlacerStopped};

/// A running node as the registry's follower sees it: somewhere to place and remove journals.
#[derive(Clone, Debug)]
pub struct NodePlacer(pub NodeControl);

impl Placer for NodePlacer {
    type Refusal = PlaceError;

    async fn place_all(&self, journals: Vec<Assignment>) -> Result<Vec<Result<(), PlaceError>>, PlacerStopped> {
        self.0.place_all(journals).await.map_err(|_| PlacerStopped)
    }

    async fn remove(&self, journal: JournalKey, epoch: u64) -> Result<bool, PlacerStopped> {
        self.0.remove(journal, epoch).await.map_err(|_| PlacerStopped)
    }
}
