//! The world's event queue: events in order of simulated time, ties in order of scheduling.
//!
//! The order is the one a map keyed by `(time, sequence)` gives, so a seed replays exactly as
//! before; the events themselves stay put in a slab while a heap of small keys is reordered
//! (a packet carrying a page of entries is moved once, not at every rebalancing).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Bits of a key that hold the scheduling sequence and the slot: the time is the rest.
const SEQ_BITS: u32 = 40;
const SLOT_BITS: u32 = 32;

/// Events of type `E` waiting for their time.
///
/// The heap orders one `u128` per event: the time (nanoseconds, below 2^56: two years), the
/// scheduling sequence (below 2^40) and the event's slot, so a comparison is one integer
/// comparison.
#[derive(Debug)]
pub struct EventQueue<E> {
    order: BinaryHeap<Reverse<u128>>,
    slots: Vec<Option<E>>,
    free: Vec<u32>,
    scheduled: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue { order: BinaryHeap::new(), slots: Vec::new(), free: Vec::new(), scheduled: 0 }
    }
}

impl<E> EventQueue<E> {
    /// Schedules `event` at `time`, after every event already scheduled at that time.
    pub fn push(&mut self, time: u64, event: E) {
        self.scheduled += 1;
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(event);
                s
            }
            None => {
                self.slots.push(Some(event));
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 events wait at once")
            }
        };
        assert!(
            time < 1 << (128 - SEQ_BITS - SLOT_BITS) && self.scheduled < 1 << SEQ_BITS,
            "a run fits its queue's key"
        );
        let key =
            (u128::from(time) << (SEQ_BITS + SLOT_BITS)) | (u128::from(self.scheduled) << SLOT_BITS) | u128::from(slot);
        self.order.push(Reverse(key));
    }

    /// The earliest event and its time.
    pub fn pop(&mut self) -> Option<(u64, E)> {
        let Reverse(key) = self.order.pop()?;
        let time = u64::try_from(key >> (SEQ_BITS + SLOT_BITS)).expect("a time below 2^56");
        let slot = (key & u128::from(u32::MAX)) as u32;
        let event = self.slots[slot as usize].take().expect("a scheduled slot holds its event");
        self.free.push(slot);
        Some((time, event))
    }
}

#[cfg(test)]
mod tests {
    use super::EventQueue;

    #[test]
    fn events_come_out_by_time_then_by_scheduling_order() {
        let mut q = EventQueue::default();
        for (t, e) in [(5, 'a'), (1, 'b'), (5, 'c'), (0, 'd'), (1, 'e')] {
            q.push(t, e);
        }
        let (t, e) = q.pop().unwrap();
        assert_eq!((t, e), (0, 'd'));
        q.push(1, 'f'); // reuses the freed slot; still after 'b' and 'e'
        let order: Vec<(u64, char)> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![(1, 'b'), (1, 'e'), (1, 'f'), (5, 'a'), (5, 'c')]);
    }
}
