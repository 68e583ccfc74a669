//! The read policy's rules, one test each, driving the machine with scripted answers.

use std::time::Duration;

use bytes::Bytes;
use paros_client::service::Route;
use paros_client::{ClientConfig, JournalView, ReadAnswer, ReadDeadline, ReadParams, ReadPolicy, ReadStep, Seq};
use paros_core::rng::Rng;
use paros_core::{Consistency, NodeId};

const T0: Duration = Duration::ZERO;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn servers() -> Vec<NodeId> {
    vec![NodeId(1), NodeId(2), NodeId(3)]
}

fn params(from: u64, consistency: Consistency) -> ReadParams {
    ReadParams { from: Seq(from), limit: 10, max_bytes: 1 << 10, wait_ms: 0, consistency }
}

/// A linearizable read from 0 that waits 200 ms for the journal and 1 s more to be served.
fn deadline() -> ReadDeadline {
    ReadDeadline { wait_until: ms(200), give_up_at: ms(1200) }
}

fn policy_with(config: ClientConfig, deadline: ReadDeadline, hint: Option<NodeId>) -> ReadPolicy {
    ReadPolicy::new(params(0, Consistency::Linearizable), deadline, servers(), hint, config, Rng::new(7))
        .expect("valid")
}

fn policy() -> ReadPolicy {
    policy_with(ClientConfig::default(), deadline(), Some(NodeId(2)))
}

fn view(next: u64) -> JournalView {
    JournalView { leader: None, first_seq: Seq(0), next_seq: Seq(next) }
}

fn page(from: u64, n: u64) -> ReadAnswer {
    let records = (from..from + n).map(|i| Bytes::from(format!("r{i}"))).collect();
    ReadAnswer::Page { from: Seq(from), records, view: view(from + n) }
}

/// An empty page at the tail of a journal of `next` records.
fn empty(next: u64) -> ReadAnswer {
    ReadAnswer::Page { from: Seq(next), records: vec![], view: view(next) }
}

/// `(server, attempt, wait_ms, after, cut_off)` of a send.
fn send(step: ReadStep) -> (Option<NodeId>, u32, u32, Duration, Duration) {
    match step {
        ReadStep::Send { params, route: Route { server, attempt }, after, cut_off } => {
            (server, attempt, params.wait_ms, after, cut_off)
        }
        other => panic!("expected a send, got {other:?}"),
    }
}

fn done(step: ReadStep) -> ReadAnswer {
    match step {
        ReadStep::Done(answer) => answer,
        other => panic!("expected the read to be over, got {other:?}"),
    }
}

#[test]
fn the_first_try_goes_at_once_to_the_hinted_server_and_waits_the_whole_wait() {
    let mut p = policy();
    assert_eq!(send(p.start()), (Some(NodeId(2)), 0, 200, T0, ms(1200)));
}

#[test]
fn a_page_truncated_or_denied_ends_the_read() {
    let truncated = ReadAnswer::Truncated { view: view(9) };
    let forbidden = ReadAnswer::Denied(paros_client::Denial::new(403, "forbidden", "no"));
    for answer in [page(0, 3), truncated, forbidden] {
        let mut p = policy();
        p.start();
        assert_eq!(done(p.on_answer(answer.clone(), ms(5))), answer);
    }
}

#[test]
fn over_quota_is_asked_again_of_the_same_server_when_its_wait_ends_before_the_read_does() {
    let config = ClientConfig::default();
    let quota = paros_client::Denial::new(429, "over_quota", "slow down");
    let denied = |s| ReadAnswer::Denied(paros_client::Denial { retry_after_s: Some(s), ..quota.clone() });
    // The read gives up at 1.2 s: a 429 with one second to wait fits.
    let mut p = policy();
    p.start();
    let (server, attempt, _, after, _) = send(p.on_answer(denied(1), ms(5)));
    assert_eq!((server, attempt), (Some(NodeId(2)), 1), "the same server: the quota is the tenant's");
    assert!(after >= Duration::from_secs(1) + config.backoff_base, "{after:?}");
    assert_eq!(done(p.on_answer(page(0, 1), ms(5) + after)), page(0, 1));
    // Two seconds do not: the refusal ends the read.
    let mut p = policy();
    p.start();
    assert_eq!(done(p.on_answer(denied(2), ms(5))), denied(2));
}

#[test]
fn unserved_is_asked_again_of_the_next_server_after_a_backoff() {
    let config = ClientConfig::default();
    let mut p = policy();
    p.start();
    let (server, attempt, wait_ms, after, cut_off) =
        send(p.on_answer(ReadAnswer::Unserved { applied_to: None }, ms(30)));
    assert_eq!((server, attempt, cut_off), (Some(NodeId(3)), 1, ms(1200)));
    assert!(after >= config.backoff_base && after <= config.backoff_max, "{after:?}");
    let left = ms(200).saturating_sub(ms(30) + after);
    assert_eq!(wait_ms, u32::try_from(left.as_micros().div_ceil(1000)).unwrap(), "what is left of the wait");
    let elapsed = ms(30) + after + ms(5);
    assert_eq!(
        send(p.on_answer(ReadAnswer::Unserved { applied_to: None }, elapsed)).0,
        Some(NodeId(1)),
        "the rotation wraps"
    );
    assert_eq!(send(p.on_answer(ReadAnswer::Unserved { applied_to: None }, elapsed + ms(100))).0, Some(NodeId(2)));
    assert_eq!(done(p.on_answer(page(0, 1), elapsed + ms(200))), page(0, 1));
}

#[test]
fn the_deadline_ends_a_read_no_server_serves() {
    let mut p = policy();
    p.start();
    // No backoff is slept into the end of the wait for a server.
    assert_eq!(
        done(p.on_answer(ReadAnswer::Unserved { applied_to: None }, ms(1195))),
        ReadAnswer::Unserved { applied_to: None }
    );
    let mut p = policy();
    p.start();
    assert_eq!(done(p.on_cut_off()), ReadAnswer::Unserved { applied_to: None }, "no answer by the cut-off");
}

#[test]
fn every_try_before_the_end_is_cut_off_at_give_up_at_and_none_is_scheduled_after_it() {
    let mut p = policy();
    let mut step = p.start();
    let mut elapsed = T0;
    loop {
        match step {
            ReadStep::Send { after, cut_off, .. } => {
                elapsed += after;
                assert!(elapsed < ms(1200), "a try starts before give_up_at: {elapsed:?}");
                assert_eq!(cut_off, ms(1200));
                elapsed += ms(60);
                step = p.on_answer(ReadAnswer::Unserved { applied_to: None }, elapsed);
            }
            ReadStep::Done(answer) => {
                assert_eq!(answer, ReadAnswer::Unserved { applied_to: None });
                break;
            }
        }
    }
    assert!(p.sent() <= ClientConfig::default().read_attempts_max);
}

#[test]
fn read_attempts_max_ends_the_read() {
    let config = ClientConfig { read_attempts_max: 2, ..ClientConfig::default() };
    let mut p = policy_with(config, ReadDeadline { wait_until: T0, give_up_at: ms(60_000) }, None);
    p.start();
    send(p.on_answer(ReadAnswer::Unserved { applied_to: None }, ms(1)));
    assert_eq!(
        done(p.on_answer(ReadAnswer::Unserved { applied_to: None }, ms(100))),
        ReadAnswer::Unserved { applied_to: None }
    );
    assert_eq!(p.sent(), 2);
}

#[test]
fn an_early_empty_page_at_the_tail_is_held_until_wait_until() {
    let mut p = policy();
    p.start();
    // The server capped its long-poll at 120 ms: the next server is asked at once for the
    // rest, and that try is cut off at the end of the wait, not at give_up_at.
    assert_eq!(send(p.on_answer(empty(4), ms(120))), (Some(NodeId(3)), 1, 80, T0, ms(200)));
    assert_eq!(done(p.on_cut_off()), empty(4), "the held page answers at wait_until");
}

#[test]
fn a_record_that_comes_after_an_early_empty_page_is_the_answer() {
    let mut p = policy();
    p.start();
    send(p.on_answer(empty(4), ms(120)));
    assert_eq!(done(p.on_answer(page(4, 1), ms(150))), page(4, 1));
}

#[test]
fn unserved_after_an_early_page_ends_at_wait_until_with_the_page() {
    let mut p = policy();
    p.start();
    send(p.on_answer(empty(4), ms(120)));
    // A backoff from 195 ms would end past wait_until: the held page is the answer now.
    assert_eq!(done(p.on_answer(ReadAnswer::Unserved { applied_to: None }, ms(195))), empty(4));
}

#[test]
fn an_empty_page_at_or_after_wait_until_is_the_answer() {
    let mut p = policy();
    p.start();
    assert_eq!(done(p.on_answer(empty(4), ms(200))), empty(4));
    let mut p = policy_with(ClientConfig::default(), ReadDeadline { wait_until: T0, give_up_at: ms(2000) }, None);
    assert_eq!(send(p.start()).2, 0, "no wait: the server answers at once");
    assert_eq!(done(p.on_answer(empty(4), ms(3))), empty(4));
}

#[test]
fn unknown_journal_from_one_server_is_asked_of_another_that_serves_it() {
    let mut p = policy();
    p.start();
    let (server, attempt, _, after, _) = send(p.on_answer(ReadAnswer::UnknownJournal, ms(2)));
    assert_eq!((server, attempt, after), (Some(NodeId(3)), 1, T0), "the next server, at once");
    assert_eq!(done(p.on_answer(page(0, 2), ms(4))), page(0, 2));
}

/// Answers every send `UnknownJournal`, 1 ms after it leaves, until the read ends: its answer and
/// the time then.
fn unknown_until_done(p: &mut ReadPolicy, mut step: ReadStep, mut elapsed: Duration) -> (ReadAnswer, Duration) {
    loop {
        match step {
            ReadStep::Send { after, .. } => {
                elapsed += after + ms(1);
                step = p.on_answer(ReadAnswer::UnknownJournal, elapsed);
            }
            ReadStep::Done(answer) => return (answer, elapsed),
        }
    }
}

/// A node outside a journal's voters answers `UnknownJournal`; once a server that hosts it has
/// answered (here `Unserved`), the read cannot end `UnknownJournal`, whichever answer came last
/// (a follower reading the registry of a cell with more nodes than registry voters stopped on
/// it).
#[test]
fn a_read_a_hosting_server_answered_never_ends_unknown_journal() {
    let mut p = policy();
    p.start();
    let step = p.on_answer(ReadAnswer::Unserved { applied_to: Some(Seq(3)) }, ms(2));
    assert!(matches!(step, ReadStep::Send { .. }));
    let step = p.on_answer(ReadAnswer::UnknownJournal, ms(4));
    let (answer, _) = unknown_until_done(&mut p, step, ms(4));
    assert_eq!(answer, ReadAnswer::Unserved { applied_to: Some(Seq(3)) });
    // One server said `UnknownJournal`, and the next, asked at once, was cut off waiting: no
    // server's last word was `UnknownJournal`.
    let mut p = policy();
    p.start();
    assert!(matches!(p.on_answer(ReadAnswer::UnknownJournal, ms(1)), ReadStep::Send { .. }));
    assert_eq!(done(p.on_cut_off()), ReadAnswer::Unserved { applied_to: None });
}

#[test]
fn a_journal_no_server_hosts_is_unknown_once_the_placement_wait_is_over() {
    let config = ClientConfig { placement_wait: ms(300), backoff_max: ms(40), ..ClientConfig::default() };
    let mut p = policy_with(config, deadline(), Some(NodeId(1)));
    let mut step = p.start();
    let mut elapsed = T0;
    let mut rounds = 0;
    let answer = loop {
        match step {
            ReadStep::Send { after, .. } => {
                if !after.is_zero() {
                    rounds += 1;
                    assert!(elapsed + after <= ms(300), "no round starts past the placement wait");
                }
                elapsed += after + ms(1);
                step = p.on_answer(ReadAnswer::UnknownJournal, elapsed);
            }
            ReadStep::Done(answer) => break answer,
        }
    };
    assert_eq!(answer, ReadAnswer::UnknownJournal);
    assert!(rounds >= 5, "asked again round after round: {rounds}");
    assert!(p.sent() > config.read_attempts_max, "UnknownJournal answers do not count against read_attempts_max");
    assert!(elapsed + ms(41) > ms(300), "it gave up only near the placement wait: {elapsed:?}");
}

#[test]
fn a_journal_no_server_hosts_is_unknown_at_the_reads_own_deadline() {
    let config = ClientConfig { placement_wait: ms(5000), ..ClientConfig::default() };
    let mut p = policy_with(config, ReadDeadline { wait_until: T0, give_up_at: ms(100) }, None);
    let step = p.start();
    let (answer, elapsed) = unknown_until_done(&mut p, step, T0);
    assert_eq!(answer, ReadAnswer::UnknownJournal);
    assert!(elapsed < ms(100), "{elapsed:?}");
}

#[test]
fn a_service_that_routes_by_itself_is_asked_by_attempt_and_its_unknown_journal_stands() {
    let mut p = ReadPolicy::new(
        params(0, Consistency::Reached(Seq(3))),
        deadline(),
        vec![],
        None,
        ClientConfig::default(),
        Rng::new(1),
    )
    .expect("valid");
    assert_eq!(send(p.start()).0, None);
    let (server, attempt, ..) = send(p.on_answer(ReadAnswer::Unserved { applied_to: None }, ms(1)));
    assert_eq!((server, attempt), (None, 1));
    assert_eq!(done(p.on_answer(ReadAnswer::UnknownJournal, ms(40))), ReadAnswer::UnknownJournal);
}

#[test]
fn the_deadline_of_a_read_keeps_the_wait_for_the_journal_apart_from_the_wait_to_be_served() {
    let (reach_min, serve_max) = (ms(100), ms(2000));
    let reached = Consistency::Reached(Seq(5));
    // A position: the wait, never less than one trip.
    assert_eq!(
        ReadDeadline::new(ms(200), reached, reach_min, serve_max),
        ReadDeadline { wait_until: ms(200), give_up_at: ms(200) }
    );
    assert_eq!(
        ReadDeadline::new(T0, reached, reach_min, serve_max),
        ReadDeadline { wait_until: T0, give_up_at: ms(100) }
    );
    // Linearizable: the wait, then the time to be served.
    assert_eq!(
        ReadDeadline::new(ms(200), Consistency::Linearizable, reach_min, serve_max),
        ReadDeadline { wait_until: ms(200), give_up_at: ms(2200) }
    );
    // A second read within the same wait gets what is left of it.
    let d = ReadDeadline::new(ms(200), Consistency::Linearizable, reach_min, serve_max);
    assert_eq!(d.after(ms(150)), ReadDeadline { wait_until: ms(50), give_up_at: ms(2050) });
    assert_eq!(d.after(ms(5000)), ReadDeadline { wait_until: T0, give_up_at: T0 });
}

#[test]
fn ranked_servers_are_asked_in_their_order_and_the_read_names_who_served_it() {
    // Two replicas best first, then the voters: the hint (the last server to answer) is not used.
    let ranked = vec![NodeId(21), NodeId(22), NodeId(1), NodeId(2)];
    let mut p = ReadPolicy::over(
        params(0, Consistency::Linearizable),
        deadline(),
        paros_client::ReadServers::Ranked(ranked),
        Some(NodeId(2)),
        ClientConfig::default(),
        Rng::new(7),
    )
    .expect("valid");
    assert_eq!(send(p.start()).0, Some(NodeId(21)), "the best replica first, not the hint");
    assert_eq!(
        send(p.on_answer(ReadAnswer::Unserved { applied_to: None }, ms(1))).0,
        Some(NodeId(22)),
        "then the next replica"
    );
    assert_eq!(
        send(p.on_answer(ReadAnswer::Unserved { applied_to: None }, ms(2))).0,
        Some(NodeId(1)),
        "then the voters"
    );
    assert_eq!(p.served_by(), None, "nothing served it yet");
    match p.on_answer(page(0, 2), ms(3)) {
        ReadStep::Done(answer) => assert_eq!(answer, page(0, 2)),
        other => panic!("a page serves the read: {other:?}"),
    }
    assert_eq!(p.served_by(), Some(NodeId(1)), "the voter that answered");
}

#[test]
fn an_unserved_end_carries_the_furthest_applied_position_any_server_named() {
    let ranked = vec![NodeId(21), NodeId(22), NodeId(1)];
    let mut p = ReadPolicy::over(
        params(0, Consistency::Reached(Seq(9))),
        deadline(),
        paros_client::ReadServers::Ranked(ranked),
        None,
        ClientConfig::default(),
        Rng::new(7),
    )
    .expect("valid");
    let unserved = |applied_to: Option<u64>| ReadAnswer::Unserved { applied_to: applied_to.map(Seq) };
    send(p.start());
    send(p.on_answer(unserved(Some(6)), ms(1)));
    send(p.on_answer(unserved(Some(4)), ms(2)));
    send(p.on_answer(unserved(None), ms(3)));
    assert_eq!(done(p.on_cut_off()), unserved(Some(6)), "the replica that came closest, not the last answer");
}

#[test]
fn replicas_first_ranks_the_replicas_then_the_voters_from_the_one_in_turn() {
    use paros_client::ReadServers;
    let ranked = ReadServers::replicas_first(vec![NodeId(21), NodeId(22)], &servers(), 4);
    assert_eq!(
        ranked,
        ReadServers::Ranked(vec![NodeId(21), NodeId(22), NodeId(2), NodeId(3), NodeId(1)]),
        "the replicas as ranked, then the voters from turn 4 mod 3"
    );
    assert_eq!(ReadServers::replicas_first(Vec::new(), &[], 9), ReadServers::Ranked(Vec::new()), "nothing to rank");
}

#[test]
fn a_cursor_read_picks_ranked_servers_from_the_best_and_rotated_ones_from_its_start() {
    use paros_client::ReadServers;
    let ranked = ReadServers::Ranked(vec![NodeId(21), NodeId(1), NodeId(2)]);
    let picks: Vec<_> = (0..4).map(|attempt| ranked.pick(5, attempt)).collect();
    assert_eq!(picks, [Some(NodeId(21)), Some(NodeId(1)), Some(NodeId(2)), Some(NodeId(21))], "start unused");
    let rotate = ReadServers::Rotate(servers());
    let picks: Vec<_> = (0..3).map(|attempt| rotate.pick(1, attempt)).collect();
    assert_eq!(picks, [Some(NodeId(2)), Some(NodeId(3)), Some(NodeId(1))], "from the reader's start");
    assert_eq!(ReadServers::Rotate(Vec::new()).pick(0, 0), None, "the service routes by itself");
}
