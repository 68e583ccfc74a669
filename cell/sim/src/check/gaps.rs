//! The claim "a reader reports every skipped position as a gap", judged on a history alone.
//!
//! A cursor reader's reads carry what it reported of each answer ([`ReadReport`]). Its cursor
//! starts at 0 and is the `from` of every read it sends; so at every read, each position below
//! `from` must lie in a range the reader reported earlier: records delivered to it, or a gap it
//! was given. A report is itself checked against the answer it was made of: records only from a
//! page that held them, a gap only from a truncation answer (or an empty page whose view starts
//! past the cursor) that names exactly where the journal resumes.

use std::collections::BTreeMap;

use paros_core::{JournalKey, ReadAnswer};

use super::history::{HistoryOp, OpInput, OpOutput, ReadReport};

/// What the gap check found in one history.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GapVerdict {
    /// Reads judged (one check each, plus one per report).
    pub checked: u64,
    /// Reads sent past a gap the reader reported: the situation the claim is about.
    pub gaps_crossed: u64,
    pub violations: Vec<String>,
}

/// Judges every cursor reader in `ops` (the reads with a `report`), per journal and client.
#[must_use]
pub fn check(ops: &[HistoryOp]) -> GapVerdict {
    let mut readers: BTreeMap<(JournalKey, &str), Vec<&HistoryOp>> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.report.is_some()) {
        readers.entry((op.journal, op.client.as_str())).or_default().push(op);
    }
    let mut v = GapVerdict::default();
    for ((key, client), mut reads) in readers {
        reads.sort_by_key(|o| o.call_index);
        // Every position below `covered` was delivered or reported gone; `gap_end` is the end of
        // the latest reported gap.
        let (mut covered, mut gap_end) = (0u64, None);
        for op in reads {
            let OpInput::Read { from, .. } = op.input else {
                v.checked += 1;
                v.violations.push(format!("{key:?}: {client} has a report on a call that is not a read"));
                continue;
            };
            v.checked += 1;
            if from > covered {
                v.violations.push(format!(
                    "{key:?}: {client} read from seq{from} at call {} \
                     but never reported seq{covered}..seq{from}: skipped silently",
                    op.call_index
                ));
                // One violation per skip: the reader is judged on from here.
                covered = from;
            } else if gap_end.is_some_and(|g| from >= g) {
                v.gaps_crossed += 1;
                gap_end = None;
            }
            let report = op.report.expect("only reads with a report are judged");
            if let Err(why) = report_matches(from, report, op.output.as_ref()) {
                v.violations.push(format!("{key:?}: {client}'s read from seq{from} at call {}: {why}", op.call_index));
                continue;
            }
            match report {
                ReadReport::Records { from: f, count } => covered = covered.max(f + count),
                ReadReport::Gap { resumed_at, .. } => {
                    covered = covered.max(resumed_at);
                    gap_end = Some(resumed_at);
                }
                ReadReport::Nothing => {}
            }
        }
    }
    v
}

/// Whether `report` is what the answer `output` to a read from `from` allows.
fn report_matches(from: u64, report: ReadReport, output: Option<&OpOutput>) -> Result<(), String> {
    match report {
        ReadReport::Nothing => Ok(()),
        ReadReport::Records { from: f, count } => match output {
            Some(OpOutput::Read(ReadAnswer::Page { from: p, records, .. })) if f == from && p.0 == from => {
                if count <= records.len() as u64 {
                    Ok(())
                } else {
                    Err(format!("reported {count} records delivered from a page of {}", records.len()))
                }
            }
            other => Err(format!("reported records from seq{f}, answered {other:?}")),
        },
        ReadReport::Gap { from: f, resumed_at } => {
            let first = match output {
                Some(OpOutput::Read(ReadAnswer::Truncated(view))) => Some(view.first_seq.0),
                Some(OpOutput::Read(ReadAnswer::Page { records, view, .. })) if records.is_empty() => {
                    Some(view.first_seq.0)
                }
                _ => None,
            };
            if f == from && first == Some(resumed_at) && resumed_at > from {
                Ok(())
            } else {
                Err(format!("reported a gap seq{f}..seq{resumed_at} it was not given (answered {output:?})"))
            }
        }
    }
}
