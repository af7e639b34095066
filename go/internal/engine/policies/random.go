package policies

import (
	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/random"
)

// Random places each task on a node drawn uniformly from those that fit,
// and a share on a GPU drawn uniformly from those that fit (the FGD
// protocol's Random with -gpusel random).
func Random() engine.Policy {
	return engine.Policy{Name: "random", Selector: uniform{}, Picker: engine.RandomPicker{}, Volatile: false}
}

type uniform struct{}

func (uniform) Select(_ *cluster.State, feasible []int, rng *random.Rand) int {
	return feasible[rng.Intn(len(feasible))]
}
