//! Pages below the in-memory window, built from the store (`reads::page`, `PageFetch::build`),
//! against the plain fold: a learner that keeps every retained entry and every position in
//! memory and answers every read from there. Whatever the window, the anchors and the index
//! of evicted writes, a read answers exactly the records the plain fold holds at the positions
//! asked — across truncation floors, refused writes and no-ops between writes, multi-record
//! writes that span anchors, and restarts (which start the index empty) — and a point read
//! inside the index reads one slot.

use bytes::Bytes;
use paros_core::journal::{Anchoring, Command, Control, Entry, JournalState, Located, WriterMode};
use paros_core::log::Log;
use paros_core::reads::{Paged, page};
use paros_core::{Consistency, Durable, LeaderUuid, Learner, ReadAnswer, ReadRequest, Seq, Slot, Tunables, Window};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// A write of this many records at the tail (by the current leader, in a single-writer journal).
    Write(u8),
    /// A write the fold refuses or answers as a duplicate (a stale position, or no records).
    Stale(u8),
    /// A new leader (a single-writer journal; a multi-writer one refuses it).
    Elect,
    Noop,
    /// Trim this share (in 1/8ths) of the retained records.
    Truncate(u8),
    /// The evicting learner restarts from its store.
    Restart,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (1u8..5).prop_map(Op::Write),
        2 => (0u8..3).prop_map(Op::Stale),
        1 => Just(Op::Elect),
        2 => Just(Op::Noop),
        1 => (0u8..9).prop_map(Op::Truncate),
        1 => Just(Op::Restart),
    ]
}

/// A learner, its window and the store holding every write it made.
struct Server {
    mode: WriterMode,
    learner: Learner,
    log: Log,
    store: Durable,
    anchoring: Anchoring,
    window: Window,
}

impl Server {
    fn new(mode: WriterMode, anchoring: Anchoring, window: Window) -> Server {
        let log = Log::default();
        let learner = Learner::resume(mode, &log, JournalState::default(), &[], anchoring, window, Slot(0));
        Server { mode, learner, log, store: Durable::default(), anchoring, window }
    }

    /// Chooses `command` at the next slot, walks it, syncs the round and evicts what the window
    /// does not keep.
    fn choose(&mut self, command: &Command) {
        let mut writes = Vec::new();
        let slot = self.learner.chosen_up_to();
        self.learner.learn(&mut self.log, slot, command, &mut writes);
        self.learner.walk(&mut self.log, &mut writes, &mut Vec::new());
        assert_eq!(self.learner.chosen_up_to(), slot.next());
        self.learner.persist_chosen(&mut writes);
        for w in &writes {
            self.store.apply(w);
        }
        self.learner.round_taken(true);
        self.learner.round_synced();
        self.learner.evict(&mut self.log);
    }

    /// Boots again from the store, as a host does.
    fn restart(&mut self) {
        let durable = self.store.for_boot();
        let start = durable.boot_start();
        let mut log = Log::with_window(durable.floor, start, durable.entries);
        let mut learner = Learner::resume(
            self.mode,
            &log,
            durable.sealed,
            &durable.anchors,
            self.anchoring,
            self.window,
            durable.floor,
        );
        let mut writes = Vec::new();
        learner.recover(&mut log, durable.chosen_up_to, &mut writes, &mut Vec::new());
        for w in &writes {
            self.store.apply(w);
        }
        (self.learner, self.log) = (learner, log);
    }

    /// Reads `request` as a host does: from memory, or from the store. Also says where the fold
    /// located the position and how many slots the store was asked for.
    fn read(&self, request: &ReadRequest, tunables: &Tunables) -> (ReadAnswer, Located, usize) {
        let located = self.learner.fold().locate(request.from);
        match page(self.learner.fold(), &self.log, request, tunables) {
            Paged::Answer(a) => (a, located, 0),
            Paged::Fetch(fetch) => {
                let mut slots = 0;
                let answer = fetch
                    .build(tunables, |from, max| {
                        let got = self.store.read_range(from, max);
                        slots += got.len();
                        Ok::<_, ()>(got)
                    })
                    .expect("the model store never fails");
                (answer, located, slots)
            }
        }
    }
}

fn leader(n: u64) -> LeaderUuid {
    LeaderUuid::new(u128::from(n) + 1).expect("non-zero")
}

/// The command `op` stands for, against the journal's state now.
fn command(mode: WriterMode, op: &Op, state: &JournalState, counter: &mut u64) -> Option<Command> {
    let mut records = |n: u8| -> Vec<Bytes> {
        (0..n)
            .map(|_| {
                *counter += 1;
                // Records of different sizes, each naming itself.
                Bytes::from(format!("{counter:0width$}", width = 4 + (*counter % 5) as usize))
            })
            .collect()
    };
    let fence = match mode {
        WriterMode::Single => Some(state.leader.unwrap_or(leader(999))),
        WriterMode::Multi => None,
    };
    Some(match op {
        Op::Write(n) => Command::Write(Entry { leader: fence, seq: state.next_seq, records: records(*n) }),
        Op::Stale(n) => {
            let seq = Seq(state.next_seq.0.saturating_sub(u64::from(*n)));
            let records = if mode == WriterMode::Multi { Vec::new() } else { records(1) };
            Command::Write(Entry { leader: fence, seq, records })
        }
        Op::Elect => Command::Control(Control::SetLeader { new: leader(state.term), old: state.leader }),
        Op::Noop => Command::Control(Control::Noop),
        Op::Truncate(eighths) => {
            let retained = state.next_seq.0 - state.first_seq.0;
            let up_to = Seq(state.first_seq.0 + retained * u64::from(*eighths) / 8);
            let leader = if mode == WriterMode::Multi { None } else { state.leader };
            Command::Control(Control::Truncate { leader, up_to })
        }
        Op::Restart => return None,
    })
}

/// Runs `ops` on a plain server and an evicting one; after each step, reads every position
/// (and one past the end) from both, with point reads, short pages and full pages.
fn run(mode: WriterMode, ops: &[Op], window: u32, anchor_slots: u32, exact_writes: u32) {
    let tunables = Tunables { page_records_max: 6, page_bytes_max: 40, ..Tunables::default() };
    let mut plain = Server::new(mode, Anchoring::NEVER, Window::ALL);
    let anchoring = Anchoring { slots: anchor_slots, bytes: u32::MAX, exact_writes };
    let mut evicting = Server::new(mode, anchoring, Window { slots: window, bytes: u32::MAX });
    let mut counter = 0;
    for op in ops {
        let Some(command) = command(mode, op, plain.learner.state(), &mut counter) else {
            evicting.restart();
            continue;
        };
        plain.choose(&command);
        evicting.choose(&command);
        assert_eq!(plain.learner.state(), evicting.learner.state(), "both fold {command:?} alike");
        let state = *plain.learner.state();
        for seq in 0..=state.next_seq.0 {
            for (limit, max_bytes) in [(1, 0), (2, 0), (0, 12), (0, 0)] {
                let request = ReadRequest {
                    from: Seq(seq),
                    limit,
                    max_bytes,
                    wait_ticks: 0,
                    consistency: Consistency::Linearizable,
                };
                let (expected, at, _) = plain.read(&request, &tunables);
                assert!(
                    !matches!(at, Located::Anchored { .. } | Located::Indexed { .. }),
                    "the plain fold holds every position in memory"
                );
                let (answer, located, slots) = evicting.read(&request, &tunables);
                assert_eq!(answer, expected, "the page from {seq} (limit {limit}, {max_bytes} bytes), {located:?}");
                if limit == 1 && matches!(located, Located::Indexed { .. }) {
                    assert_eq!(slots, 1, "a point read inside the index reads the one slot it returns");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_page_below_the_window_is_the_page_the_plain_fold_serves(
        multi in any::<bool>(),
        ops in prop::collection::vec(op_strategy(), 1..60),
        window in 0u32..6,
        anchor_slots in 1u32..8,
        exact_writes in 0u32..10,
    ) {
        let mode = if multi { WriterMode::Multi } else { WriterMode::Single };
        run(mode, &ops, window, anchor_slots, exact_writes);
    }
}

/// A fixed history through every case: a single-writer journal with refusals and no-ops
/// between writes, writes of several records across anchor strides, a trim and a restart.
#[test]
fn pages_below_the_window_through_refusals_trims_and_a_restart() {
    let mut ops = vec![Op::Elect];
    for i in 0..30u8 {
        ops.push(Op::Write(1 + i % 4));
        if i % 3 == 0 {
            ops.push(Op::Stale(1));
        }
        if i % 5 == 0 {
            ops.push(Op::Noop);
        }
        if i == 12 {
            ops.push(Op::Truncate(3));
        }
        if i == 20 {
            ops.push(Op::Restart);
        }
    }
    for (window, exact_writes) in [(0, 0), (2, 3), (3, 1000)] {
        run(WriterMode::Single, &ops, window, 4, exact_writes);
        run(WriterMode::Multi, &ops, window, 4, exact_writes);
    }
}

/// The index serves the positions it keeps, and only those: the newest evicted writes (writes
/// of one and two records in turn, so each is a run of its own).
#[test]
fn the_fold_keeps_the_exact_positions_of_the_newest_evicted_writes_only() {
    let anchoring = Anchoring { slots: 1000, bytes: u32::MAX, exact_writes: 3 };
    let mut s = Server::new(WriterMode::Multi, anchoring, Window { slots: 2, bytes: u32::MAX });
    let mut counter = 0;
    for i in 0..10 {
        let state = *s.learner.state();
        s.choose(&command(WriterMode::Multi, &Op::Write(1 + i % 2), &state, &mut counter).expect("a write"));
    }
    let fold = s.learner.fold();
    // Ten writes of 1, 2, 1, 2… records in slots 0–9 (write s starts at 3s/2, rounded down);
    // the window holds the last two or three.
    let start = |slot: u64| Seq(slot * 3 / 2);
    let window_start = fold.window_seq();
    let first_held = (0..10).find(|s| start(*s) == window_start).expect("the window starts at a write");
    assert!((7..=8).contains(&first_held), "window from slot {first_held}");
    let first = first_held - 3;
    let indexed: Vec<(Slot, Seq, Seq)> = fold.evicted_writes(start(first)).collect();
    let expected: Vec<(Slot, Seq, Seq)> = (first..first_held).map(|s| (Slot(s), start(s), start(s + 1))).collect();
    assert_eq!(indexed, expected, "the three newest evicted writes, the last ending at the window");
    let inside = start(first + 1).0 - 1;
    assert_eq!(fold.locate(Seq(inside)), Located::Indexed { slot: Slot(first), start: start(first) });
    let older = Seq(start(first).0 - 1);
    assert!(matches!(fold.locate(older), Located::Anchored { .. }), "older: through an anchor");
    assert_eq!(fold.evicted_writes(older).count(), 0);
    assert_eq!(fold.evicted_writes(window_start).count(), 0, "the window is not in the index");
}

/// Writes in consecutive slots with the same record count are one run of the index: one entry
/// keeps a steady writer's whole evicted history, every write of it exactly.
#[test]
fn one_run_of_the_index_keeps_every_write_of_a_steady_writer() {
    let anchoring = Anchoring { slots: 1000, bytes: u32::MAX, exact_writes: 1 };
    let mut s = Server::new(WriterMode::Multi, anchoring, Window { slots: 2, bytes: u32::MAX });
    let mut counter = 0;
    for _ in 0..40 {
        let state = *s.learner.state();
        s.choose(&command(WriterMode::Multi, &Op::Write(2), &state, &mut counter).expect("a write"));
    }
    let fold = s.learner.fold();
    let window_start = fold.window_seq().0;
    assert!((74..=76).contains(&window_start), "window from {window_start}");
    for seq in 0..window_start {
        let slot = Slot(seq / 2);
        assert_eq!(fold.locate(Seq(seq)), Located::Indexed { slot, start: Seq(seq / 2 * 2) }, "position {seq}");
    }
    let indexed: Vec<(Slot, Seq, Seq)> = fold.evicted_writes(Seq(5)).collect();
    let expected: Vec<(Slot, Seq, Seq)> =
        (2..window_start / 2).map(|s| (Slot(s), Seq(2 * s), Seq(2 * s + 2))).collect();
    assert_eq!(indexed, expected, "from the write holding 5 to the window, write by write");
    // A write of another count starts a new run: with room for one, the old run goes.
    let mut s = s;
    let state = *s.learner.state();
    s.choose(&command(WriterMode::Multi, &Op::Write(3), &state, &mut counter).expect("a write"));
    for _ in 0..3 {
        let state = *s.learner.state();
        s.choose(&command(WriterMode::Multi, &Op::Write(2), &state, &mut counter).expect("a write"));
    }
    let fold = s.learner.fold();
    assert!(matches!(fold.locate(Seq(0)), Located::Anchored { .. }), "the steady run was forgotten whole");
}

/// Long runs of same-sized writes, broken by refusals, no-ops, a new count, trims that cut a
/// run in two and a restart: every page below the window is the plain fold's.
#[test]
fn pages_below_the_window_through_runs_cut_by_trims() {
    let mut ops = vec![Op::Elect];
    for i in 0..48u8 {
        ops.push(Op::Write(if i < 20 {
            1
        } else if i < 30 {
            2
        } else {
            1
        }));
        match i {
            9 => ops.push(Op::Truncate(2)),
            24 => ops.push(Op::Noop),
            27 => ops.push(Op::Stale(1)),
            35 => ops.push(Op::Truncate(5)),
            40 => ops.push(Op::Restart),
            _ => {}
        }
    }
    for (window, exact_writes) in [(0, 1), (2, 2), (3, 1000)] {
        run(WriterMode::Single, &ops, window, 4, exact_writes);
        run(WriterMode::Multi, &ops, window, 4, exact_writes);
    }
}
