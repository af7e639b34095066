package cluster

import (
	"fmt"
	"strings"
	"testing"

	"partita.dev/partita/internal/gpu"
)

// This file holds the fixtures of the package's tests: named builders for
// node specs and assignments, and describe, the canonical text form of a
// State that tests compare before and after an operation.

// specBuilder builds a NodeSpec: node("n1").gpus(8, "V100-32GB").nvlink(LinkPairs).
type specBuilder struct{ s NodeSpec }

// node starts a spec for a node with room for most tests: 32 CPUs, 256 GiB.
func node(name string) *specBuilder {
	return &specBuilder{s: NodeSpec{Name: name, CPUMilli: 32000, MemoryMiB: 256 * 1024}}
}

func (b *specBuilder) cpu(milli int64) *specBuilder { b.s.CPUMilli = milli; return b }
func (b *specBuilder) memory(mib int64) *specBuilder {
	b.s.MemoryMiB = mib
	return b
}

func (b *specBuilder) gpus(count int, model string) *specBuilder {
	b.s.GPUs, b.s.GPUModel = count, model
	return b
}

func (b *specBuilder) mig() *specBuilder { b.s.MIG = true; return b }

// layout sets the initial MIG instances of every GPU from their text form.
func (b *specBuilder) layout(text string) *specBuilder {
	b.s.Layout = mustLayout(text)
	return b
}

func (b *specBuilder) nvlink(shape string) *specBuilder { b.s.NVLink = shape; return b }
func (b *specBuilder) tier(t Tier) *specBuilder         { b.s.Tier = t; return b }

func (b *specBuilder) label(key, value string) *specBuilder {
	if b.s.Labels == nil {
		b.s.Labels = map[string]string{}
	}
	b.s.Labels[key] = value
	return b
}

func (b *specBuilder) spec() NodeSpec { return b.s }

// build makes the node, failing the test on a bad spec.
func (b *specBuilder) build(t testing.TB) *Node {
	t.Helper()
	n, err := BuildNode(b.s)
	if err != nil {
		t.Fatalf("BuildNode(%s): %v", b.s.Name, err)
	}
	return n
}

// newState builds every node and a State of them.
func newState(t testing.TB, specs ...*specBuilder) *State {
	t.Helper()
	nodes := make([]*Node, len(specs))
	for i, b := range specs {
		nodes[i] = b.build(t)
	}
	s, err := New(nodes)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// mustLayout parses a fixture layout; a typo in a test is a programming error.
func mustLayout(text string) gpu.Layout {
	l, err := gpu.ParseLayout(text)
	if err != nil {
		panic(err)
	}
	return l
}

func mustPlacement(text string) gpu.Placement {
	p, err := gpu.ParsePlacement(text)
	if err != nil {
		panic(err)
	}
	return p
}

// taskBuilder builds an Assignment: task("t1").on("n1").cpu(1000).share(0, 500).
type taskBuilder struct{ a Assignment }

func task(name string) *taskBuilder { return &taskBuilder{a: Assignment{Task: name}} }

func (b *taskBuilder) on(node string) *taskBuilder   { b.a.Node = node; return b }
func (b *taskBuilder) cpu(milli int64) *taskBuilder  { b.a.CPUMilli = milli; return b }
func (b *taskBuilder) memory(mib int64) *taskBuilder { b.a.MemoryMiB = mib; return b }
func (b *taskBuilder) whole(index int) *taskBuilder  { return b.share(index, 1000) }
func (b *taskBuilder) assignment() Assignment        { return b.a }
func (b *taskBuilder) grant(g Grant) *taskBuilder    { b.a.Grants = append(b.a.Grants, g); return b }
func (b *taskBuilder) share(index, milli int) *taskBuilder {
	return b.grant(Grant{GPU: index, Milli: milli})
}

// instance asks for the MIG instance "profile@start" on GPU index.
func (b *taskBuilder) instance(index int, placement string) *taskBuilder {
	p := mustPlacement(placement)
	return b.grant(Grant{GPU: index, Slice: &p})
}

// allocate gives the tasks their assignments, failing the test on a refusal.
func allocate(t testing.TB, s *State, tasks ...*taskBuilder) {
	t.Helper()
	for _, b := range tasks {
		if err := s.Allocate(b.assignment()); err != nil {
			t.Fatalf("Allocate(%s): %v", b.a.Task, err)
		}
	}
}

// mustCheck fails the test when the State breaks an invariant.
func mustCheck(t testing.TB, s *State) {
	t.Helper()
	if err := s.Check(); err != nil {
		t.Fatalf("Check: %v\n%s", err, describe(s))
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

// describe is the canonical text of everything a State holds, exported or
// not, including each node's Gen: two States describe alike only when they
// are the same in every respect the package can observe.
func describe(s *State) string {
	var b strings.Builder
	for i := 0; i < s.Len(); i++ {
		describeNode(&b, s.Node(i))
	}
	return b.String()
}

func describeNode(b *strings.Builder, n *Node) {
	fmt.Fprintf(b, "node %s tier=%s topology=%+v rank=%d labels=%v gen=%d cpu=%d/%d memory=%d/%d\n",
		n.Name, n.Tier, n.Topology, n.Rank, n.Labels, n.gen, n.cpuUsed, n.CPUMilli, n.memUsed, n.MemoryMiB)
	for _, a := range n.tasks {
		fmt.Fprintf(b, "  task %s node=%s cpu=%d memory=%d grants=%s\n", a.Task, a.Node, a.CPUMilli, a.MemoryMiB, grantsText(a.Grants))
	}
	for i := range n.GPUs {
		g := &n.GPUs[i]
		fmt.Fprintf(b, "  gpu %d model=%s mig=%t link=%d used=%d holders=%v memmask=%08b compute=%d slices=[",
			g.Index, g.Model.Name, g.MIG, g.Link, g.used, g.holders, g.memMask, g.compute)
		for k, sl := range g.slices {
			if k > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(b, "%s:%q", sl.Placement, sl.Task)
		}
		b.WriteString("]\n")
	}
}

func grantsText(gs []Grant) string {
	parts := make([]string, len(gs))
	for i, g := range gs {
		if g.Slice != nil {
			parts[i] = fmt.Sprintf("%d:%s/%d", g.GPU, *g.Slice, g.Milli)
		} else {
			parts[i] = fmt.Sprintf("%d:%dm", g.GPU, g.Milli)
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// gens lists each node's Gen in order.
func gens(s *State) []uint64 {
	out := make([]uint64, s.Len())
	for i := range out {
		out[i] = s.Node(i).Gen()
	}
	return out
}

// nodePointers lists the State's node pointers, to tell whether an
// operation copied a node.
func nodePointers(s *State) []*Node {
	out := make([]*Node, s.Len())
	for i := range out {
		out[i] = s.Node(i)
	}
	return out
}

// snapshot records a State to compare after an operation that must not
// change it.
type snapshot struct {
	text  string
	check error
	nodes []*Node
}

func takeSnapshot(s *State) snapshot {
	return snapshot{text: describe(s), check: s.Check(), nodes: nodePointers(s)}
}

// same fails the test unless s still matches the snapshot: same Check
// result, same description (Gen included) and not one node copied.
func (snap snapshot) same(t testing.TB, s *State, what string) {
	t.Helper()
	if err := s.Check(); fmt.Sprint(err) != fmt.Sprint(snap.check) {
		t.Fatalf("%s: Check was %v, is %v", what, snap.check, err)
	}
	if got := describe(s); got != snap.text {
		t.Fatalf("%s changed the State:\nbefore:\n%s\nafter:\n%s", what, snap.text, got)
	}
	for i, n := range nodePointers(s) {
		if n != snap.nodes[i] {
			t.Fatalf("%s copied node %s", what, n.Name)
		}
	}
}
