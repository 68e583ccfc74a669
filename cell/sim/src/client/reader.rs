//! A reader client: follows a journal with a cursor that never moves backwards, folds every
//! record into a hash chain, and reports a gap (never a silent skip) when the journal was
//! truncated past its cursor. It sometimes pauses; a paused reader is not folding, so the
//! writers may truncate past it.

use paros_core::{Consistency, NodeId, ReadAnswer, ReadRequest, Seq};

use super::{ClientCtx, ClientEvent, ClientIo, Reply, Request, chain_origin, chain_step};
use crate::rng::SimRng;

/// How a reader behaves; drawn per reader from the seed.
#[derive(Clone, Copy, Debug)]
pub struct ReaderParams {
    /// Percent of reads that ask for linearizable consistency (the rest ask `at_least(cursor)`).
    pub linearizable_pct: u64,
    /// Records per page asked for at most (0 is drawn too: the server's page size).
    pub limit_max: u32,
    /// Ticks a read at the tail may wait.
    pub wait_ticks_max: u32,
    /// Pause after an empty page, in ns.
    pub poll_gap_ns: (u64, u64),
    /// Chance per read of pausing, and how long a pause lasts.
    pub pause_ppm: u64,
    pub pause_ns: (u64, u64),
}

/// One reader workload client.
#[derive(Debug)]
pub struct Reader {
    name: String,
    servers: Vec<NodeId>,
    server: NodeId,
    rng: SimRng,
    params: ReaderParams,
    cursor: u64,
    origin: u64,
    chain: u64,
    paused_until: Option<u64>,
    in_flight: Option<u64>,
    next_read_at: u64,
}

impl Reader {
    #[must_use]
    pub fn new(name: String, servers: Vec<NodeId>, mut rng: SimRng, params: ReaderParams, start_at: u64) -> Reader {
        let server = *rng.pick(&servers);
        Reader {
            name,
            servers,
            server,
            rng,
            params,
            cursor: 0,
            origin: 0,
            chain: chain_origin(0),
            paused_until: None,
            in_flight: None,
            next_read_at: start_at,
        }
    }

    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True unless the reader is paused: a folding reader's cursor bounds every truncation.
    #[must_use]
    pub fn folding(&self) -> bool {
        self.paused_until.is_none()
    }

    /// The first position this reader has not folded.
    #[must_use]
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// Time passed: read if due.
    pub fn wake(&mut self, now: u64, _ctx: ClientCtx, io: &mut ClientIo) {
        if let Some(until) = self.paused_until {
            if now < until {
                return;
            }
            self.paused_until = None;
        }
        if self.in_flight.is_some() || now < self.next_read_at {
            return;
        }
        if self.rng.chance(self.params.pause_ppm) {
            let (lo, hi) = self.params.pause_ns;
            self.paused_until = Some(now + self.rng.between(lo, hi));
            return;
        }
        let consistency = if self.rng.below(100) < self.params.linearizable_pct {
            Consistency::Linearizable
        } else {
            Consistency::AtLeast(Seq(self.cursor))
        };
        let request = ReadRequest {
            from: Seq(self.cursor),
            limit: self.rng.below(u64::from(self.params.limit_max) + 1) as u32,
            max_bytes: 0,
            wait_ticks: self.rng.below(u64::from(self.params.wait_ticks_max) + 1) as u32,
            consistency,
        };
        self.in_flight = Some(io.send(self.server, Request::Read(request)));
    }

    /// The reply to `token` arrived (or timed out).
    pub fn on_reply(&mut self, now: u64, token: u64, reply: Reply, io: &mut ClientIo) {
        if self.in_flight != Some(token) {
            return;
        }
        self.in_flight = None;
        match reply {
            Reply::Read(ReadAnswer::Page { from, records, .. }) if from.0 == self.cursor => {
                for r in &records {
                    self.chain = chain_step(self.chain, self.cursor, r);
                    io.events.push(ClientEvent::Folded { seq: self.cursor, record: r.clone(), origin: self.origin, chain: self.chain });
                    self.cursor += 1;
                }
                self.next_read_at = if records.is_empty() {
                    let (lo, hi) = self.params.poll_gap_ns;
                    now + self.rng.between(lo, hi)
                } else {
                    now
                };
            }
            Reply::Read(ReadAnswer::Truncated(view)) => {
                io.events.push(ClientEvent::Gap { from: self.cursor, resumed_at: view.first_seq.0 });
                if view.first_seq.0 > self.cursor {
                    self.cursor = view.first_seq.0;
                    self.origin = self.cursor;
                    self.chain = chain_origin(self.origin);
                }
                self.next_read_at = now;
            }
            _ => {
                // Unserved, no answer, or a stale page: ask another server shortly.
                self.server = *self.rng.pick(&self.servers);
                self.next_read_at = now + self.rng.between(2_000_000, 20_000_000);
            }
        }
    }
}
