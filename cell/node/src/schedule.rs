//! The node loop's schedule as a pure policy: when the node thread steps its [`Pump`](crate::Pump)
//! and when it waits, how long a waiting thread polls before it sleeps, and how many inputs one
//! step absorbs. The thread shell ([`crate::shell`]) feeds it how long each wait lasted on a
//! monotonic clock; the simulation's node host feeds the very same type simulated time. No
//! clock, no IO: the same inputs give the same answers.
//!
//! Why a thread polls at all: a thread woken from sleep on a virtual machine costs tens of
//! microseconds per hand-off, and a write crosses six. Polling pays only while work comes
//! often (the last wait was short) and the node's rounds are small (few writers: with many,
//! the cores are busy anyway and a poll's yields cost a context switch each).

/// A running average of how many journals a node's rounds wrote: each round moves it an eighth
/// of the way to its own size, so one small round among large ones does not make a busy
/// node's threads poll.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoundSizes {
    /// The average in sixteenths of a journal.
    sixteenths: u64,
}

impl RoundSizes {
    const SCALE: u64 = 16;
    /// The weight of the newest round is 1/WEIGHT.
    const WEIGHT: u64 = 8;

    /// Adds a round that wrote `journals` journals.
    pub fn record(&mut self, journals: usize) {
        // Capped, so the sums below cannot overflow (no round comes near it).
        let sample = u64::try_from(journals).unwrap_or(u64::MAX).min(u64::from(u32::MAX)) * Self::SCALE;
        self.sixteenths = (self.sixteenths * (Self::WEIGHT - 1) + sample) / Self::WEIGHT;
    }

    /// Whether the average is at most `journals`.
    #[must_use]
    pub fn at_most(self, journals: usize) -> bool {
        self.sixteenths <= u64::try_from(journals).unwrap_or(u64::MAX).saturating_mul(Self::SCALE)
    }
}

/// What ended a wait.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Wake {
    /// Work that more work usually follows soon: a request, a protocol message other than
    /// liveness, a persisted round (its answers release more work), a store read answered.
    Work,
    /// Nothing that predicts more soon: a ping or a heartbeat, a due tick, a control request.
    Idle,
}

/// When one thread polls before it sleeps: the node thread and its storage thread each keep one.
///
/// Invariant: it polls (a non-zero [`Spin::wait`]) only while its last wait ended with work no
/// later than `idle_us` after it began, and the recent rounds wrote at most
/// `round_journals_max` journals on average. A quiet thread sleeps at once.
#[derive(Clone, Copy, Debug)]
pub struct Spin {
    idle_us: u64,
    round_journals_max: usize,
    waits_are_short: bool,
    rounds: RoundSizes,
}

impl Spin {
    /// Polls for at most `idle_us` microseconds, while the recent rounds wrote at most
    /// `round_journals_max` journals on average (`idle_us` zero: never polls).
    #[must_use]
    pub fn new(idle_us: u64, round_journals_max: usize) -> Spin {
        Spin { idle_us, round_journals_max, waits_are_short: false, rounds: RoundSizes::default() }
    }

    /// How many microseconds a wait beginning now polls before it sleeps.
    #[must_use]
    pub fn poll_us(&self) -> u64 {
        if self.waits_are_short && self.rounds.at_most(self.round_journals_max) { self.idle_us } else { 0 }
    }

    /// A wait ended after `waited_us` microseconds, woken by `by`.
    pub fn woke(&mut self, waited_us: u64, by: Wake) {
        self.waits_are_short = by == Wake::Work && waited_us <= self.idle_us;
    }

    /// A round that writes `journals` journals began.
    pub fn round(&mut self, journals: usize) {
        self.rounds.record(journals);
    }
}

/// What the node loop does next.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Next {
    /// Step the pump now, after absorbing at most `inputs_max` inputs already waiting.
    Step { inputs_max: usize },
    /// Wait for an input, the round being persisted or a store read's answer, or the next tick:
    /// poll for `spin_us` microseconds, then sleep; once woken, absorb at most `inputs_max`
    /// inputs and step.
    Wait { spin_us: u64, inputs_max: usize },
}

/// The node loop's schedule: step while the pump has work and no round is being persisted
/// (one round in flight at a time: its batch goes to the store the moment a step hands it
/// out), else wait, polling as [`Spin`] says.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    spin: Spin,
    inputs_per_round_max: usize,
}

impl Schedule {
    /// A schedule that absorbs at most `inputs_per_round_max` inputs a step (at least one) and
    /// polls as `spin` says.
    #[must_use]
    pub fn new(spin: Spin, inputs_per_round_max: usize) -> Schedule {
        Schedule { spin, inputs_per_round_max: inputs_per_round_max.max(1) }
    }

    /// What to do next, given whether the pump wants a step ([`Pump::wants_step`]) and
    /// whether a round's batch is out with the store.
    ///
    /// [`Pump::wants_step`]: crate::Pump::wants_step
    #[must_use]
    pub fn next(&self, wants_step: bool, persisting: bool) -> Next {
        let inputs_max = self.inputs_per_round_max;
        if wants_step && !persisting {
            Next::Step { inputs_max }
        } else {
            Next::Wait { spin_us: self.spin.poll_us(), inputs_max }
        }
    }

    /// The wait [`Schedule::next`] asked for ended after `waited_us` microseconds, woken by
    /// `by`.
    pub fn woke(&mut self, waited_us: u64, by: Wake) {
        self.spin.woke(waited_us, by);
    }

    /// A step handed out a round's batch of `journals` journals: it goes to the store now.
    pub fn persist(&mut self, journals: usize) {
        self.spin.round(journals);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE_US: u64 = 500;

    fn steady(journals: usize) -> RoundSizes {
        let mut rounds = RoundSizes::default();
        for _ in 0..64 {
            rounds.record(journals);
        }
        rounds
    }

    /// A spin whose last wait ended with `by` after `waited_us`, over `rounds`.
    fn after(round_journals_max: usize, rounds: RoundSizes, by: Wake, waited_us: u64) -> Spin {
        let mut spin = Spin { rounds, ..Spin::new(IDLE_US, round_journals_max) };
        spin.woke(waited_us, by);
        spin
    }

    #[test]
    fn a_thread_polls_only_after_short_waits_that_brought_work_and_small_rounds() {
        assert_eq!(Spin::new(IDLE_US, 4).poll_us(), 0, "a fresh thread has not waited yet: sleep");
        assert_eq!(after(4, RoundSizes::default(), Wake::Work, 10).poll_us(), IDLE_US, "no round yet: poll");
        assert_eq!(after(4, steady(1), Wake::Work, 10).poll_us(), IDLE_US, "one writer: poll");
        assert_eq!(after(4, steady(4), Wake::Work, 10).poll_us(), IDLE_US, "at the bound: poll");
        assert_eq!(after(4, steady(5), Wake::Work, 10).poll_us(), 0, "rounds of many journals: sleep");
        assert_eq!(after(4, steady(1), Wake::Work, IDLE_US + 1).poll_us(), 0, "the last wait was long: sleep");
        assert_eq!(after(4, steady(1), Wake::Idle, 10).poll_us(), 0, "a ping or a timer: sleep");
        assert_eq!(after(9, steady(9), Wake::Work, 10).poll_us(), IDLE_US, "the bound is configuration");
        assert_eq!(Spin { rounds: steady(1), ..Spin::new(0, 4) }.poll_us(), 0, "no idle spin: never poll");
    }

    #[test]
    fn one_small_round_among_large_ones_does_not_start_a_poll() {
        let mut spin = after(2, steady(12), Wake::Work, 10);
        spin.round(1);
        assert_eq!(spin.poll_us(), 0, "busy node, one small round: still sleep");
        spin.woke(10, Wake::Work);
        for _ in 0..32 {
            spin.round(1);
        }
        assert_eq!(spin.poll_us(), IDLE_US, "the load went: poll again");
        let huge = steady(usize::MAX);
        assert!(huge.at_most(usize::MAX) && !huge.at_most(1 << 20), "no overflow at the extremes");
    }

    #[test]
    fn the_loop_steps_only_with_work_and_no_round_out_with_the_store() {
        let schedule = Schedule::new(Spin::new(IDLE_US, 4), 0);
        assert_eq!(schedule.next(true, false), Next::Step { inputs_max: 1 }, "at least one input a step");
        assert!(matches!(schedule.next(true, true), Next::Wait { .. }), "one round in flight at a time");
        assert!(matches!(schedule.next(false, false), Next::Wait { .. }), "nothing to do: wait");
        // Same readings, same answers: the simulation replays what the thread decides.
        let run = || {
            let mut s = Schedule::new(Spin::new(IDLE_US, 4), 16);
            let mut seen = Vec::new();
            for (wants, persisting, by) in
                [(false, false, Wake::Work), (true, true, Wake::Work), (false, false, Wake::Idle)]
            {
                let next = s.next(wants, persisting);
                s.woke(50, by);
                s.persist(2);
                seen.push(next);
            }
            seen
        };
        assert_eq!(run(), run());
        assert_eq!(run()[1], Next::Wait { spin_us: IDLE_US, inputs_max: 16 }, "a short wait with work: poll");
    }
}
