// Package sim is the discrete-event simulator: a virtual clock and an
// event queue that worlds built on it (the fill experiment, the mixed
// workload benchmark) use to drive the same engine as every other world.
//
// Time is virtual and an int64 count of nanoseconds (time.Duration), so a
// run is exactly repeatable: events at the same instant leave the queue in
// the order they were pushed.
package sim

import (
	"container/heap"
	"fmt"
	"time"
)

// Kind says what happens at an event.
type Kind int

const (
	Arrival   Kind = iota // work is submitted
	Departure             // work ends on its own
	Failure               // a node or GPU fails, or spot capacity is reclaimed
	Timer                 // the world asked to be woken (scheduling cycle, MIG reconfiguration done, …)
)

func (k Kind) String() string {
	switch k {
	case Arrival:
		return "arrival"
	case Departure:
		return "departure"
	case Failure:
		return "failure"
	case Timer:
		return "timer"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Event is one thing that happens at a virtual instant. Ref points into the
// world's own tables (a job index, a node index); the queue never looks at
// it.
type Event struct {
	At   time.Duration
	Kind Kind
	Ref  int
	seq  uint64
}

// Queue orders events by time, then by the order they were pushed.
type Queue struct {
	h   eventHeap
	seq uint64
	now time.Duration
}

// Now returns the virtual time of the last event popped.
func (q *Queue) Now() time.Duration { return q.now }

// Len returns the number of pending events.
func (q *Queue) Len() int { return len(q.h) }

// Push schedules an event. Scheduling into the past is a bug in the
// world, so it is refused.
func (q *Queue) Push(e Event) error {
	if e.At < q.now {
		return fmt.Errorf("sim: %s event at %v is before now (%v)", e.Kind, e.At, q.now)
	}
	e.seq = q.seq
	q.seq++
	heap.Push(&q.h, e)
	return nil
}

// Pop removes the next event and advances the clock to it.
func (q *Queue) Pop() (Event, bool) {
	if len(q.h) == 0 {
		return Event{}, false
	}
	e := heap.Pop(&q.h).(Event)
	q.now = e.At
	return e, true
}

// Peek returns the next event without removing it.
func (q *Queue) Peek() (Event, bool) {
	if len(q.h) == 0 {
		return Event{}, false
	}
	return q.h[0], true
}

type eventHeap []Event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].At != h[j].At {
		return h[i].At < h[j].At
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(Event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
