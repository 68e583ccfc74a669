//! The call policy's rules, one test each, driving the machine with scripted answers.

use std::time::Duration;

use bytes::Bytes;
use paros_client::policy::{AnswerError, backoff};
use paros_client::service::{CallReply, Route};
use paros_client::{CallPolicy, ClientConfig, ClientConfigError, Decided, ReadAnswer, Step};
use paros_core::journal::{JournalView, Outcome, TooLarge};
use paros_core::rng::Rng;
use paros_core::{Call, CallAnswer, LeaderUuid, NodeId, Seq};

const T0: Duration = Duration::ZERO;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn u(n: u128) -> LeaderUuid {
    LeaderUuid::new(n).expect("non-zero")
}

fn view(leader: Option<LeaderUuid>, first: u64, next: u64) -> JournalView {
    JournalView { leader, first_seq: Seq(first), next_seq: Seq(next) }
}

/// A write's acknowledgement at `seq` with the view a fold reports (leader 0xa, nothing
/// truncated; `Accepted`'s tail just past the write, `Duplicate`'s at `next`).
fn accepted(seq: u64, count: u64) -> Outcome {
    Outcome::Accepted { seq: Seq(seq), count, view: view(Some(u(0xa)), 0, seq + count) }
}

fn duplicate(seq: u64, count: u64, next: u64) -> Outcome {
    Outcome::Duplicate { seq: Seq(seq), count, view: view(Some(u(0xa)), 0, next) }
}

fn records(tag: &str, n: usize) -> Vec<Bytes> {
    (0..n).map(|i| Bytes::from(format!("{tag}{i}"))).collect()
}

fn write(seq: u64, n: usize) -> Call {
    Call::Write { leader: Some(u(0xa)), seq: Seq(seq), records: records("r", n) }
}

fn servers() -> Vec<NodeId> {
    vec![NodeId(1), NodeId(2), NodeId(3)]
}

fn policy(call: Call) -> CallPolicy {
    CallPolicy::new(call, servers(), Some(NodeId(1)), ClientConfig::default(), Rng::new(7)).expect("valid")
}

fn verdict(o: Outcome) -> CallReply {
    CallReply::Answer(CallAnswer::Verdict(o))
}

fn done(step: Step) -> Result<Decided, AnswerError> {
    match step {
        Step::Done(r) => r,
        other => panic!("expected the call to be over, got {other:?}"),
    }
}

fn send(step: Step) -> (Route, Duration) {
    match step {
        Step::Send { route, after } => (route, after),
        other => panic!("expected a send, got {other:?}"),
    }
}

#[test]
fn the_first_send_goes_at_once_to_the_hinted_server() {
    let mut p = policy(write(0, 1));
    assert_eq!(send(p.start()), (Route { server: Some(NodeId(1)), attempt: 0 }, T0));
}

#[test]
fn a_verdict_ends_the_call_with_that_verdict() {
    let mut p = policy(write(0, 2));
    p.start();
    let accepted = accepted(0, 2);
    assert_eq!(done(p.on_reply(verdict(accepted), T0)), Ok(Decided::Verdict(accepted)));
    assert_eq!(p.answered_by(), Some(NodeId(1)));
}

#[test]
fn a_redirect_naming_a_leader_is_followed_at_once() {
    let mut p = policy(write(0, 1));
    p.start();
    let step = p.on_reply(CallReply::Answer(CallAnswer::Redirect { leader: Some(NodeId(3)) }), T0);
    assert_eq!(send(step), (Route { server: Some(NodeId(3)), attempt: 1 }, T0));
}

#[test]
fn redirects_are_followed_at_most_redirects_max_times() {
    let config = ClientConfig { redirects_max: 3, ..ClientConfig::default() };
    let mut p = CallPolicy::new(write(0, 1), servers(), None, config, Rng::new(1)).expect("valid");
    let mut step = p.start();
    let mut sends = 0;
    while let Step::Send { .. } = step {
        sends += 1;
        let to = NodeId(1 + sends % 3);
        step = p.on_reply(CallReply::Answer(CallAnswer::Redirect { leader: Some(to) }), T0);
    }
    assert_eq!(sends, 4, "the first send and three redirects");
    assert_eq!(done(step), Ok(Decided::Unavailable));
}

#[test]
fn busy_no_leader_and_not_sent_rotate_to_the_next_server_after_a_backoff() {
    let mut p = policy(write(0, 1));
    p.start();
    for (reply, next) in [
        (CallReply::Answer(CallAnswer::Busy), 2),
        (CallReply::Answer(CallAnswer::Redirect { leader: None }), 3),
        (CallReply::NotSent, 1),
    ] {
        let (route, after) = send(p.on_reply(reply, T0));
        assert_eq!(route.server, Some(NodeId(next)));
        assert!(after >= ClientConfig::default().backoff_base);
    }
    assert!(!p.is_ambiguous(), "none of these can have taken effect");
}

fn over_quota(retry_after_s: Option<u64>) -> CallReply {
    let d = paros_client::Denial::new(429, "over_quota", "over the tenant's requests/s");
    CallReply::Denied(paros_client::Denial { retry_after_s, ..d })
}

#[test]
fn over_quota_is_sent_again_to_the_same_server_after_its_retry_after_and_a_backoff() {
    let config = ClientConfig::default();
    // An unfenced append too: a 429 took no effect, so it may go again.
    let append = Call::Write { leader: None, seq: Seq(0), records: records("a", 2) };
    for call in [write(0, 2), append] {
        let mut p = policy(call.clone());
        p.start();
        let (route, after) = send(p.on_reply(over_quota(Some(2)), ms(5)));
        assert_eq!(route, Route { server: Some(NodeId(1)), attempt: 1 }, "the quota is the tenant's, not a server's");
        let least = Duration::from_secs(2) + config.backoff_base;
        assert!(after >= least && after <= Duration::from_secs(2) + config.backoff_max, "{after:?}");
        // No Retry-After: a backoff alone.
        let (_, after) = send(p.on_reply(over_quota(None), ms(5) + after));
        assert!(after >= config.backoff_base && after <= config.backoff_max, "{after:?}");
        assert!(!p.is_ambiguous(), "a 429 took no effect");
        assert_eq!(p.call(), &call);
        let accepted = accepted(0, 2);
        assert_eq!(done(p.on_reply(verdict(accepted), Duration::from_secs(3))), Ok(Decided::Verdict(accepted)));
    }
}

#[test]
fn over_quota_stands_when_its_wait_would_pass_the_deadline_or_the_attempts_run_out() {
    let mut p = policy(write(0, 1));
    p.start();
    let late = ClientConfig::default().deadline - Duration::from_secs(1);
    match done(p.on_reply(over_quota(Some(1)), late)) {
        Ok(Decided::Denied { denial, ambiguous: false }) => {
            assert_eq!((denial.status, denial.retry_after_s), (429, Some(1)))
        }
        other => panic!("{other:?}"),
    }

    let config = ClientConfig { attempts_max: 2, ..ClientConfig::default() };
    let mut p = CallPolicy::new(write(0, 1), servers(), Some(NodeId(1)), config, Rng::new(3)).expect("valid");
    p.start();
    send(p.on_reply(over_quota(Some(1)), T0));
    assert!(matches!(done(p.on_reply(over_quota(Some(1)), ms(1_100))), Ok(Decided::Denied { .. })));

    // After a lost answer, the refusal says the call may have taken effect.
    let mut p = policy(write(0, 1));
    p.start();
    send(p.on_reply(CallReply::NoAnswer, T0));
    assert!(matches!(done(p.on_reply(over_quota(Some(1)), late)), Ok(Decided::Denied { ambiguous: true, .. })));
}

#[test]
fn any_other_denial_ends_the_call_at_once() {
    for (status, code) in [(401, "unauthorized"), (403, "forbidden"), (400, "malformed")] {
        let mut p = policy(write(0, 1));
        p.start();
        let reply = CallReply::Denied(paros_client::Denial::new(status, code, "no"));
        assert!(matches!(done(p.on_reply(reply, T0)), Ok(Decided::Denied { ambiguous: false, .. })), "{status}");
    }
}

#[test]
fn the_same_request_is_sent_every_time() {
    let call = write(4, 3);
    let mut p = policy(call.clone());
    p.start();
    p.on_reply(CallReply::NoAnswer, T0);
    p.on_reply(CallReply::NotSent, T0);
    assert_eq!(p.call(), &call);
}

#[test]
fn running_out_of_attempts_unambiguously_is_unavailable() {
    let config = ClientConfig { attempts_max: 3, ..ClientConfig::default() };
    let mut p = CallPolicy::new(write(0, 1), servers(), None, config, Rng::new(1)).expect("valid");
    let mut step = p.start();
    let mut sends = 0;
    while let Step::Send { .. } = step {
        sends += 1;
        step = p.on_reply(CallReply::NotSent, T0);
    }
    assert_eq!(sends, 3);
    assert_eq!(done(step), Ok(Decided::Unavailable));
}

#[test]
fn running_out_of_attempts_after_a_lost_answer_is_ambiguous() {
    let config = ClientConfig { attempts_max: 3, ..ClientConfig::default() };
    let mut p = CallPolicy::new(write(0, 1), servers(), None, config, Rng::new(1)).expect("valid");
    p.start();
    p.on_reply(CallReply::NoAnswer, T0);
    p.on_reply(CallReply::NotSent, T0);
    assert_eq!(done(p.on_reply(CallReply::Answer(CallAnswer::Busy), T0)), Ok(Decided::Ambiguous));
}

#[test]
fn no_retry_is_scheduled_past_the_deadline() {
    let config = ClientConfig { deadline: Duration::from_millis(100), ..ClientConfig::default() };
    let mut p = CallPolicy::new(write(0, 1), servers(), None, config, Rng::new(1)).expect("valid");
    p.start();
    let step = p.on_reply(CallReply::NotSent, Duration::from_millis(99));
    assert_eq!(done(step), Ok(Decided::Unavailable));
}

#[test]
fn too_large_ends_the_call() {
    let limits = TooLarge { max_records: 1, max_bytes: 2 };
    let mut p = policy(write(0, 2));
    p.start();
    assert_eq!(done(p.on_reply(CallReply::Answer(CallAnswer::TooLarge(limits)), T0)), Ok(Decided::TooLarge(limits)));
}

#[test]
fn unknown_journal_from_one_server_asks_the_others_at_once() {
    let mut p = policy(write(0, 1));
    p.start();
    assert_eq!(send(p.on_reply(CallReply::UnknownJournal, T0)), (Route { server: Some(NodeId(2)), attempt: 1 }, T0));
    assert_eq!(send(p.on_reply(CallReply::UnknownJournal, T0)), (Route { server: Some(NodeId(3)), attempt: 2 }, T0));
    let accepted = accepted(0, 1);
    assert_eq!(done(p.on_reply(verdict(accepted), T0)), Ok(Decided::Verdict(accepted)));
    assert_eq!(p.answered_by(), Some(NodeId(3)), "the server that hosts it answered");
}

#[test]
fn a_journal_no_server_hosts_is_asked_again_after_a_backoff_until_the_placement_wait() {
    let config = ClientConfig {
        placement_wait: Duration::from_millis(500),
        attempts_max: 2,
        backoff_max: Duration::from_millis(40),
        ..ClientConfig::default()
    };
    let mut p = CallPolicy::new(write(0, 1), servers(), Some(NodeId(1)), config, Rng::new(5)).expect("valid");
    p.start();
    let mut elapsed = T0;
    let mut rounds = 0;
    let mut step = p.on_reply(CallReply::UnknownJournal, elapsed);
    // Requests answered UnknownJournal do not count against `attempts_max` (2 here): the
    // placement wait bounds them.
    let decided = loop {
        match step {
            Step::Send { route, after } => {
                if !after.is_zero() {
                    rounds += 1;
                    assert!(after >= config.backoff_base && after <= config.backoff_max, "{after:?}");
                    assert!(elapsed + after <= config.placement_wait, "no round starts past the wait");
                }
                assert_eq!(route.attempt, p.sent() - 1);
                elapsed += after;
                step = p.on_reply(CallReply::UnknownJournal, elapsed);
            }
            Step::Done(decided) => break decided,
            Step::Read { .. } => panic!("nothing to read back"),
        }
    };
    assert_eq!(decided, Ok(Decided::UnknownJournal));
    assert!(rounds >= 10, "the servers were asked again round after round: {rounds}");
    assert_eq!(p.sent() % 3, 0, "every round asks every server");
    assert!(elapsed + config.backoff_max > config.placement_wait, "it gave up only near the wait: {elapsed:?}");
}

#[test]
fn a_placed_server_answering_again_starts_a_fresh_round() {
    let config = ClientConfig { placement_wait: Duration::from_secs(5), ..ClientConfig::default() };
    let mut p = CallPolicy::new(write(0, 1), servers(), Some(NodeId(1)), config, Rng::new(5)).expect("valid");
    p.start();
    assert_eq!(send(p.on_reply(CallReply::UnknownJournal, T0)).1, T0);
    // Busy: a server hosts it; the rotation goes on after a backoff.
    let (_, after) = send(p.on_reply(CallReply::Answer(CallAnswer::Busy), T0));
    assert!(after > T0);
    assert_eq!(send(p.on_reply(CallReply::UnknownJournal, after)).1, T0, "two in a row are not a round of three");
}

#[test]
fn unknown_journal_from_a_service_that_routes_by_itself_ends_the_call() {
    let mut p = CallPolicy::new(write(0, 2), vec![], None, ClientConfig::default(), Rng::new(7)).expect("valid");
    p.start();
    assert_eq!(done(p.on_reply(CallReply::UnknownJournal, T0)), Ok(Decided::UnknownJournal));
}

#[test]
fn with_no_placement_wait_one_round_of_unknown_journal_ends_the_call() {
    let config = ClientConfig { placement_wait: Duration::ZERO, ..ClientConfig::default() };
    let mut p = CallPolicy::new(write(0, 2), servers(), None, config, Rng::new(7)).expect("valid");
    p.start();
    send(p.on_reply(CallReply::UnknownJournal, T0));
    send(p.on_reply(CallReply::UnknownJournal, T0));
    assert_eq!(done(p.on_reply(CallReply::UnknownJournal, T0)), Ok(Decided::UnknownJournal));
}

#[test]
fn an_acknowledgement_whose_view_does_not_hold_the_write_is_an_answer_error() {
    let short = Outcome::Accepted { seq: Seq(0), count: 2, view: view(Some(u(0xa)), 0, 1) };
    let beyond = Outcome::Accepted { seq: Seq(0), count: 2, view: view(Some(u(0xa)), 0, 3) };
    let behind = Outcome::Duplicate { seq: Seq(0), count: 2, view: view(Some(u(0xa)), 0, 1) };
    for o in [short, beyond, behind] {
        let mut p = policy(write(0, 2));
        p.start();
        let view = o.view().expect("an acknowledgement carries a view");
        assert_eq!(done(p.on_reply(verdict(o), T0)), Err(AnswerError::InconsistentView { view }), "{o:?}");
    }
    let mut p = policy(write(0, 2));
    p.start();
    assert_eq!(done(p.on_reply(verdict(duplicate(0, 2, 7)), T0)), Ok(Decided::Verdict(duplicate(0, 2, 7))));
}

#[test]
fn an_ambiguous_write_answered_duplicate_was_written() {
    let mut p = policy(write(5, 2));
    p.start();
    p.on_reply(CallReply::NoAnswer, T0);
    let dup = duplicate(5, 2, 9);
    assert_eq!(done(p.on_reply(verdict(dup), T0)), Ok(Decided::Verdict(dup)));
}

#[test]
fn an_ambiguous_write_answered_accepted_was_written_now() {
    let mut p = policy(write(5, 2));
    p.start();
    p.on_reply(CallReply::Answer(CallAnswer::NoVerdict), T0);
    let acc = accepted(5, 2);
    assert_eq!(done(p.on_reply(verdict(acc), T0)), Ok(Decided::Verdict(acc)));
}

#[test]
fn an_ambiguous_write_refused_with_the_tail_at_its_seq_was_not_written() {
    let mut p = policy(write(5, 2));
    p.start();
    p.on_reply(CallReply::NoAnswer, T0);
    let refused = Outcome::Refused(view(Some(u(0xb)), 0, 5));
    assert_eq!(done(p.on_reply(verdict(refused), T0)), Ok(Decided::Verdict(refused)));
}

#[test]
fn an_ambiguous_write_answered_truncated_is_ambiguous() {
    let mut p = policy(write(5, 2));
    p.start();
    p.on_reply(CallReply::NoAnswer, T0);
    let step = p.on_reply(verdict(Outcome::Truncated(view(Some(u(0xa)), 9, 9))), T0);
    assert_eq!(done(step), Ok(Decided::Ambiguous));
}

#[test]
fn an_unambiguous_truncated_write_reports_the_verdict() {
    let mut p = policy(write(5, 2));
    p.start();
    let t = Outcome::Truncated(view(Some(u(0xa)), 9, 9));
    assert_eq!(done(p.on_reply(verdict(t), T0)), Ok(Decided::Verdict(t)));
}

/// Drives an ambiguous write of `r0 r1 r2` at 5 into a refusal past its seq, then into a
/// read-back answered with `pages`.
fn read_back(pages: Vec<ReadAnswer>) -> Result<Decided, AnswerError> {
    let config = ClientConfig { read_back_records_max: 2, ..ClientConfig::default() };
    let mut p = CallPolicy::new(write(5, 3), servers(), None, config, Rng::new(3)).expect("valid");
    p.start();
    p.on_reply(CallReply::NoAnswer, T0);
    let refused = Outcome::Refused(view(Some(u(0xa)), 0, 8));
    let mut step = p.on_reply(verdict(refused), T0);
    for page in pages {
        let Step::Read { .. } = step else { panic!("expected a read-back, got {step:?}") };
        step = p.on_read(page, T0);
    }
    done(step)
}

#[test]
fn an_ambiguous_write_refused_past_its_seq_is_read_back_in_bounded_pages() {
    let config = ClientConfig { read_back_records_max: 2, ..ClientConfig::default() };
    let mut p = CallPolicy::new(write(5, 3), servers(), None, config, Rng::new(3)).expect("valid");
    p.start();
    p.on_reply(CallReply::NoAnswer, T0);
    let step = p.on_reply(verdict(Outcome::Refused(view(Some(u(0xa)), 0, 8))), T0);
    let Step::Read { params, .. } = step else { panic!("expected a read-back, got {step:?}") };
    assert_eq!((params.from, params.limit), (Seq(5), 2));
}

#[test]
fn a_read_back_equal_byte_for_byte_means_written() {
    let v = view(Some(u(0xa)), 0, 8);
    let rs = records("r", 3);
    let pages = vec![
        ReadAnswer::Page { from: Seq(5), records: rs[..2].to_vec(), view: v },
        ReadAnswer::Page { from: Seq(7), records: rs[2..].to_vec(), view: v },
    ];
    assert_eq!(read_back(pages), Ok(Decided::Verdict(duplicate(5, 3, 8))));
}

#[test]
fn a_read_back_that_differs_means_not_written_and_the_refusal_stands() {
    let v = view(Some(u(0xa)), 0, 8);
    let mut rs = records("r", 3);
    rs[2] = Bytes::from_static(b"other");
    let pages = vec![
        ReadAnswer::Page { from: Seq(5), records: rs[..2].to_vec(), view: v },
        ReadAnswer::Page { from: Seq(7), records: rs[2..].to_vec(), view: v },
    ];
    assert_eq!(read_back(pages), Ok(Decided::Verdict(Outcome::Refused(v))));
}

#[test]
fn a_read_back_below_the_trim_point_is_ambiguous() {
    let pages = vec![ReadAnswer::Truncated { view: view(Some(u(0xa)), 6, 8) }];
    assert_eq!(read_back(pages), Ok(Decided::Ambiguous));
}

#[test]
fn an_unserved_read_back_is_asked_again() {
    let v = view(Some(u(0xa)), 0, 8);
    let rs = records("r", 3);
    let pages = vec![
        ReadAnswer::Unserved { applied_to: None },
        ReadAnswer::Page { from: Seq(5), records: rs.clone(), view: v },
    ];
    // read_back_records_max is 2, but a page of three is still compared in full: the bound is
    // what is asked, the comparison is over what came.
    assert_eq!(read_back(pages), Ok(Decided::Verdict(duplicate(5, 3, 8))));
}

#[test]
fn a_read_back_page_from_elsewhere_is_an_answer_error() {
    let v = view(Some(u(0xa)), 0, 8);
    let pages = vec![ReadAnswer::Page { from: Seq(6), records: records("r", 1), view: v }];
    assert!(matches!(read_back(pages), Err(AnswerError::WrongPage { .. })));
}

#[test]
fn an_ambiguous_set_leader_lost_to_its_own_uuid_won() {
    let call = Call::SetLeader { new: u(0xb), old: Some(u(0xa)) };
    let mut p = policy(call);
    p.start();
    p.on_reply(CallReply::NoAnswer, T0);
    let v = view(Some(u(0xb)), 0, 3);
    assert_eq!(done(p.on_reply(verdict(Outcome::Lost(v)), T0)), Ok(Decided::Verdict(Outcome::Won(v))));
}

#[test]
fn an_ambiguous_set_leader_lost_to_another_uuid_lost() {
    let call = Call::SetLeader { new: u(0xb), old: Some(u(0xa)) };
    let mut p = policy(call);
    p.start();
    p.on_reply(CallReply::NoAnswer, T0);
    let v = view(Some(u(0xc)), 0, 3);
    assert_eq!(done(p.on_reply(verdict(Outcome::Lost(v)), T0)), Ok(Decided::Verdict(Outcome::Lost(v))));
}

#[test]
fn an_ambiguous_truncate_whose_effect_holds_is_trimmed() {
    let call = Call::Truncate { leader: Some(u(0xa)), up_to: Seq(4) };
    let mut p = policy(call);
    p.start();
    p.on_reply(CallReply::NoAnswer, T0);
    let v = view(Some(u(0xc)), 4, 9);
    assert_eq!(done(p.on_reply(verdict(Outcome::TruncateRefused(v)), T0)), Ok(Decided::Verdict(Outcome::Trimmed(v))));
    let mut p = policy(Call::Truncate { leader: Some(u(0xa)), up_to: Seq(4) });
    p.start();
    p.on_reply(CallReply::NoAnswer, T0);
    let v = view(Some(u(0xc)), 2, 9);
    let refused = Outcome::TruncateRefused(v);
    assert_eq!(done(p.on_reply(verdict(refused), T0)), Ok(Decided::Verdict(refused)));
}

/// A journal's seat move (docs/reconfiguration.md): its own epoch decided, or — re-sent after a
/// lost answer, or re-driven by a new coordinator — the epoch found in force already; a verdict
/// of another epoch's change, or of another kind, is no answer to it.
#[test]
fn a_reconfigure_ends_with_its_epoch_decided_or_the_epoch_in_force() {
    let voters = paros_core::journal::Voters::new(&[NodeId(1), NodeId(2), NodeId(4)]).expect("voters");
    let call = || Call::Reconfigure { epoch: 3, voters };
    let v = view(None, 0, 5);
    let mut p = policy(call());
    p.start();
    let moved = Outcome::Reconfigured { epoch: 3, view: v };
    assert_eq!(done(p.on_reply(verdict(moved), T0)), Ok(Decided::Verdict(moved)));
    let mut p = policy(call());
    p.start();
    p.on_reply(CallReply::NoAnswer, T0);
    let in_force = Outcome::StaleEpoch { epoch: 3, view: v };
    assert_eq!(done(p.on_reply(verdict(in_force), T0)), Ok(Decided::Verdict(in_force)));
    let mut p = policy(call());
    p.start();
    let other = Outcome::Reconfigured { epoch: 4, view: v };
    assert_eq!(done(p.on_reply(verdict(other), T0)), Err(AnswerError::WrongVerdict { outcome: other }));
    let mut p = policy(call());
    p.start();
    let won = Outcome::Won(v);
    assert_eq!(done(p.on_reply(verdict(won), T0)), Err(AnswerError::WrongVerdict { outcome: won }));
}

#[test]
fn a_verdict_that_cannot_answer_the_call_is_an_answer_error() {
    let mut p = policy(write(0, 1));
    p.start();
    let won = Outcome::Won(view(Some(u(0xa)), 0, 0));
    assert_eq!(done(p.on_reply(verdict(won), T0)), Err(AnswerError::WrongVerdict { outcome: won }));
    let mut p = policy(write(0, 1));
    p.start();
    let elsewhere = accepted(3, 1);
    assert!(matches!(done(p.on_reply(verdict(elsewhere), T0)), Err(AnswerError::WrongPosition { .. })));
    let mut p = policy(write(0, 1));
    p.start();
    let bad = Outcome::Refused(view(None, 5, 2));
    assert!(matches!(done(p.on_reply(verdict(bad), T0)), Err(AnswerError::InconsistentView { .. })));
}

#[test]
fn backoff_is_bounded_and_jittered_within_base_and_max() {
    let config = ClientConfig {
        backoff_base: Duration::from_millis(10),
        backoff_max: Duration::from_millis(500),
        ..ClientConfig::default()
    };
    let mut rng = Rng::new(42);
    let mut seen = std::collections::BTreeSet::new();
    for retry in 1..200u32 {
        let d = backoff(&config, retry, &mut rng);
        assert!(d >= config.backoff_base && d <= config.backoff_max, "retry {retry}: {d:?}");
        let window = config.backoff_base.saturating_mul(1u32.checked_shl(retry).unwrap_or(u32::MAX));
        assert!(d <= window, "retry {retry}: {d:?} is within the doubling window");
        seen.insert(d);
    }
    assert!(seen.len() > 100, "the delays are jittered, not fixed: {} distinct", seen.len());
    let again: Vec<_> = {
        let mut rng = Rng::new(42);
        (1..200u32).map(|r| backoff(&config, r, &mut rng)).collect()
    };
    let mut rng = Rng::new(42);
    let first: Vec<_> = (1..200u32).map(|r| backoff(&config, r, &mut rng)).collect();
    assert_eq!(first, again, "the same seed draws the same delays");
}

#[test]
fn every_retry_the_policy_schedules_waits_within_base_and_max() {
    let config = ClientConfig {
        attempts_max: 50,
        backoff_base: Duration::from_millis(1),
        backoff_max: Duration::from_millis(20),
        deadline: Duration::from_secs(3600),
        ..ClientConfig::default()
    };
    let mut p = CallPolicy::new(write(0, 1), servers(), None, config, Rng::new(9)).expect("valid");
    let mut step = p.start();
    let mut delays = vec![];
    while let Step::Send { after, .. } = step {
        delays.push(after);
        step = p.on_reply(CallReply::Answer(CallAnswer::Busy), T0);
    }
    assert_eq!(delays.len(), 50);
    assert!(delays[1..].iter().all(|d| *d >= config.backoff_base && *d <= config.backoff_max), "{delays:?}");
}

#[test]
fn config_validation_names_the_bad_bound() {
    let ok = ClientConfig::default();
    assert_eq!(ok.validate(), Ok(()));
    assert_eq!(ClientConfig { attempts_max: 0, ..ok }.validate(), Err(ClientConfigError::AttemptsZero));
    assert_eq!(ClientConfig { backoff_base: Duration::ZERO, ..ok }.validate(), Err(ClientConfigError::BackoffBaseZero));
    let inverted = ClientConfig { backoff_base: Duration::from_secs(2), backoff_max: Duration::from_secs(1), ..ok };
    assert!(matches!(inverted.validate(), Err(ClientConfigError::BackoffInverted { .. })));
    assert_eq!(ClientConfig { deadline: Duration::ZERO, ..ok }.validate(), Err(ClientConfigError::DeadlineZero));
    assert_eq!(ClientConfig { read_back_records_max: 0, ..ok }.validate(), Err(ClientConfigError::ReadBackPageZero));
    assert_eq!(ClientConfig { read_attempts_max: 0, ..ok }.validate(), Err(ClientConfigError::ReadAttemptsZero));
    let refused = CallPolicy::new(write(0, 1), servers(), None, ClientConfig { attempts_max: 0, ..ok }, Rng::new(0));
    assert!(refused.is_err());
}

fn append(n: usize) -> Call {
    Call::Write { leader: None, seq: Seq(0), records: records("m", n) }
}

#[test]
fn an_append_is_acknowledged_wherever_it_landed_but_only_with_its_own_count() {
    let mut p = policy(append(2));
    p.start();
    let landed = accepted(41, 2);
    assert_eq!(done(p.on_reply(verdict(landed), T0)), Ok(Decided::Verdict(landed)));
    let mut p = policy(append(2));
    p.start();
    let short = accepted(41, 1);
    assert!(matches!(done(p.on_reply(verdict(short), T0)), Err(AnswerError::WrongPosition { .. })));
    let mut p = policy(append(2));
    p.start();
    let dup = duplicate(41, 2, 43);
    assert!(
        matches!(done(p.on_reply(verdict(dup), T0)), Err(AnswerError::WrongVerdict { .. })),
        "an append is never a duplicate"
    );
}

#[test]
fn an_append_that_may_have_landed_is_never_sent_again() {
    for lost in [CallReply::NoAnswer, CallReply::Answer(CallAnswer::NoVerdict)] {
        let mut p = policy(append(1));
        p.start();
        assert_eq!(done(p.on_reply(lost.clone(), T0)), Ok(Decided::Ambiguous), "{lost:?}");
        assert_eq!(p.sent(), 1, "one send: a second could append twice");
    }
    // Nothing was proposed on a redirect or a busy server: those are retried.
    let mut p = policy(append(1));
    p.start();
    let step = p.on_reply(CallReply::Answer(CallAnswer::Redirect { leader: Some(NodeId(2)) }), T0);
    assert_eq!(send(step).0.server, Some(NodeId(2)));
    let step = p.on_reply(CallReply::Answer(CallAnswer::Busy), T0);
    assert!(matches!(step, Step::Send { .. }));
}

#[test]
fn a_refused_append_is_not_read_back() {
    let mut p = policy(append(0));
    p.start();
    let refused = Outcome::Refused(view(None, 0, 5));
    assert_eq!(done(p.on_reply(verdict(refused), T0)), Ok(Decided::Verdict(refused)));
}
