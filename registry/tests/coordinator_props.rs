//! The coordinator under random requests, batch sizes, checkpoint policies and split or
//! repeated acknowledgements: every request is answered once, with the fold's verdict, and a
//! reader folding the truncated journal from its floor reaches the coordinator's directory.

mod common;
mod harness;

use std::collections::BTreeMap;

use common::strategy::command;
use common::*;
use harness::Log;
use paros_client::{CheckpointerConfig, Folder, FolderConfig, Seq};
use paros_registry::{Answer, Coordinator, CoordinatorConfig, Directory, Op, Request, RequestId, Submitted};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Plan {
    requests: Vec<(u128, paros_registry::Command)>,
    batch: usize,
    factor: u64,
    interval_records: u64,
    chunk: usize,
    /// How acknowledgements are cut: each batch is acknowledged in pieces of this size, and
    /// each piece twice when `repeat` (a re-sent batch answered `Duplicate`).
    ack_piece: usize,
    repeat: bool,
    per_step: usize,
}

fn plan() -> impl Strategy<Value = Plan> {
    (
        prop::collection::vec((0u128..60, command()), 1..120),
        1usize..8,
        1u64..5,
        1u64..40,
        8usize..200,
        1usize..4,
        any::<bool>(),
        1usize..6,
    )
        .prop_map(|(mut requests, batch, factor, interval_records, chunk, ack_piece, repeat, per_step)| {
            requests.insert(0, (10_000, init_cell(vec![member(1, "a"), member(2, "b"), member(3, "c")])));
            Plan { requests, batch, factor, interval_records, chunk, ack_piece, repeat, per_step }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_request_is_answered_once_and_a_fresh_reader_agrees(plan in plan()) {
        let config = CoordinatorConfig {
            pending_max: 10_000,
            batch_records_max: plan.batch,
            checkpoint: CheckpointerConfig {
                factor: plan.factor,
                interval_records: plan.interval_records,
                chunk_bytes: plan.chunk,
            },
            ..CoordinatorConfig::default()
        };
        let folder = Folder::new(Directory::new(), Seq(0), FolderConfig::default());
        let mut c = Coordinator::new(folder, config).expect("valid");
        let mut log = Log::default();
        let mut waiting: BTreeMap<RequestId, usize> = BTreeMap::new();
        let mut answers: BTreeMap<RequestId, Answer> = BTreeMap::new();
        for (step, chunk) in plan.requests.chunks(plan.per_step).enumerate() {
            for (id, command) in chunk {
                let id = RequestId(*id);
                match c.submit(Request { id, op: Op::Command(command.clone()) }) {
                    Submitted::Waiting => *waiting.entry(id).or_insert(0) += 1,
                    Submitted::Answered(a) => {
                        prop_assert!(matches!(a, Answer::Verdict(_)), "answered from the fold: {:?}", a);
                        if let Some(first) = answers.get(&id) {
                            prop_assert_eq!(first, &a, "a repeated id gets the same answer");
                        }
                    }
                }
            }
            loop {
                if let Some(batch) = c.next_append() {
                    let (seq, count) = log.append(batch);
                    let mut at = seq.0;
                    while at < seq.0 + count {
                        let n = (plan.ack_piece as u64).min(seq.0 + count - at);
                        let times = if plan.repeat { 2 } else { 1 };
                        for _ in 0..times {
                            for r in c.acknowledged(Seq(at), n).expect("matching acknowledgement") {
                                prop_assert!(waiting.remove(&r.id).is_some(), "answered once: {:?}", r.id);
                                answers.insert(r.id, r.answer);
                            }
                        }
                        at += n;
                    }
                    continue;
                }
                if c.due_checkpoint(step as u64) {
                    continue;
                }
                if let Some(t) = c.next_truncate() {
                    log.truncate(t.up_to);
                    c.truncate_settled();
                    continue;
                }
                break;
            }
        }
        prop_assert!(waiting.is_empty(), "nobody is left waiting: {:?}", waiting);
        prop_assert_eq!(c.pending_len(), 0, "nothing pending");
        for (id, answer) in &answers {
            if let Some(v) = c.directory().answer(*id) {
                prop_assert_eq!(answer, &Answer::Verdict(v), "the answer is the fold's verdict");
            }
        }
        prop_assert_eq!(c.stats().runs_diverged, 0, "no run diverged");
        let reader = log.fold_fresh();
        prop_assert!(reader.is_whole(), "the reader is whole");
        prop_assert_eq!(reader.state(), c.directory(), "a reader from the floor agrees");
    }
}
