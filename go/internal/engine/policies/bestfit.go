package policies

import (
	"math"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
)

// BestFit prefers the node left with the least CPU and GPU after placement
// (the FGD protocol's BestFit):
//
//	score = ⌊100 × (1 − ½(cpuL − cpu)/C − ½(gL − gpu)/G)⌋
//
// The protocol then min-max normalises scores over the feasible nodes,
// which changes neither the winner nor the ties, so it is left out.
func BestFit(c Config) (engine.Policy, error) {
	if err := needNorms("best-fit", c); err != nil {
		return engine.Policy{}, err
	}
	return engine.Policy{Name: "best-fit", Scorer: bestFit{cpu: float64(c.NormCPU), gpu: float64(c.NormGPU)}}, nil
}

type bestFit struct{ cpu, gpu float64 }

func (bestFit) Name() string { return "best-fit" }

func (s bestFit) Score(n *cluster.Node, r *engine.Request) (int64, engine.Hint) {
	cpu := float64(n.CPUFree()-r.CPUMilli) / s.cpu
	g := float64(n.GPUFreeMilli()-r.GPUMilli()) / s.gpu
	return int64(math.Floor(100 * (1 - 0.5*cpu - 0.5*g))), engine.Hint{}
}
