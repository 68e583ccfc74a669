//! The Checkpointer: the owner's side of checkpoint-and-truncate, sans-IO.
//!
//! The owner (the journal's single writer) tells it how many application bytes it appended;
//! the Checkpointer says when a checkpoint is due, produces the run's records for the owner to
//! append at the tail, and — only once the run's `End` is acknowledged — the truncation to ask
//! for. The owner appends nothing else while a run is in flight: an application record inside
//! a run makes every Folder drop it. Time-based policy (a checkpoint every interval of wall
//! time) belongs to the async wrapper, which owns a clock; here the interval is in records.

use bytes::Bytes;
use thiserror::Error;

use crate::run::{self, CHUNK_HEADER_LEN, RunRecord};
use crate::types::{seq_checked_add, seq_next};
use crate::{Checkpointable, Seq};

/// The largest `chunk_bytes` accepted: a chunk record then fits one 1 MiB write.
pub const CHUNK_BYTES_LIMIT: usize = (1 << 20) - CHUNK_HEADER_LEN;

/// When to checkpoint, and how to cut the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointerConfig {
    /// `k`: a checkpoint is due once the application bytes appended since the last one reach
    /// `k ×` the encoded state's size, so checkpoints add at most about `1/k` to the volume.
    pub factor: u64,
    /// A checkpoint is also due once this many application records were appended since the
    /// last one, however small they were.
    pub interval_records: u64,
    /// The most state bytes one `Chunk` carries.
    pub chunk_bytes: usize,
}

impl Default for CheckpointerConfig {
    fn default() -> Self {
        CheckpointerConfig { factor: 4, interval_records: 65_536, chunk_bytes: 8 << 10 }
    }
}

/// A configuration the Checkpointer refuses.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// `factor` is 0: every record would make a checkpoint due.
    #[error("the checkpoint factor must be at least 1")]
    FactorZero,
    /// `interval_records` is 0.
    #[error("the checkpoint interval must be at least one record")]
    IntervalZero,
    /// `chunk_bytes` is 0 or above [`CHUNK_BYTES_LIMIT`].
    #[error("chunk_bytes {chunk_bytes} is outside 1..={limit}")]
    ChunkBytes {
        /// The `chunk_bytes` asked for.
        chunk_bytes: usize,
        /// The largest allowed, [`CHUNK_BYTES_LIMIT`].
        limit: usize,
    },
}

/// A call the Checkpointer refuses in its current phase; it is left unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CheckpointerError {
    /// A run is already in flight (begun, or ended and awaiting its truncation).
    #[error("a checkpoint run beginning at {} is already in flight", .begin.0)]
    Busy {
        /// Where the run in flight begins.
        begin: Seq,
    },
    /// Application records were reported while the run beginning at `begin` is being appended.
    #[error("application records may not be appended inside the run beginning at {}", .begin.0)]
    RunInFlight {
        /// Where the run being appended begins.
        begin: Seq,
    },
    /// An acknowledgement that is not part of the run being appended.
    #[error("an acknowledgement of [{}, +{count}) is not within the run being appended", .from.0)]
    UnexpectedAck {
        /// The first position acknowledged.
        from: Seq,
        /// How many records were acknowledged.
        count: u64,
    },
    /// The run would run past the last position.
    #[error("a run at {} of {records} records runs past the last position", .tail.0)]
    PositionOverflow {
        /// Where the run would begin.
        tail: Seq,
        /// How many records the run holds.
        records: usize,
    },
}

/// The records of a run, to append in order starting at `begin`, and nothing between them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedRun {
    /// The position of `Begin`, which is the journal's tail when the run was planned.
    pub begin: Seq,
    /// `Begin`, the `Chunk`s, `End`, encoded.
    pub records: Vec<Bytes>,
}

/// Ask the journal to truncate below `up_to` (the committed run's `Begin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncate {
    /// The first position still needed.
    pub up_to: Seq,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    /// Records `[begin, acked_to)` are acknowledged; `End` sits at `end`.
    Appending {
        begin: Seq,
        end: Seq,
        acked_to: Seq,
    },
    /// `End` is acknowledged; the truncation to `up_to` is the owner's to settle.
    Truncating {
        up_to: Seq,
    },
}

/// The owner's checkpoint policy and the run in flight.
#[derive(Debug)]
pub struct Checkpointer {
    config: CheckpointerConfig,
    since_records: u64,
    since_bytes: u64,
    phase: Phase,
}

/// A [`Checkpointer`] to be, from [`CheckpointerConfig::default`] with what
/// [`Checkpointer::builder`]'s setters change.
#[derive(Debug, Clone, Copy, Default)]
#[must_use = "a builder does nothing until it is built"]
pub struct CheckpointerBuilder {
    config: CheckpointerConfig,
}

impl CheckpointerBuilder {
    /// A checkpoint is due once the bytes appended since the last one reach `factor ×` the
    /// state's encoded size.
    pub fn factor(mut self, factor: u64) -> Self {
        self.config.factor = factor;
        self
    }

    /// A checkpoint is due once this many records were appended since the last one.
    pub fn interval_records(mut self, records: u64) -> Self {
        self.config.interval_records = records;
        self
    }

    /// The most state bytes one `Chunk` record carries.
    pub fn chunk_bytes(mut self, bytes: usize) -> Self {
        self.config.chunk_bytes = bytes;
        self
    }

    /// The Checkpointer.
    ///
    /// # Errors
    /// As [`Checkpointer::new`].
    pub fn build(self) -> Result<Checkpointer, ConfigError> {
        Checkpointer::new(self.config)
    }
}

impl Checkpointer {
    /// A Checkpointer with the default policy unless the builder's setters change it:
    /// `Checkpointer::builder().interval_records(1000).build()?`.
    pub fn builder() -> CheckpointerBuilder {
        CheckpointerBuilder::default()
    }

    /// A Checkpointer for a journal with nothing appended since its last checkpoint.
    ///
    /// # Errors
    /// [`ConfigError`] for a bound of zero or a chunk that cannot fit one write.
    pub fn new(config: CheckpointerConfig) -> Result<Self, ConfigError> {
        if config.factor == 0 {
            return Err(ConfigError::FactorZero);
        }
        if config.interval_records == 0 {
            return Err(ConfigError::IntervalZero);
        }
        if config.chunk_bytes == 0 || config.chunk_bytes > CHUNK_BYTES_LIMIT {
            let chunk_bytes = config.chunk_bytes;
            return Err(ConfigError::ChunkBytes { chunk_bytes, limit: CHUNK_BYTES_LIMIT });
        }
        Ok(Checkpointer { config, since_records: 0, since_bytes: 0, phase: Phase::Idle })
    }

    /// The configuration in force.
    pub fn config(&self) -> &CheckpointerConfig {
        &self.config
    }

    /// Application records and bytes acknowledged since the last committed checkpoint.
    pub fn since_checkpoint(&self) -> (u64, u64) {
        (self.since_records, self.since_bytes)
    }

    /// Where the run in flight begins, if one is being appended or awaits its truncation.
    pub fn in_flight(&self) -> Option<Seq> {
        match self.phase {
            Phase::Idle => None,
            Phase::Appending { begin, .. } => Some(begin),
            Phase::Truncating { up_to } => Some(up_to),
        }
    }

    /// Takes note of `records` application records of `bytes` bytes in all, acknowledged.
    ///
    /// The owner also reports here what it folded on opening the journal (the records after
    /// the last checkpoint), so the policy counts from the checkpoint, not from the restart.
    ///
    /// # Errors
    /// [`CheckpointerError::RunInFlight`] while a run is being appended.
    pub fn appended(&mut self, records: u64, bytes: u64) -> Result<(), CheckpointerError> {
        if let Phase::Appending { begin, .. } = self.phase {
            return Err(CheckpointerError::RunInFlight { begin });
        }
        self.since_records = self.since_records.saturating_add(records);
        self.since_bytes = self.since_bytes.saturating_add(bytes);
        Ok(())
    }

    /// Whether a checkpoint is due for a state that encodes to `state_len` bytes.
    ///
    /// Due when no run is in flight, something was appended since the last checkpoint, and the
    /// bytes appended reach `factor × state_len` or the records reach `interval_records`.
    pub fn due(&self, state_len: usize) -> bool {
        let threshold = self.config.factor.saturating_mul(state_len as u64);
        self.phase == Phase::Idle
            && self.since_records > 0
            && (self.since_bytes >= threshold || self.since_records >= self.config.interval_records)
    }

    /// Plans a run of `state` to append at `tail` (the journal's next position).
    ///
    /// # Errors
    /// [`CheckpointerError::Busy`] when a run is in flight; `PositionOverflow` when the run
    /// would not fit below the last position.
    pub fn begin<C: Checkpointable>(&mut self, state: &C, tail: Seq) -> Result<PlannedRun, CheckpointerError> {
        if let Some(begin) = self.in_flight() {
            return Err(CheckpointerError::Busy { begin });
        }
        let bytes = Bytes::from(state.checkpoint());
        let mut records = vec![RunRecord::Begin { covers_up_to: tail }.encode()];
        let mut chunks = 0u64;
        for start in (0..bytes.len()).step_by(self.config.chunk_bytes) {
            let stop = bytes.len().min(start + self.config.chunk_bytes);
            records.push(RunRecord::Chunk(bytes.slice(start..stop)).encode());
            chunks += 1;
        }
        let checksum = run::checksum(&bytes);
        records.push(RunRecord::End { chunks, checksum }.encode());
        let end = seq_checked_add(tail, records.len() as u64 - 1)
            .filter(|end| seq_next(*end).is_some())
            .ok_or(CheckpointerError::PositionOverflow { tail, records: records.len() })?;
        self.phase = Phase::Appending { begin: tail, end, acked_to: tail };
        Ok(PlannedRun { begin: tail, records })
    }

    /// Takes note that the journal acknowledged `count` run records starting at `from`.
    ///
    /// Returns the truncation to ask for once the acknowledgements reach `End`, and only then;
    /// the counters since the last checkpoint restart from zero at that moment. A re-sent
    /// batch's acknowledgement (`Duplicate`) may repeat positions already acknowledged.
    ///
    /// # Errors
    /// [`CheckpointerError::UnexpectedAck`] when no run is being appended or the range is not
    /// within the run, or leaves a hole after what was acknowledged.
    pub fn acknowledged(&mut self, from: Seq, count: u64) -> Result<Option<Truncate>, CheckpointerError> {
        let unexpected = CheckpointerError::UnexpectedAck { from, count };
        let Phase::Appending { begin, end, acked_to } = self.phase else {
            return Err(unexpected);
        };
        let stop = seq_checked_add(from, count).ok_or(unexpected.clone())?;
        if count == 0 || from < begin || from > acked_to || stop.0 > end.0 + 1 {
            return Err(unexpected);
        }
        let acked_to = acked_to.max(stop);
        if acked_to.0 == end.0 + 1 {
            self.phase = Phase::Truncating { up_to: begin };
            self.since_records = 0;
            self.since_bytes = 0;
            return Ok(Some(Truncate { up_to: begin }));
        }
        self.phase = Phase::Appending { begin, end, acked_to };
        Ok(None)
    }

    /// Takes note that the truncation was answered (trimmed, or refused: a superseded owner's
    /// committed run then stays mid-journal, harmlessly). The next checkpoint may begin.
    pub fn truncate_settled(&mut self) {
        if let Phase::Truncating { .. } = self.phase {
            self.phase = Phase::Idle;
        }
    }

    /// Gives up the run being appended (the owner was superseded, or a write failed for good).
    ///
    /// A run without `End` is never restored by any Folder; the counters are kept, so the next
    /// checkpoint is due as soon as the owner can write again.
    pub fn abandon(&mut self) {
        if let Phase::Appending { .. } = self.phase {
            self.phase = Phase::Idle;
        }
    }
}
