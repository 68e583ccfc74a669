//! Feed marks repeated per tier: the watermarks of the journals this machine votes in, for
//! their replica tiers.
//!
//! A leader marks its tiers' feeds itself while its journal's chosen prefix moves and once as
//! it quiesces (`Voter::mark_feed`). Those can be lost, and an idle journal sends nothing
//! more: a replica that missed them would stay behind until a read finds the gap. So every
//! `refresh_ticks` this machine repeats the marks of the journals it votes in — awake ones
//! from their voter, dormant ones from what they had chosen when they went to sleep — at most
//! `per_refresh_max` journals each time, taking turns through them. Every voter does, not only
//! the leader: an idle journal may have none (its leader crashed and no input elected
//! another), and a follower's chosen prefix is as chosen as the leader's. The marks for one
//! feed leave in one bus message: one message per tier per voter per refresh, not one per
//! journal. A replica asleep on a journal takes a mark of what it has applied as no news,
//! without waking it.

use std::collections::BTreeMap;

use paros_core::{JournalKey, Message, NodeId, Slot};

use super::{Host, Hosted};
use crate::ports::{Envelope, LogStore};

/// Ticks between two repeats of the feed marks, by default.
pub const FEED_MARK_REFRESH_TICKS: u64 = 10;

/// Journals whose marks one repeat carries at most, by default.
pub const FEED_MARKS_PER_REFRESH: usize = 1024;

#[derive(Debug)]
pub(super) struct Marks {
    refresh_ticks: u64,
    per_refresh_max: usize,
    /// Where the next repeat starts (the journal after the last one looked at).
    cursor: Option<JournalKey>,
    /// Marks to send with the next round, by feed.
    pending: BTreeMap<NodeId, Vec<Envelope>>,
}

impl Default for Marks {
    fn default() -> Self {
        Marks {
            refresh_ticks: FEED_MARK_REFRESH_TICKS,
            per_refresh_max: FEED_MARKS_PER_REFRESH,
            cursor: None,
            pending: BTreeMap::new(),
        }
    }
}

impl Marks {
    pub(super) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    pub(super) fn take_pending(&mut self) -> BTreeMap<NodeId, Vec<Envelope>> {
        std::mem::take(&mut self.pending)
    }
}

impl<S: LogStore> Host<S> {
    /// Sets how often the feed marks are repeated (every `refresh_ticks` ticks, at least 1) and
    /// how many journals one repeat covers at most (at least 1).
    pub fn set_feed_marks(&mut self, refresh_ticks: u64, per_refresh_max: usize) {
        self.marks.refresh_ticks = refresh_ticks.max(1);
        self.marks.per_refresh_max = per_refresh_max.max(1);
    }

    /// On a tick: when a repeat is due, queues the marks of the next journals voted in here.
    pub(super) fn repeat_feed_marks(&mut self) {
        if !self.stats.ticks.is_multiple_of(self.marks.refresh_ticks) {
            return;
        }
        use std::ops::Bound::{Excluded, Unbounded};
        let (after, before) = match self.marks.cursor {
            Some(c) => (self.journals.range((Excluded(c), Unbounded)), self.journals.range(..=c)),
            // The default key is the least: nothing lies below it.
            None => (self.journals.range(..), self.journals.range(..JournalKey::default())),
        };
        let keys: Vec<JournalKey> = after.chain(before).map(|(k, _)| *k).take(self.marks.per_refresh_max).collect();
        self.marks.cursor = keys.last().copied();
        for key in keys {
            let (learners, chosen): (&[NodeId], Slot) = match &self.journals[&key] {
                Hosted::Voter(v) => (&v.config().learners, v.chosen_up_to()),
                Hosted::Dormant(config) => match self.dormancy.voter_marks.get(&key) {
                    Some(at) => (&config.learners, at.chosen_up_to),
                    None => continue,
                },
                _ => continue,
            };
            for feed in learners {
                let mark =
                    Envelope { journal: key, from: self.me, message: Message::FeedMark { chosen_up_to: chosen } };
                self.marks.pending.entry(*feed).or_default().push(mark);
                self.stats.feed_marks_repeated += 1;
            }
        }
    }
}
