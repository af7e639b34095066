package sim

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// at is an arrival event at t with a reference, the fields tests compare.
func at(t time.Duration, ref int) Event { return Event{At: t, Kind: Arrival, Ref: ref} }

// drain pops every event and returns their references.
func drain(t *testing.T, q *Queue) []int {
	t.Helper()
	var refs []int
	for {
		e, ok := q.Pop()
		if !ok {
			return refs
		}
		if q.Now() != e.At {
			t.Fatalf("after popping an event at %v, Now is %v", e.At, q.Now())
		}
		refs = append(refs, e.Ref)
	}
}

func mustPush(t *testing.T, q *Queue, es ...Event) {
	t.Helper()
	for _, e := range es {
		if err := q.Push(e); err != nil {
			t.Fatal(err)
		}
	}
}

func TestQueuePopsInTimeOrder(t *testing.T) {
	q := &Queue{}
	mustPush(t, q, at(30, 3), at(10, 1), at(50, 5), at(20, 2), at(40, 4))
	if got := drain(t, q); !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("popped %v; want 1 2 3 4 5", got)
	}
}

func TestQueueKeepsPushOrderAmongEqualTimes(t *testing.T) {
	// 300 events over three instants, pushed interleaved: within each
	// instant they must leave in push order, which a bare heap would not
	// keep.
	q := &Queue{}
	var want [3][]int
	for i := 0; i < 300; i++ {
		ts := time.Duration((i * 7) % 3)
		mustPush(t, q, at(ts, i))
		want[ts] = append(want[ts], i)
	}
	got := drain(t, q)
	if wantAll := slices.Concat(want[0], want[1], want[2]); !slices.Equal(got, wantAll) {
		t.Fatalf("popped %v;\nwant %v", got, wantAll)
	}
}

func TestQueueRefusesPushIntoThePast(t *testing.T) {
	q := &Queue{}
	mustPush(t, q, at(10, 1), at(20, 2))
	if _, ok := q.Pop(); !ok {
		t.Fatal("empty queue")
	}
	err := q.Push(Event{At: 5, Kind: Timer, Ref: 9})
	if err == nil {
		t.Fatal("an event before now was accepted")
	}
	if msg := err.Error(); !strings.Contains(msg, "timer") || !strings.Contains(msg, "before now") {
		t.Errorf("error %q does not say which event and why", msg)
	}
	if q.Len() != 1 {
		t.Errorf("Len %d after a refused push; want 1", q.Len())
	}
	// Now itself is not the past.
	mustPush(t, q, at(10, 3))
	if got := drain(t, q); !slices.Equal(got, []int{3, 2}) {
		t.Fatalf("popped %v; want 3 (at now) then 2", got)
	}
}

func TestQueueRefusesNegativeTimesFromTheStart(t *testing.T) {
	q := &Queue{}
	if err := q.Push(at(-1, 1)); err == nil {
		t.Fatal("an event at -1ns was accepted on a queue at time 0")
	}
}

func TestQueueNowAdvancesOnlyOnPop(t *testing.T) {
	q := &Queue{}
	if q.Now() != 0 {
		t.Fatalf("a new queue is at %v; want 0", q.Now())
	}
	mustPush(t, q, at(time.Second, 1), at(3*time.Second, 2))
	if q.Now() != 0 {
		t.Fatalf("Push moved Now to %v", q.Now())
	}
	if _, ok := q.Peek(); !ok || q.Now() != 0 {
		t.Fatalf("Peek moved Now to %v", q.Now())
	}
	q.Pop()
	if q.Now() != time.Second {
		t.Fatalf("Now %v after the first pop; want 1s", q.Now())
	}
	q.Pop()
	if q.Now() != 3*time.Second {
		t.Fatalf("Now %v after the second pop; want 3s", q.Now())
	}
	if _, ok := q.Pop(); ok {
		t.Fatal("popped from an empty queue")
	}
	if q.Now() != 3*time.Second {
		t.Fatalf("an empty Pop moved Now to %v", q.Now())
	}
}

func TestQueuePeekShowsTheNextEventWithoutRemovingIt(t *testing.T) {
	q := &Queue{}
	if _, ok := q.Peek(); ok {
		t.Fatal("Peek on an empty queue reported an event")
	}
	mustPush(t, q, Event{At: 7, Kind: Departure, Ref: 2}, Event{At: 7, Kind: Failure, Ref: 3}, Event{At: 4, Kind: Timer, Ref: 1})
	for i := 0; i < 2; i++ {
		e, ok := q.Peek()
		if !ok || e.At != 4 || e.Kind != Timer || e.Ref != 1 {
			t.Fatalf("Peek = %+v, %v; want the timer at 4", e, ok)
		}
		if q.Len() != 3 {
			t.Fatalf("Len %d after Peek; want 3", q.Len())
		}
	}
	q.Pop()
	if e, _ := q.Peek(); e.Kind != Departure || e.Ref != 2 {
		t.Fatalf("Peek = %+v after a pop; want the departure pushed first at 7", e)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Arrival: "arrival", Departure: "departure", Failure: "failure", Timer: "timer", Kind(9): "kind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q; want %q", int(k), got, want)
		}
	}
}
