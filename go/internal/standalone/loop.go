package standalone

import (
	"context"
	"time"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/store"
)

// Run drives the world until ctx ends: each wake fires what fell due, runs
// a cycle when one is wanted, and commits the batch of changes.
func (w *World) Run(ctx context.Context) error {
	if w.opt.Niced {
		lowerPriority()
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.kick:
		case <-t.C:
		}
		if done := w.step(); done != nil {
			if err := w.store.Wait(ctx, done); err != nil && ctx.Err() == nil {
				w.opt.Log.Error("store: world batch not committed", "err", err)
			}
		}
		t.Reset(w.nextWake())
	}
}

// step does one wake's work under the lock and returns the enqueued
// batch's outcome (nil when nothing changed).
func (w *World) step() <-chan error {
	w.lock()
	defer w.mu.Unlock()
	now := max(w.clk.now(), w.now)
	for t := w.due(now); t != nil; t = w.due(now) {
		w.now = max(w.now, t.at)
		w.fire(t)
	}
	w.now = now
	wall := w.opt.Wall()
	sinceCycle := wall.Sub(w.lastCycle)
	if sinceCycle >= w.cycleGap() && (w.wantCycle || sinceCycle >= w.opt.Tick && w.anyPending()) {
		w.wantCycle = false
		w.lastCycle = wall
		began := time.Now()
		w.cycle()
		w.cycleTook = time.Since(began)
	}
	if wall.Sub(w.lastSaved) >= time.Second {
		// Storing the clock now and then keeps a restart close to where
		// cluster time stopped even when nothing else happens.
		w.lastSaved = wall
		c := w.now
		w.batch.Clock = &c
	}
	return w.flush()
}

// cycleGap is the least wall time between cycles: MinCycleGap, or nine
// times what the last cycle took when that is more. A cycle looks at every
// pending job and holds a core while it does; with a long queue this keeps
// the scheduler to a tenth of the CPU, which the API and the store's
// writer need too.
func (w *World) cycleGap() time.Duration {
	return max(w.opt.MinCycleGap, 9*w.cycleTook)
}

// nextWake is the wall time until the loop has something to do.
func (w *World) nextWake() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	next := w.opt.Tick
	if len(w.timers) > 0 {
		next = min(next, w.clk.wallUntil(w.timers[0].at))
	}
	if w.wantCycle {
		next = min(next, w.cycleGap()-w.opt.Wall().Sub(w.lastCycle))
	}
	return max(next, time.Millisecond)
}

// flush hands the batch to the store; called with the lock held, so that
// batches reach the store in the order the world made them.
func (w *World) flush() <-chan error {
	for _, j := range w.dirty {
		j.dirty = false
		w.batch.Jobs = append(w.batch.Jobs, j.update())
	}
	w.dirty = w.dirty[:0]
	if w.batch.Empty() {
		return nil
	}
	b := w.batch
	w.batch = store.Batch{}
	return w.store.Enqueue(w.store.ApplyFunc(&b))
}

// update is the job's row as it is now.
func (j *job) update() store.JobUpdate {
	// Copies: the store encodes them later, on its writer's goroutine,
	// while the world goes on changing the job. (Assignments themselves
	// are never changed once placed.)
	rt := j.rec.Runtime
	rt.Placed = append([]*cluster.Assignment(nil), j.Placed...)
	rt.ReadyAt = append([]time.Duration(nil), rt.ReadyAt...)
	return store.JobUpdate{
		ID: j.rec.ID, Class: j.Spec.Class.String(), State: j.rec.State, Reason: j.rec.Reason,
		StartedAt: j.rec.StartedAt, FinishedAt: j.rec.FinishedAt, Attempts: j.rec.Attempts, Runtime: rt,
	}
}

// record moves a job to state with an event; event names the event when
// it is not the state itself ("requeued", "priority").
func (w *World) record(j *job, state, event, reason string) {
	j.rec.State, j.rec.Reason = state, reason
	if event == "" {
		event = state
	}
	w.batch.Events = append(w.batch.Events, store.Event{Job: j.rec.ID, At: w.now, State: event, Reason: reason})
	w.markDirty(j)
}

func (w *World) markDirty(j *job) {
	if !j.dirty {
		j.dirty = true
		w.dirty = append(w.dirty, j)
	}
}

func (w *World) anyPending() bool {
	for _, j := range w.active {
		if !j.done && j.Phase == sched.Pending {
			return true
		}
	}
	return false
}
