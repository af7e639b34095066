package sched

import (
	"slices"
	"strings"
	"testing"
	"time"

	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/workload"
)

// An incremental input: the sums follow the changes listed, a job gone is
// no longer found, and a change not listed shows in CheckKept.
func TestIncrementalInputsKeepTheSums(t *testing.T) {
	st := fleet(t).nodes(2).gpus(8, "H100-80GB").build()
	sch := newScheduler(t, "partita", st)
	w := newWorld(t, st, sch, team("a").guarantee(8), team("b").guarantee(8))
	a := w.running(job("a1").team("a").gpus(2).estimate(time.Hour), 0, 0, "n1:0,1")
	b := w.running(job("b1").team("b").gpus(1), 0, 0, "n2:0")
	in := w.input()
	in.Incremental, in.Changed = true, []*Job{a, b} // the first cycle recounts whatever is listed
	c := sch.snapshot(in)
	if c.use[0] != 2000 || c.use[1] != 1000 || c.endsBy[0] != time.Hour || !c.endUnknown[1] {
		t.Fatalf("after a recount: use %v, ends %v %v", c.use, c.endsBy, c.endUnknown)
	}
	if err := sch.CheckKept(in); err != nil {
		t.Fatalf("after a recount: %v", err)
	}

	// b1 ends and a new job of b waits: b1 gone, the new one changed.
	w.jobs = []*Job{a}
	w.submit(job("b2").team("b").gpus(4))
	b2 := w.job("b2")
	in = w.input()
	in.Incremental, in.Changed, in.Gone = true, []*Job{b2}, []*Job{b}
	c = sch.snapshot(in)
	if c.use[0] != 2000 || c.use[1] != 0 || c.endUnknown[1] {
		t.Errorf("after b1 left: use %v, node 2 end unknown %v", c.use, c.endUnknown[1])
	}
	if _, ok := c.job("b1"); ok {
		t.Error("b1, gone, is still found")
	}
	if got, _ := sch.jobsToOrder(c); len(got) != 1 || got[0] != b2 {
		t.Errorf("pending jobs to order: %v, want b2", got)
	}
	if err := sch.CheckKept(in); err != nil {
		t.Errorf("after b1 left: %v", err)
	}

	// a1 releases a GPU without the world listing it.
	w.st.Release("n1", a.Placed[0].Task)
	half := *a.Placed[0]
	half.Grants = half.Grants[:1]
	if err := w.st.Allocate(half); err != nil {
		t.Fatal(err)
	}
	a.Placed[0] = &half
	in = w.input()
	in.Incremental = true
	sch.snapshot(in)
	if err := sch.CheckKept(in); err == nil || !strings.Contains(err.Error(), "not listed") {
		t.Errorf("a placement changed and not listed: got %v", err)
	}

	// A full input recounts, and the sums are right again.
	in.Incremental = false
	if c := sch.snapshot(in); c.use[0] != 1000 {
		t.Errorf("after a full input: team a holds %d, want 1000", c.use[0])
	}
}

// groupOrder, which sorts only the groups of a backlog listed by
// submission, gives the order of the full sort, for random keys.
func TestGroupOrderIsTheFullOrder(t *testing.T) {
	rng := random.New(5)
	teams := []Team{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	for _, cfg := range []Config{
		{Order: FairShare, GuaranteeFirst: true, ClassOrder: true},
		{Order: FIFO, ClassOrder: true},
		{Order: DRF},
	} {
		for round := 0; round < 200; round++ {
			sch := &Scheduler{cfg: cfg}
			c := &cycle{sch: sch, in: Input{Teams: teams}}
			shares := []float64{rng.Float64(), rng.Float64(), rng.Float64(), rng.Float64()}
			if rng.Intn(2) == 0 {
				shares[1] = shares[0] // two teams of one share: their jobs interleave
			}
			var ks []orderKey
			for i := range 1 + rng.Intn(60) {
				team := []string{"a", "b", "c", "elsewhere"}[rng.Intn(4)]
				j := job("j" + itoa(i)).team(team).build()
				j.Submitted = time.Duration(rng.Intn(8)) * time.Second
				k := orderKey{j: j, class: workload.Class(rng.Intn(3)), team: team, id: j.ID(), submitted: j.Submitted,
					within: rng.Intn(2) == 0, share: shares[teamIndex(c.in, team)+1]}
				k.holds = k.within && rng.Intn(4) == 0
				ks = append(ks, k)
			}
			slices.SortFunc(ks, func(x, y orderKey) int { return submittedFirst(x.j, y.j) })
			want := slices.Clone(ks)
			slices.SortStableFunc(want, sch.orderLead)
			if !sch.groupOrder(c, ks) {
				t.Fatal("groupOrder refused known classes")
			}
			for i := range ks {
				if ks[i].id != want[i].id {
					t.Fatalf("%+v, round %d: position %d is %s, want %s", cfg, round, i, ks[i].id, want[i].id)
				}
			}
		}
	}
}
