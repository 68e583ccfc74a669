//! The registry truncated many times: a coordinator driven over an in-memory journal through
//! many requests, checkpoints and truncations; a reader folding from the floor reaches the
//! coordinator's directory, and the retained journal stays within the checkpoint policy.

mod common;
mod harness;

use common::*;
use harness::{Log, drive};
use paros_client::{CheckpointerConfig, Folder, FolderConfig, Seq};
use paros_core::ids::{JournalId, TenantId};
use paros_core::journal::WriterMode;
use paros_registry::{
    Answer, CellId, Command, Coordinator, CoordinatorConfig, Directory, Limits, Op, Quotas, Request, RequestId, Role,
    Submitted,
};

const CHUNK: usize = 512;
const FACTOR: u64 = 4;

fn config() -> CoordinatorConfig {
    CoordinatorConfig {
        pending_max: 10_000,
        checkpoint: CheckpointerConfig { factor: FACTOR, interval_records: 1_000_000, chunk_bytes: CHUNK },
        ..CoordinatorConfig::default()
    }
}

fn fresh() -> Coordinator {
    let folder = Folder::new(Directory::new(), Seq(0), FolderConfig::default());
    Coordinator::new(folder, config()).expect("a valid configuration")
}

/// The request stream: form the cell, register nodes, then tenants with journals created and
/// deleted.
fn requests() -> Vec<Request> {
    // A small idempotency window, so the state's size follows the directory, not the log.
    let init = Command::InitCell {
        cell: CellId(7),
        members: vec![member(1, "a"), member(2, "b"), member(3, "c")],
        registry: JournalId(1),
        limits: Limits { verdicts_max: 16, ..Limits::default() },
    };
    let mut ops = vec![Op::Command(init)];
    for n in 4..10 {
        ops.push(Op::Command(register(n, Role::Node, ["a", "b", "c"][n as usize % 3])));
    }
    for t in 0..20u64 {
        let tenant = 1_000 + t;
        ops.push(Op::Command(sign_up(tenant, &format!("tenant-{t}"))));
        for j in 0..4u64 {
            ops.push(Op::CreateJournal {
                tenant: TenantId(tenant),
                journal: JournalId(j + 1),
                name: journal_name(&format!("j{j}")),
                mode: WriterMode::Single,
                tier: None,
            });
        }
        ops.push(Op::Command(delete(tenant, "j1")));
        // Churn that rewrites the directory without growing it, as quota changes and machine
        // re-registrations do: the log outgrows the state and checkpoints become due.
        for q in 0..150u32 {
            let quotas = Quotas { journals_max: 10 + q, ..Quotas::default() };
            ops.push(Op::Command(Command::SetQuotas { tenant: TenantId(tenant), quotas }));
        }
        ops.push(Op::Command(register(4 + t % 6, Role::Node, ["a", "b", "c"][t as usize % 3])));
    }
    (1u128..).zip(ops).map(|(id, op)| Request { id: RequestId(id), op }).collect()
}

/// What a retained journal may hold: the last run, plus less than `factor ×` the state of
/// application records since it, plus the one record that crossed the threshold.
fn retained_bound(state_len: usize, last_record: usize) -> usize {
    let chunks = state_len.div_ceil(CHUNK);
    let run = 18 + 22 + chunks * 14 + state_len;
    FACTOR as usize * state_len + run + last_record
}

#[test]
fn a_reader_folding_from_the_floor_reaches_the_coordinators_directory() {
    let mut log = Log::default();
    let mut c = fresh();
    let mut answered = 0;
    for (now, request) in (0u64..).zip(requests()) {
        assert_eq!(c.submit(request), Submitted::Waiting, "a new request waits");
        let replies = drive(&mut c, &mut log, now);
        for r in &replies {
            assert!(
                matches!(&r.answer, Answer::Verdict(v) if v.is_accepted()),
                "every request of the stream is accepted: {r:?}"
            );
        }
        answered += replies.len();
        assert_eq!(c.checkpoint_in_flight(), None, "the loop settles every run");
        let state_len = c.state_len();
        let last = log.records.last().map_or(0, |r| r.len());
        assert!(
            log.retained_bytes() <= retained_bound(state_len, last),
            "retained {} bytes > bound {} (state {state_len})",
            log.retained_bytes(),
            retained_bound(state_len, last)
        );
    }
    assert_eq!(answered, requests().len(), "every request was answered once");
    let stats = c.stats();
    assert!(stats.truncations >= 5, "the registry was truncated many times: {stats:?}");
    assert_eq!(stats.runs_diverged, 0, "no run differs from the state it was cut from");
    assert!(log.floor > 0, "the floor moved");
    let reader = log.fold_fresh();
    assert!(reader.is_whole(), "the reader restored from the run at the floor");
    assert_eq!(reader.state(), c.directory(), "the reader's directory is the coordinator's");
    assert_eq!(reader.next(), c.folder().next(), "at the same position");
}

#[test]
fn pipelined_requests_are_batched_and_checkpointed_between_batches() {
    let mut log = Log::default();
    let mut c = fresh();
    let all = requests();
    // Placement reads the folded directory: form the cell and register nodes first.
    for r in &all[..7] {
        assert_eq!(c.submit(r.clone()), Submitted::Waiting, "queued");
    }
    let mut answered = drive(&mut c, &mut log, 0).len();
    for (now, chunk) in (1u64..).zip(all[7..].chunks(37)) {
        for r in chunk {
            assert_eq!(c.submit(r.clone()), Submitted::Waiting, "queued");
        }
        answered += drive(&mut c, &mut log, now).len();
    }
    assert_eq!(answered, all.len(), "every request was answered");
    assert!(c.stats().truncations >= 3, "checkpoints happened: {:?}", c.stats());
    assert_eq!(log.fold_fresh().state(), c.directory(), "a fresh reader agrees");
    // A successor built from the floor answers every id still in the window from the fold.
    let reader = log.fold_fresh();
    let mut successor = Coordinator::new(reader, config()).expect("whole");
    let last = all.last().expect("requests").clone();
    assert!(
        matches!(successor.submit(last), Submitted::Answered(Answer::Verdict(_))),
        "a retried request is answered from the fold by the next coordinator"
    );
}
