//! The event trace of a run: a digest of everything that happened, in order, and optionally a
//! printed timeline. Two runs of one seed produce the same digest or the run is not deterministic.

use std::io::Write;

/// A digest of every traced event, word by word; prints the timeline when asked.
#[derive(Debug)]
pub struct Trace {
    hash: u64,
    events: u64,
    timeline: bool,
}

impl Trace {
    #[must_use]
    pub fn new(timeline: bool) -> Trace {
        Trace { hash: 0xcbf2_9ce4_8422_2325, events: 0, timeline }
    }

    /// Mixes one word in (a multiply-rotate step per word, not per byte: the trace absorbs
    /// every event of a run).
    fn absorb(&mut self, x: u64) {
        self.hash = (self.hash ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }

    fn absorb_kind(&mut self, kind: &str) {
        for chunk in kind.as_bytes().chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.absorb(u64::from_le_bytes(word));
        }
    }

    /// Records one event: `kind` and `fields` go into the digest; `describe` is called only when
    /// the timeline is printed.
    pub fn event(&mut self, now: u64, kind: &'static str, fields: &[u64], describe: impl FnOnce() -> String) {
        self.events += 1;
        self.absorb(now);
        self.absorb_kind(kind);
        for f in fields {
            self.absorb(*f);
        }
        if self.timeline {
            let line = format!("{:>7}.{:06}ms {kind:<10} {}", now / 1_000_000, now % 1_000_000, describe());
            let _ = writeln!(std::io::stdout().lock(), "{line}");
        }
    }

    /// Records an event that is never printed (clock ticks and the like).
    pub fn quiet(&mut self, now: u64, kind: &'static str, fields: &[u64]) {
        self.events += 1;
        self.absorb(now);
        self.absorb_kind(kind);
        for f in fields {
            self.absorb(*f);
        }
    }

    #[must_use]
    pub fn hash(&self) -> u64 {
        self.hash
    }

    #[must_use]
    pub fn events(&self) -> u64 {
        self.events
    }

    #[must_use]
    pub fn printing(&self) -> bool {
        self.timeline
    }
}
