package sched

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/engine/policies"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/workload"
)

// This file holds the fixtures of the scheduler's tests: named builders
// for clusters, jobs and teams, and a tiny world that carries a Decision
// out the way internal/sim/mixed does (starts, then reconfigs, then
// preemptions). Numbers in a test are always named by the builder method
// that takes them.

// ---- clusters ----

// fleetBuilder builds a cluster in groups of identical nodes:
//
//	fleet(t).nodes(2).gpus(8, "H100-80GB").mig().leaf("a").
//		nodes(1).gpus(4, "H100-80GB").build()
//
// Every modifier applies to the group the last nodes call started. Nodes
// are named n1, n2, … across groups unless a group is named.
type fleetBuilder struct {
	t      testing.TB
	groups []*nodeGroup
}

type nodeGroup struct {
	prefix string
	count  int
	spec   cluster.NodeSpec
}

// fleet starts an empty cluster description.
func fleet(t testing.TB) *fleetBuilder { return &fleetBuilder{t: t} }

// nodes starts a group of count nodes with room for most tests (64 CPUs,
// 512 GiB) and no GPU.
func (f *fleetBuilder) nodes(count int) *fleetBuilder {
	f.groups = append(f.groups, &nodeGroup{count: count, spec: cluster.NodeSpec{CPUMilli: 64000, MemoryMiB: 512 * 1024}})
	return f
}

func (f *fleetBuilder) last() *nodeGroup {
	if len(f.groups) == 0 {
		f.t.Fatalf("fleet: call nodes(count) before its modifiers")
	}
	return f.groups[len(f.groups)-1]
}

// named names the group's nodes prefix1, prefix2, … (or prefix alone for a
// group of one).
func (f *fleetBuilder) named(prefix string) *fleetBuilder { f.last().prefix = prefix; return f }
func (f *fleetBuilder) gpus(count int, model string) *fleetBuilder {
	g := f.last()
	g.spec.GPUs, g.spec.GPUModel = count, model
	return f
}
func (f *fleetBuilder) mig() *fleetBuilder { f.last().spec.MIG = true; return f }

// layout gives every GPU of the group the MIG instances in text form
// ("4g.40gb@0,3g.40gb@4"); it implies mig().
func (f *fleetBuilder) layout(text string) *fleetBuilder {
	l, err := gpu.ParseLayout(text)
	if err != nil {
		f.t.Fatalf("layout %q: %v", text, err)
	}
	g := f.last()
	g.spec.MIG, g.spec.Layout = true, l
	return f
}

// leaf puts the group's nodes under one leaf switch.
func (f *fleetBuilder) leaf(name string) *fleetBuilder {
	f.last().spec.Labels = map[string]string{cluster.LabelLeaf: name}
	return f
}

func (f *fleetBuilder) build() *cluster.State {
	f.t.Helper()
	var nodes []*cluster.Node
	seq := 0
	for _, g := range f.groups {
		for i := 1; i <= g.count; i++ {
			spec := g.spec
			switch {
			case g.prefix != "" && g.count == 1:
				spec.Name = g.prefix
			case g.prefix != "":
				spec.Name = fmt.Sprintf("%s%d", g.prefix, i)
			default:
				seq++
				spec.Name = fmt.Sprintf("n%d", seq)
			}
			n, err := cluster.BuildNode(spec)
			if err != nil {
				f.t.Fatalf("BuildNode(%s): %v", spec.Name, err)
			}
			nodes = append(nodes, n)
		}
	}
	st, err := cluster.New(nodes)
	if err != nil {
		f.t.Fatalf("cluster.New: %v", err)
	}
	return st
}

// ---- jobs ----

// jobBuilder builds a pending job: job("j1").team("a").class(workload.Batch).gang(4).gpus(1).
// Without gang or replicas a job has one task. Task i is named "<id>/<i>".
type jobBuilder struct {
	spec     workload.Job
	tasks    int
	demand   workload.Demand
	taskCPU  int64
	taskMem  int64
	submitAt time.Duration
	declared time.Duration
}

func job(id string) *jobBuilder {
	return &jobBuilder{spec: workload.Job{ID: id, Class: workload.Batch}, tasks: 1, taskCPU: 1000, taskMem: 1024,
		demand: workload.Demand{Kind: workload.WholeGPUs, Count: 1}}
}

func (b *jobBuilder) team(name string) *jobBuilder           { b.spec.Team = name; return b }
func (b *jobBuilder) class(c workload.Class) *jobBuilder     { b.spec.Class = c; return b }
func (b *jobBuilder) production() *jobBuilder                { return b.class(workload.Production) }
func (b *jobBuilder) bestEffort() *jobBuilder                { return b.class(workload.BestEffort) }
func (b *jobBuilder) submitted(at time.Duration) *jobBuilder { b.submitAt = at; return b }
func (b *jobBuilder) estimate(d time.Duration) *jobBuilder   { b.declared = d; return b }
func (b *jobBuilder) cpu(milli int64) *jobBuilder            { b.taskCPU = milli; return b }

// gang makes size tasks that start together.
func (b *jobBuilder) gang(size int) *jobBuilder { b.tasks, b.spec.GangSize = size, size; return b }

// replicas makes count tasks that start independently.
func (b *jobBuilder) replicas(count int) *jobBuilder { b.tasks, b.spec.GangSize = count, 0; return b }

// gpus asks, per task, for count whole GPUs.
func (b *jobBuilder) gpus(count int) *jobBuilder {
	b.demand = workload.Demand{Kind: workload.WholeGPUs, Count: count}
	return b
}

// migProfile asks, per task, for one MIG instance of the profile.
func (b *jobBuilder) migProfile(name string) *jobBuilder {
	b.demand = workload.Demand{Kind: workload.MIGProfile, Profile: name}
	return b
}

// gpuMemory asks, per task, for a memory profile: peak GPU memory and a
// compute share.
func (b *jobBuilder) gpuMemory(peakMiB int64, compute float64) *jobBuilder {
	b.demand = workload.Demand{Kind: workload.MemoryProfile, PeakMemoryMiB: peakMiB, Compute: compute}
	return b
}

func (b *jobBuilder) build() *Job {
	spec := b.spec
	spec.Tasks = nil
	for i := 0; i < b.tasks; i++ {
		spec.Tasks = append(spec.Tasks, workload.Task{
			Name: fmt.Sprintf("%s/%d", spec.ID, i), CPUMilli: b.taskCPU, MemoryMiB: b.taskMem, GPU: b.demand,
		})
	}
	return &Job{Spec: spec, Submitted: b.submitAt, Estimate: b.declared, Placed: make([]*cluster.Assignment, b.tasks)}
}

// ---- teams ----

// teamBuilder builds a team: team("a").guarantee(4).burst(8).weight(2).
// Guarantee and burst are in whole GPUs.
type teamBuilder struct{ t Team }

func team(name string) *teamBuilder {
	return &teamBuilder{t: Team{Name: name, Weight: 1}}
}

func (b *teamBuilder) guarantee(gpus int64) *teamBuilder { b.t.Guarantee = gpus * 1000; return b }
func (b *teamBuilder) burst(gpus int64) *teamBuilder     { b.t.Burst = gpus * 1000; return b }
func (b *teamBuilder) weight(w float64) *teamBuilder     { b.t.Weight = w; return b }

// ---- schedulers ----

// newScheduler builds a preset the way the mixed benchmark does: stock
// Kubernetes placement for naive and gang-drf, Partita's for partita. tweak,
// when given, changes the configuration first.
func newScheduler(t testing.TB, preset string, st *cluster.State, tweak ...func(*Config)) *Scheduler {
	t.Helper()
	return newSchedulerSeed(t, preset, st, 1, tweak...)
}

func newSchedulerSeed(t testing.TB, preset string, st *cluster.State, seed int64, tweak ...func(*Config)) *Scheduler {
	t.Helper()
	placement := "k8s-default"
	if preset == "partita" {
		placement = "partita"
	}
	shapes := []frag.Shape{{Milli: 1000, Num: 1}}
	pc := policies.ConfigFor(st, frag.Typicals(frag.WithoutMemory(shapes), frag.DefaultThreshold, nil))
	pc.Shapes = shapes
	pol, err := policies.New(placement, pc)
	if err != nil {
		t.Fatalf("policies.New(%s): %v", placement, err)
	}
	cfg, err := Preset(preset, pol)
	if err != nil {
		t.Fatalf("Preset(%s): %v", preset, err)
	}
	for _, f := range tweak {
		f(&cfg)
	}
	return New(cfg, random.New(seed))
}

// ---- the tiny world ----

// world owns a cluster and its jobs and carries Decisions out as
// internal/sim/mixed does: a start allocates at once and a job whose tasks
// all hold resources is Running; a reconfig changes the GPU and cordons
// it until uncordon; a preemption makes the victim Terminating until
// release puts it back in its queue.
type world struct {
	t     testing.TB
	st    *cluster.State
	sch   *Scheduler
	teams []Team
	jobs  []*Job
	now   time.Duration
	// oldPlaces are the places of moved tasks, held until moved() (the
	// world releases each when its new place is ready).
	oldPlaces []cluster.Assignment
}

func newWorld(t testing.TB, st *cluster.State, sch *Scheduler, teams ...*teamBuilder) *world {
	w := &world{t: t, st: st, sch: sch}
	for _, tb := range teams {
		w.teams = append(w.teams, tb.t)
	}
	return w
}

// at sets the world's clock.
func (w *world) at(now time.Duration) *world { w.now = now; return w }

// submit adds pending jobs.
func (w *world) submit(jobs ...*jobBuilder) *world {
	for _, b := range jobs {
		w.jobs = append(w.jobs, b.build())
	}
	return w
}

// job returns the named job, failing the test when it is unknown.
func (w *world) job(id string) *Job {
	w.t.Helper()
	for _, j := range w.jobs {
		if j.ID() == id {
			return j
		}
	}
	w.t.Fatalf("no job %s", id)
	return nil
}

// running adds a job already running: task i takes the whole GPUs listed
// in where[i] ("n1:0,1"). It started at started and checkpointed at
// checkpoint.
func (w *world) running(b *jobBuilder, started, checkpoint time.Duration, where ...string) *Job {
	w.t.Helper()
	j := b.build()
	if len(where) != len(j.Spec.Tasks) {
		w.t.Fatalf("running %s: %d tasks, %d placements", j.ID(), len(j.Spec.Tasks), len(where))
	}
	for i, at := range where {
		node, list, ok := strings.Cut(at, ":")
		if !ok {
			w.t.Fatalf("running %s: placement %q: want node:gpu,gpu", j.ID(), at)
		}
		a := cluster.Assignment{Task: j.Spec.Tasks[i].Name, Node: node, CPUMilli: j.Spec.Tasks[i].CPUMilli, MemoryMiB: j.Spec.Tasks[i].MemoryMiB}
		for _, s := range strings.Split(list, ",") {
			var k int
			if _, err := fmt.Sscanf(s, "%d", &k); err != nil {
				w.t.Fatalf("running %s: gpu %q: %v", j.ID(), s, err)
			}
			a.Grants = append(a.Grants, cluster.Grant{GPU: k, Milli: 1000})
		}
		w.allocate(j, i, a)
	}
	return w.markRunning(j, started, checkpoint)
}

// runningSlice adds a one-task job running on a MIG instance
// ("n1:0:3g.40gb@4"), which must exist or fit.
func (w *world) runningSlice(b *jobBuilder, at string) *Job {
	w.t.Helper()
	j := b.build()
	parts := strings.SplitN(at, ":", 3)
	if len(parts) != 3 {
		w.t.Fatalf("runningSlice %s: %q: want node:gpu:placement", j.ID(), at)
	}
	var k int
	if _, err := fmt.Sscanf(parts[1], "%d", &k); err != nil {
		w.t.Fatalf("runningSlice %s: gpu %q: %v", j.ID(), parts[1], err)
	}
	p, err := gpu.ParsePlacement(parts[2])
	if err != nil {
		w.t.Fatalf("runningSlice %s: %v", j.ID(), err)
	}
	t := j.Spec.Tasks[0]
	w.allocate(j, 0, cluster.Assignment{Task: t.Name, Node: parts[0], CPUMilli: t.CPUMilli, MemoryMiB: t.MemoryMiB,
		Grants: []cluster.Grant{{GPU: k, Slice: &p}}})
	return w.markRunning(j, w.now, w.now)
}

func (w *world) allocate(j *Job, task int, a cluster.Assignment) {
	w.t.Helper()
	if err := w.st.Allocate(a); err != nil {
		w.t.Fatalf("running %s: %v", j.ID(), err)
	}
	j.Placed[task] = &a
}

func (w *world) markRunning(j *Job, started, checkpoint time.Duration) *Job {
	j.Phase, j.Started, j.Checkpoint = Running, started, checkpoint
	w.jobs = append(w.jobs, j)
	return j
}

// migOff turns MIG off on the listed GPUs of a node.
func (w *world) migOff(node string, gpus ...int) *world {
	w.t.Helper()
	for _, k := range gpus {
		if err := w.st.SetMIG(node, k, false); err != nil {
			w.t.Fatalf("migOff %s/%d: %v", node, k, err)
		}
	}
	return w
}

// input is the cycle's view of the world.
func (w *world) input() Input {
	return Input{Now: w.now, Cluster: w.st, Teams: w.teams, Jobs: append([]*Job(nil), w.jobs...)}
}

// decide runs a full cycle without carrying it out.
func (w *world) decide() Decision { return w.sch.Cycle(w.input()) }

// cycle runs a full cycle and carries it out.
func (w *world) cycle() Decision {
	w.t.Helper()
	d := w.decide()
	w.apply(d)
	return d
}

// light runs a cycle for the listed pending jobs and carries it out.
func (w *world) light(only ...string) Decision {
	w.t.Helper()
	in := w.input()
	in.Only = only
	d := w.sch.Cycle(in)
	w.apply(d)
	return d
}

// apply carries a Decision out, failing the test on any step the cluster
// refuses: the scheduler promises its Decisions apply as they are.
func (w *world) apply(d Decision) {
	w.t.Helper()
	for _, s := range d.Starts {
		j := w.job(s.Job)
		if j.Phase != Pending {
			w.t.Fatalf("start %s: job is %v, not pending", s.Job, j.Phase)
		}
		if err := w.st.Allocate(s.Assignment); err != nil {
			w.t.Fatalf("start %s task %d: %v", s.Job, s.Task, err)
		}
		a := s.Assignment
		j.Placed[s.Task] = &a
		if j.Complete() {
			j.Phase, j.Started, j.Checkpoint = Running, w.now, w.now
		}
	}
	for _, rc := range d.Reconfigs {
		n := w.st.NodeByName(rc.Node)
		if n == nil {
			w.t.Fatalf("reconfig: unknown node %s", rc.Node)
		}
		var err error
		switch {
		case !rc.MIG:
			err = w.st.SetMIG(rc.Node, rc.GPU, false)
		case !n.GPUs[rc.GPU].MIG:
			if err = w.st.SetMIG(rc.Node, rc.GPU, true); err == nil {
				err = w.st.SetLayout(rc.Node, rc.GPU, rc.Layout)
			}
		default:
			err = w.st.SetLayout(rc.Node, rc.GPU, rc.Layout)
		}
		if err != nil {
			w.t.Fatalf("reconfig %s/%d: %v", rc.Node, rc.GPU, err)
		}
		if err := w.st.Cordon(rc.Node, rc.GPU, true); err != nil {
			w.t.Fatalf("cordon %s/%d: %v", rc.Node, rc.GPU, err)
		}
	}
	for _, m := range d.Migrations {
		j := w.job(m.Job)
		if j.Phase != Running || j.Placed[m.Task] == nil {
			w.t.Fatalf("move %s task %d: job is %v, not running", m.Job, m.Task, j.Phase)
		}
		if err := w.st.Allocate(m.To); err != nil {
			w.t.Fatalf("move %s task %d: %v", m.Job, m.Task, err)
		}
		w.oldPlaces = append(w.oldPlaces, *j.Placed[m.Task])
		to := m.To
		j.Placed[m.Task] = &to
	}
	for _, p := range d.Preemptions {
		j := w.job(p.Job)
		if j.Phase != Running {
			w.t.Fatalf("preempt %s: job is %v, not running", p.Job, j.Phase)
		}
		j.Phase = Terminating
	}
	if err := w.st.Check(); err != nil {
		w.t.Fatalf("cluster invariant after the decision: %v", err)
	}
}

// moved releases the old places of every task moved: their new places
// are ready.
func (w *world) moved() *world {
	w.t.Helper()
	for _, a := range w.oldPlaces {
		if _, err := w.st.Release(a.Node, a.Task); err != nil {
			w.t.Fatalf("release %s's old place: %v", a.Task, err)
		}
	}
	w.oldPlaces = nil
	return w
}

// uncordonAll ends every MIG change in flight.
func (w *world) uncordonAll() *world {
	w.t.Helper()
	for i := 0; i < w.st.Len(); i++ {
		n := w.st.Node(i)
		for k := range n.GPUs {
			if n.GPUs[k].Cordoned() {
				if err := w.st.Cordon(n.Name, k, false); err != nil {
					w.t.Fatalf("uncordon %s/%d: %v", n.Name, k, err)
				}
			}
		}
	}
	return w
}

// release ends the grace period of every terminating job: it frees what
// it holds and goes back to its queue.
func (w *world) release() *world {
	w.t.Helper()
	for _, j := range w.jobs {
		if j.Phase == Terminating {
			w.free(j)
			j.Phase = Pending
		}
	}
	return w
}

// finish ends a job: it frees what it holds and leaves.
func (w *world) finish(id string) *world {
	w.t.Helper()
	j := w.job(id)
	w.free(j)
	for i, x := range w.jobs {
		if x == j {
			w.jobs = append(w.jobs[:i], w.jobs[i+1:]...)
			break
		}
	}
	return w
}

func (w *world) free(j *Job) {
	w.t.Helper()
	for i, a := range j.Placed {
		if a == nil {
			continue
		}
		if _, err := w.st.Release(a.Node, a.Task); err != nil {
			w.t.Fatalf("release %s: %v", a.Task, err)
		}
		j.Placed[i] = nil
	}
}

// ---- reading decisions ----

// startedJobs lists the jobs with a Start, each once, sorted.
func startedJobs(d Decision) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range d.Starts {
		if !seen[s.Job] {
			seen[s.Job] = true
			out = append(out, s.Job)
		}
	}
	sort.Strings(out)
	return out
}

// startsOf lists the Starts of one job.
func startsOf(d Decision, id string) []Start {
	var out []Start
	for _, s := range d.Starts {
		if s.Job == id {
			out = append(out, s)
		}
	}
	return out
}

// victimsOf lists the preempted jobs, sorted.
func victimsOf(d Decision) []string {
	var out []string
	for _, p := range d.Preemptions {
		out = append(out, p.Job)
	}
	sort.Strings(out)
	return out
}

// reasonOf is the wait reason of a job, or "(not waiting)".
func reasonOf(d Decision, id string) string {
	if w, ok := d.Waiting[id]; ok {
		return w.Reason
	}
	return "(not waiting)"
}

// orderOf runs the cycle's ordering step alone on the world's input.
func orderOf(w *world) []string {
	c := w.sch.snapshot(w.input())
	var out []string
	for _, j := range w.sch.order(c) {
		out = append(out, j.ID())
	}
	return out
}

func nodesOf(starts []Start) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range starts {
		if !seen[s.Assignment.Node] {
			seen[s.Assignment.Node] = true
			out = append(out, s.Assignment.Node)
		}
	}
	sort.Strings(out)
	return out
}

func describe(st *cluster.State) string {
	var b strings.Builder
	for i := 0; i < st.Len(); i++ {
		b.WriteString(st.Node(i).Describe())
	}
	return b.String()
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func itoa(n int) string { return fmt.Sprint(n) }

// firstVictims runs a cycle every 15 s from hour to hour+limit and returns
// how long after hour the first one that evicted came, with its decision;
// -1 when none did.
func firstVictims(w *world, limit time.Duration) (time.Duration, Decision) {
	for waited := time.Duration(0); waited <= limit; waited += 15 * time.Second {
		if d := w.at(hour + waited).cycle(); len(d.Preemptions) > 0 {
			return waited, d
		}
	}
	return -1, Decision{}
}
