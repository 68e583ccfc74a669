//! Client histories: one entry per call a client sent, with what came back and when.
//!
//! Every attempt is its own entry: a retry re-sends an identical input and is recorded again.
//! `output == None` means no answer reached the client before it gave up. JSON lines follow
//! `docs/sim-history.md`: a header line (the journals and the limits in force), then one line
//! per call.

use std::collections::BTreeMap;
use std::fmt;

use bytes::Bytes;
use paros_core::journal::{JournalView, Outcome, WriterMode};
use paros_core::{CallAnswer, Consistency, JournalKey, LeaderUuid, NodeId, ReadAnswer};
use serde_json::{Value, json};

/// The format name the header line carries; bumped when a line changes shape.
pub const FORMAT: &str = "paros-sim-history/4";

/// What a client asked. A Write or Truncate without a `leader` is shaped for a multi-writer
/// journal (unfenced), one with a leader for a single-writer journal.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum OpInput {
    Write {
        leader: Option<LeaderUuid>,
        seq: u64,
        records: Vec<Bytes>,
    },
    /// `wait_ticks` is in the server's ticks (the header's `tick_ns` each, give or take the
    /// machine's clock skew).
    Read {
        from: u64,
        limit: u32,
        max_bytes: u32,
        wait_ticks: u32,
        consistency: Consistency,
    },
    Truncate {
        leader: Option<LeaderUuid>,
        up_to: u64,
    },
    SetLeader {
        new: LeaderUuid,
        old: Option<LeaderUuid>,
    },
}

impl OpInput {
    /// The op's name in the history format.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            OpInput::Write { .. } => "write",
            OpInput::Read { .. } => "read",
            OpInput::Truncate { .. } => "truncate",
            OpInput::SetLeader { .. } => "set_leader",
        }
    }
}

/// What came back.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum OpOutput {
    Call(CallAnswer),
    Read(ReadAnswer),
}

/// Why a call was sent, when it is one of the workload's deliberate odd inputs: the rules of the
/// fold that clients following their own tags and cursors never exercise.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Probe {
    /// A writer re-sent an acknowledged batch's position changed: one record's bytes changed or
    /// one record more, never `Duplicate`; or a prefix of it, `Duplicate` (by range:
    /// docs/decisions.md) — the model says which.
    ChangedBytes,
    /// A writer re-sent an acknowledged batch at another position below the tail: never
    /// `Duplicate` nor `Accepted`.
    MovedBatch,
    /// A writer re-sent an acknowledged batch far past the tail: `Refused`.
    PastTail,
    /// A writer re-sent a range of its newest acknowledged records cut anywhere (inside a batch,
    /// or across two): `Duplicate` by range when its uuid wrote them all.
    SubRange,
    /// An adversarial reader read at a position of its choosing (below, inside, at or past the
    /// journal), at either consistency.
    RandomRead,
    /// A read sent the moment a truncation was sent or answered, at positions around it.
    TrimRace,
    /// An appender of a multi-writer journal sent a call shaped for a single-writer journal (a
    /// fenced Write or Truncate, or a SetLeader): `WrongMode`.
    WrongMode,
    /// An appender of a multi-writer journal appended an empty batch: `Refused`.
    EmptyAppend,
}

impl Probe {
    pub const ALL: [Probe; 8] = [
        Probe::ChangedBytes,
        Probe::MovedBatch,
        Probe::PastTail,
        Probe::SubRange,
        Probe::RandomRead,
        Probe::TrimRace,
        Probe::WrongMode,
        Probe::EmptyAppend,
    ];

    /// The probe's name in the history format and the sweep's counters.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Probe::ChangedBytes => "changed_bytes",
            Probe::MovedBatch => "moved_batch",
            Probe::PastTail => "past_tail",
            Probe::SubRange => "sub_range",
            Probe::RandomRead => "random_read",
            Probe::TrimRace => "trim_race",
            Probe::WrongMode => "wrong_mode",
            Probe::EmptyAppend => "empty_append",
        }
    }
}

/// What a cursor reader told its application a read's answer meant (docs/sim-history.md).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ReadReport {
    /// The records at `[from, from + count)` were delivered; the cursor moved past them.
    Records { from: u64, count: u64 },
    /// Positions `[from, resumed_at)` were reported gone; the cursor resumed at `resumed_at`.
    Gap { from: u64, resumed_at: u64 },
    /// Nothing was reported and the cursor stayed (unserved, no answer, or an answer refused).
    Nothing,
}

impl ReadReport {
    fn to_json(self) -> Value {
        match self {
            ReadReport::Records { from, count } => json!({ "records": { "from": from, "count": count } }),
            ReadReport::Gap { from, resumed_at } => json!({ "gap": { "from": from, "resumed_at": resumed_at } }),
            ReadReport::Nothing => json!("nothing"),
        }
    }
}

/// One call in a journal's history.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct HistoryOp {
    pub journal: JournalKey,
    pub client: String,
    pub input: OpInput,
    pub output: Option<OpOutput>,
    /// Simulated nanoseconds.
    pub call_ns: u64,
    pub return_ns: Option<u64>,
    /// The position of the call and of the return in one total order of every call and return
    /// of the run, strictly increasing in the order the world processed them: it breaks ties in
    /// simulated time (a call sent at the nanosecond another call returned comes after it).
    pub call_index: u64,
    pub return_index: Option<u64>,
    /// The machine the call was sent to.
    pub to: NodeId,
    /// The machine whose answer arrived (`None` when none did).
    pub server: Option<NodeId>,
    /// Set when the call is one of the workload's deliberate odd inputs.
    pub probe: Option<Probe>,
    /// Set on every read a cursor reader sent: what it reported of the answer.
    pub report: Option<ReadReport>,
}

impl HistoryOp {
    /// True when the answer proves the call was never proposed (so it never took effect).
    #[must_use]
    pub fn never_proposed(&self) -> bool {
        matches!(
            self.output,
            Some(OpOutput::Call(CallAnswer::Redirect { .. } | CallAnswer::Busy | CallAnswer::TooLarge(_)))
        )
    }

    /// True when the call got no verdict: it may take effect at any time after it was sent.
    #[must_use]
    pub fn is_ambiguous(&self) -> bool {
        matches!(self.output, None | Some(OpOutput::Call(CallAnswer::NoVerdict)))
    }

    /// The history line: one JSON object.
    #[must_use]
    pub fn to_json(&self) -> Value {
        json!({
            "journal": format!("{:?}", self.journal),
            "client": self.client,
            "op": self.input.name(),
            "input": input_json(&self.input),
            "output": self.output.as_ref().map_or(Value::Null, output_json),
            "call": self.call_ns,
            "return": self.return_ns,
            "call_index": self.call_index,
            "return_index": self.return_index,
            "to": self.to.to_string(),
            "server": self.server.map(|n| n.to_string()),
            "probe": self.probe.map(Probe::name),
            "report": self.report.map_or(Value::Null, ReadReport::to_json),
        })
    }

    /// The label the sweep's probe counters file this call's answer under.
    #[must_use]
    pub fn answer_label(&self) -> &'static str {
        match &self.output {
            None => "timed_out",
            Some(OpOutput::Call(CallAnswer::Verdict(o))) => match o {
                Outcome::Accepted { .. } => "accepted",
                Outcome::Duplicate { .. } => "duplicate",
                Outcome::Refused(_) => "refused",
                Outcome::Truncated(_) => "truncated",
                Outcome::WrongMode(_) => "wrong_mode",
                Outcome::Won(_) => "won",
                Outcome::Lost(_) => "lost",
                Outcome::Trimmed(_) => "trimmed",
                Outcome::TruncateRefused(_) => "truncate_refused",
                Outcome::Noop => "noop",
                Outcome::Reconfigured { .. } => "reconfigured",
                Outcome::StaleEpoch { .. } => "stale_epoch",
            },
            Some(OpOutput::Call(CallAnswer::NoVerdict)) => "no_verdict",
            Some(OpOutput::Call(CallAnswer::Redirect { .. })) => "redirect",
            Some(OpOutput::Call(CallAnswer::Busy)) => "busy",
            Some(OpOutput::Call(CallAnswer::TooLarge(_))) => "too_large",
            Some(OpOutput::Read(ReadAnswer::Page { records, .. })) if records.is_empty() => "empty_page",
            Some(OpOutput::Read(ReadAnswer::Page { .. })) => "page",
            Some(OpOutput::Read(ReadAnswer::Truncated(_))) => "read_truncated",
            Some(OpOutput::Read(ReadAnswer::Unserved { .. })) => "unserved",
        }
    }
}

/// One journal as the header line describes it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct JournalHeader {
    pub key: JournalKey,
    pub mode: WriterMode,
    pub voters: Vec<NodeId>,
    pub learners: Vec<NodeId>,
}

/// What a checker needs besides the calls: the journals, their writer modes and the limits
/// every server of the run enforced.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct HistoryHeader {
    pub seed: u64,
    /// Nominal nanoseconds per server tick (each machine's clock is skewed by up to ±2%).
    pub tick_ns: u64,
    /// A client gives up on a call this long after sending it (the call's `output` is `null`).
    pub call_timeout_ns: u64,
    pub page_records_max: u32,
    pub page_bytes_max: u32,
    pub write_records_max: u32,
    pub write_bytes_max: u64,
    /// The longest long-poll at the tail, and the longest a read waits for its round or its
    /// position before `Unserved`, in ticks.
    pub wait_ticks_max: u32,
    pub read_ticks_max: u32,
    pub journals: Vec<JournalHeader>,
}

impl HistoryHeader {
    /// The header line: one JSON object with the single key `header`.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let nodes = |ns: &[NodeId]| ns.iter().map(|n| Value::String(n.to_string())).collect::<Vec<_>>();
        let journals: Vec<Value> = self
            .journals
            .iter()
            .map(|j| {
                let mode = match j.mode {
                    WriterMode::Single => "single",
                    WriterMode::Multi => "multi",
                };
                json!({
                    "journal": format!("{:?}", j.key),
                    "mode": mode,
                    "voters": nodes(&j.voters),
                    "learners": nodes(&j.learners)
                })
            })
            .collect();
        json!({ "header": {
            "format": FORMAT,
            "seed": self.seed,
            "tick_ns": self.tick_ns,
            "call_timeout_ns": self.call_timeout_ns,
            "page_records_max": self.page_records_max,
            "page_bytes_max": self.page_bytes_max,
            "write_records_max": self.write_records_max,
            "write_bytes_max": self.write_bytes_max,
            "wait_ticks_max": self.wait_ticks_max,
            "read_ticks_max": self.read_ticks_max,
            "journals": journals,
        }})
    }
}

/// The whole history file: the header line, then one line per call in call order.
#[must_use]
pub fn export(header: &HistoryHeader, ops: &[HistoryOp]) -> String {
    let mut out = header.to_json().to_string();
    out.push('\n');
    let mut sorted: Vec<&HistoryOp> = ops.iter().collect();
    sorted.sort_by_key(|o| o.call_index);
    for op in sorted {
        out.push_str(&op.to_json().to_string());
        out.push('\n');
    }
    out
}

/// How many probe calls a run (or a sweep) sent, by probe and by what came back.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct ProbeCounts {
    counts: BTreeMap<(Probe, &'static str), u64>,
}

impl ProbeCounts {
    /// Counts every probe call of `ops`.
    #[must_use]
    pub fn of(ops: &[HistoryOp]) -> ProbeCounts {
        let mut c = ProbeCounts::default();
        for op in ops {
            if let Some(p) = op.probe {
                *c.counts.entry((p, op.answer_label())).or_default() += 1;
            }
        }
        c
    }

    /// Calls of `probe` answered `label` (see [`HistoryOp::answer_label`]).
    #[must_use]
    pub fn get(&self, probe: Probe, label: &str) -> u64 {
        self.counts.iter().filter(|((p, l), _)| *p == probe && *l == label).map(|(_, n)| *n).sum()
    }

    /// Calls of `probe` sent.
    #[must_use]
    pub fn sent(&self, probe: Probe) -> u64 {
        self.counts.iter().filter(|((p, _), _)| *p == probe).map(|(_, n)| *n).sum()
    }

    /// Adds another run's counters.
    pub fn merge(&mut self, other: &ProbeCounts) {
        for (k, n) in &other.counts {
            *self.counts.entry(*k).or_default() += n;
        }
    }
}

impl fmt::Display for ProbeCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for probe in Probe::ALL {
            write!(f, "probe \"{}\": sent={}", probe.name(), self.sent(probe))?;
            for ((p, label), n) in &self.counts {
                if *p == probe {
                    write!(f, " {label}={n}")?;
                }
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// A uuid as 32 hex digits, the history's spelling.
fn uuid_json(u: Option<LeaderUuid>) -> Value {
    u.map_or(Value::Null, |u| Value::String(format!("{:032x}", u.get())))
}

fn records_json(records: &[Bytes]) -> Value {
    Value::Array(
        records
            .iter()
            .map(|r| match std::str::from_utf8(r) {
                Ok(s) => Value::String(s.to_owned()),
                Err(_) => Value::String(r.iter().map(|b| format!("{b:02x}")).collect()),
            })
            .collect(),
    )
}

fn view_json(v: &JournalView) -> Value {
    json!({ "leader": uuid_json(v.leader), "first_seq": v.first_seq.0, "next_seq": v.next_seq.0 })
}

fn input_json(input: &OpInput) -> Value {
    match input {
        OpInput::Write { leader, seq, records } => {
            json!({ "leader": uuid_json(*leader), "seq": seq, "records": records_json(records) })
        }
        OpInput::Read { from, limit, max_bytes, wait_ticks, consistency } => {
            let c = match consistency {
                Consistency::Linearizable => json!("linearizable"),
                Consistency::Reached(s) => json!({ "at_least": s.0 }),
            };
            json!({ "from": from, "limit": limit, "max_bytes": max_bytes, "wait_ticks": wait_ticks, "consistency": c })
        }
        OpInput::Truncate { leader, up_to } => json!({ "leader": uuid_json(*leader), "up_to": up_to }),
        OpInput::SetLeader { new, old } => json!({ "new": uuid_json(Some(*new)), "old": uuid_json(*old) }),
    }
}

fn outcome_json(o: &Outcome) -> Value {
    match o {
        Outcome::Accepted { seq, count, .. } => json!({ "accepted": { "seq": seq.0, "count": count } }),
        Outcome::Duplicate { seq, count, .. } => json!({ "duplicate": { "seq": seq.0, "count": count } }),
        Outcome::Refused(v) => json!({ "refused": view_json(v) }),
        Outcome::Truncated(v) => json!({ "truncated": view_json(v) }),
        Outcome::WrongMode(v) => json!({ "wrong_mode": view_json(v) }),
        Outcome::Won(v) => json!({ "won": view_json(v) }),
        Outcome::Lost(v) => json!({ "lost": view_json(v) }),
        Outcome::Trimmed(v) => json!({ "trimmed": view_json(v) }),
        Outcome::TruncateRefused(v) => json!({ "truncate_refused": view_json(v) }),
        Outcome::Noop => json!("noop"),
        Outcome::Reconfigured { epoch, view } => json!({ "reconfigured": { "epoch": epoch, "view": view_json(view) } }),
        Outcome::StaleEpoch { epoch, view } => json!({ "stale_epoch": { "epoch": epoch, "view": view_json(view) } }),
    }
}

fn output_json(output: &OpOutput) -> Value {
    match output {
        OpOutput::Call(CallAnswer::Verdict(o)) => outcome_json(o),
        OpOutput::Call(CallAnswer::TooLarge(t)) => {
            json!({ "too_large": { "max_records": t.max_records, "max_bytes": t.max_bytes } })
        }
        OpOutput::Call(CallAnswer::Redirect { leader }) => {
            json!({ "redirect": leader.map_or(Value::Null, |n| Value::String(n.to_string())) })
        }
        OpOutput::Call(CallAnswer::NoVerdict) => json!("no_verdict"),
        OpOutput::Call(CallAnswer::Busy) => json!("busy"),
        OpOutput::Read(ReadAnswer::Page { from, records, view }) => {
            json!({ "page": { "from": from.0, "records": records_json(records), "view": view_json(view) } })
        }
        OpOutput::Read(ReadAnswer::Truncated(v)) => json!({ "truncated": view_json(v) }),
        OpOutput::Read(ReadAnswer::Unserved { .. }) => json!("unserved"),
    }
}
