//! Sampling a store's background work and its size on disk while it runs.

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fjall::{Database, Keyspace};
use paros_node::ports::StoreActivity;

use crate::apply::Shared;

/// A handle that reads a [`FjallStore`](crate::store::FjallStore)'s background activity from
/// any thread while the store itself is owned by the host.
#[derive(Clone)]
pub struct StoreProbe {
    db: Database,
    records: Keyspace,
    shared: Arc<Shared>,
    /// The store's directory, whose files are its bytes on disk.
    path: PathBuf,
}

impl fmt::Debug for StoreProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreProbe").finish_non_exhaustive()
    }
}

impl StoreProbe {
    /// A probe of the database `db` in `path`, whose log entries are in `records`.
    pub(crate) fn new(db: Database, records: Keyspace, shared: Arc<Shared>, path: PathBuf) -> StoreProbe {
        StoreProbe { db, records, shared, path }
    }

    /// fjall's activity now.
    #[must_use]
    pub fn sample(&self) -> StoreActivity {
        let n = |x: usize| u64::try_from(x).unwrap_or(u64::MAX);
        let (room_waits, room_waited) = self.shared.room_waits();
        StoreActivity {
            room_waits,
            room_waited_us: u64::try_from(room_waited.as_micros()).unwrap_or(u64::MAX),
            compactions_completed: n(self.db.compactions_completed()),
            compacting_us: u64::try_from(self.db.time_compacting().as_micros()).unwrap_or(u64::MAX),
            compactions_active: n(self.db.active_compactions()),
            flushes_outstanding: n(self.db.outstanding_flushes()),
            log_tables: n(self.records.table_count()),
            log_l0_tables: n(self.records.l0_table_count()),
            journal_files: n(self.db.journal_count()),
            disk_bytes: bytes_under(&self.path),
        }
    }
}

/// The blocks allocated to every file under `dir`, as `du` counts a file: what the store
/// holds on disk, tables being written and tables not yet deleted included (fjall's own count
/// leaves them out), files sized ahead of their contents only as far as written. A file that
/// goes between the listing and its stat counts as nothing.
fn bytes_under(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for meta in entries.flatten().filter_map(|e| e.metadata().ok().map(|m| (e.path(), m))) {
            match meta {
                (path, m) if m.is_dir() => stack.push(path),
                (_, m) => total += m.blocks() * 512,
            }
        }
    }
    total
}
