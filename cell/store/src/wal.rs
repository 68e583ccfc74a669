//! The store's own write-ahead log: the round's durability, ahead of fjall.
//!
//! A round's changes are appended to a segment file and made durable by one fdatasync; fjall
//! takes them later, on the applier's thread ([`crate::apply`]), so a flush or compaction that
//! holds fjall's version lock (docs/storage.md §3) stalls the applier, never the round.
//!
//! # Format
//!
//! `wal/<20-digit segment number>.wal`, numbered from 1 and never reused within one open. A
//! segment is a run of records:
//!
//! | field | bytes |
//! |---|---|
//! | body length | `u32` little-endian, never 0 |
//! | CRC-32C of the body | `u32` little-endian |
//! | body | changes, each `space: u8 ‖ key length: u16 LE ‖ key ‖ 0` (a removal) or `‖ 1 ‖ value length: u32 LE ‖ value` |
//!
//! A segment is preallocated with zeros; a zero header ends it. A segment is closed only after an fdatasync covered its last record, so only the newest
//! segment can end in a torn record (a crash mid-write): replay stops there. A bad record in
//! any other segment is corruption, and opening fails.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use paros_node::ports::StoreError;

use crate::Space;

/// The directory, under the store's own, that holds the segments.
pub(crate) const DIR: &str = "wal";

const HEADER: usize = 8;

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

fn segment_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("{n:020}.wal"))
}

pub(crate) fn segment_number(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    let digits = name.strip_suffix(".wal")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok()).flatten()
}

fn wal_err(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Read(format!("write-ahead log: {what}: {e}"))
}

/// The segments in `dir`, oldest first.
fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, StoreError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| wal_err("listing segments", e))? {
        let path = entry.map_err(|e| wal_err("listing segments", e))?.path();
        match segment_number(&path) {
            Some(n) => out.push((n, path)),
            None => return Err(wal_err("unexpected file", path.display())),
        }
    }
    out.sort();
    Ok(out)
}

/// Encodes `changes` as one record at the end of `out`.
///
/// # Errors
/// [`StoreError::Write`] for a key longer than 65,535 bytes or a value longer than 4 GiB.
pub(crate) fn encode_record(changes: &[Change], out: &mut Vec<u8>) -> Result<(), StoreError> {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER]);
    for c in changes {
        let key_len = u16::try_from(c.key.len()).map_err(|_| StoreError::Write(format!("a key of {} bytes", c.key.len())))?;
        out.push(space_code(c.space));
        out.extend_from_slice(&key_len.to_le_bytes());
        out.extend_from_slice(&c.key);
        match &c.value {
            None => out.push(0),
            Some(v) => {
                let len = u32::try_from(v.len()).map_err(|_| StoreError::Write(format!("a value of {} bytes", v.len())))?;
                out.push(1);
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(v);
            }
        }
    }
    let body = out.len() - start - HEADER;
    let Ok(len) = u32::try_from(body) else {
        out.truncate(start);
        return Err(StoreError::Write(format!("a round of {body} bytes")));
    };
    let crc = crc32c::crc32c(&out[start + HEADER..]);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + HEADER].copy_from_slice(&crc.to_le_bytes());
    Ok(())
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

/// What one segment's bytes hold: its whole records, and whether it ends in a torn one.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub(crate) records: Vec<Vec<Change>>,
    /// Bytes after the last whole record (a record cut short or failing its checksum).
    pub(crate) torn: bool,
}

/// Parses a segment. A record whose checksum holds but whose body does not parse is
/// corruption, not a torn write.
///
/// # Errors
/// [`StoreError::Read`] for such a record.
pub(crate) fn parse(data: &[u8]) -> Result<Parsed, StoreError> {
    let mut records = Vec::new();
    let mut at = 0usize;
    while let Some(header) = data.get(at..at + HEADER) {
        let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
        if len == 0 && crc == 0 {
            // The preallocated end of a segment, unless something other than zeros follows.
            let torn = data[at..].iter().any(|b| *b != 0);
            return Ok(Parsed { records, torn });
        }
        let Some(body) = data.get(at + HEADER..(at + HEADER).saturating_add(len)) else { break };
        if len == 0 || crc32c::crc32c(body) != crc {
            break;
        }
        let mut cursor = Body(body);
        let mut changes = Vec::new();
        while !cursor.0.is_empty() {
            changes.push(cursor.change().ok_or_else(|| wal_err("record", format!("malformed body at byte {at}")))?);
        }
        records.push(changes);
        at += HEADER + len;
    }
    Ok(Parsed { records, torn: at != data.len() })
}

/// Reads every segment in `dir`, oldest first, handing each whole record to `apply`; returns
/// the segments read. Only the newest may end torn.
///
/// # Errors
/// [`StoreError::Read`] when a segment cannot be read or is corrupt; what `apply` returns.
pub(crate) fn replay(dir: &Path, mut apply: impl FnMut(Vec<Change>) -> Result<(), StoreError>) -> Result<Vec<PathBuf>, StoreError> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let found = segments(dir)?;
    let last = found.len().saturating_sub(1);
    let mut read = Vec::with_capacity(found.len());
    for (i, (_, path)) in found.into_iter().enumerate() {
        let data = fs::read(&path).map_err(|e| wal_err("reading a segment", e))?;
        let parsed = parse(&data)?;
        if parsed.torn && i != last {
            return Err(wal_err("corrupt segment", path.display()));
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
    /// `first` or above), and makes its existence durable.
    ///
    /// # Errors
    /// [`StoreError::Write`] when the directory or the segment cannot be created.
    pub(crate) fn create(dir: &Path, first: u64, segment_bytes_max: u64) -> Result<Wal, StoreError> {
        let err = |e: io::Error| StoreError::Write(format!("write-ahead log: starting segment {first}: {e}"));
        fs::create_dir_all(dir).map_err(err)?;
        let file = OpenOptions::new().create_new(true).write(true).open(segment_path(dir, first)).map_err(err)?;
        // Preallocated, like fjall's journal, so an fdatasync need not record a new file size.
        file.set_len(segment_bytes_max.min(PREALLOCATED_BYTES_MAX)).map_err(err)?;
        file.sync_all().map_err(err)?;
        sync_dir(dir).map_err(err)?;
        if let Some(parent) = dir.parent() {
            sync_dir(parent).map_err(err)?;
        }
        Ok(Wal { dir: dir.to_path_buf(), file, segment: first, written: 0, buf: Vec::new(), segment_bytes_max })
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
        encode_record(changes, &mut self.buf)
    }

    /// Removes the current segment (every round in it is durable in fjall).
    ///
    /// # Errors
    /// The removal's.
    pub(crate) fn remove_current(&self) -> io::Result<()> {
        fs::remove_file(segment_path(&self.dir, self.segment))
    }

    /// Whether records were appended since the last sync.
    pub(crate) fn has_unsynced(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Writes the appended records and fdatasyncs them. When the segment has grown past its
    /// bound, starts the next one and returns the closed segment's path.
    ///
    /// # Errors
    /// [`StoreError::Sync`] when the write, the sync or the next segment fails.
    pub(crate) fn sync(&mut self) -> Result<Option<PathBuf>, StoreError> {
        let err = |e: io::Error| StoreError::Sync(format!("write-ahead log segment {}: {e}", self.segment));
        if !self.buf.is_empty() {
            self.file.write_all_at(&self.buf, self.written).map_err(err)?;
            self.written += self.buf.len() as u64;
            self.buf.clear();
            if self.buf.capacity() > 4 << 20 {
                self.buf.shrink_to(1 << 20);
            }
        }
        self.file.sync_data().map_err(err)?;
        if self.written < self.segment_bytes_max {
            return Ok(None);
        }
        let closed = segment_path(&self.dir, self.segment);
        let next = Wal::create(&self.dir, self.segment + 1, self.segment_bytes_max)
            .map_err(|e| StoreError::Sync(e.to_string()))?;
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

    #[test]
    fn records_round_trip_and_a_torn_tail_is_cut_off() {
        let a = vec![change(Space::Log, b"k1", Some(b"v1")), change(Space::State, b"k2", None)];
        let b = vec![change(Space::Meta, b"", Some(b""))];
        let mut bytes = Vec::new();
        encode_record(&a, &mut bytes).unwrap();
        encode_record(&b, &mut bytes).unwrap();
        assert_eq!(parse(&bytes).unwrap(), Parsed { records: vec![a.clone(), b.clone()], torn: false });
        let mut first = Vec::new();
        encode_record(&a, &mut first).unwrap();
        for cut in 1..bytes.len() {
            let parsed = parse(&bytes[..cut]).unwrap();
            assert_eq!(parsed.torn, cut != first.len(), "cut at {cut}");
            let whole = if cut >= first.len() { vec![a.clone()] } else { vec![] };
            assert_eq!(parsed.records, whole, "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(parse(&flipped).unwrap(), Parsed { records: vec![a], torn: true }, "a bad checksum ends the run");
        assert_eq!(parse(&[0; 64]).unwrap(), Parsed { records: vec![], torn: false }, "zeros are the preallocated end");
        let mut preallocated = bytes.clone();
        preallocated.extend_from_slice(&[0; 100]);
        assert_eq!(parse(&preallocated).unwrap().records.len(), 2);
        preallocated.push(1);
        assert!(parse(&preallocated).unwrap().torn, "zeros then data are no clean end");
    }

    #[test]
    fn a_checksummed_record_that_does_not_parse_is_corruption() {
        let body = [9u8, 0, 0, 0];
        let mut bytes = (body.len() as u32).to_le_bytes().to_vec();
        bytes.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
        bytes.extend_from_slice(&body);
        assert!(matches!(parse(&bytes), Err(StoreError::Read(_))));
    }

    #[test]
    fn segments_close_past_their_bound_and_replay_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let wal_dir = dir.path().join(DIR);
        let mut wal = Wal::create(&wal_dir, 1, 100).unwrap();
        let mut closed = Vec::new();
        for i in 0u8..10 {
            wal.append(&[change(Space::Log, &[i], Some(&[i; 40]))]).unwrap();
            closed.extend(wal.sync().unwrap());
        }
        assert_eq!(closed.len(), 5, "two 51-byte records fill a 100-byte segment");
        assert_eq!(wal.segment(), 6);
        let mut seen = Vec::new();
        let read = replay(&wal_dir, |r| {
            seen.push(r[0].key[0]);
            Ok(())
        })
        .unwrap();
        assert_eq!(read.len(), 6);
        assert_eq!(seen, (0..10).collect::<Vec<u8>>());

        // A torn record in a closed segment is corruption.
        let data = fs::read(&closed[0]).unwrap();
        fs::write(&closed[0], &data[..data.len() - 1]).unwrap();
        assert!(replay(&wal_dir, |_| Ok(())).is_err());
    }
}
