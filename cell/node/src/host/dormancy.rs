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
//! boot anchor) is relearned, as after a restart.
//!
//! A journal woken by a call or a read campaigns at once, so the first write after a quiet
//! spell costs an election round, not an election timeout; one woken by a message comes back
//! quiesced, as it left (a Prepare or an Accept wakes it fully).
//!
//! The store read of a wake never runs on the node's thread: the first input for a dormant
//! journal asks for one wake, handed out as a [`FetchJob`](crate::FetchJob) like a page below
//! a window (bounded by the same `Host::set_fetches_max`; past it the wake waits for room, it is
//! never refused). Until its answer comes back the journal stays dormant and every input for it
//! is held, in arrival order, up to a bound per journal (calls past `Tunables::calls_max` are
//! answered `Busy`, reads past `Tunables::reads_max` `Unserved`, other inputs past
//! [`HELD_MESSAGES_MAX`] are dropped, as a lossy network may); a journal is never woken twice
//! at once. The step after its answer came back rebuilds it and replays what was held.
//!
//! After a boot every journal checks in once (`Voter::check_in`): it asks each peer for what it
//! missed, again until each has answered, and elects nobody unless it holds accepted entries no
//! answer says are chosen; a check-in of an idle journal writes nothing. One woken only to
//! check in sleeps again after [`CHECK_IN_QUIET_TICKS`](super::CHECK_IN_QUIET_TICKS) of
//! quiet, and so does one woken by a peer's message until it is given entries to accept or
//! asked something here. A journal a peer's election or leader reached has checked in; one a
//! peer's check-in woke before its own turn came takes its turn then (room permitting).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use paros_core::{Call, CallId, Durable, JournalKey, NodeId, ReadId, ReadRequest};

use super::fetches::Woken;
use super::{Early, Host, Hosted};
use crate::ports::{Envelope, LogStore};
use crate::rpc::NodeAnswer;

/// Protocol messages, campaigns and check-in wakes held for one journal while it is being woken,
/// at most; later ones are dropped (the protocol tolerates a lost message, and one campaign or
/// wake held is as good as many).
pub const HELD_MESSAGES_MAX: usize = 64;

/// An input for a dormant journal, replayed once it is woken.
#[derive(Debug)]
pub(super) enum Stashed {
    Deliver(NodeId, Envelope),
    Call(CallId, JournalKey, Call),
    Read(ReadId, JournalKey, ReadRequest),
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

/// A journal being woken: its wake's number, and the inputs held for it in arrival order (the
/// first decides how it comes back), counted by kind for the bound.
#[derive(Debug)]
pub(super) struct Waking {
    wake: u64,
    held: Vec<Stashed>,
    calls: usize,
    reads: usize,
    messages: usize,
}

/// Journals out of memory, the inputs waiting for them, and the quiet ones on their way out.
///
/// Invariants: `count` is the number of journals hosted dormant; a journal is due to sleep
/// only at the tick its latest quiet spell began (`quiet_at`: an older queue entry is stale);
/// at most `check_ins_max` journals are woken for a check-in by this machine's own turn.
#[derive(Debug)]
pub(super) struct Dormancy {
    /// Ticks of quiet before a journal goes dormant (`None`: never).
    pub(super) after: Option<u64>,
    /// When each quiet journal last went quiet, and the same in tick order.
    pub(super) quiet_at: HashMap<JournalKey, u64>,
    pub(super) quiet_queue: VecDeque<(u64, JournalKey)>,
    /// Inputs for dormant journals since the last wake pass ([`Host::wake_dormant`]).
    pub(super) stash: Vec<Stashed>,
    /// Journals being woken (their store read asked for and not answered yet), with the
    /// inputs held for each.
    pub(super) waking: HashMap<JournalKey, Waking>,
    /// The next wake's number: a wake's answer counts only for the wake it was asked for.
    pub(super) next_wake: u64,
    /// Journals hosted dormant now.
    pub(super) count: usize,
    /// Journals booted dormant and not checked in since (neither woken for their turn nor by
    /// a peer's election or leader), and how many to wake per tick.
    pub(super) boot_wakes: BTreeSet<JournalKey>,
    /// Replica journals that went dormant in this boot, caught up, and where each stood: they
    /// wake serving, and a feed mark at or below the chosen index it had applied does not wake
    /// them.
    pub(super) slept_serving: HashMap<JournalKey, SleptAt>,
    /// Journals with replica tiers to feed that went dormant in this boot as voters, and where
    /// each stood: its chosen index is the feed mark this machine repeats for it (`feed.rs`).
    pub(super) voter_marks: BTreeMap<JournalKey, SleptAt>,
    pub(super) boot_wakes_per_tick: usize,
    /// Journals woken only for a check-in, asked nothing since: to check in after this boot,
    /// or by a peer's message (a peer's check-in elects the journal everywhere) and given no
    /// entries to accept since. They sleep again after
    /// [`CHECK_IN_QUIET_TICKS`](super::CHECK_IN_QUIET_TICKS) of quiet, not `after`: a restart
    /// with 100,000 journals would otherwise hold every one in memory, on the machine that
    /// checks in and on its peers, for a whole `after`.
    pub(super) checking_in: HashSet<JournalKey>,
    pub(super) check_ins_max: usize,
    pub(super) check_in_queue: VecDeque<(u64, JournalKey)>,
    /// The configurations dormant journals keep, shared between equal ones.
    pub(super) configs: paros_core::ConfigPool,
    /// Awake journals whose life began with a wake from dormancy (for `HostStats`).
    pub(super) woken: HashSet<JournalKey>,
}

/// Where a journal stood when it went dormant.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct SleptAt {
    /// The chosen index it had applied.
    pub(super) chosen_up_to: paros_core::Slot,
    /// Its fold's `next_seq`: a read refused while it is dormant says it is applied that far.
    pub(super) applied_to: paros_core::Seq,
}

impl SleptAt {
    fn of(chosen_up_to: paros_core::Slot, state: &paros_core::journal::JournalState) -> SleptAt {
        SleptAt { chosen_up_to, applied_to: state.next_seq }
    }
}

impl Default for Dormancy {
    fn default() -> Self {
        Dormancy {
            after: Some(super::DORMANT_AFTER_TICKS),
            quiet_at: HashMap::new(),
            quiet_queue: VecDeque::new(),
            stash: Vec::new(),
            waking: HashMap::new(),
            next_wake: 0,
            count: 0,
            boot_wakes: BTreeSet::new(),
            slept_serving: HashMap::new(),
            voter_marks: BTreeMap::new(),
            boot_wakes_per_tick: super::BOOT_WAKES_PER_TICK,
            checking_in: HashSet::new(),
            check_ins_max: super::CHECK_INS_MAX,
            check_in_queue: VecDeque::new(),
            configs: paros_core::ConfigPool::default(),
            woken: HashSet::new(),
        }
    }
}

impl Dormancy {
    /// `key` went quiet at tick `now`: queue it to sleep later (sooner while it is here only
    /// for a check-in). Nothing when dormancy is off.
    fn note_quiet(&mut self, key: JournalKey, now: u64) {
        if self.after.is_some() {
            self.quiet_at.insert(key, now);
            if self.checking_in.contains(&key) {
                self.check_in_queue.push_back((now, key));
            } else {
                self.quiet_queue.push_back((now, key));
            }
        }
    }

    /// The quiet spells long enough at tick `now`: `(tick it began, journal)`, oldest first.
    /// A spell is stale when the journal went quiet again since ([`Dormancy::ends_spell`]).
    fn due(&mut self, now: u64) -> Vec<(u64, JournalKey)> {
        let Some(after) = self.after else { return Vec::new() };
        let mut due = Vec::new();
        for (queue, after) in
            [(&mut self.quiet_queue, after), (&mut self.check_in_queue, after.min(super::CHECK_IN_QUIET_TICKS))]
        {
            while let Some(&(at, key)) = queue.front() {
                if at.saturating_add(after) > now {
                    break;
                }
                queue.pop_front();
                due.push((at, key));
            }
        }
        due
    }

    /// True when `key`'s latest quiet spell began at `at`; that spell is then over.
    fn ends_spell(&mut self, key: &JournalKey, at: u64) -> bool {
        let current = self.quiet_at.get(key) == Some(&at);
        if current {
            self.quiet_at.remove(key);
        }
        current
    }
}

impl<S: LogStore> Host<S> {
    /// Journals quiet for `ticks` ticks go dormant (`None`: never). The default is
    /// [`DORMANT_AFTER_TICKS`](super::DORMANT_AFTER_TICKS).
    pub fn set_dormancy(&mut self, ticks: Option<u64>) {
        self.dormancy.after = ticks;
    }

    /// Ticks of quiet before a journal goes dormant (`None`: never).
    #[must_use]
    pub fn dormancy(&self) -> Option<u64> {
        self.dormancy.after
    }

    /// The number of journals dormant here.
    #[must_use]
    pub fn dormant_count(&self) -> usize {
        self.dormancy.count
    }

    /// True when `key` is hosted here and dormant.
    #[must_use]
    pub fn is_dormant(&self, key: &JournalKey) -> bool {
        matches!(self.journals.get(key), Some(Hosted::Dormant(_)))
    }

    /// How far `key` is applied here, as far as this machine knows without reading its store:
    /// an awake journal's fold's `next_seq`; a dormant one's when it went dormant in this boot
    /// as a replica or as a voter feeding a tier (`None` for the others, and for a journal not
    /// hosted here).
    pub(super) fn applied_to(&self, key: &JournalKey) -> Option<paros_core::Seq> {
        match self.journals.get(key)? {
            Hosted::Dormant(_) => {
                let at = self.dormancy.slept_serving.get(key).or_else(|| self.dormancy.voter_marks.get(key));
                at.map(|at| at.applied_to)
            }
            awake => awake.applied_to(),
        }
    }

    /// Journals booted dormant are woken this many per tick, once each, so every one checks in
    /// with its peers (a machine that was down catches up) without a boot storm.
    pub fn set_boot_wakes_per_tick(&mut self, n: usize) {
        self.dormancy.boot_wakes_per_tick = n;
    }

    /// At most this many journals are awake here for a check-in at once (counted with those a
    /// peer's check-in woke here): the next journal booted dormant waits for room. A machine
    /// slower than the wake rate, or check-ins that cannot end (a peer is down and never
    /// answers), then hold a bounded number of journals in memory; the rest wait, and any of
    /// them wakes at once for a call, a read or a peer's message (which this bound cannot
    /// refuse: a peer's check-ins are bounded by the peer's own setting).
    pub fn set_check_ins_max(&mut self, n: usize) {
        self.dormancy.check_ins_max = n;
    }

    /// Wakes the next journals booted dormant (called each tick).
    pub(super) fn wake_booted(&mut self) {
        // Journals still being woken may be here to check in once awake: they take room too.
        let room =
            self.dormancy.check_ins_max.saturating_sub(self.dormancy.checking_in.len() + self.dormancy.waking.len());
        for _ in 0..self.dormancy.boot_wakes_per_tick.min(room) {
            let Some(key) = self.dormancy.boot_wakes.pop_first() else { break };
            if self.is_dormant(&key) {
                self.dormancy.stash.push(Stashed::Wake(key));
            }
        }
    }

    /// A journal went quiet at this tick: it may go dormant later (sooner if it was woken only
    /// to check in after a boot).
    pub(super) fn note_quiet(&mut self, key: JournalKey) {
        self.dormancy.note_quiet(key, self.stats.ticks);
    }

    /// Puts to sleep the journals quiet for long enough (called each tick).
    pub(super) fn sleep_quiet(&mut self) {
        for (at, key) in self.dormancy.due(self.stats.ticks) {
            if !self.dormancy.ends_spell(&key, at) {
                continue;
            }
            match self.sleep_check(&key) {
                Sleep::Now => {
                    match &self.journals[&key] {
                        // Only a caught-up replica is quiet: it wakes serving.
                        Hosted::Replica(r) => {
                            self.dormancy.slept_serving.insert(key, SleptAt::of(r.chosen_up_to(), r.state()));
                        }
                        Hosted::Voter(v) if !v.config().learners.is_empty() => {
                            self.dormancy.voter_marks.insert(key, SleptAt::of(v.chosen_up_to(), v.state()));
                        }
                        _ => {}
                    }
                    let config = self.dormancy.configs.share(self.journals[&key].placed().clone());
                    self.journals.insert(key, Hosted::Dormant(config));
                    self.dormancy.checking_in.remove(&key);
                    self.dormancy.woken.remove(&key);
                    self.note_life(key, super::LifeEvent::Slept);
                    self.dormancy.count += 1;
                    self.stats.dormancies += 1;
                }
                // Quiet but busy this tick (in the round in flight, an answer owed): look again.
                Sleep::Later => self.note_quiet(key),
                // The chosen index it applied is not written yet: write it with the next round.
                Sleep::WriteChosen => {
                    self.journals.get_mut(&key).expect("checked hosted").write_chosen();
                    self.round.dirty.insert(key);
                    self.note_quiet(key);
                }
                Sleep::Never => {}
            }
        }
    }

    fn sleep_check(&self, key: &JournalKey) -> Sleep {
        let Some(j) = self.journals.get(key) else { return Sleep::Never };
        if matches!(j, Hosted::Dormant(_)) || self.round.awake.contains(key) || !j.is_quiet() {
            return Sleep::Never;
        }
        let owed = self.owing.owes(key);
        let busy = j.has_ready()
            || self.round.dirty.contains(key)
            || self.round.touched.contains(key)
            || self.round.keys.contains(key)
            || owed;
        if busy {
            Sleep::Later
        } else if !j.chosen_is_written() {
            Sleep::WriteChosen
        } else {
            Sleep::Now
        }
    }

    /// Wakes the dormant journals the stashed inputs are for, and replays the inputs in the
    /// order they arrived. The store is not read here: the first input for a dormant journal
    /// asks for its wake, which [`Host::take_fetches`] hands out as a
    /// [`FetchJob`](crate::FetchJob); its inputs are held meanwhile (within the bounds the
    /// module describes), and the pass after its answer came back ([`Host::fetched`]) rebuilds
    /// the journal and replays them. Answers owed at once (an unknown journal, a call to a
    /// replica, a held input past its bound, a journal the store could not read) go to `early`.
    /// A pass costs the inputs it was given and the wakes answered, not the inputs held.
    pub fn wake_dormant(&mut self, mut early: impl FnMut(Early)) {
        // The journals whose wake came back, with what was held for them: only the answer to
        // the wake in force counts (not one asked before the journal was removed, and maybe
        // placed again).
        for Woken { key, wake, durable } in self.fetches.take_woken() {
            if self.dormancy.waking.get(&key).is_none_or(|w| w.wake != wake) {
                continue;
            }
            let Waking { held, .. } = self.dormancy.waking.remove(&key).expect("checked waking");
            match durable {
                Some(durable) => {
                    if let Some(first) = held.first() {
                        self.wake(key, first, *durable);
                    }
                    for input in held {
                        self.replay(input, &mut early);
                    }
                }
                None => {
                    // Not readable now: it stays dormant; what was asked of it is refused (the
                    // next input asks again).
                    self.stats.fetch_errors += 1;
                    for input in held {
                        if let Some(e) = self.refuse_held(&input) {
                            early(e);
                        }
                    }
                }
            }
        }
        for input in std::mem::take(&mut self.dormancy.stash) {
            if self.is_dormant(&input.key()) {
                self.hold(input, &mut early);
            } else {
                self.replay(input, &mut early);
            }
        }
    }

    /// Gives `input` to its journal, now awake (or gone: then a call or a read is answered
    /// `UnknownJournal`).
    fn replay(&mut self, input: Stashed, early: &mut impl FnMut(Early)) {
        match input {
            Stashed::Deliver(from, e) => self.deliver(from, vec![e]),
            Stashed::Call(id, k, call) => {
                if let Some((owed, answer)) = self.call_owed(k, id, call) {
                    early(Early::Answer(owed, answer));
                }
            }
            Stashed::Read(id, k, read) => {
                if let Some((owed, answer)) = self.read_owed(k, id, read) {
                    early(Early::Answer(owed, answer));
                }
            }
            Stashed::Campaign(k) => self.campaign(&k),
            Stashed::Wake(_) => {}
        }
    }

    /// Holds `input` for its dormant journal until the journal is woken, asking for the wake
    /// if none is under way; past the journal's bound it is refused (or dropped) instead.
    fn hold(&mut self, input: Stashed, early: &mut impl FnMut(Early)) {
        let key = input.key();
        let waking = match self.dormancy.waking.entry(key) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let wake = self.dormancy.next_wake;
                self.dormancy.next_wake += 1;
                self.fetches.ask_wake(key, wake);
                v.insert(Waking { wake, held: Vec::new(), calls: 0, reads: 0, messages: 0 })
            }
        };
        let (count, max) = match input {
            Stashed::Call(..) => (&mut waking.calls, self.tunables.calls_max as usize),
            Stashed::Read(..) => (&mut waking.reads, self.tunables.reads_max as usize),
            Stashed::Deliver(..) | Stashed::Campaign(_) | Stashed::Wake(_) => (&mut waking.messages, HELD_MESSAGES_MAX),
        };
        if *count >= max {
            if let Some(e) = self.refuse_held(&input) {
                early(e);
            }
            return;
        }
        *count += 1;
        waking.held.push(input);
    }

    /// Refuses a held input for now (the caller retries): a call is answered `Busy`, a read
    /// `Unserved` (saying how far the journal was applied when it went dormant, when this boot
    /// noted it), and neither is owed any more; nobody waits on the other inputs.
    fn refuse_held(&mut self, input: &Stashed) -> Option<Early> {
        let (owed, answer) = match *input {
            Stashed::Call(id, k, _) => (self.owing.take_call(k, id)?, NodeAnswer::Call(paros_core::CallAnswer::Busy)),
            Stashed::Read(id, k, _) => {
                let applied_to = self.applied_to(&k);
                (self.owing.take_read(k, id)?, NodeAnswer::Read(paros_core::ReadAnswer::Unserved { applied_to }))
            }
            Stashed::Deliver(..) | Stashed::Campaign(_) | Stashed::Wake(_) => return None,
        };
        Some(Early::Answer(owed, answer))
    }

    /// Rebuilds dormant journal `key` from `durable`, read back from the store for `input`,
    /// the first input that waited for it (which decides how it comes back).
    fn wake(&mut self, key: JournalKey, input: &Stashed, durable: Durable) {
        let Some(Hosted::Dormant(config)) = self.journals.remove(&key) else { unreachable!("checked dormant") };
        self.dormancy.count -= 1;
        self.stats.wakes += 1;
        // A replica that went dormant in this boot was serving (only a caught-up journal
        // sleeps); one booted or placed dormant has not caught up since the machine started.
        let serving = self.dormancy.slept_serving.remove(&key).is_some();
        self.dormancy.voter_marks.remove(&key);
        self.install(key, std::sync::Arc::unwrap_or_clone(config), durable, serving);
        self.dormancy.woken.insert(key);
        if let Some(life) = self.journals.get(&key).and_then(Hosted::life) {
            self.note_life(key, super::LifeEvent::Woke(life));
        }
        // An input that checks in ends its turn after this boot. Any other (a peer's check-in
        // request, an answer) finds it awake anyway: if its own check-in is still to come, it
        // checks in now, room permitting.
        let turn = if input.checks_in() {
            self.dormancy.boot_wakes.remove(&key);
            false
        } else {
            self.dormancy.checking_in.len() < self.dormancy.check_ins_max && self.dormancy.boot_wakes.remove(&key)
        };
        if matches!(input, Stashed::Wake(_) | Stashed::Deliver(..)) {
            // Until it is given entries (see `deliver`) or asked something here.
            self.dormancy.checking_in.insert(key);
        }
        if matches!(input, Stashed::Call(..) | Stashed::Read(..)) {
            // No one leads a journal that slept here, and calls and reads are served by a
            // leader: elect now, not after an election timeout.
            self.campaign(&key);
        } else if let Some(Hosted::Voter(v)) = self.journals.get_mut(&key) {
            if matches!(input, Stashed::Wake(_)) || turn {
                // Asks its peers what it missed, without an election.
                v.check_in();
            } else if matches!(input, Stashed::Deliver(..)) {
                // Woken by a message: asleep as it left, until something needs it (a stray
                // acknowledgement must not start an election of a quiet journal).
                v.sleep();
            }
        }
    }

    /// `key` left this machine: its held inputs go (the calls and reads among them stay owed
    /// until the caller forgets what `key` owes).
    pub(super) fn forget_held(&mut self, key: &JournalKey) {
        self.fetches.forget_wakes(key);
        self.dormancy.waking.remove(key);
    }

    /// True when `key` is dormant and its wake is under way.
    #[must_use]
    pub fn is_waking(&self, key: &JournalKey) -> bool {
        self.dormancy.waking.contains_key(key)
    }
}

enum Sleep {
    Now,
    Later,
    WriteChosen,
    Never,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_sleeps_only_after_its_latest_quiet_spell_and_sooner_while_checking_in() {
        let (a, b) = (JournalKey::default(), JournalKey { journal: paros_core::JournalId(2), ..JournalKey::default() });
        let mut d = Dormancy { after: Some(100), ..Dormancy::default() };
        d.note_quiet(a, 0);
        d.checking_in.insert(b);
        d.note_quiet(b, 0);
        assert!(d.due(9).is_empty(), "not quiet long enough");
        assert_eq!(d.due(10), vec![(0, b)], "a journal here only to check in sleeps after CHECK_IN_QUIET_TICKS");
        d.note_quiet(a, 50);
        assert_eq!(d.due(100), vec![(0, a)]);
        assert!(!d.ends_spell(&a, 0), "a spell superseded by a later one is stale");
        assert_eq!(d.due(150), vec![(50, a)]);
        assert!(d.ends_spell(&a, 50) && !d.ends_spell(&a, 50), "a spell ends once");
        let mut off = Dormancy { after: None, ..Dormancy::default() };
        off.note_quiet(a, 0);
        assert!(off.due(u64::MAX).is_empty(), "dormancy off: nothing ever sleeps");
    }
}
