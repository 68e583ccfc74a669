//! Journals placed on and removed from a running host: placement rides the round (one sync for
//! any number of journals), a removed journal stops at once and its data leaves the store, and
//! a bad placement is a typed refusal that changes nothing.

mod common;

use bytes::Bytes;
use common::next_id;
use paros_core::journal::{Outcome, WriterMode};
use paros_core::{Call, CallAnswer, JournalConfig, JournalId, JournalKey, LeaderUuid, NodeId, TenantId, Tunables};
use paros_node::ports::LogStore;
use paros_node::rpc::{NodeAnswer, NodeRequest};
use paros_node::{Early, Host, MemStore, PlaceError};

const ME: NodeId = NodeId(0x51);

fn key(i: u64) -> JournalKey {
    JournalKey { tenant: TenantId(0x7e), journal: JournalId(0x100 + i) }
}

fn solo() -> JournalConfig {
    JournalConfig { mode: WriterMode::Single, voters: vec![ME], learners: vec![] }
}

fn boot(disk: &MemStore) -> Host<MemStore> {
    let expected = disk.identity().expect("identity");
    Host::boot(disk.clone(), expected, ME, Tunables::default(), 7).expect("boots")
}

/// Boots a node of the cell over `disk` (one that hosts a seat moving to it as a joining voter).
fn node(disk: &MemStore) -> Host<MemStore> {
    let expected = disk.identity().expect("identity");
    Host::boot_node(disk.clone(), expected, ME, Tunables::default(), 7, false).expect("boots")
}

/// Rounds until nothing is left to do; every answer given on the way.
fn drain(host: &mut Host<MemStore>) -> Vec<(paros_node::Owed, NodeAnswer)> {
    let mut answers = Vec::new();
    for _ in 0..50 {
        let out = host
            .round(|e| {
                if let Early::Answer(t, a) = e {
                    answers.push((t, a));
                }
            })
            .expect("round");
        for (_, envelopes) in out.messages {
            host.deliver(ME, envelopes);
        }
        if !host.has_work() && !host.has_release() {
            break;
        }
    }
    answers
}

#[test]
fn ten_thousand_placements_take_one_sync() {
    let disk = MemStore::new();
    drop(boot(&disk));
    let (_, syncs_at_boot) = disk.counts();
    let mut host = boot(&disk);
    for i in 0..10_000 {
        host.place(key(i), solo()).expect("placed");
    }
    assert_eq!(disk.counts().1, syncs_at_boot, "placing writes nothing by itself");
    let _ = host.round(|_| {}).expect("round");
    assert_eq!(disk.counts().1, syncs_at_boot + 1, "one round, one sync, for every placement");
    drop(host);
    disk.crash();
    assert_eq!(boot(&disk).journal_count(), 10_000, "every placement survives a crash after its round");
}

#[test]
fn a_placement_not_yet_synced_is_lost_by_a_crash_and_nothing_it_said_left() {
    let disk = MemStore::new();
    let mut host = boot(&disk);
    host.place(key(1), solo()).expect("placed");
    host.campaign(&key(1));
    let pending = host.begin_round(|_| {});
    assert!(pending.needs_sync, "a round carrying a placement syncs");
    assert_eq!(pending.placements.len(), 1);
    drop(pending);
    drop(host);
    disk.crash();
    assert_eq!(boot(&disk).journal_count(), 0, "the placement never reached the disk");
}

#[test]
fn placing_again_with_the_same_config_changes_nothing_and_another_config_is_refused() {
    let disk = MemStore::new();
    let mut host = boot(&disk);
    host.place(key(1), solo()).expect("placed");
    drain(&mut host);
    host.place(key(1), solo()).expect("the same placement again is a no-op");
    assert!(!host.has_work(), "a repeated placement writes nothing");
    let other = JournalConfig { mode: WriterMode::Multi, ..solo() };
    assert_eq!(host.place(key(1), other), Err(PlaceError::Reconfigure(key(1))));
}

#[test]
fn a_bad_placement_is_refused_and_changes_nothing() {
    let disk = MemStore::new();
    let mut host = boot(&disk);
    // A machine that is not a node of the cell takes only journals naming it or fed at its
    // tiers.
    host.join_feed(NodeId(0xfeed));
    let elsewhere = JournalConfig { mode: WriterMode::Single, voters: vec![NodeId(0x99)], learners: vec![NodeId(0xf)] };
    assert_eq!(host.place(key(1), elsewhere), Err(PlaceError::NotAMember(key(1), ME)));
    let empty = JournalConfig { mode: WriterMode::Single, voters: vec![], learners: vec![ME] };
    assert!(matches!(host.place(key(2), empty), Err(PlaceError::Invalid(..))));
    let twice = JournalConfig { mode: WriterMode::Single, voters: vec![ME, ME], learners: vec![] };
    assert!(matches!(host.place(key(3), twice), Err(PlaceError::Invalid(..))));
    assert_eq!(host.journal_count(), 0);
    assert!(!host.has_work(), "a refused placement leaves nothing to persist");
}

/// A node placed with a configuration that does not name it holds a seat the journal's log is
/// moving to it (docs/reconfiguration.md, rule 5): it hosts the journal as a voter that does
/// not vote yet, and the journal stays placed with that configuration for life.
#[test]
fn a_node_placed_outside_the_voters_hosts_a_joining_voter_that_does_not_campaign() {
    let disk = MemStore::new();
    let mut host = node(&disk);
    let founding = JournalConfig { mode: WriterMode::Single, voters: vec![NodeId(0x99)], learners: vec![NodeId(0xf)] };
    host.place(key(1), founding.clone()).expect("a joining seat is placed");
    for _ in 0..50 {
        host.tick();
        drain(&mut host);
    }
    let v = host.voter(&key(1)).expect("hosted as a voter, not a replica");
    assert!(!v.is_voter() && !v.is_leader(), "it votes only once its walk names it");
    assert_eq!(host.journal_config(&key(1)), Some(&founding));
    host.place(key(1), founding).expect("placed again with the same configuration: nothing to do");
    drop(host);
    let again = node(&disk);
    assert!(again.voter(&key(1)).is_some_and(|v| !v.is_voter()), "it boots back a joining voter");
}

#[test]
fn a_removed_journal_answers_its_callers_unknown_and_its_data_leaves_the_store() {
    let disk = MemStore::new();
    let mut host = boot(&disk);
    for i in [1, 2] {
        host.place(key(i), solo()).expect("placed");
        host.campaign(&key(i));
    }
    drain(&mut host);
    let uuid = LeaderUuid::new(5).expect("non-zero");
    for i in [1, 2] {
        let t = host
            .request(NodeRequest::Call {
                journal: key(i),
                id: paros_core::CallId(next_id()),
                call: Call::SetLeader { new: uuid, old: None },
            })
            .expect("hosted");
        let answers = drain(&mut host);
        assert!(
            answers
                .iter()
                .any(|(at, a)| *at == t && matches!(a, NodeAnswer::Call(CallAnswer::Verdict(Outcome::Won(_))))),
            "{answers:?}"
        );
    }
    let write = Call::Write { leader: Some(uuid), seq: paros_core::Seq(0), records: vec![Bytes::from_static(b"r")] };
    let pending = host
        .request(NodeRequest::Call { journal: key(1), id: paros_core::CallId(next_id()), call: write.clone() })
        .expect("hosted");
    let owed = host.remove(&key(1));
    assert_eq!(owed, vec![(pending, NodeAnswer::UnknownJournal)], "the call waiting on it is answered");
    assert_eq!(
        host.request(NodeRequest::Call { journal: key(1), id: paros_core::CallId(next_id()), call: write }),
        Err(NodeAnswer::UnknownJournal)
    );
    drain(&mut host);
    let stored: Vec<JournalKey> = disk.load().expect("load").into_iter().map(|j| j.key).collect();
    assert_eq!(stored, vec![key(2)], "the removed journal's rows are gone; the other's stay");
    drop(host);
    assert_eq!(boot(&disk).journal_count(), 1);
}

/// A seat that begins after the journal moved (docs/reconfiguration.md, rule 13): placed from
/// epoch 3 on a store that holds nothing of the journal — a founder a seat moved off and back
/// to — its acceptor starts promised to the floor of epoch 3, so a lagging leader of an earlier
/// configuration (whose promises this store gave back) is refused, a leader of epoch 3 is
/// answered, and the floor is on the disk with the placement, before any promise of its own.
#[test]
fn a_seat_placed_from_a_later_epoch_refuses_every_earlier_ballot_across_a_crash() {
    use paros_core::{Assignment, Ballot, Message, Slot};
    use paros_node::ports::Envelope;
    let disk = MemStore::new();
    let peer = NodeId(0x99);
    let founding = JournalConfig { mode: WriterMode::Single, voters: vec![peer, ME, NodeId(0x98)], learners: vec![] };
    let mut host = node(&disk);
    host.assign(Assignment { key: key(1), config: founding.clone(), epoch: 3 }, true).expect("placed");
    assert!(host.voter(&key(1)).is_some(), "a seat with a floor is placed awake, never dormant");
    let _ = host.round(|_| {}).expect("the placement's round");
    drop(host);
    disk.crash();
    let mut host = node(&disk);
    let floor = Ballot::seat_floor(3);
    assert_eq!(host.voter(&key(1)).map(paros_core::Voter::promised), Some(floor), "the floor came back from disk");
    // What the journal answers `peer`'s Prepare at `round`.
    let answer = |host: &mut Host<MemStore>, round: u64| {
        let ballot = Ballot { round, node: peer };
        let prepare = Message::Prepare { ballot, from: Slot(1) };
        host.deliver(peer, vec![Envelope { journal: key(1), from: peer, message: prepare }]);
        // An answer that needs a durable sender leaves with the round after its sync.
        (0..4).find_map(|_| {
            let mut sent = Vec::new();
            let out = host
                .round(|e| {
                    if let Early::Messages(to, envelopes) = e {
                        sent.push((to, envelopes));
                    }
                })
                .expect("round");
            sent.extend(out.messages);
            let to_peer = sent.into_iter().filter(|(to, _)| *to == peer).flat_map(|(_, e)| e);
            to_peer.map(|e| e.message).find(|m| matches!(m, Message::Promise { .. } | Message::Nack { .. }))
        })
    };
    for epoch in [0, 1, 2] {
        let round = Ballot::epoch_start(epoch) + 9;
        let got = answer(&mut host, round);
        assert!(
            matches!(got, Some(Message::Nack { promised, .. }) if promised == floor),
            "a ballot of epoch {epoch} is refused: {got:?}"
        );
    }
    let got = answer(&mut host, Ballot::epoch_start(3) + 1);
    assert!(matches!(got, Some(Message::Promise { .. })), "epoch 3's first ballot is answered: {got:?}");
    let v = host.voter(&key(1)).expect("hosted");
    assert!(!v.is_leader() && v.epoch() == 0, "its walk is at epoch 0: it campaigns in nothing until it walks to 3");
}

/// A follower's directory can lag the journal's own log: a node's copy may have walked into a
/// later epoch that named it a voter again, and promised there, before its follower applies an
/// older directory that removes it. Removed, the promise would be forgotten, and the seat given
/// back later would begin at an epoch below it. The node refuses while its copy promised past
/// the directory's epoch — awake, or dormant (the promise read from the store) — and removes it
/// once the directory has reached that epoch.
#[test]
fn a_journal_that_promised_past_the_directorys_epoch_is_kept_until_the_directory_reaches_it() {
    use paros_core::Assignment;
    let disk = MemStore::new();
    let founding =
        JournalConfig { mode: WriterMode::Single, voters: vec![NodeId(0x99), ME, NodeId(0x98)], learners: vec![] };
    let mut host = node(&disk);
    host.assign(Assignment { key: key(1), config: founding.clone(), epoch: 2 }, false).expect("placed");
    host.assign(Assignment { key: key(2), config: founding, epoch: 0 }, false).expect("placed");
    let _ = host.round(|_| {}).expect("the placements' round");
    assert!(host.remove_at(&key(1), 1).is_none(), "promised in epoch 2, asked by a directory at 1: kept");
    assert!(host.voter(&key(1)).is_some(), "still hosted");
    let expected = disk.identity().expect("identity");
    drop(host);
    let mut host = Host::boot_node(disk.clone(), expected, ME, Tunables::default(), 7, true).expect("boots asleep");
    assert!(host.is_dormant(&key(1)) && host.is_dormant(&key(2)));
    assert!(host.remove_at(&key(1), 1).is_none(), "dormant, its promise read from the store: kept");
    assert!(host.is_dormant(&key(1)), "still hosted");
    assert!(host.remove_at(&key(2), 1).is_some(), "a copy that promised nothing past epoch 1 goes");
    assert!(host.remove_at(&key(1), 2).is_some(), "the directory reached epoch 2: removed");
    assert_eq!(host.journal_count(), 0, "both removed");
}

/// Formation writes a founder's seats durably before the identity: a node formed and crashed
/// before its first round's sync still hosts them at its next boot. The old order (identity at
/// boot, then a placement riding the first round) left such a founder hosting nothing for good
/// (simulation seed 80012083: two of three founders crashed on their first sync, and the cell
/// never had a registry journal).
#[test]
fn a_founder_crashed_before_its_first_sync_still_hosts_its_formation() {
    let disk = MemStore::new();
    let formation = [(key(1), solo())];
    let host = Host::form_node(disk.clone(), None, ME, &formation, Tunables::default(), 7, false).expect("forms");
    assert_eq!(host.id(), ME);
    drop(host);
    disk.crash();

    let expected = disk.identity().expect("identity");
    assert_eq!(expected, Some(ME), "formed: the identity is on the disk");
    let mut host =
        Host::form_node(disk.clone(), expected, ME, &formation, Tunables::default(), 7, false).expect("boots formed");
    assert!(host.journal_configs().contains_key(&key(1)), "the seat came back from the disk");
    // And it serves: a call to it is decided.
    host.campaign(&key(1));
    drain(&mut host);
    let t = host
        .request(NodeRequest::Call {
            journal: key(1),
            id: paros_core::CallId(next_id()),
            call: Call::SetLeader { new: LeaderUuid::new(0xa).expect("non-zero"), old: None },
        })
        .expect("hosted");
    let answers = drain(&mut host);
    assert!(
        answers.iter().any(|(at, a)| *at == t && matches!(a, NodeAnswer::Call(CallAnswer::Verdict(Outcome::Won(_))))),
        "{answers:?}"
    );
}

/// A store formed again after a crash between its formation and its identity (the formation
/// durable, no identity yet) boots as a fresh store would, with its formation once.
#[test]
fn formation_is_written_once_whatever_a_crash_interrupted() {
    let disk = MemStore::new();
    let formation = [(key(1), solo()), (key(2), solo())];
    drop(Host::form_node(disk.clone(), None, ME, &formation, Tunables::default(), 7, false).expect("forms"));
    // Formed again over the same disk as if the identity had not been written: no second copy,
    // no error.
    let again = Host::form_node(disk.clone(), None, ME, &formation, Tunables::default(), 7, false).expect("forms");
    let hosted: Vec<JournalKey> = again.journal_configs().keys().copied().collect();
    assert_eq!(hosted, vec![key(1), key(2)]);
}
