package mixed

import (
	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/scenario"
	"partita.dev/partita/internal/workload"
)

// Schedulers lists the configurations the benchmark compares.
var Schedulers = []string{"naive", "gang-drf", "partita"}

// schedulerConfig builds the named scheduler, told the scenario's request
// mix.
func schedulerConfig(name string, st *cluster.State, arrivals []scenario.Arrival) (sched.Config, error) {
	jobs := make([]workload.Job, len(arrivals))
	for i, a := range arrivals {
		jobs[i] = a.Job
	}
	return sched.Build(name, st, sched.ShapesOf(jobs))
}
