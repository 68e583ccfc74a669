//! The readers (`--readers`), beside the writers. Half of them (rounded up) are tail readers:
//! each follows one bench journal from its tail with paros-client's `Reader`, long-polling, and
//! times how long after the writer's acknowledgement each record shows. The others are random
//! readers: each reads one page at a random acknowledged position of its journal, again and
//! again, with the run's consistency, noting which server answered.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use paros_client::{Client, JournalService, ReadAnswer, ReadConsistency, ReadDeadline, ReadParams, ReaderConfig};
use paros_client::{ReaderError, ReaderOutcome};
use paros_core::{Consistency, NodeId, Seq};
use serde::Serialize;

use super::{BenchError, ReadMode, Shared, record_bytes};

/// Acknowledgements the bench keeps the instant of, per journal (the oldest are dropped): a
/// tail reader finds its record's among the newest.
pub(super) const ACK_TIMES_MAX: usize = 1 << 16;

/// Records a tail reader saw before their writer's acknowledgement was counted, kept per
/// reader until the run ends to be checked against the acknowledged range (the rest dropped).
const EARLY_SIGHTINGS_MAX: usize = 1 << 16;

/// One bench journal's acknowledgements, as the writers count them and the readers read them.
#[derive(Debug, Default)]
pub(super) struct JournalAcks {
    /// The position after the last acknowledged record: every position below it that the run
    /// wrote was acknowledged (a journal's writes are acknowledged in order). The claim's tail
    /// before the run's first acknowledgement.
    pub next: AtomicU64,
    /// `(first position, records, when)` of the newest acknowledged writes, oldest first (only
    /// kept when there are readers).
    times: Mutex<VecDeque<(u64, u64, Instant)>>,
}

impl JournalAcks {
    /// Counts the write of `count` records at `seq`, acknowledged `at`; its instant is kept
    /// when `timed`.
    pub(super) fn acknowledged(&self, seq: u64, count: u64, at: Instant, timed: bool) {
        self.next.fetch_max(seq + count, Ordering::Relaxed);
        if timed {
            let mut times = self.times.lock().expect("lock");
            if times.len() >= ACK_TIMES_MAX {
                times.pop_front();
            }
            times.push_back((seq, count, at));
        }
    }

    /// When the record at `seq` was acknowledged, as far as the kept instants tell.
    fn acked_at(&self, seq: u64) -> Acked {
        let times = self.times.lock().expect("lock");
        let i = times.partition_point(|(s, n, _)| s + n <= seq);
        match times.get(i) {
            Some((s, _, at)) if *s <= seq => Acked::At(*at),
            Some(_) => Acked::Dropped,
            None => Acked::NotYet,
        }
    }
}

/// What the kept instants tell of a position's acknowledgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Acked {
    /// Acknowledged then.
    At(Instant),
    /// Before the oldest instant kept.
    Dropped,
    /// Past the newest: not acknowledged yet, as far as the bench counted.
    NotYet,
}

/// What the readers need besides the shared state: their client, and the cell's voters when
/// the service names the server that answered (in the cell; `None` over HTTP).
#[derive(Debug)]
pub(super) struct ReadSetup<S: JournalService> {
    pub client: Client<S>,
    pub voters: Option<Vec<NodeId>>,
}

/// One reader's counts, merged over the readers at the end.
#[derive(Debug, Default)]
pub(super) struct ReadStats {
    /// Pages served to the random readers, and their records.
    reads: u64,
    read_records: u64,
    /// Random reads not served within their deadline (or answered with no page).
    unserved: u64,
    /// Random reads whose server was named, and those of them not served by a voter.
    served_named: u64,
    served_by_replica: u64,
    /// Latency of the random reads served, in µs.
    latency: Samples,
    /// From a record's acknowledgement to a tail reader seeing it, in µs.
    tail_visible: Samples,
    /// Positions tail readers saw before their acknowledgement was counted, by journal index.
    early: Vec<(usize, u64)>,
    /// Of `tail_visible`, records seen before their acknowledgement was counted.
    seen_first: u64,
    /// Pages of records the tail readers' follows returned.
    tail_pages: u64,
}

impl ReadStats {
    fn merge(&mut self, other: ReadStats) {
        self.reads += other.reads;
        self.read_records += other.read_records;
        self.unserved += other.unserved;
        self.served_named += other.served_named;
        self.served_by_replica += other.served_by_replica;
        self.latency.merge(other.latency);
        self.tail_visible.merge(other.tail_visible);
        self.early.extend(other.early);
        self.seen_first += other.seen_first;
        self.tail_pages += other.tail_pages;
    }
}

/// Durations in ns (up to about 4.3 s), every one kept (as the writes' are): the figures are
/// exact quantiles, where a bucketed histogram's eighth of a power of two hid differences the
/// read targets ask about; and a read answered from a read cache takes well under a µs.
#[derive(Debug, Default)]
struct Samples(Vec<u32>);

impl Samples {
    fn record(&mut self, took: Duration) {
        self.0.push(u32::try_from(took.as_nanos()).unwrap_or(u32::MAX));
    }

    fn merge(&mut self, other: Samples) {
        self.0.extend(other.0);
    }

    fn count(&self) -> u64 {
        self.0.len() as u64
    }

    /// Sorted, for [`super::report::percentile`].
    fn sorted(mut self) -> Vec<u32> {
        self.0.sort_unstable();
        self.0
    }
}

/// Two quantiles and the largest, in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct LatencyMs {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

/// The median and the 99th percentile, in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct VisibleMs {
    pub p50: f64,
    pub p99: f64,
}

/// The report's figures of the readers (`--readers` above 0).
#[derive(Clone, Debug, Serialize)]
pub struct ReadFigures {
    /// Readers: tail readers (half, rounded up) and random readers.
    pub readers: usize,
    /// The random readers' consistency (and the tail readers': `at_least` follows monotonically).
    pub consistency: ReadMode,
    /// Pages served to the random readers, and the records they held; each asked for at most
    /// `read_limit` records.
    pub reads: u64,
    pub read_records: u64,
    pub reads_per_s: f64,
    pub read_limit: u32,
    /// Pages of records the tail readers' long-polls returned, per second, and every reader's
    /// pages per second (random and tail).
    pub tail_reads_per_s: f64,
    pub all_reads_per_s: f64,
    /// Latency of the random readers' served reads.
    pub read_latency_ms: LatencyMs,
    /// Random reads not served within `--read-deadline-ms`.
    pub reads_unserved: u64,
    /// The random readers' pace, all together (`--reads-per-s`; `null`: a closed loop).
    pub reads_per_s_paced: Option<u64>,
    /// From the writer's acknowledgement of a record to a tail reader seeing it (0 when the
    /// reader saw it first).
    pub tail_visible_ms: VisibleMs,
    /// Records the tail readers timed, and the share of them seen before the writer counted
    /// their acknowledgement (timed 0).
    pub tail_records: u64,
    pub tail_seen_first_share: f64,
    /// The share of served random reads answered by a server that is not a voter; `null` when
    /// the service does not name who answered (over HTTP).
    pub served_by_replica_share: Option<f64>,
    /// CPU of the voters' node threads (`paros-node-{id}`) during the run per acknowledged
    /// record, in µs; `null` where `/proc` has no threads or they are not in this process.
    pub voter_cpu_us_per_record: Option<f64>,
    /// The same for the other `paros-node-*` threads (replicas); `null` when there were none.
    pub replica_cpu_us_per_record: Option<f64>,
}

/// The readers as they run.
pub(super) struct Readers {
    tasks: Vec<tokio::task::JoinHandle<Result<ReadStats, BenchError>>>,
    /// The random reads' `limit`.
    limit: u32,
    paced: Option<u64>,
    cpu_before: Option<NodeCpu>,
    voters: Option<Vec<NodeId>>,
}

/// How many readers, and the random readers' pages a second, all together (`None`: a
/// closed loop).
#[derive(Clone, Copy, Debug)]
pub(super) struct Pace {
    pub readers: usize,
    pub reads_per_s: Option<u64>,
}

/// Starts `pace.readers` readers over `journals` (`(index, journal)` of the journals the
/// writers write), round-robin; the first half (rounded up) follow the tail, the others read at
/// random, at `pace.reads_per_s` shared evenly between them when it is given.
pub(super) fn start<S>(
    setup: ReadSetup<S>,
    journals: &[(usize, S::Journal)],
    pace: Pace,
    mode: ReadMode,
    deadline: Duration,
    (record_bytes, limit): (usize, Option<u32>),
    shared: &Arc<Shared>,
) -> Readers
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    let cpu_before = setup.voters.as_deref().and_then(NodeCpu::sample);
    let count = pace.readers;
    let tails = count.div_ceil(2);
    let limit = limit.unwrap_or(ReaderConfig::default().page_records_max);
    // Each random reader's interval between reads.
    let every = pace.reads_per_s.map(|n| Duration::from_secs_f64((count - tails).max(1) as f64 / n as f64));
    let mut tasks = Vec::new();
    for r in 0..count {
        let (index, journal) = journals[r % journals.len()].clone();
        let (client, shared) = (setup.client.clone(), Arc::clone(shared));
        let voters = setup.voters.clone();
        tasks.push(if r < tails {
            tokio::spawn(async move { tail_loop(client, journal, index, mode, deadline, &shared).await })
        } else {
            let check = Check { index, record_bytes, limit, every };
            tokio::spawn(async move {
                random_loop(client, journal, check, mode, deadline, voters.as_deref(), &shared).await
            })
        });
    }
    Readers { tasks, limit, paced: pace.reads_per_s, cpu_before, voters: setup.voters }
}

impl Readers {
    /// Waits for the readers (the run stopped and the writers are done) and sums them up.
    pub(super) async fn finish(
        self,
        shared: &Shared,
        readers: usize,
        mode: ReadMode,
        elapsed: f64,
    ) -> Result<ReadFigures, BenchError> {
        let cpu_after = self.voters.as_deref().and_then(NodeCpu::sample);
        let mut stats = ReadStats::default();
        for t in self.tasks {
            stats.merge(t.await.map_err(|e| BenchError::Reader { journal: 0, reason: e.to_string() })??);
        }
        // Seen before the writer's acknowledgement was counted: visible at once, if it was
        // acknowledged at all.
        for (index, seq) in std::mem::take(&mut stats.early) {
            if shared.acks.get(index).is_some_and(|a| seq < a.next.load(Ordering::Relaxed)) {
                stats.tail_visible.record(Duration::ZERO);
                stats.seen_first += 1;
            }
        }
        let per_s = |n: u64| if elapsed > 0.0 { n as f64 / elapsed } else { 0.0 };
        let acked = shared.records.load(Ordering::Relaxed);
        let per_record = |ticks: u64| (acked > 0).then(|| ticks as f64 / TICKS_PER_S * 1e6 / acked as f64);
        let (voter_cpu, replica_cpu) = match (self.cpu_before, cpu_after) {
            (Some(before), Some(after)) => {
                let (voters, replicas) = after.since(&before);
                (per_record(voters), replicas.and_then(per_record))
            }
            _ => (None, None),
        };
        let tail_records = stats.tail_visible.count();
        let latency = std::mem::take(&mut stats.latency).sorted();
        let visible = std::mem::take(&mut stats.tail_visible).sorted();
        let ms = |sorted: &[u32], q: f64| super::report::percentile(sorted, q) as f64 / 1e6;
        Ok(ReadFigures {
            readers,
            consistency: mode,
            reads: stats.reads,
            read_records: stats.read_records,
            reads_per_s: per_s(stats.reads),
            read_limit: self.limit,
            tail_reads_per_s: per_s(stats.tail_pages),
            all_reads_per_s: per_s(stats.reads + stats.tail_pages),
            read_latency_ms: LatencyMs {
                p50: ms(&latency, 0.50),
                p90: ms(&latency, 0.90),
                p99: ms(&latency, 0.99),
                max: ms(&latency, 1.0),
            },
            reads_unserved: stats.unserved,
            reads_per_s_paced: self.paced,
            tail_visible_ms: VisibleMs { p50: ms(&visible, 0.50), p99: ms(&visible, 0.99) },
            tail_records,
            tail_seen_first_share: if tail_records > 0 { stats.seen_first as f64 / tail_records as f64 } else { 0.0 },
            served_by_replica_share: (stats.served_named > 0)
                .then(|| stats.served_by_replica as f64 / stats.served_named as f64),
            voter_cpu_us_per_record: voter_cpu,
            replica_cpu_us_per_record: replica_cpu,
        })
    }
}

/// A tail reader: follows `journal` from the tail the writers started at, until the run stops.
async fn tail_loop<S>(
    client: Client<S>,
    journal: S::Journal,
    index: usize,
    mode: ReadMode,
    deadline: Duration,
    shared: &Shared,
) -> Result<ReadStats, BenchError>
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    let fail = |reason: String| BenchError::Reader { journal: index, reason };
    let acks = &shared.acks[index];
    let from = Seq(acks.next.load(Ordering::Relaxed));
    let consistency = match mode {
        ReadMode::AtLeast => ReadConsistency::Monotonic,
        ReadMode::Linearizable => ReadConsistency::Linearizable,
    };
    let wait_ms = u32::try_from(deadline.as_millis()).unwrap_or(u32::MAX).clamp(1, 1000);
    let mut reader = client
        .reader(journal)
        .from(from)
        .consistency(consistency)
        .follow_wait_ms(wait_ms)
        .wait_past_tail(true)
        .build()
        .map_err(|e| fail(e.to_string()))?;
    // A follow returns only with records: it is cut off after a long-poll and a read's deadline
    // (and at the run's end), and asked again while the run lasts.
    let bound = deadline + Duration::from_millis(u64::from(wait_ms));
    let mut stats = ReadStats::default();
    while !shared.stop.load(Ordering::Relaxed) && !shared.remaining().is_zero() {
        let Ok(outcome) = tokio::time::timeout(bound.min(shared.remaining()), reader.follow()).await else {
            continue;
        };
        match outcome {
            Ok(ReaderOutcome::Records { from, records, .. }) => {
                let seen = Instant::now();
                stats.tail_pages += 1;
                for seq in (from.0..).take(records.len()) {
                    match acks.acked_at(seq) {
                        Acked::At(at) => {
                            stats.tail_visible.record(seen.saturating_duration_since(at));
                        }
                        Acked::NotYet if stats.early.len() < EARLY_SIGHTINGS_MAX => stats.early.push((index, seq)),
                        // Acknowledged so long ago its instant was dropped (or more sightings
                        // ahead of their acknowledgements than are kept).
                        Acked::NotYet | Acked::Dropped => {}
                    }
                }
            }
            Ok(ReaderOutcome::Gap { .. }) => {}
            Err(ReaderError::Denied(denial)) if denial.status == 429 => {
                shared.over_quota.fetch_add(1, Ordering::Relaxed);
                let wait = Duration::from_secs(denial.retry_after_s.unwrap_or(1).max(1));
                tokio::time::sleep(wait.min(shared.remaining())).await;
            }
            Ok(other) => return Err(fail(format!("following at {:?}: {other:?}", reader.cursor()))),
            Err(e) => return Err(fail(format!("following at {:?}: {e}", reader.cursor()))),
        }
    }
    Ok(stats)
}

/// What a random reader checks a page's first record against: its journal's index and the
/// run's record size.
#[derive(Clone, Copy, Debug)]
struct Check {
    index: usize,
    record_bytes: usize,
    /// The most records one read asks for.
    limit: u32,
    /// The interval between this reader's reads (`None`: the next as soon as one comes back).
    every: Option<Duration>,
}

/// An open loop's clock: one read due every `every`. Timers fire at a millisecond's grain, so
/// a reader whose interval is shorter reads what fell due while it slept back to back; one that
/// fell behind by more than [`PACE_BEHIND_MAX`] forgets the rest (no burst after a stall).
struct Pacer {
    every: Duration,
    next: Instant,
}

/// How far behind its pace a reader may catch up.
const PACE_BEHIND_MAX: Duration = Duration::from_millis(10);

impl Pacer {
    async fn wait(&mut self) {
        let now = Instant::now();
        if self.next > now {
            tokio::time::sleep_until(self.next.into()).await;
        }
        self.next = self.next.max(Instant::now().checked_sub(PACE_BEHIND_MAX).unwrap_or(self.next)) + self.every;
    }
}

/// A random reader: one page at a random acknowledged position at a time, until the run stops.
async fn random_loop<S>(
    client: Client<S>,
    journal: S::Journal,
    check: Check,
    mode: ReadMode,
    deadline: Duration,
    voters: Option<&[NodeId]>,
    shared: &Shared,
) -> Result<ReadStats, BenchError>
where
    S: JournalService + 'static,
    S::Journal: 'static,
{
    let index = check.index;
    let fail = |reason: String| BenchError::Reader { journal: index, reason };
    let acks = &shared.acks[index];
    let page = ReaderConfig::default();
    let mut rng = paros_core::rng::Rng::new(client.draw());
    let mut first = 0u64;
    let mut stats = ReadStats::default();
    let mut pacer = check.every.map(|every| Pacer { every, next: Instant::now() });
    while !shared.stop.load(Ordering::Relaxed) {
        let next = acks.next.load(Ordering::Relaxed);
        if next <= first {
            // Nothing acknowledged to read yet.
            tokio::time::sleep(Duration::from_millis(1).min(shared.remaining())).await;
            continue;
        }
        if let Some(p) = pacer.as_mut() {
            p.wait().await;
        }
        let at = first + rng.next_u64() % (next - first);
        let consistency = match mode {
            ReadMode::AtLeast => Consistency::Reached(Seq(at + 1)),
            ReadMode::Linearizable => Consistency::Linearizable,
        };
        let params =
            ReadParams { from: Seq(at), limit: check.limit, max_bytes: page.page_bytes_max, wait_ms: 0, consistency };
        let started = Instant::now();
        let read = client.read_served(&journal, params, ReadDeadline { wait_until: deadline, give_up_at: deadline });
        let Ok((answer, served_by)) = tokio::time::timeout(deadline, read).await else {
            stats.unserved += 1;
            continue;
        };
        match answer {
            ReadAnswer::Page { from, records, .. } if !records.is_empty() => {
                stats.latency.record(started.elapsed());
                if from.0 != at || records[0] != record_bytes(index, at, check.record_bytes) {
                    return Err(fail(format!("a read at {at} answered a foreign page from {}", from.0)));
                }
                stats.reads += 1;
                stats.read_records += records.len() as u64;
                if let (Some(voters), Some(server)) = (voters, served_by) {
                    stats.served_named += 1;
                    stats.served_by_replica += u64::from(!voters.contains(&server));
                }
            }
            ReadAnswer::Truncated { view } => first = first.max(view.first_seq.0),
            ReadAnswer::Page { .. } | ReadAnswer::Unserved { .. } | ReadAnswer::UnknownJournal => stats.unserved += 1,
            ReadAnswer::Denied(denial) if denial.status == 429 => {
                shared.over_quota.fetch_add(1, Ordering::Relaxed);
                let wait = Duration::from_secs(denial.retry_after_s.unwrap_or(1).max(1));
                tokio::time::sleep(wait.min(shared.remaining())).await;
            }
            ReadAnswer::Denied(denial) => return Err(fail(format!("a read at {at}: {denial}"))),
        }
    }
    Ok(stats)
}

/// Clock ticks per second of `/proc`'s times (`USER_HZ`, 100 on Linux).
pub(super) const TICKS_PER_S: f64 = 100.0;

/// The CPU ticks of this process's node threads (`paros-node-*`), by thread id, each marked
/// as a voter's or not.
#[derive(Debug)]
pub(super) struct NodeCpu {
    threads: std::collections::HashMap<u32, (bool, u64)>,
}

impl NodeCpu {
    /// Reads `/proc/self/task`; `None` where it has no threads (not Linux). A thread's name
    /// (`comm`) is cut to 15 bytes, so a voter's is matched by the cut name: `paros-node-` and
    /// the first 4 hex digits of its id.
    pub(super) fn sample(voters: &[NodeId]) -> Option<NodeCpu> {
        let names: Vec<String> = voters.iter().map(|v| comm_of(&format!("paros-node-{v}"))).collect();
        let mut threads = std::collections::HashMap::new();
        for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
            let Some(tid) = task.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else { continue };
            let Ok(comm) = std::fs::read_to_string(task.path().join("comm")) else { continue };
            let comm = comm.trim_end_matches('\n');
            if !comm.starts_with("paros-node-") {
                continue;
            }
            let Some(ticks) = std::fs::read_to_string(task.path().join("stat")).ok().as_deref().and_then(stat_ticks)
            else {
                continue;
            };
            threads.insert(tid, (names.iter().any(|n| n == comm), ticks));
        }
        Some(NodeCpu { threads })
    }

    /// Ticks the voters' threads and the other node threads used since `before` (the others
    /// `None` when there were none).
    pub(super) fn since(&self, before: &NodeCpu) -> (u64, Option<u64>) {
        let (mut voters, mut others, mut any_other) = (0, 0, false);
        for (tid, (voter, ticks)) in &self.threads {
            let spent = ticks.saturating_sub(before.threads.get(tid).map_or(0, |(_, t)| *t));
            if *voter {
                voters += spent;
            } else {
                any_other = true;
                others += spent;
            }
        }
        (voters, any_other.then_some(others))
    }
}

/// A thread name as `comm` shows it: its first 15 bytes.
fn comm_of(name: &str) -> String {
    let mut end = name.len().min(15);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].to_owned()
}

/// User + system ticks of a `/proc/…/stat` line (fields 14 and 15, counted after the command
/// name's closing parenthesis: the name may hold spaces).
fn stat_ticks(stat: &str) -> Option<u64> {
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_acknowledgement_is_found_by_any_position_it_covers_and_the_oldest_are_dropped() {
        let acks = JournalAcks::default();
        let t0 = Instant::now();
        acks.acknowledged(10, 3, t0, true);
        let t1 = t0 + Duration::from_millis(1);
        acks.acknowledged(13, 1, t1, true);
        assert_eq!(acks.next.load(Ordering::Relaxed), 14);
        assert_eq!(acks.acked_at(9), Acked::Dropped);
        assert_eq!(acks.acked_at(10), Acked::At(t0));
        assert_eq!(acks.acked_at(12), Acked::At(t0));
        assert_eq!(acks.acked_at(13), Acked::At(t1));
        assert_eq!(acks.acked_at(14), Acked::NotYet);
        for i in 0..ACK_TIMES_MAX as u64 {
            acks.acknowledged(14 + i, 1, t1, true);
        }
        assert_eq!(acks.acked_at(10), Acked::Dropped, "the oldest went first");
        assert_eq!(acks.times.lock().unwrap().len(), ACK_TIMES_MAX);
        let untimed = JournalAcks::default();
        untimed.acknowledged(0, 5, t0, false);
        assert_eq!((untimed.next.load(Ordering::Relaxed), untimed.acked_at(0)), (5, Acked::NotYet));
    }

    #[test]
    fn a_thread_name_is_cut_as_comm_cuts_it_and_its_ticks_are_user_plus_system() {
        assert_eq!(comm_of(&format!("paros-node-{}", NodeId(0xabcd_0000_0000_0001))), "paros-node-abcd");
        assert_eq!(comm_of("short"), "short");
        assert_eq!(stat_ticks("12 (paros node) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14"), Some(23));
        assert_eq!(stat_ticks("12 (x) S 1"), None);
    }
}
