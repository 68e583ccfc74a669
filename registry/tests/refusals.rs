//! One test per refusal rule of the fold: the command is refused in place, with a typed
//! reason, and the directory is left exactly as it was.

mod common;

use bytes::Bytes;
use common::*;
use paros_core::ids::{JournalId, JournalKey, NodeId, TenantId};
use paros_registry::{
    Command, Directory, KeyId, KeyScope, LimitField, Limits, Quotas, Refusal, Role, Standing, TenantStatus, TokenId,
    Verdict, VoterRefusal,
};

/// Folds `command` and checks that it was refused with `want` and changed nothing but the
/// verdict window.
fn refused(book: &mut Book, command: Command, want: Refusal) {
    let before = book.dir.clone();
    let verdict = book.run(command);
    assert_eq!(verdict, Verdict::Refused(want), "the refusal names its reason");
    assert_unchanged(&before, &book.dir);
}

/// Everything but the verdict window is the same.
fn assert_unchanged(before: &Directory, after: &Directory) {
    assert_eq!(before.cell(), after.cell(), "the cell is unchanged");
    assert!(before.machines().eq(after.machines()), "machines are unchanged");
    assert!(before.tenants().eq(after.tenants()), "tenants are unchanged");
    assert!(before.journals().eq(after.journals()), "journals are unchanged");
    assert!(before.tiers().eq(after.tiers()), "tiers are unchanged");
    for scope in [KeyScope::Cell, KeyScope::Tenant(TenantId(100))] {
        assert!(before.signing_keys(scope).eq(after.signing_keys(scope)), "keys are unchanged");
    }
}

fn key(n: u8) -> Bytes {
    Bytes::from(vec![n; 32])
}

fn kid(s: &str) -> KeyId {
    KeyId::new(s).expect("a valid kid")
}

#[test]
fn nothing_but_init_cell_is_judged_before_the_cell_is_formed() {
    let mut b = Book::new();
    refused(&mut b, sign_up(100, "acme"), Refusal::NotInitialized);
    refused(&mut b, register(9, Role::Node, "a"), Refusal::NotInitialized);
}

#[test]
fn a_second_init_cell_is_refused() {
    let mut b = Book::formed();
    let cell = b.dir.cell().expect("formed").id;
    refused(&mut b, init_cell(vec![member(7, "a")]), Refusal::CellFormed { cell });
}

#[test]
fn init_cell_with_a_zero_limit_is_refused() {
    let mut b = Book::new();
    let command = Command::InitCell {
        cell: paros_registry::CellId(1),
        members: vec![member(1, "a")],
        registry: JournalId(2),
        limits: Limits { verdicts_max: 0, ..Limits::default() },
    };
    refused(&mut b, command, Refusal::BadLimits { field: LimitField::VerdictsMax });
}

#[test]
fn init_cell_members_follow_the_voter_shape() {
    let mut b = Book::new();
    refused(&mut b, init_cell(vec![member(1, "a"), member(2, "b")]), Refusal::Voters(VoterRefusal::Even { count: 2 }));
    refused(
        &mut b,
        init_cell(vec![member(1, "a"), member(1, "b"), member(3, "c")]),
        Refusal::Voters(VoterRefusal::Duplicate { node: NodeId(1) }),
    );
    refused(&mut b, init_cell(vec![]), Refusal::Voters(VoterRefusal::Count { count: 0, max: 7 }));
}

#[test]
fn a_taken_tenant_name_is_refused() {
    let mut b = Book::formed();
    refused(&mut b, sign_up(101, "acme"), Refusal::TenantNameTaken { name: tenant_name("acme") });
}

#[test]
fn a_taken_tenant_id_is_refused() {
    let mut b = Book::formed();
    refused(&mut b, sign_up(100, "other"), Refusal::TenantIdTaken { tenant: TenantId(100) });
}

#[test]
fn commands_on_an_unknown_tenant_are_refused() {
    let mut b = Book::formed();
    let unknown = Refusal::UnknownTenant { tenant: TenantId(555) };
    refused(&mut b, Command::SetQuotas { tenant: TenantId(555), quotas: Quotas::default() }, unknown.clone());
    refused(
        &mut b,
        Command::SetTenantStatus { tenant: TenantId(555), status: TenantStatus::Suspended },
        unknown.clone(),
    );
    refused(
        &mut b,
        Command::RevokeToken { tenant: TenantId(555), jti: TokenId::new("t1").expect("valid") },
        unknown.clone(),
    );
    refused(&mut b, create(555, 1, "orders", &[1, 2, 3]), unknown.clone());
    refused(&mut b, delete(555, "orders"), unknown.clone());
    refused(
        &mut b,
        Command::AddSigningKey { scope: KeyScope::Tenant(TenantId(555)), kid: kid("k1"), public_key: key(1) },
        unknown,
    );
}

#[test]
fn a_taken_journal_name_is_refused_and_freed_by_delete() {
    let mut b = Book::formed();
    assert!(b.run(create(100, 1, "orders", &[1, 2, 3])).is_accepted(), "the first create");
    refused(
        &mut b,
        create(100, 2, "orders", &[1, 2, 3]),
        Refusal::JournalNameTaken { tenant: TenantId(100), name: journal_name("orders") },
    );
    assert!(b.run(delete(100, "orders")).is_accepted(), "the delete");
    assert!(b.run(create(100, 2, "orders", &[1, 2, 3])).is_accepted(), "a deleted journal's name is free again");
}

#[test]
fn a_journal_id_is_never_reused_even_after_delete() {
    let mut b = Book::formed();
    assert!(b.run(create(100, 1, "orders", &[1, 2, 3])).is_accepted(), "the first create");
    assert!(b.run(delete(100, "orders")).is_accepted(), "the delete");
    let key = JournalKey { tenant: TenantId(100), journal: JournalId(1) };
    refused(&mut b, create(100, 1, "other", &[1, 2, 3]), Refusal::JournalIdTaken { key });
}

#[test]
fn deleting_an_unknown_or_deleted_journal_is_refused() {
    let mut b = Book::formed();
    let unknown = Refusal::UnknownJournal { tenant: TenantId(100), name: journal_name("orders") };
    refused(&mut b, delete(100, "orders"), unknown.clone());
    assert!(b.run(create(100, 1, "orders", &[1, 2, 3])).is_accepted(), "created");
    assert!(b.run(delete(100, "orders")).is_accepted(), "deleted once");
    refused(&mut b, delete(100, "orders"), unknown);
}

#[test]
fn a_suspended_tenant_may_not_create_journals() {
    let mut b = Book::formed();
    let suspend = Command::SetTenantStatus { tenant: TenantId(100), status: TenantStatus::Suspended };
    assert!(b.run(suspend).is_accepted(), "suspended");
    refused(&mut b, create(100, 1, "orders", &[1, 2, 3]), Refusal::TenantSuspended { tenant: TenantId(100) });
}

#[test]
fn the_journal_quota_is_enforced_on_live_journals() {
    let mut b = Book::formed();
    let quotas = Quotas { journals_max: 1, ..Quotas::default() };
    assert!(b.run(Command::SetQuotas { tenant: TenantId(100), quotas }).is_accepted(), "quota set");
    assert!(b.run(create(100, 1, "a", &[1, 2, 3])).is_accepted(), "the first journal fits");
    refused(
        &mut b,
        create(100, 2, "b", &[1, 2, 3]),
        Refusal::OverJournalQuota { tenant: TenantId(100), journals_max: 1 },
    );
    assert!(b.run(delete(100, "a")).is_accepted(), "deleted");
    assert!(b.run(create(100, 2, "b", &[1, 2, 3])).is_accepted(), "a deleted journal frees quota");
}

#[test]
fn voters_must_be_registered_nodes_in_service_distinct_and_an_odd_count() {
    let mut b = Book::formed();
    assert!(b.run(register(10, Role::Replica, "a")).is_accepted(), "a replica");
    assert!(b.run(register(11, Role::Node, "a")).is_accepted(), "a fourth node");
    assert!(b.run(register(12, Role::Node, "b")).is_accepted(), "a fifth node");
    let drain = Command::SetStanding { machine: NodeId(11), standing: Standing::Draining };
    assert!(b.run(drain).is_accepted(), "node 11 drains");
    let cases = [
        (vec![1, 2, 99], VoterRefusal::Unknown { node: NodeId(99) }),
        (vec![1, 2, 10], VoterRefusal::NotANode { node: NodeId(10), role: Role::Replica }),
        (vec![1, 2, 11], VoterRefusal::NotInService { node: NodeId(11), standing: Standing::Draining }),
        (vec![1, 2, 2], VoterRefusal::Duplicate { node: NodeId(2) }),
        (vec![1, 2], VoterRefusal::Even { count: 2 }),
        (vec![], VoterRefusal::Count { count: 0, max: 7 }),
        (vec![1, 2, 3, 12, 5, 6, 7, 8, 9], VoterRefusal::Count { count: 9, max: 7 }),
    ];
    for (voters, why) in cases {
        refused(&mut b, create(100, 1, "orders", &voters), Refusal::Voters(why));
    }
    assert!(b.run(create(100, 1, "orders", &[1, 2, 12])).is_accepted(), "a valid voter set");
}

#[test]
fn unknown_and_retired_machines_are_refused() {
    let mut b = Book::formed();
    refused(
        &mut b,
        Command::SetStanding { machine: NodeId(99), standing: Standing::Draining },
        Refusal::UnknownMachine { machine: NodeId(99) },
    );
    let retire = Command::SetStanding { machine: NodeId(3), standing: Standing::Retired };
    assert!(b.run(retire.clone()).is_accepted(), "node 3 retires");
    assert!(b.run(retire).is_accepted(), "retiring again is an accepted no-op");
    refused(
        &mut b,
        Command::SetStanding { machine: NodeId(3), standing: Standing::Registered },
        Refusal::MachineRetired { machine: NodeId(3) },
    );
    refused(&mut b, register(3, Role::Node, "c"), Refusal::MachineRetired { machine: NodeId(3) });
}

#[test]
fn a_machine_keeps_its_role() {
    let mut b = Book::formed();
    refused(
        &mut b,
        register(1, Role::Gateway, "a"),
        Refusal::RoleChange { machine: NodeId(1), registered: Role::Node },
    );
    let moved = b.run(register(1, Role::Node, "z"));
    assert!(moved.is_accepted(), "re-registering in the same role is accepted");
    assert_eq!(b.dir.machine(NodeId(1)).map(|m| m.zone.as_str()), Some("z"), "and replaces the zone");
}

#[test]
fn signing_keys_are_unique_sized_bounded_and_never_reused() {
    let mut b = Book::formed();
    let add = |k: &str, bytes: Bytes| Command::AddSigningKey { scope: KeyScope::Cell, kid: kid(k), public_key: bytes };
    refused(&mut b, add("k0", Bytes::from_static(b"short")), Refusal::KeyLength { len: 5, want: 32 });
    assert!(b.run(add("k1", key(1))).is_accepted(), "a key");
    refused(&mut b, add("k1", key(2)), Refusal::KeyIdTaken { kid: kid("k1") });
    let retire = Command::RetireSigningKey { kid: kid("k1") };
    assert!(b.run(retire.clone()).is_accepted(), "retired");
    assert_eq!(
        b.run(retire),
        Verdict::Accepted(paros_registry::Accepted::SigningKeyRetired { kid: kid("k1"), already: true }),
        "retiring again is accepted as already done"
    );
    refused(&mut b, add("k1", key(3)), Refusal::KeyIdTaken { kid: kid("k1") });
    refused(&mut b, Command::RetireSigningKey { kid: kid("nope") }, Refusal::UnknownKey { kid: kid("nope") });
    for i in 0..16 {
        assert!(b.run(add(&format!("c{i}"), key(i))).is_accepted(), "key {i} fits");
    }
    refused(&mut b, add("c16", key(16)), Refusal::TooManyKeys { scope: KeyScope::Cell, max: 16 });
}

#[test]
fn revoking_twice_is_accepted_and_the_count_is_bounded() {
    let mut b = Book::new();
    let command = Command::InitCell {
        cell: paros_registry::CellId(1),
        members: vec![member(1, "a")],
        registry: JournalId(2),
        limits: Limits { revoked_per_tenant_max: 2, ..Limits::default() },
    };
    assert!(b.run(command).is_accepted(), "formed");
    assert!(b.run(sign_up(100, "acme")).is_accepted(), "signed up");
    let revoke = |j: &str| Command::RevokeToken { tenant: TenantId(100), jti: TokenId::new(j).expect("valid") };
    let first = b.run(revoke("t1"));
    assert_eq!(
        first,
        Verdict::Accepted(paros_registry::Accepted::TokenRevoked { tenant: TenantId(100), already: false }),
        "the first revocation"
    );
    let again = b.run(revoke("t1"));
    assert_eq!(
        again,
        Verdict::Accepted(paros_registry::Accepted::TokenRevoked { tenant: TenantId(100), already: true }),
        "revoking again is accepted as already done"
    );
    assert!(b.run(revoke("t2")).is_accepted(), "a second token");
    refused(&mut b, revoke("t3"), Refusal::TooManyRevocations { tenant: TenantId(100), max: 2 });
    assert!(b.dir.is_revoked(TenantId(100), &TokenId::new("t1").expect("valid")), "t1 is revoked");
}

#[test]
fn an_undecodable_record_is_refused_under_its_id_and_counted() {
    let mut b = Book::formed();
    let before = b.dir.clone();
    let mut bytes = encode(77, sign_up(200, "other")).to_vec();
    bytes.truncate(bytes.len() - 2);
    b.raw(&bytes);
    let verdict = b.dir.answer(paros_registry::RequestId(77)).expect("a verdict under the id");
    assert!(
        matches!(verdict, Verdict::Refused(Refusal::Malformed { .. })),
        "a cut record is refused as malformed: {verdict:?}"
    );
    b.raw(&[9, 9, 9]);
    b.raw(&[]);
    assert_eq!(b.dir.undecodable(), 3, "every undecodable record is counted");
    assert_unchanged(&before, &b.dir);
}
