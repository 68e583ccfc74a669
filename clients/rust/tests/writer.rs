//! The Writer against the fake service: claims, pipelines, settles, and stops when superseded.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use paros_client::fake::{FakeService, Fault};
use paros_client::{Client, ClientConfig, Decided, Writer, WriterConfig, WriterCore, WriterError, Written};
use paros_core::journal::{JournalView, Outcome};
use paros_core::{Call, LeaderUuid, NodeId, Seq};

fn setup(servers: Vec<NodeId>) -> (Arc<FakeService>, Writer<Arc<FakeService>>) {
    let fake = Arc::new(FakeService::new("j", servers));
    let client = Client::with_seed(Arc::clone(&fake), ClientConfig::default(), 1).expect("valid");
    let writer = Writer::with_seed(client, "j".to_owned(), WriterConfig::default(), 99).expect("valid");
    (fake, writer)
}

fn batch(tag: &str, n: usize) -> Vec<Bytes> {
    (0..n).map(|i| Bytes::from(format!("{tag}{i}"))).collect()
}

fn other() -> LeaderUuid {
    LeaderUuid::new(0xdead).expect("non-zero")
}

#[tokio::test(start_paused = true)]
async fn claim_learns_the_tail_and_writes_land_at_it() {
    let (fake, mut writer) = setup(vec![]);
    fake.claim_as(other());
    fake.write_as(batch("old", 3));
    let view = writer.claim().await.expect("claims");
    assert_eq!(view.next_seq, Seq(3));
    assert_eq!(view.leader, writer.core().uuid());
    assert_eq!(writer.write(batch("a", 2)).await, Ok(Written { seq: Seq(3), count: 2 }));
    assert_eq!(writer.write(batch("b", 1)).await, Ok(Written { seq: Seq(5), count: 1 }));
    assert_eq!(fake.view().next_seq, Seq(6));
}

#[tokio::test(start_paused = true)]
async fn a_writer_that_has_not_claimed_refuses_to_write() {
    let (_fake, mut writer) = setup(vec![]);
    assert_eq!(writer.write(batch("a", 1)).await, Err(WriterError::NotClaimed));
}

#[tokio::test(start_paused = true)]
async fn pipelined_batches_go_at_consecutive_positions_before_acknowledgement() {
    let (fake, mut writer) = setup(vec![]);
    writer.claim().await.expect("claims");
    fake.set_call_delay(Duration::from_millis(10));
    let seqs: Vec<Seq> = (0..4).map(|k| writer.submit(batch("p", k + 1)).expect("room")).collect();
    assert_eq!(seqs, vec![Seq(0), Seq(1), Seq(3), Seq(6)]);
    let mut reports = vec![];
    while let Some(report) = writer.next_report().await {
        reports.push(report);
    }
    let written: Vec<_> = reports.into_iter().map(|(_, r)| r.expect("acknowledged")).collect();
    assert_eq!(written.iter().map(|w| (w.seq.0, w.count)).collect::<Vec<_>>(), vec![(0, 1), (1, 2), (3, 3), (6, 4)]);
    assert_eq!(fake.view().next_seq, Seq(10));
}

#[tokio::test(start_paused = true)]
async fn the_window_bounds_batches_in_flight() {
    let fake = Arc::new(FakeService::new("j", vec![]));
    let client = Client::with_seed(Arc::clone(&fake), ClientConfig::default(), 1).expect("valid");
    let config = WriterConfig { batches_in_flight_max: 2, ..WriterConfig::default() };
    let mut writer = Writer::with_seed(client, "j".to_owned(), config, 5).expect("valid");
    writer.claim().await.expect("claims");
    writer.submit(batch("a", 1)).expect("room");
    writer.submit(batch("b", 1)).expect("room");
    assert_eq!(writer.submit(batch("c", 1)), Err(WriterError::WindowFull));
}

#[tokio::test(start_paused = true)]
async fn a_writer_superseded_mid_pipeline_stops_and_reports_the_view() {
    let (fake, mut writer) = setup(vec![]);
    writer.claim().await.expect("claims");
    fake.set_call_delay(Duration::from_millis(10));
    // Batches 0 and 1 land; another writer claims just before batch 2 is applied.
    fake.script([Fault::Pass, Fault::Pass, Fault::ClaimedBefore(other())]);
    for k in 0..5 {
        writer.submit(batch(&format!("b{k}-"), 2)).expect("room");
    }
    let mut reports = vec![];
    while let Some(report) = writer.next_report().await {
        reports.push(report);
    }
    assert_eq!(reports.len(), 5, "every batch is reported, none dropped: {reports:?}");
    assert_eq!(reports[0].1, Ok(Written { seq: Seq(0), count: 2 }));
    assert_eq!(reports[1].1, Ok(Written { seq: Seq(2), count: 2 }));
    let superseding = fake.view();
    assert_eq!(superseding.leader, Some(other()));
    for (seq, report) in &reports[2..] {
        assert_eq!(report, &Err(WriterError::Superseded { view: superseding }), "batch at {seq:?}");
    }
    // For good: every later call reports the same.
    assert_eq!(writer.submit(batch("late", 1)), Err(WriterError::Superseded { view: superseding }));
    assert_eq!(writer.write(batch("late", 1)).await, Err(WriterError::Superseded { view: superseding }));
    assert_eq!(writer.truncate(Seq(1)).await, Err(WriterError::Superseded { view: superseding }));
    assert_eq!(writer.claim().await, Err(WriterError::Superseded { view: superseding }));
    assert_eq!(fake.view().next_seq, Seq(4), "nothing of the superseded batches landed");
}

#[tokio::test(start_paused = true)]
async fn a_lost_answer_is_settled_by_the_identical_resend_as_a_duplicate() {
    let (fake, mut writer) = setup(vec![]);
    writer.claim().await.expect("claims");
    fake.script([Fault::LoseAnswer]);
    assert_eq!(writer.write(batch("a", 3)).await, Ok(Written { seq: Seq(0), count: 3 }));
    assert_eq!(fake.view().next_seq, Seq(3), "written once");
    let writes: Vec<_> = fake.calls().into_iter().filter(|(c, _)| matches!(c, Call::Write { .. })).collect();
    assert_eq!(writes.len(), 2);
    assert_eq!(writes[0].0, writes[1].0, "the retry is the identical request");
    let ids = fake.call_ids();
    let (claim, first, resend) = (ids[0], ids[1], ids[2]);
    assert_eq!(first, resend, "under the call's one id");
    assert_ne!(claim, first, "each call draws its own id");
}

#[tokio::test(start_paused = true)]
async fn a_dropped_request_is_settled_by_the_resend_as_accepted() {
    let (fake, mut writer) = setup(vec![]);
    writer.claim().await.expect("claims");
    fake.script([Fault::DropRequest]);
    assert_eq!(writer.write(batch("a", 1)).await, Ok(Written { seq: Seq(0), count: 1 }));
    assert_eq!(fake.view().next_seq, Seq(1));
}

#[tokio::test(start_paused = true)]
async fn an_ambiguous_claim_that_won_is_learned_from_the_lost_view() {
    let (fake, mut writer) = setup(vec![]);
    fake.script([Fault::LoseAnswer]);
    let view = writer.claim().await.expect("the earlier attempt won");
    assert_eq!(view.leader, writer.core().uuid());
    assert_eq!(fake.view().leader, writer.core().uuid());
}

#[tokio::test(start_paused = true)]
async fn a_claim_that_loses_the_race_is_lost_and_may_be_retried() {
    let (fake, mut writer) = setup(vec![]);
    fake.script([Fault::ClaimedBefore(other())]);
    assert!(matches!(writer.claim().await, Err(WriterError::Lost { .. })));
    let view = writer.claim().await.expect("the second claim wins");
    assert_eq!(view.leader, writer.core().uuid());
}

#[tokio::test(start_paused = true)]
async fn truncate_is_fenced_and_refused_once_superseded() {
    let (fake, mut writer) = setup(vec![]);
    writer.claim().await.expect("claims");
    writer.write(batch("a", 4)).await.expect("written");
    let view = writer.truncate(Seq(2)).await.expect("trimmed");
    assert_eq!((view.first_seq, view.next_seq), (Seq(2), Seq(4)));
    fake.claim_as(other());
    let superseding = fake.view();
    assert_eq!(writer.truncate(Seq(3)).await, Err(WriterError::Superseded { view: superseding }));
    assert_eq!(fake.view().first_seq, Seq(2));
}

#[tokio::test(start_paused = true)]
async fn redirects_are_followed_to_the_leader_node() {
    let (fake, mut writer) = setup(vec![NodeId(1), NodeId(2), NodeId(3)]);
    fake.set_leader_node(Some(NodeId(3)));
    writer.claim().await.expect("claims through the redirect");
    assert_eq!(writer.write(batch("a", 1)).await, Ok(Written { seq: Seq(0), count: 1 }));
    let last = fake.calls().last().cloned().expect("calls");
    assert_eq!(last.1.server, Some(NodeId(3)), "the client sticks to the server that answered");
}

#[tokio::test(start_paused = true)]
async fn redirect_following_is_bounded() {
    let fake = Arc::new(FakeService::new("j", vec![NodeId(1), NodeId(2)]));
    let config = ClientConfig { redirects_max: 2, ..ClientConfig::default() };
    let client = Client::with_seed(Arc::clone(&fake), config, 1).expect("valid");
    fake.script([
        Fault::Redirect(Some(NodeId(2))),
        Fault::Redirect(Some(NodeId(1))),
        Fault::Redirect(Some(NodeId(2))),
        Fault::Redirect(Some(NodeId(1))),
    ]);
    let decided = client.call(&"j".to_owned(), Call::SetLeader { new: other(), old: None }).await;
    assert_eq!(decided, Ok(Decided::Unavailable));
    assert_eq!(fake.calls().len(), 3, "the first send and two redirects");
}

#[tokio::test(start_paused = true)]
async fn an_early_batch_is_resent_once_its_predecessor_lands() {
    let (fake, mut writer) = setup(vec![]);
    writer.claim().await.expect("claims");
    fake.set_call_delay(Duration::from_millis(10));
    // Batch 0's request is lost on the way; batch 1 arrives at a tail that is still at 0.
    fake.script([Fault::DropRequest, Fault::Pass]);
    writer.submit(batch("a", 2)).expect("room");
    writer.submit(batch("b", 2)).expect("room");
    let r0 = writer.next_report().await.expect("report");
    let r1 = writer.next_report().await.expect("report");
    assert_eq!(r0.1, Ok(Written { seq: Seq(0), count: 2 }));
    assert_eq!(r1.1, Ok(Written { seq: Seq(2), count: 2 }));
    assert_eq!(fake.records().len(), 4);
}

#[tokio::test(start_paused = true)]
async fn a_batch_that_fails_halts_the_writer_until_it_claims_again() {
    let fake = Arc::new(FakeService::new("j", vec![]));
    let config = ClientConfig { attempts_max: 2, ..ClientConfig::default() };
    let client = Client::with_seed(Arc::clone(&fake), config, 1).expect("valid");
    let mut writer = Writer::with_seed(client, "j".to_owned(), WriterConfig::default(), 3).expect("valid");
    writer.claim().await.expect("claims");
    fake.script([Fault::NotSent, Fault::NotSent]);
    let failed = writer.write(batch("a", 1)).await;
    assert_eq!(failed, Err(WriterError::Failed { seq: Seq(0), decided: Decided::Unavailable }));
    assert_eq!(writer.write(batch("b", 1)).await, Err(WriterError::Halted { at: Seq(0) }));
    writer.claim().await.expect("a new term");
    assert_eq!(writer.write(batch("c", 1)).await, Ok(Written { seq: Seq(0), count: 1 }));
}

#[test]
fn the_core_refuses_an_empty_batch_and_an_unclaimed_write() {
    let mut core = WriterCore::new(WriterConfig::default()).expect("valid");
    assert_eq!(core.begin_write(batch("a", 1)), Err(WriterError::NotClaimed));
    let uuid = LeaderUuid::new(1).expect("non-zero");
    let view = JournalView { leader: Some(uuid), first_seq: Seq(0), next_seq: Seq(7) };
    core.on_claimed(uuid, Ok(Decided::Verdict(Outcome::Won(view)))).expect("won");
    assert_eq!(core.begin_write(vec![]), Err(WriterError::EmptyBatch));
    assert!(matches!(core.begin_write(batch("a", 1)), Ok(Call::Write { seq: Seq(7), .. })));
}

/// A claim that could be settled as won without winning — under the leader in force's uuid, or
/// under this writer's own last one — is never sent.
#[test]
fn the_core_refuses_a_claim_under_a_uuid_in_use() {
    let mut core = WriterCore::new(WriterConfig::default()).expect("valid");
    let (theirs, ours, fresh) = (LeaderUuid::new(1).unwrap(), LeaderUuid::new(2).unwrap(), LeaderUuid::new(3).unwrap());
    let led = JournalView { leader: Some(theirs), first_seq: Seq(0), next_seq: Seq(4) };
    assert_eq!(core.claim_call(theirs, led), Err(WriterError::UuidInUse { uuid: theirs }));
    assert_eq!(core.claim_call(ours, led), Ok(Call::SetLeader { new: ours, old: Some(theirs) }));
    let won = JournalView { leader: Some(ours), ..led };
    core.on_claimed(ours, Ok(Decided::Verdict(Outcome::Won(won)))).expect("won");
    assert_eq!(core.claim_call(ours, won), Err(WriterError::UuidInUse { uuid: ours }), "a new term, a new uuid");
    assert_eq!(core.claim_call(fresh, won), Ok(Call::SetLeader { new: fresh, old: Some(ours) }));
}

#[test]
fn writer_config_validation_names_the_bad_bound() {
    use paros_client::WriterConfigError;
    let ok = WriterConfig::default();
    assert_eq!(ok.validate(), Ok(()));
    assert_eq!(WriterConfig { batches_in_flight_max: 0, ..ok }.validate(), Err(WriterConfigError::BatchesZero));
    assert_eq!(WriterConfig { bytes_in_flight_max: 0, ..ok }.validate(), Err(WriterConfigError::BytesZero));
    assert_eq!(WriterConfig { inspect_attempts_max: 0, ..ok }.validate(), Err(WriterConfigError::InspectZero));
}

#[tokio::test(start_paused = true)]
async fn an_ambiguous_write_is_a_duplicate_even_after_a_new_leader_claimed() {
    let (fake, mut writer) = setup(vec![]);
    writer.claim().await.expect("claims");
    // The write lands but its answer is lost; another writer claims before the resend. The log
    // still holds the identical write at its seq: Duplicate, acknowledged.
    fake.script([Fault::LoseAnswer, Fault::ClaimedBefore(other())]);
    assert_eq!(writer.write(batch("a", 3)).await, Ok(Written { seq: Seq(0), count: 3 }));
}

#[tokio::test(start_paused = true)]
async fn an_ambiguous_write_refused_by_a_blind_server_is_read_back_and_found_written() {
    let (fake, mut writer) = setup(vec![]);
    writer.claim().await.expect("claims");
    // The write lands but its answer is lost; the resend meets a server that cannot see it and
    // refuses with a tail past the write: only reading back can tell.
    fake.script([Fault::LoseAnswer, Fault::Blind]);
    let reads = fake.reads();
    assert_eq!(writer.write(batch("a", 3)).await, Ok(Written { seq: Seq(0), count: 3 }));
    assert_eq!(fake.reads(), reads + 1, "one read-back page");
    assert_eq!(fake.view().next_seq, Seq(3), "written once");
}

#[tokio::test(start_paused = true)]
async fn an_ambiguous_write_read_back_different_was_not_written_and_supersedes() {
    let (fake, mut writer) = setup(vec![]);
    writer.claim().await.expect("claims");
    // The request is lost; another writer claims and writes at the same position.
    fake.script([Fault::DropRequest, Fault::OvertakenBy(other())]);
    let result = writer.write(batch("a", 1)).await;
    let view = fake.view();
    assert_eq!(result, Err(WriterError::Superseded { view: JournalView { next_seq: Seq(1), ..view } }));
    assert_eq!(fake.records(), vec![Bytes::from_static(b"intruder")]);
}

#[tokio::test(start_paused = true)]
async fn an_ambiguous_write_below_a_truncation_is_reported_ambiguous() {
    let (fake, mut writer) = setup(vec![]);
    writer.claim().await.expect("claims");
    writer.write(batch("a", 2)).await.expect("written");
    let client = Client::with_seed(Arc::clone(&fake), ClientConfig::default(), 4).expect("valid");
    let uuid = writer.core().uuid();
    fake.script([Fault::LoseAnswer]);
    // The lost write lands at 2; before the resend the journal is trimmed past it.
    let call = Call::Write { leader: uuid, seq: Seq(2), records: batch("b", 1) };
    let c = client.clone();
    let pending = tokio::spawn(async move { c.call(&"j".to_owned(), call).await });
    tokio::task::yield_now().await;
    fake.truncate_to(Seq(3));
    assert_eq!(pending.await.expect("no panic"), Ok(Decided::Ambiguous));
}

#[test]
fn the_core_abandons_later_batches_when_superseded_and_reports_each_once_in_order() {
    let mut core = WriterCore::new(WriterConfig::default()).expect("valid");
    let uuid = LeaderUuid::new(1).expect("non-zero");
    let won = JournalView { leader: Some(uuid), first_seq: Seq(0), next_seq: Seq(0) };
    core.on_claimed(uuid, Ok(Decided::Verdict(Outcome::Won(won)))).expect("won");
    for _ in 0..4 {
        core.begin_write(batch("x", 1)).expect("room");
    }
    assert_eq!(core.bytes_in_flight(), 8);
    let theirs = JournalView { leader: Some(other()), first_seq: Seq(0), next_seq: Seq(1) };
    // Batch 1 is refused by the new leader while 0 and 2, 3 are still in flight.
    let completion = core.complete(Seq(1), Ok(Decided::Verdict(Outcome::Refused(theirs))));
    assert_eq!(completion.abandon, vec![Seq(1), Seq(2), Seq(3)]);
    assert_eq!(core.next_report(), None, "batch 0 is still in flight: reports come in order");
    let ours = JournalView { next_seq: Seq(1), ..theirs };
    core.complete(Seq(0), Ok(Decided::Verdict(Outcome::Accepted { seq: Seq(0), count: 1, view: ours })));
    let reports: Vec<_> = std::iter::from_fn(|| core.next_report()).collect();
    assert_eq!(reports[0], (Seq(0), Ok(Written { seq: Seq(0), count: 1 })));
    for (i, (seq, r)) in reports[1..].iter().enumerate() {
        assert_eq!((*seq, r), (Seq(i as u64 + 1), &Err(WriterError::Superseded { view: theirs })));
    }
    assert_eq!(core.bytes_in_flight(), 0);
    assert_eq!(core.begin_write(batch("y", 1)), Err(WriterError::Superseded { view: theirs }));
}

/// Two writers built by the same calls, each claim's first answer lost: each settles its claim
/// by reading the view back, and counts it won only under the uuid it drew itself. The second
/// supersedes the first; they never share the fence.
#[tokio::test(start_paused = true)]
async fn writers_built_alike_never_share_a_fence_when_a_claim_is_settled() {
    let fake = Arc::new(FakeService::new("j", vec![]));
    let build = || {
        let client = Client::new(Arc::clone(&fake), ClientConfig::default()).expect("valid");
        Writer::new(client, "j".to_owned(), WriterConfig::default()).expect("valid")
    };
    let (mut first, mut second) = (build(), build());
    fake.script([Fault::LoseAnswer]);
    first.claim().await.expect("the first claim settles as won");
    fake.script([Fault::LoseAnswer]);
    let view = second.claim().await.expect("the second claim settles as won");
    let (a, b) = (first.core().uuid().expect("claimed"), second.core().uuid().expect("claimed"));
    assert_ne!(a, b, "each writer draws its own fence");
    assert_eq!(fake.view().leader, Some(b));
    assert_eq!(first.write(batch("a", 1)).await, Err(WriterError::Superseded { view }));
    assert_eq!(second.write(batch("b", 1)).await, Ok(Written { seq: Seq(0), count: 1 }));
}

/// Even two writers seeded alike (a simulation's mistake) never claim the leader in force as
/// their own: a draw equal to it is drawn again.
#[tokio::test(start_paused = true)]
async fn writers_seeded_alike_never_share_a_fence_when_a_claim_is_settled() {
    let fake = Arc::new(FakeService::new("j", vec![]));
    let build = || {
        let client = Client::with_seed(Arc::clone(&fake), ClientConfig::default(), 1).expect("valid");
        Writer::with_seed(client, "j".to_owned(), WriterConfig::default(), 5).expect("valid")
    };
    let (mut first, mut second) = (build(), build());
    fake.script([Fault::LoseAnswer]);
    first.claim().await.expect("the first claim settles as won");
    fake.script([Fault::LoseAnswer]);
    let view = second.claim().await.expect("the second claim settles as won");
    assert_ne!(first.core().uuid(), second.core().uuid());
    assert_eq!(first.write(batch("a", 1)).await, Err(WriterError::Superseded { view }));
    assert_eq!(second.write(batch("b", 1)).await, Ok(Written { seq: Seq(0), count: 1 }));
}

/// A server outside the journal's voters (a cell with more nodes than the journal has voters)
/// says `UnknownJournal` to the claim's inspection: the next server is asked, and only all of
/// them saying so in a row makes the journal unknown.
#[tokio::test(start_paused = true)]
async fn a_claim_asks_the_next_server_when_one_does_not_host_the_journal() {
    use paros_client::fake::ReadFault;
    let servers = vec![NodeId(1), NodeId(2), NodeId(3), NodeId(4)];
    let (fake, mut writer) = setup(servers.clone());
    fake.script_reads([ReadFault::UnknownJournal]);
    writer.claim().await.expect("the next server hosts it");
    let (fake, mut writer) = setup(servers);
    fake.script_reads([ReadFault::UnknownJournal; 4]);
    assert_eq!(writer.claim().await.map(|_| ()), Err(WriterError::Undecided { decided: Decided::UnknownJournal }));
}
