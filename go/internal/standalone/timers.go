package standalone

import (
	"container/heap"
	"time"
)

// Timer kinds. A job timer carries the job's epoch; one from an earlier
// epoch (the job stopped and restarted since) is ignored.
const (
	tEnd      = iota // the job's run time is over: it succeeds (or fails, with fail_after)
	tGrace           // a preempted job's grace period is over
	tReady           // a MIG instance a task waits for is created
	tUncordon        // a GPU's MIG change is done
)

type timer struct {
	at    time.Duration
	seq   int // ties fire in the order they were set
	kind  int
	job   *job
	epoch int
	node  string
	gpu   int
}

type timerQueue []*timer

func (q timerQueue) Len() int { return len(q) }
func (q timerQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q timerQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *timerQueue) Push(x any)   { *q = append(*q, x.(*timer)) }
func (q *timerQueue) Pop() any {
	old := *q
	t := old[len(old)-1]
	*q = old[:len(old)-1]
	return t
}

// after sets a timer at cluster time at.
func (w *World) after(at time.Duration, t timer) {
	w.timerSeq++
	t.at, t.seq = at, w.timerSeq
	heap.Push(&w.timers, &t)
}

// due pops the next timer at or before now, if any.
func (w *World) due(now time.Duration) *timer {
	if len(w.timers) == 0 || w.timers[0].at > now {
		return nil
	}
	return heap.Pop(&w.timers).(*timer)
}
