package policies

import (
	"math/rand"

	"errors"
	"math"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/workload"
)

// Partita is our own policy. It is built to be improved: each concern is a
// separate term, and docs/placement.md records what each term gained.
//
//   - Shares and whole GPUs (non-MIG): like FGD, the task goes where it
//     grows the expected fragmentation least, but the gradient is kept at
//     full resolution instead of FGD's ⌊100·σ(·)⌋, which lumps most
//     candidates into a handful of ties.
//   - MIG instances and memory profiles on MIG GPUs: see migScore.
func Partita(c Config) (engine.Policy, error) {
	if c.Typical == nil {
		return engine.Policy{}, errors.New("policy partita: needs the typical workload (Config.Typical)")
	}
	s := &partita{typ: c.Typical}
	return engine.Policy{Name: "partita", Scorer: s, Picker: s}, nil
}

type partita struct {
	typ *frag.Distribution
}

func (*partita) Name() string { return "partita" }

// Score ranges: fragment terms are minus the fragment growth in micro-GPU
// (about -8e6..0); MIG scores are in migScore's own band above 1e12 so a
// node is never compared across the two kinds (a request is one or the
// other on every node).
func (s *partita) Score(n *cluster.Node, r *engine.Request) (int64, engine.Hint) {
	if h, sc, ok := migChoice(n, r); ok {
		return sc, h
	}
	return s.fragScore(n, r)
}

func (s *partita) fragScore(n *cluster.Node, r *engine.Request) (int64, engine.Hint) {
	var buf, scratch [16]int
	left := gpuLeft(n, buf[:0])
	model := ""
	if m := n.Model(); m != nil {
		model = m.Name
	}
	before := s.typ.Node(model, n.CPUFree(), left)
	after := append(scratch[:0], left...)
	cpu := n.CPUFree() - r.CPUMilli
	milli, whole := shareOf(n, r)
	if whole || milli == 0 {
		takeFree(after, r.Count)
		return growth(before, s.typ.Node(model, cpu, after)), engine.Hint{}
	}
	best, hint := int64(math.MinInt64), engine.Hint{}
	for i, l := range left {
		if l < milli || !r.AllowsModel(n.GPUs[i].Model) {
			continue
		}
		after[i] = l - milli
		sc := growth(before, s.typ.Node(model, cpu, after))
		after[i] = l
		if sc > best {
			best, hint = sc, engine.Hint{Set: true, GPU: i}
		}
	}
	return best, hint
}

// shareOf returns the share r takes of one non-MIG GPU on n, or whole.
func shareOf(n *cluster.Node, r *engine.Request) (milli int, whole bool) {
	switch r.Kind {
	case workload.WholeGPUs:
		return 1000, true
	case workload.Fraction:
		return r.Milli, false
	case workload.MemoryProfile:
		if m := n.Model(); m != nil {
			_, milli = r.Resolve(m)
		}
		return milli, false
	}
	return 0, false
}

// growth scores a fragment change: less growth is better; micro-GPU
// resolution keeps distinct candidates distinct.
func growth(before, after float64) int64 {
	return -int64(math.Round((after - before) * 1000))
}

// Pick honours the scorer's hint; whole GPUs and MIG without a hint go as
// DefaultPicker places them.
func (s *partita) Pick(n *cluster.Node, r *engine.Request, h engine.Hint, rng *rand.Rand) ([]cluster.Grant, bool) {
	return engine.DefaultPicker{}.Pick(n, r, h, rng)
}
