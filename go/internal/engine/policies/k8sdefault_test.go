package policies_test

import (
	"errors"
	"testing"

	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/workload"
)

func TestK8sDefaultGivesAShareAWholeGPU(t *testing.T) {
	tests := []struct {
		name string
		task *taskBuilder
	}{
		{"turns a share into one whole GPU", task("t").share(250)},
		{"turns a memory profile into one whole GPU", task("t").gpuMemory(1024, 0.1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := world(t, node("n").gpus(2, "V100-16GB"))
			allocateOn(t, st, "n", running("old").share(0, 250))
			a, err := placeOne(t, policyNamed(t, "k8s-default"), st, tt.task)
			if err != nil {
				t.Fatal(err)
			}
			if got := grantsText(a.Grants); got != "1:1000" {
				t.Fatalf("grants %s, want 1:1000 (the free GPU, whole)", got)
			}
		})
	}
}

func TestK8sDefaultKeepsTheModelsOfARewrittenShare(t *testing.T) {
	p := engine.NewPlacer(policyNamed(t, "k8s-default"), random.New(1))
	r, err := p.Request(task("t").cpu(500).memory(64).share(250).on("V100M16").build())
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != workload.WholeGPUs || r.Count != 1 || len(r.Models) != 1 || r.Models[0] != "V100-16GB" || r.CPUMilli != 500 || r.MemMiB != 64 {
		t.Fatalf("rewritten request %s, models %v; want 1 whole V100-16GB with the task's CPU and memory", r, r.Models)
	}
	whole, err := p.Request(task("t").gpus(2).build())
	if err != nil || whole.Count != 2 {
		t.Fatalf("whole GPUs rewritten to %v, %v; want them as asked", whole, err)
	}
}

func TestK8sDefaultRefusesANodeWhoseGPUsAreAllShared(t *testing.T) {
	st := world(t, node("n").gpus(2, "V100-16GB"))
	allocateOn(t, st, "n", running("a").share(0, 100), running("b").share(1, 100))
	_, err := placeOne(t, policyNamed(t, "k8s-default"), st, task("t").share(100))
	var f *engine.Failure
	if !errors.As(err, &f) || f.Reasons[engine.CodeGPU] != 1 {
		t.Fatalf("error %v; want a Failure for gpu", err)
	}
}

func TestK8sDefaultUsesOnlyExistingMIGInstances(t *testing.T) {
	tests := []struct {
		name     string
		node     *nodeBuilder
		running  []*runningBuilder
		want     string // grants; "" = refused with mig-slice
		wantCode engine.Code
	}{
		{name: "takes a free instance of the profile", node: node("n").gpus(2, "H100-80GB").mig().layout("3g.40gb@0,1g.10gb@6"),
			running: []*runningBuilder{running("a").instance(0, "1g.10gb@6")}, want: "1:1g.10gb@6"},
		{name: "refuses a GPU where the instance would have to be created", node: node("n").gpus(1, "H100-80GB").mig(),
			wantCode: engine.CodeMIG},
		{name: "refuses instances of another profile", node: node("n").gpus(1, "H100-80GB").mig().layout("3g.40gb@0"),
			wantCode: engine.CodeMIG},
		{name: "refuses instances in use", node: node("n").gpus(1, "H100-80GB").mig().layout("1g.10gb@6"),
			running: []*runningBuilder{running("a").instance(0, "1g.10gb@6")}, wantCode: engine.CodeMIG},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := world(t, tt.node)
			allocateOn(t, st, "n", tt.running...)
			a, err := placeOne(t, policyNamed(t, "k8s-default"), st, task("t").migProfile("1g.10gb"))
			if tt.want != "" {
				if err != nil || grantsText(a.Grants) != tt.want {
					t.Fatalf("Place = %s, %v; want %s", grantsText(a.Grants), err, tt.want)
				}
				return
			}
			var f *engine.Failure
			if !errors.As(err, &f) || f.Reasons[tt.wantCode] != 1 {
				t.Fatalf("Place = %s, %v; want a Failure for %s", grantsText(a.Grants), err, tt.wantCode)
			}
		})
	}
}

func TestK8sDefaultScoresLeastAllocated(t *testing.T) {
	// score = (⌊(C−c)·100/C⌋ + ⌊(M−m)·100/M⌋) / 2 with c, m in use after placement.
	runScoreCases(t, policyNamed(t, "k8s-default"), []scoreCase{
		// (⌊5000·100/10000⌋ + ⌊6144·100/8192⌋) / 2 = (50 + 75) / 2
		{name: "counts what runs and what the task asks", node: node("n").cpu(10000).memory(8192),
			running: []*runningBuilder{running("a").cpu(2000)},
			task:    task("t").cpu(3000).memory(2048), want: 62},
		// (⌊66.67⌋ + ⌊87.79⌋) / 2 = (66 + 87) / 2
		{name: "truncates each term and the mean", node: node("n").cpu(10000).memory(8192),
			task: task("t").cpu(3333).memory(1000), want: 76},
		{name: "scores 100 for nothing asked of an empty node", node: node("n").cpu(10000).memory(8192),
			task: task("t"), want: 100},
		{name: "scores 0 for a task that fills the node", node: node("n").cpu(10000).memory(8192),
			task: task("t").cpu(10000).memory(8192), want: 0},
		// (⌊5000·100/10000⌋ + 0) / 2
		{name: "scores a resource the node lacks 0", node: node("n").cpu(10000).memory(0),
			task: task("t").cpu(5000), want: 25},
		{name: "ignores the GPUs", node: node("n").cpu(10000).memory(8192).gpus(2, "V100-16GB"),
			running: []*runningBuilder{running("a").whole(0, 1)},
			task:    task("t").cpu(5000).memory(4096), want: 50},
	})
}

func TestK8sDefaultSpreadsWork(t *testing.T) {
	st := world(t, node("busy").cpu(10000).memory(8192), node("idle").cpu(10000).memory(8192))
	allocateOn(t, st, "busy", running("a").cpu(1000))
	a, err := placeOne(t, policyNamed(t, "k8s-default"), st, task("t").cpu(1000))
	if err != nil || a.Node != "idle" {
		t.Fatalf("Place = %s, %v; want idle", a.Node, err)
	}
}

func TestRandomDrawsUniformlyAmongFeasibleNodes(t *testing.T) {
	st := world(t, node("a"), node("full").cpu(500), node("b"), node("c"))
	p := engine.NewPlacer(policyNamed(t, "random"), random.New(5))
	const draws = 3000
	counts := map[string]int{}
	for i := 0; i < draws; i++ {
		a, err := p.Place(st, task("t").cpu(1000).build())
		if err != nil {
			t.Fatal(err)
		}
		counts[a.Node]++
	}
	if counts["full"] > 0 {
		t.Fatalf("placed on the full node %d times", counts["full"])
	}
	for _, n := range []string{"a", "b", "c"} {
		// About 1000 each, standard deviation about 26.
		if counts[n] < 880 || counts[n] > 1120 {
			t.Fatalf("placed on %s %d times of %d; want about a third (%v)", n, counts[n], draws, counts)
		}
	}
}

func TestRandomDrawsTheGPUOfAShare(t *testing.T) {
	st := world(t, node("n").gpus(4, "V100-16GB"))
	p := engine.NewPlacer(policyNamed(t, "random"), random.New(5))
	seen := map[int]bool{}
	for i := 0; i < 200; i++ {
		a, err := p.Place(st, task("t").share(100).build())
		if err != nil {
			t.Fatal(err)
		}
		seen[a.Grants[0].GPU] = true
	}
	if len(seen) != 4 {
		t.Fatalf("200 shares on 4 free GPUs went to %v; want every GPU drawn", seen)
	}
}

func TestK8sDefaultSkipsInstancesOnCordonedGPUs(t *testing.T) {
	st := world(t, node("n").gpus(2, "H100-80GB").mig().layout("1g.10gb@6"))
	if err := st.Cordon("n", 0, true); err != nil {
		t.Fatal(err)
	}
	a, err := placeOne(t, policyNamed(t, "k8s-default"), st, task("t").migProfile("1g.10gb"))
	if err != nil || grantsText(a.Grants) != "1:1g.10gb@6" {
		t.Fatalf("Place = %s, %v; want 1:1g.10gb@6 (GPU 0 is cordoned)", grantsText(a.Grants), err)
	}
}
