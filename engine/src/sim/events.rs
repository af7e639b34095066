//! The discrete-event queue: a virtual clock and the events a world asked
//! for, ported from the Go build's `internal/sim/events.go`.
//!
//! Time is virtual, an `i64` count of nanoseconds, so a run is exactly
//! repeatable: events at the same instant leave the queue in the order
//! they were pushed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;

use thiserror::Error;

use crate::scenario::duration::format_duration;
use crate::sched::Nanos;

/// What happens at an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Kind {
    /// Work is submitted.
    #[default]
    Arrival,
    /// Work ends on its own.
    Departure,
    /// A node or GPU fails, or spot capacity is reclaimed.
    Failure,
    /// The world asked to be woken (a scheduling cycle, a MIG change done).
    Timer,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Arrival => "arrival",
            Kind::Departure => "departure",
            Kind::Failure => "failure",
            Kind::Timer => "timer",
        })
    }
}

/// One thing that happens at a virtual instant. `reference` points into
/// the world's own tables (a job index, a timer); the queue never looks at
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Event {
    pub at: Nanos,
    pub kind: Kind,
    pub reference: usize,
}

/// An event pushed before the queue's clock.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("sim: {kind} event at {} is before now ({})", format_duration(*.at), format_duration(*.now))]
pub struct PastEvent {
    pub kind: Kind,
    pub at: Nanos,
    pub now: Nanos,
}

/// A queued event: ordered by time, then by the order of pushing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    at: Nanos,
    seq: u64,
    kind: Kind,
    reference: usize,
}

impl Ord for Entry {
    fn cmp(&self, other: &Entry) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Entry) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Orders events by time, then by the order they were pushed.
#[derive(Debug, Default)]
pub struct Queue {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
    now: Nanos,
}

impl Queue {
    /// An empty queue at time 0.
    pub fn new() -> Queue {
        Queue::default()
    }

    /// The virtual time of the last event popped.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// The number of events waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no event waits.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Schedules an event. Scheduling into the past is a bug in the world,
    /// so it is refused.
    pub fn push(&mut self, e: Event) -> Result<(), PastEvent> {
        if e.at < self.now {
            return Err(PastEvent {
                kind: e.kind,
                at: e.at,
                now: self.now,
            });
        }
        self.heap.push(Reverse(Entry {
            at: e.at,
            seq: self.seq,
            kind: e.kind,
            reference: e.reference,
        }));
        self.seq += 1;
        Ok(())
    }

    /// Removes the next event and advances the clock to it.
    pub fn pop(&mut self) -> Option<Event> {
        let Reverse(e) = self.heap.pop()?;
        self.now = e.at;
        Some(Event {
            at: e.at,
            kind: e.kind,
            reference: e.reference,
        })
    }

    /// The next event, left in the queue.
    pub fn peek(&self) -> Option<Event> {
        self.heap.peek().map(|Reverse(e)| Event {
            at: e.at,
            kind: e.kind,
            reference: e.reference,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::SECOND;

    fn at(t: Nanos, reference: usize) -> Event {
        Event {
            at: t,
            kind: Kind::Arrival,
            reference,
        }
    }

    /// Pops every event and returns their references, checking the clock.
    fn drain(q: &mut Queue) -> Vec<usize> {
        let mut refs = Vec::new();
        while let Some(e) = q.pop() {
            assert_eq!(q.now(), e.at, "the clock after a pop");
            refs.push(e.reference);
        }
        refs
    }

    fn push_all(q: &mut Queue, es: &[Event]) {
        for &e in es {
            q.push(e).unwrap();
        }
    }

    #[test]
    fn pops_in_time_order() {
        let mut q = Queue::new();
        push_all(
            &mut q,
            &[at(30, 3), at(10, 1), at(50, 5), at(20, 2), at(40, 4)],
        );
        assert_eq!(drain(&mut q), [1, 2, 3, 4, 5]);
    }

    #[test]
    fn keeps_push_order_among_equal_times() {
        // 300 events over three instants, pushed interleaved: within each
        // instant they must leave in push order, which a bare heap would
        // not keep.
        let mut q = Queue::new();
        let mut want: [Vec<usize>; 3] = Default::default();
        for i in 0..300 {
            let t = (i * 7) % 3;
            q.push(at(t as Nanos, i)).unwrap();
            want[t].push(i);
        }
        assert_eq!(drain(&mut q), want.concat());
    }

    #[test]
    fn refuses_a_push_into_the_past() {
        let mut q = Queue::new();
        push_all(&mut q, &[at(10, 1), at(20, 2)]);
        q.pop().unwrap();
        let err = q
            .push(Event {
                at: 5,
                kind: Kind::Timer,
                reference: 9,
            })
            .expect_err("an event before now was accepted");
        assert_eq!(
            err.to_string(),
            "sim: timer event at 5ns is before now (10ns)"
        );
        assert_eq!(q.len(), 1, "a refused push left something");
        // Now itself is not the past.
        q.push(at(10, 3)).unwrap();
        assert_eq!(drain(&mut q), [3, 2]);
    }

    #[test]
    fn refuses_negative_times_from_the_start() {
        assert!(Queue::new().push(at(-1, 1)).is_err());
    }

    #[test]
    fn now_advances_only_on_pop() {
        let mut q = Queue::new();
        assert_eq!(q.now(), 0);
        push_all(&mut q, &[at(SECOND, 1), at(3 * SECOND, 2)]);
        assert_eq!(q.now(), 0, "push moved the clock");
        assert!(q.peek().is_some());
        assert_eq!(q.now(), 0, "peek moved the clock");
        q.pop();
        assert_eq!(q.now(), SECOND);
        q.pop();
        assert_eq!(q.now(), 3 * SECOND);
        assert!(q.pop().is_none());
        assert_eq!(q.now(), 3 * SECOND, "an empty pop moved the clock");
    }

    #[test]
    fn peek_shows_the_next_event_without_removing_it() {
        let mut q = Queue::new();
        assert!(q.peek().is_none());
        push_all(
            &mut q,
            &[
                Event {
                    at: 7,
                    kind: Kind::Departure,
                    reference: 2,
                },
                Event {
                    at: 7,
                    kind: Kind::Failure,
                    reference: 3,
                },
                Event {
                    at: 4,
                    kind: Kind::Timer,
                    reference: 1,
                },
            ],
        );
        for _ in 0..2 {
            let e = q.peek().unwrap();
            assert_eq!((e.at, e.kind, e.reference), (4, Kind::Timer, 1));
            assert_eq!(q.len(), 3);
        }
        q.pop();
        let e = q.peek().unwrap();
        assert_eq!((e.kind, e.reference), (Kind::Departure, 2));
    }

    #[test]
    fn kinds_print_their_names() {
        for (k, want) in [
            (Kind::Arrival, "arrival"),
            (Kind::Departure, "departure"),
            (Kind::Failure, "failure"),
            (Kind::Timer, "timer"),
        ] {
            assert_eq!(k.to_string(), want);
        }
    }
}
