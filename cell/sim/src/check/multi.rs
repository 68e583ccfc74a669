//! The client checks of multi-writer journals.
//!
//! The world's audit judges single-writer clients by the position every workload record names
//! (`…@<position>`): a fenced writer knows where its batch lands. An appender of a multi-writer
//! journal cannot (the fold puts an unfenced append at the tail, wherever that is), so its records
//! name their appender and batch instead, and the world hands its acknowledgements and its
//! readers' deliveries here rather than to the position checks:
//! - "an acknowledged write is never lost": no position is acknowledged to two appends; a record
//!   a reader is handed at an acknowledged position is the acknowledged one (and an
//!   acknowledgement agrees with what a reader was handed there before); every record a reader is
//!   handed was sent in an unfenced append of that journal (a fenced write's records, which must
//!   be `WrongMode`, never appear). The world also adds every acknowledged position to the
//!   audit's `acked`, so the finale's check that the converged journal retains each of them with
//!   the acknowledged record covers multi-writer journals too.
//! - "every client folds the same record to the same state": every reader is handed the same
//!   record at a position (the folded chains are compared by the audit as for any journal).
//! - "multi-writer: racing appenders are both acknowledged on one journal, each at positions of
//!   its own": checked on every acknowledgement (none of its positions was acknowledged before);
//!   reached once per journal, when the batches acknowledged to two appenders interleave in the
//!   journal (one appender's batch lies between two of another's): both were appending at the
//!   tail at once and both were acknowledged.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use paros_core::JournalKey;

use super::{Claim, Claims};

/// What the multi-writer checks remember.
#[derive(Debug, Default)]
pub struct MultiWriterAudit {
    /// Every record sent in an unfenced append, per journal.
    sent: BTreeSet<(JournalKey, Bytes)>,
    /// Acknowledged positions: the appender and the record.
    acked: BTreeMap<(JournalKey, u64), (String, Bytes)>,
    /// The first position of every acknowledged batch, and its appender.
    batches: BTreeMap<(JournalKey, u64), String>,
    /// The record a reader was first handed at a position.
    seen: BTreeMap<(JournalKey, u64), Bytes>,
    /// Journals whose appenders were seen racing.
    raced: BTreeSet<JournalKey>,
}

impl MultiWriterAudit {
    /// An appender sent `records` in an unfenced append to `key`.
    pub fn on_sent(&mut self, key: JournalKey, records: &[Bytes]) {
        for r in records {
            self.sent.insert((key, r.clone()));
        }
    }

    /// `client`'s append of `records` to `key` was acknowledged at `seq`.
    pub fn on_acked(&mut self, key: JournalKey, client: &str, seq: u64, records: &[Bytes], claims: &mut Claims) {
        let taken: Vec<String> = (seq..seq + records.len() as u64)
            .filter_map(|pos| self.acked.get(&(key, pos)).map(|(c, r)| format!("seq{pos} ({c}: {r:?})")))
            .collect();
        claims.check(Claim::MultiWriterRace, taken.is_empty(), || {
            format!(
                "{key:?}: {client} was acknowledged {} records at seq{seq}, positions already acknowledged: {}",
                records.len(),
                taken.join(", ")
            )
        });
        for (i, r) in records.iter().enumerate() {
            let pos = seq + i as u64;
            if let Some(read) = self.seen.get(&(key, pos)) {
                let same = read == r;
                claims.check(Claim::AckedNeverLost, same, || {
                    format!("{key:?} seq{pos}: {client} was acknowledged {r:?} but a reader was handed {read:?}")
                });
            }
            self.acked.entry((key, pos)).or_insert_with(|| (client.to_owned(), r.clone()));
        }
        if taken.is_empty() && !records.is_empty() {
            self.batches.insert((key, seq), client.to_owned());
            if !self.raced.contains(&key) && self.interleaved(key) {
                self.raced.insert(key);
                claims.reach(Claim::MultiWriterRace);
            }
        }
    }

    /// True when some appender's acknowledged batches of `key` are split by another's.
    fn interleaved(&self, key: JournalKey) -> bool {
        let mut done: BTreeSet<&str> = BTreeSet::new();
        let mut current: Option<&str> = None;
        for (_, client) in self.batches.range((key, 0)..=(key, u64::MAX)) {
            if current == Some(client.as_str()) {
                continue;
            }
            if done.contains(client.as_str()) {
                return true;
            }
            if let Some(c) = current {
                done.insert(c);
            }
            current = Some(client);
        }
        false
    }

    /// A reader (`client`) of `key` was handed `record` at `seq`.
    pub fn on_delivered(&mut self, key: JournalKey, client: &str, seq: u64, record: &Bytes, claims: &mut Claims) {
        let sent = self.sent.contains(&(key, record.clone()));
        claims.check(Claim::AckedNeverLost, sent, || {
            format!("{key:?} seq{seq}: {client} was handed {record:?}, which no appender of the journal appended")
        });
        if let Some((by, a)) = self.acked.get(&(key, seq)) {
            let same = a == record;
            claims.check(Claim::AckedNeverLost, same, || {
                format!("{key:?} seq{seq}: {client} was handed {record:?} where {by} was acknowledged {a:?}")
            });
            if same {
                claims.reach(Claim::AckedNeverLost);
            }
        }
        match self.seen.get(&(key, seq)) {
            Some(s) => {
                let same = s == record;
                claims.check(Claim::SameFold, same, || {
                    format!("{key:?} seq{seq}: {client} was handed {record:?}, another client {s:?}")
                });
            }
            None => {
                self.seen.insert((key, seq), record.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recs(rs: &[&str]) -> Vec<Bytes> {
        rs.iter().map(|r| Bytes::from((*r).to_owned())).collect()
    }

    #[test]
    fn interleaved_acknowledgements_reach_the_race_and_overlapping_ones_are_violations() {
        let key = JournalKey::default();
        let mut m = MultiWriterAudit::default();
        let mut claims = Claims::default();
        m.on_sent(key, &recs(&["a.1.0", "a.2.0", "b.1.0", "b.1.1"]));
        m.on_acked(key, "a", 0, &recs(&["a.1.0"]), &mut claims);
        m.on_acked(key, "b", 1, &recs(&["b.1.0", "b.1.1"]), &mut claims);
        assert_eq!(claims.count(Claim::MultiWriterRace).reached, 0, "a then b: they may have taken turns");
        m.on_acked(key, "a", 3, &recs(&["a.2.0"]), &mut claims);
        assert_eq!(claims.count(Claim::MultiWriterRace).reached, 1, "b's batch lies between two of a's");
        assert_eq!(claims.violations(), 0);

        m.on_acked(key, "b", 2, &recs(&["b.1.1"]), &mut claims);
        assert_eq!(
            claims.count(Claim::MultiWriterRace).violated,
            1,
            "seq2 was acknowledged to b's first batch already"
        );

        m.on_delivered(key, "r", 1, &Bytes::from("b.1.0"), &mut claims);
        assert_eq!(claims.violations(), 1, "the acknowledged record, handed over");
        m.on_delivered(key, "r", 0, &Bytes::from("a.2.0"), &mut claims);
        assert_eq!(claims.count(Claim::AckedNeverLost).violated, 1, "seq0 was acknowledged as a.1.0");
        m.on_delivered(key, "r", 4, &Bytes::from("forged"), &mut claims);
        assert_eq!(claims.count(Claim::AckedNeverLost).violated, 2, "nobody appended `forged`");
        m.on_delivered(key, "r2", 4, &Bytes::from("a.1.0"), &mut claims);
        assert_eq!(claims.count(Claim::SameFold).violated, 1, "two readers were handed two records at seq4");
    }
}
