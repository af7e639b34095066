package sched

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/workload"
)

// Property tests over many small random worlds: a Scheduler is a pure
// function of its inputs and its seed, it never changes what it is given,
// and every Decision applies cleanly to the world it was made for.

// randomScenario builds a small cluster, teams and jobs from rng.
type randomScenario struct {
	st    *cluster.State
	teams []*teamBuilder
	jobs  []*jobBuilder // pending at the start
	later []*jobBuilder // arriving one by one between cycles
}

func newRandomScenario(t *testing.T, rng *random.Rand) *randomScenario {
	f := fleet(t)
	for i := 0; i < 1+rng.Intn(3); i++ {
		f.nodes(1).gpus(2+rng.Intn(3), "H100-80GB")
		if rng.Intn(2) == 0 {
			f.mig()
		}
		if rng.Intn(2) == 0 {
			f.leaf(fmt.Sprintf("leaf-%d", rng.Intn(2)))
		}
	}
	sc := &randomScenario{st: f.build()}
	for _, name := range []string{"a", "b"} {
		g := int64(rng.Intn(4))
		sc.teams = append(sc.teams, team(name).guarantee(g).burst(g+int64(rng.Intn(9))).weight(float64(1+rng.Intn(3))))
	}
	classes := workload.Classes()
	for i := 0; i < 6+rng.Intn(8); i++ {
		b := job(fmt.Sprintf("j%d", i)).team([]string{"a", "b", "c"}[rng.Intn(3)]).
			class(classes[rng.Intn(len(classes))]).submitted(time.Duration(rng.Intn(20)) * time.Minute)
		switch rng.Intn(4) {
		case 0:
			b.gpus(1 + rng.Intn(3))
		case 1:
			b.gang(2 + rng.Intn(2)).gpus(1 + rng.Intn(2))
		case 2:
			b.migProfile([]string{"1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"}[rng.Intn(4)])
		default:
			b.gpuMemory(int64(4000+rng.Intn(30000)), float64(rng.Intn(5))/10)
		}
		if rng.Intn(2) == 0 {
			b.estimate(time.Duration(1+rng.Intn(120)) * time.Minute)
		}
		if rng.Intn(4) == 0 {
			b.replicas(2)
		}
		if i%2 == 0 {
			sc.jobs = append(sc.jobs, b)
		} else {
			sc.later = append(sc.later, b)
		}
	}
	return sc
}

// world builds the scenario's world with a scheduler of the preset.
func (sc *randomScenario) world(t *testing.T, preset string, seed int64) *world {
	st := sc.st.Clone()
	w := newWorld(t, st, newSchedulerSeed(t, preset, st, seed), sc.teams...)
	for _, b := range sc.jobs {
		w.submit(b)
	}
	return w
}

// step changes both worlds alike between cycles: time passes, a job may
// arrive, MIG changes finish, grace periods end, a running job may finish.
func (sc *randomScenario) step(rng *random.Rand, ws ...*world) {
	var arrival *jobBuilder
	if len(sc.later) > 0 && rng.Intn(2) == 0 {
		arrival, sc.later = sc.later[0], sc.later[1:]
	}
	advance := time.Duration(1+rng.Intn(8)) * time.Minute
	uncordon, release := rng.Intn(3) > 0, rng.Intn(2) == 0
	finish := rng.Intn(3)
	for _, w := range ws {
		w.at(w.now + advance)
		if arrival != nil {
			w.jobs = append(w.jobs, arrival.submitted(w.now).build())
		}
		if uncordon {
			w.uncordonAll()
		}
		if release {
			w.release()
		}
		var running []string
		for _, j := range w.jobs {
			if j.Phase == Running {
				running = append(running, j.ID())
			}
		}
		if finish == 0 && len(running) > 0 {
			w.finish(running[0])
		}
	}
}

// snapshotJobs copies the jobs deeply, to see whether a cycle changed them.
func snapshotJobs(jobs []*Job) []Job {
	out := make([]Job, len(jobs))
	for i, j := range jobs {
		c := *j
		c.held = heldEntry{} // the scheduler's own cache, not the world's data
		c.Spec.Tasks = append([]workload.Task(nil), j.Spec.Tasks...)
		c.Placed = make([]*cluster.Assignment, len(j.Placed))
		for k, a := range j.Placed {
			if a != nil {
				cp := *a
				cp.Grants = append([]cluster.Grant(nil), a.Grants...)
				c.Placed[k] = &cp
			}
		}
		out[i] = c
	}
	return out
}

func gens(st *cluster.State) []uint64 {
	out := make([]uint64, st.Len())
	for i := range out {
		out[i] = st.Node(i).Gen()
	}
	return out
}

func TestSameInputsAndSeedGiveTheSameDecisions(t *testing.T) {
	for seed := int64(1); seed <= 150; seed++ {
		rng := random.New(seed)
		sc := newRandomScenario(t, rng)
		preset := []string{"naive", "gang-drf", "partita"}[seed%3]
		a, b := sc.world(t, preset, seed), sc.world(t, preset, seed)
		for cycle := 0; cycle < 12; cycle++ {
			da, db := a.cycle(), b.cycle()
			if !reflect.DeepEqual(da, db) {
				t.Fatalf("seed %d (%s), cycle %d: two schedulers with the same seed decided differently:\n%+v\n%+v", seed, preset, cycle, da, db)
			}
			sc.step(rng, a, b)
		}
	}
}

func TestCycleChangesNeitherTheClusterNorTheJobs(t *testing.T) {
	for seed := int64(1); seed <= 150; seed++ {
		rng := random.New(seed)
		sc := newRandomScenario(t, rng)
		preset := []string{"naive", "gang-drf", "partita"}[seed%3]
		w := sc.world(t, preset, seed)
		for cycle := 0; cycle < 12; cycle++ {
			before, genBefore, jobsBefore := describe(w.st), gens(w.st), snapshotJobs(w.jobs)
			in := w.input()
			if cycle%3 == 2 && len(w.jobs) > 0 {
				in.Only = []string{w.jobs[rng.Intn(len(w.jobs))].ID()}
			}
			pending := pendingIDs(w)
			d := w.sch.Cycle(in)
			if after := describe(w.st); after != before {
				t.Fatalf("seed %d (%s), cycle %d: Cycle changed the cluster it was given:\nbefore:\n%s\nafter:\n%s", seed, preset, cycle, before, after)
			}
			if after := gens(w.st); !reflect.DeepEqual(after, genBefore) {
				t.Fatalf("seed %d (%s), cycle %d: Cycle touched nodes of the cluster it was given (generations %v, then %v)", seed, preset, cycle, genBefore, after)
			}
			if after := snapshotJobs(w.jobs); !reflect.DeepEqual(after, jobsBefore) {
				t.Fatalf("seed %d (%s), cycle %d: Cycle changed the jobs it was given", seed, preset, cycle)
			}
			w.apply(d) // fails the test if the decision does not apply cleanly
			checkDecision(t, w, d, pending, in.Only == nil, fmt.Sprintf("seed %d (%s), cycle %d", seed, preset, cycle))
			sc.step(rng, w)
		}
	}
}

// checkDecision checks what every Decision must satisfy once applied.
// pending lists the jobs pending before the cycle, full whether it was a
// full cycle.
func checkDecision(t *testing.T, w *world, d Decision, pending []string, full bool, where string) {
	t.Helper()
	cfg := w.sch.Config()
	started := map[string]bool{}
	for _, s := range d.Starts {
		started[s.Job] = true
	}
	for _, id := range pending {
		wt, waits := d.Waiting[id]
		switch {
		case full && !started[id] && (!waits || wt.Position < 1):
			t.Errorf("%s: pending %s neither started nor waiting with a position (%+v)", where, id, wt)
		case waits && started[id] && cfg.Gangs && w.job(id).Spec.IsGang():
			t.Errorf("%s: gang %s both started and waits", where, id)
		case !full && wt.Position != 0:
			t.Errorf("%s: light cycle gave %s position %d", where, id, wt.Position)
		}
	}
	for _, j := range w.jobs {
		placed := 0
		for _, a := range j.Placed {
			if a != nil {
				placed++
			}
		}
		if cfg.Gangs && j.Spec.IsGang() && placed > 0 && placed < len(j.Placed) {
			t.Errorf("%s: gang %s partly placed (%d of %d)", where, j.ID(), placed, len(j.Placed))
		}
	}
	seen := map[string]bool{}
	for _, p := range d.Preemptions {
		if seen[p.Job] {
			t.Errorf("%s: %s preempted twice in one decision", where, p.Job)
		}
		seen[p.Job] = true
		if started[p.Job] {
			t.Errorf("%s: %s both started and preempted", where, p.Job)
		}
	}
}

func pendingIDs(w *world) []string {
	var out []string
	for _, j := range w.jobs {
		if j.Phase == Pending {
			out = append(out, j.ID())
		}
	}
	return out
}
