package standalone

import (
	"context"
	"fmt"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine/sched"
)

// recover takes up the store's unfinished jobs: queued ones stay queued;
// those holding resources are put back where they were, with their
// ledger holds still open, their clocks and timers where they stood. A
// job that no longer fits where it was (the cluster file changed) has its
// holds closed and is requeued.
func (w *World) recover(ctx context.Context) error {
	recs, err := w.store.ActiveJobs(ctx)
	if err != nil {
		return err
	}
	w.mu.Lock()
	for _, rec := range recs {
		j, err := newJob(rec)
		if err != nil {
			w.mu.Unlock()
			return err
		}
		w.jobs[rec.ID] = j
		w.active = append(w.active, j)
		j.Phase = sched.Pending
		if rec.State != api.StateQueued {
			w.replace(j)
		}
	}
	w.wantCycle = true
	done := w.flush()
	w.mu.Unlock()
	if done == nil {
		return nil
	}
	return w.store.Wait(ctx, done)
}

// replace puts a job back on the cluster where the store says it was.
func (w *World) replace(j *job) {
	rt := &j.rec.Runtime
	for i, a := range rt.Placed {
		if a == nil {
			continue
		}
		if err := w.readopt(a); err != nil {
			w.requeueLost(j, err)
			return
		}
		j.Placed[i] = a
	}
	if !j.Complete() {
		return // replicas, some still waiting: the job stays pending
	}
	if j.rec.State == api.StatePreempted {
		j.Phase = sched.Terminating
		w.after(max(rt.Grace, w.now), timer{kind: tGrace, job: j, epoch: rt.Epoch})
		return
	}
	j.Phase = sched.Running
	j.Started, j.Checkpoint = j.rec.StartedAt, j.rec.StartedAt
	if rt.RunSince >= 0 {
		w.setEnd(j)
		return
	}
	var ready = w.now
	for _, r := range rt.ReadyAt {
		ready = max(ready, r)
	}
	w.after(ready, timer{kind: tReady, job: j, epoch: rt.Epoch})
}

// readopt allocates a stored assignment again, switching each GPU's MIG
// mode to what its grant needs (a fresh cluster starts in the scenario's
// mode).
func (w *World) readopt(a *cluster.Assignment) error {
	n := w.st.NodeByName(a.Node)
	if n == nil {
		return fmt.Errorf("node %s is not in the cluster", a.Node)
	}
	for _, g := range a.Grants {
		if g.GPU < 0 || g.GPU >= len(n.GPUs) {
			return fmt.Errorf("node %s has no GPU %d", a.Node, g.GPU)
		}
		if want := g.Slice != nil; n.GPUs[g.GPU].MIG != want {
			if err := w.st.SetMIG(a.Node, g.GPU, want); err != nil {
				return err
			}
			n = w.st.NodeByName(a.Node)
		}
	}
	return w.st.Allocate(*a)
}

// requeueLost releases what a job got back, closes its holds and requeues
// it.
func (w *World) requeueLost(j *job, why error) {
	w.stop(j)
	j.Phase = sched.Pending
	j.rec.Runtime.QueuedAt = w.now
	w.record(j, api.StateQueued, "requeued", fmt.Sprintf("placement lost on restart: %v", why))
}
