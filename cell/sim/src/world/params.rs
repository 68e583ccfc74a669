//! Everything a seed decides about a world before it runs: its shape, its faults, its clients.

use std::time::Duration;

use paros_client::{CheckpointerConfig, ClientConfig};
use paros_core::Tunables;
use paros_core::journal::WriterMode;

use crate::client::{AppenderParams, CheckpointParams, ProberParams, ReaderParams, WriterParams};
use crate::rng::SimRng;

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

/// Network faults.
#[derive(Clone, Copy, Debug)]
pub struct NetParams {
    pub drop_ppm: u64,
    pub dup_ppm: u64,
    pub delay_ns: (u64, u64),
    /// Chance of a much longer delay (reordering across many rounds).
    pub spike_ppm: u64,
    pub spike_ns: (u64, u64),
    /// Extra loss of `Accept` messages only (contested slots for later campaigns).
    pub accept_drop_ppm: u64,
}

impl NetParams {
    /// The fault-free network of the settle tail.
    #[must_use]
    pub fn calm(&self) -> NetParams {
        NetParams { drop_ppm: 0, dup_ppm: 0, spike_ppm: 0, accept_drop_ppm: 0, ..*self }
    }
}

/// One long outage: a machine down from `start_ns` for `len_ns` while the cluster goes on.
#[derive(Clone, Copy, Debug)]
pub struct Outage {
    pub start_ns: u64,
    pub len_ns: u64,
}

/// One workload: a writer (or, on a multi-writer journal, its appenders), its readers and maybe a
/// prober on one journal.
#[derive(Clone, Debug)]
pub struct WorkloadParams {
    pub journal: usize,
    /// The writer of a single-writer journal (drawn on every workload, used on those only).
    pub writer: WriterParams,
    /// The racing appenders of a multi-writer journal (two or three; none on a single-writer one).
    pub appenders: Vec<AppenderParams>,
    pub readers: Vec<ReaderParams>,
    pub prober: Option<ProberParams>,
}

/// A world's shape and schedule, all drawn from the seed.
#[derive(Clone, Debug)]
pub struct Params {
    pub voters: usize,
    pub replicas: usize,
    /// For each journal, the indices of the voters it is placed on (replicas learn every journal).
    pub placements: Vec<Vec<usize>>,
    /// For each journal, its writer mode.
    pub modes: Vec<WriterMode>,
    pub workloads: Vec<WorkloadParams>,
    pub tick_ns: u64,
    pub tunables: Tunables,
    pub alive_ticks: u32,
    pub suspect_ticks: u32,
    /// Ticks of quiet before a journal goes dormant on a machine (`None`: never).
    pub dormant_after_ticks: Option<u64>,
    /// Machines publish their journals' windows and serve `at_least` reads from them at once,
    /// as the embedded cell's readers do ([`paros_node::ReadCache`]); else every read goes
    /// through the node's steps.
    pub read_cache: bool,
    pub net: NetParams,
    pub fsync_ns: (u64, u64),
    /// How long a machine's read workers take to answer the store reads a step handed out.
    pub read_ns: (u64, u64),
    pub sync_fail_ppm: u64,
    /// Pause between random crashes (`None`: no random crashes) and how long one lasts.
    pub crash_gap_ns: Option<(u64, u64)>,
    pub down_ns: (u64, u64),
    pub voter_outage: Option<Outage>,
    pub replica_outage: Option<Outage>,
    /// Chance a replica comes back with an empty disk.
    pub wipe_replica_ppm: u64,
    /// When a new replica joins the tier (`None`: none joins): a machine never seen before
    /// boots on an empty disk and is registered on the tier.
    pub replica_join_ns: Option<u64>,
    /// A replica removed from the tier (retired) during the run, and when: an index into the
    /// replicas there from the start, or `replicas` for the one that joined.
    pub replica_leave: Option<(usize, u64)>,
    pub partition_gap_ns: Option<(u64, u64)>,
    /// Leader churn: partitions come often, are short, and always cut a leader off alone, so
    /// proposals are left accepted by minorities at many ballots.
    pub leader_churn: bool,
    pub partition_len_ns: (u64, u64),
    pub chaos_ns: u64,
    /// Clients keep working this long into the settle tail, then start nothing new.
    pub settle_work_ns: u64,
    /// The settle tail ends by this long after the chaos at the latest.
    pub settle_max_ns: u64,
    pub call_timeout_ns: u64,
    pub client_wake_ns: u64,
}

impl Params {
    /// The world of `seed`.
    #[must_use]
    pub fn draw(rng: &mut SimRng) -> Params {
        let voters = rng.between(3, 5) as usize;
        let replicas = rng.between(0, 2) as usize;
        let journals = rng.between(1, 4) as usize;
        let placements = (0..journals)
            .map(|_| {
                let mut all: Vec<usize> = (0..voters).collect();
                if voters > 3 && rng.chance(500_000) {
                    rng.shuffle(&mut all);
                    all.truncate(3);
                    all.sort_unstable();
                }
                all
            })
            .collect();
        let mut workloads: Vec<WorkloadParams> = (0..rng.between(1, 3))
            .map(|_| WorkloadParams {
                journal: rng.below(journals as u64) as usize,
                writer: draw_writer(rng),
                appenders: Vec::new(),
                readers: (0..rng.between(1, 2)).map(|_| draw_reader(rng)).collect(),
                prober: draw_prober(rng),
            })
            .collect();
        // Writer modes and appenders draw from a side stream of their own (added after seeds were
        // published): a seed whose journals all stay single-writer runs as it did before.
        let mut multi = rng.side(0x6d75_6c74_6977_7269);
        let modes: Vec<WriterMode> = (0..journals)
            .map(|_| if multi.chance(MULTI_WRITER_PPM) { WriterMode::Multi } else { WriterMode::Single })
            .collect();
        for wl in &mut workloads {
            if modes[wl.journal] == WriterMode::Multi {
                wl.appenders = (0..multi.between(2, 3)).map(|_| draw_appender(&mut multi)).collect();
            }
        }
        // The in-memory window and anchor stride draw from a side stream of their own (knobs
        // added after seeds were published): most seeds keep a window of a few slots, so
        // catch-up, old pages and retries below it go through the store.
        let mut memory = rng.side(0x7769_6e64_6f77);
        let (window_slots, window_bytes, anchor_slots, anchor_bytes) = if memory.chance(750_000) {
            (
                memory.between(0, 8) as u32,
                memory.between(0, 512) as u32,
                memory.between(1, 12) as u32,
                memory.between(16, 1024) as u32,
            )
        } else {
            let d = Tunables::default();
            (d.window_slots, d.window_bytes, d.anchor_slots, d.anchor_bytes)
        };
        // The index of evicted writes' positions, from a side stream of its own (added after
        // seeds were published): most seeds keep a few, so reads below the window go both
        // through the index and, past it, through the anchors.
        let mut index = rng.side(0x0065_7669_6374_6564);
        let evicted_writes_max =
            if index.chance(750_000) { index.between(0, 6) as u32 } else { Tunables::default().evicted_writes_max };
        // Dormancy, from the same side stream: most seeds put quiet journals to sleep within a
        // few ticks, so waking from the disk happens all the time.
        let dormant_after_ticks = if memory.chance(700_000) { Some(memory.between(2, 40)) } else { None };
        // Catch-up pages bounded by bytes too, in most seeds a few records' worth, from a side
        // stream of their own (added after seeds were published).
        let mut pages = rng.side(0x6361_7463_6875_7062);
        // Reads served from the machines' read caches in most seeds, from a side stream of its
        // own (added after seeds were published).
        let read_cache = rng.side(0x7265_6164_6361_6368).chance(700_000);
        let catch_up_bytes_max =
            if pages.chance(600_000) { pages.between(16, 512) as u32 } else { Tunables::default().catch_up_bytes_max };
        let tunables = Tunables {
            window_slots,
            window_bytes,
            anchor_slots,
            anchor_bytes,
            evicted_writes_max,
            election_ticks_min: 10,
            election_ticks_max: 20,
            pipeline_slots_max: rng.between(4, 64) as u32,
            calls_max: 256,
            call_ticks_max: 30,
            catch_up_slots_max: rng.between(4, 64) as u32,
            catch_up_bytes_max,
            catch_up_ticks: 2,
            read_ticks_max: 20,
            reads_max: 64,
            page_records_max: 16,
            page_bytes_max: rng.between(128, 2048) as u32,
            wait_ticks_max: 10,
            ..Tunables::default()
        };
        let chaos_ns = rng.between(15, 25) * S;
        let outage = |rng: &mut SimRng| {
            rng.chance(700_000).then(|| Outage {
                start_ns: rng.between(chaos_ns / 10, chaos_ns * 3 / 10),
                len_ns: rng.between(chaos_ns * 35 / 100, chaos_ns * 60 / 100),
            })
        };
        let voter_outage = outage(rng);
        // Knobs added after seeds were published draw from a side stream (see `SimRng::side`).
        let mut side = rng.side(0x636f_6e74_6573_7473);
        let leader_churn = side.chance(450_000);
        let accept_drop_ppm = if leader_churn || side.chance(300_000) { side.between(100_000, 500_000) } else { 0 };
        let replica_outage = if replicas > 0 { outage(rng) } else { None };
        let churn_gap_ns = (150 * MS, side.between(300, 800) * MS);
        let (replica_join_ns, replica_leave) = draw_tier_changes(&mut rng.side(TIER_CHANGES_SALT), replicas, chaos_ns);
        let churn_len_ns = (100 * MS, side.between(200, 500) * MS);
        Params {
            voters,
            replicas,
            placements,
            modes,
            workloads,
            tick_ns: 10 * MS,
            tunables,
            dormant_after_ticks,
            read_cache,
            alive_ticks: 3,
            suspect_ticks: 25,
            net: NetParams {
                drop_ppm: rng.between(0, 50_000),
                dup_ppm: rng.between(0, 20_000),
                delay_ns: (100_000, rng.between(1, 5) * MS),
                spike_ppm: rng.between(0, 20_000),
                spike_ns: (20 * MS, 300 * MS),
                accept_drop_ppm,
            },
            fsync_ns: (50_000, rng.between(500_000, 3 * MS)),
            read_ns: (20_000, 400_000),
            sync_fail_ppm: if rng.chance(500_000) { rng.between(20, 400) } else { 0 },
            crash_gap_ns: rng.chance(800_000).then(|| (S / 2, rng.between(2, 6) * S)),
            down_ns: (50 * MS, rng.between(500, 3000) * MS),
            voter_outage,
            replica_outage,
            wipe_replica_ppm: 300_000,
            replica_join_ns,
            replica_leave,
            // The main stream draws these whatever the side stream decided, in their old order.
            partition_gap_ns: {
                let main = rng.chance(600_000).then(|| (S, rng.between(2, 6) * S));
                if leader_churn { Some(churn_gap_ns) } else { main }
            },
            partition_len_ns: {
                let main = (100 * MS, rng.between(500, 3000) * MS);
                if leader_churn { churn_len_ns } else { main }
            },
            leader_churn,
            chaos_ns,
            settle_work_ns: 3 * S,
            settle_max_ns: 40 * S,
            call_timeout_ns: 800 * MS,
            client_wake_ns: rng.between(2, 8) * MS,
        }
    }
}

/// The side stream the tier's changes during a run draw from.
const TIER_CHANGES_SALT: u64 = 0x7469_6572_6368_6e67;

/// Whether a replica joins the tier during the run, and when; whether one leaves it, which and
/// when. A replica leaves while the chaos runs and readers use it; the one that joined leaves
/// only seconds after it joined, so it may have served first.
fn draw_tier_changes(side: &mut SimRng, replicas: usize, chaos_ns: u64) -> (Option<u64>, Option<(usize, u64)>) {
    let join = side.chance(450_000).then(|| side.between(chaos_ns * 5 / 100, chaos_ns * 40 / 100));
    let leave_at = side.between(chaos_ns * 30 / 100, chaos_ns * 70 / 100);
    let mut candidates: Vec<usize> = (0..replicas).collect();
    if join.is_some_and(|at| at + 3 * S <= leave_at) {
        candidates.push(replicas);
    }
    let leave = (side.chance(450_000) && !candidates.is_empty()).then(|| (*side.pick(&candidates), leave_at));
    (join, leave)
}

/// The bounds of a client's calls: a dozen attempts, a backoff of a few ms doubling to at most
/// tens of ms (within the progress audit's retry window), a deadline of seconds.
fn draw_call_config(side: &mut SimRng) -> ClientConfig {
    ClientConfig {
        attempts_max: 12,
        redirects_max: 8,
        backoff_base: Duration::from_millis(2),
        backoff_max: Duration::from_millis(side.between(10, 25)),
        deadline: Duration::from_secs(side.between(6, 12)),
        ..ClientConfig::default()
    }
}

/// Half the writers are checkpointers: they fold their journal, append a run when it is due
/// and truncate to its `Begin`.
fn draw_checkpoint(side: &mut SimRng) -> Option<CheckpointParams> {
    side.chance(500_000).then(|| CheckpointParams {
        config: CheckpointerConfig {
            factor: side.between(2, 30),
            interval_records: side.between(8, 80),
            chunk_bytes: side.between(3, 20) as usize,
        },
        run_batch_max: side.between(1, 4),
    })
}

fn draw_writer(rng: &mut SimRng) -> WriterParams {
    // Knobs of the library's clients draw from a side stream: the world's older draws stay.
    let mut side = rng.side(0x6c69_6272_6172_7977);
    WriterParams {
        pipeline: rng.between(1, 4) as usize,
        batch_records_max: rng.between(1, 5),
        record_bytes_max: 24,
        batch_gap_ns: (2 * MS, rng.between(10, 80) * MS),
        term_batches: (20, rng.between(50, 400)),
        abandon_ppm: rng.between(0, 10_000),
        truncate_gap_ns: (rng.between(200, 500) * MS, rng.between(600, 2000) * MS),
        claims_max: 12,
        idle_ns: (50 * MS, S),
        changed_bytes_ppm: draw_probe_ppm(rng),
        moved_batch_ppm: draw_probe_ppm(rng),
        past_tail_ppm: draw_probe_ppm(rng),
        call: draw_call_config(&mut side),
        checkpoint: draw_checkpoint(&mut side),
        sub_range_ppm: draw_probe_ppm(&mut side),
    }
}

/// A writer's chance per batch of one kind of probe: none on a quarter of the writers.
fn draw_probe_ppm(rng: &mut SimRng) -> u64 {
    if rng.chance(250_000) { 0 } else { rng.between(10_000, 150_000) }
}

/// The chance of a journal being multi-writer: one in three, so single-writer journals stay the
/// majority.
const MULTI_WRITER_PPM: u64 = 333_333;

/// An appender of a multi-writer journal: batches like a writer's, at-least-once re-appends of
/// most ambiguous batches, now and then a stray `seq`, truncations on half of them, and the
/// wrong-mode and empty-append probes on most.
fn draw_appender(side: &mut SimRng) -> AppenderParams {
    AppenderParams {
        pipeline: side.between(1, 3) as usize,
        batch_records_max: side.between(1, 4),
        record_bytes_max: 24,
        batch_gap_ns: (2 * MS, side.between(10, 80) * MS),
        reappend_ppm: side.between(500_000, 1_000_000),
        appends_per_batch_max: 3,
        stray_seq_ppm: side.between(0, 200_000),
        truncate_gap_ns: side.chance(500_000).then(|| (side.between(200, 500) * MS, side.between(600, 2000) * MS)),
        wrong_mode_ppm: if side.chance(250_000) { 0 } else { side.between(10_000, 60_000) },
        empty_append_ppm: if side.chance(250_000) { 0 } else { side.between(5_000, 30_000) },
        call: draw_call_config(side),
    }
}

/// Three workloads in four have a prober.
fn draw_prober(rng: &mut SimRng) -> Option<ProberParams> {
    rng.chance(750_000).then(|| ProberParams {
        gap_ns: (20 * MS, rng.between(50, 400) * MS),
        linearizable_pct: rng.between(30, 90),
        limit_max: rng.between(1, 20) as u32,
        bytes_max: rng.between(16, 2048) as u32,
        wait_ticks_max: rng.between(0, 5) as u32,
        in_flight_max: rng.between(1, 4) as usize,
        trim_race_ppm: rng.between(300_000, 1_000_000),
    })
}

fn draw_reader(rng: &mut SimRng) -> ReaderParams {
    let mut side = rng.side(0x6c69_6272_6172_7972);
    ReaderParams {
        linearizable_pct: rng.between(40, 100),
        limit_max: rng.between(1, 16) as u32,
        wait_ticks_max: rng.between(0, 5) as u32,
        poll_gap_ns: (5 * MS, 50 * MS),
        pause_ppm: rng.between(0, 20_000),
        pause_ns: (500 * MS, 5 * S),
        bytes_max: side.between(16, 4096) as u32,
        backoff: draw_call_config(&mut side),
    }
}
