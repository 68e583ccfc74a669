//! Host-level tests: several hosts over in-memory stores, routed synchronously.

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use common::next_id;
use paros_core::journal::{JournalView, Outcome, WriterMode};
use paros_core::{
    Call, CallAnswer, Consistency, JournalConfig, JournalId, JournalKey, LeaderUuid, NodeId, ReadAnswer, ReadRequest,
    Seq, TenantId, Tunables,
};
use paros_node::ports::Envelope;
use paros_node::rpc::{NodeAnswer, NodeRequest};
use paros_node::{BootError, Early, Host, MemStore, Owed};

struct Cell {
    hosts: BTreeMap<NodeId, Host<MemStore>>,
    disks: BTreeMap<NodeId, MemStore>,
    answers: BTreeMap<(NodeId, Owed), NodeAnswer>,
    ids: Vec<NodeId>,
    tunables: Tunables,
}

fn key(i: u64) -> JournalKey {
    JournalKey { tenant: TenantId(0xabc0 + i % 7), journal: JournalId(0x1_0000 + i) }
}

fn tunables() -> Tunables {
    Tunables { election_ticks_min: 5, election_ticks_max: 10, ..Tunables::default() }
}

impl Cell {
    fn new(journals: u64) -> Cell {
        Cell::with(journals, tunables())
    }

    fn with(journals: u64, tunables: Tunables) -> Cell {
        let ids: Vec<NodeId> = (1..=3).map(|i| NodeId(0x7700 + i)).collect();
        let mut cell = Cell {
            hosts: BTreeMap::new(),
            disks: BTreeMap::new(),
            answers: BTreeMap::new(),
            ids: ids.clone(),
            tunables,
        };
        for id in &ids {
            let disk = MemStore::new();
            let host = Host::boot(disk.clone(), None, *id, tunables, id.0).expect("boots");
            cell.disks.insert(*id, disk);
            cell.hosts.insert(*id, host);
        }
        let config = JournalConfig { mode: WriterMode::Single, voters: ids.clone(), learners: vec![] };
        for j in 0..journals {
            for id in &ids {
                cell.hosts.get_mut(id).unwrap().place(key(j), config.clone()).unwrap();
            }
            let first = ids[(j % 3) as usize];
            cell.hosts.get_mut(&first).unwrap().campaign(&key(j));
        }
        cell
    }

    /// One round on every host, then deliver everything.
    fn round(&mut self) {
        let mut mail: Vec<(NodeId, NodeId, Vec<Envelope>)> = Vec::new();
        for (id, host) in &mut self.hosts {
            let mut early = Vec::new();
            let mut answers = Vec::new();
            let out = host
                .round(|e| match e {
                    Early::Messages(to, e) => early.push((to, e)),
                    Early::Answer(t, a) => answers.push((t, a)),
                })
                .expect("round");
            for (to, e) in early.into_iter().chain(out.messages) {
                mail.push((*id, to, e));
            }
            for (t, a) in answers {
                self.answers.insert((*id, t), a);
            }
        }
        for (from, to, e) in mail {
            if let Some(h) = self.hosts.get_mut(&to) {
                h.deliver(from, e);
            }
        }
    }

    fn tick(&mut self) {
        let mut pings = Vec::new();
        for (id, h) in &mut self.hosts {
            pings.extend(h.peers().map(|p| (*id, p)));
            h.tick();
        }
        for (from, to) in pings {
            if let Some(h) = self.hosts.get_mut(&to) {
                h.deliver(from, Vec::new());
            }
        }
        self.round();
        self.round();
    }

    /// Crashes every machine (unsynced writes are lost) and boots new hosts over the same disks.
    fn crash_and_reboot(&mut self, journals: usize) {
        for id in self.ids.clone() {
            self.disks[&id].crash();
            self.hosts.remove(&id);
            let host =
                Host::boot(self.disks[&id].clone(), Some(id), NodeId(0xdead), self.tunables, 99).expect("reboots");
            assert_eq!(host.journal_count(), journals, "every journal placed here is back");
            self.hosts.insert(id, host);
        }
    }

    /// Restarts every machine asleep (`Host::boot_asleep`) over its disk, with a dormancy of
    /// `dormant_after` ticks; `tune` adjusts each new host before it joins.
    fn reboot_asleep(&mut self, dormant_after: u64, mut tune: impl FnMut(NodeId, &mut Host<MemStore>)) {
        for id in self.ids.clone() {
            self.hosts.remove(&id);
            let mut host = Host::boot_asleep(self.disks[&id].clone(), Some(id), NodeId(0xdead), self.tunables, 7)
                .expect("reboots");
            host.set_dormancy(Some(dormant_after));
            tune(id, &mut host);
            self.hosts.insert(id, host);
        }
    }

    /// Every page a linearizable read from each position of `k` gets at `at`.
    fn pages(&mut self, at: NodeId, k: JournalKey, up_to: u64) -> Vec<ReadAnswer> {
        (0..up_to)
            .map(|from| {
                let read = ReadRequest {
                    from: Seq(from),
                    limit: 0,
                    max_bytes: 0,
                    wait_ticks: 0,
                    consistency: Consistency::Linearizable,
                };
                let t = self.request(at, NodeRequest::Read { journal: k, id: paros_core::ReadId(next_id()), read });
                match self.wait(at, t) {
                    NodeAnswer::Read(a) => a,
                    other => panic!("{other:?}"),
                }
            })
            .collect()
    }

    fn write(&mut self, at: NodeId, k: JournalKey, leader: LeaderUuid, seq: u64, records: Vec<Bytes>) -> CallAnswer {
        let t = self.request(
            at,
            NodeRequest::Call {
                journal: k,
                id: paros_core::CallId(next_id()),
                call: Call::Write { leader: Some(leader), seq: Seq(seq), records },
            },
        );
        match self.wait(at, t) {
            NodeAnswer::Call(a) => a,
            other => panic!("{other:?}"),
        }
    }

    fn leader_of(&self, k: &JournalKey) -> Option<NodeId> {
        self.hosts.iter().find(|(_, h)| h.voter(k).is_some_and(|v| v.is_leader())).map(|(id, _)| *id)
    }

    fn settle_leaders(&mut self, keys: &[JournalKey]) {
        for _ in 0..200 {
            if keys.iter().all(|k| self.leader_of(k).is_some()) {
                return;
            }
            self.tick();
        }
        panic!("not every journal elected a leader");
    }

    fn request(&mut self, at: NodeId, req: NodeRequest) -> Owed {
        self.hosts.get_mut(&at).unwrap().request(req).expect("a hosted journal")
    }

    fn wait(&mut self, at: NodeId, t: Owed) -> NodeAnswer {
        for _ in 0..100 {
            if let Some(a) = self.answers.remove(&(at, t)) {
                return a;
            }
            self.round();
            if let Some(a) = self.answers.remove(&(at, t)) {
                return a;
            }
            self.tick();
        }
        panic!("no answer");
    }
}

fn uuid(n: u128) -> LeaderUuid {
    LeaderUuid::new(n).unwrap()
}

/// `leader`'s write of `count` records accepted at `seq`, on a journal never truncated.
fn accepted(leader: LeaderUuid, seq: u64, count: u64) -> CallAnswer {
    let view = JournalView { leader: Some(leader), first_seq: Seq(0), next_seq: Seq(seq + count) };
    CallAnswer::Verdict(Outcome::Accepted { seq: Seq(seq), count, view })
}

fn claim(cell: &mut Cell, k: JournalKey, u: LeaderUuid) -> NodeId {
    let l = cell.leader_of(&k).expect("a leader");
    let t = cell.request(
        l,
        NodeRequest::Call {
            journal: k,
            id: paros_core::CallId(next_id()),
            call: Call::SetLeader { new: u, old: None },
        },
    );
    assert!(matches!(cell.wait(l, t), NodeAnswer::Call(CallAnswer::Verdict(Outcome::Won(_)))));
    l
}

#[test]
fn a_restarted_cell_holds_every_acknowledged_write_and_the_same_folds() {
    let keys: Vec<JournalKey> = (0..4).map(key).collect();
    let mut cell = Cell::new(4);
    cell.settle_leaders(&keys);
    let mut acked: BTreeMap<JournalKey, Vec<Bytes>> = BTreeMap::new();
    for (i, k) in keys.iter().enumerate() {
        let l = claim(&mut cell, *k, uuid(i as u128 + 1));
        for n in 0..10u64 {
            let records = vec![Bytes::from(format!("{i}-{n}"))];
            let call = Call::Write { leader: Some(uuid(i as u128 + 1)), seq: Seq(n), records: records.clone() };
            let t = cell.request(l, NodeRequest::Call { journal: *k, id: paros_core::CallId(next_id()), call });
            match cell.wait(l, t) {
                NodeAnswer::Call(CallAnswer::Verdict(Outcome::Accepted { seq, .. })) => assert_eq!(seq, Seq(n)),
                other => panic!("{other:?}"),
            }
            acked.entry(*k).or_default().extend(records);
        }
    }
    for _ in 0..5 {
        cell.tick();
    }
    let before: BTreeMap<(NodeId, JournalKey), _> = cell
        .hosts
        .iter()
        .flat_map(|(id, h)| keys.iter().map(move |k| ((*id, *k), *h.voter(k).unwrap().state())))
        .collect();
    // Crash every machine: unsynced writes are lost; then boot new hosts over the same disks.
    let ids = cell.ids.clone();
    cell.crash_and_reboot(keys.len());
    for ((id, k), state) in &before {
        let v = cell.hosts[id].voter(k).unwrap();
        assert!(v.state().next_seq <= state.next_seq, "a reboot never invents records");
    }
    cell.settle_leaders(&keys);
    for _ in 0..10 {
        cell.tick();
    }
    // The chosen index is a hint written without a sync of its own: a node may reboot a few
    // slots behind and re-learn them. After settling, every fold matches the one before.
    for ((id, k), state) in &before {
        assert_eq!(cell.hosts[id].voter(k).unwrap().state(), state, "{id:?} refolds {k:?} to the same state");
    }
    for k in &keys {
        let at = ids[0];
        let read =
            ReadRequest { from: Seq(0), limit: 0, max_bytes: 0, wait_ticks: 0, consistency: Consistency::Linearizable };
        let t = cell.request(at, NodeRequest::Read { journal: *k, id: paros_core::ReadId(next_id()), read });
        match cell.wait(at, t) {
            NodeAnswer::Read(ReadAnswer::Page { records, .. }) => {
                assert_eq!(records, acked[k], "every acknowledged record is back")
            }
            other => panic!("{other:?}"),
        }
    }
}

/// The batches the window tests write: 60 writes of one to three records, each record distinct.
fn window_batches() -> Vec<Vec<Bytes>> {
    (0..60u64)
        .map(|n| {
            (0..=(n % 3)).map(|i| Bytes::from(format!("record {n}.{i} {}", "x".repeat((n % 7) as usize)))).collect()
        })
        .collect()
}

/// A journal that outgrew its in-memory window answers exactly as one that holds everything:
/// pages from every position (read from the store through its anchors), catch-up of a node
/// that missed every write (served from the peers' stores), and the same after a reboot that
/// reads only the entries from the last anchor. A retry of a write below the window gets no
/// verdict (the node can no longer compare it), where a full window says Duplicate. The small
/// window keeps the exact positions of only the last two writes it evicted: pages go both
/// through that index and through the anchors.
#[test]
fn a_journal_larger_than_its_window_answers_from_the_store_as_from_memory() {
    let small = Tunables {
        window_slots: 4,
        window_bytes: 64,
        anchor_slots: 5,
        anchor_bytes: 1 << 20,
        evicted_writes_max: 2,
        ..tunables()
    };
    let k = key(0);
    let mut cells = [Cell::with(1, small), Cell::with(1, tunables())];
    let mut pages = Vec::new();
    for cell in &mut cells {
        cell.settle_leaders(&[k]);
        let leader = claim(cell, k, uuid(7));
        // The third machine misses every write: it catches up afterwards.
        let late = *cell.ids.iter().find(|id| **id != leader).expect("three machines");
        let away = cell.hosts.remove(&late).expect("hosted");
        let mut seq = 0;
        for records in window_batches() {
            let n = records.len() as u64;
            assert_eq!(cell.write(leader, k, uuid(7), seq, records), accepted(uuid(7), seq, n));
            seq += n;
        }
        cell.hosts.insert(late, away);
        for _ in 0..30 {
            cell.tick();
        }
        let states: Vec<_> = cell.hosts.values().map(|h| *h.voter(&k).expect("a voter").state()).collect();
        assert!(states.iter().all(|s| s.next_seq == Seq(seq)), "every machine caught up: {states:?}");
        let retry = window_batches().swap_remove(0);
        pages.push((
            cell.pages(late, k, seq + 1),
            cell.pages(leader, k, seq + 1),
            cell.write(leader, k, uuid(7), 0, retry),
        ));
    }
    let (small_cell, full_cell) = (&cells[0], &cells[1]);
    assert_eq!(pages[0].0, pages[1].0, "pages from the store are the pages from memory (the late machine)");
    assert_eq!(pages[0].1, pages[1].1, "pages from the store are the pages from memory (the leader)");
    let CallAnswer::Verdict(Outcome::Duplicate { seq: Seq(0), count: 1, view }) = pages[1].2 else {
        panic!("the retry is a duplicate: {:?}", pages[1].2)
    };
    assert!(view.next_seq > Seq(1), "judged against the journal's tail: {view:?}");
    assert_eq!(
        pages[0].2,
        CallAnswer::NoVerdict,
        "below the window a retry cannot be compared: no verdict, never a wrong one"
    );
    let fetched: u64 = small_cell.hosts.values().map(|h| h.stats().fetches).sum();
    let reads: u64 = small_cell.disks.values().map(MemStore::reads).sum();
    assert!(fetched > 0 && reads > 0, "the small window read from the store ({fetched} fetches, {reads} reads)");
    assert_eq!(
        full_cell.disks.values().map(MemStore::reads).sum::<u64>(),
        0,
        "a window that holds everything never reads"
    );
    for h in small_cell.hosts.values() {
        let v = h.voter(&k).expect("a voter");
        assert!(v.log().bytes() <= 64 + 64, "the window holds about window_bytes: {}", v.log().bytes());
        assert!(v.log().start() > v.log().floor(), "entries below the window were evicted");
    }
    // A reboot reads the entries from the last anchor on, not the log, and answers the same.
    let mut small_cell = cells.into_iter().next().expect("two cells");
    let before: Vec<_> = small_cell.hosts.values().map(|h| *h.voter(&k).expect("a voter").state()).collect();
    small_cell.crash_and_reboot(1);
    for h in small_cell.hosts.values() {
        let v = h.voter(&k).expect("a voter");
        assert!(v.log().start() > v.log().floor(), "boot resumed at an anchor above the floor: {:?}", v.log().start());
    }
    small_cell.settle_leaders(&[k]);
    for _ in 0..10 {
        small_cell.tick();
    }
    let after: Vec<_> = small_cell.hosts.values().map(|h| *h.voter(&k).expect("a voter").state()).collect();
    assert_eq!(before, after, "a reboot from the anchors folds to the same state");
    let at = small_cell.ids[0];
    let seq = before[0].next_seq.0;
    assert_eq!(small_cell.pages(at, k, seq + 1), pages[1].0, "after the reboot every page is the same");
}

/// A journal quiet for the dormancy period leaves memory on every machine (only its
/// configuration stays) and comes back from its store on the next call: a write to the old
/// leader wakes it, the woken machine campaigns and the write lands at the next position; every
/// record written before reads back.
#[test]
fn a_quiet_journal_goes_dormant_and_a_write_wakes_it_from_its_store() {
    let k = key(0);
    let mut cell = Cell::new(1);
    for h in cell.hosts.values_mut() {
        h.set_dormancy(Some(20));
    }
    cell.settle_leaders(&[k]);
    let leader = claim(&mut cell, k, uuid(3));
    let mut written = Vec::new();
    for n in 0..5u64 {
        let records = vec![Bytes::from(format!("before {n}"))];
        assert_eq!(cell.write(leader, k, uuid(3), n, records.clone()), accepted(uuid(3), n, 1));
        written.extend(records);
    }
    for _ in 0..80 {
        cell.tick();
    }
    for (id, h) in &cell.hosts {
        assert!(h.is_dormant(&k) && h.voter(&k).is_none(), "{id:?}: the quiet journal left memory");
        assert_eq!((h.dormant_count(), h.journal_count()), (1, 1), "it is still hosted");
    }
    let records = vec![Bytes::from_static(b"after")];
    assert_eq!(cell.write(leader, k, uuid(3), 5, records.clone()), accepted(uuid(3), 5, 1));
    written.extend(records);
    assert!(
        cell.hosts.values().all(|h| !h.is_dormant(&k)),
        "a write wakes it everywhere (the campaign reaches every voter)"
    );
    assert!(
        cell.hosts.values().map(|h| h.stats().wakes).sum::<u64>() >= 3 && cell.hosts[&leader].stats().dormancies >= 1
    );
    match cell.pages(leader, k, 1).pop() {
        Some(ReadAnswer::Page { records, .. }) => {
            assert_eq!(records, written, "everything written before the sleep reads back")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_wiped_store_under_an_existing_identity_refuses_to_boot() {
    let disk = MemStore::new();
    let id = NodeId(0x51);
    drop(Host::boot(disk.clone(), None, id, tunables(), 1).unwrap());
    disk.wipe();
    match Host::boot(disk.clone(), Some(id), NodeId(0x52), tunables(), 1) {
        Err(BootError::Wiped(w)) => assert_eq!(w, id),
        other => panic!("expected a refusal, got {:?}", other.map(|h| h.id())),
    }
    let other_disk = MemStore::new();
    drop(Host::boot(other_disk.clone(), None, NodeId(0x60), tunables(), 1).unwrap());
    assert!(matches!(Host::boot(other_disk, Some(id), id, tunables(), 1), Err(BootError::WrongIdentity { .. })));
}

#[test]
fn the_store_incarnation_is_minted_once_and_checked() {
    let disk = MemStore::new();
    let id = NodeId(0x51);
    let host = Host::boot(disk.clone(), None, id, tunables(), 1).unwrap();
    let first = host.incarnation().expect("minted at first boot");
    drop(host);
    let host = Host::boot(disk.clone(), Some(id), NodeId(0x52), tunables(), 2).unwrap();
    assert_eq!(host.incarnation(), Some(first), "a later boot (another seed) keeps it");
    assert!(host.check_incarnation(Some(first)).is_ok() && host.check_incarnation(None).is_ok());
    drop(host);
    disk.wipe();
    let host = Host::boot(disk.clone(), None, id, tunables(), 3).unwrap();
    assert_ne!(host.incarnation(), Some(first), "a store formatted again under the same id is another one");
    assert!(
        matches!(host.check_incarnation(Some(first)), Err(BootError::WrongIncarnation { node, .. }) if node == id),
        "and is refused against the recorded one"
    );
    assert_ne!(
        paros_node::Incarnation::mint(1, NodeId(1)),
        paros_node::Incarnation::mint(1, NodeId(2)),
        "the mint mixes in the id"
    );
    assert_ne!(paros_node::Incarnation::mint(0, NodeId(0)).0, 0, "never zero");
}

#[test]
fn a_failed_sync_fails_the_round_and_nothing_leaves() {
    let mut cell = Cell::new(1);
    let k = key(0);
    cell.settle_leaders(&[k]);
    let l = claim(&mut cell, k, uuid(9));
    let call = Call::Write { leader: Some(uuid(9)), seq: Seq(0), records: vec![Bytes::from_static(b"x")] };
    cell.request(l, NodeRequest::Call { journal: k, id: paros_core::CallId(next_id()), call });
    cell.disks[&l].fail_next_sync();
    let host = cell.hosts.get_mut(&l).unwrap();
    assert!(host.round(|_| {}).is_err(), "a failed sync is an error the shell stops on");
}

#[test]
fn a_message_for_an_unknown_journal_is_dropped_and_counted() {
    let mut cell = Cell::new(1);
    let h = cell.hosts.get_mut(&cell.ids[0]).unwrap();
    let stranger = Envelope {
        journal: key(77),
        from: NodeId(5),
        message: paros_core::Message::CatchUpRequest { from: paros_core::Slot(0), life: paros_core::Life(1) },
    };
    h.deliver(NodeId(5), vec![stranger]);
    assert_eq!(h.stats().unknown_journal_drops, 1);
    assert_eq!(h.journal_count(), 1, "no journal is created implicitly");
    assert!(matches!(
        h.request(NodeRequest::Call {
            journal: key(78),
            id: paros_core::CallId(next_id()),
            call: Call::Truncate { leader: None, up_to: Seq(0) }
        }),
        Err(NodeAnswer::UnknownJournal)
    ));
}

#[test]
fn idle_journals_cost_no_work_per_round() {
    let total = 10_000;
    let active = 5;
    let mut cell = Cell::new(total);
    // Elect and quiesce everything.
    for _ in 0..40 {
        cell.tick();
    }
    let awake: usize = cell.hosts.values().map(Host::awake_count).sum();
    assert_eq!(awake, 0, "every idle journal went quiet");
    let keys: Vec<JournalKey> = (0..active).map(key).collect();
    for (i, k) in keys.iter().enumerate() {
        claim(&mut cell, *k, uuid(100 + i as u128));
    }
    let before: Vec<_> = cell.hosts.values().map(Host::stats).collect();
    let rounds = 20u64;
    for n in 0..rounds {
        for (i, k) in keys.iter().enumerate() {
            let l = cell.leader_of(k).unwrap();
            let call = Call::Write {
                leader: Some(uuid(100 + i as u128)),
                seq: Seq(n),
                records: vec![Bytes::from_static(b"r")],
            };
            let t = cell.request(l, NodeRequest::Call { journal: *k, id: paros_core::CallId(next_id()), call });
            assert!(matches!(cell.wait(l, t), NodeAnswer::Call(CallAnswer::Verdict(Outcome::Accepted { .. }))));
        }
        // Time passes too: every machine ticks once per write round.
        cell.tick();
    }
    let after: Vec<_> = cell.hosts.values().map(Host::stats).collect();
    for (b, a) in before.iter().zip(&after) {
        let machine_ticks = a.ticks - b.ticks;
        assert!(machine_ticks >= rounds, "the machine ticked during the measurement: {machine_ticks}");
        let per_tick_journal_ticks = (a.journal_ticks - b.journal_ticks) as f64 / machine_ticks as f64;
        assert!(
            per_tick_journal_ticks <= active as f64 * 2.0,
            "a machine tick reaches the active journals, not {total}: {per_tick_journal_ticks}"
        );
        let rounds_run = a.rounds - b.rounds;
        let per_round_ticks = (a.journal_ticks - b.journal_ticks) as f64 / rounds_run as f64;
        let per_round_readies = (a.readies - b.readies) as f64 / rounds_run as f64;
        let per_round_visits = (a.journals_visited - b.journals_visited) as f64 / rounds_run as f64;
        assert!(
            per_round_visits <= active as f64 * 2.0,
            "a round looks at the active journals, not {total}: {per_round_visits}"
        );
        assert!(
            per_round_ticks <= active as f64 * 2.0,
            "ticks per round track the active journals, not {total}: {per_round_ticks}"
        );
        assert!(
            per_round_readies <= active as f64 * 2.0,
            "readies per round track the active journals: {per_round_readies}"
        );
    }
}

#[test]
fn many_concurrent_writers_share_one_sync() {
    let n = 64;
    let keys: Vec<JournalKey> = (0..n).map(key).collect();
    let mut cell = Cell::new(n);
    cell.settle_leaders(&keys);
    let mut leaders = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        leaders.push(claim(&mut cell, *k, uuid(1000 + i as u128)));
    }
    let before: u64 = cell.hosts.values().map(|h| h.stats().syncs).sum();
    let mut tickets = Vec::new();
    for round in 0..10u64 {
        for (i, k) in keys.iter().enumerate() {
            let call = Call::Write {
                leader: Some(uuid(1000 + i as u128)),
                seq: Seq(round),
                records: vec![Bytes::from_static(b"g")],
            };
            tickets.push((
                leaders[i],
                cell.request(leaders[i], NodeRequest::Call { journal: *k, id: paros_core::CallId(next_id()), call }),
            ));
        }
        for (l, t) in std::mem::take(&mut tickets) {
            assert!(matches!(cell.wait(l, t), NodeAnswer::Call(CallAnswer::Verdict(Outcome::Accepted { .. }))));
        }
    }
    let syncs: u64 = cell.hosts.values().map(|h| h.stats().syncs).sum::<u64>() - before;
    let records = 10 * n;
    let per_node_syncs = syncs as f64 / 3.0;
    let records_per_sync = records as f64 / per_node_syncs;
    assert!(records_per_sync >= 8.0, "group commit: {records_per_sync} records per sync");
}

#[test]
fn a_quiet_journal_elects_a_new_leader_when_its_leader_machine_goes_silent() {
    let k = key(0);
    let mut cell = Cell::new(1);
    cell.settle_leaders(&[k]);
    claim(&mut cell, k, uuid(5));
    for _ in 0..20 {
        cell.tick();
    }
    assert_eq!(cell.hosts.values().map(Host::awake_count).sum::<usize>(), 0, "the journal went quiet");
    let old = cell.leader_of(&k).unwrap();
    cell.hosts.remove(&old);
    for _ in 0..60 {
        cell.tick();
        if cell.leader_of(&k).is_some() {
            break;
        }
    }
    let new = cell.leader_of(&k).expect("a surviving voter took over without any call arriving");
    assert_ne!(new, old);
    assert!(cell.hosts[&new].stats().peers_lost >= 1, "the host noticed its peer went silent");
}

#[test]
fn the_clock_delivers_one_tick_per_period_and_never_a_burst() {
    let mut host = Host::boot(MemStore::new(), None, NodeId(0x7701), tunables(), 1).expect("boots");
    host.set_tick_ms(20);
    let ticks = |h: &Host<MemStore>| h.stats().ticks;

    let armed = host.on_clock(1_000);
    assert_eq!((armed.ticked, armed.next_due_ms, ticks(&host)), (false, 1_020, 0), "the first reading arms the timer");
    assert!(!host.on_clock(1_019).ticked, "not before the period is over");
    let first = host.on_clock(1_020);
    assert_eq!((first.ticked, first.next_due_ms, ticks(&host)), (true, 1_040, 1));

    // The thread stalled for 50 periods: one tick, and the schedule restarts from now.
    let late = host.on_clock(2_040);
    assert_eq!((late.ticked, late.next_due_ms, ticks(&host)), (true, 2_060, 2));
    assert!(!host.on_clock(2_041).ticked, "a stall does not leave ticks owed");

    // A clock read that goes backwards delays the next tick and repeats none.
    assert!(!host.on_clock(500).ticked);
    assert_eq!(ticks(&host), 2);
    assert!(host.on_clock(2_060).ticked);
    assert_eq!(ticks(&host), 3);
}

#[test]
fn every_campaign_and_every_leadership_won_is_counted_by_its_host() {
    let keys: Vec<JournalKey> = (0..3).map(key).collect();
    let mut cell = Cell::new(3);
    cell.settle_leaders(&keys);
    let counts = |cell: &Cell| -> BTreeMap<NodeId, (u64, u64)> {
        cell.hosts.iter().map(|(id, h)| (*id, (h.stats().campaigns, h.stats().leaderships_won))).collect()
    };
    let first = counts(&cell);
    let (campaigns, won): (u64, u64) = first.values().fold((0, 0), |(c, w), (c2, w2)| (c + c2, w + w2));
    assert!(won >= 3 && campaigns >= won, "three journals elected leaders: {first:?}");
    for k in &keys {
        let l = cell.leader_of(k).unwrap();
        assert!(first[&l].1 >= 1 && first[&l].0 >= 1, "{l:?} leads {k:?}: {first:?}");
    }

    // The leader of one journal stops: a survivor campaigns, wins, and counts both.
    let old = cell.leader_of(&keys[0]).unwrap();
    cell.hosts.remove(&old);
    for _ in 0..300 {
        if cell.leader_of(&keys[0]).is_some() {
            break;
        }
        cell.tick();
    }
    let new = cell.leader_of(&keys[0]).expect("a survivor leads");
    let now = counts(&cell);
    assert!(now[&new].0 > first[&new].0, "the new leader campaigned: {first:?} → {now:?}");
    assert!(now[&new].1 > first[&new].1, "the new leader won: {first:?} → {now:?}");
}

#[test]
fn journals_woken_to_check_in_after_a_boot_sleep_again_without_waiting_out_the_dormancy() {
    let journals = 8u64;
    let mut cell = Cell::new(journals);
    let keys: Vec<JournalKey> = (0..journals).map(key).collect();
    cell.settle_leaders(&keys);
    // Every machine restarts asleep, with a dormancy far longer than the test runs.
    let dormant_after = 10_000;
    cell.reboot_asleep(dormant_after, |_, host| assert_eq!(host.dormant_count(), journals as usize, "booted asleep"));
    let ticks = 4 * paros_node::host::CHECK_IN_QUIET_TICKS + 40;
    let mut woke_all = false;
    for _ in 0..ticks {
        cell.tick();
        woke_all |= cell.hosts.values().all(|h| h.stats().wakes >= journals);
    }
    assert!(woke_all, "every journal checked in once on every machine");
    for (id, h) in &cell.hosts {
        assert_eq!(
            h.dormant_count(),
            journals as usize,
            "{id:?}: checked in and asleep again after {ticks} ticks, not {dormant_after}"
        );
    }
    // Asleep is not gone: a call wakes the journal where it lands, which elects itself.
    let (k, at) = (keys[0], cell.ids[0]);
    let t = cell.request(
        at,
        NodeRequest::Call {
            journal: k,
            id: paros_core::CallId(next_id()),
            call: Call::SetLeader { new: uuid(41), old: None },
        },
    );
    assert!(matches!(cell.wait(at, t), NodeAnswer::Call(CallAnswer::Verdict(Outcome::Won(_)))));
    assert_eq!(
        cell.write(at, k, uuid(41), 0, vec![Bytes::from_static(b"after the check-in")]),
        accepted(uuid(41), 0, 1)
    );
}

/// A machine's check-in after a boot wakes the journal on every peer it asks. Those peers did
/// nothing for it but answer: they put it back to sleep as soon as the machine that checked in
/// does, not after their whole dormancy (a restart with 100,000 journals would otherwise hold
/// every one in memory on every peer at once). And a peer that booted too, but whose own turn
/// to check in the journal had not come yet, takes it while the journal is awake: its turn does
/// not wake the journal a second time, and nobody is elected.
#[test]
fn a_peers_check_in_wakes_a_journal_only_for_the_check_in() {
    let journals = 8u64;
    let mut cell = Cell::new(journals);
    let keys: Vec<JournalKey> = (0..journals).map(key).collect();
    cell.settle_leaders(&keys);
    let dormant_after = 10_000;
    let first = cell.ids[0];
    // Only the first machine's turn to check in comes during the test's first part.
    cell.reboot_asleep(dormant_after, |id, host| {
        if id != first {
            host.set_boot_wakes_per_tick(0);
        }
    });
    let ticks = 4 * paros_node::host::CHECK_IN_QUIET_TICKS + 40;
    let mut peers_woke = false;
    for _ in 0..ticks {
        cell.tick();
        peers_woke |= cell.hosts.iter().filter(|(id, _)| **id != first).all(|(_, h)| h.stats().wakes >= journals);
    }
    assert!(peers_woke, "the first machine's check-ins woke every journal on both peers");
    for (id, h) in &cell.hosts {
        assert_eq!(
            h.dormant_count(),
            journals as usize,
            "{id:?}: asleep again after {ticks} ticks, not {dormant_after}"
        );
    }

    // The peers' own turn comes: every journal was checked in already, so nothing wakes.
    let before: BTreeMap<NodeId, (u64, u64)> =
        cell.hosts.iter().map(|(id, h)| (*id, (h.stats().wakes, h.stats().campaigns))).collect();
    for h in cell.hosts.values_mut() {
        h.set_boot_wakes_per_tick(paros_node::host::BOOT_WAKES_PER_TICK);
    }
    for _ in 0..ticks {
        cell.tick();
    }
    let after: BTreeMap<NodeId, (u64, u64)> =
        cell.hosts.iter().map(|(id, h)| (*id, (h.stats().wakes, h.stats().campaigns))).collect();
    assert_eq!(after, before, "no journal woken or elected a second time (wakes, campaigns)");
}

/// Check-ins after a boot wake journals at a bounded rate and hold a bounded number at once:
/// the next waits for room, so a machine that cannot keep up (or check-ins that cannot go
/// quiet) never has every journal in memory. All of them still check in. A peer woken by a
/// check-in's request must answer it; one that booted too takes its own turn then (within its
/// own bound) and finishes a tick or two after the first machine, which may have woken the next
/// ones by then: a peer holds at most its own bound and the first machine's.
#[test]
fn check_ins_after_a_boot_hold_at_most_their_bound_in_memory() {
    let journals = 12u64;
    let bound = 3;
    let mut cell = Cell::new(journals);
    let keys: Vec<JournalKey> = (0..journals).map(key).collect();
    cell.settle_leaders(&keys);
    let first = cell.ids[0];
    cell.reboot_asleep(10_000, |id, host| {
        host.set_check_ins_max(bound);
        if id != first {
            host.set_boot_wakes_per_tick(0);
        }
    });
    let (mut awake_max, mut peer_max) = (0, 0);
    for _ in 0..journals * 60 {
        cell.tick();
        for (id, h) in &cell.hosts {
            let awake = h.journal_count() - h.dormant_count();
            if *id == first {
                awake_max = awake_max.max(awake);
            } else {
                peer_max = peer_max.max(awake);
            }
        }
    }
    assert!(awake_max >= 2, "check-ins overlapped (awake at most {awake_max} at once)");
    assert!(awake_max <= bound, "at most {bound} awake at once on the machine checking in, saw {awake_max}");
    assert!(peer_max <= 2 * bound, "a peer holds its own turns and the first machine's check-ins, saw {peer_max}");
    for (id, h) in &cell.hosts {
        assert!(h.stats().wakes >= journals, "{id:?}: every journal checked in ({} wakes)", h.stats().wakes);
        assert_eq!(h.dormant_count(), journals as usize, "{id:?}: and asleep again");
    }
}

/// A machine that was down while a journal was written catches up at its boot check-in, and
/// the check-ins of a cell whose journals slept elect nobody and write nothing: a restart of a
/// cell of idle journals makes no promise (a row per journal per machine, before) and leaves the
/// leaders where they were.
#[test]
fn a_machine_down_during_writes_catches_up_at_its_boot_check_in_and_idle_check_ins_write_nothing() {
    let k = key(0);
    let mut cell = Cell::new(1);
    cell.settle_leaders(&[k]);
    let leader = claim(&mut cell, k, uuid(5));
    let down = *cell.ids.iter().find(|id| **id != leader).expect("a follower");
    use paros_node::ports::LogRead;
    let chosen =
        |cell: &Cell, id: NodeId| cell.disks[&id].load_journal(&k).expect("reads").expect("hosted").chosen_up_to;
    let missed_from = chosen(&cell, down);
    cell.hosts.remove(&down);
    for n in 0..6u64 {
        let records = vec![Bytes::from(format!("while down {n}"))];
        assert_eq!(cell.write(leader, k, uuid(5), n, records), accepted(uuid(5), n, 1));
    }

    // Everything restarts; the journal checks in everywhere, and sleeps once quiet.
    cell.reboot_asleep(20, |_, _| {});
    for _ in 0..300 {
        cell.tick();
    }
    let up_to: Vec<paros_core::Slot> = cell.ids.iter().map(|id| chosen(&cell, *id)).collect();
    assert!(up_to.iter().all(|s| *s == up_to[0]), "every machine holds the same chosen prefix: {up_to:?}");
    assert!(
        up_to[0].0 >= missed_from.0 + 6,
        "including the six writes the machine that was down missed: {up_to:?} from {missed_from:?}"
    );
    for (id, h) in &cell.hosts {
        assert_eq!(h.dormant_count(), 1, "{id:?}: asleep again");
    }

    // The idle cell restarts again: its check-ins elect nobody and write nothing.
    cell.reboot_asleep(10_000, |_, _| {});
    for _ in 0..4 * paros_node::host::CHECK_IN_QUIET_TICKS + 40 {
        cell.tick();
    }
    for (id, h) in &cell.hosts {
        assert!(h.stats().wakes >= 1, "{id:?}: checked in");
        assert_eq!(h.dormant_count(), 1, "{id:?}: and asleep again");
        assert_eq!(
            (h.stats().campaigns, h.stats().writes),
            (0, 0),
            "{id:?}: no election, no write (campaigns, writes)"
        );
    }
}

/// A call that reaches a journal while it is awake only to check in (a quiet follower that
/// knows no leader, since a check-in elects nobody) elects this machine and lands, as a call
/// that wakes a dormant journal does: it is not redirected nowhere.
#[test]
fn a_call_during_a_check_in_elects_and_lands() {
    let k = key(0);
    let mut cell = Cell::new(1);
    cell.settle_leaders(&[k]);
    cell.reboot_asleep(10_000, |_, _| {});
    let at = cell.ids[0];
    let mut ticks = 0;
    while cell.hosts[&at].is_dormant(&k) {
        cell.tick();
        ticks += 1;
        assert!(ticks < 50, "the journal wakes to check in");
    }
    let v = cell.hosts[&at].voter(&k).expect("awake");
    assert!(v.is_quiet_without_a_leader() && v.is_checking_in(), "checking in, no leader known");
    let t = cell.request(
        at,
        NodeRequest::Call {
            journal: k,
            id: paros_core::CallId(next_id()),
            call: Call::SetLeader { new: uuid(9), old: None },
        },
    );
    match cell.wait(at, t) {
        NodeAnswer::Call(CallAnswer::Verdict(Outcome::Won(_))) => {}
        other => panic!("the call is served here, not redirected: {other:?}"),
    }
    assert_eq!(cell.leader_of(&k), Some(at));
}

#[test]
fn an_answer_to_an_earlier_life_of_a_journal_is_dropped_counted_and_wakes_nothing() {
    use paros_core::{Message, Slot};
    let k = key(0);
    let mut cell = Cell::new(1);
    for h in cell.hosts.values_mut() {
        h.set_dormancy(Some(20));
    }
    cell.settle_leaders(&[k]);
    let leader = claim(&mut cell, k, uuid(5));
    let follower = *cell.ids.iter().find(|id| **id != leader).expect("a follower");
    let first_life = cell.hosts[&follower].voter(&k).expect("awake").life();
    for _ in 0..80 {
        cell.tick();
    }
    assert!(cell.hosts[&follower].is_dormant(&k));
    // A watermark for a round of the life that went to sleep: the dormant journal asked
    // nothing, so it is not woken for it.
    let wakes = cell.hosts[&follower].stats().wakes;
    let stale = Envelope {
        journal: k,
        from: leader,
        message: Message::Watermark { read: 0, life: first_life, up_to: Slot(1) },
    };
    cell.hosts.get_mut(&follower).unwrap().deliver(leader, vec![stale.clone()]);
    let stats = cell.hosts[&follower].stats();
    assert!(cell.hosts[&follower].is_dormant(&k), "a stale answer woke a dormant journal");
    assert_eq!((stats.stale_answers_dormant, stats.wakes), (1, wakes));

    // A write wakes it everywhere, in a new life here.
    let records = vec![Bytes::from_static(b"x")];
    assert_eq!(cell.write(leader, k, uuid(5), 0, records), accepted(uuid(5), 0, 1));
    let woken_life = cell.hosts[&follower].voter(&k).expect("woken").life();
    assert_ne!(woken_life, first_life, "every life of a journal on a machine is its own");
    let late = [
        stale.message,
        Message::CatchUpResponse { entries: Vec::new(), chosen_up_to: Slot(9), life: first_life },
        Message::TrimmedTo {
            from: Slot(0),
            point: Slot(9),
            state: paros_core::journal::JournalState::default(),
            life: first_life,
        },
    ];
    let h = cell.hosts.get_mut(&follower).unwrap();
    h.deliver(leader, late.into_iter().map(|message| Envelope { journal: k, from: leader, message }).collect());
    let stats = h.stats();
    assert_eq!((stats.stale_answers, stats.stale_answers_after_wake), (3, 3));
    assert_eq!(h.voter(&k).unwrap().floor(), Slot(0), "a trim point told to the earlier life is not jumped to");
    // An answer of this life is not stale.
    h.deliver(
        leader,
        vec![Envelope {
            journal: k,
            from: leader,
            message: Message::Watermark { read: 7, life: woken_life, up_to: Slot(1) },
        }],
    );
    assert_eq!(h.stats().stale_answers, 3);
}

#[test]
fn a_resend_under_its_id_waits_for_the_one_answer_and_another_call_under_it_is_busy() {
    let k = key(0);
    let mut cell = Cell::new(1);
    cell.settle_leaders(&[k]);
    let u = uuid(7);
    let l = claim(&mut cell, k, u);
    for _ in 0..3 {
        cell.round();
        cell.tick();
    }
    let before = cell.hosts[&l].voter(&k).unwrap().chosen_up_to();
    let write = |r: &'static [u8]| Call::Write { leader: Some(u), seq: Seq(0), records: vec![Bytes::from_static(r)] };
    let id = paros_core::CallId(next_id());
    let first = cell.request(l, NodeRequest::Call { journal: k, id, call: write(b"a") });
    let again = cell.request(l, NodeRequest::Call { journal: k, id, call: write(b"a") });
    assert_eq!(first, again, "a resend under the call's id is owed the same answer");
    let other = cell.hosts.get_mut(&l).unwrap().request(NodeRequest::Call { journal: k, id, call: write(b"b") });
    assert_eq!(other, Err(NodeAnswer::Call(CallAnswer::Busy)), "another call under an owed id is refused");
    assert_eq!(cell.wait(l, first), NodeAnswer::Call(accepted(u, 0, 1)));
    for _ in 0..3 {
        cell.round();
        cell.tick();
    }
    let after = cell.hosts[&l].voter(&k).unwrap().chosen_up_to();
    assert_eq!(after.0, before.0 + 1, "the call was proposed once, not once per send");
    // Answered, the id is free: a later resend is a new request, judged a duplicate.
    let late = cell.request(l, NodeRequest::Call { journal: k, id, call: write(b"a") });
    match cell.wait(l, late) {
        NodeAnswer::Call(CallAnswer::Verdict(Outcome::Duplicate { seq, count, .. })) => {
            assert_eq!((seq, count), (Seq(0), 1));
        }
        other => panic!("{other:?}"),
    }
}
