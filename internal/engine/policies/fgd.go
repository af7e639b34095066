package policies

import (
	"errors"
	"math"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/engine/frag"
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
	return engine.Policy{Name: "fgd", Scorer: &fgd{typ: c.Typical}}, nil
}

type fgd struct{ typ *frag.Distribution }

func (*fgd) Name() string { return "fgd" }

func (s *fgd) Score(n *cluster.Node, r *engine.Request) (int64, engine.Hint) {
	if r.Kind == workload.MIGProfile || r.Kind == workload.MemoryProfile {
		return 0, engine.Hint{}
	}
	var buf, scratch [16]int
	left := gpuLeft(n, buf[:0])
	model := ""
	if m := n.Model(); m != nil {
		model = m.Name
	}
	before := s.typ.Node(model, n.CPUFree(), left)
	after := append(scratch[:0], left...)
	cpu := n.CPUFree() - r.CPUMilli
	if !r.IsFractional() {
		takeFree(after, r.Count)
		return gradient(before, s.typ.Node(model, cpu, after)), engine.Hint{}
	}
	best, hint := int64(0), engine.Hint{}
	for i, l := range left {
		if l < r.Milli {
			continue
		}
		after[i] = l - r.Milli
		sc := gradient(before, s.typ.Node(model, cpu, after))
		after[i] = l
		if !hint.Set || sc > best {
			best, hint = sc, engine.Hint{Set: true, GPU: i}
		}
	}
	return best, hint
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

func gradient(before, after float64) int64 {
	return int64(100 / (1 + math.Exp(-(before-after)/1000)))
}
