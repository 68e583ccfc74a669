//! The coordinator's steps: idempotent answers, bounds, placement, supersession,
//! acknowledgement checks, and when checkpoints are due.

mod common;
mod harness;

use common::*;
use harness::{Log, drive};
use paros_client::{CheckpointerConfig, Folder, FolderConfig, Seq};
use paros_core::ids::{JournalId, NodeId, TenantId};
use paros_core::journal::WriterMode;
use paros_registry::{
    Accepted, Answer, Command, Coordinator, CoordinatorConfig, CoordinatorError, Directory, Op, PlacementError,
    Refusal, Reply, Request, RequestId, Role, Submitted, Verdict,
};

fn coordinator(config: CoordinatorConfig) -> Coordinator {
    let folder = Folder::new(Directory::new(), Seq(0), FolderConfig::default());
    Coordinator::new(folder, config).expect("a valid configuration")
}

fn req(id: u128, command: Command) -> Request {
    Request { id: RequestId(id), op: Op::Command(command) }
}

fn create_op(id: u128, tenant: u64, journal: u64, name: &str) -> Request {
    Request {
        id: RequestId(id),
        op: Op::CreateJournal {
            tenant: TenantId(tenant),
            journal: JournalId(journal),
            name: journal_name(name),
            mode: WriterMode::Single,
            tier: None,
        },
    }
}

/// A coordinator over a formed cell of `nodes` nodes (ids 1..=nodes, zones cycling a, b, c)
/// with tenant 100 `acme`.
fn formed(nodes: u64, config: CoordinatorConfig) -> (Coordinator, Log) {
    let mut c = coordinator(config);
    let mut log = Log::default();
    // Node n in zone ["a", "b", "c"][n % 3], node 1 included: six nodes are two per zone
    // (placement spreads zones before load, so an uneven zone would draw every journal).
    c.submit(req(1, init_cell(vec![member(1, "b")])));
    for n in 2..=nodes {
        c.submit(req(u128::from(n), register(n, Role::Node, ["a", "b", "c"][n as usize % 3])));
    }
    c.submit(req(99, sign_up(100, "acme")));
    for r in drive(&mut c, &mut log, 0) {
        assert!(matches!(&r.answer, Answer::Verdict(v) if v.is_accepted()), "set-up accepted: {r:?}");
    }
    (c, log)
}

#[test]
fn the_same_request_id_twice_has_one_effect_and_one_answer() {
    let (mut c, mut log) = formed(3, CoordinatorConfig::default());
    let signup = req(500, sign_up(200, "beta"));
    assert_eq!(c.submit(signup.clone()), Submitted::Waiting, "first submission waits");
    assert_eq!(c.submit(signup.clone()), Submitted::Waiting, "a second joins it");
    let before = log.records.len();
    let replies = drive(&mut c, &mut log, 1);
    assert_eq!(log.records.len(), before + 1, "one record for both submissions");
    let want = Answer::Verdict(Verdict::Accepted(Accepted::SignedUp { tenant: TenantId(200) }));
    assert_eq!(replies, vec![Reply { id: RequestId(500), answer: want.clone() }], "one reply for the id");
    assert_eq!(c.submit(signup), Submitted::Answered(want), "a retry is answered from the fold");
    assert_eq!(c.next_append(), None, "and appends nothing");
}

#[test]
fn a_command_appended_twice_takes_effect_once() {
    // Two coordinators (one superseded mid-flight) may both append a request's record; the
    // fold keeps the first verdict and ignores the second record.
    let mut b = Book::formed();
    let first = b.run_as(600, create(100, 1, "orders", &[1, 2, 3]));
    let journals = b.dir.journals().count();
    let second = b.run_as(600, create(100, 1, "orders", &[1, 2, 3]));
    assert_eq!(first, second, "the same verdict");
    assert_eq!(b.dir.journals().count(), journals, "one journal");
    let other = b.run_as(600, sign_up(300, "gamma"));
    assert_eq!(other, first, "another command under a decided id changes nothing");
    assert!(b.dir.tenant(TenantId(300)).is_none(), "no tenant was created");
}

#[test]
fn an_id_past_the_window_is_judged_again_and_creations_are_then_refused_as_taken() {
    let mut b = Book::new();
    let init = Command::InitCell {
        cell: paros_registry::CellId(1),
        members: vec![member(1, "a")],
        registry: JournalId(2),
        limits: paros_registry::Limits { verdicts_max: 2, ..Default::default() },
    };
    assert!(b.run(init).is_accepted(), "formed");
    assert!(b.run_as(700, sign_up(300, "gamma")).is_accepted(), "signed up");
    b.run(sign_up(301, "delta"));
    b.run(sign_up(302, "eps"));
    assert_eq!(b.dir.answer(RequestId(700)), None, "the id left the window");
    assert_eq!(
        b.run_as(700, sign_up(300, "gamma")),
        Verdict::Refused(Refusal::TenantIdTaken { tenant: TenantId(300) }),
        "a replay past the window is refused by the tenant's own id"
    );
}

#[test]
fn past_pending_max_requests_are_answered_busy() {
    let config = CoordinatorConfig { pending_max: 2, ..CoordinatorConfig::default() };
    let (mut c, _log) = formed(3, config);
    assert_eq!(c.submit(req(10, sign_up(1, "a"))), Submitted::Waiting, "one");
    assert_eq!(c.submit(req(11, sign_up(2, "b"))), Submitted::Waiting, "two");
    assert_eq!(c.submit(req(12, sign_up(3, "c"))), Submitted::Answered(Answer::Busy), "three is busy");
    assert_eq!(c.submit(req(10, sign_up(1, "a"))), Submitted::Waiting, "joining a waiting id is not busy");
}

#[test]
fn a_journal_that_cannot_be_placed_is_answered_without_a_record() {
    let (mut c, _log) = formed(2, CoordinatorConfig::default());
    assert_eq!(
        c.submit(create_op(20, 100, 1, "orders")),
        Submitted::Answered(Answer::Unplaceable(PlacementError::TooFewNodes { wanted: 3, eligible: 2 })),
        "two nodes cannot hold three voters"
    );
    assert_eq!(c.next_append(), None, "nothing was queued");
}

#[test]
fn placements_decided_together_spread_over_the_nodes() {
    let (mut c, mut log) = formed(6, CoordinatorConfig::default());
    c.submit(create_op(30, 100, 1, "x"));
    c.submit(create_op(31, 100, 2, "y"));
    let replies = drive(&mut c, &mut log, 1);
    let voters: Vec<Vec<NodeId>> = replies
        .iter()
        .map(|r| match &r.answer {
            Answer::Verdict(Verdict::Accepted(Accepted::JournalCreated { voters, .. })) => voters.clone(),
            other => panic!("a journal was created: {other:?}"),
        })
        .collect();
    assert_eq!(voters.len(), 2, "two journals");
    assert!(
        voters[0].iter().all(|v| !voters[1].contains(v)),
        "the second placement counted the first before it was folded: {voters:?}"
    );
    // Node 1 holds the registry journal's one seat besides.
    for n in 1..=6 {
        assert_eq!(c.directory().load(NodeId(n)), 1 + usize::from(n == 1), "every node holds one journal");
    }
}

#[test]
fn a_superseded_coordinator_answers_every_waiter_and_stops() {
    let (mut c, _log) = formed(3, CoordinatorConfig::default());
    c.submit(req(40, sign_up(1, "a")));
    let _in_flight = c.next_append().expect("a batch");
    c.submit(req(41, sign_up(2, "b")));
    let mut replies = c.superseded();
    replies.sort_by_key(|r| r.id);
    assert_eq!(
        replies,
        vec![
            Reply { id: RequestId(40), answer: Answer::NotCoordinator },
            Reply { id: RequestId(41), answer: Answer::NotCoordinator },
        ],
        "in flight and queued requests are both answered"
    );
    assert_eq!(c.submit(req(42, sign_up(3, "c"))), Submitted::Answered(Answer::NotCoordinator), "later requests too");
    assert_eq!(c.next_append(), None, "nothing more is appended");
    assert!(!c.due_checkpoint(1_000), "no checkpoint either");
}

#[test]
fn acknowledgements_must_match_what_was_handed_out() {
    let (mut c, mut log) = formed(3, CoordinatorConfig::default());
    c.submit(req(50, sign_up(1, "a")));
    let batch = c.next_append().expect("a batch");
    let tail = log.tail();
    assert!(
        matches!(c.acknowledged(Seq(tail.0 + 1), 1), Err(CoordinatorError::UnexpectedAck { .. })),
        "an acknowledgement that leaves a hole"
    );
    assert!(
        matches!(c.acknowledged(tail, 2), Err(CoordinatorError::UnexpectedAck { .. })),
        "an acknowledgement past the records in flight"
    );
    let (seq, count) = log.append(batch);
    assert_eq!(c.acknowledged(seq, count).map(|r| r.len()), Ok(1), "the right one answers");
    assert_eq!(c.acknowledged(seq, count), Ok(vec![]), "a repeated acknowledgement is a no-op");
}

#[test]
fn a_record_of_an_earlier_coordinator_answers_a_queued_request() {
    let (mut c, mut log) = formed(3, CoordinatorConfig::default());
    let r = req(60, sign_up(1, "a"));
    c.submit(r.clone());
    // An earlier coordinator had written the same request; this one reads it before writing.
    let earlier = encode(60, sign_up(1, "a"));
    let (seq, _) = log.append(vec![earlier.clone()]);
    let replies = c.fold_page(seq, &[earlier]).expect("contiguous");
    assert_eq!(replies.len(), 1, "answered from the fold");
    assert_eq!(c.next_append(), None, "the queued copy is dropped");
}

#[test]
fn a_checkpoint_waits_for_the_records_in_flight_and_commands_wait_for_the_run() {
    let config = CoordinatorConfig {
        checkpoint: CheckpointerConfig { interval_records: 1, ..CheckpointerConfig::default() },
        ..CoordinatorConfig::default()
    };
    let (mut c, mut log) = formed(3, config);
    let _ = drive(&mut c, &mut log, 0);
    c.submit(req(70, sign_up(1, "a")));
    let batch = c.next_append().expect("a batch");
    let (seq, count) = log.append(batch);
    c.acknowledged(seq, count).expect("acknowledged");
    c.submit(req(71, sign_up(2, "b")));
    let in_flight = c.next_append().expect("a batch");
    assert!(!c.due_checkpoint(1), "due, but a record is in flight");
    c.submit(req(72, sign_up(3, "c")));
    assert_eq!(c.next_append(), None, "a due checkpoint holds new commands");
    let (seq, count) = log.append(in_flight);
    c.acknowledged(seq, count).expect("acknowledged");
    assert!(c.due_checkpoint(1), "the run is planned once nothing is in flight");
    let run = c.next_append().expect("the run's records");
    assert!(run.iter().all(|r| r.starts_with(&paros_client::MAGIC)), "only run records");
    assert_eq!(c.next_append(), None, "commands wait while the run is appended");
    let begin = log.tail();
    let (seq, count) = log.append(run);
    c.acknowledged(seq, count).expect("acknowledged");
    assert_eq!(c.next_truncate().map(|t| t.up_to), Some(begin), "truncate to the run's Begin");
    assert!(c.next_append().is_some(), "commands flow again while the truncation settles");
}

#[test]
fn a_checkpoint_is_due_after_the_configured_interval_of_caller_time() {
    let config = CoordinatorConfig { checkpoint_interval: Some(100), ..CoordinatorConfig::default() };
    let (mut c, mut log) = formed(3, config);
    assert!(!c.due_checkpoint(0), "the clock starts");
    c.submit(req(80, sign_up(1, "a")));
    let _ = drive(&mut c, &mut log, 50);
    assert_eq!(c.stats().runs_planned, 0, "not yet: 50 < 100");
    assert!(c.due_checkpoint(100), "due once the interval passed with something written");
}

#[test]
fn a_new_coordinator_folds_a_truncated_log_from_its_floor() {
    let config = CoordinatorConfig {
        checkpoint: CheckpointerConfig { interval_records: 3, ..CheckpointerConfig::default() },
        ..CoordinatorConfig::default()
    };
    let (mut c, mut log) = formed(3, config);
    for i in 0..10 {
        c.submit(req(90 + i, sign_up(10 + i as u64, &format!("t{i}"))));
        let _ = drive(&mut c, &mut log, 0);
    }
    assert!(log.floor > 0, "the log was truncated");
    let mut next = coordinator(config);
    next.gap(Seq(0), Seq(log.floor)).expect("a gap from the start");
    next.fold_page(Seq(log.floor), log.retained()).expect("contiguous");
    assert_eq!(next.directory(), c.directory(), "the successor folded the same directory");
    assert_eq!(next.tail(), log.tail(), "at the log's tail");
    assert!(
        matches!(next.submit(req(95, sign_up(15, "t5"))), Submitted::Answered(Answer::Verdict(_))),
        "a request decided before the takeover is answered from the fold"
    );
}

#[test]
fn a_zero_bound_is_refused() {
    let folder = || Folder::new(Directory::new(), Seq(0), FolderConfig::default());
    for config in [
        CoordinatorConfig { pending_max: 0, ..Default::default() },
        CoordinatorConfig { voters: 0, ..Default::default() },
        CoordinatorConfig { batch_records_max: 0, ..Default::default() },
        CoordinatorConfig { checkpoint_interval: Some(0), ..Default::default() },
    ] {
        assert!(matches!(Coordinator::new(folder(), config), Err(CoordinatorError::Config(_))), "refused: {config:?}");
    }
}

#[test]
fn a_journal_created_on_a_named_tier_is_appended_with_the_tier() {
    let (mut c, mut log) = formed(3, CoordinatorConfig::default());
    let on = |id: u128, journal: u64, name: &str, tier: Option<&str>| Request {
        id: RequestId(id),
        op: Op::CreateJournal {
            tenant: TenantId(100),
            journal: JournalId(journal),
            name: journal_name(name),
            mode: WriterMode::Single,
            tier: tier.map(common::tier),
        },
    };
    c.submit(req(30, create_tier("gold", 0xfeed)));
    c.submit(on(31, 1, "on-gold", Some("gold")));
    c.submit(on(32, 2, "on-lead", Some("lead")));
    c.submit(on(33, 3, "on-default", None));
    let replies = drive(&mut c, &mut log, 1);
    let answer = |id: u128| replies.iter().find(|r| r.id == RequestId(id)).map(|r| r.answer.clone());
    assert!(matches!(answer(31), Some(Answer::Verdict(v)) if v.is_accepted()), "placed on gold");
    assert_eq!(
        answer(32),
        Some(Answer::Verdict(Verdict::Refused(Refusal::UnknownTier { tier: common::tier("lead") }))),
        "an unknown tier is refused by the fold"
    );
    let dir = c.directory();
    let feed = |j: u64| dir.journal(paros_core::ids::JournalKey { tenant: TenantId(100), journal: JournalId(j) });
    assert_eq!(feed(1).and_then(|j| j.feed), Some(NodeId(0xfeed)), "the journal is fed at gold's feed");
    assert_eq!(feed(3).map(|j| j.tier.clone()), Some(None), "no tier named and no default tier: no tier");
}
