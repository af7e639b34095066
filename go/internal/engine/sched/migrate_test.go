package sched

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/workload"
)

// movingWorld: on n1, a's production replica "serve" holds a 1g instance
// of the only GPU; on n2, two more of a's replicas leave room beside them.
// a is within its guarantee, so none of its replicas may be evicted for
// b, who is owed a whole GPU and asks for one.
func movingWorld(t *testing.T, tweak ...func(*Config)) *world {
	st := fleet(t).nodes(2).gpus(1, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st, tweak...),
		team("a").guarantee(2).burst(2), team("b").guarantee(1).burst(1)).at(hour)
	w.runningSlice(job("serve").team("a").production().migProfile("1g.10gb"), "n1:0:1g.10gb@6")
	w.runningSlice(job("other1").team("a").production().migProfile("1g.10gb"), "n2:0:1g.10gb@6")
	w.runningSlice(job("other2").team("a").production().migProfile("1g.10gb"), "n2:0:1g.10gb@5")
	w.submit(job("train").team("b").gpus(1).submitted(hour))
	return w
}

func TestAClaimGetsAGPUByMovingAServiceReplica(t *testing.T) {
	w := movingWorld(t)
	d := w.cycle()
	if len(d.Preemptions) != 0 {
		t.Fatalf("victims %v: a is within its guarantee", victimsOf(d))
	}
	if len(d.Migrations) != 1 || d.Migrations[0].Job != "serve" || d.Migrations[0].To.Node != "n2" || d.Migrations[0].For != "train" {
		t.Fatalf("migrations %+v, want serve moved to n2 for train; train waits %q", d.Migrations, reasonOf(d, "train"))
	}
	if got := reasonOf(d, "train"); got != WaitMoving {
		t.Errorf("train waits %q, want %q", got, WaitMoving)
	}
	serve := w.job("serve")
	if serve.Phase != Running || serve.Placed[0].Node != "n2" {
		t.Fatalf("serve is %v on %s, want running on n2", serve.Phase, serve.Placed[0].Node)
	}
	// Until the old replica is gone, n1 is train's: nothing else starts
	// there and no more moves are made.
	w.submit(job("notebook").team("a").bestEffort().migProfile("1g.10gb").submitted(hour))
	if d := w.cycle(); len(d.Migrations) != 0 || reasonOf(d, "train") != WaitMoving {
		t.Fatalf("while serve moves: migrations %+v, train waits %q", d.Migrations, reasonOf(d, "train"))
	}
	w.finish("notebook")
	w.moved()
	d = w.cycle()
	if len(d.Reconfigs) != 1 || d.Reconfigs[0].Node != "n1" || d.Reconfigs[0].MIG {
		t.Fatalf("reconfigs %+v, want n1's GPU turned whole; train waits %q", d.Reconfigs, reasonOf(d, "train"))
	}
	w.uncordonAll()
	if d := w.cycle(); !slices.Contains(startedJobs(d), "train") {
		t.Fatalf("train did not start on the freed GPU: %q", reasonOf(d, "train"))
	}
	if train := w.job("train"); train.Placed[0].Node != "n1" {
		t.Errorf("train on %s, want n1", train.Placed[0].Node)
	}
}

func TestNoMovesWithoutMigrate(t *testing.T) {
	w := movingWorld(t, func(c *Config) { c.Migrate = false })
	d := w.cycle()
	if len(d.Migrations) != 0 || len(d.Preemptions) != 0 || len(d.Starts) != 0 {
		t.Fatalf("decision %+v, want train left waiting", d)
	}
}

// borrowWorld: two nodes of two MIG GPUs. On n1 a production replica of
// a's holds a 1g instance of each GPU; on n2 two more leave room beside
// them on GPU 0, and GPU 1 is whole and idle. b has no guarantee: what it
// asks it borrows.
func borrowWorld(t *testing.T, tweak ...func(*Config)) *world {
	st := fleet(t).nodes(2).gpus(2, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st, tweak...),
		team("a").guarantee(3).burst(3), team("b").burst(4)).at(hour)
	w.migOff("n2", 1)
	w.runningSlice(job("serve0").team("a").production().migProfile("1g.10gb"), "n1:0:1g.10gb@6")
	w.runningSlice(job("serve1").team("a").production().migProfile("1g.10gb"), "n1:1:1g.10gb@6")
	w.runningSlice(job("other1").team("a").production().migProfile("1g.10gb"), "n2:0:1g.10gb@6")
	w.runningSlice(job("other2").team("a").production().migProfile("1g.10gb"), "n2:0:1g.10gb@5")
	return w
}

func TestNoMovesForBorrowedWorkSmallerThanANode(t *testing.T) {
	// b, on n2's whole GPU already, borrows one GPU more and none is
	// free: no service moves for borrowed work that any GPU freed later
	// would serve.
	w := borrowWorld(t)
	w.running(job("b-first").team("b").gpus(1), 0, 0, "n2:1")
	w.submit(job("train").team("b").gpus(1).submitted(hour))
	if d := w.cycle(); len(d.Migrations) != 0 {
		t.Fatalf("migrations %+v for a one-GPU job beyond its team's guarantee", d.Migrations)
	}
}

func TestServicesMoveToFreeANodeForBorrowedWork(t *testing.T) {
	// b borrows a whole node (two GPUs): only moves free one, since the
	// replicas on n1 fit beside those on n2.
	w := borrowWorld(t)
	w.submit(job("train").team("b").gpus(2).submitted(hour))
	d := w.cycle()
	var moved []string
	for _, m := range d.Migrations {
		if m.To.Node != "n2" || m.For != "train" {
			t.Errorf("migration %+v, want to n2 for train", m)
		}
		moved = append(moved, m.Job)
	}
	slices.Sort(moved)
	if !slices.Equal(moved, []string{"serve0", "serve1"}) || len(d.Preemptions) != 0 {
		t.Fatalf("moved %v, victims %v; want serve0 and serve1 moved, no victims; train waits %q", moved, victimsOf(d), reasonOf(d, "train"))
	}
	if got := reasonOf(d, "train"); got != WaitMoving {
		t.Errorf("train waits %q, want %q", got, WaitMoving)
	}
	// Without MoveForWholeNodes borrowed work waits for a node to empty.
	w = borrowWorld(t, func(c *Config) { c.MoveForWholeNodes = false })
	w.submit(job("train").team("b").gpus(2).submitted(hour))
	if d := w.cycle(); len(d.Migrations) != 0 {
		t.Fatalf("migrations %+v without MoveForWholeNodes", d.Migrations)
	}
}

func TestMovesAndEvictionsTogetherFreeANode(t *testing.T) {
	// On n1, c borrows one GPU and a's replica holds the other: b, owed
	// two GPUs on one node, may evict c's job but not a's service, and
	// neither alone frees n1. Together they do; on n2, a's own batch job
	// stays.
	st := fleet(t).nodes(2).gpus(2, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(3).burst(3), team("b").guarantee(2).burst(2), team("c").burst(2)).at(hour)
	w.migOff("n1", 0).migOff("n2", 1)
	w.running(job("borrow").team("c").gpus(1), 0, 0, "n1:0")
	w.runningSlice(job("serve").team("a").production().migProfile("1g.10gb"), "n1:1:1g.10gb@6")
	w.runningSlice(job("other").team("a").production().migProfile("1g.10gb"), "n2:0:1g.10gb@6")
	w.running(job("a-batch").team("a").gpus(1), 0, 0, "n2:1")
	w.submit(job("train").team("b").gpus(2).submitted(hour))
	d := w.cycle()
	if got := victimsOf(d); !slices.Equal(got, []string{"borrow"}) {
		t.Fatalf("victims %v, want [borrow]; train waits %q", got, reasonOf(d, "train"))
	}
	if len(d.Migrations) != 1 || d.Migrations[0].Job != "serve" || d.Migrations[0].To.Node != "n2" {
		t.Fatalf("migrations %+v, want serve moved to n2", d.Migrations)
	}
	if got := reasonOf(d, "train"); got != WaitPreempting && got != WaitMoving {
		t.Errorf("train waits %q", got)
	}
	w.release().moved()
	d = w.cycle()
	if len(d.Reconfigs) != 1 || d.Reconfigs[0].Node != "n1" || d.Reconfigs[0].GPU != 1 || d.Reconfigs[0].MIG {
		t.Fatalf("reconfigs %+v, want n1's GPU 1 turned whole; train waits %q", d.Reconfigs, reasonOf(d, "train"))
	}
	w.uncordonAll()
	if d := w.cycle(); !slices.Contains(startedJobs(d), "train") {
		t.Fatalf("train did not start on n1: %q", reasonOf(d, "train"))
	}
}

func TestAFailedMoveSearchForBorrowedWorkHoldsOffTheNextForAMinute(t *testing.T) {
	// Every MIG GPU is full but for one free instance on each of n1's:
	// neither node's replicas find room elsewhere, and borrowed work turns
	// no idle GPU to MIG for them.
	w := borrowWorld(t)
	for k := 0; k < 5; k++ {
		w.runningSlice(job(fmt.Sprintf("fill%d", k)).team("a").production().migProfile("1g.10gb"), fmt.Sprintf("n2:0:1g.10gb@%d", k))
		for g := 0; g < 2; g++ {
			w.runningSlice(job(fmt.Sprintf("n1fill%d-%d", g, k)).team("a").production().migProfile("1g.10gb"), fmt.Sprintf("n1:%d:1g.10gb@%d", g, k))
		}
	}
	w.submit(job("train").team("b").gpus(2).submitted(hour))
	if d := w.cycle(); len(d.Migrations) != 0 || len(d.Reconfigs) != 0 {
		t.Fatalf("migrations %+v, reconfigs %+v with no MIG room for the replicas", d.Migrations, d.Reconfigs)
	}
	// n1 empties but for serve0 and serve1: n2's seven replicas now fit
	// there. Another borrower asks within the minute: no search yet.
	for k := 0; k < 5; k++ {
		w.finish(fmt.Sprintf("n1fill0-%d", k)).finish(fmt.Sprintf("n1fill1-%d", k))
	}
	w.at(hour + 30*time.Second)
	w.submit(job("train2").team("b").gpus(2).submitted(hour + 30*time.Second))
	if d := w.cycle(); len(d.Migrations) != 0 {
		t.Fatalf("migrations %+v within a minute of a failed search", d.Migrations)
	}
	w.at(hour + time.Minute)
	if d := w.cycle(); len(d.Migrations) != 7 {
		t.Fatalf("migrations %+v a minute after, want n2's seven replicas moved", d.Migrations)
	}
}

// relocWorld: on n1, c's experiment (within c's guarantee, last
// checkpointed at checkpoint) holds GPU 0 and a's replica serve GPU 1; on
// n2 and n3 a's batch jobs, within a's guarantee, hold one GPU each, n2's
// other GPU is idle and a's replica on n3 leaves room beside it. b is owed
// two GPUs on one node and asks for them: only n1 can be freed, by moving
// serve to n3 and starting the experiment again on n2.
func relocWorld(t *testing.T, checkpoint time.Duration, tweak ...func(*Config)) *world {
	st := fleet(t).nodes(3).gpus(2, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st, tweak...),
		team("a").guarantee(3).burst(3), team("b").guarantee(2).burst(2), team("c").guarantee(1).burst(1)).at(hour)
	w.migOff("n1", 0).migOff("n2", 0, 1).migOff("n3", 1)
	w.running(job("exp").team("c").bestEffort().gpus(1), 0, checkpoint, "n1:0")
	w.runningSlice(job("serve").team("a").production().migProfile("1g.10gb"), "n1:1:1g.10gb@6")
	w.running(job("a-batch").team("a").gpus(1), 0, 0, "n2:0")
	w.runningSlice(job("other").team("a").production().migProfile("1g.10gb"), "n3:0:1g.10gb@6")
	w.running(job("a-batch2").team("a").gpus(1), 0, 0, "n3:1")
	w.submit(job("train").team("b").gpus(2).submitted(hour))
	return w
}

func TestAClaimRelocatesCheckpointedWorkItMayNotEvict(t *testing.T) {
	w := relocWorld(t, hour-5*time.Minute)
	d := w.cycle()
	if got := victimsOf(d); !slices.Equal(got, []string{"exp"}) {
		t.Fatalf("victims %v, want [exp] (to start again on n2); train waits %q", got, reasonOf(d, "train"))
	}
	if len(d.Migrations) != 1 || d.Migrations[0].Job != "serve" || d.Migrations[0].To.Node != "n3" {
		t.Fatalf("migrations %+v, want serve moved to n3", d.Migrations)
	}
	// The experiment, queued again within its team's guarantee, starts on
	// n2's idle GPU; train takes n1 once the replica has moved.
	w.release().moved()
	w.job("exp").Submitted = w.now
	d = w.cycle()
	if !slices.Contains(startedJobs(d), "exp") || w.job("exp").Placed[0].Node != "n2" {
		t.Fatalf("exp did not start again on n2: starts %v, exp waits %q", startedJobs(d), reasonOf(d, "exp"))
	}
	w.uncordonAll()
	if d := w.cycle(); !slices.Contains(startedJobs(d), "train") || w.job("train").Placed[0].Node != "n1" {
		t.Fatalf("train did not start on n1: %q", reasonOf(d, "train"))
	}
}

func TestNoRelocationOfWorkThatWouldLoseMuch(t *testing.T) {
	// Last checkpointed 40 minutes ago: relocating it would lose them.
	w := relocWorld(t, hour-40*time.Minute)
	if d := w.cycle(); len(d.Preemptions) != 0 || len(d.Migrations) != 0 {
		t.Fatalf("victims %v, migrations %+v: exp would lose 40 minutes", victimsOf(d), d.Migrations)
	}
}

func TestAClaimOwedForAMinuteRelocatesWorkCheckpointedLonger(t *testing.T) {
	// Last checkpointed 20 minutes ago: more than relocateLoss, within
	// relocateLossOwed. train, owed from the first cycle, relocates exp
	// once it has been owed for owedLong, not before.
	w := relocWorld(t, hour-20*time.Minute)
	if d := w.cycle(); len(d.Preemptions) != 0 || len(d.Migrations) != 0 {
		t.Fatalf("victims %v, migrations %+v as train became owed: exp would lose 20 minutes", victimsOf(d), d.Migrations)
	}
	d := w.at(hour + owedLong).cycle()
	if got := victimsOf(d); !slices.Equal(got, []string{"exp"}) {
		t.Fatalf("victims %v after train was owed for %v, want [exp]; train waits %q", got, owedLong, reasonOf(d, "train"))
	}
}

func TestNoRelocationWithoutRelocate(t *testing.T) {
	w := relocWorld(t, hour-5*time.Minute, func(c *Config) { c.Relocate = false })
	if d := w.cycle(); len(d.Preemptions) != 0 || len(d.Migrations) != 0 {
		t.Fatalf("victims %v, migrations %+v without Relocate", victimsOf(d), d.Migrations)
	}
}

func TestAServiceJustMovedStaysPutForMoveCooldown(t *testing.T) {
	// All three services had a replica moved half a cooldown ago (for
	// other claims): train may not move any of them yet. Without the
	// cooldown, two claims (or one claim's plans at the same instant)
	// moved one replica back and forth without end, and the simulated
	// clock stopped.
	w := movingWorld(t)
	last := hour - moveCooldown/2
	for _, id := range []string{"serve", "other1", "other2"} {
		w.sch.movedAt[id] = last
	}
	if d := w.cycle(); len(d.Migrations) != 0 {
		t.Fatalf("migrations %+v %v after the services last moved, want none", d.Migrations, moveCooldown/2)
	}
	d := w.at(last + moveCooldown).cycle()
	if len(d.Migrations) == 0 {
		t.Fatalf("after the cooldown: no migration; train waits %q", reasonOf(d, "train"))
	}
	for _, m := range d.Migrations {
		if at := w.sch.movedAt[m.Job]; at != last+moveCooldown {
			t.Errorf("%s's last move recorded at %v, want %v", m.Job, at, last+moveCooldown)
		}
	}
}

func TestAClaimRelocatesWorkWithNoServiceToMove(t *testing.T) {
	// n1 holds c's experiment, n2 a's batch job, each with a GPU idle:
	// train (b, owed 2 GPUs on one node) may evict neither, and there is
	// no replica to move. The experiment can start again on n2's idle GPU.
	// Relocation used to come only with a move, so train waited for the
	// experiment to end.
	st := fleet(t).nodes(2).gpus(2, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(1).burst(1), team("b").guarantee(2).burst(2), team("c").guarantee(1).burst(1)).at(hour)
	w.running(job("exp").team("c").bestEffort().gpus(1), 0, hour-5*time.Minute, "n1:0")
	w.running(job("a-batch").team("a").gpus(1), 0, 0, "n2:0")
	w.submit(job("train").team("b").gpus(2).submitted(hour))
	d := w.cycle()
	if got := victimsOf(d); !slices.Equal(got, []string{"exp"}) || len(d.Migrations) != 0 {
		t.Fatalf("victims %v, migrations %+v, want [exp] and none; train waits %q", got, d.Migrations, reasonOf(d, "train"))
	}
	expRestartsOnN2TrainStartsOnN1(t, w)
}

func TestARelocatedJobGetsRoomFromBorrowedWorkElsewhere(t *testing.T) {
	// n1 holds c's experiment (c within its guarantee) and an idle GPU;
	// n2 holds d's borrowed job and a's batch job (a within its
	// guarantee, last checkpointed an hour ago). train (b, owed 2 GPUs
	// on one node) may relocate the experiment, which finds no room
	// elsewhere until d's job, which train may evict anyway, leaves n2.
	st := fleet(t).nodes(2).gpus(2, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(1).burst(1), team("b").guarantee(2).burst(2), team("c").guarantee(1).burst(1), team("d").burst(4)).at(hour)
	w.running(job("exp").team("c").bestEffort().gpus(1), 0, hour-5*time.Minute, "n1:0")
	w.running(job("d-job").team("d").bestEffort().gpus(1), 0, 0, "n2:0")
	w.running(job("a-batch").team("a").gpus(1), 0, 0, "n2:1")
	w.submit(job("train").team("b").gpus(2).submitted(hour))
	d := w.cycle()
	got := victimsOf(d)
	slices.Sort(got)
	if !slices.Equal(got, []string{"d-job", "exp"}) {
		t.Fatalf("victims %v, want [d-job exp]; train waits %q", got, reasonOf(d, "train"))
	}
	expRestartsOnN2TrainStartsOnN1(t, w)
}

// expRestartsOnN2TrainStartsOnN1 ends the victims' grace, queues exp
// again and checks that the next cycle starts it on n2 and train on n1.
func expRestartsOnN2TrainStartsOnN1(t *testing.T, w *world) {
	t.Helper()
	w.release()
	w.job("exp").Submitted = w.now
	d := w.cycle()
	if !slices.Contains(startedJobs(d), "exp") || w.job("exp").Placed[0].Node != "n2" {
		t.Fatalf("exp did not start again on n2: starts %v, exp waits %q", startedJobs(d), reasonOf(d, "exp"))
	}
	if !slices.Contains(startedJobs(d), "train") || w.job("train").Placed[0].Node != "n1" {
		t.Fatalf("train did not start on n1: starts %v, train waits %q", startedJobs(d), reasonOf(d, "train"))
	}
}

func TestAClaimRelocatesAnotherTeamsGangOfItsClass(t *testing.T) {
	// a's 2-task gang, within a's guarantee and checkpointed 5 minutes
	// ago, holds one GPU of each node; b is owed two GPUs on one node, for
	// a job of the same class, which may not evict the gang. Restarted
	// from its checkpoint, the gang fits on n2 alone. Before, only
	// one-task jobs of a lower class were relocated, and on the default
	// scenario ads' 8-GPU fine-tunes waited for hours behind one GPU of a
	// research pretraining gang on each node.
	st := fleet(t).nodes(2).gpus(2, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(2).burst(2), team("b").guarantee(2).burst(2)).at(hour)
	w.running(job("pre").team("a").gang(2).gpus(1), 0, hour-5*time.Minute, "n1:0", "n2:0")
	w.submit(job("train").team("b").gpus(2).submitted(hour))
	d := w.cycle()
	if got := victimsOf(d); !slices.Equal(got, []string{"pre"}) {
		t.Fatalf("victims %v, want [pre]; train waits %q", got, reasonOf(d, "train"))
	}
	w.release()
	w.job("pre").Submitted = w.now
	d = w.cycle()
	if !slices.Contains(startedJobs(d), "pre") || len(startsOf(d, "pre")) != 2 || !slices.Equal(nodesOf(startsOf(d, "pre")), []string{"n2"}) {
		t.Fatalf("pre did not start again on n2: starts %+v, pre waits %q", startsOf(d, "pre"), reasonOf(d, "pre"))
	}
	if !slices.Contains(startedJobs(d), "train") || w.job("train").Placed[0].Node != "n1" {
		t.Fatalf("train did not start on n1: starts %v, train waits %q", startedJobs(d), reasonOf(d, "train"))
	}
}

func TestNoRelocationOfTheClaimantsOwnTeamOrOfProduction(t *testing.T) {
	for _, c := range []struct {
		name, team string
		class      workload.Class
	}{
		{"b's own gang", "b", workload.Batch},
		{"a's production", "a", workload.Production},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := fleet(t).nodes(2).gpus(2, "H100-80GB").build()
			w := newWorld(t, st, newScheduler(t, "partita", st),
				team("a").guarantee(2).burst(2), team("b").guarantee(4).burst(4)).at(hour)
			w.running(job("pre").team(c.team).class(c.class).gang(2).gpus(1), 0, hour-5*time.Minute, "n1:0", "n2:0")
			cl := workload.Batch
			if c.class == workload.Production {
				cl = workload.Production
			}
			w.submit(job("train").team("b").class(cl).gpus(2).submitted(hour))
			if d := w.cycle(); slices.Contains(victimsOf(d), "pre") {
				t.Fatalf("victims %v: a job of the claim's class is relocated only for another team, and production never", victimsOf(d))
			}
		})
	}
}

func TestARelocatedJobMayTakeAnIdleMIGGPUTurnedWhole(t *testing.T) {
	// c's experiment holds n1's GPU 0; n2's GPU 0 is an idle MIG GPU and
	// its GPU 1 holds a's batch job. b is owed two GPUs on one node: n1,
	// once the experiment starts again on n2's MIG GPU turned whole.
	st := fleet(t).nodes(2).gpus(2, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(1).burst(1), team("b").guarantee(2).burst(2), team("c").guarantee(1).burst(1)).at(hour)
	w.migOff("n1", 0, 1).migOff("n2", 1)
	w.running(job("exp").team("c").bestEffort().gpus(1), 0, hour-5*time.Minute, "n1:0")
	w.running(job("a-batch").team("a").gpus(1), 0, 0, "n2:1")
	w.submit(job("train").team("b").gpus(2).submitted(hour))
	d := w.cycle()
	if got := victimsOf(d); !slices.Equal(got, []string{"exp"}) {
		t.Fatalf("victims %v, want [exp] (to start again on n2's GPU 0); train waits %q", got, reasonOf(d, "train"))
	}
}

func TestReplicasToMoveGetAnIdleGPUTurnedToMIG(t *testing.T) {
	// n1: a's replica serve on GPU 0 (MIG), GPU 1 idle and whole. n2: GPU
	// 0 idle and whole, GPU 1 held by a's batch job. b is owed two GPUs
	// on one node: only n1, once serve moves, and no MIG GPU has room for
	// it. n2's idle GPU is turned to MIG for it first; serve moves once
	// the change is done. Before, the claim waited for serve to end.
	st := fleet(t).nodes(2).gpus(2, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(2).burst(2), team("b").guarantee(2).burst(2)).at(hour)
	w.migOff("n1", 1).migOff("n2", 0, 1)
	w.runningSlice(job("serve").team("a").production().migProfile("3g.40gb"), "n1:0:3g.40gb@4")
	w.running(job("a-batch").team("a").gpus(1), 0, 0, "n2:1")
	w.submit(job("train").team("b").gpus(2).submitted(hour))
	d := w.cycle()
	if len(d.Migrations) != 0 || len(d.Preemptions) != 0 {
		t.Fatalf("migrations %+v, victims %v before n2's GPU is MIG", d.Migrations, victimsOf(d))
	}
	if len(d.Reconfigs) != 1 || d.Reconfigs[0].Node != "n2" || d.Reconfigs[0].GPU != 0 || !d.Reconfigs[0].MIG || d.Reconfigs[0].For != "train" {
		t.Fatalf("reconfigs %+v, want n2's GPU 0 turned to MIG for train; train waits %q", d.Reconfigs, reasonOf(d, "train"))
	}
	if got := reasonOf(d, "train"); got != WaitReconfig {
		t.Errorf("train waits %q, want %q", got, WaitReconfig)
	}
	w.uncordonAll()
	d = w.cycle()
	if len(d.Migrations) != 1 || d.Migrations[0].Job != "serve" || d.Migrations[0].To.Node != "n2" || d.Migrations[0].Creates {
		t.Fatalf("migrations %+v, want serve moved to n2's new instance; train waits %q", d.Migrations, reasonOf(d, "train"))
	}
}

func TestAClaimMovesMoreThanEightReplicas(t *testing.T) {
	// n1's two GPUs hold ten 1g.10gb replicas of a's services; n2's hold
	// a notebook each (not movable) and room for twelve 1g.10gb. b is owed
	// two whole GPUs on one node: only moving all ten frees n1.
	st := fleet(t).nodes(2).gpus(2, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(20).burst(20), team("b").guarantee(2).burst(2)).at(hour)
	for k := 0; k < 10; k++ {
		w.runningSlice(job(fmt.Sprintf("s%d", k)).team("a").production().migProfile("1g.10gb"), fmt.Sprintf("n1:%d:1g.10gb@%d", k/5, k%5))
	}
	w.runningSlice(job("nb0").team("a").bestEffort().migProfile("1g.10gb"), "n2:0:1g.10gb@6")
	w.runningSlice(job("nb1").team("a").bestEffort().migProfile("1g.10gb"), "n2:1:1g.10gb@6")
	w.submit(job("train").team("b").gpus(2).submitted(hour))
	d := w.cycle()
	if len(d.Preemptions) != 0 {
		t.Fatalf("victims %v: a is within its guarantee", victimsOf(d))
	}
	if len(d.Migrations) != 10 {
		t.Fatalf("%d migrations, want all ten replicas moved off n1; train waits %q", len(d.Migrations), reasonOf(d, "train"))
	}
	for _, m := range d.Migrations {
		if m.To.Node != "n2" || m.For != "train" {
			t.Errorf("migration %+v, want to n2 for train", m)
		}
	}
}

// pinnedWorld: n1's GPU holds six of s's service replicas and a free
// 1g.10gb instance, n2's r's notebook; r starts another notebook.
func pinnedWorld(t *testing.T, tweak ...func(*Config)) *world {
	st := fleet(t).nodes(1).gpus(1, "H100-80GB").layout("1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6").
		nodes(1).gpus(1, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st, tweak...),
		team("r").guarantee(1).burst(1), team("s").guarantee(2).burst(2)).at(hour)
	for k := 1; k < 7; k++ {
		w.runningSlice(job(fmt.Sprintf("s%d", k)).team("s").production().migProfile("1g.10gb"), fmt.Sprintf("n1:0:1g.10gb@%d", k))
	}
	w.runningSlice(job("nb0").team("r").bestEffort().migProfile("1g.10gb"), "n2:0:1g.10gb@6")
	w.submit(job("nb1").team("r").bestEffort().migProfile("1g.10gb").submitted(hour))
	return w
}

func TestANotebookJoinsTheNodeOfOtherWorkThatCannotMove(t *testing.T) {
	w := pinnedWorld(t)
	if d := w.cycle(); !slices.Contains(startedJobs(d), "nb1") || w.job("nb1").Placed[0].Node != "n2" {
		t.Fatalf("nb1 started %v, want on n2 beside nb0; waits %q", placedNodes(w.job("nb1")), reasonOf(d, "nb1"))
	}
	// Without GroupPinned the placement policy packs it beside the
	// services: the test above shows the grouping, not the policy.
	w = pinnedWorld(t, func(c *Config) { c.GroupPinned = false })
	if d := w.cycle(); !slices.Contains(startedJobs(d), "nb1") || w.job("nb1").Placed[0].Node != "n1" {
		t.Fatalf("without GroupPinned nb1 started %v, want on n1; waits %q", placedNodes(w.job("nb1")), reasonOf(d, "nb1"))
	}
}

func placedNodes(j *Job) []string {
	var out []string
	for _, a := range j.Placed {
		if a != nil {
			out = append(out, a.Node)
		}
	}
	return out
}

func TestAMovePlanTriesEveryNodeNotOnlyTheCheapest(t *testing.T) {
	// n1-n3 each hold two 3g.40gb replicas of a's services, n4 two
	// 1g.10gb replicas, n5 two of a's notebooks (which do not move): MIG
	// room is left only in 1g.10gb holes. b is owed a whole GPU. Freeing
	// n1, n2 or n3 costs as many moves as n4, and is tried first, but
	// their replicas find no room; n4's fit in n5's holes.
	st := fleet(t).nodes(5).gpus(1, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(5).burst(5), team("b").guarantee(1).burst(1)).at(hour)
	for n := 1; n <= 3; n++ {
		for _, at := range []int{0, 4} {
			w.runningSlice(job(fmt.Sprintf("s%d-%d", n, at)).team("a").production().migProfile("3g.40gb"), fmt.Sprintf("n%d:0:3g.40gb@%d", n, at))
		}
	}
	w.runningSlice(job("r0").team("a").production().migProfile("1g.10gb"), "n4:0:1g.10gb@0")
	w.runningSlice(job("r4").team("a").production().migProfile("1g.10gb"), "n4:0:1g.10gb@4")
	w.notebookHoles("n5")
	w.submit(job("train").team("b").gpus(1).submitted(hour))
	wantOnlyR0R4MovedTo(t, w.cycle(), "train", "n5")
}

func TestAOneGPUClaimTriesEachGPUOfANode(t *testing.T) {
	// n1's GPU 0 holds a 3g.40gb replica of a's, its GPU 1 two 1g.10gb
	// replicas; n2 holds two of a's notebooks (which do not move), so MIG
	// room is left only in 1g.10gb holes. b is owed one whole GPU.
	// Freeing GPU 0 is the cheaper plan (one move), but its replica finds
	// no room; GPU 1's two fit in n2's holes.
	st := fleet(t).nodes(1).gpus(2, "H100-80GB").mig().nodes(1).gpus(1, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(3).burst(3), team("b").guarantee(1).burst(1)).at(hour)
	w.runningSlice(job("big").team("a").production().migProfile("3g.40gb"), "n1:0:3g.40gb@0")
	w.runningSlice(job("r0").team("a").production().migProfile("1g.10gb"), "n1:1:1g.10gb@0")
	w.runningSlice(job("r4").team("a").production().migProfile("1g.10gb"), "n1:1:1g.10gb@4")
	w.notebookHoles("n2")
	w.submit(job("exp").team("b").gpus(1).submitted(hour))
	wantOnlyR0R4MovedTo(t, w.cycle(), "exp", "n2")
}

// wantOnlyR0R4MovedTo checks that claim's cycle evicted nothing (team a
// is within its guarantee) and moved replicas r0 and r4, both to node to.
func wantOnlyR0R4MovedTo(t *testing.T, d Decision, claim, to string) {
	t.Helper()
	if len(d.Preemptions) != 0 {
		t.Fatalf("victims %v: a is within its guarantee", victimsOf(d))
	}
	if len(d.Migrations) != 2 {
		t.Fatalf("migrations %+v, want r0 and r4 moved to %s; %s waits %q", d.Migrations, to, claim, reasonOf(d, claim))
	}
	for _, m := range d.Migrations {
		if (m.Job != "r0" && m.Job != "r4") || m.To.Node != to {
			t.Errorf("migration %+v, want r0 or r4 moved to %s", m, to)
		}
	}
}

// notebookHoles puts two of team a's notebooks on GPU 0 of node, at @0
// and @4: no half of the GPU is left for a 3g.40gb, and the notebooks do
// not move.
func (w *world) notebookHoles(node string) {
	w.runningSlice(job("nb0").team("a").bestEffort().migProfile("1g.10gb"), node+":0:1g.10gb@0")
	w.runningSlice(job("nb4").team("a").bestEffort().migProfile("1g.10gb"), node+":0:1g.10gb@4")
}

func TestMovesForOneClaimKeepOffTheNodeOfAnother(t *testing.T) {
	// n1: GPU 0 idle, a's 1g.10gb replica serve1 on GPU 1. n2: GPU 0
	// idle, a's 7g.80gb replica serve2 on GPU 1. m: room for one more
	// 1g.10gb. b and d are each owed two GPUs on one node. b, first, gets
	// n1 by moving serve1 to m. While serve1's old copy is still on n1,
	// d plans for n2: serve2 finds no MIG room, and n1's idle GPU, turned
	// to MIG, would take it, but n1 is b's. (Default scenario, seed 16: a
	// second claim's replicas took the GPUs the first had freed, and the
	// first waited 586 s instead of 60.)
	st := fleet(t).nodes(2).gpus(2, "H100-80GB").mig().nodes(1).named("m").gpus(1, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(3).burst(3), team("b").guarantee(2).burst(2), team("d").guarantee(2).burst(2)).at(hour)
	w.migOff("n1", 0).migOff("n2", 0)
	w.runningSlice(job("serve1").team("a").production().migProfile("1g.10gb"), "n1:1:1g.10gb@6")
	w.runningSlice(job("serve2").team("a").production().migProfile("7g.80gb"), "n2:1:7g.80gb@0")
	for k := range 6 {
		w.runningSlice(job(fmt.Sprintf("fill%d", k)).team("a").production().migProfile("1g.10gb"), fmt.Sprintf("m:0:1g.10gb@%d", k))
	}
	w.submit(job("train-b").team("b").gpus(2).submitted(hour - time.Minute))
	w.submit(job("train-d").team("d").gpus(2).submitted(hour))
	d := w.cycle()
	if len(d.Migrations) != 1 || d.Migrations[0].Job != "serve1" || d.Migrations[0].To.Node != "m" || d.Migrations[0].For != "train-b" {
		t.Fatalf("migrations %+v, want serve1 moved to m for train-b; train-b waits %q", d.Migrations, reasonOf(d, "train-b"))
	}
	w.at(hour + 2*moveCooldown)
	d = w.cycle()
	for _, m := range d.Migrations {
		if m.To.Node == "n1" {
			t.Errorf("%s moved to n1 for %s: n1 is train-b's", m.Job, m.For)
		}
	}
	for _, r := range d.Reconfigs {
		if r.Node == "n1" && r.For != "train-b" {
			t.Errorf("n1's GPU %d changed for %s: n1 is train-b's", r.GPU, r.For)
		}
	}
	w.moved()
	w.cycle()
	w.uncordonAll()
	if d := w.cycle(); !slices.Contains(startedJobs(d), "train-b") || w.job("train-b").Placed[0].Node != "n1" {
		t.Fatalf("train-b did not start on n1: %q", reasonOf(d, "train-b"))
	}
}

func TestAClaimEvictsFirstWhenTheReplicasFitOnlyWhereItsVictimsLeave(t *testing.T) {
	// n1: c's borrowed gang on GPU 0, a's 3g.40gb replica serve on GPU 1
	// (MIG). n2: the gang's other task on GPU 0, a's batch job (within
	// a's guarantee, long unsaved) on GPU 1. b is owed two GPUs on one
	// node: only n1, by evicting the gang and moving serve, which fits
	// nowhere while the gang runs. The gang is evicted first; its GPU on
	// n2 is turned to MIG, serve moves there, and b starts on n1.
	st := fleet(t).nodes(2).gpus(2, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(2).burst(2), team("b").guarantee(2).burst(2), team("c").burst(2)).at(hour)
	w.migOff("n1", 0).migOff("n2", 0, 1)
	w.running(job("gang").team("c").gang(2).gpus(1), 0, 0, "n1:0", "n2:0")
	w.runningSlice(job("serve").team("a").production().migProfile("3g.40gb"), "n1:1:3g.40gb@4")
	w.running(job("a-batch").team("a").gpus(1), 0, 0, "n2:1")
	w.submit(job("train").team("b").gpus(2).submitted(hour))
	d := w.cycle()
	if got := victimsOf(d); !slices.Equal(got, []string{"gang"}) || len(d.Migrations) != 0 {
		t.Fatalf("victims %v, migrations %+v, want the gang evicted first; train waits %q", got, d.Migrations, reasonOf(d, "train"))
	}
	if got := reasonOf(d, "train"); got != WaitPreempting {
		t.Errorf("train waits %q, want %q", got, WaitPreempting)
	}
	w.release()
	d = w.cycle()
	if len(d.Reconfigs) != 1 || d.Reconfigs[0].Node != "n2" || d.Reconfigs[0].GPU != 0 || !d.Reconfigs[0].MIG || d.Reconfigs[0].For != "train" {
		t.Fatalf("reconfigs %+v, want n2's GPU 0 turned to MIG for train; train waits %q", d.Reconfigs, reasonOf(d, "train"))
	}
	if slices.Contains(startedJobs(d), "gang") {
		t.Fatalf("the gang started again on n1 or n2, which train needs")
	}
	for range 6 {
		w.uncordonAll().moved()
		w.at(w.now + 30*time.Second)
		if d := w.cycle(); slices.Contains(startedJobs(d), "train") {
			if got := w.job("train").Placed[0].Node; got != "n1" {
				t.Fatalf("train on %s, want n1", got)
			}
			if got := w.job("serve").Placed[0].Node; got != "n2" {
				t.Fatalf("serve on %s, want n2", got)
			}
			return
		}
	}
	t.Fatalf("train did not start")
}

// guardWorld: on n1, b's training job holds the only GPU, all of b's
// guarantee; on n2, a's replica serve holds a 1g instance; with room, n3
// holds another of a's replicas. a's 70B service, within a's guarantee,
// asks for a whole GPU: it may evict b's job (a lower class), but that
// leaves b owed a GPU.
func guardWorld(t *testing.T, room bool) *world {
	nodes := 2
	if room {
		nodes = 3
	}
	st := fleet(t).nodes(nodes).gpus(1, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(3).burst(3), team("b").guarantee(1).burst(1)).at(hour)
	w.migOff("n1", 0)
	w.running(job("b-train").team("b").gpus(1), 0, 0, "n1:0")
	w.runningSlice(job("serve").team("a").production().migProfile("1g.10gb"), "n2:0:1g.10gb@6")
	if room {
		w.runningSlice(job("other").team("a").production().migProfile("1g.10gb"), "n3:0:1g.10gb@6")
	}
	w.submit(job("big").team("a").production().gpus(1).submitted(hour))
	return w
}

func TestProductionMovesAServiceRatherThanTakeAnotherTeamsGuarantee(t *testing.T) {
	w := guardWorld(t, true)
	d := w.cycle()
	if got := victimsOf(d); len(got) != 0 {
		t.Fatalf("victims %v: b would be taken below its guarantee while a move frees a GPU", got)
	}
	if len(d.Migrations) != 1 || d.Migrations[0].Job != "serve" || d.Migrations[0].To.Node != "n3" || d.Migrations[0].For != "big" {
		t.Fatalf("migrations %+v, want serve moved to n3 for big; big waits %q", d.Migrations, reasonOf(d, "big"))
	}
}

func TestProductionStillEvictsWhenNoMoveFreesAGPU(t *testing.T) {
	w := guardWorld(t, false)
	d := w.cycle()
	if got := victimsOf(d); !slices.Equal(got, []string{"b-train"}) {
		t.Fatalf("victims %v, want [b-train]: serve has nowhere to go; big waits %q", got, reasonOf(d, "big"))
	}
	if len(d.Migrations) != 0 {
		t.Errorf("migrations %+v, want none", d.Migrations)
	}
}

func TestAClaimMovesUpToMaxMovesReplicas(t *testing.T) {
	// n1: three MIG GPUs packed with a's 1g.10gb replicas (21 of them)
	// and one free whole GPU; n2: four MIG GPUs, each with one of a's
	// notebooks (not movable, not evictable) and six free instances. b is
	// owed four GPUs on one node: only n1 can be freed, by 21 moves
	// (more than the 16 maxMoves once was).
	st := fleet(t).nodes(2).gpus(4, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(4).burst(4), team("b").guarantee(4).burst(4)).at(hour)
	w.migOff("n1", 3)
	for k := range 3 {
		for slot := range 7 {
			w.runningSlice(job(fmt.Sprintf("serve-%d-%d", k, slot)).team("a").production().migProfile("1g.10gb"), fmt.Sprintf("n1:%d:1g.10gb@%d", k, slot))
		}
	}
	for k := range 4 {
		w.runningSlice(job(fmt.Sprintf("notebook-%d", k)).team("a").bestEffort().migProfile("1g.10gb"), fmt.Sprintf("n2:%d:1g.10gb@6", k))
	}
	w.submit(job("train").team("b").gpus(4).submitted(hour))
	d := w.cycle()
	if len(d.Migrations) != 21 {
		t.Fatalf("%d migrations, want 21 (every replica off n1); train waits %q", len(d.Migrations), reasonOf(d, "train"))
	}
	for _, m := range d.Migrations {
		if m.To.Node != "n2" || m.For != "train" {
			t.Fatalf("migration %+v, want to n2 for train", m)
		}
	}
}

func TestAReplicaToMoveGetsItsInstanceFromFreeSpaceReshaped(t *testing.T) {
	// n1: a's 7B service replica on a 3g.40gb instance, the rest free. n2:
	// a's notebook on a 2g.20gb instance (not movable) and the free space
	// cut into four 1g.10gb instances, where no 3g.40gb fits as it is. b
	// is owed a whole GPU: n1 is freed by moving the replica to n2 once
	// n2's free instances are replaced by a 3g.40gb (the notebook stays).
	st := fleet(t).nodes(2).gpus(1, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(2).burst(2), team("b").guarantee(1).burst(1)).at(hour)
	layout, err := gpu.ParseLayout("1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,2g.20gb@4")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.st.SetLayout("n2", 0, layout); err != nil {
		t.Fatal(err)
	}
	w.runningSlice(job("serve").team("a").production().migProfile("3g.40gb"), "n1:0:3g.40gb@0")
	w.runningSlice(job("notebook").team("a").bestEffort().migProfile("2g.20gb"), "n2:0:2g.20gb@4")
	w.submit(job("train").team("b").gpus(1).submitted(hour))
	d := w.cycle()
	if len(d.Preemptions) != 0 || len(d.Migrations) != 0 {
		t.Fatalf("victims %v, migrations %+v before n2 is re-partitioned", victimsOf(d), d.Migrations)
	}
	if len(d.Reconfigs) != 1 || d.Reconfigs[0].Node != "n2" || !d.Reconfigs[0].MIG || d.Reconfigs[0].For != "train" {
		t.Fatalf("reconfigs %+v, want n2's free space re-partitioned for train; train waits %q", d.Reconfigs, reasonOf(d, "train"))
	}
	got := d.Reconfigs[0].Layout
	for _, want := range []string{"3g.40gb@0", "2g.20gb@4"} {
		p, _ := gpu.ParsePlacement(want)
		if !slices.Contains(got, p) {
			t.Fatalf("n2's new layout %v lacks %s", got, want)
		}
	}
	w.uncordonAll()
	d = w.cycle()
	if len(d.Migrations) != 1 || d.Migrations[0].Job != "serve" || d.Migrations[0].To.Node != "n2" {
		t.Fatalf("migrations %+v, want serve moved to n2; train waits %q", d.Migrations, reasonOf(d, "train"))
	}
}

func TestMovesFirstOnlyAsTheyCanBeMadeNow(t *testing.T) {
	// big (a's production, within a's guarantee) asks for a node of two
	// GPUs. Evicting b's job frees n1 but leaves b owed; freeing n2 moves
	// serve, which has MIG room only once n3's idle GPU is turned to MIG
	// (c's service beside it, of big's class, stays). A MIG change for
	// the moves would make big wait 30 s before it evicts anyway: it
	// evicts at once.
	st := fleet(t).nodes(3).gpus(2, "H100-80GB").mig().build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(3).burst(3), team("b").guarantee(2).burst(2), team("c").guarantee(1).burst(1)).at(hour)
	w.migOff("n1", 0, 1).migOff("n2", 1).migOff("n3", 0, 1)
	w.running(job("b-train").team("b").gpus(2), 0, 0, "n1:0,1")
	w.runningSlice(job("serve").team("a").production().migProfile("1g.10gb"), "n2:0:1g.10gb@6")
	w.running(job("c-serve").team("c").production().gpus(1), 0, 0, "n3:1")
	w.submit(job("big").team("a").production().gpus(2).submitted(hour))
	d := w.cycle()
	if len(d.Reconfigs) != 0 || len(d.Migrations) != 0 {
		t.Fatalf("reconfigs %+v, migrations %+v: a MIG change made for moves first; big waits %q", d.Reconfigs, d.Migrations, reasonOf(d, "big"))
	}
	if got := victimsOf(d); !slices.Equal(got, []string{"b-train"}) {
		t.Fatalf("victims %v, want [b-train]; big waits %q", got, reasonOf(d, "big"))
	}
}

// stuckWorld: n1's MIG GPU holds b's own replica (1g.10gb) and a's
// 3g.40gb replica; n2's GPU is whole, held by c's 70B service; n3's MIG
// GPU holds two of c's services with a 1g.10gb hole beside them. c is
// within its guarantee. b is owed a whole GPU: only n1 can be freed, by
// moving b's replica to n3's hole and a's replica, which fits nowhere,
// out of the way. a borrows (no guarantee) unless aOwns.
func stuckWorld(t *testing.T, aOwns bool, tweak ...func(*Config)) *world {
	st := fleet(t).nodes(3).gpus(1, "H100-80GB").mig().build()
	a := team("a").burst(2)
	if aOwns {
		a.guarantee(1)
	}
	w := newWorld(t, st, newScheduler(t, "partita", st, tweak...),
		a, team("b").guarantee(2).burst(2), team("c").guarantee(2).burst(2)).at(hour)
	w.migOff("n2", 0)
	w.runningSlice(job("own").team("b").production().migProfile("1g.10gb"), "n1:0:1g.10gb@6")
	w.runningSlice(job("stuck").team("a").production().migProfile("3g.40gb"), "n1:0:3g.40gb@0")
	w.running(job("keep").team("c").production().gpus(1), 0, 0, "n2:0")
	w.runningSlice(job("c-big").team("c").production().migProfile("3g.40gb"), "n3:0:3g.40gb@0")
	w.runningSlice(job("c-mid").team("c").production().migProfile("2g.20gb"), "n3:0:2g.20gb@4")
	w.submit(job("train").team("b").gpus(1).submitted(hour))
	return w
}

// stuckAfter is how long b waits before a's replica is evicted, or -1.
func stuckAfter(t *testing.T, w *world) time.Duration {
	t.Helper()
	for waited := time.Duration(0); waited <= 3*time.Minute; waited += 15 * time.Second {
		w.at(hour + waited)
		d := w.cycle()
		if got := victimsOf(d); len(got) > 0 {
			if !slices.Equal(got, []string{"stuck"}) {
				t.Fatalf("victims %v, want a's replica stuck", got)
			}
			if len(d.Migrations) != 1 || d.Migrations[0].Job != "own" || d.Migrations[0].To.Node != "n3" || d.Migrations[0].For != "train" {
				t.Fatalf("migrations %+v, want b's replica moved to n3 for train", d.Migrations)
			}
			return waited
		}
		if len(d.Migrations) != 0 || slices.Contains(startedJobs(d), "train") {
			t.Fatalf("at +%v: migrations %+v, starts %v with a's replica in the way", waited, d.Migrations, startedJobs(d))
		}
	}
	return -1
}

func TestAnOwedClaimEvictsABorrowedReplicaThatHasNowhereToMove(t *testing.T) {
	w := stuckWorld(t, false, func(c *Config) { c.EvictStuckAfter = time.Minute })
	if got := stuckAfter(t, w); got != time.Minute {
		t.Fatalf("a's replica evicted after %v of train's wait, want 1m0s", got)
	}
	if got := reasonOf(w.decide(), "train"); got != WaitPreempting {
		t.Errorf("train waits %q, want %q", got, WaitPreempting)
	}
	if got := stuckAfter(t, stuckWorld(t, false, func(c *Config) { c.EvictStuckAfter = 0 })); got != -1 {
		t.Errorf("without EvictStuckAfter a's replica was evicted after %v", got)
	}
	if got := stuckAfter(t, stuckWorld(t, true, func(c *Config) { c.EvictStuckAfter = time.Minute })); got != -1 {
		t.Errorf("a's replica, within a's guarantee, was evicted after %v", got)
	}
}

func TestARelocatedGangGetsRoomFromBorrowedWorkElsewhere(t *testing.T) {
	// a's 2-task gang, within a's guarantee and checkpointed 5 minutes
	// ago, holds one GPU of n1 and one of n2; c's jobs, within c's
	// guarantee and checkpointed an hour ago, hold n2's other GPU and
	// one of n3; d borrows the rest. b is owed two GPUs on one node: only
	// n1 can be freed, by evicting d's job there and relocating the gang,
	// which finds room only once d's job on n3 leaves too. Before, a gang
	// that found no room elsewhere was never given any (seed 467 of the
	// default scenario: research's pretraining gang, two GPUs on each of
	// four nodes, kept ads' 8-GPU fine-tunes out for 40 minutes).
	gangWorld := func(tweak ...func(*Config)) *world {
		st := fleet(t).nodes(3).gpus(2, "H100-80GB").build()
		w := newWorld(t, st, newScheduler(t, "partita", st, tweak...),
			team("a").guarantee(2).burst(2), team("b").guarantee(2).burst(2), team("c").guarantee(2).burst(2), team("d").burst(4)).at(hour)
		w.running(job("pre").team("a").gang(2).gpus(1), 0, hour-5*time.Minute, "n1:0", "n2:0")
		w.running(job("d-1").team("d").bestEffort().gpus(1), 0, 0, "n1:1")
		w.running(job("c-1").team("c").gpus(1), 0, 0, "n2:1")
		w.running(job("c-2").team("c").gpus(1), 0, 0, "n3:0")
		w.running(job("d-2").team("d").bestEffort().gpus(1), 0, 0, "n3:1")
		w.submit(job("train").team("b").gpus(2).submitted(hour))
		return w
	}
	// roomAfter is how long train waits before the plan is made, or -1.
	roomAfter := func(w *world) time.Duration {
		waited, d := firstVictims(w, 4*time.Minute)
		if waited < 0 {
			return -1
		}
		if got := victimsOf(d); !slices.Equal(got, []string{"d-1", "d-2", "pre"}) {
			t.Fatalf("victims %v, want [d-1 d-2 pre]", got)
		}
		return waited
	}
	if got := roomAfter(gangWorld(func(c *Config) { c.GangRoomAfter = 0 })); got != -1 {
		t.Fatalf("without GangRoomAfter the gang was given room after %v", got)
	}
	w := gangWorld()
	if got := roomAfter(w); got != 2*time.Minute {
		t.Fatalf("the gang was given room after %v of train's wait, want 2m0s (GangRoomAfter)", got)
	}
	w.release()
	w.job("pre").Submitted = w.now
	d := w.cycle()
	if !slices.Contains(startedJobs(d), "pre") || !slices.Equal(nodesOf(startsOf(d, "pre")), []string{"n2", "n3"}) {
		t.Fatalf("pre did not start again on n2 and n3: starts %+v, pre waits %q", startsOf(d, "pre"), reasonOf(d, "pre"))
	}
	if !slices.Contains(startedJobs(d), "train") || w.job("train").Placed[0].Node != "n1" {
		t.Fatalf("train did not start on n1: starts %v, train waits %q", startedJobs(d), reasonOf(d, "train"))
	}
}

func TestRelocationRoundsThatDoNotStartTheClaimBackOff(t *testing.T) {
	// train relocates c's experiment off n1 round after round, and each
	// time another experiment of c's takes the GPU before train can (as
	// the evicted work, owed in turn, did on the default scenario at a
	// 2-second cadence: seed 205 evicted the same five experiments every
	// 90 s for hours). A plan that evicts is a preemption round like a
	// victim search's: past freeRounds, train's next waits.
	st := fleet(t).nodes(2).gpus(2, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st),
		team("a").guarantee(1).burst(1), team("b").guarantee(2).burst(2), team("c").guarantee(1).burst(1)).at(hour)
	exp := func(i int) string { return "exp-" + itoa(i) }
	w.running(job(exp(1)).team("c").bestEffort().gpus(1), 0, hour-5*time.Minute, "n1:0")
	w.running(job("a-batch").team("a").gpus(1), 0, 0, "n2:0")
	w.submit(job("train").team("b").gpus(2).submitted(hour))

	now, last := hour, hour
	for round := 1; round <= freeRounds+1; round++ {
		d := w.at(now).cycle()
		if got := victimsOf(d); !slices.Equal(got, []string{exp(round)}) || len(d.Migrations) != 0 {
			t.Fatalf("round %d: victims %v, migrations %+v, want [%s] relocated; train waits %q", round, got, d.Migrations, exp(round), reasonOf(d, "train"))
		}
		w.release().finish(exp(round))
		w.running(job(exp(round+1)).team("c").bestEffort().gpus(1), now, now, "n1:0")
		last = now
		now += 10 * time.Second
	}
	for _, at := range []time.Duration{now, last + searchBackoffFor - time.Second} {
		if d := w.at(at).cycle(); len(d.Preemptions) != 0 {
			t.Errorf("%v after round %d: train evicts %v; want it held off for %v", at-last, freeRounds+1, victimsOf(d), searchBackoffFor)
		}
	}
	next := exp(freeRounds + 2)
	if d := w.at(last + searchBackoffFor).cycle(); !slices.Equal(victimsOf(d), []string{next}) {
		t.Errorf("after the back-off: victims %v, want [%s]; train waits %q", victimsOf(d), next, reasonOf(d, "train"))
	}
}
