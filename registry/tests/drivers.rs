//! The sans-IO drivers the daemon and the simulation share: a coordinator term's life, the
//! restart policy, and the follower's rule of when to apply what.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use paros_client::{JournalView, ReaderOutcome, Seq, WriterError, Written};
use paros_core::LeaderUuid;
use paros_core::ids::{JournalId, JournalKey, NodeId, TenantId};
use paros_registry::follow::Hosting;
use paros_registry::follower::{FollowPolicy, FollowedMachine, Follower, FollowerEffect, NextRead};
use paros_registry::term::{CoordinatorTerm, RestartConfig, Restarts, Succession, TermEffect, TermEnd, TermFailure};
use paros_registry::{Answer, CoordinatorConfig, Op, Request, RequestId, Submitted};

fn registry_key() -> JournalKey {
    JournalKey { tenant: TenantId(0), journal: JournalId(0x4e6) }
}

fn view(leader: u128, next: u64) -> JournalView {
    JournalView { leader: LeaderUuid::new(leader), first_seq: Seq(0), next_seq: Seq(next) }
}

fn page(from: u64, records: &[bytes::Bytes], tail: u64) -> ReaderOutcome {
    ReaderOutcome::Records { from: Seq(from), records: records.to_vec(), view: view(1, tail) }
}

/// A term that claimed a journal holding `book`'s records and caught up with them.
fn serving(book: &Book) -> CoordinatorTerm {
    let mut term = CoordinatorTerm::new(CoordinatorConfig::default());
    assert_eq!(term.poll(0, |_| true), vec![TermEffect::Claim], "a term claims first");
    assert!(term.poll(0, |_| true).is_empty(), "and once");
    term.claimed(Ok(view(1, book.next)));
    assert_eq!(term.poll(0, |_| true), vec![TermEffect::Read { from: Seq(0) }], "then reads from the floor");
    assert!(!term.is_serving(), "no request is taken before the fold reaches the claimed tail");
    let _ = term.page(Ok(page(0, &book.records, book.next)));
    assert!(term.poll(0, |_| true).is_empty());
    assert!(term.is_serving(), "at the claimed tail it serves");
    term
}

#[test]
fn a_term_claims_catches_up_then_writes_and_answers_from_the_fold() {
    let book = Book::formed();
    let mut term = serving(&book);
    let request = Request { id: RequestId(9), op: Op::Command(sign_up(200, "beta")) };
    assert_eq!(term.submit(request), Submitted::Waiting);
    let effects = term.poll(0, |_| false);
    assert!(effects.is_empty(), "no write while the writer has no room: {effects:?}");
    let effects = term.poll(0, |_| true);
    let [TermEffect::Write(batch)] = &effects[..] else { panic!("one write: {effects:?}") };
    assert_eq!(batch.len(), 1);
    term.written(Ok(Written { seq: Seq(book.next), count: 1 }));
    let effects = term.poll(0, |_| true);
    let [TermEffect::Answer(reply)] = &effects[..] else { panic!("the caller is answered: {effects:?}") };
    assert_eq!(reply.id, RequestId(9));
    assert!(matches!(&reply.answer, Answer::Verdict(v) if v.is_accepted()), "{reply:?}");
}

#[test]
fn a_superseded_write_ends_the_term_and_answers_not_coordinator() {
    let book = Book::formed();
    let mut term = serving(&book);
    let request = Request { id: RequestId(9), op: Op::Command(sign_up(200, "beta")) };
    assert_eq!(term.submit(request), Submitted::Waiting);
    assert_eq!(term.poll(0, |_| true).len(), 1);
    term.written(Err(WriterError::Superseded { view: view(2, book.next) }));
    let effects = term.poll(0, |_| true);
    let [TermEffect::Answer(reply)] = &effects[..] else { panic!("the caller is answered: {effects:?}") };
    assert_eq!(reply.answer, Answer::NotCoordinator);
    assert!(matches!(term.ended(), Some(TermEnd::Superseded { .. })));
    let again = Request { id: RequestId(10), op: Op::Command(sign_up(300, "gamma")) };
    assert_eq!(term.submit(again), Submitted::Answered(Answer::NotCoordinator));
}

#[test]
fn a_claim_that_does_not_win_or_a_read_of_an_unknown_journal_fails_the_term() {
    let mut term = CoordinatorTerm::new(CoordinatorConfig::default());
    let _ = term.poll(0, |_| true);
    term.claimed(Err(WriterError::Lost { view: view(3, 0) }));
    assert!(matches!(term.ended(), Some(TermEnd::Failed(TermFailure::Claim(_)))), "{:?}", term.ended());

    let mut term = CoordinatorTerm::new(CoordinatorConfig::default());
    let _ = term.poll(0, |_| true);
    term.claimed(Ok(view(1, 4)));
    let _ = term.poll(0, |_| true);
    let _ = term.page(Ok(ReaderOutcome::UnknownJournal));
    assert_eq!(term.ended(), Some(&TermEnd::Failed(TermFailure::UnknownJournal)));
}

#[test]
fn a_once_coordinator_stops_when_superseded_and_after_failures_max_failed_terms() {
    let config = RestartConfig { backoff: Duration::from_millis(7), failures_max: 2, succession: Succession::Once };
    let failed = TermEnd::Failed(TermFailure::Shell("test"));
    let superseded = TermEnd::Superseded { view: view(2, 0) };
    let mut r = Restarts::new(config);
    assert_eq!(r.after(&superseded), None, "a superseded coordinator of its process stops");
    assert_eq!(r.after(&failed), Some(Duration::from_millis(7)));
    assert_eq!(r.after(&failed), Some(Duration::from_millis(7)));
    assert_eq!(r.after(&failed), None, "the third failure in a row is past failures_max");
    let mut r = Restarts::new(RestartConfig { succession: Succession::WhileLeading, ..config });
    assert_eq!(r.after(&superseded), Some(Duration::from_millis(7)), "a leader-following one claims again");
}

/// A follower of node 1, a member of the cell: it hosts the registry journal as formation
/// placed it, and `hosted` besides.
fn follower(mut hosted: BTreeMap<JournalKey, paros_core::JournalConfig>, policy: FollowPolicy) -> Follower {
    let members = vec![NodeId(1), NodeId(2), NodeId(3)];
    let mode = paros_core::journal::WriterMode::Single;
    hosted.insert(registry_key(), paros_core::JournalConfig { mode, voters: members, learners: vec![] });
    let machine = FollowedMachine { id: NodeId(1), hosting: Hosting::voter(), hosted };
    Follower::new(registry_key(), vec![machine], policy)
}

#[test]
fn the_follower_applies_nothing_before_it_reaches_the_tail_and_never_asks_a_refused_placement_again() {
    let mut book = Book::formed();
    assert!(book.run(create(100, 7, "orders", &[1, 2, 3])).is_accepted());
    let key = JournalKey { tenant: TenantId(100), journal: JournalId(7) };
    let mut f =
        follower(BTreeMap::new(), FollowPolicy { apply_interval_min: Duration::ZERO, ..FollowPolicy::default() });
    let (first, rest) = book.records.split_at(2);
    f.read(Ok(page(0, first, book.next + 5)), false).unwrap();
    assert!(f.poll(Duration::ZERO).is_empty(), "not caught up: nothing is applied");
    assert!(f.directory().is_none(), "nor published");
    f.read(Ok(page(2, rest, book.next)), true).unwrap();
    let effects = f.poll(Duration::ZERO);
    let [FollowerEffect::Place { machine, journals }, FollowerEffect::Publish] = &effects[..] else {
        panic!("the created journal is placed, then the directory published: {effects:?}")
    };
    assert_eq!((*machine, journals[0].key), (NodeId(1), key));
    f.placed(NodeId(1), journals, &[false]);
    f.published(Duration::ZERO);
    assert_eq!(f.stats().refused, 1);
    assert!(f.directory().is_some());
    assert_eq!(f.next_read(), NextRead::Follow, "everything folded is applied: wait at the tail");
    f.read(Ok(page(book.next, &[], book.next)), true).unwrap();
    assert!(f.poll(Duration::ZERO).is_empty(), "nothing new folded: nothing to apply");
    assert!(book.run(sign_up(200, "beta")).is_accepted());
    let last = book.records.last().unwrap().clone();
    f.read(Ok(page(book.next - 1, &[last], book.next)), true).unwrap();
    let effects = f.poll(Duration::ZERO);
    assert_eq!(effects, vec![FollowerEffect::Publish], "the refused placement is not asked again");
}

#[test]
fn while_pages_keep_coming_the_follower_applies_at_most_once_per_interval() {
    let mut book = Book::formed();
    let policy = FollowPolicy { apply_interval_min: Duration::from_millis(10), ..FollowPolicy::default() };
    let mut f = follower(BTreeMap::new(), policy);
    f.read(Ok(page(0, &book.records, book.next)), true).unwrap();
    assert_eq!(f.poll(Duration::ZERO), vec![FollowerEffect::Publish]);
    f.published(Duration::ZERO);
    assert!(book.run(sign_up(200, "beta")).is_accepted());
    let last = book.records.last().unwrap().clone();
    f.read(Ok(page(book.next - 1, &[last], book.next)), true).unwrap();
    assert!(f.poll(Duration::from_millis(5)).is_empty(), "a page within the interval waits");
    assert_eq!(f.next_read(), NextRead::Once, "and the next read does not wait at the tail");
    f.read(Ok(page(book.next, &[], book.next)), true).unwrap();
    assert_eq!(f.poll(Duration::from_millis(6)), vec![FollowerEffect::Publish], "an empty page applies at once");
}

/// The registry journal hosted nowhere the follower asked (its seats moving, or their machines
/// not back yet) is a read that found nothing: the follower goes on and folds what comes next
/// (the simulation's seed 12: a follower that stopped at it never placed a journal again).
#[test]
fn the_follower_goes_on_after_the_registry_journal_was_hosted_nowhere_it_asked() {
    let mut book = Book::formed();
    assert!(book.run(create(100, 7, "orders", &[1, 2, 3])).is_accepted());
    let policy = FollowPolicy { apply_interval_min: Duration::ZERO, ..FollowPolicy::default() };
    let mut f = follower(BTreeMap::new(), policy);
    assert_eq!(f.read(Ok(ReaderOutcome::UnknownJournal), false), Ok(Vec::new()), "an outcome");
    assert_eq!(f.read(Err(paros_client::ReaderError::UnknownJournal), false), Ok(Vec::new()), "the reader's error");
    assert!(f.poll(Duration::ZERO).is_empty(), "nothing folded: nothing applied");
    f.read(Ok(page(0, &book.records, book.next)), true).expect("folds on");
    let effects = f.poll(Duration::ZERO);
    assert!(
        matches!(&effects[..], [FollowerEffect::Place { machine: NodeId(1), .. }, FollowerEffect::Publish]),
        "the created journal is placed, then the directory published: {effects:?}"
    );
}
