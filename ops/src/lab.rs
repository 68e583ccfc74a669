//! The door's floor (`paros dev --lab-null-writes`, docs/lab/door.md): the gateway in front of a
//! cell whose tenant journals live in this process's memory only. Every call on a tenant
//! journal is judged at once by paros-core's own [`Fold`] — the verdicts, positions and views a
//! cell gives — with nothing replicated and nothing synced; reads are served at once from the
//! records held (no wait at the tail, every consistency alike: one copy in one process). The
//! registry journal (sign-up, journals, keys) goes to the embedded cell as ever.
//!
//! A run of `paros bench --target … ` against it measures what HTTP, the gateway and the client
//! cost per write on this machine with no cell behind them: the floor under issue 32's
//! figures. It stores nothing: a laboratory instrument, never a way to run paros.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use paros_client::{CallReply, JournalService, ReadAnswer, ReadParams, ReadServers, Route};
use paros_core::journal::{Command, Entry, Fold, JournalState, Outcome, WriterMode};
use paros_core::{Call, CallAnswer, CallId, JournalKey, NodeId, Slot};
use paros_registry::CELL_TENANT;

/// Records a page holds at most, as a node's default.
const PAGE_RECORDS_MAX: usize = 256;

/// One tenant journal, in memory.
struct Journal {
    fold: Fold,
    /// Every write applied, by slot: the fold looks a retry's original up here (`Duplicate`).
    writes: BTreeMap<Slot, Command>,
    /// The records from `first`, in order.
    first: u64,
    records: VecDeque<Bytes>,
}

impl Journal {
    fn new() -> Journal {
        Journal {
            fold: Fold::new(WriterMode::Single, JournalState::default(), Slot(0)),
            writes: BTreeMap::new(),
            first: 0,
            records: VecDeque::new(),
        }
    }

    fn apply(&mut self, call: Call) -> Outcome {
        let command = call.into_command();
        let slot = self.fold.next_slot();
        let writes = &self.writes;
        let judged = self.fold.apply(slot, &command, |s| writes.get(&s).and_then(Command::entry));
        match judged.outcome {
            Outcome::Accepted { .. } => {
                if let Command::Write(Entry { records, .. }) = &command {
                    self.records.extend(records.iter().cloned());
                }
                self.writes.insert(slot, command);
            }
            Outcome::Trimmed(view) => {
                while self.first < view.first_seq.0 && self.records.pop_front().is_some() {
                    self.first += 1;
                }
                self.first = self.first.max(view.first_seq.0);
            }
            _ => {}
        }
        judged.outcome
    }

    fn page(&self, read: ReadParams) -> ReadAnswer {
        let view = self.fold.state().view();
        if read.from < view.first_seq {
            return ReadAnswer::Truncated { view };
        }
        let limit = if read.limit == 0 { PAGE_RECORDS_MAX } else { (read.limit as usize).min(PAGE_RECORDS_MAX) };
        let skip = usize::try_from(read.from.0 - self.first).unwrap_or(usize::MAX);
        let mut records = Vec::new();
        let mut bytes = 0u64;
        for record in self.records.iter().skip(skip).take(limit) {
            if !records.is_empty() && bytes + record.len() as u64 > u64::from(read.max_bytes) {
                break;
            }
            bytes += record.len() as u64;
            records.push(record.clone());
        }
        ReadAnswer::Page { from: read.from, records, view }
    }
}

/// A journal service whose tenant journals are [`Journal`]s in memory; the registry journal's
/// calls and reads go to `inner`. See the module doc.
pub struct NullWrites<S> {
    inner: S,
    journals: Mutex<HashMap<JournalKey, Arc<Mutex<Journal>>>>,
}

impl<S> NullWrites<S> {
    pub fn new(inner: S) -> NullWrites<S> {
        NullWrites { inner, journals: Mutex::new(HashMap::new()) }
    }

    fn journal(&self, key: JournalKey) -> Arc<Mutex<Journal>> {
        let mut journals = self.journals.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(journals.entry(key).or_insert_with(|| Arc::new(Mutex::new(Journal::new()))))
    }
}

impl<S: JournalService<Journal = JournalKey>> JournalService for NullWrites<S> {
    type Journal = JournalKey;

    fn servers(&self) -> Vec<NodeId> {
        self.inner.servers()
    }

    fn read_servers(&self, journal: &JournalKey) -> ReadServers {
        self.inner.read_servers(journal)
    }

    async fn call(&self, journal: &JournalKey, id: CallId, call: &Call, route: Route) -> CallReply {
        if journal.tenant == CELL_TENANT {
            return self.inner.call(journal, id, call, route).await;
        }
        let held = self.journal(*journal);
        let outcome = held.lock().unwrap_or_else(PoisonError::into_inner).apply(call.clone());
        CallReply::Answer(CallAnswer::Verdict(outcome))
    }

    async fn read(&self, journal: &JournalKey, read: ReadParams, route: Route) -> ReadAnswer {
        if journal.tenant == CELL_TENANT {
            return self.inner.read(journal, read, route).await;
        }
        let held = self.journal(*journal);
        held.lock().unwrap_or_else(PoisonError::into_inner).page(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use paros_core::{LeaderUuid, Seq};

    fn read(from: u64) -> ReadParams {
        ReadParams {
            from: Seq(from),
            limit: 0,
            max_bytes: 1 << 20,
            wait_ms: 0,
            consistency: paros_core::Consistency::Linearizable,
        }
    }

    /// The floor judges as a cell does: a fenced writer's batches land at the tail, a stale
    /// writer or a wrong position is refused, and a read gives back what was accepted.
    #[test]
    fn a_journal_in_memory_judges_writes_as_the_fold_does_and_reads_them_back() {
        let mut j = Journal::new();
        let uuid = LeaderUuid::new(7).expect("a uuid");
        assert!(matches!(j.apply(Call::SetLeader { new: uuid, old: None }), Outcome::Won(_)));
        let records = vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")];
        let outcome = j.apply(Call::Write { leader: Some(uuid), seq: Seq(0), records });
        assert!(matches!(outcome, Outcome::Accepted { seq: Seq(0), count: 2, .. }), "{outcome:?}");
        let retry = vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")];
        let retried = j.apply(Call::Write { leader: Some(uuid), seq: Seq(0), records: retry });
        assert!(matches!(retried, Outcome::Duplicate { .. }), "an identical retry is a duplicate: {retried:?}");
        let stale = j.apply(Call::Write { leader: Some(uuid), seq: Seq(0), records: vec![Bytes::from_static(b"c")] });
        assert!(!matches!(stale, Outcome::Accepted { .. }), "a write behind the tail is not accepted: {stale:?}");
        let other = LeaderUuid::new(8).expect("a uuid");
        let fenced = j.apply(Call::Write { leader: Some(other), seq: Seq(2), records: vec![Bytes::from_static(b"d")] });
        assert!(!matches!(fenced, Outcome::Accepted { .. }), "another writer is fenced: {fenced:?}");
        match j.page(read(0)) {
            ReadAnswer::Page { records, view, .. } => {
                assert_eq!(records, vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")]);
                assert_eq!(view.next_seq, Seq(2));
            }
            other => panic!("a page: {other:?}"),
        }
        assert!(matches!(j.apply(Call::Truncate { leader: Some(uuid), up_to: Seq(1) }), Outcome::Trimmed(_)));
        assert!(matches!(j.page(read(0)), ReadAnswer::Truncated { .. }));
        match j.page(read(1)) {
            ReadAnswer::Page { records, .. } => assert_eq!(records, vec![Bytes::from_static(b"b")]),
            other => panic!("a page: {other:?}"),
        }
    }
}
