package sched

import (
	"reflect"
	"testing"
	"time"
)

// reservationWorld is three nodes of 4 GPUs. r1 holds all of n1 until 3h,
// r2 2 GPUs of n2 until 2h, r3 2 GPUs of n3 until 1h. gang needs two
// tasks of 3 GPUs, so it fits nowhere; it was submitted at 0.
func reservationWorld(t *testing.T, teams ...*teamBuilder) *world {
	st := fleet(t).nodes(3).gpus(4, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st), teams...)
	w.running(job("r1").team("b").gpus(4).estimate(3*hour), 0, 0, "n1:0,1,2,3")
	w.running(job("r2").team("b").gpus(2).estimate(2*hour), 0, 0, "n2:0,1")
	w.running(job("r3").team("b").gpus(2).estimate(hour), 0, 0, "n3:0,1")
	w.submit(job("gang").team("b").gang(2).gpus(3))
	return w
}

func TestAGangReservesNodesAfterWaitingReserveAfter(t *testing.T) {
	w := reservationWorld(t)
	// Before ReserveAfter (10m) nothing is held: a small job starts on the
	// free GPUs of n2 or n3.
	w.submit(job("early").gpus(1).submitted(time.Minute))
	d := w.at(9*time.Minute + 59*time.Second).cycle()
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"early"}) {
		t.Fatalf("t=9m59s: started %v, want [early]", got)
	}
	if w.sch.reservation != nil {
		t.Fatalf("t=9m59s: reservation %+v before ReserveAfter", *w.sch.reservation)
	}
	w.finish("early")

	d = w.at(10 * time.Minute).cycle()
	r := w.sch.reservation
	if r == nil {
		t.Fatalf("t=10m: no reservation; gang waits %q", reasonOf(d, "gang"))
	}
	// Nodes by when their work ends: n3 (1h) and n2 (2h) cover 6 GPUs.
	if want := map[string]bool{"n2": true, "n3": true}; r.job != "gang" || !reflect.DeepEqual(r.nodes, want) || r.readyAt != 2*hour {
		t.Errorf("reservation = {job %s, nodes %v, readyAt %v}, want {gang, %v, 2h}", r.job, r.nodes, r.readyAt, want)
	}
	if got := reasonOf(d, "gang"); got != WaitGang {
		t.Errorf("gang waits %q, want %q", got, WaitGang)
	}
}

func TestReservationRefusesLaterWorkUnlessItEndsFirst(t *testing.T) {
	tests := []struct {
		name   string
		teams  []*teamBuilder
		newJob *jobBuilder
		starts bool
	}{
		{name: "a batch job without an estimate is refused", newJob: job("new").team("b")},
		{name: "a batch job that ends before the gang can start backfills", newJob: job("new").team("b").estimate(hour), starts: true},
		{name: "a batch job that would end after the gang could start is refused", newJob: job("new").team("b").estimate(2 * hour)},
		{name: "a best-effort job is refused", newJob: job("new").team("b").bestEffort()},
		{name: "a production job is not blocked", newJob: job("new").team("b").production(), starts: true},
		{
			name:   "a job within its team's guarantee is not blocked by a borrower's gang",
			teams:  []*teamBuilder{team("a").guarantee(4).burst(4), team("b").burst(32)},
			newJob: job("new").team("a"), starts: true,
		},
		{
			// A reservation drains for hours: the team's own claims keep
			// what it is owed meanwhile (a promise, held for seconds, is
			// closed to them: TestATeamsOwnClaimDoesNotTakeTheRoomItsGangEvictedFor).
			name:   "a job within its team's guarantee is not blocked by its own team's gang beyond it",
			teams:  []*teamBuilder{team("b").guarantee(10).burst(32)},
			newJob: job("new").team("b").bestEffort(), starts: true,
		},
		{
			name:   "production beyond its team's guarantee is blocked by a gang within its guarantee",
			teams:  []*teamBuilder{team("a").burst(4), team("b").guarantee(32).burst(32)},
			newJob: job("new").team("a").production(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := reservationWorld(t, tc.teams...)
			w.at(10 * time.Minute).cycle()
			if w.sch.reservation == nil {
				t.Fatalf("no reservation at 10m")
			}
			w.submit(tc.newJob.submitted(11 * time.Minute))
			d := w.at(11 * time.Minute).cycle()
			if !tc.starts {
				if len(d.Starts) != 0 {
					t.Errorf("started %v on reserved nodes", startedJobs(d))
				}
				if got := reasonOf(d, "new"); got != WaitReserved {
					t.Errorf("new waits %q, want %q", got, WaitReserved)
				}
				return
			}
			s := startsOf(d, "new")
			if len(s) != 1 || (s[0].Assignment.Node != "n2" && s[0].Assignment.Node != "n3") {
				t.Errorf("new starts %+v, want one start on n2 or n3; it waits %q", s, reasonOf(d, "new"))
			}
		})
	}
}

func TestNothingBackfillsWhenTheReservedNodesRunWorkWithoutEstimate(t *testing.T) {
	st := fleet(t).nodes(2).gpus(4, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st))
	w.running(job("r1").gpus(2), 0, 0, "n1:0,1")
	w.running(job("r2").gpus(2), 0, 0, "n2:0,1")
	w.submit(job("gang").gang(2).gpus(3))
	w.at(10 * time.Minute).cycle()
	if r := w.sch.reservation; r == nil || r.readyAt != 0 {
		t.Fatalf("reservation %+v, want one with readyAt 0 (unknown)", r)
	}
	w.submit(job("short").estimate(time.Minute).submitted(11 * time.Minute))
	d := w.at(11 * time.Minute).cycle()
	if got := reasonOf(d, "short"); got != WaitReserved {
		t.Errorf("short waits %q, want %q", got, WaitReserved)
	}
}

func TestTheGangStartsWhenItsNodesDrainAndFreesTheReservation(t *testing.T) {
	w := reservationWorld(t)
	w.at(10 * time.Minute).cycle()
	w.at(hour).finish("r3")
	d := w.cycle()
	if len(d.Starts) != 0 {
		t.Fatalf("t=1h: started %v with n2 still busy", startedJobs(d))
	}
	w.at(2 * hour).finish("r2")
	d = w.cycle()
	if got := nodesOf(startsOf(d, "gang")); !reflect.DeepEqual(got, []string{"n2", "n3"}) {
		t.Fatalf("t=2h: gang started on %v, want [n2 n3]", got)
	}
	if w.sch.reservation != nil {
		t.Errorf("reservation %+v kept after the gang started", *w.sch.reservation)
	}
	// Nothing is held any more: a small job takes a GPU left free on n2 or n3.
	w.submit(job("after").gpus(1).submitted(2 * hour))
	if d := w.cycle(); len(startsOf(d, "after")) != 1 {
		t.Errorf("after the gang started, after waits %q", reasonOf(d, "after"))
	}
}

func TestReservationIsDroppedWhenTheGangLeaves(t *testing.T) {
	w := reservationWorld(t)
	w.at(10 * time.Minute).cycle()
	w.finish("gang")
	w.submit(job("small").submitted(11 * time.Minute))
	d := w.at(11 * time.Minute).cycle()
	if len(startsOf(d, "small")) != 1 || w.sch.reservation != nil {
		t.Errorf("after the gang left: small waits %q, reservation %v", reasonOf(d, "small"), w.sch.reservation)
	}
}

func TestBackfillIsJudgedPerJobNotPerShape(t *testing.T) {
	w := reservationWorld(t)
	w.at(10 * time.Minute).cycle()
	w.submit(job("long").team("b").estimate(3*hour).submitted(11*time.Minute),
		job("short").team("b").estimate(hour).submitted(12*time.Minute))
	d := w.at(12 * time.Minute).cycle()
	if got := reasonOf(d, "long"); got != WaitReserved {
		t.Errorf("long waits %q, want %q", got, WaitReserved)
	}
	if got := startedJobs(d); !reflect.DeepEqual(got, []string{"short"}) {
		t.Errorf("started %v, want [short], which ends before the gang can start; short waits %q", got, reasonOf(d, "short"))
	}
}
