//! Client histories: one entry per call a client sent, with what came back and when.
//!
//! Every attempt is its own entry: a retry re-sends an identical input and is recorded again.
//! `output == None` means no answer reached the client before it gave up. JSON lines follow
//! `docs/sim-history.md`.

use bytes::Bytes;
use paros_core::journal::{JournalView, Outcome};
use paros_core::{CallAnswer, Consistency, JournalKey, LeaderUuid, ReadAnswer};
use serde_json::{Value, json};

/// What a client asked.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum OpInput {
    Write { leader: LeaderUuid, seq: u64, records: Vec<Bytes> },
    Read { from: u64, limit: u32, consistency: Consistency },
    Truncate { leader: LeaderUuid, up_to: u64 },
    SetLeader { new: LeaderUuid, old: Option<LeaderUuid> },
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
    /// The position of the call and of the return in the total order of history events (ties in
    /// simulated time are broken by the order the world processed them).
    pub call_order: u64,
    pub return_order: Option<u64>,
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
        })
    }
}

fn uuid_json(u: Option<LeaderUuid>) -> Value {
    u.map_or(Value::Null, |u| Value::String(u.to_string()))
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
            json!({ "leader": uuid_json(Some(*leader)), "seq": seq, "records": records_json(records) })
        }
        OpInput::Read { from, limit, consistency } => {
            let c = match consistency {
                Consistency::Linearizable => json!("linearizable"),
                Consistency::AtLeast(s) => json!({ "at_least": s.0 }),
            };
            json!({ "from": from, "limit": limit, "consistency": c })
        }
        OpInput::Truncate { leader, up_to } => json!({ "leader": uuid_json(Some(*leader)), "up_to": up_to }),
        OpInput::SetLeader { new, old } => json!({ "new": uuid_json(Some(*new)), "old": uuid_json(*old) }),
    }
}

fn outcome_json(o: &Outcome) -> Value {
    match o {
        Outcome::Accepted { seq, count } => json!({ "accepted": { "seq": seq.0, "count": count } }),
        Outcome::Duplicate { seq, count } => json!({ "duplicate": { "seq": seq.0, "count": count } }),
        Outcome::Refused(v) => json!({ "refused": view_json(v) }),
        Outcome::Truncated(v) => json!({ "truncated": view_json(v) }),
        Outcome::WrongMode(v) => json!({ "wrong_mode": view_json(v) }),
        Outcome::Won(v) => json!({ "won": view_json(v) }),
        Outcome::Lost(v) => json!({ "lost": view_json(v) }),
        Outcome::Trimmed(v) => json!({ "trimmed": view_json(v) }),
        Outcome::TruncateRefused(v) => json!({ "truncate_refused": view_json(v) }),
        Outcome::Noop => json!("noop"),
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
        OpOutput::Read(ReadAnswer::Unserved) => json!("unserved"),
    }
}
