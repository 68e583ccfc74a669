//! Time in the host: ticks from readings of the machine's clock, and peer machines' liveness.

use std::collections::BTreeMap;

use paros_core::{JournalConfig, NodeId};

use super::{Host, Hosted};
use crate::ports::LogStore;

/// Tick timing against the machine's clock.
#[derive(Clone, Copy, Debug)]
struct Timer {
    tick_ms: u64,
    /// `None` until the clock is first read.
    next_due_ms: Option<u64>,
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
struct Peer {
    heard_tick: u64,
    down: bool,
}

/// The tick timer and every peer machine that shares a journal with this one.
///
/// Invariants: at most one tick per clock reading, and never a tick before the one due (a
/// clock that goes backwards delays the next tick); a peer is reported lost once per silence.
#[derive(Debug)]
pub(super) struct Liveness {
    timer: Timer,
    peers: BTreeMap<NodeId, Peer>,
}

impl Default for Liveness {
    fn default() -> Self {
        Liveness { timer: Timer { tick_ms: TICK_MS_DEFAULT, next_due_ms: None }, peers: BTreeMap::new() }
    }
}

impl Liveness {
    /// Reads the clock: whether a tick is due now, and when the next one is.
    fn read(&mut self, now_ms: u64) -> Clocked {
        let tick_ms = self.timer.tick_ms;
        let due = *self.timer.next_due_ms.get_or_insert(now_ms.saturating_add(tick_ms));
        if now_ms < due {
            return Clocked { ticked: false, next_due_ms: due };
        }
        let next_due_ms = now_ms.saturating_add(tick_ms);
        self.timer.next_due_ms = Some(next_due_ms);
        Clocked { ticked: true, next_due_ms }
    }

    /// The machines of `config` other than `me` are peers (heard as of `tick` if new).
    pub(super) fn note(&mut self, config: &JournalConfig, me: NodeId, tick: u64) {
        // Voters only: a learner address is a replica tier's feed, which never answers; a
        // replica notes the voters, so each side hears the other.
        for n in config.voters.iter().filter(|n| **n != me) {
            self.peers.entry(*n).or_insert(Peer { heard_tick: tick, down: false });
        }
    }

    /// `from` was heard at `tick`.
    pub(super) fn heard(&mut self, from: NodeId, tick: u64) {
        if let Some(p) = self.peers.get_mut(&from) {
            p.heard_tick = tick;
            p.down = false;
        }
    }

    /// The peers silent for more than `silence` ticks at `tick`, not reported before.
    fn lost(&mut self, tick: u64, silence: u64) -> Vec<NodeId> {
        let mut lost = Vec::new();
        for (id, p) in &mut self.peers {
            if !p.down && tick - p.heard_tick > silence {
                p.down = true;
                lost.push(*id);
            }
        }
        lost
    }
}

impl<S: LogStore> Host<S> {
    /// The machines to send the per-tick liveness heartbeat (an empty batch) to.
    pub fn peers(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.liveness.peers.keys().copied()
    }

    /// The tick period, in milliseconds of the clock.
    #[must_use]
    pub fn tick_ms(&self) -> u64 {
        self.liveness.timer.tick_ms
    }

    /// Sets the tick period (milliseconds of the clock; at least 1). Takes effect from the
    /// next tick.
    ///
    /// # Panics
    /// For a zero period.
    pub fn set_tick_ms(&mut self, tick_ms: u64) {
        assert!(tick_ms > 0, "a tick lasts at least a millisecond");
        self.liveness.timer.tick_ms = tick_ms;
    }

    /// Reads the machine's clock (`now_ms` from a [`Clock`](crate::ports::Clock)) and delivers
    /// a tick when one is due. At most one tick per reading: a thread that stalled for many
    /// periods does not burst ticks (a burst would look like a long silence of every peer);
    /// the schedule restarts from `now_ms`. A clock that goes backwards delays the next tick,
    /// never repeats one.
    pub fn on_clock(&mut self, now_ms: u64) -> Clocked {
        let clocked = self.liveness.read(now_ms);
        if clocked.ticked {
            self.tick();
        }
        clocked
    }

    /// One clock tick, delivered only to journals that are awake. A peer machine silent for
    /// longer than an election timeout wakes every journal it is a member of, so quiet
    /// journals it led elect a new leader without waiting for a call.
    pub fn tick(&mut self) {
        self.stats.ticks += 1;
        let silence = u64::from(self.tunables.election_ticks_max);
        let lost = self.liveness.lost(self.stats.ticks, silence);
        if !lost.is_empty() {
            self.stats.peers_lost += lost.len() as u64;
            for (key, j) in &mut self.journals {
                if let Hosted::Voter(v) = j
                    && v.config().voters.iter().any(|n| lost.contains(n))
                {
                    v.wake();
                    self.round.awake.insert(*key);
                }
            }
        }
        let mut asleep = Vec::new();
        for key in &self.round.awake {
            let j = self.journals.get_mut(key).expect("an awake journal is hosted");
            j.tick(&mut self.stats);
            self.stats.journal_ticks += 1;
            self.round.dirty.insert(*key);
            self.round.touched.insert(*key);
            if let Some(publish) = &mut self.round.publish {
                publish.insert(*key);
            }
            if j.is_quiet() {
                asleep.push(*key);
            }
        }
        for key in asleep {
            self.round.awake.remove(&key);
            self.note_quiet(key);
        }
        self.sleep_quiet();
        self.wake_booted();
        self.repeat_feed_marks();
        if !self.feeds.is_empty() {
            self.stats.replicas = self.replica_states();
        }
    }

    /// Wakes every hosted journal (e.g. when a peer machine stops answering).
    pub fn wake_all(&mut self) {
        for (key, j) in &mut self.journals {
            if let Hosted::Voter(v) = j {
                v.wake();
            }
            self.round.awake.insert(*key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_reading_delivers_at_most_one_tick_and_a_clock_going_back_repeats_none() {
        let mut l = Liveness::default();
        assert_eq!(l.read(1_000), Clocked { ticked: false, next_due_ms: 1_100 }, "the first reading arms the timer");
        assert!(l.read(1_100).ticked);
        assert_eq!(l.read(1_100), Clocked { ticked: false, next_due_ms: 1_200 }, "one reading, one tick");
        assert_eq!(l.read(9_000), Clocked { ticked: true, next_due_ms: 9_100 }, "a stall ticks once, no burst");
        assert!(!l.read(50).ticked, "a clock going back delays the next tick");
    }

    #[test]
    fn a_silent_peer_is_lost_once_and_found_when_heard() {
        let mut l = Liveness::default();
        let config = JournalConfig {
            mode: paros_core::journal::WriterMode::Single,
            voters: vec![NodeId(1), NodeId(2)],
            learners: vec![NodeId(3)],
        };
        l.note(&config, NodeId(1), 0);
        assert_eq!(l.lost(5, 5), Vec::<NodeId>::new(), "not silent for long enough");
        assert_eq!(l.lost(6, 5), vec![NodeId(2)], "every other voter, never this one nor a tier's feed");
        assert!(l.lost(20, 5).is_empty(), "lost once per silence");
        l.heard(NodeId(2), 20);
        assert!(l.lost(25, 5).is_empty());
        assert_eq!(l.lost(26, 5), vec![NodeId(2)], "found, then lost again");
    }
}
