package cluster

import (
	"errors"
	"slices"
	"testing"

	"partita.dev/partita/internal/gpu"
)

func TestBuildNodeBuildsACPUOnlyNode(t *testing.T) {
	n := node("cpu-1").cpu(16000).memory(65536).
		label(LabelBlock, "b1").label(LabelSpine, "s2").label(LabelLeaf, "l3").build(t)

	if n.Name != "cpu-1" || n.CPUMilli != 16000 || n.MemoryMiB != 65536 {
		t.Fatalf("node = %s %dm %d MiB, want cpu-1 16000m 65536 MiB", n.Name, n.CPUMilli, n.MemoryMiB)
	}
	if len(n.GPUs) != 0 || n.Model() != nil {
		t.Fatalf("CPU-only node has %d GPUs of model %v, want none", len(n.GPUs), n.Model())
	}
	if n.Tier != Reserved {
		t.Fatalf("tier = %q, want the default %q", n.Tier, Reserved)
	}
	if want := (Topology{Block: "b1", Spine: "s2", Leaf: "l3"}); n.Topology != want {
		t.Fatalf("topology = %+v, want %+v from the labels", n.Topology, want)
	}
	if n.GPUFreeMilli() != 0 || n.FullyFreeGPUs() != 0 {
		t.Fatalf("CPU-only node offers %d milli, %d free GPUs; want 0, 0", n.GPUFreeMilli(), n.FullyFreeGPUs())
	}
}

func TestBuildNodeBuildsGPUs(t *testing.T) {
	tests := []struct {
		name      string
		spec      *specBuilder
		wantModel string
		wantMIG   bool
		wantLinks []int
	}{
		{
			name:      "a non-MIG model defaults to PCIe only",
			spec:      node("v").gpus(4, "V100-32GB"),
			wantModel: "V100-32GB",
			wantLinks: []int{NoLink, NoLink, NoLink, NoLink},
		},
		{
			name:      "a MIG-capable model defaults to one NVSwitch domain",
			spec:      node("h").gpus(4, "H100-80GB"),
			wantModel: "H100-80GB",
			wantLinks: []int{0, 0, 0, 0},
		},
		{
			name:      "pairs links GPUs two by two",
			spec:      node("v").gpus(5, "V100-32GB").nvlink(LinkPairs),
			wantModel: "V100-32GB",
			wantLinks: []int{0, 0, 1, 1, 2},
		},
		{
			name:      "none on a MIG-capable model is PCIe only",
			spec:      node("h").gpus(2, "H100-80GB").nvlink(LinkNone),
			wantModel: "H100-80GB",
			wantLinks: []int{NoLink, NoLink},
		},
		{
			name:      "all on a non-MIG model is one domain",
			spec:      node("v").gpus(2, "V100-32GB").nvlink(LinkAll),
			wantModel: "V100-32GB",
			wantLinks: []int{0, 0},
		},
		{
			name:      "a trace alias resolves to the catalog model",
			spec:      node("v").gpus(2, "V100M16"),
			wantModel: "V100-16GB",
			wantLinks: []int{NoLink, NoLink},
		},
		{
			name:      "an unknown model is accepted by name",
			spec:      node("x").gpus(1, "Mystery-9000"),
			wantModel: "Mystery-9000",
			wantLinks: []int{NoLink},
		},
		{
			name:      "MIG mode is set on every GPU",
			spec:      node("h").gpus(3, "H100-80GB").mig(),
			wantModel: "H100-80GB",
			wantMIG:   true,
			wantLinks: []int{0, 0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.spec.build(t)
			if n.Model() == nil || n.Model().Name != tt.wantModel {
				t.Fatalf("model = %v, want %s", n.Model(), tt.wantModel)
			}
			links := make([]int, len(n.GPUs))
			for i := range n.GPUs {
				g := &n.GPUs[i]
				links[i] = g.Link
				if g.Index != i || g.Model != n.Model() || g.MIG != tt.wantMIG {
					t.Fatalf("gpu %d: index %d, model %s, MIG %t; want index %d, model %s, MIG %t",
						i, g.Index, g.Model.Name, g.MIG, i, tt.wantModel, tt.wantMIG)
				}
				if len(g.Slices()) != 0 || !g.Idle() {
					t.Fatalf("gpu %d starts with instances %v or busy", i, g.Layout())
				}
			}
			if !slices.Equal(links, tt.wantLinks) {
				t.Fatalf("links = %v, want %v", links, tt.wantLinks)
			}
		})
	}
}

func TestBuildNodeGivesEveryMIGGPUTheLayout(t *testing.T) {
	const layout = "3g.40gb@0,2g.20gb@4,1g.10gb@6"
	s := newState(t, node("h").gpus(3, "H100-80GB").mig().layout(layout))
	n := s.Node(0)
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if got := g.Layout().String(); got != layout {
			t.Fatalf("gpu %d layout = %q, want %q", i, got, layout)
		}
		for _, sl := range g.Slices() {
			if sl.Task != "" {
				t.Fatalf("gpu %d: instance %s starts held by %q", i, sl.Placement, sl.Task)
			}
		}
		// New counts what the instances take: slices 0-6 and 3+2+1 compute.
		if g.FreeMemorySlices() != 0b1000_0000 || g.FreeComputeSlices() != 1 {
			t.Fatalf("gpu %d free memory %08b, compute %d; want 10000000, 1", i, g.FreeMemorySlices(), g.FreeComputeSlices())
		}
		if g.Free() != 0 {
			t.Fatalf("gpu %d: a MIG GPU offers %d milli as a share, want 0", i, g.Free())
		}
	}
	// Each GPU has its own instances: taking one leaves the others free.
	allocate(t, s, task("t").on("h").instance(1, "2g.20gb@4"))
	if got := s.Node(0).GPUs[0].Slices()[1].Task; got != "" {
		t.Fatalf("gpu 0's 2g.20gb@4 is held by %q after allocating gpu 1's", got)
	}
	mustCheck(t, s)
}

func TestBuildNodeRefusesBadSpecs(t *testing.T) {
	tests := []struct {
		name string
		spec *specBuilder
		want []string
	}{
		{"refuses a negative GPU count", node("n").gpus(-1, "V100-32GB"), []string{"node n", "gpus -1 is negative"}},
		{"refuses GPUs without a model", node("n").gpus(8, ""), []string{"node n", "8 GPUs but no GPU model"}},
		{"refuses MIG on a model without MIG", node("n").gpus(8, "V100-32GB").mig(), []string{"node n", "model V100-32GB does not support MIG"}},
		{"refuses MIG on a model not in the catalog", node("n").gpus(1, "Mystery-9000").mig(), []string{"model Mystery-9000 does not support MIG"}},
		{"refuses a layout while MIG is off", node("n").gpus(2, "H100-80GB").layout("7g.80gb@0"), []string{"node n", "a MIG layout is given but MIG is off"}},
		{"refuses a layout with a bad start", node("n").gpus(2, "H100-80GB").mig().layout("3g.40gb@2"), []string{"node n: layout", "3g.40gb@2", "start 2 not allowed"}},
		{"refuses overlapping instances", node("n").gpus(2, "H100-80GB").mig().layout("4g.40gb@0,2g.20gb@2"), []string{"node n: layout", "2g.20gb@2 overlaps 4g.40gb@0"}},
		{"refuses a profile of another model", node("n").gpus(2, "H100-80GB").mig().layout("1g.18gb@0"), []string{"node n: layout", `unknown MIG profile "1g.18gb" for H100-80GB`}},
		{"refuses a second +me instance", node("n").gpus(2, "H100-80GB").mig().layout("1g.10gb+me@0,1g.10gb+me@1"), []string{"at most one +me instance"}},
		{"refuses an unknown NVLink shape", node("n").gpus(2, "V100-32GB").nvlink("ring"), []string{"node n", `nvlink "ring": want none, all or pairs`}},
		{"refuses an unknown tier", node("n").tier("cheap"), []string{"node n", `unknown capacity tier "cheap"`}},
		{"refuses an unknown tier on a GPU node", node("n").gpus(2, "V100-32GB").tier("Spot"), []string{`unknown capacity tier "Spot"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := BuildNode(tt.spec.spec())
			wantErr(t, err, tt.want...)
			if n != nil {
				t.Fatalf("BuildNode returned node %s along with error %v", n.Name, err)
			}
		})
	}
}

func TestBuildNodeReadsTiers(t *testing.T) {
	for _, tier := range []Tier{Reserved, OnDemand, Spot} {
		if n := node("n").tier(tier).build(t); n.Tier != tier {
			t.Fatalf("tier %q built as %q", tier, n.Tier)
		}
	}
}

func TestParseTier(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Tier
		wantErr string
	}{
		{"reads the empty string as reserved", "", Reserved, ""},
		{"reads reserved", "reserved", Reserved, ""},
		{"reads on-demand", "on-demand", OnDemand, ""},
		{"reads spot", "spot", Spot, ""},
		{"refuses another case", "Spot", "", `unknown capacity tier "Spot" (known: reserved, on-demand, spot)`},
		{"refuses an unknown name", "preemptible", "", `unknown capacity tier "preemptible"`},
		{"refuses surrounding spaces", " spot", "", `unknown capacity tier " spot"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTier(tt.in)
			if tt.wantErr != "" {
				wantErr(t, err, tt.wantErr)
			} else if err != nil {
				t.Fatalf("ParseTier(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ParseTier(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestTopologyFromLabels(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   Topology
	}{
		{"reads all three levels", map[string]string{LabelBlock: "b", LabelSpine: "s", LabelLeaf: "l"}, Topology{Block: "b", Spine: "s", Leaf: "l"}},
		{"leaves missing levels empty", map[string]string{LabelLeaf: "l7"}, Topology{Leaf: "l7"}},
		{"ignores other labels", map[string]string{"zone": "eu", "partita.dev/network-rack": "r1"}, Topology{}},
		{"reads a nil map as nowhere", nil, Topology{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TopologyFromLabels(tt.labels); got != tt.want {
				t.Fatalf("TopologyFromLabels(%v) = %+v, want %+v", tt.labels, got, tt.want)
			}
		})
	}
}

func TestNewIndexesNodesByName(t *testing.T) {
	s := newState(t, node("a"), node("b").gpus(2, "V100-32GB"), node("c").gpus(1, "H100-80GB").mig())
	if s.Len() != 3 {
		t.Fatalf("Len = %d, want 3", s.Len())
	}
	for i, name := range []string{"a", "b", "c"} {
		if got, ok := s.Lookup(name); !ok || got != i {
			t.Fatalf("Lookup(%s) = %d, %t; want %d, true", name, got, ok, i)
		}
		if s.NodeByName(name) != s.Node(i) || s.Node(i).Name != name {
			t.Fatalf("NodeByName(%s) and Node(%d) disagree", name, i)
		}
	}
	if _, ok := s.Lookup("z"); ok {
		t.Fatal("Lookup found a node that does not exist")
	}
	if s.NodeByName("z") != nil {
		t.Fatal("NodeByName returned a node that does not exist")
	}
	seen := map[uint64]bool{}
	for _, g := range gens(s) {
		if g == 0 || seen[g] {
			t.Fatalf("gens %v: want each node numbered, and no two alike", gens(s))
		}
		seen[g] = true
	}
	mustCheck(t, s)
}

func TestNewAcceptsNoNodes(t *testing.T) {
	s, err := New(nil)
	if err != nil || s.Len() != 0 {
		t.Fatalf("New(nil) = %v nodes, %v; want an empty State", s, err)
	}
	mustCheck(t, s)
}

func TestNewRefusesBadNodes(t *testing.T) {
	h100 := gpu.Lookup("H100-80GB")
	v100 := gpu.Lookup("V100-32GB")
	tests := []struct {
		name  string
		nodes func(t *testing.T) []*Node
		want  []string
	}{
		{
			name:  "refuses an empty name",
			nodes: func(t *testing.T) []*Node { return []*Node{node("a").build(t), node("").build(t)} },
			want:  []string{"node 1: name is empty"},
		},
		{
			name:  "refuses a name used twice",
			nodes: func(t *testing.T) []*Node { return []*Node{node("a").build(t), node("b").build(t), node("a").build(t)} },
			want:  []string{"node a: name is used twice"},
		},
		{
			name:  "refuses negative CPU",
			nodes: func(t *testing.T) []*Node { return []*Node{node("a").cpu(-1).build(t)} },
			want:  []string{"node a: negative capacity"},
		},
		{
			name:  "refuses negative memory",
			nodes: func(t *testing.T) []*Node { return []*Node{node("a").memory(-1).build(t)} },
			want:  []string{"node a: negative capacity"},
		},
		{
			name: "refuses a GPU whose index is not its position",
			nodes: func(t *testing.T) []*Node {
				n := node("a").gpus(2, "V100-32GB").build(t)
				n.GPUs[1].Index = 5
				return []*Node{n}
			},
			want: []string{"node a: GPU at position 1 has index 5"},
		},
		{
			name: "refuses a GPU without a model",
			nodes: func(t *testing.T) []*Node {
				return []*Node{{Name: "a", GPUs: []GPU{{Index: 0, Model: v100}, {Index: 1}}}}
			},
			want: []string{"node a: GPU 1 has no model"},
		},
		{
			name: "refuses MIG on a model without it",
			nodes: func(t *testing.T) []*Node {
				return []*Node{{Name: "a", GPUs: []GPU{{Index: 0, Model: v100, MIG: true}}}}
			},
			want: []string{"node a: GPU 0: model V100-32GB does not support MIG"},
		},
		{
			name: "refuses an invalid MIG layout",
			nodes: func(t *testing.T) []*Node {
				g := GPU{Index: 0, Model: h100, MIG: true}
				for _, p := range mustLayout("4g.40gb@0,3g.40gb@0") {
					g.slices = append(g.slices, Slice{Placement: p})
				}
				return []*Node{{Name: "a", GPUs: []GPU{g}}}
			},
			want: []string{"node a: GPU 0", "3g.40gb@0 overlaps 4g.40gb@0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.nodes(t))
			wantErr(t, err, tt.want...)
			if s != nil {
				t.Fatal("New returned a State along with its error")
			}
		})
	}
}

func TestNodeAccessors(t *testing.T) {
	s := newState(t, node("v").gpus(4, "V100-32GB"), node("h").gpus(2, "H100-80GB").mig().layout("7g.80gb@0"))
	allocate(t, s,
		task("small").on("v").cpu(1500).memory(2048).share(0, 250),
		task("big").on("v").cpu(500).memory(1024).whole(1).whole(2),
		task("inst").on("h").instance(0, "7g.80gb@0"),
	)
	v := s.NodeByName("v")
	if v.CPUUsed() != 2000 || v.CPUFree() != 30000 || v.MemUsed() != 3072 || v.MemFree() != 256*1024-3072 {
		t.Fatalf("cpu %d used %d free, memory %d used %d free; want 2000, 30000, 3072, %d",
			v.CPUUsed(), v.CPUFree(), v.MemUsed(), v.MemFree(), 256*1024-3072)
	}
	if v.GPUFreeMilli() != 1750 || v.FullyFreeGPUs() != 1 {
		t.Fatalf("GPUFreeMilli = %d, FullyFreeGPUs = %d; want 1750, 1", v.GPUFreeMilli(), v.FullyFreeGPUs())
	}
	if len(v.Tasks()) != 2 {
		t.Fatalf("Tasks = %v, want small and big", v.Tasks())
	}
	a, ok := v.Task("big")
	if !ok || a.Node != "v" || a.CPUMilli != 500 || len(a.Grants) != 2 {
		t.Fatalf("Task(big) = %+v, %t", a, ok)
	}
	if _, ok := v.Task("inst"); ok {
		t.Fatal("Task found a task of another node")
	}
	if got := a.GPUMilli(v); got != 2000 {
		t.Fatalf("big holds %d milli, want 2000", got)
	}
	small, _ := v.Task("small")
	if got := small.GPUMilli(v); got != 250 {
		t.Fatalf("small holds %d milli, want 250", got)
	}
	h := s.NodeByName("h")
	inst, _ := h.Task("inst")
	if got := inst.GPUMilli(h); got != 1000 {
		t.Fatalf("a 7g instance counts %d milli, want 1000", got)
	}
	// A MIG GPU is neither free milli nor a fully free GPU, busy or not.
	if h.GPUFreeMilli() != 0 || h.FullyFreeGPUs() != 0 {
		t.Fatalf("MIG node offers %d milli, %d free GPUs; want 0, 0", h.GPUFreeMilli(), h.FullyFreeGPUs())
	}
}

func TestAssignmentGPUMilliCountsInstancesByCompute(t *testing.T) {
	s := newState(t, node("h").gpus(3, "H100-80GB").mig())
	allocate(t, s, task("t").on("h").instance(0, "3g.40gb@4").instance(1, "1g.10gb@2").instance(2, "2g.20gb@0"))
	a, _ := s.Node(0).Task("t")
	// 3/7 + 1/7 + 2/7 of a GPU, each rounded down.
	if got, want := a.GPUMilli(s.Node(0)), 3000/7+1000/7+2000/7; got != want {
		t.Fatalf("GPUMilli = %d, want %d", got, want)
	}
}

func TestErrNotFoundIsWrapped(t *testing.T) {
	s := newState(t, node("a"))
	_, err := s.Release("a", "ghost")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Release of an unknown task: %v does not wrap ErrNotFound", err)
	}
}
