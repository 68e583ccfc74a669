//! How verdicts and views read to people: in error messages, CLI output and logs.

use std::fmt;

use super::types::{JournalView, Outcome};

/// `leader <uuid>, records [first, next)`; `no leader` for a journal nobody claimed.
impl fmt::Display for JournalView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.leader {
            Some(leader) => write!(f, "leader {leader}, ")?,
            None => f.write_str("no leader, ")?,
        }
        write!(f, "records [{}, {})", self.first_seq.0, self.next_seq.0)
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Accepted { seq, count, view } => {
                write!(f, "accepted {count} records at {} ({view})", seq.0)
            }
            Outcome::Duplicate { seq, count, view } => {
                write!(f, "already accepted: {count} records at {} ({view})", seq.0)
            }
            Outcome::Refused(view) => write!(f, "refused: not at the tail under the leader in force ({view})"),
            Outcome::Truncated(view) => write!(f, "truncated: the position lies below the first retained ({view})"),
            Outcome::WrongMode(view) => write!(f, "wrong mode: the call is shaped for the other writer mode ({view})"),
            Outcome::Won(view) => write!(f, "claimed ({view})"),
            Outcome::Lost(view) => write!(f, "lost: another writer claimed first ({view})"),
            Outcome::Trimmed(view) => write!(f, "truncated ({view})"),
            Outcome::TruncateRefused(view) => write!(f, "truncate refused: not the writer in force ({view})"),
            Outcome::Noop => f.write_str("a gap filler"),
            Outcome::Reconfigured { epoch, view } => write!(f, "reconfigured: configuration {epoch} ({view})"),
            Outcome::StaleEpoch { epoch, view } => {
                write!(f, "reconfiguration refused: it does not follow configuration {epoch} ({view})")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LeaderUuid, Seq};

    #[test]
    fn views_and_verdicts_read_as_sentences_not_structures() {
        let view = JournalView { leader: LeaderUuid::new(0xab), first_seq: Seq(3), next_seq: Seq(9) };
        let text = Outcome::Lost(view).to_string();
        assert!(text.starts_with("lost: another writer claimed first (leader "), "{text}");
        assert!(text.ends_with(", records [3, 9))"), "{text}");
        assert!(!text.contains('{') && !text.contains("Some("), "{text}");
        let unclaimed = JournalView { leader: None, first_seq: Seq(0), next_seq: Seq(0) };
        assert_eq!(unclaimed.to_string(), "no leader, records [0, 0)");
    }
}
