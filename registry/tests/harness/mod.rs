//! An in-memory registry journal (records with a floor) and a loop that drives a coordinator
//! over it the way the async shell will: append what it hands out, acknowledge, plan due
//! checkpoints, truncate.
#![allow(dead_code)]

use bytes::Bytes;
use paros_client::{Folder, FolderConfig, Seq};
use paros_registry::{Coordinator, Directory, Reply};

/// A journal: positions `[floor, records.len())` are retained; below the floor the slots are
/// emptied and never read.
#[derive(Debug, Default)]
pub struct Log {
    pub floor: u64,
    pub records: Vec<Bytes>,
}

impl Log {
    pub fn tail(&self) -> Seq {
        Seq(self.records.len() as u64)
    }

    /// Appends a batch at the tail; the journal's `Accepted{seq, count}`.
    pub fn append(&mut self, batch: Vec<Bytes>) -> (Seq, u64) {
        let seq = self.tail();
        let count = batch.len() as u64;
        self.records.extend(batch);
        (seq, count)
    }

    /// `first_seq = max(first_seq, min(up_to, next_seq))`.
    pub fn truncate(&mut self, up_to: Seq) {
        let up_to = up_to.0.min(self.records.len() as u64);
        for r in &mut self.records[self.floor as usize..up_to as usize] {
            *r = Bytes::new();
        }
        self.floor = self.floor.max(up_to);
    }

    pub fn retained(&self) -> &[Bytes] {
        &self.records[self.floor as usize..]
    }

    pub fn retained_bytes(&self) -> usize {
        self.retained().iter().map(Bytes::len).sum()
    }

    /// A reader's fold from scratch: the gap to the floor, then every retained record.
    pub fn fold_fresh(&self) -> Folder<Directory> {
        let mut folder = Folder::new(Directory::new(), Seq(0), FolderConfig::default());
        folder.gap(Seq(0), Seq(self.floor)).expect("a gap from the start is contiguous");
        folder.fold_page(Seq(self.floor), self.retained()).expect("the retained records are contiguous");
        folder
    }
}

/// Drives `coordinator` over `log` until it has nothing left to do at `now`; returns every
/// reply it gave.
pub fn drive(coordinator: &mut Coordinator, log: &mut Log, now: u64) -> Vec<Reply> {
    let mut replies = Vec::new();
    loop {
        if let Some(batch) = coordinator.next_append() {
            assert_eq!(
                coordinator.tail().0,
                log.tail().0 + batch.len() as u64,
                "the coordinator's tail follows the log"
            );
            let (seq, count) = log.append(batch);
            replies.extend(coordinator.acknowledged(seq, count).expect("the acknowledgement matches"));
            continue;
        }
        if coordinator.due_checkpoint(now) {
            continue;
        }
        if let Some(t) = coordinator.next_truncate() {
            log.truncate(t.up_to);
            coordinator.truncate_settled();
            continue;
        }
        return replies;
    }
}
