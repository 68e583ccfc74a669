//! An adversarial reader: reads at positions of its own choosing, not at a cursor (below
//! `first_seq`, at it, inside the journal, at the tail and past it), with either consistency,
//! any page limit and byte bound, and a burst of reads around every truncation the journal's
//! writer sends or hears answered. It folds nothing and bounds no truncation: its answers are
//! judged by the linearizability checker and by the read claims only.

use std::collections::BTreeSet;

use paros_core::journal::JournalView;
use paros_core::{Consistency, NodeId, ReadAnswer, ReadRequest, Seq};

use super::{ClientCtx, ClientIo, Reply, Request};
use crate::check::Probe;
use crate::rng::SimRng;

/// How a prober behaves; drawn per prober from the seed.
#[derive(Clone, Copy, Debug)]
pub struct ProberParams {
    /// Pause between random reads, in ns.
    pub gap_ns: (u64, u64),
    /// Percent of reads that ask for linearizable consistency (the rest ask `at_least` of a
    /// random position).
    pub linearizable_pct: u64,
    /// Records per page asked for at most (0, the server's page size, is drawn too).
    pub limit_max: u32,
    /// Page bytes asked for at most (0, the server's bound, is drawn too).
    pub bytes_max: u32,
    /// Ticks a read at the tail may wait.
    pub wait_ticks_max: u32,
    /// Reads in flight at once; a truncation's burst may go past it.
    pub in_flight_max: usize,
    /// Chance that a truncation sent or answered on the journal triggers a burst.
    pub trim_race_ppm: u64,
}

/// One prober workload client.
#[derive(Debug)]
pub struct Prober {
    name: String,
    servers: Vec<NodeId>,
    rng: SimRng,
    params: ProberParams,
    /// The newest view any answer showed (by `next_seq`, then `first_seq`).
    view: JournalView,
    in_flight: BTreeSet<u64>,
    next_read_at: u64,
}

impl Prober {
    #[must_use]
    pub fn new(name: String, servers: Vec<NodeId>, rng: SimRng, params: ProberParams, start_at: u64) -> Prober {
        Prober {
            name,
            servers,
            rng,
            params,
            view: JournalView::default(),
            in_flight: BTreeSet::new(),
            next_read_at: start_at,
        }
    }

    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Time passed: send a random read if due.
    pub fn wake(&mut self, now: u64, ctx: ClientCtx, io: &mut ClientIo) {
        if ctx.stopping || now < self.next_read_at || self.in_flight.len() >= self.params.in_flight_max {
            return;
        }
        let (lo, hi) = self.params.gap_ns;
        self.next_read_at = now + self.rng.between(lo, hi);
        let from = self.random_position();
        self.read(from, Probe::RandomRead, io);
    }

    /// The journal's writer sent a truncation to `up_to`, or heard one answered with that
    /// `first_seq`: read just below, at and past it, and at the old floor, now.
    pub fn on_trim(&mut self, up_to: u64, ctx: ClientCtx, io: &mut ClientIo) {
        if ctx.stopping || !self.rng.chance(self.params.trim_race_ppm) {
            return;
        }
        let mut at: BTreeSet<u64> = [up_to.saturating_sub(1), up_to, up_to + 1, self.view.first_seq.0].into();
        if up_to > 1 {
            at.insert(self.rng.below(up_to));
        }
        for from in at {
            self.read(from, Probe::TrimRace, io);
        }
    }

    fn random_position(&mut self) -> u64 {
        let (first, next) = (self.view.first_seq.0, self.view.next_seq.0);
        match self.rng.below(6) {
            0 if first > 0 => self.rng.below(first),
            0 | 1 => first,
            2 | 3 if next > first => self.rng.between(first, next - 1),
            2..=4 => next,
            _ => next + self.rng.between(1, 8),
        }
    }

    fn read(&mut self, from: u64, probe: Probe, io: &mut ClientIo) {
        let next = self.view.next_seq.0;
        let consistency = if self.rng.below(100) < self.params.linearizable_pct {
            Consistency::Linearizable
        } else {
            Consistency::Reached(Seq(self.rng.below(next + 4)))
        };
        let request = ReadRequest {
            from: Seq(from),
            limit: self.rng.below(u64::from(self.params.limit_max) + 1) as u32,
            max_bytes: if self.rng.chance(500_000) {
                0
            } else {
                self.rng.between(1, u64::from(self.params.bytes_max)) as u32
            },
            wait_ticks: self.rng.below(u64::from(self.params.wait_ticks_max) + 1) as u32,
            consistency,
        };
        let to = *self.rng.pick(&self.servers);
        self.in_flight.insert(io.send_probe(to, Request::Read(request), probe));
    }

    /// The reply to `token` arrived (or timed out).
    pub fn on_reply(&mut self, token: u64, reply: &Reply) {
        if !self.in_flight.remove(&token) {
            return;
        }
        if let Reply::Read(ReadAnswer::Page { view, .. } | ReadAnswer::Truncated(view)) = reply
            && (view.next_seq, view.first_seq) > (self.view.next_seq, self.view.first_seq)
        {
            self.view = *view;
        }
    }
}
