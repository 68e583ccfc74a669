//! The bounded poll a waiting thread runs before it sleeps (how long: [`crate::schedule::Spin`]).

use std::time::{Duration, Instant};

/// Calls `poll` until it yields something or `limit` has passed, giving the core to any other
/// runnable thread between calls.
pub(super) fn spin_for<T>(limit: Duration, mut poll: impl FnMut() -> Option<T>) -> Option<T> {
    if limit.is_zero() {
        return None;
    }
    let started = Instant::now();
    loop {
        if let Some(t) = poll() {
            return Some(t);
        }
        if started.elapsed() >= limit {
            return None;
        }
        std::thread::yield_now();
    }
}

/// Microseconds in `d`, saturating.
pub(super) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spin_returns_what_the_poll_yields_and_gives_up_at_its_limit() {
        let mut calls = 0;
        assert_eq!(
            spin_for(Duration::from_secs(5), || {
                calls += 1;
                (calls == 3).then_some(calls)
            }),
            Some(3)
        );
        let mut calls = 0;
        assert_eq!(
            spin_for(Duration::ZERO, || {
                calls += 1;
                Some(())
            }),
            None,
            "no spin: sleep at once"
        );
        assert_eq!(calls, 0, "a zero spin never polls");
        let started = Instant::now();
        assert_eq!(spin_for(Duration::from_millis(20), || None::<()>), None);
        let spent = started.elapsed();
        assert!(spent >= Duration::from_millis(20) && spent < Duration::from_secs(2), "gave up after {spent:?}");
    }
}
