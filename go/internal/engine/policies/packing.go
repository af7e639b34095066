package policies

import (
	"sort"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
)

// GPUPacking fills shared GPUs first, then partly used nodes, then empty
// nodes (the FGD protocol's GpuPacking, getPackingScore):
//   - a node with every GPU free: max(33 − G, G);
//   - taking GPUs in ascending order of what is left, if a fully free GPU
//     must be used: max(50 − fully free GPUs used, 33);
//   - otherwise: max(100 − ⌊Σ⌊left×100/1000⌋ / 10⌋, 50).
//
// CPU-only tasks score 0.
func GPUPacking() engine.Policy {
	return engine.Policy{Name: "gpu-packing", Scorer: packing{}}
}

type packing struct{}

func (packing) Name() string { return "gpu-packing" }

func (packing) Score(n *cluster.Node, r *engine.Request) (int64, engine.Hint) {
	milli := r.Milli
	num := 1
	switch {
	case r.GPUMilli() == 0:
		return 0, engine.Hint{}
	case !r.IsFractional():
		milli, num = 1000, r.Count
	}
	var buf [16]int
	left := gpuLeft(n, buf[:0])
	free := 0
	for _, l := range left {
		if l == 1000 {
			free++
		}
	}
	if free == len(left) {
		return int64(max(33-free, free)), engine.Hint{}
	}
	order := make([]int, len(left))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return left[order[a]] < left[order[b]] })
	freeUsed, pct := 0, 0
	for _, i := range order {
		if num == 0 {
			break
		}
		if left[i] >= milli {
			num--
			pct += left[i] * 100 / 1000
			if left[i] == 1000 {
				freeUsed++
			}
		}
	}
	if freeUsed > 0 {
		return int64(max(50-freeUsed, 33)), engine.Hint{}
	}
	return int64(max(100-pct/10, 50)), engine.Hint{}
}
