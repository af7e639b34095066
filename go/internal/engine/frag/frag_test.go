package frag_test

import (
	"math"
	"testing"

	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/gpu"
)

// shapeBuilder builds a Shape: shape().cpu(2000).share(500).spec("G3").
type shapeBuilder struct{ s frag.Shape }

func shape() *shapeBuilder { return &shapeBuilder{} }

func (b *shapeBuilder) cpu(milli int64) *shapeBuilder { b.s.CPUMilli = milli; return b }
func (b *shapeBuilder) mem(mib int64) *shapeBuilder   { b.s.MemMiB = mib; return b }
func (b *shapeBuilder) share(milli int) *shapeBuilder { b.s.Milli, b.s.Num = milli, 1; return b }
func (b *shapeBuilder) gpus(n int) *shapeBuilder      { b.s.Milli, b.s.Num = 1000, n; return b }
func (b *shapeBuilder) spec(s string) *shapeBuilder   { b.s.Spec = s; return b }

// tasks lists count copies of each shape, in the order given.
type tasks []frag.Shape

func (ts tasks) times(count int, b *shapeBuilder) tasks {
	for i := 0; i < count; i++ {
		ts = append(ts, b.s)
	}
	return ts
}

// canonical is the model-name mapping every caller passes.
func canonical(name string) string { return gpu.Lookup(name).Name }

const eps = 1e-9

func near(a, b float64) bool { return math.Abs(a-b) <= eps*math.Max(1, math.Abs(b)) }

func TestTypicalsCountsAndOrdersShapes(t *testing.T) {
	tests := []struct {
		name      string
		tasks     tasks
		threshold float64
		want      []frag.Shape // in order
		wantP     []float64
	}{
		{
			name:      "orders by count, most frequent first",
			tasks:     tasks{}.times(1, shape().share(100)).times(3, shape().gpus(1)).times(2, shape()),
			threshold: 1,
			want:      []frag.Shape{shape().gpus(1).s, shape().s, shape().share(100).s},
			wantP:     []float64{3.0 / 6, 2.0 / 6, 1.0 / 6},
		},
		{
			name:      "breaks a tie in count by more CPU first",
			tasks:     tasks{}.times(2, shape().cpu(2000).share(900)).times(2, shape().cpu(4000).share(100)),
			threshold: 1,
			want:      []frag.Shape{shape().cpu(4000).share(100).s, shape().cpu(2000).share(900).s},
			wantP:     []float64{0.5, 0.5},
		},
		{
			name:      "breaks a tie in CPU by the larger share first",
			tasks:     tasks{}.times(2, shape().share(300)).times(2, shape().share(700)),
			threshold: 1,
			want:      []frag.Shape{shape().share(700).s, shape().share(300).s},
			wantP:     []float64{0.5, 0.5},
		},
		{
			name:      "breaks a tie in share by more GPUs first",
			tasks:     tasks{}.times(1, shape().gpus(2)).times(1, shape().gpus(8)).times(1, shape().gpus(4)),
			threshold: 1,
			want:      []frag.Shape{shape().gpus(8).s, shape().gpus(4).s, shape().gpus(2).s},
			wantP:     []float64{1.0 / 3, 1.0 / 3, 1.0 / 3},
		},
		{
			name:      "breaks a tie in GPUs by the later spec first",
			tasks:     tasks{}.times(1, shape().share(500).spec("G2")).times(1, shape().share(500).spec("G3")).times(1, shape().share(500)),
			threshold: 1,
			want:      []frag.Shape{shape().share(500).spec("G3").s, shape().share(500).spec("G2").s, shape().share(500).s},
			wantP:     []float64{1.0 / 3, 1.0 / 3, 1.0 / 3},
		},
		{
			name:      "keeps the smallest prefix that reaches the threshold",
			tasks:     tasks{}.times(5, shape().share(500)).times(3, shape().gpus(1)).times(2, shape()),
			threshold: 0.8,
			want:      []frag.Shape{shape().share(500).s, shape().gpus(1).s},
			wantP:     []float64{5.0 / 8, 3.0 / 8},
		},
		{
			name:      "keeps one more shape just past the threshold",
			tasks:     tasks{}.times(5, shape().share(500)).times(3, shape().gpus(1)).times(2, shape()),
			threshold: 0.81,
			want:      []frag.Shape{shape().share(500).s, shape().gpus(1).s, shape().s},
			wantP:     []float64{0.5, 0.3, 0.2},
		},
		{
			name:      "keeps the first shape alone when it covers the threshold",
			tasks:     tasks{}.times(19, shape().share(500)).times(1, shape().gpus(1)),
			threshold: frag.DefaultThreshold,
			want:      []frag.Shape{shape().share(500).s},
			wantP:     []float64{1},
		},
		{
			name:      "keys shapes by spec as written",
			tasks:     tasks{}.times(2, shape().share(500).spec("V100M16")).times(1, shape().share(500).spec("V100-16GB")),
			threshold: 1,
			want:      []frag.Shape{shape().share(500).spec("V100M16").s, shape().share(500).spec("V100-16GB").s},
			wantP:     []float64{2.0 / 3, 1.0 / 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := frag.Typicals(tt.tasks, tt.threshold, canonical)
			if len(d.Pods) != len(tt.want) {
				t.Fatalf("kept %d shapes %+v, want %d %+v", len(d.Pods), d.Pods, len(tt.want), tt.want)
			}
			sum := 0.0
			for i, p := range d.Pods {
				if p.Shape != tt.want[i] || !near(p.P, tt.wantP[i]) {
					t.Fatalf("shape %d = %+v with P %v, want %+v with P %v", i, p.Shape, p.P, tt.want[i], tt.wantP[i])
				}
				sum += p.P
			}
			if !near(sum, 1) {
				t.Fatalf("probabilities sum to %v, want 1", sum)
			}
		})
	}
}

func TestTypicalsAveragesMemoryInsteadOfKeyingOnIt(t *testing.T) {
	ts := tasks{}.
		times(1, shape().cpu(1000).mem(1000).share(500)).
		times(1, shape().cpu(1000).mem(2000).share(500)).
		times(1, shape().cpu(1000).mem(4000).share(500)).
		times(1, shape().gpus(1).mem(300))
	d := frag.Typicals(ts, 1, canonical)
	if len(d.Pods) != 2 {
		t.Fatalf("kept %d shapes %+v; want 2 (memory is not part of the key)", len(d.Pods), d.Pods)
	}
	first := d.Pods[0]
	if first.MemMiB != 7000/3 || first.CPUMilli != 1000 || first.Milli != 500 || !near(first.P, 0.75) {
		t.Fatalf("first shape %+v P %v; want 1000m, 500 milli, memory 7000/3 = %d MiB, P 0.75", first.Shape, first.P, 7000/3)
	}
	if d.Pods[1].MemMiB != 300 {
		t.Fatalf("second shape memory %d, want 300", d.Pods[1].MemMiB)
	}
}

func TestWithoutMemoryClearsMemoryOnly(t *testing.T) {
	in := tasks{}.times(1, shape().cpu(1000).mem(2048).share(500).spec("G2"))
	out := frag.WithoutMemory(in)
	if want := shape().cpu(1000).share(500).spec("G2").s; out[0] != want {
		t.Fatalf("WithoutMemory = %+v, want %+v", out[0], want)
	}
	if in[0].MemMiB != 2048 {
		t.Fatalf("WithoutMemory changed its input: %+v", in[0])
	}
}

func mix() *frag.Distribution {
	ts := tasks{}.
		times(4, shape().cpu(2000).share(500)).
		times(3, shape().cpu(4000).gpus(2)).
		times(2, shape().cpu(1000)).
		times(1, shape().share(200).spec("G3"))
	return frag.Typicals(ts, 1, canonical)
}

func TestNode(t *testing.T) {
	tests := []struct {
		name    string
		model   string
		cpuLeft int64
		left    []int
		want    float64
	}{
		// L = 2400; GPUs under 500 hold 400, under 1000 hold 400 too.
		//   a fits: .4 × 400; b fits: .3 × 400; c: .2 × L; d excluded: .1 × L
		{"adds the small GPUs of fitting tasks and all of L otherwise", "V100-16GB", 8000, []int{1000, 1000, 300, 100},
			0.4*400 + 0.3*400 + 0.2*2400 + 0.1*2400},
		//   b is short of CPU: .3 × L
		{"adds all of L for a task short of CPU", "V100-16GB", 3000, []int{1000, 1000, 300, 100},
			0.4*400 + 0.3*2400 + 0.2*2400 + 0.1*2400},
		//   a and b short of CPU
		{"adds all of L for every task short of CPU", "V100-16GB", 1999, []int{1000, 1000, 300, 100},
			0.4*2400 + 0.3*2400 + 0.2*2400 + 0.1*2400},
		// L = 2000; b finds one free GPU of two: .3 × L
		{"adds all of L for a task without enough GPUs", "V100-16GB", 8000, []int{1000, 600, 300, 100},
			0.4*400 + 0.3*2000 + 0.2*2000 + 0.1*2000},
		// d may use G3 and fits: .1 × 100
		{"adds only the small GPUs of a spec that allows the model", "G3", 8000, []int{1000, 1000, 300, 100},
			0.4*400 + 0.3*400 + 0.2*2400 + 0.1*100},
		// L = 900: a (500) fits on one GPU, b fits nowhere.
		{"counts a GPU with exactly the share as fitting", "V100-16GB", 8000, []int{500, 400},
			0.4*400 + 0.3*900 + 0.2*900 + 0.1*900},
		{"is zero without free GPU", "V100-16GB", 8000, []int{0, 0}, 0},
		{"is zero on a node without GPUs", "", 8000, nil, 0},
	}
	d := mix()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := d.Node(tt.model, tt.cpuLeft, 0, tt.left); !near(got, tt.want) {
				t.Fatalf("Node(%s, cpu %d, %v) = %v, want %v", tt.model, tt.cpuLeft, tt.left, got, tt.want)
			}
		})
	}
}

func TestNodeOverCountsEachGPUByTheChanceNoneOfTheNextTasksUsesIt(t *testing.T) {
	// mix(): a (.4) 500 milli and b (.3) 2 GPUs, both 2000 CPU; c (.2)
	// CPU-only; d (.1) 200 milli on G3 only. On V100 with 8000 CPU, the
	// free GPUs of 1000 fit a and b: q = .2 + .1 = .3; 300 and 100 fit
	// neither: q = 1.
	d := mix()
	left := []int{1000, 1000, 300, 100}
	for _, h := range []int{1, 2, 5} {
		want := 2000*math.Pow(0.3, float64(h)) + 400
		if got := d.NodeOver("V100-16GB", 8000, 0, left, h); !near(got, want) {
			t.Fatalf("NodeOver(%v, h=%d) = %v, want %v", left, h, got, want)
		}
	}
	// Short of CPU, nothing fits anywhere: q = 1 everywhere, whatever h.
	if got := d.NodeOver("V100-16GB", 1999, 0, left, 5); !near(got, 2400) {
		t.Fatalf("NodeOver short of CPU = %v, want all 2400", got)
	}
}

func TestNodeCountsFreeGPUsAsFragmentForCPUOnlyTasksWhateverTheCPU(t *testing.T) {
	d := frag.Typicals(tasks{}.times(1, shape().cpu(64000)), 1, canonical)
	for _, cpu := range []int64{0, 64000} {
		if got := d.Node("V100-16GB", cpu, 0, []int{1000, 250}); got != 1250 {
			t.Fatalf("cpu left %d: Node = %v, want all 1250 free milli", cpu, got)
		}
	}
}

func TestNodeCanonicalisesTheSpec(t *testing.T) {
	ts := tasks{}.times(1, shape().share(500).spec("V100M16|V100M32"))
	tests := []struct {
		name      string
		canonical func(string) string
		model     string
		want      float64
	}{
		{"lets a trace spec use the canonical model", canonical, "V100-16GB", 100},
		{"lets either model of the spec", canonical, "V100-32GB", 100},
		{"excludes a model the spec does not name", canonical, "G2", 1100},
		{"compares names as written without a mapping", nil, "V100-16GB", 1100},
		{"matches names as written without a mapping", nil, "V100M16", 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := frag.Typicals(ts, 1, tt.canonical)
			if got := d.Node(tt.model, 0, 0, []int{1000, 100}); got != tt.want {
				t.Fatalf("Node(%s) = %v, want %v", tt.model, got, tt.want)
			}
		})
	}
}

func TestNodeCountsHostMemoryOnlyForShapesThatHaveIt(t *testing.T) {
	withMemory := frag.Typicals(tasks{}.times(1, shape().mem(4096).share(500)), 1, canonical)
	if got := withMemory.Node("V100-16GB", 0, 4095, []int{1000, 100}); got != 1100 {
		t.Fatalf("memory short: Node = %v, want all 1100 free milli", got)
	}
	if got := withMemory.Node("V100-16GB", 0, 4096, []int{1000, 100}); got != 100 {
		t.Fatalf("memory enough: Node = %v, want the 100 too small", got)
	}
	paper := frag.Typicals(frag.WithoutMemory(tasks{}.times(1, shape().mem(4096).share(500))), 1, canonical)
	if got := paper.Node("V100-16GB", 0, 0, []int{1000, 100}); got != 100 {
		t.Fatalf("paper view with no memory left: Node = %v, want 100", got)
	}
}
