package standalone

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"partita.dev/partita/internal/api"
)

func TestEmbeddedDemoIsScenariosDemo(t *testing.T) {
	want, err := os.ReadFile("../../../scenarios/demo.yaml")
	if err != nil {
		t.Skip("scenarios/demo.yaml not found:", err)
	}
	if !bytes.Equal(want, DemoYAML) {
		t.Fatal("internal/standalone/demo.yaml differs from scenarios/demo.yaml: copy it again")
	}
}

func TestAJobRunsItsDurationAndIsCharged(t *testing.T) {
	f := newFixture(t, smallCluster)
	id := f.submit(spec{team: "a", gpu: whole(2), duration: time.Hour})
	f.step()
	// The GPUs start in MIG mode: the scheduler turns MIG off on two,
	// which takes the reconfiguration delay (30 s).
	f.run(time.Minute)
	if j := f.job(id); j.State != api.StateRunning || j.Attempts != 1 {
		t.Fatalf("after a minute: state %s attempts %d; want running 1", j.State, j.Attempts)
	}
	f.run(59 * time.Minute)
	if j := f.job(id); j.State != api.StateRunning {
		t.Fatalf("after 59m: %s; want running", j.State)
	}
	f.run(2 * time.Minute)
	j := f.job(id)
	if j.State != api.StateSucceeded || j.FinishedAt-j.StartedAt != time.Hour {
		t.Fatalf("after 61m: %s, ran %v; want succeeded after exactly 1h", j.State, j.FinishedAt-j.StartedAt)
	}
	if got := f.states(id); got != "queued admitted running succeeded" {
		t.Errorf("events = %s", got)
	}
	l := f.ledger()
	if len(l) != 4 {
		t.Fatalf("ledger has %d entries; want a begin and an end for each of 2 GPUs", len(l))
	}
	for _, e := range l[2:] {
		if e.Kind != "end" || e.At-l[0].At != time.Hour || e.Share != 7000 {
			t.Errorf("ledger end %+v; want 1h after its begin, share 7000", e)
		}
	}
}

func TestAMIGTaskWaitsForItsInstanceBeforeRunning(t *testing.T) {
	f := newFixture(t, smallCluster)
	id := f.submit(spec{team: "a", gpu: mig("1g.10gb"), duration: 10 * time.Minute})
	f.step()
	if j := f.job(id); j.State != api.StateAdmitted {
		t.Fatalf("state %s; want admitted while the instance is created", j.State)
	}
	f.run(time.Minute)
	j := f.job(id)
	if j.State != api.StateRunning {
		t.Fatalf("state %s after the reconfiguration delay; want running", j.State)
	}
	if g := j.Runtime.Placed[0].Grants[0]; g.Slice == nil || g.Slice.Profile != "1g.10gb" {
		t.Fatalf("placed on %+v; want a 1g.10gb slice", g)
	}
	if l := f.ledger(); len(l) != 1 || l[0].Share != 1000 || l[0].Slice == "" {
		t.Fatalf("ledger = %+v; want one begin of share 1000 (1/7 GPU) naming its slice", l)
	}
}

func TestPreemptedJobIsRequeuedAndLosesWorkSinceItsCheckpoint(t *testing.T) {
	f := newFixture(t, smallCluster)
	victim := f.submit(spec{team: "b", class: "best-effort", gpu: whole(4), tasks: 2, gang: 2, duration: 5 * time.Hour, checkpointEvery: 20 * time.Minute})
	f.step()
	f.run(50 * time.Minute)
	claim := f.submit(spec{team: "a", class: "production", gpu: whole(4), duration: time.Hour})
	f.run(time.Minute)
	if j := f.job(victim); j.State != api.StatePreempted {
		t.Fatalf("victim %s; want preempted", j.State)
	}
	f.run(2 * time.Minute)
	if j := f.job(claim); j.State != api.StateRunning {
		t.Fatalf("claim %s; want running once the victim left", j.State)
	}
	v := f.job(victim)
	if v.State != api.StateQueued || !strings.Contains(f.states(victim), "preempted requeued") {
		t.Fatalf("victim %s, events %s; want queued after preempted, requeued", v.State, f.states(victim))
	}
	// It ran 51m30s (grace included) with checkpoints every 20m: it lost
	// 11m30s and has 5h - 40m left.
	if v.Runtime.Remaining != 5*time.Hour-40*time.Minute {
		t.Errorf("remaining %v; want 4h20m", v.Runtime.Remaining)
	}
	for _, e := range f.ledger() {
		if e.Job == victim && e.Kind == "begin" {
			continue
		}
	}
}

func TestCancelReleasesAndClosesTheLedger(t *testing.T) {
	f := newFixture(t, smallCluster)
	id := f.submit(spec{team: "a", gpu: whole(1)})
	f.step()
	f.run(10 * time.Minute)
	found, err := f.w.Cancel(context.Background(), id, "cancelled by tester")
	if err != nil || !found {
		t.Fatalf("Cancel = %v, %v", found, err)
	}
	if j := f.job(id); j.State != api.StateCancelled {
		t.Fatalf("state %s; want cancelled", j.State)
	}
	l := f.ledger()
	if len(l) != 2 || l[1].Kind != "end" || l[1].At != f.w.Now() || l[0].At != f.job(id).StartedAt {
		t.Fatalf("ledger = %+v; want the hold from the start to the cancel", l)
	}
	if c := f.w.Cluster(""); c.Utilization.AllocatedGPUs != 0 {
		t.Fatalf("after cancel %v GPUs are still allocated", c.Utilization.AllocatedGPUs)
	}
}

func TestFailAfterFailsTheJob(t *testing.T) {
	f := newFixture(t, smallCluster)
	id := f.submit(spec{team: "a", gpu: whole(1), duration: time.Hour, fail: 5 * time.Minute})
	f.step()
	f.run(6 * time.Minute)
	if j := f.job(id); j.State != api.StateFailed || !strings.Contains(j.Reason, "fail_after") {
		t.Fatalf("state %s (%s); want failed after 5m", j.State, j.Reason)
	}
}

func TestRestartRecoversQueuedAndRunningJobsWhereTheyWere(t *testing.T) {
	f := newFixture(t, smallCluster)
	running := f.submit(spec{team: "a", gpu: whole(4), tasks: 2, gang: 2, duration: time.Hour})
	f.step()
	queued := f.submit(spec{team: "b", gpu: whole(4), tasks: 2, gang: 2, duration: time.Hour})
	f.run(20 * time.Minute)
	before := f.job(running).Runtime.Placed
	f.restart()
	f.step()
	if j := f.job(queued); j.State != api.StateQueued {
		t.Fatalf("queued job is %s after restart", j.State)
	}
	j, _, ok := f.w.Job(running)
	if !ok || j.State != api.StateRunning || len(j.Runtime.Placed) != 2 || j.Runtime.Placed[0].Node != before[0].Node {
		t.Fatalf("running job after restart: %+v; want running on %s", j, before[0].Node)
	}
	f.run(41 * time.Minute)
	if j := f.job(running); j.State != api.StateSucceeded || j.FinishedAt-j.StartedAt != time.Hour {
		t.Fatalf("recovered job: %s after %v; want succeeded after 1h in all", j.State, j.FinishedAt-j.StartedAt)
	}
	if j := f.job(queued); j.State != api.StateRunning {
		t.Fatalf("the queued job is %s once the first ended; want running", j.State)
	}
	for _, e := range f.ledger() {
		if e.Job == running && e.Kind == "begin" && e.At != f.job(running).StartedAt {
			t.Errorf("recovery wrote a new begin %+v; the hold goes on", e)
		}
	}
}

func TestQueuedJobsGetAnEstimatedStart(t *testing.T) {
	f := newFixture(t, smallCluster)
	first := f.submit(spec{team: "a", gpu: whole(4), tasks: 2, gang: 2, duration: time.Hour})
	f.step()
	waiting := f.submit(spec{team: "b", gpu: whole(4), tasks: 2, gang: 2, duration: time.Hour})
	f.run(time.Minute)
	_, slot, ok := f.w.Job(waiting)
	if !ok || slot == nil || slot.EstimatedStart == nil {
		t.Fatalf("slot = %+v; want an estimated start", slot)
	}
	if got, want := f.w.Since(*slot.EstimatedStart), f.job(first).StartedAt+time.Hour; got < want-time.Minute || got > want+time.Minute {
		t.Errorf("estimated start %v; want about %v, when the running gang ends", got, want)
	}
	q := f.w.Queue("b")
	if len(q.Teams) != 1 || len(q.Teams[0].Jobs) != 1 || q.Teams[0].Jobs[0].Position != 1 {
		t.Fatalf("queue of b = %+v", q)
	}
	if q := f.w.Queue("a"); len(q.Teams) != 0 {
		t.Fatalf("queue of a shows %+v; a has nothing queued", q)
	}
}

// The scenario's production reserve holds borrowed work back here as in
// the benchmark: of team a's eight 1-GPU jobs, four are within its
// guarantee and two more may borrow, leaving two GPUs free.
func TestTheScenarioProductionReserveHoldsBorrowedWork(t *testing.T) {
	for _, tc := range []struct {
		reserve string
		want    int
	}{{"", 8}, {"production_reserve_gpus: 2\n", 6}} {
		f := newFixture(t, strings.Replace(smallCluster, "nodes:\n", tc.reserve+"nodes:\n", 1))
		var ids []string
		for i := 0; i < 8; i++ {
			ids = append(ids, f.submit(spec{team: "a", class: "best-effort", gpu: whole(1), duration: time.Hour}))
		}
		f.step()
		f.run(2 * time.Minute)
		running := 0
		for _, id := range ids {
			if f.job(id).State == api.StateRunning {
				running++
			}
		}
		if running != tc.want {
			t.Errorf("reserve %q: %d jobs running, want %d", tc.reserve, running, tc.want)
		}
	}
}
