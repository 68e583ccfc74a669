//! The auditor: watches what became durable, what was applied, what the machines report and what
//! the clients learned, and checks the claims as the run goes.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use paros_core::journal::{JournalState, Outcome};
use paros_core::{Applied, Ballot, Durable, JournalKey, Message, NodeId, ReadAnswer, Slot, WriteOp};

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
    /// The first sighted judgement of each slot (blind ones until a sighted one arrives).
    pub judged: BTreeMap<(JournalKey, Slot), Judgement>,
    /// The journal state after folding every slot below the key's slot.
    prefix: BTreeMap<(JournalKey, Slot), JournalState>,
    promises: BTreeMap<(NodeId, JournalKey), Ballot>,
    /// Machines whose durable writes held a trim-point jump, per journal.
    pub jumps: BTreeMap<(NodeId, JournalKey), MachineRole>,
    pub acked: BTreeMap<(JournalKey, u64), Bytes>,
    /// The record any client folded at a position.
    seen: BTreeMap<(JournalKey, u64), Bytes>,
    /// Chain state after folding (journal, chain origin, position).
    folds: BTreeMap<(JournalKey, u64, u64), u64>,
}

impl Audit {
    #[must_use]
    pub fn new(quorum: BTreeMap<JournalKey, usize>) -> Audit {
        Audit { quorum, ..Audit::default() }
    }

    /// The highest slot a quorum is known to have accepted, per journal.
    #[must_use]
    pub fn highest_chosen(&self, key: &JournalKey) -> Option<Slot> {
        self.chosen.range((*key, Slot(0))..=(*key, Slot(u64::MAX))).next_back().map(|((_, s), _)| *s)
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
                let digest = command.digest();
                let quorum = self.quorum[&key];
                let at = self.accepts.entry((key, *slot)).or_default().entry(*ballot).or_insert((digest, BTreeSet::new()));
                self.claims.check(Claim::OneChosenPerSlot, at.0 == digest, || {
                    format!("{key:?} {slot:?}: two commands accepted at one ballot {ballot:?}")
                });
                at.1.insert(node);
                if at.1.len() >= quorum {
                    self.on_chosen(key, *slot, digest, &format!("a quorum at {ballot:?}"));
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
            WriteOp::Chosen { .. } => {}
        }
    }

    fn on_chosen(&mut self, key: JournalKey, slot: Slot, digest: u64, how: &str) {
        match self.chosen.get(&(key, slot)) {
            Some(d) => {
                let d = *d;
                self.claims.check(Claim::OneChosenPerSlot, d == digest, || {
                    format!("{key:?} {slot:?}: {how} chose {digest:x} where {d:x} was chosen")
                });
            }
            None => {
                self.chosen.insert((key, slot), digest);
                self.claims.reach(Claim::OneChosenPerSlot);
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
        match message {
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
                    let held = durable.is_some_and(|d| {
                        *slot < d.floor
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

    /// `node` applied a slot of `key`.
    pub fn on_applied(&mut self, node: NodeId, key: JournalKey, a: &Applied) {
        let mine = Judgement { digest: a.digest, outcome: a.judged.outcome, blind: a.judged.blind };
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
            ClientEvent::Folded { seq, record, origin, chain } => {
                self.check_position(key, *seq, record, client);
                if let Some(a) = self.acked.get(&(key, *seq)) {
                    let same = a == record;
                    self.claims.check(Claim::AckedNeverLost, same, || {
                        format!("{key:?} seq{seq}: {client} folded {record:?} where {a:?} was acknowledged")
                    });
                    if same {
                        self.claims.reach(Claim::AckedNeverLost);
                    }
                }
                match self.seen.get(&(key, *seq)) {
                    Some(s) => {
                        let same = s == record;
                        self.claims.check(Claim::SameFold, same, || {
                            format!("{key:?} seq{seq}: {client} folded {record:?}, another client folded {s:?}")
                        });
                    }
                    None => {
                        self.seen.insert((key, *seq), record.clone());
                    }
                }
                match self.folds.get(&(key, *origin, *seq)) {
                    Some(c) => {
                        let same = c == chain;
                        self.claims.check(Claim::SameFold, same, || {
                            format!("{key:?} seq{seq}: {client}'s chain from seq{origin} is {chain:x}, another's is {c:x}")
                        });
                        if same {
                            self.claims.reach(Claim::SameFold);
                        }
                    }
                    None => {
                        self.folds.insert((key, *origin, *seq), *chain);
                    }
                }
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
        let written_for = record_position(record);
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
            ReadAnswer::Unserved => {}
        }
    }
}
