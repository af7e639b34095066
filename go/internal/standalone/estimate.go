package standalone

import (
	"sort"
	"sync"
	"time"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/random"
)

// Estimated starts come from a projection: a fresh scheduler of the same
// configuration runs cycles on a copy of the cluster, assuming running
// jobs end when declared, preempted ones leave after their grace and come
// back, and nothing new arrives. It is recomputed at most once per
// estimateTTL of wall time, outside the world's lock.
const (
	estimateTTL      = time.Second
	projectionSteps  = 400  // cycles the projection runs at most
	projectionQueued = 2000 // queued jobs it takes, oldest first
)

type estimates struct {
	mu     sync.Mutex // one projection at a time
	cfg    sched.Config
	seed   int64
	at     time.Time // wall time of the last projection
	starts map[string]time.Duration
}

// pjob is a job in the projection.
type pjob struct {
	sched.Job
	remaining time.Duration // -1: runs until cancelled
	endAt     time.Duration // -1: not running
	requeue   bool          // preempted: comes back after endAt
}

// estimateStarts returns the projected start of queued jobs (cluster
// time), computing it when the last is older than estimateTTL.
func (w *World) estimateStarts() map[string]time.Duration {
	w.est.mu.Lock()
	defer w.est.mu.Unlock()
	if w.est.starts != nil && w.opt.Wall().Sub(w.est.at) < estimateTTL {
		return w.est.starts
	}
	w.lock()
	now, st, teams, jobs := w.now, w.st.Clone(), append([]sched.Team(nil), w.teams...), w.projectionJobs()
	w.mu.Unlock()
	s := sched.New(w.est.cfg, random.New(w.est.seed))
	w.est.starts = project(s, now, st, teams, jobs, w.opt.ReconfigDelay)
	w.est.at = w.opt.Wall()
	return w.est.starts
}

// projectionJobs copies the jobs the projection needs: every job holding
// resources and the oldest queued ones. Called with the lock held.
func (w *World) projectionJobs() []*pjob {
	var out []*pjob
	queued := 0
	for _, j := range w.active {
		if j.done {
			continue
		}
		if j.Phase == sched.Pending && !anyPlaced(j.Placed) && queued >= projectionQueued {
			continue
		}
		p := &pjob{Job: j.Job, remaining: -1, endAt: -1}
		p.Placed = append([]*cluster.Assignment(nil), j.Placed...)
		rt := j.rec.Runtime
		if j.rec.Spec.Duration > 0 {
			p.remaining = rt.Remaining
			if rt.RunSince >= 0 {
				p.remaining = max(rt.Remaining-(w.now-rt.RunSince), 0)
			}
		}
		switch j.Phase {
		case sched.Pending:
			queued++
		case sched.Running:
			if p.remaining >= 0 {
				p.endAt = w.now + p.remaining
			}
		case sched.Terminating:
			p.endAt, p.requeue = max(rt.Grace, w.now), true
		}
		out = append(out, p)
	}
	return out
}

// project runs the projection and returns when each queued job starts.
func project(s *sched.Scheduler, now time.Duration, st *cluster.State, teams []sched.Team, jobs []*pjob, delay time.Duration) map[string]time.Duration {
	starts := map[string]time.Duration{}
	byID := map[string]*pjob{}
	for _, j := range jobs {
		byID[j.ID()] = j
	}
	t := now
	for range projectionSteps {
		in := sched.Input{Now: t, Cluster: st, Teams: teams}
		for _, j := range jobs {
			in.Jobs = append(in.Jobs, &j.Job)
		}
		d := s.Cycle(in)
		applyProjected(st, byID, d, t, delay, starts)
		next := time.Duration(-1)
		for _, j := range jobs {
			if j.endAt >= 0 && (next < 0 || j.endAt < next) {
				next = j.endAt
			}
		}
		if next < 0 || len(d.Waiting) == 0 {
			break
		}
		t = max(next, t+time.Second)
		jobs = endProjected(st, jobs, t)
	}
	return starts
}

// applyProjected carries a decision out on the projection's copy:
// starts (a new MIG instance delays the start), MIG changes at once,
// preemptions ending after their grace.
func applyProjected(st *cluster.State, byID map[string]*pjob, d sched.Decision, t, delay time.Duration, starts map[string]time.Duration) {
	for _, s := range d.Starts {
		j := byID[s.Job]
		if j == nil || st.Allocate(s.Assignment) != nil {
			continue
		}
		a := s.Assignment
		j.Placed[s.Task] = &a
		if !j.Complete() {
			continue
		}
		j.Phase = sched.Running
		begin := t
		if s.Creates {
			begin += delay
		}
		if _, seen := starts[j.ID()]; !seen {
			starts[j.ID()] = begin
		}
		if j.remaining >= 0 {
			j.endAt = begin + j.remaining
		}
	}
	for _, rc := range d.Reconfigs {
		if !rc.MIG {
			_ = st.SetMIG(rc.Node, rc.GPU, false)
			continue
		}
		if n := st.NodeByName(rc.Node); n != nil && !n.GPUs[rc.GPU].MIG {
			_ = st.SetMIG(rc.Node, rc.GPU, true)
		}
		_ = st.SetLayout(rc.Node, rc.GPU, rc.Layout)
	}
	for _, p := range d.Preemptions {
		if j := byID[p.Job]; j != nil && j.Phase == sched.Running {
			j.Phase, j.endAt, j.requeue = sched.Terminating, t+p.Grace, true
		}
	}
}

// endProjected releases the jobs that end by t; preempted ones go back to
// the queue.
func endProjected(st *cluster.State, jobs []*pjob, t time.Duration) []*pjob {
	keep := jobs[:0]
	for _, j := range jobs {
		if j.endAt < 0 || j.endAt > t {
			keep = append(keep, j)
			continue
		}
		for i, a := range j.Placed {
			if a != nil {
				_, _ = st.Release(a.Node, a.Task)
				j.Placed[i] = nil
			}
		}
		if j.requeue {
			j.Phase, j.endAt, j.requeue = sched.Pending, -1, false
			keep = append(keep, j)
		}
	}
	sort.SliceStable(keep, func(a, b int) bool { return keep[a].Submitted < keep[b].Submitted })
	return keep
}

func anyPlaced(placed []*cluster.Assignment) bool {
	for _, a := range placed {
		if a != nil {
			return true
		}
	}
	return false
}
