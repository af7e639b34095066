package fill

import (
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/trace"
	"partita.dev/partita/internal/workload"
)

func TestPodOfConvertsTraceRows(t *testing.T) {
	tests := []struct {
		name      string
		row       trace.Pod
		wantGPU   workload.Demand
		wantMilli int64
		wantShape frag.Shape
	}{
		{
			name:      "a CPU-only pod asks for no GPU and its gpu_spec is ignored",
			row:       pod("cpu").cpu(4000).memory(8192).spec("T4").build(),
			wantGPU:   workload.Demand{Kind: workload.NoGPU},
			wantMilli: 0,
			wantShape: frag.Shape{CPUMilli: 4000, MemMiB: 8192},
		},
		{
			name:      "one GPU below 1000 milli is a share",
			row:       pod("share").cpu(6000).memory(12288).share(460).build(),
			wantGPU:   workload.Demand{Kind: workload.Fraction, Milli: 460},
			wantMilli: 460,
			wantShape: frag.Shape{CPUMilli: 6000, MemMiB: 12288, Milli: 460, Num: 1},
		},
		{
			name:      "a share keeps its allowed models, and the shape the spec as written",
			row:       pod("spec").share(700).spec("V100M16|V100M32|V100M32").build(),
			wantGPU:   workload.Demand{Kind: workload.Fraction, Milli: 700, Models: []string{"V100M16", "V100M32"}},
			wantMilli: 700,
			wantShape: frag.Shape{CPUMilli: 1000, MemMiB: 1024, Milli: 700, Num: 1, Spec: "V100M16|V100M32|V100M32"},
		},
		{
			name:      "one GPU at 1000 milli is a whole GPU, not a share",
			row:       pod("whole").share(1000).spec("T4").build(),
			wantGPU:   workload.Demand{Kind: workload.WholeGPUs, Count: 1, Models: []string{"T4"}},
			wantMilli: 1000,
			wantShape: frag.Shape{CPUMilli: 1000, MemMiB: 1024, Milli: 1000, Num: 1, Spec: "T4"},
		},
		{
			name:      "a multi-GPU pod asks for whole GPUs and adds num × milli to the arrived total",
			row:       pod("eight").cpu(88000).gpus(8).build(),
			wantGPU:   workload.Demand{Kind: workload.WholeGPUs, Count: 8},
			wantMilli: 8000,
			wantShape: frag.Shape{CPUMilli: 88000, MemMiB: 1024, Milli: 1000, Num: 8},
		},
		{
			name:      "gpu_milli above 1000 is clamped to a whole GPU",
			row:       trace.Pod{Name: "over", CPUMilli: 1000, NumGPU: 1, GPUMilli: 1500},
			wantGPU:   workload.Demand{Kind: workload.WholeGPUs, Count: 1},
			wantMilli: 1000,
			wantShape: frag.Shape{CPUMilli: 1000, Milli: 1000, Num: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := podOf(tt.row, "renamed")
			if p.Task.Name != "renamed" || p.Task.CPUMilli != tt.row.CPUMilli || p.Task.MemoryMiB != tt.row.MemoryMiB {
				t.Errorf("task %s cpu %d mem %d; want renamed, %d, %d",
					p.Task.Name, p.Task.CPUMilli, p.Task.MemoryMiB, tt.row.CPUMilli, tt.row.MemoryMiB)
			}
			if !reflect.DeepEqual(p.Task.GPU, tt.wantGPU) {
				t.Errorf("GPU demand %+v; want %+v", p.Task.GPU, tt.wantGPU)
			}
			if p.GPUMilli != tt.wantMilli {
				t.Errorf("GPUMilli %d; want %d", p.GPUMilli, tt.wantMilli)
			}
			if p.shape != tt.wantShape {
				t.Errorf("shape %+v; want %+v", p.shape, tt.wantShape)
			}
		})
	}
}

// referenceArrivals is an independent reading of §3 steps 1–3, written
// from the specification and not from Arrivals: it returns the arrival
// order as names.
func referenceArrivals(rows []trace.Pod, clusterMilli int64, tune float64, rng *random.Rand) []string {
	// 1. (The published simulator logs one rand.Int() first; the
	// project's generator has no such draw.) 2. Sort by name, then shuffle.
	byName := slices.Clone(rows)
	slices.SortFunc(byName, func(a, b trace.Pod) int { return strings.Compare(a.Name, b.Name) })
	list := slices.Clone(byName)
	rng.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
	order := make([]string, len(list))
	demand := func(p trace.Pod) int64 { return int64(p.NumGPU) * p.GPUMilli }
	var current int64
	for i, p := range list {
		order[i] = p.Name
		current += demand(p)
	}
	// 3. Tune towards T = tune × the cluster's GPU milli.
	T := tune * float64(clusterMilli)
	switch {
	case float64(current) < T:
		// tuneUpPods: draw from the name-sorted list with replacement; stop
		// at the first draw whose per-GPU milli would cross T.
		for i := 0; ; i++ {
			p := byName[rng.Intn(len(byName))]
			if float64(current+p.GPUMilli) > T {
				break
			}
			order = append(order, p.Name+"-tuned-"+itoa(i))
			current += demand(p)
		}
	case float64(current) > T:
		// tuneDownPods: remove random pods of the current list.
		for float64(current) > T {
			k := rng.Intn(len(list))
			current -= demand(list[k])
			list = slices.Delete(list, k, k+1)
			order = slices.Delete(order, k, k+1)
		}
	}
	return order
}

func itoa(i int) string { return strconv.Itoa(i) }

// shuffledNames is §3 steps 1 and 2 alone: the rows' names sorted, then
// shuffled by the stream of seed.
func shuffledNames(rows []trace.Pod, seed int64) ([]string, *random.Rand) {
	rng := random.New(seed)
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Name
	}
	slices.Sort(out)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out, rng
}

func TestArrivalsConsumesTheRandomStreamAsTheProtocol(t *testing.T) {
	rows := smallPods(t)
	cases := []struct {
		name         string
		clusterMilli int64
		tune         float64
		wantTuning   string // "up", "down" or "none"
	}{
		{"tunes up to 1.3 × the cluster", smallClusterMilli, 1.3, "up"},
		{"tunes up a long way", smallClusterMilli, 3, "up"},
		{"tunes down to 1.0 × the cluster", smallClusterMilli, 1, "down"},
		{"tunes down to a third of the pods", smallClusterMilli, 0.4, "down"},
		{"leaves a list exactly at the target alone", smallPodsMilli / 2, 2, "none"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, seed := range []int64{1, 42, 51, 2024} {
				got, want := random.New(seed), random.New(seed)
				arrivals := Arrivals(rows, c.clusterMilli, c.tune, got)
				if ref := referenceArrivals(rows, c.clusterMilli, c.tune, want); !slices.Equal(names(arrivals), ref) {
					t.Fatalf("seed %d: arrivals\n%v\nwant\n%v", seed, names(arrivals), ref)
				}
				// The node ranks are drawn next, so the stream must be left
				// exactly where the protocol leaves it.
				if g, w := got.Perm(5), want.Perm(5); !slices.Equal(g, w) {
					t.Fatalf("seed %d: next Perm(5) %v, want %v: Arrivals consumed the stream differently", seed, g, w)
				}
				switch n := len(arrivals); {
				case c.wantTuning == "up" && n <= len(rows),
					c.wantTuning == "down" && n >= len(rows),
					c.wantTuning == "none" && n != len(rows):
					t.Fatalf("seed %d: %d arrivals from %d rows; want tuning %s", seed, n, len(rows), c.wantTuning)
				}
			}
		})
	}
}

func TestArrivalsAppendsRenamedCopiesAfterTheShuffledOriginals(t *testing.T) {
	rows := smallPods(t)
	byName := map[string]trace.Pod{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	arrivals := Arrivals(rows, smallClusterMilli, 1.3, random.New(7))
	originals := names(arrivals[:len(rows)])
	rowNames := slices.Sorted(maps.Keys(byName))
	if !slices.Equal(slices.Sorted(slices.Values(originals)), rowNames) {
		t.Fatalf("the first %d arrivals are not a permutation of the rows: %v", len(rows), originals)
	}
	if slices.IsSorted(originals) {
		t.Fatalf("the originals arrive in name order: not shuffled")
	}
	tuned := arrivals[len(rows):]
	if len(tuned) == 0 {
		t.Fatal("no tuned copies")
	}
	for i, p := range tuned {
		orig, idx, ok := strings.Cut(p.Task.Name, "-tuned-")
		if !ok || idx != itoa(i) {
			t.Fatalf("copy %d is named %q; want <name>-tuned-%d", i, p.Task.Name, i)
		}
		src, ok := byName[orig]
		if !ok {
			t.Fatalf("copy %q names no row", p.Task.Name)
		}
		want := podOf(src, p.Task.Name)
		if !reflect.DeepEqual(p, want) {
			t.Fatalf("copy %q is %+v; want the row's request %+v", p.Task.Name, p, want)
		}
	}
	target := int64(1.3 * smallClusterMilli)
	if total := totalMilli(arrivals); total > target+8000 || total < target-1000 {
		t.Fatalf("tuned total %d milli; want about the target %d", total, target)
	}
}

func TestArrivalsStopRuleUsesThePerGPUMilli(t *testing.T) {
	// One 4-GPU pod on a 10,000-milli cluster, target 10,000: the copies
	// are checked against 1000 (per GPU), not 4000, so the second copy
	// takes the total to 12,000, and the third draw, 12,000 + 1000, stops.
	rows := pods(pod("wide").gpus(4))
	arrivals := Arrivals(rows, 10000, 1, random.New(1))
	want := []string{"wide", "wide-tuned-0", "wide-tuned-1"}
	if got := names(arrivals); !slices.Equal(got, want) {
		t.Fatalf("arrivals %v; want %v", got, want)
	}
	if total := totalMilli(arrivals); total != 12000 {
		t.Fatalf("total %d milli; want 12000, 2000 over the target", total)
	}
}

func TestArrivalsAlwaysAppendsCPUOnlyDraws(t *testing.T) {
	// A share of 600 on a 1000-milli cluster at tune 1: every GPU draw
	// crosses the target at once, so only CPU-only draws are ever
	// appended, and the first share drawn ends the tuning.
	rows := pods(pod("a-cpu"), pod("b-share").share(600))
	for seed := int64(0); seed < 20; seed++ {
		arrivals := Arrivals(rows, 1000, 1, random.New(seed))
		for _, p := range arrivals[2:] {
			if !strings.HasPrefix(p.Task.Name, "a-cpu-tuned-") {
				t.Fatalf("seed %d: %v: a GPU draw was appended past the target", seed, names(arrivals))
			}
		}
	}
}

func TestArrivalsTunesDownUntilTheTotalIsAtMostTheTarget(t *testing.T) {
	rows := smallPods(t)
	for _, seed := range []int64{3, 42, 99} {
		rng := random.New(seed)
		shuffled, _ := shuffledNames(rows, seed)
		arrivals := Arrivals(rows, smallClusterMilli, 1, rng)
		if total := totalMilli(arrivals); total > smallClusterMilli {
			t.Fatalf("seed %d: total %d milli after tuning down; want at most %d", seed, total, smallClusterMilli)
		}
		// What is left keeps the shuffled order: pods are removed, never
		// moved.
		rest := names(arrivals)
		i := 0
		for _, n := range shuffled {
			if i < len(rest) && rest[i] == n {
				i++
			}
		}
		if i != len(rest) {
			t.Fatalf("seed %d: %v is not a subsequence of the shuffled list %v", seed, rest, shuffled)
		}
		for _, p := range arrivals {
			if strings.Contains(p.Task.Name, "-tuned-") {
				t.Fatalf("seed %d: tuning down added %s", seed, p.Task.Name)
			}
		}
	}
}

func TestArrivalsAtTheTargetOnlyShuffles(t *testing.T) {
	rows := smallPods(t)
	rng := random.New(42)
	arrivals := Arrivals(rows, smallPodsMilli/2, 2, rng)
	shuffled, want := shuffledNames(rows, 42)
	if got := names(arrivals); !slices.Equal(got, shuffled) {
		t.Fatalf("arrivals %v; want the shuffle alone %v", got, shuffled)
	}
	if g, w := rng.Uint64(), want.Uint64(); g != w {
		t.Fatalf("the stream moved past the shuffle: next %d, want %d", g, w)
	}
}

func TestNodesAppliesRanks(t *testing.T) {
	rows := smallNodes(t)
	ranks := []int{3, 0, 4, 1, 2}
	st, err := Nodes(rows, ranks)
	if err != nil {
		t.Fatal(err)
	}
	if st.Len() != len(rows) {
		t.Fatalf("%d nodes; want %d", st.Len(), len(rows))
	}
	for i, r := range rows {
		n := st.Node(i)
		if n.Name != r.Name || n.Rank != ranks[i] || len(n.GPUs) != r.GPUs || n.CPUMilli != r.CPUMilli || n.MemoryMiB != r.MemoryMiB {
			t.Errorf("node %d: %s rank %d, %d GPUs, cpu %d, mem %d; want %s rank %d, %d GPUs, cpu %d, mem %d",
				i, n.Name, n.Rank, len(n.GPUs), n.CPUMilli, n.MemoryMiB, r.Name, ranks[i], r.GPUs, r.CPUMilli, r.MemoryMiB)
		}
	}
	if m := st.NodeByName("node-b").Model(); m == nil || m.Name != "V100-32GB" {
		t.Errorf("node-b model %v; want V100-32GB (V100M32 canonicalised)", m)
	}
}

func TestNodesWithoutRanksUsePositions(t *testing.T) {
	st, err := Nodes(smallNodes(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < st.Len(); i++ {
		if r := st.Node(i).Rank; r != i {
			t.Errorf("node %d has rank %d; want %d", i, r, i)
		}
	}
}

func TestNodesErrorNamesTheRow(t *testing.T) {
	rows := nodes(node("good").gpus(2, "P100").line(2), node("broken").gpus(2, "").line(7))
	_, err := Nodes(rows, nil)
	if err == nil {
		t.Fatal("a node with GPUs and no model was accepted")
	}
	if msg := err.Error(); !strings.Contains(msg, "broken") || !strings.Contains(msg, "line 7") {
		t.Fatalf("error %q does not name the row (broken, line 7)", msg)
	}
}

func TestTypicalUsesTheOriginalListWithoutMemory(t *testing.T) {
	// 20 pods, 4 keys: 10 shares, 6 whole GPUs, 3 CPU-only (one with a
	// gpu_spec, which does not split the key), 1 two-GPU pod. Memory
	// differs inside every key. 95 % of 20 is 19, reached after the third
	// key, so three keys are kept: 10/19, 6/19, 3/19.
	var rows []trace.Pod
	for i := 0; i < 10; i++ {
		rows = append(rows, pod("share-"+itoa(i)).cpu(4000).memory(int64(1000+i)).share(500).build())
	}
	for i := 0; i < 6; i++ {
		rows = append(rows, pod("whole-"+itoa(i)).cpu(8000).memory(int64(2000*i)).share(1000).build())
	}
	rows = append(rows,
		pod("cpu-0").cpu(2000).memory(100).build(),
		pod("cpu-1").cpu(2000).memory(200).build(),
		pod("cpu-2").cpu(2000).memory(300).spec("T4").build(),
		pod("pair").cpu(16000).gpus(2).build(),
	)
	want := []frag.Typical{
		{Shape: frag.Shape{CPUMilli: 4000, Milli: 500, Num: 1}, P: 10.0 / 19},
		{Shape: frag.Shape{CPUMilli: 8000, Milli: 1000, Num: 1}, P: 6.0 / 19},
		{Shape: frag.Shape{CPUMilli: 2000}, P: 3.0 / 19},
	}
	check := func(t *testing.T, d *frag.Distribution) {
		t.Helper()
		if len(d.Pods) != len(want) {
			t.Fatalf("%d typical pods %+v; want %d", len(d.Pods), d.Pods, len(want))
		}
		for i, w := range want {
			if g := d.Pods[i]; g.Shape != w.Shape || g.P != w.P {
				t.Errorf("typical %d: %+v p=%v; want %+v p=%v", i, g.Shape, g.P, w.Shape, w.P)
			}
		}
	}
	check(t, Typical(rows))
	// The original list, in any order, gives the same distribution: it is
	// computed before shuffling and tuning.
	reversed := slices.Clone(rows)
	slices.Reverse(reversed)
	check(t, Typical(reversed))
	// Shapes keep the memory that Typical strips.
	shapes := Shapes(rows)
	if shapes[1].MemMiB != 1001 || shapes[18].Spec != "" {
		t.Errorf("Shapes: %+v, %+v; want memory 1001 kept and no spec for a CPU-only pod", shapes[1], shapes[18])
	}
}

func TestArrivalsTuningDownStopsAtExactlyTheTarget(t *testing.T) {
	// Three whole GPUs, target 2000: one removal lands exactly on the
	// target, and "at most T" keeps the other two.
	rows := pods(pod("a").gpus(1), pod("b").gpus(1), pod("c").gpus(1))
	for seed := int64(0); seed < 10; seed++ {
		arrivals := Arrivals(rows, 2000, 1, random.New(seed))
		if len(arrivals) != 2 || totalMilli(arrivals) != 2000 {
			t.Fatalf("seed %d: %v (%d milli); want two pods, 2000 milli", seed, names(arrivals), totalMilli(arrivals))
		}
	}
}

func TestPodOfSharesOnlyOneGPU(t *testing.T) {
	// The reader refuses 2 × 500 (§2: not supported), but podOf must not
	// turn it into a share of one GPU either.
	p := podOf(trace.Pod{Name: "two-halves", CPUMilli: 1000, NumGPU: 2, GPUMilli: 500}, "two-halves")
	if p.Task.GPU.Kind == workload.Fraction {
		t.Fatalf("2 × 500 became a share: %+v", p.Task.GPU)
	}
}
