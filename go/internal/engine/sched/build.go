package sched

import (
	"fmt"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/engine/policies"
	"partita.dev/partita/internal/workload"
)

// Build makes a preset with its placement policy, the way every world
// does: stock Kubernetes placement (whole GPUs, least allocated) for naive
// and gang-drf, Partita's for partita, told the expected request mix
// (ShapesOf).
func Build(name string, st *cluster.State, shapes []frag.Shape) (Config, error) {
	placement := "k8s-default"
	if name == "partita" {
		placement = "partita"
	}
	if len(shapes) == 0 {
		shapes = []frag.Shape{{Milli: 1000, Num: 1}}
	}
	pc := policies.ConfigFor(st, frag.Typicals(frag.WithoutMemory(shapes), frag.DefaultThreshold, nil))
	pc.Shapes = shapes
	pol, err := policies.New(placement, pc)
	if err != nil {
		return Config{}, fmt.Errorf("scheduler %s: %w", name, err)
	}
	return Preset(name, pol)
}

// ShapesOf is the request mix a placement may know in advance: the tasks
// of the expected jobs that take whole GPUs or no GPU (MIG tasks are
// placed by MIG geometry, not fragment measures).
func ShapesOf(jobs []workload.Job) []frag.Shape {
	var shapes []frag.Shape
	for _, j := range jobs {
		for _, t := range j.Tasks {
			switch t.GPU.Kind {
			case workload.WholeGPUs:
				shapes = append(shapes, frag.Shape{CPUMilli: t.CPUMilli, MemMiB: t.MemoryMiB, Milli: 1000, Num: t.GPU.Count})
			case workload.NoGPU:
				shapes = append(shapes, frag.Shape{CPUMilli: t.CPUMilli, MemMiB: t.MemoryMiB})
			}
		}
	}
	return shapes
}
