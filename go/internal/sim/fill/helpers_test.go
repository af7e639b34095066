package fill

import (
	"strings"
	"testing"

	"partita.dev/partita/internal/trace"
)

// This file holds the fixtures of the package's tests: named builders for
// trace rows, and loaders for the small CSV fixtures in testdata/.
//
// testdata/nodes_small.csv: five nodes, 26 GPUs (2 P100, 8 V100M32, 4 T4,
// 8 G2, 4 G3), so 26,000 GPU milli.
// testdata/pods_small.csv: 36 pods asking for 31,530 GPU milli in all:
// shares (some with gpu_spec), whole GPUs, multi-GPU pods (2, 4, 8) and
// CPU-only pods (one with a gpu_spec, which the protocol ignores).
const (
	smallNodesFile    = "testdata/nodes_small.csv"
	smallPodsFile     = "testdata/pods_small.csv"
	smallClusterMilli = 26000
	smallPodsMilli    = 31530
)

func smallNodes(t testing.TB) []trace.Node {
	t.Helper()
	nodes, err := trace.ReadNodesFile(smallNodesFile)
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

func smallPods(t testing.TB) []trace.Pod {
	t.Helper()
	pods, err := trace.ReadPodsFile(smallPodsFile)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

func smallInput(t testing.TB) Input {
	t.Helper()
	return Input{Nodes: smallNodes(t), Pods: smallPods(t)}
}

// podBuilder builds a trace row: pod("p").cpu(4000).share(500).spec("T4").
// A new pod asks for 1 CPU, 1 GiB and no GPU.
type podBuilder struct{ p trace.Pod }

func pod(name string) *podBuilder {
	return &podBuilder{p: trace.Pod{Name: name, CPUMilli: 1000, MemoryMiB: 1024}}
}

func (b *podBuilder) cpu(milli int64) *podBuilder { b.p.CPUMilli = milli; return b }
func (b *podBuilder) memory(mib int64) *podBuilder {
	b.p.MemoryMiB = mib
	return b
}

// share asks for milli of one GPU (1000 is a whole GPU).
func (b *podBuilder) share(milli int64) *podBuilder {
	b.p.NumGPU, b.p.GPUMilli = 1, milli
	return b
}

// gpus asks for count whole GPUs.
func (b *podBuilder) gpus(count int) *podBuilder {
	b.p.NumGPU, b.p.GPUMilli = count, 1000
	return b
}

// spec sets gpu_spec as the reader would: raw as written, the list
// de-duplicated.
func (b *podBuilder) spec(raw string) *podBuilder {
	b.p.GPUSpecRaw = raw
	b.p.GPUSpec = nil
	for _, m := range strings.Split(raw, "|") {
		if m != "" && !contains(b.p.GPUSpec, m) {
			b.p.GPUSpec = append(b.p.GPUSpec, m)
		}
	}
	return b
}

func (b *podBuilder) build() trace.Pod { return b.p }

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func pods(bs ...*podBuilder) []trace.Pod {
	out := make([]trace.Pod, len(bs))
	for i, b := range bs {
		out[i] = b.build()
	}
	return out
}

// nodeBuilder builds a trace node row: node("n1").gpus(2, "V100M16").
// A new node has 32 CPUs, 64 GiB and no GPU.
type nodeBuilder struct{ n trace.Node }

func node(name string) *nodeBuilder {
	return &nodeBuilder{n: trace.Node{Name: name, CPUMilli: 32000, MemoryMiB: 65536}}
}

func (b *nodeBuilder) gpus(count int, model string) *nodeBuilder {
	b.n.GPUs, b.n.Model = count, model
	return b
}

func (b *nodeBuilder) line(l int) *nodeBuilder { b.n.Line = l; return b }

func nodes(bs ...*nodeBuilder) []trace.Node {
	out := make([]trace.Node, len(bs))
	for i, b := range bs {
		out[i] = b.n
	}
	return out
}

// names lists the pods' task names in order.
func names(ps []Pod) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Task.Name
	}
	return out
}

func totalMilli(ps []Pod) int64 {
	var s int64
	for _, p := range ps {
		s += p.GPUMilli
	}
	return s
}
