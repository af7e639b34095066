package engine

import (
	"strings"
	"testing"

	"partita.dev/partita/internal/cluster"
)

// fitCase is one node, what runs on it, and one task to fit.
type fitCase struct {
	name     string
	node     *nodeBuilder
	running  []*runningBuilder
	task     *taskBuilder
	cordoned []int // GPUs cordoned after the tasks started
	want     Code  // "" = fits
}

// state builds the case's node alone in a State, with its tasks running.
func (c fitCase) state(t *testing.T) *cluster.State {
	t.Helper()
	st := world(t, c.node)
	allocateOn(t, st, c.node.spec.Name, c.running...)
	for _, g := range c.cordoned {
		if err := st.Cordon(c.node.spec.Name, g, true); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func TestFit(t *testing.T) {
	v100s := func() *nodeBuilder { return node("v100").cpu(8000).memory(16384).gpus(2, "V100-16GB") }
	h100MIG := func() *nodeBuilder { return node("h100").gpus(1, "H100-80GB").mig() }
	tests := []fitCase{
		// CPU and memory come first, for every kind of task.
		{name: "fits a CPU-only task on a CPU-only node", node: node("cpu"), task: task("t").cpu(1000)},
		{name: "fits a CPU-only task on a GPU node", node: v100s(), task: task("t").cpu(8000).memory(16384)},
		{name: "refuses more CPU than is left", node: v100s(), running: []*runningBuilder{running("old").cpu(4000)}, task: task("t").cpu(4001), want: CodeCPU},
		{name: "refuses more memory than is left", node: v100s(), running: []*runningBuilder{running("old").memory(8192)}, task: task("t").memory(8193), want: CodeMemory},
		{name: "checks CPU before the GPUs", node: node("cpu").cpu(1000), task: task("t").cpu(2000).gpus(1), want: CodeCPU},
		// GPUs.
		{name: "refuses a share on a node without GPUs", node: node("cpu"), task: task("t").share(100), want: CodeNoGPU},
		{name: "refuses whole GPUs on a node without GPUs", node: node("cpu"), task: task("t").gpus(1), want: CodeNoGPU},
		{name: "refuses a model the task does not allow", node: v100s(), task: task("t").share(100).on("V100M32"), want: CodeModel},
		{name: "fits a model the task names by its trace name", node: v100s(), task: task("t").share(100).on("G2", "V100M16")},
		{name: "fits a share on a fully free GPU", node: v100s(), task: task("t").share(999)},
		{name: "fits a share in what a GPU has left", node: v100s(),
			running: []*runningBuilder{running("a").share(0, 500), running("b").share(1, 700)},
			task:    task("t").share(500)},
		{name: "refuses a share larger than every GPU's room", node: v100s(),
			running: []*runningBuilder{running("a").share(0, 501), running("b").share(1, 700)},
			task:    task("t").share(500), want: CodeGPU},
		{name: "fits whole GPUs on fully free GPUs", node: v100s(), task: task("t").gpus(2)},
		{name: "refuses a share on a cordoned GPU", node: v100s(), cordoned: []int{0, 1}, task: task("t").share(1), want: CodeGPU},
		{name: "does not count a cordoned GPU as free", node: v100s(), cordoned: []int{1}, task: task("t").gpus(2), want: CodeGPU},
		{name: "refuses more whole GPUs than the node has", node: v100s(), task: task("t").gpus(3), want: CodeGPU},
		{name: "does not count a shared GPU as a whole one", node: v100s(),
			running: []*runningBuilder{running("a").share(1, 1)},
			task:    task("t").gpus(2), want: CodeGPU},
		// MIG.
		{name: "refuses a share on a MIG GPU", node: h100MIG(), task: task("t").share(100), want: CodeMIGOff},
		{name: "refuses whole GPUs on a MIG GPU", node: h100MIG(), task: task("t").gpus(1), want: CodeMIGOff},
		{name: "refuses a MIG profile on a GPU with MIG off", node: node("a100").gpus(1, "A100-80GB"), task: task("t").migProfile("1g.10gb"), want: CodeMIGOff},
		{name: "refuses a profile the model does not offer", node: h100MIG(), task: task("t").migProfile("1g.18gb"), want: CodeModel},
		{name: "fits a profile that can be created", node: h100MIG(), task: task("t").migProfile("3g.40gb")},
		{name: "fits a profile on a free instance", node: node("h100").gpus(1, "H100-80GB").mig().layout("7g.80gb@0"), task: task("t").migProfile("7g.80gb")},
		{name: "refuses a profile with no free or creatable instance", node: node("h100").gpus(1, "H100-80GB").mig().layout("7g.80gb@0"),
			running: []*runningBuilder{running("big").instance(0, "7g.80gb@0")},
			task:    task("t").migProfile("1g.10gb"), want: CodeMIG},
		{name: "refuses a profile on a cordoned GPU", node: h100MIG(), cordoned: []int{0}, task: task("t").migProfile("1g.10gb"), want: CodeMIG},
		{name: "refuses a memory profile on a MIG GPU without room", node: node("h100").gpus(1, "H100-80GB").mig().layout("7g.80gb@0"),
			running: []*runningBuilder{running("big").instance(0, "7g.80gb@0")},
			task:    task("t").gpuMemory(8192, 0), want: CodeMIG},
		// Memory profiles.
		{name: "fits a memory profile as a share", node: v100s(), task: task("t").gpuMemory(8192, 0)},
		{name: "fits a memory profile as a MIG instance", node: h100MIG(), task: task("t").gpuMemory(8192, 0)},
		{name: "refuses a memory profile larger than the GPU", node: v100s(), task: task("t").gpuMemory(16385, 0), want: CodeTooSmall},
		{name: "refuses a memory profile larger than every MIG profile", node: h100MIG(), task: task("t").gpuMemory(81921, 0), want: CodeTooSmall},
		{name: "refuses a memory profile on a GPU of unknown memory", node: node("g2").gpus(1, "G2"), task: task("t").gpuMemory(1024, 0), want: CodeTooSmall},
		{name: "refuses a memory profile whose share is taken", node: v100s(),
			running: []*runningBuilder{running("a").share(0, 600), running("b").share(1, 600)},
			task:    task("t").gpuMemory(8192, 0), want: CodeGPU},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.state(t)
			ok, why := Fit{}.Filter(st.Node(0), request(t, tt.task))
			if ok != (tt.want == "") || why.Code != tt.want {
				t.Fatalf("Filter = %t, %q; want %t, %q", ok, why.Code, tt.want == "", tt.want)
			}
			if why.Filter != "fit" {
				t.Fatalf("Reason.Filter = %q, want fit", why.Filter)
			}
		})
	}
}

func TestFitNamesItself(t *testing.T) {
	if got := (Fit{}).Name(); got != "fit" {
		t.Fatalf("Name() = %q, want fit", got)
	}
}

func TestExplain(t *testing.T) {
	v100s := func() *nodeBuilder { return node("v100").cpu(8000).memory(16384).gpus(2, "V100-16GB") }
	tests := []struct {
		fitCase
		want string
	}{
		{fitCase{name: "says a fitting task fits", node: v100s(), task: task("t").share(100)}, "fits"},
		{fitCase{name: "gives the CPU asked and free", node: v100s(), running: []*runningBuilder{running("old").cpu(3000)}, task: task("t").cpu(6000)},
			"cpu: asks 6000m, 5000m free"},
		{fitCase{name: "gives the memory asked and free", node: v100s(), task: task("t").memory(20000)},
			"memory: asks 20000 MiB, 16384 MiB free"},
		{fitCase{name: "says the node has no GPU", node: node("cpu"), task: task("t").gpus(1)}, "no GPU on the node"},
		{fitCase{name: "names the node's model and the allowed ones", node: v100s(), task: task("t").gpus(1).on("V100M32", "G2")},
			"gpu model: node has V100-16GB, task allows [V100-32GB G2]"},
		{fitCase{name: "says MIG mode does not match", node: node("h100").gpus(1, "H100-80GB").mig(), task: task("t").gpus(1)},
			"gpu: MIG mode does not match the demand"},
		{fitCase{name: "gives the peak memory no share holds", node: v100s(), task: task("t").gpuMemory(20000, 0)},
			"gpu memory: no profile or share of V100-16GB holds 20000 MiB"},
		{fitCase{name: "gives the GPUs asked and free", node: v100s(), running: []*runningBuilder{running("old").share(0, 300)}, task: task("t").gpus(2)},
			"gpu: asks 2 GPU; 1 fully free GPUs, 1700 milli free"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.state(t)
			got := Explain(st.Node(0), request(t, tt.task))
			if got != tt.want {
				t.Fatalf("Explain = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSlicesForListsFreeInstancesBeforeNewOnes(t *testing.T) {
	st := world(t, node("h100").gpus(1, "H100-80GB").mig().layout("1g.10gb@6"))
	g := &st.Node(0).GPUs[0]
	p, err := g.Model.Profile("1g.10gb")
	if err != nil {
		t.Fatal(err)
	}
	got := SlicesFor(g, p)
	if len(got) < 2 || got[0].String() != "1g.10gb@6" {
		t.Fatalf("SlicesFor = %v; want the free 1g.10gb@6 first, then places to create one", got)
	}
	for _, pl := range got[1:] {
		if pl.Start == 6 {
			t.Fatalf("SlicesFor = %v lists slice 6 twice", got)
		}
	}
	if !strings.HasPrefix(got[1].String(), "1g.10gb@") {
		t.Fatalf("SlicesFor = %v; want 1g.10gb placements only", got)
	}
}

func TestProfileOn(t *testing.T) {
	st := world(t,
		node("h100").gpus(1, "H100-80GB").mig(),
		node("v100").gpus(1, "V100-16GB"),
	)
	h100, v100 := &st.Node(0).GPUs[0], &st.Node(1).GPUs[0]
	tests := []struct {
		name string
		r    *Request
		g    *cluster.GPU
		want string
	}{
		{"names the profile asked for", request(t, task("t").migProfile("2g.20gb")), h100, "2g.20gb"},
		{"names the profile a memory profile resolves to", request(t, task("t").gpuMemory(15000, 0)), h100, "1g.20gb"},
		{"names nothing on a GPU with MIG off", request(t, task("t").migProfile("2g.20gb")), v100, ""},
		{"names nothing for a model the task refuses", request(t, task("t").migProfile("2g.20gb").on("A100-80GB")), h100, ""},
		{"names nothing for a share", request(t, task("t").share(100)), h100, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if p := tt.r.ProfileOn(tt.g); p != nil {
				got = p.Name
			}
			if got != tt.want {
				t.Fatalf("ProfileOn = %q, want %q", got, tt.want)
			}
		})
	}
}
