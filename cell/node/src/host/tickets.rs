//! Requests from the bus and the answers owed on their tickets.

use paros_core::{Call, CallId, JournalKey, ReadAnswer, ReadId};

use super::dormancy::Stashed;
use super::{Early, Host, Hosted, Ticket};
use crate::ports::LogStore;
use crate::rpc::{NodeAnswer, NodeRequest};

impl<S: LogStore> Host<S> {
    /// A request from the bus. Returns the ticket its answer will carry, or the answer itself
    /// when it is immediate (unknown journal).
    pub fn request(&mut self, request: NodeRequest) -> Result<Ticket, NodeAnswer> {
        let ticket = self.next_id;
        self.next_id += 1;
        match request {
            NodeRequest::Call { journal, call } => self.call(ticket, journal, call),
            NodeRequest::Read { journal, read } => self.read(ticket, journal, read),
        }
    }

    pub(super) fn read(
        &mut self,
        ticket: Ticket,
        journal: JournalKey,
        read: paros_core::ReadRequest,
    ) -> Result<Ticket, NodeAnswer> {
        match self.journals.get_mut(&journal) {
            None => Err(NodeAnswer::UnknownJournal),
            Some(Hosted::Dormant(_)) => {
                self.stash.push(Stashed::Read(ticket, journal, read));
                Ok(ticket)
            }
            Some(j) => {
                j.read(ReadId(ticket), read);
                self.checking_in.remove(&journal);
                self.reads.insert((journal, ReadId(ticket)), ticket);
                self.dirty.insert(journal);
                self.touched.insert(journal);
                self.awake.insert(journal);
                Ok(ticket)
            }
        }
    }

    pub(super) fn call(&mut self, ticket: Ticket, journal: JournalKey, call: Call) -> Result<Ticket, NodeAnswer> {
        match self.journals.get_mut(&journal) {
            None => Err(NodeAnswer::UnknownJournal),
            Some(Hosted::Dormant(_)) => {
                self.stash.push(Stashed::Call(ticket, journal, call));
                Ok(ticket)
            }
            Some(Hosted::Replica(_)) => Err(NodeAnswer::Call(paros_core::CallAnswer::Redirect { leader: None })),
            Some(Hosted::Voter(v)) => {
                if v.is_quiet_without_a_leader() {
                    // Awake but asleep as a follower, leaderless (checking in, or woken by a
                    // peer's message): elect now and hold the call for it, as a call that wakes
                    // a dormant journal does, instead of redirecting it nowhere. Not while a
                    // campaign may be under way elsewhere: a second one would depose it.
                    self.campaign(&journal);
                }
                let Some(Hosted::Voter(v)) = self.journals.get_mut(&journal) else { unreachable!("a voter") };
                v.propose(CallId(ticket), call);
                self.checking_in.remove(&journal);
                self.calls.insert((journal, CallId(ticket)), ticket);
                self.dirty.insert(journal);
                self.touched.insert(journal);
                self.awake.insert(journal);
                Ok(ticket)
            }
        }
    }

    pub(super) fn answer(
        &mut self,
        key: JournalKey,
        answers: Vec<(CallId, paros_core::CallAnswer)>,
        reads: Vec<(ReadId, ReadAnswer)>,
        early: &mut impl FnMut(Early),
    ) {
        for (call, answer) in answers {
            if let paros_core::CallAnswer::Verdict(paros_core::journal::Outcome::Accepted { count, .. }) = answer {
                self.stats.records_accepted += count;
            }
            if let Some(t) = self.calls.remove(&(key, call)) {
                early(Early::Answer(t, NodeAnswer::Call(answer)));
            }
        }
        for (read, answer) in reads {
            if let Some(t) = self.reads.remove(&(key, read)) {
                early(Early::Answer(t, NodeAnswer::Read(answer)));
            }
        }
    }
}
