//! A machine's follower of the registry: paros-registry's sans-IO `Follower` (the same one the
//! daemon runs), its reads carried over the simulated network by a `ReaderCursor`, one page at a
//! time, long-polling at the tail. The world carries out what it places and removes.

use std::time::Duration;

use paros_client::{ReadAnswer, ReaderConfig, ReaderCursor, ReaderOutcome, Seq};
use paros_core::{Consistency, NodeId, ReadRequest};
use paros_registry::follower::{
    FollowError, FollowPolicy, FollowedMachine, Follower as Driver, FollowerEffect, NextRead,
};

use super::{PAGE_BYTES, PAGE_RECORDS, RegRequest, RegistryAudit, Send};
use crate::check::Claims;

const MS: u64 = 1_000_000;

/// How long a follower waits before asking again after a failed read.
const RETRY_NS: u64 = 20 * MS;

/// Ticks a read at the tail waits for a record (a long poll).
const TAIL_WAIT_TICKS: u32 = 5;

/// One machine's registry follower.
#[derive(Debug)]
pub struct Follower {
    pub name: String,
    servers: Vec<NodeId>,
    at: usize,
    cursor: ReaderCursor,
    driver: Driver,
    waiting: Option<u64>,
    next_token: u64,
    next_at: u64,
    /// Why the follower stopped, once it did (as the daemon's follower task ends).
    stopped: Option<FollowError>,
    /// The machine hosts what the directory says once (a directory was published).
    applied: bool,
}

impl Follower {
    /// A follower starting from scratch (`Seq(0)`, an empty directory) for `machine`, reading
    /// from `servers` beginning with the one at `first`.
    #[must_use]
    pub fn new(
        name: String,
        registry: paros_core::JournalKey,
        machine: FollowedMachine,
        servers: Vec<NodeId>,
        first: usize,
    ) -> Follower {
        let config = ReaderConfig {
            page_records_max: PAGE_RECORDS,
            page_bytes_max: PAGE_BYTES,
            wait_ms: 0,
            unserved_retries_max: 3,
        };
        Follower {
            name,
            at: first % servers.len().max(1),
            servers,
            cursor: ReaderCursor::new(Seq(0), config).expect("valid page bounds"),
            driver: Driver::new(registry, vec![machine], FollowPolicy::default()),
            waiting: None,
            next_token: 0,
            next_at: 0,
            stopped: None,
            applied: false,
        }
    }

    /// The configuration formation placed the registry journal with: a node its seat moves to
    /// is placed it so (see [`Driver::with_registry_config`]).
    #[must_use]
    pub fn with_registry_config(mut self, config: paros_core::JournalConfig) -> Self {
        self.driver = self.driver.with_registry_config(config);
        self
    }

    /// Whether the machine has hosted what the directory says once since this follower began
    /// (a replica's readiness waits for it, as the embedded cell's does).
    #[must_use]
    pub fn applied(&self) -> bool {
        self.applied
    }

    /// A directory was published: the machine hosts what it says.
    pub fn note_applied(&mut self) {
        self.applied = true;
    }

    /// The sans-IO follower: what to place and remove ([`Driver::poll`]), and its reports.
    pub fn driver(&mut self) -> &mut Driver {
        &mut self.driver
    }

    /// The read to send now, if one is due.
    pub fn wake(&mut self, now: u64) -> Option<Send> {
        if self.stopped.is_some() || self.waiting.is_some() || now < self.next_at || self.servers.is_empty() {
            return None;
        }
        let r = self.cursor.next_request();
        let wait_ticks = match self.driver.next_read() {
            NextRead::Follow if self.cursor.caught_up() => TAIL_WAIT_TICKS,
            NextRead::Follow | NextRead::Once => 0,
        };
        let request = ReadRequest {
            from: r.from,
            limit: r.limit,
            max_bytes: r.max_bytes,
            wait_ticks,
            consistency: Consistency::Linearizable,
        };
        self.next_token += 1;
        self.waiting = Some(self.next_token);
        Some(Send { token: self.next_token, to: self.servers[self.at], request: RegRequest::Read(request) })
    }

    fn rotate(&mut self, now: u64) {
        self.at = (self.at + 1) % self.servers.len().max(1);
        self.next_at = now + RETRY_NS;
    }

    /// The answer to the read named `token` (`None`: it timed out), then what the machine must
    /// place and remove now.
    pub fn on_answer(
        &mut self,
        now: u64,
        token: u64,
        answer: Option<ReadAnswer>,
        audit: &mut RegistryAudit,
        claims: &mut Claims,
    ) -> Vec<FollowerEffect> {
        if self.waiting != Some(token) {
            return Vec::new();
        }
        self.waiting = None;
        let Some(answer) = answer else {
            self.rotate(now);
            return Vec::new();
        };
        // A node the registry journal is not placed on (its seats move) answers unknown: the
        // next server is asked, as the client's read policy does.
        let outcome = self.cursor.absorb_from(answer, self.servers.len());
        let name = self.name.clone();
        let records = match &outcome {
            Err(_) => false,
            Ok(ReaderOutcome::Records { from, records, view }) => {
                audit.on_records(claims, &name, *from, records);
                audit.on_view(*view);
                self.next_at = now;
                !records.is_empty()
            }
            Ok(ReaderOutcome::Gap { view, .. }) => {
                audit.on_view(*view);
                self.next_at = now;
                false
            }
            Ok(ReaderOutcome::Retry { .. } | ReaderOutcome::Unavailable { .. } | ReaderOutcome::UnknownJournal) => {
                self.rotate(now);
                false
            }
        };
        match self.driver.read(outcome, self.cursor.caught_up()) {
            Ok(events) => audit.on_events(claims, &name, &events),
            Err(e) => {
                self.stopped = Some(e);
                return Vec::new();
            }
        }
        let folder = self.driver.folder();
        if records {
            audit.on_folded(claims, &name, folder.next(), folder.is_whole(), folder.state());
        }
        self.driver.poll(Duration::from_nanos(now))
    }
}
