package sched

import (
	"slices"
	"sort"
	"time"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/gpu"
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
// finds the node where the fewest such moves, with the fewest evictions
// the claim may make anyway, make room for it; the claim is promised the
// node and takes it once the old replicas and the victims are gone and
// its idle MIG GPUs are turned whole.

// maxMoves bounds the replicas moved for one job. With 8, a node of
// 1g.10gb services needed more than that for any three of its GPUs, and
// an 8-GPU claim found no node while five had nothing else in the way.
// Over seeds 1-144 of the default scenario (with pinnedSliceNodes): 8,
// 683k team-s of guarantee violations; 12, 634k; 16, 586k; 32, 704k
// (more replicas in flight, each holding two places). Raised to 24
// together with relocateLossOwed, on a build where owed 8-GPU fine-tunes
// still found no node: of the nodes their searches passed over on seeds
// 1-48, 1,875 of 10,664 could be freed, but only with more than 16
// moves (nodes full of small services). Seeds 1-576: every target
// (owed clock) on 223 (222), guarantee violations 192k team-s (227k),
// 59k by the owed clock (85k), production p95 ≤ 30 s on 529 (529);
// replica moves +14 % (docs/mixed.md).
const maxMoves = 24

// moveCooldown is how long a service whose replica moved keeps its
// replicas where they are. Without it, on the default scenario without
// ProtectProduction (seed 48), a claim's plans moved one replica between
// two nodes at one instant without end. Any cooldown stops that; 10
// minutes cost 3 % more violations over seeds 1-144. 30 s rather than a
// minute: a claim waits less for replicas moved just before. Default
// scenario, seeds meeting every target (violations by the owed clock):
// 31 of seeds 1-144 (25) and 34 of 145-288 (27); seeds without an owed
// violation 40 (36) and 41 (35); production p95 and the violation totals
// within noise (docs/mixed.md). 15 s did as well on seeds 1-144 and
// lost two seeds' production p95 on 145-288.
const moveCooldown = 30 * time.Second

// borrowerMovesBackoff is how long a move search for borrowed work that
// found nothing holds off the next one, for any borrower
// (MoveForWholeNodes): week-1000's backlog of borrowed 8-GPU work asked
// one each cycle, 18 % of its wall time.
const borrowerMovesBackoff = time.Minute

// moveRef is a replica's old placement, held until its new one is ready.
type moveRef struct {
	node, task string
}

// consolidate moves replicas for j, evicting what else is in their way
// that j may evict, when the victim search alone found no room; it
// returns WaitMoving when it did, or "". With nowOnly (moves tried before
// victims the claim has found) it asks no MIG change for the moves.
func (s *Scheduler) consolidate(c *cycle, j *Job, reqs []*engine.Request, nowOnly bool) string {
	if !s.cfg.Migrate || !s.cfg.MIG || c.moved || c.in.Now < s.moveBackoff[j.ID()] {
		return ""
	}
	borrower := j.Spec.Class != workload.Production && !withinGuarantee(c, j)
	if borrower && (!s.cfg.MoveForWholeNodes || c.in.Now < s.borrowerMovesAt || !s.wholeNodesOnly(c, reqs)) {
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
	var victims []*Job
	gone := map[*Job]bool{}
	nodes := map[string]bool{}
	where := s.widest(c, j)
	for _, r := range reqs {
		allowed := func(n *cluster.Node) bool { return !nodes[n.Name] && (where == nil || where(n)) }
		if a, err := s.placer.PlaceIn(after, r, allowed); err == nil {
			// This task fits as things are (a gang's other task).
			if after.Allocate(a) != nil {
				return s.noMoves(c, j, borrower)
			}
			nodes[a.Node] = true
			continue
		}
		m, vs, node, next, ok := s.cheapestMoves(c, after, r, allowed, j, len(moves), gone, false)
		if !ok && (borrower || nowOnly) {
			// Idle GPUs turned to MIG for the moves, or victims first,
			// only for a claim's own move search: not for borrowed work,
			// nor before the victims a claim has found (nowOnly).
			return s.noMoves(c, j, borrower)
		}
		if !ok {
			if s.migForMoves(c, after, r, allowed, j, len(moves), gone) {
				return WaitReconfig
			}
			if len(reqs) == 1 && c.in.Now >= s.roundsUntil[j.ID()] {
				if vs, held := s.victimsFirst(c, after, r, allowed, j); len(vs) > 0 {
					s.preempt(c, j, vs, held)
					s.countRound(c, j)
					return WaitPreempting
				}
			}
			return s.noMoves(c, j, borrower)
		}
		for _, mv := range m {
			mv.Creates = createsInstance(during, mv.To)
			if during.Allocate(mv.To) != nil {
				return s.noMoves(c, j, borrower)
			}
			v, _ := c.job(mv.Job)
			refs = append(refs, moveRef{node, v.Placed[mv.Task].Task})
			moves = append(moves, mv)
		}
		for _, v := range vs {
			gone[v] = true
		}
		victims = append(victims, vs...)
		after, nodes[node] = next, true
	}
	if len(moves) == 0 && !s.relocates(c, j, victims) {
		return "" // nothing to move or relocate: the victim search's case
	}
	if until := s.roundsUntil[j.ID()]; len(victims) > 0 && c.in.Now < until {
		// Its preemption rounds are backing off (countRound): the next
		// plan when they end.
		s.moveBackoff[j.ID()] = until
		return ""
	}
	c.st = during
	c.planChanged()
	c.d.Migrations = append(c.d.Migrations, moves...)
	for _, mv := range moves {
		s.movedAt[mv.Job] = c.in.Now
	}
	if len(victims) > 0 {
		s.preempt(c, j, victims, nodes)
		s.countRound(c, j)
	} else {
		s.promise(c, j, nodes)
	}
	s.moving[j.ID()] = refs
	return WaitMoving
}

// wholeNodesOnly says whether every task of reqs asks for all the GPUs of
// the largest node. Such work, beyond its team's guarantee, has replicas
// moved for it too (MoveForWholeNodes): a one-GPU job finds a GPU as work
// ends, but a node is freed only by moves once MIG work has spread over
// every node. Unlike a claim's, its plan turns no idle GPU to MIG and
// evicts no victim first, and a failed one holds off the next
// (borrowerMovesBackoff). Default scenario with a production reserve of
// 6 GPUs (5 before), seeds 1-576: useful utilization ≥ 0.85 and
// production p95 ≤ 30 s together on 502 seeds (440); every target by the
// owed clock on 345 (324), none by the owed clock on 403 (415); replica
// moves +13 %. Seeds 577-1152: every target on 343 (319). Moves for
// every borrower of whole GPUs: 508, 341 and 387 on seeds 1-576, moves
// +88 %; for one-GPU borrowers only, little of the gain in useful
// utilization (docs/mixed.md).
func (s *Scheduler) wholeNodesOnly(c *cycle, reqs []*engine.Request) bool {
	largest := 0
	for _, n := range s.capacityOf(c.in.Cluster).MaxGPUs {
		largest = max(largest, n)
	}
	for _, r := range reqs {
		if r.Kind != workload.WholeGPUs || r.Count < largest {
			return false
		}
	}
	return len(reqs) > 0
}

// migForMoves turns idle whole GPUs to MIG for the replicas of a move
// plan that, without them, found no MIG room elsewhere, and reports
// whether it asked for a change. The moves wait for the change: a
// replica's new instance must exist when it moves (the world applies
// changes after moves), and the claim plans again once it is done.
// Most failed plans failed so (a 3g.40gb replica finds no room in the
// small holes MIG GPUs keep) while whole GPUs sat idle on other nodes.
// Default scenario: guarantee violations 317k → 223k team-s on seeds
// 1-144 and 334k → 188k on 145-288. The cost is borrowed production's
// (the changes and the room they take): production p95 ≤ 30 s on 103
// seeds (111) and 107 (112); within their teams' guarantees, 30 s on all.
// The free space of MIG GPUs in use is re-partitioned for them too
// (dropFree). Seeds 1-576: every target by the owed clock on 264 (223),
// by the owed clock 46k team-s (59k), but production p95 ≤ 30 s on 521
// (529) (docs/mixed.md).
func (s *Scheduler) migForMoves(c *cycle, st *cluster.State, r *engine.Request, allowed func(*cluster.Node) bool, j *Job, done int, gone map[*Job]bool) bool {
	trial := st.Clone()
	s.convertIdle(c, trial, "")
	reshaped := s.dropFree(c, trial, "", s.cfg.ReconfigCooldown)
	moves, _, _, _, ok := s.cheapestMoves(c, trial, r, allowed, j, done, gone, false)
	if !ok {
		return false
	}
	layouts := map[gpuRef]gpu.Layout{}
	var order []gpuRef
	for _, mv := range moves {
		n := st.NodeByName(mv.To.Node)
		for _, g := range mv.To.Grants {
			if g.Slice == nil || n == nil {
				continue
			}
			ref := gpuRef{mv.To.Node, g.GPU}
			if n.GPUs[g.GPU].MIG && !reshaped[ref] {
				continue
			}
			if _, seen := layouts[ref]; !seen {
				order = append(order, ref)
				if n.GPUs[g.GPU].MIG {
					layouts[ref] = usedLayout(&n.GPUs[g.GPU])
				}
			}
			layouts[ref] = append(layouts[ref], *g.Slice)
		}
	}
	asked := false
	for _, ref := range order {
		n := st.NodeByName(ref.node)
		if g := &n.GPUs[ref.index]; g.MIG {
			if fitsLayout(g, layouts[ref]) {
				continue // the replicas take instances the GPU has free already
			}
			// The free instances the replicas do not need stay (the warm
			// pool's among them).
			for _, sl := range g.Slices() {
				if sl.Task != "" || layouts[ref].Contains(sl.Placement) {
					continue
				}
				if next := append(slices.Clone(layouts[ref]), sl.Placement); g.Model.Validate(next) == nil {
					layouts[ref] = next
				}
			}
		}
		if s.apply(c, j, Reconfig{Node: ref.node, GPU: ref.index, MIG: true, Layout: layouts[ref], For: j.ID()}, !n.GPUs[ref.index].MIG) {
			asked = true
		}
	}
	return asked
}

// dropFree removes, in a trial state, the free instances of MIG GPUs that
// a change may re-partition (not cordoned, last changed at least cool
// ago), on node or, when node is "", everywhere, and returns those GPUs
// (nil when none). Two searches ask:
//   - moves (migForMoves): a 3g.40gb replica to move finds no room where
//     the free space is cut into smaller instances (seed 16 of the
//     default scenario at 423,278 s: an owed 8-GPU fine-tune's five
//     candidate nodes each failed on a 3g.40gb replica, while free
//     2g.20gb and 1g instances covered a 3g's place on other GPUs). The
//     change replaces only free instances; running ones stay, and so do
//     the free instances the replicas do not need (dropping them too, as
//     the trial does, cost 9 more seeds' production p95 for the same
//     number meeting every target);
//   - a MIG task's victim search (victims, cheapestNode): a victim's
//     instance stays behind as a free instance of its own profile, which
//     repartition (migFor) replaces once the victims are gone. Counted as
//     no room, a 1g.20gb found no victim where a 2g.20gb or a 1g.10gb
//     would leave, and ads' transcription service, within ads'
//     guarantee, searched for 226 s (seed 17 at 72,441 s). Every target
//     by the owed clock on seeds 1-576 / 577-1152: 394 / 395 (377 / 381;
//     docs/mixed.md).
func (s *Scheduler) dropFree(c *cycle, st *cluster.State, node string, cool time.Duration) map[gpuRef]bool {
	var out map[gpuRef]bool
	for i := 0; i < st.Len(); i++ {
		n := st.Node(i)
		if node != "" && n.Name != node {
			continue
		}
		for k := range n.GPUs {
			g := &n.GPUs[k]
			if !g.MIG || g.Cordoned() || !s.cooledFor(c, n.Name, k, cool) {
				continue
			}
			if !hasFreeInstance(g) {
				continue
			}
			if st.SetLayout(n.Name, k, usedLayout(g)) == nil {
				if out == nil {
					out = map[gpuRef]bool{}
				}
				out[gpuRef{n.Name, k}] = true
			}
		}
	}
	return out
}

// usedLayout is the instances of g that hold a task.
func usedLayout(g *cluster.GPU) gpu.Layout {
	var l gpu.Layout
	for _, sl := range g.Slices() {
		if sl.Task != "" {
			l = append(l, sl.Placement)
		}
	}
	return l
}

// hasFreeInstance says whether an instance of g holds no task.
func hasFreeInstance(g *cluster.GPU) bool {
	for _, sl := range g.Slices() {
		if sl.Task == "" {
			return true
		}
	}
	return false
}

// fitsLayout says whether every instance of l exists on g already.
func fitsLayout(g *cluster.GPU, l gpu.Layout) bool {
	have := g.Layout()
	for _, p := range l {
		if !have.Contains(p) {
			return false
		}
	}
	return true
}

// victimsFirst is the plan for when the replicas to move find no room
// while the claim's victims are still there, but would on the GPUs the
// victims free elsewhere (the other tasks of a gang), turned to MIG: it
// returns those victims, to evict now, and the claim's node, held for it
// until they are gone. The claim plans again then, and moves the replicas
// once the freed GPUs are MIG. (Seed 1 of the default scenario: ads'
// fine-tune waited 1,528 s with research's pretraining gang on the nodes
// that could be freed, each plan failing for want of MIG room.) Default
// scenario: violations 115k → 104k team-s on seeds 1-144 and 118k → 100k
// on 145-288. Holding the replicas' nodes too cost useful utilization
// (≥ 0.85 on 114 of seeds 145-288 instead of 118) for no fewer
// violations.
func (s *Scheduler) victimsFirst(c *cycle, st *cluster.State, r *engine.Request, allowed func(*cluster.Node) bool, j *Job) ([]*Job, map[string]bool) {
	_, victims, node, _, ok := s.cheapestMoves(c, st, r, allowed, j, 0, map[*Job]bool{}, true)
	if !ok || len(victims) == 0 {
		return nil, nil
	}
	return victims, map[string]bool{node: true}
}

func (s *Scheduler) noMoves(c *cycle, j *Job, borrower bool) string {
	s.moveBackoff[j.ID()] = c.in.Now + urgentBackoffFor
	if borrower {
		s.borrowerMovesAt = c.in.Now + borrowerMovesBackoff
	}
	return ""
}

// movable says whether v's task on assignment a may be moved: a running
// production replica on MIG instances only, not preempted in this cycle
// nor moved within moveCooldown.
func movable(c *cycle, v *Job, a *cluster.Assignment) bool {
	if v.Phase != Running || v.Spec.Class != workload.Production || len(a.Grants) == 0 {
		return false
	}
	if at, ok := c.sch.movedAt[v.ID()]; ok && c.in.Now-at < moveCooldown {
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

// cheapestMoves finds the node where r fits at least cost, among those
// allowed, once replicas are moved off it and, where moves alone do not
// do, eligible victims evicted: fewest victims first, then the least
// work they lose, then fewest moves. It returns the moves, the victims,
// the node and the state after them (victims gone, replicas moved, idle
// MIG GPUs of the node turned whole, r placed). done is the moves
// already planned for j's other tasks; gone the victims. With
// victimsFirst, only plans that evict (no relocation) and move are
// tried, the replicas placed once the victims are gone (victimsFirst).
func (s *Scheduler) cheapestMoves(c *cycle, st *cluster.State, r *engine.Request, allowed func(*cluster.Node) bool, j *Job, done int, gone map[*Job]bool, victimsFirst bool) ([]Migration, []*Job, string, *cluster.State, bool) {
	owners := c.owners()
	type cand struct {
		node    string
		tasks   []taskOf
		victims []*Job
		cost    [3]int
	}
	// Per GPU, the replicas to move and the jobs to evict to free it.
	type freeing struct {
		tasks   []taskOf
		victims []*Job
	}
	// What freeing a GPU adds to a plan that evicts those already
	// evicted: victims, their victimCost, moves.
	costOf := func(f freeing, evicted map[*Job]bool) [3]int {
		var cost [3]int
		for _, v := range f.victims {
			if !evicted[v] {
				cost[0]++
				cost[1] += victimCost(c, v)
			}
		}
		cost[2] = len(f.tasks)
		return cost
	}
	var cands []cand
	// A plan moves or relocates something (else it is the victim
	// search's case), within the bounds.
	usable := func(cd cand) bool {
		if victimsFirst && (len(cd.victims) == 0 || len(cd.tasks) == 0 || s.relocates(c, j, cd.victims)) {
			return false
		}
		return (len(cd.tasks) > 0 || s.relocates(c, j, cd.victims)) && done+len(cd.tasks) <= maxMoves && len(cd.victims) <= maxVictims
	}
	for i := 0; i < st.Len(); i++ {
		n := st.Node(i)
		if len(n.GPUs) < r.Count || !allowed(n) {
			continue
		}
		var gpus []freeing
		for k := range n.GPUs {
			g := &n.GPUs[k]
			if g.Cordoned() || !r.AllowsModel(g.Model) || g.MIG && !s.cooled(c, n.Name, k) {
				continue
			}
			var f freeing
			ok := true
			for _, a := range n.Tasks() {
				if !holdsGPU(a, k) {
					continue
				}
				o, known := owners[moveRef{n.Name, a.Task}]
				switch {
				case !known || o.job == j:
					ok = false // an old copy being moved, or j's own
				case gone[o.job]:
				case g.MIG && movable(c, o.job, o.job.Placed[o.task]):
					f.tasks = append(f.tasks, o)
				case s.eligible(c, j, o.job) && !preemptedThisCycle(c, o.job):
					f.victims = append(f.victims, o.job)
				case s.relocatable(c, j, o.job):
					f.victims = append(f.victims, o.job) // tryMoves finds it room elsewhere
				default:
					ok = false
				}
				if !ok {
					break
				}
			}
			if ok {
				gpus = append(gpus, f)
			}
		}
		if len(gpus) < r.Count {
			continue
		}
		if r.Count == 1 {
			// One GPU (research's experiments): each is a candidate of
			// its own, since the cheapest one's replicas may find no
			// room where another's do. Default scenario, against the
			// cheapest GPU of each node only: violations 505k → 397k
			// team-s on seeds 1-144 and 472k → 410k on 145-288, but
			// production p95 ≤ 30 s on 105 seeds (112) and 113 (117):
			// research's guarantee is served sooner, and search's
			// production beyond its guarantee finds less room.
			for _, f := range gpus {
				cd := cand{node: n.Name, tasks: f.tasks, victims: f.victims, cost: costOf(f, nil)}
				if usable(cd) {
					cands = append(cands, cd)
				}
			}
			continue
		}
		// The cheapest r.Count GPUs: a victim holding several is paid
		// for once, so GPUs are taken greedily by what each adds.
		cd := cand{node: n.Name}
		picked := make([]bool, len(gpus))
		evicted := map[*Job]bool{}
		for len(cd.tasks) <= maxMoves && countTrue(picked) < r.Count {
			best, bestCost := -1, [3]int{}
			for x, f := range gpus {
				if picked[x] {
					continue
				}
				cost := costOf(f, evicted)
				if best < 0 || less3(cost, bestCost) {
					best, bestCost = x, cost
				}
			}
			picked[best] = true
			cd.tasks = append(cd.tasks, gpus[best].tasks...)
			for _, v := range gpus[best].victims {
				if !evicted[v] {
					evicted[v] = true
					cd.victims = append(cd.victims, v)
				}
			}
			for x := range cd.cost {
				cd.cost[x] += bestCost[x]
			}
		}
		if usable(cd) {
			cands = append(cands, cd)
		}
	}
	sort.SliceStable(cands, func(a, b int) bool { return less3(cands[a].cost, cands[b].cost) })
	// Every candidate is tried, cheapest first. A try fails when a replica
	// to move finds no room elsewhere (most often a 3g.40gb: MIG room is
	// left in small holes), and a dearer node's replicas may fit. With the
	// cheapest 3 only, guarantee violations on the default scenario were
	// 586k team-s over seeds 1-144 (588k over 145-288); with 6, 532k
	// (511k); with all, 505k (472k), at 4-6 % more preemptions. The
	// searches cost little even on week-1000 (below 1 % of a CPU profile):
	// one runs a cycle, and a job whose search failed waits 15 s.
	// A replica with no room, of a service j may evict anyway, is evicted
	// instead once j has been owed a while (evictsStuck).
	for _, cd := range cands {
		tasks, victims := cd.tasks, cd.victims
		for {
			moves, extra, next, stuck := s.tryMoves(c, st, r, cd.node, tasks, victims, j, victimsFirst)
			if next != nil {
				return moves, slices.Concat(victims, extra), cd.node, next, true
			}
			if !s.evictsStuck(c, j, stuck) || len(victims) >= maxVictims {
				break
			}
			tasks = slices.DeleteFunc(slices.Clone(tasks), func(t taskOf) bool { return t.job == stuck })
			victims = append(slices.Clone(victims), stuck)
		}
	}
	return nil, nil, "", nil, false
}

// evictsStuck says whether v, whose replica j's plan could not move for
// want of room, is evicted instead: j has been owed for EvictStuckAfter
// and may evict v anyway (borrowed work).
func (s *Scheduler) evictsStuck(c *cycle, j, v *Job) bool {
	return v != nil && s.cfg.EvictStuckAfter > 0 && s.owedFor(c, j, s.cfg.EvictStuckAfter) &&
		s.eligible(c, j, v) && !preemptedThisCycle(c, v)
}

func holdsGPU(a cluster.Assignment, k int) bool {
	for _, g := range a.Grants {
		if g.GPU == k {
			return true
		}
	}
	return false
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func less3(a, b [3]int) bool {
	for x := range a {
		if a[x] != b[x] {
			return a[x] < b[x]
		}
	}
	return false
}

// tryMoves evicts victims and moves tasks off node on a copy of st, turns
// the node's idle MIG GPUs whole and places r there. With victimsFirst,
// the victims leave before the tasks find their new places, and every
// idle GPU may be turned to MIG for them. next is nil when the plan
// fails; stuck is then the job of the replica that found no room, if
// that is why.
func (s *Scheduler) tryMoves(c *cycle, st *cluster.State, r *engine.Request, node string, tasks []taskOf, victims []*Job, j *Job, victimsFirst bool) (moves []Migration, extra []*Job, next *cluster.State, stuck *Job) {
	trial := st.Clone()
	for _, t := range tasks {
		if _, err := trial.Release(node, t.job.Placed[t.task].Task); err != nil {
			return nil, nil, nil, nil
		}
	}
	if victimsFirst {
		// The victims leave first, and the GPUs they free are turned to
		// MIG for the replicas (victimsFirst).
		for _, v := range victims {
			if release(trial, v) != nil {
				return nil, nil, nil, nil
			}
		}
		s.convertIdle(c, trial, "")
		victims = nil
	}
	// Otherwise the replicas move at once, the victims leave after their
	// grace: the replicas' new places are found with the victims still
	// there. Nothing moved or relocated for j goes to nodes held for a job that
	// outranks j (another claim's promise): j may not take them itself.
	// (Seed 16 of the default scenario: a second fine-tune's replicas
	// took the GPUs the first had freed. Default scenario: violations
	// 161k → 147k team-s on seeds 1-144, 145k → 128k on 145-288.)
	closed := s.widest(c, j)
	open := func(n *cluster.Node, where func(*cluster.Node) bool) bool {
		return n.Name != node && (closed == nil || closed(n)) && (where == nil || where(n))
	}
	for _, t := range tasks {
		req, err := s.placer.Request(t.job.Spec.Tasks[t.task])
		if err != nil {
			return nil, nil, nil, nil
		}
		where := s.widest(c, t.job)
		a, err := s.placer.PlaceIn(trial, req, func(n *cluster.Node) bool { return open(n, where) })
		if err != nil {
			return nil, nil, nil, t.job
		}
		if trial.Allocate(a) != nil {
			return nil, nil, nil, nil
		}
		moves = append(moves, Migration{Job: t.job.ID(), Task: t.task, To: a, For: j.ID()})
	}
	for _, v := range victims {
		if release(trial, v) != nil {
			return nil, nil, nil, nil
		}
	}
	// Work evicted only to be started again elsewhere must find room
	// there, or its team loses what it is owed.
	for _, v := range victims {
		if s.eligible(c, j, v) {
			continue
		}
		reqs := make([]*engine.Request, len(v.Spec.Tasks))
		for i, t := range v.Spec.Tasks {
			r, err := s.placer.Request(t)
			if err != nil {
				return nil, nil, nil, nil
			}
			reqs[i] = r
		}
		// Idle MIG GPUs elsewhere count, turned whole: the job's own
		// placement turns them when it queues again (repartition).
		where := s.widest(c, v)
		elsewhere := func(n *cluster.Node) bool { return open(n, where) }
		_, next, err := s.placer.PlaceAll(trial, reqs, elsewhere)
		if err != nil {
			s.wholeIdle(c, trial, "")
			_, next, err = s.placer.PlaceAll(trial, reqs, elsewhere)
		}
		if err != nil {
			// No room elsewhere: the claim makes some, evicting on other
			// nodes work it may evict anyway (roomElsewhere; for a gang,
			// task by task once the claim has been owed GangRoomAfter).
			var vs []*Job
			switch {
			case len(reqs) == 1:
				vs = s.roomElsewhere(c, trial, j, reqs, elsewhere, slices.Concat(victims, extra), tasks)
			case s.cfg.GangRoomAfter > 0 && s.owedFor(c, j, s.cfg.GangRoomAfter):
				vs = s.roomForGang(c, trial, j, reqs, elsewhere, slices.Concat(victims, extra), tasks)
			}
			released := len(vs) > 0 && !slices.ContainsFunc(vs, func(x *Job) bool { return release(trial, x) != nil })
			if released {
				s.wholeIdle(c, trial, "")
				if _, next, err = s.placer.PlaceAll(trial, reqs, elsewhere); err == nil {
					extra = append(extra, vs...)
				}
			}
		}
		if err != nil {
			return nil, nil, nil, nil
		}
		trial = next
	}
	s.wholeIdle(c, trial, node)
	a, err := s.placer.PlaceIn(trial, r, func(n *cluster.Node) bool { return n.Name == node })
	if err != nil || trial.Allocate(a) != nil {
		return nil, nil, nil, nil
	}
	return moves, extra, trial, nil
}

// roomElsewhere finds, for v, a one-task job that j relocates and that
// finds no room elsewhere, the victims j may evict anyway (borrowed work,
// in victims' order) on another node whose eviction makes room for v
// there. Seed 29 of the default scenario at 112,100 s: ads was owed an
// 8-GPU fine-tune; two nodes each held a 70B service of search's, which
// was over its guarantee, beside research's experiments within research's
// guarantee, relocatable but with nowhere to go; the other nodes held
// services and notebooks. Measured on the builds before the MIG change
// during the grace it cost production p95 and gained no seeds; on this
// build, every target by the owed clock on seeds 1-144 / 145-288 /
// 289-432 / 433-576: 61 / 60 / 56 / 45 (57 / 61 / 50 / 39), production p95
// ≤ 30 s on 131 / 135 / 131 / 132 (129 / 135 / 133 / 131) (docs/mixed.md).
func (s *Scheduler) roomElsewhere(c *cycle, st *cluster.State, j *Job, reqs []*engine.Request, where func(*cluster.Node) bool, taken []*Job, tasks []taskOf) []*Job {
	var cands []*Job
	for _, x := range c.in.Jobs {
		if slices.Contains(taken, x) || slices.ContainsFunc(tasks, func(t taskOf) bool { return t.job == x }) {
			continue
		}
		if s.eligible(c, j, x) && !preemptedThisCycle(c, x) {
			cands = append(cands, x)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	s.victimOrder(c, cands)
	var need int64
	for _, r := range reqs {
		need += int64(r.Count) * 1000
	}
	vs, _ := s.cheapestNode(c, st, reqs, need, cands, where, 0)
	return vs
}

// relocateLoss bounds the work a relocated job may lose: the time since
// its last checkpoint.
const relocateLoss = 15 * time.Minute

// relocateLossOwed is relocateLoss for a claim owed for owedLong or more.
// Research's pretraining gangs checkpoint every 30 minutes: for half of
// each interval a gang with one or two GPUs on every node kept an owed
// 8-GPU fine-tune out (seed 1 of the default scenario at 408,122 s: 640 s
// owed, until the gang's next checkpoint). Alone it cut owed time but met
// no more seeds; with maxMoves 24, see there.
const (
	relocateLossOwed = 30 * time.Minute
	owedLong         = time.Minute
)

// lossAllowed is the work a job relocated for j may lose.
func (s *Scheduler) lossAllowed(c *cycle, j *Job) time.Duration {
	if s.owedFor(c, j, owedLong) {
		return relocateLossOwed
	}
	return relocateLoss
}

// relocatable says whether v, which j may not evict, may be evicted for j
// to start again at once elsewhere: work on whole GPUs, all its tasks (a
// gang restarts whole from its checkpoint), checkpointed within
// lossAllowed, of a lower class than j's or of j's class and another
// team (not production: a service is not restarted for another). Its
// team keeps what it is owed (the claim's plan finds it room on other
// nodes, and it is within its guarantee, so it goes first when it queues
// again); it loses its grace period and the work since its checkpoint.
// Without this, one 1-GPU experiment within its team's guarantee on each
// node keeps an 8-GPU fine-tune that its team is owed out for hours while
// whole GPUs sit idle on other nodes (docs/mixed.md). Gangs of the
// claim's class were added later: one GPU of research's pretraining gangs
// on each node did the same to ads' fine-tunes (both batch). On the
// default scenario: violations 397k → 317k team-s on seeds 1-144 and
// 410k → 334k on 145-288; production p95 ≤ 30 s on 111 seeds (105) and
// 112 (113).
func (s *Scheduler) relocatable(c *cycle, j, v *Job) bool {
	if !s.cfg.Relocate || v.Phase != Running || v.Spec.Class > j.Spec.Class {
		return false
	}
	if v.Spec.Class == j.Spec.Class && (v.Spec.Team == j.Spec.Team || v.Spec.Class == workload.Production) {
		return false
	}
	if c.in.Now-v.Checkpoint > s.lossAllowed(c, j) || preemptedThisCycle(c, v) {
		return false
	}
	for _, a := range v.Placed {
		if a == nil {
			return false
		}
		for _, g := range a.Grants {
			if g.Slice != nil {
				return false
			}
		}
	}
	return true
}

// relocates says whether some of victims are there to be relocated (j
// may not simply evict them). A node that only relocation frees is
// consolidate's too: the victim search leaves such jobs alone. Before,
// consolidate took a node only when a replica moved off it, and an 8-GPU
// fine-tune owed to its team passed over a node that held nothing but
// another team's checkpointed experiments (seed 1): seeds 1-144 of the
// default scenario, 709k team-s of guarantee violations, 660k with.
func (s *Scheduler) relocates(c *cycle, j *Job, victims []*Job) bool {
	for _, v := range victims {
		if !s.eligible(c, j, v) {
			return true
		}
	}
	return false
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

// roomForGang is roomElsewhere for a gang that j relocates: each task
// that finds no room beside those placed before it gets room from victims
// j may evict anyway on another node; nil when some task gets none. Seed
// 467 of the default scenario at 499,276 s: research's pretraining gang,
// within research's guarantee, held two GPUs on each of four nodes; ads'
// 8-GPU fine-tunes, owed, could relocate it but found it no room, and
// waited 40 minutes while search's borrowed services held the rest.
func (s *Scheduler) roomForGang(c *cycle, st *cluster.State, j *Job, reqs []*engine.Request, where func(*cluster.Node) bool, taken []*Job, tasks []taskOf) []*Job {
	t := st.Clone()
	var vs []*Job
	for _, r := range reqs {
		a, err := s.placer.PlaceIn(t, r, where)
		if err != nil {
			more := s.roomElsewhere(c, t, j, []*engine.Request{r}, where, slices.Concat(taken, vs), tasks)
			if len(more) == 0 || slices.ContainsFunc(more, func(x *Job) bool { return release(t, x) != nil }) {
				return nil
			}
			vs = append(vs, more...)
			s.wholeIdle(c, t, "")
			if a, err = s.placer.PlaceIn(t, r, where); err != nil {
				return nil
			}
		}
		if t.Allocate(a) != nil {
			return nil
		}
	}
	return vs
}
