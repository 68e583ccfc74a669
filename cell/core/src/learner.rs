//! The learner: which slots are chosen, and the contiguous walk that folds them.

use crate::config::Tunables;
use crate::ids::{Ballot, Life, NodeId, Slot};
use crate::journal::{Anchoring, Command, Digested, Fold, JournalState, Judged, Outcome, WriterMode};
use crate::log::{Log, LogEntry, WriteOp};
use crate::message::Message;
use crate::reads::Fetch;

/// How far the chosen prefix moves before its index is written down again.
pub const CHOSEN_PERSIST_SLOTS: u64 = 64;

/// One slot the walk applied.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Walked {
    pub slot: Slot,
    pub digest: u64,
    pub judged: Judged,
    /// The ballot this node held the chosen command at (`None`: learned as chosen from a peer).
    pub ballot: Option<Ballot>,
}

/// How much of the chosen log a learner keeps in memory below its chosen index: at most
/// `slots` slots and `bytes` record bytes (the oldest go once durable).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Window {
    pub slots: u32,
    pub bytes: u32,
}

impl Window {
    /// Keeps everything.
    pub const ALL: Window = Window { slots: u32::MAX, bytes: u32::MAX };

    #[must_use]
    pub fn of(tunables: &Tunables) -> Window {
        Window { slots: tunables.window_slots, bytes: tunables.window_bytes }
    }
}

/// The learner role: the chosen prefix of one journal and its fold.
#[derive(Clone, Debug)]
pub struct Learner {
    fold: Fold,
    anchoring: Anchoring,
    window: Window,
    /// The fold base at the log's floor (what a laggard below the floor is told).
    sealed: JournalState,
    /// The best commit heard: slots below `.1` are chosen, and a value accepted here at a
    /// ballot at or above `.0` is the chosen one.
    commit: Option<(Ballot, Slot)>,
    /// The highest slot anyone told us is chosen (exclusive): while our prefix is below it, we
    /// are behind and ask for catch-up. Every way a slot becomes chosen here (a commit, a
    /// learned command, a jump, entries learned before a reboot) raises it, so the walk looks
    /// at the log only below it.
    known_chosen: Slot,
    /// The chosen index last written to storage.
    persisted_chosen: Slot,
    /// The chosen index known synced to storage: a reboot never comes back below it. What this
    /// node tells a campaign it knows chosen (a fact the campaign trusts to skip slots).
    synced_chosen: Slot,
    /// The index the round in flight writes, if that round syncs.
    syncing_chosen: Option<Slot>,
}

impl Learner {
    /// A learner over `log` (whose window starts at its floor), from the sealed state there,
    /// taking no anchors.
    #[must_use]
    pub fn new(mode: WriterMode, log: &Log, sealed: JournalState, chosen_up_to: Slot) -> Learner {
        Learner::resume(mode, log, sealed, &[], Anchoring::NEVER, Window::ALL, chosen_up_to)
    }

    /// A learner over `log`, whose floor's sealed state is `sealed`, resuming the fold at the
    /// window's start from the last of `anchors` (the durable checkpoints above the floor; the
    /// last one at or below the window's start is the state there).
    ///
    /// # Panics
    /// When no anchor (nor the floor) lies at the window's start.
    #[must_use]
    pub fn resume(
        mode: WriterMode,
        log: &Log,
        sealed: JournalState,
        anchors: &[(Slot, JournalState)],
        anchoring: Anchoring,
        window: Window,
        chosen_up_to: Slot,
    ) -> Learner {
        let floor = log.floor();
        assert!(chosen_up_to >= floor, "the chosen index is never below the floor");
        let mut base = vec![(floor, sealed)];
        base.extend(anchors.iter().copied().filter(|(s, _)| *s > floor && *s <= log.start()));
        assert_eq!(
            base.last().map(|(s, _)| *s),
            Some(log.start()),
            "the fold resumes from an anchor at the window's start"
        );
        Learner {
            fold: Fold::resume(mode, base, anchoring),
            anchoring,
            window,
            sealed,
            commit: None,
            known_chosen: chosen_up_to.max(log.learned_end().unwrap_or(chosen_up_to)),
            persisted_chosen: chosen_up_to,
            synced_chosen: chosen_up_to,
            syncing_chosen: None,
        }
    }

    /// Every slot below this one is chosen and applied here.
    #[must_use]
    pub fn chosen_up_to(&self) -> Slot {
        self.fold.next_slot()
    }

    /// The journal state folded so far.
    #[must_use]
    pub fn state(&self) -> &JournalState {
        self.fold.state()
    }

    #[must_use]
    pub fn fold(&self) -> &Fold {
        &self.fold
    }

    /// Every slot below this one is chosen here and stays chosen here across a reboot: its
    /// index reached storage in a round that synced. Never above [`chosen_up_to`](Self::chosen_up_to).
    #[must_use]
    pub fn durable_chosen(&self) -> Slot {
        self.synced_chosen
    }

    /// The round being handed to storage: `syncs` says whether the host will sync it (some
    /// write needs a sync). The chosen index written so far becomes durable when that round
    /// is [`synced`](Self::round_synced).
    pub fn round_taken(&mut self, syncs: bool) {
        self.syncing_chosen = syncs.then_some(self.persisted_chosen);
    }

    /// The round handed over at [`round_taken`](Self::round_taken) is durable.
    pub fn round_synced(&mut self) {
        if let Some(up_to) = self.syncing_chosen.take() {
            self.synced_chosen = self.synced_chosen.max(up_to);
        }
    }

    /// Evicts chosen, durable entries from the front of the window while it holds more than
    /// the tunables allow; the fold forgets their exact positions (its anchors stay).
    ///
    /// Only slots below the chosen index known synced go: that index is what a campaign is
    /// told is chosen here (and so needs no report of the values below it), and it survives a
    /// reboot.
    pub fn evict(&mut self, log: &mut Log) {
        let start = log.evict_over(self.synced_chosen, self.chosen_up_to(), self.window.slots, self.window.bytes);
        self.fold.forget_positions_below(start);
    }

    /// The chosen index written to storage (synced or not).
    #[must_use]
    pub fn persisted_chosen(&self) -> Slot {
        self.persisted_chosen
    }

    /// Writes the chosen index down now if it moved since it last was (before a journal leaves
    /// memory: it comes back from what was written).
    pub fn persist_chosen(&mut self, writes: &mut Vec<WriteOp>) {
        if self.chosen_up_to() > self.persisted_chosen {
            self.persisted_chosen = self.chosen_up_to();
            writes.push(WriteOp::Chosen { up_to: self.persisted_chosen });
        }
    }

    /// True while someone told us of chosen slots we have not applied.
    #[must_use]
    pub fn is_behind(&self) -> bool {
        self.known_chosen > self.chosen_up_to()
    }

    /// The end of the chosen prefix as far as anyone told us (at least our own).
    #[must_use]
    pub fn known_chosen(&self) -> Slot {
        self.known_chosen.max(self.chosen_up_to())
    }

    /// A leader at `ballot` says every slot below `up_to` is chosen.
    pub fn on_commit(&mut self, ballot: Ballot, up_to: Slot) {
        self.known_chosen = self.known_chosen.max(up_to);
        let better = match self.commit {
            None => true,
            Some((b, u)) => ballot > b || (ballot == b && up_to > u),
        };
        if better {
            self.commit = Some((ballot, up_to));
        }
    }

    /// A peer says every slot below `up_to` is chosen there (a Promise, a Nack's floor, a
    /// heartbeat acknowledgement, a catch-up answer): until our prefix reaches it we are behind,
    /// so we keep asking and never quiesce. It makes no value chosen here by itself.
    pub fn note_chosen(&mut self, up_to: Slot) {
        self.known_chosen = self.known_chosen.max(up_to);
    }

    /// A page of chosen commands from a peer (a leader's feed, or a catch-up answer from a peer
    /// whose chosen prefix ends at `peer_chosen`): every one is learned. The caller walks.
    pub fn learn_page(
        &mut self,
        log: &mut Log,
        entries: &[(Slot, Command)],
        peer_chosen: Option<Slot>,
        writes: &mut Vec<WriteOp>,
    ) {
        if let Some(up_to) = peer_chosen {
            self.note_chosen(up_to);
        }
        for (slot, command) in entries {
            self.learn(log, *slot, command, writes);
        }
    }

    /// `command` is known chosen at `slot`, as a peer or a leader's `Chosen` says: its digest is
    /// computed here, once, if the log takes it.
    pub fn learn(&mut self, log: &mut Log, slot: Slot, command: &Command, writes: &mut Vec<WriteOp>) {
        self.learn_with(log, slot, command, || Digested::new(command.clone()), writes);
    }

    /// `command` is known chosen at `slot` by our own quorum: it keeps the digest it was
    /// proposed with.
    pub fn learn_digested(&mut self, log: &mut Log, slot: Slot, command: &Digested, writes: &mut Vec<WriteOp>) {
        self.learn_with(log, slot, command.command(), || command.clone(), writes);
    }

    fn learn_with(
        &mut self,
        log: &mut Log,
        slot: Slot,
        command: &Command,
        digested: impl FnOnce() -> Digested,
        writes: &mut Vec<WriteOp>,
    ) {
        if slot < self.chosen_up_to() || slot < log.floor() {
            return;
        }
        self.known_chosen = self.known_chosen.max(slot.next());
        if log.get(slot).is_some_and(|e| e.ballot.is_none()) {
            return;
        }
        log.put(slot, None, digested());
        writes.push(WriteOp::Learn { slot, command: command.clone() });
    }

    fn is_chosen(&self, log: &Log, slot: Slot) -> bool {
        match log.get(slot) {
            None => false,
            Some(LogEntry { ballot: None, .. }) => true,
            Some(LogEntry { ballot: Some(b), .. }) => self.commit.is_some_and(|(cb, up_to)| slot < up_to && *b >= cb),
        }
    }

    /// Applies every chosen slot in order from the prefix end, compacting at each trim.
    pub fn walk(&mut self, log: &mut Log, writes: &mut Vec<WriteOp>, walked: &mut Vec<Walked>) {
        // Nothing at or past `known_chosen` can be chosen: skip the log lookup (the walk runs
        // after every input, most of which choose nothing).
        while self.chosen_up_to() < self.known_chosen && self.is_chosen(log, self.chosen_up_to()) {
            self.apply_next(log, writes, walked);
        }
        // The chosen index is a hint (a node that reboots behind it re-learns the slots): write
        // it every `CHOSEN_PERSIST_SLOTS` slots, not every round, to spare a row per round —
        // sooner while the window is over its bounds, since only slots below the synced index
        // may leave memory.
        let moved = self.chosen_up_to().0 - self.persisted_chosen.0;
        let every = CHOSEN_PERSIST_SLOTS.min(u64::from(self.window.slots).max(1));
        if moved >= every || (moved > 0 && log.bytes() > u64::from(self.window.bytes)) {
            self.persisted_chosen = self.chosen_up_to();
            writes.push(WriteOp::Chosen { up_to: self.persisted_chosen });
        }
        self.known_chosen = self.known_chosen.max(self.chosen_up_to());
    }

    /// Applies the chosen slot at the prefix end, compacting if it trimmed.
    fn apply_next(&mut self, log: &mut Log, writes: &mut Vec<WriteOp>, walked: &mut Vec<Walked>) {
        let slot = self.chosen_up_to();
        let (entry, digest) = log.get_with_digest(slot).expect("a chosen slot above the floor is held");
        let (command, ballot) = (&entry.command, entry.ballot);
        let judged = self.fold.apply(slot, command, |s| log.entry_at(s));
        if let Some((slot, state)) = self.fold.take_new_anchor() {
            writes.push(WriteOp::Anchor { slot, state });
        }
        walked.push(Walked { slot, digest, judged, ballot });
        if matches!(judged.outcome, Outcome::Trimmed(_)) {
            self.compact(log, slot, writes);
        }
    }

    /// After the Truncate at `slot` applied: drop every slot whose records all lie below the new
    /// `first_seq`, never past the chosen prefix, and seal the state they folded to.
    fn compact(&mut self, log: &mut Log, slot: Slot, writes: &mut Vec<WriteOp>) {
        let first = self.fold.state().first_seq;
        if self.fold.is_blind_at(first) {
            // We jumped to a trim point above the write holding `first`; a later Truncate in
            // the log lands every node on that same point.
            return;
        }
        let (floor, sealed) = match self.fold.compaction_point() {
            Some(point) => point,
            None => (slot.next(), *self.fold.state()),
        };
        assert!(floor <= self.chosen_up_to(), "compaction never passes the chosen prefix");
        if log.drop_below(floor) {
            self.fold.forget_below(floor, sealed);
            self.sealed = sealed;
            writes.push(WriteOp::Truncate { floor, sealed });
            // A node rebooting from this floor must find its chosen index at or above it.
            self.persisted_chosen = self.chosen_up_to();
            writes.push(WriteOp::Chosen { up_to: self.persisted_chosen });
        }
    }

    /// At boot: every slot below `chosen_up_to` was chosen before the restart; walk them.
    pub fn recover(&mut self, log: &mut Log, chosen_up_to: Slot, writes: &mut Vec<WriteOp>, walked: &mut Vec<Walked>) {
        while self.chosen_up_to() < chosen_up_to {
            self.apply_next(log, writes, walked);
        }
        self.persisted_chosen = self.persisted_chosen.max(chosen_up_to);
        self.synced_chosen = self.synced_chosen.max(chosen_up_to);
        self.known_chosen = self.known_chosen.max(chosen_up_to);
    }

    /// A peer's trim point: everything below `point` is chosen and gone there; `state` is its
    /// fold. Jumps there unless our own prefix already reaches it. Never touches a promise.
    pub fn jump(&mut self, log: &mut Log, point: Slot, state: JournalState, writes: &mut Vec<WriteOp>) -> bool {
        if point <= log.floor() || point <= self.chosen_up_to() {
            return false;
        }
        state.assert_invariants();
        log.drop_below(point);
        self.fold = Fold::resume(self.fold.mode(), vec![(point, state)], self.anchoring);
        self.sealed = state;
        self.persisted_chosen = point;
        self.known_chosen = self.known_chosen.max(point);
        writes.push(WriteOp::TrimmedTo { point, state });
        true
    }

    /// Answers a laggard of life `life` asking for chosen commands from `from`: a page of
    /// them, our trim point when `from` lies below our floor, or a fetch of the page from the
    /// store when `from` lies below the window. `None` when we hold nothing it lacks. Every
    /// answer echoes `life`.
    #[must_use]
    pub fn serve_catch_up(&self, log: &Log, from: Slot, life: Life, slots_max: u32, bytes_max: u32) -> Option<Served> {
        if from < log.floor() {
            return Some(Served::Message(Message::TrimmedTo { from, point: log.floor(), state: self.sealed, life }));
        }
        let end = self.chosen_up_to();
        if from >= end {
            // Nothing newer here: say so, so a replica probing after a restart stops asking.
            return Some(Served::Message(Message::CatchUpResponse { entries: Vec::new(), chosen_up_to: end, life }));
        }
        if from < log.start() {
            let (stored_end, chosen_up_to) = (log.start().min(end), end);
            return Some(Served::Fetch { life, from, end: stored_end, chosen_up_to, slots_max, bytes_max });
        }
        let mut bytes = ByteBound::new(bytes_max);
        let entries: Vec<(Slot, Command)> = log
            .range_from(from)
            .take_while(|(s, _)| **s < end)
            .take(slots_max as usize)
            .take_while(|(_, e)| bytes.admits(&e.command))
            .map(|(s, e)| (*s, e.command.clone()))
            .collect();
        assert!(entries.first().is_some_and(|(s, _)| *s == from), "the chosen prefix is held without holes");
        Some(Served::Message(Message::CatchUpResponse { entries, chosen_up_to: end, life }))
    }
}

/// How a catch-up request is answered.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Served {
    Message(Message),
    /// The entries lie below the window: the host reads `[from, end)` from the store
    /// ([`Fetch::CatchUp`]).
    Fetch {
        life: Life,
        from: Slot,
        end: Slot,
        chosen_up_to: Slot,
        slots_max: u32,
        bytes_max: u32,
    },
}

/// A catch-up answer's byte bound: the first command always goes, then commands while their
/// record bytes fit in `bytes_max` in all.
#[derive(Clone, Copy, Debug)]
pub struct ByteBound {
    left: u64,
    first: bool,
}

impl ByteBound {
    #[must_use]
    pub fn new(bytes_max: u32) -> ByteBound {
        ByteBound { left: u64::from(bytes_max), first: true }
    }

    /// Whether `command` joins the answer (counting it when it does).
    pub fn admits(&mut self, command: &Command) -> bool {
        let bytes = command.record_bytes();
        let first = std::mem::take(&mut self.first);
        if !first && bytes > self.left {
            return false;
        }
        self.left = self.left.saturating_sub(bytes);
        true
    }
}

impl Served {
    /// The message, when the answer is one.
    #[must_use]
    pub fn message(self) -> Option<Message> {
        match self {
            Served::Message(m) => Some(m),
            Served::Fetch { .. } => None,
        }
    }

    /// The answer for laggard `to`: a message to send it, or a fetch that answers it.
    pub fn for_peer(self, to: NodeId) -> Result<Message, Fetch> {
        match self {
            Served::Message(m) => Ok(m),
            Served::Fetch { life, from, end, chosen_up_to, slots_max, bytes_max } => {
                Err(Fetch::CatchUp { to, life, from, end, chosen_up_to, slots_max, bytes_max })
            }
        }
    }
}
