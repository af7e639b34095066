package sched

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLightCycleConsidersOnlyTheJobsNamed(t *testing.T) {
	// Two free GPUs. old (2 GPUs) would go first in a full cycle; a light
	// cycle for fresh leaves it alone.
	st := fleet(t).nodes(1).gpus(2, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).submit(job("old").gpus(2), job("fresh").gpus(1).submitted(time.Minute))
	d := w.light("fresh")
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"fresh"}) {
		t.Errorf("started %v, want [fresh]", got)
	}
	if _, ok := d.Waiting["old"]; ok {
		t.Errorf("old, not named, is in Waiting: %+v", d.Waiting["old"])
	}
	// A full cycle now finds old waiting, with its position.
	d = w.cycle()
	if got := d.Waiting["old"]; got != (Wait{Position: 1, Reason: WaitNoRoom}) {
		t.Errorf("full cycle: old waits %+v, want position 1, %q", got, WaitNoRoom)
	}
}

func TestAFullCycleGivesItsWaitingInTheMapGiven(t *testing.T) {
	// One GPU, three jobs of one: two wait. The map given holds a stale
	// entry, which must go; a light cycle leaves the map alone.
	st := fleet(t).nodes(1).gpus(1, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).submit(job("a"), job("b").submitted(time.Minute), job("c").submitted(2*time.Minute))
	want := newWorld(t, st, newScheduler(t, "partita", st)).submit(job("a"), job("b").submitted(time.Minute), job("c").submitted(2*time.Minute)).decide()
	given := map[string]Wait{"gone": {Position: 9, Reason: WaitQuota}}
	light := w.input()
	light.Only, light.Waiting = []string{"c"}, given
	w.sch.Cycle(light)
	if len(given) != 1 {
		t.Fatalf("a light cycle changed the map given: %+v", given)
	}
	in := w.input()
	in.Waiting = given
	d := w.sch.Cycle(in)
	if !reflect.DeepEqual(d.Waiting, want.Waiting) || len(d.Waiting) != 2 {
		t.Errorf("waiting %+v; without a map given %+v", d.Waiting, want.Waiting)
	}
	d.Waiting["probe"] = Wait{}
	if _, ok := given["probe"]; !ok {
		t.Error("the decision's Waiting is not the map given")
	}
}

func TestLightCycleKeepsTheOrderGivenAndSetsNoPositions(t *testing.T) {
	// One free GPU; b is named first, so b gets it, though a is older.
	st := fleet(t).nodes(1).gpus(1, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).submit(job("a"), job("b").submitted(time.Minute))
	d := w.light("b", "a", "unknown")
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"b"}) {
		t.Errorf("started %v, want [b]", got)
	}
	if got, ok := d.Waiting["a"]; !ok || got.Position != 0 || got.Reason != WaitNoRoom {
		t.Errorf("a waits %+v (present %v), want position 0, %q", got, ok, WaitNoRoom)
	}
	if len(d.Waiting) != 1 {
		t.Errorf("waiting = %+v, want only a", d.Waiting)
	}
}

func TestLightCycleStartsAJobNamedTwiceOnce(t *testing.T) {
	st := fleet(t).nodes(2).gpus(1, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).submit(job("b"))
	d := w.sch.Cycle(Input{Now: 0, Cluster: w.st, Jobs: w.jobs, Only: []string{"b", "b"}})
	if got := len(startsOf(d, "b")); got != 1 {
		t.Errorf("b, one task, got %d starts: %+v", got, d.Starts)
	}
	if _, ok := d.Waiting["b"]; ok {
		t.Errorf("b both starts and waits: %+v", d.Waiting["b"])
	}
}

func TestLightCycleIgnoresJobsNotPending(t *testing.T) {
	st := fleet(t).nodes(1).gpus(2, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st))
	w.running(job("runs"), 0, 0, "n1:0")
	d := w.light("runs")
	if len(d.Starts) != 0 || len(d.Waiting) != 0 {
		t.Errorf("a light cycle for a running job: starts %v, waiting %+v; want nothing", startedJobs(d), d.Waiting)
	}
}

func TestInvalidJobsWaitWithTheValidationMessage(t *testing.T) {
	tests := []struct {
		name string
		job  *jobBuilder
		want string
	}{
		{"9 GPUs on 8-GPU nodes", job("big").gpus(9),
			WaitInvalidSpec + ": job big: task big/0: asks for 9 GPUs but the largest node has 8 (H100-80GB)"},
		{"a MIG profile no GPU offers", job("odd").migProfile("1g.5gb"),
			WaitInvalidSpec + `: job odd: task odd/0: mig profile "1g.5gb": no GPU in the cluster offers it`},
		{"more GPU memory than any GPU has", job("huge").gpuMemory(200*1024, 0.5),
			WaitInvalidSpec + ": job huge: task huge/0: gpu memory: peak 204800 MiB is more than the largest GPU has (81920 MiB)"},
	}
	for _, tc := range tests {
		for _, preset := range []string{"naive", "gang-drf", "partita"} {
			t.Run(preset+"/"+tc.name, func(t *testing.T) {
				st := fleet(t).nodes(2).gpus(8, "H100-80GB").build()
				w := newWorld(t, st, newScheduler(t, preset, st)).submit(tc.job, job("fine").gpus(8).submitted(time.Minute))
				id := tc.job.spec.ID
				for cycle := 1; cycle <= 2; cycle++ {
					d := w.at(time.Duration(cycle) * time.Minute).cycle()
					got := reasonOf(d, id)
					if len(got) < len(tc.want) || got[:len(tc.want)] != tc.want {
						t.Errorf("cycle %d: %s waits %q, want %q", cycle, id, got, tc.want)
					}
					if len(d.Reconfigs) != 0 || len(d.Preemptions) != 0 || len(startsOf(d, id)) != 0 {
						t.Errorf("cycle %d: the invalid job caused %+v", cycle, d)
					}
				}
				if w.job("fine").Phase != Running {
					t.Errorf("the valid job behind it is %v, want running", w.job("fine").Phase)
				}
			})
		}
	}
}

func TestAJobRebuiltUnderItsIDIsSeenAfresh(t *testing.T) {
	// A world may rebuild a job under the same ID with other tasks (a
	// Kubernetes PodGroup deleted and created again). x first asks for 4
	// GPUs where 2 are free; rebuilt to ask for 1, it starts on 1.
	st := fleet(t).nodes(1).gpus(4, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st))
	w.running(job("busy").gpus(2), 0, 0, "n1:0,1")
	w.submit(job("x").gpus(4))
	if d := w.cycle(); len(startsOf(d, "x")) != 0 {
		t.Fatalf("x (4 GPUs) started with 2 free")
	}
	for i, j := range w.jobs {
		if j.ID() == "x" {
			w.jobs[i] = job("x").gpus(1).build()
		}
	}
	d := w.at(time.Minute).cycle()
	starts := startsOf(d, "x")
	if len(starts) != 1 || len(starts[0].Assignment.Grants) != 1 {
		t.Fatalf("rebuilt x: starts %+v, want one task on 1 GPU", starts)
	}
}

func TestAnInvalidJobRebuiltValidRuns(t *testing.T) {
	// x asks for 9 GPUs on a 4-GPU node: it can never run, and says so.
	// Rebuilt under the same ID asking for 2, it starts.
	st := fleet(t).nodes(1).gpus(4, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st))
	w.submit(job("x").gpus(9))
	if got := reasonOf(w.cycle(), "x"); !strings.HasPrefix(got, WaitInvalidSpec) {
		t.Fatalf("x (9 GPUs) waits %q, want %q…", got, WaitInvalidSpec)
	}
	for i, j := range w.jobs {
		if j.ID() == "x" {
			w.jobs[i] = job("x").gpus(2).build()
		}
	}
	if starts := startsOf(w.at(time.Minute).cycle(), "x"); len(starts) != 1 {
		t.Fatalf("rebuilt x (2 GPUs): starts %+v, want it started", starts)
	}
}

func TestValidationFollowsTheNodes(t *testing.T) {
	// On 4-GPU nodes a job of 8 GPUs can never run. When the world's
	// nodes change (a Kubernetes node joins), the same scheduler validates
	// new jobs against the new nodes.
	small := fleet(t).nodes(1).gpus(4, "H100-80GB").build()
	sch := newScheduler(t, "partita", small)
	w := newWorld(t, small, sch)
	w.submit(job("x").gpus(8))
	if got := reasonOf(w.cycle(), "x"); !strings.HasPrefix(got, WaitInvalidSpec) {
		t.Fatalf("x (8 GPUs on 4-GPU nodes) waits %q, want %q…", got, WaitInvalidSpec)
	}
	big := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
	w2 := newWorld(t, big, sch).at(time.Minute)
	w2.submit(job("y").gpus(8))
	if starts := startsOf(w2.cycle(), "y"); len(starts) != 1 {
		t.Fatalf("y (8 GPUs on an 8-GPU node): starts %+v, want it started", starts)
	}
}

func TestCachesStayBoundedWhenJobsAreRebuiltEachCycle(t *testing.T) {
	// The Kubernetes world builds every Job anew for each cycle; what the
	// scheduler keeps per Job must not grow with the number of cycles.
	st := fleet(t).nodes(2).gpus(8, "H100-80GB").build()
	sch := newScheduler(t, "partita", st)
	const jobs = 10
	for cycle := 0; cycle < 300; cycle++ {
		w := newWorld(t, st.Clone(), sch).at(time.Duration(cycle) * time.Second)
		for i := 0; i < jobs; i++ {
			w.running(job("j"+itoa(i)).team("a").gpus(1), 0, 0, "n"+itoa(1+i%2)+":"+itoa(i/2))
		}
		w.decide()
		if got, limit := len(sch.byID), 3*jobs+1024; got > limit {
			t.Fatalf("cycle %d: %d entries kept for %d jobs (limit %d)", cycle, got, jobs, limit)
		}
	}
}

func TestChangesAskedForJobsGoneAreForgotten(t *testing.T) {
	// Each cycle a new service asks for a GPU turned to MIG and is
	// cancelled before the next: what the scheduler keeps of the changes
	// asked must not grow with the jobs that asked them.
	st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
	sch := newScheduler(t, "partita", st)
	for cycle := 0; cycle < 600; cycle++ {
		w := newWorld(t, st.Clone(), sch).at(time.Duration(cycle) * time.Hour)
		w.submit(job("svc-"+itoa(cycle)).production().gpuMemory(8000, 0.1).submitted(w.now))
		if d := w.decide(); len(d.Reconfigs) != 1 {
			t.Fatalf("cycle %d: reconfigs %+v, want one for the service", cycle, d.Reconfigs)
		}
	}
	if got := len(sch.awaiting); got > 256 {
		t.Errorf("changes kept for %d jobs after 600 cycles, each job gone after one", got)
	}
}

func TestQueuePositionsCountPerTeamIncludingTeamsNotInTheInput(t *testing.T) {
	// One GPU: a1 takes it. Positions count each team's waiting jobs in
	// order, the started one not counted; team x is not in the input
	// (positions are kept by team position, with a map for such teams).
	st := fleet(t).nodes(1).gpus(1, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st), team("a").guarantee(1).burst(1), team("b").guarantee(1).burst(1))
	w.submit(
		job("a1").team("a"), job("a2").team("a").submitted(time.Second), job("a3").team("a").submitted(2*time.Second),
		job("b1").team("b").submitted(3*time.Second),
		job("x1").team("x").submitted(4*time.Second), job("x2").team("x").submitted(5*time.Second),
	)
	d := w.cycle()
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"a1"}) {
		t.Fatalf("started %v, want [a1]", got)
	}
	want := map[string]int{"a2": 1, "a3": 2, "b1": 1, "x1": 1, "x2": 2}
	for id, pos := range want {
		if got := d.Waiting[id].Position; got != pos {
			t.Errorf("%s: position %d, want %d (%+v)", id, got, pos, d.Waiting[id])
		}
	}
}
