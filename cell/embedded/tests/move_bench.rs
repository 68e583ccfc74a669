//! The move benchmark of issue 34: a journal of a four-node embedded cell holding
//! `PAROS_MOVE_MIB` (default 256) MiB retained (records of 256 KiB, three to a batch, nothing
//! truncated) has one voter's seat moved to the fourth node, while one writer keeps writing
//! small records to it (100 bytes, one to a batch, back to back). In the same run the same
//! bytes are copied between two directories of the filesystem the cell's stores live on (each
//! file fsynced), before the fill and again after the move. Printed, against the targets of
//! at most 2:
//!
//! - the move's time over the copy's: from the `MoveSeat` request to the registry recording it
//!   done, and to the target itself serving a linearizable read (the registry records the move
//!   done once a quorum of the new voters serves, and two of the three are old voters: the
//!   target catches up afterwards);
//! - the writes' p99 over both windows over their p99 without a move (measured for
//!   `PAROS_MOVE_QUIET_S`, default 5, before it); nearest rank, so with fewer than 100 writes
//!   it is the slowest;
//! - the store's own share, as a baseline: the time a fresh store on this disk takes to take
//!   the same bytes as catch-up hands them to a target (one slot of the fill per write, each
//!   write synced), nothing else running;
//! - like for like, the move's time over the copy's time when that copy runs beside the same
//!   writes (the move always does: writes go on through it), against the same target of 2;
//! - the disk's own share, as a baseline: the writes' p99 while the same bytes are copied
//!   between two directories beside them (no move), over their p99 without a move. Every node
//!   of the embedded cell shares this one disk with the move's target, so this is how far a
//!   move's writes alone would push the writes' p99 here, whatever the move's code;
//! - to see where the time goes: the target's bytes on disk every 100 ms, and each node's
//!   round times (queue, store write, sync) over the move.
//!
//! The filesystem is synced (`sync`) before each timed copy and before the move, so none of them
//! pays for writeback the one before left dirty.
//!
//! `PAROS_MOVE_VOTER` (default 0) picks which of the journal's three voters moves. At the end
//! the target alone serves every record of the fill. Not in the suite's default run:
//!
//!     cargo test --release -p paros-embedded --test move_bench -- --ignored --nocapture

use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use paros_client::{JournalService as _, ReadAnswer, ReadParams, Route, Writer, WriterConfig};
use paros_core::journal::{Command, Entry, WriterMode};
use paros_core::{
    Ballot, Consistency, JournalConfig, JournalId, JournalKey, LeaderUuid, NodeId, Seq, Slot, TenantId, WriteOp,
};
use paros_embedded::{EmbeddedCell, NodeStatsReader};
use paros_node::ports::{LogStore as _, Placement};
use paros_registry::daemon::CoordinatorLoopConfig;
use paros_registry::{Accepted, Epoch, JournalName, Op, Quotas, TenantName};
use paros_store::FjallStore;

const MIB: u64 = 1 << 20;
/// The fill's record size, and records per batch (a batch stays under the 1 MiB limit).
const FILL_RECORD_BYTES: usize = 256 << 10;
const FILL_BATCH_RECORDS: usize = 3;
/// The latency writer's record size; one record per batch.
const SMALL_RECORD_BYTES: usize = 100;
/// The copy baseline's file size.
const COPY_FILE_BYTES: u64 = 16 * MIB;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Incompressible bytes (xorshift64), so neither the store nor the filesystem shrinks them.
fn noise(state: &mut u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Writes `bytes` of noise as files under `root/src` (each fsynced, and the directory), then
/// times copying them to `root/dst` with each copy and the directory fsynced. Removes both.
fn copy_baseline(root: &Path, bytes: u64, seed: u64) -> Duration {
    let (src, dst) = (root.join("src"), root.join("dst"));
    std::fs::create_dir_all(&src).expect("a source directory");
    std::fs::create_dir_all(&dst).expect("a destination directory");
    let mut state = seed | 1;
    let mut left = bytes;
    let mut files = Vec::new();
    while left > 0 {
        let len = left.min(COPY_FILE_BYTES);
        let name = format!("f{}", files.len());
        let mut f = std::fs::File::create(src.join(&name)).expect("a source file");
        f.write_all(&noise(&mut state, usize::try_from(len).expect("fits"))).expect("writes");
        f.sync_all().expect("fsyncs");
        files.push(name);
        left -= len;
    }
    std::fs::File::open(&src).and_then(|d| d.sync_all()).expect("fsyncs the source directory");
    let started = Instant::now();
    for name in &files {
        std::fs::copy(src.join(name), dst.join(name)).expect("copies");
        std::fs::File::open(dst.join(name)).and_then(|f| f.sync_all()).expect("fsyncs the copy");
    }
    std::fs::File::open(&dst).and_then(|d| d.sync_all()).expect("fsyncs the destination directory");
    let took = started.elapsed();
    std::fs::remove_dir_all(&src).expect("removes the source");
    std::fs::remove_dir_all(&dst).expect("removes the copy");
    took
}

/// Flushes every dirty page of every filesystem (`sync(1)`), so a timed phase does not pay
/// for the writeback of the one before.
fn sync_all_filesystems() {
    let status = std::process::Command::new("sync").status().expect("runs sync");
    assert!(status.success(), "sync: {status}");
}

/// The store's ingest of `bytes` of fill slots into a fresh store under `root`, as catch-up
/// hands them to a move's target: one slot ([`FILL_BATCH_RECORDS`] records) per write, each
/// write synced. Removes the store.
fn store_ingest_baseline(root: &Path, bytes: u64, seed: u64) -> Duration {
    let path = root.join("ingest");
    let mut store = FjallStore::open(&path).expect("opens a store");
    let key = JournalKey { tenant: TenantId(1), journal: JournalId(1) };
    let config =
        JournalConfig { mode: WriterMode::Single, voters: vec![NodeId(1), NodeId(2), NodeId(3)], learners: vec![] };
    store.place(&[Placement::Put(key, config, Ballot::ZERO)]).expect("places the journal");
    store.sync().expect("syncs");
    let mut state = seed | 1;
    let slot_bytes = (FILL_BATCH_RECORDS * FILL_RECORD_BYTES) as u64;
    let commands: Vec<Command> = (0..bytes.div_ceil(slot_bytes))
        .map(|s| {
            let records = (0..FILL_BATCH_RECORDS).map(|_| Bytes::from(noise(&mut state, FILL_RECORD_BYTES))).collect();
            Command::Write(Entry { leader: LeaderUuid::new(7), seq: Seq(s * FILL_BATCH_RECORDS as u64), records })
        })
        .collect();
    let started = Instant::now();
    for (slot, command) in (1u64..).map(Slot).zip(commands) {
        let ops = vec![WriteOp::Learn { slot, command }, WriteOp::Chosen { up_to: Slot(slot.0 + 1) }];
        store.write(&[(key, ops)]).expect("writes");
        store.sync().expect("syncs");
    }
    let took = started.elapsed();
    drop(store);
    std::fs::remove_dir_all(&path).expect("removes the store");
    took
}

/// The `q` quantile of `latencies` (nearest rank).
fn quantile(latencies: &[Duration], q: f64) -> Duration {
    let mut sorted = latencies.to_vec();
    sorted.sort_unstable();
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn disk_bytes(reader: &NodeStatsReader, node: NodeId) -> u64 {
    reader.read().iter().find(|s| s.node == node).map_or(0, |s| s.store.disk_bytes)
}

/// Whether `node` serves a linearizable read of `key` now: it applied through the highest
/// slot a quorum had accepted when the read began (the mover's confirmation, asked of one node).
async fn serves(cell: &EmbeddedCell, key: JournalKey, node: NodeId) -> bool {
    let params =
        ReadParams { from: Seq(0), limit: 1, max_bytes: 1, wait_ms: 0, consistency: Consistency::Linearizable };
    let answer = cell.client.service().read(&key, params, Route { server: Some(node), attempt: 0 }).await;
    matches!(answer, ReadAnswer::Page { .. } | ReadAnswer::Truncated { .. })
}

/// The record bytes `node` serves of `key`, read page by page from position 0 (each page a
/// linearizable read at `node` alone), and the records read.
async fn bytes_served(cell: &EmbeddedCell, key: JournalKey, node: NodeId) -> (u64, u64) {
    let (mut from, mut bytes) = (Seq(0), 0u64);
    loop {
        let params =
            ReadParams { from, limit: 256, max_bytes: 4 << 20, wait_ms: 0, consistency: Consistency::Linearizable };
        match cell.client.service().read(&key, params, Route { server: Some(node), attempt: 0 }).await {
            ReadAnswer::Page { records, .. } if records.is_empty() => return (bytes, from.0),
            ReadAnswer::Page { from: at, records, .. } => {
                assert_eq!(at, from, "a page starts where asked");
                bytes += records.iter().map(|r| r.len() as u64).sum::<u64>();
                from = Seq(from.0 + records.len() as u64);
            }
            other => panic!("{node:?} serves the journal from {from:?}: {other:?}"),
        }
    }
}

/// Writes small records, one per batch, back to back, until `stop`; every write must succeed.
/// Returns the writer and each write's latency.
async fn write_until(
    mut writer: Writer<paros_embedded::CellService>,
    stop: Arc<AtomicBool>,
) -> (Writer<paros_embedded::CellService>, Vec<Duration>) {
    let mut latencies = Vec::new();
    let record = Bytes::from(vec![0x5a; SMALL_RECORD_BYTES]);
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        writer.write(vec![record.clone()]).await.expect("a small write");
        latencies.push(t.elapsed());
    }
    (writer, latencies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run it by name"]
async fn moving_a_journal_with_256_mib_retained() {
    let mib = env_u64("PAROS_MOVE_MIB", 256);
    let quiet = Duration::from_secs(env_u64("PAROS_MOVE_QUIET_S", 5));
    let bytes = mib * MIB;
    let dir = tempfile::tempdir().expect("a temp dir");
    sync_all_filesystems();
    let copy_before = copy_baseline(dir.path(), bytes, 0x00c0_ffee);
    println!("copy baseline: {mib} MiB in {:.2} s (fsynced)", copy_before.as_secs_f64());

    let cell = EmbeddedCell::open_configured(dir.path(), 4, CoordinatorLoopConfig::default()).await.expect("opens");
    cell.init().await.expect("forms");
    let tenant = TenantId(0x3a0e);
    let name = TenantName::parse("acme").expect("a name");
    cell.request(Op::Command(paros_registry::Command::SignUp { tenant, name, quotas: Quotas::default() }))
        .await
        .expect("signs up");
    let name = JournalName::parse("big").expect("a name");
    let create = Op::CreateJournal { tenant, journal: JournalId(0xb16), name, mode: WriterMode::Single, tier: None };
    let Accepted::JournalCreated { key, voters, .. } = cell.request(create).await.expect("creates") else {
        panic!("a journal")
    };
    let to = *cell.manifest.nodes.iter().find(|n| !voters.contains(n)).expect("a node outside");
    let from = voters[usize::try_from(env_u64("PAROS_MOVE_VOTER", 0)).expect("an index") % voters.len()];
    cell.wait_followers(Duration::from_secs(20), |d| d.journal(key).is_some()).await.expect("placed");
    let mut writer = Writer::with_seed(cell.client.clone(), key, WriterConfig::default(), 7).expect("a writer");
    let deadline = Instant::now() + Duration::from_secs(20);
    while let Err(e) = writer.claim().await {
        assert!(Instant::now() < deadline, "claims: {e:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The fill: `mib` MiB retained, nothing truncated.
    let filling = Instant::now();
    let mut state = 0x5eed_u64;
    let mut filled = 0u64;
    while filled < bytes {
        let batch: Vec<Bytes> =
            (0..FILL_BATCH_RECORDS).map(|_| Bytes::from(noise(&mut state, FILL_RECORD_BYTES))).collect();
        writer.write(batch).await.expect("a fill write");
        filled += (FILL_BATCH_RECORDS * FILL_RECORD_BYTES) as u64;
    }
    let reader = cell.stats_reader();
    println!(
        "filled {} MiB in {:.1} s; the voter moved off ({from:?}) holds {} MiB on disk, the target ({to:?}) {} MiB",
        filled / MIB,
        filling.elapsed().as_secs_f64(),
        disk_bytes(&reader, from) / MIB,
        disk_bytes(&reader, to) / MIB,
    );

    // Writes without a move.
    let stop = Arc::new(AtomicBool::new(false));
    let quiet_writes = tokio::spawn(write_until(writer, Arc::clone(&stop)));
    tokio::time::sleep(quiet).await;
    stop.store(true, Ordering::Relaxed);
    let (writer, without) = quiet_writes.await.expect("the writer task");
    let p99_without = quantile(&without, 0.99);

    // The disk's share: writes while the same bytes are copied beside them, no move.
    sync_all_filesystems();
    let stop = Arc::new(AtomicBool::new(false));
    let copied_writes = tokio::spawn(write_until(writer, Arc::clone(&stop)));
    let root = dir.path().join("beside");
    let copy_beside =
        tokio::task::spawn_blocking(move || copy_baseline(&root, bytes, 0x0005_1de0)).await.expect("the copy task");
    stop.store(true, Ordering::Relaxed);
    let (writer, beside) = copied_writes.await.expect("the writer task");
    sync_all_filesystems();

    // Writes during the move: from the request to the registry recording it done.
    let target_before = disk_bytes(&reader, to);
    let stop = Arc::new(AtomicBool::new(false));
    let moving_writes = tokio::spawn(write_until(writer, Arc::clone(&stop)));
    // The target's bytes on disk every 100 ms, from the request on.
    let watching = Arc::new(AtomicBool::new(false));
    let watch = {
        let (reader, watching) = (reader.clone(), Arc::clone(&watching));
        tokio::spawn(async move {
            let started = Instant::now();
            let mut samples = Vec::new();
            while !watching.load(Ordering::Relaxed) {
                samples.push((started.elapsed(), disk_bytes(&reader, to)));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            samples
        })
    };
    let rounds_before = cell.round_times();
    let started = Instant::now();
    cell.request(Op::Command(paros_registry::Command::MoveSeat { journal: key, from, to }))
        .await
        .expect("the move is recorded");
    let done = |d: &paros_registry::Directory| d.journal(key).is_some_and(|j| j.epoch == Epoch(1));
    let result = cell.wait_followers(Duration::from_secs(1800), done).await;
    let moved = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let d = result.expect("the move is recorded done within 30 minutes");
    let j = d.journal(key).expect("live");
    assert!(j.voters.contains(&to) && !j.voters.contains(&from), "the seat moved: {:?}", j.voters);
    let (writer, during) = moving_writes.await.expect("the writer task");
    let recorded_bytes = disk_bytes(&reader, to);
    // Rule 6 asks a quorum of the new voters to hold the prefix, and two of the three are old
    // voters: the target may still be catching up. Writes go on until it serves itself.
    let stop_after = Arc::new(AtomicBool::new(false));
    let after_writes = tokio::spawn(write_until(writer, Arc::clone(&stop_after)));
    let deadline = Instant::now() + Duration::from_secs(1800);
    while !serves(&cell, key, to).await {
        assert!(Instant::now() < deadline, "the target serves a linearizable read within 30 minutes");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let caught_up = started.elapsed();
    stop_after.store(true, Ordering::Relaxed);
    let (_writer, after) = after_writes.await.expect("the writer task");
    watching.store(true, Ordering::Relaxed);
    let samples = watch.await.expect("the watch task");
    let step = samples.len().div_ceil(24).max(1);
    let timeline: Vec<String> = samples
        .iter()
        .step_by(step)
        .map(|(at, b)| format!("{:.1}s:{}", at.as_secs_f64(), b.saturating_sub(target_before) / MIB))
        .collect();
    println!("the target's store, MiB grown since the request: {}", timeline.join(" "));
    // Each node's rounds over the move and the catch-up: queue, write and sync times.
    for ((node, now), before) in cell.manifest.nodes.iter().zip(cell.round_times()).zip(&rounds_before) {
        let r = now.since(before);
        let role = if *node == from {
            "moved off"
        } else if *node == to {
            "target"
        } else {
            "stays"
        };
        let q = |h: &paros_node::timing::Histogram| {
            #[allow(clippy::cast_precision_loss)]
            let f = |q: f64| h.quantile(q) as f64 / 1e3;
            format!("p50 {:.1} / p99 {:.1} / max {:.1} ms", f(0.5), f(0.99), f(1.0))
        };
        println!(
            "  {node:?} ({role}): {} rounds; queue {}; write {}; sync {}",
            r.write.count(),
            q(&r.queue),
            q(&r.write),
            q(&r.sync)
        );
    }
    let target_after = disk_bytes(&reader, to);
    let p99_during = quantile(&during, 0.99);
    // What the target holds: every record, served by it alone.
    let reading = Instant::now();
    let (served, records) = bytes_served(&cell, key, to).await;
    println!(
        "the target serves {records} records, {} MiB of record bytes, by itself (read back in {:.2} s)",
        served / MIB,
        reading.elapsed().as_secs_f64()
    );
    assert!(served >= filled, "the target serves the whole fill ({served} of {filled} bytes)");
    let _ = cell.stop();

    sync_all_filesystems();
    let copy_after = copy_baseline(dir.path(), bytes, 0x0bad_cafe);
    sync_all_filesystems();
    let ingest = store_ingest_baseline(dir.path(), bytes, 0x1a6e_57ed);
    let copy = (copy_before + copy_after) / 2;
    let (move_ratio, p99_ratio) = (moved.as_secs_f64() / copy.as_secs_f64(), ms(p99_during) / ms(p99_without));
    let verdict = |r: f64| if r <= 2.0 { "met" } else { "missed" };
    println!(
        "copy: {:.2} s before the fill, {:.2} s after the move (mean {:.2} s)",
        copy_before.as_secs_f64(),
        copy_after.as_secs_f64(),
        copy.as_secs_f64()
    );
    let caught_up_ratio = caught_up.as_secs_f64() / copy.as_secs_f64();
    println!(
        "move of {mib} MiB recorded done after {:.2} s = {move_ratio:.2} x the copy (target 2: {}); the target's store \
         had grown {} MiB by then",
        moved.as_secs_f64(),
        verdict(move_ratio),
        recorded_bytes.saturating_sub(target_before) / MIB,
    );
    let whole: Vec<Duration> = during.iter().chain(&after).copied().collect();
    let whole_ratio = ms(quantile(&whole, 0.99)) / ms(p99_without);
    println!(
        "the target served a linearizable read itself after {:.2} s = {caught_up_ratio:.2} x the copy (target 2: {}); \
         its store grew {} MiB",
        caught_up.as_secs_f64(),
        verdict(caught_up_ratio),
        target_after.saturating_sub(target_before) / MIB,
    );
    println!(
        "write p99 without a move: {:.2} ms ({} writes, p50 {:.2} ms)",
        ms(p99_without),
        without.len(),
        ms(quantile(&without, 0.5)),
    );
    println!(
        "baseline, the store's share: a fresh store took the same {mib} MiB, one fill slot per synced write, \
         in {:.2} s = {:.2} x the copy; the move's catch-up took {:.2} x that",
        ingest.as_secs_f64(),
        ingest.as_secs_f64() / copy.as_secs_f64(),
        caught_up.as_secs_f64() / ingest.as_secs_f64(),
    );
    let beside_ratio = ms(quantile(&beside, 0.99)) / ms(p99_without);
    let (beside_moved, beside_served) =
        (moved.as_secs_f64() / copy_beside.as_secs_f64(), caught_up.as_secs_f64() / copy_beside.as_secs_f64());
    println!(
        "like for like, the move beside the writes over the copy beside the same writes ({:.2} s): \
         {beside_moved:.2} x (recorded done; target 2: {}), {beside_served:.2} x (the target served; target 2: {})",
        copy_beside.as_secs_f64(),
        verdict(beside_moved),
        verdict(beside_served),
    );
    println!(
        "baseline, the disk's share: write p99 while the same {mib} MiB were copied beside the writes (no move, the \
         copy took {:.2} s): {:.2} ms ({} writes, p50 {:.2} ms, max {:.1} ms) = {beside_ratio:.2} x",
        copy_beside.as_secs_f64(),
        ms(quantile(&beside, 0.99)),
        beside.len(),
        ms(quantile(&beside, 0.5)),
        ms(quantile(&beside, 1.0)),
    );
    println!(
        "write p99 until recorded done: {:.2} ms ({} writes, p50 {:.2} ms, max {:.1} ms) = {p99_ratio:.2} x \
         (target 2: {})",
        ms(p99_during),
        during.len(),
        ms(quantile(&during, 0.5)),
        ms(quantile(&during, 1.0)),
        verdict(p99_ratio),
    );
    println!(
        "write p99 until the target served: {:.2} ms ({} writes, p50 {:.2} ms, max {:.1} ms) = {whole_ratio:.2} x \
         (target 2: {})",
        ms(quantile(&whole, 0.99)),
        whole.len(),
        ms(quantile(&whole, 0.5)),
        ms(quantile(&whole, 1.0)),
        verdict(whole_ratio),
    );
}
