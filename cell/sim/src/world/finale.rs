//! The end of a run: the claims that can only be judged once the settle tail is over.

use std::collections::BTreeMap;

use bytes::Bytes;
use paros_core::journal::{Outcome, WriterMode};
use paros_core::{JournalKey, Slot};

use super::{RunReport, World};
use crate::check::gaps;
use crate::check::linearizability::{self, Verdict};
use crate::check::{Claim, HistoryOp, PageBounds, ProbeCounts};
use crate::host::{Host, MachineRole};

impl<H: Host> World<H> {
    pub(super) fn finish(mut self) -> RunReport {
        let converged: Vec<bool> = (0..self.journals.len()).map(|j| self.converged(j)).collect();
        for (j, ok) in converged.iter().enumerate() {
            let detail = self.convergence_detail(j);
            self.audit.claims.check(Claim::Converges, *ok, || detail);
            if *ok {
                self.audit.claims.reach(Claim::Converges);
            }
        }
        let jumps: Vec<_> = self.audit.jumps.iter().map(|(k, r)| (*k, *r)).collect();
        for ((node, key), role) in jumps {
            let j = self.journals.iter().position(|(k, _)| *k == key).expect("a known journal");
            let claim = match role {
                MachineRole::Voter => Claim::VoterTrimJump,
                MachineRole::Replica => Claim::ReplicaTrimJump,
            };
            self.audit.claims.check(claim, converged[j], || {
                format!("{node:?} jumped to a trim point of journal {j} and did not converge")
            });
            if converged[j] {
                self.audit.claims.reach(claim);
            }
        }
        for (j, ok) in converged.iter().enumerate() {
            if *ok {
                self.check_acked_retained(j);
            }
        }
        self.tier_finish();
        self.moves_finish();
        self.audit.check_governed();
        let (checked, exhausted) = self.check_histories();
        let longest_stall_ns = self.progress.finish(&mut self.audit.claims);
        if let Some((ns, j, at)) = self.progress.longest()
            && self.trace.printing()
        {
            println!("longest stall: journal {j}, {} ms, measured at {} ms", ns / 1_000_000, at / 1_000_000);
        }
        let events = self.trace.events();
        let (joined, retired) = self.tier_changed();
        RunReport {
            seed: self.seed,
            hash: self.trace.hash(),
            events,
            sim_ns: self.now,
            histories_checked: checked,
            histories_exhausted: exhausted,
            header: self.history_header(),
            probes: ProbeCounts::of(&self.history),
            history: if self.options.keep_history { std::mem::take(&mut self.history) } else { Vec::new() },
            claims: self.audit.claims,
            longest_stall_ns,
            registry: self.registry.figures(),
            joined,
            retired,
        }
    }

    fn convergence_detail(&self, j: usize) -> String {
        let (key, _) = &self.journals[j];
        let mut s = format!("journal {j} ({key:?}) did not converge by {} ms:", self.now / 1_000_000);
        for mach in self.machines.iter().filter(|m| m.spec.placements.iter().any(|p| p.key == *key)) {
            match mach.host.as_ref().and_then(|h| h.probe(&mach.disk, key)) {
                Some(p) => s.push_str(&format!(
                    " [{:?} chosen_up_to={:?} floor={:?} state={:?} leader={}]",
                    mach.spec.id, p.chosen_up_to, p.floor, p.state, p.leader
                )),
                None => s.push_str(&format!(" [{:?} down]", mach.spec.id)),
            }
        }
        if let Some(h) = self.audit.highest_chosen(key) {
            s.push_str(&format!(" highest slot a quorum accepted: {h:?}"));
        }
        s
    }

    /// Every acknowledged position the journal still retains is held, with the acknowledged
    /// record, by every machine that holds it, and by at least one.
    fn check_acked_retained(&mut self, j: usize) {
        let (key, _) = self.journals[j].clone();
        let mut held: BTreeMap<u64, Vec<Bytes>> = BTreeMap::new();
        let mut view = None;
        for mach in self.machines.iter().filter(|m| m.spec.placements.iter().any(|p| p.key == key)) {
            let Some(host) = mach.host.as_ref() else { continue };
            let Some(probe) = host.probe(&mach.disk, &key) else { continue };
            view = Some(probe.state);
            let mut slot = probe.floor;
            while slot < probe.chosen_up_to {
                if let (Some(cmd), Some(j)) =
                    (host.command_at(&mach.disk, &key, slot), self.audit.judged.get(&(key, slot)))
                    && let (Outcome::Accepted { seq, .. }, Some(entry)) = (j.outcome, cmd.entry())
                {
                    for (i, r) in entry.records.iter().enumerate() {
                        held.entry(seq.0 + i as u64).or_default().push(r.clone());
                    }
                }
                slot = Slot(slot.0 + 1);
            }
        }
        let Some(state) = view else { return };
        let acked: Vec<(u64, Bytes)> =
            self.audit.acked.range((key, 0)..=(key, u64::MAX)).map(|((_, pos), r)| (*pos, r.clone())).collect();
        for (pos, record) in acked {
            let in_range = pos < state.next_seq.0;
            self.audit.claims.check(Claim::AckedNeverLost, in_range, || {
                format!("{key:?} seq{pos} was acknowledged but the journal ends at {:?}", state.next_seq)
            });
            if pos < state.first_seq.0 {
                continue;
            }
            let copies = held.get(&pos).map_or(&[][..], Vec::as_slice);
            let ok = !copies.is_empty() && copies.iter().all(|c| *c == record);
            self.audit.claims.check(Claim::AckedNeverLost, ok, || {
                format!("{key:?} seq{pos}: acknowledged {record:?}, retained as {copies:?}")
            });
            if ok {
                self.audit.claims.reach(Claim::AckedNeverLost);
            }
        }
    }

    fn check_histories(&mut self) -> (u64, u64) {
        let bounds = PageBounds {
            records_max: self.params.tunables.page_records_max,
            bytes_max: self.params.tunables.page_bytes_max,
        };
        let mut by_journal: BTreeMap<JournalKey, Vec<HistoryOp>> = BTreeMap::new();
        for op in &self.history {
            by_journal.entry(op.journal).or_default().push(op.clone());
        }
        let gaps = gaps::check(&self.history);
        for _ in 0..gaps.checked.saturating_sub(gaps.violations.len() as u64) {
            self.audit.claims.check(Claim::GapsReported, true, String::new);
        }
        for v in gaps.violations {
            self.audit.claims.check(Claim::GapsReported, false, || v);
        }
        for _ in 0..gaps.gaps_crossed {
            self.audit.claims.reach(Claim::GapsReported);
        }
        let (mut checked, mut exhausted) = (0, 0);
        for (key, ops) in by_journal {
            checked += 1;
            let mode = self.journals.iter().find(|(k, _)| *k == key).map_or(WriterMode::Single, |(_, c)| c.mode);
            match linearizability::check(&ops, mode, bounds, self.options.lin_step_budget) {
                Verdict::Linearizable { ops } => {
                    self.audit.claims.check(Claim::Linearizable, true, String::new);
                    if ops > 0 {
                        self.audit.claims.reach(Claim::Linearizable);
                    }
                }
                Verdict::Violation { detail } => {
                    self.audit.claims.check(Claim::Linearizable, false, || format!("{key:?}: {detail}"));
                }
                Verdict::BudgetExhausted { .. } => exhausted += 1,
            }
        }
        (checked, exhausted)
    }
}
