//! The round being built, and the pieces both wirings share.

use crate::config::{JournalConfig, Tunables};
use crate::ids::{Life, NodeId, Slot};
use crate::journal::{Anchoring, WriterMode};
use crate::learner::{Learner, Walked, Window};
use crate::log::{Durable, Log};
use crate::message::{Message, Outbound};
use crate::ready::{Applied, Ready, Released};

/// Effects gathered since the last `ready()`, and the one-round-in-flight guard.
#[derive(Debug, Default)]
pub(crate) struct Effects {
    pub ready: Ready,
    in_flight: bool,
}

impl Effects {
    pub fn take(&mut self) -> Ready {
        assert!(!self.in_flight, "ready() is called once per round: advance() the last Ready first");
        self.in_flight = true;
        std::mem::take(&mut self.ready)
    }

    /// Takes what may leave now from the `Ready` being built.
    pub fn release(&mut self) -> Released {
        let (wait, go): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.ready.messages).into_iter().partition(|o| o.message.waits_for_sync());
        self.ready.messages = wait;
        Released {
            messages: go,
            answers: std::mem::take(&mut self.ready.answers),
            reads: std::mem::take(&mut self.ready.reads),
            fetches: std::mem::take(&mut self.ready.fetches),
        }
    }

    pub fn advance(&mut self) {
        assert!(self.in_flight, "advance() follows a ready()");
        self.in_flight = false;
    }

    pub fn applied(&mut self, walked: &[Walked]) {
        self.ready.applied.extend(walked.iter().map(|w| Applied {
            slot: w.slot,
            digest: w.digest,
            judged: w.judged.into(),
        }));
    }

    pub fn send(&mut self, to: NodeId, message: Message) {
        self.ready.messages.push(Outbound { to, message });
    }
}

/// Asks peers for chosen commands while behind, paced by ticks: every request that finds the
/// prefix where the last one left it doubles the pause (up to `catch_up_backoff_ticks_max`)
/// and goes to the next peer in rotation; any progress resets the pace.
#[derive(Clone, Debug, Default)]
pub(crate) struct CatchUp {
    next_tick: u64,
    rotation: usize,
    /// The prefix end when the last timed request left.
    asked_at: Slot,
    /// Requests in a row that found no progress since the one before.
    misses: u32,
}

impl CatchUp {
    /// The voter to ask now, if a timer-driven request is due: the believed leader on every
    /// other request, else the next voter in rotation.
    pub fn due(
        &mut self,
        tick: u64,
        chosen_up_to: Slot,
        tunables: &Tunables,
        cfg: &JournalConfig,
        me: NodeId,
        leader: Option<NodeId>,
    ) -> Option<NodeId> {
        if chosen_up_to > self.asked_at {
            self.misses = 0;
        }
        if tick < self.next_tick {
            return None;
        }
        self.next_tick = tick + u64::from(catch_up_pause(tunables, self.misses));
        self.misses = self.misses.saturating_add(1);
        self.asked_at = chosen_up_to;
        let others: Vec<NodeId> = cfg.voters.iter().copied().filter(|v| *v != me).collect();
        if let Some(l) = leader.filter(|l| *l != me && self.rotation.is_multiple_of(2)) {
            self.rotation += 1;
            return Some(l);
        }
        self.rotation += 1;
        others.get(self.rotation % others.len().max(1)).copied()
    }
}

impl CatchUp {
    /// Keeps the plain pace, without backoff, while a read waits for what this server has not
    /// learned: the read has its own deadline, shorter than a full backoff.
    pub fn hurry(&mut self, tick: u64, tunables: &Tunables) {
        self.misses = 0;
        self.next_tick = self.next_tick.min(tick + u64::from(tunables.catch_up_ticks));
    }
}

/// The pause after `misses` fruitless requests in a row: the pace, doubled per miss, capped.
#[must_use]
pub(crate) fn catch_up_pause(tunables: &Tunables, misses: u32) -> u32 {
    let doubled = u64::from(tunables.catch_up_ticks) << misses.min(16);
    doubled.min(u64::from(tunables.catch_up_backoff_ticks_max)) as u32
}

/// The request a laggard of life `life` sends.
pub(crate) fn catch_up_request(from: Slot, life: Life) -> Message {
    Message::CatchUpRequest { from, life }
}

/// A journal's log and learner rebuilt from storage, with the effects of walking the chosen
/// slots since its boot anchor (both wirings boot through this).
pub(crate) fn recover(mode: WriterMode, tunables: &Tunables, durable: Durable) -> (Log, Learner, Effects) {
    let start = durable.boot_start();
    let mut log = Log::with_window(durable.floor, start, durable.entries);
    let anchoring = Anchoring {
        slots: tunables.anchor_slots,
        bytes: tunables.anchor_bytes,
        exact_writes: tunables.evicted_writes_max,
    };
    let mut learner =
        Learner::resume(mode, &log, durable.sealed, &durable.anchors, anchoring, Window::of(tunables), durable.floor);
    let mut effects = Effects::default();
    let mut walked = Vec::new();
    learner.recover(&mut log, durable.chosen_up_to, &mut effects.ready.writes, &mut walked);
    effects.applied(&walked);
    (log, learner, effects)
}
