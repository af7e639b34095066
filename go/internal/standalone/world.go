// Package standalone is the standalone server's world: a virtual cluster
// that runs in scaled wall time, driven by the same scheduling cycle as the
// simulator and the Kubernetes scheduler (engine/sched with the partita
// preset).
//
// A World owns the cluster state and every job that is not finished. Its
// loop (Run) wakes on a timer, on a kick (submit, cancel) or on a periodic
// tick, fires what fell due (job ends, grace periods, MIG changes) at their
// own cluster times, runs a cycle, carries out the decision as the
// simulator does (starts first, then MIG changes that cordon their GPU for
// the reconfiguration delay, then preemptions with a grace period), and
// hands every transition to the store as one batch: job states, events
// with their reasons, and ledger entries for every hold that begins or
// ends. Batches are enqueued under the world's lock, so the store sees
// changes in the order the world made them.
//
// On start a World recovers from the store: queued jobs stay queued, jobs
// holding resources are put back where they were, and cluster time resumes
// where it stopped.
package standalone

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"partita.dev/partita/internal/engine"
	"sync"
	"time"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/scenario"
	"partita.dev/partita/internal/store"
	"partita.dev/partita/internal/workload"
)

// DemoYAML is the default virtual cluster, a copy of scenarios/demo.yaml
// (a test keeps them equal) so that the binary runs from any directory.
//
//go:embed demo.yaml
var DemoYAML []byte

// Options configure a World.
type Options struct {
	Scenario *scenario.Scenario // the cluster; its teams seed a new store
	Speed    float64            // cluster seconds per wall second; default 60
	// ReconfigDelay is how long a MIG change takes, in cluster time
	// (default 30 s); at --speed 60 half a second of wall time.
	ReconfigDelay time.Duration
	// Tick is the wall time between periodic cycles while jobs wait
	// (time-based rules: reservations, cooldowns); default 1 s.
	Tick time.Duration
	// MinCycleGap is the least wall time between two cycles, so that a
	// burst of submissions is scheduled in a few cycles, not one each.
	MinCycleGap time.Duration // default 100 ms
	Seed        int64
	Wall        func() time.Time // default time.Now
	Log         *slog.Logger
	Observer    Observer // may be nil
	// Niced runs the loop (and so every cycle) on an OS thread of lower
	// priority: for a server whose API shares the CPU with the scheduler.
	Niced bool
}

func (o *Options) defaults() {
	if o.Speed <= 0 {
		o.Speed = 60
	}
	if o.ReconfigDelay == 0 {
		o.ReconfigDelay = 30 * time.Second
	}
	if o.Tick == 0 {
		o.Tick = time.Second
	}
	if o.MinCycleGap == 0 {
		o.MinCycleGap = 100 * time.Millisecond
	}
	if o.Wall == nil {
		o.Wall = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
}

// Observer hears what metrics count. Calls come with the world's lock
// held: they must be quick and must not call the World.
type Observer interface {
	Started(team, class string, wait time.Duration) // a job got all its resources after waiting wait (cluster time)
	Finished(team, class, state string)
	Preempted(team, class string)
	Reconfigured()
	Cycle(took time.Duration, pending int)
}

type nopObserver struct{}

func (nopObserver) Started(string, string, time.Duration) {}
func (nopObserver) Finished(string, string, string)       {}
func (nopObserver) Preempted(string, string)              {}
func (nopObserver) Reconfigured()                         {}
func (nopObserver) Cycle(time.Duration, int)              {}

// World is the virtual cluster and its jobs.
type World struct {
	opt      Options
	store    *store.Store
	capacity *workload.Capacity  // fixed: the nodes never change
	nodes    map[string]nodeInfo // fixed facts of each node

	inboxMu sync.Mutex
	inbox   []*job // added, not yet taken up (lock does)

	mu        sync.Mutex
	st        *cluster.State
	sch       *sched.Scheduler
	cfg       sched.Config
	teams     []sched.Team
	jobs      map[string]*job
	active    []*job // not finished, in submission order
	waits     map[string]sched.Wait
	timers    timerQueue
	timerSeq  int
	clk       clock
	now       time.Duration // the cluster time of the last change
	batch     store.Batch
	dirty     []*job
	wantCycle bool
	lastCycle time.Time     // wall
	cycleTook time.Duration // wall time of the last cycle
	lastSaved time.Time     // wall: when the clock was last stored
	tomb      map[string]bool
	kick      chan struct{}
	est       estimates
}

// job is the world's record of an unfinished job.
type job struct {
	sched.Job
	// rec is the stored row, kept current: who and what (fixed at
	// submission), state, reason and runtime.
	rec   *store.Job
	dirty bool // changed since the last flush
	done  bool // finished; leaves active at the next compaction
}

// New builds the world on st's data: the cluster from the scenario, the
// teams and unfinished jobs from the store.
func New(ctx context.Context, s *store.Store, opt Options) (*World, error) {
	opt.defaults()
	nodes, err := opt.Scenario.Nodes()
	if err != nil {
		return nil, err
	}
	st, err := cluster.New(nodes)
	if err != nil {
		return nil, err
	}
	cfg, err := schedulerConfig(opt.Scenario, st)
	if err != nil {
		return nil, err
	}
	c, err := s.LoadClock(ctx, opt.Wall())
	if err != nil {
		return nil, fmt.Errorf("clock: %w", err)
	}
	w := &World{
		opt: opt, store: s, st: st, cfg: cfg, capacity: engine.CapacityOf(st), nodes: map[string]nodeInfo{},
		sch:  sched.New(cfg, random.New(opt.Seed)),
		jobs: map[string]*job{}, waits: map[string]sched.Wait{}, tomb: map[string]bool{}, kick: make(chan struct{}, 1),
		clk: clock{epoch: c.Epoch, base: c.Now, wallBase: opt.Wall(), speed: opt.Speed, wall: opt.Wall},
		now: c.Now,
	}
	for i := 0; i < st.Len(); i++ {
		n := st.Node(i)
		info := nodeInfo{tier: string(n.Tier)}
		for k := range n.GPUs {
			info.models = append(info.models, n.GPUs[k].Model.Name)
		}
		w.nodes[n.Name] = info
	}
	// The projection of estimated starts runs beside the loop: it gets a
	// policy of its own, so that no placement state is shared.
	if w.est.cfg, err = schedulerConfig(opt.Scenario, st); err != nil {
		return nil, err
	}
	w.est.seed = opt.Seed
	teams, err := s.Teams(ctx)
	if err != nil {
		return nil, err
	}
	w.SetTeams(teams)
	if err := w.recover(ctx); err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	return w, nil
}

// schedulerConfig is the partita preset, told the request mix of the
// scenario's workloads, as the mixed-workload benchmark builds it.
func schedulerConfig(sc *scenario.Scenario, st *cluster.State) (sched.Config, error) {
	var jobs []workload.Job
	if arrivals, err := sc.Jobs(sc.Seed); err == nil {
		for _, a := range arrivals {
			jobs = append(jobs, a.Job)
		}
	}
	cfg, err := sched.Build("partita", st, sched.ShapesOf(jobs))
	// Moving running replicas is not carried out in this world yet.
	cfg.Migrate = false
	cfg.ProductionReserve = int64(sc.ProductionReserveGPUs) * 1000
	return cfg, err
}

// SetTeams replaces the teams' quotas; the next cycle uses them.
func (w *World) SetTeams(teams []store.Team) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.teams = w.teams[:0]
	for _, t := range teams {
		w.teams = append(w.teams, sched.Team{Name: t.Name, Guarantee: t.GuaranteeMilli, Burst: t.BurstMilli, Weight: t.Weight})
	}
	w.wantCycle = true
	w.poke()
}

// poke wakes the loop without blocking.
func (w *World) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

type nodeInfo struct {
	tier   string
	models []string // by GPU index
}

// GPUs is the number of GPUs in the cluster.
func (w *World) GPUs() int {
	n := 0
	for _, info := range w.nodes {
		n += len(info.models)
	}
	return n
}

// NodeInfo is a node's capacity tier and the model of each of its GPUs.
func (w *World) NodeInfo(node string) (tier string, models []string) {
	info := w.nodes[node]
	return info.tier, info.models
}

// Capacity is what the cluster could ever give one task.
func (w *World) Capacity() *workload.Capacity { return w.capacity }

// Speed is cluster seconds per wall second.
func (w *World) Speed() float64 { return w.opt.Speed }

// Now is the cluster time now. The clock is fixed at New, so this needs
// no lock; the world's own time (of its last change) never passes it.
func (w *World) Now() time.Duration { return w.clk.now() }

// Time renders cluster time t as a timestamp.
func (w *World) Time(t time.Duration) time.Time { return w.clk.at(t) }

// Since converts a timestamp back to cluster time.
func (w *World) Since(t time.Time) time.Duration { return t.Sub(w.clk.epoch) }
