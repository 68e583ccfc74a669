//! A store that cannot do what it is asked says why, one reason per error, with the engine's
//! or the decoder's own error as its source.

use std::error::Error as _;

use paros_node::ports::{LogDamage, StoreError};
use paros_store::{FjallStore, JOURNAL_BYTES_MAX, StoreOptions};

/// Writes `value` under `key` in `keyspace` of the (closed) store in `dir`, as a plain fjall
/// handle would, and makes it durable.
fn poke(dir: &std::path::Path, keyspace: &str, key: &[u8], value: &[u8]) {
    let db = fjall::Database::builder(dir).open().unwrap();
    let ks = db.keyspace(keyspace, fjall::KeyspaceCreateOptions::default).unwrap();
    ks.insert(key, value).unwrap();
    db.persist(fjall::PersistMode::SyncData).unwrap();
}

#[test]
fn a_state_row_that_does_not_decode_is_corrupt_under_its_key_with_the_decoders_error() {
    let dir = tempfile::tempdir().unwrap();
    drop(FjallStore::open(dir.path()).unwrap());
    let key = [7u8; 16];
    // A varint that never ends: no state row decodes from it.
    poke(dir.path(), "state", &key, &[0xff, 0xff, 0xff]);
    match FjallStore::open(dir.path()) {
        Err(e @ StoreError::Corrupt { what: "state row", .. }) => {
            let StoreError::Corrupt { key: found, .. } = &e else { unreachable!() };
            assert_eq!(found.as_slice(), key.as_slice(), "the error names the key");
            let source = e.source().expect("the decoder's error is the source");
            assert!(source.downcast_ref::<postcard::Error>().is_some(), "a postcard error, got {source:?}");
            assert!(e.to_string().ends_with(&format!(": {source}")), "the message says why: {e}");
        }
        other => panic!("expected a corrupt state row, got {other:?}"),
    }
}

#[test]
fn a_state_key_that_names_no_journal_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    drop(FjallStore::open(dir.path()).unwrap());
    poke(dir.path(), "state", b"short", &[0]);
    match FjallStore::open(dir.path()) {
        Err(StoreError::Corrupt { what, key, source }) => {
            assert_eq!((what, key.as_slice()), ("state key", b"short".as_slice()));
            assert!(source.is_none(), "a key that does not parse has no decoder error");
            let message = StoreError::Corrupt { what, key, source }.to_string();
            assert!(message.ends_with("is corrupt"), "nothing follows when there is no cause: {message}");
        }
        other => panic!("expected a corrupt state key, got {other:?}"),
    }
}

#[test]
fn a_stray_file_in_the_log_directory_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    drop(FjallStore::open(dir.path()).unwrap());
    let stray = dir.path().join("wal").join("notes.txt");
    std::fs::write(&stray, b"not a segment").unwrap();
    match FjallStore::open(dir.path()) {
        Err(StoreError::CorruptLog { path, damage: LogDamage::Stray }) => assert_eq!(path, stray),
        other => panic!("expected a stray file in the log, got {other:?}"),
    }
}

#[test]
fn a_journal_bound_below_the_engines_minimum_is_refused_before_anything_is_opened() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions { journal_bytes_max: JOURNAL_BYTES_MAX - 1, ..StoreOptions::default() };
    match FjallStore::open_with(dir.path(), opts) {
        Err(StoreError::OptionTooSmall { option, value, min }) => {
            assert_eq!((option, value, min), ("journal_bytes_max", JOURNAL_BYTES_MAX - 1, JOURNAL_BYTES_MAX));
        }
        other => panic!("expected the option to be refused, got {other:?}"),
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing was created");
}
