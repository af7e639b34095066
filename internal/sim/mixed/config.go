package mixed

import (
	"fmt"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine/frag"
	"partita.dev/partita/internal/engine/policies"
	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/scenario"
	"partita.dev/partita/internal/workload"
)

// Schedulers lists the configurations the benchmark compares.
var Schedulers = []string{"naive", "gang-drf", "partita"}

// schedulerConfig builds a preset with its placement policy: stock
// Kubernetes placement (whole GPUs, least allocated) for naive and
// gang-drf, Partita's for partita, told the scenario's request mix.
func schedulerConfig(name string, st *cluster.State, arrivals []scenario.Arrival) (sched.Config, error) {
	placement := "k8s-default"
	if name == "partita" {
		placement = "partita"
	}
	shapes := shapesOf(arrivals)
	pc := policies.ConfigFor(st, frag.Typicals(frag.WithoutMemory(shapes), frag.DefaultThreshold, nil))
	pc.Shapes = shapes
	pol, err := policies.New(placement, pc)
	if err != nil {
		return sched.Config{}, fmt.Errorf("scheduler %s: %w", name, err)
	}
	return sched.Preset(name, pol)
}

// shapesOf is the request distribution the placement may know: the tasks
// of the scenario's job stream that take whole GPUs or no GPU (MIG tasks
// are placed by MIG geometry, not fragment measures).
func shapesOf(arrivals []scenario.Arrival) []frag.Shape {
	var shapes []frag.Shape
	for _, a := range arrivals {
		for _, t := range a.Job.Tasks {
			switch t.GPU.Kind {
			case workload.WholeGPUs:
				shapes = append(shapes, frag.Shape{CPUMilli: t.CPUMilli, MemMiB: t.MemoryMiB, Milli: 1000, Num: t.GPU.Count})
			case workload.NoGPU:
				shapes = append(shapes, frag.Shape{CPUMilli: t.CPUMilli, MemMiB: t.MemoryMiB})
			}
		}
	}
	if len(shapes) == 0 {
		shapes = []frag.Shape{{Milli: 1000, Num: 1}}
	}
	return shapes
}
