package fill

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
)

// Experiment is a grid of runs: policies × seeds on one pod list.
type Experiment struct {
	Input    Input
	Policies []string
	Seeds    []int64
	Tune     float64
	Defrag   bool
	// Workers runs seeds in parallel; 0 means one per CPU. Each run is
	// independent and deterministic, so parallelism never changes results.
	Workers int
	// Progress, if set, is called after each run with the count done.
	Progress func(done, total int)
}

// Run runs every (policy, seed) and returns the results by policy, in seed
// order.
func (e *Experiment) Run() (map[string][]*Result, error) {
	if e.Input.Typical == nil {
		e.Input.Typical = Typical(e.Input.Pods)
	}
	if e.Input.Shapes == nil {
		e.Input.Shapes = Shapes(e.Input.Pods)
	}
	type job struct {
		policy string
		seed   int64
	}
	jobs := make(chan job)
	out := map[string][]*Result{}
	var mu sync.Mutex
	var firstErr error
	done, total := 0, len(e.Policies)*len(e.Seeds)
	workers := e.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				r, err := Run(e.Input, Options{Policy: j.policy, Seed: j.seed, Tune: e.Tune, Defrag: e.Defrag})
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("policy %s seed %d: %w", j.policy, j.seed, err)
				}
				if err == nil {
					out[j.policy] = append(out[j.policy], r)
				}
				done++
				if e.Progress != nil {
					e.Progress(done, total)
				}
				mu.Unlock()
			}
		}()
	}
	for _, p := range e.Policies {
		for _, s := range e.Seeds {
			jobs <- job{p, s}
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	for _, rs := range out {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Seed < rs[j].Seed })
	}
	return out, nil
}

// Median returns the median of xs (the mean of the middle two for an even
// count), as the published tables report over seeds 42-51.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
