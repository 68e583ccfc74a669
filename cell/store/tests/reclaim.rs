//! Truncation gives the disk back: a journal of 256 MiB truncated to its tail shrinks the data
//! directory by most of those bytes within a bounded wait, and what is kept reads back.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{config, jk, state};
use paros_core::journal::{Command, Entry};
use paros_core::{Ballot, JournalKey, LeaderUuid, NodeId, Seq, Slot, WriteOp};
use paros_node::ports::{LogRead, LogStore, Placement};
use paros_store::{FjallStore, StoreOptions};

/// Bytes of every file under `dir`, but the write-ahead log's spares: files of finished
/// segments kept to be reused as the next ones, at most `StoreOptions::wal_spares` of them
/// (checked here), not retained data.
fn dir_bytes(dir: &Path) -> u64 {
    let spares = std::fs::read_dir(dir.join("wal"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "spare"))
                .map(|e| e.metadata().map_or(0, |m| m.len()))
                .collect()
        })
        .unwrap_or_else(|_| Vec::new());
    assert!(spares.len() <= paros_store::WAL_SPARES, "{} spares", spares.len());
    all_bytes(dir, std::fs::Metadata::len) - spares.iter().sum::<u64>()
}

/// Bytes of every file under `dir`, each counted by `measure`.
fn all_bytes(dir: &Path, measure: fn(&std::fs::Metadata) -> u64) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                stack.push(e.path());
            } else {
                total += measure(&meta);
            }
        }
    }
    total
}

/// Truncates `j` (written up to `end`) to its last `KEPT` slots, durably; returns the floor.
fn truncate_to_the_last(store: &mut FjallStore, j: JournalKey, end: u64) -> u64 {
    let floor = end - KEPT;
    let ops = vec![
        WriteOp::Chosen { up_to: Slot(end) },
        WriteOp::Truncate { floor: Slot(floor), sealed: state(floor, floor) },
    ];
    store.write(&[(j, ops)]).unwrap();
    store.sync().unwrap();
    floor
}

/// Waits up to 20 s for the directory (which held `written` bytes) to give back at least three
/// quarters of `payload`, and fails if it does not.
fn gives_most_back(dir: &Path, written: u64, payload: u64) {
    let want_at_most = written - payload * 3 / 4;
    let t1 = Instant::now();
    let deadline = Duration::from_secs(20);
    let mut now = dir_bytes(dir);
    while now > want_at_most && t1.elapsed() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        now = dir_bytes(dir);
    }
    eprintln!("{now} bytes after {:?} (wanted at most {want_at_most}, wrote {written})", t1.elapsed());
    assert!(now <= want_at_most, "the directory shrank from {written} only to {now} bytes within {deadline:?}");
}

/// The store's own count of its bytes on disk (what a dashboard shows) is the directory's,
/// as `du` counts them: the blocks allocated, not the files' lengths (fjall's journal and the
/// write-ahead segments are sized ahead of their contents).
/// Background work may change the directory between two looks, so it is compared when two
/// samples around one walk agree, within 5 s.
fn probe_agrees(probe: &paros_store::StoreProbe, dir: &Path) {
    let mut last = (0, 0, 0);
    for _ in 0..50 {
        let before = probe.sample().disk_bytes;
        let on_disk = all_bytes(dir, |m| m.blocks() * 512);
        let after = probe.sample().disk_bytes;
        if before == after && after == on_disk {
            return;
        }
        last = (before, on_disk, after);
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the probe reported {} then {} bytes around a walk that found {}", last.0, last.2, last.1);
}

/// A record of `len` bytes that no compressor can shrink (xorshift), distinct per slot.
fn record(slot: u64, len: usize) -> Bytes {
    let mut x = slot.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    Bytes::from(out)
}

fn command(slot: u64, len: usize) -> Command {
    Command::Write(Entry { leader: LeaderUuid::new(0xfeed), seq: Seq(slot), records: vec![record(slot, len)] })
}

const RECORD: usize = 64 << 10;
const SLOTS: u64 = 4096; // 4096 × 64 KiB = 256 MiB
const KEPT: u64 = 16; // the tail that stays: 1 MiB
const PER_ROUND: u64 = 16;

#[test]
fn truncating_a_256_mib_journal_to_its_tail_gives_the_disk_back() {
    truncate_to_the_tail(StoreOptions::default());
}

#[test]
fn with_record_bytes_in_blob_files_truncation_gives_the_disk_back_too() {
    truncate_to_the_tail(StoreOptions { blob_bytes_min: Some(64), ..StoreOptions::default() });
}

fn truncate_to_the_tail(options: StoreOptions) {
    let dir = tempfile::tempdir().unwrap();
    let j = jk(3, 7);
    let mut store = FjallStore::open_with(dir.path(), options).unwrap();
    let probe = store.probe();
    store.place(&[Placement::Put(j, config(), Ballot::ZERO)]).unwrap();
    let ballot = Ballot { round: 1, node: NodeId(1) };
    let t0 = Instant::now();
    for first in (0..SLOTS).step_by(PER_ROUND as usize) {
        let ops: Vec<WriteOp> = (first..first + PER_ROUND)
            .map(|s| WriteOp::Accept { slot: Slot(s), ballot, command: command(s, RECORD) })
            .collect();
        store.write(&[(j, ops)]).unwrap();
        store.sync().unwrap();
    }
    let written = dir_bytes(dir.path());
    let payload = SLOTS * RECORD as u64;
    eprintln!("wrote {payload} payload bytes in {:?}: directory holds {written}", t0.elapsed());
    assert!(written >= payload, "the records are on disk ({written} < {payload})");
    probe_agrees(&probe, dir.path());

    let floor = truncate_to_the_last(&mut store, j, SLOTS);
    // The dropped records are 255 MiB; "most of it" is 3/4 of the payload.
    gives_most_back(dir.path(), written, payload);
    probe_agrees(&probe, dir.path());
    drop(probe); // a probe holds the database open

    // What was kept is intact, before and after a reopen; nothing below the floor is served.
    let check = |store: &FjallStore| {
        let loaded = store.load().unwrap();
        let d = &loaded.iter().find(|s| s.key == j).expect("the journal is placed").durable;
        assert_eq!(d.floor, Slot(floor));
        let slots: Vec<u64> = d.entries.iter().map(|(s, _)| s.0).collect();
        assert_eq!(slots, (floor..SLOTS).collect::<Vec<_>>());
        for (s, e) in &d.entries {
            assert_eq!(e.command, command(s.0, RECORD), "slot {s:?} reads back");
        }
    };
    check(&store);
    drop(store);
    let store = FjallStore::open_with(dir.path(), options).unwrap();
    check(&store);
}

/// Two journals write side by side, so every generation holds both; one truncates to its tail,
/// the other never truncates. Its generations are then mostly dead but never wholly: the
/// truncated journal's bytes leave the disk only because mostly dead generations are collected
/// (what is live rewritten, the rest dropped), and the other journal reads back intact. With
/// collection off (`collect_dead_percent: 100`) the directory stays at 227 MB and this fails.
#[test]
fn a_journal_truncated_beside_one_that_never_truncates_still_gives_the_disk_back() {
    const EACH: u64 = SLOTS / 2; // 2048 × 64 KiB = 128 MiB per journal
    const OTHER: usize = 4 << 10; // the other journal's records are small: 8 MiB in all
    let dir = tempfile::tempdir().unwrap();
    let (a, other) = (jk(3, 7), jk(3, 8));
    let options = StoreOptions::default();
    let mut store = FjallStore::open_with(dir.path(), options).unwrap();
    let probe = store.probe();
    store.place(&[Placement::Put(a, config(), Ballot::ZERO), Placement::Put(other, config(), Ballot::ZERO)]).unwrap();
    let ballot = Ballot { round: 1, node: NodeId(1) };
    for first in (0..EACH).step_by(PER_ROUND as usize) {
        let ops = |len| {
            (first..first + PER_ROUND)
                .map(|s| WriteOp::Accept { slot: Slot(s), ballot, command: command(s, len) })
                .collect()
        };
        store.write(&[(a, ops(RECORD)), (other, ops(OTHER))]).unwrap();
        store.sync().unwrap();
    }
    store.write(&[(other, vec![WriteOp::Chosen { up_to: Slot(EACH) }])]).unwrap();
    store.sync().unwrap();
    let written = dir_bytes(dir.path());
    let payload = EACH * RECORD as u64;
    assert!(written >= payload, "the records are on disk ({written} < {payload})");
    probe_agrees(&probe, dir.path());

    let floor = truncate_to_the_last(&mut store, a, EACH);
    gives_most_back(dir.path(), written, payload);
    probe_agrees(&probe, dir.path());
    drop(probe); // a probe holds the database open

    let check = |store: &FjallStore| {
        let loaded = store.load().unwrap();
        let find = |key| &loaded.iter().find(|s| s.key == key).expect("placed").durable;
        let (da, dother) = (find(a), find(other));
        assert_eq!(da.entries.iter().map(|(s, _)| s.0).collect::<Vec<_>>(), (floor..EACH).collect::<Vec<_>>());
        for (s, e) in &da.entries {
            assert_eq!(e.command, command(s.0, RECORD), "slot {s:?} of the truncated journal reads back");
        }
        // Boot reads from the last anchor only (none here: from the floor, 0), so every
        // record of the other journal is in what `load` returns.
        assert_eq!(dother.entries.len() as u64, EACH, "the other journal keeps every record");
        for (s, e) in &dother.entries {
            assert_eq!(e.command, command(s.0, OTHER), "slot {s:?} of the other journal reads back");
        }
    };
    check(&store);
    drop(store);
    let store = FjallStore::open_with(dir.path(), options).unwrap();
    check(&store);
}

/// A removed journal's generations are dead: its bytes leave the disk, and a journal placed
/// afresh under the same key reads none of them, before and after a reopen.
#[test]
fn removing_a_journal_gives_its_bytes_back_and_its_next_incarnation_starts_empty() {
    const EACH: u64 = SLOTS / 4; // 64 MiB
    let dir = tempfile::tempdir().unwrap();
    let j = jk(3, 9);
    let options = StoreOptions::default();
    let mut store = FjallStore::open_with(dir.path(), options).unwrap();
    let probe = store.probe();
    store.place(&[Placement::Put(j, config(), Ballot::ZERO)]).unwrap();
    let ballot = Ballot { round: 1, node: NodeId(1) };
    for first in (0..EACH).step_by(PER_ROUND as usize) {
        let ops = (first..first + PER_ROUND)
            .map(|s| WriteOp::Accept { slot: Slot(s), ballot, command: command(s, RECORD) })
            .collect();
        store.write(&[(j, ops)]).unwrap();
        store.sync().unwrap();
    }
    store.settle().unwrap();
    let written = dir_bytes(dir.path());
    let payload = EACH * RECORD as u64;
    store.place(&[Placement::Remove(j)]).unwrap();
    store.sync().unwrap();
    store.place(&[Placement::Put(j, config(), Ballot::ZERO)]).unwrap();
    store.write(&[(j, vec![WriteOp::Accept { slot: Slot(0), ballot, command: command(1_000_000, 64) }])]).unwrap();
    store.sync().unwrap();

    gives_most_back(dir.path(), written, payload);
    probe_agrees(&probe, dir.path());
    drop(probe); // a probe holds the database open

    let check = |store: &FjallStore| {
        let loaded = store.load().unwrap();
        let d = &loaded.iter().find(|s| s.key == j).expect("placed afresh").durable;
        assert_eq!(d.entries.len(), 1, "only the new incarnation's entry");
        assert_eq!(d.entries[0].1.command, command(1_000_000, 64));
        assert_eq!(store.read_range(&j, Slot(0), 100).unwrap().len(), 1);
    };
    check(&store);
    drop(store);
    let store = FjallStore::open_with(dir.path(), options).unwrap();
    check(&store);
}
