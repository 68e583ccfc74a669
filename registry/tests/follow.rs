//! A node hosts exactly what the directory places on it: the diff a follower applies.

mod common;

use std::collections::BTreeMap;

use common::*;
use paros_core::ids::{JournalId, JournalKey, NodeId, TenantId};
use paros_registry::Command;
use paros_registry::follow::{changes, placed_on};

fn registry_key() -> JournalKey {
    JournalKey { tenant: TenantId(0), journal: JournalId(0x4e6) }
}

#[test]
fn a_created_journal_is_placed_on_its_voters_only_and_a_deleted_one_removed() {
    let mut b = Book::formed();
    assert!(b.run(create(100, 7, "orders", &[1, 2, 3])).is_accepted());
    let key = JournalKey { tenant: TenantId(100), journal: JournalId(7) };
    // The members host the registry journal as formation placed it.
    let registry = b.dir.registry_journal().expect("formed").config();
    let mut hosted = BTreeMap::from([(registry_key(), registry)]);
    for node in [1, 2, 3] {
        let c = changes(&b.dir, NodeId(node), &hosted, &registry_key());
        assert_eq!(c.place.len(), 1, "node {node} is a voter of the new journal");
        assert_eq!((c.place[0].key, c.place[0].epoch), (key, 0));
        assert_eq!(c.place[0].config.voters, vec![NodeId(1), NodeId(2), NodeId(3)]);
        assert!(c.remove.is_empty());
    }
    let nothing = BTreeMap::<JournalKey, paros_core::JournalConfig>::new();
    assert!(changes(&b.dir, NodeId(9), &nothing, &registry_key()).is_empty(), "a node that is no voter hosts nothing");

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

/// The registry journal's seats move as any journal's: its move's target is placed it from the
/// move's epoch, the machine it left removes it once the move is done, a member keeps it as
/// formation placed it (whatever learners that configuration names), and a directory of a cell
/// not yet formed removes it from nowhere.
#[test]
fn the_registry_journals_seat_moves_like_any_other() {
    use paros_core::journal::WriterMode;
    let formation = paros_core::JournalConfig {
        mode: WriterMode::Single,
        voters: vec![NodeId(1), NodeId(2), NodeId(3)],
        learners: vec![NodeId(0xfeed)],
    };
    let hosting = BTreeMap::from([(registry_key(), formation)]);
    let unformed = paros_registry::Directory::default();
    assert!(changes(&unformed, NodeId(1), &hosting, &registry_key()).is_empty(), "kept before formation");

    let mut b = Book::formed();
    assert!(b.run(register(4, paros_registry::Role::Node, "b")).is_accepted());
    assert!(changes(&b.dir, NodeId(2), &hosting, &registry_key()).is_empty(), "a member keeps it as placed");
    assert!(b.run(Command::MoveSeat { journal: registry_key(), from: NodeId(2), to: NodeId(4) }).is_accepted());
    let none = BTreeMap::<JournalKey, paros_core::JournalConfig>::new();
    let c = changes(&b.dir, NodeId(4), &none, &registry_key());
    assert_eq!(c.place.iter().map(|a| (a.key, a.epoch)).collect::<Vec<_>>(), vec![(registry_key(), 1)]);
    assert!(changes(&b.dir, NodeId(2), &hosting, &registry_key()).is_empty(), "the old voter keeps it until done");
    assert!(b.run(Command::MoveDone { journal: registry_key(), epoch: paros_registry::Epoch(1) }).is_accepted());
    assert_eq!(changes(&b.dir, NodeId(2), &hosting, &registry_key()).remove, vec![registry_key()], "then it goes");
    let j = b.dir.registry_journal().expect("recorded");
    assert_eq!((j.voters.to_vec(), j.epoch.0), (vec![NodeId(1), NodeId(4), NodeId(3)], 1));
}
