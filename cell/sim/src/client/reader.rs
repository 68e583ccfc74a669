//! A reader client: a [`ReaderCursor`] (the next position wanted; never moves backwards; a
//! truncation past it is a gap, never a silent skip) feeding a [`Folder`] of the workload's
//! [`Chain`] state, which restores from a checkpoint run after a gap and verifies the runs it
//! meets while whole. It sometimes pauses; a paused reader is not folding, so the writers may
//! truncate past it.
//!
//! Each read asks the servers the world gives it as paros-client's `Reader` asks the servers its
//! service gives ([`ReadServers::pick`]): the journal's read replicas ranked by the router
//! first, then its voters; or its voters in rotation from the reader's own start.

use paros_client::{
    ClientConfig, FoldEvent, Folder, FolderConfig, ReadAnswer, ReadServers, ReaderConfig, ReaderCursor, ReaderOutcome,
    Seq,
};
use paros_core::rng::Rng;
use paros_core::{Consistency, NodeId, ReadRequest};

use super::{Chain, ClientCtx, ClientEvent, ClientIo, Reply, Request};
use crate::check::ReadReport;
use crate::rng::SimRng;

/// How a reader behaves; drawn per reader from the seed.
#[derive(Clone, Copy, Debug)]
pub struct ReaderParams {
    /// Percent of reads that ask for linearizable consistency (the rest are monotonic: at least
    /// the highest tail the reader has seen).
    pub linearizable_pct: u64,
    /// The cursor's page bounds.
    pub limit_max: u32,
    pub bytes_max: u32,
    /// Ticks a read at the tail may wait.
    pub wait_ticks_max: u32,
    /// Pause after an empty page, in ns.
    pub poll_gap_ns: (u64, u64),
    /// Chance per read of pausing, and how long a pause lasts.
    pub pause_ppm: u64,
    pub pause_ns: (u64, u64),
    /// The backoff after an unserved read (the library's `backoff` over these bounds).
    pub backoff: ClientConfig,
}

/// Folds `record` at `at` into `folder` and tells the audit what that did.
pub(super) fn fold_record(folder: &mut Folder<Chain>, at: u64, record: &[u8], io: &mut ClientIo) {
    let events = folder.fold(Seq(at), record).expect("the folder follows the cursor");
    note_fold(folder, &events, io);
}

pub(super) fn note_fold(folder: &Folder<Chain>, events: &[FoldEvent], io: &mut ClientIo) {
    for e in events {
        match e {
            FoldEvent::Applied { at } => io.events.push(ClientEvent::Folded { seq: at.0, chain: folder.state().chain }),
            FoldEvent::Verified { at } => io.events.push(ClientEvent::RunChecked { begin: at.0, agreed: true }),
            FoldEvent::Diverged { at } => io.events.push(ClientEvent::RunChecked { begin: at.0, agreed: false }),
            FoldEvent::Restored { at } => io.events.push(ClientEvent::Restored { begin: at.0 }),
            _ => {}
        }
    }
}

/// One reader workload client.
#[derive(Debug)]
pub struct Reader {
    name: String,
    /// Where a rotation over the servers starts (paros-client's `Reader` draws its own).
    start: usize,
    rng: SimRng,
    backoff_rng: Rng,
    params: ReaderParams,
    tick_ns: u64,
    cursor: ReaderCursor,
    folder: Folder<Chain>,
    paused_until: Option<u64>,
    in_flight: Option<u64>,
    next_read_at: u64,
    /// `Unavailable` reports in a row (the exponent of the next backoff).
    unavailable: u32,
}

impl Reader {
    #[must_use]
    pub fn new(
        name: String,
        voters: &[NodeId],
        mut rng: SimRng,
        params: ReaderParams,
        tick_ns: u64,
        start_at: u64,
    ) -> Reader {
        let start = rng.below(voters.len() as u64) as usize;
        let config = ReaderConfig {
            page_records_max: params.limit_max.max(1),
            page_bytes_max: params.bytes_max.max(1),
            wait_ms: params.wait_ticks_max * u32::try_from(tick_ns / 1_000_000).unwrap_or(10),
            unserved_retries_max: 3,
        };
        let backoff_rng = Rng::new(rng.u64());
        Reader {
            name,
            start,
            rng,
            backoff_rng,
            params,
            tick_ns,
            cursor: ReaderCursor::new(Seq(0), config).expect("a page holds a record and a byte"),
            folder: Folder::new(Chain::default(), Seq(0), FolderConfig::default()),
            paused_until: None,
            in_flight: None,
            next_read_at: start_at,
            unavailable: 0,
        }
    }

    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True unless the reader is paused: a folding reader's cursor bounds the plain writers'
    /// truncations.
    #[must_use]
    pub fn folding(&self) -> bool {
        self.paused_until.is_none()
    }

    /// The next position this reader wants.
    #[must_use]
    pub fn cursor(&self) -> u64 {
        self.cursor.cursor().0
    }

    /// Time passed: read if due, from the server `servers` gives it (asked once per read sent).
    pub fn wake(&mut self, now: u64, _ctx: ClientCtx, servers: &mut dyn FnMut() -> ReadServers, io: &mut ClientIo) {
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
        let r = self.cursor.next_request();
        let consistency = if self.rng.below(100) < self.params.linearizable_pct {
            Consistency::Linearizable
        } else {
            Consistency::Reached(self.cursor.tail().unwrap_or(r.from))
        };
        let tick_ms = (self.tick_ns / 1_000_000).max(1);
        let request = ReadRequest {
            from: r.from,
            limit: r.limit,
            max_bytes: r.max_bytes,
            wait_ticks: u32::try_from(u64::from(r.wait_ms).div_ceil(tick_ms)).unwrap_or(u32::MAX),
            consistency,
        };
        let to = servers().pick(self.start, r.attempt).expect("a reader is given servers to ask");
        self.in_flight = Some(io.send(to, Request::Read(request)));
    }

    /// The reply to `token` arrived (or timed out: a read that got no answer is unserved).
    pub fn on_reply(&mut self, now: u64, token: u64, reply: Reply, io: &mut ClientIo) {
        if self.in_flight != Some(token) {
            return;
        }
        self.in_flight = None;
        let answer = match reply {
            Reply::Read(a) => ReadAnswer::from_node(a),
            Reply::Call(_) | Reply::TimedOut | Reply::UnknownJournal | Reply::Refused => {
                ReadAnswer::Unserved { applied_to: None }
            }
        };
        let report = match self.cursor.absorb(answer) {
            Ok(ReaderOutcome::Records { from, records, .. }) => {
                self.unavailable = 0;
                for (i, r) in records.iter().enumerate() {
                    let at = from.0 + i as u64;
                    io.events.push(ClientEvent::Delivered { seq: at, record: r.clone() });
                    fold_record(&mut self.folder, at, r, io);
                }
                self.next_read_at = if records.is_empty() {
                    let (lo, hi) = self.params.poll_gap_ns;
                    now + self.rng.between(lo, hi)
                } else {
                    now
                };
                ReadReport::Records { from: from.0, count: records.len() as u64 }
            }
            Ok(ReaderOutcome::Gap { from, resumed_at, .. }) => {
                self.unavailable = 0;
                let events = self.folder.gap(from, resumed_at).expect("the folder follows the cursor");
                note_fold(&self.folder, &events, io);
                io.events.push(ClientEvent::Gap { from: from.0, resumed_at: resumed_at.0 });
                self.next_read_at = now;
                ReadReport::Gap { from: from.0, resumed_at: resumed_at.0 }
            }
            Ok(ReaderOutcome::Retry { attempt }) => {
                self.retry_after(now, attempt);
                ReadReport::Nothing
            }
            Ok(ReaderOutcome::Unavailable { .. } | ReaderOutcome::UnknownJournal) => {
                self.unavailable = self.unavailable.saturating_add(1);
                self.retry_after(now, self.unavailable);
                ReadReport::Nothing
            }
            Err(e) => {
                io.events.push(ClientEvent::Refused { why: e.to_string() });
                self.retry_after(now, 1);
                ReadReport::Nothing
            }
        };
        debug_assert_eq!(self.folder.next(), self.cursor.cursor(), "the folder follows the cursor");
        io.events.push(ClientEvent::Reported(report));
    }

    fn retry_after(&mut self, now: u64, attempt: u32) {
        let d = paros_client::policy::backoff(&self.params.backoff, attempt, &mut self.backoff_rng);
        self.next_read_at = now + u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    }
}
