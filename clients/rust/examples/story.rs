//! The first-user story: sign up a new tenant, create a journal, write 100 records, truncate
//! the first 50, and read the journal back from position 0 — a gap, then records 50 to 99.
//!
//! Start the service in one terminal and run the story in another:
//!
//! ```text
//! cargo run --release -p paros -- dev
//! cargo run -p paros-client --example story
//! ```
//!
//! `PAROS_URL` names another gateway (the default is `http://127.0.0.1:7400`). Each run signs up
//! a tenant of its own, so the story runs again as it is.

use std::time::{SystemTime, UNIX_EPOCH};

use futures_util::{TryStreamExt, stream};
use paros_client::{Bytes, GatewayClient, JournalName, ReadItem, Seq, TenantName};

/// The story, against the gateway at `url`: what reading `orders` from 0 gave back.
pub async fn story(url: &str) -> Result<Vec<ReadItem>, Box<dyn std::error::Error>> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
    let owner = GatewayClient::connect(url)?.signup(&TenantName::parse(&format!("story-{nanos}"))?).await?.client;
    let orders = JournalName::parse("orders")?;
    owner.create_journal(&orders).await?;
    let mut writer = owner.client().writer(orders.clone()).claim().await?;
    let batches = (0..100).map(|n| vec![Bytes::from(format!("order {n}"))]);
    writer.write_all(stream::iter(batches)).try_collect::<Vec<_>>().await?;
    writer.truncate(Seq(50)).await?;
    let mut reader = owner.client().reader(orders).from(Seq(0)).build()?;
    Ok(reader.read_to_tail().await?)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("PAROS_URL").unwrap_or_else(|_| "http://127.0.0.1:7400".to_owned());
    for item in story(&url).await? {
        match item {
            ReadItem::Gap { from, to } => println!("gap [{from}, {to})"),
            ReadItem::Record { seq, data } => println!("{seq}\t{}", String::from_utf8_lossy(&data)),
        }
    }
    Ok(())
}
