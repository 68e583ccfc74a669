//! Reads: the quorum-watermark linearizable read, `at_least` reads and long-polls at the tail.
//! No leader is involved: any voter or replica serves them from its own fold.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::config::{JournalConfig, Tunables};
use crate::ids::{Life, NodeId, ReadId, Seq, Slot};
use crate::journal::{Fold, JournalState, JournalView, Located, Outcome, WriterMode};
use crate::log::{Log, LogEntry};
use crate::message::{Message, Outbound};
use crate::wire::{Consistency, ReadAnswer, ReadRequest};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Waiting to join the next watermark round.
    Unconfirmed,
    /// Waiting for a quorum of watermarks in round `.0`.
    Confirming(u64),
    /// Waiting for the fold to cover every slot below `.0`, the target of round `.1` so far:
    /// a later watermark of that round may lower it (see [`watermark_target`]).
    Covering(Slot, u64),
    /// Waiting for the fold to reach `next_seq ≥ .0` (an at-least read).
    Reaching(Seq),
    /// At the tail: waiting for a record or a truncation until tick `.0`.
    Polling(u64),
}

#[derive(Clone, Debug)]
struct Pending {
    request: ReadRequest,
    stage: Stage,
    /// The tick the read arrived at.
    since: u64,
    /// The tick after which a read not yet at the tail is answered `Unserved`.
    deadline: u64,
}

/// Ticks a watermark round waits for a quorum before its reads start a new one.
pub const WATERMARK_RETRY_TICKS: u64 = 2;

/// Whether a server may serve reads yet: a replica that boots serves none until its fold
/// covers a quorum's watermark taken after it started (every slot chosen before it booted),
/// confirmed through the same rounds as a linearizable read. A voter's gate is always open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Serving.
    Open,
    /// Asking a quorum of acceptors for their watermark (`bootstrapping`).
    Closed(GateStage),
}

/// Where a closed [`Gate`] stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateStage {
    /// Waiting to join the next watermark round (`bootstrapping`).
    Unconfirmed,
    /// Waiting for a quorum of watermarks in round `.0` (`bootstrapping`).
    Confirming(u64),
    /// Waiting for the fold to cover every slot below `.0` (`catching_up`).
    Covering(Slot),
}

/// The reads one journal holds on one server.
#[derive(Clone, Debug)]
pub struct Reads {
    pending: BTreeMap<ReadId, Pending>,
    /// Open watermark rounds: the tick each started at and the replies so far.
    rounds: BTreeMap<u64, (u64, BTreeMap<NodeId, Slot>)>,
    next_round: u64,
    /// The journal's life here: every watermark round carries it, and a watermark that echoes
    /// another life answers a round of an earlier life, not ours (round ids start at 0 in
    /// every life).
    life: Life,
    tick: u64,
    gate: Gate,
}

impl Reads {
    /// No reads yet, in the journal's life `life`, serving.
    #[must_use]
    pub fn new(life: Life) -> Reads {
        Reads { pending: BTreeMap::new(), rounds: BTreeMap::new(), next_round: 0, life, tick: 0, gate: Gate::Open }
    }

    /// No reads yet, and none served until the fold covers a quorum's watermark (see [`Gate`]).
    #[must_use]
    pub fn gated(life: Life) -> Reads {
        Reads { gate: Gate::Closed(GateStage::Unconfirmed), ..Reads::new(life) }
    }

    #[must_use]
    pub fn gate(&self) -> Gate {
        self.gate
    }

    /// True when no read waits here.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Takes a read. Answers `Unserved` at once when `reads_max` reads already wait, saying
    /// the journal is applied up to `applied_to` here (the fold's `next_seq`).
    ///
    /// A linearizable read may wait `read_ticks_max` for its quorum round and its fold, then
    /// up to its `wait_ticks` at the tail. An at-least read waits for the journal, its position
    /// and then a record at the tail, so it waits its own `wait_ticks` in all (at most
    /// `read_ticks_max` for the position, `wait_ticks_max` at the tail), counted from its
    /// arrival: `Unserved` once the position was not reached within it.
    pub fn add(
        &mut self,
        id: ReadId,
        request: ReadRequest,
        applied_to: Seq,
        tunables: &Tunables,
        answers: &mut Vec<(ReadId, ReadAnswer)>,
    ) {
        if self.pending.len() >= tunables.reads_max as usize {
            answers.push((id, ReadAnswer::unserved_at(applied_to)));
            return;
        }
        let (stage, ticks) = match request.consistency {
            Consistency::Linearizable => (Stage::Unconfirmed, tunables.read_ticks_max),
            Consistency::Reached(seq) => (Stage::Reaching(seq), request.wait_ticks.min(tunables.read_ticks_max)),
        };
        let (since, deadline) = (self.tick, self.tick + u64::from(ticks));
        let previous = self.pending.insert(id, Pending { request, stage, since, deadline });
        assert!(previous.is_none(), "a read id is used once");
    }

    /// Starts one watermark round for every read waiting to be confirmed.
    pub fn start_round(&mut self, cfg: &JournalConfig, out: &mut Vec<Outbound>) {
        let round = self.next_round;
        let mut any = false;
        if self.gate == Gate::Closed(GateStage::Unconfirmed) {
            self.gate = Gate::Closed(GateStage::Confirming(round));
            any = true;
        }
        for p in self.pending.values_mut().filter(|p| p.stage == Stage::Unconfirmed) {
            p.stage = Stage::Confirming(round);
            any = true;
        }
        if !any {
            return;
        }
        self.next_round += 1;
        self.rounds.insert(round, (self.tick, BTreeMap::new()));
        for v in &cfg.voters {
            out.push(Outbound { to: *v, message: Message::WatermarkRequest { read: round, life: self.life } });
        }
    }

    /// The journal's configuration changed under the waiting reads (the walk applied a
    /// stop-sign): a quorum round of the old configuration says nothing of slots the new one
    /// chose, so every read being confirmed or covering asks again (docs/reconfiguration.md,
    /// rule 7). Their deadlines stand.
    pub fn reconfigured(&mut self) {
        self.rounds.clear();
        if matches!(self.gate, Gate::Closed(GateStage::Confirming(_) | GateStage::Covering(_))) {
            self.gate = Gate::Closed(GateStage::Unconfirmed);
        }
        for p in self.pending.values_mut() {
            if matches!(p.stage, Stage::Confirming(_) | Stage::Covering(..)) {
                p.stage = Stage::Unconfirmed;
            }
        }
    }

    /// True when a read waits for the fold to cover a slot at or past `next`, the first slot it
    /// has not applied: a slot some acceptor accepted and nobody may be settling.
    #[must_use]
    pub fn waits_past(&self, next: Slot) -> bool {
        matches!(self.gate, Gate::Closed(GateStage::Covering(target)) if target > next)
            || self.pending.values().any(|p| matches!(p.stage, Stage::Covering(target, _) if target > next))
    }

    /// True when a read waits for the fold to reach `next_seq ≥ seq` past `next_seq`, the
    /// fold's own: the server may be behind without knowing it.
    #[must_use]
    pub fn waits_for_seq_past(&self, next_seq: Seq) -> bool {
        self.pending.values().any(|p| matches!(p.stage, Stage::Reaching(seq) if seq > next_seq))
    }

    /// True when a watermark round should be started this round.
    #[must_use]
    pub fn wants_round(&self) -> bool {
        self.gate == Gate::Closed(GateStage::Unconfirmed)
            || self.pending.values().any(|p| p.stage == Stage::Unconfirmed)
    }

    /// An acceptor's watermark for round `round` of life `life`. One for another life answers
    /// a round of an earlier life of this journal here and counts for nothing.
    ///
    /// Once a quorum answered, the round's reads cover its [`watermark_target`]. The round stays
    /// open until every voter answered: each later watermark may lower the target of the reads
    /// still covering it, so a read need not wait for a slot a bare quorum's highest acceptor
    /// holds but nobody chose yet.
    pub fn on_watermark(&mut self, cfg: &JournalConfig, from: NodeId, round: u64, life: Life, up_to: Slot) {
        if life != self.life || !cfg.voters.contains(&from) {
            return;
        }
        let Some((_, replies)) = self.rounds.get_mut(&round) else { return };
        replies.insert(from, up_to);
        let Some(target) = watermark_target(replies.values().copied(), cfg.voters.len()) else { return };
        if replies.len() == cfg.voters.len() {
            self.rounds.remove(&round);
        }
        if self.gate == Gate::Closed(GateStage::Confirming(round)) {
            self.gate = Gate::Closed(GateStage::Covering(target));
        }
        for p in self.pending.values_mut() {
            match p.stage {
                Stage::Confirming(r) if r == round => p.stage = Stage::Covering(target, round),
                Stage::Covering(held, r) if r == round => p.stage = Stage::Covering(held.min(target), round),
                _ => {}
            }
        }
    }

    /// Answers every read the fold can now serve.
    pub fn poll(
        &mut self,
        fold: &Fold,
        log: &Log,
        tunables: &Tunables,
        answers: &mut Vec<(ReadId, ReadAnswer)>,
        fetches: &mut Vec<Fetch>,
    ) {
        let tick = self.tick;
        if matches!(self.gate, Gate::Closed(GateStage::Covering(target)) if fold.next_slot() >= target) {
            self.gate = Gate::Open;
        }
        let mut done = Vec::new();
        for (id, p) in &mut self.pending {
            let ready = match p.stage {
                Stage::Unconfirmed | Stage::Confirming(_) => false,
                Stage::Covering(target, _) => fold.next_slot() >= target,
                Stage::Reaching(seq) => fold.state().next_seq >= seq,
                Stage::Polling(_) => true,
            };
            if !ready {
                continue;
            }
            // What `fold.locate` calls the tail (a position at or past `next_seq` is never below
            // `first_seq`), without its search: `page` locates the read once more anyway.
            let at_tail = p.request.from >= fold.state().next_seq;
            if at_tail {
                let wait = u64::from(p.request.wait_ticks.min(tunables.wait_ticks_max));
                // An at-least read's wait at the tail is what is left of its own wait.
                let poll_until = match p.request.consistency {
                    Consistency::Linearizable => tick + wait,
                    Consistency::Reached(_) => p.since + wait,
                };
                match p.stage {
                    Stage::Polling(until) if tick < until => continue,
                    Stage::Polling(_) => {}
                    _ if poll_until > tick => {
                        p.stage = Stage::Polling(poll_until);
                        continue;
                    }
                    _ => {}
                }
            }
            done.push(*id);
            match page(fold, log, &p.request, tunables) {
                Paged::Answer(a) => answers.push((*id, a)),
                Paged::Fetch(page) => fetches.push(Fetch::Page { read: *id, page }),
            }
        }
        for id in done {
            self.pending.remove(&id);
        }
    }

    /// One tick: reads past their deadline are answered `Unserved`, carrying `applied_to`,
    /// the fold's `next_seq` (a long-poll that expires is answered by the next `poll` with an
    /// empty page). Called with every answer the fold allows already given (a `poll` since the
    /// fold last moved), so an at-least read of `Reached(seq)` expires with `applied_to < seq`.
    /// A watermark round that has not heard a quorum after [`WATERMARK_RETRY_TICKS`] is
    /// abandoned and its reads join the next round (a request or a reply was lost): a later
    /// round's target is at least as high, so the read stays linearizable.
    pub fn tick(&mut self, applied_to: Seq, answers: &mut Vec<(ReadId, ReadAnswer)>) {
        self.tick += 1;
        let tick = self.tick;
        let expired: Vec<ReadId> = self
            .pending
            .iter()
            .filter(|(_, p)| !matches!(p.stage, Stage::Polling(_)) && tick > p.deadline)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            self.pending.remove(&id);
            answers.push((id, ReadAnswer::unserved_at(applied_to)));
        }
        let stale: Vec<u64> = self
            .rounds
            .iter()
            .filter(|(_, (started, _))| tick >= started + WATERMARK_RETRY_TICKS)
            .map(|(r, _)| *r)
            .collect();
        for p in self.pending.values_mut() {
            if matches!(p.stage, Stage::Confirming(r) if stale.contains(&r)) {
                p.stage = Stage::Unconfirmed;
            }
        }
        // A closed gate has no deadline: it asks again until a quorum answers.
        if matches!(self.gate, Gate::Closed(GateStage::Confirming(r)) if stale.contains(&r)) {
            self.gate = Gate::Closed(GateStage::Unconfirmed);
        }
        let gate_round = match self.gate {
            Gate::Closed(GateStage::Confirming(r)) => Some(r),
            _ => None,
        };
        let live: Vec<u64> = self
            .pending
            .values()
            .filter_map(|p| match p.stage {
                Stage::Confirming(r) | Stage::Covering(_, r) => Some(r),
                _ => None,
            })
            .chain(gate_round)
            .collect();
        self.rounds.retain(|r, _| live.contains(r));
    }
}

/// The slot a read must see its fold cover, from the watermarks `replies` of a round sent to
/// all `voters` of a configuration; `None` before a quorum answered.
///
/// A write acknowledged before the round began is in a slot `s` a quorum `q` had accepted,
/// and an acceptor's watermark never falls (a copy placed afresh, whose would, does not answer
/// until its walk reaches the configuration it was placed for: `Voter::handle`), so each of
/// those acceptors answers past `s`.
/// Of `k` answers at least `q - (voters - k)` come from them: the `q - (voters - k)`-th highest
/// watermark lies past every such `s`. A bare quorum gives the highest; every voter gives the
/// `q`-th highest, about the chosen prefix, where the highest is a slot still in flight under
/// steady writes.
#[must_use]
pub fn watermark_target(replies: impl IntoIterator<Item = Slot>, voters: usize) -> Option<Slot> {
    let mut marks: Vec<Slot> = replies.into_iter().collect();
    let quorum = crate::config::quorum_of(voters);
    let missing = voters.checked_sub(marks.len())?;
    let rank = quorum.checked_sub(missing).filter(|r| *r > 0)?;
    marks.sort_unstable_by(|a, b| b.cmp(a));
    marks.get(rank - 1).copied()
}

/// A page, or what to read from the store to build it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Paged {
    Answer(ReadAnswer),
    /// The page starts below the window (boxed: a fetch carries fold states, an answer a page).
    Fetch(Box<PageFetch>),
}

/// The page size a request asks for, within the tunables: records and record bytes.
fn page_bounds(request: &ReadRequest, tunables: &Tunables) -> (usize, usize) {
    let limit = match request.limit {
        0 => tunables.page_records_max,
        n => n.min(tunables.page_records_max),
    } as usize;
    let bytes_max = match request.max_bytes {
        0 => tunables.page_bytes_max,
        n => n.min(tunables.page_bytes_max),
    } as usize;
    (limit, bytes_max)
}

/// Collects records into a page within its bounds. `push` returns false once the page is full.
struct Collect {
    limit: usize,
    bytes_max: usize,
    records: Vec<Bytes>,
    bytes: usize,
}

impl Collect {
    fn new((limit, bytes_max): (usize, usize)) -> Collect {
        Collect { limit, bytes_max, records: Vec::new(), bytes: 0 }
    }

    fn push(&mut self, r: &Bytes) -> bool {
        if self.records.len() == self.limit || (!self.records.is_empty() && self.bytes + r.len() > self.bytes_max) {
            return false;
        }
        self.bytes += r.len();
        self.records.push(r.clone());
        true
    }
}

/// A page from `request.from`, as this fold and log hold it.
#[must_use]
pub fn page(fold: &Fold, log: &Log, request: &ReadRequest, tunables: &Tunables) -> Paged {
    let view = fold.state().view();
    let bounds = page_bounds(request, tunables);
    let mut page = Collect::new(bounds);
    match fold.locate(request.from) {
        Located::Truncated => Paged::Answer(ReadAnswer::Truncated(view)),
        Located::NotHeld => Paged::Answer(ReadAnswer::unserved_at(view.next_seq)),
        Located::Anchored { slot, state } => {
            let source = Source::Refold { mode: fold.mode(), anchor: slot, state, end: log.start() };
            Paged::Fetch(Box::new(below_window(fold, log, request, source, view, (bounds, true))))
        }
        Located::Indexed { .. } => {
            // The writes the page may read, as far as the index goes: at most a page's records.
            let (limit, _) = bounds;
            let mut writes = Vec::new();
            let mut end = request.from;
            for (slot, start, write_end) in fold.evicted_writes(request.from) {
                if end.0 - request.from.0 >= limit as u64 {
                    break;
                }
                writes.push((slot, start));
                end = write_end;
            }
            // A page cut short of the window by its own bound never needs the window's records.
            let tail = end == fold.window_seq();
            Paged::Fetch(Box::new(below_window(
                fold,
                log,
                request,
                Source::Writes { writes, end },
                view,
                (bounds, tail),
            )))
        }
        Located::Tail | Located::At { .. } => {
            collect_window(fold, log, request.from, &mut page);
            Paged::Answer(ReadAnswer::Page { from: request.from, records: page.records, view })
        }
    }
}

/// The records this fold's window holds from `from` on, through `next_seq`: `(start, records)`
/// with the record at `start` first. When `from` lies below the window (evicted, or never
/// held here) they start at the window's first position instead; when `from` is at or past
/// `next_seq` there are none. What a reader off the node's thread may be handed of a journal
/// (paros-node's read cache): positions never change once applied, so these records answer any
/// later read of them as the fold would, until a truncation hides them.
#[must_use]
pub fn window_records(fold: &Fold, log: &Log, from: Seq) -> (Seq, Vec<Bytes>) {
    let start = from.max(fold.window_seq());
    let mut all = Collect::new((usize::MAX, usize::MAX));
    collect_window(fold, log, start, &mut all);
    (start, all.records)
}

/// The page `request` gets from `records`, the records at positions `[start, start + len)`,
/// bounded as any page is (`limit`, `max_bytes`, the tunables' page bounds; at least one
/// record). `None` when `request.from` lies outside them: only a fold may answer then.
#[must_use]
pub fn page_of<'r>(
    request: &ReadRequest,
    tunables: &Tunables,
    start: Seq,
    records: impl IntoIterator<Item = &'r Bytes>,
    len: usize,
) -> Option<Vec<Bytes>> {
    let skip = usize::try_from(request.from.0.checked_sub(start.0)?).ok()?;
    if skip >= len {
        return None;
    }
    let mut page = Collect::new(page_bounds(request, tunables));
    for r in records.into_iter().skip(skip) {
        if !page.push(r) {
            break;
        }
    }
    Some(page.records)
}

/// A page below the window, from `source`: the store part ends where the window begins, and the
/// page goes on with the window's records, held here now (when `tail` says it may reach them).
fn below_window(
    fold: &Fold,
    log: &Log,
    request: &ReadRequest,
    source: Source,
    view: JournalView,
    (bounds, tail): ((usize, usize), bool),
) -> PageFetch {
    let tail_from = fold.window_seq();
    let mut window = Collect::new(bounds);
    if tail {
        collect_window(fold, log, tail_from, &mut window);
    }
    let tail = window.records;
    PageFetch { source, request: *request, view, tail_from, tail }
}

/// Collects the window's records from `seq` on into `page`, until it is full or the tail.
fn collect_window(fold: &Fold, log: &Log, mut seq: Seq, page: &mut Collect) {
    while let Located::At { slot, start } = fold.locate(seq) {
        let entry = log.entry_at(slot).expect("an indexed write is held");
        let skip = (seq.0 - start.0) as usize;
        for r in &entry.records[skip..] {
            if !page.push(r) {
                return;
            }
            seq = seq.plus(1);
        }
    }
}

/// An answer the host builds from chosen entries read from its store (they left the journal's
/// in-memory window). Chosen entries never change, so serving it later than the step that
/// asked is the same answer; one whose entries were truncated meanwhile is dropped (a
/// catch-up: the laggard asks again and is told the trim point) or answered `Unserved` (a
/// page). The host may serve either as soon as it sees it: neither depends on this round's
/// writes.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Fetch {
    /// Send `to` a `CatchUpResponse` with the chosen entries `[from, end)` (at most
    /// `slots_max`, and past the first at most `bytes_max` record bytes in all, starting
    /// exactly at `from`) and `chosen_up_to`, answering its request of life `life`.
    CatchUp { to: NodeId, life: Life, from: Slot, end: Slot, chosen_up_to: Slot, slots_max: u32, bytes_max: u32 },
    /// Answer read `read` with the page [`PageFetch::build`] makes.
    Page { read: ReadId, page: Box<PageFetch> },
}

/// A page that starts below the window: read the chosen entries it needs from the store (see
/// [`Source`]) and collect the records from `request.from` on. Chosen entries never change, so
/// the page is the one the fold would have served from memory (it may end early, where the
/// store part ends: the client reads on from there).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct PageFetch {
    pub source: Source,
    pub request: ReadRequest,
    /// The view the page reports (the fold's when the read was served).
    pub view: JournalView,
    /// The records held in memory from `tail_from` (the window's first position) on, as many
    /// as one page holds: where the page goes on once the store part reaches the window (none
    /// when the page's indexed writes end before it).
    pub tail_from: Seq,
    pub tail: Vec<Bytes>,
}

/// Where a [`PageFetch`] finds its records in the store.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Source {
    /// Re-fold the chosen entries `[anchor, end)` from `state` (the journal state before
    /// `anchor`) to find which slots hold which positions.
    Refold { mode: WriterMode, anchor: Slot, state: JournalState, end: Slot },
    /// The fold knows the writes exactly: each one's slot and first position, in order, the
    /// first holding `request.from`; `end` is the position after the last. Only their slots are
    /// read.
    Writes { writes: Vec<(Slot, Seq)>, end: Seq },
}

/// The most slots one store read of a [`PageFetch`] asks for. The first read asks for one slot
/// and each next one for twice as many as the last, up to this: a slot may hold a write of
/// many large records, and every slot read is decoded whole, so a page decodes at most about
/// twice the slots it needed (besides the re-fold from its anchor), not this many.
pub const FETCH_CHUNK_SLOTS: u32 = 64;

impl PageFetch {
    /// Builds the page with `read(from, slots_max)`, which returns up to `slots_max` retained
    /// entries from `from` on in slot order (a store's range read), then goes on with the
    /// window's records. A re-fold reads at most [`PageFetch::scan_slots_max`] slots; a page of
    /// indexed writes reads from the first write's slot to the last's at most, in reads that
    /// start at a write's slot. `Unserved` when the entries it needs are gone (truncated
    /// meanwhile) or no record was found within that bound, carrying the view's `next_seq`
    /// (see [`PageFetch::unserved`]).
    ///
    /// # Errors
    /// The first error `read` returns.
    pub fn build<E>(
        &self,
        tunables: &Tunables,
        mut read: impl FnMut(Slot, u32) -> Result<Vec<(Slot, LogEntry)>, E>,
    ) -> Result<ReadAnswer, E> {
        let mut page = Collect::new(page_bounds(&self.request, tunables));
        let reached = match &self.source {
            Source::Refold { mode, anchor, state, end } => {
                let end = Slot(end.0.min(anchor.0.saturating_add(Self::scan_slots_max(tunables))));
                self.refold(Fold::new(*mode, *state, *anchor), end, &mut page, &mut read)?
            }
            Source::Writes { writes, end } => self.read_writes(writes, *end, &mut page, &mut read)?,
        };
        // Reached the window: the page goes on with the records held there, while it has room.
        if reached && !page.records.is_empty() {
            for r in &self.tail {
                if !page.push(r) {
                    break;
                }
            }
        }
        if page.records.is_empty() {
            return Ok(self.unserved());
        }
        Ok(ReadAnswer::Page { from: self.request.from, records: page.records, view: self.view })
    }

    /// Re-folds from `fold` (at the anchor) through the entries below `end`, collecting the
    /// page's records. True when it ended exactly where the window begins.
    fn refold<E>(
        &self,
        mut fold: Fold,
        end: Slot,
        page: &mut Collect,
        read: &mut impl FnMut(Slot, u32) -> Result<Vec<(Slot, LogEntry)>, E>,
    ) -> Result<bool, E> {
        let Source::Refold { end: window_start, .. } = self.source else { unreachable!("a re-fold has an anchor") };
        // The entries re-folded so far: a retry is judged against them, as the fold did.
        let mut held: Vec<(Slot, LogEntry)> = Vec::new();
        let mut next = fold.next_slot();
        let mut chunk_slots = 1;
        'read: while next < end {
            let want = u32::try_from(end.0 - next.0).unwrap_or(u32::MAX).min(chunk_slots);
            chunk_slots = chunk_slots.saturating_mul(2).min(FETCH_CHUNK_SLOTS);
            let chunk = read(next, want)?;
            if chunk.is_empty() {
                break;
            }
            for (slot, entry) in chunk {
                if slot != next || slot >= end {
                    break 'read;
                }
                let judged = {
                    let lookup = |s: Slot| {
                        let i = held.binary_search_by_key(&s, |(h, _)| *h).ok()?;
                        held[i].1.command.entry()
                    };
                    fold.apply(slot, &entry.command, lookup)
                };
                if let (Outcome::Accepted { seq, .. }, Some(e)) = (judged.outcome, entry.command.entry()) {
                    for (i, r) in e.records.iter().enumerate() {
                        if seq.0 + i as u64 >= self.request.from.0 && !page.push(r) {
                            break 'read;
                        }
                    }
                }
                held.push((slot, entry));
                next = slot.next();
            }
        }
        Ok(next == window_start && fold.state().next_seq == self.tail_from)
    }

    /// Reads the slots of `writes` (the rest in between only when a range read spans them),
    /// collecting the page's records. True when it read every one and they end where the
    /// window begins. A slot that no longer holds the write the index names (compacted away
    /// meanwhile) ends the page there.
    fn read_writes<E>(
        &self,
        writes: &[(Slot, Seq)],
        end: Seq,
        page: &mut Collect,
        read: &mut impl FnMut(Slot, u32) -> Result<Vec<(Slot, LogEntry)>, E>,
    ) -> Result<bool, E> {
        let Some(&(last, _)) = writes.last() else { return Ok(false) };
        let mut i = 0;
        let mut chunk_slots = 1;
        while let Some(&(next, _)) = writes.get(i) {
            let want = u32::try_from(last.0 - next.0 + 1).unwrap_or(u32::MAX).min(chunk_slots);
            chunk_slots = chunk_slots.saturating_mul(2).min(FETCH_CHUNK_SLOTS);
            let chunk = read(next, want)?;
            if chunk.first().is_none_or(|(slot, _)| *slot != next) {
                return Ok(false);
            }
            for (slot, entry) in chunk {
                let Some(&(wanted, start)) = writes.get(i) else { break };
                if slot < wanted {
                    // A slot between two writes: a refusal, a no-op, a control command.
                    continue;
                }
                let write_end = writes.get(i + 1).map_or(end, |(_, s)| *s);
                let Some(e) = entry.command.entry().filter(|e| slot == wanted && start.plus(e.count()) == write_end)
                else {
                    return Ok(false);
                };
                for (k, r) in e.records.iter().enumerate() {
                    if start.0 + k as u64 >= self.request.from.0 && !page.push(r) {
                        return Ok(false);
                    }
                }
                i += 1;
            }
        }
        Ok(end == self.tail_from)
    }

    /// The page refused (its entries are gone, or the store could not read them): `Unserved`
    /// by a server that had applied up to the view's `next_seq` when it served the read.
    #[must_use]
    pub fn unserved(&self) -> ReadAnswer {
        ReadAnswer::unserved_at(self.view.next_seq)
    }

    /// The most slots one page's re-fold reads: the anchor stride to reach the first record,
    /// then room for a page of one-record writes and slots that append nothing.
    #[must_use]
    pub fn scan_slots_max(tunables: &Tunables) -> u64 {
        u64::from(tunables.anchor_slots)
            .saturating_mul(2)
            .saturating_add(u64::from(tunables.page_records_max).saturating_mul(4))
            .saturating_add(1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{Command, Entry};

    /// `slots` multi-writer appends of `per_slot` records of `record_bytes` each; record `i` of
    /// the journal is filled with its position's low byte.
    fn appends(slots: u64, per_slot: u64, record_bytes: usize) -> Vec<(Slot, LogEntry)> {
        (0..slots)
            .map(|s| {
                let records =
                    (0..per_slot).map(|i| Bytes::from(vec![(s * per_slot + i) as u8; record_bytes])).collect();
                (
                    Slot(s),
                    LogEntry { ballot: None, command: Command::Write(Entry { leader: None, seq: Seq(0), records }) },
                )
            })
            .collect()
    }

    /// What a store holding `log` answers to a read of up to `max` slots from `from`.
    fn serve(log: &[(Slot, LogEntry)], from: Slot, max: u32) -> Result<Vec<(Slot, LogEntry)>, ()> {
        Ok(log.iter().filter(|(s, _)| *s >= from).take(max as usize).cloned().collect())
    }

    fn fetch(from: Seq, max_bytes: u32, end: Slot) -> PageFetch {
        PageFetch {
            source: Source::Refold { mode: WriterMode::Multi, anchor: Slot(0), state: JournalState::default(), end },
            request: ReadRequest { from, limit: 0, max_bytes, wait_ticks: 0, consistency: Consistency::Linearizable },
            view: JournalView::default(),
            tail_from: Seq(0),
            tail: Vec::new(),
        }
    }

    /// A journal's fold and log, empty, and the reads it holds.
    struct Journal {
        fold: Fold,
        log: Log,
        reads: Reads,
        tunables: Tunables,
    }

    impl Journal {
        fn new(tunables: Tunables) -> Journal {
            Journal {
                fold: Fold::new(WriterMode::Multi, JournalState::default(), Slot(0)),
                log: Log::from_durable(Slot(0), Vec::new()),
                reads: Reads::new(Life::mint(1, 0)),
                tunables,
            }
        }

        fn read(&mut self, id: u64, from: u64, at_least: u64, wait_ticks: u32) -> Vec<(ReadId, ReadAnswer)> {
            let request = ReadRequest {
                from: Seq(from),
                limit: 0,
                max_bytes: 0,
                wait_ticks,
                consistency: Consistency::Reached(Seq(at_least)),
            };
            let mut answers = Vec::new();
            let applied_to = self.fold.state().next_seq;
            self.reads.add(ReadId(id), request, applied_to, &self.tunables, &mut answers);
            answers.extend(self.poll());
            answers
        }

        fn poll(&mut self) -> Vec<(ReadId, ReadAnswer)> {
            let (mut answers, mut fetches) = (Vec::new(), Vec::new());
            self.reads.poll(&self.fold, &self.log, &self.tunables, &mut answers, &mut fetches);
            assert!(fetches.is_empty(), "every record is in the window");
            answers
        }

        /// One tick, then a poll: what was answered.
        fn tick(&mut self) -> Vec<(ReadId, ReadAnswer)> {
            let mut answers = Vec::new();
            self.reads.tick(self.fold.state().next_seq, &mut answers);
            answers.extend(self.poll());
            answers
        }

        /// Applies an append of one record at the fold's next slot.
        fn append(&mut self, record: &'static [u8]) {
            let slot = self.fold.next_slot();
            let command =
                Command::Write(Entry { leader: None, seq: Seq(0), records: vec![Bytes::from_static(record)] });
            self.log.put(slot, None, command.clone().into());
            self.fold.apply(slot, &command, |_| None);
        }

        /// Ticks until something is answered, at most `max` ticks: the tick and the answers.
        fn ticks_until_answered(&mut self, max: u64) -> Option<(u64, Vec<(ReadId, ReadAnswer)>)> {
            (1..=max).find_map(|t| Some(self.tick()).filter(|a| !a.is_empty()).map(|a| (t, a)))
        }
    }

    #[test]
    fn an_at_least_read_the_journal_does_not_reach_is_unserved_after_its_own_wait() {
        let tunables = Tunables { read_ticks_max: 20, ..Tunables::default() };
        for wait_ticks in [0, 1, 3, 7] {
            let mut j = Journal::new(tunables);
            assert_eq!(j.read(1, 0, 1, wait_ticks), vec![], "nothing to serve yet");
            let answered = j.ticks_until_answered(40);
            assert_eq!(
                answered,
                Some((u64::from(wait_ticks) + 1, vec![(ReadId(1), ReadAnswer::unserved_at(Seq(0)))])),
                "a wait of {wait_ticks} ticks ends in the tick after it, not after read_ticks_max"
            );
        }
    }

    #[test]
    fn an_unserved_at_least_read_says_how_far_the_server_applied() {
        let mut j = Journal::new(Tunables { read_ticks_max: 20, reads_max: 1, ..Tunables::default() });
        j.append(b"a");
        j.append(b"b");
        // Parked for position 5, past the prefix [0, 2); one more read finds no room.
        assert_eq!(j.read(1, 0, 5, 3), vec![]);
        assert_eq!(j.read(2, 0, 1, 3), vec![(ReadId(2), ReadAnswer::unserved_at(Seq(2)))], "no room: refused at once");
        assert_eq!(j.tick(), vec![]);
        j.append(b"c");
        assert_eq!(j.poll(), vec![], "position 3 is not position 5");
        let answered = j.ticks_until_answered(40);
        assert_eq!(
            answered,
            Some((3, vec![(ReadId(1), ReadAnswer::Unserved { applied_to: Some(Seq(3)) })])),
            "the wait ran out with the prefix at 3, short of 5: never a page, never before the wait"
        );
    }

    #[test]
    fn an_at_least_read_waits_no_longer_than_read_ticks_max() {
        let mut j = Journal::new(Tunables { read_ticks_max: 4, ..Tunables::default() });
        assert_eq!(j.read(1, 0, 1, 1000), vec![]);
        assert_eq!(j.ticks_until_answered(40), Some((5, vec![(ReadId(1), ReadAnswer::unserved_at(Seq(0)))])));
    }

    #[test]
    fn an_at_least_read_is_served_when_its_position_is_reached_within_its_wait() {
        let mut j = Journal::new(Tunables::default());
        assert_eq!(j.read(1, 0, 1, 5), vec![]);
        assert_eq!(j.tick(), vec![]);
        j.append(b"a");
        let view = j.fold.state().view();
        let page = ReadAnswer::Page { from: Seq(0), records: vec![Bytes::from_static(b"a")], view };
        assert_eq!(j.poll(), vec![(ReadId(1), page)]);
    }

    #[test]
    fn an_at_least_read_at_the_tail_polls_only_what_is_left_of_its_wait() {
        let mut j = Journal::new(Tunables { wait_ticks_max: 10, ..Tunables::default() });
        // Waits for position 1, then at the tail (from 1) for a record: 6 ticks in all.
        assert_eq!(j.read(1, 1, 1, 6), vec![]);
        assert_eq!(j.tick(), vec![]);
        assert_eq!(j.tick(), vec![]);
        j.append(b"a");
        assert_eq!(j.poll(), vec![], "the position is reached and the read waits at the tail");
        let view = j.fold.state().view();
        let empty = ReadAnswer::Page { from: Seq(1), records: vec![], view };
        assert_eq!(j.ticks_until_answered(40), Some((4, vec![(ReadId(1), empty)])), "6 ticks after it arrived");
    }

    #[test]
    fn a_page_of_large_writes_reads_about_the_slots_it_needs_not_a_whole_chunk() {
        // 40 slots of 16 records of 1 KiB; a page of 4 KiB from position 100 (slot 6).
        let log = appends(40, 16, 1024);
        let mut slots_read = 0;
        let answer = fetch(Seq(100), 4096, Slot(40))
            .build(&Tunables::default(), |from, max| {
                let got = serve(&log, from, max)?;
                slots_read += got.len();
                Ok::<_, ()>(got)
            })
            .unwrap();
        let ReadAnswer::Page { from, records, .. } = answer else { panic!("a page: {answer:?}") };
        assert_eq!(from, Seq(100));
        let firsts: Vec<u8> = records.iter().map(|r| r[0]).collect();
        assert_eq!(firsts, vec![100, 101, 102, 103], "the four records from position 100");
        // Slots 0–6 are needed (the re-fold from the anchor and the page's slot).
        assert!((7..=14).contains(&slots_read), "read {slots_read} slots for a page that needed 7");
    }

    /// Writes of two records at slots 5, 6 and 20 (positions 10–15), no-ops in every other
    /// slot below 24.
    fn writes_between_noops() -> Vec<(Slot, LogEntry)> {
        let mut log = Vec::new();
        let mut seq = 10u8;
        for s in 0..24 {
            let command = if [5, 6, 20].contains(&s) {
                let records = vec![Bytes::from(vec![seq]), Bytes::from(vec![seq + 1])];
                seq += 2;
                Command::Write(Entry { leader: None, seq: Seq(0), records })
            } else {
                Command::Control(crate::journal::Control::Noop)
            };
            log.push((Slot(s), LogEntry { ballot: None, command }));
        }
        log
    }

    fn indexed(from: Seq, limit: u32) -> PageFetch {
        let writes = vec![(Slot(5), Seq(10)), (Slot(6), Seq(12)), (Slot(20), Seq(14))];
        PageFetch {
            source: Source::Writes { writes, end: Seq(16) },
            request: ReadRequest { from, limit, max_bytes: 0, wait_ticks: 0, consistency: Consistency::Linearizable },
            view: JournalView::default(),
            tail_from: Seq(16),
            tail: vec![Bytes::from_static(&[16]), Bytes::from_static(&[17])],
        }
    }

    #[test]
    fn a_page_of_indexed_writes_reads_their_slots_jumps_the_gaps_and_goes_on_in_the_window() {
        let log = writes_between_noops();
        let mut asked = Vec::new();
        let answer = indexed(Seq(11), 0)
            .build(&Tunables::default(), |from, max| {
                asked.push((from.0, max));
                serve(&log, from, max)
            })
            .unwrap();
        let ReadAnswer::Page { from, records, .. } = answer else { panic!("a page: {answer:?}") };
        assert_eq!(from, Seq(11));
        let got: Vec<u8> = records.iter().map(|r| r[0]).collect();
        assert_eq!(got, (11..18).collect::<Vec<u8>>(), "positions 11–15 from the store, 16–17 from the window");
        assert_eq!(asked, vec![(5, 1), (6, 2), (20, 1)], "the slots of the writes, not the no-ops from 8 to 19");
    }

    #[test]
    fn a_point_read_of_an_indexed_write_reads_its_one_slot() {
        let log = writes_between_noops();
        let mut asked = Vec::new();
        let answer = indexed(Seq(15), 1)
            .build(&Tunables::default(), |from, max| {
                asked.push((from.0, max));
                serve(&log, from, max)
            })
            .unwrap();
        let ReadAnswer::Page { records, .. } = answer else { panic!("a page: {answer:?}") };
        assert_eq!(records, vec![Bytes::from_static(&[15])]);
        // The plan starts at the write holding 15 when `page` makes it; this one starts lower.
        assert_eq!(asked, vec![(5, 1), (6, 2), (20, 1)]);
        let mut point = indexed(Seq(15), 1);
        point.source = Source::Writes { writes: vec![(Slot(20), Seq(14))], end: Seq(16) };
        asked.clear();
        let answer = point
            .build(&Tunables::default(), |from, max| {
                asked.push((from.0, max));
                serve(&log, from, max)
            })
            .unwrap();
        assert!(matches!(&answer, ReadAnswer::Page { records, .. } if records == &[Bytes::from_static(&[15])]));
        assert_eq!(asked, vec![(20, 1)]);
    }

    #[test]
    fn a_page_of_indexed_writes_whose_slots_are_gone_or_differ_stops_there() {
        let log = writes_between_noops();
        // Compacted below slot 6 meanwhile: the store answers from slot 6 on.
        let compacted: Vec<_> = log.iter().filter(|(s, _)| s.0 >= 6).cloned().collect();
        let answer = indexed(Seq(10), 0).build(&Tunables::default(), |from, max| serve(&compacted, from, max)).unwrap();
        assert_eq!(answer, ReadAnswer::unserved_at(Seq(0)), "the first write is gone: nothing to serve");
        // Slot 20 holds a no-op, not the write the index names: the page ends before it.
        let mut changed = log.clone();
        changed[20].1.command = Command::Control(crate::journal::Control::Noop);
        let answer = indexed(Seq(10), 0).build(&Tunables::default(), |from, max| serve(&changed, from, max)).unwrap();
        let ReadAnswer::Page { records, .. } = answer else { panic!("a page: {answer:?}") };
        assert_eq!(records.iter().map(|r| r[0]).collect::<Vec<u8>>(), vec![10, 11, 12, 13]);
    }

    #[test]
    fn a_page_of_small_writes_grows_its_reads_to_the_chunk_bound() {
        // 600 slots of one 100-byte record: the chunks grow to their bound and the page is whole.
        let log = appends(600, 1, 100);
        let mut reads = 0;
        let answer = fetch(Seq(10), 0, Slot(600))
            .build(&Tunables::default(), |from, max| {
                reads += 1;
                assert!(max <= FETCH_CHUNK_SLOTS);
                serve(&log, from, max)
            })
            .unwrap();
        let ReadAnswer::Page { records, .. } = answer else { panic!("a page: {answer:?}") };
        let page_records = Tunables::default().page_records_max as usize;
        assert_eq!(records.len(), page_records);
        assert!(records.iter().enumerate().all(|(i, r)| r[0] == (10 + i) as u8));
        // 266 slots in reads of 1, 2, 4, …, 64 slots (127), then three of 64: 10 reads.
        assert_eq!(reads, 10);
    }

    #[test]
    fn the_watermark_target_is_the_rank_every_acknowledged_write_is_known_to_reach() {
        let target = |marks: &[u64], voters| watermark_target(marks.iter().map(|m| Slot(*m)), voters);
        assert_eq!(target(&[5], 3), None, "one of three is no quorum");
        assert_eq!(target(&[5, 2], 3), Some(Slot(5)), "a bare quorum: the highest");
        assert_eq!(target(&[5, 2, 3], 3), Some(Slot(3)), "all three: the second highest");
        assert_eq!(target(&[9, 1, 1], 5), Some(Slot(9)));
        assert_eq!(target(&[9, 1, 1, 4], 5), Some(Slot(4)));
        assert_eq!(target(&[9, 1, 1, 4, 2], 5), Some(Slot(2)), "all five: the third highest");
        assert_eq!(target(&[7], 1), Some(Slot(7)));
        assert_eq!(target(&[], 1), None);
    }

    #[test]
    fn a_linearizable_read_covers_a_lower_target_once_every_voter_answered() {
        let mut j = Journal::new(Tunables { read_ticks_max: 20, ..Tunables::default() });
        let voters: Vec<NodeId> = (1..=3).map(NodeId).collect();
        let cfg = JournalConfig { mode: WriterMode::Multi, voters: voters.clone(), learners: Vec::new() };
        for record in [b"a", b"b", b"c"] {
            j.append(record);
        }
        let request =
            ReadRequest { from: Seq(0), limit: 0, max_bytes: 0, wait_ticks: 0, consistency: Consistency::Linearizable };
        let mut answers = Vec::new();
        j.reads.add(ReadId(1), request, Seq(3), &j.tunables, &mut answers);
        let mut out = Vec::new();
        j.reads.start_round(&cfg, &mut out);
        assert_eq!(out.len(), 3, "the round asks every voter");
        let life = Life::mint(1, 0);
        // The leader's acceptor holds slot 6 in flight; the second voter has accepted through 2.
        j.reads.on_watermark(&cfg, voters[0], 0, life, Slot(7));
        j.reads.on_watermark(&cfg, voters[1], 0, life, Slot(3));
        assert_eq!(j.poll(), vec![], "a bare quorum's highest watermark is past the fold");
        assert!(j.reads.waits_past(Slot(3)));
        // The third voter has accepted through 3: two of three have nothing past 3, so no write
        // acknowledged before the round lies past it.
        j.reads.on_watermark(&cfg, voters[2], 0, life, Slot(4));
        assert_eq!(j.poll(), vec![], "the second highest, 4, is still one past the fold");
        j.append(b"d");
        let answered = j.poll();
        assert_eq!(answered.len(), 1, "the fold covers the lowered target: served without slots 4 to 6");
        assert!(matches!(&answered[0], (ReadId(1), ReadAnswer::Page { .. })), "{answered:?}");
        // A watermark arriving once the round is over counts for nothing.
        j.reads.on_watermark(&cfg, voters[2], 0, life, Slot(0));
        assert!(j.reads.is_empty());
    }

    #[test]
    fn a_later_watermark_never_raises_a_target() {
        let mut j = Journal::new(Tunables { read_ticks_max: 20, ..Tunables::default() });
        let voters: Vec<NodeId> = (1..=3).map(NodeId).collect();
        let cfg = JournalConfig { mode: WriterMode::Multi, voters: voters.clone(), learners: Vec::new() };
        j.append(b"a");
        let request =
            ReadRequest { from: Seq(0), limit: 0, max_bytes: 0, wait_ticks: 0, consistency: Consistency::Linearizable };
        j.reads.add(ReadId(1), request, Seq(1), &j.tunables, &mut Vec::new());
        j.reads.start_round(&cfg, &mut Vec::new());
        let life = Life::mint(1, 0);
        j.reads.on_watermark(&cfg, voters[0], 0, life, Slot(1));
        j.reads.on_watermark(&cfg, voters[1], 0, life, Slot(0));
        j.reads.on_watermark(&cfg, voters[2], 0, life, Slot(9));
        assert_eq!(j.poll().len(), 1, "targets 1, then the second highest of 1, 0, 9: still 1, covered");
    }
}
