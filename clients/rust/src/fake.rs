//! An in-memory [`JournalService`] for tests: one single-writer journal folded by paros-core's
//! own [`Fold`], so every verdict is the one a cell would give, plus a script of faults.
//!
//! It is part of the public API (not `#[cfg(test)]`) so that other crates' tests can drive the
//! library against it; it links nothing beyond what the library links. It is a test double:
//! its call history grows without bound, which is fine for a test and wrong for anything else.
//!
//! What it can be made to do:
//! - answer calls with [`Fault`]s from a script, in order (lose the answer after applying the
//!   call, drop the request, redirect, be busy, refuse to route);
//! - redirect every call that names a server other than its leader node
//!   ([`FakeService::set_leader_node`]);
//! - act as another writer ([`FakeService::claim_as`], [`FakeService::write_as`]) and truncate
//!   behind a reader's back ([`FakeService::truncate_to`]);
//! - answer reads `Unserved` or `UnknownJournal` from a script;
//! - take time over each call ([`FakeService::set_call_delay`]) so that several are in flight at
//!   once, and record the most write bytes ever in flight at once
//!   ([`FakeService::peak_bytes_in_flight`]).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use paros_core::journal::{Command, Entry, Fold, JournalState, JournalView, Outcome, WriterMode};
use paros_core::{Call, CallAnswer, CallId, Consistency, LeaderUuid, NodeId, Seq, Slot};

use crate::service::ReadAnswer;
use crate::service::{CallReply, JournalService, ReadParams, Route};

/// What the fake does with one call, instead of answering it plainly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Applies the call, then loses the answer ([`CallReply::NoAnswer`]).
    LoseAnswer,
    /// Loses the request: nothing is applied ([`CallReply::NoAnswer`]).
    DropRequest,
    /// Applies the call and answers `NoVerdict`.
    NoVerdict,
    /// Answers [`CallReply::NotSent`]; nothing is applied.
    NotSent,
    /// Answers `Busy`; nothing is applied.
    Busy,
    /// Answers `Redirect{leader}`; nothing is applied.
    Redirect(Option<NodeId>),
    /// Answers [`CallReply::UnknownJournal`].
    UnknownJournal,
    /// No fault: answers plainly (a placeholder to script a later call).
    Pass,
    /// Another writer claims the journal with this uuid just before the call is applied.
    ClaimedBefore(LeaderUuid),
    /// Answers as a fold that started from a trim point does: a `Duplicate` comes back as
    /// `Refused(view)` (the fold cannot see the write it would match).
    Blind,
    /// Another writer claims the journal with this uuid and appends one record `intruder` just
    /// before the call is applied.
    OvertakenBy(LeaderUuid),
}

/// What the fake does with one read, instead of answering it plainly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFault {
    /// The read is answered `Unserved`, saying the journal is applied up to its `next_seq`.
    Unserved,
    /// The read is answered `UnknownJournal`.
    UnknownJournal,
}

#[derive(Debug)]
struct State {
    fold: Fold,
    log: BTreeMap<Slot, Command>,
    records: BTreeMap<u64, Bytes>,
    faults: VecDeque<Fault>,
    read_faults: VecDeque<ReadFault>,
    leader_node: Option<NodeId>,
    call_delay: Duration,
    bytes_in_flight: u64,
    peak_bytes_in_flight: u64,
    calls: Vec<(Call, Route)>,
    /// The id each call arrived with, in the order of `calls`.
    call_ids: Vec<CallId>,
    reads: u64,
    /// Calls are applied in the order they arrived, whatever order their delays end in: the
    /// ticket whose turn it is, and the tickets that are over.
    turn: u64,
    tickets: u64,
    over: std::collections::BTreeSet<u64>,
}

impl State {
    fn finish(&mut self, ticket: u64) {
        self.over.insert(ticket);
        while self.over.remove(&self.turn) {
            self.turn += 1;
        }
    }
}

/// The in-memory journal service. See the [module documentation](self).
#[derive(Debug)]
pub struct FakeService {
    journal: String,
    servers: Vec<NodeId>,
    page_records_max: u32,
    state: Mutex<State>,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FakeService {
    /// A fake serving the empty single-writer journal `journal` from `servers` (empty: the
    /// fake routes by itself, as a gateway does).
    pub fn new(journal: &str, servers: Vec<NodeId>) -> FakeService {
        FakeService {
            journal: journal.to_owned(),
            servers,
            page_records_max: 256,
            state: Mutex::new(State {
                fold: Fold::new(WriterMode::Single, JournalState::default(), Slot(0)),
                log: BTreeMap::new(),
                records: BTreeMap::new(),
                faults: VecDeque::new(),
                read_faults: VecDeque::new(),
                leader_node: None,
                call_delay: Duration::ZERO,
                bytes_in_flight: 0,
                peak_bytes_in_flight: 0,
                calls: vec![],
                call_ids: vec![],
                reads: 0,
                turn: 0,
                tickets: 0,
                over: std::collections::BTreeSet::new(),
            }),
        }
    }

    /// Queues faults for the next calls, in order.
    pub fn script(&self, faults: impl IntoIterator<Item = Fault>) {
        lock(&self.state).faults.extend(faults);
    }

    /// Queues faults for the next reads, in order.
    pub fn script_reads(&self, faults: impl IntoIterator<Item = ReadFault>) {
        lock(&self.state).read_faults.extend(faults);
    }

    /// Makes every call naming another server than `node` a redirect to `node`.
    pub fn set_leader_node(&self, node: Option<NodeId>) {
        lock(&self.state).leader_node = node;
    }

    /// How long each call takes before it is applied and answered.
    pub fn set_call_delay(&self, delay: Duration) {
        lock(&self.state).call_delay = delay;
    }

    /// The journal's view now.
    pub fn view(&self) -> JournalView {
        lock(&self.state).fold.state().view()
    }

    /// The retained records, from `first_seq`.
    pub fn records(&self) -> Vec<Bytes> {
        lock(&self.state).records.values().cloned().collect()
    }

    /// Every call received, with its route, in order.
    pub fn calls(&self) -> Vec<(Call, Route)> {
        lock(&self.state).calls.clone()
    }

    /// The id each call received carried, in order.
    pub fn call_ids(&self) -> Vec<CallId> {
        lock(&self.state).call_ids.clone()
    }

    /// The reads received.
    pub fn reads(&self) -> u64 {
        lock(&self.state).reads
    }

    /// The most write bytes that were ever inside [`JournalService::call`] at once.
    pub fn peak_bytes_in_flight(&self) -> u64 {
        lock(&self.state).peak_bytes_in_flight
    }

    /// Applies a command as if another client's call had been chosen.
    pub fn apply(&self, call: Call) -> Outcome {
        lock(&self.state).apply(call)
    }

    /// Another writer claims the journal with `uuid`.
    pub fn claim_as(&self, uuid: LeaderUuid) -> Outcome {
        let mut state = lock(&self.state);
        let old = state.fold.state().leader;
        state.apply(Call::SetLeader { new: uuid, old })
    }

    /// The writer in force writes `records` at the tail.
    pub fn write_as(&self, records: Vec<Bytes>) -> Outcome {
        let mut state = lock(&self.state);
        let s = *state.fold.state();
        state.apply(Call::Write { leader: s.leader, seq: s.next_seq, records })
    }

    /// The writer in force truncates below `up_to`.
    pub fn truncate_to(&self, up_to: Seq) -> Outcome {
        let mut state = lock(&self.state);
        let leader = state.fold.state().leader;
        state.apply(Call::Truncate { leader, up_to })
    }

    fn page(&self, state: &State, read: ReadParams) -> ReadAnswer {
        let view = state.fold.state().view();
        if read.from < view.first_seq {
            return ReadAnswer::Truncated { view };
        }
        let limit = if read.limit == 0 { self.page_records_max } else { read.limit.min(self.page_records_max) };
        let mut records = vec![];
        let mut bytes = 0u64;
        for (_, record) in state.records.range(read.from.0..).take(limit as usize) {
            if !records.is_empty() && bytes + record.len() as u64 > u64::from(read.max_bytes) {
                break;
            }
            bytes += record.len() as u64;
            records.push(record.clone());
        }
        ReadAnswer::Page { from: read.from, records, view }
    }
}

impl State {
    fn apply(&mut self, call: Call) -> Outcome {
        let command = call.into_command();
        let slot = self.fold.next_slot();
        self.log.insert(slot, command.clone());
        let log = &self.log;
        let judged = self.fold.apply(slot, &command, |s| log.get(&s).and_then(Command::entry));
        match judged.outcome {
            Outcome::Accepted { seq, .. } => {
                if let Command::Write(Entry { records, .. }) = &command {
                    for (i, record) in (0u64..).zip(records) {
                        self.records.insert(seq.0 + i, record.clone());
                    }
                }
            }
            Outcome::Trimmed(view) => {
                self.records = self.records.split_off(&view.first_seq.0);
            }
            _ => {}
        }
        judged.outcome
    }
}

/// Subtracts a call's bytes from the bytes in flight and gives up its turn when the call ends
/// or is dropped.
struct InFlight<'a> {
    state: &'a Mutex<State>,
    bytes: u64,
    ticket: u64,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut state = lock(self.state);
        state.bytes_in_flight -= self.bytes;
        state.finish(self.ticket);
    }
}

impl JournalService for FakeService {
    type Journal = String;

    fn servers(&self) -> Vec<NodeId> {
        self.servers.clone()
    }

    async fn call(&self, journal: &String, id: CallId, call: &Call, route: Route) -> CallReply {
        let bytes = match call {
            Call::Write { records, .. } => records.iter().map(|r| r.len() as u64).sum(),
            _ => 0,
        };
        let (delay, ticket, fault) = {
            let mut state = lock(&self.state);
            state.calls.push((call.clone(), route));
            state.call_ids.push(id);
            state.bytes_in_flight += bytes;
            state.peak_bytes_in_flight = state.peak_bytes_in_flight.max(state.bytes_in_flight);
            let ticket = state.tickets;
            state.tickets += 1;
            (state.call_delay, ticket, state.faults.pop_front())
        };
        let _in_flight = InFlight { state: &self.state, bytes, ticket };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
            while lock(&self.state).turn != ticket {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        let mut state = lock(&self.state);
        if *journal != self.journal {
            return CallReply::UnknownJournal;
        }
        match fault {
            Some(Fault::LoseAnswer) => {
                state.apply(call.clone());
                return CallReply::NoAnswer;
            }
            Some(Fault::DropRequest) => return CallReply::NoAnswer,
            Some(Fault::NoVerdict) => {
                state.apply(call.clone());
                return CallReply::Answer(CallAnswer::NoVerdict);
            }
            Some(Fault::NotSent) => return CallReply::NotSent,
            Some(Fault::Busy) => return CallReply::Answer(CallAnswer::Busy),
            Some(Fault::Redirect(leader)) => return CallReply::Answer(CallAnswer::Redirect { leader }),
            Some(Fault::UnknownJournal) => return CallReply::UnknownJournal,
            Some(Fault::ClaimedBefore(uuid)) => {
                let old = state.fold.state().leader;
                state.apply(Call::SetLeader { new: uuid, old });
            }
            Some(Fault::OvertakenBy(uuid)) => {
                let old = state.fold.state().leader;
                state.apply(Call::SetLeader { new: uuid, old });
                let seq = state.fold.state().next_seq;
                state.apply(Call::Write { leader: Some(uuid), seq, records: vec![Bytes::from_static(b"intruder")] });
            }
            Some(Fault::Blind) => {
                let outcome = match state.apply(call.clone()) {
                    Outcome::Duplicate { .. } => Outcome::Refused(state.fold.state().view()),
                    other => other,
                };
                return CallReply::Answer(CallAnswer::Verdict(outcome));
            }
            Some(Fault::Pass) | None => {}
        }
        if let (Some(leader), Some(asked)) = (state.leader_node, route.server)
            && leader != asked
        {
            return CallReply::Answer(CallAnswer::Redirect { leader: Some(leader) });
        }
        CallReply::Answer(CallAnswer::Verdict(state.apply(call.clone())))
    }

    async fn read(&self, journal: &String, read: ReadParams, _route: Route) -> ReadAnswer {
        let waited_from = {
            let mut state = lock(&self.state);
            state.reads += 1;
            if *journal != self.journal {
                return ReadAnswer::UnknownJournal;
            }
            let next_seq = state.fold.state().next_seq;
            match state.read_faults.pop_front() {
                Some(ReadFault::Unserved) => return ReadAnswer::Unserved { applied_to: Some(next_seq) },
                Some(ReadFault::UnknownJournal) => return ReadAnswer::UnknownJournal,
                None => {}
            }
            if let Consistency::Reached(seq) = read.consistency
                && next_seq < seq
            {
                return ReadAnswer::Unserved { applied_to: Some(next_seq) };
            }
            let view = state.fold.state().view();
            if read.wait_ms == 0 || read.from < view.next_seq || read.from < view.first_seq {
                return self.page(&state, read);
            }
            view
        };
        // A long poll at the tail: wait for a record or a truncation, up to wait_ms.
        for _ in 0..read.wait_ms {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let state = lock(&self.state);
            if state.fold.state().view() != waited_from {
                return self.page(&state, read);
            }
        }
        let state = lock(&self.state);
        self.page(&state, read)
    }
}
