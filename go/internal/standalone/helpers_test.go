package standalone

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"partita.dev/partita/internal/scenario"
	"partita.dev/partita/internal/store"
	"partita.dev/partita/internal/workload"
)

// smallCluster is two nodes of four MIG-capable H100s and two teams that
// may each borrow the whole cluster.
const smallCluster = `
name: small
duration: 1h
nodes:
  - group: h100
    count: 2
    gpu: H100-80GB
    gpus: 4
    mig: true
    cpu: 64
    memory: 512Gi
teams:
  - name: a
    guaranteed_gpus: 4
    burst_gpus: 8
  - name: b
    guaranteed_gpus: 4
    burst_gpus: 8
`

// wall is a wall clock the test moves.
type wall struct{ t time.Time }

func (c *wall) now() time.Time          { return c.t }
func (c *wall) advance(d time.Duration) { c.t = c.t.Add(d) }
func (c *wall) cluster(d time.Duration) { c.advance(d / 60) } // at speed 60
func newWall() *wall                    { return &wall{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)} }

type fixture struct {
	t     *testing.T
	dir   string
	store *store.Store
	w     *World
	wall  *wall
	sc    *scenario.Scenario
	n     int
}

func newFixture(t *testing.T, yaml string) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), wall: newWall()}
	sc, err := scenario.Parse(strings.NewReader(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f.sc = sc
	f.open()
	ctx := context.Background()
	for _, tm := range sc.Teams {
		if err := f.store.PutTeam(ctx, store.Team{Name: tm.Name, GuaranteeMilli: int64(tm.GuaranteedGPUs) * 1000, BurstMilli: int64(tm.BurstGPUs) * 1000, Weight: tm.Weight, Classes: []string{"production", "batch", "best-effort"}}, true); err != nil {
			t.Fatal(err)
		}
	}
	f.start()
	return f
}

func (f *fixture) open() {
	s, err := store.Open(f.dir)
	if err != nil {
		f.t.Fatal(err)
	}
	f.store = s
	f.t.Cleanup(func() { s.Close() })
}

func (f *fixture) start() {
	w, err := New(context.Background(), f.store, Options{Scenario: f.sc, Speed: 60, Wall: f.wall.now, Seed: 1})
	if err != nil {
		f.t.Fatal(err)
	}
	w.SetTeams(mustTeams(f.t, f.store))
	f.w = w
}

// restart closes the store as a crash would leave it (whatever was
// committed) and builds a new world on it.
func (f *fixture) restart() {
	f.store.Close()
	f.open()
	f.start()
}

func mustTeams(t *testing.T, s *store.Store) []store.Team {
	teams, err := s.Teams(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return teams
}

// spec describes a test job.
type spec struct {
	team, class     string
	tasks, gang     int
	gpu             workload.Demand
	duration, fail  time.Duration
	checkpointEvery time.Duration
}

func whole(n int) workload.Demand { return workload.Demand{Kind: workload.WholeGPUs, Count: n} }
func mig(profile string) workload.Demand {
	return workload.Demand{Kind: workload.MIGProfile, Profile: profile}
}

// submit stores a job as the server does and hands it to the world.
func (f *fixture) submit(s spec) string {
	f.t.Helper()
	f.n++
	id := fmt.Sprintf("job-%03d", f.n)
	if s.tasks == 0 {
		s.tasks = 1
	}
	if s.class == "" {
		s.class = "batch"
	}
	rec := &store.Job{ID: id, Team: s.team, Project: "default", User: "tester", Class: s.class, Request: []byte("{}"),
		Spec: store.Spec{Gang: s.gang, Duration: s.duration, FailAfter: s.fail, CheckpointEvery: s.checkpointEvery}}
	for i := range s.tasks {
		rec.Spec.Tasks = append(rec.Spec.Tasks, workload.Task{Name: fmt.Sprintf("%s-%d", id, i), CPUMilli: 1000, MemoryMiB: 1024, GPU: s.gpu})
	}
	f.w.Prepare(rec)
	stored, _, err := f.store.Submit(context.Background(), rec, []store.Event{{Job: id, At: rec.SubmittedAt, State: "queued", Reason: "submitted"}})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.w.Add(stored); err != nil {
		f.t.Fatal(err)
	}
	return id
}

// step runs one wake of the loop and waits for its batch.
func (f *fixture) step() {
	f.t.Helper()
	if done := f.w.step(); done != nil {
		if err := f.store.Wait(context.Background(), done); err != nil {
			f.t.Fatal(err)
		}
	}
}

// run moves cluster time on by d in steps of at most a cluster minute,
// running the loop at each.
func (f *fixture) run(d time.Duration) {
	f.t.Helper()
	for d > 0 {
		s := min(d, time.Minute)
		f.wall.cluster(s)
		f.step()
		d -= s
	}
}

func (f *fixture) job(id string) *store.Job {
	f.t.Helper()
	j, err := f.store.Job(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return j
}

// states lists a job's event states in order.
func (f *fixture) states(id string) string {
	f.t.Helper()
	ev, err := f.store.Events(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, e := range ev {
		out = append(out, e.State)
	}
	return strings.Join(out, " ")
}

func (f *fixture) ledger() []store.LedgerEntry {
	f.t.Helper()
	l, err := f.store.Ledger(context.Background(), store.LedgerFilter{})
	if err != nil {
		f.t.Fatal(err)
	}
	return l
}
