//! A small application state and journal builders shared by the integration tests.
#![allow(dead_code)]

use bytes::Bytes;
use paros_client::{Checkpointable, Checkpointer, CheckpointerConfig, Folder, FolderConfig, Seq};

/// A state that remembers how many records it folded and a chained digest of them, so two
/// states are equal only if they folded the same records at the same positions in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    pub count: u64,
    pub digest: u32,
}

impl Checkpointable for Tally {
    type RestoreError = String;

    fn apply(&mut self, position: Seq, record: &[u8]) {
        self.count += 1;
        let digest = crc32c::crc32c_append(self.digest, &position.0.to_le_bytes());
        self.digest = crc32c::crc32c_append(digest, record);
    }

    fn checkpoint(&self) -> Vec<u8> {
        let mut out = self.count.to_le_bytes().to_vec();
        out.extend_from_slice(&self.digest.to_le_bytes());
        out
    }

    fn restore(bytes: &[u8]) -> Result<Self, String> {
        let bytes: [u8; 12] = bytes.try_into().map_err(|_| format!("{} bytes, not 12", bytes.len()))?;
        let count = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
        let digest = u32::from_le_bytes(bytes[8..].try_into().expect("4 bytes"));
        Ok(Tally { count, digest })
    }
}

/// Application record number `n`.
pub fn entry(n: u64) -> Bytes {
    Bytes::from(format!("entry-{n}"))
}

/// A fresh folder at position 0 with the default bounds.
pub fn folder() -> Folder<Tally> {
    Folder::new(Tally::default(), Seq(0), FolderConfig::default())
}

/// A journal under construction, with the owner's own fold beside it.
pub struct Journal {
    pub records: Vec<Bytes>,
    pub owner: Tally,
}

impl Journal {
    pub fn new() -> Self {
        Journal { records: Vec::new(), owner: Tally::default() }
    }

    pub fn tail(&self) -> Seq {
        Seq(self.records.len() as u64)
    }

    /// Appends `n` application records, folding them into the owner's state.
    pub fn entries(&mut self, n: u64) -> &mut Self {
        for _ in 0..n {
            let at = self.tail();
            let record = entry(at.0);
            self.owner.apply(at, &record);
            self.records.push(record);
        }
        self
    }

    /// The run records a Checkpointer plans for `state` at the tail, with chunks of
    /// `chunk_bytes`; not yet appended.
    pub fn run_of(&self, state: &Tally, chunk_bytes: usize) -> Vec<Bytes> {
        let config = CheckpointerConfig { chunk_bytes, ..CheckpointerConfig::default() };
        let mut checkpointer = Checkpointer::new(config).expect("a valid configuration");
        checkpointer.begin(state, self.tail()).expect("an idle checkpointer plans a run").records
    }

    /// Appends a run of the owner's state; returns its Begin's position.
    pub fn checkpoint(&mut self, chunk_bytes: usize) -> Seq {
        let begin = self.tail();
        let run = self.run_of(&self.owner.clone(), chunk_bytes);
        self.records.extend(run);
        begin
    }

    /// Appends raw records as they are.
    pub fn raw(&mut self, records: impl IntoIterator<Item = Bytes>) -> &mut Self {
        self.records.extend(records);
        self
    }

    /// The records at `[from, to)`.
    pub fn slice(&self, from: Seq, to: Seq) -> &[Bytes] {
        &self.records[from.0 as usize..to.0 as usize]
    }
}

/// A fake of journal `j` on servers 1 and 2, claimed, holding `n` records `r0`, `r1`, ….
pub fn fake_with(n: usize) -> std::sync::Arc<paros_client::fake::FakeService> {
    let fake = std::sync::Arc::new(paros_client::fake::FakeService::new(
        "j",
        vec![paros_client::NodeId(1), paros_client::NodeId(2)],
    ));
    fake.claim_as(paros_client::LeaderUuid::new(7).expect("non-zero"));
    if n > 0 {
        fake.write_as((0..n).map(|i| Bytes::from(format!("r{i}"))).collect());
    }
    fake
}

/// A client of `fake` with a fixed seed.
pub fn client(
    fake: &std::sync::Arc<paros_client::fake::FakeService>,
) -> paros_client::Client<std::sync::Arc<paros_client::fake::FakeService>> {
    paros_client::Client::with_seed(std::sync::Arc::clone(fake), paros_client::ClientConfig::default(), 3)
        .expect("valid")
}

/// A linearizable reader of `j` from `from`, `page` records a page, long-polling 200 ms.
pub fn reader(
    fake: &std::sync::Arc<paros_client::fake::FakeService>,
    from: u64,
    page: u32,
) -> paros_client::Reader<std::sync::Arc<paros_client::fake::FakeService>> {
    let config = paros_client::ReaderConfig { page_records_max: page, ..paros_client::ReaderConfig::default() };
    paros_client::Reader::builder(client(fake), "j".to_owned())
        .from(Seq(from))
        .config(config)
        .follow_wait_ms(200)
        .build()
        .expect("valid")
}
