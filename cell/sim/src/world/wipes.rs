//! A voter machine loses its disk (issue 34, rule 8 of docs/reconfiguration.md). Its shell
//! knows the machine's identity from the first boot, so the wiped store refuses to boot under
//! it (the node's own boot check, `BootError::Wiped`; a daemon exits 78): the identity made
//! promises the store no longer holds. The machine comes back only as a new identity, on a
//! fresh store, with `Rejoin { old, new }` to the registry, which retires the old identity
//! for good; the planner moves its seats off, and the new identity takes seats like any node.
//!
//! The claim: no vote (a `Promise` or an `Accepted`) ever leaves under the wiped identity.

use paros_core::NodeId;
use paros_registry::{Command, Incarnation, Op, Request, RequestId};

use super::{Event, World};
use crate::check::Claim;
use crate::host::{Host, MachineRole, Packet, RoundOutput};
use crate::registry::plan::{Scripted, bus_address, zone};
use crate::rng::SimRng;

const MS: u64 = 1_000_000;

/// The side stream wipes draw from (added after seeds were published).
const WIPE_SALT: u64 = 0x7769_7065_7265_6a6e;

/// What a seed decides about a voter losing its disk.
#[derive(Clone, Copy, Debug)]
pub struct WipeParams {
    pub at_ns: u64,
    /// The voter wiped, by index among the voters.
    pub voter: usize,
    /// From the wipe to the machine booting again as a new identity.
    pub rejoin_after_ns: u64,
    /// The new identity.
    pub new_id: NodeId,
    /// Wipe the target of a seat move in progress (the registry journal's first) if one is
    /// in progress by `hunt_until_ns`; looked for every [`HUNT_EVERY_NS`] from `at_ns` on.
    pub hunt_until_ns: Option<u64>,
}

/// How often a wipe hunting a move's target looks for one.
const HUNT_EVERY_NS: u64 = 200 * MS;

impl WipeParams {
    /// A wipe in about three seeds in ten, during the first two thirds of the chaos.
    #[must_use]
    pub fn draw(rng: &SimRng, voters: usize, chaos_ns: u64) -> Option<WipeParams> {
        let mut side = rng.side(WIPE_SALT);
        if !side.chance(300_000) || voters == 0 || chaos_ns < 2_000 * MS {
            return None;
        }
        let at_ns = side.between(1_000 * MS, chaos_ns * 2 / 3);
        let voter = side.below(voters as u64) as usize;
        let rejoin_after_ns = side.between(100 * MS, 1_500 * MS);
        let new_id = NodeId(side.u64());
        let hunt_until_ns = side.chance(500_000).then_some(chaos_ns * 5 / 6);
        Some(WipeParams { at_ns, voter, rejoin_after_ns, new_id, hunt_until_ns })
    }
}

/// The wipe of one world, if its seed drew one.
#[derive(Debug, Default)]
pub(super) struct WipesWorld {
    pub params: Option<WipeParams>,
    /// The machine the new identity boots on (present from the rejoin on).
    pub spare: Option<usize>,
    /// The identity wiped, once it was.
    pub wiped: Option<NodeId>,
    /// The new identity was placed a journal.
    pub seated: bool,
}

impl<H: Host> World<H> {
    pub(super) fn schedule_wipe(&mut self) {
        if let Some(p) = self.wipes.params {
            self.at(p.at_ns, Event::Wipe(p.voter));
        }
    }

    /// Voter machine `m` (or the next voter still present) loses its disk — or, in a seed
    /// whose wipe hunts a move's target, that target as soon as a move is in progress (`m`
    /// when none was by the end of the hunt): it crashes, its disk is wiped, and it boots
    /// again, asserting its identity: the store refuses (`boot` marks the machine refused). The
    /// machine comes back as a new identity later ([`Self::on_rejoin`]). A move to a wiped
    /// target — the registry journal's among them — completes with a dead voter once the
    /// directory shows it replaced, and the planner then heals it.
    pub(super) fn on_wipe(&mut self, m: usize) {
        let voters = self.params.voters;
        let wipeable = |w: &World<H>, i: usize| {
            let mach = &w.machines[i];
            mach.present && !mach.refused && mach.spec.role == MachineRole::Voter
        };
        if let Some(until) = self.wipes.params.and_then(|p| p.hunt_until_ns) {
            let hunted = self.moves_target_in_progress().and_then(|id| self.index.get(&id).copied());
            match hunted {
                Some(t) if wipeable(self, t) => return self.wipe(t),
                _ if self.now + HUNT_EVERY_NS <= until => return self.after(HUNT_EVERY_NS, Event::Wipe(m)),
                _ => {}
            }
        }
        if let Some(m) = (0..voters).map(|k| (m + k) % voters).find(|i| wipeable(self, *i)) {
            self.wipe(m);
        }
    }

    fn wipe(&mut self, m: usize) {
        let id = self.machines[m].spec.id;
        self.crash(m, "its disk is lost");
        self.machines[m].disk.wipe();
        self.wipes.wiped = Some(id);
        self.moves_target_wiped(id);
        self.trace.event(self.now, "wipe", &[id.0], || format!("{id:?} comes back with an empty disk"));
        self.boot(m);
        if let Some(p) = self.wipes.params {
            self.after(p.rejoin_after_ns, Event::Rejoin);
        }
    }

    /// The wiped machine boots as its new identity on a fresh store and asks the registry to
    /// `Rejoin` it in the old one's place.
    pub(super) fn on_rejoin(&mut self) {
        let (Some(spare), Some(old)) = (self.wipes.spare, self.wipes.wiped) else { return };
        if self.machines[spare].present {
            return;
        }
        self.machines[spare].present = true;
        self.boot(spare);
        let Some(incarnation) = self.machines[spare].host.as_ref().and_then(Host::incarnation) else { return };
        let new = self.machines[spare].spec.id;
        let old_m = self.index[&old];
        let rejoin = Command::Rejoin {
            old,
            new,
            bus_address: bus_address(200 + old_m),
            zone: zone(old_m),
            incarnation: Incarnation(incarnation.0),
        };
        let id = RequestId(0x7265_6a6f_u128 << 96 | u128::from(new.0));
        self.registry.script.push(Scripted { at_ns: self.now, request: Request { id, op: Op::Command(rejoin) } });
        self.trace.event(self.now, "rejoin", &[old.0, new.0], || format!("{old:?} rejoins as {new:?}"));
    }

    /// What machine `from` releases: no vote may leave under a wiped identity.
    pub(super) fn wipes_check_votes(&mut self, from: NodeId, out: &RoundOutput) {
        let Some(wiped) = self.wipes.wiped else { return };
        for (_, packet) in &out.packets {
            if let Packet::Protocol(e) = packet {
                if !e.message.needs_durable_sender() {
                    continue;
                }
                let journal = e.journal;
                self.audit.claims.check(Claim::WipedNeverVotes, from != wiped, || {
                    format!("the wiped identity {from:?} sent a vote for {journal:?}: {:?}", e.message)
                });
            }
        }
    }

    /// Machine `m` was placed a journal: the new identity of a wiped machine holds a seat.
    pub(super) fn wipes_placed(&mut self, m: usize) {
        if self.wipes.spare == Some(m) && !self.wipes.seated {
            self.wipes.seated = true;
            self.audit.claims.reach(Claim::WipedNeverVotes);
        }
    }
}
