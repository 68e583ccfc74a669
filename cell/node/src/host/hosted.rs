//! One hosted journal: a voter or a learner-only replica behind one face.

use paros_core::{Message, NodeId, ReadId, ReadRequest, Ready, Replica, Voter};

use super::HostStats;

/// One journal as hosted here.
#[derive(Debug)]
pub(super) enum Hosted {
    Voter(Box<Voter>),
    Replica(Box<Replica>),
    /// Quiet long enough to leave memory: only its configuration stays; the store holds the
    /// rest, and the first input for it rebuilds it (`Host::wake_dormant`).
    Dormant(std::sync::Arc<paros_core::JournalConfig>),
}

/// A voter's part in elections: the ballot promised here and whether it leads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct ElectionMark {
    promised: paros_core::Ballot,
    leading: bool,
}

impl Hosted {
    fn election_mark(&self) -> Option<ElectionMark> {
        match self {
            Hosted::Voter(v) => Some(ElectionMark { promised: v.promised(), leading: v.is_leader() }),
            Hosted::Replica(_) | Hosted::Dormant(_) => None,
        }
    }

    /// Runs `input` and counts the campaigns it started and the leaderships it won. Only this
    /// machine's proposer mints ballots naming it, and its own acceptor promises each at once
    /// (a campaign's ballot is above anything promised here): a new own ballot promised is a
    /// campaign.
    fn counting(&mut self, stats: &mut HostStats, input: impl FnOnce(&mut Hosted)) {
        let before = self.election_mark();
        input(self);
        let (Some(before), Some(after), Hosted::Voter(v)) = (before, self.election_mark(), &*self) else { return };
        if after.promised != before.promised && after.promised.node == v.id() {
            stats.campaigns += 1;
        }
        if after.leading && !before.leading {
            stats.leaderships_won += 1;
        }
    }

    /// Starts a campaign now, on a voter.
    pub(super) fn campaign(&mut self, stats: &mut HostStats) {
        self.counting(stats, |h| {
            if let Hosted::Voter(v) = h {
                v.campaign();
            }
        });
    }
    /// The journal's life here (`None` while dormant: it has none until woken).
    pub(super) fn life(&self) -> Option<paros_core::Life> {
        match self {
            Hosted::Voter(v) => Some(v.life()),
            Hosted::Replica(r) => Some(r.life()),
            Hosted::Dormant(_) => None,
        }
    }

    /// How far the journal is applied here (its fold's `next_seq`; `None` while dormant).
    pub(super) fn applied_to(&self) -> Option<paros_core::Seq> {
        match self {
            Hosted::Voter(v) => Some(v.state().next_seq),
            Hosted::Replica(r) => Some(r.state().next_seq),
            Hosted::Dormant(_) => None,
        }
    }

    /// The configuration it was placed with (its founding one; see [`Voter::placed`]).
    pub(super) fn placed(&self) -> &paros_core::JournalConfig {
        match self {
            Hosted::Voter(v) => v.placed(),
            Hosted::Replica(r) => r.placed(),
            Hosted::Dormant(c) => c,
        }
    }

    pub(super) fn step(&mut self, from: NodeId, m: Message, stats: &mut HostStats) {
        self.counting(stats, |h| match h {
            Hosted::Voter(v) => v.step(from, m),
            Hosted::Replica(r) => r.step(from, m),
            Hosted::Dormant(_) => unreachable!("inputs for a dormant journal wait until it is woken"),
        });
    }
    pub(super) fn tick(&mut self, stats: &mut HostStats) {
        self.counting(stats, |h| match h {
            Hosted::Voter(v) => v.tick(),
            Hosted::Replica(r) => r.tick(),
            Hosted::Dormant(_) => {}
        });
    }
    pub(super) fn read(&mut self, id: ReadId, req: ReadRequest, stats: &mut HostStats) {
        match self {
            Hosted::Voter(v) => v.read(id, req),
            Hosted::Replica(r) => {
                if r.serving_state() != paros_core::ReplicaState::Serving {
                    stats.reads_refused_unready += 1;
                }
                r.read(id, req);
            }
            Hosted::Dormant(_) => unreachable!("inputs for a dormant journal wait until it is woken"),
        }
    }
    pub(super) fn ready(&mut self) -> Ready {
        match self {
            Hosted::Voter(v) => v.ready(),
            Hosted::Replica(r) => r.ready(),
            Hosted::Dormant(_) => Ready::default(),
        }
    }
    pub(super) fn take_released(&mut self) -> paros_core::Released {
        match self {
            Hosted::Voter(v) => v.take_released(),
            Hosted::Replica(r) => r.take_released(),
            Hosted::Dormant(_) => paros_core::Released::default(),
        }
    }
    /// The last `Ready` is durable: a voter's own promises count now, so a campaign may win here.
    pub(super) fn advance(&mut self, stats: &mut HostStats) {
        self.counting(stats, |h| match h {
            Hosted::Voter(v) => v.advance(),
            Hosted::Replica(r) => r.advance(),
            Hosted::Dormant(_) => {}
        });
    }
    pub(super) fn has_ready(&self) -> bool {
        match self {
            Hosted::Voter(v) => v.has_ready(),
            Hosted::Replica(r) => r.has_ready(),
            Hosted::Dormant(_) => false,
        }
    }
    /// True when the chosen index in storage is the one applied (dormant: nothing to write).
    pub(super) fn chosen_is_written(&self) -> bool {
        match self {
            Hosted::Voter(v) => v.chosen_is_written(),
            Hosted::Replica(r) => r.chosen_is_written(),
            Hosted::Dormant(_) => true,
        }
    }

    pub(super) fn write_chosen(&mut self) {
        match self {
            Hosted::Voter(v) => v.write_chosen(),
            Hosted::Replica(r) => r.write_chosen(),
            Hosted::Dormant(_) => {}
        }
    }

    pub(super) fn is_quiet(&self) -> bool {
        match self {
            Hosted::Voter(v) => v.is_quiet(),
            Hosted::Replica(r) => r.is_quiet(),
            Hosted::Dormant(_) => true,
        }
    }
}
