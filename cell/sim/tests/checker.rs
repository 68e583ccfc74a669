//! The linearizability checker accepts legal journal histories and rejects illegal ones.

use bytes::Bytes;
use paros_core::journal::{JournalView, Outcome, WriterMode};
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

    fn write(
        &mut self,
        leader: u128,
        seq: u64,
        records: &[&str],
        out: Option<CallAnswer>,
        call: u64,
        ret: Option<u64>,
    ) -> &mut Self {
        let input = OpInput::Write { leader: Some(u(leader)), seq, records: records.iter().map(|r| rec(r)).collect() };
        self.op("w", input, out.map(OpOutput::Call), call, ret)
    }

    fn read(&mut self, from: u64, out: ReadAnswer, call: u64, ret: u64) -> &mut Self {
        let input =
            OpInput::Read { from, limit: 0, max_bytes: 0, wait_ticks: 0, consistency: Consistency::Linearizable };
        self.op("r", input, Some(OpOutput::Read(out)), call, Some(ret))
    }

    fn stale_page(
        &mut self,
        from: u64,
        at_least: u64,
        records: &[&str],
        v: JournalView,
        call: u64,
        ret: u64,
    ) -> &mut Self {
        let input = OpInput::Read {
            from,
            limit: 0,
            max_bytes: 0,
            wait_ticks: 0,
            consistency: Consistency::Reached(Seq(at_least)),
        };
        let page = ReadAnswer::Page { from: Seq(from), records: records.iter().map(|r| rec(r)).collect(), view: v };
        self.op("p", input, Some(OpOutput::Read(page)), call, Some(ret))
    }

    fn page(&mut self, from: u64, records: &[&str], v: JournalView, call: u64, ret: u64) -> &mut Self {
        let page = ReadAnswer::Page { from: Seq(from), records: records.iter().map(|r| rec(r)).collect(), view: v };
        self.read(from, page, call, ret)
    }

    fn verdict(&self) -> Verdict {
        check(&self.0, WriterMode::Single, BOUNDS, BUDGET)
    }
}

fn accepted(seq: u64, count: u64) -> Option<CallAnswer> {
    // Leader 1's write on a journal nothing was truncated from: the view just past it.
    Some(CallAnswer::Verdict(Outcome::Accepted { seq: Seq(seq), count, view: view(1, 0, seq + count) }))
}

/// An unfenced append of `count` records that landed at `seq` (multi-writer: no leader).
fn appended(seq: u64, count: u64) -> Option<CallAnswer> {
    Some(CallAnswer::Verdict(Outcome::Accepted { seq: Seq(seq), count, view: mview(0, seq + count) }))
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
        .write(
            1,
            1,
            &["b@1"],
            Some(CallAnswer::Verdict(Outcome::Duplicate { seq: Seq(1), count: 1, view: view(1, 0, 2) })),
            10,
            Some(11),
        )
        .page(0, &["a@0", "b@1"], view(1, 0, 2), 12, 15)
        .op(
            "w",
            OpInput::Truncate { leader: Some(u(1)), up_to: 1 },
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
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2).write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4)).page(
        0,
        &[],
        view(1, 0, 0),
        5,
        6,
    );
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
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2).write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4)).write(
        1,
        0,
        &["a@0"],
        Some(CallAnswer::Verdict(Outcome::Refused(view(1, 0, 1)))),
        5,
        Some(6),
    );
    assert!(matches!(h.verdict(), Verdict::Violation { .. }), "{:?}", h.verdict());
}

#[test]
fn a_duplicate_retry_answered_duplicate_is_linearizable() {
    let mut h = H::default();
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2).write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4)).write(
        1,
        0,
        &["a@0"],
        Some(CallAnswer::Verdict(Outcome::Duplicate { seq: Seq(0), count: 1, view: view(1, 0, 1) })),
        5,
        Some(6),
    );
    assert!(matches!(h.verdict(), Verdict::Linearizable { ops: 3 }), "{:?}", h.verdict());
}

#[test]
fn a_retry_with_changed_bytes_answered_duplicate_is_rejected() {
    let mut h = H::default();
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2).write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4)).write(
        1,
        0,
        &["~a@0"],
        Some(CallAnswer::Verdict(Outcome::Duplicate { seq: Seq(0), count: 1, view: view(1, 0, 1) })),
        5,
        Some(6),
    );
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
    after.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2).write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4)).page(
        0,
        &[],
        view(1, 0, 0),
        5,
        6,
    );
    (after.0[1].return_ns, after.0[2].call_ns) = (Some(5000), 5000);
    assert!(matches!(after.verdict(), Verdict::Violation { .. }), "a read sent after the return sees the write");
    let mut before = H::default();
    before.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2).write(1, 0, &["a@0"], accepted(0, 1), 3, Some(5)).page(
        0,
        &[],
        view(1, 0, 0),
        4,
        6,
    );
    (before.0[1].return_ns, before.0[2].call_ns) = (Some(5000), 5000);
    assert!(
        matches!(before.verdict(), Verdict::Linearizable { .. }),
        "a read sent before the return may miss it: {:?}",
        before.verdict()
    );
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
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2).write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4)).stale_page(
        0,
        0,
        &["forged@0"],
        view(1, 0, 1),
        5,
        6,
    );
    assert!(matches!(h.verdict(), Verdict::Violation { .. }), "{:?}", h.verdict());
}

#[test]
fn a_stale_read_below_its_position_is_rejected() {
    let mut h = H::default();
    h.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2).write(1, 0, &["a@0"], accepted(0, 1), 3, Some(4)).stale_page(
        0,
        1,
        &[],
        view(1, 0, 0),
        5,
        6,
    );
    assert!(
        matches!(h.verdict(), Verdict::Violation { .. }),
        "at_least(1) is answered from a state holding seq0: {:?}",
        h.verdict()
    );
}

#[test]
fn a_search_that_runs_out_of_steps_says_so() {
    let h = legal();
    assert!(matches!(check(&h.0, WriterMode::Single, BOUNDS, 3), Verdict::BudgetExhausted { .. }));
}

// Multi-writer journals: unfenced appends land at the tail whatever their `seq`, an ambiguous
// append may have landed anywhere after its call or not at all, and calls shaped for a
// single-writer journal are `WrongMode`.

fn mview(first: u64, next: u64) -> JournalView {
    JournalView { leader: None, first_seq: Seq(first), next_seq: Seq(next) }
}

impl H {
    fn append(
        &mut self,
        client: &str,
        seq: u64,
        records: &[&str],
        out: Option<CallAnswer>,
        call: u64,
        ret: Option<u64>,
    ) -> &mut Self {
        let input = OpInput::Write { leader: None, seq, records: records.iter().map(|r| rec(r)).collect() };
        self.op(client, input, out.map(OpOutput::Call), call, ret)
    }

    fn multi(&self) -> Verdict {
        check(&self.0, WriterMode::Multi, BOUNDS, BUDGET)
    }
}

/// Two appenders race: `a`'s first append is acknowledged, its second gets no verdict and is
/// appended again (at-least-once) and acknowledged; `b`'s append times out. A read shows that
/// `a`'s ambiguous append landed before `b`'s acknowledged one, and that `b`'s never did, and a
/// truncation trims the first record.
fn racing() -> H {
    let mut h = H::default();
    h.append("a", 0, &["a1"], appended(0, 1), 1, Some(4))
        .append("b", 0, &["b1", "b2"], None, 2, None)
        .append("a", 0, &["a2"], Some(CallAnswer::NoVerdict), 3, Some(5))
        .append("a", 0, &["a2"], appended(2, 1), 6, Some(8))
        .append("b", 7, &["b3"], appended(3, 1), 7, Some(9))
        .page(0, &["a1", "a2", "a2", "b3"], mview(0, 4), 10, 11)
        .op(
            "b",
            OpInput::Truncate { leader: None, up_to: 1 },
            Some(OpOutput::Call(CallAnswer::Verdict(Outcome::Trimmed(mview(1, 4))))),
            12,
            Some(13),
        )
        .read(0, ReadAnswer::Truncated(mview(1, 4)), 14, 15);
    h
}

#[test]
fn a_multi_writer_history_with_an_ambiguous_append_that_landed_and_one_that_did_not_is_linearizable() {
    let h = racing();
    // b's two records fit nowhere (only seq1 was acknowledged to nobody): it takes no part.
    assert!(matches!(h.multi(), Verdict::Linearizable { ops: 7 }), "{:?}", h.multi());
    // Read against a single-writer journal, the same calls are refused `WrongMode`: the answers
    // given are wrong.
    assert!(matches!(h.verdict(), Verdict::Violation { .. }), "{:?}", h.verdict());
}

#[test]
fn a_multi_writer_append_lands_at_the_tail_whatever_its_seq() {
    let mut h = H::default();
    h.append("a", 9, &["a1"], appended(0, 1), 1, Some(2)).append("b", 0, &["b1"], appended(1, 1), 3, Some(4));
    assert!(matches!(h.multi(), Verdict::Linearizable { .. }), "{:?}", h.multi());
    let mut wrong = H::default();
    wrong.append("a", 9, &["a1"], appended(9, 1), 1, Some(2));
    assert!(
        matches!(wrong.multi(), Verdict::Violation { .. }),
        "an append is acknowledged at the tail, not at its seq: {:?}",
        wrong.multi()
    );
}

#[test]
fn an_ambiguous_multi_writer_append_seen_twice_is_rejected() {
    // One call, one landing: its record at two positions means the cell appended it twice.
    let mut h = H::default();
    h.append("a", 0, &["a1"], appended(0, 1), 1, Some(2))
        .append("b", 0, &["b1"], None, 3, None)
        .append("a", 0, &["a2"], appended(2, 1), 4, Some(5))
        .page(0, &["a1", "b1", "a2", "b1"], mview(0, 4), 6, 7);
    assert!(matches!(h.multi(), Verdict::Violation { .. }), "{:?}", h.multi());
    // Appended again after the first got no verdict, both may land.
    h.append("b", 0, &["b1"], None, 5, None);
    assert!(matches!(h.multi(), Verdict::Linearizable { .. }), "{:?}", h.multi());
}

#[test]
fn an_ambiguous_multi_writer_append_lands_only_after_its_call() {
    let mut h = H::default();
    h.append("a", 0, &["a1"], appended(0, 1), 1, Some(2)).page(0, &["a1", "b1"], mview(0, 2), 3, 4).append(
        "b",
        0,
        &["b1"],
        None,
        5,
        None,
    );
    assert!(matches!(h.multi(), Verdict::Violation { .. }), "b1 was read before it was sent: {:?}", h.multi());
}

#[test]
fn racing_appends_acknowledged_at_one_position_are_rejected() {
    let mut h = H::default();
    h.append("a", 0, &["a1"], appended(0, 1), 1, Some(3)).append("b", 0, &["b1"], appended(0, 1), 2, Some(4));
    assert!(matches!(h.multi(), Verdict::Violation { .. }), "{:?}", h.multi());
}

#[test]
fn a_lost_acknowledged_multi_writer_append_is_rejected() {
    let mut h = racing();
    h.page(1, &["a2", "a2"], mview(1, 3), 16, 17);
    assert!(matches!(h.multi(), Verdict::Violation { .. }), "the tail went back from 4 to 3: {:?}", h.multi());
    let mut h = racing();
    h.page(3, &["b1"], mview(1, 4), 16, 17);
    assert!(matches!(h.multi(), Verdict::Violation { .. }), "b3 was acknowledged at 3: {:?}", h.multi());
}

#[test]
fn calls_shaped_for_the_other_writer_mode_are_wrong_mode() {
    let wrong_mode = |v| Some(CallAnswer::Verdict(Outcome::WrongMode(v)));
    // A fenced write, a fenced truncation and a claim on a multi-writer journal.
    let mut h = H::default();
    h.append("a", 0, &["a1"], appended(0, 1), 1, Some(2))
        .write(7, 1, &["w"], wrong_mode(mview(0, 1)), 3, Some(4))
        .op(
            "w",
            OpInput::Truncate { leader: Some(u(7)), up_to: 1 },
            wrong_mode(mview(0, 1)).map(OpOutput::Call),
            5,
            Some(6),
        )
        .op("w", OpInput::SetLeader { new: u(7), old: None }, wrong_mode(mview(0, 1)).map(OpOutput::Call), 7, Some(8))
        .page(0, &["a1"], mview(0, 1), 9, 10);
    assert!(matches!(h.multi(), Verdict::Linearizable { ops: 5 }), "{:?}", h.multi());
    let mut won = H::default();
    won.append("a", 0, &["a1"], appended(0, 1), 1, Some(2)).claim(7, None, Outcome::Won(view(7, 0, 1)), 3, 4);
    assert!(matches!(won.multi(), Verdict::Violation { .. }), "nobody leads a multi-writer journal: {:?}", won.multi());
    let mut fenced = H::default();
    fenced.write(7, 0, &["w"], accepted(0, 1), 1, Some(2));
    assert!(
        matches!(fenced.multi(), Verdict::Violation { .. }),
        "a fenced write is not appended: {:?}",
        fenced.multi()
    );
    // An unfenced append to a single-writer journal, led or not.
    let mut single = H::default();
    single
        .append("a", 0, &["a1"], wrong_mode(view(0, 0, 0)), 1, Some(2))
        .claim(1, None, Outcome::Won(view(1, 0, 0)), 3, 4)
        .append("a", 0, &["a1"], wrong_mode(view(1, 0, 0)), 5, Some(6));
    assert!(matches!(single.verdict(), Verdict::Linearizable { ops: 3 }), "{:?}", single.verdict());
    let mut appended = H::default();
    appended.claim(1, None, Outcome::Won(view(1, 0, 0)), 1, 2).append("a", 0, &["a1"], accepted(0, 1), 3, Some(4));
    assert!(matches!(appended.verdict(), Verdict::Violation { .. }), "{:?}", appended.verdict());
}

#[test]
fn an_empty_multi_writer_append_is_refused_in_place() {
    let mut h = H::default();
    h.append("a", 0, &["a1"], appended(0, 1), 1, Some(2))
        .append("a", 1, &[], Some(CallAnswer::Verdict(Outcome::Refused(mview(0, 1)))), 3, Some(4))
        .page(0, &["a1"], mview(0, 1), 5, 6);
    assert!(matches!(h.multi(), Verdict::Linearizable { .. }), "{:?}", h.multi());
    let mut accepted_empty = H::default();
    accepted_empty.append("a", 0, &[], appended(0, 0), 1, Some(2));
    assert!(matches!(accepted_empty.multi(), Verdict::Violation { .. }), "{:?}", accepted_empty.multi());
}

#[test]
fn many_racing_ambiguous_appends_are_judged_within_the_budget() {
    // Forty appenders' appends each get no verdict; twenty of them landed, in a stretch no read
    // saw, between acknowledged appends; every read shows the tail. The search must not try
    // every set and order of the forty.
    let mut h = H::default();
    let mut t = 1;
    let names: Vec<String> = (0..40).map(|i| format!("x{i}")).collect();
    for n in &names {
        h.append(n, 0, &[n.as_str()], None, t, None);
        t += 1;
    }
    let mut tail = 0;
    for round in 0..20u64 {
        let rec = format!("k{round}");
        h.append("k", 0, &[rec.as_str()], appended(tail + 1, 1), t, Some(t + 1));
        tail += 2;
        h.read(tail, ReadAnswer::Page { from: Seq(tail), records: vec![], view: mview(0, tail) }, t + 2, t + 3);
        t += 4;
    }
    assert!(matches!(h.multi(), Verdict::Linearizable { .. }), "{:?}", h.multi());
    // One more acknowledged append than there is room for: rejected, also within the budget.
    h.append("k", 0, &["late"], appended(tail - 1, 1), t, Some(t + 1));
    assert!(matches!(h.multi(), Verdict::Violation { .. }), "{:?}", h.multi());
}

#[test]
fn an_unseen_ambiguous_append_is_told_apart_by_the_length_a_byte_bounded_page_implies() {
    // Neither ambiguous append was ever read, but the page that stops short of the tail by its
    // byte bound says the record after it is longer than one byte: only `unseen-long` fits.
    let mut h = H::default();
    h.append("x", 0, &["s"], None, 1, None)
        .append("y", 0, &["unseen-long"], None, 2, None)
        .append("a", 0, &["a0"], appended(0, 1), 3, Some(4))
        .append("b", 0, &["b"], appended(2, 1), 5, Some(6));
    let input =
        OpInput::Read { from: 0, limit: 0, max_bytes: 3, wait_ticks: 0, consistency: Consistency::Linearizable };
    let page = ReadAnswer::Page { from: Seq(0), records: vec![rec("a0")], view: mview(0, 3) };
    h.op("r", input, Some(OpOutput::Read(page)), 7, Some(8));
    assert!(matches!(h.multi(), Verdict::Linearizable { .. }), "{:?}", h.multi());
    // With only the short one sent, nothing fits at seq1.
    h.0.remove(1);
    assert!(matches!(h.multi(), Verdict::Violation { .. }), "{:?}", h.multi());
}

#[test]
fn a_record_two_ambiguous_appends_share_does_not_say_which_landed_where() {
    // `s` was read at seq1 as the first of `y`'s records; `x`, which also holds `s`, must then
    // have landed at seq3, which nobody read.
    let mut h = H::default();
    h.append("x", 0, &["s"], None, 1, None)
        .append("y", 0, &["s", "t"], None, 2, None)
        .append("a", 0, &["a"], appended(0, 1), 3, Some(4))
        .page(0, &["a", "s", "t"], mview(0, 3), 5, 6)
        .append("b", 0, &["b"], appended(4, 1), 7, Some(8))
        .page(4, &["b"], mview(0, 5), 9, 10);
    assert!(matches!(h.multi(), Verdict::Linearizable { .. }), "{:?}", h.multi());
}
