//! The fault schedule: random and leader-targeted crashes, restarts (some replicas come back
//! with an empty disk), partitions, and the settle tail that ends them all.

use std::collections::BTreeMap;

use paros_core::NodeId;

use super::{ClientKind, Event, MS, RestartCause, World};
use crate::host::{Host, MachineRole};

impl<H: Host> World<H> {
    pub(super) fn voters_up(&self) -> usize {
        self.machines.iter().filter(|m| m.spec.role == MachineRole::Voter && m.host.is_some()).count()
    }

    /// A machine to hit: half the time one that leads some journal (a leader dying or cut off
    /// with proposals in flight is where Paxos earns its keep), else any machine.
    pub(super) fn victim(&mut self) -> usize {
        if self.rng.chance(500_000)
            && let Some(m) = self.a_leader()
        {
            return m;
        }
        self.rng.below(self.machines.len() as u64) as usize
    }

    /// A machine that leads some journal, if any is up.
    pub(super) fn a_leader(&mut self) -> Option<usize> {
        let leaders: Vec<usize> = (0..self.machines.len())
            .filter(|m| {
                let mach = &self.machines[*m];
                mach.host.as_ref().is_some_and(|h| {
                    mach.spec.placements.iter().any(|p| h.probe(&mach.disk, &p.key).is_some_and(|pr| pr.leader))
                })
            })
            .collect();
        (!leaders.is_empty()).then(|| *self.rng.pick(&leaders))
    }

    pub(super) fn on_random_crash(&mut self) {
        if !self.chaos {
            return;
        }
        let Some((lo, hi)) = self.params.crash_gap_ns else { return };
        let next = self.rng.between(lo, hi);
        self.after(next, Event::Crash);
        let m = self.victim();
        if self.machines[m].host.is_none() {
            return;
        }
        let majority = self.params.voters / 2 + 1;
        if self.machines[m].spec.role == MachineRole::Voter && self.voters_up() <= majority && self.rng.chance(800_000)
        {
            return;
        }
        self.crash(m, "random");
        let (lo, hi) = self.params.down_ns;
        let down = self.rng.between(lo, hi);
        self.after(down, Event::Restart(m, RestartCause::Random));
    }

    pub(super) fn on_restart(&mut self, m: usize, cause: RestartCause) {
        let mach = &mut self.machines[m];
        if !mach.present || mach.refused || (mach.held_down && cause == RestartCause::Random) {
            return;
        }
        if cause != RestartCause::Random {
            mach.held_down = false;
        }
        if mach.host.is_some() {
            return;
        }
        if mach.spec.role == MachineRole::Replica && self.rng.chance(self.params.wipe_replica_ppm) {
            let id = self.machines[m].spec.id;
            self.machines[m].disk.wipe();
            self.machines[m].wiped = true;
            self.trace.event(self.now, "wipe", &[id.0], || format!("{id:?} comes back with an empty disk"));
        }
        self.boot(m);
    }

    pub(super) fn on_partition(&mut self) {
        if !self.chaos {
            return;
        }
        let Some((lo, hi)) = self.params.partition_gap_ns else { return };
        let mut groups = BTreeMap::new();
        let ids: Vec<NodeId> = self.machines.iter().map(|m| m.spec.id).collect();
        if self.params.leader_churn || self.rng.chance(500_000) {
            let victim =
                if self.params.leader_churn { self.a_leader().unwrap_or_else(|| self.victim()) } else { self.victim() };
            let alone = self.machines[victim].spec.id;
            for id in &ids {
                groups.insert(*id, u8::from(*id == alone));
            }
        } else {
            for id in &ids {
                groups.insert(*id, self.rng.below(2) as u8);
            }
        }
        let sides: Vec<u64> = ids.iter().map(|id| u64::from(groups[id])).collect();
        self.trace.event(self.now, "partition", &sides, || format!("{groups:?}"));
        self.partition = Some(groups);
        let (llo, lhi) = self.params.partition_len_ns;
        let len = self.rng.between(llo, lhi);
        self.after(len, Event::PartitionHeal);
        let gap = self.rng.between(lo, hi);
        self.after(len + gap, Event::PartitionStart);
    }

    pub(super) fn on_settle(&mut self) {
        self.chaos = false;
        self.partition = None;
        self.progress.on_settle(self.now);
        self.trace.event(self.now, "settle", &[], || "faults stop; every machine restarts".into());
        for m in 0..self.machines.len() {
            self.on_restart(m, RestartCause::Settle);
        }
        let work = self.params.settle_work_ns;
        self.after(work, Event::ClientsStop);
    }

    pub(super) fn on_converge_check(&mut self) {
        let writers_idle = self.clients.iter().all(|c| match &c.kind {
            ClientKind::Writer(w) => !w.busy(),
            ClientKind::Reader(_) | ClientKind::Prober(_) => true,
        });
        let settled = writers_idle
            && (0..self.journals.len()).all(|j| self.converged(j))
            && self.removal_settled()
            && self.moves_settled();
        if settled || self.now >= self.settle_deadline {
            self.done = true;
            return;
        }
        self.after(100 * MS, Event::ConvergeCheck);
    }

    /// True when every machine hosting journal `j` is up and holds the same chosen prefix and
    /// state, covering every slot a quorum is known to have accepted.
    ///
    /// After a seat move, the voters are those of the newest configuration any machine hosting
    /// the journal has applied: a voter it took out (a catch-up source until the registry
    /// records the move done) or a joining one not yet in it is not judged.
    pub(super) fn converged(&self, j: usize) -> bool {
        let (key, founding) = &self.journals[j];
        let hosts: Vec<_> = self
            .machines
            .iter()
            .filter(|m| m.spec.placements.iter().any(|p| p.key == *key))
            .map(|m| (m, m.host.as_ref().and_then(|h| h.probe(&m.disk, key))))
            .collect();
        let newest = hosts.iter().filter_map(|(_, p)| p.as_ref()).max_by_key(|p| p.state.epoch);
        let voters: Vec<paros_core::NodeId> = match newest.and_then(|p| p.state.voters) {
            Some(v) => v.as_slice().to_vec(),
            None => founding.voters.clone(),
        };
        let mut first = None;
        for (mach, probe) in hosts {
            if mach.spec.role == crate::host::MachineRole::Voter && !voters.contains(&mach.spec.id) {
                continue;
            }
            let Some(probe) = probe else { return false };
            let here = (probe.chosen_up_to, probe.state);
            match first {
                None => first = Some(here),
                Some(f) if f != here => return false,
                Some(_) => {}
            }
        }
        let Some((chosen_up_to, _)) = first else { return true };
        self.audit.highest_chosen(key).is_none_or(|s| s < chosen_up_to)
    }
}
