//! Issue 34's rules: machines' identities and moving a journal's seats.
//!
//! - `Admit`: `RegisterMachine`'s rules, then the incarnation: recorded the first time (a
//!   machine registered without one, the founders included, gets it); the same one again is an
//!   update (address, zone); another one is refused `IncarnationChanged` — the store under
//!   that id is not the one whose promises the id made, so the machine comes back only as a new
//!   identity. Draining and retiring stay `SetStanding`;
//! - `Rejoin { old, new, .. }`: `new` may not be a tier's feed (`MachineIsAFeed`); `old` must
//!   be known (`UnknownMachine`) and not replaced already (`AlreadyReplaced`); `new` must never
//!   have been a machine (`IdentityTaken`). Then `old` is retired and marked replaced by
//!   `new`, and `new` is registered in `old`'s role and tier, in service, with the incarnation.
//!   A replaced machine is never a voter again: placement skips it, `CreateJournal` and
//!   `MoveSeat` refuse it (`VoterRefusal::Replaced`), and `RegisterMachine` or `Admit` of it
//!   is refused `MachineRetired`; its seats are moved off by the planner;
//! - `MoveSeat { journal, from, to }`: the journal must be live (`Move(UnknownJournal)`), with
//!   no move in progress (`Move(InProgress)`); `from` must be a voter (`Move(NotAVoter)`), `to`
//!   not one (`Move(AlreadyAVoter)`), and `to` a node that may take a seat: known, a node, not
//!   replaced, standing `Registered` (`Move(Target(..))`). Accepted, the move is recorded at the
//!   journal's epoch plus one and counts toward `to`'s load; the voters are unchanged;
//! - `MoveDone { journal, epoch }`: the journal must be live; the move in progress must be to
//!   `epoch` (`Move(WrongEpoch)`); with none in progress, `epoch` the journal's own is accepted
//!   again (`already`), anything else refused `Move(NotMoving)`. Accepted, the voters become
//!   the target, the epoch `epoch`, and `from` loses the seat.

use paros_client::Seq;
use paros_core::ids::{JournalKey, NodeId};

use super::{Directory, Machine, SeatMove, decrement};
use crate::command::{Epoch, Incarnation, Standing};
use crate::names::{BusAddress, Zone};
use crate::verdict::{Accepted, MoveRefusal, Refusal};

impl Directory {
    pub(super) fn rejoin(
        &mut self,
        at: Seq,
        old: NodeId,
        new: NodeId,
        bus_address: BusAddress,
        zone: Zone,
        incarnation: Incarnation,
    ) -> Result<Accepted, Refusal> {
        if let Some(t) = self.tier_fed_at(new) {
            return Err(Refusal::MachineIsAFeed { machine: new, tier: t.name.clone() });
        }
        let gone = self.state.machines.get(&old).ok_or(Refusal::UnknownMachine { machine: old })?;
        if let Some(by) = gone.replaced_by {
            return Err(Refusal::AlreadyReplaced { machine: old, by });
        }
        if self.state.machines.contains_key(&new) {
            return Err(Refusal::IdentityTaken { machine: new });
        }
        let (role, tier) = (gone.role, gone.tier.clone());
        let machine = Machine {
            id: new,
            role,
            bus_address,
            zone,
            standing: Standing::Registered,
            registered_at: at,
            tier,
            incarnation: Some(incarnation),
            replaced_by: None,
            replaces: Some(old),
        };
        self.state.machines.insert(new, machine);
        if let Some(gone) = self.state.machines.get_mut(&old) {
            gone.standing = Standing::Retired;
            gone.replaced_by = Some(new);
        }
        Ok(Accepted::Rejoined { old, new })
    }

    pub(super) fn move_seat(
        &mut self,
        at: Seq,
        key: JournalKey,
        from: NodeId,
        to: NodeId,
    ) -> Result<Accepted, Refusal> {
        let refused = |r| Err(Refusal::Move(r));
        let Some(j) = self.state.journals.get(&key).filter(|j| j.is_live()) else {
            return refused(MoveRefusal::UnknownJournal { key });
        };
        if let Some(m) = j.moving {
            return refused(MoveRefusal::InProgress { key, epoch: m.epoch });
        }
        if !j.voters.contains(&from) {
            return refused(MoveRefusal::NotAVoter { key, node: from });
        }
        if j.voters.contains(&to) {
            return refused(MoveRefusal::AlreadyAVoter { key, node: to });
        }
        self.check_seat(to).map_err(|r| Refusal::Move(MoveRefusal::Target(r)))?;
        let epoch = j.epoch.next();
        if let Some(j) = self.state.journals.get_mut(&key) {
            j.moving = Some(SeatMove { from, to, epoch, at });
        }
        *self.index.load.entry(to).or_insert(0) += 1;
        Ok(Accepted::SeatMoving { key, from, to, epoch })
    }

    pub(super) fn move_done(&mut self, key: JournalKey, epoch: Epoch) -> Result<Accepted, Refusal> {
        let refused = |r| Err(Refusal::Move(r));
        let Some(j) = self.state.journals.get_mut(&key).filter(|j| j.is_live()) else {
            return refused(MoveRefusal::UnknownJournal { key });
        };
        let Some(m) = j.moving else {
            if j.epoch == epoch && epoch > Epoch(0) {
                return Ok(Accepted::SeatMoved { key, epoch, already: true });
            }
            return refused(MoveRefusal::NotMoving { key });
        };
        if m.epoch != epoch {
            return refused(MoveRefusal::WrongEpoch { key, pending: m.epoch, offered: epoch });
        }
        for v in j.voters.iter_mut() {
            if *v == m.from {
                *v = m.to;
            }
        }
        j.epoch = epoch;
        j.moving = None;
        if !j.left.contains(&m.from) {
            j.left = j.left.iter().copied().chain([m.from]).collect();
        }
        decrement(&mut self.index.load, m.from);
        Ok(Accepted::SeatMoved { key, epoch, already: false })
    }

    /// The live journals with a seat move in progress, by key.
    pub fn moves_in_progress(&self) -> impl Iterator<Item = (&super::Journal, SeatMove)> {
        self.state.journals.values().filter(|j| j.is_live()).filter_map(|j| j.moving.map(|m| (j, m)))
    }
}
