//! The in-memory window at the host: a journal evicts an entry only once it is durably chosen
//! (below the chosen index written in a synced round). The index a Promise claims chosen is
//! that durable one, and the Promise reports every value held from there on: an entry evicted
//! above it would be a value the Promise silently leaves out, a hole a new leader fills with
//! something else.

use paros_core::journal::{Command, Control, WriterMode};
use paros_core::{Ballot, JournalConfig, JournalId, JournalKey, Message, NodeId, Slot, TenantId, Tunables};
use paros_node::ports::Envelope;
use paros_node::{Host, MemStore, RoundOutput};

const A: NodeId = NodeId(0x6701);
const B: NodeId = NodeId(0x6702);
const C: NodeId = NodeId(0x6703);
const NOOP: Command = Command::Control(Control::Noop);
const SLOTS: u64 = 32;

fn key() -> JournalKey {
    JournalKey { tenant: TenantId(0x79), journal: JournalId(0x7a) }
}

fn envelope(from: NodeId, message: Message) -> Envelope {
    Envelope { journal: key(), from, message }
}

/// One round on `host` after delivering `message` from `from`; returns what it hands out and
/// whether it synced.
fn round_with(host: &mut Host<MemStore>, disk: &MemStore, from: NodeId, message: Message) -> (RoundOutput, bool) {
    host.deliver(from, vec![envelope(from, message)]);
    let syncs = disk.counts().1;
    let out = host.round(|_| {}).expect("round");
    (out, disk.counts().1 > syncs)
}

/// The Promise `out` sends `to`: the chosen index it claims and the slots it reports.
fn promise_to(out: &RoundOutput, to: NodeId) -> (Slot, Vec<Slot>) {
    out.messages
        .get(&to)
        .into_iter()
        .flatten()
        .find_map(|e| match &e.message {
            Message::Promise { chosen_up_to, accepted, .. } => {
                Some((*chosen_up_to, accepted.iter().map(|r| r.slot).collect()))
            }
            _ => None,
        })
        .expect("the round that synced the promise hands out the Promise")
}

#[test]
fn a_follower_keeps_chosen_entries_past_its_window_until_their_index_is_synced() {
    let tunables = Tunables {
        window_slots: 4,
        anchor_slots: 5,
        election_ticks_min: 5,
        election_ticks_max: 10,
        ..Tunables::default()
    };
    let disk = MemStore::new();
    let mut host = Host::boot(disk.clone(), None, B, tunables, 5).expect("boots");
    host.place(key(), JournalConfig { mode: WriterMode::Single, voters: vec![A, B, C], learners: vec![] })
        .expect("placed");
    host.round(|_| {}).expect("the placement round");

    // Leader A's values for eight windows' worth of slots: accepted and synced.
    let ballot = Ballot { round: 2, node: A };
    let entries = (0..SLOTS).map(|s| (Slot(s), NOOP.into())).collect();
    let (_, synced) = round_with(&mut host, &disk, A, Message::Accept { ballot, entries, commit: Slot(0) });
    assert!(synced, "the values and the promise are synced");
    // Its heartbeat says they are all chosen: this round writes only the chosen index (and
    // anchors), which needs no sync of its own — so nothing of it is durable yet.
    let (_, synced) =
        round_with(&mut host, &disk, A, Message::Heartbeat { ballot, commit: Slot(SLOTS), quiesce: false });
    assert!(!synced, "a round of only the chosen index is not synced");
    let v = host.voter(&key()).expect("a voter");
    assert_eq!(v.chosen_up_to(), Slot(SLOTS), "all chosen here");
    assert_eq!(v.log().start(), Slot(0), "chosen far past the window, but not durably: nothing evicted");
    assert!((0..SLOTS).all(|s| v.log().get(Slot(s)).is_some()), "every entry held");

    // Candidate C asks: the Promise claims only the durable index and reports every value
    // from there on.
    let (out, synced) =
        round_with(&mut host, &disk, C, Message::Prepare { ballot: Ballot { round: 3, node: C }, from: Slot(0) });
    assert!(synced, "the promise is synced, and the chosen index written before it with it");
    let (claimed, reported) = promise_to(&out, C);
    assert_eq!(claimed, Slot(0), "the index was not synced when the Promise was built");
    assert_eq!(
        reported,
        (claimed.0..SLOTS).map(Slot).collect::<Vec<_>>(),
        "every slot from the claimed index is reported"
    );

    // That round synced the index: now the window sheds what is over its bound, and a Promise
    // claims every slot it forgot as chosen.
    let v = host.voter(&key()).expect("a voter");
    let start = v.log().start();
    assert!(start > Slot(0), "durably chosen now: entries below the window are evicted");
    assert!((start.0..SLOTS).all(|s| v.log().get(Slot(s)).is_some()), "from the window's start every entry is held");
    let (out, _) =
        round_with(&mut host, &disk, C, Message::Prepare { ballot: Ballot { round: 4, node: C }, from: Slot(0) });
    let (claimed, reported) = promise_to(&out, C);
    assert!(claimed >= start, "the claimed index {claimed:?} covers every evicted slot (window starts at {start:?})");
    assert_eq!(reported, (claimed.0..SLOTS).map(Slot).collect::<Vec<_>>());
}
