package sched

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

const hour = time.Hour

func TestProductionPreemptsBestEffortOfItsTeam(t *testing.T) {
	for _, preset := range []string{"partita", "gang-drf"} {
		t.Run(preset, func(t *testing.T) {
			st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
			w := newWorld(t, st, newScheduler(t, preset, st)).at(hour)
			w.running(job("scavenge").team("a").bestEffort().gpus(8), 0, 0, "n1:0,1,2,3,4,5,6,7")
			w.submit(job("serve").team("a").production().gpus(4).submitted(hour))

			d := w.decide()
			want := []Preemption{{Job: "scavenge", For: "serve", Reason: "preempted for serve (production, team a)", Grace: 30 * time.Second}}
			if !reflect.DeepEqual(d.Preemptions, want) {
				t.Errorf("preemptions = %+v, want %+v", d.Preemptions, want)
			}
			if len(d.Starts) != 0 {
				t.Errorf("started %v while the victim still holds the GPUs", startedJobs(d))
			}
			if got := reasonOf(d, "serve"); got != WaitPreempting {
				t.Errorf("serve waits %q, want %q", got, WaitPreempting)
			}
		})
	}
}

func TestNoPreemptionWithoutAHigherClass(t *testing.T) {
	tests := []struct {
		name    string
		preset  string
		victim  *jobBuilder
		pending *jobBuilder
	}{
		{"batch does not evict batch of its team", "partita", job("old").team("a").gpus(8), job("new").team("a").gpus(4)},
		{"production does not evict production", "partita", job("old").team("a").production().gpus(8), job("new").team("a").production().gpus(4)},
		{"best-effort evicts no one", "partita", job("old").team("a").bestEffort().gpus(8), job("new").team("a").bestEffort().gpus(4)},
		{"naive never preempts", "naive", job("old").team("a").bestEffort().gpus(8), job("new").team("a").production().gpus(4)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
			w := newWorld(t, st, newScheduler(t, tc.preset, st)).at(hour)
			w.running(tc.victim, 0, 0, "n1:0,1,2,3,4,5,6,7")
			w.submit(tc.pending)
			d := w.decide()
			if len(d.Preemptions) != 0 {
				t.Errorf("preemptions = %+v, want none", d.Preemptions)
			}
			if got := reasonOf(d, "new"); got != WaitNoRoom {
				t.Errorf("new waits %q, want %q", got, WaitNoRoom)
			}
		})
	}
}

// victimCase is a cluster of small nodes, each full, and one production
// task of one GPU that needs one victim: which one is chosen.
type victimCase struct {
	name    string
	nodes   int // nodes of gpusPer GPUs
	gpusPer int
	teams   []*teamBuilder
	run     func(w *world)
	want    string
}

func TestVictimChoiceOrder(t *testing.T) {
	now := hour
	tests := []victimCase{
		{
			name: "borrowed capacity goes before a lower class",
			// b holds its guarantee with best-effort work; c borrows with
			// batch work. The preemptor's team is within its guarantee, so
			// both are eligible.
			nodes: 2, gpusPer: 1,
			teams: []*teamBuilder{team("a").guarantee(1).burst(1), team("b").guarantee(1).burst(8), team("c").burst(8)},
			run: func(w *world) {
				w.running(job("b-best-effort").team("b").bestEffort(), 0, 0, "n1:0")
				w.running(job("c-borrowed-batch").team("c"), 0, 0, "n2:0")
			},
			want: "c-borrowed-batch",
		},
		{
			name:  "the lowest class goes before the most recent checkpoint",
			nodes: 2, gpusPer: 1,
			run: func(w *world) {
				w.running(job("batch-fresh").team("a"), 0, now-time.Minute, "n1:0")
				w.running(job("best-effort-stale").team("a").bestEffort(), 0, now-50*time.Minute, "n2:0")
			},
			want: "best-effort-stale",
		},
		{
			name:  "the most recent checkpoint goes before the fewest GPUs",
			nodes: 2, gpusPer: 2,
			run: func(w *world) {
				w.running(job("one-gpu-stale").team("a").bestEffort(), 0, now-30*time.Minute, "n1:0")
				w.running(job("keeper").team("a").production(), 0, 0, "n1:1")
				w.running(job("two-gpus-fresh").team("a").bestEffort().gpus(2), 0, now-time.Minute, "n2:0,1")
			},
			want: "two-gpus-fresh",
		},
		{
			name:  "the fewest GPUs go before the ID",
			nodes: 2, gpusPer: 2,
			run: func(w *world) {
				w.running(job("a-two-gpus").team("a").bestEffort().gpus(2), 0, 0, "n1:0,1")
				w.running(job("b-one-gpu").team("a").bestEffort(), 0, 0, "n2:0")
				w.running(job("keeper").team("a").production(), 0, 0, "n2:1")
			},
			want: "b-one-gpu",
		},
		{
			name:  "equal candidates go by ID",
			nodes: 2, gpusPer: 1,
			run: func(w *world) {
				w.running(job("b-job").team("a").bestEffort(), 0, 0, "n1:0")
				w.running(job("a-job").team("a").bestEffort(), 0, 0, "n2:0")
			},
			want: "a-job",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := fleet(t).nodes(tc.nodes).gpus(tc.gpusPer, "H100-80GB").build()
			w := newWorld(t, st, newScheduler(t, "partita", st), tc.teams...).at(now)
			tc.run(w)
			w.submit(job("serve").team("a").production().submitted(now))
			d := w.decide()
			if got := victimsOf(d); !reflect.DeepEqual(got, []string{tc.want}) {
				t.Errorf("victims = %v, want [%s]", got, tc.want)
			}
		})
	}
}

func TestVictimSearchGivesBackVictimsNotNeeded(t *testing.T) {
	// One node of 3 GPUs: fresh (1 GPU, checkpointed a minute ago) comes
	// first in victim order, stale (2 GPUs) second. A gang of two 1-GPU
	// tasks fits only once stale goes, and then fits without evicting
	// fresh too.
	st := fleet(t).nodes(1).gpus(3, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).at(hour)
	w.running(job("fresh").team("a").bestEffort(), 0, hour-time.Minute, "n1:0")
	w.running(job("stale").team("a").bestEffort().gpus(2), 0, hour-30*time.Minute, "n1:1,2")
	w.submit(job("serve").team("a").production().gang(2).gpus(1).submitted(hour))
	d := w.decide()
	if got := victimsOf(d); !reflect.DeepEqual(got, []string{"stale"}) {
		t.Errorf("victims = %v, want [stale]", got)
	}
}

func TestVictimSearchPicksTheNodeNeedingFewestVictims(t *testing.T) {
	// n1 holds two one-GPU jobs that come first in victim order; n2 one
	// two-GPU job. A two-GPU task needs both of n1's or n2's one.
	st := fleet(t).nodes(2).gpus(2, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).at(hour)
	w.running(job("small-1").team("a").bestEffort(), 0, hour, "n1:0")
	w.running(job("small-2").team("a").bestEffort(), 0, hour, "n1:1")
	w.running(job("big").team("a").bestEffort().gpus(2), 0, 0, "n2:0,1")
	w.submit(job("serve").team("a").production().gpus(2).submitted(hour))
	d := w.decide()
	if got := victimsOf(d); !reflect.DeepEqual(got, []string{"big"}) {
		t.Errorf("victims = %v, want [big]", got)
	}
}

func TestReclaim(t *testing.T) {
	// One node of 4 GPUs, full; team a asks for 2.
	tests := []struct {
		name    string
		teams   []*teamBuilder
		run     func(w *world)
		pending *jobBuilder
		victims []string
		reason  string   // in the preemption's Reason
		only    []string // the presets the case is for (nil: partita and gang-drf)
	}{
		{
			name:    "a team within its guarantee evicts a borrowing team's job of the same class",
			teams:   []*teamBuilder{team("a").guarantee(4).burst(4), team("b").burst(8)},
			run:     func(w *world) { w.running(job("b-job").team("b").gpus(4), 0, 0, "n1:0,1,2,3") },
			pending: job("a-job").team("a").gpus(2),
			victims: []string{"b-job"},
			reason:  "team a reclaims its guarantee for a-job",
		},
		{
			name:    "a team within its guarantee evicts a borrower's production work",
			teams:   []*teamBuilder{team("a").guarantee(4).burst(4), team("b").burst(8)},
			run:     func(w *world) { w.running(job("b-serve").team("b").production().gpus(4), 0, 0, "n1:0,1,2,3") },
			pending: job("a-job").team("a").gpus(2),
			victims: []string{"b-serve"},
			reason:  "team a reclaims its guarantee",
		},
		{
			// b-job is 1 GPU over b's guarantee and 3 under: without it
			// going, what b borrows could never be taken back.
			name:    "reclaim takes a job that straddles its team's guarantee when nothing else makes room",
			teams:   []*teamBuilder{team("a").guarantee(4).burst(4), team("b").guarantee(3).burst(8)},
			run:     func(w *world) { w.running(job("b-job").team("b").gpus(4), 0, 0, "n1:0,1,2,3") },
			pending: job("a-job").team("a").gpus(2),
			victims: []string{"b-job"},
			reason:  "team a reclaims its guarantee for a-job",
		},
		{
			name:  "reclaim takes a job that keeps its team at its guarantee before one that straddles it",
			teams: []*teamBuilder{team("a").guarantee(4).burst(4), team("b").guarantee(3).burst(8)},
			run: func(w *world) {
				w.running(job("b-big").team("b").bestEffort().gpus(3), 0, 0, "n1:0,1,2")
				w.running(job("b-1").team("b").gpus(1), 0, 0, "n1:3")
			},
			pending: job("a-job").team("a").gpus(1),
			victims: []string{"b-1"},
			reason:  "team a reclaims its guarantee for a-job",
		},
		{
			name:    "reclaim never takes production below its team's guarantee",
			teams:   []*teamBuilder{team("a").guarantee(4).burst(4), team("b").guarantee(3).burst(8)},
			run:     func(w *world) { w.running(job("b-serve").team("b").production().gpus(4), 0, 0, "n1:0,1,2,3") },
			pending: job("a-job").team("a").gpus(2),
		},
		{
			// ProtectProduction spares production on MIG instances only
			// (TestBestEffortDoesNotEvictProductionOnMIG).
			name:    "best-effort work reclaims from production on whole GPUs",
			teams:   []*teamBuilder{team("a").guarantee(4).burst(4), team("b").burst(8)},
			run:     func(w *world) { w.running(job("b-serve").team("b").production().gpus(4), 0, 0, "n1:0,1,2,3") },
			pending: job("a-job").team("a").bestEffort().gpus(2),
			victims: []string{"b-serve"},
			reason:  "team a reclaims its guarantee for a-job",
			only:    []string{"partita"},
		},
		{
			name:    "without ProtectProduction, best-effort work reclaims from production",
			teams:   []*teamBuilder{team("a").guarantee(4).burst(4), team("b").burst(8)},
			run:     func(w *world) { w.running(job("b-serve").team("b").production().gpus(4), 0, 0, "n1:0,1,2,3") },
			pending: job("a-job").team("a").bestEffort().gpus(2),
			victims: []string{"b-serve"},
			reason:  "team a reclaims its guarantee for a-job",
			only:    []string{"gang-drf"},
		},
		{
			name:  "a borrowing team loses only jobs it holds beyond its guarantee",
			teams: []*teamBuilder{team("a").guarantee(4).burst(4), team("b").guarantee(2).burst(8)},
			run: func(w *world) {
				w.running(job("b-1").team("b").gpus(2), 0, 0, "n1:0,1")
				w.running(job("b-2").team("b").gpus(2), 0, 0, "n1:2,3")
			},
			pending: job("a-job").team("a").gpus(2),
			victims: []string{"b-1"},
		},
		{
			name:    "a team beyond its guarantee does not reclaim",
			teams:   []*teamBuilder{team("a").guarantee(1).burst(4), team("b").burst(8)},
			run:     func(w *world) { w.running(job("b-job").team("b").gpus(4), 0, 0, "n1:0,1,2,3") },
			pending: job("a-job").team("a").gpus(2),
		},
		{
			name:    "production beyond its team's guarantee does not evict another team's guaranteed batch work",
			teams:   []*teamBuilder{team("a").burst(8), team("b").guarantee(4).burst(8)},
			run:     func(w *world) { w.running(job("b-job").team("b").gpus(4), 0, 0, "n1:0,1,2,3") },
			pending: job("a-serve").team("a").production().gpus(2),
		},
		{
			name:    "production within its team's guarantee evicts another team's guaranteed batch work",
			teams:   []*teamBuilder{team("a").guarantee(2).burst(8), team("b").guarantee(4).burst(8)},
			run:     func(w *world) { w.running(job("b-job").team("b").gpus(4), 0, 0, "n1:0,1,2,3") },
			pending: job("a-serve").team("a").production().gpus(2),
			victims: []string{"b-job"},
			reason:  "preempted for a-serve (production, team a)",
		},
		{
			name:    "production of a team without a Team entry does not evict another team",
			teams:   []*teamBuilder{team("b").guarantee(4).burst(8)},
			run:     func(w *world) { w.running(job("b-job").team("b").bestEffort().gpus(4), 0, 0, "n1:0,1,2,3") },
			pending: job("a-serve").team("a").production().gpus(2),
		},
	}
	for _, tc := range tests {
		for _, preset := range []string{"partita", "gang-drf"} {
			if tc.only != nil && !slices.Contains(tc.only, preset) {
				continue
			}
			t.Run(preset+"/"+tc.name, func(t *testing.T) {
				st := fleet(t).nodes(1).gpus(4, "H100-80GB").build()
				w := newWorld(t, st, newScheduler(t, preset, st), tc.teams...).at(hour)
				tc.run(w)
				w.submit(tc.pending.submitted(hour))
				id := tc.pending.spec.ID
				d := w.decide()
				if got := victimsOf(d); !reflect.DeepEqual(got, tc.victims) {
					t.Fatalf("victims = %v, want %v", got, tc.victims)
				}
				if len(tc.victims) == 0 {
					if got := reasonOf(d, id); got != WaitNoRoom {
						t.Errorf("%s waits %q, want %q", id, got, WaitNoRoom)
					}
					return
				}
				if got := reasonOf(d, id); got != WaitPreempting {
					t.Errorf("%s waits %q, want %q", id, got, WaitPreempting)
				}
				if !strings.Contains(d.Preemptions[0].Reason, tc.reason) {
					t.Errorf("preemption reason %q, want it to contain %q", d.Preemptions[0].Reason, tc.reason)
				}
			})
		}
	}
}

func TestPromisedNodesAreHeldUntilThePreemptorStarts(t *testing.T) {
	// n1 has 8 GPUs; scavenge holds 6. serve (production, 8 GPUs) preempts
	// it. The 2 free GPUs and then scavenge's 6 stay serve's: train (batch,
	// 2 GPUs) and late (best-effort, arrives during the grace) must not
	// take them.
	st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).at(hour)
	w.running(job("scavenge").team("a").bestEffort().gpus(6), 0, 0, "n1:0,1,2,3,4,5")
	w.submit(job("serve").team("a").production().gpus(8).submitted(hour), job("train").team("a").gpus(2).submitted(hour))

	// Cycle 1: the preemption; train may not take the 2 free GPUs.
	d := w.cycle()
	if got := victimsOf(d); !reflect.DeepEqual(got, []string{"scavenge"}) {
		t.Fatalf("cycle 1: victims = %v, want [scavenge]", got)
	}
	if len(d.Starts) != 0 {
		t.Errorf("cycle 1: started %v on the node promised to serve", startedJobs(d))
	}
	if got := reasonOf(d, "train"); got != WaitNoRoom {
		t.Errorf("cycle 1: train waits %q, want %q", got, WaitNoRoom)
	}

	// During the grace period: a light cycle for a newcomer, then a full one.
	w.at(hour + 10*time.Second).submit(job("late").team("a").bestEffort().submitted(hour + 10*time.Second))
	d = w.light("late")
	if len(d.Starts) != 0 || len(d.Preemptions) != 0 {
		t.Errorf("light cycle during the grace: starts %v, preemptions %v; want none", startedJobs(d), victimsOf(d))
	}
	d = w.cycle()
	if len(d.Starts) != 0 || len(d.Preemptions) != 0 {
		t.Errorf("full cycle during the grace: starts %v, preemptions %v; want none", startedJobs(d), victimsOf(d))
	}
	if got := reasonOf(d, "serve"); got != WaitPreempting {
		t.Errorf("during the grace serve waits %q, want %q", got, WaitPreempting)
	}

	// The grace ends: the world releases scavenge. A light cycle for late
	// comes first; the nodes stay held.
	w.at(hour + 30*time.Second).release()
	d = w.light("late")
	if len(d.Starts) != 0 {
		t.Errorf("light cycle after the release started %v on the node promised to serve", startedJobs(d))
	}

	// The next full cycle starts serve on n1.
	d = w.cycle()
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"serve"}) {
		t.Fatalf("after the release: started %v, want [serve]", got)
	}
	if got := nodesOf(d.Starts); !reflect.DeepEqual(got, []string{"n1"}) {
		t.Errorf("serve started on %v, want [n1]", got)
	}
	if w.job("serve").Phase != Running {
		t.Errorf("serve is %v, want running", w.job("serve").Phase)
	}
}

func TestNoSecondPreemptionWhileVictimsTerminate(t *testing.T) {
	// Two best-effort jobs fill two nodes. serve takes fresh's node; while
	// fresh terminates serve waits rather than evict stale too.
	st := fleet(t).nodes(2).gpus(4, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).at(hour)
	w.running(job("fresh").team("a").bestEffort().gpus(4), 0, hour-time.Minute, "n1:0,1,2,3")
	w.running(job("stale").team("a").bestEffort().gpus(4), 0, hour-30*time.Minute, "n2:0,1,2,3")
	w.submit(job("serve").team("a").production().gpus(4).submitted(hour))

	d := w.cycle()
	if got := victimsOf(d); !reflect.DeepEqual(got, []string{"fresh"}) {
		t.Fatalf("cycle 1: victims = %v, want [fresh]", got)
	}
	for i := 1; i <= 3; i++ {
		d = w.at(hour + time.Duration(i)*10*time.Second).cycle()
		if len(d.Preemptions) != 0 {
			t.Errorf("cycle %d during the grace: preemptions %v, want none", i+1, victimsOf(d))
		}
		if got := d.Waiting["serve"]; got != (Wait{Position: 1, Reason: WaitPreempting}) {
			t.Errorf("cycle %d: serve waits %+v, want position 1, %q", i+1, got, WaitPreempting)
		}
	}
	d = w.release().cycle()
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"serve"}) {
		t.Errorf("after the release: started %v, want [serve]", got)
	}
	if w.job("stale").Phase != Running {
		t.Errorf("stale is %v, want still running", w.job("stale").Phase)
	}
}

func TestPreemptionRespectsMaxSearches(t *testing.T) {
	// Six production jobs of different shapes, each needing a victim of
	// its own: only maxSearches of them search in one cycle.
	st := fleet(t).nodes(6).gpus(8, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).at(hour)
	for i := 1; i <= 6; i++ {
		w.running(job("victim-"+itoa(i)).team("a").bestEffort().gpus(8), 0, 0, "n"+itoa(i)+":0,1,2,3,4,5,6,7")
		w.submit(job("serve-" + itoa(i)).team("a").production().gpus(i).submitted(time.Duration(i)))
	}
	d := w.decide()
	if got := len(d.Preemptions); got != maxSearches {
		t.Errorf("%d preemptions in one cycle, want maxSearches = %d", got, maxSearches)
	}
}

func TestPromisedNodesAreFreedWhenThePreemptorLeaves(t *testing.T) {
	st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).at(hour)
	w.running(job("scavenge").team("a").bestEffort().gpus(6), 0, 0, "n1:0,1,2,3,4,5")
	w.submit(job("serve").team("a").production().gpus(8).submitted(hour))
	if d := w.cycle(); !reflect.DeepEqual(victimsOf(d), []string{"scavenge"}) {
		t.Fatalf("victims = %v, want [scavenge]", victimsOf(d))
	}
	// The grace ends; a light cycle for a newcomer settles the promise;
	// then serve is cancelled before it is considered again.
	w.at(hour + 30*time.Second).release()
	w.submit(job("late").team("a").bestEffort().submitted(hour + 30*time.Second))
	w.light("late")
	w.finish("serve")

	d := w.at(hour + time.Minute).cycle()
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"late", "scavenge"}) {
		t.Errorf("with serve gone and n1 free, started %v, want [late scavenge]; late waits %q", got, reasonOf(d, "late"))
	}
}

func TestPreemptionRoundsThatDoNotStartTheJobBackOff(t *testing.T) {
	// serve evicts the squatter on the only node, and each time someone
	// else takes the room before serve can (as another scheduler or a
	// light cycle might). freeRounds rounds go unchecked; the round after
	// them holds serve's next search off for searchBackoffFor.
	st := fleet(t).nodes(1).gpus(4, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).at(hour)
	squatter := func(i int) string { return "squatter-" + itoa(i) }
	w.running(job(squatter(1)).team("a").bestEffort().gpus(4), 0, hour, "n1:0,1,2,3")
	w.submit(job("serve").team("a").production().gpus(4).submitted(hour))

	now, last := hour, hour
	for round := 1; round <= freeRounds+1; round++ {
		d := w.at(now).cycle()
		if got := victimsOf(d); !reflect.DeepEqual(got, []string{squatter(round)}) {
			t.Fatalf("round %d: victims %v, want [%s]; serve waits %+v", round, got, squatter(round), d.Waiting["serve"])
		}
		// The victim leaves; another squatter takes the node first.
		w.release().finish(squatter(round))
		w.running(job(squatter(round+1)).team("a").bestEffort().gpus(4), now, now, "n1:0,1,2,3")
		last = now
		now += 10 * time.Second
	}
	next := squatter(freeRounds + 2)
	for _, at := range []time.Duration{now, last + searchBackoffFor - time.Second} {
		if d := w.at(at).cycle(); len(d.Preemptions) != 0 {
			t.Errorf("%v after round %d: serve evicts %v; want it held off for %v", at-last, freeRounds+1, victimsOf(d), searchBackoffFor)
		}
	}
	d := w.at(last + searchBackoffFor).cycle()
	if got := victimsOf(d); !reflect.DeepEqual(got, []string{next}) {
		t.Errorf("after the back-off: victims %v, want [%s]; serve waits %+v", got, next, d.Waiting["serve"])
	}
}

func TestAFailedSearchHoldsOffJobsOfItsKey(t *testing.T) {
	// first, batch, may evict its team's best-effort job, but that one
	// GPU is not enough: the search fails. When a GPU frees up 20 s later
	// a search would succeed; second, of the same shape, class and team,
	// must not make it before searchBackoffFor: a batch job is not in a
	// hurry, and on a backlog every job of a failed key searching each
	// cycle cost more than all placements.
	st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).at(hour)
	w.running(job("be").team("a").bestEffort().gpus(1), 0, 0, "n1:0")
	w.running(job("wall1").team("a").gpus(1), 0, 0, "n1:1")
	w.running(job("wall2").team("a").gpus(6), 0, 0, "n1:2,3,4,5,6,7")
	w.submit(job("first").team("a").gpus(2).submitted(hour))
	if d := w.cycle(); len(d.Preemptions) != 0 {
		t.Fatalf("victims %v: one best-effort GPU cannot make room for two", victimsOf(d))
	}
	w.finish("wall1")
	w.submit(job("second").team("a").gpus(2).submitted(hour + 20*time.Second))
	if d := w.at(hour + 20*time.Second).cycle(); len(d.Preemptions) != 0 {
		t.Errorf("20 s after the failed search: victims %v, want none before %v", victimsOf(d), searchBackoffFor)
	}
	d := w.at(hour + searchBackoffFor).cycle()
	if got := victimsOf(d); !reflect.DeepEqual(got, []string{"be"}) {
		t.Errorf("after %v: victims %v, want [be]", searchBackoffFor, got)
	}
}

func TestReclaimCountsMIGGPUsTheVictimsLeaveIdle(t *testing.T) {
	// a is owed 4 whole GPUs; b borrows 3 whole GPUs and a MIG instance
	// on the fourth. Once both are gone the fourth GPU is idle and can be
	// turned whole: the search must count it.
	st := fleet(t).nodes(1).gpus(4, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st), team("a").guarantee(4).burst(4), team("b").burst(8)).at(hour)
	w.migOff("n1", 0, 1, 2)
	w.running(job("b-job").team("b").gpus(3), 0, 0, "n1:0,1,2")
	w.runningSlice(job("b-serve").team("b").production().migProfile("1g.10gb"), "n1:3:1g.10gb@6")
	w.submit(job("a-job").team("a").gpus(4).submitted(hour))
	d := w.decide()
	if got := victimsOf(d); !reflect.DeepEqual(got, []string{"b-job", "b-serve"}) {
		t.Fatalf("victims %v, want [b-job b-serve]; a-job waits %q", got, reasonOf(d, "a-job"))
	}
}

func TestNoVictimsForAMIGChangeTheCooldownForbids(t *testing.T) {
	// serve needs a MIG slice; the only room is the GPU scavenge holds,
	// whole, changed a minute ago. Evicting scavenge would not let serve
	// start before the cooldown ends: no victims until then.
	st := fleet(t).nodes(1).gpus(1, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).at(hour)
	w.migOff("n1", 0)
	w.running(job("scavenge").team("a").bestEffort().gpus(1), 0, 0, "n1:0")
	w.submit(job("serve").team("a").production().migProfile("3g.40gb").submitted(hour))
	cooldown := w.sch.Config().ReconfigCooldown
	w.sch.lastChange[gpuRef{"n1", 0}] = hour - time.Minute
	if d := w.decide(); len(d.Preemptions) != 0 {
		t.Errorf("victims %v while the GPU cannot change for %v", victimsOf(d), cooldown-time.Minute)
	}
	d := w.at(hour - time.Minute + cooldown).decide()
	if got := victimsOf(d); !reflect.DeepEqual(got, []string{"scavenge"}) {
		t.Errorf("after the cooldown: victims %v, want [scavenge]; serve waits %q", got, reasonOf(d, "serve"))
	}
}

func TestWholeRoomAfterBoundsTheSearch(t *testing.T) {
	// Two nodes of 8 GPUs; on each, b borrows 7 and a's own production
	// holds the eighth. a's gang of two 8-GPU tasks cannot fit whatever is
	// evicted; one 7-GPU task can.
	st := fleet(t).nodes(2).gpus(8, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st), team("a").guarantee(18).burst(18), team("b").burst(16)).at(hour)
	for _, n := range []string{"n1", "n2"} {
		w.running(job("b-"+n).team("b").gpus(7), 0, 0, n+":0,1,2,3,4,5,6")
		w.running(job("a-serve-"+n).team("a").production().gpus(1), 0, 0, n+":7")
	}
	w.submit(job("gang").team("a").gang(2).gpus(8).submitted(hour), job("seven").team("a").gpus(7).submitted(hour))
	c := w.sch.snapshot(w.input())
	var cands []*Job
	for _, j := range w.jobs {
		if w.sch.eligible(c, w.job("gang"), j) {
			cands = append(cands, j)
		}
	}
	if len(cands) != 2 {
		t.Fatalf("candidates %d, want b's two jobs", len(cands))
	}
	for _, tc := range []struct {
		id   string
		want bool
	}{{"gang", false}, {"seven", true}} {
		reqs, err := w.sch.requests(w.job(tc.id))
		if err != nil {
			t.Fatal(err)
		}
		if got := w.sch.wholeRoomAfter(c, reqs, cands); got != tc.want {
			t.Errorf("%s: wholeRoomAfter = %v, want %v", tc.id, got, tc.want)
		}
	}
	if d := w.decide(); !reflect.DeepEqual(victimsOf(d), []string{"b-n1"}) {
		t.Errorf("victims %v, want [b-n1] for seven (and none for the gang)", victimsOf(d))
	}
}

func TestAGangOfWholeNodesReclaimsNodeByNode(t *testing.T) {
	// Team b borrows five 8-GPU nodes with 1-GPU jobs whose checkpoints
	// interleave the nodes, so the first maxVictims in victim order leave
	// every node a GPU short. Team a asks for its guarantee as a gang of
	// two 8-GPU tasks: the search must clear two nodes, 16 victims.
	st := fleet(t).nodes(5).gpus(8, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st), team("a").guarantee(16).burst(16), team("b").burst(40)).at(hour)
	for i := 0; i < 8; i++ {
		for k := 1; k <= 5; k++ {
			checkpoint := hour - time.Duration(i*5+k)*time.Minute
			w.running(job("b-"+itoa(k)+"-"+itoa(i)).team("b"), 0, checkpoint, "n"+itoa(k)+":"+itoa(i))
		}
	}
	w.submit(job("tune").team("a").gang(2).gpus(8).submitted(hour))
	d := w.decide()
	victims := victimsOf(d)
	if len(victims) != 16 {
		t.Fatalf("%d victims %v, want the 16 jobs of two nodes; tune waits %q", len(victims), victims, reasonOf(d, "tune"))
	}
	nodes := map[string]int{}
	for _, v := range victims {
		nodes[strings.Split(v, "-")[1]]++
	}
	if len(nodes) != 2 {
		t.Errorf("victims on nodes %v, want two whole nodes", nodes)
	}
}

// A service on a 1g.10gb instance, evicting one best-effort job either
// way, prefers the notebook whose instance it can take at once to the
// whole-GPU experiment that loses less work but leaves a GPU to turn to
// MIG first (the grace and then a change: twice the wait).
func TestAServicePrefersAVictimWhoseInstanceItCanUse(t *testing.T) {
	st := fleet(t).nodes(2).gpus(1, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("p").guarantee(1).burst(2), team("r").burst(2)).at(hour)
	w.migOff("n1", 0)
	w.running(job("exp").team("r").bestEffort().gpus(1), hour-30*time.Minute, hour-time.Minute, "n1:0")
	for i := 0; i < 7; i++ {
		nb := w.runningSlice(job(fmt.Sprintf("nb%d", i)).team("r").bestEffort().migProfile("1g.10gb"), fmt.Sprintf("n2:0:1g.10gb@%d", i))
		nb.Started, nb.Checkpoint = 0, 0 // a notebook keeps no checkpoint: it would lose its hour
	}
	w.submit(job("serve").team("p").production().migProfile("1g.10gb").submitted(hour))
	d := w.cycle()
	if got := victimsOf(d); len(got) != 1 || !strings.HasPrefix(got[0], "nb") {
		t.Fatalf("victims %v, want one notebook; serve waits %q", got, reasonOf(d, "serve"))
	}
}

func TestATeamsOwnClaimDoesNotTakeTheRoomItsGangEvictedFor(t *testing.T) {
	// Team r is owed 4 GPUs and runs three experiments on n1. Its
	// pretraining job (batch, 8 GPUs) is beyond that guarantee and evicts
	// them. A new experiment of r, within the guarantee, arrives during
	// the grace: it must not take the room promised to r's own pretraining
	// job, which would only evict it again (on the default scenario one
	// gang evicted the same experiments every 2 minutes for hours).
	st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st), team("r").guarantee(4).burst(16)).at(hour)
	for i, g := range []string{"0", "1", "2"} {
		w.running(job("exp-"+itoa(i)).team("r").bestEffort(), 0, hour-time.Minute, "n1:"+g)
	}
	w.submit(job("pretrain").team("r").gpus(8).submitted(hour))
	d := w.cycle()
	if got := victimsOf(d); !reflect.DeepEqual(got, []string{"exp-0", "exp-1", "exp-2"}) {
		t.Fatalf("victims = %v, want the three experiments", got)
	}

	w.at(hour + 10*time.Second).submit(job("late").team("r").bestEffort().submitted(hour + 10*time.Second))
	d = w.light("late")
	if len(d.Starts) != 0 {
		t.Errorf("light cycle during the grace started %v in the room promised to pretrain", startedJobs(d))
	}
	d = w.cycle()
	if len(d.Starts) != 0 {
		t.Errorf("full cycle during the grace started %v in the room promised to pretrain", startedJobs(d))
	}

	d = w.at(hour + 30*time.Second).release().cycle()
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"pretrain"}) {
		t.Errorf("after the release: started %v, want [pretrain]; late waits %q", got, reasonOf(d, "late"))
	}
}

func TestABorrowersVictimsTogetherLeaveTheirTeamItsGuarantee(t *testing.T) {
	// Team r is owed 2 GPUs and runs three experiments on n1: it borrows
	// one. Team a, with no guarantee, asks for batch work. Each experiment
	// alone may go (r keeps 2), but not two of them: r would drop to 1,
	// its claims would take the room back, and a would evict them again.
	for _, tc := range []struct {
		gpus    int
		victims int
	}{
		{gpus: 2, victims: 1}, // one free GPU and one experiment
		{gpus: 3, victims: 0}, // would need two experiments
	} {
		t.Run(itoa(tc.gpus)+" GPUs", func(t *testing.T) {
			st := fleet(t).nodes(1).gpus(4, "H100-80GB").build()
			w := newWorld(t, st, newScheduler(t, "partita", st), team("r").guarantee(2).burst(4), team("a").burst(4)).at(hour)
			for i := 0; i < 3; i++ {
				w.running(job("exp-"+itoa(i)).team("r").bestEffort(), 0, hour-time.Minute, "n1:"+itoa(i))
			}
			w.submit(job("train").team("a").gpus(tc.gpus).submitted(hour))
			d := w.decide()
			if got := len(victimsOf(d)); got != tc.victims {
				t.Errorf("victims %v, want %d", victimsOf(d), tc.victims)
			}
		})
	}
}

func TestPromisedNodesStayHeldWhileTheJobsMIGChangeRuns(t *testing.T) {
	// n1: GPUs 0-3 whole, running four experiments; GPUs 4-7 in MIG mode,
	// idle. tune (batch, 8 GPUs) evicts the experiments, then needs MIG
	// turned off on 4-7. While that change runs, the experiments, back in
	// the queue, must not take GPUs 0-3 again.
	st := fleet(t).nodes(1).gpus(8, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).at(hour)
	w.migOff("n1", 0, 1, 2, 3)
	for i := 0; i < 4; i++ {
		w.running(job("exp-"+itoa(i)).team("a").bestEffort(), 0, hour-time.Minute, "n1:"+itoa(i))
	}
	w.submit(job("tune").team("a").gpus(8).submitted(hour))
	if d := w.cycle(); len(victimsOf(d)) != 4 {
		t.Fatalf("victims %v, want the four experiments", victimsOf(d))
	}

	d := w.at(hour + 30*time.Second).release().cycle()
	if len(d.Reconfigs) == 0 {
		t.Fatalf("after the release: no MIG change for tune (tune waits %q, started %v)", reasonOf(d, "tune"), startedJobs(d))
	}
	for _, when := range []time.Duration{40 * time.Second, 50 * time.Second} {
		d = w.at(hour + when).cycle()
		if len(d.Starts) != 0 || len(d.Preemptions) != 0 {
			t.Errorf("at +%v, during tune's MIG change: started %v, preempted %v; want neither", when, startedJobs(d), victimsOf(d))
		}
	}

	d = w.at(hour + time.Minute).uncordonAll().cycle()
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"tune"}) {
		t.Errorf("after the change: started %v, want [tune]; tune waits %q", got, reasonOf(d, "tune"))
	}
}

func TestBestEffortDoesNotEvictProductionOnMIG(t *testing.T) {
	// b borrows the only GPU with seven 1g.10gb services; a, owed a GPU,
	// asks for a best-effort 1g.10gb. With ProtectProduction it waits:
	// reclaiming from production on MIG instances, research's notebooks
	// and search's services evicted each other hundreds of times a week.
	// (Until the claim has waited ProtectProductionFor: the next test.)
	st := fleet(t).nodes(1).gpus(1, "H100-80GB").mig().build()
	for _, protect := range []bool{true, false} {
		w := newWorld(t, st.Clone(), newScheduler(t, "partita", st, func(c *Config) { c.ProtectProduction = protect }),
			team("a").guarantee(1).burst(1), team("b").burst(8)).at(hour)
		for k := 0; k < 7; k++ {
			w.runningSlice(job(fmt.Sprintf("b-serve-%d", k)).team("b").production().migProfile("1g.10gb"), fmt.Sprintf("n1:0:1g.10gb@%d", k))
		}
		w.submit(job("a-nb").team("a").bestEffort().migProfile("1g.10gb").submitted(hour))
		d := w.decide()
		if got := victimsOf(d); protect && len(got) != 0 || !protect && len(got) != 1 {
			t.Errorf("ProtectProduction %v: victims %v, want none with it and one without", protect, got)
		}
	}
}

func TestBestEffortClaimEvictsBorrowedProductionOnMIGOnceItHasWaited(t *testing.T) {
	// As above: b borrows a's GPU with seven 1g.10gb services, and a is
	// owed a best-effort 1g.10gb. The protection holds for the claim's
	// first ProtectProductionFor (15 s in the preset) within a's
	// guarantee; then the claim reclaims, and still starts within 60 s +
	// grace. With the limit off (0), the protection holds for good.
	st := fleet(t).nodes(1).gpus(1, "H100-80GB").mig().build()
	for _, limit := range []time.Duration{30 * time.Second, 0} {
		w := newWorld(t, st.Clone(), newScheduler(t, "partita", st, func(c *Config) { c.ProtectProductionFor = limit }),
			team("a").guarantee(1).burst(1), team("b").burst(8)).at(hour)
		for k := 0; k < 7; k++ {
			w.runningSlice(job(fmt.Sprintf("b-serve-%d", k)).team("b").production().migProfile("1g.10gb"), fmt.Sprintf("n1:0:1g.10gb@%d", k))
		}
		w.submit(job("a-nb").team("a").bestEffort().migProfile("1g.10gb").submitted(hour))
		for _, at := range []time.Duration{0, 15 * time.Second} {
			if got := victimsOf(w.at(hour + at).cycle()); len(got) != 0 {
				t.Errorf("limit %v, at +%v: victims %v, want none yet", limit, at, got)
			}
		}
		got := victimsOf(w.at(hour + 30*time.Second).cycle())
		if limit > 0 && len(got) != 1 || limit == 0 && len(got) != 0 {
			t.Errorf("limit %v, at +30s: victims %v, want one with the limit and none without", limit, got)
		}
	}
}

func TestABestEffortClaimAsksForACycleWhenTheProtectionLapses(t *testing.T) {
	// As above, with the preset's 15 s: the claim's first search, at
	// +0, finds only protected production. The decision asks for a
	// cycle of the claim at +15 s, when it may evict; a job beyond its
	// team's guarantee, or production, asks for none.
	st := fleet(t).nodes(1).gpus(1, "H100-80GB").mig().build()
	w := newWorld(t, st.Clone(), newScheduler(t, "partita", st),
		team("a").guarantee(1).burst(1), team("b").burst(8), team("c").burst(8)).at(hour)
	for k := 0; k < 7; k++ {
		w.runningSlice(job(fmt.Sprintf("b-serve-%d", k)).team("b").production().migProfile("1g.10gb"), fmt.Sprintf("n1:0:1g.10gb@%d", k))
	}
	w.submit(job("a-nb").team("a").bestEffort().migProfile("1g.10gb").submitted(hour))
	w.submit(job("c-nb").team("c").bestEffort().migProfile("1g.10gb").submitted(hour))
	d := w.cycle()
	want := []Retry{{Job: "a-nb", At: hour + 15*time.Second}}
	if !slices.Equal(d.Retries, want) || len(victimsOf(d)) != 0 {
		t.Fatalf("at +0: retries %v, victims %v; want %v and none", d.Retries, victimsOf(d), want)
	}
	d = w.at(hour + 15*time.Second).cycle()
	if got := victimsOf(d); len(got) != 1 || len(d.Retries) != 0 {
		t.Errorf("at +15s: victims %v, retries %v; want one victim, no retry", got, d.Retries)
	}
}

func TestAClaimHeldOffByAnotherOfItsKindAsksForACycleToo(t *testing.T) {
	// As above, with two such claims of a: the first searches and finds
	// only protected production; the second, the same shape, class and
	// team, makes no search of its own in that cycle (it would find the
	// same). Both ask for a cycle at +15 s: without one, the second
	// waited for the next periodic look (seed 52 of the default
	// scenario: two experiments started after 90 s and 100 s of their
	// 90).
	st := fleet(t).nodes(1).gpus(1, "H100-80GB").mig().build()
	w := newWorld(t, st.Clone(), newScheduler(t, "partita", st),
		team("a").guarantee(2).burst(2), team("b").burst(8)).at(hour)
	for k := 0; k < 7; k++ {
		w.runningSlice(job(fmt.Sprintf("b-serve-%d", k)).team("b").production().migProfile("1g.10gb"), fmt.Sprintf("n1:0:1g.10gb@%d", k))
	}
	w.submit(job("a-nb1").team("a").bestEffort().migProfile("1g.10gb").submitted(hour))
	w.submit(job("a-nb2").team("a").bestEffort().migProfile("1g.10gb").submitted(hour + time.Second))
	d := w.cycle()
	want := []Retry{{Job: "a-nb1", At: hour + 15*time.Second}, {Job: "a-nb2", At: hour + 15*time.Second}}
	if !slices.Equal(d.Retries, want) || len(victimsOf(d)) != 0 {
		t.Fatalf("at +0: retries %v, victims %v; want %v and none", d.Retries, victimsOf(d), want)
	}
}

func TestAClaimInFlightCountsAgainstItsTeamsGuarantee(t *testing.T) {
	// c borrows both GPUs. b is owed one: its first job evicts borrow1 for
	// it. While borrow1 leaves, b's second job is not owed another (the
	// first will take b's whole guarantee), so it evicts nothing. Default
	// scenario: ads' second and third fine-tunes made room for themselves
	// while its first was making room, and took the first's.
	st := fleet(t).nodes(2).gpus(1, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("b").guarantee(1).burst(2), team("c").burst(2)).at(hour)
	w.running(job("borrow1").team("c").gpus(1), 0, 0, "n1:0")
	w.running(job("borrow2").team("c").gpus(1), 0, 0, "n2:0")
	w.submit(job("first").team("b").gpus(1).submitted(hour - time.Minute))
	w.submit(job("second").team("b").gpus(1).submitted(hour))
	var victims []string
	for range 3 {
		d := w.cycle()
		victims = append(victims, victimsOf(d)...)
		w.at(w.now + 15*time.Second)
	}
	if !slices.Equal(victims, []string{"borrow1"}) && !slices.Equal(victims, []string{"borrow2"}) {
		t.Fatalf("victims %v, want one borrowed job evicted, for first", victims)
	}
}

func TestABorrowerThatBecomesOwedSearchesAtOnce(t *testing.T) {
	// a's gang of two, beyond a's guarantee while a's first job runs,
	// finds no victims that would seat it (c's best-effort job alone does
	// not) and backs off. When first ends, a is owed the gang: it evicts
	// c's job in the next cycle, not after the backoff a borrower earns.
	st := fleet(t).nodes(1).gpus(2, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(2).burst(3), team("c").burst(2)).at(hour)
	w.running(job("first").team("a").gpus(1), 0, 0, "n1:0")
	w.running(job("borrow").team("c").bestEffort().gpus(1), 0, 0, "n1:1")
	w.submit(job("gang").team("a").gang(2).gpus(1).submitted(hour))
	if d := w.cycle(); len(d.Preemptions) != 0 {
		t.Fatalf("victims %v for a borrowing gang", victimsOf(d))
	}
	w.at(hour + 10*time.Second).finish("first")
	w.at(hour + 20*time.Second)
	if d := w.cycle(); !slices.Equal(victimsOf(d), []string{"borrow"}) {
		t.Fatalf("victims %v, want [borrow] at once; gang waits %q", victimsOf(d), reasonOf(d, "gang"))
	}
}

func TestAClaimTakesTheRoomItEvictedForBeforeItsVictimsReturn(t *testing.T) {
	// n1's GPUs are split 3g.40gb + 3g.40gb and run sixteen replicas of
	// team s's chat services (production); s is owed 4 GPUs. n2 (L40S,
	// no MIG) runs team c's work on GPUs 0-3 (its guarantee) and has 4
	// GPUs free. Team r is owed 8 and asks for one 8-GPU task: only n1
	// can hold it, and clearing n1 takes s below its guarantee, so the
	// services come back as claims within it, and production. The task,
	// holding n1, goes first: it turns n1's GPUs whole before the
	// services can start again on the instances they left (and be
	// evicted again).
	st := fleet(t).nodes(1).gpus(8, "H100-80GB").layout("3g.40gb@0,3g.40gb@4").
		nodes(1).gpus(8, "L40S").build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("r").guarantee(8).burst(16), team("s").guarantee(4).burst(16), team("c").guarantee(4).burst(16)).at(hour)
	for g := 0; g < 8; g++ {
		for _, at := range []string{"@0", "@4"} {
			w.runningSlice(job("chat-"+itoa(g)+at[1:]).team("s").production().migProfile("3g.40gb"), "n1:"+itoa(g)+":3g.40gb"+at)
		}
	}
	w.running(job("c-train").team("c").gpus(4), 0, 0, "n2:0,1,2,3")
	w.submit(job("tune").team("r").gpus(8).submitted(hour))
	d := w.cycle()
	if got := len(victimsOf(d)); got != 16 {
		t.Fatalf("victims %v, want the sixteen replicas on n1 (tune waits %q)", victimsOf(d), reasonOf(d, "tune"))
	}

	d = w.at(hour + 30*time.Second).release().cycle()
	for _, s := range d.Starts {
		if s.Assignment.Node == "n1" {
			t.Errorf("after the release, %s started on n1, the node its eviction was for", s.Job)
		}
	}
	whole := 0
	for _, rc := range d.Reconfigs {
		if rc.Node == "n1" && !rc.MIG && rc.For == "tune" {
			whole++
		}
	}
	if whole != 8 {
		t.Errorf("after the release: %d of n1's GPUs turned whole for tune, want 8 (changes %v; tune waits %q)", whole, d.Reconfigs, reasonOf(d, "tune"))
	}
}

func TestAClaimClearsANodeWhoseGPUsAreAllMIG(t *testing.T) {
	// Each GPU of n1 runs two 3g.40gb replicas: 3/7 of a GPU each, 428
	// milli rounded down, with 1/7 free. The victims' milli and the free
	// milli must add up to 8 whole GPUs, or the search never tries the
	// node (eight GPUs two milli short each were 16 short of 8000).
	st := fleet(t).nodes(1).gpus(8, "H100-80GB").layout("3g.40gb@0,3g.40gb@4").build()
	w := newWorld(t, st, newScheduler(t, "partita", st), team("r").guarantee(8).burst(8), team("s").burst(8)).at(hour)
	for g := 0; g < 8; g++ {
		for _, at := range []string{"@0", "@4"} {
			w.runningSlice(job("chat-"+itoa(g)+at[1:]).team("s").production().migProfile("3g.40gb"), "n1:"+itoa(g)+":3g.40gb"+at)
		}
	}
	w.submit(job("tune").team("r").gpus(8).submitted(hour))
	d := w.cycle()
	if got := len(victimsOf(d)); got != 16 {
		t.Errorf("victims %v, want the sixteen replicas (tune waits %q)", victimsOf(d), reasonOf(d, "tune"))
	}
}

// TestWorkOfATeamNotConfiguredIsEvictedOnlyForProduction: a team with no
// Team entry has no guarantee, so it never borrows and nothing reclaims
// from it; only production within its own team's guarantee evicts its
// lower-class work. (The cycle counts such a team's usage apart from the
// configured teams', which it counts by position.)
func TestWorkOfATeamNotConfiguredIsEvictedOnlyForProduction(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pending *jobBuilder
		evicts  bool
	}{
		{"best-effort within its guarantee waits", job("notebook").team("a").bestEffort().gpus(1), false},
		{"batch within its guarantee waits", job("train").team("a").gpus(1), false},
		{"production within its guarantee evicts", job("serve").team("a").production().gpus(1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
			w := newWorld(t, st, newScheduler(t, "partita", st), team("a").guarantee(4).burst(8))
			w.running(job("ghost-work").team("ghost").bestEffort().gpus(8), 0, 0, "n1:0,1,2,3,4,5,6,7")
			w.submit(tc.pending)
			d := w.decide()
			got := victimsOf(d)
			if tc.evicts && !reflect.DeepEqual(got, []string{"ghost-work"}) {
				t.Fatalf("evicted %v, want [ghost-work]; %s waits: %q", got, tc.pending.spec.ID, reasonOf(d, tc.pending.spec.ID))
			}
			if !tc.evicts && len(got) != 0 {
				t.Fatalf("evicted %v for %s, want nothing", got, tc.pending.spec.ID)
			}
		})
	}
}

// TestAVictimsInstanceOfAnotherProfileCountsAsRoom: a service needs a
// 1g.20gb where the only evictable work holds a 2g.20gb. Once that work
// is gone its free instance is of the wrong profile, but repartition
// replaces free instances: the search counts the room (dropFree) unless
// the GPU changed within the claim's cooldown, when no change can come.
func TestAVictimsInstanceOfAnotherProfileCountsAsRoom(t *testing.T) {
	for _, tc := range []struct {
		name    string
		changed time.Duration // since the GPU's last change; 0: never
		evicts  bool
	}{
		{"a GPU never changed", 0, true},
		{"a GPU changed two minutes ago", 2 * time.Minute, true},
		{"a GPU changed 30 s ago", 30 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := fleet(t).nodes(1).gpus(1, "H100-80GB").layout("2g.20gb@0,2g.20gb@2,3g.40gb@4").build()
			w := newWorld(t, st, newScheduler(t, "partita", st),
				team("search").guarantee(4).burst(8), team("ads").guarantee(1).burst(8), team("research").burst(8)).at(hour)
			w.runningSlice(job("notebook").team("research").bestEffort().migProfile("2g.20gb"), "n1:0:2g.20gb@0")
			w.runningSlice(job("rerank").team("search").production().migProfile("2g.20gb"), "n1:0:2g.20gb@2")
			w.runningSlice(job("chat").team("search").production().migProfile("3g.40gb"), "n1:0:3g.40gb@4")
			if tc.changed > 0 {
				w.sch.lastChange[gpuRef{node: "n1", index: 0}] = hour - tc.changed
			}
			w.submit(job("transcribe").team("ads").production().migProfile("1g.20gb").submitted(hour))
			d := w.decide()
			got := victimsOf(d)
			if tc.evicts && !reflect.DeepEqual(got, []string{"notebook"}) {
				t.Fatalf("evicted %v, want [notebook]; transcribe waits %q", got, reasonOf(d, "transcribe"))
			}
			if !tc.evicts && len(got) != 0 {
				t.Fatalf("evicted %v, want nothing: no change can come within the cooldown", got)
			}
		})
	}
}

// straddleAfter is how long a's claim waits before b's service, 1 GPU
// over b's guarantee and 3 under, is evicted for it, or -1.
func straddleAfter(t *testing.T, claim *jobBuilder, tweak ...func(*Config)) time.Duration {
	t.Helper()
	st := fleet(t).nodes(1).gpus(4, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st, tweak...),
		team("a").guarantee(4).burst(4), team("b").guarantee(3).burst(8)).at(hour)
	w.running(job("b-serve").team("b").production().gpus(4), 0, 0, "n1:0,1,2,3")
	w.submit(claim.submitted(hour))
	waited, d := firstVictims(w, 4*time.Minute)
	if waited < 0 {
		return -1
	}
	if got := victimsOf(d); !slices.Equal(got, []string{"b-serve"}) {
		t.Fatalf("victims %v, want b-serve", got)
	}
	if !strings.Contains(d.Preemptions[0].Reason, "team a reclaims its guarantee") {
		t.Errorf("preemption reason %q, want a reclaim", d.Preemptions[0].Reason)
	}
	return waited
}

func TestAnOwedClaimReclaimsFromProductionThatStraddlesItsTeamsGuarantee(t *testing.T) {
	if got := straddleAfter(t, job("a-job").team("a").gpus(2)); got != 2*time.Minute {
		t.Errorf("batch claim: b-serve evicted after %v of the wait, want 2m0s (ReclaimStraddlingAfter)", got)
	}
	if got := straddleAfter(t, job("a-job").team("a").bestEffort().gpus(2)); got != 2*time.Minute {
		t.Errorf("best-effort claim: b-serve evicted after %v of the wait, want 2m0s", got)
	}
	if got := straddleAfter(t, job("a-serve").team("a").production().gpus(2)); got != -1 {
		t.Errorf("a production claim evicted another team's production within its guarantee after %v", got)
	}
	off := func(c *Config) { c.ReclaimStraddlingAfter = 0 }
	if got := straddleAfter(t, job("a-job").team("a").gpus(2), off); got != -1 {
		t.Errorf("without ReclaimStraddlingAfter b-serve was evicted after %v", got)
	}
}

// A whole-GPU claim on a node of MIG GPUs evicts, of the victims within
// their team's guarantee, only those on the GPU it turns whole. Three
// 1g.10gb notebooks run, two on GPU 0 and one on GPU 1 (GPUs 2 and 3 are
// whole and busy); team a (guarantee 4) asks for one GPU for a batch
// job. The victims' order, least work lost first, is nb-new (GPU 0),
// nb-mid (GPU 1), nb-old (GPU 0): nb-mid alone frees a GPU. nb-new,
// tried first, is given back when it is within its team's guarantee (a's
// own), or it is owed at once (random-410: seventeen notebooks on three
// GPUs evicted to turn one whole, eight of them within their team's
// guarantee); borrowed, it goes too (giving back borrowed victims as
// well cost the default scenario: "What was tried").
func TestAWholeGPUClaimEvictsOnlyTheNotebooksOfTheGPUItTurns(t *testing.T) {
	for _, tc := range []struct {
		team string
		want []string
	}{
		{"a", []string{"nb-mid"}},
		{"b", []string{"nb-mid", "nb-new"}},
	} {
		t.Run("notebooks of "+tc.team, func(t *testing.T) {
			st := fleet(t).nodes(1).gpus(4, "H100-80GB").mig().build()
			w := newWorld(t, st, newScheduler(t, "partita", st), team("a").guarantee(4).burst(4), team("b").burst(4))
			w.migOff("n1", 2, 3)
			w.running(job("a-busy").team("a").gpus(2), 0, 0, "n1:2,3")
			w.at(10*time.Minute).runningSlice(job("nb-old").team(tc.team).bestEffort().migProfile("1g.10gb"), "n1:0:1g.10gb@6")
			w.at(20*time.Minute).runningSlice(job("nb-mid").team(tc.team).bestEffort().migProfile("1g.10gb"), "n1:1:1g.10gb@6")
			w.at(30*time.Minute).runningSlice(job("nb-new").team(tc.team).bestEffort().migProfile("1g.10gb"), "n1:0:1g.10gb@5")
			w.submit(job("claim").team("a").gpus(1).submitted(hour))
			d := w.at(hour).decide()
			if got := victimsOf(d); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("victims %v, want %v; claim waits %q", got, tc.want, reasonOf(d, "claim"))
			}
		})
	}
}

func TestMayPreemptRemembersByTeamClassAndStanding(t *testing.T) {
	// Every team, class and standing asked in one cycle, twice, must get
	// the answer a cycle asked only that gives.
	st := fleet(t).nodes(2).gpus(8, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(4), team("b").guarantee(4).burst(12), team("c").guarantee(8)).at(hour)
	w.running(job("a-scavenge").team("a").bestEffort().gpus(2), 0, 0, "n1:0,1")
	w.running(job("b-borrow").team("b").gpus(8), 0, 0, "n2:0,1,2,3,4,5,6,7")
	w.running(job("c-serve").team("c").production().gpus(2), 0, 0, "n1:2,3")
	var probes []*Job
	for _, tm := range []string{"a", "b", "c", "x"} {
		for _, b := range []*jobBuilder{job("").bestEffort(), job(""), job("").production()} {
			for _, size := range []int{1, 12} {
				j := b.team(tm).gpus(size).submitted(hour).build()
				j.Spec.ID = fmt.Sprintf("%s-%s-%d", tm, j.Spec.Class, size)
				probes = append(probes, j)
			}
		}
	}
	in := w.input()
	in.Jobs = append(in.Jobs, probes...)
	fresh := map[string]bool{}
	for _, p := range probes {
		fresh[p.ID()] = w.sch.mayPreempt(w.sch.snapshot(in), p)
	}
	c := w.sch.snapshot(in)
	seen := map[bool]int{}
	for round := 0; round < 2; round++ {
		for k := range probes {
			p := probes[(k*7+round)%len(probes)]
			if got := w.sch.mayPreempt(c, p); got != fresh[p.ID()] {
				t.Errorf("round %d: mayPreempt(%s) = %v, asked alone %v", round, p.ID(), got, fresh[p.ID()])
			}
			seen[fresh[p.ID()]]++
		}
	}
	if seen[true] == 0 || seen[false] == 0 {
		t.Fatalf("answers %v: the test needs both", seen)
	}
}
