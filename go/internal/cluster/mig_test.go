package cluster

import (
	"errors"
	"testing"
)

func TestSetLayoutReplacesFreeInstances(t *testing.T) {
	tests := []struct {
		name   string
		gpu    int
		layout string
		want   string // layout afterwards
		held   map[string]string
	}{
		{"fills an empty GPU", 1, "4g.40gb@0,3g.40gb@4", "4g.40gb@0,3g.40gb@4", nil},
		{"empties a GPU with nothing held", 1, "", "", nil},
		{"keeps the held instance and drops the free one", 0, "3g.40gb@0,2g.20gb@4,1g.10gb@6", "3g.40gb@0,2g.20gb@4,1g.10gb@6", map[string]string{"3g.40gb@0": "inst"}},
		{"keeps the held instance wherever the layout lists it", 0, "1g.20gb@6,3g.40gb@0,1g.10gb@4", "1g.20gb@6,3g.40gb@0,1g.10gb@4", map[string]string{"3g.40gb@0": "inst"}},
		{"keeps the held instance alone", 0, "3g.40gb@0", "3g.40gb@0", map[string]string{"3g.40gb@0": "inst"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := busyWorld(t)
			genBefore := s.NodeByName("h100").Gen()
			if err := s.SetLayout("h100", tt.gpu, mustLayout(tt.layout)); err != nil {
				t.Fatal(err)
			}
			n := s.NodeByName("h100")
			g := &n.GPUs[tt.gpu]
			if got := g.Layout().String(); got != tt.want {
				t.Fatalf("layout = %q, want %q", got, tt.want)
			}
			for _, sl := range g.Slices() {
				if want := tt.held[sl.Placement.String()]; sl.Task != want {
					t.Fatalf("instance %s held by %q, want %q", sl.Placement, sl.Task, want)
				}
			}
			if n.Gen() == genBefore {
				t.Fatal("SetLayout left the node's Gen as it was")
			}
			mustCheck(t, s)
			// Every new free instance can be taken, and only held ones are refused.
			for k, sl := range g.Slices() {
				name := "taker" + sl.Placement.String()
				err := s.Allocate(task(name).on("h100").instance(tt.gpu, sl.Placement.String()).assignment())
				if (err == nil) != (sl.Task == "") {
					t.Fatalf("instance %d (%s, held by %q): Allocate said %v", k, sl.Placement, sl.Task, err)
				}
			}
			mustCheck(t, s)
		})
	}
}

func TestSetLayoutCountsTheRoomLeft(t *testing.T) {
	s := busyWorld(t)
	if err := s.SetLayout("h100", 1, mustLayout("2g.20gb@0,1g.10gb@2")); err != nil {
		t.Fatal(err)
	}
	g := &s.NodeByName("h100").GPUs[1]
	if g.FreeMemorySlices() != 0b1111_1000 || g.FreeComputeSlices() != 4 {
		t.Fatalf("free memory %08b, compute %d; want 11111000, 4", g.FreeMemorySlices(), g.FreeComputeSlices())
	}
	// The new geometry binds: the old room is gone, the new room is open.
	if err := s.Allocate(task("a").on("h100").instance(1, "2g.20gb@2").assignment()); err == nil {
		t.Fatal("an instance overlapping the new layout was created")
	}
	allocate(t, s, task("b").on("h100").instance(1, "3g.40gb@4"))
	mustCheck(t, s)
}

func TestSetLayoutRefuses(t *testing.T) {
	tests := []struct {
		name     string
		node     string
		gpu      int
		layout   string
		want     []string
		notFound bool
	}{
		{"refuses an unknown node", "nope", 0, "", []string{`node "nope": not found`}, true},
		{"refuses a GPU past the last", "h100", 2, "", []string{"node h100: no GPU 2"}, false},
		{"refuses a negative GPU index", "h100", -1, "", []string{"node h100: no GPU -1"}, false},
		{"refuses a CPU-only node", "cpu", 0, "", []string{"node cpu: no GPU 0"}, false},
		{"refuses a GPU with MIG off", "v100", 1, "7g.80gb@0", []string{"node v100: GPU 1: MIG is off"}, false},
		{"refuses an instance at a start its profile may not use", "h100", 1, "4g.40gb@0,3g.40gb@2", []string{"node h100: GPU 1", "3g.40gb@2: start 2 not allowed"}, false},
		{"refuses overlapping instances", "h100", 1, "3g.40gb@0,4g.40gb@0", []string{"node h100: GPU 1", "4g.40gb@0 overlaps 3g.40gb@0"}, false},
		{"refuses a profile the model lacks", "h100", 1, "1g.18gb@0", []string{`unknown MIG profile "1g.18gb"`}, false},
		{"refuses two +me instances", "h100", 1, "1g.10gb+me@0,1g.10gb+me@1", []string{"at most one +me instance"}, false},
		{"refuses a whole-GPU instance in place of a held one", "h100", 0, "7g.80gb@0", []string{"node h100: GPU 0: new layout drops 3g.40gb@0, which inst is using"}, false},
		{"refuses a layout without a held instance", "h100", 0, "2g.20gb@0,2g.20gb@2,1g.10gb@4", []string{"node h100: GPU 0: new layout drops 3g.40gb@0, which inst is using"}, false},
		{"refuses moving a held instance", "h100", 0, "3g.40gb@4", []string{"new layout drops 3g.40gb@0, which inst is using"}, false},
		{"refuses changing a held instance's profile", "h100", 0, "4g.40gb@0", []string{"new layout drops 3g.40gb@0, which inst is using"}, false},
		{"refuses an empty layout under a held instance", "h100", 0, "", []string{"new layout drops 3g.40gb@0"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := busyWorld(t)
			before := takeSnapshot(s)
			err := s.SetLayout(tt.node, tt.gpu, mustLayout(tt.layout))
			wantErr(t, err, tt.want...)
			if errors.Is(err, ErrNotFound) != tt.notFound {
				t.Fatalf("errors.Is(%v, ErrNotFound) = %t, want %t", err, !tt.notFound, tt.notFound)
			}
			before.same(t, s, "a refused SetLayout")

			c := s.Clone()
			wantErr(t, c.SetLayout(tt.node, tt.gpu, mustLayout(tt.layout)), tt.want...)
			before.same(t, c, "a refused SetLayout on a clone")
		})
	}
}

func TestSetLayoutDoesNotKeepTheCallersSlice(t *testing.T) {
	s := busyWorld(t)
	l := mustLayout("4g.40gb@0,3g.40gb@4")
	if err := s.SetLayout("h100", 1, l); err != nil {
		t.Fatal(err)
	}
	l[0].Start = 4
	if got := s.NodeByName("h100").GPUs[1].Layout().String(); got != "4g.40gb@0,3g.40gb@4" {
		t.Fatalf("editing the caller's layout changed the State's to %q", got)
	}
	mustCheck(t, s)
}

func TestSetMIGTurnsModeOffAndOn(t *testing.T) {
	s := busyWorld(t)
	if err := s.SetMIG("h100", 1, false); err != nil {
		t.Fatal(err)
	}
	g := &s.NodeByName("h100").GPUs[1]
	if g.MIG || g.Free() != 1000 || len(g.Slices()) != 0 {
		t.Fatalf("after MIG off: MIG %t, free %d, instances %v; want false, 1000, none", g.MIG, g.Free(), g.Layout())
	}
	if got := s.NodeByName("h100").FullyFreeGPUs(); got != 1 {
		t.Fatalf("FullyFreeGPUs = %d, want the GPU that left MIG", got)
	}
	// With MIG off it takes shares, not instances.
	if err := s.Allocate(task("i").on("h100").instance(1, "1g.10gb@0").assignment()); err == nil {
		t.Fatal("an instance was created on a GPU with MIG off")
	}
	allocate(t, s, task("share").on("h100").share(1, 400))
	if _, err := s.Release("h100", "share"); err != nil {
		t.Fatal(err)
	}

	if err := s.SetMIG("h100", 1, true); err != nil {
		t.Fatal(err)
	}
	g = &s.NodeByName("h100").GPUs[1]
	if !g.MIG || g.Free() != 0 || g.FreeComputeSlices() != 7 || g.FreeMemorySlices() != 0xFF {
		t.Fatalf("after MIG on: MIG %t, free %d, compute %d, memory %08b", g.MIG, g.Free(), g.FreeComputeSlices(), g.FreeMemorySlices())
	}
	if err := s.Allocate(task("share").on("h100").share(1, 400).assignment()); err == nil {
		t.Fatal("a share was given on a GPU with MIG on")
	}
	allocate(t, s, task("i").on("h100").instance(1, "7g.80gb@0"))
	mustCheck(t, s)
}

func TestSetMIGDropsFreeInstances(t *testing.T) {
	s := newState(t, node("h").gpus(1, "H100-80GB").mig().layout("3g.40gb@0,3g.40gb@4"))
	if err := s.SetMIG("h", 0, true); err != nil {
		t.Fatal(err)
	}
	g := &s.Node(0).GPUs[0]
	if len(g.Slices()) != 0 || g.FreeMemorySlices() != 0xFF || g.FreeComputeSlices() != 7 {
		t.Fatalf("instances %v, free memory %08b, compute %d; want none, 11111111, 7", g.Layout(), g.FreeMemorySlices(), g.FreeComputeSlices())
	}
	mustCheck(t, s)
}

func TestSetMIGOffIsAllowedOnAModelWithoutMIG(t *testing.T) {
	s := busyWorld(t)
	if err := s.SetMIG("v100", 3, false); err != nil {
		t.Fatalf("turning MIG off on an idle V100: %v", err)
	}
	if s.NodeByName("v100").GPUs[3].MIG {
		t.Fatal("MIG on after turning it off")
	}
	mustCheck(t, s)
}

func TestSetMIGRefuses(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T, s *State)
		node     string
		gpu      int
		on       bool
		want     []string
		notFound bool
	}{
		{name: "refuses an unknown node", node: "nope", on: true, want: []string{`node "nope": not found`}, notFound: true},
		{name: "refuses a GPU past the last", node: "h100", gpu: 2, on: true, want: []string{"node h100: no GPU 2"}},
		{name: "refuses a negative GPU index", node: "h100", gpu: -1, want: []string{"node h100: no GPU -1"}},
		{name: "refuses a CPU-only node", node: "cpu", on: true, want: []string{"node cpu: no GPU 0"}},
		{name: "refuses MIG on a model without it", node: "v100", gpu: 1, on: true, want: []string{"node v100: GPU 1: model V100-32GB does not support MIG"}},
		{name: "refuses turning MIG off under a held instance", node: "h100", gpu: 0, on: false, want: []string{"node h100: GPU 0: busy; MIG mode changes need an idle GPU"}},
		{name: "refuses re-enabling MIG under a held instance", node: "h100", gpu: 0, on: true, want: []string{"node h100: GPU 0: busy"}},
		{name: "refuses turning MIG off on a shared GPU", node: "v100", gpu: 0, on: false, want: []string{"node v100: GPU 0: busy"}},
		{
			name: "refuses turning MIG on under a share",
			setup: func(t *testing.T, s *State) {
				if err := s.SetMIG("h100", 1, false); err != nil {
					t.Fatal(err)
				}
				allocate(t, s, task("share").on("h100").share(1, 1))
			},
			node: "h100", gpu: 1, on: true, want: []string{"node h100: GPU 1: busy"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := busyWorld(t)
			if tt.setup != nil {
				tt.setup(t, s)
			}
			before := takeSnapshot(s)
			err := s.SetMIG(tt.node, tt.gpu, tt.on)
			wantErr(t, err, tt.want...)
			if errors.Is(err, ErrNotFound) != tt.notFound {
				t.Fatalf("errors.Is(%v, ErrNotFound) = %t, want %t", err, !tt.notFound, tt.notFound)
			}
			before.same(t, s, "a refused SetMIG")

			c := s.Clone()
			wantErr(t, c.SetMIG(tt.node, tt.gpu, tt.on), tt.want...)
			before.same(t, c, "a refused SetMIG on a clone")
		})
	}
}
