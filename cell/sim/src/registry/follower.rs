//! A machine's follower of the registry: a `ReaderCursor` and a `Folder<Directory>` reading the
//! registry journal from the cell, one page at a time, long-polling at the tail.

use paros_client::{Folder, FolderConfig, ReadAnswer, ReaderConfig, ReaderCursor, ReaderOutcome, Seq};
use paros_core::{Consistency, NodeId, ReadRequest};
use paros_registry::Directory;

use super::{PAGE_BYTES, PAGE_RECORDS, RegRequest, RegistryAudit, Send};
use crate::check::Claims;

const MS: u64 = 1_000_000;

/// How long a follower waits before asking again after a failed read.
const RETRY_NS: u64 = 20 * MS;

/// Ticks a read at the tail waits for a record (a long poll).
const TAIL_WAIT_TICKS: u32 = 5;

/// One machine's registry reader.
#[derive(Debug)]
pub struct Follower {
    pub name: String,
    servers: Vec<NodeId>,
    at: usize,
    cursor: ReaderCursor,
    folder: Folder<Directory>,
    waiting: Option<u64>,
    next_token: u64,
    next_at: u64,
}

/// What folding an answer changed.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Folded {
    /// The folder moved (records or a gap).
    pub moved: bool,
}

impl Follower {
    /// A follower starting from scratch (`Seq(0)`, an empty directory), reading from `servers`
    /// beginning with the one at `first`.
    #[must_use]
    pub fn new(name: String, servers: Vec<NodeId>, first: usize) -> Follower {
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
            folder: Folder::new(Directory::new(), Seq(0), FolderConfig::default()),
            waiting: None,
            next_token: 0,
            next_at: 0,
        }
    }

    /// The directory, once the follower is whole and caught up with the tail it last heard of.
    #[must_use]
    pub fn current(&self) -> Option<&Directory> {
        (self.folder.is_whole() && self.cursor.caught_up()).then(|| self.folder.state())
    }

    /// The folder (its position, whether it is whole).
    #[must_use]
    pub fn folder(&self) -> &Folder<Directory> {
        &self.folder
    }

    /// The read to send now, if one is due.
    pub fn wake(&mut self, now: u64) -> Option<Send> {
        if self.waiting.is_some() || now < self.next_at || self.servers.is_empty() {
            return None;
        }
        let r = self.cursor.next_request();
        let wait_ticks = if self.cursor.caught_up() { TAIL_WAIT_TICKS } else { 0 };
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

    /// The answer to the read named `token` (`None`: it timed out).
    pub fn on_answer(
        &mut self,
        now: u64,
        token: u64,
        answer: Option<paros_core::ReadAnswer>,
        audit: &mut RegistryAudit,
        claims: &mut Claims,
    ) -> Folded {
        if self.waiting != Some(token) {
            return Folded::default();
        }
        self.waiting = None;
        let Some(answer) = answer else {
            self.rotate(now);
            return Folded::default();
        };
        let outcome = match self.cursor.absorb(ReadAnswer::from_node(answer)) {
            Ok(o) => o,
            Err(_) => {
                self.rotate(now);
                return Folded::default();
            }
        };
        let name = self.name.clone();
        match outcome {
            ReaderOutcome::Records { from, records, view } => {
                audit.on_records(claims, &name, from, &records);
                audit.on_view(view);
                let events =
                    self.folder.fold_page(from, &records).expect("the cursor hands pages at the folder's position");
                audit.on_events(claims, &name, &events);
                self.next_at = now;
                if records.is_empty() {
                    return Folded::default();
                }
                audit.on_folded(claims, &name, self.folder.next(), self.folder.is_whole(), self.folder.state());
                Folded { moved: true }
            }
            ReaderOutcome::Gap { from, resumed_at, view } => {
                audit.on_view(view);
                let events = self.folder.gap(from, resumed_at).expect("a gap starts at the folder's position");
                audit.on_events(claims, &name, &events);
                self.next_at = now;
                Folded { moved: true }
            }
            ReaderOutcome::Retry { .. } | ReaderOutcome::Unavailable { .. } | ReaderOutcome::UnknownJournal => {
                self.rotate(now);
                Folded::default()
            }
        }
    }
}
