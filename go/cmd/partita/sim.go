package main

import (
	"flag"
	"fmt"
	"io"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/engine/policies"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/workload"
)

func init() {
	register("sim", "a small demo: place a mixed inference and training workload with several policies", runSim)
}

// demoCluster is two HGX H100 nodes with MIG on, split as the GPU
// Operator's "all-balanced" config does (2×1g.10gb, 2g.20gb, 3g.40gb),
// and two A100 nodes without MIG: the shape of a small mixed cluster.
func demoCluster() (*cluster.State, error) {
	balanced := gpu.Layout{{Profile: "3g.40gb", Start: 4}, {Profile: "2g.20gb", Start: 0}, {Profile: "1g.10gb", Start: 2}, {Profile: "1g.10gb", Start: 3}}
	specs := []cluster.NodeSpec{
		{Name: "h100-a", CPUMilli: 192000, MemoryMiB: 2 << 20, GPUModel: "H100-80GB", GPUs: 8, MIG: true, Layout: balanced},
		{Name: "h100-b", CPUMilli: 192000, MemoryMiB: 2 << 20, GPUModel: "H100-80GB", GPUs: 8, MIG: true, Layout: balanced},
		{Name: "a100-a", CPUMilli: 128000, MemoryMiB: 1 << 20, GPUModel: "A100-80GB", GPUs: 8},
		{Name: "a100-b", CPUMilli: 128000, MemoryMiB: 1 << 20, GPUModel: "A100-80GB", GPUs: 8},
	}
	nodes := make([]*cluster.Node, len(specs))
	for i, s := range specs {
		n, err := cluster.BuildNode(s)
		if err != nil {
			return nil, err
		}
		nodes[i] = n
	}
	return cluster.New(nodes)
}

// demoTasks is a day's mix: LLM and embedding services sized by memory,
// notebooks on shares, and training on whole GPUs.
func demoTasks() []workload.Task {
	var ts []workload.Task
	add := func(n int, name string, cpu, memMiB int64, d workload.Demand) {
		for i := 0; i < n; i++ {
			ts = append(ts, workload.Task{Name: fmt.Sprintf("%s-%d", name, i), CPUMilli: cpu, MemoryMiB: memMiB, GPU: d})
		}
	}
	const gib = 1024
	// Peak GPU memory: weights (params × 2 bytes in bf16) plus KV cache.
	add(4, "llm-7b", 8000, 32*gib, workload.Demand{Kind: workload.MemoryProfile, PeakMemoryMiB: 14*gib + 6*gib, Compute: 0.25})
	add(2, "llm-13b", 8000, 48*gib, workload.Demand{Kind: workload.MemoryProfile, PeakMemoryMiB: 26*gib + 8*gib, Compute: 0.40})
	add(8, "embed", 4000, 8*gib, workload.Demand{Kind: workload.MemoryProfile, PeakMemoryMiB: 3 * gib, Compute: 0.10})
	add(4, "rerank", 4000, 8*gib, workload.Demand{Kind: workload.MemoryProfile, PeakMemoryMiB: 5 * gib, Compute: 0.10})
	add(4, "notebook", 4000, 16*gib, workload.Demand{Kind: workload.Fraction, Milli: 250})
	add(2, "finetune", 32000, 256*gib, workload.Demand{Kind: workload.WholeGPUs, Count: 4})
	add(1, "pretrain", 64000, 512*gib, workload.Demand{Kind: workload.WholeGPUs, Count: 8})
	add(2, "llm-70b", 16000, 128*gib, workload.Demand{Kind: workload.WholeGPUs, Count: 2})
	return ts
}

func runSim(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	policyList := fs.String("policies", "k8s-default,partita", "policies to compare")
	show := fs.String("show", "partita", "policy whose placement is drawn")
	seed := fs.Int64("seed", 1, "random seed")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	tasks := demoTasks()
	shapes := make([]frag.Shape, 0, len(tasks))
	for _, t := range tasks {
		if t.GPU.Kind == workload.Fraction {
			shapes = append(shapes, frag.Shape{CPUMilli: t.CPUMilli, MemMiB: t.MemoryMiB, Milli: t.GPU.Milli, Num: 1})
		} else if t.GPU.Kind == workload.WholeGPUs {
			shapes = append(shapes, frag.Shape{CPUMilli: t.CPUMilli, MemMiB: t.MemoryMiB, Milli: 1000, Num: t.GPU.Count})
		}
	}
	fmt.Fprintf(stdout, "Demo cluster: 2 nodes of 8 H100-80GB (MIG all-balanced) and 2 of 8 A100-80GB; %d tasks arrive in order.\n\n", len(tasks))
	fmt.Fprintf(stdout, "%-12s %7s %9s %13s %12s\n", "policy", "placed", "waiting", "GPUs held", "GPUs needed")
	var drawn *cluster.State
	for _, name := range splitList(*policyList) {
		st, err := demoCluster()
		if err != nil {
			fmt.Fprintln(stderr, "sim:", err)
			return 1
		}
		cfg := policies.ConfigFor(st, frag.Typicals(shapes, frag.DefaultThreshold, nil))
		cfg.Shapes = shapes
		pol, err := policies.New(name, cfg)
		if err != nil {
			fmt.Fprintln(stderr, "sim:", err)
			return 2
		}
		placer := engine.NewPlacer(pol, random.New(*seed))
		placed, held, needed := 0, 0.0, 0.0
		for _, t := range tasks {
			a, err := placer.Place(st, t)
			if err != nil {
				continue
			}
			if err := st.Allocate(a); err != nil {
				fmt.Fprintln(stderr, "sim:", err)
				return 1
			}
			placed++
			h, n := heldAndNeeded(st.NodeByName(a.Node), a, t)
			held += h
			needed += n
		}
		fmt.Fprintf(stdout, "%-12s %7d %9d %13.2f %12.2f\n", name, placed, len(tasks)-placed, held, needed)
		if name == *show {
			drawn = st
		}
	}
	if drawn != nil {
		fmt.Fprintf(stdout, "\nWhere %s put them:\n", *show)
		for i := 0; i < drawn.Len(); i++ {
			fmt.Fprint(stdout, drawn.Node(i).Describe())
		}
	}
	fmt.Fprintln(stdout, "\nGPUs held counts what the placement takes; GPUs needed what the tasks use (a MIG slice or share counts its compute share).")
	return 0
}

// heldAndNeeded returns the GPU a task holds and the GPU it needs, in GPUs.
func heldAndNeeded(n *cluster.Node, a cluster.Assignment, t workload.Task) (held, needed float64) {
	held = float64(a.GPUMilli(n)) / 1000
	switch t.GPU.Kind {
	case workload.WholeGPUs:
		needed = float64(t.GPU.Count)
	case workload.Fraction:
		needed = float64(t.GPU.Milli) / 1000
	case workload.MemoryProfile:
		needed = t.GPU.Compute
		if m := n.Model(); m != nil && m.MemoryMiB > 0 {
			needed = max(needed, float64(t.GPU.PeakMemoryMiB)/float64(m.MemoryMiB))
		}
	}
	return held, needed
}
