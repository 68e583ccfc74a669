//! The mover: carries out the seat moves the directory records, sans-IO.
//!
//! A `MoveSeat` in the directory is intent only (docs/reconfiguration.md). For each move in
//! progress the mover, in order:
//!
//! 0. waits until the target hosts the journal (its follower placed it): a read at the target
//!    that needs nothing applied answers ([`MoveAction::Probe`]). The stop-sign hands the
//!    journal to the new voters, the target among them: were another of them down, the journal
//!    would stop until the target hosts it (the simulation's seed 20003497: the target's
//!    follower placed it 6 s late); and a target learns of its seat only from the registry, so
//!    for the registry journal itself it might never learn it at all (seed 15: a founder wiped,
//!    another down). A target the directory shows gone for good (retired or replaced) is not
//!    waited for: the move goes on with a dead voter, which the planner heals once it is
//!    recorded — the registry journal's too: a gone target needs to learn nothing, and the
//!    heal's target learns of its seat from the registry the move leaves running on the voters
//!    that stay;
//! 1. asks the journal to decide `Reconfigure { epoch, voters }` — the move's epoch and its next
//!    voters — through paros-client's call rules ([`MoveAction::Reconfigure`]). The journal's
//!    verdict is `Reconfigured` at that epoch, or `StaleEpoch` naming the epoch in force: at or
//!    past the move's, an earlier send (or an earlier mover) decided it first;
//! 2. waits until a quorum of the new voters, the target among them, has applied the journal
//!    through the stop-sign (rule 6): a linearizable read answered by a voter means it applied
//!    through the highest slot a quorum had accepted when the read began, which lies past the
//!    stop-sign ([`MoveAction::Confirm`], one per new voter). The quorum alone is met by the
//!    voters that stay; waiting for the target too means a move recorded done left the journal
//!    at full strength, its data on the target, before the source gives its copy back (the
//!    256 MiB move benchmark: recorded done before the target held a byte). A target the
//!    directory shows gone for good (retired or replaced) is not waited for: the move is
//!    recorded with the quorum, and the planner heals the dead voter;
//! 3. appends `MoveDone { journal, epoch }` ([`MoveAction::Done`]) under a request id drawn from
//!    the journal and the epoch, so a re-driven completion is judged once.
//!
//! Each step that fails is tried again after [`MoverConfig::retry_ms`]; at most
//! [`MoverConfig::moves_max`] moves are carried out at once. A move the directory no longer
//! holds (recorded done, or the journal deleted) is forgotten. The async loop (in
//! [`crate::daemon`]) carries out the actions and reports each result; the caller's clock is
//! in milliseconds.

use std::collections::{BTreeMap, BTreeSet};

use paros_core::{JournalKey, NodeId};

use crate::command::{Epoch, RequestId};
use crate::directory::Directory;

/// The mover's bounds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MoverConfig {
    /// Moves carried out at once; the others wait their turn, in journal order.
    pub moves_max: usize,
    /// The pause before a step that failed is tried again.
    pub retry_ms: u64,
}

impl Default for MoverConfig {
    fn default() -> Self {
        MoverConfig { moves_max: 8, retry_ms: 500 }
    }
}

/// What the mover asks its loop to do.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum MoveAction {
    /// Call the journal: `Reconfigure { epoch, voters }`, answered by [`MoveResult::Decided`]
    /// or [`MoveResult::Failed`].
    Reconfigure { journal: JournalKey, epoch: Epoch, voters: Vec<NodeId> },
    /// A read of the journal at the move's target `node` that needs nothing applied
    /// (`Reached(0)`), answered by [`MoveResult::Hosted`] (it hosts the journal) or
    /// [`MoveResult::Failed`].
    Probe { journal: JournalKey, node: NodeId },
    /// A linearizable read of the journal at `node`, answered by [`MoveResult::Confirmed`]
    /// (it served) or [`MoveResult::Failed`].
    Confirm { journal: JournalKey, node: NodeId },
    /// Append `MoveDone { journal, epoch }` under `id`, answered by [`MoveResult::Recorded`]
    /// (the fold judged it, either way) or [`MoveResult::Failed`].
    Done { journal: JournalKey, epoch: Epoch, id: RequestId },
}

/// How an action ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MoveResult {
    /// The move's target `node` hosts the journal.
    Hosted { journal: JournalKey, node: NodeId },
    /// The journal judged the `Reconfigure`: `in_force` is the epoch in force after it.
    Decided { journal: JournalKey, in_force: Epoch },
    /// `node` served a linearizable read of the journal.
    Confirmed { journal: JournalKey, node: NodeId },
    /// The registry judged the `MoveDone`.
    Recorded { journal: JournalKey },
    /// The action found no answer (or not the one it needs); it is tried again later.
    Failed { journal: JournalKey },
}

#[derive(Clone, PartialEq, Eq, Debug)]
enum Phase {
    Placing,
    Reconfiguring,
    Confirming { confirmed: BTreeSet<NodeId> },
    Recording,
}

#[derive(Clone, PartialEq, Eq, Debug)]
struct Tracked {
    epoch: Epoch,
    voters: Vec<NodeId>,
    target: NodeId,
    /// The directory shows the target retired or replaced: it will never confirm.
    target_gone: bool,
    phase: Phase,
    /// Actions handed out and not yet answered.
    outstanding: usize,
    /// Not before this time.
    retry_at: u64,
}

/// The moves being carried out.
#[derive(Clone, Debug, Default)]
pub struct Mover {
    config: MoverConfig,
    tracked: BTreeMap<JournalKey, Tracked>,
    /// Moves recorded done by this mover.
    done: u64,
}

impl Mover {
    #[must_use]
    pub fn new(config: MoverConfig) -> Mover {
        Mover { config, tracked: BTreeMap::new(), done: 0 }
    }

    /// Moves being carried out now.
    #[must_use]
    pub fn in_progress(&self) -> usize {
        self.tracked.len()
    }

    /// Moves this mover recorded done.
    #[must_use]
    pub fn done(&self) -> u64 {
        self.done
    }

    /// The actions due at `now`, given the directory as folded. Call it after every result and
    /// every new directory, and on a timer of [`MoverConfig::retry_ms`].
    pub fn poll(&mut self, directory: &Directory, now: u64) -> Vec<MoveAction> {
        let pending: BTreeMap<JournalKey, (Epoch, Vec<NodeId>, NodeId)> = directory
            .moves_in_progress()
            .filter_map(|(j, m)| Some((j.key, (m.epoch, j.next_voters()?, m.to))))
            .collect();
        self.tracked.retain(|key, t| pending.get(key).is_some_and(|(epoch, ..)| *epoch == t.epoch));
        for (key, (epoch, voters, target)) in pending {
            if self.tracked.len() >= self.config.moves_max {
                break;
            }
            self.tracked.entry(key).or_insert(Tracked {
                epoch,
                voters,
                target,
                target_gone: false,
                phase: Phase::Placing,
                outstanding: 0,
                retry_at: now,
            });
        }
        let mut actions = Vec::new();
        for (key, t) in &mut self.tracked {
            t.target_gone = directory
                .machine(t.target)
                .is_none_or(|m| m.standing == crate::command::Standing::Retired || m.is_replaced());
            if let Phase::Confirming { confirmed } = &t.phase
                && confirmed_enough(&t.voters, t.target, t.target_gone, confirmed)
            {
                t.phase = Phase::Recording;
                t.outstanding = 0;
            }
            if t.phase == Phase::Placing && t.target_gone {
                t.phase = Phase::Reconfiguring;
                t.outstanding = 0;
            }
            if t.outstanding > 0 || now < t.retry_at {
                continue;
            }
            let journal = *key;
            match &t.phase {
                Phase::Placing => actions.push(MoveAction::Probe { journal, node: t.target }),
                Phase::Reconfiguring => {
                    actions.push(MoveAction::Reconfigure { journal, epoch: t.epoch, voters: t.voters.clone() });
                }
                Phase::Confirming { confirmed } => {
                    for node in t.voters.iter().filter(|n| !confirmed.contains(n)) {
                        actions.push(MoveAction::Confirm { journal, node: *node });
                        t.outstanding += 1;
                    }
                    continue;
                }
                Phase::Recording => {
                    actions.push(MoveAction::Done { journal, epoch: t.epoch, id: done_id(journal, t.epoch) });
                }
            }
            t.outstanding = 1;
        }
        actions
    }

    /// Takes in how an action ended.
    pub fn on_result(&mut self, result: MoveResult, now: u64) {
        let journal = match result {
            MoveResult::Decided { journal, .. }
            | MoveResult::Hosted { journal, .. }
            | MoveResult::Confirmed { journal, .. }
            | MoveResult::Recorded { journal }
            | MoveResult::Failed { journal } => journal,
        };
        let Some(t) = self.tracked.get_mut(&journal) else { return };
        t.outstanding = t.outstanding.saturating_sub(1);
        match (result, &mut t.phase) {
            (MoveResult::Hosted { node, .. }, Phase::Placing) if node == t.target => {
                t.phase = Phase::Reconfiguring;
            }
            (MoveResult::Decided { in_force, .. }, Phase::Reconfiguring) if in_force >= t.epoch => {
                t.phase = Phase::Confirming { confirmed: BTreeSet::new() };
            }
            (MoveResult::Confirmed { node, .. }, Phase::Confirming { confirmed }) => {
                confirmed.insert(node);
                if confirmed_enough(&t.voters, t.target, t.target_gone, confirmed) {
                    // The reads still out are answered into a phase that no longer waits.
                    t.phase = Phase::Recording;
                    t.outstanding = 0;
                } else if t.outstanding == 0 {
                    t.retry_at = now + self.config.retry_ms;
                }
            }
            (MoveResult::Recorded { .. }, Phase::Recording) => {
                self.tracked.remove(&journal);
                self.done += 1;
            }
            // A failure, or an answer that does not move the phase on: try again later, once
            // every action of this round is answered.
            _ => {
                if t.outstanding == 0 {
                    t.retry_at = now + self.config.retry_ms;
                }
            }
        }
    }
}

impl MoveResult {
    /// How a [`MoveAction::Probe`] (`probe`) or a [`MoveAction::Confirm`] of `journal` at
    /// `node` ended, given the read's answer (`None`: none came).
    ///
    /// A confirmation needs the read served (a page, or `Truncated`: both answered after the
    /// quorum watermark). A probe needs only proof the node hosts the journal: a page,
    /// `Truncated`, or `Unserved` saying how far it applied — a copy that looked at the journal
    /// and would not serve it, such as a former voter's copy the directory moves a seat back
    /// to (the simulation's seed 70003546: the drained seat's target still held its copy from
    /// before, answered every probe `Unserved`, and the move waited forever). `Unserved`
    /// without `applied_to` was refused before the journal was looked at, and
    /// `UnknownJournal` means the node's follower has not placed it yet.
    #[must_use]
    pub fn of_read(
        journal: JournalKey,
        node: NodeId,
        probe: bool,
        answer: Option<&paros_client::ReadAnswer>,
    ) -> MoveResult {
        use paros_client::ReadAnswer;
        let served = matches!(answer, Some(ReadAnswer::Page { .. } | ReadAnswer::Truncated { .. }));
        let hosted = served || matches!(answer, Some(ReadAnswer::Unserved { applied_to: Some(_) }));
        match (probe, served, hosted) {
            (true, _, true) => MoveResult::Hosted { journal, node },
            (false, true, _) => MoveResult::Confirmed { journal, node },
            _ => MoveResult::Failed { journal },
        }
    }
}

/// A quorum of the new `voters` confirmed, the `target` among them unless it is `gone` for good.
fn confirmed_enough(voters: &[NodeId], target: NodeId, gone: bool, confirmed: &BTreeSet<NodeId>) -> bool {
    confirmed.len() > voters.len() / 2 && (confirmed.contains(&target) || gone)
}

/// The request id of the `MoveDone` that records `journal`'s move to `epoch`: the same for
/// every mover that drives it, so the registry judges it once.
#[must_use]
pub fn done_id(journal: JournalKey, epoch: Epoch) -> RequestId {
    RequestId((0x6d6f_7665_u128 << 96) ^ journal_bits(journal) ^ u128::from(epoch.0)) // "move"
}

/// The request id of the `MoveSeat` that moves `journal`'s seat from `from` to `to` at
/// `epoch`: the same for every planner that plans it.
#[must_use]
pub fn seat_id(journal: JournalKey, from: NodeId, to: NodeId, epoch: Epoch) -> RequestId {
    let seats = u128::from(from.0).rotate_left(7) ^ u128::from(to.0).rotate_left(71);
    RequestId((0x7365_6174_u128 << 96) ^ journal_bits(journal) ^ seats ^ u128::from(epoch.0)) // "seat"
}

fn journal_bits(journal: JournalKey) -> u128 {
    (u128::from(journal.tenant.0) << 64) ^ u128::from(journal.journal.0).rotate_left(32)
}
