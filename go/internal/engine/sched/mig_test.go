package sched

import (
	"reflect"
	"testing"
	"time"

	"partita.dev/partita/internal/gpu"
)

func layoutOf(t *testing.T, text string) gpu.Layout {
	t.Helper()
	l, err := gpu.ParseLayout(text)
	if err != nil {
		t.Fatalf("ParseLayout(%q): %v", text, err)
	}
	return l
}

func hasProfile(l gpu.Layout, profile string) bool {
	for _, p := range l {
		if p.Profile == profile {
			return true
		}
	}
	return false
}

func TestMemoryProfileTurnsMIGOnAndStartsOnTheNewInstance(t *testing.T) {
	// Two whole H100s. infer needs 8000 MiB (+10% headroom: a 1g.10gb);
	// under partita a memory profile takes a MIG instance, and there is
	// none: the scheduler turns MIG on on a GPU.
	st := fleet(t).nodes(1).gpus(2, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st))
	w.submit(job("infer").gpuMemory(8000, 0.1), job("infer-2").gpuMemory(8000, 0.1).submitted(time.Second))

	// Cycle 1: one Reconfig per job. The first GPU is cordoned in the
	// plan, so infer-2 does not land on infer's new instance and gets a
	// GPU of its own.
	d := w.cycle()
	if len(d.Starts) != 0 {
		t.Fatalf("cycle 1 started %v before any MIG instance exists", startedJobs(d))
	}
	if len(d.Reconfigs) != 2 {
		t.Fatalf("cycle 1: reconfigs %+v, want one per job", d.Reconfigs)
	}
	gpus := map[int]bool{}
	for i, rc := range d.Reconfigs {
		want := []string{"infer", "infer-2"}[i]
		if rc.For != want || rc.Node != "n1" || !rc.MIG || len(rc.Layout) != 1 || !hasProfile(rc.Layout, "1g.10gb") {
			t.Errorf("reconfig %d = %+v, want MIG on n1 with one 1g.10gb for %s", i, rc, want)
		}
		gpus[rc.GPU] = true
	}
	if len(gpus) != 2 {
		t.Errorf("both reconfigs change the same GPU: %+v", d.Reconfigs)
	}
	for _, id := range []string{"infer", "infer-2"} {
		if got := reasonOf(d, id); got != WaitReconfig {
			t.Errorf("cycle 1: %s waits %q, want %q", id, got, WaitReconfig)
		}
	}

	// Cycle 2: the change is still being applied (the GPUs are cordoned).
	d = w.at(10 * time.Second).cycle()
	if len(d.Starts) != 0 || len(d.Reconfigs) != 0 {
		t.Errorf("cycle 2, GPUs still cordoned: starts %v, reconfigs %+v; want none", startedJobs(d), d.Reconfigs)
	}
	if got := reasonOf(d, "infer"); got != WaitReconfig {
		t.Errorf("cycle 2: infer waits %q, want %q", got, WaitReconfig)
	}

	// Cycle 3: the world finished the change; both start on the new
	// instances, which exist now.
	d = w.at(30 * time.Second).uncordonAll().cycle()
	if got, want := startedJobs(d), []string{"infer", "infer-2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("cycle 3: started %v, want %v", got, want)
	}
	for _, s := range d.Starts {
		g := s.Assignment.Grants
		if len(g) != 1 || g[0].Slice == nil || g[0].Slice.Profile != "1g.10gb" || s.Creates {
			t.Errorf("start %+v: want the existing 1g.10gb instance (Creates false)", s)
		}
	}
}

func TestStartOnAMissingInstanceSaysCreates(t *testing.T) {
	// MIG is on with no instances: the placement creates one.
	st := fleet(t).nodes(1).gpus(1, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).submit(job("infer").migProfile("3g.40gb"))
	d := w.cycle()
	s := startsOf(d, "infer")
	if len(s) != 1 || !s[0].Creates {
		t.Errorf("starts %+v; want one start that creates its instance", s)
	}
	for _, rc := range d.Reconfigs {
		if rc.For == "infer" {
			t.Errorf("reconfig %+v for a job that fits as things are", rc)
		}
	}
}

func TestReconfigNeverDropsABusyInstance(t *testing.T) {
	// One GPU split 4g+3g; serve holds the 3g. A 2g.20gb fits only if the
	// free 4g goes: the new layout keeps the 3g where it is.
	st := fleet(t).nodes(1).gpus(1, "H100-80GB").layout("4g.40gb@0,3g.40gb@4").build()
	w := newWorld(t, st, newScheduler(t, "partita", st))
	w.runningSlice(job("serve").production().migProfile("3g.40gb"), "n1:0:3g.40gb@4")
	w.submit(job("small").migProfile("2g.20gb"))

	d := w.cycle() // the world fails the test if the layout drops serve's instance
	if len(d.Reconfigs) != 1 {
		t.Fatalf("reconfigs %+v, want one", d.Reconfigs)
	}
	rc := d.Reconfigs[0]
	want := layoutOf(t, "3g.40gb@4,2g.20gb@2")
	if !rc.MIG || !reflect.DeepEqual(rc.Layout, want) {
		t.Errorf("reconfig %+v, want layout %s", rc, want)
	}
	d = w.at(time.Minute).uncordonAll().cycle()
	if s := startsOf(d, "small"); len(s) != 1 || s[0].Assignment.Grants[0].Slice.String() != "2g.20gb@2" {
		t.Errorf("after the change small starts %+v, want on 2g.20gb@2", s)
	}
}

func TestAGPUChangesAtMostOncePerCooldown(t *testing.T) {
	st := fleet(t).nodes(1).gpus(1, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st))

	// t=0: first turns MIG on for a 2g.20gb; it starts and leaves, its
	// instance staying behind.
	w.submit(job("first").migProfile("2g.20gb"))
	if d := w.cycle(); len(d.Reconfigs) != 1 {
		t.Fatalf("t=0: reconfigs %+v, want one", d.Reconfigs)
	}
	if d := w.at(time.Minute).uncordonAll().cycle(); len(startsOf(d, "first")) != 1 {
		t.Fatalf("t=1m: first did not start: %q", reasonOf(d, "first"))
	}
	w.finish("first")

	// t=2m: whole needs the whole GPU as 7g, so the free 2g must go: not
	// before the cooldown ends at t=10m.
	w.at(2 * time.Minute).submit(job("whole").bestEffort().migProfile("7g.80gb").submitted(2 * time.Minute))
	for _, now := range []time.Duration{2 * time.Minute, 9*time.Minute + 59*time.Second} {
		d := w.at(now).cycle()
		if len(d.Reconfigs) != 0 {
			t.Errorf("t=%v: reconfigs %+v within the cooldown, want none", now, d.Reconfigs)
		}
		if got := reasonOf(d, "whole"); got != WaitNoSlice {
			t.Errorf("t=%v: whole waits %q, want %q", now, got, WaitNoSlice)
		}
	}
	d := w.at(10 * time.Minute).cycle()
	want := []Reconfig{{Node: "n1", GPU: 0, MIG: true, Layout: layoutOf(t, "7g.80gb@0"), For: "whole"}}
	if !reflect.DeepEqual(d.Reconfigs, want) {
		t.Errorf("t=10m: reconfigs %+v, want %+v", d.Reconfigs, want)
	}
}

func TestProductionOwedItsSliceWaitsAMinuteNotTheCooldown(t *testing.T) {
	// One H100 turned to MIG at t=0 for two 2g.20gb services; at t=1m
	// they start and the warm pool adds instances in the free space (the
	// GPU's last change). One service ends, and a 3g.40gb service comes:
	// the free region must be re-partitioned. Within its team's guarantee
	// it may be once a minute has passed since the last change
	// (ClaimCooldown); beyond the guarantee, or with no claim cooldown,
	// only once the GPU's ten have.
	for _, tc := range []struct {
		name      string
		guarantee int64
		claim     time.Duration
		at        time.Duration // when chat's change comes
	}{
		{"within its guarantee", 4, time.Minute, 2 * time.Minute},
		{"beyond its guarantee", 0, time.Minute, 11 * time.Minute},
		{"without a claim cooldown", 4, 0, 11 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := fleet(t).nodes(1).gpus(1, "H100-80GB").build()
			sch := newScheduler(t, "partita", st, func(c *Config) { c.ClaimCooldown = tc.claim })
			w := newWorld(t, st, sch, team("ads").guarantee(tc.guarantee).burst(8))
			w.submit(job("first").team("ads").production().migProfile("2g.20gb"), job("second").team("ads").production().migProfile("2g.20gb"))
			if d := w.cycle(); len(d.Reconfigs) != 1 {
				t.Fatalf("t=0: reconfigs %+v, want one", d.Reconfigs)
			}
			if d := w.at(time.Minute).uncordonAll().cycle(); len(startsOf(d, "first")) != 1 || len(startsOf(d, "second")) != 1 {
				t.Fatalf("t=1m: first %q, second %q, want both started", reasonOf(d, "first"), reasonOf(d, "second"))
			}
			w.uncordonAll().finish("first")

			w.at(90 * time.Second).submit(job("chat").team("ads").production().migProfile("3g.40gb").submitted(90 * time.Second))
			for _, now := range []time.Duration{90 * time.Second, tc.at - time.Second, tc.at} {
				d := w.at(now).cycle()
				want := now == tc.at
				if got := len(d.Reconfigs) == 1 && d.Reconfigs[0].For == "chat"; got != want || len(d.Reconfigs) > 1 {
					t.Errorf("t=%v: reconfigs %+v (chat waits %q), want a change for chat: %v", now, d.Reconfigs, reasonOf(d, "chat"), want)
				}
			}
		})
	}
}

func TestWholeGPUDemandTurnsIdleMIGGPUsOff(t *testing.T) {
	// n1: 4 MIG GPUs, all idle. n2: GPU 0 MIG and idle, GPUs 1-3 whole and
	// busy. A 1-GPU task turns MIG off where there are fewest MIG GPUs: n2.
	st := fleet(t).nodes(2).gpus(4, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).migOff("n2", 1, 2, 3)
	w.running(job("serve").production().gpus(3), 0, 0, "n2:1,2,3")
	w.submit(job("train").gpus(1))

	d := w.cycle()
	want := []Reconfig{{Node: "n2", GPU: 0, MIG: false, For: "train"}}
	if !reflect.DeepEqual(d.Reconfigs, want) {
		t.Fatalf("reconfigs %+v, want %+v", d.Reconfigs, want)
	}
	if got := reasonOf(d, "train"); got != WaitReconfig {
		t.Errorf("train waits %q, want %q", got, WaitReconfig)
	}
	d = w.at(time.Minute).uncordonAll().cycle()
	s := startsOf(d, "train")
	if len(s) != 1 || s[0].Assignment.Node != "n2" || s[0].Assignment.Grants[0].GPU != 0 {
		t.Errorf("train starts %+v, want on n2 GPU 0", s)
	}
}

func TestWholeGPUDemandTurnsOffOnlyAsManyAsItLacks(t *testing.T) {
	// n1 has one whole GPU free; a 1-GPU job needs no change, a 3-GPU job
	// two more GPUs on n1.
	st := fleet(t).nodes(1).gpus(4, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).migOff("n1", 0)
	w.submit(job("train").gpus(3))
	d := w.cycle()
	if len(d.Reconfigs) != 2 {
		t.Fatalf("reconfigs %+v, want two", d.Reconfigs)
	}
	for _, rc := range d.Reconfigs {
		if rc.MIG || rc.Node != "n1" || rc.GPU == 0 {
			t.Errorf("reconfig %+v, want MIG off on an idle MIG GPU of n1", rc)
		}
	}
	d = w.at(time.Minute).uncordonAll().cycle()
	if len(startsOf(d, "train")) != 1 {
		t.Errorf("after the change train waits %q", reasonOf(d, "train"))
	}
}

func TestWholeGPUTaskGetsItsGPUsOnOneNode(t *testing.T) {
	// n1: 4 idle MIG GPUs. n2: GPU 0 idle MIG, GPUs 1-3 whole and busy.
	st := fleet(t).nodes(2).gpus(4, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).migOff("n2", 1, 2, 3)
	w.running(job("serve").production().gpus(3), 0, 0, "n2:1,2,3")
	w.submit(job("train").gpus(2))
	for minute := 0; minute <= 30; minute++ {
		d := w.at(time.Duration(minute) * time.Minute).cycle()
		if len(startsOf(d, "train")) > 0 {
			return
		}
		w.uncordonAll()
	}
	t.Errorf("train (2 GPUs) never started in 30 minutes; n1 had 4 idle MIG GPUs to turn off")
}

func TestReconfigBacksOffAfterTwoUnhelpfulChanges(t *testing.T) {
	// Three whole GPUs. scavenge (best-effort) needs a 7g.80gb; each time
	// a GPU is turned to MIG for it, a batch job that arrives meanwhile
	// takes it. After the second change scavenge backs off for the
	// cooldown, though the third GPU is idle and never changed.
	st := fleet(t).nodes(1).gpus(3, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st))
	w.submit(job("scavenge").bestEffort().migProfile("7g.80gb"))

	gpuOf := func(d Decision) []int {
		var out []int
		for _, rc := range d.Reconfigs {
			if rc.For == "scavenge" {
				out = append(out, rc.GPU)
			}
		}
		return out
	}
	if got := gpuOf(w.cycle()); !reflect.DeepEqual(got, []int{0}) {
		t.Fatalf("t=0: reconfigs for scavenge on GPUs %v, want [0]", got)
	}
	w.at(time.Minute).uncordonAll().submit(job("serve-1").migProfile("7g.80gb").submitted(time.Minute))
	d := w.cycle()
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"serve-1"}) {
		t.Fatalf("t=1m: started %v, want [serve-1]", got)
	}
	if got := gpuOf(d); !reflect.DeepEqual(got, []int{1}) {
		t.Fatalf("t=1m: reconfigs for scavenge on GPUs %v, want [1]", got)
	}
	w.at(2 * time.Minute).uncordonAll().submit(job("serve-2").migProfile("7g.80gb").submitted(2 * time.Minute))
	d = w.cycle()
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"serve-2"}) {
		t.Fatalf("t=2m: started %v, want [serve-2]", got)
	}
	if got := gpuOf(d); len(got) != 0 {
		t.Errorf("t=2m: reconfigs for scavenge on GPUs %v during its backoff, want none", got)
	}
	if got := reasonOf(d, "scavenge"); got != WaitNoSlice {
		t.Errorf("t=2m: scavenge waits %q, want %q", got, WaitNoSlice)
	}
	// The backoff ends a cooldown after the second change (t=1m).
	if got := gpuOf(w.at(10*time.Minute + 59*time.Second).cycle()); len(got) != 0 {
		t.Errorf("t=10m59s: reconfigs for scavenge on GPUs %v, want none yet", got)
	}
	if got := gpuOf(w.at(11 * time.Minute).cycle()); !reflect.DeepEqual(got, []int{2}) {
		t.Errorf("t=11m: reconfigs for scavenge on GPUs %v, want [2]", got)
	}
}

func TestNoMIGChangesWithoutDynamicMIG(t *testing.T) {
	// gang-drf runs whole GPUs: a MIG task with no instance waits, and no
	// GPU is changed.
	st := fleet(t).nodes(1).gpus(2, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "gang-drf", st)).submit(job("infer").migProfile("1g.10gb"), job("train").gpus(1))
	d := w.cycle()
	if len(d.Reconfigs) != 0 || len(d.Starts) != 0 {
		t.Errorf("reconfigs %+v, starts %v; want none", d.Reconfigs, startedJobs(d))
	}
	if got := reasonOf(d, "infer"); got != WaitNoSlice {
		t.Errorf("infer waits %q, want %q", got, WaitNoSlice)
	}
	if got := reasonOf(d, "train"); got != WaitNoRoom {
		t.Errorf("train waits %q, want %q", got, WaitNoRoom)
	}
}

func TestReplicasNeedingInstancesShareOneReconfig(t *testing.T) {
	// One whole H100 and a service of three replicas that each need a
	// 1g.10gb: one change makes all three instances, and the replicas
	// then start on them without creating any.
	st := fleet(t).nodes(1).gpus(1, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st))
	w.submit(job("svc").replicas(3).gpuMemory(8000, 0.1))

	d := w.cycle()
	if len(d.Reconfigs) != 1 {
		t.Fatalf("cycle 1: reconfigs %+v, want one for the three replicas", d.Reconfigs)
	}
	n := 0
	for _, p := range d.Reconfigs[0].Layout {
		if p.Profile == "1g.10gb" {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("the change makes %d 1g.10gb instances (%v), want 3", n, d.Reconfigs[0].Layout)
	}
	d = w.at(30 * time.Second).uncordonAll().cycle()
	starts := startsOf(d, "svc")
	if len(starts) != 3 {
		t.Fatalf("cycle 2: %d replicas started, want 3", len(starts))
	}
	for _, s := range starts {
		if s.Creates {
			t.Errorf("replica %d creates its instance at start; the change made it", s.Task)
		}
	}
}

// changeForSvc: n1's MIG GPU is being changed for someone else, so svc's
// 3g.40gb gets n2's idle GPU turned to MIG (the decision returned); then
// n1's change ends, and n2's is still being applied.
func changeForSvc(t *testing.T) (*world, Decision) {
	t.Helper()
	st := fleet(t).nodes(2).gpus(1, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st), team("a").guarantee(2).burst(2)).at(hour)
	w.migOff("n2", 0)
	if err := w.st.Cordon("n1", 0, true); err != nil {
		t.Fatal(err)
	}
	w.submit(job("svc").team("a").production().migProfile("3g.40gb").submitted(hour))
	d := w.cycle()
	if err := w.st.Cordon("n1", 0, false); err != nil {
		t.Fatal(err)
	}
	return w, d
}

func TestAJobWaitsForTheChangeMadeForItRatherThanCreateAnInstanceElsewhere(t *testing.T) {
	// n1's MIG GPU is being changed for someone else, so svc's 3g.40gb
	// gets n2's idle GPU turned to MIG. n1's change ends first: svc could
	// now create an instance there, which takes as long as n2's change
	// still has to run, and would leave that change unused.
	w, d := changeForSvc(t)
	if len(d.Reconfigs) != 1 || d.Reconfigs[0].Node != "n2" || !d.Reconfigs[0].MIG {
		t.Fatalf("reconfigs %+v, want n2's GPU turned to MIG for svc; svc waits %q", d.Reconfigs, reasonOf(d, "svc"))
	}
	d = w.at(hour + 10*time.Second).cycle()
	if got := startsOf(d, "svc"); len(got) != 0 {
		t.Fatalf("svc started %+v while the change made for it is under way", got)
	}
	if got := reasonOf(d, "svc"); got != WaitReconfig {
		t.Errorf("svc waits %q, want %q", got, WaitReconfig)
	}
	d = w.at(hour + 30*time.Second).uncordonAll().cycle()
	if got := startsOf(d, "svc"); len(got) != 1 || got[0].Assignment.Node != "n2" || got[0].Creates {
		t.Fatalf("svc starts %+v, want one on n2's new instance", got)
	}
}

func TestAJobStopsWaitingForAChangeThatDoesNotEnd(t *testing.T) {
	// As above, but n2's change never ends (on Kubernetes a failed change
	// keeps its node cordoned): after changeWait svc takes n1's room.
	w, d := changeForSvc(t)
	if len(d.Reconfigs) != 1 || d.Reconfigs[0].Node != "n2" {
		t.Fatalf("reconfigs %+v, want n2's GPU turned to MIG for svc", d.Reconfigs)
	}
	d = w.at(hour + changeWait).cycle()
	if got := startsOf(d, "svc"); len(got) != 1 || got[0].Assignment.Node != "n1" {
		t.Fatalf("svc starts %+v, want one on n1 once n2's change has run %v; svc waits %q", got, changeWait, reasonOf(d, "svc"))
	}
}

func TestIdleMIGGPUsTurnWholeDuringTheVictimsGrace(t *testing.T) {
	// n1's GPUs 0 and 1 are whole and held by b, which borrows; 2 and 3
	// are MIG and idle. a is owed the whole node. It evicts b's job, and
	// while the job is in its grace the two MIG GPUs are turned whole, so
	// that a starts when the grace ends, not a change later.
	st := fleet(t).nodes(1).gpus(4, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(4).burst(4), team("b").burst(8)).at(hour)
	w.migOff("n1", 0, 1)
	w.running(job("b-job").team("b").gpus(2), 0, hour, "n1:0,1")
	w.submit(job("a-job").team("a").gpus(4).submitted(hour))

	if got := victimsOf(w.cycle()); !reflect.DeepEqual(got, []string{"b-job"}) {
		t.Fatalf("cycle 1: victims %v, want [b-job]", got)
	}
	d := w.at(hour + 5*time.Second).cycle()
	var turned []int
	for _, rc := range d.Reconfigs {
		if rc.Node == "n1" && !rc.MIG && rc.For == "a-job" {
			turned = append(turned, rc.GPU)
		}
	}
	if !reflect.DeepEqual(turned, []int{2, 3}) {
		t.Fatalf("during the grace: GPUs turned whole %v (reconfigs %+v), want [2 3]", turned, d.Reconfigs)
	}
	d = w.at(hour + 35*time.Second).uncordonAll().release().cycle()
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"a-job"}) {
		t.Errorf("when the grace ends: started %v, want [a-job]; a-job waits %q", got, reasonOf(d, "a-job"))
	}
}

func TestAClaimBackedOffFromChangesStillTurnsWholeTheGPUsItsVictimsLeft(t *testing.T) {
	// n1's two MIG GPUs each hold a 7g.80gb instance of b's borrowed
	// work. a's 2-GPU gang is owed them, but its MIG changes are backed
	// off (two earlier ones did not let it start). It evicts b's jobs;
	// when they have left, their GPUs must still be turned whole for it,
	// or b's jobs take their instances back and the eviction starts over.
	st := fleet(t).nodes(1).gpus(2, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(2).burst(2), team("b").burst(8)).at(hour)
	w.runningSlice(job("b-1").team("b").migProfile("7g.80gb"), "n1:0:7g.80gb@0")
	w.runningSlice(job("b-2").team("b").migProfile("7g.80gb"), "n1:1:7g.80gb@0")
	w.submit(job("a-gang").team("a").gang(2).gpus(1).submitted(hour))
	w.sch.backoff["a-gang"] = hour + 10*time.Minute

	if got := victimsOf(w.cycle()); !reflect.DeepEqual(got, []string{"b-1", "b-2"}) {
		t.Fatalf("cycle 1: victims %v, want [b-1 b-2]", got)
	}
	d := w.at(hour + 30*time.Second).release().cycle()
	var turned []int
	for _, rc := range d.Reconfigs {
		if !rc.MIG && rc.For == "a-gang" {
			turned = append(turned, rc.GPU)
		}
	}
	if !reflect.DeepEqual(turned, []int{0, 1}) {
		t.Fatalf("when the victims have left: GPUs turned whole %v, want [0 1]; a-gang waits %q; started %v",
			turned, reasonOf(d, "a-gang"), startedJobs(d))
	}
	d = w.at(hour + time.Minute).uncordonAll().cycle()
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"a-gang"}) {
		t.Errorf("after the change: started %v, want [a-gang]; a-gang waits %q", got, reasonOf(d, "a-gang"))
	}
}

func TestAJobDoesNotWaitForAChangeAskedForAnotherOnTheGPUItsOwnChanged(t *testing.T) {
	// n1: GPU 0 MIG and idle, GPU 1 whole, held by ads' borrowed
	// experiment. research's train (1 GPU, within research's guarantee)
	// gets GPU 0 turned whole. Before it is considered again, search's
	// service takes that GPU back to MIG. train must not read that
	// change as its own: it is owed, and reclaims GPU 1 instead.
	st := fleet(t).nodes(1).gpus(2, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("research").guarantee(1).burst(2), team("search").guarantee(1).burst(2), team("ads").guarantee(0).burst(2)).migOff("n1", 1)
	w.running(job("borrower").team("ads").bestEffort().gpus(1), 0, 0, "n1:1")
	w.submit(job("train").team("research").bestEffort().gpus(1))

	d := w.cycle()
	want := []Reconfig{{Node: "n1", GPU: 0, MIG: false, For: "train"}}
	if !reflect.DeepEqual(d.Reconfigs, want) {
		t.Fatalf("cycle 1: reconfigs %+v, want %+v; train waits %q", d.Reconfigs, want, reasonOf(d, "train"))
	}

	// The change ends; a light cycle for the service alone turns the
	// idle GPU back to MIG for it.
	w.at(time.Hour).uncordonAll().submit(job("infer").team("search").production().gpuMemory(8000, 0.1).submitted(time.Hour))
	d = w.light("infer")
	if len(d.Reconfigs) != 1 || d.Reconfigs[0].GPU != 0 || !d.Reconfigs[0].MIG || d.Reconfigs[0].For != "infer" {
		t.Fatalf("light cycle: reconfigs %+v, want GPU 0 turned to MIG for infer", d.Reconfigs)
	}

	d = w.at(time.Hour + 5*time.Second).cycle()
	if got := reasonOf(d, "train"); got == WaitReconfig {
		t.Fatalf("train waits %q for infer's change", got)
	}
	if got := victimsOf(d); !reflect.DeepEqual(got, []string{"borrower"}) {
		t.Errorf("victims %v, want [borrower]; train waits %q", got, reasonOf(d, "train"))
	}
}
