package sched

import (
	"reflect"
	"sort"
	"testing"
)

func TestGangStartsAllTasksOrNone(t *testing.T) {
	tests := []struct {
		name   string
		preset string
		free   int // GPUs on the one node
		starts bool
	}{
		{"partita starts nothing of a gang of 4 on 3 GPUs", "partita", 3, false},
		{"gang-drf starts nothing of a gang of 4 on 3 GPUs", "gang-drf", 3, false},
		{"partita starts a gang of 4 on 4 GPUs in one decision", "partita", 4, true},
		{"gang-drf starts a gang of 4 on 4 GPUs in one decision", "gang-drf", 4, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := fleet(t).nodes(1).gpus(tc.free, "H100-80GB").build()
			w := newWorld(t, st, newScheduler(t, tc.preset, st)).submit(job("g").gang(4).gpus(1))
			d := w.cycle()
			if !tc.starts {
				if len(d.Starts) != 0 {
					t.Errorf("started %d tasks, want none", len(d.Starts))
				}
				if got := d.Waiting["g"]; got != (Wait{Position: 1, Reason: WaitGang}) {
					t.Errorf("g waits %+v, want position 1, %q", got, WaitGang)
				}
				return
			}
			var tasks []int
			for _, s := range startsOf(d, "g") {
				tasks = append(tasks, s.Task)
			}
			sort.Ints(tasks)
			if want := []int{0, 1, 2, 3}; !reflect.DeepEqual(tasks, want) {
				t.Errorf("started tasks %v, want %v", tasks, want)
			}
			if _, waits := d.Waiting["g"]; waits {
				t.Errorf("g both started and waits: %+v", d.Waiting["g"])
			}
			if w.job("g").Phase != Running {
				t.Errorf("after the decision g is %v, want running", w.job("g").Phase)
			}
		})
	}
}

func TestGangPrefersOneLeafSwitch(t *testing.T) {
	t.Run("the gang goes under the one leaf it fits under", func(t *testing.T) {
		// Leaf a: 2 nodes × 4 GPUs. Leaf b: 3 nodes × 2 GPUs, more nodes
		// for the default spreading to use. Four tasks of 2 GPUs fit only
		// under a.
		st := fleet(t).
			nodes(2).named("a").gpus(4, "H100-80GB").leaf("a").
			nodes(3).named("b").gpus(2, "H100-80GB").leaf("b").build()
		for _, preset := range []string{"partita", "gang-drf"} {
			w := newWorld(t, st.Clone(), newScheduler(t, preset, st)).submit(job("g").gang(4).gpus(2))
			d := w.decide()
			if got, want := nodesOf(startsOf(d, "g")), []string{"a1", "a2"}; !reflect.DeepEqual(got, want) {
				t.Errorf("%s: gang placed on %v, want %v", preset, got, want)
			}
		}
	})
	t.Run("the leaf with the most free GPU is tried first", func(t *testing.T) {
		// Both leaves could take two 4-GPU tasks; b has more free.
		st := fleet(t).
			nodes(1).named("a").gpus(8, "H100-80GB").leaf("a").
			nodes(2).named("b").gpus(8, "H100-80GB").leaf("b").build()
		w := newWorld(t, st, newScheduler(t, "partita", st)).submit(job("g").gang(2).gpus(4))
		d := w.decide()
		for _, n := range nodesOf(startsOf(d, "g")) {
			if n != "b1" && n != "b2" {
				t.Errorf("gang placed on %v, want under leaf b only", nodesOf(startsOf(d, "g")))
				break
			}
		}
		if len(startsOf(d, "g")) != 2 {
			t.Errorf("started %d tasks, want 2", len(startsOf(d, "g")))
		}
	})
	t.Run("a gang that fits under no single leaf spans leaves", func(t *testing.T) {
		st := fleet(t).
			nodes(1).named("a").gpus(4, "H100-80GB").leaf("a").
			nodes(1).named("b").gpus(4, "H100-80GB").leaf("b").build()
		w := newWorld(t, st, newScheduler(t, "partita", st)).submit(job("g").gang(3).gpus(2))
		d := w.decide()
		if got, want := nodesOf(startsOf(d, "g")), []string{"a", "b"}; !reflect.DeepEqual(got, want) {
			t.Errorf("gang placed on %v, want %v", got, want)
		}
	})
}

func TestReplicasStartIndependently(t *testing.T) {
	// Three replicas of 2 GPUs on one 4-GPU node: two start now, the third
	// when room frees.
	st := fleet(t).nodes(1).gpus(4, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).submit(job("r").replicas(3).gpus(2))
	w.running(job("other").gpus(1), 0, 0, "n1:0")
	d := w.cycle()
	if got := len(startsOf(d, "r")); got != 1 {
		t.Fatalf("started %d replicas on 3 free GPUs, want 1", got)
	}
	if _, waits := d.Waiting["r"]; !waits {
		t.Errorf("r, with two replicas left, is not in Waiting")
	}
	if w.job("r").Phase != Pending {
		t.Errorf("r is %v with one replica of three placed, want pending", w.job("r").Phase)
	}

	w.finish("other")
	d = w.cycle()
	if got := len(startsOf(d, "r")); got != 1 {
		t.Fatalf("second cycle started %d replicas, want 1", got)
	}
	if got := startsOf(d, "r")[0].Task; w.job("r").Placed[got] == nil {
		t.Errorf("start names task %d, which the world did not record", got)
	}
	if w.job("r").Phase != Pending {
		t.Errorf("r is %v with two of three placed, want pending", w.job("r").Phase)
	}
	if got := reasonOf(d, "r"); got != WaitNoRoom {
		t.Errorf("r waits %q, want %q", got, WaitNoRoom)
	}
}

func TestReplicasLeftWaitingAreNotCalledAGang(t *testing.T) {
	st := fleet(t).nodes(1).gpus(4, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).submit(job("r").replicas(3).gpus(2))
	w.running(job("other").gpus(1), 0, 0, "n1:0")
	d := w.decide()
	if got := reasonOf(d, "r"); got != WaitNoRoom {
		t.Errorf("r, replicas with no room left, waits %q, want %q", got, WaitNoRoom)
	}
}

func TestReplicasAllStartInOneDecisionWhenTheyFit(t *testing.T) {
	st := fleet(t).nodes(2).gpus(4, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "partita", st)).submit(job("r").replicas(3).gpus(2))
	d := w.cycle()
	if got := len(startsOf(d, "r")); got != 3 {
		t.Errorf("started %d replicas, want 3", got)
	}
	if w.job("r").Phase != Running {
		t.Errorf("r is %v, want running", w.job("r").Phase)
	}
}

func TestNaivePlacesTasksOneByOneAndHoldsThem(t *testing.T) {
	// A gang of 4 on 3 free GPUs: without gang scheduling three tasks
	// start and hold their GPUs while the fourth waits.
	st := fleet(t).nodes(1).gpus(4, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "naive", st)).submit(job("g").gang(4).gpus(1))
	w.running(job("other").gpus(1), 0, 0, "n1:3")

	d := w.cycle()
	if got := len(startsOf(d, "g")); got != 3 {
		t.Fatalf("started %d tasks, want 3", got)
	}
	if got := d.Waiting["g"]; got != (Wait{Position: 1, Reason: WaitGang}) {
		t.Errorf("g waits %+v, want position 1, %q", got, WaitGang)
	}

	d = w.cycle()
	if len(d.Starts) != 0 {
		t.Errorf("with no room a second cycle started %v", d.Starts)
	}
	if got := reasonOf(d, "g"); got != WaitGang {
		t.Errorf("g, partly placed, waits %q, want %q", got, WaitGang)
	}
	if got := w.st.Node(0).FullyFreeGPUs(); got != 0 {
		t.Errorf("%d GPUs free while g waits, want 0: its tasks hold theirs", got)
	}

	w.finish("other")
	d = w.cycle()
	if got := startsOf(d, "g"); len(got) != 1 || w.job("g").Phase != Running {
		t.Errorf("after a GPU frees: starts %v, g is %v; want the last task started and g running", got, w.job("g").Phase)
	}
}

func TestNaiveWithNoRoomAtAllWaitsForRoom(t *testing.T) {
	st := fleet(t).nodes(1).gpus(2, "H100-80GB").build()
	w := newWorld(t, st, newScheduler(t, "naive", st)).submit(job("g").gang(2).gpus(1))
	w.running(job("other").gpus(2), 0, 0, "n1:0,1")
	d := w.cycle()
	if got := reasonOf(d, "g"); got != WaitNoRoom {
		t.Errorf("g waits %q, want %q", got, WaitNoRoom)
	}
}
