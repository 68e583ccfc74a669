//! What a seed decides about the registry before the world runs.

use std::collections::BTreeMap;

use paros_client::CheckpointerConfig;
use paros_core::journal::WriterMode;
use paros_core::{JournalConfig, JournalId, JournalKey, NodeId, TenantId};
use paros_registry::{
    Answer, BusAddress, CellId, Command, CoordinatorConfig, JournalName, Limits, Member, Op, Quotas, Request,
    RequestId, Role, TenantName, TierName, Zone,
};

use crate::rng::SimRng;

const MS: u64 = 1_000_000;

/// One scripted request and when its caller first sends it.
#[derive(Clone, Debug)]
pub struct Scripted {
    pub at_ns: u64,
    pub request: Request,
}

/// The caller of the scripted requests: it sends each until it is answered (whichever
/// coordinator answers), as the CLI would.
#[derive(Debug, Default)]
pub struct Script {
    pub items: Vec<Scripted>,
    index: BTreeMap<RequestId, usize>,
    answered: BTreeMap<RequestId, Answer>,
}

impl Script {
    #[must_use]
    pub fn new(items: Vec<Scripted>) -> Script {
        let index = items.iter().enumerate().map(|(i, s)| (s.request.id, i)).collect();
        Script { items, index, answered: BTreeMap::new() }
    }

    /// The requests due at `now` and not answered yet, in order.
    pub fn due(&self, now: u64) -> impl Iterator<Item = &Request> {
        self.items
            .iter()
            .enumerate()
            .take_while(move |(_, s)| s.at_ns <= now)
            .filter(|(_, s)| !self.answered.contains_key(&s.request.id))
            .map(|(_, s)| &s.request)
    }

    /// Adds `item` to the script, after every item due at or before its time (a caller that
    /// decides during the run what to ask: the mover's `MoveDone`, a seat move). An id already
    /// in the script is not added again.
    pub fn push(&mut self, item: Scripted) {
        if self.index.contains_key(&item.request.id) {
            return;
        }
        let at = self.items.partition_point(|s| s.at_ns <= item.at_ns);
        self.items.insert(at, item);
        self.index = self.items.iter().enumerate().map(|(i, s)| (s.request.id, i)).collect();
    }

    /// The answer request `id` got, once it got one.
    #[must_use]
    pub fn answer_of(&self, id: RequestId) -> Option<&Answer> {
        self.answered.get(&id)
    }

    /// A coordinator answered `id`: the caller stops sending it, unless the answer says
    /// "ask again" (busy, or not the coordinator).
    pub fn answer(&mut self, id: RequestId, answer: &Answer) -> bool {
        if matches!(answer, Answer::Busy | Answer::NotCoordinator) {
            return false;
        }
        if !self.index.contains_key(&id) {
            return false;
        }
        self.answered.insert(id, answer.clone()).is_none()
    }

    /// Whether request `id` was answered with an accepted verdict.
    #[must_use]
    pub fn accepted(&self, id: RequestId) -> bool {
        matches!(self.answered.get(&id), Some(Answer::Verdict(v)) if v.is_accepted())
    }

    /// Requests answered so far, and of them the accepted ones.
    #[must_use]
    pub fn answered(&self) -> (usize, usize) {
        let accepted = self.answered.values().filter(|a| matches!(a, Answer::Verdict(v) if v.is_accepted())).count();
        (self.answered.len(), accepted)
    }
}

/// The registry of one world.
#[derive(Clone, Debug)]
pub struct Plan {
    pub key: JournalKey,
    pub config: JournalConfig,
    /// The founding nodes: the registry journal's voters (an odd number of the world's voters).
    pub founding: Vec<NodeId>,
    /// The nodes a registry reader or writer asks, the founding ones first: the registry
    /// journal's seats move among all of them (a node that does not host it answers unknown,
    /// and the next is asked).
    pub servers: Vec<NodeId>,
    pub replicas: Vec<NodeId>,
    /// The feed of the one tier (`default`) the replicas share, when there are replicas: the
    /// learner of every journal the registry creates then.
    pub feed: NodeId,
    /// The `RegisterReplica` request of each replica, the one joining during the run included.
    pub registrations: BTreeMap<NodeId, RequestId>,
    /// The replica retired during the run (`SetStanding` to `Retired`), and its request.
    pub retirement: Option<(NodeId, RequestId)>,
    pub script: Vec<Scripted>,
    /// The scratch journals the script creates (and mostly deletes again).
    pub scratch: Vec<JournalKey>,
    pub coordinator: CoordinatorConfig,
}

/// The bus address of the world's `i`th machine.
pub(crate) fn bus_address(i: usize) -> BusAddress {
    BusAddress::new(format!("10.0.{i}.1:4222")).expect("a valid bus address")
}

/// The zone of the world's `i`th machine.
pub(crate) fn zone(i: usize) -> Zone {
    Zone::new(format!("z{}", i % 3)).expect("a valid zone")
}

/// The replicas of a world: those there from the start, the one that joins during the run and
/// the one retired during the run, each with when.
#[derive(Clone, Copy, Debug, Default)]
pub struct TierChanges<'a> {
    pub replicas: &'a [NodeId],
    pub join: Option<(NodeId, u64)>,
    pub leave: Option<(NodeId, u64)>,
}

impl Plan {
    /// The registry of a world with `voters` and `tier`'s replicas, whose workload journals
    /// (`journals`, of `tenant`) are created through it; scratch journals come and go until
    /// `chaos_ns`. A replica that joins is registered on the tier when it joins; the one
    /// that leaves is retired then.
    #[must_use]
    pub fn draw(
        rng: &mut SimRng,
        voters: &[NodeId],
        tier: TierChanges<'_>,
        tenant: TenantId,
        journals: &[(JournalKey, JournalConfig)],
        chaos_ns: u64,
    ) -> Plan {
        let replicas = tier.replicas;
        let founding_len = if voters.len() >= 5 { 5 } else { 3 };
        let mut founding: Vec<NodeId> = voters[..founding_len].to_vec();
        founding.sort_unstable();
        let key = JournalKey { tenant: TenantId(0), journal: JournalId(rng.u64()) };
        let config = JournalConfig { mode: WriterMode::Single, voters: founding.clone(), learners: replicas.to_vec() };
        let mut script = Vec::new();
        let id = |rng: &mut SimRng| RequestId(u128::from(rng.u64()) << 64 | u128::from(rng.u64()));
        let now = |at_ns: u64, id: RequestId, op: Op| Scripted { at_ns, request: Request { id, op } };
        let members = voters
            .iter()
            .enumerate()
            .filter(|(_, v)| founding.contains(v))
            .map(|(i, v)| Member { id: *v, bus_address: bus_address(i), zone: zone(i) })
            .collect();
        let init =
            Command::InitCell { cell: CellId(0xce11), members, registry: key.journal, limits: Limits::default() };
        script.push(now(0, id(rng), Op::Command(init)));
        for (i, v) in voters.iter().enumerate().filter(|(_, v)| !founding.contains(v)) {
            let c = Command::RegisterMachine { id: *v, role: Role::Node, bus_address: bus_address(i), zone: zone(i) };
            script.push(now(0, id(rng), Op::Command(c)));
        }
        // The replicas share the `default` tier, so every journal created then is fed at its
        // feed; a world without replicas has no tier, and its journals no learners.
        let feed = NodeId(rng.u64());
        if !replicas.is_empty() || tier.join.is_some() {
            let c = Command::CreateTier { tier: TierName::default_tier(), feed };
            script.push(now(0, id(rng), Op::Command(c)));
        }
        let mut registrations = BTreeMap::new();
        for (i, r) in replicas.iter().enumerate() {
            let (bus_address, zone) = (bus_address(100 + i), zone(i));
            let c = Command::RegisterReplica { id: *r, tier: TierName::default_tier(), bus_address, zone };
            let request = id(rng);
            registrations.insert(*r, request);
            script.push(now(0, request, Op::Command(c)));
        }
        let name = TenantName::parse("work").expect("a valid tenant name");
        script.push(now(0, id(rng), Op::Command(Command::SignUp { tenant, name, quotas: Quotas::default() })));
        for (j, (k, c)) in journals.iter().enumerate() {
            let name = JournalName::parse(&format!("w{j}")).expect("a valid journal name");
            let create =
                Command::CreateJournal { tenant, journal: k.journal, name, mode: c.mode, voters: c.voters.clone() };
            script.push(now(0, id(rng), Op::Command(create)));
        }
        // Churn: scratch journals created (placed by the coordinator) and deleted, and more
        // tenants signing up, until the chaos ends.
        let mut scratch = Vec::new();
        let mut live: Vec<String> = Vec::new();
        let mut at = 200 * MS;
        let mut n = 0;
        while at < chaos_ns {
            let roll = rng.below(10);
            if roll < 2 {
                let name = TenantName::parse(&format!("t{n}")).expect("a valid tenant name");
                let t = TenantId(rng.u64());
                script.push(now(
                    at,
                    id(rng),
                    Op::Command(Command::SignUp { tenant: t, name, quotas: Quotas::default() }),
                ));
            } else if roll < 6 || live.len() < 2 {
                let journal = JournalId(rng.u64());
                let s = format!("s{n}");
                let name = JournalName::parse(&s).expect("a valid journal name");
                script.push(now(
                    at,
                    id(rng),
                    Op::CreateJournal { tenant, journal, name, mode: WriterMode::Single, tier: None },
                ));
                scratch.push(JournalKey { tenant, journal });
                live.push(s);
            } else {
                let s = live.remove(rng.below(live.len() as u64) as usize);
                let name = JournalName::parse(&s).expect("a valid journal name");
                script.push(now(at, id(rng), Op::Command(Command::DeleteJournal { tenant, name })));
            }
            n += 1;
            at += rng.between(150, 600) * MS;
        }
        // The tier's changes during the run draw their ids last: a world without them draws
        // what it drew before they existed.
        if let Some((r, at)) = tier.join {
            let (bus_address, zone) = (bus_address(100 + replicas.len()), zone(replicas.len()));
            let c = Command::RegisterReplica { id: r, tier: TierName::default_tier(), bus_address, zone };
            let request = id(rng);
            registrations.insert(r, request);
            script.push(now(at, request, Op::Command(c)));
        }
        let retirement = tier.leave.map(|(r, at)| {
            let request = id(rng);
            let c = Command::SetStanding { machine: r, standing: paros_registry::Standing::Retired };
            script.push(now(at, request, Op::Command(c)));
            (r, request)
        });
        // The caller sends the script in time order (stable: equal times keep their order).
        script.sort_by_key(|s| s.at_ns);
        let coordinator = CoordinatorConfig {
            pending_max: 64,
            voters: 3,
            batch_records_max: 8,
            batch_bytes_max: 4096,
            checkpoint: CheckpointerConfig { factor: 1, interval_records: 6, chunk_bytes: 512 },
            checkpoint_interval: Some(1_000),
        };
        let servers = founding.iter().chain(voters.iter().filter(|v| !founding.contains(v))).copied().collect();
        Plan {
            key,
            config,
            founding,
            servers,
            replicas: replicas.to_vec(),
            feed,
            registrations,
            retirement,
            script,
            scratch,
            coordinator,
        }
    }
}
