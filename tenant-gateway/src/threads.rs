//! The process's CPU time by thread role, for `/metrics`
//! (`paros_gateway_thread_cpu_seconds_total{role=…}`): where a request's microseconds go when
//! the gateway and the cell share a process (`paros dev`).
//!
//! Each scrape reads `utime + stime` of every thread in `/proc/self/task/*/stat` and adds it up
//! by the thread's name ([`role_of`]): a fixed set of roles, so the cardinality is bounded
//! whatever the threads. A thread that ended keeps the time it had at the last scrape that saw
//! it (folded into its role's total), so every series only grows. Where `/proc` has no tasks
//! (not Linux), every role reads 0.

use std::collections::HashMap;
use std::sync::Mutex;

/// The roles, in the order the series are written.
pub const ROLES: [&str; 5] = ["runtime", "node", "store", "read", "other"];

/// Clock ticks per second of `/proc`'s times (`USER_HZ`, 100 on Linux).
const TICKS_PER_S: f64 = 100.0;

/// The role of a thread by its name (`comm`, at most 15 bytes): `runtime` for tokio's threads
/// (workers and blocking threads, `tokio-rt-worker` or `tokio-runtime-worker` unless named) and the process's main
/// thread (`main`: its id is the process's), `node` for the node threads (`paros-node-N`),
/// `store` for the storage threads (`paros-store-N`, the store's applier and reclaimer,
/// fjall's workers), `read` for the read pools (`paros-read-…`), `other` for the rest.
#[must_use]
pub fn role_of(name: &str, main: bool) -> &'static str {
    if main || name.starts_with("tokio-") {
        "runtime"
    } else if name.starts_with("paros-node") {
        "node"
    } else if name.starts_with("paros-store") || name.starts_with("paros-reclaim") || name.starts_with("fjall") {
        "store"
    } else if name.starts_with("paros-read") {
        "read"
    } else {
        "other"
    }
}

/// The name and CPU ticks (user + system) of one `/proc/…/task/N/stat` line.
fn parse_stat(stat: &str) -> Option<(&str, u64)> {
    // `pid (comm) state ppid …`: comm may hold spaces and parentheses, so it ends at the last `)`.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?;
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime); the first after `)` is field 3.
    let (user, system) = (fields.get(11)?.parse::<u64>().ok()?, fields.get(12)?.parse::<u64>().ok()?);
    Some((name, user + system))
}

#[derive(Debug, Default)]
struct State {
    /// Live threads seen at the last scrape: id → (role index, ticks).
    live: HashMap<u32, (usize, u64)>,
    /// Ticks of threads that ended, by role.
    departed: [u64; ROLES.len()],
}

/// CPU time by role, read from `/proc/self/task` at each [`sample`](Self::sample).
#[derive(Debug, Default)]
pub struct ThreadCpu {
    state: Mutex<State>,
}

impl ThreadCpu {
    /// Seconds of CPU (user + system) each role of [`ROLES`] used since the process started.
    pub fn sample(&self) -> [f64; ROLES.len()] {
        let main = std::process::id();
        let mut now: HashMap<u32, (usize, u64)> = HashMap::new();
        if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
            for task in tasks.flatten() {
                let Some(tid) = task.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else { continue };
                let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { continue };
                if let Some((name, ticks)) = parse_stat(&stat) {
                    let role = role_of(name, tid == main);
                    let index = ROLES.iter().position(|r| *r == role).unwrap_or(ROLES.len() - 1);
                    now.insert(tid, (index, ticks));
                }
            }
        }
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let State { live, departed } = &mut *state;
        for (tid, (role, ticks)) in live.iter() {
            if !now.contains_key(tid) {
                departed[*role] += ticks;
            }
        }
        *live = now;
        let mut out = departed.map(|t| t as f64 / TICKS_PER_S);
        for (role, ticks) in live.values() {
            out[*role] += *ticks as f64 / TICKS_PER_S;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_are_grouped_by_name() {
        assert_eq!(role_of("tokio-runtime-w", false), "runtime");
        assert_eq!(role_of("tokio-rt-worker", false), "runtime");
        assert_eq!(role_of("paros", true), "runtime");
        assert_eq!(role_of("paros-node-3", false), "node");
        assert_eq!(role_of("paros-store-3", false), "store");
        assert_eq!(role_of("paros-store-app", false), "store");
        assert_eq!(role_of("paros-reclaim", false), "store");
        assert_eq!(role_of("fjall:worker", false), "store");
        assert_eq!(role_of("paros-read-3-1", false), "read");
        assert_eq!(role_of("something", false), "other");
        assert_eq!(parse_stat("12 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14"), Some(("a (b) c", 23)));
        assert_eq!(parse_stat("12 (x) S 1"), None);
    }

    #[test]
    fn a_busy_thread_moves_its_role_and_an_ended_one_keeps_its_time() {
        if std::fs::read_dir("/proc/self/task").is_err() {
            return;
        }
        let cpu = ThreadCpu::default();
        let before = cpu.sample();
        let node = ROLES.iter().position(|r| *r == "node").unwrap();
        std::thread::Builder::new()
            .name("paros-node-77".into())
            .spawn(|| {
                let started = std::time::Instant::now();
                let mut x = 0u64;
                while started.elapsed() < std::time::Duration::from_millis(300) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
                // Seen alive by a scrape before it ends.
                std::thread::sleep(std::time::Duration::from_millis(200));
            })
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(350));
        let during = cpu.sample();
        assert!(during[node] - before[node] >= 0.1, "{before:?} → {during:?}");
        std::thread::sleep(std::time::Duration::from_millis(300));
        let after = cpu.sample();
        assert!(after[node] >= during[node], "an ended thread's time stays counted: {during:?} → {after:?}");
        for (a, b) in before.iter().zip(after) {
            assert!(b >= *a, "every series only grows: {before:?} → {after:?}");
        }
    }
}
