package engine

import (
	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/workload"
)

// Accounting of GPU shares, shared by every world's utilization figures
// and reports (docs/metrics.md).

// GrantShare is the share of one GPU a grant holds: a whole or partial GPU
// by its milli, a MIG instance by the larger of its compute (of 7) and
// memory (of 8) slices.
func GrantShare(n *cluster.Node, g cluster.Grant) float64 {
	if g.Slice == nil {
		return float64(g.Milli) / 1000
	}
	p, err := n.GPUs[g.GPU].Model.Profile(g.Slice.Profile)
	if err != nil {
		return 0
	}
	return max(float64(p.Compute)/7, float64(p.Memory)/8)
}

// Need is the GPU a task needs, whatever it was given: whole GPUs count
// whole; a share its share; a MIG or memory profile the share (as
// GrantShare counts it) of the smallest MIG profile that holds it on the
// model it runs on.
func Need(n *cluster.Node, a cluster.Assignment, t workload.Task) float64 {
	switch t.GPU.Kind {
	case workload.WholeGPUs:
		return float64(t.GPU.Count)
	case workload.Fraction:
		return float64(t.GPU.Milli) / 1000
	case workload.NoGPU:
		return 0
	}
	var model *gpu.Model
	if len(a.Grants) > 0 {
		model = n.GPUs[a.Grants[0].GPU].Model
	} else if model = n.Model(); model == nil {
		return 0
	}
	var p *gpu.Profile
	var err error
	if t.GPU.Kind == workload.MIGProfile {
		p, err = model.Profile(t.GPU.Profile)
	} else if model.MIG {
		p, err = model.ProfileFor(t.GPU.PeakMemoryMiB, t.GPU.Compute, gpu.DefaultHeadroom)
	}
	if err == nil && p != nil {
		return max(float64(p.Compute)/7, float64(p.Memory)/8)
	}
	if model.MemoryMiB > 0 {
		return min(1, max(t.GPU.Compute, float64(t.GPU.PeakMemoryMiB)/float64(model.MemoryMiB)))
	}
	return t.GPU.Compute
}
