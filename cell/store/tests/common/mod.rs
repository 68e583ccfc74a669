//! Shared helpers: journal keys, commands, the in-memory model.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::collections::BTreeMap;

use bytes::Bytes;
use paros_core::journal::{Command, Control, Entry, JournalState, WriterMode};
use paros_core::{Durable, JournalConfig, JournalId, JournalKey, LeaderUuid, NodeId, Seq, TenantId, WriteOp};
use paros_node::ports::{LogStore, StoredJournal};
use paros_store::FjallStore;

pub fn jk(tenant: u64, journal: u64) -> JournalKey {
    JournalKey { tenant: TenantId(tenant), journal: JournalId(journal) }
}

pub fn config() -> JournalConfig {
    JournalConfig { mode: WriterMode::Single, voters: vec![NodeId(1), NodeId(2), NodeId(3)], learners: vec![NodeId(9)] }
}

pub fn write(seq: u64, payload: &[u8]) -> Command {
    Command::Write(Entry {
        leader: LeaderUuid::new(0xfeed),
        seq: Seq(seq),
        records: vec![Bytes::copy_from_slice(payload), Bytes::from_static(b"second")],
    })
}

pub fn noop() -> Command {
    Command::Control(Control::Noop)
}

pub fn state(first: u64, next: u64) -> JournalState {
    JournalState {
        leader: LeaderUuid::new(7),
        term: 3,
        next_seq: Seq(next),
        first_seq: Seq(first),
        ..JournalState::default()
    }
}

/// The model: every journal's `Durable` after applying the batches with `Durable::apply`.
pub fn model(batches: &[Vec<(JournalKey, Vec<WriteOp>)>]) -> BTreeMap<JournalKey, Durable> {
    let mut out: BTreeMap<JournalKey, Durable> = BTreeMap::new();
    for batch in batches {
        for (key, ops) in batch {
            let d = out.entry(*key).or_default();
            for op in ops {
                d.apply(op);
            }
        }
    }
    out
}

/// What a store hands back at boot for the model: entries from the boot anchor on.
pub fn model_for_boot(batches: &[Vec<(JournalKey, Vec<WriteOp>)>]) -> BTreeMap<JournalKey, Durable> {
    model(batches).into_iter().map(|(k, d)| (k, d.for_boot())).collect()
}

/// What the store holds, keyed by journal, for comparison with the model.
pub fn loaded(store: &FjallStore) -> BTreeMap<JournalKey, Durable> {
    let journals: Vec<StoredJournal> = store.load().expect("load");
    let keys: Vec<JournalKey> = journals.iter().map(|j| j.key).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "load() is ordered by journal key");
    journals
        .into_iter()
        .map(|j| {
            assert_eq!(j.config, config());
            (j.key, j.durable)
        })
        .collect()
}
