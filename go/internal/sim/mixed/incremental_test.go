package mixed

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"partita.dev/partita/internal/engine/sched"
)

// The scheduler reads only the jobs the world lists as changed
// (sched.Input.Incremental): every scheduler decides exactly as it does
// when it reads every job each cycle.
func TestIncrementalInputsDecideAsFullOnes(t *testing.T) {
	for _, file := range []string{"default.yaml", "tight-guarantees.yaml"} {
		sc := load(t, filepath.Join("..", "..", "..", "..", "scenarios", file))
		sc.Duration = 24 * time.Hour
		if testing.Short() {
			sc.Duration = 8 * time.Hour
		}
		for _, name := range Schedulers {
			full, _ := runWorldWith(t, sc, Options{Scheduler: name, Seed: 3, fullInputs: true})
			listed, _ := runWorldWith(t, sc, Options{Scheduler: name, Seed: 3, Check: true})
			if full.Preemptions == 0 && name == "partita" {
				t.Errorf("%s, %s: no preemption: the comparison misses the victim searches", file, name)
			}
			if !reflect.DeepEqual(full, listed) {
				t.Errorf("%s, %s: the runs differ:\nfull   %+v\nlisted %+v", file, name, full, listed)
			}
		}
	}
}

// A change of a job that the world does not list shows in the check of
// the kept sums (Options.Check): a world that forgets one fails its run
// instead of scheduling from wrong sums.
func TestAnUnlistedChangeFailsTheCheck(t *testing.T) {
	sc := load(t, filepath.Join("..", "..", "..", "..", "scenarios", "default.yaml"))
	sc.Duration = 2 * time.Hour
	_, w := runWorldWith(t, sc, Options{Scheduler: "partita", Seed: 1, Check: true})
	if err := w.cycle(); err != nil {
		t.Fatalf("a cycle with every change listed: %v", err)
	}
	var running *job
	for _, j := range w.active {
		if j.Phase == sched.Running {
			running = j
			break
		}
	}
	if running == nil {
		t.Fatal("no job runs after 2 h")
	}
	running.Phase = sched.Terminating // as preempt does, but not listed
	err := w.cycle()
	if err == nil || !strings.Contains(err.Error(), "not listed") {
		t.Fatalf("a phase changed and not listed: got %v, want an error saying so", err)
	}
}

// The world's lists of pending jobs, holdings and checkpoints agree with
// its jobs after every cycle (Options.Check), and a change made around
// them shows.
func TestTheWorldsListsFollowItsJobs(t *testing.T) {
	sc := load(t, filepath.Join("..", "..", "..", "..", "scenarios", "default.yaml"))
	sc.Duration = 36 * time.Hour
	_, w := runWorldWith(t, sc, Options{Scheduler: "partita", Seed: 2, Check: true})
	if err := w.checkLists(); err != nil {
		t.Fatalf("after 36 h: %v", err)
	}
	if len(w.lists.pending) == 0 || len(w.lists.ckpt) == 0 {
		t.Fatalf("after 36 h: %d pending, %d checkpointing: the check compares nothing", len(w.lists.pending), len(w.lists.ckpt))
	}
	j := w.lists.pending[0]
	j.heldShare += 0.5 // as metrics.placed does, without heldChanged
	if err := w.checkLists(); err == nil || !strings.Contains(err.Error(), j.ID()) {
		t.Errorf("a holding changed around the lists: got %v", err)
	}
	j.heldShare -= 0.5
	w.lists.pending = w.lists.pending[1:]
	if err := w.checkLists(); err == nil || !strings.Contains(err.Error(), "pending") {
		t.Errorf("a pending job left out of the list: got %v", err)
	}
}
