package standalone

import (
	"context"
	"fmt"
	"time"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/store"
	"partita.dev/partita/internal/workload"
)

// Prepare stamps a new job's record before it is stored: submitted now
// (cluster time), queued, its clock not running.
func (w *World) Prepare(rec *store.Job) {
	now := w.Now()
	rec.State, rec.SubmittedAt = api.StateQueued, now
	rec.Runtime = store.Runtime{RunSince: -1, Remaining: rec.Spec.Duration, QueuedAt: now, ReadyAt: make([]time.Duration, len(rec.Spec.Tasks))}
}

// Add takes up a job the store has just accepted; the record becomes the
// world's, and the caller must not touch it again. It does not wait for
// the world's lock, which a cycle holds while it runs: the job goes to an
// inbox that every locked operation empties first.
func (w *World) Add(rec *store.Job) error {
	j, err := newJob(rec)
	if err != nil {
		return err
	}
	j.Phase = sched.Pending
	w.inboxMu.Lock()
	w.inbox = append(w.inbox, j)
	w.inboxMu.Unlock()
	w.poke()
	return nil
}

// lock takes the world's lock and takes up the jobs added since.
func (w *World) lock() {
	w.mu.Lock()
	w.inboxMu.Lock()
	in := w.inbox
	w.inbox = nil
	w.inboxMu.Unlock()
	for _, j := range in {
		id := j.rec.ID
		if w.tomb[id] {
			// Cancelled between its commit and now.
			delete(w.tomb, id)
			continue
		}
		if _, dup := w.jobs[id]; dup {
			w.opt.Log.Error("add: job already in the world", "job", id)
			continue
		}
		w.jobs[id] = j
		w.active = append(w.active, j)
		w.wantCycle = true
	}
}

// newJob builds the world's job from its record.
func newJob(rec *store.Job) (*job, error) {
	class, err := workload.ParseClass(rec.Class)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", rec.ID, err)
	}
	j := &job{rec: rec}
	j.Spec = workload.Job{ID: rec.ID, Team: rec.Team, Project: rec.Project, Class: class, Tasks: rec.Spec.Tasks, GangSize: rec.Spec.Gang}
	j.Submitted = rec.SubmittedAt
	j.Estimate = rec.Spec.Duration
	j.Placed = make([]*cluster.Assignment, len(rec.Spec.Tasks))
	if len(rec.Runtime.ReadyAt) != len(rec.Spec.Tasks) {
		rec.Runtime.ReadyAt = make([]time.Duration, len(rec.Spec.Tasks))
	}
	return j, nil
}

// Cancel cancels an unfinished job, releasing what it holds, and waits
// until that is stored. found is false when the world does not have the
// job (finished, or accepted by the store but not added yet: then a later
// Add ignores it, and the caller cancels it in the store).
func (w *World) Cancel(ctx context.Context, id, reason string) (found bool, err error) {
	w.lock()
	j := w.jobs[id]
	if j == nil {
		w.tomb[id] = true
		w.mu.Unlock()
		return false, nil
	}
	w.now = max(w.now, w.clk.now())
	w.stop(j)
	w.finish(j, api.StateCancelled, reason)
	done := w.flush()
	w.mu.Unlock()
	w.poke()
	return true, w.store.Wait(ctx, done)
}

// Forget drops a tombstone Cancel left for a job the store says is
// finished.
func (w *World) Forget(id string) {
	w.lock()
	defer w.mu.Unlock()
	delete(w.tomb, id)
}

// SetClass changes an unfinished job's priority class and waits until
// that is stored; found is false when the world does not have the job.
func (w *World) SetClass(ctx context.Context, id string, class workload.Class, by string) (found bool, err error) {
	w.lock()
	j := w.jobs[id]
	if j == nil {
		w.mu.Unlock()
		return false, nil
	}
	w.now = max(w.now, w.clk.now())
	old := j.Spec.Class
	j.Spec.Class, j.rec.Class = class, class.String()
	w.record(j, j.rec.State, "priority", fmt.Sprintf("class changed from %s to %s by %s", old, class, by))
	w.wantCycle = true
	done := w.flush()
	w.mu.Unlock()
	w.poke()
	return true, w.store.Wait(ctx, done)
}

// Requeue puts a job that holds resources back in its team's queue at
// once, as a preemption does after its grace period but without one: what
// it holds is released, its ledger holds close, and it loses the work
// since its last checkpoint. A queued job is left as it is. found is
// false when the world does not have the job.
func (w *World) Requeue(ctx context.Context, id, by string) (found bool, err error) {
	w.lock()
	j := w.jobs[id]
	if j == nil {
		w.mu.Unlock()
		return false, nil
	}
	if j.Phase == sched.Pending && j.rec.State == api.StateQueued {
		w.mu.Unlock()
		return true, nil
	}
	w.now = max(w.now, w.clk.now())
	rt := &j.rec.Runtime
	lost := time.Duration(0)
	if rt.RunSince >= 0 && j.rec.Spec.Duration > 0 {
		ran := w.now - rt.RunSince
		lost = lostWork(j, ran)
		rt.Remaining = max(rt.Remaining-ran+lost, time.Second)
	}
	w.stop(j)
	j.Phase = sched.Pending
	rt.QueuedAt, rt.Grace = w.now, 0
	reason := "requeued by " + by
	if lost > 0 {
		reason += fmt.Sprintf("; lost %s of work since its last checkpoint", lost.Round(time.Second))
	}
	w.record(j, api.StateQueued, "requeued", reason)
	done := w.flush()
	w.mu.Unlock()
	w.poke()
	return true, w.store.Wait(ctx, done)
}
