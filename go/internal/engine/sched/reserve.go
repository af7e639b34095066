package sched

import (
	"sort"
	"time"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
)

// Gang reservation and backfill. A gang that has waited ReserveAfter holds
// the nodes it will use: nothing new starts there, except jobs declared to
// end before the gang can start (backfill), so as the running work ends
// the nodes drain and the gang starts. Its wait is bounded by the longest
// remaining run on those nodes; small jobs keep flowing everywhere else.
type reservation struct {
	job   string
	nodes map[string]bool
	// readyAt is when the reserved nodes are expected free: the latest
	// declared end of the work on them; 0 when some work has no estimate,
	// and then nothing backfills.
	readyAt time.Duration
	// stale: readyAt is from an earlier cycle; backfills recomputes it
	// when first asked (a light cycle rarely needs it, and it reads every
	// running job).
	stale bool
}

// refreshReservation drops a reservation whose gang started or left and
// marks when its nodes will be free for recomputing.
func (s *Scheduler) refreshReservation(c *cycle) {
	r := s.reservation
	if r == nil {
		return
	}
	if j, ok := c.job(r.job); !ok || j.Phase != Pending {
		s.reservation = nil
		return
	}
	r.stale = true
}

// readyAt is the latest declared end of the running work on nodes, or 0
// when some of it has no estimate.
func (s *Scheduler) readyAt(c *cycle, nodes map[string]bool) time.Duration {
	// From what snapshot gathered per node while it read every job.
	var ready time.Duration
	for name := range nodes {
		i, ok := c.in.Cluster.Lookup(name)
		if !ok {
			continue
		}
		if c.endUnknown[i] {
			return 0
		}
		ready = max(ready, c.endsBy[i])
	}
	return max(ready, c.in.Now)
}

// backfills says whether j ends, by its estimate, before the reserved gang
// can start, so that it may run on the reserved nodes meanwhile.
func (s *Scheduler) backfills(c *cycle, j *Job) bool {
	r := s.reservation
	if r == nil || j.Estimate <= 0 {
		return false
	}
	if r.stale {
		r.readyAt, r.stale = s.readyAt(c, r.nodes), false
	}
	return r.readyAt > 0 && c.in.Now+j.Estimate <= r.readyAt
}

// candidates lists the node sets to try for j, best first: for a gang
// spread over several nodes, one leaf switch at a time (most free GPUs
// first), then anywhere; always outside another gang's reservation unless
// j ends before that gang can start. Every set but the last is the last
// narrowed to a leaf.
func (s *Scheduler) candidates(c *cycle, j *Job, reqs []*engine.Request) []func(*cluster.Node) bool {
	return c.narrowed(reqs, s.widest(c, j))
}

// narrowed is candidates given the widest set.
func (c *cycle) narrowed(reqs []*engine.Request, outside func(*cluster.Node) bool) []func(*cluster.Node) bool {
	var out []func(*cluster.Node) bool
	if len(reqs) > 1 {
		for _, leaf := range c.leaves() {
			leaf := leaf
			out = append(out, func(n *cluster.Node) bool {
				return n.Topology.Leaf == leaf && (outside == nil || outside(n))
			})
		}
	}
	return append(out, outside)
}

// widest is the last and widest of j's candidates: the nodes not held for
// another job (nil: every node). Searches that ask where j could go at
// all need only this one.
func (s *Scheduler) widest(c *cycle, j *Job) func(*cluster.Node) bool {
	// Nodes held for another job (a gang's reservation, a preemptor's
	// promise) are closed to jobs of its class or lower; a higher class
	// goes first anyway.
	var held []map[string]bool
	if r := s.reservation; r != nil && r.job != j.ID() && s.outranksReserved(c, r.job, j) && !s.backfills(c, j) {
		held = append(held, r.nodes)
	}
	for other, nodes := range s.promisedNodes {
		if other != j.ID() && s.outranks(c, other, j) {
			held = append(held, nodes)
		}
	}
	if len(held) == 0 {
		return nil
	}
	return func(n *cluster.Node) bool {
		for _, h := range held {
			if h[n.Name] {
				return false
			}
		}
		return true
	}
}

// leaves is leavesByFree of the plan, computed once per change of the
// plan: every gang considered asks for it.
func (c *cycle) leaves() []string {
	if !c.leavesOK {
		c.leavesByFree, c.leavesOK = leavesByFree(c.st), true
	}
	return c.leavesByFree
}

// leavesByFree returns the leaf switches, most free GPU first.
func leavesByFree(st *cluster.State) []string {
	free := map[string]int{}
	for i := 0; i < st.Len(); i++ {
		n := st.Node(i)
		if n.Topology.Leaf != "" {
			free[n.Topology.Leaf] += n.GPUFreeMilli()
		}
	}
	if len(free) < 2 {
		return nil
	}
	leaves := make([]string, 0, len(free))
	for l := range free {
		leaves = append(leaves, l)
	}
	sort.Slice(leaves, func(a, b int) bool {
		if free[leaves[a]] != free[leaves[b]] {
			return free[leaves[a]] > free[leaves[b]]
		}
		return leaves[a] < leaves[b]
	})
	return leaves
}

// reserve picks the nodes the gang will use: those with the most GPUs free
// or held by work that ends soonest, until they cover its tasks.
func (s *Scheduler) reserve(c *cycle, j *Job, reqs []*engine.Request) {
	type cand struct {
		node  string
		gpus  int // GPUs free or held by running (not production) work
		ready time.Duration
	}
	ends := map[string]time.Duration{}
	held := map[string]int{}
	for _, v := range c.in.Jobs {
		if v.Phase == Pending {
			continue
		}
		for _, a := range v.Placed {
			if a == nil {
				continue
			}
			end := v.Started + v.Estimate
			if v.Estimate == 0 {
				end = 1 << 62
			}
			ends[a.Node] = max(ends[a.Node], end)
			held[a.Node] += len(a.Grants)
		}
	}
	var cands []cand
	for i := 0; i < c.st.Len(); i++ {
		n := c.st.Node(i)
		if len(n.GPUs) == 0 {
			continue
		}
		cands = append(cands, cand{node: n.Name, gpus: len(n.GPUs), ready: ends[n.Name]})
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].ready < cands[b].ready })
	need := 0
	for _, r := range reqs {
		need += max(r.Count, 1)
	}
	nodes := map[string]bool{}
	for _, cd := range cands {
		if need <= 0 {
			break
		}
		nodes[cd.node] = true
		need -= cd.gpus
	}
	s.reservation = &reservation{job: j.ID(), nodes: nodes}
	s.reservation.readyAt = s.readyAt(c, nodes)
}

// outranks reports whether the room promised to the job with ID holder
// (its victims' GPUs) is closed to j. Guarantees come first: a claim
// within its team's guarantee beats a borrower whatever the classes, both
// ways; otherwise the holder must be of j's class or higher. Within one
// team only the class counts: a team's own small claim let into the room
// its gang has just freed is evicted by that gang again (one research
// pretraining gang evicted the same four experiments every 2 minutes for
// hours).
func (s *Scheduler) outranks(c *cycle, holder string, j *Job) bool {
	return s.outranksAs(c, holder, j, true)
}

// outranksReserved is outranks for the nodes of a gang's reservation,
// where guarantees come first within a team too: a reservation drains for
// hours, and the team's claims within its guarantee keep what it is owed
// meanwhile (closed to them, violations on seeds 1-144 were 799k team-s
// against 706k).
func (s *Scheduler) outranksReserved(c *cycle, holder string, j *Job) bool {
	return s.outranksAs(c, holder, j, false)
}

func (s *Scheduler) outranksAs(c *cycle, holder string, j *Job, sameTeamByClass bool) bool {
	h, ok := c.job(holder)
	if !ok || h.Phase != Pending {
		return false // the holder has gone: nothing is held for it
	}
	if s.cfg.Borrow && (h.Spec.Team != j.Spec.Team || !sameTeamByClass) {
		hw, jw := withinGuarantee(c, h), withinGuarantee(c, j)
		if jw && !hw {
			return false
		}
		if hw && !jw {
			return true
		}
	}
	return !s.cfg.ClassOrder || h.Spec.Class >= j.Spec.Class
}
