package policies

import (
	"errors"
	"math"
	"math/rand"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/gpu"
)

// Partita is our own policy. It is built to be improved: each concern is a
// separate term, and docs/placement.md records what each term gained.
//
//   - Shares and whole GPUs (non-MIG): like FGD, the task goes where it
//     grows the expected fragmentation least; see Tuning for how the
//     fragment is measured.
//   - MIG instances and memory profiles on MIG GPUs: see migChoice.
func Partita(c Config) (engine.Policy, error) {
	if c.Typical == nil || len(c.Shapes) == 0 {
		return engine.Policy{}, errors.New("policy partita: needs the expected workload (Config.Typical and Config.Shapes)")
	}
	t := PartitaTuning
	shapes := c.Shapes
	if !t.Memory {
		shapes = frag.WithoutMemory(shapes)
	}
	canonical := c.Canonical
	if canonical == nil {
		canonical = func(name string) string { return gpu.Lookup(name).Name }
	}
	typ := frag.Weighted(shapes, t.Threshold, t.GPUWeight, canonical)
	fs := fragScorer{name: "partita-frag", typ: typ, rate: gradient}
	if t.Stranded {
		fs.measure = typ.Stranded
	}
	if t.Balance > 0 {
		w := t.Balance
		fs.measure = func(model string, cpu, mem int64, left []int) float64 {
			return typ.Node(model, cpu, mem, left) + w*typ.Unbalanced(model, cpu, mem, left)
		}
	}
	if t.Mix > 0 {
		mix := t.Mix
		fs.measure = func(model string, cpu, mem int64, left []int) float64 {
			return typ.Node(model, cpu, mem, left) + mix*typ.Stranded(model, cpu, mem, left)
		}
	}
	if t.Scale > 0 {
		scale := t.Scale
		fs.rate = func(before, after float64) int64 { return int64(100 / (1 + math.Exp(-(before-after)/scale))) }
	}
	if t.Bucket > 0 {
		b := t.Bucket
		fs.rate = func(before, after float64) int64 { return -int64(math.Floor((after - before) / b)) }
	}
	s := &partita{frag: fs}
	pol := engine.Policy{Name: "partita", Scorer: s, Picker: s}
	if t.Reserve > 0 {
		pol.Adjuster = newReserve(c.Shapes, t.Reserve, canonical)
	}
	return pol, nil
}

// Tuning holds the choices under study; PartitaTuning is the one
// configuration used for every pod list.
type Tuning struct {
	Memory    bool    // host memory in the expected workload
	Stranded  bool    // frag.Stranded instead of FGD's one-task measure
	Bucket    float64 // >0: score = −⌊Δfrag / Bucket⌋ instead of FGD's ⌊100σ(−Δ/1000)⌋
	Threshold float64 // share of tasks the typical shapes cover
	Mix       float64 // >0: fragment = FGD's + Mix × Stranded
	Scale     float64 // >0: the sigmoid's scale in milli (FGD: 1000)
	GPUWeight float64 // whole-GPU shapes count 1 + GPUWeight × GPUs (frag.Weighted)
	Secondary string  // tie-break before rank: "", "empty", "bestfit", "empty+bestfit"
	Balance   float64 // >0: fragment = FGD's + Balance × Unbalanced
	Reserve   float64 // >0: keep multi-GPU hosts for Reserve × their expected demand (reserve.go)
}

var PartitaTuning = Tuning{Memory: true, Stranded: true, Threshold: frag.DefaultThreshold}

type partita struct {
	frag fragScorer
}

func (*partita) Name() string { return "partita" }

// Score: MIG scores live in migChoice's band above 1e12 and fragment
// scores below it, so a node is never compared across the two kinds (a
// request takes a MIG instance on every node it could use, or on none).
func (s *partita) Score(n *cluster.Node, r *engine.Request) (int64, engine.Hint) {
	if h, sc, ok := migChoice(n, r); ok {
		return sc, h
	}
	sc, h := s.frag.Score(n, r)
	return sc*1000 + s.secondary(n, r), h
}

// secondary breaks ties of the fragment score (FGD leaves them to a random
// node rank): 0..999.
func (s *partita) secondary(n *cluster.Node, r *engine.Request) int64 {
	var v int64
	switch PartitaTuning.Secondary {
	case "empty", "empty+bestfit":
		// Breaking an empty node costs; breaking a big one costs more.
		if len(n.Tasks()) == 0 {
			v = 500 - 50*int64(min(len(n.GPUs), 8))
		} else {
			v = 500
		}
	}
	switch PartitaTuning.Secondary {
	case "bestfit", "empty+bestfit":
		// Less GPU left after placement is better.
		left := n.GPUFreeMilli() - r.GPUMilli()
		v += 499 - int64(left*499/8000)
	}
	return v
}

// Pick honours the scorer's hint; whole GPUs and MIG without a hint go as
// DefaultPicker places them.
func (s *partita) Pick(n *cluster.Node, r *engine.Request, h engine.Hint, rng *rand.Rand) ([]cluster.Grant, bool) {
	return engine.DefaultPicker{}.Pick(n, r, h, rng)
}
