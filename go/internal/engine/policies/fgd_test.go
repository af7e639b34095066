package policies_test

import (
	"math"
	"testing"

	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/engine/policies"
)

// fgdPolicy builds FGD for a typical workload.
func fgdPolicy(t testing.TB, typ *frag.Distribution) engine.Policy {
	t.Helper()
	return mustPolicy(t, "fgd", policies.Config{Typical: typ})
}

// sigmoidScore is ⌊100σ((F − F′)/1000)⌋, written out for the test tables.
func sigmoidScore(before, after float64) int64 {
	return int64(math.Floor(100 / (1 + math.Exp(-(before-after)/1000))))
}

func TestSigmoidScoreOfTheTables(t *testing.T) {
	// The hand values the FGD tables below rely on.
	for _, c := range []struct {
		before, after float64
		want          int64
	}{{350, 700, 41}, {350, 400, 48}, {700, 400, 57}, {700, 1400, 33}, {610, 600, 50}, {400, 900, 37}, {0, 1000, 26}, {0, 0, 50}} {
		if got := sigmoidScore(c.before, c.after); got != c.want {
			t.Fatalf("⌊100σ((%v − %v)/1000)⌋ = %d, want %d", c.before, c.after, got, c.want)
		}
	}
}

func TestFGDScore(t *testing.T) {
	tests := []struct {
		name     string
		typical  *frag.Distribution
		node     *nodeBuilder
		running  []*runningBuilder
		task     *taskBuilder
		want     int64
		wantHint int // -1: no hint
	}{
		{
			// Typical: ½ a 600 share, ½ one whole GPU. Left 1000, 700: F = ½·0 + ½·700 = 350.
			// GPU 0 → 700, 700: F′ = ½·0 + ½·1400 = 700 → 41.
			// GPU 1 → 1000, 400: F′ = ½·400 + ½·400 = 400 → 48.
			name:    "takes the GPU whose fragment grows least",
			typical: typical(shape().share(600), shape().gpus(1)),
			node:    node("n").gpus(2, "V100-16GB"), running: []*runningBuilder{running("a").share(1, 300)},
			task: task("t").share(300), want: 48, wantHint: 1,
		},
		{
			// Typical: one whole GPU. Left 700, 1000: F = 700.
			// GPU 0 → 400, 1000: F′ = 400 → 57.  GPU 1 → 700, 700: F′ = 1400 → 33.
			name:    "keeps a whole GPU free when it can",
			typical: typical(shape().gpus(1)),
			node:    node("n").gpus(2, "V100-16GB"), running: []*runningBuilder{running("a").share(0, 300)},
			task: task("t").share(300), want: 57, wantHint: 0,
		},
		{
			// Typical: a 600 share. Left 1000, 590, 20: F = 610.
			// GPU 0 → F′ = 610 → 50; GPU 1 and 2 → F′ = 600 → ⌊50.25⌋ = 50.
			name:    "takes the first GPU reaching the integer best",
			typical: typical(shape().share(600)),
			node:    node("n").gpus(3, "V100-16GB"), running: []*runningBuilder{running("a").share(1, 410), running("b").share(2, 980)},
			task: task("t").share(10), want: 50, wantHint: 0,
		},
		{
			// Typical: ½ a 600 share, ½ two whole GPUs. Left 400, 1000, 1000: F = 200 + 200.
			// The first free GPU goes: 400, 0, 1000: F′ = ½·400 + ½·1400 = 900 → 37.
			name:    "takes the lowest free GPUs for whole GPUs",
			typical: typical(shape().share(600), shape().gpus(2)),
			node:    node("n").gpus(3, "V100-16GB"), running: []*runningBuilder{running("a").share(0, 600)},
			task: task("t").gpus(1), want: 37, wantHint: -1,
		},
		{
			// Typical: a 500 share with 8000m CPU. 10000m left: F = 0; 6000m left: F′ = 1000 → 26.
			name:    "counts the CPU a CPU-only task takes",
			typical: typical(shape().cpu(8000).share(500)),
			node:    node("n").cpu(10000).gpus(1, "V100-16GB"),
			task:    task("t").cpu(4000), want: 26, wantHint: -1,
		},
		{
			name:    "scores a MIG task 0",
			typical: typical(shape().share(500)),
			node:    node("n").gpus(1, "H100-80GB").mig(),
			task:    task("t").migProfile("1g.10gb"), want: 0, wantHint: -1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := world(t, tt.node)
			allocateOn(t, st, "n", tt.running...)
			got, h := scoreOn(t, fgdPolicy(t, tt.typical), st, tt.task)
			hint := -1
			if h.Set {
				hint = h.GPU
			}
			if got != tt.want || hint != tt.wantHint {
				t.Fatalf("score, hint = %d, %d; want %d, %d", got, hint, tt.want, tt.wantHint)
			}
		})
	}
}

func TestFGDPlacesAShareOnTheGPUItScored(t *testing.T) {
	// As in "takes the first GPU reaching the integer best": best-fit
	// would take GPU 2 (20 left); FGD takes GPU 0.
	st := world(t, node("n").gpus(3, "V100-16GB"))
	allocateOn(t, st, "n", running("a").share(1, 410), running("b").share(2, 980))
	a, err := placeOne(t, fgdPolicy(t, typical(shape().share(600))), st, task("t").share(10))
	if err != nil {
		t.Fatal(err)
	}
	if got := grantsText(a.Grants); got != "0:10" {
		t.Fatalf("grants %s, want 0:10", got)
	}
}

func TestFGDTakesTheNodeWhoseFragmentGrowsLeast(t *testing.T) {
	// Typical: one whole GPU. On "shared" (left 700, 1000) the share
	// scores 57; on "empty" (1000, 1000) F = 0 → F′ = 700 → ⌊100σ(−0.7)⌋ = 33.
	st := world(t, node("empty").gpus(2, "V100-16GB"), node("shared").gpus(2, "V100-16GB"))
	allocateOn(t, st, "shared", running("a").share(0, 300))
	a, err := placeOne(t, fgdPolicy(t, typical(shape().gpus(1))), st, task("t").share(300))
	if err != nil {
		t.Fatal(err)
	}
	if a.Node != "shared" || grantsText(a.Grants) != "0:300" {
		t.Fatalf("placed on %s %s, want shared 0:300", a.Node, grantsText(a.Grants))
	}
}
