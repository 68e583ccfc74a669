//! An in-memory cluster for scenario tests: voters and learner-only replicas of one journal,
//! a seeded lossy network, durable state modelled by `Durable::apply`, crashes and restarts.
#![allow(dead_code)]

use std::collections::BTreeMap;

use bytes::Bytes;
use paros_core::journal::{JournalState, Outcome, WriterMode};
use paros_core::rng::Rng;
use paros_core::{
    Ballot, Call, CallAnswer, CallId, Consistency, Durable, JournalConfig, LeaderUuid, Life, Message, NodeId,
    ReadAnswer, ReadId, ReadRequest, Ready, Replica, Seq, Slot, Tunables, Voter, WriteOp,
};

#[allow(clippy::large_enum_variant, reason = "a handful of machines per test; boxing buys nothing")]
pub enum Role {
    Voter(Voter),
    Replica(Replica),
}

pub struct Machine {
    pub role: Option<Role>,
    pub durable: Durable,
    pub voter: bool,
}

#[derive(Clone, Copy, Debug)]
pub struct Faults {
    pub drop_pct: u64,
    pub dup_pct: u64,
    pub reorder: bool,
}

impl Faults {
    pub const NONE: Faults = Faults { drop_pct: 0, dup_pct: 0, reorder: false };
    pub const LOSSY: Faults = Faults { drop_pct: 10, dup_pct: 5, reorder: true };
}

pub struct Cluster {
    pub cfg: JournalConfig,
    pub tunables: Tunables,
    pub machines: BTreeMap<NodeId, Machine>,
    pub net: Vec<(NodeId, NodeId, Message)>,
    pub rng: Rng,
    pub faults: Faults,
    pub answers: BTreeMap<CallId, CallAnswer>,
    pub reads: BTreeMap<ReadId, ReadAnswer>,
    /// Every (node, slot) → (digest, outcome) ever applied; re-applies after restart must agree.
    pub applied: BTreeMap<Slot, BTreeMap<NodeId, (u64, Outcome, bool)>>,
    /// Every promise each node ever wrote, in order.
    pub promises: BTreeMap<NodeId, Vec<paros_core::Ballot>>,
    /// Nodes cut off from everyone.
    pub isolated: Vec<NodeId>,
    /// Drops every message it returns true for, `(from, to, message)`; cleared by `settle`.
    pub filter: Option<Filter>,
    /// Every durable write each machine made, in order.
    pub writes: BTreeMap<NodeId, Vec<WriteOp>>,
    /// Every trim-point jump a `TrimmedTo` caused, with the promise either side of it.
    pub jumps: Vec<Jump>,
    next_call: u64,
}

/// A message filter: true drops the message.
pub type Filter = Box<dyn FnMut(NodeId, NodeId, &Message) -> bool>;

/// One delivered `TrimmedTo` that moved a machine's floor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Jump {
    pub node: NodeId,
    pub point: Slot,
    pub floor_before: Slot,
    pub floor_after: Slot,
    /// The promise just before and just after the step (`None` on a replica, which holds none).
    pub promised_before: Option<Ballot>,
    pub promised_after: Option<Ballot>,
}

pub fn voter_id(i: u64) -> NodeId {
    NodeId(0x100 + i)
}

pub fn learner_id(i: u64) -> NodeId {
    NodeId(0x900 + i)
}

pub fn uuid(n: u128) -> LeaderUuid {
    LeaderUuid::new(n).expect("non-zero")
}

pub fn recs(tag: &str, n: usize) -> Vec<Bytes> {
    (0..n).map(|i| Bytes::from(format!("{tag}-{i}"))).collect()
}

impl Cluster {
    pub fn new(voters: u64, learners: u64, seed: u64, faults: Faults) -> Cluster {
        Cluster::with_mode(voters, learners, seed, faults, WriterMode::Single)
    }

    pub fn with_mode(voters: u64, learners: u64, seed: u64, faults: Faults, mode: WriterMode) -> Cluster {
        Cluster::with_tunables(voters, learners, seed, faults, mode, |_| {})
    }

    /// A cluster whose tunables `tweak` adjusts from the harness defaults.
    pub fn with_tunables(
        voters: u64,
        learners: u64,
        seed: u64,
        faults: Faults,
        mode: WriterMode,
        tweak: impl FnOnce(&mut Tunables),
    ) -> Cluster {
        let cfg = JournalConfig {
            mode,
            voters: (0..voters).map(voter_id).collect(),
            learners: (0..learners).map(learner_id).collect(),
        };
        let mut tunables =
            Tunables { election_ticks_min: 5, election_ticks_max: 10, call_ticks_max: 40, ..Tunables::default() };
        tweak(&mut tunables);
        let mut c = Cluster {
            cfg,
            tunables,
            machines: BTreeMap::new(),
            net: Vec::new(),
            rng: Rng::new(seed),
            faults,
            answers: BTreeMap::new(),
            reads: BTreeMap::new(),
            applied: BTreeMap::new(),
            promises: BTreeMap::new(),
            isolated: Vec::new(),
            filter: None,
            writes: BTreeMap::new(),
            jumps: Vec::new(),
            next_call: 1,
        };
        for id in c.cfg.voters.clone() {
            c.machines.insert(id, Machine { role: None, durable: Durable::default(), voter: true });
            c.start(id);
        }
        for id in c.cfg.learners.clone() {
            c.machines.insert(id, Machine { role: None, durable: Durable::default(), voter: false });
            c.start(id);
        }
        c
    }

    /// Boots `id` from its durable state.
    pub fn start(&mut self, id: NodeId) {
        let seed = self.rng.next_u64();
        // A new life each boot, as a host mints one.
        let life = Life(self.rng.next_u64());
        let m = self.machines.get_mut(&id).expect("known machine");
        assert!(m.role.is_none(), "start a stopped machine");
        let role = if m.voter {
            Role::Voter(Voter::recover(id, self.cfg.clone(), self.tunables, seed, life, m.durable.clone()))
        } else {
            Role::Replica(Replica::recover(id, self.cfg.clone(), self.tunables, life, m.durable.clone(), false))
        };
        m.role = Some(role);
    }

    /// Stops `id`: nothing it did not persist survives (the harness persists whole rounds).
    pub fn crash(&mut self, id: NodeId) {
        self.machines.get_mut(&id).expect("known").role = None;
        self.net.retain(|(_, to, _)| *to != id);
    }

    pub fn is_up(&self, id: NodeId) -> bool {
        self.machines[&id].role.is_some()
    }

    pub fn voter(&self, id: NodeId) -> &Voter {
        match &self.machines[&id].role {
            Some(Role::Voter(v)) => v,
            _ => panic!("{id:?} is not a running voter"),
        }
    }

    pub fn voter_mut(&mut self, id: NodeId) -> &mut Voter {
        match &mut self.machines.get_mut(&id).expect("known").role {
            Some(Role::Voter(v)) => v,
            _ => panic!("{id:?} is not a running voter"),
        }
    }

    pub fn replica(&self, id: NodeId) -> &Replica {
        match &self.machines[&id].role {
            Some(Role::Replica(r)) => r,
            _ => panic!("{id:?} is not a running replica"),
        }
    }

    pub fn state_of(&self, id: NodeId) -> JournalState {
        match &self.machines[&id].role {
            Some(Role::Voter(v)) => *v.state(),
            Some(Role::Replica(r)) => *r.state(),
            None => panic!("down"),
        }
    }

    pub fn floor_of(&self, id: NodeId) -> Slot {
        match &self.machines[&id].role {
            Some(Role::Voter(v)) => v.floor(),
            Some(Role::Replica(r)) => r.floor(),
            None => panic!("down"),
        }
    }

    pub fn chosen_of(&self, id: NodeId) -> Slot {
        match &self.machines[&id].role {
            Some(Role::Voter(v)) => v.chosen_up_to(),
            Some(Role::Replica(r)) => r.chosen_up_to(),
            None => panic!("down"),
        }
    }

    /// Every machine that hosts the journal as a voter (of some configuration), in id order.
    pub fn voter_machines(&self) -> Vec<NodeId> {
        self.machines.iter().filter(|(_, m)| m.voter).map(|(id, _)| *id).collect()
    }

    pub fn leader(&self) -> Option<NodeId> {
        self.voter_machines().into_iter().find(|v| self.is_up(*v) && self.voter(*v).is_leader())
    }

    /// Adds machine `id` hosting the journal as a voter placed with the founding configuration,
    /// which does not name it: it votes once the journal's own log makes it a voter.
    pub fn add_voter(&mut self, id: NodeId) {
        let previous = self.machines.insert(id, Machine { role: None, durable: Durable::default(), voter: true });
        assert!(previous.is_none(), "a new machine");
        self.start(id);
    }

    /// One round: every running machine hands over its Ready, the harness persists it,
    /// then its messages enter the network, then it is advanced.
    pub fn round(&mut self) {
        let ids: Vec<NodeId> = self.machines.keys().copied().collect();
        for id in ids {
            let m = self.machines.get_mut(&id).expect("known");
            let ready: Ready = match &mut m.role {
                Some(Role::Voter(v)) => v.ready(),
                Some(Role::Replica(r)) => r.ready(),
                None => continue,
            };
            for w in &ready.writes {
                if let paros_core::WriteOp::Promise(b) = w {
                    self.promises.entry(id).or_default().push(*b);
                }
                m.durable.apply(w);
            }
            self.writes.entry(id).or_default().extend(ready.writes.iter().cloned());
            for o in ready.messages {
                self.net.push((id, o.to, o.message));
            }
            for (c, a) in ready.answers {
                self.answers.insert(c, a);
            }
            for (r, a) in ready.reads {
                self.reads.insert(r, a);
            }
            for a in ready.applied {
                if std::env::var("PAROS_TRACE_SLOT").is_ok_and(|t| t == a.slot.0.to_string()) {
                    eprintln!("APPLIED at {:?}: {:?} digest {}", id.0, a.judged.outcome, a.digest);
                }
                let seen = self.applied.entry(a.slot).or_default();
                seen.insert(id, (a.digest, a.judged.outcome, a.judged.blind));
            }
            match &mut m.role {
                Some(Role::Voter(v)) => v.advance(),
                Some(Role::Replica(r)) => r.advance(),
                None => {}
            }
        }
        self.deliver();
    }

    fn deliver(&mut self) {
        let mut batch = std::mem::take(&mut self.net);
        if self.faults.reorder {
            for i in (1..batch.len()).rev() {
                let j = (self.rng.next_u64() % (i as u64 + 1)) as usize;
                batch.swap(i, j);
            }
        }
        for (from, to, msg) in batch {
            if self.isolated.contains(&from) || self.isolated.contains(&to) {
                continue;
            }
            if self.filter.as_mut().is_some_and(|f| f(from, to, &msg)) {
                continue;
            }
            if self.rng.next_u64() % 100 < self.faults.drop_pct {
                continue;
            }
            let copies = if self.rng.next_u64() % 100 < self.faults.dup_pct { 2 } else { 1 };
            for _ in 0..copies {
                self.step(from, to, msg.clone());
            }
        }
    }

    /// Delivers one message, noting any trim-point jump it causes.
    fn step(&mut self, from: NodeId, to: NodeId, msg: Message) {
        if let Ok(t) = std::env::var("PAROS_TRACE_SLOT") {
            let t: u64 = t.parse().unwrap();
            let hit = match &msg {
                Message::Accept { entries, .. } => entries.iter().any(|(s, _)| s.0 == t),
                Message::Accepted { slots, .. } => slots.iter().any(|(s, _)| s.0 == t),
                Message::Promise { accepted, from, .. } => from.0 <= t || accepted.iter().any(|r| r.slot.0 == t),
                Message::Prepare { .. } | Message::Nack { .. } => true,
                Message::Chosen { entries } | Message::CatchUpResponse { entries, .. } => {
                    entries.iter().any(|(s, _)| s.0 == t)
                }
                Message::TrimmedTo { .. } => true,
                _ => false,
            };
            if hit {
                let m = format!("{msg:?}");
                let m = if m.len() > 600 { format!("{}…", &m[..600]) } else { m };
                eprintln!("{:?}->{:?}: {m}", from.0, to.0);
            }
        }
        let point = match &msg {
            Message::TrimmedTo { point, .. } => Some(*point),
            _ => None,
        };
        let Some(Some(role)) = self.machines.get_mut(&to).map(|m| &mut m.role) else { return };
        let (floor_before, promised_before) = floor_and_promise(role);
        match role {
            Role::Voter(v) => v.step(from, msg),
            Role::Replica(r) => r.step(from, msg),
        }
        let (floor_after, promised_after) = floor_and_promise(role);
        if let Some(point) = point
            && floor_after != floor_before
        {
            self.jumps.push(Jump { node: to, point, floor_before, floor_after, promised_before, promised_after });
        }
    }

    pub fn tick(&mut self) {
        for m in self.machines.values_mut() {
            match &mut m.role {
                Some(Role::Voter(v)) => v.tick(),
                Some(Role::Replica(r)) => r.tick(),
                None => {}
            }
        }
        self.round();
        self.round();
    }

    pub fn run(&mut self, ticks: u32) {
        for _ in 0..ticks {
            self.tick();
        }
    }

    /// Ticks until some voter leads, at most `ticks_max`.
    pub fn elect(&mut self, ticks_max: u32) -> NodeId {
        for _ in 0..ticks_max {
            if let Some(l) = self.leader() {
                return l;
            }
            self.tick();
        }
        panic!("no leader after {ticks_max} ticks");
    }

    /// Proposes `call` at `node` and runs until it is answered (or `ticks_max` pass).
    pub fn call_at(&mut self, node: NodeId, call: Call, ticks_max: u32) -> Option<CallAnswer> {
        let id = CallId(self.next_call);
        self.next_call += 1;
        self.voter_mut(node).propose(id, call);
        for _ in 0..ticks_max {
            self.round();
            if let Some(a) = self.answers.remove(&id) {
                return Some(a);
            }
            self.tick();
            if let Some(a) = self.answers.remove(&id) {
                return Some(a);
            }
        }
        None
    }

    /// Calls through whichever voter leads, following redirects; `None` if never answered.
    pub fn call(&mut self, call: Call) -> Option<CallAnswer> {
        for _ in 0..20 {
            let l = self.elect(200);
            match self.call_at(l, call.clone(), 60) {
                Some(CallAnswer::Redirect { .. }) | Some(CallAnswer::NoVerdict) | None => self.run(3),
                answer => return answer,
            }
        }
        None
    }

    pub fn read_at(&mut self, node: NodeId, from: Seq, consistency: Consistency, ticks_max: u32) -> Option<ReadAnswer> {
        let id = ReadId(self.next_call);
        self.next_call += 1;
        let request = ReadRequest { from, limit: 0, max_bytes: 0, wait_ticks: 0, consistency };
        match &mut self.machines.get_mut(&node).expect("known").role {
            Some(Role::Voter(v)) => v.read(id, request),
            Some(Role::Replica(r)) => r.read(id, request),
            None => panic!("down"),
        }
        for _ in 0..ticks_max {
            self.round();
            if let Some(a) = self.reads.remove(&id) {
                return Some(a);
            }
            self.tick();
        }
        None
    }

    /// Asserts that every slot applied anywhere was judged to the same command and outcome
    /// (blind judgements after a trim-point jump are compared on the command only).
    pub fn assert_agreement(&self) {
        for (slot, by_node) in &self.applied {
            let sighted: Vec<_> = by_node.values().filter(|(_, _, blind)| !blind).collect();
            for w in sighted.windows(2) {
                assert_eq!((w[0].0, w[0].1), (w[1].0, w[1].1), "every node judges {slot:?} the same");
            }
            let digests: Vec<u64> = by_node.values().map(|(d, _, _)| *d).collect();
            assert!(digests.windows(2).all(|w| w[0] == w[1]), "one command chosen at {slot:?}");
        }
        for (id, ps) in &self.promises {
            assert!(ps.windows(2).all(|w| w[0] <= w[1]), "{id:?}'s promise never decreases");
        }
    }

    /// Proposes `call` at `node` without running the cluster; the answer lands in `answers`.
    pub fn propose_at(&mut self, node: NodeId, call: Call) -> CallId {
        let id = CallId(self.next_call);
        self.next_call += 1;
        self.voter_mut(node).propose(id, call);
        id
    }

    /// Hands `request` to `node` without running the cluster; the answer lands in `reads`.
    pub fn submit_read(&mut self, node: NodeId, request: ReadRequest) -> ReadId {
        let id = ReadId(self.next_call);
        self.next_call += 1;
        match &mut self.machines.get_mut(&node).expect("known").role {
            Some(Role::Voter(v)) => v.read(id, request),
            Some(Role::Replica(r)) => r.read(id, request),
            None => panic!("down"),
        }
        id
    }

    /// Every running machine, voters first.
    pub fn up(&self) -> Vec<NodeId> {
        let voters = self.voter_machines();
        voters.into_iter().chain(self.cfg.learners.iter().copied()).filter(|id| self.is_up(*id)).collect()
    }

    /// Runs fault-free until every running machine holds the same chosen prefix and state, and
    /// has for a few ticks under one leader.
    pub fn settle(&mut self, ticks_max: u32) {
        let saved = self.faults;
        self.faults = Faults::NONE;
        self.isolated.clear();
        self.filter = None;
        // Agreement must hold, unchanged, for a few ticks: a new leader's re-proposals (resent
        // every other tick) are chosen well within that on a fault-free network.
        let mut stable = (None, 0);
        for _ in 0..ticks_max {
            self.tick();
            let ups: Vec<NodeId> = self.machines.keys().copied().filter(|id| self.is_up(*id)).collect();
            let first = (self.chosen_of(ups[0]), self.state_of(ups[0]));
            let agreed =
                self.leader().is_some() && ups.iter().all(|id| (self.chosen_of(*id), self.state_of(*id)) == first);
            stable = match stable {
                (Some(seen), n) if agreed && seen == first => (Some(seen), n + 1),
                _ if agreed => (Some(first), 1),
                _ => (None, 0),
            };
            if stable.1 >= 6 {
                self.faults = saved;
                return;
            }
        }
        let report: Vec<String> = self
            .up()
            .into_iter()
            .map(|id| {
                format!("{id:?}: chosen {:?} floor {:?} {:?}", self.chosen_of(id), self.floor_of(id), self.state_of(id))
            })
            .collect();
        panic!("no convergence after {ticks_max} ticks (leader {:?}): {report:#?}", self.leader());
    }
}

fn floor_and_promise(role: &Role) -> (Slot, Option<Ballot>) {
    match role {
        Role::Voter(v) => (v.floor(), Some(v.promised())),
        Role::Replica(r) => (r.floor(), None),
    }
}

pub fn write(leader: LeaderUuid, seq: u64, records: Vec<Bytes>) -> Call {
    Call::Write { leader: Some(leader), seq: Seq(seq), records }
}

pub fn accepted(a: Option<CallAnswer>) -> (Seq, u64) {
    match a {
        Some(CallAnswer::Verdict(Outcome::Accepted { seq, count, .. })) => (seq, count),
        other => panic!("expected Accepted, got {other:?}"),
    }
}

/// The seeds every scenario runs under: a handful, so no single schedule is the claim.
pub const SEEDS: [u64; 5] = [3, 17, 101, 2024, 0xdead_beef];

/// Claims the journal for `new` from `old`. A retry after an ambiguous first try finds `new`
/// already leading and loses its compare-and-set: that counts as claimed.
pub fn claim(c: &mut Cluster, new: LeaderUuid, old: Option<LeaderUuid>) {
    match c.call(Call::SetLeader { new, old }) {
        Some(CallAnswer::Verdict(Outcome::Won(v))) => assert_eq!(v.leader, Some(new)),
        Some(CallAnswer::Verdict(Outcome::Lost(v))) if v.leader == Some(new) => {}
        other => panic!("claiming for {new:?} from {old:?}: {other:?}"),
    }
}

/// What a writer knows it wrote: the record at each position it was acknowledged for.
#[derive(Clone, Debug, Default)]
pub struct Written(pub Vec<Bytes>);

/// Claims the journal for the uuid `0xa` on a fresh cluster: the writer and its empty record of
/// what it wrote.
pub fn claimed(c: &mut Cluster) -> (LeaderUuid, Written) {
    let a = uuid(0xa);
    claim(c, a, None);
    (a, Written::default())
}

impl Written {
    pub fn next(&self) -> u64 {
        self.0.len() as u64
    }

    /// Appends `records` at the tail under `leader` until acknowledged: `Accepted` there, or
    /// `Duplicate` there when an ambiguous first try was chosen after all.
    pub fn append(&mut self, c: &mut Cluster, leader: LeaderUuid, records: Vec<Bytes>) {
        let seq = Seq(self.next());
        let count = records.len() as u64;
        match c.call(write(leader, seq.0, records.clone())) {
            Some(CallAnswer::Verdict(
                Outcome::Accepted { seq: s, count: n, .. } | Outcome::Duplicate { seq: s, count: n, .. },
            )) => {
                assert_eq!((s, n), (seq, count), "a write is acknowledged where it asked to land");
            }
            other => panic!("appending at {seq:?}: {other:?}"),
        }
        self.0.extend(records);
    }

    /// The records in `[from, to)`.
    pub fn range(&self, from: u64, to: u64) -> &[Bytes] {
        &self.0[from as usize..to as usize]
    }
}

/// Reads `[from, to)` at `node`, page by page, each page under `consistency`. An `Unserved`
/// page (a lost watermark round, say) is asked again, as a client would.
pub fn read_range(c: &mut Cluster, node: NodeId, from: u64, to: u64, consistency: Consistency) -> Vec<Bytes> {
    let mut records = Vec::new();
    let mut unserved = 0;
    while (from + records.len() as u64) < to {
        let at = Seq(from + records.len() as u64);
        match c.read_at(node, at, consistency, 60) {
            Some(ReadAnswer::Page { from: f, records: page, .. }) if !page.is_empty() => {
                assert_eq!(f, at, "a page starts where it was asked to");
                records.extend(page);
            }
            Some(ReadAnswer::Unserved { .. }) if unserved < 20 => unserved += 1,
            other => panic!("reading {at:?} at {node:?}: {other:?}"),
        }
    }
    records.truncate((to - from) as usize);
    records
}

/// True when `node` made a durable `TrimmedTo` write.
pub fn persisted_a_jump(c: &Cluster, node: NodeId) -> bool {
    c.writes.get(&node).is_some_and(|ws| ws.iter().any(|w| matches!(w, WriteOp::TrimmedTo { .. })))
}
