package fill

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/engine/policies"
	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/sim"
	"partita.dev/partita/internal/trace"
	"partita.dev/partita/internal/workload"
)

// Columns is the number of arrived-workload columns, 0..130 % (§4).
const Columns = 131

// Input is one pod list on one node list.
type Input struct {
	Nodes   []trace.Node
	Pods    []trace.Pod
	Typical *frag.Distribution // from Typical(Pods); computed if nil
	Shapes  []frag.Shape       // from Shapes(Pods); computed if nil
}

// Options choose the run.
type Options struct {
	Policy string
	Seed   int64
	Tune   float64 // 1.3 in every published run
	// Defrag, when set, runs the beyond-the-protocol mode: after a pod
	// fails, the world may move already-placed shares (see defrag.go).
	Defrag bool
}

// Result is one run's curves.
type Result struct {
	Policy    string
	Seed      int64
	TotalGPUs int
	Pods      int // arrived pods, tuned copies included
	Failed    int
	Moves     int // shares moved by defragmentation
	// FailedAt100 is the GPU demand (milli) of the pods that failed before
	// the arrived workload reached 100 %, by kind ("share", "1-gpu", …): the
	// unallocated GPUs at 100 % are exactly these.
	FailedAt100 map[string]int64
	// Alloc[N] is the mean GPU allocation rate (%) over the events at N %
	// arrived workload; Frag[N] the mean fragmentation (% of all GPUs);
	// FragRatio[N] the mean fragment as % of idle GPU.
	Alloc, Frag, FragRatio [Columns]float64
}

// Unallocated returns 100 minus the allocation rate at arrived = 100 %: the
// headline number of the FGD paper's Figure 7 and our benchmark.
func (r *Result) Unallocated() float64 { return round2(100 - r.Alloc[100]) }

// Run replays one seed of the experiment with one policy.
func Run(in Input, opt Options) (*Result, error) {
	if len(in.Nodes) == 0 || len(in.Pods) == 0 {
		return nil, errors.New("fill: empty node or pod list")
	}
	typical := in.Typical
	if typical == nil {
		typical = Typical(in.Pods)
	}
	var clusterMilli int64
	for _, n := range in.Nodes {
		clusterMilli += int64(n.GPUs) * 1000
	}
	if clusterMilli == 0 {
		return nil, errors.New("fill: the node list has no GPU")
	}
	rng := random.New(opt.Seed)
	pods := Arrivals(in.Pods, clusterMilli, opt.Tune, rng)
	st, err := Nodes(in.Nodes, rng.Perm(len(in.Nodes)))
	if err != nil {
		return nil, err
	}
	cfg := policies.ConfigFor(st, typical)
	cfg.Shapes, cfg.Canonical = in.Shapes, canonical
	if cfg.Shapes == nil {
		cfg.Shapes = Shapes(in.Pods)
	}
	pol, err := policies.New(opt.Policy, cfg)
	if err != nil {
		return nil, err
	}
	w := &world{
		st: st, placer: engine.NewPlacer(pol, rng), typical: typical, total: clusterMilli,
		res:    &Result{Policy: opt.Policy, Seed: opt.Seed, TotalGPUs: int(clusterMilli / 1000), Pods: len(pods), FailedAt100: map[string]int64{}},
		defrag: opt.Defrag, tasks: map[string]workload.Task{},
	}
	w.initFrag()
	if err := w.run(pods); err != nil {
		return nil, err
	}
	return w.res, nil
}

// world is the fill experiment's world: the cluster, the engine's placer,
// and the running measurements.
type world struct {
	st      *cluster.State
	placer  *engine.Placer
	typical *frag.Distribution
	total   int64 // cluster GPU milli
	defrag  bool
	res     *Result

	tasks         map[string]workload.Task // placed pods, for defragmentation moves
	fruitless     int                      // defragmentation attempts in a row that found nothing
	arrived, used int64
	nodeFrag      []float64 // per node, kept current so a sample costs one node
	fragSum       float64
	acc           [Columns]accumulator
	spill         []sample // samples beyond the last column, for the ±1 rule
}

type sample struct {
	col                    int
	alloc, frag, fragRatio float64
}

type accumulator struct {
	n                      int
	alloc, frag, fragRatio float64
}

func (w *world) run(pods []Pod) error {
	q := &sim.Queue{}
	for i := range pods {
		// Pods carry no timestamps in the protocol (§3.5): one per instant,
		// in order.
		if err := q.Push(sim.Event{At: time.Duration(i), Kind: sim.Arrival, Ref: i}); err != nil {
			return err
		}
	}
	for {
		ev, ok := q.Pop()
		if !ok {
			break
		}
		if err := w.arrive(pods[ev.Ref]); err != nil {
			return err
		}
		w.sample()
	}
	w.finish()
	return nil
}

func (w *world) arrive(p Pod) error {
	w.arrived += p.GPUMilli
	a, err := w.placer.Place(w.st, p.Task)
	if err != nil {
		var f *engine.Failure
		if !errors.As(err, &f) {
			return err
		}
		if w.defrag {
			if a, ok := w.makeRoom(p); ok {
				return w.allocate(a, p)
			}
		}
		w.res.Failed++ // dropped, never retried (§3.6)
		if w.arrived <= w.total {
			w.res.FailedAt100[kindOf(p)] += p.GPUMilli
		}
		return nil
	}
	return w.allocate(a, p)
}

func (w *world) allocate(a cluster.Assignment, p Pod) error {
	if err := w.st.Allocate(a); err != nil {
		return fmt.Errorf("fill: engine chose an assignment the cluster refuses: %w", err)
	}
	w.used += p.GPUMilli
	if w.defrag {
		w.tasks[p.Task.Name] = p.Task
	}
	i, _ := w.st.Lookup(a.Node)
	w.refreshFrag(i)
	return nil
}

func (w *world) initFrag() {
	w.nodeFrag = make([]float64, w.st.Len())
	for i := range w.nodeFrag {
		w.refreshFrag(i)
	}
}

func (w *world) refreshFrag(i int) {
	n := w.st.Node(i)
	var buf [16]int
	left := buf[:0]
	for j := range n.GPUs {
		left = append(left, n.GPUs[j].Free())
	}
	model := ""
	if m := n.Model(); m != nil {
		model = m.Name
	}
	f := w.typical.Node(model, n.CPUFree(), n.MemFree(), left)
	w.fragSum += f - w.nodeFrag[i]
	w.nodeFrag[i] = f
}

// sample records one event's measurements (§4).
func (w *world) sample() {
	col := int(math.RoundToEven(float64(w.arrived) / float64(w.total) * 100))
	s := sample{col: col, alloc: round2(float64(w.used) / float64(w.total) * 100)}
	s.frag = w.fragSum / 1000 / float64(w.total/1000) * 100
	if idle := float64(w.total - w.used); idle > 0 {
		s.fragRatio = 100 * w.fragSum / idle
	}
	if col >= 0 && col < Columns {
		a := &w.acc[col]
		a.n++
		a.alloc += s.alloc
		a.frag += s.frag
		a.fragRatio += s.fragRatio
	} else {
		w.spill = append(w.spill, s)
	}
}

// finish turns the samples into columns: the mean of the events at N %,
// or, where there are none, of those at N−1..N+1 (§4).
func (w *world) finish() {
	for c := 0; c < Columns; c++ {
		a := w.acc[c]
		if a.n == 0 {
			for d := -1; d <= 1; d += 2 {
				if c+d >= 0 && c+d < Columns {
					b := w.acc[c+d]
					a.n, a.alloc, a.frag, a.fragRatio = a.n+b.n, a.alloc+b.alloc, a.frag+b.frag, a.fragRatio+b.fragRatio
				}
			}
			if c == Columns-1 {
				for _, s := range w.spill {
					if s.col == Columns {
						a.n, a.alloc, a.frag, a.fragRatio = a.n+1, a.alloc+s.alloc, a.frag+s.frag, a.fragRatio+s.fragRatio
					}
				}
			}
		}
		if a.n == 0 {
			continue
		}
		w.res.Alloc[c] = round2(a.alloc / float64(a.n))
		w.res.Frag[c] = round2(a.frag / float64(a.n))
		w.res.FragRatio[c] = round2(a.fragRatio / float64(a.n))
	}
}

// round2 is Python's round(x, 2), which the published analysis uses: it
// rounds the exact binary value (0.025 is stored a hair above and goes
// up), and exact ties to even. strconv does the same.
func round2(x float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', 2, 64), 64)
	return v
}

// kindOf names a pod's kind for failure reports.
func kindOf(p Pod) string {
	switch {
	case p.GPUMilli == 0:
		return "cpu"
	case p.shape.Num == 1 && p.shape.Milli < 1000:
		return "share"
	}
	return fmt.Sprintf("%d-gpu", p.shape.Num)
}
