package standalone

import (
	"fmt"
	"strings"
	"time"

	"partita.dev/partita/internal/accounting"
	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/store"
	"partita.dev/partita/internal/workload"
)

// cycle runs the scheduler and carries out its decision, as the mixed
// simulator does: starts first (the scheduler cordons a GPU it changes,
// so no start lands on a GPU changed after it), then MIG changes, then
// preemptions.
func (w *World) cycle() {
	began := time.Now()
	w.compact()
	in := sched.Input{Now: w.now, Cluster: w.st, Teams: w.teams, Jobs: make([]*sched.Job, 0, len(w.active))}
	for _, j := range w.active {
		in.Jobs = append(in.Jobs, &j.Job)
	}
	d := w.sch.Cycle(in)
	var started []*job
	for _, s := range d.Starts {
		if j := w.start(s); j != nil && (len(started) == 0 || started[len(started)-1] != j) {
			started = append(started, j)
		}
	}
	for _, j := range started {
		w.admit(j)
	}
	for _, rc := range d.Reconfigs {
		w.reconfigure(rc)
	}
	for _, p := range d.Preemptions {
		w.preempt(p)
	}
	w.waits = d.Waiting
	for id, wt := range d.Waiting {
		// A job the cluster can never run (its shape changed under it
		// across a restart with another cluster file) fails rather than
		// waiting for ever.
		if j := w.jobs[id]; j != nil && strings.HasPrefix(wt.Reason, sched.WaitInvalidSpec) && !j.done {
			w.stop(j)
			w.finish(j, api.StateFailed, wt.Reason)
		}
	}
	w.opt.Observer.Cycle(time.Since(began), len(d.Waiting))
}

// compact drops finished jobs from active, in one pass.
func (w *World) compact() {
	keep := w.active[:0]
	for _, j := range w.active {
		if !j.done {
			keep = append(keep, j)
		}
	}
	clear(w.active[len(keep):])
	w.active = keep
}

// start allocates one task's resources and opens its ledger holds; it
// returns the job, or nil when the start could not be carried out.
func (w *World) start(s sched.Start) *job {
	j := w.jobs[s.Job]
	if j == nil || j.done || j.Phase != sched.Pending {
		w.opt.Log.Error("start: job is not pending", "job", s.Job)
		return nil
	}
	if err := w.st.Allocate(s.Assignment); err != nil {
		w.opt.Log.Error("start: allocate", "job", s.Job, "task", s.Task, "err", err)
		return nil
	}
	a := s.Assignment
	j.Placed[s.Task] = &a
	ready := w.now
	if s.Creates {
		// The MIG instance must be created first.
		ready += w.opt.ReconfigDelay
		w.after(ready, timer{kind: tReady, job: j, epoch: j.rec.Runtime.Epoch})
		w.opt.Observer.Reconfigured()
	}
	j.rec.Runtime.ReadyAt[s.Task] = ready
	w.begin(j, &a)
	w.markDirty(j)
	return j
}

// admit records a job's admission once the decision's starts for it are
// carried out, and starts its clock when it is complete and ready.
func (w *World) admit(j *job) {
	if j.rec.State == api.StateQueued {
		j.rec.Attempts++
		j.rec.StartedAt = w.now
		w.record(j, api.StateAdmitted, "", admittedReason(j))
	}
	if j.Complete() && j.Phase == sched.Pending {
		j.Phase = sched.Running
		j.Started, j.Checkpoint = w.now, w.now
		w.opt.Observer.Started(j.rec.Team, j.rec.Class, w.now-j.rec.Runtime.QueuedAt)
		w.maybeRun(j)
	}
}

func admittedReason(j *job) string {
	placed := 0
	for _, a := range j.Placed {
		if a != nil {
			placed++
		}
	}
	if placed < len(j.Placed) {
		return fmt.Sprintf("%d of %d tasks placed; the others wait for room", placed, len(j.Placed))
	}
	return fmt.Sprintf("all %d tasks placed", len(j.Placed))
}

// maybeRun starts the clock of a job whose tasks are all placed and ready.
func (w *World) maybeRun(j *job) {
	if j.Phase != sched.Running || j.rec.Runtime.RunSince >= 0 {
		return
	}
	for _, r := range j.rec.Runtime.ReadyAt {
		if r > w.now {
			return
		}
	}
	j.rec.Runtime.RunSince = w.now
	w.record(j, api.StateRunning, "", "on "+placementText(j))
	w.setEnd(j)
}

// setEnd sets the timer of a running job's end: its remaining run time,
// or its fail_after when that comes first; none for a job that runs until
// cancelled.
func (w *World) setEnd(j *job) {
	rt := &j.rec.Runtime
	var at time.Duration = -1
	if j.rec.Spec.Duration > 0 {
		at = rt.RunSince + rt.Remaining
	}
	if f := j.rec.Spec.FailAfter; f > 0 && (at < 0 || rt.RunSince+f < at) {
		at = rt.RunSince + f
	}
	if at >= 0 {
		w.after(max(at, w.now), timer{kind: tEnd, job: j, epoch: rt.Epoch})
	}
}

func placementText(j *job) string {
	var parts []string
	for _, a := range j.Placed {
		if a == nil {
			continue
		}
		var gs []string
		for _, g := range a.Grants {
			if g.Slice != nil {
				gs = append(gs, fmt.Sprintf("gpu%d %s", g.GPU, g.Slice))
			} else {
				gs = append(gs, fmt.Sprintf("gpu%d %dm", g.GPU, g.Milli))
			}
		}
		parts = append(parts, a.Node+" ["+strings.Join(gs, ", ")+"]")
	}
	if len(parts) > 4 {
		parts = append(parts[:4], fmt.Sprintf("and %d more", len(parts)-4))
	}
	return strings.Join(parts, ", ")
}

// fire handles one due timer at w.now.
func (w *World) fire(t *timer) {
	j := t.job
	if j != nil && (j.done || t.epoch != j.rec.Runtime.Epoch) {
		return // stale: the job stopped since
	}
	switch t.kind {
	case tEnd:
		w.end(j)
	case tGrace:
		w.graceOver(j)
	case tReady:
		w.maybeRun(j)
	case tUncordon:
		if err := w.st.Cordon(t.node, t.gpu, false); err != nil {
			w.opt.Log.Error("uncordon", "node", t.node, "gpu", t.gpu, "err", err)
		}
		w.wantCycle = true
	}
}

// end finishes a job whose run time is over.
func (w *World) end(j *job) {
	rt := &j.rec.Runtime
	if rt.RunSince < 0 || j.Phase == sched.Pending {
		return
	}
	ran := w.now - rt.RunSince
	state, reason := api.StateSucceeded, fmt.Sprintf("ran its %s", j.rec.Spec.Duration)
	if f := j.rec.Spec.FailAfter; f > 0 && ran >= f && (j.rec.Spec.Duration == 0 || ran < rt.Remaining) {
		state, reason = api.StateFailed, fmt.Sprintf("exited with an error after running %s (fail_after)", ran.Round(time.Second))
	}
	w.stop(j)
	w.finish(j, state, reason)
}

// stop releases everything a job holds, closing its ledger holds.
func (w *World) stop(j *job) {
	w.batch.Close = append(w.batch.Close, store.CloseHolds{Job: j.rec.ID, At: w.now})
	for i, a := range j.Placed {
		if a == nil {
			continue
		}
		if _, err := w.st.Release(a.Node, a.Task); err != nil {
			w.opt.Log.Error("release", "task", a.Task, "err", err)
		}
		j.Placed[i] = nil
	}
	rt := &j.rec.Runtime
	rt.Epoch++
	rt.RunSince = -1
	clear(rt.ReadyAt)
	w.wantCycle = true
}

// finish ends a job for good.
func (w *World) finish(j *job, state, reason string) {
	j.rec.FinishedAt = w.now
	w.record(j, state, "", reason)
	j.done = true
	delete(w.jobs, j.rec.ID)
	w.opt.Observer.Finished(j.rec.Team, j.rec.Class, state)
}

func (w *World) preempt(p sched.Preemption) {
	j := w.jobs[p.Job]
	if j == nil || j.done || j.Phase != sched.Running {
		return
	}
	j.Phase = sched.Terminating
	j.rec.Runtime.Grace = w.now + p.Grace
	reason := fmt.Sprintf("%s, for job %s; %s to checkpoint and exit", p.Reason, p.For, p.Grace)
	w.record(j, api.StatePreempted, "", reason)
	w.after(j.rec.Runtime.Grace, timer{kind: tGrace, job: j, epoch: j.rec.Runtime.Epoch})
	w.opt.Observer.Preempted(j.rec.Team, j.rec.Class)
}

// graceOver releases a preempted job, charges the work it lost, and puts
// it back in its queue.
func (w *World) graceOver(j *job) {
	if j.Phase != sched.Terminating {
		return
	}
	rt := &j.rec.Runtime
	lost := time.Duration(0)
	if rt.RunSince >= 0 && j.rec.Spec.Duration > 0 {
		ran := w.now - rt.RunSince
		lost = lostWork(j, ran)
		rt.Remaining = max(rt.Remaining-ran+lost, time.Second)
	}
	w.stop(j)
	j.Phase = sched.Pending
	rt.QueuedAt = w.now
	rt.Grace = 0
	reason := "requeued after preemption"
	if lost > 0 {
		reason += fmt.Sprintf("; lost %s of work since its last checkpoint", lost.Round(time.Second))
	}
	w.record(j, api.StateQueued, "requeued", reason)
}

// lostWork is what a preempted job loses: the work since its last
// checkpoint. A production service is stateless and loses nothing but
// availability; other work without checkpoints loses the whole run.
func lostWork(j *job, ran time.Duration) time.Duration {
	switch every := j.rec.Spec.CheckpointEvery; {
	case every > 0:
		return ran % every
	case j.Spec.Class == workload.Production:
		return 0
	}
	return ran
}

func (w *World) reconfigure(rc sched.Reconfig) {
	i, ok := w.st.Lookup(rc.Node)
	if !ok {
		w.opt.Log.Error("reconfigure: unknown node", "node", rc.Node)
		return
	}
	g := &w.st.Node(i).GPUs[rc.GPU]
	var err error
	switch {
	case !rc.MIG:
		err = w.st.SetMIG(rc.Node, rc.GPU, false)
	case !g.MIG:
		if err = w.st.SetMIG(rc.Node, rc.GPU, true); err == nil {
			err = w.st.SetLayout(rc.Node, rc.GPU, rc.Layout)
		}
	default:
		err = w.st.SetLayout(rc.Node, rc.GPU, rc.Layout)
	}
	if err == nil {
		err = w.st.Cordon(rc.Node, rc.GPU, true)
	}
	if err != nil {
		w.opt.Log.Error("reconfigure", "node", rc.Node, "gpu", rc.GPU, "err", err)
		return
	}
	w.opt.Observer.Reconfigured()
	w.after(w.now+w.opt.ReconfigDelay, timer{kind: tUncordon, node: rc.Node, gpu: rc.GPU})
}

// begin appends a ledger begin per GPU grant of a task's assignment. The
// hold names the task, the job's epoch, the node and the GPU: unique. Its
// end is written by the batch's Close, a copy of the begin.
func (w *World) begin(j *job, a *cluster.Assignment) {
	n := w.st.NodeByName(a.Node)
	if n == nil {
		return
	}
	for _, g := range a.Grants {
		share := accounting.GrantShare(n, g)
		if share <= 0 {
			continue
		}
		slice := ""
		if g.Slice != nil {
			slice = g.Slice.String()
		}
		w.batch.Ledger = append(w.batch.Ledger, store.LedgerEntry{
			Hold: fmt.Sprintf("%s/%d/%s/%d", a.Task, j.rec.Runtime.Epoch, a.Node, g.GPU), Kind: store.Begin, At: w.now,
			Job: j.rec.ID, Task: a.Task, Team: j.rec.Team, Project: j.rec.Project, User: j.rec.User, Class: j.rec.Class,
			Node: a.Node, GPU: g.GPU, Model: n.GPUs[g.GPU].Model.Name, Tier: string(n.Tier), Slice: slice, Share: share,
		})
	}
}
