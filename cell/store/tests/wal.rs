//! The store's write-ahead log: a synced round is read and survives a crash before fjall holds
//! it, a torn tail is cut off, the log stays bounded, and a writer waits when too much is
//! pending.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{config, jk, loaded, model, write};
use paros_core::{Ballot, Durable, JournalKey, NodeId, Slot, WriteOp};
use paros_node::ports::{LogRead, LogStore, Placement};
use paros_store::{FORMAT, FjallStore, StoreOptions};

/// An applier that never runs on its own within a test: rounds stay in the log and in memory.
fn paused() -> StoreOptions {
    StoreOptions { apply_interval: Duration::from_secs(3600), apply_bytes: u64::MAX, ..StoreOptions::default() }
}

fn accept(slot: u64, payload: &[u8]) -> WriteOp {
    WriteOp::Accept { slot: Slot(slot), ballot: Ballot { round: 1, node: NodeId(1) }, command: write(slot, payload) }
}

/// A copy of the live directory: what a crash at this moment leaves (and more: the page cache).
/// A file the store deletes while it is copied (a dropped generation, a finished segment) is
/// left out, as a crash just after that deletion would leave it.
///
/// The copy is not atomic, and the store's background threads (the applier, fjall's flushes
/// and compactions) go on meanwhile: a file created after the listing, that a file copied later
/// names, would be missing, a state no crash leaves (the image then failed to open, about one
/// run in six). So the copy is taken again, a bounded number of times, until the files present
/// are the same before and after it: an image of one moment's set of files.
fn crash_image(from: &Path, to: &Path) {
    for _ in 0..100 {
        let before = file_names(from);
        let _ = std::fs::remove_dir_all(to);
        copy_live(from, to);
        if file_names(from) == before {
            return;
        }
    }
    panic!("{} kept changing while it was copied", from.display());
}

/// Every file below `dir`, by path (none when it is gone).
fn file_names(dir: &Path) -> std::collections::BTreeSet<std::path::PathBuf> {
    let mut out = std::collections::BTreeSet::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for e in entries.flatten() {
        match e.file_type() {
            Ok(t) if t.is_dir() => out.extend(file_names(&e.path())),
            Ok(_) => {
                out.insert(e.path());
            }
            Err(_) => {}
        }
    }
    out
}

/// One pass of [`crash_image`]'s copy.
fn copy_live(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    let entries = match std::fs::read_dir(from) {
        Err(e) if gone(&e) => return,
        entries => entries.unwrap(),
    };
    for e in entries {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        match e.file_type() {
            Ok(t) if t.is_dir() => copy_live(&e.path(), &target),
            Err(err) if gone(&err) => {}
            _ => match std::fs::copy(e.path(), &target) {
                Err(err) if gone(&err) => {}
                copied => {
                    copied.unwrap();
                }
            },
        }
    }
}

/// The files in `dir`'s write-ahead log named `*.{ext}`, in order.
fn wal_files(dir: &Path, ext: &str) -> Vec<std::path::PathBuf> {
    let mut out: Vec<_> = std::fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    out.sort();
    out
}

fn wal_segments(dir: &Path) -> Vec<std::path::PathBuf> {
    wal_files(dir, "wal")
}

fn batches(journals: &[JournalKey], rounds: u64) -> Vec<Vec<(JournalKey, Vec<WriteOp>)>> {
    (0..rounds)
        .map(|r| {
            journals
                .iter()
                .map(|j| {
                    let mut ops = vec![
                        accept(r * 2, b"first"),
                        accept(r * 2 + 1, b"second"),
                        WriteOp::Chosen { up_to: Slot(r * 2 + 2) },
                    ];
                    if r == rounds / 2 && j.journal.0 == 2 {
                        ops.push(WriteOp::Truncate { floor: Slot(r), sealed: common::state(0, r) });
                    }
                    (*j, ops)
                })
                .collect()
        })
        .collect()
}

/// A store in `dir` whose applier never runs, with `rounds` of [`batches`] over `journals`
/// written and synced (so held only in its log), and the model of them.
fn synced_while_paused(
    dir: &Path,
    journals: &[JournalKey],
    rounds: u64,
) -> (FjallStore, BTreeMap<JournalKey, Durable>) {
    let synced = batches(journals, rounds);
    let mut store = FjallStore::open_with(dir, paused()).unwrap();
    let placements: Vec<_> = journals.iter().map(|j| Placement::Put(*j, config(), Ballot::ZERO)).collect();
    store.place(&placements).unwrap();
    for batch in &synced {
        store.write(batch).unwrap();
        store.sync().unwrap();
    }
    (store, model(&synced))
}

#[test]
fn synced_rounds_fjall_does_not_hold_yet_are_read_and_survive_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let journals = [jk(1, 1), jk(1, 2)];
    let (mut store, want) = synced_while_paused(dir.path(), &journals, 20);
    assert!(store.pending_bytes() > 0, "the applier has not run: fjall does not hold the rounds");
    assert_eq!(loaded(&store), want, "reads see the rounds fjall does not hold");
    let reader = store.reader();
    let from_reader: Vec<u64> =
        reader.read_range(&journals[0], Slot(0), 100).unwrap().iter().map(|(s, _)| s.0).collect();
    assert_eq!(from_reader, (0..40).collect::<Vec<_>>());
    assert_eq!(reader.load_journal(&journals[1]).unwrap().as_ref(), Some(&want[&journals[1]]));

    // A round written but never synced: a crash may lose it.
    store.write(&[(journals[0], vec![accept(40, b"unsynced")])]).unwrap();
    let image = tempfile::tempdir().unwrap();
    crash_image(dir.path(), image.path());
    let torn = tempfile::tempdir().unwrap();
    crash_image(dir.path(), torn.path());
    let last = wal_segments(torn.path()).pop().expect("a segment");
    let mut bytes = std::fs::read(&last).unwrap();
    bytes.extend_from_slice(&[200, 0, 0, 0, 1, 2, 3, 4, 5, 6]);
    std::fs::write(&last, bytes).unwrap();
    drop(store);

    for (what, path) in [("crash image", image.path()), ("crash image with a torn tail", torn.path())] {
        let store = FjallStore::open(path).unwrap();
        assert_eq!(loaded(&store), want, "{what}: every synced round, nothing else");
        assert_eq!(store.pending_bytes(), 0);
        drop(store);
        assert!(wal_segments(path).is_empty(), "{what}: a clean close leaves nothing to replay");
        let store = FjallStore::open(path).unwrap();
        assert_eq!(loaded(&store), want, "{what}: reopened again");
    }
}

#[test]
fn a_journal_removed_while_its_rounds_are_pending_stays_removed() {
    removed_stays_removed(paused());
}

#[test]
fn a_journal_removed_while_its_records_are_buffered_or_ingested_stays_removed() {
    // Every sync closes a segment: each round is applied, its records ingested.
    removed_stays_removed(StoreOptions { wal_segment_bytes: 256, ..StoreOptions::default() });
    // Records buffered, not yet ingested, when the removal comes.
    removed_stays_removed(StoreOptions { apply_interval: Duration::from_micros(1), ..StoreOptions::default() });
}

fn removed_stays_removed(opts: StoreOptions) {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (jk(2, 1), jk(2, 2));
    let mut store = FjallStore::open_with(dir.path(), opts).unwrap();
    store.place(&[Placement::Put(a, config(), Ballot::ZERO), Placement::Put(b, config(), Ballot::ZERO)]).unwrap();
    for batch in &batches(&[a, b], 5) {
        store.write(batch).unwrap();
        store.sync().unwrap();
    }
    store.place(&[Placement::Remove(a)]).unwrap();
    store.sync().unwrap();
    let image = tempfile::tempdir().unwrap();
    crash_image(dir.path(), image.path());
    assert_eq!(loaded(&store).keys().copied().collect::<Vec<_>>(), vec![b]);
    assert!(store.read_range(&a, Slot(0), 100).unwrap().is_empty());
    drop(store);
    for path in [dir.path(), image.path()] {
        let store = FjallStore::open(path).unwrap();
        assert_eq!(loaded(&store).keys().copied().collect::<Vec<_>>(), vec![b]);
        assert!(store.read_range(&a, Slot(0), 100).unwrap().is_empty(), "no record of the removed journal");
    }

    // Placed afresh: a short read sees only the new incarnation's records, however many of
    // the old one's removals lie before them.
    let mut store = FjallStore::open_with(dir.path(), opts).unwrap();
    store.place(&[Placement::Put(a, config(), Ballot::ZERO)]).unwrap();
    store.write(&[(a, vec![accept(7, b"new"), accept(8, b"new")])]).unwrap();
    store.sync().unwrap();
    let read: Vec<(u64, bool)> = store
        .read_range(&a, Slot(0), 2)
        .unwrap()
        .into_iter()
        .map(|(s, e)| (s.0, e.command == write(s.0, b"new")))
        .collect();
    assert_eq!(read, vec![(7, true), (8, true)]);
}

#[test]
fn closed_segments_are_retired_once_fjall_holds_their_rounds_and_reused() {
    let dir = tempfile::tempdir().unwrap();
    let j = jk(3, 1);
    let opts = StoreOptions { wal_segment_bytes: 4096, ..StoreOptions::default() };
    let mut store = FjallStore::open_with(dir.path(), opts).unwrap();
    store.place(&[Placement::Put(j, config(), Ballot::ZERO)]).unwrap();
    for slot in 0..2000 {
        store.write(&[(j, vec![accept(slot, &[7; 100])])]).unwrap();
        store.sync().unwrap();
    }
    store.settle().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while wal_segments(dir.path()).len() > 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let left = wal_segments(dir.path());
    assert!(left.len() <= 2, "{} segments of 4 KiB left after ~250 were filled", left.len());
    let spares = wal_files(dir.path(), "spare");
    assert!(!spares.is_empty() && spares.len() <= paros_store::WAL_SPARES, "{} spares kept", spares.len());
    assert_eq!(store.read_range(&j, Slot(0), 5000).unwrap().len(), 2000);
    // Many segments came and went; at most two and the spares are on disk.
    let last: u64 = left.last().unwrap().file_stem().unwrap().to_str().unwrap().parse().unwrap();
    assert!(last > 50, "segment {last} is current");
}

#[test]
fn a_crash_after_segments_were_reused_replays_only_their_new_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let j = jk(3, 2);
    // First use: small segments, each retired once fjall holds it, kept as a spare. Every
    // round rewrites one of slots 0–3, so whatever older round a reused file holds, replaying
    // it would show.
    {
        let opts = StoreOptions { wal_segment_bytes: 2048, wal_spares: 4, ..StoreOptions::default() };
        let mut store = FjallStore::open_with(dir.path(), opts).unwrap();
        store.place(&[Placement::Put(j, config(), Ballot::ZERO)]).unwrap();
        for round in 0..200u64 {
            store.write(&[(j, vec![accept(round % 4, &[u8::try_from(round).unwrap(); 60])])]).unwrap();
            store.sync().unwrap();
        }
    }
    let spares = wal_files(dir.path(), "spare");
    assert!(!spares.is_empty(), "segments were retired as spares");
    let stale = std::fs::read(&spares[0]).unwrap();
    // Second use: the segment is made from a spare that still holds older rounds past what is
    // written now; the applier never runs, so fjall stays still while the crash image is taken.
    // The rounds are of the older ones' size: this use's last record ends where an older
    // record begins, and only the salt tells that one apart.
    let mut store = FjallStore::open_with(dir.path(), paused()).unwrap();
    for slot in 0..4u64 {
        store.write(&[(j, vec![accept(slot, &[b'n'; 60])])]).unwrap();
        store.sync().unwrap();
    }
    let current = wal_segments(dir.path()).pop().expect("a segment");
    let reused = std::fs::read(&current).unwrap();
    assert!(
        reused.len() >= 2048 && reused[1024..2048] == stale[1024..2048],
        "the current segment is a spare, older rounds in it"
    );
    let image = tempfile::tempdir().unwrap();
    crash_image(dir.path(), image.path());
    drop(store);
    let store = FjallStore::open(image.path()).unwrap();
    let read: Vec<_> = store.read_range(&j, Slot(0), 500).unwrap().into_iter().map(|(s, e)| (s.0, e.command)).collect();
    let want: Vec<_> = (0..4u64).map(|s| (s, write(s, &[b'n'; 60]))).collect();
    assert_eq!(read, want, "the synced rounds of this use, none of the file's earlier one");
}

#[test]
fn a_format_3_store_with_rounds_in_its_log_opens_and_is_marked_with_this_builds_format() {
    let dir = tempfile::tempdir().unwrap();
    let (store, want) = synced_while_paused(dir.path(), &[jk(5, 1), jk(5, 2)], 12);
    let image = tempfile::tempdir().unwrap();
    crash_image(dir.path(), image.path());
    drop(store);
    // What format 3 wrote: segments without a header, checksums of the body alone, zeros after
    // the last record; and the marker 3.
    for path in wal_segments(image.path()) {
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"parosWAL");
        let mut old = Vec::new();
        let mut at = 16;
        loop {
            let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            if len == 0 {
                break;
            }
            let body = &bytes[at + 8..at + 8 + len];
            old.extend_from_slice(&bytes[at..at + 4]);
            old.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
            old.extend_from_slice(body);
            at += 8 + len;
        }
        assert!(!old.is_empty());
        old.resize(bytes.len(), 0);
        std::fs::write(&path, old).unwrap();
    }
    {
        let db = fjall::Database::builder(image.path()).open().unwrap();
        let meta = db.keyspace("meta", fjall::KeyspaceCreateOptions::default).unwrap();
        meta.insert("format", 3u32.to_be_bytes()).unwrap();
        db.persist(fjall::PersistMode::SyncData).unwrap();
    }
    let store = FjallStore::open(image.path()).unwrap();
    assert_eq!(loaded(&store), want, "the format 3 log's rounds are read");
    drop(store);
    let db = fjall::Database::builder(image.path()).open().unwrap();
    let meta = db.keyspace("meta", fjall::KeyspaceCreateOptions::default).unwrap();
    assert_eq!(
        meta.get("format").unwrap().unwrap().as_ref(),
        FORMAT.to_be_bytes(),
        "marked 4: a format 3 build refuses it now"
    );
}

#[test]
fn a_writer_waits_while_too_much_is_pending() {
    let dir = tempfile::tempdir().unwrap();
    let j = jk(4, 1);
    // Without the bound, 50 ms of rounds would gather before the applier ran.
    let bound = 2048;
    let opts =
        StoreOptions { pending_bytes_max: bound, apply_interval: Duration::from_millis(50), ..StoreOptions::default() };
    let mut store = FjallStore::open_with(dir.path(), opts).unwrap();
    let probe = store.probe();
    store.place(&[Placement::Put(j, config(), Ballot::ZERO)]).unwrap();
    assert_eq!((probe.sample().room_waits, probe.sample().room_waited_us), (0, 0), "no write has waited yet");
    let mut most = 0;
    for slot in 0..300 {
        store.write(&[(j, vec![accept(slot, &[1; 512])])]).unwrap();
        most = most.max(store.pending_bytes());
        store.sync().unwrap();
    }
    // One round past the bound at most: the round that found room, plus its state row.
    assert!(most <= bound + 2048, "pending reached {most} bytes against a bound of {bound}");
    assert_eq!(store.read_range(&j, Slot(0), 500).unwrap().len(), 300);
    // The waits are counted where the store's activity is read (the bench reports them).
    let waited = probe.sample();
    assert!(waited.room_waits > 0 && waited.room_waited_us > 0, "the waits are counted: {waited:?}");
}
