//! A Wing & Gong / Lowe linearizability checker (the algorithm Porcupine uses) over one
//! journal's history of Write, Read, Truncate and SetLeader calls, against [`JournalModel`] in
//! the journal's writer mode.
//!
//! - Entries are the calls and returns in real-time order. The search repeatedly linearizes a
//!   call that comes before the first pending return, backtracking when it meets a return whose
//!   call it could not place.
//! - Memoization: a (linearized set, model state) pair already explored is never explored again.
//! - Calls and returns are ordered by their global event index, not by simulated time: a call
//!   sent at the nanosecond another call returned is after that return.
//! - Answers that prove a call was never proposed (redirect, busy, too large), and reads without
//!   an answer or answered `Unserved` are dropped.
//! - Calls without a verdict (no answer, or `NoVerdict`) have no return: they may take effect at
//!   any time after they were sent, or never. They are placed only where they change the state
//!   (elsewhere they are indistinguishable from "never"; one that changes no state wherever it
//!   lands, shaped for the other writer mode or empty, is dropped), and among interchangeable
//!   ambiguous calls only the earliest unplaced one is tried (it can be placed wherever a later
//!   one can): identical inputs; in a multi-writer journal, ambiguous appends of the same
//!   records (their `seq` means nothing there), and ambiguous appends none of whose records a
//!   read was handed anywhere they may land, whose records reach the same least lengths (below).
//! - An `at_least` read may be stale (answered from any state the journal passed before it
//!   returned), so it is not placed in the search, which it would send backtracking through
//!   every call since that state. It is judged on its own ([`stale_read_violation`]) by what
//!   holds in every state: the view is one with `next_seq` at least its position, a page starts
//!   at or above the view's `first_seq` and ends at or below its `next_seq`, a `truncated`
//!   answer is for a position below the view's `first_seq`, and every record on the page is the
//!   one acknowledged at that position, if one was.
//! - The search is bounded by a step budget; running out is reported, not judged.
//!
//! Shortcuts that keep the search from trying every order of what cannot matter, each exact
//! (the unit tests compare the search with a brute force over every order on random histories):
//! - A call that leaves the state as it was (a read, a refusal) is tried first and, where it
//!   fits, nowhere later: a linearization that places it later can place it there instead (it is judged
//!   in the same state, and every call that must precede it is placed already), so when nothing
//!   follows from placing it, nothing follows from that prefix.
//! - `first_seq` and `next_seq` only grow, and every answered call's answer names the `next_seq`
//!   (most also the `first_seq`) of the state it was given in: a prefix past the least of those
//!   of the unplaced answered calls can never place that call, and is abandoned at once.
//! - An ambiguous append of a multi-writer journal lands at the tail, wherever that is, so it
//!   would change the state at every point after its call; an at-least-once re-append of the
//!   same records is its own call, and both may land. Positions are never reused, so it is tried
//!   only where it can land ([`Landing`]): on a stretch of positions no answered append was
//!   acknowledged, not over a record a read was handed there, not as a record shorter than a
//!   byte-bounded page stopping just before it says (the one thing a read tells of a record it
//!   was not handed), and not past the highest `next_seq` any answer showed (nothing answered
//!   could follow, so leaving it out is the same history). Where a class of them has no more
//!   members than places a read saw its records at, each lands at one of those places (every
//!   sighting is one landing). Such appends are kept out of the entry list and tried only at a
//!   state whose `next_seq` is one of their landing places.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use paros_core::journal::{Outcome, WriterMode};
use paros_core::{CallAnswer, Consistency, ReadAnswer};

use super::history::{HistoryOp, OpInput, OpOutput};
use super::model::{JournalModel, ModelKey, PageBounds, Undo, verdict_matches};

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
    /// For ambiguous calls: the class of interchangeable calls and this op's rank in it.
    class: Option<(usize, usize)>,
    /// For an ambiguous append of a multi-writer journal: where it may land (it is kept out of
    /// the entry list).
    lands_at: Option<Vec<u64>>,
    /// The observed verdict leaves every state as it was (a read, a refusal).
    inert: bool,
    /// For an answered call: the `(first_seq, next_seq)` of the state it must be placed in, as
    /// far as its answer tells.
    pins: (Option<u64>, Option<u64>),
    source: &'a HistoryOp,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    op: usize,
    is_call: bool,
    /// The call's or return's event index.
    order: u64,
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

    /// The event index of the first return still in the list: a call is placeable only if it
    /// comes before it.
    fn frontier(&self) -> u64 {
        let end = self.e.len() - 1;
        let mut at = self.e[0].next;
        while at != end && self.e[at].is_call {
            at = self.e[at].next;
        }
        if at == end { u64::MAX } else { self.e[at].order }
    }
}

/// Where an ambiguous append of a multi-writer journal may land: positions are never reused, so
/// only on a stretch of positions no answered append was acknowledged, not over a record some
/// read was handed there, and not past the highest `next_seq` any answer showed (every answer
/// shows the view, so nothing answered could follow such a landing: leaving the append out is
/// the same history).
#[derive(Debug, Default)]
struct Landing<'a> {
    /// The maximal stretches `[from, to)` of positions below `next_max` no answered append was
    /// acknowledged.
    stretches: Vec<(u64, u64)>,
    /// The record some read was handed at a position.
    observed: BTreeMap<u64, &'a Bytes>,
    /// Every record some read was handed.
    seen: HashSet<&'a Bytes>,
    /// The least length of the record at a position: a linearizable page that stops short of
    /// the tail, not full by count, is full by bytes, which says the next record is longer than
    /// the room left. The only thing a read tells of a record it was not handed.
    len_min: BTreeMap<u64, usize>,
    /// Every such least length.
    thresholds: std::collections::BTreeSet<usize>,
}

impl<'a> Landing<'a> {
    fn of(history: &'a [HistoryOp], bounds: PageBounds) -> Landing<'a> {
        let mut l = Landing::default();
        for h in history {
            let (
                OpInput::Read { limit, max_bytes, consistency: Consistency::Linearizable, .. },
                Some(OpOutput::Read(ReadAnswer::Page { from, records, view })),
            ) = (&h.input, &h.output)
            else {
                continue;
            };
            let limit = if *limit == 0 { bounds.records_max } else { (*limit).min(bounds.records_max) } as usize;
            let room = if *max_bytes == 0 { bounds.bytes_max } else { (*max_bytes).min(bounds.bytes_max) } as usize;
            let end = from.0 + records.len() as u64;
            let bytes: usize = records.iter().map(Bytes::len).sum();
            if !records.is_empty() && records.len() != limit && end < view.next_seq.0 && bytes <= room {
                let least = room - bytes + 1;
                let at = l.len_min.entry(end).or_default();
                *at = (*at).max(least);
                l.thresholds.insert(least);
            }
        }
        let mut acked: BTreeMap<u64, u64> = BTreeMap::new();
        let mut next_max = 0;
        for h in history {
            match &h.output {
                Some(OpOutput::Call(CallAnswer::Verdict(o))) => match o {
                    Outcome::Accepted { seq, count, .. } => {
                        if matches!(h.input, OpInput::Write { .. }) {
                            acked.insert(seq.0, seq.0 + count);
                        }
                        next_max = next_max.max(seq.0 + count);
                    }
                    other => {
                        if let Some(v) = other.view() {
                            next_max = next_max.max(v.next_seq.0);
                        }
                    }
                },
                Some(OpOutput::Read(ReadAnswer::Page { from, records, view })) => {
                    next_max = next_max.max(view.next_seq.0);
                    for (i, r) in records.iter().enumerate() {
                        l.observed.entry(from.0 + i as u64).or_insert(r);
                        l.seen.insert(r);
                    }
                }
                Some(OpOutput::Read(ReadAnswer::Truncated(view))) => next_max = next_max.max(view.next_seq.0),
                _ => {}
            }
        }
        let mut at = 0;
        for (start, end) in acked {
            if start > at {
                l.stretches.push((at, start.min(next_max)));
            }
            at = at.max(end);
        }
        if next_max > at {
            l.stretches.push((at, next_max));
        }
        l.stretches.retain(|(a, b)| a < b);
        l
    }

    /// Every position an append of `records` may land at.
    fn starts(&self, records: &[Bytes]) -> Vec<u64> {
        let n = records.len() as u64;
        let mut out = Vec::new();
        for &(from, to) in &self.stretches {
            for at in from..=to.saturating_sub(n) {
                if at + n <= to
                    && records.iter().enumerate().all(|(i, r)| {
                        let p = at + i as u64;
                        self.observed.get(&p).is_none_or(|o| *o == r)
                            && self.len_min.get(&p).is_none_or(|m| r.len() >= *m)
                    })
                {
                    out.push(at);
                }
            }
        }
        out
    }
}

/// True for an ambiguous append of a multi-writer journal that changes the state wherever it
/// lands (kept out of the entry list: see [`Landing`]).
fn lands(h: &HistoryOp, model: &JournalModel) -> bool {
    model.mode() == WriterMode::Multi
        && h.is_ambiguous()
        && matches!(h.input, OpInput::Write { .. })
        && !model.inert(&h.input)
}

/// Whether `op` takes part in the search. Dropped: reads without an answer, `unserved` or
/// `at_least`; calls proven never proposed; and ambiguous calls that change no state of this
/// model's journal whenever they land (shaped for the other mode, or empty), which are the same
/// as never.
fn keep(op: &HistoryOp, model: &JournalModel) -> bool {
    match (&op.input, &op.output) {
        (OpInput::Read { consistency: Consistency::Linearizable, .. }, Some(OpOutput::Read(a))) => {
            !matches!(a, ReadAnswer::Unserved { .. })
        }
        (OpInput::Read { .. }, _) => false,
        _ if op.is_ambiguous() => !model.inert(&op.input),
        _ => !op.never_proposed(),
    }
}

/// The class of an ambiguous call (see the module doc): identical inputs. An unfenced append's
/// `seq` means nothing to a multi-writer journal, so an ambiguous append's class is its records
/// or, when no read was handed any of them anywhere it may land (`sighted` is empty), their
/// count.
fn class_key(h: &HistoryOp, sighted: Option<&[u64]>, landing: Option<&Landing<'_>>) -> String {
    match (&h.input, sighted, landing) {
        (OpInput::Write { records, .. }, Some([]), Some(l)) => {
            // Told apart only by which least lengths each record reaches.
            let reach: Vec<usize> = records.iter().map(|r| l.thresholds.range(..=r.len()).count()).collect();
            format!("unseen append reaching {reach:?}")
        }
        (OpInput::Write { records, .. }, Some(_), _) => format!("append {records:?}"),
        _ => format!("{:?}", h.input),
    }
}

/// True when the observed verdict of `h` leaves every state as it was (a read, a refusal): such
/// a call is tried before the calls that change the state (module doc).
fn inert_verdict(h: &HistoryOp) -> bool {
    match &h.output {
        Some(OpOutput::Read(_)) => true,
        Some(OpOutput::Call(CallAnswer::Verdict(o))) => matches!(
            o,
            Outcome::Refused(_)
                | Outcome::Truncated(_)
                | Outcome::WrongMode(_)
                | Outcome::Lost(_)
                | Outcome::TruncateRefused(_)
                | Outcome::Duplicate { .. }
        ),
        _ => false,
    }
}

/// The `(first_seq, next_seq)` an answer says the state it was given in had: a view names both
/// (`Won` and `Trimmed` name the state after, whose `next_seq` is the one before); `Accepted`
/// names the `next_seq` before.
fn pins(h: &HistoryOp) -> (Option<u64>, Option<u64>) {
    match &h.output {
        Some(OpOutput::Call(CallAnswer::Verdict(o))) => match o {
            Outcome::Accepted { seq, .. } => (None, Some(seq.0)),
            Outcome::Refused(v)
            | Outcome::Truncated(v)
            | Outcome::WrongMode(v)
            | Outcome::Lost(v)
            | Outcome::TruncateRefused(v)
            | Outcome::Reconfigured { view: v, .. }
            | Outcome::StaleEpoch { view: v, .. } => (Some(v.first_seq.0), Some(v.next_seq.0)),
            Outcome::Won(v) | Outcome::Trimmed(v) => (None, Some(v.next_seq.0)),
            Outcome::Duplicate { .. } | Outcome::Noop => (None, None),
        },
        Some(OpOutput::Read(ReadAnswer::Page { view, .. } | ReadAnswer::Truncated(view))) => {
            (Some(view.first_seq.0), Some(view.next_seq.0))
        }
        _ => (None, None),
    }
}

fn prepare<'a>(history: &'a [HistoryOp], model: &JournalModel, landing: Option<&Landing<'a>>) -> Vec<Op<'a>> {
    let mut classes: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut ops: Vec<Op<'_>> = Vec::new();
    let mut kept: Vec<&HistoryOp> = history.iter().filter(|o| keep(o, model)).collect();
    kept.sort_by_key(|o| o.call_index);
    // Per op: where it may land, and where of those a read saw one of its records.
    let mut sightings: Vec<Vec<u64>> = Vec::new();
    for h in kept {
        let (lands_at, sighted) = match (landing, &h.input) {
            (Some(l), OpInput::Write { records, .. }) if lands(h, model) => {
                let starts = l.starts(records);
                let sighted = starts
                    .iter()
                    .copied()
                    .filter(|at| records.iter().enumerate().any(|(i, r)| l.observed.get(&(at + i as u64)) == Some(&r)))
                    .collect();
                (Some(starts), Some(sighted))
            }
            _ => (None, None),
        };
        if lands_at.as_ref().is_some_and(Vec::is_empty) {
            continue; // nowhere to land: the same as never
        }
        let ambiguous = h.is_ambiguous();
        let class = ambiguous.then(|| {
            let n = classes.len();
            let c = classes.entry(class_key(h, sighted.as_deref(), landing)).or_insert((n, 0));
            let at = *c;
            c.1 += 1;
            at
        });
        sightings.push(sighted.unwrap_or_default());
        ops.push(Op {
            input: &h.input,
            output: if ambiguous { None } else { h.output.as_ref() },
            class,
            lands_at,
            inert: inert_verdict(h),
            pins: if ambiguous { (None, None) } else { pins(h) },
            source: h,
        });
    }
    // Every sighting of a record (a read handed it at a position) was put there by one append of
    // it, and each append lands once: when a class of interchangeable appends has no more
    // members than places its records were seen at, every member lands at one of those places.
    // Only records of one class, once in it, tell where a member landed.
    let mut members: BTreeMap<usize, usize> = BTreeMap::new();
    let mut owners: BTreeMap<&Bytes, std::collections::BTreeSet<usize>> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.lands_at.is_some()) {
        if let (Some((c, _)), OpInput::Write { records, .. }) = (op.class, op.input) {
            *members.entry(c).or_default() += 1;
            for r in records {
                owners.entry(r).or_default().insert(c);
            }
        }
    }
    let observed = landing.map(|l| &l.observed);
    for (i, sighted) in sightings.into_iter().enumerate() {
        let (Some((c, _)), Some(_), OpInput::Write { records, .. }, Some(observed)) =
            (ops[i].class, &ops[i].lands_at, ops[i].input, observed)
        else {
            continue;
        };
        let telling =
            |k: usize| owners[&records[k]].len() == 1 && records.iter().filter(|r| **r == records[k]).count() == 1;
        let sighted: Vec<u64> = sighted
            .into_iter()
            .filter(|at| (0..records.len()).any(|k| observed.get(&(at + k as u64)) == Some(&&records[k]) && telling(k)))
            .collect();
        if !sighted.is_empty() && sighted.len() >= members[&c] {
            ops[i].lands_at = Some(sighted);
        }
    }
    ops
}

fn build_entries(ops: &[Op<'_>]) -> Entries {
    // (order, is_return, op)
    let mut events: Vec<(u64, bool, usize)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        if op.lands_at.is_some() {
            continue;
        }
        events.push((op.source.call_index, false, i));
        if op.output.is_some() {
            events.push((op.source.return_index.expect("an answered call has a return"), true, i));
        }
    }
    events.sort_unstable();
    let n = events.len();
    let mut e: Vec<Entry> = Vec::with_capacity(n + 2);
    e.push(Entry { op: usize::MAX, is_call: false, order: 0, ret: None, prev: 0, next: 1 });
    let mut call_at = vec![usize::MAX; ops.len()];
    for (k, (order, is_return, op)) in events.iter().enumerate() {
        let idx = k + 1;
        e.push(Entry { op: *op, is_call: !is_return, order: *order, ret: None, prev: idx - 1, next: idx + 1 });
        if *is_return {
            e[call_at[*op]].ret = Some(idx);
        } else {
            call_at[*op] = idx;
        }
    }
    e.push(Entry { op: usize::MAX, is_call: false, order: u64::MAX, ret: None, prev: n, next: n + 1 });
    Entries { e }
}

/// Tries one op of the entry list in the current model state: on success the model is advanced
/// and the undo (if the state changed) returned.
fn try_op(model: &mut JournalModel, op: &Op<'_>, bounds: PageBounds) -> Option<Option<Undo>> {
    match (op.input, op.output) {
        (OpInput::Read { .. }, Some(OpOutput::Read(answer))) => {
            model.read_matches(op.input, answer, bounds).then_some(None)
        }
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

type Memo = rustc_hash::FxHashSet<(Vec<u64>, ModelKey)>;

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
        let (OpInput::Read { from, consistency: Consistency::Reached(at_least), .. }, Some(OpOutput::Read(answer))) =
            (&h.input, &h.output)
        else {
            continue;
        };
        let ok = match answer {
            ReadAnswer::Unserved { .. } => true,
            ReadAnswer::Truncated(v) => v.next_seq >= *at_least && *from < v.first_seq.0 && v.first_seq <= v.next_seq,
            ReadAnswer::Page { from: f, records, view: v } => {
                let end = from + records.len() as u64;
                let held =
                    records.iter().enumerate().all(|(i, r)| acked.get(&(from + i as u64)).is_none_or(|a| *a == r));
                v.next_seq >= *at_least
                    && f.0 == *from
                    && *from >= v.first_seq.0
                    && end <= v.next_seq.0.max(*from)
                    && held
                    && (records.is_empty() == (*from >= v.next_seq.0))
            }
        };
        if !ok {
            return Some(format!(
                "{} read {:?} -> {:?} [call {} ns #{}, return {:?} ns #{:?}]: \
                 no state of the journal gives that answer",
                h.client, h.input, h.output, h.call_ns, h.call_index, h.return_ns, h.return_index
            ));
        }
    }
    None
}

/// Where the search is in trying the candidates of the current prefix: first the calls of the
/// entry list whose verdict leaves the state as it was (one that fits is never tried anywhere
/// else, module doc), then the appends that may land at its `next_seq` (by their place in the
/// list of those landing there), then the calls of the entry list that change the state; `Back`
/// takes back the last placed op.
#[derive(Clone, Copy, Debug)]
enum Cursor {
    Inert(usize),
    Landing(usize),
    Changing(usize),
    Back,
}

/// One placed op, and how to take it back.
#[derive(Debug)]
enum Placed {
    /// From the entry list: the index of its call entry.
    Entry { call: usize, undo: Option<Undo> },
    /// An append that landed: the op and its place among the candidates landing at that tail.
    Landed { op: usize, slot: usize, undo: Undo },
}

/// The search's state.
struct Search<'a, 'h> {
    ops: &'a [Op<'h>],
    entries: Entries,
    model: JournalModel,
    /// Appends that may land at a tail, by tail, in call order.
    landing_at: BTreeMap<u64, Vec<usize>>,
    linearized: Vec<u64>,
    placed_in_class: Vec<usize>,
    memo: Memo,
    stack: Vec<Placed>,
    known_left: usize,
    deepest: (usize, usize),
    /// The `first_seq`s and `next_seq`s the unplaced answered calls must be placed at (counts).
    /// Both only grow, so a prefix past the least of either can never place that call.
    want_first: BTreeMap<u64, usize>,
    want_next: BTreeMap<u64, usize>,
}

fn add(m: &mut BTreeMap<u64, usize>, k: Option<u64>) {
    if let Some(k) = k {
        *m.entry(k).or_default() += 1;
    }
}

fn remove(m: &mut BTreeMap<u64, usize>, k: Option<u64>) {
    if let Some(k) = k
        && let Some(n) = m.get_mut(&k)
    {
        *n -= 1;
        if *n == 0 {
            m.remove(&k);
        }
    }
}

impl Search<'_, '_> {
    fn class_allows(&mut self, op: usize) -> bool {
        self.ops[op].class.is_none_or(|(c, rank)| {
            if self.placed_in_class.len() <= c {
                self.placed_in_class.resize(c + 1, 0);
            }
            self.placed_in_class[c] == rank
        })
    }

    /// Marks `op` placed unless (placed set, state) was explored before.
    fn mark(&mut self, op: usize) -> bool {
        self.linearized[op / 64] |= 1 << (op % 64);
        if !self.memo.insert((self.linearized.clone(), self.model.key())) {
            self.linearized[op / 64] &= !(1 << (op % 64));
            return false;
        }
        if self.ops[op].output.is_some() {
            self.known_left -= 1;
        }
        let (first, next) = self.ops[op].pins;
        remove(&mut self.want_first, first);
        remove(&mut self.want_next, next);
        if let Some((c, _)) = self.ops[op].class {
            self.placed_in_class[c] += 1;
        }
        if self.stack.len() + 1 > self.deepest.0 {
            self.deepest = (self.stack.len() + 1, op);
        }
        true
    }

    fn unmark(&mut self, op: usize) {
        self.linearized[op / 64] &= !(1 << (op % 64));
        if self.ops[op].output.is_some() {
            self.known_left += 1;
        }
        let (first, next) = self.ops[op].pins;
        add(&mut self.want_first, first);
        add(&mut self.want_next, next);
        if let Some((c, _)) = self.ops[op].class {
            self.placed_in_class[c] -= 1;
        }
    }

    fn placed(&self, op: usize) -> bool {
        self.linearized[op / 64] & (1 << (op % 64)) != 0
    }

    /// The first candidate of a new prefix, or `Back` when the prefix is past the state some
    /// unplaced answered call must be placed at.
    fn fresh(&self) -> Cursor {
        let v = self.model.view();
        let past = |m: &BTreeMap<u64, usize>, now: u64| m.first_key_value().is_some_and(|(k, _)| *k < now);
        if past(&self.want_first, v.first_seq.0) || past(&self.want_next, v.next_seq.0) {
            return Cursor::Back;
        }
        Cursor::Inert(self.entries.e[0].next)
    }

    /// Tries the `slot`th append that may land at the current tail; `None` when there is none.
    fn try_landing(&mut self, slot: usize) -> Option<Cursor> {
        let tail = self.model.view().next_seq.0;
        let op = *self.landing_at.get(&tail)?.get(slot)?;
        let next = Cursor::Landing(slot + 1);
        if self.placed(op) || !self.class_allows(op) || self.ops[op].source.call_index > self.entries.frontier() {
            return Some(next);
        }
        let (_, undo) = self.model.apply(self.ops[op].input);
        let Some(undo) = undo else { return Some(next) };
        if !self.mark(op) {
            self.model.undo(undo);
            return Some(next);
        }
        self.stack.push(Placed::Landed { op, slot, undo });
        Some(self.fresh())
    }

    /// Takes back the last placed op; returns where to go on, or `None` when nothing is placed.
    fn backtrack(&mut self) -> Option<Cursor> {
        match self.stack.pop()? {
            Placed::Landed { op, slot, undo } => {
                self.model.undo(undo);
                self.unmark(op);
                Some(Cursor::Landing(slot + 1))
            }
            Placed::Entry { call, undo } => {
                let op = self.entries.e[call].op;
                let changed = undo.is_some();
                if let Some(u) = undo {
                    self.model.undo(u);
                }
                self.entries.unlift(call);
                self.unmark(op);
                // An op that left the state as it was is tried nowhere else (module doc): go
                // on backtracking.
                Some(if changed { Cursor::Changing(self.entries.e[call].next) } else { Cursor::Back })
            }
        }
    }
}

/// Checks one journal's history against the sequential model of a journal of `mode`.
#[must_use]
pub fn check(history: &[HistoryOp], mode: WriterMode, bounds: PageBounds, step_budget: u64) -> Verdict {
    if let Some(detail) = stale_read_violation(history) {
        return Verdict::Violation { detail };
    }
    let model = JournalModel::new(mode);
    let landing = (mode == WriterMode::Multi).then(|| Landing::of(history, bounds));
    let ops = prepare(history, &model, landing.as_ref());
    let mut landing_at: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (i, op) in ops.iter().enumerate() {
        for at in op.lands_at.iter().flatten() {
            landing_at.entry(*at).or_default().push(i);
        }
    }
    let entries = build_entries(&ops);
    let end = entries.e.len() - 1;
    let mut s = Search {
        ops: &ops,
        entries,
        model,
        landing_at,
        linearized: vec![0u64; ops.len().div_ceil(64)],
        placed_in_class: Vec::new(),
        memo: HashSet::default(),
        stack: Vec::new(),
        known_left: ops.iter().filter(|o| o.output.is_some()).count(),
        deepest: (0, 0),
        want_first: BTreeMap::new(),
        want_next: BTreeMap::new(),
    };
    for op in &ops {
        add(&mut s.want_first, op.pins.0);
        add(&mut s.want_next, op.pins.1);
    }
    // The op whose return was last found unplaceable.
    let mut stuck: Option<usize> = None;
    let mut steps = 0u64;
    let mut cursor = s.fresh();
    while s.known_left > 0 {
        steps += 1;
        if steps > step_budget {
            return Verdict::BudgetExhausted { ops: ops.len() };
        }
        let (at, inert) = match cursor {
            Cursor::Landing(slot) => {
                cursor = s.try_landing(slot).unwrap_or(Cursor::Changing(s.entries.e[0].next));
                continue;
            }
            Cursor::Inert(at) => (at, true),
            Cursor::Changing(at) => (at, false),
            Cursor::Back => (end, false),
        };
        let entry = s.entries.e[at];
        if at != end && entry.is_call {
            cursor = if inert { Cursor::Inert(entry.next) } else { Cursor::Changing(entry.next) };
            if ops[entry.op].inert == inert
                && s.class_allows(entry.op)
                && let Some(undo) = try_op(&mut s.model, &ops[entry.op], bounds)
            {
                if s.mark(entry.op) {
                    s.stack.push(Placed::Entry { call: at, undo });
                    s.entries.lift(at);
                    cursor = s.fresh();
                } else if let Some(u) = undo {
                    s.model.undo(u);
                }
            }
            continue;
        }
        if inert {
            // No call whose verdict leaves the state as it was fits here: the others.
            cursor = if s.landing_at.is_empty() { Cursor::Changing(s.entries.e[0].next) } else { Cursor::Landing(0) };
            continue;
        }
        // A return whose call could not be placed (or the end): backtrack.
        if at != end {
            stuck = Some(entry.op);
        }
        let Some(next) = s.backtrack() else {
            return Verdict::Violation { detail: describe(stuck.map(|i| &ops[i]), &ops, s.deepest) };
        };
        cursor = next;
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

#[cfg(test)]
mod tests {
    //! The search's shortcuts (calls that change nothing tried first and nowhere else, landing
    //! places of ambiguous appends, interchangeable classes, the states unplaced calls pin) are
    //! checked against the definition: a brute-force search over every order of every subset of
    //! the ambiguous calls that respects real time, with no shortcut at all.

    use paros_core::journal::JournalView;
    use paros_core::{JournalKey, LeaderUuid, NodeId, Seq};

    use super::*;
    use crate::rng::SimRng;

    const BOUNDS: PageBounds = PageBounds { records_max: 3, bytes_max: 4096 };

    fn u(n: u64) -> LeaderUuid {
        LeaderUuid::new(u128::from(n)).expect("non-zero")
    }

    /// True when some order of the answered calls and some of the ambiguous ones, each after
    /// every call that returned before it was called, gives every answer.
    fn brute(history: &[HistoryOp], mode: WriterMode) -> bool {
        let ops: Vec<&HistoryOp> = history.iter().filter(|o| !o.never_proposed()).collect();
        fn go(ops: &[&HistoryOp], done: &mut Vec<bool>, model: &mut JournalModel) -> bool {
            let left: Vec<usize> = (0..ops.len()).filter(|i| !done[*i]).collect();
            if left.iter().all(|i| ops[*i].is_ambiguous()) {
                return true;
            }
            for &i in &left {
                // Every answered call that returned before this one was called comes first.
                if left
                    .iter()
                    .any(|j| !ops[*j].is_ambiguous() && ops[*j].return_index.is_some_and(|r| r < ops[i].call_index))
                {
                    continue;
                }
                let op = ops[i];
                let (fits, undo) = match (&op.input, &op.output) {
                    (OpInput::Read { .. }, Some(OpOutput::Read(a))) => (model.read_matches(&op.input, a, BOUNDS), None),
                    (OpInput::Read { .. }, _) => (false, None),
                    (_, Some(OpOutput::Call(CallAnswer::Verdict(o)))) => {
                        let (outcome, undo) = model.apply(&op.input);
                        (outcome == *o, undo)
                    }
                    _ => {
                        let (_, undo) = model.apply(&op.input);
                        (true, undo)
                    }
                };
                if fits {
                    done[i] = true;
                    if go(ops, done, model) {
                        return true;
                    }
                    done[i] = false;
                }
                if let Some(u) = undo {
                    model.undo(u);
                }
            }
            false
        }
        let mut done = vec![false; ops.len()];
        go(&ops, &mut done, &mut JournalModel::new(mode))
    }

    /// A random small history of `mode`: calls with random overlapping intervals, answered as a
    /// random linearization answers them, some left without an answer (landed or not), then
    /// maybe one answer changed. Whether it is linearizable is the brute force's to say.
    fn random_history(rng: &mut SimRng, mode: WriterMode) -> Vec<HistoryOp> {
        let n = rng.between(2, 10) as usize;
        let mut inputs = Vec::new();
        let mut sent: Vec<Vec<Bytes>> = Vec::new();
        for i in 0..n {
            let records = if !sent.is_empty() && rng.chance(200_000) {
                sent[rng.below(sent.len() as u64) as usize].clone()
            } else {
                (0..rng.between(0, 2))
                    .map(|k| Bytes::from(format!("r{i}.{k}{}", "x".repeat(rng.below(6) as usize))))
                    .collect()
            };
            let fenced = (mode == WriterMode::Single) != rng.chance(100_000);
            let leader = fenced.then(|| u(rng.between(1, 2)));
            let input = match rng.below(10) {
                0..=3 => {
                    sent.push(records.clone());
                    OpInput::Write { leader, seq: rng.below(4), records }
                }
                4 => OpInput::Truncate { leader, up_to: rng.below(4) },
                5 => OpInput::SetLeader {
                    new: u(rng.between(1, 2)),
                    old: rng.chance(500_000).then(|| u(rng.between(1, 2))),
                },
                _ => OpInput::Read {
                    from: rng.below(4),
                    limit: rng.below(3) as u32,
                    max_bytes: if rng.chance(500_000) { 0 } else { rng.between(1, 16) as u32 },
                    wait_ticks: 0,
                    consistency: Consistency::Linearizable,
                },
            };
            inputs.push(input);
        }
        // Intervals: calls in order, returns a little later; the effect at a point inside.
        let mut events: Vec<(u64, usize, bool)> = Vec::new();
        let mut points = Vec::new();
        for (i, _) in inputs.iter().enumerate() {
            let call = 10 * i as u64 + rng.below(10);
            let ret = call + rng.between(1, 50);
            events.push((call, i, false));
            events.push((ret, i, true));
            points.push((call + rng.between(0, ret - call), i));
        }
        points.sort_unstable();
        let mut model = JournalModel::new(mode);
        let mut records: Vec<Bytes> = Vec::new();
        let mut outputs: Vec<Option<OpOutput>> = vec![None; n];
        for (_, i) in points {
            let ambiguous = rng.chance(250_000);
            if ambiguous && rng.chance(500_000) {
                continue; // never landed
            }
            let out = match &inputs[i] {
                OpInput::Read { from, limit, max_bytes, .. } => {
                    let v = model.view();
                    let answer = if *from < v.first_seq.0 {
                        ReadAnswer::Truncated(v)
                    } else {
                        let lim = if *limit == 0 { BOUNDS.records_max } else { *limit } as usize;
                        let max = if *max_bytes == 0 { BOUNDS.bytes_max } else { *max_bytes } as usize;
                        let mut page: Vec<Bytes> = Vec::new();
                        for r in (*from..v.next_seq.0).filter_map(|p| records.get(p as usize)) {
                            let bytes: usize = page.iter().map(Bytes::len).sum();
                            if page.len() == lim || (!page.is_empty() && bytes + r.len() > max) {
                                break;
                            }
                            page.push(r.clone());
                        }
                        ReadAnswer::Page { from: Seq(*from), records: page, view: v }
                    };
                    OpOutput::Read(answer)
                }
                input => {
                    let (o, _) = model.apply(input);
                    if let (Outcome::Accepted { .. }, OpInput::Write { records: r, .. }) = (o, input) {
                        records.extend(r.iter().cloned());
                    }
                    OpOutput::Call(CallAnswer::Verdict(o))
                }
            };
            if !ambiguous || matches!(inputs[i], OpInput::Read { .. }) {
                outputs[i] = Some(out);
            }
        }
        // Maybe break one answer.
        if rng.chance(500_000) {
            let i = rng.below(n as u64) as usize;
            outputs[i] = match outputs[i].take() {
                Some(OpOutput::Call(CallAnswer::Verdict(Outcome::Accepted { seq, count, view }))) => {
                    Some(OpOutput::Call(CallAnswer::Verdict(Outcome::Accepted { seq: Seq(seq.0 + 1), count, view })))
                }
                Some(OpOutput::Read(ReadAnswer::Page { from, mut records, view })) => {
                    if records.is_empty() {
                        records.push(Bytes::from("forged"));
                    } else {
                        records.reverse();
                        records.truncate(1);
                    }
                    Some(OpOutput::Read(ReadAnswer::Page {
                        from,
                        records,
                        view: JournalView { next_seq: Seq(view.next_seq.0.max(from.0 + 1)), ..view },
                    }))
                }
                Some(OpOutput::Call(CallAnswer::Verdict(o))) => Some(OpOutput::Call(CallAnswer::Verdict(match o {
                    Outcome::Refused(v) => Outcome::Accepted {
                        seq: v.next_seq,
                        count: 1,
                        view: JournalView { next_seq: v.next_seq.plus(1), ..v },
                    },
                    other => Outcome::Refused(other.view().unwrap_or_default()),
                }))),
                other => other,
            };
        }
        events.sort_unstable();
        let mut index = vec![(0u64, None); n];
        for (k, (_, i, is_return)) in events.iter().enumerate() {
            let k = k as u64 + 1;
            if *is_return {
                index[*i].1 = Some(k);
            } else {
                index[*i].0 = k;
            }
        }
        inputs
            .into_iter()
            .zip(outputs)
            .zip(index)
            .filter(|((input, output), _)| output.is_some() || !matches!(input, OpInput::Read { .. }))
            .map(|((input, output), (call, ret))| {
                let ret = output.as_ref().and(ret);
                HistoryOp {
                    journal: JournalKey::default(),
                    client: "c".into(),
                    input,
                    output,
                    call_ns: call,
                    return_ns: ret,
                    call_index: call,
                    return_index: ret,
                    to: NodeId(1),
                    server: ret.map(|_| NodeId(1)),
                    probe: None,
                    report: None,
                }
            })
            .collect()
    }

    #[test]
    fn the_search_agrees_with_brute_force_on_small_random_histories() {
        let mut rng = SimRng::new(29);
        let (mut legal, mut illegal) = (0, 0);
        for case in 0..10000 {
            let mode = if case % 3 == 0 { WriterMode::Single } else { WriterMode::Multi };
            let history = random_history(&mut rng, mode);
            let truth = brute(&history, mode);
            let verdict = check(&history, mode, BOUNDS, 1_000_000);
            match (&verdict, truth) {
                (Verdict::Linearizable { .. }, true) => legal += 1,
                (Verdict::Violation { .. }, false) => illegal += 1,
                _ => panic!(
                    "case {case} ({mode:?}): the search says {verdict:?}, brute force says {truth}: {history:#?}"
                ),
            }
        }
        assert!(legal > 1000 && illegal > 1000, "both kinds were judged: {legal} legal, {illegal} illegal");
    }
}
