//! The writers: claim every journal, write until the time is up, verify what was acknowledged.

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use paros_client::{
    Client, Denial, JournalService, ReadConsistency, Reader, ReaderConfig, ReaderError, ReaderOutcome, Writer,
    WriterConfig, WriterError,
};

use super::read::{self, ReadFigures, ReadSetup};
use super::report::progress_bar;
use super::{BenchArgs, BenchError, JournalWriter, Journals, Shared, record_bytes};

/// Claims `writer`'s journal, waiting out the gateway's quota.
pub(super) async fn claim<S>(writer: &mut Writer<S>, index: usize, shared: &Shared) -> Result<(), BenchError>
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    loop {
        match writer.claim().await {
            Ok(_) => return Ok(()),
            Err(e) => match over_quota(&e) {
                Some(wait) => {
                    shared.over_quota.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(wait).await;
                }
                None => return Err(BenchError::Writer { journal: index, reason: format!("claim: {e}") }),
            },
        }
    }
}

pub(super) async fn claim_all<S>(
    client: &Client<S>,
    journals: Vec<(usize, S::Journal)>,
    shared: &Shared,
    in_flight: usize,
) -> Result<Journals<S>, BenchError>
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    let mut out = Vec::new();
    for (index, journal) in journals {
        let fail = |reason: String| BenchError::Writer { journal: index, reason };
        let defaults = WriterConfig::default();
        let depth = u32::try_from(in_flight).unwrap_or(u32::MAX).max(defaults.batches_in_flight_max);
        let config = WriterConfig { batches_in_flight_max: depth, ..defaults };
        let mut writer = Writer::new(client.clone(), journal.clone(), config).map_err(|e| fail(e.to_string()))?;
        claim(&mut writer, index, shared).await?;
        if let Some(acks) = shared.acks.get(index) {
            acks.next.store(writer.core().next_seq().0, Ordering::Relaxed);
        }
        let sent = std::collections::VecDeque::new();
        out.push(Arc::new(tokio::sync::Mutex::new(JournalWriter { index, journal, writer, sent })));
    }
    Ok(out)
}

/// Runs the writers for the run's duration, and `args.readers` readers beside them when
/// `readers` says how; the seconds the writers ran, and the readers' figures.
pub(super) async fn drive<S>(
    journals: &Journals<S>,
    args: &BenchArgs,
    shared: &Arc<Shared>,
    readers: Option<ReadSetup<S>>,
) -> Result<(f64, Option<ReadFigures>), BenchError>
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    // The readers read the journals the writers write (writer i writes journal i mod journals).
    let mut written = Vec::new();
    for j in journals.iter().take(args.writers) {
        let j = j.lock().await;
        written.push((j.index, j.journal.clone()));
    }
    let started = Instant::now();
    *shared.deadline.lock().expect("lock") = Some(started + args.duration);
    *shared.started.lock().expect("lock") = Some(started);
    let readers = readers.filter(|_| args.readers > 0).map(|setup| {
        let sizes = (args.record_bytes, args.read_limit);
        let pace = read::Pace { readers: args.readers, reads_per_s: args.reads_per_s };
        read::start(setup, &written, pace, args.consistency, args.read_deadline, sizes, shared)
    });
    let mut tasks = Vec::new();
    for w in 0..args.writers {
        let journal = Arc::clone(&journals[w % journals.len()]);
        let shared = Arc::clone(shared);
        let (batch, size, depth) = (args.batch, args.record_bytes, args.in_flight);
        tasks.push(tokio::spawn(async move { write_loop(&journal, &shared, batch, size, depth).await }));
    }
    let progress = args.progress.then(|| progress_bar(args.duration));
    let bytes_done = || {
        args.stop_after_bytes
            .is_some_and(|max| shared.records.load(Ordering::Relaxed).saturating_mul(args.record_bytes as u64) >= max)
    };
    while started.elapsed() < args.duration && !bytes_done() {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if let Some(p) = &progress {
            let secs = started.elapsed().as_secs_f64();
            p.set_position(started.elapsed().as_millis() as u64);
            p.set_message(format!("{:.0} records/s", shared.records.load(Ordering::Relaxed) as f64 / secs));
        }
    }
    shared.stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.map_err(|e| BenchError::Writer { journal: 0, reason: e.to_string() })??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    let figures = match readers {
        Some(r) => Some(r.finish(shared, args.readers, args.consistency, elapsed).await?),
        None => None,
    };
    Ok((elapsed, figures))
}

/// One loop: keeps `depth` writes in flight on its journal (taking turns with the loops that
/// share it), each acknowledgement recorded as it comes, until the run stops.
pub(super) async fn write_loop<S>(
    journal: &tokio::sync::Mutex<JournalWriter<S>>,
    shared: &Shared,
    batch: usize,
    size: usize,
    depth: usize,
) -> Result<(), BenchError>
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    let mut latencies = Vec::new();
    let run_started = shared.started.lock().expect("lock").unwrap_or_else(Instant::now);
    loop {
        let mut j = journal.lock().await;
        let index = j.index;
        while !shared.stop.load(Ordering::Relaxed) && j.writer.in_flight() < depth {
            let seq = j.writer.core().next_seq().0;
            let records: Vec<Bytes> = (0..batch as u64).map(|i| record_bytes(index, seq + i, size)).collect();
            match j.writer.submit(records) {
                Ok(_) => j.sent.push_back(Instant::now()),
                Err(WriterError::WindowFull) => break,
                Err(e) => return Err(BenchError::Writer { journal: index, reason: format!("write at {seq}: {e}") }),
            }
        }
        let Some((seq, result)) = j.writer.next_report().await else { break };
        let started = j.sent.pop_front().unwrap_or_else(Instant::now);
        match result {
            Ok(written) => {
                assert_eq!(written.seq.0, seq.0, "an acknowledgement names the write's own position");
                let at_ms = run_started.elapsed().as_millis().min(u128::from(u32::MAX)) as u32;
                latencies.push((at_ms, started.elapsed().as_micros().min(u128::from(u32::MAX)) as u32));
                acknowledged(shared, index, seq.0, written.count)?;
            }
            Err(e) => match over_quota(&e) {
                // Refused before it was sent on: nothing was written. The writer halted; what
                // is still in flight reports, then the loop waits and claims again.
                Some(wait) => {
                    shared.over_quota.fetch_add(1, Ordering::Relaxed);
                    while let Some((seq, result)) = j.writer.next_report().await {
                        j.sent.pop_front();
                        if let Ok(w) = result {
                            acknowledged(shared, index, seq.0, w.count)?;
                        }
                    }
                    tokio::time::sleep(wait.min(shared.remaining())).await;
                    if shared.stop.load(Ordering::Relaxed) {
                        break;
                    }
                    claim(&mut j.writer, index, shared).await?;
                }
                None => return Err(BenchError::Writer { journal: index, reason: format!("write at {seq}: {e}") }),
            },
        }
    }
    shared.latencies_us.lock().expect("lock").extend(latencies);
    Ok(())
}

/// Counts the acknowledged write of `count` records at `seq` of journal `index` (and logs it).
fn acknowledged(shared: &Shared, index: usize, seq: u64, count: u64) -> Result<(), BenchError> {
    if let Some(acks) = shared.acks.get(index) {
        acks.acknowledged(seq, count, Instant::now(), shared.ack_times);
    }
    shared.records.fetch_add(count, Ordering::Relaxed);
    if shared.batches.fetch_add(1, Ordering::Relaxed) == 0 {
        shared.first_ack.lock().expect("lock").get_or_insert_with(Instant::now);
    }
    shared.acked.lock().expect("lock").entry(index).or_default().push((seq, count));
    if let Some(log) = &shared.ack_log {
        // One write per line: a kill then cuts at most the line being written.
        log.lock().expect("lock").write_all(format!("{index} {seq} {count}\n").as_bytes())?;
    }
    Ok(())
}

/// Reads every journal back and checks each acknowledged record at its position, and that
/// every record read names its own position (nothing duplicated or misplaced). Streams: no more
/// than one page is held at a time, so reading a journal larger than memory measures the
/// cell's memory, not the bench's.
pub(super) async fn verify<S>(
    client: &Client<S>,
    journals: &Journals<S>,
    shared: &Shared,
    size: usize,
) -> Result<u64, BenchError>
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    let acked = shared.acked.lock().expect("lock").clone();
    let mut verified = 0;
    for j in journals {
        let j = j.lock().await;
        let mut ranges: Vec<(u64, u64)> = acked.get(&j.index).cloned().unwrap_or_default();
        ranges.sort_unstable();
        let mut pending = ranges.into_iter().peekable();
        let mut foreign = None;
        let mut count = 0u64;
        read_back(client, j.journal.clone(), shared, |seq, record| {
            if foreign.is_none() && *record != record_bytes(j.index, seq, size) {
                foreign = Some(seq);
            }
            // Positions arrive once each, in order: count those inside an acknowledged range
            // (consumed in order as the read passes them). Fewer than acknowledged: some lost.
            while let Some((start, n)) = pending.peek().copied() {
                if seq >= start + n {
                    pending.next();
                    continue;
                }
                if seq >= start {
                    count += 1;
                }
                break;
            }
        })
        .await
        .map_err(BenchError::Verify)?;
        if let Some(seq) = foreign {
            return Err(BenchError::Verify(format!("journal {} holds a foreign record at {seq}", j.index)));
        }
        let want: u64 = acked.get(&j.index).into_iter().flatten().map(|(_, n)| n).sum();
        if count != want {
            return Err(BenchError::Verify(format!(
                "journal {} lost acknowledged records: read back {count} of {want}",
                j.index
            )));
        }
        verified += count;
    }
    Ok(verified)
}

/// Reads every record of `journal` linearizably from the start, handing each to `each` with
/// its position (as [`read_all`], over any service, waiting out a gateway's quota). Positions
/// arrive in increasing order.
pub(super) async fn read_back<S>(
    client: &Client<S>,
    journal: S::Journal,
    shared: &Shared,
    mut each: impl FnMut(u64, &Bytes),
) -> Result<(), String>
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    let mut reader = Reader::new(
        client.clone(),
        journal,
        paros_core::Seq(0),
        ReaderConfig::default(),
        ReadConsistency::Linearizable,
        0,
    )
    .map_err(|e| e.to_string())?;
    loop {
        match reader.next().await {
            Ok(ReaderOutcome::Records { from, records, .. }) => {
                let empty = records.is_empty();
                for (i, r) in records.iter().enumerate() {
                    each(from.0 + i as u64, r);
                }
                if empty || reader.caught_up() {
                    return Ok(());
                }
            }
            Ok(ReaderOutcome::Gap { .. }) => {}
            Err(ReaderError::Denied(denial)) if quota_wait(&denial).is_some() => {
                shared.over_quota.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(quota_wait(&denial).unwrap_or_default()).await;
            }
            Ok(other) => return Err(format!("read at {:?} answered {other:?}", reader.cursor())),
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// How long to wait before asking again, when `e` is the gateway's 429 `over_quota`.
fn over_quota(e: &WriterError) -> Option<Duration> {
    e.denial().and_then(quota_wait)
}

fn quota_wait(denial: &Denial) -> Option<Duration> {
    (denial.status == 429).then(|| Duration::from_secs(denial.retry_after_s.unwrap_or(1).max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The writers wait out the gateway's 429 however the writer reports it, and nothing else.
    #[test]
    fn an_over_quota_denial_is_waited_out_and_another_denial_is_not() {
        let quota = Denial { retry_after_s: Some(3), ..Denial::new(429, "over_quota", "slow down") };
        let denied = WriterError::Denied { denial: quota, ambiguous: false };
        assert_eq!(over_quota(&denied), Some(Duration::from_secs(3)));
        let forbidden = WriterError::Denied { denial: Denial::new(403, "forbidden", "no"), ambiguous: false };
        assert_eq!(over_quota(&forbidden), None);
        assert_eq!(over_quota(&WriterError::NotClaimed), None);
    }
}
