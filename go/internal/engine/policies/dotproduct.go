package policies

import (
	"math"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
)

// DotProduct prefers the node whose free resources are least aligned with
// the request (Grandl et al.'s Tetris alignment, as run in the FGD
// protocol with -dimext merge -norm max):
//
//	score = ⌊100 × (1 − ½[(cpuL/C)(cpu/C) + (gL/G)(gpu/G)])⌋
//
// with cpuL, gL what is left before placement and C, G the largest node's
// CPU and GPU. Range 0..100 (0 when a task matches a whole empty node).
func DotProduct(c Config) (engine.Policy, error) {
	if err := needNorms("dot-product", c); err != nil {
		return engine.Policy{}, err
	}
	return engine.Policy{Name: "dot-product", Scorer: dotProduct{cpu: float64(c.NormCPU), gpu: float64(c.NormGPU)}}, nil
}

type dotProduct struct{ cpu, gpu float64 }

func (dotProduct) Name() string { return "dot-product" }

func (s dotProduct) Score(n *cluster.Node, r *engine.Request) (int64, engine.Hint) {
	cpu := float64(n.CPUFree()) / s.cpu * float64(r.CPUMilli) / s.cpu
	g := float64(n.GPUFreeMilli()) / s.gpu * float64(r.GPUMilli()) / s.gpu
	return int64(math.Floor(100 * (1 - 0.5*(cpu+g)))), engine.Hint{}
}
