package cluster

import (
	"fmt"
	"slices"
	"testing"

	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/random"
)

// The property tests drive a small mixed cluster with random, often invalid,
// operations from fixed seeds, and check after every step that the State
// keeps its invariants and agrees with a shadow model kept beside it.

// mixedWorld is the cluster the property tests run on.
func mixedWorld(t testing.TB) *State {
	t.Helper()
	return newState(t,
		node("v100-a").cpu(16000).memory(65536).gpus(8, "V100-32GB").nvlink(LinkPairs),
		node("v100-b").cpu(16000).memory(65536).gpus(8, "V100-16GB"),
		node("h100-a").cpu(16000).memory(65536).gpus(4, "H100-80GB").mig().layout("3g.40gb@0,2g.20gb@4,1g.10gb@6"),
		node("h100-b").cpu(16000).memory(65536).gpus(4, "H100-80GB").mig(),
		node("cpu").cpu(8000).memory(16384),
	)
}

type opKind int

const (
	opAllocate opKind = iota
	opRelease
	opSetLayout
	opSetMIG
	opClone
	opKinds
)

var opNames = [opKinds]string{"Allocate", "Release", "SetLayout", "SetMIG", "Clone"}

// op is one random operation on a State.
type op struct {
	kind   opKind
	a      Assignment // Allocate
	node   string     // Release, SetLayout, SetMIG
	task   string     // Release
	gpu    int        // SetLayout, SetMIG
	layout gpu.Layout // SetLayout
	on     bool       // SetMIG
}

func (o op) String() string {
	switch o.kind {
	case opAllocate:
		return fmt.Sprintf("Allocate(%s on %s, cpu %d, memory %d, grants %s)", o.a.Task, o.a.Node, o.a.CPUMilli, o.a.MemoryMiB, grantsText(o.a.Grants))
	case opRelease:
		return fmt.Sprintf("Release(%s, %s)", o.node, o.task)
	case opSetLayout:
		return fmt.Sprintf("SetLayout(%s, %d, %q)", o.node, o.gpu, o.layout)
	case opSetMIG:
		return fmt.Sprintf("SetMIG(%s, %d, %t)", o.node, o.gpu, o.on)
	}
	return "Clone()"
}

// apply runs a mutating op; it returns the node it targets.
func (o op) apply(s *State) (string, error) {
	switch o.kind {
	case opAllocate:
		return o.a.Node, s.Allocate(o.a)
	case opRelease:
		_, err := s.Release(o.node, o.task)
		return o.node, err
	case opSetLayout:
		return o.node, s.SetLayout(o.node, o.gpu, o.layout)
	case opSetMIG:
		return o.node, s.SetMIG(o.node, o.gpu, o.on)
	}
	panic("apply: " + o.String())
}

// gen makes random operations against the State it is given.
type gen struct {
	r       *random.Rand
	h100    *gpu.Model
	carving []gpu.Layout // every maximal H100 layout
	tasks   []string
}

func newGen(seed int64) *gen {
	h100 := gpu.Lookup("H100-80GB")
	g := &gen{r: random.New(seed), h100: h100, carving: h100.MaximalLayouts()}
	for i := range 12 {
		g.tasks = append(g.tasks, fmt.Sprintf("t%d", i))
	}
	return g
}

func (g *gen) chance(percent int) bool { return g.r.Intn(100) < percent }

func (g *gen) nodeName(s *State) string {
	if g.chance(4) {
		return "ghost"
	}
	return s.Node(g.r.Intn(s.Len())).Name
}

func (g *gen) taskName() string {
	if g.chance(3) {
		return ""
	}
	return g.tasks[g.r.Intn(len(g.tasks))]
}

// gpuIndex is mostly a real GPU of n, sometimes one past either end.
func (g *gen) gpuIndex(n *Node) int {
	count := 0
	if n != nil {
		count = len(n.GPUs)
	}
	if count == 0 || g.chance(8) {
		return g.r.Intn(count+2) - 1
	}
	return g.r.Intn(count)
}

func (g *gen) amount(free, most int64) int64 {
	switch {
	case g.chance(5):
		return -1 - int64(g.r.Intn(100))
	case g.chance(5):
		return free + 1 + int64(g.r.Intn(100))
	case g.chance(30):
		return 0
	}
	return int64(g.r.Intn(int(most + 1)))
}

func (g *gen) next(s *State) op {
	switch p := g.r.Intn(100); {
	case p < 50:
		return g.allocate(s)
	case p < 75:
		return op{kind: opRelease, node: g.nodeName(s), task: g.taskName()}
	case p < 87:
		return g.setLayout(s)
	case p < 95:
		name := g.nodeName(s)
		return op{kind: opSetMIG, node: name, gpu: g.gpuIndex(s.NodeByName(name)), on: g.chance(60)}
	}
	return op{kind: opClone}
}

func (g *gen) allocate(s *State) op {
	name := g.nodeName(s)
	n := s.NodeByName(name)
	a := Assignment{Task: g.taskName(), Node: name}
	if n != nil {
		a.CPUMilli = g.amount(n.CPUFree(), n.CPUMilli/4)
		a.MemoryMiB = g.amount(n.MemFree(), n.MemoryMiB/4)
	}
	for range g.r.Intn(4) {
		i := g.gpuIndex(n)
		if n == nil || i < 0 || i >= len(n.GPUs) {
			a.Grants = append(a.Grants, Grant{GPU: i, Milli: 1 + g.r.Intn(1000)})
			continue
		}
		a.Grants = append(a.Grants, g.grant(&n.GPUs[i]))
	}
	return op{kind: opAllocate, a: a}
}

// grant asks for something on d: usually the right kind, often too much.
func (g *gen) grant(d *GPU) Grant {
	wantSlice := d.MIG != g.chance(15)
	if !wantSlice {
		milli := []int{1 + g.r.Intn(1000), 1000, d.Free(), d.Free() + 1, 0, -5, 1001, 250, 500}[g.r.Intn(9)]
		return Grant{GPU: d.Index, Milli: milli}
	}
	var p gpu.Placement
	switch free := freeSlices(d); {
	case len(free) > 0 && g.chance(40):
		p = free[g.r.Intn(len(free))]
	case g.chance(60) && d.Model.MIG:
		prof := d.Model.Profiles[g.r.Intn(len(d.Model.Profiles))]
		if places, err := d.Model.FreePlacements(d.Layout(), prof.Name); err == nil && len(places) > 0 {
			p = places[g.r.Intn(len(places))]
		} else {
			p = gpu.Placement{Profile: prof.Name, Start: g.r.Intn(8)}
		}
	default:
		names := []string{"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "9g.99gb", "1g.18gb"}
		p = gpu.Placement{Profile: names[g.r.Intn(len(names))], Start: g.r.Intn(10) - 1}
	}
	return Grant{GPU: d.Index, Slice: &p}
}

func freeSlices(d *GPU) []gpu.Placement {
	var out []gpu.Placement
	for _, sl := range d.Slices() {
		if sl.Task == "" {
			out = append(out, sl.Placement)
		}
	}
	return out
}

func (g *gen) setLayout(s *State) op {
	name := g.nodeName(s)
	n := s.NodeByName(name)
	o := op{kind: opSetLayout, node: name, gpu: g.gpuIndex(n)}
	var d *GPU
	if n != nil && o.gpu >= 0 && o.gpu < len(n.GPUs) {
		d = &n.GPUs[o.gpu]
	}
	switch {
	case d != nil && g.chance(50):
		// Keep the held instances and add what still fits: usually valid.
		for _, sl := range d.Slices() {
			if sl.Task != "" {
				o.layout = append(o.layout, sl.Placement)
			}
		}
		for range g.r.Intn(4) {
			prof := g.h100.Profiles[g.r.Intn(len(g.h100.Profiles))]
			if places, err := g.h100.FreePlacements(o.layout, prof.Name); err == nil && len(places) > 0 {
				o.layout = append(o.layout, places[g.r.Intn(len(places))])
			}
		}
	case g.chance(50):
		// A whole carving: valid, but it may drop held instances.
		o.layout = slices.Clone(g.carving[g.r.Intn(len(g.carving))])
	default:
		// Anything at all.
		for range g.r.Intn(4) {
			prof := g.h100.Profiles[g.r.Intn(len(g.h100.Profiles))]
			o.layout = append(o.layout, gpu.Placement{Profile: prof.Name, Start: g.r.Intn(8)})
		}
	}
	return o
}

// shadow is what the tests believe each node runs: node -> task -> assignment.
type shadow map[string]map[string]Assignment

func newShadow(s *State) shadow {
	sh := shadow{}
	for i := 0; i < s.Len(); i++ {
		sh[s.Node(i).Name] = map[string]Assignment{}
	}
	return sh
}

// record updates the shadow after a successful mutating op.
func (sh shadow) record(o op) {
	switch o.kind {
	case opAllocate:
		sh[o.a.Node][o.a.Task] = o.a
	case opRelease:
		delete(sh[o.node], o.task)
	}
}

// checkInvariants fails the test unless s keeps every invariant and agrees
// with the shadow.
func checkInvariants(t *testing.T, s *State, sh shadow, after op) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("after %s: %s\n%s", after, fmt.Sprintf(format, args...), describe(s))
	}
	if err := s.Check(); err != nil {
		fail("Check: %v", err)
	}
	for i := 0; i < s.Len(); i++ {
		n := s.Node(i)
		want := sh[n.Name]
		if len(n.Tasks()) != len(want) {
			fail("node %s runs %d tasks, the shadow %d", n.Name, len(n.Tasks()), len(want))
		}
		var cpu, mem int64
		for _, a := range want {
			cpu += a.CPUMilli
			mem += a.MemoryMiB
			if _, ok := n.Task(a.Task); !ok {
				fail("node %s lost task %s", n.Name, a.Task)
			}
		}
		if cpu != n.CPUUsed() || mem != n.MemUsed() {
			fail("node %s: %d/%d cpu/memory in use, its tasks hold %d/%d", n.Name, n.CPUUsed(), n.MemUsed(), cpu, mem)
		}
		if n.CPUFree() < 0 || n.MemFree() < 0 {
			fail("node %s over-committed: %d/%d free", n.Name, n.CPUFree(), n.MemFree())
		}
		for k := range n.GPUs {
			checkGPU(t, &n.GPUs[k], want, fail)
		}
	}
}

func checkGPU(t *testing.T, d *GPU, tasks map[string]Assignment, fail func(string, ...any)) {
	t.Helper()
	held, holders := 0, 0
	owners := map[gpu.Placement]string{}
	for _, a := range tasks {
		for _, gr := range a.Grants {
			switch {
			case gr.GPU != d.Index:
			case gr.Slice != nil:
				owners[*gr.Slice] = a.Task
			default:
				held += gr.Milli
			}
		}
	}
	for _, h := range d.Holders() {
		holders += h.Milli
	}
	if d.Used() != held || holders != held || d.Used() < 0 || d.Used() > 1000 {
		fail("gpu %d: used %d, holders %d, tasks hold %d (must be equal, 0..1000)", d.Index, d.Used(), holders, held)
	}
	if !d.MIG {
		if len(d.Slices()) != 0 || len(owners) != 0 || d.Free() != 1000-d.Used() {
			fail("gpu %d with MIG off: instances %v, owners %v, free %d", d.Index, d.Layout(), owners, d.Free())
		}
		return
	}
	if !d.Model.MIG {
		fail("gpu %d: MIG is on, but model %s does not support it", d.Index, d.Model.Name)
	}
	if d.Used() != 0 || d.Free() != 0 {
		fail("gpu %d with MIG on: %d milli used, %d free", d.Index, d.Used(), d.Free())
	}
	if err := d.Model.Validate(d.Layout()); err != nil {
		fail("gpu %d: invalid layout %s: %v", d.Index, d.Layout(), err)
	}
	var mask uint8
	compute := 0
	for _, sl := range d.Slices() {
		p, _ := d.Model.Profile(sl.Profile)
		mask |= p.Mask(sl.Start)
		compute += p.Compute
		if owners[sl.Placement] != sl.Task {
			fail("gpu %d: instance %s held by %q, tasks say %q", d.Index, sl.Placement, sl.Task, owners[sl.Placement])
		}
		delete(owners, sl.Placement)
	}
	if len(owners) != 0 {
		fail("gpu %d: tasks hold missing instances %v", d.Index, owners)
	}
	if d.FreeMemorySlices() != ^mask || d.FreeComputeSlices() != gpu.ComputeSlices-compute {
		fail("gpu %d: free memory %08b, compute %d; the layout leaves %08b, %d",
			d.Index, d.FreeMemorySlices(), d.FreeComputeSlices(), ^mask, gpu.ComputeSlices-compute)
	}
}

// frozen is a State the walk left behind at a Clone, with its description
// then: nothing done since may change it.
type frozen struct {
	s    *State
	text string
	step int
}

func TestRandomOperationsKeepEveryInvariant(t *testing.T) {
	seeds, steps := int64(40), 300
	if testing.Short() {
		seeds = 8
	}
	var ok, refused [opKinds]int
	var created, taken, shared int // successful Allocates by what they got
	for seed := int64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			s := mixedWorld(t)
			sh := newShadow(s)
			g := newGen(seed)
			var left []frozen
			for step := range steps {
				o := g.next(s)
				if o.kind == opClone {
					c := s.Clone()
					if describe(c) != describe(s) {
						t.Fatalf("step %d: a clone differs from its original", step)
					}
					// Walk on with either side; the other must stay as it is.
					if g.chance(50) {
						s, c = c, s
					}
					left = append(left, frozen{c, describe(c), step})
					if len(left) > 4 {
						left = left[1:]
					}
					ok[opClone]++
					continue
				}
				before, beforeGens := describe(s), gens(s)
				nc, nt, ns := grantKinds(s, o)
				target, err := o.apply(s)
				if err != nil {
					refused[o.kind]++
					if got := describe(s); got != before {
						t.Fatalf("step %d: refused %s (%v) changed the State:\nbefore:\n%s\nafter:\n%s", step, o, err, before, got)
					}
				} else {
					ok[o.kind]++
					created, taken, shared = created+nc, taken+nt, shared+ns
					sh.record(o)
					checkGenChange(t, s, beforeGens, target, o)
				}
				checkInvariants(t, s, sh, o)
				for _, f := range left {
					if got := describe(f.s); got != f.text {
						t.Fatalf("step %d: %s changed the State left at the clone of step %d:\nthen:\n%s\nnow:\n%s", step, o, f.step, f.text, got)
					}
				}
			}
		})
	}
	// The walk must exercise both outcomes of every operation, or it proves
	// little.
	least := 2 * int(seeds)
	if created < least || taken < least || shared < least {
		t.Errorf("successful grants: %d new instances, %d existing instances, %d shares; want at least %d of each", created, taken, shared, least)
	}
	for k := range opKinds {
		if ok[k] < least || (k != opClone && refused[k] < least) {
			t.Errorf("%s: %d succeeded, %d refused; the generator should give at least %d of each", opNames[k], ok[k], refused[k], least)
		}
	}
	t.Logf("succeeded %v, refused %v (Allocate, Release, SetLayout, SetMIG, Clone); grants: %d new instances, %d existing, %d shares", ok, refused, created, taken, shared)
}

// grantKinds counts the grants of an Allocate that would create an
// instance, take an existing one, or take milli.
func grantKinds(s *State, o op) (created, taken, shared int) {
	n := s.NodeByName(o.a.Node)
	if o.kind != opAllocate || n == nil {
		return 0, 0, 0
	}
	for _, g := range o.a.Grants {
		switch {
		case g.GPU < 0 || g.GPU >= len(n.GPUs):
		case g.Slice == nil:
			shared++
		case n.GPUs[g.GPU].sliceAt(*g.Slice) >= 0:
			taken++
		default:
			created++
		}
	}
	return created, taken, shared
}

// checkGenChange fails unless the target node got a new Gen and no other did.
func checkGenChange(t *testing.T, s *State, before []uint64, target string, o op) {
	t.Helper()
	for i, g := range gens(s) {
		n := s.Node(i)
		if n.Name == target && g <= before[i] {
			t.Fatalf("%s: node %s kept Gen %d", o, n.Name, g)
		}
		if n.Name != target && g != before[i] {
			t.Fatalf("%s: untouched node %s changed Gen %d -> %d", o, n.Name, before[i], g)
		}
	}
}

func TestMutatingACloneNeverChangesTheOriginal(t *testing.T) {
	for seed := int64(100); seed < 140; seed++ {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			g := newGen(seed)
			s := mixedWorld(t)
			// Put some work on the original first.
			for range 100 {
				if o := g.next(s); o.kind != opClone {
					_, _ = o.apply(s)
				}
			}
			original := describe(s)
			c := s.Clone()
			for range 200 {
				if o := g.next(c); o.kind != opClone {
					_, _ = o.apply(c)
				}
				if got := describe(s); got != original {
					t.Fatalf("changing the clone changed the original:\nbefore:\n%s\nafter:\n%s", original, got)
				}
			}
			mustCheck(t, c)

			// And the other way round.
			cloneText := describe(c)
			for range 200 {
				if o := g.next(s); o.kind != opClone {
					_, _ = o.apply(s)
				}
				if got := describe(c); got != cloneText {
					t.Fatalf("changing the original changed the clone:\nbefore:\n%s\nafter:\n%s", cloneText, got)
				}
			}
			mustCheck(t, s)
		})
	}
}
