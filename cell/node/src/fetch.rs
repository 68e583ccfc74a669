//! Store reads off the node's thread. A journal asks for entries it evicted from memory — a
//! catch-up answer for a laggard peer, a read page below its in-memory window — and the host
//! hands each out as a [`FetchJob`]: a worker runs it against a [`LogRead`], and its
//! [`Fetched`] answer comes back to the host as an input of a later step
//! ([`Pump::fetched`](crate::Pump::fetched)). A round never waits for the disk: one cold read
//! stalls its own caller, not every journal on the machine.
//!
//! Catch-up answers travel this way too: a laggard's catch-up reads up to a page of entries
//! below the window, the same cold read a page does, and its answer is a message the network
//! may delay anyway. So does the wake of a dormant journal (`LogRead::load_journal`, see
//! `host::dormancy`): the inputs that woke it wait, stashed, until its state comes back.

use paros_core::{ByteBound, Durable, Fetch, JournalKey, Message, NodeId, ReadAnswer, ReadId, Slot, Tunables};

use crate::ports::{Envelope, LogRead, StoreError};

/// Store reads a host hands out at once, at most, by default (`Host::set_fetches_max`): jobs
/// queued for the workers or being read, wakes of dormant journals included.
pub const FETCHES_MAX: usize = 64;

/// One store read a journal asked for, to run on a worker (never on the node's thread).
#[derive(Debug)]
#[must_use = "a fetch job must be run or refused, and its answer handed back"]
pub struct FetchJob {
    key: JournalKey,
    me: NodeId,
    read: Read,
    tunables: Tunables,
}

/// What a [`FetchJob`] reads.
#[derive(Debug)]
enum Read {
    /// Entries a journal evicted from memory (a catch-up answer, a read page).
    Fetch(Fetch),
    /// Everything a dormant journal wakes with, for its wake numbered so.
    Wake(u64),
}

/// What a [`FetchJob`] found, handed back to its host.
#[derive(Debug)]
#[must_use = "a fetched answer must be handed back to its host"]
pub struct Fetched {
    pub(crate) key: JournalKey,
    pub(crate) answer: FetchedAnswer,
    /// Entries read from the store.
    pub(crate) entries: u64,
    /// The store failed to read.
    pub(crate) failed: bool,
    /// Not read at all: no worker had room.
    pub(crate) refused: bool,
}

/// The answer a fetch produced.
#[derive(Debug)]
pub(crate) enum FetchedAnswer {
    /// A catch-up answer for a peer (`None`: nothing to send; the laggard asks again).
    CatchUp(Option<(NodeId, Envelope)>),
    /// A read page for read `ReadId` of the journal.
    Page(ReadId, ReadAnswer),
    /// The state the dormant journal wakes with, for its wake numbered so (`None`: not read,
    /// because the store failed or the job was refused).
    Woken(u64, Option<Box<Durable>>),
}

impl FetchJob {
    pub(crate) fn new(key: JournalKey, me: NodeId, fetch: Fetch, tunables: Tunables) -> FetchJob {
        FetchJob { key, me, read: Read::Fetch(fetch), tunables }
    }

    /// The wake numbered `wake` of dormant journal `key`: what boot would read for it.
    pub(crate) fn wake(key: JournalKey, me: NodeId, wake: u64, tunables: Tunables) -> FetchJob {
        FetchJob { key, me, read: Read::Wake(wake), tunables }
    }

    /// The journal whose entries this job reads.
    #[must_use]
    pub fn key(&self) -> JournalKey {
        self.key
    }

    /// True for a read page (a caller waits on it), false for a catch-up answer or a wake.
    #[must_use]
    pub fn is_page(&self) -> bool {
        matches!(self.read, Read::Fetch(Fetch::Page { .. }))
    }

    /// True for the wake of a dormant journal (the inputs that woke it wait on it).
    #[must_use]
    pub fn is_wake(&self) -> bool {
        matches!(self.read, Read::Wake(_))
    }

    /// Runs the read against `reader`. A catch-up whose entries are gone (truncated meanwhile)
    /// or unreadable yields nothing to send (the laggard asks again); such a page is answered
    /// `Unserved`; such a wake leaves the journal dormant, and what was asked of it is refused.
    pub fn run(self, reader: &dyn LogRead) -> Fetched {
        let FetchJob { key, me, read, tunables } = self;
        let fetch = match read {
            Read::Fetch(fetch) => fetch,
            Read::Wake(wake) => {
                let loaded = reader.load_journal(&key);
                let failed = loaded.is_err();
                let durable = loaded.ok().map(|d| Box::new(d.unwrap_or_default()));
                return Fetched {
                    key,
                    answer: FetchedAnswer::Woken(wake, durable),
                    entries: 0,
                    failed,
                    refused: false,
                };
            }
        };
        match fetch {
            Fetch::CatchUp { to, life, from, end, chosen_up_to, slots_max, bytes_max } => {
                let want = slots_max.min(u32::try_from(end.0.saturating_sub(from.0)).unwrap_or(u32::MAX));
                let Ok((entries, read_len)) = catch_up_entries(reader, &key, (from, end), want, bytes_max) else {
                    return Fetched {
                        key,
                        answer: FetchedAnswer::CatchUp(None),
                        entries: 0,
                        failed: true,
                        refused: false,
                    };
                };
                let send = (!entries.is_empty()).then(|| {
                    let message = Message::CatchUpResponse { entries, chosen_up_to, life };
                    (to, Envelope { journal: key, from: me, message })
                });
                Fetched { key, answer: FetchedAnswer::CatchUp(send), entries: read_len, failed: false, refused: false }
            }
            Fetch::Page { read, page } => {
                let mut entries = 0u64;
                let built = page.build(&tunables, |from, n| {
                    let got = reader.read_range(&key, from, n)?;
                    entries += got.len() as u64;
                    Ok::<_, StoreError>(got)
                });
                let failed = built.is_err();
                let answer = built.unwrap_or_else(|_| page.unserved());
                Fetched { key, answer: FetchedAnswer::Page(read, answer), entries, failed, refused: false }
            }
        }
    }

    /// The answer when no worker has room: a page is answered `Unserved` (the caller retries),
    /// a catch-up sends nothing (the laggard asks again), a wake is asked again later (its
    /// stashed inputs wait). Never blocks, never drops silently: the host counts a refused
    /// page or catch-up ([`HostStats::fetches_refused`](crate::HostStats::fetches_refused)).
    pub fn refuse(self) -> Fetched {
        let answer = match self.read {
            Read::Fetch(Fetch::CatchUp { .. }) => FetchedAnswer::CatchUp(None),
            Read::Fetch(Fetch::Page { read, page }) => FetchedAnswer::Page(read, page.unserved()),
            Read::Wake(wake) => FetchedAnswer::Woken(wake, None),
        };
        Fetched { key: self.key, answer, entries: 0, failed: false, refused: true }
    }
}

impl Fetched {
    /// The journal the answer is for.
    #[must_use]
    pub fn key(&self) -> JournalKey {
        self.key
    }

    /// True when the job was refused (no worker had room) rather than run.
    #[must_use]
    pub fn was_refused(&self) -> bool {
        self.refused
    }
}

/// Slots read from the store at a time for a catch-up answer, at most: its byte bound is
/// checked between reads, so a journal of large records is not read a whole `slots_max` at once.
const CATCH_UP_READ_SLOTS: u32 = 16;

/// The chosen entries of `key` from `range.0` on, contiguous and below `range.1`: at most
/// `want` slots and, past the first, `bytes_max` record bytes (see [`ByteBound`]); and the
/// entries read from the store.
///
/// The first read takes one slot; each next one as many as the bytes left would hold at the
/// mean size of the slots admitted so far (one more, to find the bound), at most
/// [`CATCH_UP_READ_SLOTS`]. A fixed chunk read sixteen slots of a journal of large records to
/// answer with one (the 256 MiB move benchmark: 768 KiB slots against a 512 KiB bound, about
/// 4 GiB read from the source's store to move 256 MiB).
fn catch_up_entries<R: LogRead + ?Sized>(
    reader: &R,
    key: &JournalKey,
    (from, end): (Slot, Slot),
    want: u32,
    bytes_max: u32,
) -> Result<(Vec<(Slot, paros_core::journal::Command)>, u64), StoreError> {
    let mut bound = ByteBound::new(bytes_max);
    let mut entries = Vec::new();
    let (mut read_len, mut admitted_bytes) = (0u64, 0u64);
    let mut next = from;
    let mut chunk = 1u32;
    while next < end && (entries.len() as u32) < want {
        let read = reader.read_range(key, next, chunk.min(want - entries.len() as u32))?;
        read_len += read.len() as u64;
        let before = entries.len();
        for (slot, e) in read {
            if slot != next || slot >= end || !bound.admits(&e.command) {
                return Ok((entries, read_len));
            }
            admitted_bytes += e.command.record_bytes();
            entries.push((slot, e.command));
            next = Slot(next.0 + 1);
        }
        if entries.len() == before {
            break;
        }
        let mean = (admitted_bytes / entries.len() as u64).max(1);
        let fits = u64::from(bytes_max).saturating_sub(admitted_bytes) / mean + 1;
        chunk = u32::try_from(fits).unwrap_or(u32::MAX).clamp(1, CATCH_UP_READ_SLOTS);
    }
    Ok((entries, read_len))
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use bytes::Bytes;
    use paros_core::journal::{Command, Entry};
    use paros_core::{JournalId, LeaderUuid, LogEntry, Seq, TenantId};

    use super::*;

    /// A journal of `slots` slots of `bytes` record bytes each, counting the entries read.
    struct Slots {
        slots: u64,
        bytes: usize,
        read: Cell<u64>,
    }

    impl LogRead for Slots {
        fn read_range(&self, _: &JournalKey, from: Slot, slots_max: u32) -> Result<Vec<(Slot, LogEntry)>, StoreError> {
            let out: Vec<(Slot, LogEntry)> = (from.0..self.slots.min(from.0 + u64::from(slots_max)))
                .map(|s| {
                    let records = vec![Bytes::from(vec![0u8; self.bytes])];
                    let command = Command::Write(Entry { leader: LeaderUuid::new(1), seq: Seq(s), records });
                    (Slot(s), LogEntry { ballot: None, command })
                })
                .collect();
            self.read.set(self.read.get() + out.len() as u64);
            Ok(out)
        }

        fn load_journal(&self, _: &JournalKey) -> Result<Option<paros_core::Durable>, StoreError> {
            Ok(None)
        }
    }

    fn key() -> JournalKey {
        JournalKey { tenant: TenantId(1), journal: JournalId(1) }
    }

    #[test]
    fn a_catch_up_of_large_slots_reads_little_more_than_it_answers() {
        let store = Slots { slots: 1_000, bytes: 768 << 10, read: Cell::new(0) };
        let (entries, read) = catch_up_entries(&store, &key(), (Slot(0), Slot(1_000)), 256, 512 << 10).unwrap();
        assert_eq!(entries.len(), 1, "the first slot always goes, the second is past the bound");
        assert!(read <= 2, "read {read} slots to answer with one");
        let store = Slots { slots: 1_000, bytes: 100 << 10, read: Cell::new(0) };
        let (entries, read) = catch_up_entries(&store, &key(), (Slot(0), Slot(1_000)), 256, 512 << 10).unwrap();
        assert_eq!(entries.len(), 5, "five slots of 100 KiB fit 512 KiB");
        assert!(read <= 7, "read {read} slots to answer with five");
    }

    #[test]
    fn a_catch_up_of_small_slots_reads_in_chunks_up_to_want() {
        let store = Slots { slots: 1_000, bytes: 100, read: Cell::new(0) };
        let (entries, read) = catch_up_entries(&store, &key(), (Slot(10), Slot(1_000)), 256, 512 << 10).unwrap();
        assert_eq!(entries.len(), 256, "slots_max slots of 100 bytes");
        assert_eq!(entries.first().map(|e| e.0), Some(Slot(10)));
        assert_eq!(entries.last().map(|e| e.0), Some(Slot(265)), "contiguous from `from`");
        assert_eq!(read, 256, "nothing read past want");
        let (entries, _) = catch_up_entries(&store, &key(), (Slot(990), Slot(995)), 256, 512 << 10).unwrap();
        assert_eq!(entries.len(), 5, "nothing at or past `end`");
    }
}
