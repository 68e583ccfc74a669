//! The store's own write-ahead log: the round's durability, ahead of fjall.
//!
//! A round's changes are appended to a segment file and made durable by one fdatasync; fjall
//! takes them later, on the applier's thread ([`crate::apply`]), so a flush or compaction that
//! holds fjall's version lock (docs/storage.md §3) stalls the applier, never the round.
//!
//! # Format
//!
//! `wal/<20-digit segment number>.wal`, numbered from 1 and never reused within one open. A
//! segment starts with a 16-byte header, [`MAGIC`] ‖ the segment's salt (`u64` LE, drawn anew
//! each time a file becomes a segment), then a run of records:
//!
//! | field | bytes |
//! |---|---|
//! | body length | `u32` little-endian; 0 only in the seal |
//! | CRC-32C of salt (8 bytes LE) ‖ body | `u32` little-endian |
//! | body | changes, each `space: u8 ‖ key length: u16 LE ‖ key ‖ change` |
//!
//! where `change` is `0` (a removal) or `1 ‖ value length: u32 LE ‖ value`.
//!
//! A segment closes with a seal, a header of length 0 whose checksum is that of salt ‖
//! [`SEAL`], written and synced with its last record. Replay stops at the first header that is
//! no whole record of this salt: the seal, zeros, a record cut short by a crash, or what a
//! file's earlier use as another segment left there (its records carry another salt). Only the
//! newest segment may end without its seal (a crash mid-write): replay stops there. A closed
//! segment without one is corruption, and opening fails.
//!
//! # Recycling
//!
//! A segment whose rounds fjall holds durably is not deleted but kept as a spare
//! (`wal/<its number>.spare`, at most [`Spares::max`] of them), and the next segment is made
//! from a spare when there is one. A spare's blocks are allocated and written, so a round's
//! fdatasync into it writes data only; appending into a new file's unwritten blocks also
//! commits the filesystem's block allocation at every sync (measured in docs/storage.md §3:
//! the round's sync p50 falls by about a third). A spare gets its new header, synced, before
//! it is renamed into place; a retired segment's rename is synced before it can be reused, so a
//! crash never shows a reused file under its old number.
//!
//! Segments of format 3 stores have no header: their checksum is of the body alone, zeros
//! end them, and a run that ends otherwise in a closed one is corruption. Replay reads both.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use paros_node::ports::{LogDamage, StoreError, StoreOp};

use crate::error::file;
use crate::spaces::Space;

/// The directory, under the store's own, that holds the segments.
pub(crate) const DIR: &str = "wal";

const HEADER: usize = 8;

/// The first bytes of a segment with a salt (format 4 on).
const MAGIC: [u8; 8] = *b"parosWAL";
/// A segment's header: [`MAGIC`] ‖ salt.
const SEGMENT_HEADER: usize = 16;
/// What a seal's checksum covers after the salt.
const SEAL: &[u8] = b"sealed";

/// A new segment's size on disk before anything is written to it (its zeros read as its end).
const PREALLOCATED_BYTES_MAX: u64 = 64 << 20;

/// One change of a round: `key` of `space` set to `value`, or removed (`None`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct Change {
    pub(crate) space: Space,
    pub(crate) key: Vec<u8>,
    pub(crate) value: Option<Vec<u8>>,
}

fn space_code(space: Space) -> u8 {
    match space {
        Space::Promise => 0,
        Space::Log => 1,
        Space::State => 2,
        Space::Anchor => 3,
        Space::Meta => 4,
        Space::Gens => 5,
    }
}

fn space_of(code: u8) -> Option<Space> {
    Some(match code {
        0 => Space::Promise,
        1 => Space::Log,
        2 => Space::State,
        3 => Space::Anchor,
        4 => Space::Meta,
        5 => Space::Gens,
        _ => return None,
    })
}

/// Segments end in `.wal`, spares in `.spare`.
const SEGMENT: &str = "wal";
const SPARE: &str = "spare";

/// The file numbered `n` of kind `ext` in `dir`.
fn numbered_path(dir: &Path, n: u64, ext: &str) -> PathBuf {
    dir.join(format!("{n:020}.{ext}"))
}

/// The number of a file named `<20 digits>.{ext}`.
fn number_of(path: &Path, ext: &str) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let digits = name.strip_suffix(ext)?.strip_suffix('.')?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok()).flatten()
}

fn segment_path(dir: &Path, n: u64) -> PathBuf {
    numbered_path(dir, n, SEGMENT)
}

pub(crate) fn segment_number(path: &Path) -> Option<u64> {
    number_of(path, SEGMENT)
}

/// The spares in `dir`, oldest first.
fn spares(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if let Some(n) = number_of(&path, SPARE) {
            out.push((n, path));
        }
    }
    out.sort();
    Ok(out.into_iter().map(|(_, p)| p).collect())
}

/// How many retired segments a write-ahead log keeps to reuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Spares {
    pub(crate) max: usize,
}

impl Spares {
    /// Retires a segment whose rounds fjall holds durably: kept as a spare while fewer than
    /// [`Spares::max`] are kept, else removed. Two threads retiring at once may keep one more.
    ///
    /// # Errors
    /// The rename's, the removal's or the directory sync's.
    pub(crate) fn retire(self, segment: &Path) -> io::Result<()> {
        let dir = segment.parent().unwrap_or_else(|| Path::new("."));
        match segment_number(segment) {
            Some(n) if spares(dir)?.len() < self.max => {
                fs::rename(segment, numbered_path(dir, n, SPARE))?;
                // Durable before the spare can be reused (see the module docs).
                sync_dir(dir)
            }
            _ => fs::remove_file(segment),
        }
    }
}

/// The segments in `dir`, oldest first.
fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, StoreError> {
    let mut out = Vec::new();
    let err = file(StoreOp::Read, dir);
    for entry in fs::read_dir(dir).map_err(err)? {
        let path = entry.map_err(err)?.path();
        if number_of(&path, SPARE).is_some() {
            continue;
        }
        match segment_number(&path) {
            Some(n) => out.push((n, path)),
            None => return Err(StoreError::CorruptLog { path, damage: LogDamage::Stray }),
        }
    }
    out.sort();
    Ok(out)
}

/// The checksum of a record body (or the seal) in a segment salted `salt`.
fn salted_crc(salt: u64, bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&salt.to_le_bytes()), bytes)
}

/// The seal that closes a segment salted `salt`.
fn seal(salt: u64) -> [u8; HEADER] {
    let mut out = [0; HEADER];
    out[4..].copy_from_slice(&salted_crc(salt, SEAL).to_le_bytes());
    out
}

/// A segment's header for `salt`.
fn segment_header(salt: u64) -> [u8; SEGMENT_HEADER] {
    let mut out = [0; SEGMENT_HEADER];
    out[..8].copy_from_slice(&MAGIC);
    out[8..].copy_from_slice(&salt.to_le_bytes());
    out
}

/// A salt not drawn before, as far as chance allows: the standard library's randomly keyed
/// hasher over the segment number and the time.
fn draw_salt(segment: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(segment);
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.finish()
}

/// Encodes `changes` as one record of a segment salted `salt` at the end of `out`.
///
/// # Errors
/// [`StoreError::TooLarge`] for a key longer than 65,535 bytes, a value longer than 4 GiB, or
/// a record whose body would be.
pub(crate) fn encode_record(changes: &[Change], salt: u64, out: &mut Vec<u8>) -> Result<(), StoreError> {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER]);
    for c in changes {
        let key_len = u16::try_from(c.key.len()).map_err(|_| too_large("a key", c.key.len(), u16::MAX.into()))?;
        out.push(space_code(c.space));
        out.extend_from_slice(&key_len.to_le_bytes());
        out.extend_from_slice(&c.key);
        match &c.value {
            None => out.push(0),
            Some(v) => {
                let len = u32::try_from(v.len()).map_err(|_| too_large("a value", v.len(), u32::MAX.into()))?;
                out.push(1);
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(v);
            }
        }
    }
    let body = out.len() - start - HEADER;
    let Ok(len) = u32::try_from(body) else {
        out.truncate(start);
        return Err(too_large("a round", body, u32::MAX.into()));
    };
    let crc = salted_crc(salt, &out[start + HEADER..]);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + HEADER].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

fn too_large(what: &'static str, bytes: usize, bytes_max: u64) -> StoreError {
    StoreError::TooLarge { what, bytes, bytes_max }
}

/// A cursor over a record body.
struct Body<'a>(&'a [u8]);

impl<'a> Body<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn change(&mut self) -> Option<Change> {
        let space = space_of(self.byte()?)?;
        let key_len = u16::from_le_bytes(self.take(2)?.try_into().ok()?);
        let key = self.take(usize::from(key_len))?.to_vec();
        let value = match self.byte()? {
            0 => None,
            1 => {
                let len = u32::from_le_bytes(self.take(4)?.try_into().ok()?);
                Some(self.take(usize::try_from(len).ok()?)?.to_vec())
            }
            _ => return None,
        };
        Some(Change { space, key, value })
    }
}

/// What one segment's bytes hold: its whole records, and whether it ends as a closed segment
/// must.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub(crate) records: Vec<Vec<Change>>,
    /// The segment ends cleanly: with its seal, or (a segment without a salt) with zeros only
    /// after its last record.
    pub(crate) complete: bool,
}

/// Parses a segment. A record whose checksum holds but whose body does not parse is
/// corruption, not a torn write.
///
/// # Errors
/// [`LogDamage::Record`] for such a record.
pub(crate) fn parse(data: &[u8]) -> Result<Parsed, LogDamage> {
    match data.get(..SEGMENT_HEADER) {
        Some(head) if head[..8] == MAGIC => {
            let salt = u64::from_le_bytes(head[8..].try_into().expect("8 bytes"));
            parse_records(data, SEGMENT_HEADER, Some(salt))
        }
        _ => parse_records(data, 0, None),
    }
}

/// Parses the records from `at` on: salted by `salt`, or (`None`) a format 3 segment's.
fn parse_records(data: &[u8], mut at: usize, salt: Option<u64>) -> Result<Parsed, LogDamage> {
    let mut records = Vec::new();
    while let Some(header) = data.get(at..at + HEADER) {
        let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
        if len == 0 {
            let complete = match salt {
                Some(salt) => header == seal(salt),
                // The preallocated end of a segment, unless something other than zeros follows.
                None => crc == 0 && data[at..].iter().all(|b| *b == 0),
            };
            return Ok(Parsed { records, complete });
        }
        let Some(body) = data.get(at + HEADER..(at + HEADER).saturating_add(len)) else { break };
        let expected = match salt {
            Some(salt) => salted_crc(salt, body),
            None => crc32c::crc32c(body),
        };
        if crc != expected {
            break;
        }
        let mut cursor = Body(body);
        let mut changes = Vec::new();
        while !cursor.0.is_empty() {
            changes.push(cursor.change().ok_or(LogDamage::Record { offset: at })?);
        }
        records.push(changes);
        at += HEADER + len;
    }
    // A format 3 segment written to its very end is complete too.
    Ok(Parsed { records, complete: salt.is_none() && at == data.len() })
}

/// Reads every segment in `dir`, oldest first, handing each whole record to `apply`; returns
/// the segments read. Only the newest may end torn.
///
/// # Errors
/// [`StoreError::File`] when a segment cannot be read, [`StoreError::CorruptLog`] when one is
/// corrupt; what `apply` returns.
pub(crate) fn replay(
    dir: &Path,
    mut apply: impl FnMut(Vec<Change>) -> Result<(), StoreError>,
) -> Result<Vec<PathBuf>, StoreError> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let found = segments(dir)?;
    let last = found.len().saturating_sub(1);
    let mut read = Vec::with_capacity(found.len());
    for (i, (_, path)) in found.into_iter().enumerate() {
        let data = fs::read(&path).map_err(file(StoreOp::Read, &path))?;
        let parsed = parse(&data).map_err(|damage| StoreError::CorruptLog { path: path.clone(), damage })?;
        if !parsed.complete && i != last {
            return Err(StoreError::CorruptLog { path, damage: LogDamage::Unsealed });
        }
        for record in parsed.records {
            apply(record)?;
        }
        read.push(path);
    }
    Ok(read)
}

/// The segment being appended to.
pub(crate) struct Wal {
    dir: PathBuf,
    file: File,
    segment: u64,
    /// The current segment's salt.
    salt: u64,
    /// Bytes written to the current segment.
    written: u64,
    /// Records appended since the last sync, not yet written to the file.
    buf: Vec<u8>,
    segment_bytes_max: u64,
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

impl Wal {
    /// Starts segment `first` in `dir` (created if missing; it holds no segment numbered
    /// `first` or above) from a spare if there is one, else in a new file, and makes its
    /// existence durable.
    ///
    /// # Errors
    /// [`StoreError::File`] when the directory or the segment cannot be created.
    pub(crate) fn create(dir: &Path, first: u64, segment_bytes_max: u64) -> Result<Wal, StoreError> {
        fs::create_dir_all(dir).map_err(file(StoreOp::Write, dir))?;
        let salt = draw_salt(first);
        let path = segment_path(dir, first);
        let err = file(StoreOp::Write, &path);
        // The oldest spare: the one retired at a close may be barely written.
        let file = match spares(dir).map_err(err)?.into_iter().next() {
            Some(spare) => {
                let file = OpenOptions::new().write(true).open(&spare).map_err(err)?;
                // Its new salt before its new name: a crash leaves either a spare or an empty
                // segment, never another segment's records under this number.
                file.write_all_at(&segment_header(salt), 0).map_err(err)?;
                file.sync_data().map_err(err)?;
                fs::rename(&spare, &path).map_err(err)?;
                file
            }
            None => {
                let file = OpenOptions::new().create_new(true).write(true).open(&path).map_err(err)?;
                // Preallocated, like fjall's journal, so an fdatasync need not record a new
                // file size (its blocks are still unwritten: see "Recycling" above).
                file.set_len(segment_bytes_max.min(PREALLOCATED_BYTES_MAX)).map_err(err)?;
                file.write_all_at(&segment_header(salt), 0).map_err(err)?;
                file.sync_all().map_err(err)?;
                file
            }
        };
        sync_dir(dir).map_err(err)?;
        if let Some(parent) = dir.parent() {
            sync_dir(parent).map_err(err)?;
        }
        Ok(Wal {
            dir: dir.to_path_buf(),
            file,
            segment: first,
            salt,
            written: SEGMENT_HEADER as u64,
            buf: Vec::new(),
            segment_bytes_max,
        })
    }

    /// The segment being appended to.
    #[cfg(test)]
    pub(crate) fn segment(&self) -> u64 {
        self.segment
    }

    /// Appends one record of `changes` (kept in memory until [`Wal::sync`]).
    ///
    /// # Errors
    /// As [`encode_record`].
    pub(crate) fn append(&mut self, changes: &[Change]) -> Result<(), StoreError> {
        encode_record(changes, self.salt, &mut self.buf)
    }

    /// Retires the current segment (every round in it is durable in fjall).
    ///
    /// # Errors
    /// As [`Spares::retire`].
    pub(crate) fn retire_current(&self, spares: Spares) -> io::Result<()> {
        spares.retire(&segment_path(&self.dir, self.segment))
    }

    /// Whether records were appended since the last sync.
    pub(crate) fn has_unsynced(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Writes the appended records and fdatasyncs them. When the segment has grown past its
    /// bound, seals it in the same write, starts the next one and returns the closed
    /// segment's path.
    ///
    /// # Errors
    /// [`StoreError::File`] when the write, the sync or the next segment fails.
    pub(crate) fn sync(&mut self) -> Result<Option<PathBuf>, StoreError> {
        let err = |source| StoreError::File { op: StoreOp::Sync, path: segment_path(&self.dir, self.segment), source };
        let closing = self.written + self.buf.len() as u64 >= self.segment_bytes_max;
        if closing {
            self.buf.extend_from_slice(&seal(self.salt));
        }
        if !self.buf.is_empty() {
            self.file.write_all_at(&self.buf, self.written).map_err(err)?;
            self.written += self.buf.len() as u64;
            self.buf.clear();
            if self.buf.capacity() > 4 << 20 {
                self.buf.shrink_to(1 << 20);
            }
        }
        self.file.sync_data().map_err(err)?;
        if !closing {
            return Ok(None);
        }
        let closed = segment_path(&self.dir, self.segment);
        let next = Wal::create(&self.dir, self.segment + 1, self.segment_bytes_max)?;
        *self = next;
        Ok(Some(closed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(space: Space, key: &[u8], value: Option<&[u8]>) -> Change {
        Change { space, key: key.to_vec(), value: value.map(<[u8]>::to_vec) }
    }

    /// A segment salted `salt` holding `records`, sealed or not.
    fn segment(salt: u64, records: &[&[Change]], sealed: bool) -> Vec<u8> {
        let mut bytes = segment_header(salt).to_vec();
        for r in records {
            encode_record(r, salt, &mut bytes).unwrap();
        }
        if sealed {
            bytes.extend_from_slice(&seal(salt));
        }
        bytes
    }

    /// A format 3 segment (no header, checksums of the body alone) of `records`.
    fn unsalted(records: &[&[Change]]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for r in records {
            let mut salted = Vec::new();
            encode_record(r, 0, &mut salted).unwrap();
            let body = &salted[HEADER..];
            bytes.extend_from_slice(&salted[..4]);
            bytes.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
            bytes.extend_from_slice(body);
        }
        bytes
    }

    #[test]
    fn records_round_trip_and_a_torn_tail_is_cut_off() {
        let a = vec![change(Space::Log, b"k1", Some(b"v1")), change(Space::State, b"k2", None)];
        let b = vec![change(Space::Meta, b"", Some(b""))];
        let bytes = segment(7, &[&a, &b], false);
        assert_eq!(
            parse(&bytes).unwrap(),
            Parsed { records: vec![a.clone(), b.clone()], complete: false },
            "no seal: not closed"
        );
        let sealed = segment(7, &[&a, &b], true);
        assert_eq!(parse(&sealed).unwrap(), Parsed { records: vec![a.clone(), b.clone()], complete: true });
        let first = segment(7, &[&a], false).len();
        for cut in SEGMENT_HEADER..bytes.len() {
            let parsed = parse(&bytes[..cut]).unwrap();
            assert!(!parsed.complete, "cut at {cut}");
            let whole = if cut >= first { vec![a.clone()] } else { vec![] };
            assert_eq!(parsed.records, whole, "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(
            parse(&flipped).unwrap(),
            Parsed { records: vec![a.clone()], complete: false },
            "a bad checksum ends the run"
        );
        let mut preallocated = segment(7, &[&a], false);
        preallocated.extend_from_slice(&[0; 64]);
        assert_eq!(
            parse(&preallocated).unwrap(),
            Parsed { records: vec![a.clone()], complete: false },
            "zeros end it, unsealed"
        );
        let mut wrong_seal = segment(7, &[&a], false);
        wrong_seal.extend_from_slice(&seal(8));
        assert!(!parse(&wrong_seal).unwrap().complete, "another segment's seal is no seal");
    }

    #[test]
    fn what_a_file_held_as_another_segment_is_not_read_as_this_ones() {
        let old: Vec<Vec<Change>> = (0u8..4).map(|i| vec![change(Space::Log, &[i], Some(&[i; 30]))]).collect();
        let old_refs: Vec<&[Change]> = old.iter().map(Vec::as_slice).collect();
        let mut file = segment(1, &old_refs, true);
        // Reused: a new header and one record written over the start of the old contents.
        let new = vec![change(Space::State, b"new", Some(b"round"))];
        let head = segment(2, &[&new], false);
        assert!(head.len() < file.len());
        file[..head.len()].copy_from_slice(&head);
        assert_eq!(
            parse(&file).unwrap(),
            Parsed { records: vec![new.clone()], complete: false },
            "the old salt's records end the run"
        );
        // Even when the new record ends exactly where an old record began.
        let old_first = segment(1, &old_refs[..1], false).len();
        let mut aligned = segment(1, &old_refs, true);
        let mut reused = segment(2, &[], false);
        // A body of space, key length, a 1-byte key, value flag, value length (9 bytes), value.
        let pad = vec![change(Space::Meta, b"p", Some(&vec![0; old_first - SEGMENT_HEADER - HEADER - 9]))];
        encode_record(&pad, 2, &mut reused).unwrap();
        assert_eq!(reused.len(), old_first, "the new record covers exactly the old first");
        aligned[..old_first].copy_from_slice(&reused);
        assert_eq!(parse(&aligned).unwrap().records, vec![pad], "the old second record is not this segment's");
    }

    #[test]
    fn format_3_segments_still_parse() {
        let a = vec![change(Space::Log, b"k1", Some(b"v1"))];
        let b = vec![change(Space::Meta, b"", Some(b""))];
        let bytes = unsalted(&[&a, &b]);
        assert_eq!(parse(&bytes).unwrap(), Parsed { records: vec![a.clone(), b.clone()], complete: true });
        let mut preallocated = bytes.clone();
        preallocated.extend_from_slice(&[0; 100]);
        assert_eq!(
            parse(&preallocated).unwrap(),
            Parsed { records: vec![a.clone(), b.clone()], complete: true },
            "zeros end it"
        );
        preallocated.push(1);
        assert!(!parse(&preallocated).unwrap().complete, "zeros then data are no clean end");
        assert_eq!(parse(&[0; 64]).unwrap(), Parsed { records: vec![], complete: true });
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(parse(&flipped).unwrap(), Parsed { records: vec![a], complete: false });
    }

    #[test]
    fn a_checksummed_record_that_does_not_parse_is_corruption() {
        let body = [9u8, 0, 0, 0];
        let mut bytes = segment_header(3).to_vec();
        bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&salted_crc(3, &body).to_le_bytes());
        bytes.extend_from_slice(&body);
        assert_eq!(parse(&bytes), Err(LogDamage::Record { offset: SEGMENT_HEADER }));
    }

    #[test]
    fn segments_close_sealed_past_their_bound_and_replay_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let wal_dir = dir.path().join(DIR);
        let mut wal = Wal::create(&wal_dir, 1, 120).unwrap();
        let mut closed = Vec::new();
        for i in 0u8..10 {
            wal.append(&[change(Space::Log, &[i], Some(&[i; 40]))]).unwrap();
            closed.extend(wal.sync().unwrap());
        }
        assert_eq!(closed.len(), 5, "a header and two 51-byte records fill a 120-byte segment");
        assert_eq!(wal.segment(), 6);
        for c in &closed {
            assert!(parse(&fs::read(c).unwrap()).unwrap().complete, "{} is sealed", c.display());
        }
        let mut seen = Vec::new();
        let read = replay(&wal_dir, |r| {
            seen.push(r[0].key[0]);
            Ok(())
        })
        .unwrap();
        assert_eq!(read.len(), 6);
        assert_eq!(seen, (0..10).collect::<Vec<u8>>());

        // A closed segment without its seal is corruption.
        let data = fs::read(&closed[0]).unwrap();
        let sealed_at = data.len() - HEADER;
        fs::write(&closed[0], &data[..sealed_at]).unwrap();
        assert!(replay(&wal_dir, |_| Ok(())).is_err());
    }

    #[test]
    fn retired_segments_are_reused_up_to_the_bound_and_their_old_rounds_never_replay() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let wal_dir = dir.path().join(DIR);
        let keep = Spares { max: 2 };
        let mut wal = Wal::create(&wal_dir, 1, 120).unwrap();
        let mut closed = Vec::new();
        for i in 0u8..6 {
            wal.append(&[change(Space::Log, &[i], Some(&[i; 40]))]).unwrap();
            closed.extend(wal.sync().unwrap());
        }
        assert_eq!(closed.len(), 3);
        let inodes: Vec<u64> = closed.iter().map(|c| fs::metadata(c).unwrap().ino()).collect();
        for c in &closed {
            keep.retire(c).unwrap();
        }
        assert_eq!(spares(&wal_dir).unwrap().len(), 2, "two kept, the third removed");
        assert_eq!(segments(&wal_dir).unwrap().len(), 1, "spares are no segments");
        // The next segments are made from the spares: the same files, old rounds in them.
        wal.append(&[change(Space::Log, &[100], Some(&[100; 40]))]).unwrap();
        wal.append(&[change(Space::Log, &[101], Some(&[101; 40]))]).unwrap();
        let fourth = wal.sync().unwrap().expect("closed");
        wal.append(&[change(Space::Log, &[102], Some(&[102; 10]))]).unwrap();
        assert!(wal.sync().unwrap().is_none());
        let current = segment_path(&wal_dir, wal.segment());
        assert!(inodes.contains(&fs::metadata(&current).unwrap().ino()), "the current segment is a reused file");
        assert!(spares(&wal_dir).unwrap().len() == 1, "one spare taken");
        let mut seen = Vec::new();
        replay(&wal_dir, |r| {
            seen.push(r[0].key[0]);
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, vec![100, 101, 102], "only this use's rounds, none of the file's earlier ones");
        keep.retire(&fourth).unwrap();
        assert_eq!(spares(&wal_dir).unwrap().len(), 2);
        let none = Spares { max: 0 };
        wal.retire_current(none).unwrap();
        assert!(segments(&wal_dir).unwrap().is_empty());
        assert_eq!(spares(&wal_dir).unwrap().len(), 2, "a bound of 0 removes");
    }
}
