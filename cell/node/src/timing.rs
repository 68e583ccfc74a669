//! Where a round's time goes, as the shell measures it: waiting for the previous round
//! (queueing), the store's write, its sync, and the hop from the sync's end back to the node
//! thread sending what the round released. Wall-clock figures of the runtime shell only; the
//! simulation and the sans-IO host never read a clock.

/// Sub-buckets per power of two: values are kept to within 1/8 (12.5%).
const SUB: usize = 8;
/// Powers of two covered (microseconds up to 2^40, ~12 days).
const OCTAVES: usize = 40;

/// A histogram of microsecond durations in logarithmic buckets (fixed size, no allocation).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Histogram {
    counts: Box<[u64]>,
    total: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: vec![0; SUB * OCTAVES].into_boxed_slice(), total: 0, max: 0 }
    }
}

fn bucket(us: u64) -> usize {
    if us < SUB as u64 {
        return us as usize;
    }
    let octave = 63 - us.leading_zeros() as usize; // ≥ 3
    let sub = ((us >> (octave - 3)) & (SUB as u64 - 1)) as usize;
    ((octave - 2) * SUB + sub).min(SUB * OCTAVES - 1)
}

/// The largest value a bucket holds.
fn bucket_top(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let octave = i / SUB + 2;
    let sub = (i % SUB) as u64;
    ((SUB as u64 + sub + 1) << (octave - 3)) - 1
}

impl Histogram {
    pub fn record(&mut self, us: u64) {
        self.counts[bucket(us)] += 1;
        self.total += 1;
        self.max = self.max.max(us);
    }

    /// Values recorded.
    #[must_use]
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The value at or below which a fraction `q` (0..=1) of the recorded values lie, to
    /// within a bucket (reported as the bucket's top, never above the largest value seen).
    #[must_use]
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "a rank"
        )]
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_top(i).min(self.max);
            }
        }
        self.max
    }

    /// What was recorded after `earlier` (a copy of this histogram taken before).
    #[must_use]
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        let counts: Box<[u64]> =
            self.counts.iter().zip(earlier.counts.iter()).map(|(a, b)| a.saturating_sub(*b)).collect();
        Histogram { counts, total: self.total.saturating_sub(earlier.total), max: self.max }
    }

    /// Adds `other`'s values to this one.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
    }
}

/// One node's round time split since it started.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct RoundTimes {
    /// From the first input a round absorbs to its batch leaving for the store: the wait
    /// behind the round before it.
    pub queue: Histogram,
    /// The store's `place` + `write` of one round.
    pub write: Histogram,
    /// The store's `sync` of one round (rounds that synced).
    pub sync: Histogram,
    /// From the sync's end on the storage thread to the node thread having sent what the
    /// completed round released.
    pub hop: Histogram,
}

impl RoundTimes {
    /// What was recorded after `earlier`.
    #[must_use]
    pub fn since(&self, earlier: &RoundTimes) -> RoundTimes {
        RoundTimes {
            queue: self.queue.since(&earlier.queue),
            write: self.write.since(&earlier.write),
            sync: self.sync.since(&earlier.sync),
            hop: self.hop.since(&earlier.hop),
        }
    }

    /// Adds `other`'s values.
    pub fn merge(&mut self, other: &RoundTimes) {
        self.queue.merge(&other.queue);
        self.write.merge(&other.write);
        self.sync.merge(&other.sync);
        self.hop.merge(&other.hop);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_their_values_within_an_eighth() {
        for us in [0, 1, 7, 8, 9, 15, 16, 17, 100, 1_000, 12_345, 1 << 30] {
            let top = bucket_top(bucket(us));
            assert!(top >= us, "{us} lies at or below its bucket's top {top}");
            assert!(top - us <= us / 8, "{us}: bucket top {top} is within an eighth");
        }
        let mut last = 0;
        for us in 0..5_000u64 {
            let b = bucket(us);
            assert!(b >= last, "buckets grow with the value");
            last = b;
        }
    }

    #[test]
    fn quantiles_and_differences() {
        let mut h = Histogram::default();
        assert_eq!(h.quantile(0.99), 0);
        for us in 1..=1000 {
            h.record(us);
        }
        let p50 = h.quantile(0.5);
        assert!((500..=560).contains(&p50), "p50 {p50}");
        let p99 = h.quantile(0.99);
        assert!((990..=1000).contains(&p99), "p99 {p99} is capped by the largest value");
        let before = h.clone();
        h.record(50_000);
        let later = h.since(&before);
        assert_eq!(later.count(), 1);
        assert!(later.quantile(0.5) >= 50_000 * 7 / 8);
        let mut sum = before.clone();
        sum.merge(&later);
        assert_eq!(sum.count(), h.count());
    }
}
