//! Requests from the bus and the answers owed on them, under the caller's own ids.
//!
//! A call keeps the id its caller drew ([`CallId`]) from the caller to the answer: the node owes
//! the answer under `(journal, id)`, the voter holds the proposal under the same id, and the
//! shell keeps the caller's responder under the same [`Owed`]. No id is minted here.

use std::collections::{BTreeMap, BTreeSet};

use paros_core::{Call, CallAnswer, CallId, JournalKey, ReadAnswer, ReadId, ReadRequest};

use super::dormancy::Stashed;
use super::{Early, Host, Hosted};
use crate::ports::LogStore;
use crate::rpc::{NodeAnswer, NodeRequest};

/// An answer the host owes: the request's own id, under its journal.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Owed {
    Call(JournalKey, CallId),
    Read(JournalKey, ReadId),
}

/// The calls and reads this machine owes an answer, by journal.
///
/// Invariants: a `(journal, id)` is owed at most once at a time, and an answer is given only
/// for one still owed ([`Owing::take_call`], [`Owing::take_read`]), so no request is answered
/// twice. A call owed keeps the call itself: a resend under the same id must be the same call
/// to wait on its answer ([`Owing::admit_call`]); any other is refused.
#[derive(Debug, Default)]
pub(super) struct Owing {
    pub(super) calls: BTreeMap<(JournalKey, CallId), Call>,
    pub(super) reads: BTreeSet<(JournalKey, ReadId)>,
}

/// What a call's id finds among the calls owed.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Admit {
    /// Not owed: a new call.
    New,
    /// The same call is owed under this id: the resend waits for its answer.
    Resent,
    /// Another call is owed under this id: refused.
    Taken,
}

impl Owing {
    /// What `id` finds among the calls owed for `key`.
    pub(super) fn admit_call(&self, key: JournalKey, id: CallId, call: &Call) -> Admit {
        match self.calls.get(&(key, id)) {
            None => Admit::New,
            Some(owed) if owed == call => Admit::Resent,
            Some(_) => Admit::Taken,
        }
    }

    /// The call owed under `id` of `key`, no longer owed.
    pub(super) fn take_call(&mut self, key: JournalKey, id: CallId) -> Option<Owed> {
        self.calls.remove(&(key, id)).map(|_| Owed::Call(key, id))
    }

    /// The read owed under `id` of `key`, no longer owed.
    pub(super) fn take_read(&mut self, key: JournalKey, id: ReadId) -> Option<Owed> {
        self.reads.remove(&(key, id)).then_some(Owed::Read(key, id))
    }

    /// True when a call or a read of `key` is owed an answer.
    pub(super) fn owes(&self, key: &JournalKey) -> bool {
        self.calls.range((*key, CallId(0))..=(*key, CallId(u64::MAX))).next().is_some()
            || self.reads.range((*key, ReadId(0))..=(*key, ReadId(u64::MAX))).next().is_some()
    }

    /// Forgets every call and read of `key`: what was owed.
    pub(super) fn forget(&mut self, key: &JournalKey) -> Vec<Owed> {
        let mut owed = Vec::new();
        self.calls.retain(|(k, id), _| {
            let keep = k != key;
            if !keep {
                owed.push(Owed::Call(*k, *id));
            }
            keep
        });
        self.reads.retain(|(k, id)| {
            let keep = k != key;
            if !keep {
                owed.push(Owed::Read(*k, *id));
            }
            keep
        });
        owed
    }
}

impl<S: LogStore> Host<S> {
    /// A request from the bus. Returns what the host now owes (a later step answers it), or
    /// the answer itself when it is immediate (unknown journal, a replica asked to write, an id
    /// another call holds). A resend of a call still owed under its id owes the same answer:
    /// the caller's newest responder should take it.
    pub fn request(&mut self, request: NodeRequest) -> Result<Owed, NodeAnswer> {
        match request {
            NodeRequest::Call { journal, id, call } => self.call(journal, id, call),
            NodeRequest::Read { journal, id, read } => self.read(journal, id, read),
        }
    }

    fn read(&mut self, journal: JournalKey, id: ReadId, read: ReadRequest) -> Result<Owed, NodeAnswer> {
        if !self.journals.contains_key(&journal) {
            return Err(NodeAnswer::UnknownJournal);
        }
        if self.owing.reads.contains(&(journal, id)) {
            // Two reads under one id: the second cannot be told apart from the first's answer.
            return Err(NodeAnswer::Read(ReadAnswer::Unserved { applied_to: self.applied_to(&journal) }));
        }
        self.owing.reads.insert((journal, id));
        match self.read_owed(journal, id, read) {
            Some((_, answer)) => Err(answer),
            None => Ok(Owed::Read(journal, id)),
        }
    }

    /// Hands a read already owed to its journal (or stashes it while the journal is dormant).
    /// A read of a journal gone is no longer owed: its answer is returned.
    pub(super) fn read_owed(
        &mut self,
        journal: JournalKey,
        id: ReadId,
        read: ReadRequest,
    ) -> Option<(Owed, NodeAnswer)> {
        match self.journals.get_mut(&journal) {
            None => self.owing.take_read(journal, id).map(|o| (o, NodeAnswer::UnknownJournal)),
            Some(Hosted::Dormant(_)) => {
                self.dormancy.stash.push(Stashed::Read(id, journal, read));
                None
            }
            Some(j) => {
                j.read(id, read, &mut self.stats);
                self.dormancy.checking_in.remove(&journal);
                self.round.stepped(journal, false);
                None
            }
        }
    }

    fn call(&mut self, journal: JournalKey, id: CallId, call: Call) -> Result<Owed, NodeAnswer> {
        match self.journals.get(&journal) {
            None => return Err(NodeAnswer::UnknownJournal),
            Some(Hosted::Replica(_)) => return Err(NodeAnswer::Call(CallAnswer::Redirect { leader: None })),
            Some(_) => {}
        }
        match self.owing.admit_call(journal, id, &call) {
            Admit::New => {}
            Admit::Resent => return Ok(Owed::Call(journal, id)),
            Admit::Taken => return Err(NodeAnswer::Call(CallAnswer::Busy)),
        }
        self.owing.calls.insert((journal, id), call.clone());
        match self.call_owed(journal, id, call) {
            Some((_, answer)) => Err(answer),
            None => Ok(Owed::Call(journal, id)),
        }
    }

    /// Proposes a call already owed (or stashes it while the journal is dormant). A call its
    /// journal can no longer take (gone, or a replica now) is no longer owed: its answer is
    /// returned.
    pub(super) fn call_owed(&mut self, journal: JournalKey, id: CallId, call: Call) -> Option<(Owed, NodeAnswer)> {
        match self.journals.get_mut(&journal) {
            None => self.owing.take_call(journal, id).map(|o| (o, NodeAnswer::UnknownJournal)),
            Some(Hosted::Replica(_)) => {
                self.owing.take_call(journal, id).map(|o| (o, NodeAnswer::Call(CallAnswer::Redirect { leader: None })))
            }
            Some(Hosted::Dormant(_)) => {
                self.dormancy.stash.push(Stashed::Call(id, journal, call));
                None
            }
            Some(Hosted::Voter(v)) => {
                if v.is_quiet_without_a_leader() {
                    // Awake but asleep as a follower, leaderless (checking in, or woken by a
                    // peer's message): elect now and hold the call for it, as a call that wakes
                    // a dormant journal does, instead of redirecting it nowhere. Not while a
                    // campaign may be under way elsewhere: a second one would depose it.
                    self.campaign(&journal);
                }
                let Some(Hosted::Voter(v)) = self.journals.get_mut(&journal) else { unreachable!("a voter") };
                v.propose(id, call);
                self.dormancy.checking_in.remove(&journal);
                self.round.stepped(journal, false);
                None
            }
        }
    }

    pub(super) fn answer(
        &mut self,
        key: JournalKey,
        answers: Vec<(CallId, CallAnswer)>,
        reads: Vec<(ReadId, ReadAnswer)>,
        early: &mut impl FnMut(Early),
    ) {
        for (call, answer) in answers {
            if let CallAnswer::Verdict(paros_core::journal::Outcome::Accepted { count, .. }) = answer {
                self.stats.records_accepted += count;
            }
            if let Some(owed) = self.owing.take_call(key, call) {
                early(Early::Answer(owed, NodeAnswer::Call(answer)));
            }
        }
        for (read, answer) in reads {
            if let Some(owed) = self.owing.take_read(key, read) {
                early(Early::Answer(owed, NodeAnswer::Read(answer)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use paros_core::{JournalId, Seq, TenantId};

    fn key(j: u64) -> JournalKey {
        JournalKey { tenant: TenantId(1), journal: JournalId(j) }
    }

    fn write(seq: u64, record: &'static [u8]) -> Call {
        Call::Write { leader: None, seq: Seq(seq), records: vec![Bytes::from_static(record)] }
    }

    #[test]
    fn an_id_is_owed_once_and_answered_at_most_once() {
        let mut o = Owing::default();
        o.calls.insert((key(1), CallId(7)), write(0, b"a"));
        o.reads.insert((key(1), ReadId(7)));
        o.reads.insert((key(2), ReadId(8)));
        assert!(o.owes(&key(1)) && o.owes(&key(2)) && !o.owes(&key(3)));
        assert_eq!(o.take_call(key(1), CallId(7)), Some(Owed::Call(key(1), CallId(7))));
        assert_eq!(o.take_call(key(1), CallId(7)), None, "answered once");
        assert_eq!(o.forget(&key(1)), vec![Owed::Read(key(1), ReadId(7))], "forgetting returns what was owed");
        assert!(!o.owes(&key(1)) && o.owes(&key(2)), "and only its own");
        assert_eq!(o.take_read(key(2), ReadId(8)), Some(Owed::Read(key(2), ReadId(8))));
    }

    #[test]
    fn a_resend_under_an_owed_id_waits_only_when_it_is_the_same_call() {
        let mut o = Owing::default();
        assert_eq!(o.admit_call(key(1), CallId(7), &write(0, b"a")), Admit::New);
        o.calls.insert((key(1), CallId(7)), write(0, b"a"));
        assert_eq!(o.admit_call(key(1), CallId(7), &write(0, b"a")), Admit::Resent);
        assert_eq!(o.admit_call(key(1), CallId(7), &write(0, b"b")), Admit::Taken, "another call under the id");
        assert_eq!(o.admit_call(key(2), CallId(7), &write(0, b"b")), Admit::New, "ids are per journal");
    }
}
