package sched

import (
	"sort"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/workload"
)

// Dynamic MIG. When a job does not fit because the GPUs are split the
// wrong way, re-partition one:
//   - a MIG task with no slice: on a MIG GPU, replace the free instances
//     by the profile needed (busy instances stay); else turn MIG on on an
//     idle GPU, on a node that already runs MIG work if there is one, so
//     whole nodes stay whole for training;
//   - a whole-GPU task: turn MIG off on idle MIG GPUs of the node where
//     that makes the task fit.
//
// A GPU changes at most once per ReconfigCooldown, so a shifting mix does
// not make it thrash. The world cordons a GPU while its change is applied.

// repartition returns WaitReconfig when it asked for a change that will
// let j run, "" otherwise.
func (s *Scheduler) repartition(c *cycle, j *Job, reqs []*engine.Request) string {
	if s.awaitingChange(c, j) {
		return WaitReconfig
	}
	asked := false
	for _, r := range reqs {
		switch r.Kind {
		case workload.WholeGPUs:
			asked = s.migOff(c, j, r) || asked
		case workload.MIGProfile, workload.MemoryProfile:
			asked = s.migFor(c, j, r) || asked
		}
	}
	if asked {
		return WaitReconfig
	}
	return ""
}

// awaitingChange reports whether a change asked for j is still being
// applied (its GPU is cordoned in the world's cluster).
func (s *Scheduler) awaitingChange(c *cycle, j *Job) bool {
	refs := s.awaiting[j.ID()]
	for _, ref := range refs {
		n := c.in.Cluster.NodeByName(ref.node)
		if n != nil && ref.index < len(n.GPUs) && n.GPUs[ref.index].Cordoned() {
			return true
		}
	}
	delete(s.awaiting, j.ID())
	return false
}

func (s *Scheduler) cooled(c *cycle, node string, index int) bool {
	last, ok := s.lastChange[gpuRef{node, index}]
	return !ok || c.in.Now-last >= s.cfg.ReconfigCooldown
}

// profileFor returns the MIG profile r takes on GPUs of model m, or nil.
func profileFor(r *engine.Request, m *gpu.Model) *gpu.Profile {
	if !m.MIG || !r.AllowsModel(m) {
		return nil
	}
	switch r.Kind {
	case workload.MIGProfile:
		p, err := m.Profile(r.Profile)
		if err != nil {
			return nil
		}
		return p
	case workload.MemoryProfile:
		p, _ := r.Resolve(m)
		return p
	}
	return nil
}

type migOption struct {
	node   string
	index  int
	layout gpu.Layout
	turnOn bool
	rank   [3]int // lower is better
}

// migFor finds a GPU to re-partition for a MIG task.
func (s *Scheduler) migFor(c *cycle, j *Job, r *engine.Request) bool {
	var opts []migOption
	for i := 0; i < c.st.Len(); i++ {
		n := c.st.Node(i)
		if r.CPUMilli > n.CPUFree() || r.MemMiB > n.MemFree() {
			continue
		}
		migBusy := nodeRunsMIG(n)
		for k := range n.GPUs {
			g := &n.GPUs[k]
			p := profileFor(r, g.Model)
			if p == nil || g.Cordoned() || !s.cooled(c, n.Name, k) {
				continue
			}
			if o, ok := regionFor(n, g, p, migBusy); ok {
				opts = append(opts, o)
			}
		}
	}
	if len(opts) == 0 {
		return false
	}
	sort.SliceStable(opts, func(a, b int) bool {
		for x := range opts[a].rank {
			if opts[a].rank[x] != opts[b].rank[x] {
				return opts[a].rank[x] < opts[b].rank[x]
			}
		}
		return false
	})
	o := opts[0]
	return s.apply(c, j, Reconfig{Node: o.node, GPU: o.index, MIG: true, Layout: o.layout, For: j.ID()}, o.turnOn)
}

// regionFor plans one GPU: keep busy instances, drop free ones, add p.
// Preference: a GPU already split (fewer instances to drop), on a node
// running MIG work, then an idle GPU turned to MIG on such a node, then
// anywhere.
func regionFor(n *cluster.Node, g *cluster.GPU, p *gpu.Profile, nodeRunsMIG bool) (migOption, bool) {
	var busy gpu.Layout
	dropped := 0
	if g.MIG {
		for _, sl := range g.Slices() {
			if sl.Task != "" {
				busy = append(busy, sl.Placement)
			} else {
				dropped++
			}
		}
	} else if !g.Idle() {
		return migOption{}, false
	}
	places, err := g.Model.FreePlacements(busy, p.Name)
	if err != nil || len(places) == 0 {
		return migOption{}, false
	}
	// The last allowed start keeps the low slices, where the big profiles
	// (4g@0, 7g@0) must start, free longest.
	layout := append(append(gpu.Layout(nil), busy...), places[len(places)-1])
	o := migOption{node: n.Name, index: g.Index, layout: layout, turnOn: !g.MIG}
	notOnMIGNode := 1
	if nodeRunsMIG {
		notOnMIGNode = 0
	}
	turning := 0
	if !g.MIG {
		turning = 1
	}
	o.rank = [3]int{notOnMIGNode, turning, dropped - len(busy)}
	return o, true
}

func nodeRunsMIG(n *cluster.Node) bool {
	for k := range n.GPUs {
		if n.GPUs[k].MIG {
			return true
		}
	}
	return false
}

// migOff turns MIG off on idle MIG GPUs of the node where that makes a
// whole-GPU task fit, taking as few GPUs as it can.
func (s *Scheduler) migOff(c *cycle, j *Job, r *engine.Request) bool {
	best, bestConvert := -1, 0
	for i := 0; i < c.st.Len(); i++ {
		n := c.st.Node(i)
		if r.CPUMilli > n.CPUFree() || r.MemMiB > n.MemFree() {
			continue
		}
		free, idle := 0, 0
		for k := range n.GPUs {
			g := &n.GPUs[k]
			if !r.AllowsModel(g.Model) || g.Cordoned() {
				continue
			}
			switch {
			case !g.MIG && g.Used() == 0:
				free++
			case g.MIG && g.Idle() && s.cooled(c, n.Name, k):
				idle++
			}
		}
		need := r.Count - free
		if need <= 0 || idle < need {
			continue
		}
		if best < 0 || need < bestConvert {
			best, bestConvert = i, need
		}
	}
	if best < 0 {
		return false
	}
	n := c.st.Node(best)
	done := 0
	for k := range n.GPUs {
		g := &n.GPUs[k]
		if done == bestConvert {
			break
		}
		if g.MIG && g.Idle() && !g.Cordoned() && r.AllowsModel(g.Model) && s.cooled(c, n.Name, k) {
			if s.apply(c, j, Reconfig{Node: n.Name, GPU: k, MIG: false, For: j.ID()}, false) {
				done++
			}
		}
	}
	return done > 0
}

// apply records a change, applies it to the plan and cordons the GPU so
// nothing else is placed there this cycle.
func (s *Scheduler) apply(c *cycle, j *Job, rc Reconfig, turnOn bool) bool {
	var err error
	switch {
	case !rc.MIG:
		err = c.st.SetMIG(rc.Node, rc.GPU, false)
	case turnOn:
		if err = c.st.SetMIG(rc.Node, rc.GPU, true); err == nil {
			err = c.st.SetLayout(rc.Node, rc.GPU, rc.Layout)
		}
	default:
		err = c.st.SetLayout(rc.Node, rc.GPU, rc.Layout)
	}
	if err != nil {
		return false
	}
	if err := c.st.Cordon(rc.Node, rc.GPU, true); err != nil {
		return false
	}
	s.lastChange[gpuRef{rc.Node, rc.GPU}] = c.in.Now
	s.awaiting[j.ID()] = append(s.awaiting[j.ID()], gpuRef{rc.Node, rc.GPU})
	c.d.Reconfigs = append(c.d.Reconfigs, rc)
	return true
}
