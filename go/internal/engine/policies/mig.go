package policies

import (
	"sync"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/gpu"
)

// MIG placement, in order of what matters:
//  1. a free instance of the profile that already exists: no
//     reconfiguration, no delay;
//  2. a GPU already split and in use rather than an idle one, and a node
//     already in use rather than an idle one: whole GPUs and whole nodes
//     stay free for training;
//  3. a node with more GPUs in MIG mode: MIG gathers on few nodes;
//  4. the place that keeps the GPU most flexible: the most maximal layouts
//     of the model still reachable from the new layout;
//  5. the tightest fit: the fewest free memory slices left.
const (
	migBand      = int64(1e12)
	migExisting  = int64(1e10)
	migBusyGPU   = int64(1e9)
	migBusyNode  = int64(1e8)
	migNodeUnit  = int64(1e6) // per MIG GPU on the node (at most 64)
	migFlexUnit  = int64(1e3) // per maximal layout (at most ~80)
	migTightUnit = int64(10)
)

// migChoice rates the best MIG place for r on n. ok is false when r takes
// no MIG instance on any GPU of n.
func migChoice(n *cluster.Node, r *engine.Request) (engine.Hint, int64, bool) {
	nodeBusy := len(n.Tasks()) > 0
	migGPUs := 0
	for i := range n.GPUs {
		if n.GPUs[i].MIG {
			migGPUs++
		}
	}
	best, hint, found := int64(0), engine.Hint{}, false
	var layout, grown gpu.Layout // reused: flexibility keeps neither
	for i := range n.GPUs {
		g := &n.GPUs[i]
		p := r.ProfileOn(g)
		if p == nil {
			continue
		}
		layout = g.AppendLayout(layout[:0])
		for _, pl := range engine.SlicesFor(g, p) {
			sc := migBand
			next := layout
			if containsPlacement(layout, pl) {
				sc += migExisting
			} else {
				grown = append(append(grown[:0], layout...), pl)
				next = grown
			}
			if !g.Idle() {
				sc += migBusyGPU
			}
			if nodeBusy {
				sc += migBusyNode
			}
			sc += migNodeUnit * int64(min(migGPUs, 64))
			sc += migFlexUnit * int64(flexibility(g.Model, next))
			sc += migTightUnit * int64(8-freeSlices(g.FreeMemorySlices()&^p.Mask(pl.Start)))
			if !found || sc > best {
				best, hint, found = sc, engine.Hint{Set: true, GPU: i, Slice: pl}, true
			}
		}
	}
	return hint, best, found
}

func containsPlacement(l gpu.Layout, p gpu.Placement) bool {
	for _, q := range l {
		if q == p {
			return true
		}
	}
	return false
}

func freeSlices(mask uint8) int {
	c := 0
	for ; mask != 0; mask &= mask - 1 {
		c++
	}
	return c
}

var maximal sync.Map // model name -> []gpu.Layout

// flexibility counts the maximal layouts of m that contain every instance
// of l: how many ways the GPU can still be completed.
func flexibility(m *gpu.Model, l gpu.Layout) int {
	v, ok := maximal.Load(m.Name)
	if !ok {
		v, _ = maximal.LoadOrStore(m.Name, m.MaximalLayouts())
	}
	count := 0
	for _, full := range v.([]gpu.Layout) {
		all := true
		for _, p := range l {
			if !containsPlacement(full, p) {
				all = false
				break
			}
		}
		if all {
			count++
		}
	}
	return count
}
