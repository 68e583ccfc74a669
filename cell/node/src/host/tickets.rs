//! Requests from the bus and the answers owed on their tickets.

use std::collections::BTreeMap;

use paros_core::{Call, CallId, JournalKey, ReadAnswer, ReadId};

use super::dormancy::Stashed;
use super::{Early, Host, Hosted, Ticket};
use crate::ports::LogStore;
use crate::rpc::{NodeAnswer, NodeRequest};

/// The calls and reads this machine owes an answer, by journal.
///
/// Invariants: a ticket is minted once (tickets only grow) and owed at most once; an answer
/// is given only for a ticket still owed ([`Tickets::take_call`], [`Tickets::take_read`]), so
/// no request is answered twice.
#[derive(Debug)]
pub(super) struct Tickets {
    next: Ticket,
    pub(super) calls: BTreeMap<(JournalKey, CallId), Ticket>,
    pub(super) reads: BTreeMap<(JournalKey, ReadId), Ticket>,
}

impl Default for Tickets {
    fn default() -> Self {
        Tickets { next: 1, calls: BTreeMap::new(), reads: BTreeMap::new() }
    }
}

impl Tickets {
    /// A fresh ticket.
    pub(super) fn mint(&mut self) -> Ticket {
        let ticket = self.next;
        self.next += 1;
        ticket
    }

    /// The ticket owed for `call` of `key`, no longer owed.
    pub(super) fn take_call(&mut self, key: JournalKey, call: CallId) -> Option<Ticket> {
        self.calls.remove(&(key, call))
    }

    /// The ticket owed for `read` of `key`, no longer owed.
    pub(super) fn take_read(&mut self, key: JournalKey, read: ReadId) -> Option<Ticket> {
        self.reads.remove(&(key, read))
    }

    /// True when a call or a read of `key` is owed an answer.
    pub(super) fn owes(&self, key: &JournalKey) -> bool {
        self.calls.range((*key, CallId(0))..=(*key, CallId(u64::MAX))).next().is_some()
            || self.reads.range((*key, ReadId(0))..=(*key, ReadId(u64::MAX))).next().is_some()
    }

    /// Forgets every call and read of `key`: the tickets that were owed.
    pub(super) fn forget(&mut self, key: &JournalKey) -> Vec<Ticket> {
        let mut owed = Vec::new();
        self.calls.retain(|(k, _), t| {
            let keep = k != key;
            if !keep {
                owed.push(*t);
            }
            keep
        });
        self.reads.retain(|(k, _), t| {
            let keep = k != key;
            if !keep {
                owed.push(*t);
            }
            keep
        });
        owed
    }
}

impl<S: LogStore> Host<S> {
    /// A request from the bus. Returns the ticket its answer will carry, or the answer itself
    /// when it is immediate (unknown journal).
    pub fn request(&mut self, request: NodeRequest) -> Result<Ticket, NodeAnswer> {
        let ticket = self.tickets.mint();
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
                self.dormancy.stash.push(Stashed::Read(ticket, journal, read));
                Ok(ticket)
            }
            Some(j) => {
                j.read(ReadId(ticket), read);
                self.dormancy.checking_in.remove(&journal);
                self.tickets.reads.insert((journal, ReadId(ticket)), ticket);
                self.round.stepped(journal, false);
                Ok(ticket)
            }
        }
    }

    pub(super) fn call(&mut self, ticket: Ticket, journal: JournalKey, call: Call) -> Result<Ticket, NodeAnswer> {
        match self.journals.get_mut(&journal) {
            None => Err(NodeAnswer::UnknownJournal),
            Some(Hosted::Dormant(_)) => {
                self.dormancy.stash.push(Stashed::Call(ticket, journal, call));
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
                self.dormancy.checking_in.remove(&journal);
                self.tickets.calls.insert((journal, CallId(ticket)), ticket);
                self.round.stepped(journal, false);
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
            if let Some(t) = self.tickets.take_call(key, call) {
                early(Early::Answer(t, NodeAnswer::Call(answer)));
            }
        }
        for (read, answer) in reads {
            if let Some(t) = self.tickets.take_read(key, read) {
                early(Early::Answer(t, NodeAnswer::Read(answer)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use paros_core::{JournalId, TenantId};

    fn key(j: u64) -> JournalKey {
        JournalKey { tenant: TenantId(1), journal: JournalId(j) }
    }

    #[test]
    fn a_ticket_is_minted_once_and_answered_at_most_once() {
        let mut t = Tickets::default();
        let (a, b, c) = (t.mint(), t.mint(), t.mint());
        assert!(a < b && b < c, "tickets only grow");
        t.calls.insert((key(1), CallId(a)), a);
        t.reads.insert((key(1), ReadId(b)), b);
        t.reads.insert((key(2), ReadId(c)), c);
        assert!(t.owes(&key(1)) && t.owes(&key(2)) && !t.owes(&key(3)));
        assert_eq!(t.take_call(key(1), CallId(a)), Some(a));
        assert_eq!(t.take_call(key(1), CallId(a)), None, "answered once");
        assert_eq!(t.forget(&key(1)), vec![b], "forgetting a journal returns what it was owed");
        assert!(!t.owes(&key(1)) && t.owes(&key(2)), "and only its own");
        assert_eq!(t.take_read(key(2), ReadId(c)), Some(c));
    }
}
