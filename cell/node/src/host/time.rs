//! Time in the host: ticks from readings of the machine's clock, and peer machines' liveness.

use paros_core::NodeId;

use super::{Host, Hosted};
use crate::ports::LogStore;

/// Tick timing against the machine's clock.
#[derive(Clone, Copy, Debug)]
pub(super) struct Timer {
    pub(super) tick_ms: u64,
    /// `None` until the clock is first read.
    pub(super) next_due_ms: Option<u64>,
}

/// What reading the clock did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Clocked {
    /// A tick was delivered: the shell sends its liveness heartbeat to every peer.
    pub ticked: bool,
    /// When the next tick is due, in the clock's milliseconds.
    pub next_due_ms: u64,
}

/// The tick period a host starts with.
pub const TICK_MS_DEFAULT: u64 = 100;

/// Machine-level liveness of one peer: any message, or the empty heartbeat batch the shell
/// sends each tick, counts as hearing it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Peer {
    pub(super) heard_tick: u64,
    pub(super) down: bool,
}

impl<S: LogStore> Host<S> {
    /// The machines to send the per-tick liveness heartbeat (an empty batch) to.
    pub fn peers(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.peers.keys().copied()
    }

    /// Sets the tick period (milliseconds of the clock; at least 1). Takes effect from the
    /// next tick.
    ///
    /// # Panics
    /// For a zero period.
    pub fn set_tick_ms(&mut self, tick_ms: u64) {
        assert!(tick_ms > 0, "a tick lasts at least a millisecond");
        self.timer.tick_ms = tick_ms;
    }

    /// Reads the machine's clock (`now_ms` from a [`Clock`](crate::ports::Clock)) and delivers
    /// a tick when one is due. At most one tick per reading: a thread that stalled for many
    /// periods does not burst ticks (a burst would look like a long silence of every peer);
    /// the schedule restarts from `now_ms`. A clock that goes backwards delays the next tick,
    /// never repeats one.
    pub fn on_clock(&mut self, now_ms: u64) -> Clocked {
        let tick_ms = self.timer.tick_ms;
        let due = *self.timer.next_due_ms.get_or_insert(now_ms.saturating_add(tick_ms));
        if now_ms < due {
            return Clocked { ticked: false, next_due_ms: due };
        }
        self.tick();
        let next_due_ms = now_ms.saturating_add(tick_ms);
        self.timer.next_due_ms = Some(next_due_ms);
        Clocked { ticked: true, next_due_ms }
    }

    /// One clock tick, delivered only to journals that are awake. A peer machine silent for
    /// longer than an election timeout wakes every journal it is a member of, so quiet
    /// journals it led elect a new leader without waiting for a call.
    pub fn tick(&mut self) {
        self.stats.ticks += 1;
        let silence = u64::from(self.tunables.election_ticks_max);
        let mut lost = Vec::new();
        for (id, p) in &mut self.peers {
            if !p.down && self.stats.ticks - p.heard_tick > silence {
                p.down = true;
                lost.push(*id);
            }
        }
        if !lost.is_empty() {
            self.stats.peers_lost += lost.len() as u64;
            for (key, j) in &mut self.journals {
                if let Hosted::Voter(v) = j
                    && v.config().voters.iter().any(|n| lost.contains(n))
                {
                    v.wake();
                    self.awake.insert(*key);
                }
            }
        }
        let mut asleep = Vec::new();
        for key in &self.awake {
            let j = self.journals.get_mut(key).expect("an awake journal is hosted");
            j.tick(&mut self.stats);
            self.stats.journal_ticks += 1;
            self.dirty.insert(*key);
            self.touched.insert(*key);
            if j.is_quiet() {
                asleep.push(*key);
            }
        }
        for key in asleep {
            self.awake.remove(&key);
            self.note_quiet(key);
        }
        self.sleep_quiet();
        self.wake_booted();
    }

    /// Wakes every hosted journal (e.g. when a peer machine stops answering).
    pub fn wake_all(&mut self) {
        for (key, j) in &mut self.journals {
            if let Hosted::Voter(v) = j {
                v.wake();
            }
            self.awake.insert(*key);
        }
    }
}
