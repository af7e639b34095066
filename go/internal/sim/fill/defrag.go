package fill

import (
	"sort"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/workload"
)

// Defragmentation: beyond the protocol. A real cluster can move a
// checkpointed share to another GPU; the FGD protocol never moves anything.
// In this mode, when a pod fits nowhere, the world looks for the node where
// moving the fewest placed shares (at most maxMoves) makes room, moves them
// where the policy puts them, and places the pod. Nothing is moved unless
// every mover finds a new home, so a failed attempt changes nothing.
const maxMoves = 3

// maxFruitless stops the search after that many failed attempts in a row:
// in the fill protocol nothing is ever released, so once moves stop
// helping they keep not helping, and each attempt scans the cluster.
const maxFruitless = 200

// makeRoom returns the pod's assignment after moving shares, or false.
func (w *world) makeRoom(p Pod) (cluster.Assignment, bool) {
	if p.GPUMilli == 0 || w.fruitless >= maxFruitless {
		return cluster.Assignment{}, false
	}
	w.fruitless++
	r, err := w.placer.Request(p.Task)
	if err != nil {
		return cluster.Assignment{}, false
	}
	for _, plan := range w.movePlans(r) {
		if a, trial, ok := w.tryMoves(p, r, plan); ok {
			w.fruitless = 0
			w.st = trial
			w.res.Moves += len(plan.movers)
			for i := range w.nodeFrag {
				w.refreshFrag(i)
			}
			// allocate() will apply the pod's assignment; take it back off
			// the trial so it is applied exactly once.
			if _, err := w.st.Release(a.Node, a.Task); err != nil {
				return cluster.Assignment{}, false
			}
			return a, true
		}
	}
	return cluster.Assignment{}, false
}

// movePlan is a node and the shares to move off it.
type movePlan struct {
	node   string
	movers []cluster.Assignment
}

// movePlans lists candidate plans, fewest moves first: for a share, the
// smallest shares of one GPU that, once gone, leave room for it; for whole
// GPUs, the shares on the node's least-used GPUs.
func (w *world) movePlans(r *engine.Request) []movePlan {
	var plans []movePlan
	for i := 0; i < w.st.Len(); i++ {
		n := w.st.Node(i)
		if len(n.GPUs) == 0 || !r.AllowsModel(n.GPUs[0].Model) {
			continue
		}
		var plan []cluster.Assignment
		if r.Kind == workload.Fraction {
			plan = w.shareMovers(n, r)
		} else if r.Kind == workload.WholeGPUs {
			plan = w.wholeMovers(n, r)
		}
		if len(plan) > 0 && len(plan) <= maxMoves {
			plans = append(plans, movePlan{node: n.Name, movers: plan})
		}
	}
	sort.SliceStable(plans, func(a, b int) bool { return len(plans[a].movers) < len(plans[b].movers) })
	if len(plans) > 8 {
		plans = plans[:8]
	}
	return plans
}

// shareMovers plans room for a share on n: the smallest shares of one GPU
// until it has room, then the most CPU-hungry shares elsewhere on the node
// until CPU and memory suffice.
func (w *world) shareMovers(n *cluster.Node, r *engine.Request) []cluster.Assignment {
	byGPU := sharesByGPU(n)
	var best []cluster.Assignment
	for g := range n.GPUs {
		gpu := &n.GPUs[g]
		if gpu.MIG || gpu.Cordoned() || gpu.Free()+sumMilli(byGPU[g]) < r.Milli {
			continue
		}
		holders := append([]cluster.Assignment(nil), byGPU[g]...)
		sort.SliceStable(holders, func(a, b int) bool { return holders[a].Grants[0].Milli < holders[b].Grants[0].Milli })
		free, cpu, mem := gpu.Free(), n.CPUFree(), n.MemFree()
		var plan []cluster.Assignment
		for _, h := range holders {
			if free >= r.Milli || len(plan) > maxMoves {
				break
			}
			plan = append(plan, h)
			free, cpu, mem = free+h.Grants[0].Milli, cpu+h.CPUMilli, mem+h.MemoryMiB
		}
		var others []cluster.Assignment
		for k, sh := range byGPU {
			if k != g {
				others = append(others, sh...)
			}
		}
		sort.SliceStable(others, func(a, b int) bool { return others[a].CPUMilli > others[b].CPUMilli })
		for _, h := range others {
			if cpu >= r.CPUMilli && mem >= r.MemMiB || len(plan) > maxMoves {
				break
			}
			plan = append(plan, h)
			cpu, mem = cpu+h.CPUMilli, mem+h.MemoryMiB
		}
		ok := free >= r.Milli && cpu >= r.CPUMilli && mem >= r.MemMiB
		if ok && len(plan) > 0 && len(plan) <= maxMoves && (best == nil || len(plan) < len(best)) {
			best = plan
		}
	}
	return best
}

// sharesByGPU lists the share assignments of n by GPU, in one pass.
func sharesByGPU(n *cluster.Node) map[int][]cluster.Assignment {
	out := map[int][]cluster.Assignment{}
	for _, a := range n.Tasks() {
		if len(a.Grants) == 1 && a.Grants[0].Slice == nil && a.Grants[0].Milli < 1000 {
			out[a.Grants[0].GPU] = append(out[a.Grants[0].GPU], a)
		}
	}
	return out
}

func (w *world) wholeMovers(n *cluster.Node, r *engine.Request) []cluster.Assignment {
	type gpuLoad struct {
		index  int
		shares []cluster.Assignment
	}
	var loads []gpuLoad
	byGPU := sharesByGPU(n)
	for g := range n.GPUs {
		gpu := &n.GPUs[g]
		if gpu.MIG || gpu.Cordoned() {
			continue
		}
		sh := byGPU[g]
		if gpu.Used() != sumMilli(sh) {
			continue // a whole-GPU task is there; it does not move
		}
		loads = append(loads, gpuLoad{g, sh})
	}
	if len(loads) < r.Count {
		return nil
	}
	sort.SliceStable(loads, func(a, b int) bool { return len(loads[a].shares) < len(loads[b].shares) })
	var plan []cluster.Assignment
	cpu, mem := n.CPUFree(), n.MemFree()
	for _, l := range loads[:r.Count] {
		for _, h := range l.shares {
			plan = append(plan, h)
			cpu += h.CPUMilli
			mem += h.MemoryMiB
		}
	}
	if cpu < r.CPUMilli || mem < r.MemMiB {
		return nil
	}
	return plan
}

func sumMilli(as []cluster.Assignment) int {
	total := 0
	for _, a := range as {
		total += a.Grants[0].Milli
	}
	return total
}

// tryMoves carries out a plan on a clone: take the movers off, place the
// pod on the node, then find the movers new homes anywhere.
func (w *world) tryMoves(p Pod, r *engine.Request, plan movePlan) (cluster.Assignment, *cluster.State, bool) {
	trial := w.st.Clone()
	for _, m := range plan.movers {
		if _, err := trial.Release(m.Node, m.Task); err != nil {
			return cluster.Assignment{}, nil, false
		}
	}
	a, err := w.placer.PlaceIn(trial, r, func(n *cluster.Node) bool { return n.Name == plan.node })
	if err != nil || trial.Allocate(a) != nil {
		return cluster.Assignment{}, nil, false
	}
	for _, m := range plan.movers {
		t, ok := w.tasks[m.Task]
		if !ok {
			return cluster.Assignment{}, nil, false
		}
		na, err := w.placer.Place(trial, t)
		if err != nil || trial.Allocate(na) != nil {
			return cluster.Assignment{}, nil, false
		}
	}
	return a, trial, true
}
