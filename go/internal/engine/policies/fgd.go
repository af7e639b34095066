package policies

import (
	"errors"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/fmath"
	"partita.dev/partita/internal/workload"
)

// FGD is Fragmentation Gradient Descent (Weng et al., ATC'23): place each
// task where it grows the expected fragmentation least. With F the node's
// fragment (frag.Distribution.Node) before and F' after placement,
//
//	score = ⌊100 × σ((F − F') / 1000)⌋      (σ the logistic function)
//
// For a share, every GPU that fits is tried and the node scores its best
// GPU; the hint names the first GPU reaching that score. Other tasks take
// the lowest-index fully free GPUs. Range 0..100. MIG demands are outside
// FGD's model and score 0 (the shared filter still checks they fit).
func FGD(c Config) (engine.Policy, error) {
	if c.Typical == nil {
		return engine.Policy{}, errors.New("policy fgd: needs the typical workload (Config.Typical)")
	}
	return engine.Policy{Name: "fgd", Scorer: &fragScorer{name: "fgd", typ: c.Typical, rate: gradient}}, nil
}

func gradient(before, after float64) int64 {
	return int64(100 / (1 + fmath.Exp(-(before-after)/1000)))
}

// fragScorer rates a node by how placing the task changes its expected
// fragment; rate turns (before, after) into a score.
type fragScorer struct {
	name string
	typ  *frag.Distribution
	rate func(before, after float64) int64
	// measure is the node fragment: typ.Node (FGD) when nil. Like
	// typ.Node, it must depend on the GPUs' rooms and not on their order:
	// Score tries a share on one GPU per distinct room.
	measure func(model string, cpuLeft, memLeft int64, left []int) float64
}

func (s *fragScorer) node(model string, cpuLeft, memLeft int64, left []int) float64 {
	if s.measure != nil {
		return s.measure(model, cpuLeft, memLeft, left)
	}
	return s.typ.Node(model, cpuLeft, memLeft, left)
}

func (s *fragScorer) Name() string { return s.name }

func (s *fragScorer) Score(n *cluster.Node, r *engine.Request) (int64, engine.Hint) {
	milli, whole := shareOf(n, r)
	if r.Kind == workload.MIGProfile || (r.Kind == workload.MemoryProfile && milli == 0) {
		return 0, engine.Hint{}
	}
	var buf, scratch [16]int
	left := gpuLeft(n, buf[:0])
	model := ""
	if m := n.Model(); m != nil {
		model = m.Name
	}
	before := s.node(model, n.CPUFree(), n.MemFree(), left)
	after := append(scratch[:0], left...)
	cpu, mem := n.CPUFree()-r.CPUMilli, n.MemFree()-r.MemMiB
	if whole || milli == 0 {
		takeFree(after, r.Count)
		return s.rate(before, s.node(model, cpu, mem, after)), engine.Hint{}
	}
	best, hint := int64(0), engine.Hint{}
	for i, l := range left {
		if l < milli || !r.AllowsModel(n.GPUs[i].Model) {
			continue
		}
		if tried(left[:i], l, n, r) {
			// The same room as a GPU tried before: the node's GPUs then
			// hold the same values, which the fragment depends on, not
			// their order; that GPU keeps the hint.
			continue
		}
		after[i] = l - milli
		sc := s.rate(before, s.node(model, cpu, mem, after))
		after[i] = l
		if !hint.Set || sc > best {
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

// takeFree marks the first k fully free GPUs as used.
func takeFree(left []int, k int) {
	for i := range left {
		if k == 0 {
			return
		}
		if left[i] == 1000 {
			left[i] = 0
			k--
		}
	}
}

// tried says whether a GPU of left (those before the one tried now) with
// l milli left was tried for r: one of a model r may use.
func tried(left []int, l int, n *cluster.Node, r *engine.Request) bool {
	for j, x := range left {
		if x == l && r.AllowsModel(n.GPUs[j].Model) {
			return true
		}
	}
	return false
}
