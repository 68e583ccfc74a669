//! The auditor: watches what became durable, what was applied, what the machines report and what
//! the clients learned, and checks the claims as the run goes.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use paros_core::journal::{Command, Control, JournalState, Outcome};
use paros_core::{Applied, Ballot, Durable, JournalKey, Message, NodeId, ReadAnswer, Slot, WriteOp};

use paros_client::run::{self, RunRecord};

use crate::check::{Claim, Claims};
use crate::client::{ClientEvent, record_position};
use crate::host::{JournalProbe, MachineRole};

/// What one node's walk said of one slot.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Judgement {
    pub digest: u64,
    pub outcome: Outcome,
    pub blind: bool,
}

/// Each ballot a slot was durably accepted at: the command's digest and the acceptors.
type Acceptances = BTreeMap<Ballot, (u64, BTreeSet<NodeId>)>;

/// The evidence gathered so far.
#[derive(Debug, Default)]
pub struct Audit {
    pub claims: Claims,
    quorum: BTreeMap<JournalKey, usize>,
    /// Durable acceptances: (journal, slot) → ballot → (digest, acceptors).
    accepts: BTreeMap<(JournalKey, Slot), Acceptances>,
    /// The command digest a quorum accepted at some ballot: chosen.
    chosen: BTreeMap<(JournalKey, Slot), u64>,
    /// The configuration (epoch) whose quorum chose each chosen slot.
    chosen_epoch: BTreeMap<(JournalKey, Slot), u64>,
    /// Each journal's voter sets by epoch: the founding voters at 0, then each as the
    /// `Reconfigure` naming it was first accepted. A journal not here (a scratch journal the
    /// registry placed where the world does not know) counts any acceptor toward `quorum`.
    configs: BTreeMap<JournalKey, BTreeMap<u64, Vec<NodeId>>>,
    /// The slot of each decided stop-sign, by the epoch it begins: `C_e` governs the slots
    /// above the stop-sign of `e` up to that of `e + 1`.
    stop_signs: BTreeMap<(JournalKey, u64), Slot>,
    /// The lowest ballot at which a quorum accepted the chosen command: every proposal at this
    /// ballot or above carries it (a deposed leader's lower-ballot Accepts may not).
    chosen_at: BTreeMap<(JournalKey, Slot), Ballot>,
    /// The first sighted judgement of each slot (blind ones until a sighted one arrives).
    pub judged: BTreeMap<(JournalKey, Slot), Judgement>,
    /// The journal state after folding every slot below the key's slot.
    prefix: BTreeMap<(JournalKey, Slot), JournalState>,
    /// The last probe judged of each journal on each machine, with the durable promise then
    /// (looked up, never iterated).
    last_probe: rustc_hash::FxHashMap<(NodeId, JournalKey), (JournalProbe, Option<Ballot>)>,
    promises: BTreeMap<(NodeId, JournalKey), Ballot>,
    /// Machines whose durable writes held a trim-point jump, per journal.
    pub jumps: BTreeMap<(NodeId, JournalKey), MachineRole>,
    pub acked: BTreeMap<(JournalKey, u64), Bytes>,
    /// The record any client folded at a position.
    seen: BTreeMap<(JournalKey, u64), Bytes>,
    /// The chain any client's whole state had after applying (journal, position).
    folds: BTreeMap<(JournalKey, u64), u64>,
    /// Each candidate's campaign: its ballot and, per slot, the values remote Promises reported
    /// while it was still campaigning (ballot `None`: reported chosen).
    campaigns: BTreeMap<(NodeId, JournalKey), (Ballot, Campaign)>,
    /// Campaign slots a Promise reported a `Reconfigure` in (rule 11 may `Noop` it).
    stop_sign_reported: BTreeSet<(NodeId, JournalKey, Ballot, Slot)>,
    /// Contested slots whose re-proposal was judged: reached once each.
    contested: BTreeSet<(NodeId, JournalKey, Ballot, Slot)>,
    /// The highest ballot any Prepare of the journal carried out of a machine.
    prepared: BTreeMap<JournalKey, Ballot>,
    /// The highest ballot each acceptor voted for in a reply that left its machine.
    votes_sent: BTreeMap<(NodeId, JournalKey), Ballot>,
    /// Per replica and journal: every slot below it was chosen when the replica last booted.
    boot_marks: BTreeMap<(NodeId, JournalKey), Slot>,
    /// Replicas whose current boot began on a wiped disk.
    wiped_boots: BTreeSet<NodeId>,
    /// Replica journals that served a page in the machine's current boot: their gate is open
    /// for the rest of it (a journal that sleeps serving wakes serving).
    served_since_boot: BTreeSet<(NodeId, JournalKey)>,
    /// Client reads handed to each machine's journal and not answered yet (a read its host
    /// dropped stays counted: the count only errs high).
    held_reads: BTreeMap<(NodeId, JournalKey), usize>,
    /// Each held read: where, and how many reads that journal held when it arrived.
    held_read: BTreeMap<u64, (NodeId, JournalKey, usize)>,
}

/// A read's `Unserved` answer, as the audit judges it at the moment its machine releases it.
#[derive(Clone, Copy, Debug)]
pub struct UnservedRead {
    pub node: NodeId,
    pub key: JournalKey,
    /// A learner-only replica.
    pub by_replica: bool,
    pub from: paros_core::Seq,
    pub consistency: paros_core::Consistency,
    /// The answer's `applied_to`.
    pub applied_to: paros_core::Seq,
    /// The server's fold's `next_seq` now (`None`: no probe).
    pub applied_now: Option<paros_core::Seq>,
    /// Reads the journal held there when this one arrived (`None`: not known).
    pub held_before: Option<usize>,
    /// The servers' bound on reads held per journal.
    pub reads_max: usize,
}

/// What a campaign heard, per slot.
type Campaign = BTreeMap<Slot, Vec<Reports>>;

/// One reported value: its ballot (`None` when reported chosen) and its command's digest.
type Reports = (Option<Ballot>, u64, Reporter);

/// Who reported a value to a campaign.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Reporter {
    /// A remote acceptor's Promise, delivered while the candidate was still campaigning (so
    /// part of the quorum it won with).
    Remote,
    /// The candidate's own acceptor, read from its disk: its Promise may or may not be in the
    /// winning quorum (remote Promises alone can make one).
    Own,
}

/// Orders reported ballots as the P2c merge does: a value reported chosen outranks every ballot.
fn rank(b: Option<Ballot>) -> (bool, Ballot) {
    b.map_or((true, Ballot::ZERO), |b| (false, b))
}

impl Audit {
    #[must_use]
    pub fn new(quorum: BTreeMap<JournalKey, usize>, founders: &[(JournalKey, Vec<NodeId>)]) -> Audit {
        let configs = founders.iter().map(|(k, v)| (*k, BTreeMap::from([(0, v.clone())]))).collect();
        Audit { quorum, configs, ..Audit::default() }
    }

    /// The configuration governing `slot` of `key`: one past the number of stop-signs below it.
    fn governing(&self, key: JournalKey, slot: Slot) -> u64 {
        let signs = self.stop_signs.range((key, 0)..=(key, u64::MAX));
        signs.filter(|(_, s)| **s < slot).count() as u64
    }

    /// Whether the acceptors `at` of a ballot of `epoch` make a quorum: of that epoch's voters,
    /// counting only them, when the journal's configurations are known.
    fn is_quorum(&self, key: JournalKey, epoch: u64, at: &BTreeSet<NodeId>) -> bool {
        match self.configs.get(&key) {
            None => at.len() >= self.quorum[&key],
            Some(configs) => configs
                .get(&epoch)
                .is_some_and(|voters| at.iter().filter(|n| voters.contains(n)).count() > voters.len() / 2),
        }
    }

    /// The highest slot a quorum is known to have accepted, per journal.
    #[must_use]
    pub fn highest_chosen(&self, key: &JournalKey) -> Option<Slot> {
        self.chosen.range((*key, Slot(0))..=(*key, Slot(u64::MAX))).next_back().map(|((_, s), _)| *s)
    }

    /// Replica `node` booted (on a wiped disk: `wiped`) hosting `journals`: a read it serves
    /// from now on must come from a fold covering every slot chosen by now.
    pub fn replica_booted(&mut self, node: NodeId, journals: impl Iterator<Item = JournalKey>, wiped: bool) {
        for key in journals {
            let mark = self.highest_chosen(&key).map_or(Slot(0), |s| Slot(s.0 + 1));
            self.boot_marks.insert((node, key), mark);
        }
        if wiped {
            self.wiped_boots.insert(node);
        } else {
            self.wiped_boots.remove(&node);
        }
        self.served_since_boot.retain(|(n, _)| *n != node);
    }

    /// Client read `req` of `key` was handed to `node`.
    pub fn read_delivered(&mut self, node: NodeId, key: JournalKey, req: u64) {
        let held = self.held_reads.entry((node, key)).or_default();
        self.held_read.insert(req, (node, key, *held));
        *held += 1;
    }

    /// `node` released its answer to read `req`: how many reads its journal held when that one
    /// arrived, if it was a client read handed to it.
    pub fn read_released(&mut self, req: u64) -> Option<usize> {
        let (node, key, before) = self.held_read.remove(&req)?;
        if let Some(held) = self.held_reads.get_mut(&(node, key)) {
            *held = held.saturating_sub(1);
        }
        Some(before)
    }

    /// `node` stopped: the reads it held are gone with it.
    pub fn reads_lost(&mut self, node: NodeId) {
        self.held_reads.retain(|(n, _), _| *n != node);
        self.held_read.retain(|_, (n, _, _)| *n != node);
    }

    /// A read was answered `Unserved` with how far its server had applied the journal. The
    /// answer never claims more than the server's fold has applied; and a replica whose gate
    /// is open (it served this journal in this boot), that had room for the read and whose
    /// page would start at or past its applied prefix (no page below its window, no trim point
    /// it jumped past) can only have held an `at_least(seq)` read to its end: it says
    /// `applied_to < seq`.
    pub fn on_unserved(&mut self, u: &UnservedRead) {
        let UnservedRead { node, key, applied_to, .. } = *u;
        if let Some(now) = u.applied_now {
            self.claims.check(Claim::UnservedSaysApplied, applied_to <= now, || {
                format!("{node:?} answered a read of {key:?} unserved, applied to {applied_to:?}, its fold at {now:?}")
            });
        }
        let paros_core::Consistency::Reached(seq) = u.consistency else { return };
        let held_to_its_end = u.by_replica
            && self.served_since_boot.contains(&(node, key))
            && u.from >= applied_to
            && u.held_before.is_some_and(|held| held < u.reads_max);
        if !held_to_its_end {
            return;
        }
        self.claims.check(Claim::UnservedSaysApplied, applied_to < seq, || {
            format!(
                "{node:?}, serving {key:?}, answered a read from {:?} at least at {seq:?} unserved, \
                 applied to {applied_to:?}: it could have served it",
                u.from
            )
        });
        if applied_to < seq {
            self.claims.reach(Claim::UnservedSaysApplied);
        }
    }

    /// Replica `node` served a page of `key` from a fold that has applied every slot below
    /// `applied`.
    pub fn on_replica_page(&mut self, node: NodeId, key: JournalKey, applied: Slot) {
        self.served_since_boot.insert((node, key));
        let mark = self.boot_marks.get(&(node, key)).copied().unwrap_or(Slot(0));
        self.claims.check(Claim::ReplicaCaughtUpFirst, applied >= mark, || {
            format!(
                "{node:?} served a page of {key:?} having applied below {applied:?}: \
                 slots below {mark:?} were chosen when it booted"
            )
        });
        if self.wiped_boots.contains(&node) && mark > Slot(0) {
            self.claims.reach(Claim::ReplicaCaughtUpFirst);
        }
    }

    /// A read of `key` that asked for `next_seq ≥ seq` was answered `answer` by `server`
    /// (`by_replica`: a learner-only replica).
    pub fn on_at_least(&mut self, key: JournalKey, seq: paros_core::Seq, answer: &ReadAnswer, by_replica: bool) {
        let ReadAnswer::Page { view, .. } = answer else { return };
        self.claims.check(Claim::AtLeastReached, view.next_seq >= seq, || {
            format!("{key:?}: a read at least at {seq:?} was served a page of {view:?}")
        });
        if by_replica && seq > paros_core::Seq(0) {
            self.claims.reach(Claim::AtLeastReached);
        }
    }

    /// `op` became durable on `node`.
    pub fn on_durable(&mut self, node: NodeId, role: MachineRole, key: JournalKey, op: &WriteOp) {
        match op {
            WriteOp::Promise(b) => {
                let last = self.promises.entry((node, key)).or_insert(Ballot::ZERO);
                let before = *last;
                self.claims.check(Claim::PromiseNeverDecreases, *b >= before, || {
                    format!("{node:?} on {key:?} durably promised {b:?} after {before:?}")
                });
                if *b > before {
                    *last = *b;
                    self.claims.reach(Claim::PromiseNeverDecreases);
                }
            }
            WriteOp::Accept { slot, ballot, command } => {
                let promised = self.promises.get(&(node, key)).copied().unwrap_or(Ballot::ZERO);
                self.claims.check(Claim::StaleAccept, promised <= *ballot, || {
                    format!("{node:?} on {key:?} durably accepted {slot:?} at {ballot:?} after promising {promised:?}")
                });
                let digest = command.digest();
                if let Command::Control(Control::Reconfigure { epoch, voters }) = command
                    && let Some(configs) = self.configs.get_mut(&key)
                {
                    configs.entry(*epoch).or_insert_with(|| voters.as_slice().to_vec());
                }
                let at =
                    self.accepts.entry((key, *slot)).or_default().entry(*ballot).or_insert((digest, BTreeSet::new()));
                self.claims.check(Claim::OneChosenPerSlot, at.0 == digest, || {
                    format!("{key:?} {slot:?}: two commands accepted at one ballot {ballot:?}")
                });
                at.1.insert(node);
                let at = at.1.clone();
                if self.is_quorum(key, ballot.epoch(), &at) {
                    let lowest = self.chosen_at.entry((key, *slot)).or_insert(*ballot);
                    *lowest = (*lowest).min(*ballot);
                    self.on_chosen(key, *slot, digest, ballot.epoch(), &format!("a quorum at {ballot:?}"));
                }
            }
            WriteOp::Learn { slot, command } => self.compare_chosen(key, *slot, command.digest(), "a learned command"),
            WriteOp::Truncate { floor, sealed } => self.on_prefix(key, *floor, *sealed, Claim::SameOutcome, node),
            WriteOp::TrimmedTo { point, state } => {
                let claim = match role {
                    MachineRole::Voter => Claim::VoterTrimJump,
                    MachineRole::Replica => Claim::ReplicaTrimJump,
                };
                self.on_prefix(key, *point, *state, claim, node);
                self.jumps.insert((node, key), role);
            }
            // An anchor is the fold's state before its slot, as a floor's seal is.
            WriteOp::Anchor { slot, state } => self.on_prefix(key, *slot, *state, Claim::SameOutcome, node),
            WriteOp::Chosen { .. } => {}
        }
    }

    fn on_chosen(&mut self, key: JournalKey, slot: Slot, digest: u64, epoch: u64, how: &str) {
        match self.chosen.get(&(key, slot)) {
            Some(d) => {
                let (d, first) = (*d, self.chosen_epoch.get(&(key, slot)).copied().unwrap_or(0));
                let claim = if first == epoch { Claim::OneChosenPerSlot } else { Claim::ConfigsAgree };
                self.claims.check(claim, d == digest, || {
                    format!(
                        "{key:?} {slot:?}: {how} (configuration {epoch}) chose {digest:x} where configuration \
                             {first} chose {d:x}"
                    )
                });
            }
            None => {
                self.chosen.insert((key, slot), digest);
                self.chosen_epoch.insert((key, slot), epoch);
                self.claims.reach(Claim::OneChosenPerSlot);
                if epoch > 0 {
                    self.claims.reach(Claim::ConfigsAgree);
                }
                if let Some(j) = self.judged.get(&(key, slot)) {
                    let applied = j.digest;
                    self.claims.check(Claim::OneChosenPerSlot, applied == digest, || {
                        format!("{key:?} {slot:?}: {how} chose {digest:x} where a node applied {applied:x}")
                    });
                }
            }
        }
    }

    fn compare_chosen(&mut self, key: JournalKey, slot: Slot, digest: u64, what: &str) {
        if let Some(d) = self.chosen.get(&(key, slot)) {
            let d = *d;
            self.claims.check(Claim::OneChosenPerSlot, d == digest, || {
                format!("{key:?} {slot:?}: {what} {digest:x} differs from the chosen {d:x}")
            });
        }
    }

    fn on_prefix(&mut self, key: JournalKey, slot: Slot, state: JournalState, claim: Claim, node: NodeId) {
        match self.prefix.get(&(key, slot)) {
            Some(s) => {
                let s = *s;
                self.claims.check(claim, s == state, || {
                    format!("{key:?}: {node:?} holds {state:?} as the fold below {slot:?}, elsewhere it is {s:?}")
                });
            }
            None => {
                self.prefix.insert((key, slot), state);
            }
        }
    }

    /// `message` about `key` leaves `node`, whose disk holds `durable`: an acceptor's reply
    /// must be backed by its disk (persist before send), or a crash would take back a vote.
    pub fn on_leaving(&mut self, node: NodeId, key: JournalKey, message: &Message, durable: Option<&Durable>) {
        let promise = durable.map_or(Ballot::ZERO, |d| d.promise);
        if let Message::Promise { ballot, .. } | Message::Accepted { ballot, .. } = message {
            let sent = self.votes_sent.entry((node, key)).or_insert(Ballot::ZERO);
            *sent = (*sent).max(*ballot);
        }
        match message {
            Message::Prepare { ballot, .. } => {
                let p = self.prepared.entry(key).or_insert(Ballot::ZERO);
                *p = (*p).max(*ballot);
            }
            Message::Accept { ballot, entries, .. } => self.on_accept_leaving(node, key, *ballot, entries, durable),
            Message::Promise { ballot, .. } => {
                self.claims.check(Claim::PromiseNeverDecreases, promise >= *ballot, || {
                    format!("{node:?} on {key:?} sent a Promise for {ballot:?} with {promise:?} on disk")
                });
            }
            Message::Accepted { ballot, slots } => {
                self.claims.check(Claim::PromiseNeverDecreases, promise >= *ballot, || {
                    format!("{node:?} on {key:?} sent Accepted at {ballot:?} with promise {promise:?} on disk")
                });
                for (slot, digest) in slots {
                    // A slot below the acceptor's durable chosen index may be credited blind
                    // (`Acceptor::on_accept`: evicted from memory, its command not at hand); that
                    // credit is no vote, and a second command chosen would break the claim where
                    // the audit records what quorums chose.
                    let held = durable.is_some_and(|d| {
                        *slot < d.floor
                            || *slot < d.chosen_up_to
                            || d.entries
                                .binary_search_by_key(slot, |(s, _)| *s)
                                .is_ok_and(|i| d.entries[i].1.command.digest() == *digest)
                    });
                    self.claims.check(Claim::OneChosenPerSlot, held, || {
                        format!("{node:?} on {key:?} sent Accepted for {slot:?} before its disk held that command")
                    });
                }
            }
            _ => {}
        }
    }

    /// A leader's Accept leaves: a slot already chosen is proposed with its chosen command, and
    /// a slot its campaign found contested with the value P2c picks (the highest ballot reported
    /// remotely, or its own acceptor's value when that ranks at least as high).
    fn on_accept_leaving(
        &mut self,
        node: NodeId,
        key: JournalKey,
        ballot: Ballot,
        entries: &[(Slot, paros_core::journal::Digested)],
        durable: Option<&Durable>,
    ) {
        for (slot, command) in entries {
            // The audit hashes the command itself, not the digest the leader carries with it.
            let digest = command.command().digest();
            let binding = self.chosen_at.get(&(key, *slot)).is_some_and(|at| *at <= ballot);
            if let Some(chosen) = self.chosen.get(&(key, *slot)).copied().filter(|_| binding) {
                self.claims.check(Claim::OneChosenPerSlot, chosen == digest, || {
                    format!(
                        "{node:?} on {key:?} proposed {digest:x} at {slot:?} ({ballot:?}) where {chosen:x} was chosen"
                    )
                });
            }
            let Some((b, reports)) = self.campaigns.get(&(node, key)) else { continue };
            let Some(reported) = reports.get(slot).filter(|_| *b == ballot) else { continue };
            let digests: BTreeSet<u64> = reported.iter().map(|r| r.1).collect();
            let ballots: BTreeSet<(bool, Ballot)> = reported.iter().map(|r| rank(r.0)).collect();
            if digests.len() < 2 || ballots.len() < 2 || self.stop_sign_reported.contains(&(node, key, ballot, *slot)) {
                continue;
            }
            // P2c over the winning quorum: its remote part's highest value, or, when the
            // candidate's own Promise was in it and ranks at least as high, its own value.
            let best = reported.iter().filter(|r| r.2 == Reporter::Remote).max_by_key(|r| rank(r.0)).copied();
            let own =
                durable.and_then(|d| d.entries.binary_search_by_key(slot, |(s, _)| *s).ok().map(|i| &d.entries[i].1));
            // A candidate whose floor passed the slot since (a trim-point jump while it
            // campaigned) no longer holds its own value there: the one it held as the remote
            // Promises arrived stands in (seed 90011106).
            let gone = durable.is_some_and(|d| *slot < d.floor);
            let own_held = own.map(|e| (e.ballot, e.command.digest())).or_else(|| {
                let mine = reported.iter().filter(|r| r.2 == Reporter::Own).max_by_key(|r| rank(r.0));
                mine.filter(|_| gone).map(|r| (r.0, r.1))
            });
            let own_outranks =
                own_held.is_some_and(|(b, d)| d == digest && best.is_none_or(|best| rank(b) >= rank(best.0)));
            let chosen_ok = !binding || self.chosen.get(&(key, *slot)).is_none_or(|c| *c == digest);
            let ok = (best.is_some_and(|b| b.1 == digest) || own_outranks) && chosen_ok;
            self.claims.check(Claim::ContestedCampaign, ok, || {
                format!(
                    "{node:?} on {key:?} at {ballot:?} re-proposed {digest:x} at {slot:?}; \
                     Promises reported {reported:?}, own {own:?}"
                )
            });
            if ok && self.contested.insert((node, key, ballot, *slot)) {
                self.claims.reach(Claim::ContestedCampaign);
            }
        }
    }

    /// A Promise reached `to`, which was still campaigning (`candidate`) or not.
    ///
    /// The candidate's own Promise never crosses the network: its own durable value at each
    /// reported slot stands in for it.
    pub fn on_promise_delivered(
        &mut self,
        to: NodeId,
        key: JournalKey,
        message: &Message,
        candidate: bool,
        own: Option<&Durable>,
    ) {
        let Message::Promise { ballot, accepted, .. } = message else { return };
        if !candidate || ballot.node != to {
            return;
        }
        let entry = self.campaigns.entry((to, key)).or_insert_with(|| (*ballot, BTreeMap::new()));
        if entry.0 != *ballot {
            *entry = (*ballot, BTreeMap::new());
        }
        // A campaign drops values accepted in an earlier configuration (rule 2), and its merge
        // may turn a stop-sign a higher ballot outranks into `Noop` (rule 11): a slot reported
        // holding one is not judged by plain P2c.
        let epoch = ballot.epoch();
        let current = |b: Option<Ballot>| b.is_none_or(|b| b.epoch() >= epoch);
        for r in accepted {
            let held =
                own.and_then(|d| d.entries.binary_search_by_key(&r.slot, |(s, _)| *s).ok().map(|i| &d.entries[i].1));
            if r.command.names_epoch().is_some() || held.is_some_and(|e| e.command.names_epoch().is_some()) {
                self.stop_sign_reported.insert((to, key, *ballot, r.slot));
            }
            let mine = held.filter(|e| current(e.ballot)).map(|e| (e.ballot, e.command.digest(), Reporter::Own));
            let remote = Some((r.ballot, r.command.digest(), Reporter::Remote)).filter(|_| current(r.ballot));
            let reports = entry.1.entry(r.slot).or_default();
            for report in [remote, mine].into_iter().flatten() {
                if !reports.contains(&report) {
                    reports.push(report);
                }
            }
        }
    }

    /// An Accept at `ballot` reached an acceptor of `key`: stale when a higher ballot was
    /// already prepared (the leader that sent it was deposed while it was in flight).
    pub fn on_accept_delivered(&mut self, key: JournalKey, message: &Message) {
        if let Message::Accept { ballot, .. } = message
            && self.prepared.get(&key).is_some_and(|p| p > ballot)
        {
            self.claims.reach(Claim::StaleAccept);
        }
    }

    /// `key` was removed from `node`: the votes its copy there cast are given back with its
    /// bytes. A crash after a placement afresh that had not reached a sync finds no copy
    /// (the simulation's seed 80003100: a seat moved back to a founder, removed and placed
    /// again a moment before a crash, was judged against the earlier copy's votes).
    pub fn on_removed(&mut self, node: NodeId, key: JournalKey) {
        self.votes_sent.remove(&(node, key));
    }

    /// `node` crashed; `lost` is how many writes of its round in flight never reached a sync,
    /// and `durable` what its disk holds now. No vote that left it may be taken back.
    pub fn on_crash(&mut self, node: NodeId, lost: usize, durable: &[(JournalKey, Ballot)]) {
        if lost == 0 {
            return;
        }
        self.claims.reach(Claim::CrashBeforeSync);
        for (key, promise) in durable {
            let sent = self.votes_sent.get(&(node, *key)).copied().unwrap_or(Ballot::ZERO);
            self.claims.check(Claim::CrashBeforeSync, *promise >= sent, || {
                format!("{node:?} on {key:?} voted at {sent:?} but its disk holds promise {promise:?} after a crash")
            });
        }
    }

    /// At the end: every slot a machine applied, of a journal whose configurations are known,
    /// was chosen by a quorum of the configuration that governs it (an old configuration that
    /// still answers past its stop-sign, or a voter counted before it votes, breaks this even
    /// when no second command is chosen).
    pub fn check_governed(&mut self) {
        let judged: Vec<(JournalKey, Slot)> =
            self.judged.keys().filter(|(k, _)| self.configs.contains_key(k)).copied().collect();
        for (key, slot) in judged {
            let governing = self.governing(key, slot);
            let chosen = self.chosen_epoch.get(&(key, slot)).copied();
            self.claims.check(Claim::ConfigsAgree, chosen == Some(governing), || {
                format!("{key:?} {slot:?}: applied, chosen by configuration {chosen:?}; {governing} governs it")
            });
        }
    }

    /// `node` applied a slot of `key`.
    pub fn on_applied(&mut self, node: NodeId, key: JournalKey, a: &Applied) {
        let mine = Judgement { digest: a.digest, outcome: a.judged.outcome, blind: a.judged.blind };
        if let Outcome::Reconfigured { epoch, .. } = a.judged.outcome {
            let first = *self.stop_signs.entry((key, epoch)).or_insert(a.slot);
            self.claims.check(Claim::ConfigsAgree, first == a.slot, || {
                format!(
                    "{key:?}: {node:?} applied the stop-sign of configuration {epoch} at {:?}, another at {first:?}",
                    a.slot
                )
            });
        }
        self.compare_chosen(key, a.slot, a.digest, "an applied command");
        match self.judged.get(&(key, a.slot)).copied() {
            None => {
                self.judged.insert((key, a.slot), mine);
            }
            Some(first) => {
                let same = first.digest == mine.digest && (first.blind || mine.blind || first.outcome == mine.outcome);
                self.claims.check(Claim::SameOutcome, same, || {
                    format!("{key:?} {:?}: {node:?} judged {mine:?}, another node judged {first:?}", a.slot)
                });
                if same {
                    self.claims.reach(Claim::SameOutcome);
                }
                if first.blind && !mine.blind {
                    self.judged.insert((key, a.slot), mine);
                }
            }
        }
    }

    /// What `node` reports about `key` at the end of a round; `durable` is its promise on disk.
    pub fn on_probe(&mut self, node: NodeId, key: JournalKey, p: &JournalProbe, durable: Option<Ballot>) {
        // The same probe against the same durable promise is judged the same: judged once.
        match self.last_probe.entry((node, key)) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                if *e.get() == (*p, durable) {
                    return;
                }
                e.insert((*p, durable));
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert((*p, durable));
            }
        }
        self.on_prefix(key, p.chosen_up_to, p.state, Claim::SameOutcome, node);
        if let (Some(mem), Some(disk)) = (p.promised, durable) {
            self.claims.check(Claim::PromiseNeverDecreases, mem >= disk, || {
                format!("{node:?} on {key:?} holds promise {mem:?} below its durable {disk:?}")
            });
        }
    }

    /// A client of `key` learned something.
    pub fn on_client(&mut self, key: JournalKey, client: &str, event: &ClientEvent) {
        match event {
            ClientEvent::Acked { seq, records } => {
                for (i, r) in records.iter().enumerate() {
                    let pos = seq + i as u64;
                    self.check_position(key, pos, r, client);
                    if let Some(prev) = self.acked.get(&(key, pos)) {
                        let same = prev == r;
                        self.claims.check(Claim::AckedNeverLost, same, || {
                            format!("{key:?} seq{pos}: acknowledged as {r:?} and as {prev:?}")
                        });
                    } else {
                        self.acked.insert((key, pos), r.clone());
                    }
                    if let Some(read) = self.seen.get(&(key, pos)) {
                        let same = read == r;
                        self.claims.check(Claim::AckedNeverLost, same, || {
                            format!("{key:?} seq{pos}: {client} was acknowledged {r:?} but a reader folded {read:?}")
                        });
                    }
                }
            }
            ClientEvent::Delivered { seq, record } => {
                self.check_position(key, *seq, record, client);
                if let Some(a) = self.acked.get(&(key, *seq)) {
                    let same = a == record;
                    self.claims.check(Claim::AckedNeverLost, same, || {
                        format!("{key:?} seq{seq}: {client} was handed {record:?} where {a:?} was acknowledged")
                    });
                    if same {
                        self.claims.reach(Claim::AckedNeverLost);
                    }
                }
                match self.seen.get(&(key, *seq)) {
                    Some(s) => {
                        let same = s == record;
                        self.claims.check(Claim::SameFold, same, || {
                            format!("{key:?} seq{seq}: {client} was handed {record:?}, another client {s:?}")
                        });
                    }
                    None => {
                        self.seen.insert((key, *seq), record.clone());
                    }
                }
            }
            ClientEvent::Folded { seq, chain } => match self.folds.get(&(key, *seq)) {
                Some(c) => {
                    let same = c == chain;
                    self.claims.check(Claim::SameFold, same, || {
                        format!("{key:?} seq{seq}: {client}'s chain is {chain:x}, another's is {c:x}")
                    });
                    if same {
                        self.claims.reach(Claim::SameFold);
                    }
                }
                None => {
                    self.folds.insert((key, *seq), *chain);
                }
            },
            ClientEvent::RunChecked { begin, agreed } => {
                self.claims.check(Claim::SameFold, *agreed, || {
                    format!("{key:?}: the run at seq{begin} differs from {client}'s own state folded to it")
                });
                if *agreed {
                    self.claims.reach(Claim::SameFold);
                }
            }
            ClientEvent::Restored { .. } | ClientEvent::Reported(_) => {}
            ClientEvent::Refused { why } => {
                self.claims.check(Claim::ReadBelowTrimRefused, false, || {
                    format!("{key:?}: {client} refused an answer: {why}")
                });
            }
            ClientEvent::Gap { from, resumed_at } => {
                let ahead = resumed_at > from;
                self.claims.check(Claim::ReadBelowTrimRefused, ahead, || {
                    format!("{key:?}: {client} was refused at seq{from} though the trim point is seq{resumed_at}")
                });
            }
        }
    }

    fn check_position(&mut self, key: JournalKey, pos: u64, record: &Bytes, client: &str) {
        // A run record names no position, except `Begin`, which sits at the one it covers up to.
        let written_for = if run::is_run_record(record) {
            match RunRecord::decode(record) {
                Ok(RunRecord::Begin { covers_up_to }) => Some(covers_up_to.0),
                _ => Some(pos),
            }
        } else {
            record_position(record)
        };
        self.claims.check(Claim::AckedNeverLost, written_for == Some(pos), || {
            format!("{key:?} seq{pos}: {client} saw {record:?}, which no writer wrote for that position")
        });
    }

    /// A read of `key` from `from` was answered `answer`.
    pub fn on_read(&mut self, key: JournalKey, from: u64, answer: &ReadAnswer) {
        match answer {
            ReadAnswer::Truncated(view) => {
                let below = from < view.first_seq.0;
                self.claims.check(Claim::ReadBelowTrimRefused, below, || {
                    format!("{key:?}: a read from seq{from} was refused with {view:?}")
                });
                if below {
                    self.claims.reach(Claim::ReadBelowTrimRefused);
                }
            }
            ReadAnswer::Page { from: f, view, .. } => {
                let ok = f.0 == from && from >= view.first_seq.0;
                self.claims.check(Claim::ReadBelowTrimRefused, ok, || {
                    format!("{key:?}: a read from seq{from} was served a page from {f:?} with {view:?}")
                });
            }
            ReadAnswer::Unserved { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    //! The reconfiguration claim's teeth: durable acceptances and applied slots fed by hand.

    use std::collections::BTreeMap;

    use paros_core::journal::{Command, Control, JournalView, Outcome, Voters};
    use paros_core::ready::JudgedRecord;
    use paros_core::{Applied, Ballot, JournalId, JournalKey, NodeId, Slot, TenantId, WriteOp};

    use super::Audit;
    use crate::check::Claim;
    use crate::host::MachineRole;

    const KEY: JournalKey = JournalKey { tenant: TenantId(1), journal: JournalId(2) };
    const A: NodeId = NodeId(1);
    const B: NodeId = NodeId(2);
    const C: NodeId = NodeId(3);
    const D: NodeId = NodeId(4);

    /// The founding voters A, B, C; the stop-sign at slot 0 names A, B, D (chosen by A and B at
    /// an epoch-0 ballot, applied).
    fn moved() -> Audit {
        let mut audit = Audit::new(BTreeMap::from([(KEY, 2)]), &[(KEY, vec![A, B, C])]);
        let voters = Voters::new(&[A, B, D]).expect("three voters");
        let sign = Command::Control(Control::Reconfigure { epoch: 1, voters });
        accept(&mut audit, &[A, B], 0, Ballot { round: 1, node: A }, &sign);
        let reconfigured = Outcome::Reconfigured { epoch: 1, view: JournalView::NEW };
        apply(&mut audit, A, 0, &sign, reconfigured);
        audit
    }

    fn accept(audit: &mut Audit, by: &[NodeId], slot: u64, ballot: Ballot, command: &Command) {
        for n in by {
            let op = WriteOp::Accept { slot: Slot(slot), ballot, command: command.clone() };
            audit.on_durable(*n, MachineRole::Voter, KEY, &op);
        }
    }

    fn apply(audit: &mut Audit, node: NodeId, slot: u64, command: &Command, outcome: Outcome) {
        let a = Applied { slot: Slot(slot), digest: command.digest(), judged: JudgedRecord { outcome, blind: false } };
        audit.on_applied(node, KEY, &a);
    }

    fn epoch_1() -> Ballot {
        Ballot { round: Ballot::epoch_start(1) + 1, node: B }
    }

    #[test]
    fn a_slot_after_the_stop_sign_chosen_by_the_new_voters_holds_and_reaches_the_claim() {
        let mut audit = moved();
        let noop = Command::Control(Control::Noop);
        accept(&mut audit, &[B, D], 1, epoch_1(), &noop);
        apply(&mut audit, D, 1, &noop, Outcome::Noop);
        audit.check_governed();
        let c = audit.claims.count(Claim::ConfigsAgree);
        assert_eq!((c.violated, c.reached), (0, 1), "{:?}", audit.claims.details);
        assert!(c.checked >= 3, "the stop-sign and both applied slots were judged: {c:?}");
    }

    #[test]
    fn an_old_configuration_still_answering_past_its_stop_sign_is_a_violation() {
        let mut audit = moved();
        // A and B, a quorum of the founding voters, accept slot 1 at an epoch-0 ballot: the old
        // configuration chose a slot the new one governs, even though no other command was.
        let noop = Command::Control(Control::Noop);
        accept(&mut audit, &[A, B], 1, Ballot { round: 2, node: A }, &noop);
        apply(&mut audit, A, 1, &noop, Outcome::Noop);
        audit.check_governed();
        assert_eq!(audit.claims.count(Claim::ConfigsAgree).violated, 1, "{:?}", audit.claims.details);
        // And the new voters choosing another command there is two configurations disagreeing.
        let other =
            Command::Control(Control::SetLeader { new: paros_core::LeaderUuid::new(7).expect("set"), old: None });
        accept(&mut audit, &[B, D], 1, epoch_1(), &other);
        assert_eq!(audit.claims.count(Claim::ConfigsAgree).violated, 2, "{:?}", audit.claims.details);
    }

    #[test]
    fn a_new_voter_counted_before_it_votes_chooses_nothing() {
        let mut audit = Audit::new(BTreeMap::from([(KEY, 2)]), &[(KEY, vec![A, B, C])]);
        // D, not a founding voter, and A accept slot 0 at an epoch-0 ballot: two acceptors, but
        // one founding voter, so nothing is chosen; a node applying it is a violation.
        let noop = Command::Control(Control::Noop);
        accept(&mut audit, &[A, D], 0, Ballot { round: 1, node: A }, &noop);
        assert_eq!(audit.highest_chosen(&KEY), None, "D does not count in epoch 0");
        apply(&mut audit, A, 0, &noop, Outcome::Noop);
        audit.check_governed();
        assert_eq!(audit.claims.count(Claim::ConfigsAgree).violated, 1, "{:?}", audit.claims.details);
    }
}
