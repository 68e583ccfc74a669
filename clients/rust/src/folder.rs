//! The Folder: a pure fold of a journal's records that understands checkpoint runs.
//!
//! Every reader of a journal — the owner on restart, a replica of the application, a tool —
//! folds it with the same `Folder`, so all of them reach the same state from the same records.
//! The rules, one record at a time at position `p`, with `next` the first position not yet
//! folded and *whole* meaning the state covers every record below `next`:
//! - `p < next`: already folded (overlapping pages) → ignored.
//! - an application record drops any open run (its owner stopped inside it: it is not a
//!   checkpoint), then is applied if the folder is whole, else skipped.
//! - `Begin` at its own position opens a run, dropping any open one; a misplaced `Begin` and a
//!   record with the magic that does not decode drop the open run.
//! - `Chunk` appends to the open run (bounded by [`FolderConfig::run_bytes_max`]); `Chunk` or
//!   `End` with no open run is stray and ignored.
//! - `End` closes the run: a wrong chunk count or checksum drops it. A valid run is *verified*
//!   by a whole folder (its own `checkpoint()` against the run's bytes; a mismatch is reported
//!   and the folder keeps its own state) and *restored* by a folder that is not whole.
//!
//! A gap (the journal was truncated past `next`) makes the folder not whole, and drops any open
//! run; the folder then skips application records until a complete run restores it — normally
//! the run at the floor, since an owner truncates to its run's `Begin`.
//!
//! The owner checkpoints with a [`Checkpointer`](crate::Checkpointer) and truncates below the
//! run; a folder that starts at 0 meets the gap and restores from the run:
//!
//! ```
//! use paros_client::{Checkpointable, Checkpointer, Folder, FolderConfig, Seq};
//!
//! /// A running total of the numbers in the journal.
//! #[derive(Debug, Default, PartialEq)]
//! struct Total(u64);
//!
//! impl Checkpointable for Total {
//!     type RestoreError = String;
//!     fn apply(&mut self, _at: Seq, record: &[u8]) {
//!         self.0 += std::str::from_utf8(record).ok().and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
//!     }
//!     fn checkpoint(&self) -> Vec<u8> {
//!         self.0.to_le_bytes().to_vec()
//!     }
//!     fn restore(bytes: &[u8]) -> Result<Self, String> {
//!         Ok(Total(u64::from_le_bytes(bytes.try_into().map_err(|_| "not 8 bytes".to_owned())?)))
//!     }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The owner appends 1, 2, 3 at [0, 3), then a run of its state at [3, 6).
//! let mut owner = Total::default();
//! for (at, n) in [1u64, 2, 3].iter().enumerate() {
//!     owner.apply(Seq(at as u64), n.to_string().as_bytes());
//! }
//! let mut checkpointer = Checkpointer::builder().build()?;
//! checkpointer.appended(3, 3)?;
//! let run = checkpointer.begin(&owner, Seq(3))?;
//! let truncate = checkpointer.acknowledged(run.begin, run.records.len() as u64)?.expect("End is acknowledged");
//! assert_eq!(truncate.up_to, Seq(3)); // the journal now keeps [3, 6): the run
//!
//! // A reader from 0 meets the gap [0, 3), then the run, and holds the owner's state.
//! let mut folder = Folder::new(Total::default(), Seq(0), FolderConfig::default());
//! folder.gap(Seq(0), truncate.up_to)?;
//! folder.fold_page(run.begin, &run.records)?;
//! assert!(folder.is_whole());
//! assert_eq!(folder.state(), &owner);
//! # Ok(())
//! # }
//! ```

use bytes::Bytes;
use thiserror::Error;

use crate::run::{self, RunDecodeError, RunRecord};
use crate::types::{seq_checked_add, seq_next};
use crate::{Checkpointable, Seq};

/// The folder's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FolderConfig {
    /// The most state bytes one run may carry; a longer run is dropped, never held.
    pub run_bytes_max: usize,
}

impl Default for FolderConfig {
    fn default() -> Self {
        FolderConfig { run_bytes_max: 64 << 20 }
    }
}

/// What folding one record or one gap did; a call reports one or more, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FoldEvent {
    /// An application record was applied to the state.
    Applied {
        /// The record's position.
        at: Seq,
    },
    /// An application record was not applied: the folder is not whole and waits for a run.
    Skipped {
        /// The record's position.
        at: Seq,
    },
    /// A record at a position already folded was ignored.
    Ignored {
        /// The record's position.
        at: Seq,
    },
    /// A `Begin` opened a run.
    RunOpened {
        /// The position of the run's `Begin`.
        at: Seq,
    },
    /// A `Chunk` was added to the open run.
    RunChunk {
        /// The chunk's position.
        at: Seq,
    },
    /// A `Chunk` or `End` with no open run was ignored.
    Stray {
        /// The stray record's position.
        at: Seq,
    },
    /// A record with the magic did not decode.
    Unreadable {
        /// The record's position.
        at: Seq,
        /// Why it does not decode.
        why: RunDecodeError,
    },
    /// A `Begin` whose `covers_up_to` is not its own position.
    MisplacedBegin {
        /// The `Begin`'s position.
        at: Seq,
        /// The position it claims to cover up to.
        covers_up_to: Seq,
    },
    /// The run opened at `begin` will never be restored or verified.
    RunDropped {
        /// Where the dropped run began.
        begin: Seq,
        /// Why it was dropped.
        why: DropReason,
    },
    /// The state was replaced by the run opened at `at`; the folder is whole again.
    Restored {
        /// The position of the run's `End`.
        at: Seq,
    },
    /// The run opened at `at` encodes exactly the folder's own state.
    Verified {
        /// The position of the run's `End`.
        at: Seq,
    },
    /// The run opened at `at` differs from the folder's own state, which is kept.
    Diverged {
        /// The position of the run's `End`.
        at: Seq,
    },
    /// A gap: positions `[from, to)` are gone; the folder is not whole until a run restores it.
    Jumped {
        /// The first position not read.
        from: Seq,
        /// Where folding resumed.
        to: Seq,
    },
}

/// Why a run was dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropReason {
    /// An application record at `at` sits inside the run.
    ApplicationRecord {
        /// The application record's position.
        at: Seq,
    },
    /// Another `Begin` (or a misplaced one) at `at` came before this run's `End`.
    NewBegin {
        /// The new `Begin`'s position.
        at: Seq,
    },
    /// An undecodable run record at `at` sits inside the run.
    Unreadable {
        /// The unreadable record's position.
        at: Seq,
    },
    /// The journal was truncated past the run's start before its `End` was folded.
    Gap {
        /// Where reading resumed after the gap.
        resumed_at: Seq,
    },
    /// `End` names a different number of chunks than the run holds.
    ChunkCount {
        /// The chunk count `End` declares.
        declared: u64,
        /// The chunks the run held.
        found: u64,
    },
    /// `End`'s checksum is not the CRC-32C of the run's bytes.
    Checksum {
        /// The checksum `End` declares.
        declared: u32,
        /// The checksum of the chunks the run held.
        found: u32,
    },
    /// The run's bytes exceed [`FolderConfig::run_bytes_max`].
    TooLarge {
        /// The folder's bound on a run's state bytes.
        run_bytes_max: usize,
    },
    /// The state refused the run's bytes.
    RestoreFailed {
        /// The state's own restore error, as text.
        reason: String,
    },
}

/// Input the folder refuses, leaving itself unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FoldError {
    /// Input starts past the folder's next position with no gap reported first.
    #[error("input starts at {} but the folder expects {}; report the gap first", .from.0, .expected.0)]
    NotContiguous {
        /// The folder's next position.
        expected: Seq,
        /// Where the records or the gap began.
        from: Seq,
    },
    /// A page's positions run past the end of the position space.
    #[error("a page from {} of {len} records runs past the last position", .from.0)]
    PositionOverflow {
        /// Where the page began.
        from: Seq,
        /// How many records it held.
        len: usize,
    },
}

#[derive(Debug)]
struct OpenRun {
    begin: Seq,
    bytes: Vec<u8>,
    chunks: u64,
}

/// A pure fold of a journal's records into `C`, with checkpoint runs.
#[derive(Debug)]
pub struct Folder<C> {
    state: C,
    next: Seq,
    whole: bool,
    open: Option<OpenRun>,
    config: FolderConfig,
}

impl<C: Checkpointable> Folder<C> {
    /// A folder whose `state` covers every record below `next` (an empty journal: `Seq(0)`).
    pub fn new(state: C, next: Seq, config: FolderConfig) -> Self {
        Folder { state, next, whole: true, open: None, config }
    }

    /// The folded state (stale while the folder is not whole).
    pub fn state(&self) -> &C {
        &self.state
    }

    /// The folded state, consuming the folder.
    pub fn into_state(self) -> C {
        self.state
    }

    /// The first position not yet folded.
    pub fn next(&self) -> Seq {
        self.next
    }

    /// Whether the state covers every record below [`next`](Self::next).
    pub fn is_whole(&self) -> bool {
        self.whole
    }

    /// Where the open run begins, if one is open.
    pub fn open_run(&self) -> Option<Seq> {
        self.open.as_ref().map(|run| run.begin)
    }

    /// Folds a page of consecutive records, the first at `from`.
    ///
    /// # Errors
    /// [`FoldError::NotContiguous`] when `from` is past [`next`](Self::next) (a gap the caller
    /// did not report), [`FoldError::PositionOverflow`] when the page runs past the last
    /// position; either way nothing is folded.
    pub fn fold_page(&mut self, from: Seq, records: &[Bytes]) -> Result<Vec<FoldEvent>, FoldError> {
        if from > self.next {
            return Err(FoldError::NotContiguous { expected: self.next, from });
        }
        let len = records.len();
        if seq_checked_add(from, len as u64).is_none() {
            return Err(FoldError::PositionOverflow { from, len });
        }
        let mut events = Vec::with_capacity(len);
        for (offset, record) in (0u64..).zip(records) {
            self.fold_one(Seq(from.0 + offset), record, &mut events);
        }
        self.check();
        Ok(events)
    }

    /// Folds one record at `at`.
    ///
    /// # Errors
    /// As [`fold_page`](Self::fold_page).
    pub fn fold(&mut self, at: Seq, record: &[u8]) -> Result<Vec<FoldEvent>, FoldError> {
        if at > self.next {
            return Err(FoldError::NotContiguous { expected: self.next, from: at });
        }
        if seq_next(at).is_none() {
            return Err(FoldError::PositionOverflow { from: at, len: 1 });
        }
        let mut events = Vec::with_capacity(1);
        self.fold_one(at, record, &mut events);
        self.check();
        Ok(events)
    }

    /// Takes note that positions `[from, resumed_at)` are gone (the journal was truncated).
    ///
    /// A gap that ends at or below [`next`](Self::next) skips nothing here and reports nothing.
    ///
    /// # Errors
    /// [`FoldError::NotContiguous`] when `from` is past `next`: records the folder never saw.
    pub fn gap(&mut self, from: Seq, resumed_at: Seq) -> Result<Vec<FoldEvent>, FoldError> {
        if from > self.next {
            return Err(FoldError::NotContiguous { expected: self.next, from });
        }
        let mut events = Vec::new();
        if resumed_at <= self.next {
            return Ok(events);
        }
        self.drop_run(DropReason::Gap { resumed_at }, &mut events);
        events.push(FoldEvent::Jumped { from: self.next, to: resumed_at });
        self.next = resumed_at;
        self.whole = false;
        self.check();
        Ok(events)
    }

    fn fold_one(&mut self, at: Seq, record: &[u8], events: &mut Vec<FoldEvent>) {
        if at < self.next {
            events.push(FoldEvent::Ignored { at });
            return;
        }
        assert_eq!(at, self.next, "the folder folds each position once, in order");
        self.next = seq_next(at).expect("a page's positions were checked against overflow");
        if !run::is_run_record(record) {
            self.drop_run(DropReason::ApplicationRecord { at }, events);
            if self.whole {
                self.state.apply(at, record);
                events.push(FoldEvent::Applied { at });
            } else {
                events.push(FoldEvent::Skipped { at });
            }
            return;
        }
        match RunRecord::decode(record) {
            Err(why) => {
                self.drop_run(DropReason::Unreadable { at }, events);
                events.push(FoldEvent::Unreadable { at, why });
            }
            Ok(RunRecord::Begin { covers_up_to }) => {
                self.drop_run(DropReason::NewBegin { at }, events);
                if covers_up_to == at {
                    self.open = Some(OpenRun { begin: at, bytes: Vec::new(), chunks: 0 });
                    events.push(FoldEvent::RunOpened { at });
                } else {
                    events.push(FoldEvent::MisplacedBegin { at, covers_up_to });
                }
            }
            Ok(RunRecord::Chunk(bytes)) => self.on_chunk(at, &bytes, events),
            Ok(RunRecord::End { chunks, checksum }) => self.on_end(at, chunks, checksum, events),
        }
    }

    fn on_chunk(&mut self, at: Seq, bytes: &[u8], events: &mut Vec<FoldEvent>) {
        let Some(run) = self.open.as_mut() else {
            events.push(FoldEvent::Stray { at });
            return;
        };
        if run.bytes.len().saturating_add(bytes.len()) > self.config.run_bytes_max {
            let run_bytes_max = self.config.run_bytes_max;
            self.drop_run(DropReason::TooLarge { run_bytes_max }, events);
            return;
        }
        run.bytes.extend_from_slice(bytes);
        run.chunks += 1;
        events.push(FoldEvent::RunChunk { at });
    }

    fn on_end(&mut self, at: Seq, chunks: u64, checksum: u32, events: &mut Vec<FoldEvent>) {
        let Some(run) = self.open.take() else {
            events.push(FoldEvent::Stray { at });
            return;
        };
        let begin = run.begin;
        let dropped = |why| FoldEvent::RunDropped { begin, why };
        if chunks != run.chunks {
            events.push(dropped(DropReason::ChunkCount { declared: chunks, found: run.chunks }));
            return;
        }
        let found = run::checksum(&run.bytes);
        if checksum != found {
            events.push(dropped(DropReason::Checksum { declared: checksum, found }));
            return;
        }
        if self.whole {
            if self.state.checkpoint() == run.bytes {
                events.push(FoldEvent::Verified { at: begin });
            } else {
                events.push(FoldEvent::Diverged { at: begin });
            }
            return;
        }
        match C::restore(&run.bytes) {
            Ok(state) => {
                self.state = state;
                self.whole = true;
                events.push(FoldEvent::Restored { at: begin });
            }
            Err(e) => events.push(dropped(DropReason::RestoreFailed { reason: e.to_string() })),
        }
    }

    fn drop_run(&mut self, why: DropReason, events: &mut Vec<FoldEvent>) {
        if let Some(run) = self.open.take() {
            events.push(FoldEvent::RunDropped { begin: run.begin, why });
        }
    }

    fn check(&self) {
        if let Some(run) = &self.open {
            assert!(run.begin < self.next, "an open run begins below the folder's next position");
            assert!(run.bytes.len() <= self.config.run_bytes_max, "an open run holds no more than run_bytes_max bytes");
        }
    }
}
