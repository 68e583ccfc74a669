//! Checkpoint and fold: the owner of a journal appends numbers and folds them into a running
//! total; when its [`Checkpointer`] says a checkpoint is due (here at least every 30 numbers),
//! it appends a checkpoint run of the total and truncates the journal below the run. A fresh
//! [`Folder`] then reads the journal from position 0: it meets the truncated gap, restores the
//! total from the run and folds the numbers after it, reaching the owner's total without the
//! records that are gone.
//!
//! Start the service in one terminal and run the example in another:
//!
//! ```text
//! cargo run --release -p paros -- dev
//! cargo run -p paros-client --example checkpoint_fold
//! ```
//!
//! `PAROS_URL` names another gateway (the default is `http://127.0.0.1:7400`).

use std::time::{SystemTime, UNIX_EPOCH};

use paros_client::{
    Bytes, Checkpointable, Checkpointer, FoldEvent, Folder, FolderConfig, GatewayClient, JournalName, ReadItem, Seq,
    TenantName,
};

/// The application state: the sum and the count of the numbers folded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Total {
    pub sum: u64,
    pub count: u64,
}

impl Checkpointable for Total {
    type RestoreError = String;

    /// Each application record is a number in decimal text.
    fn apply(&mut self, _position: Seq, record: &[u8]) {
        let n: u64 = std::str::from_utf8(record).ok().and_then(|s| s.parse().ok()).unwrap_or(0);
        self.sum += n;
        self.count += 1;
    }

    fn checkpoint(&self) -> Vec<u8> {
        [self.sum.to_le_bytes(), self.count.to_le_bytes()].concat()
    }

    fn restore(bytes: &[u8]) -> Result<Total, String> {
        let word = |i: usize| bytes.get(i * 8..i * 8 + 8).and_then(|w| w.try_into().ok()).map(u64::from_le_bytes);
        match (word(0), word(1), bytes.len()) {
            (Some(sum), Some(count), 16) => Ok(Total { sum, count }),
            _ => Err(format!("a total is 16 bytes, not {}", bytes.len())),
        }
    }
}

/// What the example ends with.
#[derive(Debug)]
pub struct Outcome {
    /// The owner's state, folded as it appended.
    pub owner: Total,
    /// The state a fresh folder reached reading the journal from 0.
    pub folded: Total,
    /// The journal's first retained position after the owner's last truncation.
    pub first_seq: Seq,
}

/// The example, against the gateway at `url`, as a new tenant.
pub async fn checkpoint_and_fold(url: &str) -> Result<Outcome, Box<dyn std::error::Error>> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let owner = GatewayClient::connect(url)?.signup(&TenantName::parse(&format!("fold-{nanos}"))?).await?.client;
    let numbers = JournalName::parse("numbers")?;
    owner.create_journal(&numbers).await?;

    // The owner: append 1..=100, one record each, and checkpoint when the Checkpointer says so.
    let mut writer = owner.client().writer(numbers.clone()).claim().await?;
    let mut checkpointer = Checkpointer::builder().interval_records(30).build()?;
    let mut state = Total::default();
    let mut first_seq = Seq(0);
    for n in 1..=100u64 {
        let record = Bytes::from(n.to_string());
        let written = writer.write(vec![record.clone()]).await?;
        state.apply(written.seq, &record);
        checkpointer.appended(1, record.len() as u64)?;
        if checkpointer.due(state.checkpoint().len()) {
            // A run of the state at the tail, appended with nothing between its records.
            let run = checkpointer.begin(&state, writer.core().next_seq())?;
            let written = writer.write(run.records).await?;
            if let Some(truncate) = checkpointer.acknowledged(written.seq, written.count)? {
                first_seq = writer.truncate(truncate.up_to).await?.first_seq;
                checkpointer.truncate_settled();
                println!("checkpointed {state:?} at {}, truncated below it", truncate.up_to);
            }
        }
    }

    // A reader: fold the journal from 0 with a fresh folder.
    let mut folder = Folder::new(Total::default(), Seq(0), FolderConfig::default());
    let mut reader = owner.client().reader(numbers).from(Seq(0)).build()?;
    for item in reader.read_to_tail().await? {
        let events = match item {
            ReadItem::Gap { from, to } => folder.gap(from, to)?,
            ReadItem::Record { seq, data } => folder.fold(seq, &data)?,
        };
        for event in events {
            match event {
                FoldEvent::Jumped { from, to } => println!("the folder met the gap [{from}, {to})"),
                FoldEvent::Restored { at } => println!("the folder restored the total from the run at {at}"),
                _ => {}
            }
        }
    }
    if !folder.is_whole() {
        return Err("the folder met a gap and found no checkpoint run after it".into());
    }
    Ok(Outcome { owner: state, folded: folder.into_state(), first_seq })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("PAROS_URL").unwrap_or_else(|_| "http://127.0.0.1:7400".to_owned());
    let Outcome { owner, folded, first_seq } = checkpoint_and_fold(&url).await?;
    println!("the owner's state:  {owner:?}");
    println!("the folded state:   {folded:?} (the journal now begins at {first_seq})");
    Ok(())
}
