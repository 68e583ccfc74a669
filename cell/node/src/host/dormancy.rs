//! Dormant journals: a journal quiet for `dormant_after` ticks leaves memory (only its
//! configuration stays) and comes back from the store, exactly as at boot, when the next input
//! for it arrives. Idle journals then cost a map entry, not a voter.
//!
//! A journal goes dormant only when nothing of it is in flight: quiet (nothing proposed, held,
//! read or behind), no `Ready` waiting, not in the round being persisted, no call or read owed,
//! and its chosen index written down (a journal that applied past it first writes it with a
//! round). What the store reads back is then what this journal holds.
//! Waking is a reboot of that one journal: its promise, floor, anchors and the entries from its
//! boot anchor come back; what only lived in memory (who leads, the exact positions below the
//! boot anchor) is relearned, as after a restart. A journal woken by a call or a read campaigns
//! at once, so the first write after a quiet spell costs an election round, not an election
//! timeout; one woken by a message comes back quiesced, as it left (a Prepare or an Accept
//! wakes it fully).
//!
//! After a boot every journal checks in once (`Voter::check_in`): it asks each peer for what it
//! missed, again until each has answered, and elects nobody unless it holds accepted entries no
//! answer says are chosen; a check-in of an idle journal writes nothing. One woken only to
//! check in sleeps again after [`CHECK_IN_QUIET_TICKS`](super::CHECK_IN_QUIET_TICKS) of
//! quiet, and so does one woken by a peer's message until it is given entries to accept or
//! asked something here. A journal a peer's election or leader reached has checked in; one a
//! peer's check-in woke before its own turn came takes its turn then (room permitting).

use paros_core::{Call, JournalKey, NodeId, ReadRequest};

use super::{Early, Host, Hosted, Ticket};
use crate::ports::{Envelope, LogRead, LogStore};
use crate::rpc::NodeAnswer;

/// An input for a dormant journal, replayed once it is woken.
#[derive(Debug)]
pub(super) enum Stashed {
    Deliver(NodeId, Envelope),
    Call(Ticket, JournalKey, Call),
    Read(Ticket, JournalKey, ReadRequest),
    Campaign(JournalKey),
    /// Wake it and let it run (a journal booted dormant checks in with its peers once).
    Wake(JournalKey),
}

impl Stashed {
    /// True when waking for this input puts the journal in touch with its peers, as its
    /// check-in after a boot would: a call, a read, a campaign, or a peer's election or leader
    /// (an acknowledgement or an answer from a peer does not).
    fn checks_in(&self) -> bool {
        match self {
            Stashed::Deliver(_, e) => {
                matches!(
                    e.message,
                    paros_core::Message::Prepare { .. }
                        | paros_core::Message::Accept { .. }
                        | paros_core::Message::Heartbeat { .. }
                )
            }
            Stashed::Call(..) | Stashed::Read(..) | Stashed::Campaign(_) | Stashed::Wake(_) => true,
        }
    }

    fn key(&self) -> JournalKey {
        match self {
            Stashed::Deliver(_, e) => e.journal,
            Stashed::Call(_, k, _) | Stashed::Read(_, k, _) | Stashed::Campaign(k) | Stashed::Wake(k) => *k,
        }
    }
}

impl<S: LogStore> Host<S> {
    /// Journals quiet for `ticks` ticks go dormant (`None`: never). The default is
    /// [`DORMANT_AFTER_TICKS`](super::DORMANT_AFTER_TICKS).
    pub fn set_dormancy(&mut self, ticks: Option<u64>) {
        self.dormant_after = ticks;
    }

    /// Ticks of quiet before a journal goes dormant (`None`: never).
    #[must_use]
    pub fn dormancy(&self) -> Option<u64> {
        self.dormant_after
    }

    /// The number of journals dormant here.
    #[must_use]
    pub fn dormant_count(&self) -> usize {
        self.dormant
    }

    /// True when `key` is hosted here and dormant.
    #[must_use]
    pub fn is_dormant(&self, key: &JournalKey) -> bool {
        matches!(self.journals.get(key), Some(Hosted::Dormant(_)))
    }

    /// Journals booted dormant are woken this many per tick, once each, so every one checks in
    /// with its peers (a machine that was down catches up) without a boot storm.
    pub fn set_boot_wakes_per_tick(&mut self, n: usize) {
        self.boot_wakes_per_tick = n;
    }

    /// At most this many journals are awake here for a check-in at once (counted with those a
    /// peer's check-in woke here): the next journal booted dormant waits for room. A machine
    /// slower than the wake rate, or check-ins that cannot end (a peer is down and never
    /// answers), then hold a bounded number of journals in memory; the rest wait, and any of
    /// them wakes at once for a call, a read or a peer's message (which this bound cannot
    /// refuse: a peer's check-ins are bounded by the peer's own setting).
    pub fn set_check_ins_max(&mut self, n: usize) {
        self.check_ins_max = n;
    }

    /// Wakes the next journals booted dormant (called each tick).
    pub(super) fn wake_booted(&mut self) {
        let room = self.check_ins_max.saturating_sub(self.checking_in.len());
        for _ in 0..self.boot_wakes_per_tick.min(room) {
            let Some(key) = self.boot_wakes.pop_first() else { break };
            if self.is_dormant(&key) {
                self.stash.push(Stashed::Wake(key));
            }
        }
    }

    /// A journal went quiet at this tick: it may go dormant later (sooner if it was woken only
    /// to check in after a boot).
    pub(super) fn note_quiet(&mut self, key: JournalKey) {
        if self.dormant_after.is_some() {
            let now = self.stats.ticks;
            self.quiet_at.insert(key, now);
            if self.checking_in.contains(&key) {
                self.check_in_queue.push_back((now, key));
            } else {
                self.quiet_queue.push_back((now, key));
            }
        }
    }

    /// Puts to sleep the journals quiet for long enough (called each tick).
    pub(super) fn sleep_quiet(&mut self) {
        let Some(after) = self.dormant_after else { return };
        let mut due = Vec::new();
        for (queue, after) in
            [(&mut self.quiet_queue, after), (&mut self.check_in_queue, after.min(super::CHECK_IN_QUIET_TICKS))]
        {
            while let Some(&(at, key)) = queue.front() {
                if at.saturating_add(after) > self.stats.ticks {
                    break;
                }
                queue.pop_front();
                due.push((at, key));
            }
        }
        for (at, key) in due {
            if self.quiet_at.get(&key) != Some(&at) {
                continue;
            }
            self.quiet_at.remove(&key);
            match self.sleep_check(&key) {
                Sleep::Now => {
                    let config = self.configs.share(self.journals[&key].config().clone());
                    self.journals.insert(key, Hosted::Dormant(config));
                    self.checking_in.remove(&key);
                    self.woken.remove(&key);
                    self.note_life(key, super::LifeEvent::Slept);
                    self.dormant += 1;
                    self.stats.dormancies += 1;
                }
                // Quiet but busy this tick (in the round in flight, an answer owed): look again.
                Sleep::Later => self.note_quiet(key),
                // The chosen index it applied is not written yet: write it with the next round.
                Sleep::WriteChosen => {
                    self.journals.get_mut(&key).expect("checked hosted").write_chosen();
                    self.dirty.insert(key);
                    self.note_quiet(key);
                }
                Sleep::Never => {}
            }
        }
    }

    fn sleep_check(&self, key: &JournalKey) -> Sleep {
        let Some(j) = self.journals.get(key) else { return Sleep::Never };
        if matches!(j, Hosted::Dormant(_)) || self.awake.contains(key) || !j.is_quiet() {
            return Sleep::Never;
        }
        let owed = self
            .calls
            .range((*key, paros_core::CallId(0))..=(*key, paros_core::CallId(u64::MAX)))
            .next()
            .is_some()
            || self.reads.range((*key, paros_core::ReadId(0))..=(*key, paros_core::ReadId(u64::MAX))).next().is_some();
        let busy = j.has_ready()
            || self.dirty.contains(key)
            || self.touched.contains(key)
            || self.round_keys.contains(key)
            || owed;
        if busy {
            Sleep::Later
        } else if !j.chosen_is_written() {
            Sleep::WriteChosen
        } else {
            Sleep::Now
        }
    }

    /// Wakes the dormant journals the stashed inputs are for, from `reader`, and replays the
    /// inputs in the order they arrived. Answers owed at once (an unknown journal, a call to a
    /// replica, a journal the store could not read) go to `early`.
    pub fn wake_dormant(&mut self, reader: &dyn LogRead, mut early: impl FnMut(Early)) {
        for input in std::mem::take(&mut self.stash) {
            let key = input.key();
            if self.is_dormant(&key) {
                let durable = match reader.load_journal(&key) {
                    Ok(d) => d.unwrap_or_default(),
                    Err(_) => {
                        // Not readable now: it stays dormant; what was asked of it is refused.
                        self.stats.fetch_errors += 1;
                        match input {
                            Stashed::Call(t, ..) => {
                                early(Early::Answer(t, NodeAnswer::Call(paros_core::CallAnswer::Busy)))
                            }
                            Stashed::Read(t, ..) => {
                                early(Early::Answer(t, NodeAnswer::Read(paros_core::ReadAnswer::Unserved)))
                            }
                            Stashed::Deliver(..) | Stashed::Campaign(_) | Stashed::Wake(_) => {}
                        }
                        continue;
                    }
                };
                let Some(Hosted::Dormant(config)) = self.journals.remove(&key) else { unreachable!("checked dormant") };
                self.dormant -= 1;
                self.stats.wakes += 1;
                self.install(key, std::sync::Arc::unwrap_or_clone(config), durable);
                self.woken.insert(key);
                if let Some(life) = self.journals.get(&key).and_then(Hosted::life) {
                    self.note_life(key, super::LifeEvent::Woke(life));
                }
                // An input that checks in ends its turn after this boot. Any other (a peer's
                // check-in request, an answer) finds it awake anyway: if its own check-in is
                // still to come, it checks in now, room permitting.
                let turn = if input.checks_in() {
                    self.boot_wakes.remove(&key);
                    false
                } else {
                    self.checking_in.len() < self.check_ins_max && self.boot_wakes.remove(&key)
                };
                if matches!(input, Stashed::Wake(_) | Stashed::Deliver(..)) {
                    // Until it is given entries (see `deliver`) or asked something here.
                    self.checking_in.insert(key);
                }
                if matches!(input, Stashed::Call(..) | Stashed::Read(..)) {
                    // No one leads a journal that slept here, and calls and reads are served
                    // by a leader: elect now, not after an election timeout.
                    self.campaign(&key);
                } else if let Some(Hosted::Voter(v)) = self.journals.get_mut(&key) {
                    if matches!(input, Stashed::Wake(_)) || turn {
                        // Asks its peers what it missed, without an election.
                        v.check_in();
                    } else if matches!(input, Stashed::Deliver(..)) {
                        // Woken by a message: asleep as it left, until something needs it (a
                        // stray acknowledgement must not start an election of a quiet journal).
                        v.sleep();
                    }
                }
            }
            match input {
                Stashed::Deliver(from, e) => self.deliver(from, vec![e]),
                Stashed::Call(t, k, call) => {
                    if let Err(answer) = self.call(t, k, call) {
                        early(Early::Answer(t, answer));
                    }
                }
                Stashed::Read(t, k, read) => {
                    if let Err(answer) = self.read(t, k, read) {
                        early(Early::Answer(t, answer));
                    }
                }
                Stashed::Campaign(k) => self.campaign(&k),
                Stashed::Wake(_) => {}
            }
        }
    }
}

enum Sleep {
    Now,
    Later,
    WriteChosen,
    Never,
}
