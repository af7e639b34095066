package sched

import (
	"sort"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/workload"
)

// Moving services to make room. MIG work spreads over the nodes as
// services come and go, until every node keeps a MIG GPU or two, and a
// claim for whole GPUs on one node (an 8-GPU fine-tune within its team's
// guarantee) finds no node, even by eviction: the instances in its way
// belong to production within its team's guarantee, which is never
// evicted. A serving replica keeps no state, though: it can be started
// elsewhere and stopped here once the new one is ready (make before break,
// as a rolling update does), losing no work and no capacity. consolidate
// finds the node where the fewest such moves, and nothing else, make room
// for the claim, and moves them; the claim is promised the node and takes
// it once the old replicas are gone and its idle MIG GPUs are turned whole.

// maxMoves bounds the replicas moved for one job.
const maxMoves = 8

// moveRef is a replica's old placement, held until its new one is ready.
type moveRef struct {
	node, task string
}

// consolidate moves replicas for j when that, and nothing else, gives it
// room; it returns WaitMoving when it did, or "".
func (s *Scheduler) consolidate(c *cycle, j *Job, reqs []*engine.Request) string {
	if !s.cfg.Migrate || !s.cfg.MIG || c.moved || c.in.Now < s.moveBackoff[j.ID()] {
		return ""
	}
	if j.Spec.Class != workload.Production && !withinGuarantee(c, j) {
		return ""
	}
	for _, r := range reqs {
		if r.Kind != workload.WholeGPUs {
			return ""
		}
	}
	c.moved = true // one search a cycle: each places dozens of replicas
	during, after := c.st.Clone(), c.st.Clone()
	var moves []Migration
	var refs []moveRef
	nodes := map[string]bool{}
	where := s.widest(c, j)
	for _, r := range reqs {
		allowed := func(n *cluster.Node) bool { return !nodes[n.Name] && (where == nil || where(n)) }
		if a, err := s.placer.PlaceIn(after, r, allowed); err == nil {
			// This task fits as things are (a gang's other task).
			if after.Allocate(a) != nil {
				return s.noMoves(c, j)
			}
			nodes[a.Node] = true
			continue
		}
		m, node, next, ok := s.cheapestMoves(c, after, r, allowed, j, len(moves))
		if !ok {
			return s.noMoves(c, j)
		}
		for _, mv := range m {
			mv.Creates = createsInstance(during, mv.To)
			if during.Allocate(mv.To) != nil {
				return s.noMoves(c, j)
			}
			v, _ := c.job(mv.Job)
			refs = append(refs, moveRef{node, v.Placed[mv.Task].Task})
			moves = append(moves, mv)
		}
		after, nodes[node] = next, true
	}
	if len(moves) == 0 {
		return "" // it fits without moves: the next cycle places it
	}
	c.st = during
	c.planChanged()
	c.d.Migrations = append(c.d.Migrations, moves...)
	s.promisedNodes[j.ID()] = nodes
	s.moving[j.ID()] = refs
	return WaitMoving
}

func (s *Scheduler) noMoves(c *cycle, j *Job) string {
	s.moveBackoff[j.ID()] = c.in.Now + urgentBackoffFor
	return ""
}

// movable says whether v's task on assignment a may be moved: a running
// production replica on MIG instances only, not moved or preempted in
// this cycle.
func movable(c *cycle, v *Job, a *cluster.Assignment) bool {
	if v.Phase != Running || v.Spec.Class != workload.Production || len(a.Grants) == 0 {
		return false
	}
	for _, g := range a.Grants {
		if g.Slice == nil {
			return false
		}
	}
	return !preemptedThisCycle(c, v) && !c.owners()[moveRef{a.Node, a.Task}].moving
}

// owners maps each node's tasks to their jobs and task indexes.
func (c *cycle) owners() map[moveRef]taskOf {
	if c.ownerOf == nil {
		c.ownerOf = map[moveRef]taskOf{}
		moving := map[string]bool{}
		for _, refs := range c.sch.moving {
			for _, ref := range refs {
				moving[ref.task] = true
			}
		}
		for _, v := range c.in.Jobs {
			for i, a := range v.Placed {
				if a != nil {
					c.ownerOf[moveRef{a.Node, a.Task}] = taskOf{v, i, moving[a.Task]}
				}
			}
		}
	}
	return c.ownerOf
}

type taskOf struct {
	job    *Job
	task   int
	moving bool // its old copy is still held: not moved again until it is gone
}

// cheapestMoves finds the node where moving the fewest replicas lets r
// fit, among those allowed, and returns the moves, the node and the state
// after them (replicas moved, idle MIG GPUs of the node turned whole, r
// placed). done is the moves already planned for j's other tasks.
func (s *Scheduler) cheapestMoves(c *cycle, st *cluster.State, r *engine.Request, allowed func(*cluster.Node) bool, j *Job, done int) ([]Migration, string, *cluster.State, bool) {
	owners := c.owners()
	type cand struct {
		node  string
		tasks []taskOf
	}
	var cands []cand
	for i := 0; i < st.Len(); i++ {
		n := st.Node(i)
		if len(n.GPUs) < r.Count || !allowed(n) {
			continue
		}
		// Per GPU, the replicas to move to free it; -1 when it cannot be.
		type gpuCost struct {
			tasks []taskOf
		}
		var costs []gpuCost
		for k := range n.GPUs {
			g := &n.GPUs[k]
			if g.Cordoned() || !r.AllowsModel(g.Model) {
				continue
			}
			if g.Idle() {
				if !g.MIG || s.cooled(c, n.Name, k) {
					costs = append(costs, gpuCost{})
				}
				continue
			}
			if !g.MIG || !s.cooled(c, n.Name, k) {
				continue
			}
			var ts []taskOf
			ok := true
			for _, a := range n.Tasks() {
				on := false
				for _, gr := range a.Grants {
					on = on || gr.GPU == k
				}
				if !on {
					continue
				}
				o, known := owners[moveRef{n.Name, a.Task}]
				if !known || o.job == j || !movable(c, o.job, o.job.Placed[o.task]) || o.job.Placed[o.task].Node != n.Name {
					ok = false // an old copy being moved, or work that stays
					break
				}
				ts = append(ts, o)
			}
			if ok {
				costs = append(costs, gpuCost{ts})
			}
		}
		if len(costs) < r.Count {
			continue
		}
		sort.SliceStable(costs, func(a, b int) bool { return len(costs[a].tasks) < len(costs[b].tasks) })
		var tasks []taskOf
		for _, gc := range costs[:r.Count] {
			tasks = append(tasks, gc.tasks...)
		}
		if len(tasks) > 0 && done+len(tasks) <= maxMoves {
			cands = append(cands, cand{n.Name, tasks})
		}
	}
	sort.SliceStable(cands, func(a, b int) bool { return len(cands[a].tasks) < len(cands[b].tasks) })
	for k, cd := range cands {
		if k == 3 {
			break // each try places every replica: the cheapest few suffice
		}
		if moves, next, ok := s.tryMoves(c, st, r, cd.node, cd.tasks, j); ok {
			return moves, cd.node, next, true
		}
	}
	return nil, "", nil, false
}

// tryMoves moves tasks off node on a copy of st, turns the node's idle
// MIG GPUs whole and places r there.
func (s *Scheduler) tryMoves(c *cycle, st *cluster.State, r *engine.Request, node string, tasks []taskOf, j *Job) ([]Migration, *cluster.State, bool) {
	trial := st.Clone()
	for _, t := range tasks {
		if _, err := trial.Release(node, t.job.Placed[t.task].Task); err != nil {
			return nil, nil, false
		}
	}
	var moves []Migration
	for _, t := range tasks {
		req, err := s.placer.Request(t.job.Spec.Tasks[t.task])
		if err != nil {
			return nil, nil, false
		}
		where := s.widest(c, t.job)
		a, err := s.placer.PlaceIn(trial, req, func(n *cluster.Node) bool {
			return n.Name != node && (where == nil || where(n))
		})
		if err != nil || trial.Allocate(a) != nil {
			return nil, nil, false
		}
		moves = append(moves, Migration{Job: t.job.ID(), Task: t.task, To: a, For: j.ID()})
	}
	s.wholeIdle(c, trial, node)
	a, err := s.placer.PlaceIn(trial, r, func(n *cluster.Node) bool { return n.Name == node })
	if err != nil || trial.Allocate(a) != nil {
		return nil, nil, false
	}
	return moves, trial, true
}

// movesDone reports whether the replicas moved for j have all left their
// old places (the world releases each when its new one is ready).
func (s *Scheduler) movesDone(c *cycle, refs []moveRef) bool {
	for _, ref := range refs {
		if n := c.in.Cluster.NodeByName(ref.node); n != nil {
			if _, still := n.Task(ref.task); still {
				return false
			}
		}
	}
	return true
}
