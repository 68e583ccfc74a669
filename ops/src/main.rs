//! `paros`: the one binary. `paros bench` (the embedded cell under load), `paros verify`
//! (reopen a bench's data directory and check every acknowledged record), `paros cell init`,
//! and the tenant verbs over a gateway ([`cli`]: signup, token, journal, write, read, tail,
//! truncate, set-leader).

mod bench;
mod cli;
mod dev;
mod lab;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// The allocator of the whole process: the hot path allocates per message and per record,
/// and glibc malloc was a sixth of the CPU of `paros bench` with 64 writers.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(name = "paros", version, about = "paros: a multi-tenant replicated journal service")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `paros bench --help`: the report's fields and the scripts that run the bench in pairs.
const BENCH_AFTER_LONG_HELP: &str = "\
The report (--json prints it as one JSON object; without --json, as text):
  target                      in_cell (the embedded cell, through the node RPC) or http (--target)
  records_per_s, batches_per_s
                              acknowledged records and writes per second
  p50_us, p99_us, p999_us, p9999_us, max_us
                              latency of acknowledged writes, in µs; max_us is the slowest one
  fsyncs_per_s                syncs of all three nodes together, per second (0 over HTTP)
  records_per_fsync           acknowledged records per sync of one node, the three nodes averaged:
                              how many records one disk sync carried (0 over HTTP)
  cpu_us_per_record           the process's CPU (user + system, every thread) per acknowledged
                              record while the writers ran: the figure to compare builds by when
                              throughput is bound by the CPU; over HTTP, the bench's own: the client
  target_cpu_us_per_record, target_cpu_split
                              the CPU per acknowledged record, in µs, of the process serving the
                              writes, in all and by thread role (runtime: tokio's threads and main —
                              HTTP, auth, handlers, the hop to the node; node; store; read; other):
                              over HTTP the gateway's process, from its /metrics
                              (paros_gateway_thread_cpu_seconds_total) before and after the writers
                              ran; in the cell this process (its writers count under runtime).
                              Where those µs go by symbol: ops/scripts/profile-http.sh
  acked_records, verified_records
                              every acknowledged record is read back and checked after the run
  placement_s, journals_created
                              from the first CreateJournal to every node hosting every journal
  round_split                 every node's rounds during the run: queue (first input absorbed ->
                              batch handed to the store), write, sync, hop (sync's end -> what the
                              round released is sent), each as p50/p99/p999/max in µs
  store_compactions, store_compacting_s
                              fjall's compactions during the run, all nodes
  store_room_waits, store_room_waited_s
                              writes that waited for a store's applier, and their wait in all
  windows                     one entry per whole second: records, p99/p999, and fjall's state at
                              the second's end (compactions running, flushes waiting, level-0
                              tables, compactions finished)
  min_window_ratio            the slowest second's records over the median second's (1.0: flat)
  rss_peak_bytes              the process's peak resident set
  rss_peak_write_bytes, rss_peak_read_bytes, read_back_s
                              peaks while writing and while reading every position back, and the
                              read-back's time
  open_s, first_write_s       with --data-dir on a second run: the cell's boot, and the first
                              acknowledged write
  rss_per_idle_journal_bytes, idle_placement_s, dormant_journals
                              with --idle-journals: memory per idle journal (all nodes), their
                              placement time, and the journals asleep when memory was read
  over_quota_retries          over HTTP: writes the gateway answered 429 (each waited Retry-After)
  session_lines_per_write     over HTTP with --session: the lines the gateway's sessions sent to the
                              cell per Write they travelled in (consecutive lines read together
                              travel as one), from its /metrics; null otherwise
With --readers R (absent without):
  readers, consistency        R, and --consistency (at_least or linearizable)
  reads, read_records, reads_per_s, read_limit
                              pages served to the random readers (R/2 rounded down), their records,
                              and the limit each asked for (--read-limit)
  tail_reads_per_s, all_reads_per_s
                              pages the tail readers' long-polls returned per second; all readers'
  read_latency_ms             p50/p90/p99/max of the random readers' served reads
  reads_unserved              random reads not served within --read-deadline-ms
  reads_per_s_paced           --reads-per-s: the random readers' pace, all together (null: closed loop)
  tail_visible_ms             p50/p99 from a writer's acknowledgement to a tail reader seeing the
                              record (0 when the reader saw it first)
  tail_records, tail_seen_first_share
                              records the tail readers timed; the share seen before the writer
                              counted their acknowledgement
  served_by_replica_share     served random reads answered by a server that is not a voter (null
                              over HTTP: the gateway does not name the server)
  voter_cpu_us_per_record, replica_cpu_us_per_record
                              CPU of the voters' (others') paros-node-* threads per acknowledged
                              record, in µs (null over HTTP, off Linux, or with no other threads)
Over HTTP the figures only the embedded cell knows (syncs, rounds, the store, memory) are 0.
--raw-fjall reports records_per_s, batches_per_s, p50_us, p99_us, p999_us, max_us, fsyncs_per_s and
records_per_fsync (one sync per batch), and over_5ms and over_15ms (batches slower than 5 and 15 ms:
the disk's own stalls).

Examples:
  paros bench --writers 64 --journals 64 --record-bytes 100 --batch 1 --duration-s 10 --json
  paros bench --raw-fjall --batch 64 --duration-s 10 --json        # the bare-disk baseline
  paros bench --writers 1 --journals 1 --record-bytes 16384 --batch 16 --stop-after-mib 384 --json
  paros bench --target http://127.0.0.1:7400 --json     # a running `paros dev`
  paros bench --writers 16 --journals 16 --readers 16 --consistency linearizable --json

Scripts in ops/scripts/ (not part of CI). The VM is shared: compare figures only within one run.
  bench.sh [secs]                  the four reported runs (1 and 64 writers at batch 1, 1 writer at
                                   batch 64, raw fjall at batch 64), one run of one build
  ratio.sh [pairs] [secs]          group-commit scaling: 1 writer against 64 writers on 64 journals,
                                   alternating, medians
  paired.sh [pairs] [secs]         one writer's p50 over the fdatasync p50, and batch-64 records/s
                                   over raw fjall's, each paired with its baseline;
                                   BASE=/path/to/paros runs an older build in the same pairs
  ab.sh pairs secs BIN_A BIN_B     two builds alternating on the 64-writer run (EXTRA_A, EXTRA_B add
                                   flags to either; DISK_S=n adds n seconds of raw disk per pair)
  http-ratio.sh BIN W J SECS       through a fresh `paros dev` over HTTP, then in the cell: the ratio
  profile-http.sh BIN [W] [SECS]   `paros dev` under perf record -g while bench --target drives it;
                                   prints the CPU split by role and perf's top symbols
  restarts.sh DIR ROUNDS BIN...    restart figures, builds alternating on copies of one data dir
  idle-restart.sh BIN DIR [SECS]   an idle `paros dev` restarted: its resident set and elections";

#[derive(Subcommand, Debug)]
#[allow(clippy::large_enum_variant, reason = "parsed once at start; `bench`'s flags are many")]
enum Command {
    /// Measure the embedded cell (or, with `--target`, a running gateway) under write load.
    ///
    /// Starts an embedded 3-node cell with its registry, creates `--journals` journals through
    /// the registry, and has `--writers` paros-client `Writer`s write batches of `--batch`
    /// records of `--record-bytes` bytes for `--duration-s` seconds (writer i writes journal
    /// i mod journals). Every acknowledged record is read back and verified at the end. With
    /// `--target http://HOST:PORT` the same writers drive a running gateway over HTTP instead.
    /// Not part of CI: this is the tool the performance figures come from.
    #[command(after_long_help = BENCH_AFTER_LONG_HELP)]
    Bench {
        /// Concurrent write loops. Each journal has one fenced `Writer` with `--in-flight`
        /// writes in flight; loops that share a journal take turns on it.
        #[arg(long, default_value_t = 64)]
        writers: usize,
        /// Journals written (writer i writes journal i mod journals).
        #[arg(long, default_value_t = 64)]
        journals: usize,
        /// The size of each record, in bytes.
        #[arg(long, default_value_t = 100)]
        record_bytes: usize,
        /// Records per write (one Write call, one slot).
        #[arg(long, default_value_t = 1)]
        batch: usize,
        /// Writes each loop keeps in flight (pipelined on its journal's `Writer`, each
        /// acknowledged in order); 1: the next write waits for the last one's answer.
        #[arg(long, default_value_t = 1)]
        in_flight: usize,
        /// With `--target`: write over append sessions (`POST …/session`, one per journal)
        /// instead of one `POST …/records` per write.
        #[arg(long, requires = "target")]
        session: bool,
        /// With `--target`: speak HTTP/1.1 (a connection per request in flight) instead of
        /// HTTP/2 (one connection, every request multiplexed on it).
        #[arg(long, requires = "target")]
        http1: bool,
        /// How long the writers write, in seconds (the claims before are not measured).
        #[arg(long, default_value_t = 10)]
        duration_s: u64,
        /// Keep the cell's data here (default: a temporary directory). A second run on the same
        /// directory restarts the cell on it and reports `open_s` and `first_write_s`.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Also place this many journals that stay idle; report their memory cost
        /// (`rss_per_idle_journal_bytes`, `idle_placement_s`, `dormant_journals`), read once
        /// `--dormant-after-s` has passed.
        #[arg(long, default_value_t = 0)]
        idle_journals: usize,
        /// Print one JSON object instead of text (its fields: below).
        #[arg(long)]
        json: bool,
        /// Append `journal seq count` per acknowledged write to this file (`paros verify` reads it).
        #[arg(long)]
        ack_log: Option<PathBuf>,
        /// Measure the raw disk instead: one writer, fjall batches of `--batch` records,
        /// SyncData per batch (the baseline the cell's cost is a ratio of).
        #[arg(long)]
        raw_fjall: bool,
        /// Drive the gateway at this URL (`http://HOST:PORT`) over HTTP instead of an
        /// embedded cell: same writers, journals and report (`"target": "http"`). Start
        /// `paros dev --quota-requests-per-s 1000000` to measure the path, not the default quota.
        #[arg(long)]
        target: Option<String>,
        /// With `--target`: the tenant token to write as (default: sign up a fresh tenant).
        #[arg(long, requires = "target")]
        token: Option<String>,
        /// With an `https://` `--target`: PEM certificates to trust beside the system's (a
        /// gateway whose certificate a private authority signed, or that signed its own).
        #[arg(long, value_name = "PEM", requires = "target")]
        ca_file: Option<PathBuf>,
        /// The embedded cell's stores keep `log` values of at least this many bytes in
        /// fjall's blob files (key-value separation); default: every value in the tree.
        #[arg(long)]
        blob_bytes_min: Option<u32>,
        /// fjall's background threads (flushes, compactions) per node's store; default: the
        /// store's (1).
        #[arg(long)]
        store_workers: Option<usize>,
        /// The nice value of fjall's background threads (flushes, compactions); default: the
        /// store's (19). 0: the process's own priority.
        #[arg(long)]
        store_nice: Option<i32>,
        /// The nice value of each store's applier and reclaimer threads; default: the store's
        /// (the process's own priority). 0: the process's own priority.
        #[arg(long)]
        store_apply_nice: Option<i32>,
        /// How much larger each node's memtables are than the previous node's, in percent, so
        /// the nodes flush and compact at different moments; default: the store's (25). 0: all
        /// alike.
        #[arg(long)]
        store_spread_pct: Option<u16>,
        /// fjall's level-0 tables gathered before a compaction into level 1 (default: the
        /// store's, 16).
        #[arg(long)]
        store_l0_tables: Option<u8>,
        /// The memtable bound of each of a store's keyspaces, in MiB (default: the store's, 16).
        #[arg(long)]
        store_memtable_mib: Option<u64>,
        /// The size compactions cut their tables at, in MiB (default: the store's, 64, fjall's).
        #[arg(long)]
        store_table_mib: Option<u64>,
        /// The store's write-ahead log segment size, in MiB (default: the store's, 16): each
        /// closed segment's entries become one generation, and they wait in memory until then.
        #[arg(long)]
        store_wal_segment_mib: Option<u64>,
        /// How long synced rounds gather before a store's applier commits them to fjall, in
        /// microseconds (default: the store's, 2,000).
        #[arg(long)]
        store_apply_interval_us: Option<u64>,
        /// Stop writing once this many MiB of records are acknowledged (or at
        /// `--duration-s`, whichever comes first); the report then has `rss_peak_write_bytes`,
        /// `rss_peak_read_bytes` and `read_back_s`.
        #[arg(long)]
        stop_after_mib: Option<u64>,
        /// The cell's nodes put journals quiet this many seconds to sleep (0: never); the
        /// idle journals' memory is read after that long.
        #[arg(long, default_value_t = 60)]
        dormant_after_s: u64,
        /// How long each node thread and storage thread polls for its next input before it
        /// sleeps, in microseconds (0: sleep at once); default: the shell's, 500.
        #[arg(long)]
        idle_spin_us: Option<u64>,
        /// Those threads poll only while their node's recent rounds (about the last eight)
        /// wrote at most this many journals on average; default: the shell's, 6.
        #[arg(long)]
        spin_round_journals_max: Option<usize>,
        /// Store reads a node's read thread takes at once and answers together (at least 1);
        /// default: the shell's, 16.
        #[arg(long)]
        read_batch_max: Option<usize>,
        /// The replicas keep no read cache: every read goes through a node's thread (as before
        /// stop 51), for like-for-like lab runs. In-cell runs only.
        #[arg(long)]
        no_read_cache: bool,
        /// Read replicas of the embedded cell (one tier); reads go to them first. In-cell
        /// runs only.
        #[arg(long, default_value_t = 0)]
        replicas: usize,
        /// Readers beside the writers, spread over the written journals round-robin: half
        /// (rounded up) follow a journal from its tail (`tail_visible_ms`), the others read one
        /// page at a random acknowledged position at a time (`reads_per_s`, `read_latency_ms`).
        #[arg(long, default_value_t = 0)]
        readers: usize,
        /// The readers' consistency: `at_least` (a read at position p is served by a server
        /// that has applied p; the tail readers read monotonically) or `linearizable`.
        #[arg(long, value_enum, default_value_t = bench::ReadMode::AtLeast)]
        consistency: bench::ReadMode,
        /// How long one read may take before it counts as unserved, in milliseconds.
        #[arg(long, default_value_t = 1000)]
        read_deadline_ms: u64,
        /// The most records one random read asks for (its `limit`; a point read is 1). Default:
        /// a full page (the client's `page_records_max`).
        #[arg(long)]
        read_limit: Option<u32>,
        /// Pace the random readers to this many pages a second, all together (an open loop):
        /// the writers keep the rest of the machine. Default: each reads as fast as its reads
        /// come back.
        #[arg(long)]
        reads_per_s: Option<u64>,
    },
    /// Run the embedded cell — three nodes, two read replicas, the registry and the tenant gateway — in this
    /// process, serving the HTTP API on `--listen`. Stop with Ctrl-C (or SIGTERM).
    Dev {
        /// Where the cell keeps its data (created on first start, reused after).
        #[arg(long, default_value = "paros-data")]
        data_dir: PathBuf,
        /// The gateway's address (port 0: any free port, printed at start).
        #[arg(long, default_value = "127.0.0.1:7400")]
        listen: std::net::SocketAddr,
        /// The requests/s quota of tenants signed up from now on (default: the gateway's).
        #[arg(long)]
        quota_requests_per_s: Option<u32>,
        /// Sign tokens with a fresh key from now on; tokens of the current key stay valid
        /// until it is retired (`--retire-key`).
        #[arg(long)]
        rotate_key: bool,
        /// Retire a signing key by id once started (repeatable): every token it signed is
        /// refused from then on. The key signing now cannot be retired; rotate first.
        #[arg(long = "retire-key", value_name = "KID")]
        retire_keys: Vec<String>,
        /// How many nodes a new cell gets (at least 3; the registry votes on the largest odd
        /// number of them). An existing cell keeps its own.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(3..=15))]
        nodes: u16,
        /// How many read replicas a new cell's default tier gets (0: none, every read on the
        /// voters; a like-for-like peer of a three-server log with no read tier). An existing
        /// cell keeps its own.
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(0..=8))]
        replicas: u16,
        /// Laboratory only (docs/lab/door.md): tenant journals are judged and held in this
        /// process's memory, never replicated or synced — the gateway's cost with no cell behind
        /// it. Stores nothing.
        #[arg(long, hide = true)]
        lab_null_writes: bool,
        /// Serve HTTPS with this certificate chain (PEM: the certificate, then its
        /// intermediates); HTTP/2 and HTTP/1.1 are offered by ALPN. Needs `--tls-key`.
        #[arg(long, value_name = "PEM", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The private key of `--tls-cert` (PEM: PKCS#8, PKCS#1 or SEC1).
        #[arg(long, value_name = "PEM", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
    },
    /// Manage the cell.
    Cell {
        #[command(subcommand)]
        command: CellCommand,
    },
    /// Reopen a bench data directory and check every acknowledged write is present exactly
    /// once at its position.
    Verify {
        #[arg(long)]
        data_dir: PathBuf,
        #[arg(long)]
        ack_log: PathBuf,
        #[arg(long, default_value_t = 100)]
        record_bytes: usize,
    },
    #[command(flatten)]
    Tenant(cli::Verb),
}

#[derive(Subcommand, Debug)]
enum CellCommand {
    /// Form the embedded cell under `--data-dir` once: its founding nodes and registry
    /// journal, and the registry's `InitCell`. A second init of a formed cell is refused
    /// (exit 2).
    Init {
        #[arg(long)]
        data_dir: PathBuf,
        /// Founding nodes of a new cell (odd, 1 to 7); a cell already created keeps its own.
        #[arg(long, default_value_t = 3)]
        members: usize,
    },
    #[command(flatten)]
    Steer(cli::CellVerb),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    match cli.command {
        Command::Cell { command: CellCommand::Steer(verb) } => match (verb.wants_json(), cli::run_cell(verb, &runtime))
        {
            (_, Ok(())) => ExitCode::SUCCESS,
            (json, Err(f)) => {
                if json {
                    println!("{}", f.json_body());
                }
                eprintln!("paros: {}", cli::error_chain(&f));
                ExitCode::from(f.exit_code())
            }
        },
        Command::Tenant(verb) => match (verb.wants_json(), cli::run(verb, &runtime)) {
            (_, Ok(())) => ExitCode::SUCCESS,
            (json, Err(f)) => {
                if json {
                    println!("{}", f.json_body());
                }
                eprintln!("paros: {}", cli::error_chain(&f));
                ExitCode::from(f.exit_code())
            }
        },
        Command::Dev {
            data_dir,
            listen,
            quota_requests_per_s,
            rotate_key,
            retire_keys,
            nodes,
            replicas,
            lab_null_writes,
            tls_cert,
            tls_key,
        } => {
            let keys = dev::KeyOptions { rotate: rotate_key, retire: retire_keys };
            let machines = (usize::from(nodes), usize::from(replicas));
            let tls = tls_cert.zip(tls_key).map(|(cert, key)| dev::TlsFiles { cert, key });
            let run = dev::run(&data_dir, listen, quota_requests_per_s, keys, machines, lab_null_writes, tls.as_ref());
            match runtime.block_on(run) {
                Ok(()) => ExitCode::SUCCESS,
                Err(dev::DevError::Cell(paros_embedded::CellError::NodeFault(f))) => storage_fault(&f),
                Err(e) => {
                    eprintln!("paros dev: {e}");
                    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(1))
                }
            }
        }
        Command::Bench {
            writers,
            journals,
            record_bytes,
            batch,
            in_flight,
            session,
            http1,
            duration_s,
            data_dir,
            idle_journals,
            json,
            ack_log,
            raw_fjall,
            target,
            token,
            ca_file,
            blob_bytes_min,
            store_workers,
            store_nice,
            store_apply_nice,
            store_spread_pct,
            store_l0_tables,
            store_memtable_mib,
            store_table_mib,
            store_wal_segment_mib,
            store_apply_interval_us,
            stop_after_mib,
            dormant_after_s,
            idle_spin_us,
            spin_round_journals_max,
            read_batch_max,
            no_read_cache,
            replicas,
            readers,
            consistency,
            read_deadline_ms,
            read_limit,
            reads_per_s,
        } => {
            let duration = Duration::from_secs(duration_s);
            if raw_fjall {
                return raw_fjall_bench(data_dir, batch, record_bytes, duration, json);
            }
            let defaults = paros_store::StoreOptions::default();
            let store = paros_store::StoreOptions {
                blob_bytes_min,
                worker_threads: store_workers.unwrap_or(defaults.worker_threads),
                background_nice: store_nice.map_or(defaults.background_nice, |n| (n != 0).then_some(n)),
                apply_nice: store_apply_nice.map_or(defaults.apply_nice, |n| (n != 0).then_some(n)),
                member_spread_pct: store_spread_pct.unwrap_or(defaults.member_spread_pct),
                l0_tables: store_l0_tables.unwrap_or(defaults.l0_tables),
                memtable_bytes: store_memtable_mib.map_or(defaults.memtable_bytes, |m| m.saturating_mul(1 << 20)),
                table_bytes: store_table_mib.map_or(defaults.table_bytes, |m| m.saturating_mul(1 << 20)),
                wal_segment_bytes: store_wal_segment_mib
                    .map_or(defaults.wal_segment_bytes, |m| m.saturating_mul(1 << 20)),
                apply_interval: store_apply_interval_us
                    .map_or(defaults.apply_interval, std::time::Duration::from_micros),
                ..defaults
            };
            let stop_after_bytes = stop_after_mib.map(|m| m.saturating_mul(1 << 20));
            let dormant_after = (dormant_after_s > 0).then(|| Duration::from_secs(dormant_after_s));
            let args = bench::BenchArgs {
                writers,
                journals,
                record_bytes,
                batch,
                in_flight,
                session,
                http1,
                duration,
                data_dir,
                idle_journals,
                ack_log,
                progress: true,
                target,
                token,
                ca_file,
                store,
                stop_after_bytes,
                dormant_after,
                idle_spin: idle_spin_us.map(Duration::from_micros),
                spin_round_journals_max,
                read_batch_max,
                read_cache: !no_read_cache,
                replicas,
                readers,
                consistency,
                read_deadline: Duration::from_millis(read_deadline_ms),
                read_limit,
                reads_per_s,
            };
            match runtime.block_on(bench::run(args)) {
                Ok(report) => {
                    print_report(&report, json);
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e),
            }
        }
        Command::Cell { command: CellCommand::Init { data_dir, members } } => {
            if members == 0 || members > 7 || members % 2 == 0 {
                eprintln!("paros cell init: --members must be odd, 1 to 7");
                return ExitCode::from(2);
            }
            match runtime.block_on(cell_init(&data_dir, members)) {
                Ok(line) => {
                    println!("{line}");
                    ExitCode::SUCCESS
                }
                Err(paros_embedded::CellError::NodeFault(f)) => storage_fault(&f),
                Err(e) => {
                    eprintln!("paros cell init: {e}");
                    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(1))
                }
            }
        }
        Command::Verify { data_dir, ack_log, record_bytes } => {
            match runtime.block_on(verify::run(&data_dir, &ack_log, record_bytes)) {
                Ok(n) => {
                    println!("verify: {n} acknowledged records present exactly once at their positions");
                    ExitCode::SUCCESS
                }
                Err(verify::VerifyError::Cell(paros_embedded::CellError::NodeFault(f))) => storage_fault(&f),
                Err(e) => {
                    eprintln!("paros verify: {e}");
                    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(1))
                }
            }
        }
    }
}

/// A node of the embedded cell stopped on a storage fault: the process exits with
/// [`EXIT_STORAGE_FAULT`](paros_node::shell::EXIT_STORAGE_FAULT), the fault's cause printed.
fn storage_fault(fault: &paros_node::shell::NodeFault) -> ExitCode {
    let code = paros_node::shell::EXIT_STORAGE_FAULT;
    eprintln!("paros: {fault}; stopping (exit {code})");
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

async fn cell_init(dir: &std::path::Path, members: usize) -> Result<String, paros_embedded::CellError> {
    let cell = paros_embedded::EmbeddedCell::open_with(dir, members).await?;
    let formed = tokio::select! {
        formed = cell.init() => formed,
        fault = cell.fault() => Err(paros_embedded::CellError::NodeFault(fault)),
    };
    let registry = cell.registry();
    let nodes = cell.manifest.nodes.clone();
    let _ = cell.stop();
    let id = formed?;
    Ok(format!("formed cell {:x}: {} founding nodes {nodes:?}, registry journal {registry:?}", id.0, nodes.len()))
}

fn fail(e: &bench::BenchError) -> ExitCode {
    if let bench::BenchError::Cell(paros_embedded::CellError::NodeFault(f)) = e {
        return storage_fault(f);
    }
    eprintln!("paros bench: {e}");
    let code = match e {
        bench::BenchError::Cell(c) => c.exit_code(),
        bench::BenchError::Args(_) => 2,
        _ => 1,
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

fn print_report(r: &bench::Report, json: bool) {
    if json {
        println!("{}", serde_json::to_string(r).expect("a report serializes"));
        return;
    }
    let transport = if r.transport.is_empty() { String::new() } else { format!(" over {}", r.transport) };
    println!(
        "paros bench ({}{transport}): {} writers, {} journals, {} B records, batch {}, {} in flight, {:.1} s",
        r.target, r.writers, r.journals, r.record_bytes, r.batch, r.in_flight, r.duration_s
    );
    println!("  records/s         {:>12.0}", r.records_per_s);
    println!("  batches/s         {:>12.0}", r.batches_per_s);
    println!("  latency p50/p99/p999  {} / {} / {} µs", r.p50_us, r.p99_us, r.p999_us);
    println!("  latency p9999/max     {} / {} µs", r.p9999_us, r.max_us);
    if r.target == "in_cell" {
        println!("  fsyncs/s (3 nodes){:>12.0}", r.fsyncs_per_s);
        println!("  records per fsync {:>12.1}", r.records_per_fsync);
        println!("  placing journals  {:>12.3} s", r.placement_s);
        println!("  rss peak          {:>12} bytes", r.rss_peak_bytes);
        if r.open_s > 0.0 {
            println!(
                "  open              {:>12.3} s, first write acknowledged {:.3} s after the open began",
                r.open_s, r.first_write_s
            );
        }
        if r.rss_peak_write_bytes > 0 {
            println!(
                "  rss peak writing  {:>12} bytes, reading back {} bytes ({:.1} s)",
                r.rss_peak_write_bytes, r.rss_peak_read_bytes, r.read_back_s
            );
        }
    } else {
        println!("  creating+claiming {:>12.3} s ({} journals created)", r.placement_s, r.journals_created);
        println!("  429 over_quota    {:>12}", r.over_quota_retries);
        println!("  client CPU/record {:>12.1} µs (this process: the writers, HTTP, JSON)", r.cpu_us_per_record);
        if let Some(n) = r.session_lines_per_write {
            println!("  lines per Write   {n:>12.1} (the gateway's sessions: lines read together travel as one)");
        }
    }
    if !r.target_cpu_split.is_empty() {
        let split: Vec<String> = r.target_cpu_split.iter().map(|(role, us)| format!("{role} {us:.1}")).collect();
        println!("  CPU per record    {:>12.1} µs ({})", r.target_cpu_us_per_record, split.join(", "));
    }
    if r.idle_journals > 0 {
        println!(
            "  rss per idle journal {:>9} bytes ({} idle journals)",
            r.rss_per_idle_journal_bytes, r.idle_journals
        );
    }
    if let Some(reads) = &r.reads {
        println!(
            "  reads ({} readers, {}) {:.0}/s, p50/p99 {:.3} / {:.3} ms, {} unserved; tail visible p50 {:.3} ms",
            reads.readers,
            reads.consistency.name(),
            reads.reads_per_s,
            reads.read_latency_ms.p50,
            reads.read_latency_ms.p99,
            reads.reads_unserved,
            reads.tail_visible_ms.p50
        );
    }
    println!(
        "  verified          {} of {} acknowledged records read back at their positions",
        r.verified_records, r.acked_records
    );
}

fn raw_fjall_bench(
    dir: Option<PathBuf>,
    batch: usize,
    record_bytes: usize,
    duration: Duration,
    json: bool,
) -> ExitCode {
    let temp = tempfile::tempdir().expect("a temporary directory");
    let dir = dir.unwrap_or_else(|| temp.path().to_path_buf());
    let r = paros_store::baseline::raw_fjall_append(&dir, batch, record_bytes, duration);
    let secs = r.elapsed.as_secs_f64();
    let out = serde_json::json!({
        "records_per_s": r.records as f64 / secs,
        "batches_per_s": r.batches as f64 / secs,
        "p50_us": r.p50_us,
        "p99_us": r.p99_us,
        "p999_us": r.p999_us,
        "max_us": r.max_us,
        "over_5ms": r.over_5ms,
        "over_15ms": r.over_15ms,
        "fsyncs_per_s": r.batches as f64 / secs,
        "records_per_fsync": batch,
        "baseline": "raw fjall, one writer, SyncData per batch",
    });
    if json {
        println!("{out}");
    } else {
        println!(
            "raw fjall baseline: batch {batch}, {record_bytes} B records: {:.0} records/s, \
             p50 {} µs, p99 {} µs, p999 {} µs, max {} µs; {} batches over 5 ms, {} over 15 ms",
            r.records as f64 / secs,
            r.p50_us,
            r.p99_us,
            r.p999_us,
            r.max_us,
            r.over_5ms,
            r.over_15ms
        );
    }
    ExitCode::SUCCESS
}

mod verify {
    //! `paros verify`: reopen the cell and check an ack log against it.

    use std::path::Path;

    use crate::bench::{ack_entries, bench_journals, read_all, record_bytes};
    use paros_embedded::{CellError, EmbeddedCell};

    #[derive(Debug, thiserror::Error)]
    pub enum VerifyError {
        #[error(transparent)]
        Cell(#[from] CellError),
        #[error("cannot read the ack log: {0}")]
        AckLog(String),
        #[error("{0}")]
        Mismatch(String),
    }

    impl VerifyError {
        pub fn exit_code(&self) -> i32 {
            match self {
                VerifyError::Cell(c) => c.exit_code(),
                _ => 1,
            }
        }
    }

    pub async fn run(dir: &Path, ack_log: &Path, size: usize) -> Result<u64, VerifyError> {
        let text = std::fs::read_to_string(ack_log).map_err(|e| VerifyError::AckLog(e.to_string()))?;
        let cell = EmbeddedCell::open(dir).await?;
        let checked = tokio::select! {
            checked = check(&cell, &text, size) => checked,
            fault = cell.fault() => Err(CellError::NodeFault(fault).into()),
        };
        let _ = cell.stop();
        checked
    }

    /// Every acknowledged write of the ack log `text`, read back from `cell`.
    async fn check(cell: &EmbeddedCell, text: &str, size: usize) -> Result<u64, VerifyError> {
        let acks = ack_entries(text);
        let count = acks.iter().map(|&(j, _, _)| j).max().map_or(0, |m| m + 1);
        let (keys, _, _) =
            bench_journals(cell, count, false).await.map_err(|e| VerifyError::Mismatch(e.to_string()))?;
        let mut read = Vec::new();
        for (i, key) in keys {
            let all = read_all(&cell.client, key).await.map_err(VerifyError::Mismatch)?;
            for (seq, r) in &all {
                if *r != record_bytes(i, *seq, size) {
                    return Err(VerifyError::Mismatch(format!(
                        "journal {i} holds a foreign or duplicated record at {seq}"
                    )));
                }
            }
            read.push(all);
        }
        let mut checked = 0;
        for (j, seq, count) in acks {
            let all = read.get(j).ok_or_else(|| VerifyError::Mismatch(format!("ack names unknown journal {j}")))?;
            for s in seq..seq + count {
                if !all.contains_key(&s) {
                    return Err(VerifyError::Mismatch(format!("journal {j} lost acknowledged record {s}")));
                }
                checked += 1;
            }
        }
        Ok(checked)
    }
}
