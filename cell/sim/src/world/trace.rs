//! The event trace of a run: a digest of everything that happened, in order, and optionally a
//! printed timeline. Two runs of one seed produce the same digest or the run is not deterministic.

use std::io::Write;

/// FNV-1a over every traced event; prints the timeline when asked.
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

    fn absorb(&mut self, x: u64) {
        for b in x.to_le_bytes() {
            self.hash = (self.hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// Records one event: `kind` and `fields` go into the digest; `describe` is called only when
    /// the timeline is printed.
    pub fn event(&mut self, now: u64, kind: &'static str, fields: &[u64], describe: impl FnOnce() -> String) {
        self.events += 1;
        self.absorb(now);
        for b in kind.bytes() {
            self.absorb(u64::from(b));
        }
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
        for b in kind.bytes() {
            self.absorb(u64::from(b));
        }
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
