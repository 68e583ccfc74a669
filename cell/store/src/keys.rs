//! Hand-encoded, big-endian keys. Every id is fixed width (8 bytes), so one journal's keys can
//! never be a prefix of another journal's keys, and byte order equals numeric order.

use paros_core::{JournalId, JournalKey, Slot, TenantId};

/// `tenant ‖ journal`: the key of `promise` and `state`, and the prefix of `log`.
pub(crate) const JOURNAL_LEN: usize = 16;
/// `tenant ‖ journal ‖ slot`: the key of `log`.
pub(crate) const LOG_LEN: usize = 24;

/// The `meta` key of the format marker.
pub(crate) const META_FORMAT: &[u8] = b"format";
/// The `meta` key of the machine identity.
pub(crate) const META_IDENTITY: &[u8] = b"identity";
/// The `meta` key of the store's incarnation (`u64` big-endian, raw).
pub(crate) const META_INCARNATION: &[u8] = b"incarnation";
/// The `meta` key the reclaimer writes after dropping tables (see `reclaim`).
pub(crate) const META_RECLAIMED: &[u8] = b"reclaimed";
/// The `meta` key prefix of journal configs: `config/ ‖ tenant ‖ journal`.
pub(crate) const META_CONFIG: &[u8] = b"config/";

pub(crate) fn journal(key: JournalKey) -> [u8; JOURNAL_LEN] {
    let mut out = [0u8; JOURNAL_LEN];
    out[..8].copy_from_slice(&key.tenant.0.to_be_bytes());
    out[8..].copy_from_slice(&key.journal.0.to_be_bytes());
    out
}

pub(crate) fn log(key: JournalKey, slot: Slot) -> [u8; LOG_LEN] {
    log_at(&journal(key), slot.0)
}

/// The `log` key of `slot` in the journal whose key prefix is `journal`.
pub(crate) fn log_at(journal: &[u8; JOURNAL_LEN], slot: u64) -> [u8; LOG_LEN] {
    let mut out = [0u8; LOG_LEN];
    out[..JOURNAL_LEN].copy_from_slice(journal);
    out[JOURNAL_LEN..].copy_from_slice(&slot.to_be_bytes());
    out
}

pub(crate) fn config(key: JournalKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(META_CONFIG.len() + JOURNAL_LEN);
    out.extend_from_slice(META_CONFIG);
    out.extend_from_slice(&journal(key));
    out
}

/// The bounds of every `meta` config key.
pub(crate) fn config_bounds() -> (Vec<u8>, Vec<u8>) {
    let mut hi = META_CONFIG.to_vec();
    hi.extend_from_slice(&[0xff; JOURNAL_LEN]);
    (META_CONFIG.to_vec(), hi)
}

/// The big-endian `u64` at `at`, if `bytes` holds one there.
pub(crate) fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    let raw: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_be_bytes(raw))
}

/// The journal a `promise` or `state` key names; `None` if the key is malformed.
pub(crate) fn decode_journal(bytes: &[u8]) -> Option<JournalKey> {
    if bytes.len() != JOURNAL_LEN {
        return None;
    }
    Some(JournalKey { tenant: TenantId(u64_at(bytes, 0)?), journal: JournalId(u64_at(bytes, 8)?) })
}

/// The slot a `log` key names; `None` if the key is malformed.
pub(crate) fn decode_slot(bytes: &[u8]) -> Option<Slot> {
    if bytes.len() != LOG_LEN {
        return None;
    }
    u64_at(bytes, JOURNAL_LEN).map(Slot)
}

/// The journal prefix and the slot of a `log` key; `None` if the key is malformed.
pub(crate) fn split_log(bytes: &[u8]) -> Option<([u8; JOURNAL_LEN], u64)> {
    if bytes.len() != LOG_LEN {
        return None;
    }
    Some((bytes[..JOURNAL_LEN].try_into().ok()?, u64_at(bytes, JOURNAL_LEN)?))
}

/// The journal a `meta` config key names; `None` if the key is malformed.
pub(crate) fn decode_config(bytes: &[u8]) -> Option<JournalKey> {
    decode_journal(bytes.strip_prefix(META_CONFIG)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_sort_numerically() {
        let a = JournalKey { tenant: TenantId(1), journal: JournalId(0x0102) };
        let b = JournalKey { tenant: TenantId(1), journal: JournalId(0x0102_0000) };
        assert_eq!(decode_journal(&journal(a)), Some(a));
        assert_eq!(decode_config(&config(b)), Some(b));
        assert_eq!(decode_slot(&log(a, Slot(7))), Some(Slot(7)));
        assert_eq!(split_log(&log(a, Slot(7))), Some((journal(a), 7)));
        assert_eq!(split_log(&journal(a)), None, "a journal key is not a log key");
        assert!(log(a, Slot(u64::MAX)) < log(b, Slot(0)));
        assert!(log(a, Slot(255)) < log(a, Slot(256)));
        assert!(!log(b, Slot(0)).starts_with(&journal(a)));
    }
}
