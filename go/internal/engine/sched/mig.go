package sched

import (
	"sort"
	"time"

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
// let j run, "" otherwise. It changes GPUs only where j may be placed
// (outside another gang's reservation), and backs off a job whose last
// change did not let it start, so it cannot churn GPUs forever, unless
// the job holds nodes its victims left.
func (s *Scheduler) repartition(c *cycle, j *Job, reqs []*engine.Request) string {
	if s.awaitingChange(c, j) {
		return WaitReconfig
	}
	if until, ok := s.backoff[j.ID()]; ok && c.in.Now < until && !s.holdsNodes(j) {
		// Not a job holding nodes: it evicted for them, and the victims'
		// instances, kept for a change it could not ask, took the
		// victims back (seed 50 of the default scenario from 203,399
		// s: research's gang evicted search's chat service six times in
		// twelve minutes).
		return ""
	}
	where := s.widest(c, j) // outside reservations
	asked := s.migOffFor(c, j, reqs, where)
	for _, r := range reqs {
		if r.Kind == workload.MIGProfile || r.Kind == workload.MemoryProfile {
			asked = s.migFor(c, j, r, where) || asked
		}
	}
	if !asked {
		return ""
	}
	s.attempts[j.ID()]++
	if s.attempts[j.ID()] >= 2 {
		s.backoff[j.ID()] = c.in.Now + s.cfg.ReconfigCooldown
		s.attempts[j.ID()] = 0
		s.noteBackoff(c, j)
	}
	return WaitReconfig
}

// wholeDuringGrace turns whole, while j's victims are in their grace,
// the idle MIG GPUs that j will need on the node held for it, so that the
// change and the grace run together: a claim for whole GPUs that waited
// for its victims to leave and only then for the change took 60 s + a
// search, past a guarantee's 60 s + grace (seed 20 of the default
// scenario, an 8-GPU fine-tune). Only a single task on one node, and only
// when the GPUs turned, the node's free whole GPUs and those its victims
// free are enough for it. Default scenario, every target by the owed
// clock on seeds 1-144 / 145-288 / 289-432 / 433-576: 57 / 61 / 50 / 39
// (54 / 43 / 48 / 37); production p95 ≤ 30 s on 129 / 135 / 133 / 131
// (125 / 134 / 127 / 133) (docs/mixed.md).
func (s *Scheduler) wholeDuringGrace(c *cycle, j *Job) {
	if !s.cfg.MIG || s.changePending(c, j.ID()) || len(s.promisedNodes[j.ID()]) != 1 {
		return
	}
	reqs, err := s.requests(j)
	if err != nil || len(reqs) != 1 || reqs[0].Kind != workload.WholeGPUs {
		return
	}
	var name string
	for n := range s.promisedNodes[j.ID()] {
		name = n // the only one
	}
	n := c.st.NodeByName(name)
	if n == nil {
		return
	}
	freed := map[int]int{} // milli of the node's non-MIG GPUs that j's victims hold
	for _, id := range s.promised[j.ID()] {
		if v, ok := c.job(id); ok {
			for _, a := range v.Placed {
				if a != nil && a.Node == name {
					for _, g := range a.Grants {
						if g.Slice == nil {
							freed[g.GPU] += g.Milli
						}
					}
				}
			}
		}
	}
	have := 0
	var idle []int
	for k := range n.GPUs {
		g := &n.GPUs[k]
		switch {
		case g.Cordoned():
		case !g.MIG && g.Used() == freed[k]:
			have++
		case g.MIG && g.Idle() && s.cooled(c, name, k):
			idle = append(idle, k)
		}
	}
	need := reqs[0].Count - have
	if need <= 0 || need > len(idle) {
		return
	}
	for _, k := range idle[:need] {
		s.apply(c, j, Reconfig{Node: name, GPU: k, MIG: false, For: j.ID()}, false)
	}
}

// awaitingChange reports whether a change asked for j is still being
// applied, and forgets the request once it is not.
func (s *Scheduler) awaitingChange(c *cycle, j *Job) bool {
	if s.changePending(c, j.ID()) {
		return true
	}
	delete(s.awaiting, j.ID())
	return false
}

// changePending reports whether a change asked for the job is still being
// applied (its GPU is cordoned in the world's cluster).
func (s *Scheduler) changePending(c *cycle, job string) bool {
	return s.changeAskedWithin(c, job, -1)
}

// askedChange is a change asked for a job: the GPU and when. The GPU's
// cordon is the job's change only while no later change was asked there.
type askedChange struct {
	gpu gpuRef
	at  time.Duration
}

// changeAskedWithin is changePending for the changes asked less than
// within ago (any when within < 0). A GPU cordoned for another job's
// change is not one: a job once started, evicted and queued again
// read its old change in the cordon of a change asked later for
// someone else, and waited for it instead of searching for room (seed
// 200 of the default scenario at a 2 s cadence, from 494,275 s: an
// owed experiment waited 30 s for an ads service's change).
func (s *Scheduler) changeAskedWithin(c *cycle, job string, within time.Duration) bool {
	for _, a := range s.awaiting[job] {
		n := c.in.Cluster.NodeByName(a.gpu.node)
		if n == nil || a.gpu.index >= len(n.GPUs) || !n.GPUs[a.gpu.index].Cordoned() {
			continue
		}
		if s.lastChange[a.gpu] == a.at && (within < 0 || c.in.Now-a.at < within) {
			return true
		}
	}
	return false
}

// changeWait bounds how long a job waits for a change made for it rather
// than start on an instance created elsewhere: a change that has not
// ended by then may have failed (on Kubernetes a failed change keeps its
// node cordoned until someone looks).
const changeWait = 2 * time.Minute

// changeUnderWay reports whether a change asked for the job less than
// changeWait ago is still being applied.
func (s *Scheduler) changeUnderWay(c *cycle, job string) bool {
	return s.changeAskedWithin(c, job, changeWait)
}

func (s *Scheduler) cooled(c *cycle, node string, index int) bool {
	return s.cooledFor(c, node, index, s.cfg.ReconfigCooldown)
}

// changeCooldown is the cooldown a change for j waits out: ClaimCooldown
// for production within its team's guarantee, ReconfigCooldown for the
// rest.
func (s *Scheduler) changeCooldown(c *cycle, j *Job) time.Duration {
	if s.cfg.ClaimCooldown > 0 && j.Spec.Class == workload.Production && withinGuarantee(c, j) {
		return min(s.cfg.ReconfigCooldown, s.cfg.ClaimCooldown)
	}
	return s.cfg.ReconfigCooldown
}

// cooledFor is cooled with another cooldown.
func (s *Scheduler) cooledFor(c *cycle, node string, index int, cooldown time.Duration) bool {
	last, ok := s.lastChange[gpuRef{node, index}]
	return !ok || c.in.Now-last >= cooldown
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
	gpu    *cluster.GPU  // the plan's, unchanged while options are weighed
	place  gpu.Placement // the instance added beside the busy ones
	turnOn bool
	rank   [3]int // lower is better
}

// layout is the GPU's layout after the change: its busy instances, then
// the new one. (Built for the chosen option only: built for every one
// weighed, the layouts were 5 % of a busy week's allocated bytes.)
func (o migOption) layout() gpu.Layout {
	var l gpu.Layout
	if o.gpu.MIG {
		l = usedLayout(o.gpu)
	}
	return append(l, o.place)
}

// migFor finds a GPU to re-partition for a MIG task, on the nodes where
// allows (nil: all).
func (s *Scheduler) migFor(c *cycle, j *Job, r *engine.Request, where func(*cluster.Node) bool) bool {
	if s.extendChange(c, j, r) {
		return true
	}
	var opts []migOption
	var busy gpu.Layout // regionFor's buffer
	cool := s.changeCooldown(c, j)
	for i := 0; i < c.st.Len(); i++ {
		n := c.st.Node(i)
		if r.CPUMilli > n.CPUFree() || r.MemMiB > n.MemFree() || where != nil && !where(n) {
			continue
		}
		migGPUs := migCount(n)
		for k := range n.GPUs {
			g := &n.GPUs[k]
			p := profileFor(r, g.Model)
			if p == nil || g.Cordoned() || !s.cooledFor(c, n.Name, k, cool) {
				continue
			}
			if o, ok := regionFor(n, g, p, migGPUs, &busy); ok {
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
	return s.apply(c, j, Reconfig{Node: o.node, GPU: o.gpu.Index, MIG: true, Layout: o.layout(), For: j.ID()}, o.turnOn)
}

// extendChange adds r's instance to a GPU already being re-partitioned for
// j in this cycle, where it fits: replicas of a service then wait for one
// change, not for a change and then an instance created at their start.
func (s *Scheduler) extendChange(c *cycle, j *Job, r *engine.Request) bool {
	for i := range c.d.Reconfigs {
		rc := &c.d.Reconfigs[i]
		if rc.For != j.ID() || !rc.MIG || rc.Add {
			continue
		}
		n := c.st.NodeByName(rc.Node)
		if n == nil || rc.GPU >= len(n.GPUs) {
			continue
		}
		m := n.GPUs[rc.GPU].Model
		p := profileFor(r, m)
		if p == nil || r.CPUMilli > n.CPUFree() || r.MemMiB > n.MemFree() {
			continue
		}
		places, err := m.FreePlacements(rc.Layout, p.Name)
		if err != nil || len(places) == 0 {
			continue
		}
		layout := append(append(gpu.Layout(nil), rc.Layout...), places[len(places)-1])
		if err := c.st.SetLayout(rc.Node, rc.GPU, layout); err != nil {
			continue
		}
		rc.Layout = layout
		c.planChanged()
		return true
	}
	return false
}

// regionFor plans one GPU: keep busy instances, drop free ones, add p.
// Preference: the node with the most MIG GPUs (MIG gathers on few nodes so
// the others stay whole for training), then a GPU already split rather
// than one turned to MIG, then the fewest instances dropped. buf is a
// buffer for the busy instances, reused from one GPU to the next.
func regionFor(n *cluster.Node, g *cluster.GPU, p *gpu.Profile, migGPUs int, buf *gpu.Layout) (migOption, bool) {
	busy := (*buf)[:0]
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
	*buf = busy
	places, err := g.Model.FreePlacements(busy, p.Name)
	if err != nil || len(places) == 0 {
		return migOption{}, false
	}
	// The last allowed start keeps the low slices, where the big profiles
	// (4g@0, 7g@0) must start, free longest.
	o := migOption{node: n.Name, gpu: g, place: places[len(places)-1], turnOn: !g.MIG}
	turning := 0
	if !g.MIG {
		turning = 1
	}
	o.rank = [3]int{-migGPUs, turning, dropped - len(busy)}
	return o, true
}

// migCount is the number of GPUs of n with MIG on.
func migCount(n *cluster.Node) int {
	c := 0
	for k := range n.GPUs {
		if n.GPUs[k].MIG {
			c++
		}
	}
	return c
}

// migOffFor turns MIG off on idle MIG GPUs when j's whole-GPU tasks do
// not fit: each task needs its GPUs on one node, so for each it picks the
// node where free and idle-MIG GPUs together cover it, preferring nodes
// with fewest MIG GPUs (MIG gathers on the others) and then the fewest
// conversions, and turns off just what that task lacks.
func (s *Scheduler) migOffFor(c *cycle, j *Job, reqs []*engine.Request, where func(*cluster.Node) bool) bool {
	type cand struct {
		node       string
		free, idle []int
		mig        int
	}
	whole := false
	for _, r := range reqs {
		whole = whole || r.Kind == workload.WholeGPUs
	}
	if !whole || !s.anyIdleMIG(c, where) {
		return false // nothing to turn whole: skip building the candidates
	}
	var cands []*cand
	for i := 0; i < c.st.Len(); i++ {
		n := c.st.Node(i)
		if where != nil && !where(n) {
			continue
		}
		cd := &cand{node: n.Name, mig: migCount(n)}
		for k := range n.GPUs {
			g := &n.GPUs[k]
			switch {
			case g.Cordoned():
			case !g.MIG && g.Used() == 0:
				cd.free = append(cd.free, k)
			case g.MIG && g.Idle() && s.cooled(c, n.Name, k):
				cd.idle = append(cd.idle, k)
			}
		}
		cands = append(cands, cd)
	}
	asked := false
	for _, r := range reqs {
		if r.Kind != workload.WholeGPUs {
			continue
		}
		var best *cand
		for _, cd := range cands {
			if len(cd.free)+len(cd.idle) < r.Count {
				continue
			}
			short := max(r.Count-len(cd.free), 0)
			if best == nil || cd.mig < best.mig || cd.mig == best.mig && short < max(r.Count-len(best.free), 0) {
				best = cd
			}
		}
		if best == nil {
			continue
		}
		short := max(r.Count-len(best.free), 0)
		for _, k := range best.idle[:short] {
			if s.apply(c, j, Reconfig{Node: best.node, GPU: k, MIG: false, For: j.ID()}, false) {
				asked = true
			}
		}
		// The task takes these GPUs; the next task looks at what is left.
		best.idle = best.idle[short:]
		best.free = best.free[min(r.Count, len(best.free)):]
	}
	return asked
}

// anyIdleMIG reports whether some node where allows has a MIG GPU that
// migOffFor could turn whole.
func (s *Scheduler) anyIdleMIG(c *cycle, where func(*cluster.Node) bool) bool {
	// The nodes with such a GPU are listed once per change of the plan:
	// every job that misses asks, and the answer reads every GPU.
	if !c.idleMIGOK {
		c.idleMIG, c.idleMIGOK = c.idleMIG[:0], true
		for i := 0; i < c.st.Len(); i++ {
			n := c.st.Node(i)
			for k := range n.GPUs {
				g := &n.GPUs[k]
				if g.MIG && !g.Cordoned() && g.Idle() && s.cooled(c, n.Name, k) {
					c.idleMIG = append(c.idleMIG, i)
					break
				}
			}
		}
	}
	for _, i := range c.idleMIG {
		if where == nil || where(c.st.Node(i)) {
			return true
		}
	}
	return false
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
	if !rc.Add {
		if err := c.st.Cordon(rc.Node, rc.GPU, true); err != nil {
			return false
		}
	}
	c.planChanged()
	s.lastChange[gpuRef{rc.Node, rc.GPU}] = c.in.Now
	if j != nil {
		s.awaiting[j.ID()] = append(s.awaiting[j.ID()], askedChange{gpuRef{rc.Node, rc.GPU}, c.in.Now})
	}
	c.d.Reconfigs = append(c.d.Reconfigs, rc)
	return true
}
