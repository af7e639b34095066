package mixed

import (
	"fmt"
	"time"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/sim"
	"partita.dev/partita/internal/workload"
)

// cycle runs a full scheduling cycle and carries out its decision.
func (w *world) cycle() error { return w.cycleOf(nil) }

// cycleOf runs a cycle, limited to the jobs only when not nil.
func (w *world) cycleOf(only []string) error {
	in := sched.Input{Now: w.now(), Cluster: w.st, Teams: w.teams, Only: only, Incremental: !w.opt.fullInputs}
	if only == nil {
		in.Waiting, w.spare = w.spare, nil
	}
	for _, j := range w.changed {
		j.listed = false
		if !j.done { // gone since: listed in Gone only
			in.Changed = append(in.Changed, &j.Job)
		}
	}
	for _, j := range w.gone {
		in.Gone = append(in.Gone, &j.Job)
	}
	w.changed, w.gone = w.changed[:0], w.gone[:0]
	// The scheduler picks victims by the work they would lose: it must
	// see the last checkpoint, not the start (lostWork).
	w.checkpoints()
	// The list is rebuilt in the same array each cycle: the scheduler
	// keeps none of it (a new one per cycle was a tenth of what a week
	// allocates). Only the pointers are read, not the jobs.
	in.Jobs = w.input[:0]
	for _, j := range w.active {
		in.Jobs = append(in.Jobs, &j.Job)
	}
	w.input = in.Jobs
	d := w.sch.Cycle(in)
	if w.opt.Check {
		if err := w.sch.CheckKept(in); err != nil {
			return fmt.Errorf("the scheduler's sums kept from the changes listed: %w", err)
		}
	}
	// After the starts: a job started now is not waiting.
	if only == nil {
		defer w.metrics.waiting(w, d)
	} else {
		defer w.metrics.idle(w)
	}
	if w.opt.Trace != nil {
		for id, wt := range d.Waiting {
			j := w.byID[id]
			if (j.Spec.Class == workload.Production && w.now()-j.queuedAt > time.Minute || w.now()-j.queuedAt > 10*time.Minute) && j.lastReason != wt.Reason {
				j.lastReason = wt.Reason
				w.tracef("wait %s (%s) %.0fs: %s", id, j.Spec.Team, (w.now() - j.queuedAt).Seconds(), wt.Reason)
			}
		}
	}
	// Starts first: the scheduler cordons a GPU when it changes it, so no
	// start in this decision lands on a GPU changed after it, but a GPU
	// changed after a start on it keeps that start's instance.
	for _, s := range d.Starts {
		if err := w.start(s); err != nil {
			return err
		}
	}
	w.metrics.outgrown(w)
	// The reasons after the starts: a job started now was served after
	// the wait the last cycle gave it a reason for (metrics.served).
	if only == nil {
		w.spare, w.reasons = w.reasons, d.Waiting
		clear(w.recent)
	} else {
		for id, wt := range d.Waiting {
			w.recent[id] = wt.Reason
		}
	}
	for _, m := range d.Migrations {
		if err := w.migrate(m); err != nil {
			return err
		}
	}
	for _, rc := range d.Reconfigs {
		if err := w.reconfigure(rc); err != nil {
			return err
		}
	}
	for _, p := range d.Preemptions {
		w.preempt(p)
	}
	for _, r := range d.Retries {
		w.after(r.At-w.now(), timer{kind: tRetry, job: w.byID[r.Job]})
	}
	if w.opt.Check {
		return w.checkInvariants()
	}
	return nil
}

// checkInvariants is Options.Check.
func (w *world) checkInvariants() error {
	if err := w.st.Check(); err != nil {
		return fmt.Errorf("cluster invariant: %w", err)
	}
	if err := w.checkLists(); err != nil {
		return fmt.Errorf("the world's lists: %w", err)
	}
	cfg := w.sch.Config()
	// Every allocation in the cluster is a task's place, or a moved
	// task's old place not yet released: none leaks.
	owned := 0
	for _, j := range w.active {
		for _, a := range j.Placed {
			if a != nil {
				owned++
			}
		}
		owned += len(j.moved)
	}
	allocated := 0
	for i := 0; i < w.st.Len(); i++ {
		allocated += len(w.st.Node(i).Tasks())
	}
	if allocated != owned {
		return fmt.Errorf("%d allocations in the cluster, %d held by jobs", allocated, owned)
	}
	held := map[string]int64{}
	for _, j := range w.active {
		placed := 0
		for _, a := range j.Placed {
			if a != nil {
				placed++
				held[j.Spec.Team] += int64(jobShareOf(w, a) * 1000)
			}
		}
		if cfg.Gangs && j.Spec.IsGang() && placed > 0 && placed < len(j.Placed) {
			return fmt.Errorf("gang %s partly placed: %d of %d tasks", j.ID(), placed, len(j.Placed))
		}
	}
	for _, t := range w.teams {
		limit := t.Guarantee
		if cfg.Borrow {
			limit = max(t.Burst, t.Guarantee)
		}
		// A MIG slice counts its compute share in quotas and the larger of
		// compute and memory here; allow that rounding.
		if held[t.Name] > limit+limit/5+1000 {
			return fmt.Errorf("team %s holds %d milli, above its limit %d", t.Name, held[t.Name], limit)
		}
	}
	return nil
}

func jobShareOf(w *world, a *cluster.Assignment) float64 {
	n := w.st.NodeByName(a.Node)
	total := 0.0
	for _, g := range a.Grants {
		total += engine.GrantShare(n, g)
	}
	return total
}

func (w *world) reconfigure(rc sched.Reconfig) error {
	i, ok := w.st.Lookup(rc.Node)
	if !ok {
		return fmt.Errorf("reconfigure: unknown node %s", rc.Node)
	}
	g := &w.st.Node(i).GPUs[rc.GPU]
	before := g.Layout()
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
	if err != nil {
		return fmt.Errorf("reconfigure %s/%d: %w", rc.Node, rc.GPU, err)
	}
	w.metrics.reconfigs++
	if rc.Add {
		// New instances in free space: the GPU keeps working; a task
		// placed on one of them waits until it is ready.
		for _, p := range rc.Layout {
			k := instanceKey{rc.Node, rc.GPU, p}
			if _, old := w.ready[k]; !old && !before.Contains(p) {
				w.ready[k] = w.now() + w.opt.ReconfigDelay
			}
		}
		w.tracef("add instances %s/gpu%d layout=%s for %s", rc.Node, rc.GPU, rc.Layout, rc.For)
		return nil
	}
	if err := w.st.Cordon(rc.Node, rc.GPU, true); err != nil {
		return err
	}
	w.tracef("reconfig %s/gpu%d mig=%v layout=%s for %s", rc.Node, rc.GPU, rc.MIG, rc.Layout, rc.For)
	w.after(w.opt.ReconfigDelay, timer{kind: tReconfig, node: rc.Node, gpu: rc.GPU, forJob: rc.For})
	return nil
}

func (w *world) start(s sched.Start) error {
	j := w.byID[s.Job]
	if j == nil || j.Phase != sched.Pending {
		return fmt.Errorf("start %s: not pending", s.Job)
	}
	if err := w.st.Allocate(s.Assignment); err != nil {
		return fmt.Errorf("start %s task %d: %w", s.Job, s.Task, err)
	}
	a := s.Assignment
	j.Placed[s.Task] = &a
	w.touch(j)
	j.readyAt[s.Task] = w.now()
	if s.Creates {
		// The instance must be created first.
		j.readyAt[s.Task] = w.now() + w.opt.ReconfigDelay
		w.metrics.reconfigs++
		w.after(w.opt.ReconfigDelay, timer{kind: tReady, job: j})
	}
	for _, g := range a.Grants {
		if g.Slice == nil {
			continue
		}
		if at, ok := w.ready[instanceKey{a.Node, g.GPU, *g.Slice}]; ok && at > j.readyAt[s.Task] {
			// Placed on an instance still being created (warm pool).
			j.readyAt[s.Task] = at
			w.after(at-w.now(), timer{kind: tReady, job: j})
		}
	}
	w.metrics.placed(w, j, s)
	w.tracef("start %s task %d (%s/%s) on %s %v creates=%v", s.Job, s.Task, j.Spec.Team, j.Spec.Class, a.Node, grantsString(a), s.Creates)
	if j.Complete() {
		w.metrics.served(w, j)
		j.Phase = sched.Running
		w.notPending(j)
		j.Started = w.now()
		j.Checkpoint = w.now()
		w.maybeRun(j)
	}
	return nil
}

// maybeRun starts the clock of a job whose tasks are all placed and ready.
func (w *world) maybeRun(j *job) {
	if j.Phase != sched.Running || j.runSince >= 0 {
		return
	}
	for _, r := range j.readyAt {
		if r > w.now() {
			return
		}
	}
	j.runSince = w.now()
	w.startCheckpoints(j)
	j.waits = append(j.waits, w.now()-j.queuedAt) // queued until it runs, instance creation included
	if j.within {
		j.waitsWithin = append(j.waitsWithin, w.now()-j.queuedAt)
	}
	w.tracef("run %s (%s/%s) after %.0fs, last reason %q, within guarantee %v", j.ID(), j.Spec.Team, j.Spec.Class, (w.now() - j.queuedAt).Seconds(), j.lastReason, j.within)
	w.metrics.running(w, j)
	if !j.started {
		j.started = true
		j.firstRun = w.now()
	}
	_ = w.q.Push(sim.Event{At: w.now() + j.remaining, Kind: evDeparture, Ref: j.idx*1024 + j.epoch%1024})
}

// depart ends a job that ran its course (ignoring stale departures).
func (w *world) depart(ref int) error {
	j := w.jobs[ref/1024]
	if j.done || j.runSince < 0 || j.epoch%1024 != ref%1024 || j.Phase == sched.Pending {
		return nil
	}
	w.metrics.progress(w, j)
	if err := w.releaseAll(j); err != nil {
		return err
	}
	j.done = true
	j.finish = w.now()
	w.metrics.finished(w, j)
	w.removeActive(j)
	w.wantCycle()
	return nil
}

func (w *world) releaseAll(j *job) error {
	for len(j.moved) > 0 {
		if err := w.releaseOld(j, j.moved[0].Node, j.moved[0].Task); err != nil {
			return err
		}
	}
	for i, a := range j.Placed {
		if a == nil {
			continue
		}
		if _, err := w.st.Release(a.Node, a.Task); err != nil {
			return fmt.Errorf("release %s: %w", a.Task, err)
		}
		j.Placed[i] = nil
		w.touch(j)
	}
	w.metrics.released(j, w.now())
	j.heldShare = 0
	w.heldChanged(j)
	return nil
}

// migrate moves a task of a running service, make before break: the new
// place is held at once, the old one until the new one is ready (its
// instance created, when it had to be). The job runs on throughout.
func (w *world) migrate(m sched.Migration) error {
	j := w.byID[m.Job]
	if j == nil || j.Phase != sched.Running || m.Task < 0 || m.Task >= len(j.Placed) || j.Placed[m.Task] == nil {
		return fmt.Errorf("migrate %s task %d: not running", m.Job, m.Task)
	}
	if err := w.st.Allocate(m.To); err != nil {
		return fmt.Errorf("migrate %s task %d: %w", m.Job, m.Task, err)
	}
	w.metrics.advance(w.now())
	old := *j.Placed[m.Task]
	t := j.Spec.Tasks[m.Task]
	to := m.To
	j.Placed[m.Task] = &to
	w.touch(j)
	oldNode, newNode := w.st.NodeByName(old.Node), w.st.NodeByName(to.Node)
	if j.runSince >= 0 {
		w.metrics.usefulNow += engine.Need(newNode, to, t) - engine.Need(oldNode, old, t)
	}
	for _, g := range to.Grants {
		w.metrics.allocNow += engine.GrantShare(newNode, g)
	}
	if oom(newNode, to, t) {
		w.metrics.oom++
	}
	j.moved = append(j.moved, old)
	w.metrics.migrations++
	ready := w.now()
	if m.Creates {
		ready += w.opt.ReconfigDelay
		w.metrics.reconfigs++
	}
	for _, g := range to.Grants {
		if g.Slice == nil {
			continue
		}
		if at, ok := w.ready[instanceKey{to.Node, g.GPU, *g.Slice}]; ok && at > ready {
			ready = at
		}
	}
	w.tracef("move %s task %d (%s/%s) from %s to %s %v creates=%v for %s", m.Job, m.Task, j.Spec.Team, j.Spec.Class, old.Node, to.Node, grantsString(to), m.Creates, m.For)
	w.after(ready-w.now(), timer{kind: tMoved, job: j, node: old.Node, task: old.Task, forJob: m.For})
	return nil
}

// releaseOld releases a moved task's old place, if the job still holds it.
func (w *world) releaseOld(j *job, node, task string) error {
	for i, a := range j.moved {
		if a.Node != node || a.Task != task {
			continue
		}
		w.metrics.advance(w.now())
		n := w.st.NodeByName(node)
		for _, g := range a.Grants {
			w.metrics.allocNow -= engine.GrantShare(n, g)
		}
		if _, err := w.st.Release(node, task); err != nil {
			return fmt.Errorf("release %s's old place: %w", task, err)
		}
		j.moved = append(j.moved[:i], j.moved[i+1:]...)
		return nil
	}
	return nil
}

// preempt starts a victim's grace period: it keeps its resources (and
// keeps running, to checkpoint and exit) until the grace ends.
func (w *world) preempt(p sched.Preemption) {
	j := w.byID[p.Job]
	if j == nil || j.Phase != sched.Running {
		return
	}
	j.Phase = sched.Terminating
	w.touch(j)
	w.metrics.preemptions++
	w.tracef("preempt %s (%s/%s): %s", j.ID(), j.Spec.Team, j.Spec.Class, p.Reason)
	w.after(p.Grace, timer{kind: tGrace, job: j, epoch: j.epoch, forJob: p.For})
}

// graceOver releases a preempted job, charges the lost work, and puts it
// back in its queue; back is false for a stale timer, which does nothing.
// The caller asks the cycle that comes next (the grace timer).
func (w *world) graceOver(j *job, epoch int) (back bool, err error) {
	if j.done || j.epoch != epoch || j.Phase != sched.Terminating {
		return false, nil
	}
	w.metrics.progress(w, j)
	if j.runSince >= 0 {
		ran := w.now() - j.runSince
		lost := lostWork(j, ran)
		j.remaining = j.remaining - ran + lost
		if j.remaining < time.Second {
			j.remaining = time.Second
		}
		w.metrics.lost(w, j, lost)
	}
	if err := w.releaseAll(j); err != nil {
		return false, err
	}
	j.epoch++
	j.runSince = -1
	w.stopCheckpoints(j)
	j.Phase = sched.Pending
	w.backToPending(j)
	w.touch(j)
	j.queuedAt = w.now()
	j.within = w.withinGuarantee(j)
	return true, nil
}

// lostWork is the work a preempted job loses: what it did since its last
// checkpoint. A production service is stateless (it loses nothing but
// availability); other work without checkpoints loses the whole run.
func lostWork(j *job, ran time.Duration) time.Duration {
	every := j.arrival.CheckpointEvery
	switch {
	case every > 0:
		return ran % every
	case j.Spec.Class == workload.Production:
		return 0
	}
	return ran
}

func grantsString(a cluster.Assignment) string {
	out := ""
	for _, g := range a.Grants {
		if g.Slice != nil {
			out += fmt.Sprintf("gpu%d:%s ", g.GPU, g.Slice)
		} else {
			out += fmt.Sprintf("gpu%d:%d ", g.GPU, g.Milli)
		}
	}
	return out
}

// instanceKey names a MIG instance of the world's cluster.
type instanceKey struct {
	node  string
	gpu   int
	place gpu.Placement
}
