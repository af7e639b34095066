package cluster

import (
	"errors"
	"testing"
)

// busyWorld is a small cluster with work already on it, for refusals:
//   - cpu: CPU-only, 4 CPUs, 8 GiB;
//   - v100: 8 V100-32GB, 32 CPUs, 256 GiB; task "holder" has half of GPU 0,
//     1 CPU and 1 GiB;
//   - h100: 2 H100-80GB in MIG mode; GPU 0 has 3g.40gb@0 (held by "inst")
//     and a free 1g.10gb+me@4; GPU 1 has no instances.
func busyWorld(t testing.TB) *State {
	t.Helper()
	s := newState(t,
		node("cpu").cpu(4000).memory(8192),
		node("v100").gpus(8, "V100-32GB"),
		node("h100").gpus(2, "H100-80GB").mig(),
	)
	if err := s.SetLayout("h100", 0, mustLayout("3g.40gb@0,1g.10gb+me@4")); err != nil {
		t.Fatal(err)
	}
	allocate(t, s,
		task("holder").on("v100").cpu(1000).memory(1024).share(0, 500),
		task("inst").on("h100").cpu(1000).memory(1024).instance(0, "3g.40gb@0"),
	)
	mustCheck(t, s)
	return s
}

func TestAllocateRefuses(t *testing.T) {
	tests := []struct {
		name string
		ask  *taskBuilder
		want []string
	}{
		{"refuses an unknown node", task("t").on("nope"), []string{`allocate t: node "nope": not found`}},
		{"refuses an empty task name", task("").on("v100"), []string{"on v100", "task name is empty"}},
		{"refuses a task that already runs on the node", task("holder").on("v100").cpu(1), []string{"allocate holder on v100: task already runs here"}},
		{"refuses a negative cpu request", task("t").on("v100").cpu(-1), []string{"negative cpu or memory request"}},
		{"refuses a negative memory request", task("t").on("v100").memory(-1), []string{"negative cpu or memory request"}},
		{"refuses more cpu than is free", task("t").on("v100").cpu(31001), []string{"allocate t on v100", "cpu: asks 31001m, 31000m free of 32000m"}},
		{"refuses more memory than is free", task("t").on("cpu").memory(8193), []string{"memory: asks 8193 MiB, 8192 MiB free of 8192 MiB"}},
		{"refuses a GPU past the last", task("t").on("v100").share(8, 100), []string{"gpu 8: node has 8 GPUs"}},
		{"refuses a negative GPU index", task("t").on("v100").share(-1, 100), []string{"gpu -1: node has 8 GPUs"}},
		{"refuses any GPU on a CPU-only node", task("t").on("cpu").whole(0), []string{"gpu 0: node has 0 GPUs"}},
		{"refuses one GPU granted twice", task("t").on("v100").share(1, 100).share(1, 100), []string{"gpu 1: granted twice to one task"}},
		{"refuses one MIG GPU granted twice", task("t").on("h100").instance(1, "1g.10gb@0").instance(1, "1g.10gb@1"), []string{"gpu 1: granted twice"}},
		{"refuses a share larger than what is free", task("t").on("v100").share(0, 501), []string{"gpu 0: asks 501 milli, 500 free"}},
		{"refuses a whole GPU that is partly taken", task("t").on("v100").whole(0), []string{"gpu 0: asks 1000 milli, 500 free"}},
		{"refuses a zero share", task("t").on("v100").share(1, 0), []string{"gpu 1: share 0 milli is not between 1 and 1000"}},
		{"refuses a negative share", task("t").on("v100").share(1, -100), []string{"share -100 milli is not between 1 and 1000"}},
		{"refuses a share over one GPU", task("t").on("v100").share(1, 1001), []string{"share 1001 milli is not between 1 and 1000"}},
		{"refuses a share of a MIG GPU", task("t").on("h100").share(1, 500), []string{"gpu 1: MIG is on: ask for an instance, not 500 milli"}},
		{"refuses an instance on a GPU with MIG off", task("t").on("v100").instance(1, "1g.10gb@0"), []string{"gpu 1: MIG is off: no instance 1g.10gb@0"}},
		{"refuses an instance another task holds", task("t").on("h100").instance(0, "3g.40gb@0"), []string{"gpu 0: instance 3g.40gb@0 is held by inst"}},
		{"refuses an instance at a start its profile may not use", task("t").on("h100").instance(1, "3g.40gb@2"), []string{"instance 3g.40gb@2: start not allowed (allowed: [0 4])"}},
		{"refuses an instance overlapping a held one", task("t").on("h100").instance(0, "1g.10gb@2"), []string{"instance 1g.10gb@2 does not fit beside 3g.40gb@0,1g.10gb+me@4"}},
		{"refuses an instance overlapping a free one", task("t").on("h100").instance(0, "3g.40gb@4"), []string{"instance 3g.40gb@4 does not fit beside"}},
		{"refuses a profile the model lacks", task("t").on("h100").instance(1, "1g.18gb@0"), []string{`gpu 1: unknown MIG profile "1g.18gb" for H100-80GB`}},
		{"refuses a second +me instance", task("t").on("h100").instance(0, "1g.10gb+me@5"), []string{"1g.10gb+me@5", "at most one +me instance per GPU"}},
		{"refuses the whole assignment when its last grant is bad", task("t").on("v100").cpu(500).memory(100).share(1, 100).whole(2).share(3, 2000), []string{"gpu 3: share 2000 milli"}},
		{"refuses the whole assignment when one instance is bad", task("t").on("h100").cpu(500).instance(1, "4g.40gb@0").instance(0, "7g.80gb@0"), []string{"gpu 0: instance 7g.80gb@0 does not fit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := busyWorld(t)
			before := takeSnapshot(s)
			err := s.Allocate(tt.ask.assignment())
			wantErr(t, err, tt.want...)
			before.same(t, s, "a refused Allocate")

			// On a clone the refusal must not even copy a node.
			s = busyWorld(t)
			original := takeSnapshot(s)
			c := s.Clone()
			wantErr(t, c.Allocate(tt.ask.assignment()), tt.want...)
			original.same(t, c, "a refused Allocate on a clone")
			original.same(t, s, "a refused Allocate on a clone, seen from the original")
		})
	}
}

func TestAllocateRefusesAnUnknownNodeWithErrNotFound(t *testing.T) {
	s := busyWorld(t)
	if err := s.Allocate(task("t").on("nope").assignment()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Allocate on an unknown node: %v does not wrap ErrNotFound", err)
	}
}

func TestAllocateSharesAGPU(t *testing.T) {
	s := newState(t, node("v").gpus(2, "V100-32GB"))
	allocate(t, s,
		task("a").on("v").share(0, 300),
		task("b").on("v").share(0, 700),
	)
	g := &s.Node(0).GPUs[0]
	if g.Used() != 1000 || g.Free() != 0 || g.Idle() {
		t.Fatalf("gpu 0: used %d, free %d, idle %t; want 1000, 0, false", g.Used(), g.Free(), g.Idle())
	}
	if h := g.Holders(); len(h) != 2 || h[0] != (Hold{Task: "a", Milli: 300}) || h[1] != (Hold{Task: "b", Milli: 700}) {
		t.Fatalf("holders = %v, want [{a 300} {b 700}]", h)
	}
	if err := s.Allocate(task("c").on("v").share(0, 1).assignment()); err == nil {
		t.Fatal("a full GPU took one more milli")
	}
	if got := s.Node(0).FullyFreeGPUs(); got != 1 {
		t.Fatalf("FullyFreeGPUs = %d, want 1", got)
	}
	mustCheck(t, s)
}

func TestAllocateGivesWholeGPUs(t *testing.T) {
	s := newState(t, node("v").gpus(8, "V100-32GB"))
	allocate(t, s, task("train").on("v").whole(2).whole(3).whole(7))
	n := s.Node(0)
	for i := range n.GPUs {
		wantUsed := 0
		if i == 2 || i == 3 || i == 7 {
			wantUsed = 1000
		}
		if n.GPUs[i].Used() != wantUsed {
			t.Fatalf("gpu %d used %d, want %d", i, n.GPUs[i].Used(), wantUsed)
		}
	}
	if n.FullyFreeGPUs() != 5 || n.GPUFreeMilli() != 5000 {
		t.Fatalf("FullyFreeGPUs = %d, GPUFreeMilli = %d; want 5, 5000", n.FullyFreeGPUs(), n.GPUFreeMilli())
	}
	mustCheck(t, s)
}

func TestAllocateTakesAFreeInstance(t *testing.T) {
	s := busyWorld(t)
	before := s.Node(2).GPUs[0]
	allocate(t, s, task("media").on("h100").instance(0, "1g.10gb+me@4"))
	g := &s.Node(2).GPUs[0]
	if got := g.Layout().String(); got != "3g.40gb@0,1g.10gb+me@4" {
		t.Fatalf("layout = %q: taking a free instance must not change it", got)
	}
	if sl := g.Slices()[1]; sl.Task != "media" {
		t.Fatalf("1g.10gb+me@4 is held by %q, want media", sl.Task)
	}
	if g.FreeMemorySlices() != before.FreeMemorySlices() || g.FreeComputeSlices() != before.FreeComputeSlices() {
		t.Fatalf("free slices changed from %08b/%d to %08b/%d on taking an existing instance",
			before.FreeMemorySlices(), before.FreeComputeSlices(), g.FreeMemorySlices(), g.FreeComputeSlices())
	}
	mustCheck(t, s)
}

func TestAllocateCreatesAMissingInstance(t *testing.T) {
	s := busyWorld(t)
	allocate(t, s, task("serve").on("h100").cpu(2000).memory(4096).instance(1, "3g.40gb@4"))
	g := &s.Node(2).GPUs[1]
	if got := g.Layout().String(); got != "3g.40gb@4" {
		t.Fatalf("layout = %q, want the new instance 3g.40gb@4", got)
	}
	if g.Slices()[0].Task != "serve" {
		t.Fatalf("new instance held by %q, want serve", g.Slices()[0].Task)
	}
	if g.FreeMemorySlices() != 0b0000_1111 || g.FreeComputeSlices() != 4 {
		t.Fatalf("free memory %08b, compute %d; want 00001111, 4", g.FreeMemorySlices(), g.FreeComputeSlices())
	}
	// The room it left is usable, and counted.
	allocate(t, s, task("more").on("h100").instance(1, "4g.40gb@0"))
	if g := &s.Node(2).GPUs[1]; g.FreeMemorySlices() != 0 || g.FreeComputeSlices() != 0 {
		t.Fatalf("full GPU still has memory %08b, compute %d free", g.FreeMemorySlices(), g.FreeComputeSlices())
	}
	mustCheck(t, s)
}

func TestAllocateAccountsCPUAndMemory(t *testing.T) {
	s := newState(t, node("c").cpu(4000).memory(8192))
	allocate(t, s,
		task("a").on("c").cpu(1500).memory(4096),
		task("b").on("c").cpu(2500).memory(4096),
	)
	n := s.Node(0)
	if n.CPUUsed() != 4000 || n.CPUFree() != 0 || n.MemUsed() != 8192 || n.MemFree() != 0 {
		t.Fatalf("cpu %d/%d free, memory %d/%d free; want all used", n.CPUUsed(), n.CPUFree(), n.MemUsed(), n.MemFree())
	}
	if err := s.Allocate(task("c").on("c").cpu(1).assignment()); err == nil {
		t.Fatal("a full node gave one more millicore")
	}
	// A task asking for nothing fits anywhere, even on a full node.
	allocate(t, s, task("zero").on("c"))
	if _, err := s.Release("c", "a"); err != nil {
		t.Fatal(err)
	}
	if n := s.Node(0); n.CPUFree() != 1500 || n.MemFree() != 4096 {
		t.Fatalf("after release: cpu free %d, memory free %d; want 1500, 4096", n.CPUFree(), n.MemFree())
	}
	mustCheck(t, s)
}

func TestAllocateKeepsItsOwnCopyOfTheGrants(t *testing.T) {
	s := newState(t, node("v").gpus(2, "V100-32GB"))
	allocate(t, s, task("t").on("v").share(0, 200))
	ask := task("u").on("v").share(1, 300).assignment()
	if err := s.Allocate(ask); err != nil {
		t.Fatal(err)
	}
	ask.Grants[0].Milli = 999
	ask.Grants[0].GPU = 0
	mustCheck(t, s)
	if got, _ := s.Node(0).Task("u"); got.Grants[0].GPU != 1 || got.Grants[0].Milli != 300 {
		t.Fatalf("the caller's later edit reached the State: %+v", got.Grants)
	}
}

func TestAllocateKeepsItsOwnCopyOfTheInstance(t *testing.T) {
	s := newState(t, node("h").gpus(1, "H100-80GB").mig())
	p := mustPlacement("3g.40gb@0")
	if err := s.Allocate(Assignment{Task: "t", Node: "h", Grants: []Grant{{GPU: 0, Slice: &p}}}); err != nil {
		t.Fatal(err)
	}
	p.Start = 4 // the caller reuses its variable for the next request
	if err := s.Check(); err != nil {
		t.Fatalf("editing the caller's Placement after Allocate broke the State: %v", err)
	}
	if got, _ := s.Node(0).Task("t"); got.Grants[0].Slice.String() != "3g.40gb@0" {
		t.Fatalf("the State's grant now says %s, want 3g.40gb@0", got.Grants[0].Slice)
	}
}

func TestReleaseFreesWhatTheTaskHeld(t *testing.T) {
	s := busyWorld(t)
	allocate(t, s, task("other").on("v100").cpu(2000).memory(2048).share(0, 250).whole(1))

	a, err := s.Release("v100", "holder")
	if err != nil {
		t.Fatal(err)
	}
	if a.Task != "holder" || a.Node != "v100" || a.CPUMilli != 1000 || a.MemoryMiB != 1024 || len(a.Grants) != 1 || a.Grants[0] != (Grant{GPU: 0, Milli: 500}) {
		t.Fatalf("Release returned %+v, want holder's assignment", a)
	}
	n := s.NodeByName("v100")
	if n.CPUUsed() != 2000 || n.MemUsed() != 2048 {
		t.Fatalf("cpu %d, memory %d in use; want other's 2000, 2048", n.CPUUsed(), n.MemUsed())
	}
	if g := &n.GPUs[0]; g.Used() != 250 || len(g.Holders()) != 1 || g.Holders()[0].Task != "other" {
		t.Fatalf("gpu 0 used %d by %v; want 250 by other alone", g.Used(), g.Holders())
	}
	if _, ok := n.Task("holder"); ok {
		t.Fatal("released task still listed")
	}
	// The name is free again on this node.
	allocate(t, s, task("holder").on("v100").share(0, 750))
	mustCheck(t, s)
}

func TestReleaseLeavesMIGInstancesInPlace(t *testing.T) {
	s := busyWorld(t)
	allocate(t, s, task("new").on("h100").instance(1, "2g.20gb@2"))
	for _, name := range []string{"inst", "new"} {
		if _, err := s.Release("h100", name); err != nil {
			t.Fatal(err)
		}
	}
	n := s.NodeByName("h100")
	if got := n.GPUs[0].Layout().String(); got != "3g.40gb@0,1g.10gb+me@4" {
		t.Fatalf("gpu 0 layout after release = %q, want it unchanged", got)
	}
	if got := n.GPUs[1].Layout().String(); got != "2g.20gb@2" {
		t.Fatalf("gpu 1 layout after release = %q, want the created instance kept", got)
	}
	for i := range n.GPUs {
		if !n.GPUs[i].Idle() {
			t.Fatalf("gpu %d busy after releasing every task: %+v", i, n.GPUs[i].Slices())
		}
	}
	// A released instance can be taken again.
	allocate(t, s, task("again").on("h100").instance(0, "3g.40gb@0"))
	mustCheck(t, s)
}

func TestReleaseRefuses(t *testing.T) {
	tests := []struct {
		name       string
		node, task string
		want       string
	}{
		{"refuses an unknown node", "nope", "holder", `release holder: node "nope": not found`},
		{"refuses an unknown task", "v100", "ghost", `release: task "ghost" on node v100: not found`},
		{"refuses a task of another node", "h100", "holder", `release: task "holder" on node h100: not found`},
		{"refuses an empty task name", "v100", "", `release: task "" on node v100: not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := busyWorld(t)
			before := takeSnapshot(s)
			a, err := s.Release(tt.node, tt.task)
			wantErr(t, err, tt.want)
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("%v does not wrap ErrNotFound", err)
			}
			if a.Task != "" || a.Grants != nil {
				t.Fatalf("refused Release returned %+v", a)
			}
			before.same(t, s, "a refused Release")
		})
	}
}

func TestReleaseTwiceRefusesTheSecond(t *testing.T) {
	s := busyWorld(t)
	if _, err := s.Release("v100", "holder"); err != nil {
		t.Fatal(err)
	}
	before := takeSnapshot(s)
	if _, err := s.Release("v100", "holder"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Release: %v, want ErrNotFound", err)
	}
	before.same(t, s, "a second Release")
}
