package sched

import (
	"reflect"
	"testing"
	"time"

	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/workload"
)

// The order pending jobs are considered in: claims within their team's
// guarantee first (partita), then class, then fairness between teams,
// then submission time, then ID.

func TestClassOrderPutsProductionBeforeBatchBeforeBestEffort(t *testing.T) {
	tests := []struct {
		preset string
		want   []string
	}{
		{"partita", []string{"serve", "train", "scavenge"}},
		{"gang-drf", []string{"serve", "train", "scavenge"}},
		// Without class order the oldest goes first.
		{"naive", []string{"scavenge", "train", "serve"}},
	}
	for _, tc := range tests {
		t.Run(tc.preset, func(t *testing.T) {
			st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
			w := newWorld(t, st, newScheduler(t, tc.preset, st)).submit(
				job("scavenge").bestEffort().submitted(0),
				job("train").class(workload.Batch).submitted(time.Minute),
				job("serve").production().submitted(2*time.Minute),
			)
			if got := orderOf(w); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("order = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAClaimWithinItsGuaranteeGoesBeforeBorrowingProduction(t *testing.T) {
	// b holds its guarantee, so its service borrows; a is owed a GPU. The
	// claim goes first under partita; gang-drf keeps class order.
	st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
	for _, tc := range []struct {
		preset string
		want   []string
	}{
		{"partita", []string{"a-claim", "b-serve"}},
		{"gang-drf", []string{"b-serve", "a-claim"}},
	} {
		w := newWorld(t, st.Clone(), newScheduler(t, tc.preset, st), team("a").guarantee(2).burst(8), team("b").guarantee(1).burst(8))
		w.running(job("b-train").team("b").gpus(1), 0, 0, "n1:0")
		w.submit(job("a-claim").team("a").bestEffort().submitted(0), job("b-serve").team("b").production().submitted(0))
		if got := orderOf(w); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: order = %v, want %v", tc.preset, got, tc.want)
		}
	}
}

func TestFairShareOrdersTeams(t *testing.T) {
	tests := []struct {
		name    string
		teams   []*teamBuilder
		holding map[string]int // GPUs each team holds already (one running job each)
		pending []*jobBuilder
		want    []string
	}{
		{
			name:    "a team below its guarantee goes before a team above it that holds less",
			teams:   []*teamBuilder{team("rich").guarantee(8).burst(8), team("poor").guarantee(1).burst(8)},
			holding: map[string]int{"rich": 4, "poor": 1},
			pending: []*jobBuilder{job("poor-job").team("poor").submitted(0), job("rich-job").team("rich").submitted(time.Minute)},
			want:    []string{"rich-job", "poor-job"},
		},
		{
			name:    "the team further below its guarantee goes first",
			teams:   []*teamBuilder{team("x").guarantee(4).burst(8), team("y").guarantee(4).burst(8)},
			holding: map[string]int{"x": 3, "y": 1},
			pending: []*jobBuilder{job("x-job").team("x").submitted(0), job("y-job").team("y").submitted(time.Minute)},
			want:    []string{"y-job", "x-job"},
		},
		{
			name:    "above the guarantee the team with less GPU held per weight goes first",
			teams:   []*teamBuilder{team("heavy").weight(4).burst(8), team("light").weight(1).burst(8)},
			holding: map[string]int{"heavy": 2, "light": 1}, // 2/4 = 0.5 against 1/1 = 1
			pending: []*jobBuilder{job("light-job").team("light").submitted(0), job("heavy-job").team("heavy").submitted(time.Minute)},
			want:    []string{"heavy-job", "light-job"},
		},
		{
			name:    "equal shares go by submission time",
			teams:   []*teamBuilder{team("x").burst(8), team("y").burst(8)},
			holding: map[string]int{"x": 1, "y": 1},
			pending: []*jobBuilder{job("x-late").team("x").submitted(2 * time.Minute), job("y-early").team("y").submitted(time.Minute), job("x-first").team("x").submitted(0)},
			want:    []string{"x-first", "y-early", "x-late"},
		},
		{
			name:    "equal submission times go by ID",
			teams:   []*teamBuilder{team("x").burst(8), team("y").burst(8)},
			pending: []*jobBuilder{job("b-job").team("y").submitted(time.Minute), job("a-job").team("x").submitted(time.Minute)},
			want:    []string{"a-job", "b-job"},
		},
		{
			name:    "beyond the guarantees, class goes before fairness",
			teams:   []*teamBuilder{team("rich").guarantee(1).burst(8), team("poor").burst(8)},
			holding: map[string]int{"rich": 4},
			pending: []*jobBuilder{job("poor-batch").team("poor").submitted(0), job("rich-serve").team("rich").production().submitted(time.Minute)},
			want:    []string{"rich-serve", "poor-batch"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
			w := newWorld(t, st, newScheduler(t, "partita", st), tc.teams...)
			holdGPUs(w, tc.holding)
			w.submit(tc.pending...)
			if got := orderOf(w); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("order = %v, want %v", got, tc.want)
			}
		})
	}
}

// holdGPUs starts, for each team in name order, a job holding that many
// GPUs of node n1, packed from GPU 0.
func holdGPUs(w *world, holding map[string]int) {
	next := 0
	for _, name := range sortedNames(holding) {
		where := "n1:"
		for k := 0; k < holding[name]; k++ {
			if k > 0 {
				where += ","
			}
			where += itoa(next)
			next++
		}
		w.running(job(name+"-running").team(name).gpus(holding[name]), 0, 0, where)
	}
}

func TestFairShareGivesTheLastGPUToTheTeamBelowItsGuarantee(t *testing.T) {
	st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("rich").guarantee(8).burst(8), team("poor").guarantee(1).burst(8))
	holdGPUs(w, map[string]int{"rich": 4, "poor": 1, "other": 2}) // 1 GPU left
	w.submit(job("poor-job").team("poor").submitted(0), job("rich-job").team("rich").submitted(time.Minute))

	d := w.decide()
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"rich-job"}) {
		t.Errorf("started %v, want [rich-job]", got)
	}
	if got := d.Waiting["poor-job"]; got != (Wait{Position: 1, Reason: WaitNoRoom}) {
		t.Errorf("poor-job waits %+v, want position 1, %q", got, WaitNoRoom)
	}
}

func TestDRFOrdersByDominantShareOverWeight(t *testing.T) {
	// One node: 8 GPUs, 64 CPUs. cpu-team holds 1 GPU and 32 CPUs (dominant
	// share 1/2, CPU); gpu-team holds 2 GPUs and 1 CPU (dominant share 1/4,
	// GPU). Counting GPU alone, cpu-team would go first.
	tests := []struct {
		name      string
		gpuWeight float64
		want      []string
	}{
		{"the smaller dominant share goes first", 1, []string{"gpu-job", "cpu-job"}},
		{"a small weight raises the share it is divided into", 0.25, []string{"cpu-job", "gpu-job"}}, // 1/4 / 0.25 = 1 > 1/2
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
			w := newWorld(t, st, newScheduler(t, "gang-drf", st),
				team("cpu-team").burst(8), team("gpu-team").burst(8).weight(tc.gpuWeight))
			w.running(job("cpu-running").team("cpu-team").gpus(1).cpu(32000), 0, 0, "n1:0")
			w.running(job("gpu-running").team("gpu-team").gpus(2), 0, 0, "n1:1,2")
			w.submit(job("cpu-job").team("cpu-team").submitted(0), job("gpu-job").team("gpu-team").submitted(time.Minute))
			if got := orderOf(w); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("order = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFairShareCountsGPUHeldNotDominantShare(t *testing.T) {
	// The DRF case above under fair share: GPU held over weight alone.
	st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st), team("cpu-team").burst(8), team("gpu-team").burst(8))
	w.running(job("cpu-running").team("cpu-team").gpus(1).cpu(32000), 0, 0, "n1:0")
	w.running(job("gpu-running").team("gpu-team").gpus(2), 0, 0, "n1:1,2")
	w.submit(job("cpu-job").team("cpu-team").submitted(time.Minute), job("gpu-job").team("gpu-team").submitted(0))
	if got, want := orderOf(w), []string{"cpu-job", "gpu-job"}; !reflect.DeepEqual(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

func TestNaiveOrdersFirstInFirstOut(t *testing.T) {
	st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "naive", st), team("rich").guarantee(8).burst(8), team("poor").guarantee(1).burst(8))
	holdGPUs(w, map[string]int{"poor": 1})
	w.submit(
		job("poor-old").team("poor").bestEffort().submitted(0),
		job("rich-serve").team("rich").production().submitted(2*time.Minute),
		job("b-tie").team("poor").submitted(time.Minute),
		job("a-tie").team("rich").submitted(time.Minute),
	)
	if got, want := orderOf(w), []string{"poor-old", "a-tie", "b-tie", "rich-serve"}; !reflect.DeepEqual(got, want) {
		t.Errorf("order = %v, want %v (submission, then ID; classes and teams ignored)", got, want)
	}
}

func TestOrderLeavesRunningAndTerminatingJobsOut(t *testing.T) {
	st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st))
	w.running(job("runs"), 0, 0, "n1:0")
	w.running(job("leaves"), 0, 0, "n1:1").Phase = Terminating
	w.submit(job("waits"))
	if got, want := orderOf(w), []string{"waits"}; !reflect.DeepEqual(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

// naiveOrder is the ordering rule written out plainly, as the oracle for
// Scheduler.order: each pending job gets a key (within its team's
// guarantee under GuaranteeFirst, counting the claims that evicted for
// nodes and wait for them; holding such nodes; class, team share,
// submission, ID) and the keys are compared field by field.
func naiveOrder(w *world) []string {
	cfg := w.sch.Config()
	teams := map[string]Team{}
	for _, t := range w.teams {
		teams[t.Name] = t
	}
	used, cpu, mem := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, j := range w.jobs {
		for _, a := range j.Placed {
			if a == nil {
				continue
			}
			used[j.Spec.Team] += float64(a.GPUMilli(w.st.NodeByName(a.Node)))
			cpu[j.Spec.Team] += float64(a.CPUMilli)
			mem[j.Spec.Team] += float64(a.MemoryMiB)
		}
	}
	var totGPU, totCPU, totMem float64
	for i := 0; i < w.st.Len(); i++ {
		n := w.st.Node(i)
		totGPU += 1000 * float64(len(n.GPUs))
		totCPU += float64(n.CPUMilli)
		totMem += float64(n.MemoryMiB)
	}
	share := func(team string) float64 {
		t, known := teams[team]
		switch cfg.Order {
		case FairShare:
			if !known {
				return 0
			}
			if t.Guarantee > 0 && used[team] < float64(t.Guarantee) {
				return used[team]/float64(t.Guarantee) - 1
			}
			weight := t.Weight
			if weight <= 0 {
				weight = 1
			}
			return used[team] / 1000 / weight
		case DRF:
			dom := used[team] / totGPU
			if c := cpu[team] / totCPU; c > dom {
				dom = c
			}
			if m := mem[team] / totMem; m > dom {
				dom = m
			}
			if known && t.Weight > 0 {
				dom /= t.Weight
			}
			return dom
		}
		return 0
	}
	type keyed struct {
		id        string
		owed      int // 0 for a claim within its team's guarantee (GuaranteeFirst), else 1
		holds     int // 0 for such a claim that was promised nodes, else 1
		class     int
		share     float64
		submitted time.Duration
	}
	wantOf := func(j *Job) float64 {
		var want float64
		for i, task := range j.Spec.Tasks {
			if j.Placed[i] == nil {
				want += float64((&workload.Job{Tasks: []workload.Task{task}}).GPUMilli())
			}
		}
		return want
	}
	// What the pending jobs promised nodes (by their evictions) will take.
	inFlight := map[string]float64{}
	for _, j := range w.jobs {
		if _, promised := w.sch.promisedNodes[j.ID()]; promised && j.Phase == Pending {
			inFlight[j.Spec.Team] += wantOf(j)
		}
	}
	var ks []keyed
	for _, j := range w.jobs {
		if j.Phase != Pending {
			continue
		}
		k := keyed{id: j.ID(), owed: 1, holds: 1, share: share(j.Spec.Team), submitted: j.Submitted}
		if cfg.ClassOrder {
			k.class = -int(j.Spec.Class)
		}
		if t, known := teams[j.Spec.Team]; cfg.GuaranteeFirst && known {
			want := wantOf(j)
			_, promised := w.sch.promisedNodes[j.ID()]
			others := inFlight[j.Spec.Team]
			if promised {
				others -= want
			}
			if used[j.Spec.Team]+want+others <= float64(t.Guarantee) {
				k.owed = 0
				if promised {
					k.holds = 0
				}
			}
		}
		ks = append(ks, k)
	}
	less := func(a, b keyed) bool {
		switch {
		case a.owed != b.owed:
			return a.owed < b.owed
		case a.holds != b.holds:
			return a.holds < b.holds
		case a.class != b.class:
			return a.class < b.class
		case a.share != b.share:
			return a.share < b.share
		case a.submitted != b.submitted:
			return a.submitted < b.submitted
		}
		return a.id < b.id
	}
	// Insertion sort: slow, plainly correct.
	for i := 1; i < len(ks); i++ {
		for k := i; k > 0 && less(ks[k], ks[k-1]); k-- {
			ks[k], ks[k-1] = ks[k-1], ks[k]
		}
	}
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.id
	}
	return out
}

func TestOrderAgreesWithTheNaiveOrder(t *testing.T) {
	for seed := int64(1); seed <= 150; seed++ {
		rng := random.New(seed)
		sc := newRandomScenario(t, rng)
		preset := []string{"naive", "gang-drf", "partita"}[seed%3]
		w := sc.world(t, preset, seed)
		for cycle := 0; cycle < 6; cycle++ {
			got, want := orderOf(w), naiveOrder(w)
			if len(got) == 0 && len(want) == 0 {
				got, want = nil, nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d (%s), cycle %d: order %v, naive order %v", seed, preset, cycle, got, want)
			}
			w.cycle()
			sc.step(rng, w)
		}
	}
}

func TestPositionsCountOnlyTheJobsLeftWaitingInEachTeam(t *testing.T) {
	// One free GPU. a-1 takes it; a-2 and a-3 are next in team a, b-1
	// first in team b.
	st := fleet(t).nodes(1).gpus(1, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "naive", st)).submit(
		job("a-1").team("a").submitted(0),
		job("a-2").team("a").submitted(time.Minute),
		job("b-1").team("b").submitted(2*time.Minute),
		job("a-3").team("a").submitted(3*time.Minute),
	)
	d := w.decide()
	want := map[string]Wait{
		"a-2": {Position: 1, Reason: WaitNoRoom},
		"b-1": {Position: 1, Reason: WaitNoRoom},
		"a-3": {Position: 2, Reason: WaitNoRoom},
	}
	if !reflect.DeepEqual(d.Waiting, want) {
		t.Errorf("waiting = %+v, want %+v", d.Waiting, want)
	}
}
