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
    /// Since when the journal has wanted a decision without one: from the first call after a
    /// decision, through calls that ended deciding nothing (a redirect, busy, no verdict, a
    /// timeout) and were retried within the retry window, until a slot is applied with nothing
    /// pending or a call is answered with a verdict.
    wanting_since: Option<u64>,
    /// When the last call ended, and whether with a verdict.
    last_end: Option<(u64, bool)>,
    longest_stall_ns: u64,
    /// When the longest stall was last measured.
    longest_ended_ns: u64,
}

/// The progress audit of one run.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Calls sent from here on are judged; `None` until the settle tail starts.
    judged_from_ns: Option<u64>,
    grace_ns: u64,
    /// The longest a journal with a pending call may go without deciding.
    bound_ns: u64,
    /// A call sent this soon after one that ended without a verdict is its retry: the wait goes
    /// on. A later one (the client paused) starts a new wait.
    retry_window_ns: u64,
    journals: Vec<Journal>,
}

impl Progress {
    /// Judges `journals` journals with a grace period after the tail starts and a stall bound.
    #[must_use]
    pub fn new(journals: usize, grace_ns: u64, bound_ns: u64, retry_window_ns: u64) -> Progress {
        Progress {
            judged_from_ns: None,
            grace_ns,
            bound_ns,
            retry_window_ns,
            journals: vec![Journal::default(); journals],
        }
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
        let window = self.retry_window_ns;
        let journal = &mut self.journals[j];
        if journal.pending.is_empty() {
            let retry = journal.last_end.is_some_and(|(t, decided)| !decided && now.saturating_sub(t) <= window);
            if !retry {
                journal.wanting_since = None;
            }
        }
        self.measure(j, now);
        let journal = &mut self.journals[j];
        journal.pending.insert(req, now);
        journal.wanting_since.get_or_insert(now);
    }

    /// A node applied a slot of journal `j`.
    pub fn on_decided(&mut self, j: usize, now: u64) {
        self.measure(j, now);
        let journal = &mut self.journals[j];
        journal.last_decided_ns = now;
        journal.wanting_since = (!journal.pending.is_empty()).then_some(now);
    }

    /// A call to journal `j` ended: `answered` (or given up by its client), with a verdict
    /// (`decided`) or without (a redirect, busy, no verdict: its client will try again).
    pub fn on_end(&mut self, j: usize, req: u64, now: u64, answered: bool, decided: bool, claims: &mut Claims) {
        self.measure(j, now);
        let journal = &mut self.journals[j];
        let Some(sent) = journal.pending.remove(&req) else { return };
        journal.last_end = Some((now, decided));
        if journal.pending.is_empty() && decided {
            journal.wanting_since = None;
        }
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
    /// the judged part of the tail. Measured at the journal's own events (calls sent and ended,
    /// slots applied), so a client that gives up after a refusal-free answer leaves no stall
    /// growing after its last call.
    fn stall(&self, j: usize, now: u64) -> u64 {
        let journal = &self.journals[j];
        if journal.pending.is_empty() {
            return 0;
        }
        let (Some(from), Some(since)) = (self.judged_from_ns, journal.wanting_since) else { return 0 };
        now.saturating_sub(from.max(since))
    }

    fn measure(&mut self, j: usize, now: u64) {
        let stall = self.stall(j, now);
        let journal = &mut self.journals[j];
        if stall > journal.longest_stall_ns {
            journal.longest_stall_ns = stall;
            journal.longest_ended_ns = now;
        }
    }

    /// The longest stall of the run so far: its length, the journal and when it was measured.
    #[must_use]
    pub fn longest(&self) -> Option<(u64, usize, u64)> {
        self.journals
            .iter()
            .enumerate()
            .map(|(j, x)| (x.longest_stall_ns, j, x.longest_ended_ns))
            .max()
            .filter(|l| l.0 > 0)
    }

    /// The run ended: judges every journal's longest stall (as measured at its last event).
    /// Returns the longest of all.
    pub fn finish(&mut self, claims: &mut Claims) -> u64 {
        let mut longest = 0;
        for j in 0..self.journals.len() {
            let stall = self.journals[j].longest_stall_ns;
            longest = longest.max(stall);
            if self.judged_from_ns.is_some() {
                let bound = self.bound_ns;
                claims.check(Claim::Progress, stall <= bound, || {
                    format!(
                        "journal {j} had a call pending and decided nothing for {} ms \
                         in the fault-free tail (bound {} ms)",
                        stall / 1_000_000,
                        bound / 1_000_000
                    )
                });
            }
        }
        longest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn progress() -> Progress {
        let mut p = Progress::new(1, 100 * MS, 500 * MS, 30 * MS);
        p.on_settle(0);
        p
    }

    fn violations(p: &mut Progress) -> (u64, u64) {
        let mut claims = Claims::default();
        let longest = p.finish(&mut claims);
        (claims.violations(), longest)
    }

    #[test]
    fn retries_without_a_verdict_add_up_to_one_stall() {
        let mut p = progress();
        let mut claims = Claims::default();
        // Redirects answered at once and retried 10 ms later, for 800 ms: one long wait.
        for i in 0..80u64 {
            let t = 200 * MS + i * 10 * MS;
            p.on_call(0, i, t);
            p.on_end(0, i, t + 2 * MS, true, false, &mut claims);
        }
        p.on_call(0, 99, 1_010 * MS);
        p.on_end(0, 99, 1_011 * MS, true, false, &mut claims);
        let (violated, longest) = violations(&mut p);
        assert!(longest >= 800 * MS, "the stall spans every retry: {longest}");
        assert_eq!(violated, 1, "a stall past the bound is a violation");
    }

    #[test]
    fn a_pause_between_calls_is_not_a_stall() {
        let mut p = progress();
        let mut claims = Claims::default();
        p.on_call(0, 1, 200 * MS);
        p.on_end(0, 1, 210 * MS, true, false, &mut claims);
        // The client paused for 700 ms (past the retry window) before its next call.
        p.on_call(0, 2, 910 * MS);
        p.on_decided(0, 920 * MS);
        p.on_end(0, 2, 921 * MS, true, true, &mut claims);
        let (violated, longest) = violations(&mut p);
        assert_eq!(violated, 0);
        assert!(longest <= 20 * MS, "only the time a call was pending counts: {longest}");
    }

    #[test]
    fn a_call_in_the_judged_tail_that_is_never_answered_is_a_violation_and_one_before_it_is_not() {
        let mut p = progress();
        let mut claims = Claims::default();
        p.on_call(0, 1, 50 * MS);
        p.on_end(0, 1, 850 * MS, false, false, &mut claims);
        assert_eq!(claims.violations(), 0, "a call sent during the grace period is not judged");
        p.on_call(0, 2, 900 * MS);
        p.on_end(0, 2, 1_700 * MS, false, false, &mut claims);
        assert_eq!(claims.violations(), 1, "a call sent in the judged tail must be answered");
    }

    #[test]
    fn decisions_while_calls_are_pending_restart_the_wait() {
        let mut p = progress();
        let mut claims = Claims::default();
        p.on_call(0, 1, 200 * MS);
        for i in 0..10u64 {
            p.on_decided(0, 300 * MS + i * 100 * MS);
        }
        p.on_end(0, 1, 1_250 * MS, true, true, &mut claims);
        let (violated, longest) = violations(&mut p);
        assert_eq!(violated, 0, "a journal that keeps deciding is not stalled");
        assert!(longest <= 150 * MS, "{longest}");
    }
}
