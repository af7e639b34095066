package fill

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"partita.dev/partita/internal/engine/policies"
	"partita.dev/partita/internal/random"
)

// handCase is one node of two V100M16 GPUs (2000 milli, so 1 % of
// arrived workload is 20 milli) and nine pods whose names are chosen so
// that seed 82368 shuffles them into the order of their role below (the
// first seed that does: a search over seeds of internal/random). With tune
// 0 nothing is added or removed, and best-fit packs the shares on GPU 0.
//
//	#  pod              arrived  arrived %  column  used  alloc %
//	1  pod-1-cpu              0        0       0       0     0
//	2  pod-7-share-5          5        0.25    0       5     0.25
//	3  pod-4-share-245      250       12.5    12     250    12.5   half-even: not 13
//	4  pod-0-whole         1250       62.5    62    1250    62.5   half-even: not 63
//	5  pod-6-share-40      1290       64.5    64    1290    64.5   half-even: not 65
//	6  pod-2-cpu           1290       64.5    64    1290    64.5
//	7  pod-3-t4-100        1390       69.5    70    1290    64.5   fails: no T4
//	8  pod-5-share-600     1990       99.5   100    1890    94.5
//	9  pod-8-t4-630        2620      131     131    1890    94.5   fails, after 100 %
const handSeed = 82368

var handOrder = []string{
	"pod-1-cpu", "pod-7-share-5", "pod-4-share-245", "pod-0-whole", "pod-6-share-40",
	"pod-2-cpu", "pod-3-t4-100", "pod-5-share-600", "pod-8-t4-630",
}

func handInput() Input {
	return Input{
		Nodes: nodes(node("n1").gpus(2, "V100M16")),
		Pods: pods(
			pod("pod-0-whole").share(1000),
			pod("pod-1-cpu"),
			pod("pod-2-cpu"),
			pod("pod-3-t4-100").share(100).spec("T4"),
			pod("pod-4-share-245").share(245),
			pod("pod-5-share-600").share(600),
			pod("pod-6-share-40").share(40),
			pod("pod-7-share-5").share(5),
			pod("pod-8-t4-630").share(630).spec("T4"),
		),
	}
}

func TestRunHandCaseArrivesInTheTabulatedOrder(t *testing.T) {
	in := handInput()
	got := names(Arrivals(in.Pods, 2000, 0, random.New(handSeed)))
	if !slices.Equal(got, handOrder) {
		t.Fatalf("seed %d shuffles the hand case into %v; the table assumes %v", handSeed, got, handOrder)
	}
	if ref, _ := shuffledNames(in.Pods, handSeed); !slices.Equal(ref, handOrder) {
		t.Fatalf("the reference shuffle gives %v; the table assumes %v", ref, handOrder)
	}
}

func TestRunMeasuresColumnsAsTheProtocol(t *testing.T) {
	r, err := Run(handInput(), Options{Policy: "best-fit", Seed: handSeed})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]float64{
		// Two events at 0 %: the CPU-only pod's 0 and 0.25; their mean
		// 0.125 rounds half to even.
		0:  0.12,
		1:  0.12, // empty: column 0 alone of 0..2
		11: 12.5, 12: 12.5, 13: 12.5,
		61: 62.5, 62: 62.5,
		// Empty: the events of 62 and 64 are pooled, (62.5 + 64.5 + 64.5) / 3,
		// not the mean of the two column means (63.5).
		63: 63.83,
		64: 64.5, 65: 64.5,
		69: 64.5, 70: 64.5, 71: 64.5,
		99: 94.5, 100: 94.5, 101: 94.5,
		130: 94.5, // empty: 129 is empty, and the event at 131, past the last column, still counts
	}
	for c := 0; c < Columns; c++ {
		if r.Alloc[c] != want[c] {
			t.Errorf("Alloc[%d] = %v; want %v", c, r.Alloc[c], want[c])
		}
	}
	if r.Pods != 9 || r.Failed != 2 || r.TotalGPUs != 2 || r.Policy != "best-fit" || r.Seed != handSeed {
		t.Errorf("pods %d failed %d GPUs %d policy %s seed %d; want 9, 2, 2, best-fit, %d",
			r.Pods, r.Failed, r.TotalGPUs, r.Policy, r.Seed, handSeed)
	}
	// Only the T4 share that failed before 100 % counts.
	if want := map[string]int64{"share": 100}; !maps.Equal(r.FailedAt100, want) {
		t.Errorf("FailedAt100 %v; want %v", r.FailedAt100, want)
	}
	if u := r.Unallocated(); u != 5.5 {
		t.Errorf("Unallocated() = %v; want 100 − 94.5 = 5.5", u)
	}
}

func TestRunDropsPodsThatFitNowhere(t *testing.T) {
	// Three nodes of two P100s (6000 milli): a 4-GPU pod fits on no node,
	// and a T4 pod matches no model. Both arrive by 5000 milli (83 %) in
	// either order, so both count before 100 %.
	in := Input{
		Nodes: nodes(node("n1").gpus(2, "P100"), node("n2").gpus(2, "P100"), node("n3").gpus(2, "P100")),
		Pods:  pods(pod("wide").gpus(4), pod("t4").share(1000).spec("T4")),
	}
	for _, seed := range []int64{1, 2} {
		r, err := Run(in, Options{Policy: "fgd", Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if r.Failed != 2 || r.Pods != 2 {
			t.Errorf("seed %d: %d of %d pods failed; want 2 of 2", seed, r.Failed, r.Pods)
		}
		if want := map[string]int64{"4-gpu": 4000, "1-gpu": 1000}; !maps.Equal(r.FailedAt100, want) {
			t.Errorf("seed %d: FailedAt100 %v; want %v", seed, r.FailedAt100, want)
		}
		if r.Alloc != [Columns]float64{} {
			t.Errorf("seed %d: some allocation recorded: %v", seed, r.Alloc)
		}
	}
}

func TestRunIsDeterministic(t *testing.T) {
	in := smallInput(t)
	for _, policy := range policies.Names() {
		t.Run(policy, func(t *testing.T) {
			opt := Options{Policy: policy, Seed: 42, Tune: 1.3}
			a, err := Run(in, opt)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Run(in, opt)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("two runs of seed 42 differ:\n%+v\n%+v", a, b)
			}
			// (The small list's pods are large: a column, even 100, may
			// have no event near it and stay 0.)
			if most := slices.Max(a.Alloc[:]); a.Pods <= 36 || a.TotalGPUs != 26 || most == 0 {
				t.Fatalf("pods %d, GPUs %d, highest allocation %v: the run did not tune up or place anything", a.Pods, a.TotalGPUs, most)
			}
		})
	}
}

func TestRunSeedsDiffer(t *testing.T) {
	in := smallInput(t)
	a, err := Run(in, Options{Policy: "best-fit", Seed: 42, Tune: 1.3})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(in, Options{Policy: "best-fit", Seed: 43, Tune: 1.3})
	if err != nil {
		t.Fatal(err)
	}
	if a.Alloc == b.Alloc && a.Pods == b.Pods {
		t.Fatal("seeds 42 and 43 give the same curve: the seed is not used")
	}
}

func TestRunGivenTypicalMatchesComputed(t *testing.T) {
	in := smallInput(t)
	opt := Options{Policy: "fgd", Seed: 5, Tune: 1.3}
	a, err := Run(in, opt)
	if err != nil {
		t.Fatal(err)
	}
	in.Typical, in.Shapes = Typical(in.Pods), Shapes(in.Pods)
	b, err := Run(in, opt)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("a precomputed Typical and Shapes change the result")
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	cpuOnly := nodes(node("c1"), node("c2"))
	tests := []struct {
		name    string
		in      Input
		policy  string
		wantErr string
	}{
		{"no nodes", Input{Pods: smallPods(t)}, "fgd", "empty node or pod list"},
		{"no pods", Input{Nodes: smallNodes(t)}, "fgd", "empty node or pod list"},
		{"nodes without GPUs", Input{Nodes: cpuOnly, Pods: smallPods(t)}, "fgd", "no GPU"},
		{"an unknown policy", smallInput(t), "no-such-policy", `unknown policy "no-such-policy"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Run(tt.in, Options{Policy: tt.policy, Seed: 1, Tune: 1.3})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("result %v, error %v; want an error containing %q", r, err, tt.wantErr)
			}
		})
	}
}

func TestRunBreaksTiesByTheRanksDrawnAfterTheArrivals(t *testing.T) {
	// Two equal nodes but for the model. "any" scores the same on both,
	// so it goes to the node of lower rank; if that is the T4 node and
	// "any" comes first, "t4" finds no T4 left and fails. The ranks are
	// rand.Perm(2), drawn right after the arrivals (§3.4).
	in := Input{
		Nodes: nodes(node("a-p100").gpus(1, "P100"), node("b-t4").gpus(1, "T4")),
		Pods:  pods(pod("any").share(1000), pod("t4").share(1000).spec("T4")),
	}
	outcomes := map[int]int{}
	for seed := int64(1); seed <= 40; seed++ {
		order, rng := shuffledNames(in.Pods, seed)
		ranks := rng.Perm(2)
		want := 0
		if order[0] == "any" && ranks[1] < ranks[0] {
			want = 1
		}
		r, err := Run(in, Options{Policy: "best-fit", Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if r.Failed != want {
			t.Fatalf("seed %d: order %v, ranks %v: %d failed; want %d", seed, order, ranks, r.Failed, want)
		}
		outcomes[want]++
	}
	if outcomes[0] == 0 || outcomes[1] == 0 {
		t.Fatalf("outcomes %v: the seeds do not exercise both tie-breaks", outcomes)
	}
}

func TestRunMeasuresFragmentation(t *testing.T) {
	// One node of two GPUs and three identical 600-milli shares, so the
	// order does not matter and the typical pod is the share (p = 1).
	//
	//	#  GPUs left   arrived %  alloc %  frag (milli)          frag %  frag / idle %
	//	1  400, 1000      30        30     400: GPU 1 fits        20      400/1400 = 28.57
	//	2  400, 400       60        60     800: no GPU fits       40      800/800  = 100
	//	3  fails          90        60     800                    40      100
	in := Input{
		Nodes: nodes(node("n1").gpus(2, "V100M16")),
		Pods:  pods(pod("s1").share(600), pod("s2").share(600), pod("s3").share(600)),
	}
	r, err := Run(in, Options{Policy: "best-fit", Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		col                    int
		alloc, frag, fragRatio float64
	}{{30, 30, 20, 28.57}, {60, 60, 40, 100}, {90, 60, 40, 100}} {
		if r.Alloc[c.col] != c.alloc || r.Frag[c.col] != c.frag || r.FragRatio[c.col] != c.fragRatio {
			t.Errorf("column %d: alloc %v frag %v ratio %v; want %v %v %v",
				c.col, r.Alloc[c.col], r.Frag[c.col], r.FragRatio[c.col], c.alloc, c.frag, c.fragRatio)
		}
	}
	if r.Failed != 1 || r.FailedAt100["share"] != 600 {
		t.Errorf("failed %d, FailedAt100 %v; want 1 and share 600", r.Failed, r.FailedAt100)
	}
}

// §4's alloc_ratio is Python's round(x, 2), which rounds the exact binary
// value: 1 milli of 4000 is 0.025 % (0.02500000000000000139), which Python
// rounds to 0.03.
func TestRunRoundsAllocRatioAsPython(t *testing.T) {
	// One node of four GPUs (4000 milli) and one share of 1 milli: a single
	// event at column 0 whose allocation rate is 0.025 %.
	in := Input{Nodes: nodes(node("n1").gpus(4, "T4")), Pods: pods(pod("tiny").share(1))}
	r, err := Run(in, Options{Policy: "best-fit", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Alloc[0] != 0.03 {
		t.Fatalf("Alloc[0] = %v; want 0.03, Python's round(0.025, 2)", r.Alloc[0])
	}
}
