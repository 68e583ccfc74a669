//! The event loop (`Pump`) the shell and the simulation both drive: three pumps over in-memory
//! stores, driven by a test loop that holds each round's batch "on the disk" for a while.

mod common;

use std::collections::BTreeMap;

use bytes::Bytes;
use common::next_id;
use paros_core::journal::{JournalView, Outcome, WriterMode};
use paros_core::{Call, CallAnswer, JournalConfig, JournalId, JournalKey, LeaderUuid, NodeId, Seq, TenantId, Tunables};
use paros_node::ports::{Envelope, LogStore};
use paros_node::pump::Batch;
use paros_node::rpc::{NodeAnswer, NodeRequest};
use paros_node::{Effects, Host, MemStore, Owed, Pump};

const TICK_MS: u64 = 10;

fn key() -> JournalKey {
    JournalKey { tenant: TenantId(0xabc), journal: JournalId(0xdef) }
}

struct Machines {
    pumps: BTreeMap<NodeId, Pump<MemStore>>,
    /// Each machine's batch in flight, and how many more steps it stays "on the disk".
    persisting: BTreeMap<NodeId, (Batch, u32)>,
    mail: Vec<(NodeId, NodeId, Vec<Envelope>)>,
    answers: BTreeMap<(NodeId, Owed), NodeAnswer>,
    now_ms: u64,
    /// Every step's effects, per machine, for the assertions.
    seen: Vec<(NodeId, bool, Effects)>,
}

impl Machines {
    fn new() -> Machines {
        let ids: Vec<NodeId> = (1..=3).map(|i| NodeId(0x5500 + i)).collect();
        let tunables = Tunables { election_ticks_min: 5, election_ticks_max: 10, ..Tunables::default() };
        let config = JournalConfig { mode: WriterMode::Single, voters: ids.clone(), learners: vec![] };
        let mut pumps = BTreeMap::new();
        for id in &ids {
            let mut host = Host::boot(MemStore::new(), None, *id, tunables, id.0).expect("boots");
            host.place(key(), config.clone()).expect("placed");
            host.set_tick_ms(TICK_MS);
            pumps.insert(*id, Pump::new(host, 0));
        }
        pumps.get_mut(&ids[0]).expect("present").host_mut().campaign(&key());
        Machines {
            pumps,
            persisting: BTreeMap::new(),
            mail: Vec::new(),
            answers: BTreeMap::new(),
            now_ms: 0,
            seen: Vec::new(),
        }
    }

    /// One pass: every machine steps once (handing back a batch whose disk time is up), then
    /// the mail is delivered.
    fn pass(&mut self, disk_steps: u32) {
        let ids: Vec<NodeId> = self.pumps.keys().copied().collect();
        for id in ids {
            let synced = match self.persisting.get_mut(&id) {
                Some((_, 0)) => {
                    let (batch, _) = self.persisting.remove(&id).expect("present");
                    let pump = self.pumps.get_mut(&id).expect("present");
                    let mut store = pump.host_mut().lend_store();
                    store.write(&batch).expect("memory write");
                    store.sync().expect("memory sync");
                    pump.host_mut().return_store(store);
                    Some(batch)
                }
                Some((_, left)) => {
                    *left -= 1;
                    None
                }
                None => None,
            };
            let handed_back = synced.is_some();
            let pump = self.pumps.get_mut(&id).expect("present");
            let mut effects = pump.step(self.now_ms, synced);
            if let Some(p) = effects.persist.take() {
                assert!(!self.persisting.contains_key(&id), "one round in flight at a time");
                self.persisting.insert(id, (p.batch, disk_steps));
            }
            for (to, envelopes) in &effects.messages {
                self.mail.push((id, *to, envelopes.clone()));
            }
            for (t, a) in &effects.answers {
                self.answers.insert((id, *t), a.clone());
            }
            self.seen.push((id, handed_back, effects));
        }
        for (from, to, envelopes) in std::mem::take(&mut self.mail) {
            if let Some(p) = self.pumps.get_mut(&to) {
                p.deliver(from, envelopes);
            }
        }
    }

    fn tick(&mut self, disk_steps: u32) {
        self.now_ms += TICK_MS;
        for _ in 0..4 {
            self.pass(disk_steps);
        }
    }

    fn leader(&self) -> Option<NodeId> {
        self.pumps.iter().find(|(_, p)| p.host().voter(&key()).is_some_and(|v| v.is_leader())).map(|(id, _)| *id)
    }

    fn call(&mut self, call: Call, disk_steps: u32) -> NodeAnswer {
        let at = self.leader().expect("a leader");
        let ticket = self
            .pumps
            .get_mut(&at)
            .expect("present")
            .request(NodeRequest::Call { journal: key(), id: paros_core::CallId(next_id()), call })
            .expect("hosted");
        for _ in 0..50 {
            self.tick(disk_steps);
            if let Some(a) = self.answers.remove(&(at, ticket)) {
                return a;
            }
        }
        panic!("no answer");
    }
}

fn uuid(n: u128) -> LeaderUuid {
    LeaderUuid::new(n).expect("non-zero")
}

#[test]
fn calls_are_decided_through_pumps_with_a_slow_disk() {
    let mut m = Machines::new();
    for _ in 0..20 {
        m.tick(3);
    }
    let a = uuid(7);
    assert!(matches!(
        m.call(Call::SetLeader { new: a, old: None }, 3),
        NodeAnswer::Call(CallAnswer::Verdict(Outcome::Won(_)))
    ));
    let records = vec![Bytes::from_static(b"one"), Bytes::from_static(b"two")];
    let answer = m.call(Call::Write { leader: Some(a), seq: Seq(0), records }, 3);
    let view = JournalView { leader: Some(a), first_seq: Seq(0), next_seq: Seq(2) };
    assert_eq!(answer, NodeAnswer::Call(CallAnswer::Verdict(Outcome::Accepted { seq: Seq(0), count: 2, view })));
    for p in m.pumps.values() {
        assert!(p.host().stats().syncs > 0, "every machine synced its rounds");
    }
}

#[test]
fn acceptor_replies_leave_only_after_their_round_is_handed_back() {
    let mut m = Machines::new();
    for _ in 0..20 {
        m.tick(3);
    }
    let a = uuid(9);
    m.call(Call::SetLeader { new: a, old: None }, 3);
    // For each machine: while a batch is out, no step releases a vote; votes appear in the step
    // that hands a batch back (or one with nothing in flight: a round without writes).
    let mut out: BTreeMap<NodeId, bool> = BTreeMap::new();
    let mut votes_released_while_out = 0;
    let mut votes_released_at_hand_back = 0;
    for (id, handed_back, effects) in &m.seen {
        let votes = effects.messages.iter().flat_map(|(_, e)| e).filter(|e| e.message.needs_durable_sender()).count();
        let was_out = out.get(id).copied().unwrap_or(false) && !handed_back;
        if was_out {
            votes_released_while_out += votes;
        } else if *handed_back {
            votes_released_at_hand_back += votes;
        }
        out.insert(*id, effects.persist.is_some() || was_out);
    }
    assert_eq!(votes_released_while_out, 0, "no vote leaves while its batch is on its way to the disk");
    assert!(votes_released_at_hand_back > 0, "votes leave when their batch is handed back");
}

#[test]
fn self_addressed_messages_never_leave_the_pump() {
    let mut m = Machines::new();
    for _ in 0..20 {
        m.tick(1);
    }
    m.call(Call::SetLeader { new: uuid(3), old: None }, 1);
    assert!(m.seen.iter().all(|(id, _, e)| e.messages.iter().all(|(to, _)| to != id)), "a machine never mails itself");
    assert!(m.seen.iter().any(|(_, _, e)| !e.messages.is_empty()), "machines did talk to each other");
}

#[test]
fn a_tick_pings_every_peer_once_and_a_second_reading_of_the_same_time_does_not() {
    let mut m = Machines::new();
    let id = *m.pumps.keys().next().expect("three machines");
    let pump = m.pumps.get_mut(&id).expect("present");
    let first = pump.step(TICK_MS, None);
    assert!(first.ticked);
    assert_eq!(first.pings.len(), 2, "both peers hear that this machine is up");
    let again = pump.step(TICK_MS, None);
    assert!(!again.ticked && again.pings.is_empty(), "one reading, one tick");
    assert!(pump.next_due_ms() > TICK_MS, "the next tick is due later");
}
