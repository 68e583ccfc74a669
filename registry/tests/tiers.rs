//! Replica tiers: creating a tier, registering a replica on it, placing journals on it, and
//! what a replica's follower hosts.

mod common;

use std::collections::BTreeMap;

use common::*;
use paros_core::ids::{JournalId, JournalKey, NodeId, TenantId};
use paros_core::{Assignment, JournalConfig};
use paros_registry::follow::{Hosting, changes_for};
use paros_registry::{Accepted, Command, Directory, Refusal, Role, Verdict};

/// Folds `command`, checks it was refused with `want`, and that nothing changed but the
/// verdict window.
fn refused(book: &mut Book, command: Command, want: Refusal) {
    let before = book.dir.clone();
    assert_eq!(book.run(command), Verdict::Refused(want), "the refusal names its reason");
    assert_eq!(before.cell(), book.dir.cell());
    assert!(before.machines().eq(book.dir.machines()), "machines are unchanged");
    assert!(before.tiers().eq(book.dir.tiers()), "tiers are unchanged");
    assert!(before.journals().eq(book.dir.journals()), "journals are unchanged");
}

fn key(journal: u64) -> JournalKey {
    JournalKey { tenant: TenantId(100), journal: JournalId(journal) }
}

fn registry_key() -> JournalKey {
    JournalKey { tenant: TenantId(0), journal: JournalId(0x4e6) }
}

#[test]
fn a_tier_is_created_once_with_a_feed_no_machine_or_tier_has() {
    let mut b = Book::formed();
    assert_eq!(
        b.run(create_tier("gold", 0xfeed)),
        Verdict::Accepted(Accepted::TierCreated { tier: tier("gold"), feed: NodeId(0xfeed) }),
        "a new tier"
    );
    refused(&mut b, create_tier("gold", 0xf00d), Refusal::TierNameTaken { tier: tier("gold") });
    refused(&mut b, create_tier("silver", 0xfeed), Refusal::FeedTaken { feed: NodeId(0xfeed) });
    refused(&mut b, create_tier("silver", 2), Refusal::FeedTaken { feed: NodeId(2) });
    let t = b.dir.tier(&tier("gold")).expect("the tier is listed");
    assert_eq!(t.feed, NodeId(0xfeed));
    assert_eq!(b.dir.tiers().count(), 1, "one tier");
    // Nor may a machine take a feed's id later.
    refused(
        &mut b,
        register(0xfeed, Role::Node, "a"),
        Refusal::MachineIsAFeed { machine: NodeId(0xfeed), tier: tier("gold") },
    );
}

#[test]
fn a_replica_registers_on_an_existing_tier_only_and_keeps_it() {
    let mut b = Book::formed();
    refused(&mut b, register_replica(9, "gold", "a"), Refusal::UnknownTier { tier: tier("gold") });
    assert!(b.run(create_tier("gold", 0xfeed)).is_accepted());
    assert!(b.run(create_tier("silver", 0xf00d)).is_accepted());
    assert_eq!(
        b.run(register_replica(9, "gold", "a")),
        Verdict::Accepted(Accepted::MachineRegistered { machine: NodeId(9), updated: false }),
    );
    let m = b.dir.machine(NodeId(9)).expect("registered");
    assert_eq!((m.role, m.tier.clone()), (Role::Replica, Some(tier("gold"))), "a replica on its tier");
    assert!(b.dir.replicas_of(&tier("gold")).map(|m| m.id).eq([NodeId(9)]), "listed on its tier");
    assert_eq!(b.dir.replicas_of(&tier("silver")).count(), 0, "and on no other");
    refused(
        &mut b,
        register_replica(9, "silver", "a"),
        Refusal::TierChange { machine: NodeId(9), registered: Some(tier("gold")) },
    );
    refused(
        &mut b,
        register_replica(1, "gold", "a"),
        Refusal::RoleChange { machine: NodeId(1), registered: Role::Node },
    );
    assert!(b.run(register_replica(9, "gold", "z")).is_accepted(), "the same tier again moves the replica");
    assert_eq!(b.dir.machine(NodeId(9)).map(|m| m.zone.as_str()), Some("z"));
    // RegisterMachine keeps working: a replica on no tier, which then keeps its role and tier.
    assert!(b.run(register(10, Role::Replica, "b")).is_accepted());
    assert_eq!(b.dir.machine(NodeId(10)).and_then(|m| m.tier.clone()), None, "on no tier");
    assert!(b.run(register(9, Role::Replica, "b")).is_accepted(), "RegisterMachine updates a tiered replica");
    assert_eq!(b.dir.machine(NodeId(9)).and_then(|m| m.tier.clone()), Some(tier("gold")), "which keeps its tier");
    let retire = Command::SetStanding { machine: NodeId(9), standing: paros_registry::Standing::Retired };
    assert!(b.run(retire).is_accepted());
    refused(&mut b, register_replica(9, "gold", "a"), Refusal::MachineRetired { machine: NodeId(9) });
}

#[test]
fn a_journal_on_a_tier_carries_its_feed_and_an_unknown_tier_is_refused() {
    let mut b = Book::formed();
    refused(&mut b, create_on(100, 7, "orders", &[1, 2, 3], "gold"), Refusal::UnknownTier { tier: tier("gold") });
    assert!(b.run(create_tier("gold", 0xfeed)).is_accepted());
    assert!(b.run(create_on(100, 7, "orders", &[1, 2, 3], "gold")).is_accepted());
    let j = b.dir.journal(key(7)).expect("created");
    assert_eq!((j.tier.clone(), j.feed), (Some(tier("gold")), Some(NodeId(0xfeed))));
    let config = j.config();
    assert_eq!(config.learners, vec![NodeId(0xfeed)], "its voters feed the tier");
    assert!(j.runs_as(&config), "and it runs as its config");
    let without = JournalConfig { learners: vec![], ..config };
    assert!(!j.runs_as(&without), "but not without its feed");
}

#[test]
fn an_old_create_journal_lands_on_the_default_tier_when_it_exists() {
    let mut b = Book::formed();
    assert!(b.run(create(100, 1, "before", &[1, 2, 3])).is_accepted());
    let j = b.dir.journal(key(1)).expect("created");
    assert_eq!((j.tier.clone(), j.feed), (None, None), "no default tier: no tier");
    assert!(j.config().learners.is_empty());
    assert!(b.run(create_tier("gold", 0xf00d)).is_accepted());
    assert!(b.run(create(100, 2, "gold-only", &[1, 2, 3])).is_accepted());
    assert_eq!(b.dir.journal(key(2)).and_then(|j| j.tier.clone()), None, "another tier is not the default");
    assert!(b.run(create_tier("default", 0xfeed)).is_accepted());
    assert!(b.run(create(100, 3, "after", &[1, 2, 3])).is_accepted());
    let j = b.dir.journal(key(3)).expect("created");
    assert_eq!((j.tier.clone(), j.feed), (Some(tier("default")), Some(NodeId(0xfeed))), "on the default tier");
    assert_eq!(b.dir.journal(key(1)).and_then(|j| j.feed), None, "an earlier journal's config never changes");
}

#[test]
fn a_replica_hosts_exactly_its_tiers_live_journals() {
    let mut b = Book::formed();
    assert!(b.run(create_tier("gold", 0xfeed)).is_accepted());
    assert!(b.run(create_tier("silver", 0xf00d)).is_accepted());
    assert!(b.run(register_replica(9, "gold", "a")).is_accepted());
    assert!(b.run(create_on(100, 1, "g1", &[1, 2, 3], "gold")).is_accepted());
    assert!(b.run(create_on(100, 2, "g2", &[1], "gold")).is_accepted());
    assert!(b.run(create_on(100, 3, "s1", &[1, 2, 3], "silver")).is_accepted());
    assert!(b.run(create(100, 4, "none", &[1, 2, 3])).is_accepted());
    let replica = Hosting::Replica { feed: NodeId(0xfeed) };
    let mut hosted: BTreeMap<JournalKey, JournalConfig> = BTreeMap::new();
    let c = changes_for(&b.dir, NodeId(9), &replica, &hosted, &registry_key());
    let placed: Vec<JournalKey> = c.place.iter().map(|a| a.key).collect();
    assert_eq!(placed, vec![key(1), key(2)], "the gold journals only");
    for a in &c.place {
        assert_eq!(a.config, b.dir.journal(a.key).expect("placed").config(), "each with its config");
        assert_eq!((a.config.learners.clone(), a.epoch), (vec![NodeId(0xfeed)], 0));
    }
    assert!(c.remove.is_empty());
    hosted.extend(c.place.into_iter().map(|a| (a.key, a.config)));
    // A stray journal (the silver one) and the registry journal are hosted too.
    let silver = b.dir.journal(key(3)).expect("created").config();
    hosted.insert(key(3), silver.clone());
    hosted.insert(registry_key(), silver);
    let c = changes_for(&b.dir, NodeId(9), &replica, &hosted, &registry_key());
    assert!(c.place.is_empty(), "what it hosts is placed already");
    assert_eq!(c.remove, vec![key(3)], "another tier's journal goes; the registry journal stays");
    hosted.remove(&key(3));
    assert!(b.run(delete(100, "g1")).is_accepted());
    let c = changes_for(&b.dir, NodeId(9), &replica, &hosted, &registry_key());
    assert_eq!(c.remove, vec![key(1)], "a deleted journal goes");
    assert!(c.place.is_empty());
    // A voter of a gold journal hosts it with the same config.
    let v =
        changes_for(&b.dir, NodeId(2), &Hosting::Voter, &BTreeMap::<JournalKey, JournalConfig>::new(), &registry_key());
    let want: Vec<_> =
        [3, 4].iter().map(|j| Assignment::founding(key(*j), b.dir.journal(key(*j)).expect("live").config())).collect();
    let registry = b.dir.registry_journal().expect("formed").assignment(NodeId(2));
    let want: Vec<_> = std::iter::once(registry).chain(want).collect();
    assert_eq!(
        v.place, want,
        "node 2 votes for the live journals it was placed on (the registry's too), each with its config"
    );
}

#[test]
fn a_retired_replica_leaves_its_tier_and_hosts_none_of_its_journals() {
    let mut b = Book::formed();
    assert!(b.run(create_tier("gold", 0xfeed)).is_accepted());
    assert!(b.run(register_replica(9, "gold", "a")).is_accepted());
    assert!(b.run(register_replica(10, "gold", "b")).is_accepted());
    assert!(b.run(create_on(100, 1, "g1", &[1, 2, 3], "gold")).is_accepted());
    assert!(b.run(create_on(100, 2, "g2", &[1], "gold")).is_accepted());
    let replica = Hosting::Replica { feed: NodeId(0xfeed) };
    let mut hosted: BTreeMap<JournalKey, JournalConfig> = BTreeMap::new();
    hosted.extend(
        changes_for(&b.dir, NodeId(9), &replica, &hosted, &registry_key()).place.into_iter().map(|a| (a.key, a.config)),
    );
    let config = b.dir.journal(key(1)).expect("created").config();
    hosted.insert(registry_key(), config);
    let draining = Command::SetStanding { machine: NodeId(9), standing: paros_registry::Standing::Draining };
    assert!(b.run(draining).is_accepted());
    assert!(
        changes_for(&b.dir, NodeId(9), &replica, &hosted, &registry_key()).is_empty(),
        "a draining replica keeps serving its tier"
    );
    let retire = Command::SetStanding { machine: NodeId(9), standing: paros_registry::Standing::Retired };
    assert!(b.run(retire).is_accepted());
    let c = changes_for(&b.dir, NodeId(9), &replica, &hosted, &registry_key());
    assert!(c.place.is_empty(), "a retired replica is placed nothing");
    assert_eq!(c.remove, vec![key(1), key(2)], "and drops every journal of its tier; the registry journal stays");
    let fresh =
        changes_for(&b.dir, NodeId(9), &replica, &BTreeMap::<JournalKey, JournalConfig>::new(), &registry_key());
    assert!(fresh.is_empty(), "a retired replica booted on an empty disk is placed nothing either");
    let other =
        changes_for(&b.dir, NodeId(10), &replica, &BTreeMap::<JournalKey, JournalConfig>::new(), &registry_key());
    assert_eq!(other.place.len(), 2, "the tier's other replica still hosts every journal of the tier");
    let listed: Vec<(NodeId, paros_registry::Standing)> =
        b.dir.replicas_of(&tier("gold")).map(|m| (m.id, m.standing)).collect();
    assert_eq!(
        listed,
        vec![(NodeId(9), paros_registry::Standing::Retired), (NodeId(10), paros_registry::Standing::Registered)],
        "the retired replica stays listed on its tier, retired"
    );
    assert!(b.run(create_on(100, 3, "g3", &[1, 2, 3], "gold")).is_accepted());
    let c = changes_for(&b.dir, NodeId(9), &replica, &BTreeMap::<JournalKey, JournalConfig>::new(), &registry_key());
    assert!(c.place.is_empty(), "nor a journal created on its tier after it was retired");
}

#[test]
fn a_checkpoint_with_tiers_restores_the_same_directory() {
    use paros_client::Checkpointable;
    let mut b = Book::formed();
    assert!(b.run(create_tier("default", 0xfeed)).is_accepted());
    assert!(b.run(register_replica(9, "default", "a")).is_accepted());
    assert!(b.run(create(100, 1, "orders", &[1, 2, 3])).is_accepted());
    let bytes = b.dir.checkpoint();
    let back = Directory::restore(&bytes).expect("restores");
    assert_eq!(back, b.dir, "restore(checkpoint(s)) == s");
    assert_eq!(back.journal(key(1)).and_then(|j| j.feed), Some(NodeId(0xfeed)));
    let mut old = bytes.clone();
    old[0] = 1;
    assert_eq!(
        Directory::restore(&old),
        Err(paros_registry::RestoreError::UnknownVersion(1)),
        "a version 1 checkpoint is not restored"
    );
}
