package policies_test

import (
	"testing"

	"partita.dev/partita/internal/engine"
)

// The baseline scores of fgd-protocol.md §5, computed by hand on one-node
// clusters. The comment of each case gives the arithmetic.

// scoreCase is one node, what runs on it, one task and its score.
type scoreCase struct {
	name    string
	node    *nodeBuilder
	running []*runningBuilder
	task    *taskBuilder
	want    int64
}

func runScoreCases(t *testing.T, p engine.Policy, cases []scoreCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			st := world(t, tt.node)
			allocateOn(t, st, tt.node.spec.Name, tt.running...)
			if got, _ := scoreOn(t, p, st, tt.task); got != tt.want {
				t.Fatalf("score = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestDotProductScore(t *testing.T) {
	// score = ⌊100 × (1 − ½[(cpuL/128000)(cpu/128000) + (gL/8000)(gpu/8000)])⌋
	runScoreCases(t, mustPolicy(t, "dot-product", alibabaNorms()), []scoreCase{
		// ½(½·¼ + 1·½) = 0.3125
		{name: "scores half a node asked of a node with half its CPU", node: node("n").cpu(64000).gpus(8, "V100-32GB"),
			task: task("t").cpu(32000).gpus(4), want: 68},
		// ½(1·½ + 0) = 0.25
		{name: "scores a CPU-only task by CPU alone", node: node("n").gpus(8, "V100-32GB"),
			task: task("t").cpu(64000), want: 75},
		// ½(¼·⅛ + ¾·¹⁄₁₆) = 0.0390625
		{name: "scores a share by what is left", node: node("n").gpus(8, "V100-32GB"),
			running: []*runningBuilder{running("old").cpu(96000).whole(0, 1)},
			task:    task("t").cpu(16000).share(500), want: 96},
		// ½(1 + 1) = 1
		{name: "scores 0 for a task that matches a whole empty node", node: node("n").gpus(8, "V100-32GB"),
			task: task("t").cpu(128000).gpus(8), want: 0},
		// ½(0 + ¼·0.025) = 0.003125
		{name: "scores a small share on a small node near 100", node: node("n").cpu(32000).gpus(2, "V100-16GB"),
			task: task("t").share(200), want: 99},
	})
}

func TestDotProductScalesByTheNormsGiven(t *testing.T) {
	// With the node's own 64000m and 4 GPUs as norms: ½(1·½ + 1·½) = 0.5.
	p := mustPolicy(t, "dot-product", policiesConfig(64000, 4000))
	runScoreCases(t, p, []scoreCase{
		{name: "scores by the smaller norms", node: node("n").cpu(64000).gpus(4, "V100-16GB"),
			task: task("t").cpu(32000).gpus(2), want: 50},
	})
}

func TestBestFitScore(t *testing.T) {
	// score = ⌊100 × (1 − ½(cpuL − cpu)/128000 − ½(gL − gpu)/8000)⌋
	runScoreCases(t, mustPolicy(t, "best-fit", alibabaNorms()), []scoreCase{
		// 1 − ½·¼ − ½·½ = 0.625
		{name: "scores by what is left after placement", node: node("n").cpu(64000).gpus(8, "V100-32GB"),
			task: task("t").cpu(32000).gpus(4), want: 62},
		// 1 − ½·⅛ − ½·1750/8000 = 0.828125
		{name: "scores a share by the milli left after it", node: node("n").cpu(16000).gpus(2, "V100-16GB"),
			task: task("t").share(250), want: 82},
		// 1 − ½·24000/128000 − ½·2500/8000 = 0.75
		{name: "counts what already runs", node: node("n").gpus(8, "V100-32GB"),
			running: []*runningBuilder{running("old").cpu(100000).whole(0, 1, 2, 3, 4)},
			task:    task("t").cpu(4000).share(500), want: 75},
		{name: "scores 100 for a task that fills the node", node: node("n").gpus(8, "V100-32GB"),
			task: task("t").cpu(128000).gpus(8), want: 100},
		{name: "scores 0 for nothing asked of an empty largest node", node: node("n").gpus(8, "V100-32GB"),
			task: task("t"), want: 0},
	})
}

func TestGPUClusteringScore(t *testing.T) {
	// score = b + ⌊25 × (8000 − gL) / 8000⌋; 8000 even on a 2-GPU node.
	twoGPUs := func() *nodeBuilder { return node("n").gpus(2, "V100-16GB") }
	fourGPUs := func() *nodeBuilder { return node("n").gpus(4, "V100-16GB") }
	runScoreCases(t, policyNamed(t, "gpu-clustering"), []scoreCase{
		// 25 + ⌊25·6000/8000⌋ = 25 + 18
		{name: "gives 25 on a node without GPU tasks", node: twoGPUs(),
			task: task("t").share(500), want: 43},
		// 75 + ⌊25·6250/8000⌋ = 75 + 19
		{name: "gives 75 on a node holding only shares", node: twoGPUs(),
			running: []*runningBuilder{running("a").share(0, 250)},
			task:    task("t").share(500), want: 94},
		// 50 + ⌊25·7250/8000⌋ = 50 + 22
		{name: "gives 50 on a node holding shares among others", node: twoGPUs(),
			running: []*runningBuilder{running("a").share(0, 250), running("b").whole(1)},
			task:    task("t").share(500), want: 72},
		// 0 + ⌊25·7000/8000⌋ = 21
		{name: "gives 0 on a node holding only other kinds", node: twoGPUs(),
			running: []*runningBuilder{running("b").whole(1)},
			task:    task("t").share(500), want: 21},
		{name: "gives 75 to a whole GPU beside a whole GPU", node: twoGPUs(),
			running: []*runningBuilder{running("b").whole(1)},
			task:    task("t").gpus(1), want: 96},
		{name: "ignores CPU-only tasks on the node", node: twoGPUs(),
			running: []*runningBuilder{running("c").cpu(1000)},
			task:    task("t").share(500), want: 43},
		// 0 + ⌊25·5000/8000⌋ = 15
		{name: "tells whole-GPU tasks apart by GPU count", node: fourGPUs(),
			running: []*runningBuilder{running("a").whole(0)},
			task:    task("t").gpus(2), want: 15},
		// 75 + ⌊25·6000/8000⌋ = 75 + 18
		{name: "gives 75 to two GPUs beside two GPUs", node: fourGPUs(),
			running: []*runningBuilder{running("a").whole(0, 1)},
			task:    task("t").gpus(2), want: 93},
		{name: "uses 8000 for an 8-GPU node too", node: node("n").gpus(8, "V100-16GB"),
			task: task("t").share(500), want: 25},
		{name: "scores a CPU-only task 0", node: twoGPUs(),
			running: []*runningBuilder{running("a").share(0, 250)},
			task:    task("t").cpu(1000), want: 0},
	})
}

func TestGPUClusteringSeesAMIGTaskAsTheKindOfAMIGInstance(t *testing.T) {
	// 75 + ⌊25·(8000 − 0)/8000⌋: a MIG GPU has no milli to give.
	runScoreCases(t, policyNamed(t, "gpu-clustering"), []scoreCase{
		{name: "gives 75 to a MIG task beside a MIG task", node: node("n").gpus(1, "H100-80GB").mig(),
			running: []*runningBuilder{running("a").instance(0, "1g.10gb@0")},
			task:    task("t").migProfile("1g.10gb"), want: 100},
	})
}

func TestGPUPackingScore(t *testing.T) {
	twoShared := func() *nodeBuilder { return node("n").gpus(2, "V100-16GB") }
	runScoreCases(t, policyNamed(t, "gpu-packing"), []scoreCase{
		// Every GPU free: max(33 − G, G).
		{name: "scores an empty 2-GPU node 33 − 2", node: node("n").gpus(2, "V100-16GB"),
			task: task("t").share(500), want: 31},
		{name: "scores an empty 8-GPU node 33 − 8", node: node("n").gpus(8, "V100-16GB"),
			task: task("t").gpus(1), want: 25},
		{name: "scores an empty 20-GPU node by its GPU count", node: node("n").gpus(20, "V100-16GB"),
			task: task("t").share(500), want: 20},
		// A fully free GPU is taken: max(50 − free GPUs taken, 33).
		{name: "scores one fully free GPU taken on a used node 50 − 1", node: node("n").gpus(4, "V100-16GB"),
			running: []*runningBuilder{running("a").share(0, 600)},
			task:    task("t").share(500), want: 49},
		{name: "scores three fully free GPUs taken 50 − 3", node: node("n").gpus(4, "V100-16GB"),
			running: []*runningBuilder{running("a").share(0, 600)},
			task:    task("t").gpus(3), want: 47},
		{name: "keeps at least 33 however many free GPUs are taken", node: node("n").gpus(20, "V100-16GB"),
			running: []*runningBuilder{running("a").share(0, 1)},
			task:    task("t").gpus(19), want: 33},
		// Only shared GPUs taken: max(100 − ⌊Σ⌊left×100/1000⌋ / 10⌋, 50).
		// Left 400 and 700; the least left that fits is taken.
		{name: "scores a shared GPU by what it has left", node: twoShared(),
			running: []*runningBuilder{running("a").share(0, 600), running("b").share(1, 300)},
			task:    task("t").share(300), want: 96},
		{name: "skips a shared GPU too small for the task", node: twoShared(),
			running: []*runningBuilder{running("a").share(0, 600), running("b").share(1, 300)},
			task:    task("t").share(500), want: 93},
		// Left 999 and 1000: ⌊99.9⌋ = 99, ⌊99/10⌋ = 9.
		{name: "takes a shared GPU before a free one and truncates twice", node: twoShared(),
			running: []*runningBuilder{running("a").share(0, 1)},
			task:    task("t").share(999), want: 91},
		{name: "scores a CPU-only task 0 even on an empty node", node: node("n").gpus(2, "V100-16GB"),
			task: task("t").cpu(1000), want: 0},
	})
}
