//! A run against the embedded cell, through the node RPC.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use paros_embedded::EmbeddedCell;

use super::drive::{claim_all, drive, verify};
use super::read::{NodeCpu, ReadSetup, TICKS_PER_S};
use super::report::{Report, RoundSplit, Split, report, sum_activity};
use super::{
    BenchArgs, BenchError, IDLE_SETTLE, IDLE_TENANT, bench_journals, cpu_s, named_journals, rss_bytes, shared,
};

pub(super) async fn run_in_cell(args: BenchArgs) -> Result<Report, BenchError> {
    let temp;
    let dir: &Path = match &args.data_dir {
        Some(d) => d,
        None => {
            temp = tempfile::tempdir()?;
            temp.path()
        }
    };
    let opening = Instant::now();
    let defaults = paros_embedded::embedded_tunables().1;
    let shell = paros_node::shell::ShellConfig {
        dormant_after: args.dormant_after,
        idle_spin: args.idle_spin.unwrap_or(defaults.idle_spin),
        spin_round_journals_max: args.spin_round_journals_max.unwrap_or(defaults.spin_round_journals_max),
        read_batch_max: args.read_batch_max.unwrap_or(defaults.read_batch_max),
        read_cache: defaults.read_cache.filter(|_| args.read_cache),
        ..defaults
    };
    let cell = EmbeddedCell::open_replicated(
        dir,
        (paros_embedded::EMBEDDED_MEMBERS, args.replicas),
        paros_registry::daemon::CoordinatorLoopConfig::default(),
        args.store,
        shell,
    )
    .await?;
    let open_s = opening.elapsed().as_secs_f64();
    // A node's storage fault ends the run (the binary exits with 75), whatever it was doing.
    let measured = tokio::select! {
        measured = measure(&cell, &args, opening, open_s) => measured,
        fault = cell.fault() => Err(paros_embedded::CellError::NodeFault(fault).into()),
    };
    let _hosts = cell.stop();
    measured
}

/// The run on the opened `cell`: journals placed and claimed, the writers driven, every
/// acknowledged record read back.
async fn measure(cell: &EmbeddedCell, args: &BenchArgs, opening: Instant, open_s: f64) -> Result<Report, BenchError> {
    let (keys, journals_created, placement) = bench_journals(cell, args.journals, true).await?;
    let placement_s = placement.as_secs_f64();
    let mut dormant_journals = 0;
    let (rss_per_idle_journal_bytes, idle_placement_s) = if args.idle_journals > 0 {
        // Let the bench's own journals settle first, so only the idle ones are counted.
        tokio::time::sleep(IDLE_SETTLE).await;
        let before = rss_bytes("VmRSS:");
        let (_, _, placed) = named_journals(cell, IDLE_TENANT, args.idle_journals, true).await?;
        // Long enough for them to elect, go quiet and (with dormancy) leave memory.
        tokio::time::sleep(IDLE_SETTLE + args.dormant_after.unwrap_or_default()).await;
        dormant_journals = cell.node_stats().iter().map(|s| s.dormant).sum();
        (rss_bytes("VmRSS:").saturating_sub(before) / args.idle_journals as u64, placed.as_secs_f64())
    } else {
        (0, 0.0)
    };
    let shared = shared(args)?;
    let journals = claim_all(&cell.client, keys, &shared, args.in_flight).await?;
    let syncs_before: u64 = cell.node_stats().iter().map(|s| s.syncs).sum();
    let times_before = cell.round_times();
    let probes = cell.store_probes();
    let activity_before = sum_activity(&probes);
    let sampler = {
        let (probes, shared) = (probes.clone(), Arc::clone(&shared));
        tokio::spawn(async move {
            let mut samples = Vec::new();
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            while !shared.stop.load(Ordering::Relaxed) {
                tick.tick().await;
                samples.push(sum_activity(&probes));
            }
            samples
        })
    };
    let threads = paros_gateway::threads::ThreadCpu::default();
    let threads_before = threads.sample();
    let cpu_before = cpu_s();
    let readers = ReadSetup { client: cell.client.clone(), voters: Some(cell.manifest.nodes.clone()) };
    let node_cpu_before = NodeCpu::sample(&cell.manifest.nodes);
    let cached_before = cell.read_cache_counts();
    let hop = (args.readers > 0).then(|| {
        let to = cell.replicas().and_then(|r| r.ids().first().copied()).unwrap_or(cell.manifest.nodes[0]);
        tokio::spawn(hop_probe(cell.bus.clone(), to, Arc::clone(&shared)))
    });
    let (elapsed, reads) = drive(&journals, args, &shared, Some(readers)).await?;
    let cached_after = cell.read_cache_counts();
    let hop = match hop {
        Some(task) => Some(task.await.map_err(|e| BenchError::Reader { journal: 0, reason: e.to_string() })?),
        None => None,
    };
    let node_cpu = node_cpu_before.zip(NodeCpu::sample(&cell.manifest.nodes)).map(|(b, a)| a.since(&b));
    let cpu_spent = cpu_s() - cpu_before;
    let threads_after = threads.sample();
    let syncs_after: u64 = cell.node_stats().iter().map(|s| s.syncs).sum();
    let mut split = paros_node::timing::RoundTimes::default();
    for (after, before) in cell.round_times().iter().zip(&times_before) {
        split.merge(&after.since(before));
    }
    let activity_after = sum_activity(&probes);
    let samples = sampler.await.unwrap_or_default();
    let rss_peak_write_bytes = rss_bytes("VmHWM:");
    // Linux resets the peak resident set on this write: the read-back's peak is its own.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let read_started = Instant::now();
    let verified = verify(&cell.client, &journals, &shared, args.record_bytes).await?;
    let read_back_s = read_started.elapsed().as_secs_f64();
    let rss_peak_read_bytes = rss_bytes("VmHWM:");
    let mut report = report(args, &shared, elapsed, verified);
    report.reads = reads;
    report.node_hop_ms = hop;
    report.reads_from_cache = Some(cached_after.0.saturating_sub(cached_before.0));
    report.reads_cache_declined = Some(cached_after.1.saturating_sub(cached_before.1));
    if let Some((voters, replicas)) = node_cpu
        && report.acked_records > 0
    {
        let per_record = |ticks: u64| ticks as f64 / TICKS_PER_S * 1e6 / report.acked_records as f64;
        report.voter_node_cpu_us_per_record = Some(per_record(voters));
        report.replica_node_cpu_us_per_record = replicas.map(per_record);
    }
    report.cpu_us_per_record =
        if report.acked_records > 0 { cpu_spent * 1e6 / report.acked_records as f64 } else { 0.0 };
    if report.acked_records > 0 {
        let roles = paros_gateway::threads::ROLES.iter().zip(threads_before.iter().zip(threads_after));
        for (role, (b, a)) in roles {
            report.target_cpu_split.insert((*role).to_owned(), (a - b).max(0.0) * 1e6 / report.acked_records as f64);
        }
        report.target_cpu_us_per_record = report.target_cpu_split.values().sum();
    }
    report.open_s = open_s;
    report.first_write_s =
        shared.first_ack.lock().expect("lock").map_or(0.0, |t| t.duration_since(opening).as_secs_f64());
    report.rss_peak_write_bytes = rss_peak_write_bytes;
    report.rss_peak_read_bytes = rss_peak_read_bytes;
    report.read_back_s = read_back_s;
    let syncs = (syncs_after - syncs_before) as f64;
    let nodes = 3.0;
    report.fsyncs_per_s = syncs / elapsed;
    report.records_per_fsync = if syncs > 0.0 { report.acked_records as f64 / (syncs / nodes) } else { 0.0 };
    report.placement_s = placement_s;
    report.journals_created = journals_created;
    report.idle_journals = args.idle_journals;
    report.rss_peak_bytes = rss_peak_write_bytes.max(rss_peak_read_bytes);
    report.rss_per_idle_journal_bytes = rss_per_idle_journal_bytes;
    report.idle_placement_s = idle_placement_s;
    report.dormant_journals = dormant_journals;
    report.round_split = RoundSplit {
        rounds: split.write.count(),
        queue: Split::of(&split.queue),
        write: Split::of(&split.write),
        sync: Split::of(&split.sync),
        hop: Split::of(&split.hop),
    };
    report.store_compactions = activity_after.compactions_completed - activity_before.compactions_completed;
    report.store_compacting_s = (activity_after.compacting_us - activity_before.compacting_us) as f64 / 1e6;
    report.store_room_waits = activity_after.room_waits - activity_before.room_waits;
    report.store_room_waited_s = (activity_after.room_waited_us - activity_before.room_waited_us) as f64 / 1e6;
    let mut done_before = activity_before.compactions_completed;
    for (w, a) in report.windows.iter_mut().zip(&samples) {
        w.compactions_active = a.compactions_active;
        w.flushes_outstanding = a.flushes_outstanding;
        w.log_l0_tables = a.log_l0_tables;
        w.compactions_done = a.compactions_completed.saturating_sub(done_before);
        done_before = a.compactions_completed;
    }
    Ok(report)
}

/// Times, every 2 ms while the run lasts, a request node `to` answers at once on its thread: a
/// read of a journal it does not host (`UnknownJournal`, no step work). The round trip to a
/// node's thread and back under the run's load: the least any read that asks another thread
/// (a linearizable read asks a quorum) can take here.
async fn hop_probe<R: paros_node::rpc::Rpc>(
    bus: R,
    to: paros_core::NodeId,
    shared: Arc<super::Shared>,
) -> super::report::HopMs {
    use paros_node::rpc::NodeRequest;
    let journal = paros_core::JournalKey { tenant: paros_core::TenantId(u64::MAX), journal: paros_core::JournalId(0) };
    let read = paros_core::ReadRequest {
        from: paros_core::Seq(0),
        limit: 1,
        max_bytes: 0,
        wait_ticks: 0,
        consistency: paros_core::Consistency::Reached(paros_core::Seq(0)),
    };
    let mut took = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(2));
    let mut id = u64::MAX / 2;
    while !shared.stop.load(Ordering::Relaxed) {
        tick.tick().await;
        id += 1;
        let request = NodeRequest::Read { journal, id: paros_core::ReadId(id), read };
        let started = Instant::now();
        if bus.request(to, request, Duration::from_secs(1)).await.is_ok() {
            took.push(u32::try_from(started.elapsed().as_nanos()).unwrap_or(u32::MAX));
        }
    }
    took.sort_unstable();
    let ms = |q: f64| super::report::percentile(&took, q) as f64 / 1e6;
    super::report::HopMs { probes: took.len() as u64, p50: ms(0.5), p99: ms(0.99) }
}
