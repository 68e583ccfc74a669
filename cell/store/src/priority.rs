//! fjall's background threads (memtable flushes, compactions) run at a lower CPU priority than
//! the rest of the process, as `RocksDB` lowers its compaction pool's; so do the store's own
//! background threads, the applier and the reclaimer ([`lower_this_thread`]).
//!
//! A compaction is bulk work that may finish a little later; a round waits for a core while it
//! runs. On a machine whose cores the rounds keep busy, compactions at the same priority take
//! their share of every core and the acknowledged write's tail grows with them (measured in
//! `docs/storage.md` §3). At a higher nice value the scheduler gives them what the rounds leave.
//! They still run: fjall throttles writers itself once level 0 holds 20 runs, so a compaction
//! kept waiting slows writes down rather than letting the tree grow without bound.

/// The name fjall gives its worker threads.
pub const WORKER_THREAD_NAME: &str = "fjall:worker";

/// How long [`lower_background_threads`] waits for a new worker to take its name (a thread
/// names itself once it runs, shortly after its spawn returns).
pub const NAMING_WAIT_MAX: std::time::Duration = std::time::Duration::from_millis(200);

/// This process's threads named [`WORKER_THREAD_NAME`] (Linux; elsewhere none).
///
/// # Errors
/// Listing this process's threads failed.
pub fn worker_threads() -> std::io::Result<Vec<i32>> {
    let mut tids = Vec::new();
    #[cfg(target_os = "linux")]
    for task in std::fs::read_dir("/proc/self/task")? {
        let task = task?;
        // A thread that ended between the listing and the read has no name to read.
        let Ok(name) = std::fs::read_to_string(task.path().join("comm")) else { continue };
        if name.trim_end() == WORKER_THREAD_NAME
            && let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok())
        {
            tids.push(tid);
        }
    }
    Ok(tids)
}

/// Sets the nice value of every thread of this process named [`WORKER_THREAD_NAME`] to `nice`,
/// once there are at least `expected` of them or [`NAMING_WAIT_MAX`] has passed, and returns
/// how many it set. Raising a thread's nice value needs no privilege; lowering it again does, so
/// a value below a thread's present one may fail. Elsewhere than Linux: sets none.
///
/// # Errors
/// Listing this process's threads failed, or the kernel refused a new priority.
pub fn lower_background_threads(nice: i32, expected: usize) -> std::io::Result<usize> {
    let started = std::time::Instant::now();
    let mut tids = worker_threads()?;
    while tids.len() < expected && started.elapsed() < NAMING_WAIT_MAX && cfg!(target_os = "linux") {
        std::thread::sleep(std::time::Duration::from_millis(1));
        tids = worker_threads()?;
    }
    #[cfg(target_os = "linux")]
    for &tid in &tids {
        if let Some(pid) = rustix::process::Pid::from_raw(tid) {
            rustix::process::setpriority_process(Some(pid), nice)?;
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
    Ok(if cfg!(target_os = "linux") { tids.len() } else { 0 })
}

/// Sets the calling thread's nice value to `nice` (Linux: a thread has its own; elsewhere this
/// does nothing). For the store's own background threads, which call it as they start.
///
/// # Errors
/// The kernel refused the new priority (lowering it again needs privilege).
pub fn lower_this_thread(nice: i32) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    rustix::process::setpriority_process(None, nice)?;
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
    Ok(())
}
