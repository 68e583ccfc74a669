//! Helpers the node's integration tests share.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// A fresh id for each request a test sends (the ids callers draw; unique in this process).
pub fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A gate a store's operations wait at while it is shut: a disk that stalls on demand.
#[derive(Debug, Default)]
pub struct Gate {
    shut: Mutex<bool>,
    opened: Condvar,
    /// Operations waiting at the gate now.
    pub waiting: AtomicUsize,
}

impl Gate {
    pub fn set(&self, shut: bool) {
        *self.shut.lock().expect("gate lock") = shut;
        self.opened.notify_all();
    }

    /// Waits here while the gate is shut.
    pub fn pass(&self) {
        let mut shut = self.shut.lock().expect("gate lock");
        self.waiting.fetch_add(1, Ordering::SeqCst);
        while *shut {
            shut = self.opened.wait(shut).expect("gate lock");
        }
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}
