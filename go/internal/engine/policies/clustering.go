package policies

import (
	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/workload"
)

// GPUClustering keeps tasks of one kind together (the FGD protocol's
// GpuClustering): a task's tag is "share" for a share of one GPU or its
// GPU count otherwise, and
//
//	score = b + ⌊25 × (8000 − gL) / 8000⌋
//
// where b is 75 if the node holds only GPU tasks of the same tag, 50 if it
// holds that tag among others, 25 if it holds no GPU task, 0 otherwise.
// 8000 is kept even for smaller nodes, as in the original. CPU-only tasks
// score 0 everywhere, so the tie rule places them.
func GPUClustering() engine.Policy {
	return engine.Policy{Name: "gpu-clustering", Scorer: clustering{}}
}

type clustering struct{}

func (clustering) Name() string { return "gpu-clustering" }

func (clustering) Score(n *cluster.Node, r *engine.Request) (int64, engine.Hint) {
	if r.Kind == workload.NoGPU {
		return 0, engine.Hint{}
	}
	want := requestTag(r)
	same, other := 0, 0
	for _, a := range n.Tasks() {
		if t := assignmentTag(a); t == 0 {
			continue
		} else if t == want {
			same++
		} else {
			other++
		}
	}
	var b int64
	switch {
	case same > 0 && other == 0:
		b = 75
	case same > 0:
		b = 50
	case other == 0:
		b = 25
	}
	return b + 25*int64(8000-n.GPUFreeMilli())/8000, engine.Hint{}
}

// Tags: 0 no GPU, -1 a share of one GPU, -2 a MIG instance (or a memory
// profile, which takes one where MIG is on), k for k whole GPUs.
func requestTag(r *engine.Request) int {
	switch r.Kind {
	case workload.WholeGPUs:
		return r.Count
	case workload.MIGProfile, workload.MemoryProfile:
		return -2
	}
	return -1
}

func assignmentTag(a cluster.Assignment) int {
	switch {
	case len(a.Grants) == 0:
		return 0
	case a.Grants[0].Slice != nil:
		return -2
	case len(a.Grants) == 1 && a.Grants[0].Milli < 1000:
		return -1
	}
	return len(a.Grants)
}
