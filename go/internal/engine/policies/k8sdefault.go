package policies

import (
	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/workload"
)

// K8sDefault is what stock Kubernetes with the NVIDIA device plugin does:
//   - GPUs are opaque integers: a share or a memory profile takes one whole
//     GPU;
//   - no MIG awareness: a MIG request takes an instance that already
//     exists (the device plugin advertises them), never creates one;
//   - the default scheduler's NodeResourcesLeastAllocated score on CPU and
//     memory, which spreads work:
//     score = (⌊(C−c)·100/C⌋ + ⌊(M−m)·100/M⌋) / 2, with c, m in use after
//     placement. Range 0..100.
func K8sDefault() engine.Policy {
	return engine.Policy{
		Name:     "k8s-default",
		Rewriter: wholeGPUs{},
		Filters:  []engine.Filter{existingSlices{}},
		Scorer:   leastAllocated{},
		Picker:   existingSlices{},
	}
}

type wholeGPUs struct{}

func (wholeGPUs) Rewrite(r *engine.Request) *engine.Request {
	if r.Kind != workload.Fraction && r.Kind != workload.MemoryProfile {
		return r
	}
	t := r.Task
	t.GPU = workload.Demand{Kind: workload.WholeGPUs, Count: 1, Models: t.GPU.Models}
	nr, err := engine.NewRequest(t, 0)
	if err != nil {
		return r // cannot happen: a whole GPU is always a valid demand
	}
	return nr
}

// existingSlices admits a MIG request only where a free instance of its
// profile already exists, and picks the first one.
type existingSlices struct{}

func (existingSlices) Name() string { return "existing-mig-instances" }

func (existingSlices) Filter(n *cluster.Node, r *engine.Request) (bool, engine.Reason) {
	if r.Kind != workload.MIGProfile {
		return true, engine.Reason{}
	}
	if _, ok := firstFreeSlice(n, r); ok {
		return true, engine.Reason{}
	}
	return false, engine.Reason{Filter: "existing-mig-instances", Code: engine.CodeMIG}
}

func (existingSlices) Pick(n *cluster.Node, r *engine.Request, h engine.Hint, rng *random.Rand) ([]cluster.Grant, bool) {
	if r.Kind != workload.MIGProfile {
		return engine.DefaultPicker{}.Pick(n, r, h, rng)
	}
	g, ok := firstFreeSlice(n, r)
	return []cluster.Grant{g}, ok
}

func firstFreeSlice(n *cluster.Node, r *engine.Request) (cluster.Grant, bool) {
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if !g.MIG || g.Cordoned() || !r.AllowsModel(g.Model) {
			continue
		}
		for _, s := range g.Slices() {
			if s.Task == "" && s.Profile == r.Profile {
				p := s.Placement
				return cluster.Grant{GPU: i, Slice: &p}, true
			}
		}
	}
	return cluster.Grant{}, false
}

type leastAllocated struct{}

func (leastAllocated) Name() string { return "least-allocated" }

func (leastAllocated) Score(n *cluster.Node, r *engine.Request) (int64, engine.Hint) {
	return (leastFree(n.CPUMilli, n.CPUUsed()+r.CPUMilli) + leastFree(n.MemoryMiB, n.MemUsed()+r.MemMiB)) / 2, engine.Hint{}
}

func leastFree(capacity, used int64) int64 {
	if capacity == 0 || used > capacity {
		return 0
	}
	return (capacity - used) * 100 / capacity
}
