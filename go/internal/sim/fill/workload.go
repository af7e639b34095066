// Package fill is the fill experiment of the FGD paper (ATC'23, "Beware
// of Fragmentation"), as its simulator runs it on the Alibaba GPU 2023
// trace: pods arrive one by one and never leave, a pod that does not fit
// is dropped, and the GPU allocation rate is recorded against the arrived
// workload. shared/reference/fgd-protocol.md is the specification; the
// section numbers in comments refer to it.
package fill

import (
	"fmt"
	"sort"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/trace"
	"partita.dev/partita/internal/workload"
)

// Pod is one arriving pod of the experiment.
type Pod struct {
	Task     workload.Task
	GPUMilli int64      // num_gpu × gpu_milli: what it adds to the arrived total
	shape    frag.Shape // with host memory
}

// podOf converts a trace row (§2): a pod asks for num_gpu GPUs at
// gpu_milli each; it is a share only when it asks for one GPU below 1000.
func podOf(p trace.Pod, name string) Pod {
	milli := min(p.GPUMilli, 1000)
	t := workload.Task{Name: name, CPUMilli: p.CPUMilli, MemoryMiB: p.MemoryMiB}
	shape := frag.Shape{CPUMilli: p.CPUMilli, MemMiB: p.MemoryMiB}
	switch {
	case p.NumGPU == 0:
		t.GPU = workload.Demand{Kind: workload.NoGPU}
	case p.NumGPU == 1 && milli < 1000:
		t.GPU = workload.Demand{Kind: workload.Fraction, Milli: int(milli), Models: p.GPUSpec}
	default:
		t.GPU = workload.Demand{Kind: workload.WholeGPUs, Count: p.NumGPU, Models: p.GPUSpec}
	}
	if p.NumGPU > 0 {
		// The spec is ignored for CPU-only pods (§2), so it is not part of
		// their shape either.
		shape = frag.Shape{CPUMilli: p.CPUMilli, MemMiB: p.MemoryMiB, Milli: int(milli), Num: p.NumGPU, Spec: p.GPUSpecRaw}
	}
	return Pod{Task: t, GPUMilli: int64(p.NumGPU) * milli, shape: shape}
}

// Typical is the expected workload FGD and partita plan for (§4 "Typical
// pods"): computed once from the original trace, before any tuning or
// shuffling.
func Typical(pods []trace.Pod) *frag.Distribution {
	return frag.Typicals(frag.WithoutMemory(Shapes(pods)), frag.DefaultThreshold, canonical)
}

// Shapes are the original trace's requests, host memory included: the
// request distribution a policy may know in advance.
func Shapes(pods []trace.Pod) []frag.Shape {
	shapes := make([]frag.Shape, len(pods))
	for i, p := range pods {
		shapes[i] = podOf(p, p.Name).shape
	}
	return shapes
}

func canonical(name string) string { return gpu.Lookup(name).Name }

// Nodes builds the cluster (§1): each node's CPU, memory and GPUs of its
// model. ranks gives each node's tie-break rank (§3.4).
func Nodes(rows []trace.Node, ranks []int) (*cluster.State, error) {
	nodes := make([]*cluster.Node, len(rows))
	for i, r := range rows {
		n, err := cluster.BuildNode(cluster.NodeSpec{
			Name: r.Name, CPUMilli: r.CPUMilli, MemoryMiB: r.MemoryMiB,
			GPUModel: r.Model, GPUs: r.GPUs,
		})
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", r.Name, r.Line, err)
		}
		n.Rank = i
		if ranks != nil {
			n.Rank = ranks[i]
		}
		nodes[i] = n
	}
	return cluster.New(nodes)
}

// Arrivals builds the arrival sequence of one seed (§3): the pods sorted by
// name then shuffled, then sampled up (with replacement, from the sorted
// list) or trimmed down until their GPU demand is tune × the cluster's
// GPUs. It draws in the published simulator's order (shuffle, then the
// tuning draws; the node ranks come next, in Run), but from the project's
// generator, not Go's math/rand: the shuffles are not the published ones,
// and fidelity to the published medians is statistical (docs/fill.md).
func Arrivals(rows []trace.Pod, clusterMilli int64, tune float64, rng *random.Rand) []Pod {
	sorted := make([]Pod, len(rows))
	for i, r := range rows {
		sorted[i] = podOf(r, r.Name)
	}
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Task.Name < sorted[j].Task.Name })
	pods := append([]Pod(nil), sorted...)
	rng.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })

	var total int64
	for _, p := range pods {
		total += p.GPUMilli
	}
	target := tune * float64(clusterMilli)
	switch {
	case tune <= 0 || float64(total) == target:
	case float64(total) > target:
		// tuneDownPods: drop random pods of the current list.
		for float64(total) > target && len(pods) > 0 {
			i := rng.Intn(len(pods))
			total -= pods[i].GPUMilli
			pods = append(pods[:i], pods[i+1:]...)
		}
	default:
		// tuneUpPods: append copies drawn with replacement; it stops at the
		// first draw whose per-GPU share (not its total) would cross the
		// target, so multi-GPU pods may overshoot, as in the original.
		for i := 0; ; i++ {
			p := sorted[rng.Intn(len(sorted))]
			perGPU := p.shape.Milli
			if float64(total+int64(perGPU)) > target {
				break
			}
			p.Task.Name = fmt.Sprintf("%s-tuned-%d", p.Task.Name, i)
			total += p.GPUMilli
			pods = append(pods, p)
		}
	}
	return pods
}
