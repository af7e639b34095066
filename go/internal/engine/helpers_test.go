package engine

import (
	"strings"
	"testing"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/workload"
)

// This file holds the fixtures of the engine's tests: named builders for
// nodes, tasks and what already runs on a node. Numbers in a test are
// always named by the builder method that takes them.

// nodeBuilder builds a node: node("n1").cpu(8000).gpus(4, "V100-16GB").rank(2).
type nodeBuilder struct {
	spec    cluster.NodeSpec
	rankSet bool
	rankVal int
}

// node starts a node with room for most tests (32 CPUs, 256 GiB) and no GPU.
func node(name string) *nodeBuilder {
	return &nodeBuilder{spec: cluster.NodeSpec{Name: name, CPUMilli: 32000, MemoryMiB: 256 * 1024}}
}

func (b *nodeBuilder) cpu(milli int64) *nodeBuilder  { b.spec.CPUMilli = milli; return b }
func (b *nodeBuilder) memory(mib int64) *nodeBuilder { b.spec.MemoryMiB = mib; return b }
func (b *nodeBuilder) mig() *nodeBuilder             { b.spec.MIG = true; return b }
func (b *nodeBuilder) rank(r int) *nodeBuilder       { b.rankSet, b.rankVal = true, r; return b }
func (b *nodeBuilder) gpus(count int, model string) *nodeBuilder {
	b.spec.GPUs, b.spec.GPUModel = count, model
	return b
}

// layout gives every GPU the MIG instances in text form ("1g.10gb@0,3g.40gb@4").
func (b *nodeBuilder) layout(text string) *nodeBuilder {
	l, err := gpu.ParseLayout(text)
	if err != nil {
		panic(err)
	}
	b.spec.Layout = l
	return b
}

func (b *nodeBuilder) build(t testing.TB) *cluster.Node {
	t.Helper()
	n, err := cluster.BuildNode(b.spec)
	if err != nil {
		t.Fatalf("BuildNode(%s): %v", b.spec.Name, err)
	}
	if b.rankSet {
		n.Rank = b.rankVal
	}
	return n
}

// world builds a State of the nodes, in order.
func world(t testing.TB, nodes ...*nodeBuilder) *cluster.State {
	t.Helper()
	built := make([]*cluster.Node, len(nodes))
	for i, b := range nodes {
		built[i] = b.build(t)
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

// gpuMemory asks for a memory profile: peak GPU memory and a compute share.
func (b *taskBuilder) gpuMemory(peakMiB int64, compute float64) *taskBuilder {
	b.t.GPU = workload.Demand{Kind: workload.MemoryProfile, PeakMemoryMiB: peakMiB, Compute: compute, Models: b.t.GPU.Models}
	return b
}
func (b *taskBuilder) on(models ...string) *taskBuilder { b.t.GPU.Models = models; return b }
func (b *taskBuilder) build() workload.Task             { return b.t }

// request prepares the task with no memory headroom, failing the test on a
// refusal.
func request(t testing.TB, b *taskBuilder) *Request {
	t.Helper()
	return requestWith(t, b, 0)
}

func requestWith(t testing.TB, b *taskBuilder, headroom float64) *Request {
	t.Helper()
	r, err := NewRequest(b.build(), headroom)
	if err != nil {
		t.Fatalf("NewRequest(%s): %v", b.t.Name, err)
	}
	return r
}

// running builds what already runs on a node: running("old").cpu(1000).share(0, 500).
type runningBuilder struct{ a cluster.Assignment }

func running(name string) *runningBuilder {
	return &runningBuilder{a: cluster.Assignment{Task: name}}
}

func (b *runningBuilder) cpu(milli int64) *runningBuilder  { b.a.CPUMilli = milli; return b }
func (b *runningBuilder) memory(mib int64) *runningBuilder { b.a.MemoryMiB = mib; return b }
func (b *runningBuilder) share(gpuIndex, milli int) *runningBuilder {
	b.a.Grants = append(b.a.Grants, cluster.Grant{GPU: gpuIndex, Milli: milli})
	return b
}

// instance holds the MIG instance "profile@start" of GPU gpuIndex.
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
