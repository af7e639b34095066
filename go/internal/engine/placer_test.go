package engine

import (
	"errors"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/workload"
)

// Stub stages: each does one visible thing, so a test sees whether the
// placer used it.

// scoreByName scores each node from a table (0 when absent) and counts how
// often each node was scored.
type scoreByName struct {
	scores map[string]int64
	calls  map[string]int
}

func scores(s map[string]int64) *scoreByName {
	return &scoreByName{scores: s, calls: map[string]int{}}
}

func (*scoreByName) Name() string { return "by-name" }

func (s *scoreByName) Score(n *cluster.Node, _ *Request) (int64, Hint) {
	s.calls[n.Name]++
	return s.scores[n.Name], Hint{}
}

func (s *scoreByName) total() int {
	c := 0
	for _, v := range s.calls {
		c += v
	}
	return c
}

// refuseNode is a policy filter that refuses one node by name.
type refuseNode string

func (refuseNode) Name() string { return "refuse-node" }

func (f refuseNode) Filter(n *cluster.Node, _ *Request) (bool, Reason) {
	if n.Name == string(f) {
		return false, Reason{Filter: "refuse-node", Code: CodePolicy}
	}
	return true, Reason{}
}

// lastFeasible selects the last feasible node and records what it was given.
type lastFeasible struct {
	feasible []int
	rngSeen  bool
}

func (s *lastFeasible) Select(_ *cluster.State, feasible []int, rng *random.Rand) int {
	s.feasible = append([]int(nil), feasible...)
	s.rngSeen = rng != nil
	return feasible[len(feasible)-1]
}

// shareToWholeGPUs turns a share into as many whole GPUs as it has tenths.
type shareToWholeGPUs struct{}

func (shareToWholeGPUs) Rewrite(r *Request) *Request {
	if r.Kind != workload.Fraction {
		return r
	}
	t := r.Task
	t.GPU = workload.Demand{Kind: workload.WholeGPUs, Count: r.Milli / 100}
	nr, err := NewRequest(t, 0)
	if err != nil {
		panic(err)
	}
	return nr
}

// bonusFor adds bonus to one node's score and counts its calls.
type bonusFor struct {
	node     string
	bonus    int64
	prepared int
	seen     map[string]int64 // score each node arrived with
}

func (a *bonusFor) Prepare(*cluster.State, *Request) { a.prepared++ }

func (a *bonusFor) Adjust(n *cluster.Node, _ *Request, score int64, _ Hint) int64 {
	a.seen[n.Name] = score
	if n.Name == a.node {
		return score + a.bonus
	}
	return score
}

// noPick is a picker that never finds a device.
type noPick struct{}

func (noPick) Pick(*cluster.Node, *Request, Hint, *random.Rand) ([]cluster.Grant, bool) {
	return nil, false
}

func place(t *testing.T, p Policy, st *cluster.State, b *taskBuilder) cluster.Assignment {
	t.Helper()
	a, err := NewPlacer(p, random.New(1)).Place(st, b.build())
	if err != nil {
		t.Fatalf("Place(%s): %v", b.t.Name, err)
	}
	return a
}

func TestPlacerTakesTheBestScore(t *testing.T) {
	tests := []struct {
		name   string
		nodes  []*nodeBuilder
		scores map[string]int64
		want   string
	}{
		{"takes the highest score", []*nodeBuilder{node("a"), node("b"), node("c")},
			map[string]int64{"a": 10, "b": 30, "c": 20}, "b"},
		{"takes a negative best score", []*nodeBuilder{node("a"), node("b")},
			map[string]int64{"a": -10, "b": -5}, "b"},
		{"breaks a tie by the lowest rank", []*nodeBuilder{node("a").rank(2), node("b").rank(0), node("c").rank(1)},
			map[string]int64{"a": 5, "b": 5, "c": 5}, "b"},
		{"breaks a tie among the best only", []*nodeBuilder{node("a").rank(0), node("b").rank(2), node("c").rank(1)},
			map[string]int64{"a": 4, "b": 5, "c": 5}, "c"},
		{"breaks a tie of equal ranks by position", []*nodeBuilder{node("a"), node("b"), node("c")},
			map[string]int64{"a": 1, "b": 1, "c": 1}, "a"},
		{"never takes a node the filter refused", []*nodeBuilder{node("a").cpu(500), node("b")},
			map[string]int64{"a": 100, "b": 1}, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := world(t, tt.nodes...)
			a := place(t, Policy{Name: "test", Scorer: scores(tt.scores)}, st, task("t").cpu(1000))
			if a.Node != tt.want {
				t.Fatalf("placed on %s, want %s", a.Node, tt.want)
			}
		})
	}
}

func TestPlacerWithoutAScorerTakesTheLowestRank(t *testing.T) {
	st := world(t, node("a").rank(3), node("b").rank(1), node("c").rank(2))
	if a := place(t, Policy{Name: "test"}, st, task("t")); a.Node != "b" {
		t.Fatalf("placed on %s, want b (rank 1)", a.Node)
	}
}

func TestPlacerFillsTheAssignment(t *testing.T) {
	st := world(t, node("v100").gpus(2, "V100-16GB"))
	allocateOn(t, st, "v100", running("old").share(0, 600))
	a := place(t, Policy{Name: "test"}, st, task("t").cpu(1500).memory(2048).share(300))
	want := cluster.Assignment{Task: "t", Node: "v100", CPUMilli: 1500, MemoryMiB: 2048, Grants: []cluster.Grant{{GPU: 0, Milli: 300}}}
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("Place = %+v, want %+v", a, want)
	}
}

func TestPlacerLeavesTheStateAlone(t *testing.T) {
	st := world(t, node("v100").gpus(2, "V100-16GB"))
	before := st.Node(0).Describe()
	gen := st.Node(0).Gen()
	place(t, Policy{Name: "test"}, st, task("t").cpu(1500).gpus(2))
	if after := st.Node(0).Describe(); after != before || st.Node(0).Gen() != gen {
		t.Fatalf("Place changed the node:\n%s\nto\n%s", before, after)
	}
}

func TestPlacerExplainsAFailureWithCountsPerReason(t *testing.T) {
	st := world(t,
		node("small-1").cpu(1000).gpus(1, "V100-16GB"),
		node("cpu-only"),
		node("small-2").cpu(1000).gpus(1, "V100-16GB"),
		node("v100-32").gpus(1, "V100-32GB"),
		node("refused").gpus(1, "V100-16GB"),
	)
	p := NewPlacer(Policy{Name: "test", Filters: []Filter{refuseNode("refused")}}, random.New(1))
	_, err := p.Place(st, task("t").cpu(4000).share(500).on("V100M16").build())
	var f *Failure
	if !errors.As(err, &f) {
		t.Fatalf("Place error = %v; want a *Failure", err)
	}
	want := map[Code]int{CodeCPU: 2, CodeNoGPU: 1, CodeModel: 1, CodePolicy: 1}
	if f.Task != "t" || f.Nodes != 5 || !reflect.DeepEqual(f.Reasons, want) {
		t.Fatalf("Failure = %+v; want task t, 5 nodes, reasons %v", f, want)
	}
	// Most frequent reason first, then by name.
	if got, want := err.Error(), "task t: 0/5 nodes fit (2 cpu, 1 gpu-model, 1 no-gpu, 1 policy)"; got != want {
		t.Fatalf("Error() = %q\nwant      %q", got, want)
	}
}

func TestBriefFailuresSayOnlyThatNothingFits(t *testing.T) {
	st := world(t, node("small").cpu(1000).gpus(1, "V100-16GB"), node("cpu-only"))
	p := NewPlacer(Policy{Name: "test"}, random.New(1))
	p.SetBriefFailures(true)
	big := task("t").cpu(4000).share(500).build()
	if _, err := p.Place(st, big); !errors.Is(err, ErrNoFit) {
		t.Errorf("Place error = %v; want ErrNoFit", err)
	}
	// PlaceAll too, whichever task fails, and a fit is still a fit.
	r, err := p.Request(big)
	if err != nil {
		t.Fatal(err)
	}
	small, err := p.Request(task("s").cpu(500).share(500).build())
	if err != nil {
		t.Fatal(err)
	}
	for _, reqs := range [][]*Request{{r}, {small, r}} {
		if _, _, err := p.PlaceAll(st, reqs, nil); !errors.Is(err, ErrNoFit) {
			t.Errorf("PlaceAll of %d tasks: error = %v; want ErrNoFit", len(reqs), err)
		}
	}
	small2, err := p.Request(task("s2").cpu(500).share(500).build())
	if err != nil {
		t.Fatal(err)
	}
	as, trial, err := p.PlaceAll(st, []*Request{small, small2}, nil)
	if err != nil || len(as) != 2 || trial == st {
		t.Fatalf("PlaceAll of two small tasks = %v, %v; want both placed on a trial state", as, err)
	}
	if st.Node(0).GPUs[0].Used() != 0 {
		t.Error("PlaceAll changed the state it was given")
	}
}

// fitsWorld is a cluster whose nodes each refuse some tasks for another
// reason (CPU, no GPU, a filter), and a placer for it.
func fitsWorld(t *testing.T) (*cluster.State, *Placer) {
	t.Helper()
	st := world(t,
		node("small").cpu(1000).gpus(1, "V100-16GB"),
		node("cpu-only"),
		node("big").gpus(2, "V100-32GB"),
		node("refused").gpus(1, "V100-16GB"),
	)
	return st, NewPlacer(Policy{Name: "test", Filters: []Filter{refuseNode("refused")}}, random.New(1))
}

func TestFitsAgreesWithPlacingOnThatNodeAlone(t *testing.T) {
	st, p := fitsWorld(t)
	for _, tk := range []workload.Task{task("a").cpu(500).share(500).build(), task("b").cpu(4000).gpus(2).build(), task("c").cpu(100).build()} {
		r, err := p.Request(tk)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < st.Len(); i++ {
			n := st.Node(i)
			_, err := p.PlaceIn(st, r, func(x *cluster.Node) bool { return x.Name == n.Name })
			if got, want := p.Fits(n, r), err == nil; got != want {
				t.Errorf("task %s on %s: Fits = %v, placing there alone: %v (%v)", tk.Name, n.Name, got, want, err)
			}
		}
	}
}

func TestFitsSomewhereAgreesWithPlacing(t *testing.T) {
	st, p := fitsWorld(t)
	sets := map[string]func(*cluster.Node) bool{
		"every node": nil,
		"not big":    func(n *cluster.Node) bool { return n.Name != "big" },
		"refused":    func(n *cluster.Node) bool { return n.Name == "refused" },
	}
	fitting := 0
	for _, tk := range []workload.Task{task("a").cpu(500).share(500).build(), task("b").cpu(4000).gpus(2).build(), task("c").cpu(100).build(), task("d").gpus(3).build()} {
		r, err := p.Request(tk)
		if err != nil {
			t.Fatal(err)
		}
		for name, allowed := range sets {
			_, err := p.PlaceIn(st, r, allowed)
			if got, want := p.FitsSomewhere(st, r, allowed), err == nil; got != want {
				t.Errorf("task %s on %s: FitsSomewhere = %v, placing: %v (%v)", tk.Name, name, got, want, err)
			}
			if err == nil {
				fitting++
			}
		}
	}
	if fitting == 0 || fitting == 12 {
		t.Fatalf("%d of 12 cases fit: the test needs both kinds", fitting)
	}
}

func TestPlacerFailsOnAnEmptyCluster(t *testing.T) {
	st := world(t)
	_, err := NewPlacer(Policy{Name: "test"}, random.New(1)).Place(st, task("t").build())
	wantErr(t, err, "task t: 0/0 nodes fit ()")
}

func TestPlacerRefusesAnInvalidTask(t *testing.T) {
	st := world(t, node("a"))
	_, err := NewPlacer(Policy{Name: "test"}, random.New(1)).Place(st, task("t").share(1000).build())
	wantErr(t, err, "task t", "fraction")
	var f *Failure
	if errors.As(err, &f) {
		t.Fatalf("an invalid task gave a placement failure: %v", err)
	}
}

func TestPlacerReportsAPickerThatFindsNothing(t *testing.T) {
	st := world(t, node("v100").gpus(1, "V100-16GB"))
	_, err := NewPlacer(Policy{Name: "broken", Picker: noPick{}}, random.New(1)).Place(st, task("t").share(100).build())
	wantErr(t, err, "task t", "policy broken", "node v100 passed the filters but no device could be picked")
}

func TestPlacerRewritesTheRequestFirst(t *testing.T) {
	// The rewritten request (3 whole GPUs) fits only the 4-GPU node, which
	// scores lower.
	st := world(t, node("two").gpus(2, "V100-16GB"), node("four").gpus(4, "V100-16GB"))
	pol := Policy{Name: "test", Rewriter: shareToWholeGPUs{}, Scorer: scores(map[string]int64{"two": 10})}
	p := NewPlacer(pol, random.New(1))
	r, err := p.Request(task("t").share(300).build())
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != workload.WholeGPUs || r.Count != 3 {
		t.Fatalf("Request = %s; want the rewritten 3 whole GPUs", r)
	}
	a, err := p.Place(st, task("t").share(300).build())
	if err != nil {
		t.Fatal(err)
	}
	if a.Node != "four" || !reflect.DeepEqual(grantsText(a.Grants), []string{"0:1000", "1:1000", "2:1000"}) {
		t.Fatalf("Place = %s %v; want four [0:1000 1:1000 2:1000]", a.Node, grantsText(a.Grants))
	}
}

func TestPlacerLetsASelectorChooseAmongFeasibleNodes(t *testing.T) {
	st := world(t, node("a").rank(0), node("full").cpu(100), node("c").rank(1), node("d").rank(2))
	sel := &lastFeasible{}
	pol := Policy{Name: "test", Selector: sel, Scorer: scores(map[string]int64{"a": 100})}
	a := place(t, pol, st, task("t").cpu(1000))
	if a.Node != "d" {
		t.Fatalf("placed on %s, want d (the selector's pick, not the best score)", a.Node)
	}
	if !slices.Equal(sel.feasible, []int{0, 2, 3}) || !sel.rngSeen {
		t.Fatalf("selector saw feasible %v, rng %t; want [0 2 3], true", sel.feasible, sel.rngSeen)
	}
}

func TestPlacerDoesNotCallTheSelectorWhenNothingFits(t *testing.T) {
	st := world(t, node("full").cpu(100))
	sel := &lastFeasible{}
	_, err := NewPlacer(Policy{Name: "test", Selector: sel}, random.New(1)).Place(st, task("t").cpu(1000).build())
	var f *Failure
	if !errors.As(err, &f) || sel.feasible != nil {
		t.Fatalf("error %v, selector saw %v; want a *Failure and no selector call", err, sel.feasible)
	}
}

func TestPlacerAppliesTheAdjusterToEveryPlacement(t *testing.T) {
	st := world(t, node("a"), node("b"), node("c"))
	sc := scores(map[string]int64{"a": 30, "b": 20, "c": 10})
	adj := &bonusFor{node: "c", bonus: 25, seen: map[string]int64{}}
	p := NewPlacer(Policy{Name: "test", Scorer: sc, Adjuster: adj}, random.New(1))
	for i, want := range []string{"c", "c"} {
		a, err := p.Place(st, task("t").cpu(1000).build())
		if err != nil {
			t.Fatal(err)
		}
		if a.Node != want {
			t.Fatalf("placement %d on %s, want %s (10 + 25 beats 30)", i, a.Node, want)
		}
		if adj.prepared != i+1 {
			t.Fatalf("after placement %d Prepare ran %d times, want %d", i, adj.prepared, i+1)
		}
	}
	// The second placement read every score from the cache, and the
	// adjuster still saw them.
	if sc.total() != 3 || !reflect.DeepEqual(adj.seen, map[string]int64{"a": 30, "b": 20, "c": 10}) {
		t.Fatalf("scored %d times, adjuster saw %v; want 3 and the cached scores", sc.total(), adj.seen)
	}
}

func TestPlacerReusesVerdictsOfUnchangedNodes(t *testing.T) {
	st := world(t, node("a").gpus(2, "V100-16GB"), node("b").gpus(2, "V100-16GB"), node("c").gpus(2, "V100-16GB"))
	sc := scores(map[string]int64{"a": 1})
	p := NewPlacer(Policy{Name: "test", Scorer: sc}, random.New(1))
	steps := []struct {
		name      string
		task      *taskBuilder
		allocate  bool
		wantCalls map[string]int // cumulative
	}{
		{"scores every node the first time", task("t1").share(500), true, map[string]int{"a": 1, "b": 1, "c": 1}},
		{"scores only the changed node for the same kind of task", task("t2").share(500), false, map[string]int{"a": 2, "b": 1, "c": 1}},
		{"scores nothing again when nothing changed", task("t3").share(500), false, map[string]int{"a": 2, "b": 1, "c": 1}},
		{"scores every node for another kind of task", task("t4").share(501), false, map[string]int{"a": 3, "b": 2, "c": 2}},
	}
	for _, s := range steps {
		a, err := p.Place(st, s.task.build())
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if !reflect.DeepEqual(sc.calls, s.wantCalls) {
			t.Fatalf("%s: calls %v, want %v", s.name, sc.calls, s.wantCalls)
		}
		if s.allocate {
			if err := st.Allocate(a); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestPlacerOfAVolatilePolicyScoresEveryTime(t *testing.T) {
	st := world(t, node("a"), node("b"))
	sc := scores(nil)
	p := NewPlacer(Policy{Name: "test", Scorer: sc, Volatile: true}, random.New(1))
	for i := 0; i < 3; i++ {
		if _, err := p.Place(st, task("t").cpu(100).build()); err != nil {
			t.Fatal(err)
		}
	}
	if got := sc.total(); got != 6 {
		t.Fatalf("scored %d times over 3 placements on 2 nodes, want 6", got)
	}
}

func TestPlacerStaysRightPastTheCacheBound(t *testing.T) {
	// More kinds of request than the cache holds; a cached placer and a
	// volatile one must still agree on every placement.
	newWorld := func() *cluster.State {
		return world(t, node("a").gpus(4, "V100-16GB"), node("b").gpus(4, "V100-16GB"), node("c").gpus(4, "V100-16GB"))
	}
	stCached, stVolatile := newWorld(), newWorld()
	score := func() Scorer { return leastFreeMilli{} }
	cached := NewPlacer(Policy{Name: "test", Scorer: score()}, random.New(1))
	volatile := NewPlacer(Policy{Name: "test", Scorer: score(), Volatile: true}, random.New(1))
	rng := random.New(3)
	for i := 0; i < 3*maxClasses; i++ {
		b := task("t" + strconv.Itoa(i)).cpu(int64(rng.Intn(maxClasses + 100))).share(1 + rng.Intn(20))
		a1, err1 := cached.Place(stCached, b.build())
		a2, err2 := volatile.Place(stVolatile, b.build())
		if !reflect.DeepEqual(a1, a2) || (err1 == nil) != (err2 == nil) {
			t.Fatalf("placement %d: cached %+v, %v; volatile %+v, %v", i, a1, err1, a2, err2)
		}
		if err1 != nil {
			continue
		}
		if err := stCached.Allocate(a1); err != nil {
			t.Fatal(err)
		}
		if err := stVolatile.Allocate(a2); err != nil {
			t.Fatal(err)
		}
	}
}

// leastFreeMilli prefers the node with the least GPU left: a score that
// changes with every allocation.
type leastFreeMilli struct{}

func (leastFreeMilli) Name() string { return "least-free" }
func (leastFreeMilli) Score(n *cluster.Node, _ *Request) (int64, Hint) {
	return -int64(n.GPUFreeMilli()), Hint{}
}

func TestPlacerCachesVerdictsPerHeadroom(t *testing.T) {
	st := world(t, node("v100").gpus(1, "V100-16GB"))
	p := NewPlacer(Policy{Name: "test"}, random.New(1))
	p.SetHeadroom(0)
	// 16384 MiB is the whole V100-16GB without headroom, more than it with.
	if _, err := p.Place(st, task("t1").gpuMemory(16384, 0).build()); err != nil {
		t.Fatalf("without headroom: %v", err)
	}
	p.SetHeadroom(0.1)
	_, err := p.Place(st, task("t2").gpuMemory(16384, 0).build())
	var f *Failure
	if !errors.As(err, &f) || f.Reasons[CodeTooSmall] != 1 {
		t.Fatalf("with 10%% headroom: error %v; want a Failure for gpu-memory", err)
	}
}

func TestNewPlacerDefaultsThePicker(t *testing.T) {
	p := NewPlacer(Policy{Name: "test"}, random.New(1))
	if _, ok := p.Policy().Picker.(DefaultPicker); !ok || p.Policy().Name != "test" {
		t.Fatalf("Policy() = %+v; want the test policy with DefaultPicker", p.Policy())
	}
	withRandom := NewPlacer(Policy{Name: "test", Picker: RandomPicker{}}, random.New(1))
	if _, ok := withRandom.Policy().Picker.(RandomPicker); !ok {
		t.Fatalf("Policy().Picker = %T; want the RandomPicker given", withRandom.Policy().Picker)
	}
}
