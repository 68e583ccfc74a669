//! Property: random op sequences over a few journals, written in random batches with syncs,
//! read back after reopen, equal the in-memory model (`Durable::apply`): what boot loads (the
//! entries from the last anchor at or below the chosen index on) and what `read_range` reads
//! from any slot.

mod common;

use common::{config, jk, loaded, model, model_for_boot, noop, state, write};
use paros_core::{Ballot, JournalKey, NodeId, Slot, WriteOp};
use paros_node::ports::{LogRead, LogStore, Placement};
use paros_store::{FjallStore, StoreOptions};
use proptest::prelude::*;

const JOURNALS: [JournalKey; 3] = [
    JournalKey { tenant: paros_core::TenantId(1), journal: paros_core::JournalId(1) },
    JournalKey { tenant: paros_core::TenantId(1), journal: paros_core::JournalId(0x0100) },
    JournalKey { tenant: paros_core::TenantId(0x0100), journal: paros_core::JournalId(1) },
];

fn op() -> impl Strategy<Value = WriteOp> {
    let slot = 0u64..24;
    prop_oneof![
        1 => (0u64..5, 0u64..3).prop_map(|(round, node)| WriteOp::Promise(Ballot { round, node: NodeId(node) })),
        4 => (slot.clone(), 0u64..5, any::<u8>()).prop_map(|(s, round, x)| WriteOp::Accept {
            slot: Slot(s),
            ballot: Ballot { round, node: NodeId(1) },
            command: write(s, &[x]),
        }),
        2 => (slot.clone(), any::<bool>()).prop_map(|(s, w)| WriteOp::Learn {
            slot: Slot(s),
            command: if w { write(s, b"learned") } else { noop() },
        }),
        1 => slot.clone().prop_map(|s| WriteOp::Chosen { up_to: Slot(s) }),
        1 => (slot.clone(), 0u64..9).prop_map(|(s, n)| WriteOp::Truncate { floor: Slot(s), sealed: state(n, n + 1) }),
        1 => (slot.clone(), 0u64..9).prop_map(|(s, n)| WriteOp::TrimmedTo { point: Slot(s), state: state(n, n + 2) }),
        2 => (slot, 0u64..9).prop_map(|(s, n)| WriteOp::Anchor { slot: Slot(s), state: state(n, n + 3) }),
    ]
}

/// Batches of (journal index, ops) groups; a journal may appear in several groups of a batch.
fn batches() -> impl Strategy<Value = Vec<Vec<(JournalKey, Vec<WriteOp>)>>> {
    let group = (0usize..3, prop::collection::vec(op(), 0..6)).prop_map(|(j, ops)| (JOURNALS[j], ops));
    prop::collection::vec(prop::collection::vec(group, 0..4), 1..6)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_batches_reopened_equal_the_model(batches in batches(), reopen_after in 0usize..6, tuning in 0usize..3) {
        // fjall takes rounds and ingests the record buffer at its defaults; at every sync (a
        // segment of 256 bytes closes at once); or not before the store closes.
        let opts = match tuning {
            0 => StoreOptions::default(),
            1 => StoreOptions { wal_segment_bytes: 256, ..StoreOptions::default() },
            _ => StoreOptions {
                apply_interval: std::time::Duration::from_secs(3600),
                apply_bytes: u64::MAX,
                ..StoreOptions::default()
            },
        };
        let dir = tempfile::tempdir().unwrap();
        let mut store = FjallStore::open_with(dir.path(), opts).unwrap();
        for key in JOURNALS {
            store.place(&[Placement::Put(key, config(), Ballot::ZERO)]).unwrap();
        }
        let mut want = model(&[]);
        for key in JOURNALS {
            want.insert(key, Default::default());
        }
        let mut full = want.clone();
        for (i, batch) in batches.iter().enumerate() {
            if i == reopen_after {
                drop(store);
                store = FjallStore::open_with(dir.path(), opts).unwrap();
            }
            store.write(batch).unwrap();
            store.sync().unwrap();
        }
        want.extend(model_for_boot(&batches));
        full.extend(model(&batches));
        prop_assert_eq!(&loaded(&store), &want);
        let check_reads = |store: &FjallStore| -> Result<(), TestCaseError> {
            let reader = store.reader();
            for (key, durable) in &full {
                for from in 0..26u64 {
                    for n in [1u32, 3, 64] {
                        prop_assert_eq!(
                            reader.read_range(key, Slot(from), n).unwrap(),
                            durable.read_range(Slot(from), n),
                            "{:?} from {} x{}",
                            key,
                            from,
                            n
                        );
                    }
                }
            }
            Ok(())
        };
        check_reads(&store)?;
        drop(store);
        let store = FjallStore::open(dir.path()).unwrap();
        prop_assert_eq!(&loaded(&store), &want);
        check_reads(&store)?;
    }
}

#[test]
fn journal_keys_are_distinct() {
    assert_ne!(jk(1, 0x0100), jk(0x0100, 1));
}
