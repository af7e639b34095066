package sched

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestQuotas(t *testing.T) {
	tests := []struct {
		name    string
		preset  string
		teams   []*teamBuilder
		holding map[string]int
		pending *jobBuilder
		starts  bool
	}{
		{
			name:    "naive refuses a job beyond the guarantee even below the burst",
			preset:  "naive",
			teams:   []*teamBuilder{team("a").guarantee(2).burst(4)},
			pending: job("big").team("a").gpus(3),
		},
		{
			name:    "naive counts what the team holds already",
			preset:  "naive",
			teams:   []*teamBuilder{team("a").guarantee(2).burst(4)},
			holding: map[string]int{"a": 2},
			pending: job("one-more").team("a").gpus(1),
		},
		{
			name:    "naive starts a job that fills the guarantee exactly",
			preset:  "naive",
			teams:   []*teamBuilder{team("a").guarantee(2).burst(4)},
			holding: map[string]int{"a": 1},
			pending: job("fills").team("a").gpus(1),
			starts:  true,
		},
		{
			name:    "partita lends beyond the guarantee up to the burst",
			preset:  "partita",
			teams:   []*teamBuilder{team("a").guarantee(2).burst(4)},
			holding: map[string]int{"a": 1},
			pending: job("borrows").team("a").gpus(3),
			starts:  true,
		},
		{
			name:    "partita refuses beyond the burst",
			preset:  "partita",
			teams:   []*teamBuilder{team("a").guarantee(2).burst(4)},
			holding: map[string]int{"a": 2},
			pending: job("too-big").team("a").gpus(3),
		},
		{
			name:    "gang-drf refuses beyond the burst",
			preset:  "gang-drf",
			teams:   []*teamBuilder{team("a").guarantee(2).burst(4)},
			pending: job("too-big").team("a").gang(5).gpus(1),
		},
		{
			name:    "a burst below the guarantee still allows the guarantee",
			preset:  "partita",
			teams:   []*teamBuilder{team("a").guarantee(3).burst(1)},
			pending: job("guaranteed").team("a").gpus(3),
			starts:  true,
		},
		{
			name:    "a team without a Team entry has no quota under naive",
			preset:  "naive",
			teams:   []*teamBuilder{team("a").guarantee(1).burst(1)},
			pending: job("unlisted").team("ghost").gpus(8),
			starts:  true,
		},
		{
			name:    "a team without a Team entry has no quota under partita",
			preset:  "partita",
			teams:   []*teamBuilder{team("a").guarantee(1).burst(1)},
			pending: job("unlisted").team("ghost").gang(6).gpus(1),
			starts:  true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
			w := newWorld(t, st, newScheduler(t, tc.preset, st), tc.teams...)
			holdGPUs(w, tc.holding)
			w.submit(tc.pending)
			id := tc.pending.spec.ID
			d := w.decide()
			if tc.starts {
				if got := startedJobs(d); !reflect.DeepEqual(got, []string{id}) {
					t.Errorf("started %v, want [%s]; %s waits: %q", got, id, id, reasonOf(d, id))
				}
				return
			}
			if len(d.Starts) != 0 {
				t.Errorf("started %v, want nothing", startedJobs(d))
			}
			if got := d.Waiting[id]; got != (Wait{Position: 1, Reason: WaitQuota}) {
				t.Errorf("%s waits %+v, want position 1, %q", id, got, WaitQuota)
			}
		})
	}
}

func TestQuotaCountsAMIGSliceByItsComputeShare(t *testing.T) {
	// 3g.40gb is 3/7 of a GPU (428 milli): two fit a guarantee of one GPU,
	// a third does not.
	// (The naive placement only takes instances that exist: there are four.)
	st := fleet(t).nodes(1).gpus(2, "H100-80GB").layout("3g.40gb@0,3g.40gb@4").build()
	w := newWorld(t, st, newScheduler(t, "naive", st), team("a").guarantee(1).burst(1))
	w.submit(job("s1").team("a").migProfile("3g.40gb"), job("s2").team("a").migProfile("3g.40gb").submitted(1),
		job("s3").team("a").migProfile("3g.40gb").submitted(2))
	d := w.decide()
	if got, want := startedJobs(d), []string{"s1", "s2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("started %v, want %v", got, want)
	}
	if got := reasonOf(d, "s3"); got != WaitQuota {
		t.Errorf("s3 waits %q, want %q", got, WaitQuota)
	}
}

// quotaHoldWorld: team a may hold 4 GPUs and holds 2 (running); its gang
// of two 2-GPU tasks, submitted at 0, waits on the quota. The cluster has
// room: only the quota stands in the way.
func quotaHoldWorld(t *testing.T, preset string) *world {
	st := fleet(t).nodes(2).gpus(8, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, preset, st), team("a").guarantee(4).burst(4), team("b").guarantee(4).burst(4))
	w.running(job("a-running").team("a").gpus(2), 0, 0, "n1:0,1")
	w.submit(job("gang").team("a").gang(2).gpus(2))
	return w
}

func TestAGangWaitingOnItsQuotaHoldsIt(t *testing.T) {
	tests := []struct {
		name   string
		preset string
		at     time.Duration
		newJob *jobBuilder
		starts bool
	}{
		{"before ReserveAfter a small job of the team takes the quota left", "partita", 9 * time.Minute, job("small").team("a"), true},
		{"after ReserveAfter a small job of the team is held back", "partita", 10 * time.Minute, job("small").team("a"), false},
		{"a best-effort job of the team is held back", "partita", 10 * time.Minute, job("small").team("a").bestEffort(), false},
		{"a production job of the team is not held back", "partita", 10 * time.Minute, job("small").team("a").production(), true},
		{"another team's job is not held back", "partita", 10 * time.Minute, job("small").team("b"), true},
		{"without reservations (gang-drf) nothing holds the quota", "gang-drf", 10 * time.Minute, job("small").team("a"), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The gang's cycle at tc.at comes first (it takes the hold
			// then, if it is due); the small job arrives right after.
			w := quotaHoldWorld(t, tc.preset)
			w.at(tc.at).cycle()
			w.submit(tc.newJob.submitted(tc.at))
			d := w.at(tc.at + time.Second).cycle()
			if got := reasonOf(d, "gang"); got != WaitQuota {
				t.Fatalf("gang waits %q, want %q", got, WaitQuota)
			}
			if tc.starts {
				if got := startedJobs(d); !reflect.DeepEqual(got, []string{"small"}) {
					t.Errorf("started %v, want [small]; small waits %q", got, reasonOf(d, "small"))
				}
				return
			}
			if got := reasonOf(d, "small"); got != WaitQuota {
				t.Errorf("small waits %q, want %q", got, WaitQuota)
			}
		})
	}
}

func TestTheQuotaHoldEndsWhenTheGangStarts(t *testing.T) {
	w := quotaHoldWorld(t, "partita")
	w.at(10 * time.Minute).cycle()
	w.finish("a-running")
	w.submit(job("small").team("a").submitted(11 * time.Minute))
	d := w.at(11 * time.Minute).cycle()
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"gang"}) {
		t.Fatalf("started %v, want [gang]", got)
	}
	if got := reasonOf(d, "small"); got != WaitQuota {
		t.Errorf("small waits %q, want %q (the gang fills the quota)", got, WaitQuota)
	}
	w.finish("gang")
	if d := w.at(12 * time.Minute).cycle(); len(startsOf(d, "small")) != 1 {
		t.Errorf("with the gang gone small waits %q, want it started", reasonOf(d, "small"))
	}
}

func TestAGangBeyondItsTeamsLimitDoesNotHoldTheQuotaForEver(t *testing.T) {
	st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st), team("a").guarantee(4).burst(4))
	w.submit(job("too-big").team("a").gang(5).gpus(1), job("small").team("a").submitted(time.Minute))
	for _, now := range []time.Duration{10 * time.Minute, time.Hour, 24 * time.Hour} {
		d := w.at(now).decide()
		if got := reasonOf(d, "small"); got != "(not waiting)" {
			t.Fatalf("t=%v: small (1 GPU; team a holds nothing, may hold 4) waits %q", now, got)
		}
	}
}

func TestProductionReserveHoldsBorrowedWorkOnly(t *testing.T) {
	// Four GPUs, a reserve of two for production. Team a (guarantee 1)
	// runs one GPU; its second best-effort GPU is borrowed and would
	// leave 2 free: allowed; its third would leave 1: held. Team b,
	// within its guarantee, is not held, whatever the class (borrowed
	// production: the next test).
	st := fleet(t).nodes(1).gpus(4, "H100-80GB").build()
	sch := newScheduler(t, "partita", st, func(c *Config) { c.ProductionReserve = 2000 })
	w := newWorld(t, st, sch, team("a").guarantee(1).burst(4), team("b").guarantee(2).burst(4))
	w.running(job("a-running").team("a").bestEffort(), 0, 0, "n1:0")
	w.submit(job("a-borrow-1").team("a").bestEffort().submitted(time.Second))
	d := w.cycle()
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"a-borrow-1"}) {
		t.Fatalf("started %v, want [a-borrow-1] (it leaves the reserve of 2 free)", got)
	}
	w.submit(job("a-borrow-2").team("a").bestEffort().submitted(2 * time.Second))
	d = w.at(time.Minute).cycle()
	if got := reasonOf(d, "a-borrow-2"); got != WaitProdReserve {
		t.Errorf("a-borrow-2 waits %q, want %q", got, WaitProdReserve)
	}
	w.submit(job("b-owed").team("b").bestEffort().submitted(3*time.Second),
		job("b-serve").team("b").production().submitted(4*time.Second))
	d = w.at(2 * time.Minute).cycle()
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"b-owed", "b-serve"}) {
		t.Errorf("started %v, want [b-owed b-serve]: claims within the guarantee ignore the reserve", got)
	}
}

func TestProductionReserveHoldsBorrowedProductionOnWholeGPUs(t *testing.T) {
	// Eight GPUs on two nodes, a reserve of 4. Team a (guarantee 1) runs
	// production on n1's four GPUs; a 4-GPU service would leave no GPU
	// free and is held, while a service on a MIG instance is not.
	st := fleet(t).nodes(2).gpus(4, "H100-80GB").mig().build()
	sch := newScheduler(t, "partita", st, func(c *Config) { c.ProductionReserve = 4000 })
	w := newWorld(t, st, sch, team("a").guarantee(1).burst(8), team("b").guarantee(7).burst(8)).at(hour)
	w.migOff("n1", 0, 1, 2, 3).migOff("n2", 0, 1, 2)
	w.running(job("a-big").team("a").production().gpus(4), 0, 0, "n1:0,1,2,3")
	w.submit(job("a-big-2").team("a").production().gpus(4).submitted(hour),
		job("a-small").team("a").production().migProfile("1g.10gb").submitted(hour))
	d := w.cycle()
	if got := reasonOf(d, "a-big-2"); got != WaitProdReserve {
		t.Errorf("a-big-2 waits %q, want %q: borrowed production on whole GPUs keeps the reserve", got, WaitProdReserve)
	}
	if !slices.Contains(startedJobs(d), "a-small") {
		t.Errorf("a-small did not start (waits %q): borrowed production on MIG may use the reserve", reasonOf(d, "a-small"))
	}
}

// Naive places a memory profile on a whole GPU (stock Kubernetes counts a
// pod's nvidia.com/gpu: 1), so its quota counts that GPU, not the
// profile's share: a team of four GPUs runs one service of three small
// replicas, not two (three GPUs each, though each replica's share is a
// tenth).
func TestNaiveCountsAWholeGPUPerSmallReplicaAgainstItsQuota(t *testing.T) {
	st := fleet(t).nodes(1).gpus(8, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "naive", st), team("a").guarantee(4).burst(4))
	w.submit(job("s1").team("a").production().gpuMemory(10000, 0.1).replicas(3))
	if got := startsOf(w.cycle(), "s1"); len(got) != 3 {
		t.Fatalf("s1 started %d replicas, want 3", len(got))
	}
	w.submit(job("s2").team("a").production().gpuMemory(10000, 0.1).replicas(3).submitted(time.Minute))
	d := w.at(time.Minute).cycle()
	if got := startedJobs(d); len(got) != 0 {
		t.Errorf("started %v: s1 holds three of the team's four GPUs", got)
	}
	if got := reasonOf(d, "s2"); got != WaitQuota {
		t.Errorf("s2 waits %q, want %q", got, WaitQuota)
	}
}

// A gang that asks for more than its team's guarantee can only run on
// borrowed capacity: holding the quota for it must not keep the team's
// jobs within the guarantee waiting (passesHold). Team a is guaranteed 2
// GPUs and may borrow up to 8; it holds 1; its gang of 8 holds the quota
// from 10 min. A 1-GPU job of a's, within the guarantee, starts; a second
// one, beyond it, is held back for the gang.
func TestABorrowingGangDoesNotHoldItsTeamsGuarantee(t *testing.T) {
	st := fleet(t).nodes(2).gpus(8, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st), team("a").guarantee(2).burst(8), team("b").guarantee(8).burst(8))
	w.running(job("a-running").team("a").gpus(1), 0, 0, "n1:0")
	w.running(job("b-running").team("b").gpus(8), 0, 0, "n2:0,1,2,3,4,5,6,7")
	w.submit(job("gang").team("a").gang(2).gpus(4))
	w.at(10 * time.Minute).cycle()
	if got := w.sch.quotaHold["a"]; got != "gang" {
		t.Fatalf("quota hold of team a = %q, want the gang's", got)
	}
	w.submit(job("within").team("a").submitted(10*time.Minute), job("beyond").team("a").submitted(10*time.Minute+time.Second))
	d := w.at(10*time.Minute + 2*time.Second).cycle()
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"within"}) {
		t.Errorf("started %v, want [within]; within waits %q, beyond waits %q", got, reasonOf(d, "within"), reasonOf(d, "beyond"))
	}
	if got := reasonOf(d, "beyond"); got != WaitQuota {
		t.Errorf("beyond waits %q, want %q", got, WaitQuota)
	}
}

// A job of a team whose quota a gang holds starts when, by its estimate,
// it ends before the team's running work frees the quota for the gang,
// by theirs: it delays the gang by nothing (quotaBackfills). Team a may
// hold 4 GPUs and holds 2, declared to end at 2 h; its gang of two 2-GPU
// tasks holds the quota from 10 min.
func TestAJobEndingBeforeTheQuotaFreesPassesTheHold(t *testing.T) {
	tests := []struct {
		name     string
		estimate time.Duration
		starts   bool
	}{
		{"ends before the quota frees", time.Hour, true},
		{"ends as the quota frees", 2*time.Hour - 10*time.Minute - time.Second, true},
		{"ends after the quota frees", 2 * time.Hour, false},
		{"declares no run time", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := fleet(t).nodes(2).gpus(8, "H100-80GB").build()
			w := newWorld(t, st, newScheduler(t, "partita", st), team("a").guarantee(4).burst(4), team("b").guarantee(4).burst(4))
			w.running(job("a-running").team("a").gpus(2).estimate(2*time.Hour), 0, 0, "n1:0,1")
			w.submit(job("gang").team("a").gang(2).gpus(2))
			w.at(10 * time.Minute).cycle()
			if got := w.sch.quotaHold["a"]; got != "gang" {
				t.Fatalf("quota hold of team a = %q, want the gang's", got)
			}
			w.submit(job("small").team("a").estimate(tc.estimate).submitted(10 * time.Minute))
			d := w.at(10*time.Minute + time.Second).cycle()
			if got := len(startsOf(d, "small")) == 1; got != tc.starts {
				t.Errorf("small started %v, want %v; it waits %q", got, tc.starts, reasonOf(d, "small"))
			}
			if got := reasonOf(d, "gang"); got != WaitQuota {
				t.Errorf("gang waits %q, want %q", got, WaitQuota)
			}
		})
	}
}
