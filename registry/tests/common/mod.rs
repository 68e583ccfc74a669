//! Helpers shared by the registry's tests: a directory driven record by record, and a formed
//! cell with a few nodes and one tenant.
#![allow(dead_code)]

pub mod strategy;

use bytes::Bytes;
use paros_client::{Checkpointable, Seq};
use paros_core::ids::{JournalId, JournalKey, NodeId, TenantId};
use paros_core::journal::WriterMode;
use paros_registry::{
    BusAddress, CellId, Command, Directory, Epoch, Incarnation, JournalName, Limits, Member, Quotas, Record, RequestId,
    Role, TenantName, TierName, Verdict, Zone,
};

pub fn tenant_name(s: &str) -> TenantName {
    TenantName::parse(s).expect("a valid tenant name")
}

pub fn journal_name(s: &str) -> JournalName {
    JournalName::parse(s).expect("a valid journal name")
}

pub fn zone(s: &str) -> Zone {
    Zone::new(s).expect("a valid zone")
}

pub fn addr(n: u64) -> BusAddress {
    BusAddress::new(format!("10.0.0.{n}:4222")).expect("a valid bus address")
}

pub fn member(id: u64, z: &str) -> Member {
    Member { id: NodeId(id), bus_address: addr(id), zone: zone(z) }
}

pub fn init_cell(members: Vec<Member>) -> Command {
    Command::InitCell { cell: CellId(0xce11), members, registry: JournalId(0x4e6), limits: Limits::default() }
}

pub fn register(id: u64, role: Role, z: &str) -> Command {
    Command::RegisterMachine { id: NodeId(id), role, bus_address: addr(id), zone: zone(z) }
}

pub fn sign_up(tenant: u64, name: &str) -> Command {
    Command::SignUp { tenant: TenantId(tenant), name: tenant_name(name), quotas: Quotas::default() }
}

pub fn create(tenant: u64, journal: u64, name: &str, voters: &[u64]) -> Command {
    Command::CreateJournal {
        tenant: TenantId(tenant),
        journal: JournalId(journal),
        name: journal_name(name),
        mode: WriterMode::Single,
        voters: voters.iter().map(|v| NodeId(*v)).collect(),
    }
}

pub fn tier(s: &str) -> TierName {
    TierName::new(s).expect("a valid tier name")
}

pub fn create_tier(name: &str, feed: u64) -> Command {
    Command::CreateTier { tier: tier(name), feed: NodeId(feed) }
}

pub fn register_replica(id: u64, on: &str, z: &str) -> Command {
    Command::RegisterReplica { id: NodeId(id), tier: tier(on), bus_address: addr(id), zone: zone(z) }
}

pub fn create_on(tenant: u64, journal: u64, name: &str, voters: &[u64], on: &str) -> Command {
    Command::CreateJournalOnTier {
        tenant: TenantId(tenant),
        journal: JournalId(journal),
        name: journal_name(name),
        mode: WriterMode::Single,
        voters: voters.iter().map(|v| NodeId(*v)).collect(),
        tier: tier(on),
    }
}

pub fn delete(tenant: u64, name: &str) -> Command {
    Command::DeleteJournal { tenant: TenantId(tenant), name: journal_name(name) }
}

pub fn admit(id: u64, role: Role, z: &str, incarnation: u64) -> Command {
    Command::Admit { id: NodeId(id), role, bus_address: addr(id), zone: zone(z), incarnation: Incarnation(incarnation) }
}

pub fn rejoin(old: u64, new: u64, z: &str, incarnation: u64) -> Command {
    Command::Rejoin {
        old: NodeId(old),
        new: NodeId(new),
        bus_address: addr(new),
        zone: zone(z),
        incarnation: Incarnation(incarnation),
    }
}

pub fn jkey(tenant: u64, journal: u64) -> JournalKey {
    JournalKey { tenant: TenantId(tenant), journal: JournalId(journal) }
}

pub fn move_seat(tenant: u64, journal: u64, from: u64, to: u64) -> Command {
    Command::MoveSeat { journal: jkey(tenant, journal), from: NodeId(from), to: NodeId(to) }
}

pub fn move_done(tenant: u64, journal: u64, epoch: u64) -> Command {
    Command::MoveDone { journal: jkey(tenant, journal), epoch: Epoch(epoch) }
}

pub fn encode(id: u128, command: Command) -> Bytes {
    Record { id: RequestId(id), command }.encode()
}

/// A directory fed one record at a time, with fresh request ids and positions.
#[derive(Debug, Default)]
pub struct Book {
    pub dir: Directory,
    pub next: u64,
    pub records: Vec<Bytes>,
}

impl Book {
    pub fn new() -> Self {
        Self::default()
    }

    /// A formed cell: nodes 1, 2, 3 in zones a, b, c (the founding members) and tenant 100
    /// named `acme`.
    pub fn formed() -> Self {
        let mut b = Book::new();
        let v = b.run(init_cell(vec![member(1, "a"), member(2, "b"), member(3, "c")]));
        assert!(v.is_accepted(), "the cell forms: {v:?}");
        let v = b.run(sign_up(100, "acme"));
        assert!(v.is_accepted(), "acme signs up: {v:?}");
        b
    }

    /// Folds `command` under a fresh request id (its position) and returns its verdict.
    pub fn run(&mut self, command: Command) -> Verdict {
        let id = 1_000_000 + u128::from(self.next);
        self.run_as(id, command)
    }

    /// Folds `command` under request id `id` and returns the verdict the fold keeps for it.
    pub fn run_as(&mut self, id: u128, command: Command) -> Verdict {
        let bytes = encode(id, command);
        self.raw(&bytes);
        self.dir.answer(RequestId(id)).expect("a verdict is kept for the id just folded")
    }

    /// Folds raw bytes as the next record.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.dir.apply(Seq(self.next), bytes);
        self.records.push(Bytes::copy_from_slice(bytes));
        self.next += 1;
        assert!(self.dir.index_is_consistent(), "the directory's index agrees with its state after every record");
    }
}
