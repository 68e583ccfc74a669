//! FjallStore against the in-memory model (`Durable::apply`), across reopen.

mod common;

use std::time::Duration;

use common::{config, jk, loaded, model, noop, state, write};
use paros_core::{Ballot, JournalKey, NodeId, Slot, WriteOp};
use paros_node::ports::{Incarnation, LogRead, LogStore, Placement, StoreError, StoreOp};
use paros_node::{BootError, Host};
use paros_store::{FORMAT, FjallStore, StoreStats};

fn b(round: u64, node: u64) -> Ballot {
    Ballot { round, node: NodeId(node) }
}

fn accept(slot: u64, round: u64, payload: &[u8]) -> WriteOp {
    WriteOp::Accept { slot: Slot(slot), ballot: b(round, 1), command: write(slot * 10, payload) }
}

fn apply_all(store: &mut FjallStore, batches: &[Vec<(JournalKey, Vec<WriteOp>)>]) {
    for batch in batches {
        store.write(batch).expect("write");
        store.sync().expect("sync");
    }
}

#[test]
fn several_journals_over_batches_equal_the_model_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (a, bb, c) = (jk(1, 1), jk(1, 0x100), jk(0x100, 1));
    let batches = vec![
        vec![
            (a, vec![WriteOp::Promise(b(1, 1)), accept(0, 1, b"a0"), accept(1, 1, b"a1"), accept(2, 1, b"a2")]),
            (
                bb,
                vec![WriteOp::Promise(b(2, 2)), accept(0, 2, b"b0"), WriteOp::Learn { slot: Slot(1), command: noop() }],
            ),
            (c, vec![accept(5, 1, b"c5")]),
        ],
        vec![
            // Overwrite a slot, raise and fail to lower chosen, promise again.
            (a, vec![accept(2, 3, b"a2'"), WriteOp::Chosen { up_to: Slot(2) }, WriteOp::Chosen { up_to: Slot(1) }]),
            (a, vec![WriteOp::Promise(b(3, 1)), accept(3, 3, b"a3"), accept(4, 3, b"a4")]),
            // Truncate drops what was on disk and what this batch staged, then refuses below floor.
            (
                bb,
                vec![
                    accept(2, 2, b"b2"),
                    accept(3, 2, b"b3"),
                    WriteOp::Truncate { floor: Slot(3), sealed: state(0, 5) },
                    accept(1, 2, b"late"),
                    accept(3, 4, b"b3'"),
                    WriteOp::Truncate { floor: Slot(2), sealed: state(0, 1) },
                ],
            ),
        ],
        vec![
            (a, vec![WriteOp::Truncate { floor: Slot(2), sealed: state(0, 20) }]),
            // Trim-point jump past everything held; a second one at or below the floor only raises chosen.
            (c, vec![WriteOp::TrimmedTo { point: Slot(9), state: state(4, 90) }, accept(9, 5, b"c9")]),
            (c, vec![WriteOp::TrimmedTo { point: Slot(9), state: state(0, 0) }]),
        ],
        vec![(
            a,
            vec![
                WriteOp::TrimmedTo { point: Slot(1), state: state(0, 0) },
                WriteOp::Learn { slot: Slot(6), command: noop() },
            ],
        )],
    ];
    let want = model(&batches);
    assert_eq!(want[&bb].floor, Slot(3));
    assert_eq!(want[&c].chosen_up_to, Slot(9));

    let mut store = FjallStore::open(dir.path()).unwrap();
    assert!(store.is_fresh());
    store
        .place(&[
            Placement::Put(a, config(), Ballot::ZERO),
            Placement::Put(bb, config(), Ballot::ZERO),
            Placement::Put(c, config(), Ballot::ZERO),
        ])
        .unwrap();
    apply_all(&mut store, &batches);
    assert_eq!(loaded(&store), want, "before reopen");
    let ops: usize = batches.iter().flatten().map(|(_, ops)| ops.len()).sum();
    // One batch for the placements (no sync of their own), one per round; the format marker's
    // sync, then one per round.
    assert_eq!(store.stats(), StoreStats { batches: 1 + 4, syncs: 1 + 4, ops: ops as u64 });
    drop(store);

    let store = FjallStore::open(dir.path()).unwrap();
    assert!(!store.is_fresh());
    assert_eq!(loaded(&store), want, "after reopen");
}

#[test]
fn state_cache_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let a = jk(3, 3);
    let first = vec![
        vec![(a, vec![accept(0, 1, b"x"), accept(5, 1, b"y"), accept(6, 1, b"z")])],
        vec![(a, vec![WriteOp::Truncate { floor: Slot(5), sealed: state(1, 2) }])],
    ];
    let second = vec![
        // After reopen the floor still refuses slots below it and the next truncation still drops.
        vec![(a, vec![accept(1, 2, b"below"), accept(7, 2, b"w")])],
        vec![(a, vec![WriteOp::Chosen { up_to: Slot(7) }, WriteOp::Truncate { floor: Slot(7), sealed: state(3, 4) }])],
    ];
    let mut store = FjallStore::open(dir.path()).unwrap();
    store.place(&[Placement::Put(a, config(), Ballot::ZERO)]).unwrap();
    apply_all(&mut store, &first);
    drop(store);
    let mut store = FjallStore::open(dir.path()).unwrap();
    apply_all(&mut store, &second);
    drop(store);
    let store = FjallStore::open(dir.path()).unwrap();
    let all: Vec<_> = first.into_iter().chain(second).collect();
    assert_eq!(loaded(&store), model(&all));
    assert_eq!(loaded(&store)[&a].entries.iter().map(|(s, _)| *s).collect::<Vec<_>>(), vec![Slot(7)]);
}

#[test]
fn journals_never_see_each_others_keys() {
    let dir = tempfile::tempdir().unwrap();
    // Ids whose big-endian bytes share prefixes, and tenant/journal swaps.
    let keys =
        [jk(1, 1), jk(1, 0x0100), jk(1, 0x0101), jk(0x0100, 1), jk(1, 0x0100_0000_0000_0000), jk(0, 1), jk(1, 0)];
    let mut store = FjallStore::open(dir.path()).unwrap();
    let mut batch = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        store.place(&[Placement::Put(*key, config(), Ballot::ZERO)]).unwrap();
        let tag = format!("j{i}");
        batch.push((*key, (0..4).map(|s| accept(s, i as u64 + 1, tag.as_bytes())).collect::<Vec<_>>()));
        batch[i].1.push(WriteOp::Promise(b(i as u64 + 1, 1)));
    }
    // Truncating one journal drops nothing of the others.
    let trunc = vec![(keys[1], vec![WriteOp::Truncate { floor: Slot(u64::MAX), sealed: state(0, 9) }])];
    let batches = vec![batch, trunc];
    apply_all(&mut store, &batches);
    drop(store);
    let store = FjallStore::open(dir.path()).unwrap();
    let got = loaded(&store);
    assert_eq!(got, model(&batches));
    assert!(got[&keys[1]].entries.is_empty());
    for (i, key) in keys.iter().enumerate().filter(|(i, _)| *i != 1) {
        assert_eq!(got[key].entries.len(), 4, "journal {i}");
        assert_eq!(got[key].promise, b(i as u64 + 1, 1));
    }
}

#[test]
fn only_journals_with_a_config_are_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let (a, bb) = (jk(5, 1), jk(5, 2));
    let mut store = FjallStore::open(dir.path()).unwrap();
    store.place(&[Placement::Put(a, config(), Ballot::ZERO)]).unwrap();
    store.write(&[(a, vec![accept(0, 1, b"a")]), (bb, vec![accept(0, 1, b"b")])]).unwrap();
    store.sync().unwrap();
    assert_eq!(store.load().unwrap().iter().map(|j| j.key).collect::<Vec<_>>(), vec![a]);
    store.place(&[Placement::Put(bb, config(), Ballot::ZERO)]).unwrap();
    assert_eq!(store.load().unwrap().len(), 2);
}

#[test]
fn identity_round_trips_and_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = FjallStore::open(dir.path()).unwrap();
    assert!(store.is_fresh());
    assert_eq!(store.identity().unwrap(), None);
    store.set_identity(NodeId(0xabcd)).unwrap();
    store.set_identity(NodeId(0xabcd)).unwrap();
    match store.set_identity(NodeId(1)) {
        Err(StoreError::IdentityTaken { recorded, offered }) => {
            assert_eq!((recorded, offered), (NodeId(0xabcd), NodeId(1)))
        }
        other => panic!("expected the identity to be refused, got {other:?}"),
    }
    drop(store);
    let store = FjallStore::open(dir.path()).unwrap();
    assert!(!store.is_fresh());
    assert_eq!(store.identity().unwrap(), Some(NodeId(0xabcd)));
}

#[test]
fn the_incarnation_round_trips_and_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = FjallStore::open(dir.path()).unwrap();
    assert_eq!(store.incarnation().unwrap(), None, "a fresh store has none yet");
    store.set_incarnation(Incarnation(0x1ca7)).unwrap();
    store.set_incarnation(Incarnation(0x1ca7)).unwrap();
    match store.set_incarnation(Incarnation(2)) {
        Err(StoreError::IncarnationTaken { recorded, offered }) => {
            assert_eq!((recorded, offered), (Incarnation(0x1ca7), Incarnation(2)), "the first one stays")
        }
        other => panic!("expected the incarnation to be refused, got {other:?}"),
    }
    drop(store);
    let store = FjallStore::open(dir.path()).unwrap();
    assert_eq!(store.incarnation().unwrap(), Some(Incarnation(0x1ca7)), "durable across a reopen");
}

/// A host formats a fresh store with an incarnation, reads the same one back at every boot,
/// and a store formatted again under the same id (its identity handed over by hand) is told
/// apart by it: the shell refuses it like a wiped one.
#[test]
fn a_host_records_the_incarnation_once_and_a_reformatted_store_is_foreign() {
    let tunables = paros_core::Tunables::default();
    let id = NodeId(0x77);
    let first = tempfile::tempdir().unwrap();
    let host = Host::boot(FjallStore::open(first.path()).unwrap(), None, id, tunables, 11).unwrap();
    let recorded = host.incarnation().expect("the fjall store records an incarnation");
    drop(host);
    let host = Host::boot(FjallStore::open(first.path()).unwrap(), Some(id), NodeId(1), tunables, 12).unwrap();
    assert_eq!(host.incarnation(), Some(recorded), "a later boot reads the same incarnation back");
    assert!(host.check_incarnation(Some(recorded)).is_ok(), "its own incarnation passes");
    drop(host);
    let wiped = tempfile::tempdir().unwrap();
    let refused = Host::boot(FjallStore::open(wiped.path()).unwrap(), Some(id), NodeId(2), tunables, 13);
    assert!(matches!(refused, Err(BootError::Wiped(w)) if w == id), "an empty store under a known id is refused");
    let again = Host::boot(FjallStore::open(wiped.path()).unwrap(), None, id, tunables, 14).unwrap();
    assert_ne!(again.incarnation(), Some(recorded), "formatted again: another incarnation");
    match again.check_incarnation(Some(recorded)) {
        Err(BootError::WrongIncarnation { node, recorded: r, found }) => {
            assert_eq!((node, r, found), (id, recorded, again.incarnation()), "named in the refusal")
        }
        other => panic!("expected a foreign store to be refused, got {other:?}"),
    }
}

#[test]
fn another_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(FjallStore::open(dir.path()).unwrap());
    {
        let db = fjall::Database::builder(dir.path()).open().unwrap();
        let meta = db.keyspace("meta", fjall::KeyspaceCreateOptions::default).unwrap();
        meta.insert("format", (FORMAT + 1).to_be_bytes()).unwrap();
        db.persist(fjall::PersistMode::SyncData).unwrap();
    }
    match FjallStore::open(dir.path()) {
        Err(StoreError::Format { found, supported }) => assert_eq!((found, supported), (FORMAT + 1, FORMAT)),
        other => panic!("expected a format error, got {other:?}"),
    }
}

/// The marker as a plain fjall handle reads it (the store closed).
fn marker(dir: &std::path::Path) -> u32 {
    let db = fjall::Database::builder(dir).open().unwrap();
    let meta = db.keyspace("meta", fjall::KeyspaceCreateOptions::default).unwrap();
    u32::from_be_bytes(meta.get("format").unwrap().expect("a marker").as_ref().try_into().unwrap())
}

/// Rewrites a store of this build into the layout formats 1 and 2 had: log entries under
/// `tenant ‖ journal ‖ slot` in a `log` keyspace, no generations, the marker at `format`.
fn into_legacy_layout(path: &std::path::Path, format: u32) {
    let db = fjall::Database::builder(path).open().unwrap();
    let records = db.keyspace("records", fjall::KeyspaceCreateOptions::default).unwrap();
    let gens = db.keyspace("gens", fjall::KeyspaceCreateOptions::default).unwrap();
    let log = db.keyspace("log", fjall::KeyspaceCreateOptions::default).unwrap();
    let entries: Vec<(Vec<u8>, Vec<u8>)> = records
        .iter()
        .map(|item| {
            let (k, v) = item.into_inner().unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect();
    assert!(!entries.is_empty());
    for (k, v) in &entries {
        assert_eq!(k.len(), 32, "generation ‖ tenant ‖ journal ‖ slot");
        log.insert(&k[8..], v).unwrap();
        records.remove(k).unwrap();
    }
    let rows: Vec<Vec<u8>> = gens.iter().map(|item| item.key().unwrap().to_vec()).collect();
    for k in rows {
        gens.remove(k).unwrap();
    }
    let meta = db.keyspace("meta", fjall::KeyspaceCreateOptions::default).unwrap();
    meta.insert("format", format.to_be_bytes()).unwrap();
    db.persist(fjall::PersistMode::SyncData).unwrap();
}

#[test]
fn stores_of_formats_1_and_2_open_keep_their_log_and_are_marked_3() {
    for format in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let (a, c) = (jk(1, 1), jk(1, 2));
        let before = {
            let mut store = FjallStore::open(dir.path()).unwrap();
            store.set_identity(NodeId(7)).unwrap();
            store
                .place(&[Placement::Put(a, config(), Ballot::ZERO), Placement::Put(c, config(), Ballot::ZERO)])
                .unwrap();
            apply_all(
                &mut store,
                &[
                    vec![(a, vec![WriteOp::Promise(b(1, 1)), accept(0, 1, b"kept"), accept(1, 1, b"too")])],
                    vec![
                        (c, vec![accept(0, 1, b"other"), accept(1, 1, b"journal")]),
                        (a, vec![accept(2, 1, b"third")]),
                    ],
                ],
            );
            store.settle().unwrap();
            loaded(&store)
        };
        assert_eq!(before[&a].entries.len(), 3);
        assert_eq!(before[&c].entries.len(), 2);
        assert_eq!(marker(dir.path()), FORMAT, "a new store is marked with this build's format");
        into_legacy_layout(dir.path(), format);
        assert_eq!(marker(dir.path()), format);
        let store = FjallStore::open(dir.path()).unwrap();
        assert!(!store.is_fresh());
        assert_eq!(store.identity().unwrap(), Some(NodeId(7)));
        assert_eq!(loaded(&store), before, "the format-{format} store reads back whole");
        drop(store);
        assert_eq!(marker(dir.path()), FORMAT, "opening upgraded the marker: an older build now refuses it");
        {
            let db = fjall::Database::builder(dir.path()).open().unwrap();
            assert!(!db.keyspace_exists("log"), "the old keyspace is gone once its entries were copied");
        }
        let store = FjallStore::open(dir.path()).unwrap();
        assert_eq!(loaded(&store), before, "and reads back whole after another open");
    }
}

#[test]
fn data_without_a_marker_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = fjall::Database::builder(dir.path()).open().unwrap();
        let log = db.keyspace("log", fjall::KeyspaceCreateOptions::default).unwrap();
        log.insert([0u8; 24], b"??").unwrap();
    }
    assert!(matches!(FjallStore::open(dir.path()), Err(StoreError::Format { found: 0, supported: FORMAT })));
}

#[test]
fn a_second_handle_on_the_same_directory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let _store = FjallStore::open(dir.path()).unwrap();
    assert!(matches!(FjallStore::open(dir.path()), Err(StoreError::Engine { op: StoreOp::Open, .. })));
}

#[test]
fn empty_writes_commit_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = FjallStore::open(dir.path()).unwrap();
    store.write(&[]).unwrap();
    store.write(&[(jk(1, 1), vec![])]).unwrap();
    assert_eq!(store.stats().batches, 0);
}

#[test]
fn baseline_reports_what_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let report = paros_store::baseline::raw_fjall_append(dir.path(), 8, 100, Duration::from_millis(200));
    assert!(report.batches > 0);
    assert_eq!(report.records, report.batches * 8);
    assert!(report.p50_us <= report.p99_us && report.p99_us <= report.p999_us && report.p999_us <= report.max_us);
    assert!(report.over_15ms <= report.over_5ms && report.over_5ms <= report.batches);
    assert!(report.elapsed <= Duration::from_secs(30));
    assert!(report.records_per_sec() > 0.0);
}

#[test]
fn a_removed_journal_leaves_no_row_behind_and_its_key_can_be_placed_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let (a, bb) = (jk(6, 1), jk(6, 2));
    let mut store = FjallStore::open(dir.path()).unwrap();
    store.place(&[Placement::Put(a, config(), Ballot::ZERO), Placement::Put(bb, config(), Ballot::ZERO)]).unwrap();
    let ops = |tag: &[u8]| (0..5).map(|s| accept(s, 1, tag)).chain([WriteOp::Promise(b(3, 1))]).collect::<Vec<_>>();
    store.write(&[(a, ops(b"a")), (bb, ops(b"b"))]).unwrap();
    store.sync().unwrap();
    let syncs = store.stats().syncs;
    store.place(&[Placement::Remove(a)]).unwrap();
    assert_eq!(store.stats().syncs, syncs, "placement does not sync by itself");
    store.sync().unwrap();
    drop(store);

    let mut store = FjallStore::open(dir.path()).unwrap();
    let loaded = store.load().unwrap();
    assert_eq!(loaded.iter().map(|j| j.key).collect::<Vec<_>>(), vec![bb], "only the kept journal is placed");
    assert_eq!(loaded[0].durable.entries.len(), 5, "the kept journal keeps its log");
    store.place(&[Placement::Put(a, config(), Ballot::ZERO)]).unwrap();
    store.sync().unwrap();
    let again = store.load().unwrap().into_iter().find(|j| j.key == a).expect("placed again");
    assert_eq!(
        again.durable,
        paros_core::Durable::default(),
        "no promise, state or log of the removed journal is left"
    );
    // Placed once more, with the floor of the epoch its seat begins in: the promise is written
    // with the configuration, in the same change, and reads back after a reopen.
    store.place(&[Placement::Remove(a), Placement::Put(a, config(), Ballot::seat_floor(4))]).unwrap();
    store.sync().unwrap();
    drop(store);
    let store = FjallStore::open(dir.path()).unwrap();
    let back = store.load().unwrap().into_iter().find(|j| j.key == a).expect("placed with a floor");
    assert_eq!(back.durable.promise, Ballot::seat_floor(4));
    assert_eq!(store.load_journal(&a).unwrap().map(|d| d.promise), Some(Ballot::seat_floor(4)), "a wake reads it too");
}

/// A generation whose tables exist but whose rows never became durable (a crash between an
/// ingestion and its rows) is dropped at the next open, and nothing else is.
#[test]
fn tables_of_a_generation_without_rows_are_dropped_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let a = jk(1, 1);
    let before = {
        let mut store = FjallStore::open(dir.path()).unwrap();
        store.place(&[Placement::Put(a, config(), Ballot::ZERO)]).unwrap();
        apply_all(&mut store, &[vec![(a, vec![accept(0, 1, b"kept"), accept(1, 1, b"too")])]]);
        store.settle().unwrap();
        loaded(&store)
    };
    let orphan = |key: &[u8]| key.len() == 32 && key[..8] == 1000u64.to_be_bytes();
    {
        let db = fjall::Database::builder(dir.path()).open().unwrap();
        let records = db.keyspace("records", fjall::KeyspaceCreateOptions::default).unwrap();
        let mut ingestion = records.start_ingestion().unwrap();
        for slot in 0..3u64 {
            let mut key = 1000u64.to_be_bytes().to_vec();
            key.extend_from_slice(&[0u8; 16]);
            key.extend_from_slice(&slot.to_be_bytes());
            ingestion.write(key, b"left over".to_vec()).unwrap();
        }
        ingestion.finish().unwrap();
        assert_eq!(records.iter().map(|k| k.key().unwrap()).filter(|k| orphan(k)).count(), 3);
    }
    let store = FjallStore::open(dir.path()).unwrap();
    assert_eq!(loaded(&store), before);
    drop(store);
    let db = fjall::Database::builder(dir.path()).open().unwrap();
    let records = db.keyspace("records", fjall::KeyspaceCreateOptions::default).unwrap();
    assert_eq!(
        records.iter().map(|k| k.key().unwrap()).filter(|k| orphan(k)).count(),
        0,
        "the leftover generation is gone"
    );
    assert!(records.iter().count() >= 2, "the journal's own generation stays");
}
