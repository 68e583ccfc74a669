//! The linearizability checker accepts legal journal histories and rejects illegal ones.

use bytes::Bytes;
use paros_core::journal::{JournalView, Outcome};
use paros_core::{CallAnswer, Consistency, JournalKey, LeaderUuid, NodeId, ReadAnswer, Seq};
use paros_sim::check::linearizability::{Verdict, check};
use paros_sim::check::{HistoryOp, OpInput, OpOutput, PageBounds};

const BOUNDS: PageBounds = PageBounds { records_max: 16, bytes_max: 4096 };
const BUDGET: u64 = 100_000;

fn u(n: u128) -> LeaderUuid {
    LeaderUuid::new(n).expect("non-zero")
}

fn rec(s: &str) -> Bytes {
    Bytes::from(s.to_owned())
}

fn view(leader: u128, first: u64, next: u64) -> JournalView {
    JournalView { leader: LeaderUuid::new(leader), first_seq: Seq(first), next_seq: Seq(next) }
}

/// A history under construction; `call`/`ret` are event indices (simulated time is 1000× them,
/// unless a test sets it).
#[derive(Default)]
struct H(Vec<HistoryOp>);

impl H {
    fn op(&mut self, client: &str, input: OpInput, output: Option<OpOutput>, call: u64, ret: Option<u64>) -> &mut Self {
        self.0.push(HistoryOp {
            journal: JournalKey::default(),
            client: client.to_owned(),
            input,
            output,
            call_ns: call * 1000,
            return_ns: ret.map(|r| r * 1000),
            call_index: call,
            return_index: ret,
            to: NodeId(1),
            server: ret.map(|_| NodeId(1)),
            probe: None,
            report: None,
        });
        self
    }


    fn claim(&mut self, new: u128, old: Option<u128>, out: Outcome, call: u64, ret: u64) -> &mut Self {
        let input = OpInput::SetLeader { new: u(new), old: old.map(u) };
        self.op("w", input, Some(OpOutput::Call(CallAnswer::Verdict(out))), call, Some(ret))
    }

    fn write(&mut self, leader: u128, seq: u64, records: &[&str], out: Option<CallAnswer>, call: u64, ret: Option<u64>) -> &mut Self {
        let input = OpInput::Write { leader: u(leader), seq, records: records.iter().map(|r| rec(r)).collect() };
        self.op("w", input, out.map(OpOutput::Call), call, ret)
    }

    fn read(&mut self, from: u64, out: ReadAnswer, call: u64, ret: u64) -> &mut Self {
        let input = OpInput::Read { from, limit: 0, max_bytes: 0, wait_ticks: 0, consistency: Consistency::Linearizable };
        self.op("r", input, Some(OpOutput::Read(out)), call, Some(ret))
    }

    fn stale_page(&mut self, from: u64, at_least: u64, records: &[&str], v: JournalView, call: u64, ret: u64) -> &mut Self {
        let input = OpInput::Read { from, limit: 0, max_bytes: 0, wait_ticks: 0, consistency: Consistency::AtLeast(Seq(at_least)) };
        let page = ReadAnswer::Page { from: Seq(from), records: records.iter().map(|r| rec(r)).collect(), view: v };
        self.op("p", input, Some(OpOutput::Read(page)), call, Some(ret))
    }

    fn page(&mut self, from: u64, records: &[&str], v: JournalView, call: u64, ret: u64) -> &mut Self {
        let page = ReadAnswer::Page { from: Seq(from), records: records.iter().map(|r| rec(r)).collect(), view: v };
        self.read(from, page, call, ret)
    }

    fn verdict(&self) -> Verdict {
        check(&self.0, BOUNDS, BUDGET)
    }
}

fn accepted(seq: u64, count: u64) -> Option<CallAnswer> {
    Some(CallAnswer::Verdict(Outcome::Accepted { seq: Seq(seq), count }))
}

/// Claim, write "a", read it back, one ambiguous write of "b" retried as a Duplicate, a
/// truncation, a read below it refused, and a read concurrent with the truncation.
fn legal() -> H {
    let mut h = H::default();
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2)
        .write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4))
        .page(0, &["a@0"], view(1, 0, 1), 5, 6)
        .write(1, 1, &["b@1"], None, 7, None)
        .page(1, &[], view(1, 0, 1), 8, 9)
        .write(1, 1, &["b@1"], Some(CallAnswer::Verdict(Outcome::Duplicate { seq: Seq(1), count: 1 })), 10, Some(11))
        .page(0, &["a@0", "b@1"], view(1, 0, 2), 12, 15)
        .op(
            "w",
            OpInput::Truncate { leader: u(1), up_to: 1 },
            Some(OpOutput::Call(CallAnswer::Verdict(Outcome::Trimmed(view(1, 1, 2))))),
            13,
            Some(14),
        )
        .read(0, ReadAnswer::Truncated(view(1, 1, 2)), 16, 17);
    h
}

#[test]
fn a_legal_history_is_linearizable() {
    assert!(matches!(legal().verdict(), Verdict::Linearizable { ops: 9 }), "{:?}", legal().verdict());
}

#[test]
fn an_ambiguous_write_may_never_take_effect() {
    let mut h = H::default();
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2)
        .write(1, 0, &["a@0"], Some(CallAnswer::NoVerdict), 3, Some(4))
        .page(0, &[], view(1, 0, 0), 5, 6);
    assert!(matches!(h.verdict(), Verdict::Linearizable { .. }), "{:?}", h.verdict());
}

#[test]
fn an_ambiguous_write_may_take_effect_long_after_its_caller_gave_up() {
    let mut h = H::default();
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2)
        .write(1, 0, &["a@0"], None, 3, None)
        .page(0, &[], view(1, 0, 0), 5, 6)
        .page(0, &["a@0"], view(1, 0, 1), 7, 8);
    assert!(matches!(h.verdict(), Verdict::Linearizable { .. }), "{:?}", h.verdict());
}

#[test]
fn a_redirected_write_never_takes_effect() {
    let mut h = H::default();
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2)
        .write(1, 0, &["a@0"], Some(CallAnswer::Redirect { leader: None }), 3, Some(4))
        .page(0, &["a@0"], view(1, 0, 1), 5, 6);
    assert!(matches!(h.verdict(), Verdict::Violation { .. }), "{:?}", h.verdict());
}

#[test]
fn a_read_of_a_record_never_written_is_rejected() {
    let mut h = legal();
    h.page(1, &["forged@1"], view(1, 1, 2), 18, 19);
    assert!(matches!(h.verdict(), Verdict::Violation { .. }), "{:?}", h.verdict());
}

#[test]
fn a_lost_acknowledged_write_is_rejected() {
    let mut h = H::default();
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2)
        .write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4))
        .page(0, &[], view(1, 0, 0), 5, 6);
    assert!(matches!(h.verdict(), Verdict::Violation { .. }), "{:?}", h.verdict());
}

#[test]
fn a_stale_read_after_an_acknowledged_write_is_rejected() {
    let mut h = H::default();
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2)
        .write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4))
        .page(0, &["a@0"], view(1, 0, 1), 5, 6)
        .write(1, 1, &["b@1"], accepted(1, 1), 7, Some(8))
        .page(1, &[], view(1, 0, 1), 9, 10);
    assert!(matches!(h.verdict(), Verdict::Violation { .. }), "{:?}", h.verdict());
}

#[test]
fn two_writers_cannot_both_win_the_same_claim() {
    let mut h = H::default();
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2).claim(2, None, Outcome::Won(view(2, 0, 0)), 3, 4);
    assert!(matches!(h.verdict(), Verdict::Violation { .. }), "{:?}", h.verdict());
}

#[test]
fn a_read_below_the_trim_point_must_be_refused() {
    let mut h = legal();
    h.page(0, &["a@0"], view(1, 1, 2), 18, 19);
    assert!(matches!(h.verdict(), Verdict::Violation { .. }), "{:?}", h.verdict());
}

#[test]
fn a_refused_retry_where_the_fold_says_duplicate_is_rejected() {
    let mut h = H::default();
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2)
        .write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4))
        .write(1, 0, &["a@0"], Some(CallAnswer::Verdict(Outcome::Refused(view(1, 0, 1)))), 5, Some(6));
    assert!(matches!(h.verdict(), Verdict::Violation { .. }), "{:?}", h.verdict());
}

#[test]
fn a_duplicate_retry_answered_duplicate_is_linearizable() {
    let mut h = H::default();
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2)
        .write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4))
        .write(1, 0, &["a@0"], Some(CallAnswer::Verdict(Outcome::Duplicate { seq: Seq(0), count: 1 })), 5, Some(6));
    assert!(matches!(h.verdict(), Verdict::Linearizable { ops: 3 }), "{:?}", h.verdict());
}

#[test]
fn a_retry_with_changed_bytes_answered_duplicate_is_rejected() {
    let mut h = H::default();
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2)
        .write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4))
        .write(1, 0, &["~a@0"], Some(CallAnswer::Verdict(Outcome::Duplicate { seq: Seq(0), count: 1 })), 5, Some(6));
    assert!(matches!(h.verdict(), Verdict::Violation { .. }), "{:?}", h.verdict());
}

#[test]
fn an_accepted_batch_resent_at_another_position_is_refused() {
    let mut h = H::default();
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2)
        .write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4))
        .write(1, 1, &["b@1"], accepted(1, 1), 5, Some(6))
        .write(1, 1, &["a@0"], Some(CallAnswer::Verdict(Outcome::Refused(view(1, 0, 2)))), 7, Some(8));
    assert!(matches!(h.verdict(), Verdict::Linearizable { ops: 4 }), "{:?}", h.verdict());
    let mut accepted_there = H::default();
    accepted_there
        .claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2)
        .write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4))
        .write(1, 1, &["b@1"], accepted(1, 1), 5, Some(6))
        .write(1, 0, &["b@1"], accepted(0, 1), 7, Some(8));
    assert!(matches!(accepted_there.verdict(), Verdict::Violation { .. }), "{:?}", accepted_there.verdict());
}

#[test]
fn a_call_at_the_nanosecond_of_a_return_is_ordered_by_its_event_index() {
    // The write returns at 5 µs; the read is sent at that same nanosecond.
    let mut after = H::default();
    after
        .claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2)
        .write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4))
        .page(0, &[], view(1, 0, 0), 5, 6);
    (after.0[1].return_ns, after.0[2].call_ns) = (Some(5000), 5000);
    assert!(matches!(after.verdict(), Verdict::Violation { .. }), "a read sent after the return sees the write");
    let mut before = H::default();
    before
        .claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2)
        .write(1, 0, &["a@0"], accepted(0, 1), 3, Some(5))
        .page(0, &[], view(1, 0, 0), 4, 6);
    (before.0[1].return_ns, before.0[2].call_ns) = (Some(5000), 5000);
    assert!(matches!(before.verdict(), Verdict::Linearizable { .. }), "a read sent before the return may miss it: {:?}", before.verdict());
}

#[test]
fn a_stale_read_may_show_an_old_state() {
    let mut h = H::default();
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2)
        .write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4))
        .write(1, 1, &["b@1"], accepted(1, 1), 5, Some(6))
        .stale_page(0, 1, &["a@0"], view(1, 0, 1), 7, 8);
    assert!(matches!(h.verdict(), Verdict::Linearizable { .. }), "{:?}", h.verdict());
}

#[test]
fn a_stale_read_of_a_record_never_acknowledged_there_is_rejected() {
    let mut h = H::default();
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2)
        .write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4))
        .stale_page(0, 0, &["forged@0"], view(1, 0, 1), 5, 6);
    assert!(matches!(h.verdict(), Verdict::Violation { .. }), "{:?}", h.verdict());
}

#[test]
fn a_stale_read_below_its_position_is_rejected() {
    let mut h = H::default();
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2)
        .write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4))
        .stale_page(0, 1, &[], view(1, 0, 0), 5, 6);
    assert!(matches!(h.verdict(), Verdict::Violation { .. }), "at_least(1) is answered from a state holding seq0: {:?}", h.verdict());
}

#[test]
fn a_search_that_runs_out_of_steps_says_so() {
    let h = legal();
    assert!(matches!(check(&h.0, BOUNDS, 3), Verdict::BudgetExhausted { .. }));
}
