//! The progress claim: once the settle tail has run fault-free for a grace period (every machine
//! restarted, a leader elected), every call is answered and every journal with a pending call
//! decides a slot within a bound. A stall that heals before the run ends is still a violation.

use std::collections::BTreeMap;

use crate::check::{Claim, Claims};

/// What the progress audit knows about one journal.
#[derive(Clone, Debug, Default)]
struct Journal {
    /// When any node last applied a slot of the journal.
    last_decided_ns: u64,
    /// Calls in flight (request id → when sent).
    pending: BTreeMap<u64, u64>,
    longest_stall_ns: u64,
}

/// The progress audit of one run.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Calls sent from here on are judged; `None` until the settle tail starts.
    judged_from_ns: Option<u64>,
    grace_ns: u64,
    /// The longest a journal with a pending call may go without deciding.
    bound_ns: u64,
    journals: Vec<Journal>,
}

impl Progress {
    /// Judges `journals` journals with a grace period after the tail starts and a stall bound.
    #[must_use]
    pub fn new(journals: usize, grace_ns: u64, bound_ns: u64) -> Progress {
        Progress { judged_from_ns: None, grace_ns, bound_ns, journals: vec![Journal::default(); journals] }
    }

    /// The fault-free tail starts now.
    pub fn on_settle(&mut self, now: u64) {
        self.judged_from_ns = Some(now + self.grace_ns);
    }

    fn judging(&self, now: u64) -> bool {
        self.judged_from_ns.is_some_and(|t| now >= t)
    }

    /// A call (write, truncate, set-leader) to journal `j` left a client.
    pub fn on_call(&mut self, j: usize, req: u64, now: u64) {
        self.measure(j, now);
        self.journals[j].pending.insert(req, now);
    }

    /// A node applied a slot of journal `j`.
    pub fn on_decided(&mut self, j: usize, now: u64) {
        self.measure(j, now);
        self.journals[j].last_decided_ns = now;
    }

    /// A call to journal `j` sent at `sent_ns` ended: answered, or given up by its client.
    pub fn on_end(&mut self, j: usize, req: u64, now: u64, answered: bool, claims: &mut Claims) {
        self.measure(j, now);
        let Some(sent) = self.journals[j].pending.remove(&req) else { return };
        if self.judging(sent) {
            claims.check(Claim::Progress, answered, || {
                format!("journal {j}: a call sent at {} ms in the fault-free tail was never answered", sent / 1_000_000)
            });
            if answered {
                claims.reach(Claim::Progress);
            }
        }
    }

    /// How long journal `j` has wanted a decision without one, as of `now`, counted only inside
    /// the judged part of the tail.
    fn stall(&self, j: usize, now: u64) -> u64 {
        let Some(from) = self.judged_from_ns else { return 0 };
        let journal = &self.journals[j];
        let Some(oldest) = journal.pending.values().min() else { return 0 };
        now.saturating_sub(from.max(*oldest).max(journal.last_decided_ns))
    }

    fn measure(&mut self, j: usize, now: u64) {
        let stall = self.stall(j, now);
        let journal = &mut self.journals[j];
        journal.longest_stall_ns = journal.longest_stall_ns.max(stall);
    }

    /// The run ended: judges every journal's longest stall. Returns the longest of all.
    pub fn finish(&mut self, now: u64, claims: &mut Claims) -> u64 {
        let mut longest = 0;
        for j in 0..self.journals.len() {
            self.measure(j, now);
            let stall = self.journals[j].longest_stall_ns;
            longest = longest.max(stall);
            if self.judged_from_ns.is_some() {
                let bound = self.bound_ns;
                claims.check(Claim::Progress, stall <= bound, || {
                    format!(
                        "journal {j} had a call pending and decided nothing for {} ms in the fault-free tail (bound {} ms)",
                        stall / 1_000_000,
                        bound / 1_000_000
                    )
                });
            }
        }
        longest
    }
}
