package standalone

import (
	"partita.dev/partita/internal/engine"
	"sort"
	"time"

	"partita.dev/partita/internal/api"
	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/store"
)

// Clock is the cluster clock now.
func (w *World) Clock() api.Clock {
	return api.Clock{Now: w.Time(w.Now()), Speed: w.opt.Speed}
}

// Record returns a copy of an unfinished job's record as the world has it.
func (w *World) Record(id string) (*store.Job, bool) {
	w.lock()
	defer w.mu.Unlock()
	j := w.jobs[id]
	if j == nil {
		return nil, false
	}
	rec := *j.rec
	rec.Runtime.Placed = append([]*cluster.Assignment(nil), j.Placed...)
	rec.Runtime.ReadyAt = append([]time.Duration(nil), rec.Runtime.ReadyAt...)
	return &rec, true
}

// WaitReason is why a queued job waits, as the last cycle said ("" when
// the world does not have it or no cycle has seen it yet).
func (w *World) WaitReason(id string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waits[id].Reason
}

// Job returns a copy of an unfinished job's record as the world has it
// (ahead of the store by at most one commit) and, while it waits, its
// queue slot.
func (w *World) Job(id string) (*store.Job, *api.QueueSlot, bool) {
	rec, ok := w.Record(id)
	if !ok {
		return nil, nil, false
	}
	w.mu.Lock()
	j := w.jobs[id]
	pending := j != nil && j.Phase == sched.Pending
	w.mu.Unlock()
	if !pending {
		return rec, nil, true
	}
	starts := w.estimateStarts()
	w.mu.Lock()
	defer w.mu.Unlock()
	slot := w.slot(j, w.teamWaiting(j.rec.Team), starts)
	return rec, &slot, true
}

// teamWaiting counts a team's jobs the last cycle left waiting.
func (w *World) teamWaiting(team string) int {
	n := 0
	for id := range w.waits {
		if j := w.jobs[id]; j != nil && j.rec.Team == team {
			n++
		}
	}
	return n
}

// slot is a pending job's place; one submitted since the last cycle
// comes after those the cycle saw.
func (w *World) slot(j *job, waiting int, starts map[string]time.Duration) api.QueueSlot {
	s := api.QueueSlot{Position: waiting + 1, Reason: "submitted; waiting for the next scheduling cycle"}
	if wt, ok := w.waits[j.rec.ID]; ok {
		s.Position, s.Reason = wt.Position, wt.Reason
	}
	if at, ok := starts[j.rec.ID]; ok {
		t := w.Time(at)
		secs := max(at-w.now, 0).Seconds() / w.opt.Speed
		s.EstimatedStart, s.WaitSeconds = &t, &secs
	}
	return s
}

// Queue lists the queued jobs of one team (every team when team is
// empty), in each team's queue order.
func (w *World) Queue(team string) api.Queue {
	starts := w.estimateStarts()
	w.lock()
	defer w.mu.Unlock()
	q := api.Queue{Clock: api.Clock{Now: w.Time(w.now), Speed: w.opt.Speed}, Teams: []api.TeamQueue{}}
	byTeam := map[string][]api.QueueEntry{}
	waiting := map[string]int{}
	for id := range w.waits {
		if j := w.jobs[id]; j != nil {
			waiting[j.rec.Team]++
		}
	}
	for _, j := range w.active {
		if j.done || j.Phase != sched.Pending || team != "" && j.rec.Team != team {
			continue
		}
		e := api.QueueEntry{
			Job: j.rec.ID, Name: j.rec.Name, Project: j.rec.Project, Class: j.rec.Class,
			GPUs: float64(j.Spec.GPUMilli()) / 1000, SubmittedAt: w.Time(j.rec.SubmittedAt),
			QueueSlot: w.slot(j, waiting[j.rec.Team], starts),
		}
		byTeam[j.rec.Team] = append(byTeam[j.rec.Team], e)
	}
	for t, es := range byTeam {
		sort.SliceStable(es, func(a, b int) bool { return es[a].Position < es[b].Position })
		q.Teams = append(q.Teams, api.TeamQueue{Team: t, Jobs: es})
	}
	sort.Slice(q.Teams, func(a, b int) bool { return q.Teams[a].Team < q.Teams[b].Team })
	return q
}

// Cluster describes every node. For a caller of team (every team when
// empty) the tasks of other teams show as busy, without their jobs.
func (w *World) Cluster(team string) api.Cluster {
	w.lock()
	defer w.mu.Unlock()
	owner := map[string]*job{} // task name -> job
	for _, j := range w.active {
		for _, a := range j.Placed {
			if a != nil && !j.done {
				owner[a.Task] = j
			}
		}
	}
	who := func(task string) (string, string) {
		j := owner[task]
		if j == nil || team != "" && j.rec.Team != team {
			return "", ""
		}
		return j.rec.ID, j.rec.Team
	}
	c := api.Cluster{Clock: api.Clock{Now: w.Time(w.now), Speed: w.opt.Speed}, Utilization: w.utilization()}
	for i := 0; i < w.st.Len(); i++ {
		n := w.st.Node(i)
		c.GPUs += len(n.GPUs)
		c.Nodes = append(c.Nodes, nodeView(n, who))
	}
	return c
}

func nodeView(n *cluster.Node, who func(task string) (string, string)) api.Node {
	v := api.Node{Name: n.Name, Tier: string(n.Tier), Leaf: n.Topology.Leaf, CPUMilli: n.CPUMilli, CPUUsed: n.CPUUsed(), MemoryMiB: n.MemoryMiB, MemUsed: n.MemUsed()}
	for k := range n.GPUs {
		g := &n.GPUs[k]
		gv := api.GPU{Index: g.Index, Model: g.Model.Name, MIG: g.MIG, Cordoned: g.Cordoned(), Used: g.Used()}
		for _, s := range g.Slices() {
			sv := api.Slice{Slice: s.Placement.String(), Busy: s.Task != ""}
			if s.Task != "" {
				sv.Job, sv.Team = who(s.Task)
			}
			gv.Slices = append(gv.Slices, sv)
		}
		for _, h := range g.Holders() {
			hv := api.Hold{Milli: h.Milli}
			hv.Job, hv.Team = who(h.Task)
			gv.Holders = append(gv.Holders, hv)
		}
		v.GPUs = append(v.GPUs, gv)
	}
	return v
}

// Stats is what the metrics gauges show.
type Stats struct {
	GPUs        int
	Utilization api.Utilization
	Queued      map[[2]string]int  // by team and class
	Held        map[string]float64 // GPUs held per team (a slice counts its compute share)
}

// Stats reads the gauges' values.
func (w *World) Stats() Stats {
	w.lock()
	defer w.mu.Unlock()
	s := Stats{Utilization: w.utilization(), Queued: map[[2]string]int{}, Held: map[string]float64{}}
	for i := 0; i < w.st.Len(); i++ {
		s.GPUs += len(w.st.Node(i).GPUs)
	}
	for _, t := range w.teams {
		s.Held[t.Name] = 0
	}
	for _, j := range w.active {
		if j.done {
			continue
		}
		if j.Phase == sched.Pending {
			s.Queued[[2]string{j.rec.Team, j.rec.Class}]++
		}
		s.Held[j.rec.Team] += float64(j.Held(w.st)) / 1000
	}
	return s
}

// utilization is what tasks hold and what running tasks need. Called
// with the lock held.
func (w *World) utilization() api.Utilization {
	var u api.Utilization
	gpus := 0
	for i := 0; i < w.st.Len(); i++ {
		n := w.st.Node(i)
		gpus += len(n.GPUs)
		for k := range n.GPUs {
			u.AllocatedGPUs += heldShare(&n.GPUs[k])
		}
	}
	for _, j := range w.active {
		switch {
		case j.done:
		case j.Phase == sched.Pending:
			u.QueuedJobs++
		case j.rec.Runtime.RunSince >= 0:
			u.RunningJobs++
			for i, a := range j.Placed {
				if a != nil {
					if n := w.st.NodeByName(a.Node); n != nil {
						u.UsefulGPUs += engine.Need(n, *a, j.Spec.Tasks[i])
					}
				}
			}
		}
	}
	if gpus > 0 {
		u.Allocated, u.Useful = u.AllocatedGPUs/float64(gpus), u.UsefulGPUs/float64(gpus)
	}
	return u
}

// heldShare is the part of a GPU in use: a MIG instance counts the larger
// of its compute (of 7) and memory (of 8) slices, since either may be
// what stops another from fitting.
func heldShare(g *cluster.GPU) float64 {
	if !g.MIG {
		return float64(g.Used()) / 1000
	}
	total := 0.0
	for _, s := range g.Slices() {
		if s.Task == "" {
			continue
		}
		if p, err := g.Model.Profile(s.Profile); err == nil {
			total += max(p.ComputeShare(), float64(p.Memory)/gpu.MemorySlices)
		}
	}
	return total
}
