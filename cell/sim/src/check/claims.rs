//! The named claims every run checks, and their counters.

use std::fmt;

/// One claim the simulation checks on every run.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Claim {
    OneChosenPerSlot,
    SameOutcome,
    PromiseNeverDecreases,
    AckedNeverLost,
    Converges,
    VoterTrimJump,
    ReplicaTrimJump,
    ReadBelowTrimRefused,
    SameFold,
    Linearizable,
    Progress,
    ContestedCampaign,
    StaleAccept,
    CrashBeforeSync,
    GapsReported,
    RegistrySameDirectory,
    RunWithoutEndNeverRestored,
    RegistryRestoresAtFloor,
    RegistryCoordinatorFenced,
    FetchedFromDisk,
    DormantWakes,
    MultiWriterRace,
    StaleAnswerAfterWake,
    AnswerForItsRequest,
    ReplicaCaughtUpFirst,
    AtLeastReached,
    UnservedSaysApplied,
    ReplicaJoins,
    ReplicaLeaves,
    ReadRouted,
    ConfigsAgree,
    MoveCompletes,
    MoveWhileDown,
    MoveCoordinatorCrash,
    MoveConcurrent,
    MoveTrimJump,
    MoveDrainUnderLoad,
    MoveHeals,
    MoveBack,
    MoveRegistry,
    MoveTargetWiped,
    WipedNeverVotes,
    ReadCached,
}

impl Claim {
    pub const ALL: [Claim; 43] = [
        Claim::OneChosenPerSlot,
        Claim::SameOutcome,
        Claim::PromiseNeverDecreases,
        Claim::AckedNeverLost,
        Claim::Converges,
        Claim::VoterTrimJump,
        Claim::ReplicaTrimJump,
        Claim::ReadBelowTrimRefused,
        Claim::SameFold,
        Claim::Linearizable,
        Claim::Progress,
        Claim::ContestedCampaign,
        Claim::StaleAccept,
        Claim::CrashBeforeSync,
        Claim::GapsReported,
        Claim::RegistrySameDirectory,
        Claim::RunWithoutEndNeverRestored,
        Claim::RegistryRestoresAtFloor,
        Claim::RegistryCoordinatorFenced,
        Claim::FetchedFromDisk,
        Claim::DormantWakes,
        Claim::MultiWriterRace,
        Claim::StaleAnswerAfterWake,
        Claim::AnswerForItsRequest,
        Claim::ReplicaCaughtUpFirst,
        Claim::AtLeastReached,
        Claim::UnservedSaysApplied,
        Claim::ReplicaJoins,
        Claim::ReplicaLeaves,
        Claim::ReadRouted,
        Claim::ConfigsAgree,
        Claim::MoveCompletes,
        Claim::MoveWhileDown,
        Claim::MoveCoordinatorCrash,
        Claim::MoveConcurrent,
        Claim::MoveTrimJump,
        Claim::MoveDrainUnderLoad,
        Claim::MoveHeals,
        Claim::MoveBack,
        Claim::MoveRegistry,
        Claim::MoveTargetWiped,
        Claim::WipedNeverVotes,
        Claim::ReadCached,
    ];

    /// The claim's name, exactly as the runner prints it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Claim::OneChosenPerSlot => "at most one command is chosen per slot",
            Claim::SameOutcome => "every node judges a slot to the same outcome",
            Claim::PromiseNeverDecreases => "a node's promised ballot never decreases",
            Claim::AckedNeverLost => "an acknowledged write is never lost",
            Claim::Converges => "every node converges to the cluster's chosen prefix at the end of the settle tail",
            Claim::VoterTrimJump => "a below-floor node recovers by jumping to a peer's trim point",
            Claim::ReplicaTrimJump => "replica: a replica below the floor jumps to the trim point",
            Claim::ReadBelowTrimRefused => "journal read: a read below the trim point is refused",
            Claim::SameFold => "every client folds the same record to the same state",
            Claim::Linearizable => "a client history is linearizable",
            Claim::Progress => {
                "in the fault-free settle tail every call is answered \
                 and every journal with a pending call decides within a bound"
            }
            Claim::ContestedCampaign => {
                "contested: a campaign whose Promises report different values for one slot at different ballots \
                 re-proposes the reported value of the highest ballot, the chosen one if any"
            }
            Claim::StaleAccept => {
                "contested: an Accept in flight from a deposed leader is never accepted above a higher durable promise"
            }
            Claim::CrashBeforeSync => {
                "contested: a crash between a round's write and its sync takes back no vote that left the machine"
            }
            Claim::GapsReported => "a reader reports every skipped position as a gap",
            Claim::RegistrySameDirectory => "every registry reader folds the same directory",
            Claim::RunWithoutEndNeverRestored => "a checkpoint run without End is never restored",
            Claim::RegistryRestoresAtFloor => "a reader below the floor restores from the checkpoint at the floor",
            Claim::RegistryCoordinatorFenced => "the registry coordinator is fenced by its successor",
            Claim::FetchedFromDisk => {
                "storage: catch-up and reads below a node's in-memory window are served from its disk"
            }
            Claim::DormantWakes => "storage: a journal that went dormant wakes from its disk on the next input",
            Claim::AnswerForItsRequest => {
                "an answer counts only for the request it answers: \
                 one to a journal's earlier life on a machine is dropped, one to its current life is taken"
            }
            Claim::StaleAnswerAfterWake => {
                "dormancy: a reply from a journal's earlier life arrives after it woke, and counts for nothing"
            }
            Claim::MultiWriterRace => {
                "multi-writer: racing appenders are both acknowledged on one journal, each at positions of its own"
            }
            Claim::ReplicaCaughtUpFirst => {
                "replica: a replica serves no read before it has caught up \
                 (reached: a replica that lost its disk serves again)"
            }
            Claim::AtLeastReached => "a read served at_least(seq) reflects every write through seq",
            Claim::UnservedSaysApplied => {
                "an unserved read says how far its server had applied, never further than its fold; \
                 a serving replica that held an at_least(seq) read to its end says short of seq"
            }
            Claim::ReplicaJoins => {
                "replica: a replica added during the run hosts every journal of its tier by the end \
                 (reached: it caught up and served a reader)"
            }
            Claim::ReplicaLeaves => {
                "replica: a replica removed from its tier drops every journal of the tier and serves no read \
                 sent after it dropped it (reached: removed while readers used it, who read on elsewhere)"
            }
            Claim::ReadRouted => {
                "replica: a reader asks the replicas its router ranks: those last seen serving, on the journal's \
                 tier, within the lag bound, not skipped and not removed, least behind first"
            }
            Claim::ConfigsAgree => {
                "reconfiguration: no two configurations of a journal choose different commands for one slot, \
                 and every applied slot was chosen by the configuration governing it \
                 (reached: a slot chosen by a configuration after a stop-sign)"
            }
            Claim::MoveCompletes => {
                "reconfiguration: a journal whose seat the registry moved is back to full strength \
                 (the move recorded done) within a bound after the registry decided it"
            }
            Claim::MoveWhileDown => {
                "contested: a seat moves while another voter of the journal is down, and the move completes"
            }
            Claim::MoveCoordinatorCrash => {
                "contested: the registry coordinator driving a seat move ends mid-move (crash or successor), \
                 and a later one completes it"
            }
            Claim::MoveConcurrent => {
                "contested: a seat move completes with a truncation and a leader change decided \
                 while it was in progress"
            }
            Claim::MoveDrainUnderLoad => {
                "contested: a node drained under write load: the planner moves a seat off it \
                 while the journal's writer is acknowledged, and the move completes"
            }
            Claim::MoveHeals => {
                "contested: the planner heals a journal whose voter went unseen: its seat moves to a live node \
                 and the move completes"
            }
            Claim::MoveTrimJump => {
                "contested: a seat move completes with a machine of the journal jumping to a trim point \
                 while it was in progress"
            }
            Claim::MoveRegistry => {
                "contested: the registry journal's own seat moves (the planner heals or drains a founding \
                 node), and the move completes"
            }
            Claim::MoveTargetWiped => {
                "contested: a seat move's target loses its disk mid-move (the registry journal's among \
                 them), and the move completes, the dead voter left for the planner to heal"
            }
            Claim::WipedNeverVotes => {
                "reconfiguration: a wiped identity never votes again: its store refuses to boot under it, \
                 and it comes back only as a new identity (reached: a wiped voter's new identity holds a seat)"
            }
            Claim::ReadCached => {
                "reads: a machine's read cache answers at_least reads on arrival, without a step, \
                 each judged with every other read of the history (reached: a read was served so)"
            }
            Claim::MoveBack => {
                "contested: a seat moves to a machine the journal was on before (a founder or a voter it \
                 left), placed afresh from the epoch in force, and the move completes"
            }
        }
    }

    /// True for claims a sweep of at least [`MUST_REACH_SEEDS_MIN`] seeds must reach.
    #[must_use]
    pub fn must_reach(self) -> bool {
        matches!(
            self,
            Claim::VoterTrimJump
                | Claim::ReplicaTrimJump
                | Claim::ReadBelowTrimRefused
                | Claim::GapsReported
                | Claim::ReplicaCaughtUpFirst
                | Claim::AtLeastReached
        ) || self.reach_share_min().is_some()
    }

    /// The share of seeds a sweep must reach this claim in (the contested schedules), if any.
    #[must_use]
    pub fn reach_share_min(self) -> Option<f64> {
        match self {
            Claim::ContestedCampaign | Claim::StaleAccept | Claim::CrashBeforeSync | Claim::StaleAnswerAfterWake => {
                Some(0.05)
            }
            Claim::RegistryRestoresAtFloor
            | Claim::RegistryCoordinatorFenced
            | Claim::FetchedFromDisk
            | Claim::DormantWakes => Some(REGISTRY_REACH_SHARE_MIN),
            Claim::MultiWriterRace => Some(MULTI_WRITER_REACH_SHARE_MIN),
            Claim::ReplicaJoins | Claim::ReplicaLeaves => Some(0.05),
            Claim::ReadCached => Some(READ_CACHED_REACH_SHARE_MIN),
            Claim::ReadRouted => Some(READ_ROUTED_REACH_SHARE_MIN),
            Claim::ConfigsAgree
            | Claim::MoveCompletes
            | Claim::MoveWhileDown
            | Claim::MoveCoordinatorCrash
            | Claim::MoveConcurrent
            | Claim::MoveTrimJump
            | Claim::MoveDrainUnderLoad
            | Claim::MoveHeals
            | Claim::MoveBack
            | Claim::MoveRegistry
            | Claim::WipedNeverVotes => Some(0.05),
            _ => None,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The share of seeds the registry's must-reach claims are reached in, at least.
const REGISTRY_REACH_SHARE_MIN: f64 = 0.25;

/// The share of seeds in which two appenders of a multi-writer journal race and are both
/// acknowledged, at least (about half the seeds place a workload on a multi-writer journal).
const MULTI_WRITER_REACH_SHARE_MIN: f64 = 0.25;

/// The share of seeds in which a reader's read is routed to a replica that serves it, at least
/// (about two seeds in three have replicas from the start).
const READ_ROUTED_REACH_SHARE_MIN: f64 = 0.25;

/// Seeds in which a read is served from a machine's read cache, at least: most seeds keep one
/// and run readers.
const READ_CACHED_REACH_SHARE_MIN: f64 = 0.25;

/// Sweeps at least this long must reach every must-reach claim.
pub const MUST_REACH_SEEDS_MIN: u64 = 50;

/// Violation messages kept per run (the counters keep counting past it).
const DETAILS_MAX: usize = 16;

/// How often one claim was checked, violated and reached.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Count {
    pub checked: u64,
    pub violated: u64,
    pub reached: u64,
}

/// The counters of every claim, and the first violations in detail.
#[derive(Clone, Debug)]
pub struct Claims {
    counts: [Count; Claim::ALL.len()],
    pub details: Vec<(Claim, String)>,
}

impl Default for Claims {
    fn default() -> Self {
        Claims { counts: [Count::default(); Claim::ALL.len()], details: Vec::new() }
    }
}

impl Claims {
    /// Checks `claim` once: `holds == false` is a violation described by `detail`.
    pub fn check(&mut self, claim: Claim, holds: bool, detail: impl FnOnce() -> String) {
        let c = &mut self.counts[claim.index()];
        c.checked += 1;
        if !holds {
            c.violated += 1;
            if self.details.len() < DETAILS_MAX {
                self.details.push((claim, detail()));
            }
        }
    }

    /// The situation `claim` is about happened (and held).
    pub fn reach(&mut self, claim: Claim) {
        self.counts[claim.index()].reached += 1;
    }

    #[must_use]
    pub fn count(&self, claim: Claim) -> Count {
        self.counts[claim.index()]
    }

    #[must_use]
    pub fn violations(&self) -> u64 {
        self.counts.iter().map(|c| c.violated).sum()
    }

    /// Adds another run's counters (details are kept up to the bound).
    pub fn merge(&mut self, other: &Claims) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            a.checked += b.checked;
            a.violated += b.violated;
            a.reached += b.reached;
        }
    }
}

impl fmt::Display for Claims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for claim in Claim::ALL {
            let c = self.count(claim);
            writeln!(
                f,
                "claim \"{}\": checked={} violated={} reached={}",
                claim.name(),
                c.checked,
                c.violated,
                c.reached
            )?;
        }
        Ok(())
    }
}
