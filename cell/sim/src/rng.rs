//! The world's seeded generator: splitmix64. Every draw in a run comes from one seed, so a run
//! replays bit for bit.

/// Splitmix64 over a seed.
#[derive(Clone, Debug)]
pub struct SimRng(u64);

impl SimRng {
    #[must_use]
    pub fn new(seed: u64) -> SimRng {
        SimRng(seed ^ 0x6a09_e667_f3bc_c908)
    }

    pub fn u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A draw in `[0, n)`.
    ///
    /// # Panics
    /// When `n` is zero.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "a draw needs a non-empty range");
        self.u64() % n
    }

    /// A draw in `[lo, hi]`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        assert!(hi >= lo, "a draw needs lo <= hi");
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `per_million` / 1,000,000.
    pub fn chance(&mut self, per_million: u64) -> bool {
        self.below(1_000_000) < per_million
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// An independent generator derived from this one's state without advancing it: knobs
    /// added to a world later draw from it, so every seed's older draws stay what they were.
    #[must_use]
    pub fn side(&self, salt: u64) -> SimRng {
        let mut s = SimRng(self.0 ^ salt.wrapping_mul(0xd6e8_feb8_6659_fd93));
        s.u64();
        s
    }

    /// An independent generator drawn from this one.
    pub fn fork(&mut self) -> SimRng {
        SimRng(self.u64())
    }

    /// Shuffles `items` in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}
