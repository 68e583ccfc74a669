//! A Wing & Gong / Lowe linearizability checker (the algorithm Porcupine uses) over one
//! journal's history of Write, Read, Truncate and SetLeader calls, against [`JournalModel`].
//!
//! - Entries are the calls and returns in real-time order. The search repeatedly linearizes a
//!   call that comes before the first pending return, backtracking when it meets a return whose
//!   call it could not place.
//! - Memoization: a (linearized set, model state) pair already explored is never explored again.
//! - Calls without a verdict (no answer, or `NoVerdict`) have no return: they may take effect at
//!   any time after they were sent, or never. They are placed only where they change the state
//!   (elsewhere they are indistinguishable from "never"), and among identical ambiguous calls
//!   only the earliest unplaced one is tried (the others are interchangeable with it).
//! - Calls and returns are ordered by their global event index, not by simulated time: a call
//!   sent at the nanosecond another call returned is after that return.
//! - Answers that prove a call was never proposed (redirect, busy, too large), and reads without
//!   an answer or answered `Unserved` are dropped.
//! - An `at_least` read may be stale (answered from any state the journal passed before it
//!   returned), so it is not placed in the search, which it would send backtracking through
//!   every call since that state. It is judged on its own ([`stale_read_violation`]) by what
//!   holds in every state: the view is one with `next_seq` at least its position, a page starts
//!   at or above the view's `first_seq` and ends at or below its `next_seq`, a `truncated`
//!   answer is for a position below the view's `first_seq`, and every record on the page is the
//!   one acknowledged at that position, if one was.
//! - The search is bounded by a step budget; running out is reported, not judged.

use std::collections::{BTreeMap, HashSet};
use std::hash::BuildHasherDefault;

use bytes::Bytes;
use paros_core::journal::Outcome;
use paros_core::{CallAnswer, Consistency, ReadAnswer};

use super::history::{HistoryOp, OpInput, OpOutput};
use super::model::{JournalModel, PageBounds, Undo, verdict_matches};

/// What the checker concluded about one history.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Verdict {
    /// A linearization exists; `ops` calls took part in the check.
    Linearizable { ops: usize },
    /// No linearization exists.
    Violation { detail: String },
    /// The step budget ran out before an answer.
    BudgetExhausted { ops: usize },
}

/// One op as the search sees it.
#[derive(Debug)]
struct Op<'a> {
    input: &'a OpInput,
    /// `None` for an ambiguous call (no return).
    output: Option<&'a OpOutput>,
    /// For ambiguous calls: the class of identical inputs and this op's rank in it.
    class: Option<(usize, usize)>,
    source: &'a HistoryOp,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    op: usize,
    is_call: bool,
    /// For a call: the index of its return entry, if it has one.
    ret: Option<usize>,
    prev: usize,
    next: usize,
}

/// Dancing-links list of entries; index 0 is the head sentinel, `len` is the tail sentinel.
struct Entries {
    e: Vec<Entry>,
}

impl Entries {
    fn unlink(&mut self, i: usize) {
        let (p, n) = (self.e[i].prev, self.e[i].next);
        self.e[p].next = n;
        self.e[n].prev = p;
    }

    fn relink(&mut self, i: usize) {
        let (p, n) = (self.e[i].prev, self.e[i].next);
        self.e[p].next = i;
        self.e[n].prev = i;
    }

    fn lift(&mut self, call: usize) {
        self.unlink(call);
        if let Some(r) = self.e[call].ret {
            self.unlink(r);
        }
    }

    fn unlift(&mut self, call: usize) {
        if let Some(r) = self.e[call].ret {
            self.relink(r);
        }
        self.relink(call);
    }
}

fn keep(op: &HistoryOp) -> bool {
    match (&op.input, &op.output) {
        (OpInput::Read { consistency: Consistency::Linearizable, .. }, Some(OpOutput::Read(a))) => {
            !matches!(a, ReadAnswer::Unserved)
        }
        (OpInput::Read { .. }, _) => false,
        _ => !op.never_proposed(),
    }
}

fn prepare(history: &[HistoryOp]) -> Vec<Op<'_>> {
    let mut classes: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut ops: Vec<Op<'_>> = Vec::new();
    let mut kept: Vec<&HistoryOp> = history.iter().filter(|o| keep(o)).collect();
    kept.sort_by_key(|o| o.call_index);
    for h in kept {
        let ambiguous = h.is_ambiguous();
        let class = ambiguous.then(|| {
            let n = classes.len();
            let c = classes.entry(format!("{:?}", h.input)).or_insert((n, 0));
            let at = *c;
            c.1 += 1;
            at
        });
        ops.push(Op { input: &h.input, output: if ambiguous { None } else { h.output.as_ref() }, class, source: h });
    }
    ops
}

fn build_entries(ops: &[Op<'_>]) -> Entries {
    // (order, is_return, op)
    let mut events: Vec<(u64, bool, usize)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        events.push((op.source.call_index, false, i));
        if op.output.is_some() {
            events.push((op.source.return_index.expect("an answered call has a return"), true, i));
        }
    }
    events.sort_unstable();
    let n = events.len();
    let mut e: Vec<Entry> = Vec::with_capacity(n + 2);
    e.push(Entry { op: usize::MAX, is_call: false, ret: None, prev: 0, next: 1 });
    let mut call_at = vec![usize::MAX; ops.len()];
    for (k, (_, is_return, op)) in events.iter().enumerate() {
        let idx = k + 1;
        e.push(Entry { op: *op, is_call: !is_return, ret: None, prev: idx - 1, next: idx + 1 });
        if *is_return {
            e[call_at[*op]].ret = Some(idx);
        } else {
            call_at[*op] = idx;
        }
    }
    e.push(Entry { op: usize::MAX, is_call: false, ret: None, prev: n, next: n + 1 });
    Entries { e }
}

/// Tries one op in the current model state: on success the model is advanced and the undo (if
/// the state changed) returned.
fn try_op(model: &mut JournalModel, op: &Op<'_>, bounds: PageBounds) -> Option<Option<Undo>> {
    match (op.input, op.output) {
        (OpInput::Read { .. }, Some(OpOutput::Read(answer))) => model.read_matches(op.input, answer, bounds).then_some(None),
        (OpInput::Read { .. }, _) => None,
        (_, Some(OpOutput::Call(CallAnswer::Verdict(observed)))) => {
            let (outcome, undo) = model.apply(op.input);
            if verdict_matches(&outcome, observed) {
                Some(undo)
            } else {
                if let Some(u) = undo {
                    model.undo(u);
                }
                None
            }
        }
        (_, None) => {
            let (_, undo) = model.apply(op.input);
            undo.map(Some)
        }
        (_, Some(_)) => None,
    }
}

type Memo = HashSet<(Vec<u64>, super::model::ModelKey), BuildHasherDefault<std::hash::DefaultHasher>>;

/// The first `at_least` read of `history` whose answer no state of the journal could give.
#[must_use]
pub fn stale_read_violation(history: &[HistoryOp]) -> Option<String> {
    let mut acked: BTreeMap<u64, &Bytes> = BTreeMap::new();
    for h in history {
        if let (OpInput::Write { records, .. }, Some(OpOutput::Call(CallAnswer::Verdict(o)))) = (&h.input, &h.output)
            && let Outcome::Accepted { seq, .. } | Outcome::Duplicate { seq, .. } = o
        {
            for (i, r) in records.iter().enumerate() {
                acked.insert(seq.0 + i as u64, r);
            }
        }
    }
    for h in history {
        let (OpInput::Read { from, consistency: Consistency::AtLeast(at_least), .. }, Some(OpOutput::Read(answer))) = (&h.input, &h.output)
        else {
            continue;
        };
        let ok = match answer {
            ReadAnswer::Unserved => true,
            ReadAnswer::Truncated(v) => v.next_seq >= *at_least && *from < v.first_seq.0 && v.first_seq <= v.next_seq,
            ReadAnswer::Page { from: f, records, view: v } => {
                let end = from + records.len() as u64;
                let held = records.iter().enumerate().all(|(i, r)| acked.get(&(from + i as u64)).is_none_or(|a| *a == r));
                v.next_seq >= *at_least && f.0 == *from && *from >= v.first_seq.0 && end <= v.next_seq.0.max(*from) && held
                    && (records.is_empty() == (*from >= v.next_seq.0))
            }
        };
        if !ok {
            return Some(format!(
                "{} read {:?} -> {:?} [call {} ns #{}, return {:?} ns #{:?}]: no state of the journal gives that answer",
                h.client, h.input, h.output, h.call_ns, h.call_index, h.return_ns, h.return_index
            ));
        }
    }
    None
}

/// Checks one journal's history against the sequential model.
#[must_use]
pub fn check(history: &[HistoryOp], bounds: PageBounds, step_budget: u64) -> Verdict {
    if let Some(detail) = stale_read_violation(history) {
        return Verdict::Violation { detail };
    }
    let ops = prepare(history);
    let mut entries = build_entries(&ops);
    let end = entries.e.len() - 1;
    let mut model = JournalModel::default();
    let mut linearized = vec![0u64; ops.len().div_ceil(64)];
    let mut placed_in_class: Vec<usize> = Vec::new();
    let mut memo: Memo = HashSet::default();
    let mut stack: Vec<(usize, Option<Undo>)> = Vec::new();
    let mut known_left = ops.iter().filter(|o| o.output.is_some()).count();
    let mut deepest = (0usize, 0usize);
    let mut steps = 0u64;
    let mut at = entries.e[0].next;
    while known_left > 0 {
        steps += 1;
        if steps > step_budget {
            return Verdict::BudgetExhausted { ops: ops.len() };
        }
        let entry = entries.e[at];
        if at != end && entry.is_call {
            let op = &ops[entry.op];
            let allowed = op.class.is_none_or(|(c, rank)| {
                if placed_in_class.len() <= c {
                    placed_in_class.resize(c + 1, 0);
                }
                placed_in_class[c] == rank
            });
            if allowed && let Some(undo) = try_op(&mut model, op, bounds) {
                linearized[entry.op / 64] |= 1 << (entry.op % 64);
                if memo.insert((linearized.clone(), model.key())) {
                    stack.push((at, undo));
                    entries.lift(at);
                    if op.output.is_some() {
                        known_left -= 1;
                    }
                    if let Some((c, _)) = op.class {
                        placed_in_class[c] += 1;
                    }
                    if stack.len() > deepest.0 {
                        deepest = (stack.len(), entry.op);
                    }
                    at = entries.e[0].next;
                    continue;
                }
                linearized[entry.op / 64] &= !(1 << (entry.op % 64));
                if let Some(u) = undo {
                    model.undo(u);
                }
            }
            at = entry.next;
            continue;
        }
        // A return whose call could not be placed (or the end): backtrack.
        let Some((call, undo)) = stack.pop() else {
            let stuck = if at == end { None } else { Some(&ops[entry.op]) };
            return Verdict::Violation { detail: describe(stuck, &ops, deepest) };
        };
        let op_index = entries.e[call].op;
        let op = &ops[op_index];
        linearized[op_index / 64] &= !(1 << (op_index % 64));
        if let Some(u) = undo {
            model.undo(u);
        }
        entries.unlift(call);
        if op.output.is_some() {
            known_left += 1;
        }
        if let Some((c, _)) = op.class {
            placed_in_class[c] -= 1;
        }
        at = entries.e[call].next;
    }
    Verdict::Linearizable { ops: ops.len() }
}

fn describe(stuck: Option<&Op<'_>>, ops: &[Op<'_>], deepest: (usize, usize)) -> String {
    let show = |op: &Op<'_>| {
        format!(
            "{} {} {:?} -> {:?} [call {} ns #{}, return {:?} ns #{:?}]",
            op.source.client,
            op.input.name(),
            op.input,
            op.source.output,
            op.source.call_ns,
            op.source.call_index,
            op.source.return_ns,
            op.source.return_index
        )
    };
    let mut s = format!("no linearization of {} calls; deepest prefix placed {} calls", ops.len(), deepest.0);
    if let Some(op) = stuck {
        s.push_str(&format!("; the first call that cannot be placed before it returns: {}", show(op)));
    }
    if deepest.0 > 0 {
        s.push_str(&format!("; the last call of the deepest prefix: {}", show(&ops[deepest.1])));
    }
    s
}
