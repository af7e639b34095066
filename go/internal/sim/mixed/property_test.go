package mixed

import (
	"maps"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/scenario"
	"partita.dev/partita/internal/sim"
)

func load(t *testing.T, path string) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// The invariants hold after every cycle (Options.Check) for every
// scheduler on the shipped scenarios, over a day and several seeds: no gang
// partly running under a gang scheduler, no team above its limit, the
// cluster's own invariants.
func TestInvariantsHoldOnShippedScenarios(t *testing.T) {
	hours := 24 * time.Hour
	if testing.Short() {
		hours = 6 * time.Hour
	}
	for _, file := range []string{"default.yaml", "tight-guarantees.yaml", "demo.yaml"} {
		sc := load(t, filepath.Join("..", "..", "..", "..", "scenarios", file))
		sc.Duration = hours
		for _, name := range Schedulers {
			for _, seed := range []int64{1, 2} {
				r, err := Run(sc, Options{Scheduler: name, Seed: seed, Check: true})
				if err != nil {
					t.Fatalf("%s, %s, seed %d: %v", file, name, seed, err)
				}
				if r.Completed == 0 {
					t.Errorf("%s, %s, seed %d: no job completed", file, name, seed)
				}
			}
		}
	}
}

// No OOM by construction for the schedulers that right-size or give whole
// GPUs: every task gets at least its peak memory.
func TestNoSchedulerPlacesATaskWhereItRunsOutOfMemory(t *testing.T) {
	sc := load(t, filepath.Join("..", "..", "..", "..", "scenarios", "default.yaml"))
	sc.Duration = 12 * time.Hour
	for _, name := range Schedulers {
		r, err := Run(sc, Options{Scheduler: name, Seed: 1, Check: true})
		if err != nil {
			t.Fatal(err)
		}
		if r.OOMEvents != 0 {
			t.Errorf("%s: %d OOM events", name, r.OOMEvents)
		}
	}
}

// A gang that needs the whole cluster starts although one-GPU jobs of its
// own class keep arriving: after ReserveAfter it holds the nodes, which
// drain as the running jobs end (30 min each). Without the reservation the
// stream keeps it out; the test checks that it is not.
func TestAGangIsNotStarvedByAStreamOfSmallJobs(t *testing.T) {
	sc := load(t, filepath.Join("testdata", "starve.yaml"))
	r, w := runWorld(t, sc, "partita")
	big := w.byID["big-000000"]
	if big == nil || !big.started {
		t.Fatalf("the gang never started (waits: %v)", r.WaitP95)
	}
	// Bound: ReserveAfter (10 min) + the longest run on the reserved
	// nodes (30 min) + cycles and slack.
	if wait := big.firstRun - big.Submitted; wait > 50*time.Minute {
		t.Errorf("the gang waited %v, more than the reservation bound", wait)
	}
	// And the stream was not blocked for good either.
	if r.Completed < 100 {
		t.Errorf("only %d jobs completed; the small jobs were starved", r.Completed)
	}
}

// Team a borrows the whole cluster; team b asks for its guarantee and gets
// it within 60 s plus the victims' grace period.
func TestAGuaranteeIsReclaimedWithinTheWindow(t *testing.T) {
	sc := load(t, filepath.Join("testdata", "reclaim.yaml"))
	r, w := runWorld(t, sc, "partita")
	if r.GuaranteeViolation != 0 {
		t.Errorf("guarantee violated for %.0f s", r.GuaranteeViolation)
	}
	servedWithin(t, w, "b", time.Minute+w.sch.Config().Grace)
	if r.Preemptions == 0 {
		t.Error("nothing was preempted: the scenario does not test reclaim")
	}
	// The naive scheduler has fixed quotas: a never borrows, so b is served
	// at once too, but a's extra jobs wait instead.
	rn, _ := runWorld(t, sc, "naive")
	if rn.Preemptions != 0 {
		t.Errorf("naive preempted %d jobs", rn.Preemptions)
	}
}

// servedWithin checks that every job of team started, each within limit
// of its submission.
func servedWithin(t *testing.T, w *world, team string, limit time.Duration) {
	t.Helper()
	for _, j := range w.jobs {
		if j.Spec.Team != team {
			continue
		}
		if !j.started {
			t.Fatalf("%s never started", j.ID())
		}
		if wait := j.firstRun - j.Submitted; wait > limit {
			t.Errorf("%s waited %v, more than %v", j.ID(), wait, limit)
		}
	}
}

// runWorld runs a scenario and returns the world too, for its jobs.
func runWorld(t *testing.T, sc *scenario.Scenario, scheduler string) (*Result, *world) {
	t.Helper()
	return runWorldWith(t, sc, Options{Scheduler: scheduler, Seed: sc.Seed, Check: true})
}

// runWorldWith is runWorld with options of its own.
func runWorldWith(t *testing.T, sc *scenario.Scenario, opt Options) (*Result, *world) {
	t.Helper()
	opt.defaults()
	w, err := newWorld(sc, opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.loop(); err != nil {
		t.Fatal(err)
	}
	return w.metrics.result(w), w
}

// Same seed, same result; the simulator is deterministic.
func TestRunsAreDeterministic(t *testing.T) {
	sc := load(t, filepath.Join("..", "..", "..", "..", "scenarios", "demo.yaml"))
	sc.Duration = 12 * time.Hour
	a, err := Run(sc, Options{Scheduler: "partita", Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(sc, Options{Scheduler: "partita", Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	a.Timeline, b.Timeline = nil, nil
	if !reflect.DeepEqual(a.WaitP95, b.WaitP95) || a.UsefulUtilization != b.UsefulUtilization || a.Preemptions != b.Preemptions || a.Completed != b.Completed {
		t.Errorf("two runs differ:\n%+v\n%+v", a, b)
	}
}

// A job that evicted victims starts as soon as the last of them is gone,
// not at the next full cycle: full cycles are coalesced (here to one per
// 10 min, with one just before the claims), and the room freed for a job
// must not wait for one or go to someone else meanwhile.
func TestAJobStartsWhenItsVictimsAreGone(t *testing.T) {
	sc := load(t, filepath.Join("testdata", "roomready.yaml"))
	r, w := runWorldWith(t, sc, Options{Scheduler: "partita", Seed: sc.Seed, Check: true, Coalesce: 10 * time.Minute})
	if r.Preemptions != 1 {
		t.Fatalf("%d preemptions, want 1: the scenario does not test eviction", r.Preemptions)
	}
	servedWithin(t, w, "b", w.sch.Config().Grace) // the victims' grace, nothing more
}

// A best-effort claim whose first search finds only borrowed production,
// protected for its first ProtectProductionFor, searches again when the
// protection lapses (the scheduler's Retries), not at the periodic cycle
// a minute later: it starts after the protection and the victim's grace.
func TestABestEffortClaimSearchesAgainWhenTheProtectionLapses(t *testing.T) {
	sc := load(t, filepath.Join("testdata", "retry.yaml"))
	r, w := runWorldWith(t, sc, Options{Scheduler: "partita", Seed: sc.Seed, Check: true})
	if r.Preemptions != 1 {
		t.Fatalf("%d preemptions, want 1: the scenario does not test the protection", r.Preemptions)
	}
	cfg := w.sch.Config()
	servedWithin(t, w, "a", cfg.ProtectProductionFor+cfg.Grace)
}

// The offered load is the stream's nominal GPU-time within the horizon
// over the cluster's, whatever the scheduler. owedfall.yaml, 4 GPUs for
// 3 h: first 1 GPU × 55 min, mine 2 × 180, borrow 1 × 175 (from 5 min,
// cut at the horizon), second a gang of 2 × 60: 710 of 720 GPU-minutes.
func TestTheOfferedLoadIsTheStreamsGPUTimeOverTheClusters(t *testing.T) {
	sc := load(t, filepath.Join("testdata", "owedfall.yaml"))
	for _, scheduler := range []string{"naive", "partita"} {
		r, _ := runWorld(t, sc, scheduler)
		if want := 710.0 / 720; math.Abs(r.OfferedLoad-want) > 1e-9 {
			t.Errorf("%s: offered load %v, want %v", scheduler, r.OfferedLoad, want)
		}
	}
}

// A wait counts in wait_p95_within_guarantee_s only when it began with the
// team owed the job's demand.
func TestOnlyWaitsBegunWithinTheGuaranteeCountAsWithin(t *testing.T) {
	sc := load(t, filepath.Join("testdata", "within.yaml"))
	r, w := runWorld(t, sc, "partita")
	var within []float64
	for _, j := range w.jobs {
		switch {
		case j.ID() == "late-000000":
			if len(j.waits) == 0 || len(j.waitsWithin) != 0 {
				t.Errorf("late: %d waits, %d within; want its wait, not within (a held 16 of 8)", len(j.waits), len(j.waitsWithin))
			}
		case j.Spec.Team == "b":
			if len(j.waitsWithin) != len(j.waits) || len(j.waits) == 0 {
				t.Errorf("%s: %d waits, %d within; want every wait within", j.ID(), len(j.waits), len(j.waitsWithin))
			}
		}
		for _, d := range j.waitsWithin {
			within = append(within, d.Seconds())
		}
	}
	if got, want := r.WaitP95WithinGuarantee["batch"], percentile(within, 95); got != want {
		t.Errorf("within p95 %v, want %v", got, want)
	}
}

// A move holds both places until the new one is ready; a job that stops
// in between releases both, and the move's completion then finds nothing
// to release. The GPU held returns to zero.
func TestAJobStoppedDuringAMoveReleasesBothPlaces(t *testing.T) {
	sc := load(t, filepath.Join("testdata", "move.yaml"))
	_, w := runWorldWith(t, sc, Options{Scheduler: "partita", Seed: 1, Check: true})
	j := w.byID["serve-000000"]
	if j == nil || j.Phase != sched.Running {
		t.Fatalf("serve is not running at the end of the hour")
	}
	old := *j.Placed[0]
	other := ""
	for i := 0; i < w.st.Len(); i++ {
		if n := w.st.Node(i).Name; n != old.Node {
			other = n
		}
	}
	to := old
	to.Node = other
	if err := w.migrate(sched.Migration{Job: j.ID(), Task: 0, To: to, Creates: true, For: "test"}); err != nil {
		t.Fatal(err)
	}
	if got := allocations(w); got != 2 {
		t.Fatalf("%d allocations during the move, want 2 (old and new place)", got)
	}
	if err := w.checkInvariants(); err != nil {
		t.Fatalf("during the move: %v", err)
	}
	w.metrics.progress(w, j)
	if err := w.releaseAll(j); err != nil {
		t.Fatal(err)
	}
	if got := allocations(w); got != 0 || len(j.moved) != 0 {
		t.Fatalf("after the stop: %d allocations, %d old places kept; want none", got, len(j.moved))
	}
	if err := w.releaseOld(j, old.Node, old.Task); err != nil {
		t.Fatalf("the move completing after the stop: %v", err)
	}
	if a := w.metrics.allocNow; a > 1e-9 || a < -1e-9 {
		t.Errorf("GPU held after the stop: %v, want 0", a)
	}
}

func allocations(w *world) int {
	n := 0
	for i := 0; i < w.st.Len(); i++ {
		n += len(w.st.Node(i).Tasks())
	}
	return n
}

// The scenario's production_reserve_gpus holds partita's borrowed work
// back; the option replaces it; naive and gang-drf have no such setting.
func TestTheScenarioProductionReserveHoldsBackPartitasBorrowers(t *testing.T) {
	sc := load(t, filepath.Join("testdata", "reserve.yaml"))
	none := 0.0
	for _, tc := range []struct {
		name string
		opt  Options
		want int // jobs running at the end of the hour
	}{
		{"partita with the scenario's 3 GPUs", Options{Scheduler: "partita"}, 5},
		{"partita with the reserve set to 0", Options{Scheduler: "partita", ProductionReserveGPUs: &none}, 8},
		{"gang-drf borrows all", Options{Scheduler: "gang-drf"}, 8},
		{"naive holds the guarantee", Options{Scheduler: "naive"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opt.Seed, tc.opt.Check = 1, true
			_, w := runWorldWith(t, sc, tc.opt)
			running := 0
			for _, j := range w.jobs {
				if j.Phase == sched.Running {
					running++
				}
			}
			if running != tc.want {
				t.Errorf("%d jobs running, want %d", running, tc.want)
			}
		})
	}
}

// The scheduler ranks victims by the work they would lose, so the world
// must show it each running job's last checkpoint, not its start.
func TestTheSchedulerSeesTheLastCheckpoint(t *testing.T) {
	sc := load(t, filepath.Join("testdata", "reserve.yaml"))
	_, w := runWorldWith(t, sc, Options{Scheduler: "partita", Seed: 1, Check: true})
	running := 0
	for _, j := range w.jobs {
		if j.Phase != sched.Running {
			continue
		}
		running++
		// An hour in, jobs that started at once checkpointed at 25 and 50
		// minutes; the last cycles come every minute while others wait.
		if got := j.Checkpoint - j.runSince; got != 50*time.Minute {
			t.Errorf("%s: last checkpoint %v after it began running, want 50m", j.ID(), got)
		}
	}
	if running == 0 {
		t.Fatal("nothing running")
	}
}

// Jain's index is averaged over the samples with every team backlogged;
// without any, the report says so instead of printing 0.
func TestJainWithoutBackloggedSamplesIsReportedAsSuch(t *testing.T) {
	var b strings.Builder
	rs := []*Result{{Scenario: "x", Scheduler: "never", WaitP95: map[string]float64{}, WaitP95WithinGuarantee: map[string]float64{}},
		{Scenario: "x", Scheduler: "sampled", JainFairness: ptr(0.5), JainSamples: 3, WaitP95: map[string]float64{}, WaitP95WithinGuarantee: map[string]float64{}}}
	if err := writeMarkdown(&b, "cmd", rs); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "| never |") && !strings.Contains(line, "| n/a (never all backlogged) |"):
			t.Errorf("no samples: %q", line)
		case strings.HasPrefix(line, "| sampled |") && !strings.Contains(line, "| 0.500 |"):
			t.Errorf("three samples: %q", line)
		}
	}
	// And the count is the number of samples with every team waiting.
	sc := load(t, filepath.Join("testdata", "reserve.yaml"))
	r, _ := runWorldWith(t, sc, Options{Scheduler: "partita", Seed: 1})
	if r.JainSamples == 0 || val(r.JainFairness) != 1 {
		t.Errorf("one team, backlogged all hour: %d samples, Jain %v; want some, and 1", r.JainSamples, val(r.JainFairness))
	}
}

// A run whose events pile up at one instant (a scheduler that never
// settles did: a replica moved back and forth at 167 h) fails with that
// instant instead of hanging.
func TestAStuckRunFailsInsteadOfHanging(t *testing.T) {
	sc := load(t, filepath.Join("..", "..", "..", "..", "scenarios", "demo.yaml"))
	sc.Duration = time.Hour
	// burst runs the world with 100 extra events at 30 min under a bound.
	burst := func(bound int) error {
		opt := Options{Scheduler: "partita", Seed: 1}
		opt.defaults()
		w, err := newWorld(sc, opt)
		if err != nil {
			t.Fatal(err)
		}
		w.stuckAfter = bound
		for i := 0; i < 100; i++ {
			if err := w.q.Push(sim.Event{At: 30 * time.Minute, Kind: evTimer, Ref: refTick}); err != nil {
				t.Fatal(err)
			}
		}
		return w.loop()
	}
	if err := burst(50); err == nil || !strings.Contains(err.Error(), "stuck") || !strings.Contains(err.Error(), "30m0s") {
		t.Fatalf("loop = %v, want an error that the run is stuck at 30m0s", err)
	}
	if err := burst(200); err != nil {
		t.Errorf("100 events at one instant under a limit of 200: %v", err)
	}
}

// A job that waited beyond its team's guarantee and is served within 60 s
// plus the grace of becoming owed violates by the queueing clock
// (guarantee_violation_s) but not by the owed clock
// (guarantee_violation_owed_s).
func TestTheOwedClockStartsWhenTheJobBecomesOwed(t *testing.T) {
	sc := load(t, filepath.Join("testdata", "owed.yaml"))
	r, w := runWorld(t, sc, "partita")
	second := w.byID["second-000000"]
	if second == nil || !second.started {
		t.Fatal("a's gang never started")
	}
	limit := time.Minute + w.sch.Config().Grace
	if wait := second.firstRun - time.Hour; wait <= 0 || wait > limit {
		t.Fatalf("a's gang started %v after it became owed, want within (0, %v]: the scenario does not test the clock", wait, limit)
	}
	if r.Preemptions == 0 {
		t.Error("b's borrowed job was not evicted: the scenario does not test the clock")
	}
	if r.GuaranteeViolation <= 0 {
		t.Errorf("queueing clock: %.0f s, want the time from a's gang becoming owed to its start", r.GuaranteeViolation)
	}
	if r.GuaranteeViolationOwed != 0 {
		t.Errorf("owed clock: %.0f s, want 0", r.GuaranteeViolationOwed)
	}
}

// The owed clock starts when the team's holdings fell, not at the check
// before: with the periodic cycles 10 minutes apart, a's gang becomes owed
// at 55m, minutes after the last check, and is served 30 s later.
func TestTheOwedClockStartsWhenTheTeamsHoldingsFell(t *testing.T) {
	sc := load(t, filepath.Join("testdata", "owedfall.yaml"))
	r, w := runWorldWith(t, sc, Options{Scheduler: "partita", Seed: sc.Seed, Check: true, CycleEvery: 10 * time.Minute})
	second := w.byID["second-000000"]
	if second == nil || !second.started {
		t.Fatal("a's gang never started")
	}
	limit := time.Minute + w.sch.Config().Grace
	if wait := second.firstRun - 55*time.Minute; wait <= 0 || wait > limit {
		t.Fatalf("a's gang started %v after it became owed, want within (0, %v]: the scenario does not test the clock", wait, limit)
	}
	if r.GuaranteeViolationOwed != 0 {
		t.Errorf("owed clock: %.0f s, want 0", r.GuaranteeViolationOwed)
	}
	// Queued at 10m, it had waited past the line long before it fitted:
	// the queueing clock counts from the fall that made it fit, not from
	// the look before.
	if want := (second.Started - 55*time.Minute).Seconds(); math.Abs(r.GuaranteeViolation-want) > 1e-6 {
		t.Errorf("queueing clock: %.3f s, want %.3f s, from the fall at 55m to the gang's start", r.GuaranteeViolation, want)
	}
	if want := (second.Started - 55*time.Minute).Seconds(); r.OwedWaits < 1 || r.OwedWaitsLate != 0 || !(math.Abs(val(r.OwedWaitMax)-want) <= 1e-6) {
		t.Errorf("owed waits: %d, %d late, longest %.3f s; want the gang's %.3f s the longest, none late", r.OwedWaits, r.OwedWaitsLate, val(r.OwedWaitMax), want)
	}
}

// The violation clocks count a wait from the moment it passes 60 s plus
// the grace to the job's start, whatever the cadence of the checks: with
// full cycles every minute or every 7, the same seconds. Until 2026-12-02
// a team late at a check was charged until the next one, and the time
// between the line and the first check past it was not charged, so the
// clocks read differently at different cadences.
func TestTheViolationClocksDoNotDependOnTheCadence(t *testing.T) {
	sc := load(t, filepath.Join("testdata", "owedlate.yaml"))
	for _, every := range []time.Duration{time.Minute, 7 * time.Minute} {
		r, w := runWorldWith(t, sc, Options{Scheduler: "partita", Seed: sc.Seed, Check: true, ReconfigDelay: 10 * time.Minute, CycleEvery: every})
		job := w.byID["train-000000"]
		if job == nil || !job.started {
			t.Fatalf("cycles every %v: a's job never started", every)
		}
		limit := time.Minute + w.sch.Config().Grace
		want := (job.Started - time.Minute - limit).Seconds()
		if want <= 0 {
			t.Fatalf("cycles every %v: a's job started %v after it arrived, want more than %v: the scenario does not test the clocks", every, job.Started-time.Minute, limit)
		}
		if math.Abs(r.GuaranteeViolationOwed-want) > 1e-6 || math.Abs(r.GuaranteeViolation-want) > 1e-6 {
			t.Errorf("cycles every %v: clocks %.3f s (owed) and %.3f s (queueing), want %.3f s: from 60 s + grace after its arrival to its start", every, r.GuaranteeViolationOwed, r.GuaranteeViolation, want)
		}
		if wait := (job.Started - time.Minute).Seconds(); r.OwedWaits != 1 || r.OwedWaitsLate != 1 || !(math.Abs(val(r.OwedWaitMax)-wait) <= 1e-6) {
			t.Errorf("cycles every %v: owed waits %d, %d late, longest %.3f s; want the job's one of %.3f s, late", every, r.OwedWaits, r.OwedWaitsLate, val(r.OwedWaitMax), wait)
		}
	}
}

// A job owed past 60 s plus the grace is named once in the trace, with
// its wait reason, when it crosses the line; the owed clock counts it.
func TestAnOwedViolationIsTracedOnce(t *testing.T) {
	sc := load(t, filepath.Join("testdata", "owedlate.yaml"))
	var trace strings.Builder
	r, w := runWorldWith(t, sc, Options{Scheduler: "partita", Seed: sc.Seed, Check: true, ReconfigDelay: 10 * time.Minute, Trace: &trace})
	job := w.byID["train-000000"]
	if job == nil || !job.started {
		t.Fatal("a's job never started")
	}
	limit := time.Minute + w.sch.Config().Grace
	if wait := job.firstRun - time.Minute; wait <= limit {
		t.Fatalf("a's job started %v after it arrived, want more than %v: the scenario does not test the trace", wait, limit)
	}
	if r.GuaranteeViolationOwed <= 0 {
		t.Errorf("owed clock: %.0f s, want more than 0", r.GuaranteeViolationOwed)
	}
	var lines []string
	for _, l := range strings.Split(trace.String(), "\n") {
		if strings.Contains(l, "owed violation") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "owed violation a: train-000000") || !strings.Contains(lines[0], sched.WaitReconfig) {
		t.Errorf("owed violation lines %q, want one for train-000000 waiting %q", lines, sched.WaitReconfig)
	}
	// The result counts the same episode without a trace, by class and
	// reason.
	want := map[string]int{job.Spec.Class.String() + ": " + sched.WaitReconfig: 1}
	if !maps.Equal(r.OwedLateJobs, want) {
		t.Errorf("owed_late_jobs %v, want %v", r.OwedLateJobs, want)
	}
	if s := Summarize([]*Result{r, r}); !maps.Equal(s.OwedLateJobs, map[string]int{job.Spec.Class.String() + ": " + sched.WaitReconfig: 2}) {
		t.Errorf("owed_late_jobs_total over two copies %v, want twice %v", s.OwedLateJobs, want)
	}
	// Its team has no other claim ahead of it.
	if r.OwedLateBehindTeam != 0 || strings.Contains(lines[0], "behind its team") {
		t.Errorf("owed_late_behind_own_team %d (line %q), want 0: the job is its team's only claim", r.OwedLateBehindTeam, lines[0])
	}
}

// The report lists owed_late_jobs, most frequent first, one column per
// scheduler, and leaves the table out when no scheduler has any.
func TestTheReportListsOwedLateJobs(t *testing.T) {
	res := func(name string, late map[string]int) *Result {
		return &Result{Scenario: "x", Scheduler: name, WaitP95: map[string]float64{}, WaitP95WithinGuarantee: map[string]float64{}, OwedLateJobs: late}
	}
	var b strings.Builder
	p := res("p", map[string]int{"batch: x": 1, "best-effort: y": 3})
	p.OwedLateBehindTeam = 2
	if err := writeMarkdown(&b, "cmd", []*Result{p, res("q", map[string]int{"batch: x": 1})}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	y, x := strings.Index(out, "| best-effort: y | 3 | 0 |"), strings.Index(out, "| batch: x | 1 | 1 |")
	if y < 0 || x < 0 || y > x {
		t.Errorf("want the row of 3 then the row of 2, one column per scheduler:\n%s", out)
	}
	if behind := strings.Index(out, "(`owed_late_behind_own_team`) | 2 | 0 |"); behind < x {
		t.Errorf("want the count behind their team's own claims after the reasons:\n%s", out)
	}
	b.Reset()
	if err := writeMarkdown(&b, "cmd", []*Result{res("p", map[string]int{})}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "owed_late_jobs") {
		t.Errorf("no owed-late jobs, yet the table is there:\n%s", b.String())
	}
}

// The unallocated GPU-hours go to why they stood idle: nothing waiting,
// a team at its limit, a gang that needs more than stands free
// (testdata/idle.yaml works out each hour), and they add up with the
// allocated ones to the cluster's GPU-hours.
func TestIdleGPUHoursGoToTheirCause(t *testing.T) {
	sc := load(t, filepath.Join("testdata", "idle.yaml"))
	for _, name := range []string{"gang-drf", "partita"} {
		r, _ := runWorld(t, sc, name)
		want := map[string]float64{IdleNoWork: 8, sched.WaitQuota: 6, IdleTooBig: 5}
		for cause, h := range r.IdleGPUHours {
			if math.Abs(h-want[cause]) > 0.05 {
				t.Errorf("%s: %q: %.3f GPU-hours idle, want %.0f", name, cause, h, want[cause])
			}
		}
		for cause, h := range want {
			if _, ok := r.IdleGPUHours[cause]; !ok {
				t.Errorf("%s: no idle GPU-hours for %q, want %.0f", name, cause, h)
			}
		}
		var idle float64
		for _, h := range r.IdleGPUHours {
			idle += h
		}
		if all := float64(r.GPUs) * sc.Duration.Hours(); math.Abs(idle+r.AllocatedUtilization*all-all) > 1e-6 {
			t.Errorf("%s: %.6f GPU-hours idle and %.6f allocated, want %.0f in all", name, idle, r.AllocatedUtilization*all, all)
		}
	}
}

// An owed episode ends when the team's other work takes the room, not at
// the next look: the fine-tune, owed from 1m and past the line at 1m +
// 60 s + grace, stops fitting when a's service starts at 4m. Both clocks
// charge it up to 4m and no further, whatever the cadence of the looks;
// the episode is one late owed wait of 3 minutes. Until 2026-12-03 it was
// charged up to the last look before 4m (nothing with looks 10 minutes
// apart), or, when the job was served before any look saw it stop
// fitting, up to its start.
func TestAnOwedEpisodeEndsWhenTheTeamsOtherWorkTakesTheRoom(t *testing.T) {
	sc := load(t, filepath.Join("testdata", "owedoutgrown.yaml"))
	for _, every := range []time.Duration{time.Minute, 10 * time.Minute} {
		r, w := runWorldWith(t, sc, Options{Scheduler: "partita", Seed: sc.Seed, Check: true, ReconfigDelay: 10 * time.Minute, CycleEvery: every})
		train, serve := w.byID["train-000000"], w.byID["serve-000000"]
		if train == nil || serve == nil || !serve.started || serve.Started != 4*time.Minute {
			t.Fatalf("cycles every %v: a's service was not placed on arrival: the scenario does not test the episode's end", every)
		}
		if !train.started || train.firstRun <= 4*time.Minute {
			t.Fatalf("cycles every %v: the fine-tune started at %v, want after 4m: the scenario does not test the episode's end", every, train.firstRun)
		}
		limit := time.Minute + w.sch.Config().Grace
		want := (3*time.Minute - limit).Seconds()
		if math.Abs(r.GuaranteeViolationOwed-want) > 1e-6 || math.Abs(r.GuaranteeViolation-want) > 1e-6 {
			t.Errorf("cycles every %v: clocks %.3f s (owed) and %.3f s (queueing), want %.3f s: from the line to the service's start", every, r.GuaranteeViolationOwed, r.GuaranteeViolation, want)
		}
		if r.OwedWaitsLate != 1 || !(math.Abs(val(r.OwedWaitMax)-180) <= 1e-6) {
			t.Errorf("cycles every %v: %d late owed waits, longest %.3f s; want one of 180 s", every, r.OwedWaitsLate, val(r.OwedWaitMax))
		}
		if n := sumValues(r.OwedLateJobs); n != 1 {
			t.Errorf("cycles every %v: owed_late_jobs %v, want one episode", every, r.OwedLateJobs)
		}
	}
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// A job evicted while its team borrowed, and back in the queue within its
// team's guarantee when its grace ends, is owed from that moment: it gets
// a full cycle then (cycleNow), not the next coalesced one (here up to 10
// min later), which would put its claim past 60 s + grace at once.
func TestAnOwedJobBackFromItsGraceStartsAtOnce(t *testing.T) {
	sc := load(t, filepath.Join("testdata", "owedback.yaml"))
	r, w := runWorldWith(t, sc, Options{Scheduler: "partita", Seed: sc.Seed, Check: true, Coalesce: 10 * time.Minute})
	if r.Preemptions != 1 {
		t.Fatalf("%d preemptions, want 1: the scenario does not test eviction", r.Preemptions)
	}
	back := 0
	for _, j := range w.jobs {
		if len(j.waits) < 2 {
			continue // not evicted
		}
		back++
		if !j.within {
			t.Fatalf("%s was beyond a's guarantee back in the queue: the scenario does not make it owed", j.ID())
		}
		if wait := j.waits[len(j.waits)-1]; wait != 0 {
			t.Errorf("%s waited %v back in the queue, owed with free GPUs; want 0", j.ID(), wait)
		}
	}
	if back != 1 {
		t.Fatalf("%d jobs went back to the queue, want 1", back)
	}
}
