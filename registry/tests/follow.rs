//! A node hosts exactly what the directory places on it: the diff a follower applies.

mod common;

use std::collections::BTreeMap;

use common::*;
use paros_core::ids::{JournalId, JournalKey, NodeId, TenantId};
use paros_registry::follow::{changes, placed_on};

fn registry_key() -> JournalKey {
    JournalKey { tenant: TenantId(0), journal: JournalId(0x4e6) }
}

#[test]
fn a_created_journal_is_placed_on_its_voters_only_and_a_deleted_one_removed() {
    let mut b = Book::formed();
    assert!(b.run(create(100, 7, "orders", &[1, 2, 3])).is_accepted());
    let key = JournalKey { tenant: TenantId(100), journal: JournalId(7) };
    let mut hosted = BTreeMap::new();
    for node in [1, 2, 3] {
        let c = changes(&b.dir, NodeId(node), &hosted, &registry_key());
        assert_eq!(c.place.len(), 1, "node {node} is a voter of the new journal");
        assert_eq!((c.place[0].key, c.place[0].epoch), (key, 0));
        assert_eq!(c.place[0].config.voters, vec![NodeId(1), NodeId(2), NodeId(3)]);
        assert!(c.remove.is_empty());
    }
    assert!(changes(&b.dir, NodeId(9), &hosted, &registry_key()).is_empty(), "a node that is no voter hosts nothing");

    hosted = placed_on(&b.dir, NodeId(1));
    hosted.insert(
        registry_key(),
        paros_core::JournalConfig {
            mode: paros_core::journal::WriterMode::Single,
            voters: vec![NodeId(1)],
            learners: vec![],
        },
    );
    assert!(changes(&b.dir, NodeId(1), &hosted, &registry_key()).is_empty(), "hosting what is placed changes nothing");

    assert!(b.run(delete(100, "orders")).is_accepted());
    let c = changes(&b.dir, NodeId(1), &hosted, &registry_key());
    assert_eq!(c.remove, vec![key], "the deleted journal goes; the registry journal stays");
    assert!(c.place.is_empty());
}
