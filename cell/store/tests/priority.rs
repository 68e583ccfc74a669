//! fjall's background threads and the store's own (applier, reclaimer) run at the store's
//! configured nice values (Linux).
#![cfg(target_os = "linux")]

use paros_store::priority::WORKER_THREAD_NAME;
use paros_store::{FjallStore, StoreOptions};

/// The nice value in a thread's `/proc` stat line.
fn nice_of(stat_path: &std::path::Path) -> i32 {
    let stat = std::fs::read_to_string(stat_path).unwrap();
    // After the parenthesised name: state is field 3, nice field 19 (proc(5)).
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..].split_whitespace().collect();
    fields[16].parse().unwrap()
}

/// The nice value of each of this process's fjall worker threads, from `/proc`.
fn worker_nice_values() -> Vec<i32> {
    nice_values_of(WORKER_THREAD_NAME)
}

#[test]
fn compactions_run_at_the_configured_lower_priority() {
    let dir = tempfile::tempdir().unwrap();
    let own = nice_of(std::path::Path::new("/proc/thread-self/stat"));
    assert!(own < 13, "the test runs below nice 13 (it is {own})");
    let opts = StoreOptions { worker_threads: 2, background_nice: Some(13), ..StoreOptions::default() };
    let _store = FjallStore::open_with(dir.path(), opts).unwrap();
    let nice = worker_nice_values();
    assert!(nice.len() >= 2, "fjall's workers are found by name: {nice:?}");
    assert!(nice.iter().all(|&n| n == 13), "every worker runs at nice 13: {nice:?}");
}

#[test]
fn without_a_nice_value_the_workers_keep_the_process_priority() {
    let dir = tempfile::tempdir().unwrap();
    assert!(worker_nice_values().is_empty(), "no store is open yet");
    // The workers inherit the priority of the thread that opens the store.
    let own = nice_of(std::path::Path::new("/proc/thread-self/stat"));
    let _store =
        FjallStore::open_with(dir.path(), StoreOptions { background_nice: None, ..StoreOptions::default() }).unwrap();
    let nice = worker_nice_values();
    assert_eq!(nice.len(), paros_store::WORKER_THREADS, "the default store runs one fjall worker: {nice:?}");
    assert!(nice.iter().all(|&n| n == own), "{nice:?} against the opener's {own}");
}

/// The nice value of each of this process's threads named `name`, from `/proc` (which keeps
/// the first 15 bytes of a thread's name).
fn nice_values_of(name: &str) -> Vec<i32> {
    let name = &name[..name.len().min(15)];
    let mut nice = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let path = task.unwrap().path();
        let Ok(comm) = std::fs::read_to_string(path.join("comm")) else { continue };
        if comm.trim_end() == name {
            nice.push(nice_of(&path.join("stat")));
        }
    }
    nice
}

/// The nice values of the store's applier and reclaimer threads, once each has set its own
/// (a thread does so as it starts) or a few seconds have passed.
fn own_background_nice_values(want: i32) -> (Vec<i32>, Vec<i32>) {
    let started = std::time::Instant::now();
    loop {
        let (applier, reclaimer) = (nice_values_of("paros-store-apply"), nice_values_of("paros-reclaim"));
        let settled =
            !applier.is_empty() && !reclaimer.is_empty() && applier.iter().chain(&reclaimer).all(|&n| n == want);
        if settled || started.elapsed() > std::time::Duration::from_secs(5) {
            return (applier, reclaimer);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn the_applier_and_the_reclaimer_run_at_the_configured_lower_priority() {
    let dir = tempfile::tempdir().unwrap();
    let own = nice_of(std::path::Path::new("/proc/thread-self/stat"));
    assert!(own < 14, "the test runs below nice 14 (it is {own})");
    let _store =
        FjallStore::open_with(dir.path(), StoreOptions { apply_nice: Some(14), ..StoreOptions::default() }).unwrap();
    let (applier, reclaimer) = own_background_nice_values(14);
    assert_eq!(applier, vec![14], "one applier, at nice 14");
    assert_eq!(reclaimer, vec![14], "one reclaimer, at nice 14");
    assert_eq!(nice_of(std::path::Path::new("/proc/thread-self/stat")), own, "the opener keeps its priority");
}

#[test]
fn without_an_apply_nice_value_the_applier_keeps_the_opener_priority() {
    let dir = tempfile::tempdir().unwrap();
    let own = nice_of(std::path::Path::new("/proc/thread-self/stat"));
    let _store =
        FjallStore::open_with(dir.path(), StoreOptions { apply_nice: None, ..StoreOptions::default() }).unwrap();
    let (applier, reclaimer) = own_background_nice_values(own);
    assert_eq!(applier, vec![own]);
    assert_eq!(reclaimer, vec![own]);
}
