package policies_test

import (
	"strconv"
	"strings"
	"testing"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/engine/policies"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/workload"
)

// This file holds the fixtures of the policy tests: named builders for
// nodes, tasks, what runs on a node and the typical workload, and scoreOn,
// which runs one policy's filters and scorer on one node.

// nodeBuilder builds a node: node("n1").cpu(8000).gpus(4, "V100-16GB").
type nodeBuilder struct{ spec cluster.NodeSpec }

// node starts a node with the Alibaba cluster's largest CPU and memory
// (128 CPUs, 512 GiB) and no GPU.
func node(name string) *nodeBuilder {
	return &nodeBuilder{spec: cluster.NodeSpec{Name: name, CPUMilli: 128000, MemoryMiB: 512 * 1024}}
}

func (b *nodeBuilder) cpu(milli int64) *nodeBuilder  { b.spec.CPUMilli = milli; return b }
func (b *nodeBuilder) memory(mib int64) *nodeBuilder { b.spec.MemoryMiB = mib; return b }
func (b *nodeBuilder) mig() *nodeBuilder             { b.spec.MIG = true; return b }
func (b *nodeBuilder) gpus(count int, model string) *nodeBuilder {
	b.spec.GPUs, b.spec.GPUModel = count, model
	return b
}

// layout gives every GPU the MIG instances in text form ("1g.10gb@6").
func (b *nodeBuilder) layout(text string) *nodeBuilder {
	l, err := gpu.ParseLayout(text)
	if err != nil {
		panic(err)
	}
	b.spec.Layout = l
	return b
}

// world builds a State of the nodes, in order; ranks are positions.
func world(t testing.TB, nodes ...*nodeBuilder) *cluster.State {
	t.Helper()
	ranks := make([]int, len(nodes))
	for i := range ranks {
		ranks[i] = i
	}
	return rankedWorld(t, ranks, nodes...)
}

// rankedWorld builds a State of the nodes, in order, node i with ranks[i].
func rankedWorld(t testing.TB, ranks []int, nodes ...*nodeBuilder) *cluster.State {
	t.Helper()
	built := make([]*cluster.Node, len(nodes))
	for i, b := range nodes {
		n, err := cluster.BuildNode(b.spec)
		if err != nil {
			t.Fatalf("BuildNode(%s): %v", b.spec.Name, err)
		}
		n.Rank = ranks[i]
		built[i] = n
	}
	st, err := cluster.New(built)
	if err != nil {
		t.Fatalf("cluster.New: %v", err)
	}
	return st
}

// taskBuilder builds a task: task("t").cpu(1000).share(250).on("V100M16").
type taskBuilder struct{ t workload.Task }

func task(name string) *taskBuilder { return &taskBuilder{t: workload.Task{Name: name}} }

func (b *taskBuilder) cpu(milli int64) *taskBuilder  { b.t.CPUMilli = milli; return b }
func (b *taskBuilder) memory(mib int64) *taskBuilder { b.t.MemoryMiB = mib; return b }
func (b *taskBuilder) share(milli int) *taskBuilder {
	b.t.GPU = workload.Demand{Kind: workload.Fraction, Milli: milli, Models: b.t.GPU.Models}
	return b
}
func (b *taskBuilder) gpus(count int) *taskBuilder {
	b.t.GPU = workload.Demand{Kind: workload.WholeGPUs, Count: count, Models: b.t.GPU.Models}
	return b
}
func (b *taskBuilder) migProfile(name string) *taskBuilder {
	b.t.GPU = workload.Demand{Kind: workload.MIGProfile, Profile: name, Models: b.t.GPU.Models}
	return b
}
func (b *taskBuilder) gpuMemory(peakMiB int64, compute float64) *taskBuilder {
	b.t.GPU = workload.Demand{Kind: workload.MemoryProfile, PeakMemoryMiB: peakMiB, Compute: compute, Models: b.t.GPU.Models}
	return b
}
func (b *taskBuilder) on(models ...string) *taskBuilder { b.t.GPU.Models = models; return b }
func (b *taskBuilder) build() workload.Task             { return b.t }

// runningBuilder builds what already runs on a node: running("old").cpu(1000).share(0, 500).
type runningBuilder struct{ a cluster.Assignment }

func running(name string) *runningBuilder {
	return &runningBuilder{a: cluster.Assignment{Task: name}}
}

func (b *runningBuilder) cpu(milli int64) *runningBuilder { b.a.CPUMilli = milli; return b }
func (b *runningBuilder) share(gpuIndex, milli int) *runningBuilder {
	b.a.Grants = append(b.a.Grants, cluster.Grant{GPU: gpuIndex, Milli: milli})
	return b
}
func (b *runningBuilder) whole(gpuIndexes ...int) *runningBuilder {
	for _, i := range gpuIndexes {
		b.share(i, 1000)
	}
	return b
}
func (b *runningBuilder) instance(gpuIndex int, placement string) *runningBuilder {
	p, err := gpu.ParsePlacement(placement)
	if err != nil {
		panic(err)
	}
	b.a.Grants = append(b.a.Grants, cluster.Grant{GPU: gpuIndex, Slice: &p})
	return b
}

// allocateOn runs the tasks on the named node, failing the test on a refusal.
func allocateOn(t testing.TB, st *cluster.State, nodeName string, tasks ...*runningBuilder) {
	t.Helper()
	for _, b := range tasks {
		a := b.a
		a.Node = nodeName
		if err := st.Allocate(a); err != nil {
			t.Fatalf("Allocate(%s on %s): %v", a.Task, nodeName, err)
		}
	}
}

// alibabaNorms are the normalisers of the Alibaba cluster: 128 CPUs, 8 GPUs.
func alibabaNorms() policies.Config { return policiesConfig(128000, 8000) }

// shapeBuilder builds a typical task: shape().cpu(2000).share(500).
type shapeBuilder struct{ s frag.Shape }

func shape() *shapeBuilder { return &shapeBuilder{} }

func (b *shapeBuilder) cpu(milli int64) *shapeBuilder { b.s.CPUMilli = milli; return b }
func (b *shapeBuilder) share(milli int) *shapeBuilder { b.s.Milli, b.s.Num = milli, 1; return b }
func (b *shapeBuilder) gpus(n int) *shapeBuilder      { b.s.Milli, b.s.Num = 1000, n; return b }

// typical is a distribution of one copy of each shape: equal probabilities.
func typical(shapes ...*shapeBuilder) *frag.Distribution {
	ss := make([]frag.Shape, len(shapes))
	for i, b := range shapes {
		ss[i] = b.s
	}
	return frag.Typicals(ss, 1, canonical)
}

func canonical(name string) string { return gpu.Lookup(name).Name }

// mustPolicy builds the named policy, failing the test on an error.
func mustPolicy(t testing.TB, name string, c policies.Config) engine.Policy {
	t.Helper()
	p, err := policies.New(name, c)
	if err != nil {
		t.Fatalf("New(%s): %v", name, err)
	}
	return p
}

// scoreOn runs the policy's rewriter, the shared filter, its own filters
// and its scorer on node 0 of st; the node must pass the filters.
func scoreOn(t testing.TB, p engine.Policy, st *cluster.State, b *taskBuilder) (int64, engine.Hint) {
	t.Helper()
	r, err := engine.NewPlacer(p, random.New(1)).Request(b.build())
	if err != nil {
		t.Fatalf("Request(%s): %v", b.t.Name, err)
	}
	n := st.Node(0)
	for _, f := range append([]engine.Filter{engine.Fit{}}, p.Filters...) {
		if ok, why := f.Filter(n, r); !ok {
			t.Fatalf("filter %s refuses %s on %s: %v (%s)", f.Name(), b.t.Name, n.Name, why.Code, engine.Explain(n, r))
		}
	}
	return p.Scorer.Score(n, r)
}

// placeOne places a task with a fresh placer of the policy.
func placeOne(t testing.TB, p engine.Policy, st *cluster.State, b *taskBuilder) (cluster.Assignment, error) {
	t.Helper()
	return engine.NewPlacer(p, random.New(1)).Place(st, b.build())
}

// grantsText is the text form of a pick: "gpu:milli" or "gpu:profile@start".
func grantsText(gs []cluster.Grant) string {
	parts := make([]string, len(gs))
	for i, g := range gs {
		if g.Slice != nil {
			parts[i] = strconv.Itoa(g.GPU) + ":" + g.Slice.String()
		} else {
			parts[i] = strconv.Itoa(g.GPU) + ":" + strconv.Itoa(g.Milli)
		}
	}
	return strings.Join(parts, " ")
}

// wantErr fails unless err is non-nil and holds every substring.
func wantErr(t testing.TB, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", subs)
	}
	for _, sub := range subs {
		if !strings.Contains(err.Error(), sub) {
			t.Fatalf("error %q does not contain %q", err, sub)
		}
	}
}

// policiesConfig gives the dot-product and best-fit norms: the largest
// node's CPU and GPU milli.
func policiesConfig(normCPU int64, normGPU int) policies.Config {
	return policies.Config{NormCPU: normCPU, NormGPU: normGPU}
}

// policyNamed builds a policy that needs no typical workload.
func policyNamed(t testing.TB, name string) engine.Policy {
	t.Helper()
	return mustPolicy(t, name, alibabaNorms())
}
