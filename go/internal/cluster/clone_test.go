package cluster

import (
	"strings"
	"testing"
)

// mutation is one successful change to busyWorld, named for failure
// messages, with the node it changes.
type mutation struct {
	name string
	node string
	do   func(s *State) error
}

// mutations lists a successful change of every kind busyWorld allows.
func mutations() []mutation {
	return []mutation{
		{"allocates a share", "v100", func(s *State) error {
			return s.Allocate(task("new").on("v100").cpu(100).memory(10).share(0, 100).assignment())
		}},
		{"allocates whole GPUs", "v100", func(s *State) error {
			return s.Allocate(task("new").on("v100").whole(4).whole(5).assignment())
		}},
		{"allocates CPU only", "cpu", func(s *State) error {
			return s.Allocate(task("new").on("cpu").cpu(1000).memory(1000).assignment())
		}},
		{"takes a free instance", "h100", func(s *State) error {
			return s.Allocate(task("new").on("h100").instance(0, "1g.10gb+me@4").assignment())
		}},
		{"creates an instance", "h100", func(s *State) error {
			return s.Allocate(task("new").on("h100").instance(1, "1g.10gb@3").assignment())
		}},
		{"releases a share", "v100", func(s *State) error { _, err := s.Release("v100", "holder"); return err }},
		{"releases an instance", "h100", func(s *State) error { _, err := s.Release("h100", "inst"); return err }},
		{"sets a layout", "h100", func(s *State) error { return s.SetLayout("h100", 1, mustLayout("7g.80gb@0")) }},
		{"sets the same layout again", "h100", func(s *State) error {
			return s.SetLayout("h100", 0, mustLayout("3g.40gb@0,1g.10gb+me@4"))
		}},
		{"turns MIG off", "h100", func(s *State) error { return s.SetMIG("h100", 1, false) }},
		{"turns MIG on again", "h100", func(s *State) error { return s.SetMIG("h100", 1, true) }},
	}
}

func TestMutatingACloneLeavesTheOriginal(t *testing.T) {
	copies := []struct {
		name string
		copy func(*State) *State
	}{{"Clone", (*State).Clone}, {"Scratch", (*State).Scratch}}
	for _, cp := range copies {
		for _, m := range mutations() {
			t.Run(cp.name+"/"+m.name, func(t *testing.T) {
				s := busyWorld(t)
				original := takeSnapshot(s)
				c := cp.copy(s)
				if got := describe(c); got != original.text {
					t.Fatalf("a fresh copy differs from its original:\n%s\nvs\n%s", got, original.text)
				}
				if err := m.do(c); err != nil {
					t.Fatal(err)
				}
				original.same(t, s, "changing the copy")
				if describe(c) == original.text {
					t.Fatal("the mutation did not change the copy")
				}
				mustCheck(t, c)
				checkGens(t, original, c, m.node)
			})
		}
	}
}

func TestMutatingTheOriginalLeavesAClone(t *testing.T) {
	for _, m := range mutations() {
		t.Run(m.name, func(t *testing.T) {
			s := busyWorld(t)
			c := s.Clone()
			clone := takeSnapshot(c)
			if err := m.do(s); err != nil {
				t.Fatal(err)
			}
			clone.same(t, c, "changing the original")
			if describe(s) == clone.text {
				t.Fatal("the mutation did not change the original")
			}
			mustCheck(t, s)
			checkGens(t, clone, s, m.node)
		})
	}
}

func TestTheOriginalOfAScratchKeepsItsNodes(t *testing.T) {
	// Where a Clone takes the original's nodes from it (its next change
	// copies the node: TestMutatingTheOriginalLeavesAClone), a Scratch
	// does not: the original changes its node in place, which the
	// scratch, used only while the original does not change, then sees.
	for _, m := range mutations() {
		t.Run(m.name, func(t *testing.T) {
			s := busyWorld(t)
			before := s.NodeByName(m.node)
			c := s.Scratch()
			if err := m.do(s); err != nil {
				t.Fatal(err)
			}
			if s.NodeByName(m.node) != before {
				t.Fatalf("node %s was copied: the scratch took it from its original", m.node)
			}
			if c.NodeByName(m.node) != before {
				t.Fatalf("the scratch copy's node %s is not the original's", m.node)
			}
		})
	}
}

// checkGens fails unless, compared with the snapshot, the changed node has
// a new, higher Gen and a fresh copy, and every other node kept both.
func checkGens(t *testing.T, before snapshot, after *State, changed string) {
	t.Helper()
	for i, n := range nodePointers(after) {
		old := before.nodes[i]
		if n.Name != changed {
			if n != old || n.Gen() != old.Gen() {
				t.Fatalf("untouched node %s: Gen %d -> %d, copied %t", n.Name, old.Gen(), n.Gen(), n != old)
			}
			continue
		}
		if n == old {
			t.Fatalf("changed node %s was changed in place, under the other State", n.Name)
		}
		if n.Gen() <= old.Gen() {
			t.Fatalf("changed node %s: Gen %d -> %d, want a new, higher one", n.Name, old.Gen(), n.Gen())
		}
	}
}

func TestBothSidesOfACloneChangeIndependently(t *testing.T) {
	s := busyWorld(t)
	c := s.Clone()
	allocate(t, s, task("left").on("v100").share(1, 600))
	allocate(t, c, task("right").on("v100").share(1, 700))
	if _, err := c.Release("h100", "inst"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLayout("h100", 1, mustLayout("3g.40gb@0")); err != nil {
		t.Fatal(err)
	}

	sv, cv := s.NodeByName("v100"), c.NodeByName("v100")
	if sv.GPUs[1].Used() != 600 || cv.GPUs[1].Used() != 700 {
		t.Fatalf("gpu 1 used %d and %d, want 600 in the original and 700 in the clone", sv.GPUs[1].Used(), cv.GPUs[1].Used())
	}
	if _, ok := sv.Task("right"); ok {
		t.Fatal("the clone's task appeared in the original")
	}
	if _, ok := cv.Task("left"); ok {
		t.Fatal("the original's task appeared in the clone")
	}
	if _, ok := s.NodeByName("h100").Task("inst"); !ok {
		t.Fatal("releasing in the clone released in the original")
	}
	if got := c.NodeByName("h100").GPUs[1].Layout().String(); got != "" {
		t.Fatalf("the original's layout reached the clone: %q", got)
	}
	if sv.Gen() == cv.Gen() {
		t.Fatalf("two different versions of v100 share Gen %d", sv.Gen())
	}
	if s.NodeByName("cpu") != c.NodeByName("cpu") {
		t.Fatal("the untouched node was copied")
	}
	mustCheck(t, s)
	mustCheck(t, c)
}

func TestCloneOfACloneIsIndependentOfBoth(t *testing.T) {
	s := busyWorld(t)
	c1 := s.Clone()
	allocate(t, c1, task("one").on("v100").share(2, 100))
	c2 := c1.Clone()
	snapS, snap1 := takeSnapshot(s), takeSnapshot(c1)
	allocate(t, c2, task("two").on("v100").share(2, 200))
	snapS.same(t, s, "changing the grandchild")
	snap1.same(t, c1, "changing the grandchild")

	snap2 := takeSnapshot(c2)
	allocate(t, c1, task("three").on("v100").share(3, 300))
	snapS.same(t, s, "changing the child")
	snap2.same(t, c2, "changing the child")

	snap1 = takeSnapshot(c1)
	allocate(t, s, task("four").on("v100").share(4, 400))
	snap1.same(t, c1, "changing the parent")
	snap2.same(t, c2, "changing the parent")
}

func TestEveryMutationOfOneStateChangesGen(t *testing.T) {
	s := busyWorld(t)
	seen := map[uint64]bool{}
	for _, g := range gens(s) {
		seen[g] = true
	}
	// Apply the mutations one after the other where they still succeed.
	order := []string{
		"allocates a share", "releases a share", "releases an instance", "sets a layout",
		"turns MIG off", "turns MIG on again", "creates an instance", "allocates CPU only",
	}
	for _, name := range order {
		m := mutationNamed(t, name)
		before := nodePointers(s)
		beforeGens := gens(s)
		if err := m.do(s); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		for i, n := range nodePointers(s) {
			if n.Name == m.node {
				if seen[n.Gen()] {
					t.Fatalf("%s: node %s got Gen %d, which a state already had", m.name, n.Name, n.Gen())
				}
				seen[n.Gen()] = true
				if n != before[i] {
					t.Fatalf("%s: an owned node was copied", m.name)
				}
				continue
			}
			if n.Gen() != beforeGens[i] {
				t.Fatalf("%s: untouched node %s changed Gen", m.name, n.Name)
			}
		}
	}
	mustCheck(t, s)
}

func mutationNamed(t *testing.T, name string) mutation {
	t.Helper()
	for _, m := range mutations() {
		if m.name == name {
			return m
		}
	}
	t.Fatalf("no mutation %q", name)
	return mutation{}
}

func TestAGPUGrowingInACloneLeavesItsNeighbours(t *testing.T) {
	// A cloned node keeps its GPUs' holders and instances in one array
	// each: a GPU that grows must not write over the next GPU's part.
	s := busyWorld(t)
	allocate(t, s, task("one").on("v100").share(1, 200), task("two").on("v100").share(2, 300))
	if err := s.SetLayout("h100", 1, mustLayout("1g.10gb@0,1g.10gb@1")); err != nil {
		t.Fatal(err)
	}
	c := s.Clone()
	allocate(t, c, task("grow").on("v100").share(1, 100)) // mutable: the node is copied
	original := takeSnapshot(c)
	for i := 0; i < 3; i++ {
		allocate(t, c, task("more"+string(rune('a'+i))).on("v100").share(0, 100))
		allocate(t, c, task("inst"+string(rune('a'+i))).on("h100").instance(0, []string{"1g.10gb+me@4", "1g.10gb@5", "1g.10gb@6"}[i]))
	}
	mustCheck(t, c)
	v := c.NodeByName("v100")
	if got := holderNames(v.GPUs[1].Holders()); got != "one grow" {
		t.Fatalf("gpu 1 of the clone holds %q after gpu 0 grew, want %q", got, "one grow")
	}
	if got := holderNames(v.GPUs[2].Holders()); got != "two" {
		t.Fatalf("gpu 2 of the clone holds %q after gpu 0 grew, want %q", got, "two")
	}
	if got := c.NodeByName("h100").GPUs[1].Layout().String(); got != "1g.10gb@0,1g.10gb@1" {
		t.Fatalf("gpu 1 of h100 in the clone has layout %q after gpu 0 grew", got)
	}
	if describe(c) == original.text {
		t.Fatal("the allocations did not change the clone")
	}
	if _, ok := s.NodeByName("v100").Task("morea"); ok {
		t.Fatal("the clone's task appeared in the original")
	}
}

func holderNames(hs []Hold) string {
	var names []string
	for _, h := range hs {
		names = append(names, h.Task)
	}
	return strings.Join(names, " ")
}
