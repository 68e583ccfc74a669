//! The in-memory window's eviction bound, calling `Learner` and `Log` directly: an entry leaves
//! memory only once it is *durably chosen* — below the chosen index written in a round that
//! was synced (`Learner::durable_chosen`). Above it the entry's in-memory copy is the one a
//! Promise reports (a campaign skips only the slots below the durable index) and the one that
//! must survive until the index that makes the slot chosen after a reboot is on the disk.

use bytes::Bytes;
use paros_core::journal::{Anchoring, Command, Control, Entry, JournalState, WriterMode};
use paros_core::log::Log;
use paros_core::{LeaderUuid, Learner, Seq, Slot, Walked, Window, WriteOp};

const NOOP: Command = Command::Control(Control::Noop);

/// A learner over an empty log whose window keeps `window` below its chosen index.
fn learner(log: &Log, window: Window) -> Learner {
    let anchoring = Anchoring { slots: 8, bytes: u32::MAX, exact_writes: 4 };
    Learner::resume(WriterMode::Single, log, JournalState::default(), &[], anchoring, window, Slot(0))
}

/// Learns `commands` as chosen at the slots from `from` on and walks them. Returns the writes.
fn choose(learner: &mut Learner, log: &mut Log, from: u64, commands: &[Command]) -> Vec<WriteOp> {
    let mut writes = Vec::new();
    for (i, command) in commands.iter().enumerate() {
        learner.learn(log, Slot(from + i as u64), command, &mut writes);
    }
    let mut walked: Vec<Walked> = Vec::new();
    learner.walk(log, &mut writes, &mut walked);
    assert_eq!(walked.len(), commands.len(), "every slot learned is applied");
    writes
}

/// The slots of `[from, to)` not held in memory.
fn missing(log: &Log, from: u64, to: u64) -> Vec<u64> {
    (from..to).filter(|s| log.get(Slot(*s)).is_none()).collect()
}

fn chosen_written(writes: &[WriteOp]) -> Option<Slot> {
    writes.iter().rev().find_map(|w| match w {
        WriteOp::Chosen { up_to } => Some(*up_to),
        _ => None,
    })
}

fn write(seq: u64, bytes: usize) -> Command {
    let leader = LeaderUuid::new(0xa).expect("non-zero");
    Command::Write(Entry { leader: Some(leader), seq: Seq(seq), records: vec![Bytes::from(vec![b'x'; bytes])] })
}

#[test]
fn entries_chosen_past_the_slot_bound_stay_until_their_chosen_index_is_synced() {
    let window = Window { slots: 4, bytes: u32::MAX };
    let mut log = Log::default();
    let mut l = learner(&log, window);
    let writes = choose(&mut l, &mut log, 0, &[NOOP; 40]);
    assert_eq!(l.chosen_up_to(), Slot(40));
    assert_eq!(chosen_written(&writes), Some(Slot(40)), "the index is written (the window is over its bound)");
    assert_eq!(l.durable_chosen(), Slot(0), "written, not synced");

    l.evict(&mut log);
    assert_eq!(missing(&log, 0, 40), Vec::<u64>::new(), "ten times the window, and nothing durably chosen: all held");
    assert_eq!(log.start(), Slot(0));

    // The round carrying the index is handed to storage and will sync, but has not yet.
    l.round_taken(true);
    l.evict(&mut log);
    assert_eq!(missing(&log, 0, 40), Vec::<u64>::new(), "a round in flight is not a synced one: all held");

    l.round_synced();
    assert_eq!(l.durable_chosen(), Slot(40));
    l.evict(&mut log);
    assert!(log.start() > Slot(0), "durable now: the window sheds what is over its bound");
    let held_below = (0..40).filter(|s| log.get(Slot(*s)).is_some()).count();
    assert!(held_below <= window.slots as usize, "{held_below} held below the chosen index");
    assert_eq!(missing(&log, log.start().0, 40), Vec::<u64>::new(), "everything from the window's start is held");
}

#[test]
fn a_round_that_does_not_sync_makes_nothing_evictable() {
    let mut log = Log::default();
    let mut l = learner(&log, Window { slots: 4, bytes: u32::MAX });
    // The values arrive (and are synced) in one round; the commit that makes them chosen here
    // comes in the next, whose only writes are the chosen index and anchors.
    let mut writes = Vec::new();
    for s in 0..40 {
        l.learn(&mut log, Slot(s), &NOOP, &mut writes);
    }
    l.round_taken(true);
    l.round_synced();
    assert_eq!(l.durable_chosen(), Slot(0), "the values are durable, the index that makes them chosen is not written");
    let mut writes = Vec::new();
    l.walk(&mut log, &mut writes, &mut Vec::new());
    assert_eq!((l.chosen_up_to(), chosen_written(&writes)), (Slot(40), Some(Slot(40))));
    // A round of only `Chosen` and `Anchor` writes needs no sync of its own: the host does not sync it.
    assert!(writes.iter().all(|w| !w.needs_sync()), "{writes:?}");
    l.round_taken(false);
    l.round_synced();
    l.evict(&mut log);
    assert_eq!(l.durable_chosen(), Slot(0), "a round not synced makes its chosen index no more durable");
    assert_eq!(missing(&log, 0, 40), Vec::<u64>::new(), "an unsynced index makes nothing durable: all held");
    // The next round that syncs carries the index written before it.
    l.round_taken(true);
    l.round_synced();
    l.evict(&mut log);
    assert_eq!(l.durable_chosen(), Slot(40));
    assert!(log.start() > Slot(0), "synced: the window sheds what is over its bound");
}

#[test]
fn eviction_stops_at_the_synced_index_while_more_is_chosen_past_it() {
    let window = Window { slots: 4, bytes: u32::MAX };
    let mut log = Log::default();
    let mut l = learner(&log, window);
    choose(&mut l, &mut log, 0, &[NOOP; 20]);
    l.round_taken(true);
    l.round_synced();
    assert_eq!(l.durable_chosen(), Slot(20));
    // Forty more chosen; their index is written in a round that is in flight, then in one
    // that never syncs.
    let writes = choose(&mut l, &mut log, 20, &[NOOP; 40]);
    assert_eq!(chosen_written(&writes), Some(Slot(60)));
    l.round_taken(true);
    l.evict(&mut log);
    assert!(log.start() <= Slot(20), "never past the synced index: start {:?}", log.start());
    assert!(log.start() > Slot(0), "below it the slot bound applies");
    assert_eq!(missing(&log, 20, 60), Vec::<u64>::new(), "every slot at or past the synced index is held");
    l.round_synced();
    assert_eq!(l.durable_chosen(), Slot(60));
    l.evict(&mut log);
    assert!(log.start() > Slot(20), "synced: the window moves on");
    assert_eq!(missing(&log, log.start().0, 60), Vec::<u64>::new());
}

#[test]
fn entries_past_the_byte_bound_stay_until_their_chosen_index_is_synced() {
    // No slot bound to speak of; 40 writes of 100 bytes against a 250-byte window.
    let window = Window { slots: 1 << 20, bytes: 250 };
    let mut log = Log::default();
    let mut l = learner(&log, window);
    let commands: Vec<Command> = (0..40).map(|n| write(n, 100)).collect();
    let writes = choose(&mut l, &mut log, 0, &commands);
    assert!(log.bytes() > u64::from(window.bytes));
    assert_eq!(chosen_written(&writes), Some(Slot(40)), "over the byte bound the index is written at once");
    l.evict(&mut log);
    assert_eq!(missing(&log, 0, 40), Vec::<u64>::new(), "over the byte bound, nothing durably chosen: all held");
    assert_eq!(log.bytes(), 40 * 100);
    l.round_taken(true);
    l.evict(&mut log);
    assert_eq!(missing(&log, 0, 40), Vec::<u64>::new(), "in flight: all held");
    l.round_synced();
    l.evict(&mut log);
    assert!(log.bytes() <= u64::from(window.bytes), "durable now: the byte bound holds ({} bytes)", log.bytes());
    assert_eq!(missing(&log, log.start().0, 40), Vec::<u64>::new());
}
