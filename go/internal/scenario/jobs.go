package scenario

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"partita.dev/partita/internal/fmath"
	"partita.dev/partita/internal/profiles"
	"partita.dev/partita/internal/random"
	"partita.dev/partita/internal/trace"
	"partita.dev/partita/internal/workload"
)

// Arrival is one job of the stream: when it arrives, what it asks for, and
// how long it runs once all its tasks have started.
type Arrival struct {
	At              time.Duration // since the start of the scenario
	Job             workload.Job
	Duration        time.Duration // run time; work lost to preemption comes on top
	CheckpointEvery time.Duration // training: a preempted job loses the work since its last checkpoint; 0: all of it
}

// minRunTime is the shortest run time Jobs gives a job; a draw from a
// continuous distribution can come arbitrarily close to zero, and a job
// that runs for no time means nothing to a scheduler.
const minRunTime = time.Second

// Jobs generates the jobs that arrive over the horizon, in order of arrival
// (ties: workloads in file order, then each workload's own order). The
// stream depends only on the scenario and seed: each workload draws from
// its own math/rand source, seeded from seed and the workload's name, so
// adding or removing a workload leaves the others' jobs as they were.
//
// Job IDs are the workload's name and a sequence number ("chat-000123"),
// task names the job ID and the task's index ("chat-000123-0").
func (s *Scenario) Jobs(seed int64) ([]Arrival, error) {
	var all []Arrival
	traces := map[string][]trace.Pod{} // by file, for workloads sharing one
	for i := range s.Workloads {
		arrivals, err := s.workloadJobs(i, seed, traces)
		if err != nil {
			return nil, err
		}
		all = append(all, arrivals...)
	}
	slices.SortStableFunc(all, func(a, b Arrival) int { return cmp.Compare(a.At, b.At) })
	return all, nil
}

// generator draws the jobs of one workload.
type generator struct {
	s      *Scenario
	w      *Workload
	rng    *random.Rand
	models map[string][]string // per profile; nil: any model
	out    []Arrival
}

func (s *Scenario) workloadJobs(i int, seed int64, traces map[string][]trace.Pod) ([]Arrival, error) {
	w := &s.Workloads[i]
	g := &generator{s: s, w: w, rng: random.New(streamSeed(seed, w.Name)), models: map[string][]string{}}
	for _, m := range w.Mix {
		g.models[m.Profile.Name] = s.modelsFor(m.Profile)
	}
	switch w.Arrival.Process {
	case Poisson:
		perSecond := w.Arrival.RatePerHour / 3600
		for t := 0.0; ; {
			t += g.rng.ExpFloat64() / perSecond
			at := seconds(t)
			if at >= s.Duration {
				break
			}
			g.emit(at, 0)
		}
	case Fixed:
		for _, at := range slices.Sorted(slices.Values(w.Arrival.At)) {
			g.emit(at, 0)
		}
	case Trace:
		if err := g.fromTrace(fmt.Sprintf("workloads[%d].arrival.file", i), traces); err != nil {
			return nil, err
		}
	default:
		return nil, s.errorf(fmt.Sprintf("workloads[%d].arrival.process", i), "unknown process %q", w.Arrival.Process)
	}
	return g.out, nil
}

// streamSeed mixes the scenario's seed with a workload's name.
func streamSeed(seed int64, name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return seed ^ int64(h.Sum64())
}

// seconds turns a time in seconds into a Duration, saturating rather
// than overflowing.
func seconds(t float64) time.Duration {
	if !(t < float64(maxHorizon/time.Second)) {
		return maxHorizon
	}
	return time.Duration(t * float64(time.Second))
}

// fromTrace takes arrival times, and run times unless the workload gives a
// distribution, from the GPU pods of an Alibaba pod list: creation_time is
// the arrival, deletion_time − creation_time the run time, both multiplied
// by time_scale. A pod without a deletion time runs to the end of the
// horizon. Pods without GPUs are left out: the trace gives timing only, and
// the workload's profile gives the demand.
func (g *generator) fromTrace(field string, traces map[string][]trace.Pod) error {
	a := &g.w.Arrival
	pods, ok := traces[a.File]
	if !ok {
		var err error
		if pods, err = trace.ReadPodsFile(a.File); err != nil {
			return g.s.errorf(field, "%v", err)
		}
		traces[a.File] = pods
	}
	type timed struct{ at, run time.Duration }
	var times []timed
	for _, p := range pods {
		if p.NumGPU == 0 {
			continue
		}
		if !p.HasCreation {
			return g.s.errorf(field, "%s:%d: pod %s has no creation_time", a.File, p.Line, p.Name)
		}
		at := seconds(float64(p.CreationTime) * a.TimeScale)
		if at >= g.s.Duration {
			continue
		}
		run := g.s.Duration - at
		if p.HasDeletion {
			if p.DeletionTime < p.CreationTime {
				return g.s.errorf(field, "%s:%d: pod %s is deleted (%d) before it is created (%d)",
					a.File, p.Line, p.Name, p.DeletionTime, p.CreationTime)
			}
			run = seconds(float64(p.DeletionTime-p.CreationTime) * a.TimeScale)
		}
		times = append(times, timed{at, max(run, minRunTime)})
	}
	slices.SortStableFunc(times, func(x, y timed) int { return cmp.Compare(x.at, y.at) })
	for _, t := range times {
		g.emit(t.at, t.run)
	}
	return nil
}

// emit adds the next job, arriving at at. run is the trace's run time, used
// when the workload has no duration distribution. The draws come in a
// fixed order: profile, run time, gang size.
func (g *generator) emit(at, run time.Duration) {
	w := g.w
	p := g.pickProfile()
	if w.Duration.Dist != "" {
		run = g.runTime()
	}
	n, gang := w.Replicas, 0
	if w.Kind() == profiles.Training {
		n = g.pickGang()
		gang = n
	}
	id := fmt.Sprintf("%s-%06d", w.Name, len(g.out))
	tasks := make([]workload.Task, n)
	for k := range tasks {
		tasks[k] = p.Task(fmt.Sprintf("%s-%d", id, k))
		tasks[k].GPU = p.Demand(g.models[p.Name])
	}
	g.out = append(g.out, Arrival{
		At:              at,
		Job:             workload.Job{ID: id, Team: w.Team, Project: w.Name, Class: w.Class, Tasks: tasks, GangSize: gang},
		Duration:        run,
		CheckpointEvery: w.CheckpointEvery,
	})
}

func (g *generator) pickProfile() profiles.Profile {
	mix := g.w.Mix
	if len(mix) == 1 {
		return mix[0].Profile
	}
	weights := make([]float64, len(mix))
	for i, m := range mix {
		weights[i] = m.Weight
	}
	return mix[pick(g.rng, weights)].Profile
}

func (g *generator) pickGang() int {
	sizes := g.w.Gang.Sizes
	if len(sizes) == 1 {
		return sizes[0]
	}
	return sizes[pick(g.rng, g.w.Gang.Weights)]
}

// pick draws an index with probability proportional to its weight.
func pick(rng *random.Rand, weights []float64) int {
	total := 0.0
	for _, w := range weights {
		total += w
	}
	u := rng.Float64() * total
	for i, w := range weights {
		if u < w {
			return i
		}
		u -= w
	}
	return len(weights) - 1 // u landed on the total through rounding
}

// runTime draws from the workload's distribution, within [minRunTime,
// maxHorizon].
func (g *generator) runTime() time.Duration {
	d := &g.w.Duration
	var sec float64
	switch d.Dist {
	case Exponential:
		sec = g.rng.ExpFloat64() * d.Mean.Seconds()
	case Lognormal:
		// Mean is the distribution's mean: exp(mu + sigma²/2) = Mean.
		mu := fmath.Log(d.Mean.Seconds()) - float64(d.Sigma*d.Sigma)/2
		sec = fmath.Exp(mu + float64(d.Sigma*g.rng.NormFloat64()))
	case Constant:
		sec = d.Value.Seconds()
	case Uniform:
		sec = d.Min.Seconds() + float64(g.rng.Float64()*(d.Max-d.Min).Seconds())
	}
	return max(seconds(sec), minRunTime)
}

// MeanRunTime is the mean of the distribution; 0 when Dist is "" (trace
// times).
func (d Dist) MeanRunTime() time.Duration {
	switch d.Dist {
	case Exponential, Lognormal:
		return d.Mean
	case Constant:
		return d.Value
	case Uniform:
		return (d.Min + d.Max) / 2
	}
	return 0
}

// OfferedLoad is the GPUs the workloads keep busy on average if every job
// runs as soon as it arrives (Little's law: jobs per hour × mean run time ×
// GPU-equivalents per job), to compare with GPUs(). A task on a MIG slice
// counts as the larger of its compute and memory share of the GPU. Trace
// workloads are not counted: their rate is in the file.
func (s *Scenario) OfferedLoad() float64 {
	total := 0.0
	for i := range s.Workloads {
		total += s.WorkloadLoad(&s.Workloads[i])
	}
	return total
}

// WorkloadLoad is one workload's part of OfferedLoad.
func (s *Scenario) WorkloadLoad(w *Workload) float64 {
	var perHour float64
	switch w.Arrival.Process {
	case Poisson:
		perHour = w.Arrival.RatePerHour
	case Fixed:
		perHour = float64(len(w.Arrival.At)) / s.Duration.Hours()
	default:
		return 0
	}
	tasks := float64(w.Replicas)
	if w.Kind() == profiles.Training {
		tasks = weightedMean(w.Gang.Sizes, w.Gang.Weights)
	}
	var gpus, weights float64
	for _, m := range w.Mix {
		gpus += m.Weight * s.gpuEquivalents(m.Profile)
		weights += m.Weight
	}
	if weights == 0 {
		return 0
	}
	return perHour * w.Duration.MeanRunTime().Hours() * tasks * gpus / weights
}

func weightedMean(values []int, weights []float64) float64 {
	var sum, total float64
	for i, v := range values {
		if i < len(weights) {
			sum += float64(v) * weights[i]
			total += weights[i]
		}
	}
	if total == 0 {
		return 0
	}
	return sum / total
}
