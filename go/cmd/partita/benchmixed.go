package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"partita.dev/partita/internal/scenario"
	"partita.dev/partita/internal/sim/mixed"
)

func runBenchMixed(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench mixed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scenarioPath := fs.String("scenario", "scenarios/default.yaml", "scenario file")
	policyList := fs.String("policies", strings.Join(mixed.Schedulers, ","), "schedulers to compare: naive, gang-drf, partita")
	seed := fs.Int64("seed", 0, "job-stream seed (0: the scenario's)")
	outDir := fs.String("out", "", "write report.md and SVG charts to this directory")
	asJSON := fs.Bool("json", false, "print one JSON object")
	horizon := fs.Duration("horizon", 0, "simulate this long instead of the scenario's duration")
	tracePath := fs.String("trace", "", "write every decision carried out to this file (one run only)")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the runs to this file")
	memProfile := fs.String("memprofile", "", "write a Go allocation profile of the runs to this file")
	seedList := fs.String("seeds", "", "run every seed of a range (1-144) or list (1,5,9) and summarize each scheduler over them (not with --seed, --out or --trace)")
	workers := fs.Int("workers", 0, "parallel runs with --seeds (0: one per CPU)")
	cycleEvery := fs.Duration("cycle-every", 0, "the longest the scheduler waits between cycles while work waits (0: 60 s, the standalone server's 1 s tick at 60x)")
	coalesce := fs.Duration("coalesce", 0, "the least time between two full cycles, so that events close together share one (0: 5 s, about the standalone server's 100 ms at 60x)")
	reserve := fs.Float64("production-reserve", -1, "GPUs partita keeps free of borrowed batch and best-effort work and borrowed production on whole GPUs, for production (-1: the scenario's production_reserve_gpus)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var seeds []int64
	if *seedList != "" {
		for _, f := range []struct {
			name string
			set  bool
		}{{"--seed", *seed != 0}, {"--out", *outDir != ""}, {"--trace", *tracePath != ""}} {
			if f.set {
				fmt.Fprintf(stderr, "bench mixed: --seeds runs many job streams; %s is for one\n", f.name)
				return 2
			}
		}
		var err error
		if seeds, err = parseSeeds(*seedList); err != nil {
			fmt.Fprintf(stderr, "bench mixed: --seeds: %v\n", err)
			return 2
		}
	}
	if *workers < 0 {
		fmt.Fprintf(stderr, "bench mixed: --workers %d: want 0 (one per CPU) or more\n", *workers)
		return 2
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"cycle-every", *cycleEvery}, {"coalesce", *coalesce}} {
		if f.d != 0 && f.d < time.Second {
			fmt.Fprintf(stderr, "bench mixed: --%s %v: want 1s or more (0: the default)\n", f.name, f.d)
			return 2
		}
	}
	var reserveGPUs *float64 // nil: the scenario's
	if *reserve != -1 {
		if !(*reserve >= 0) || math.IsInf(*reserve, 1) { // also NaN
			fmt.Fprintf(stderr, "bench mixed: --production-reserve %v: want a number of GPUs, 0 or more (-1: the scenario's)\n", *reserve)
			return 2
		}
		reserveGPUs = reserve
	}
	if os.Getenv("GOGC") == "" {
		// A simulation allocates fast and keeps little: a week of
		// week-1000 took 43.9 s (52.9 s of CPU, 343 MB peak) with the
		// default GOGC=100 and 36.6 s (39.6 s, 726 MB) with 400
		// (docs/mixed.md). The variable still overrides.
		debug.SetGCPercent(400)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "bench mixed: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "bench mixed: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		defer func() {
			f, err := os.Create(*memProfile)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
			if err != nil {
				fmt.Fprintf(stderr, "bench mixed: %v\n", err)
			}
		}()
	}
	sc, err := scenario.Load(*scenarioPath)
	if err != nil {
		fmt.Fprintf(stderr, "bench mixed: %v\n", err)
		return 1
	}
	if *horizon > 0 {
		sc.Duration = *horizon
	}
	// What every run shares; each sets its scheduler and seed.
	world := mixed.Options{ProductionReserveGPUs: reserveGPUs, CycleEvery: *cycleEvery, Coalesce: *coalesce}
	if seeds != nil {
		return runMixedSeeds(sc, splitList(*policyList), seeds, *workers, world, *asJSON, stdout, stderr)
	}
	if *seed == 0 {
		*seed = sc.Seed
	}
	var trace io.Writer
	if *tracePath != "" {
		f, err := os.Create(*tracePath)
		if err != nil {
			fmt.Fprintf(stderr, "bench mixed: %v\n", err)
			return 1
		}
		defer f.Close()
		trace = f
	}
	var results []*mixed.Result
	for _, name := range splitList(*policyList) {
		start := time.Now()
		opt := world
		opt.Scheduler, opt.Seed, opt.Trace = name, *seed, trace
		r, err := mixed.Run(sc, opt)
		if err != nil {
			fmt.Fprintf(stderr, "bench mixed: %s: %v\n", name, err)
			return 1
		}
		fmt.Fprintf(stderr, "bench mixed %s: %s simulated in %.1fs\n", name, sc.Duration, time.Since(start).Seconds())
		results = append(results, r)
	}
	if *outDir != "" {
		cmd := "partita bench mixed " + strings.Join(args, " ")
		if err := mixed.WriteReport(*outDir, cmd, results); err != nil {
			fmt.Fprintf(stderr, "bench mixed: %v\n", err)
			return 1
		}
	}
	if *asJSON {
		out := struct {
			Scenario string                   `json:"scenario"`
			Policies map[string]*mixed.Result `json:"policies"`
		}{Scenario: sc.Name, Policies: map[string]*mixed.Result{}}
		for _, r := range results {
			out.Policies[r.Scheduler] = r
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return 1
		}
		return 0
	}
	fmt.Fprintf(stdout, "%-9s %8s %8s %4s %10s %10s %8s %6s %7s\n", "scheduler", "useful", "alloc", "OOM", "prod p95", "batch p95", "viol.", "Jain", "preempt")
	for _, r := range results {
		jain := "n/a" // no sample
		if r.JainFairness != nil {
			jain = fmt.Sprintf("%.3f", *r.JainFairness)
		}
		fmt.Fprintf(stdout, "%-9s %8.3f %8.3f %4d %9.0fs %9.0fs %7.0fs %6s %7d\n", r.Scheduler, r.UsefulUtilization, r.AllocatedUtilization,
			r.OOMEvents, r.WaitP95["production"], r.WaitP95["batch"], r.GuaranteeViolation, jain, r.Preemptions)
	}
	return 0
}

// runMixedSeeds is bench mixed --seeds: every scheduler on every seed,
// runs in parallel, then a summary per scheduler (mixed.Summarize).
func runMixedSeeds(sc *scenario.Scenario, policies []string, seeds []int64, workers int, world mixed.Options, asJSON bool, stdout, stderr io.Writer) int {
	seeds = slices.Compact(seeds) // parseSeeds sorts
	if workers == 0 {
		workers = runtime.NumCPU()
	}
	type run struct {
		policy int
		seed   int
	}
	results := make([][]*mixed.Result, len(policies))
	errs := make([][]error, len(policies))
	for p := range results {
		results[p] = make([]*mixed.Result, len(seeds))
		errs[p] = make([]error, len(seeds))
	}
	runs := make(chan run)
	start := time.Now()
	var mu sync.Mutex
	done := 0
	var wg sync.WaitGroup
	for range min(workers, len(policies)*len(seeds)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range runs {
				opt := world
				opt.Scheduler, opt.Seed = policies[r.policy], seeds[r.seed]
				res, err := mixed.Run(sc, opt)
				mu.Lock()
				results[r.policy][r.seed], errs[r.policy][r.seed] = res, err
				done++
				fmt.Fprintf(stderr, "\rbench mixed: %d/%d runs, %.1fs", done, len(policies)*len(seeds), time.Since(start).Seconds())
				mu.Unlock()
			}
		}()
	}
	for p := range policies {
		for k := range seeds {
			runs <- run{p, k}
		}
	}
	close(runs)
	wg.Wait()
	fmt.Fprintln(stderr)
	for p := range policies {
		for k, err := range errs[p] {
			if err != nil { // the first in order, whichever failed first
				fmt.Fprintf(stderr, "bench mixed: %s, seed %d: %v\n", policies[p], seeds[k], err)
				return 1
			}
		}
	}
	if asJSON {
		type perPolicy struct {
			Summary mixed.Summary            `json:"summary"`
			Seeds   map[string]*mixed.Result `json:"seeds"`
		}
		out := struct {
			Scenario string                `json:"scenario"`
			Seeds    []int64               `json:"seeds"`
			Policies map[string]*perPolicy `json:"policies"`
		}{Scenario: sc.Name, Seeds: seeds, Policies: map[string]*perPolicy{}}
		for p, name := range policies {
			pp := &perPolicy{Summary: mixed.Summarize(results[p]), Seeds: map[string]*mixed.Result{}}
			for k, r := range results[p] {
				pp.Seeds[strconv.FormatInt(seeds[k], 10)] = r
			}
			out.Policies[name] = pp
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return 1
		}
		return 0
	}
	fmt.Fprintf(stdout, "%d seeds, %d to %d, of %s; targets: useful >= %.2f, production p95 <= %.0f s, Jain >= %.1f, no OOM, no guarantee violation\n",
		len(seeds), seeds[0], seeds[len(seeds)-1], sc.Name, mixed.TargetUseful, mixed.TargetProductionP95, mixed.TargetJain)
	row := "%-9s %7s %7s %7s %7s %5s %10s %10s %7s %9s %4s %8s %5s %7s\n"
	fmt.Fprintf(stdout, row, "scheduler", "useful", "min", "useful", "p95", "both", "violation", "owed", "no", "Jain", "OOM", "preempt", "all", "all met")
	fmt.Fprintf(stdout, row, "", "mean", "", "met", "met", "met", "s", "clock s", "violat.", "met", "", "", "met", "(owed)")
	var m mixed.Summary
	for p, name := range policies {
		m = mixed.Summarize(results[p])
		fmt.Fprintf(stdout, "%-9s %7.3f %7.3f %7d %7d %5d %10.0f %10.0f %7d %9s %4d %8d %5d %7d\n", name, m.UsefulMean, m.UsefulMin, m.UsefulMet,
			m.ProductionP95Met, m.BothMet, m.ViolationTotal, m.ViolationOwedTotal, m.NoViolation, fmt.Sprintf("%d/%d", m.JainMet, m.JainSeeds),
			m.OOMEvents, m.Preemptions, m.AllTargetsMet, m.AllTargetsMetOwed)
	}
	if len(policies) > 0 {
		// The same for every scheduler (it depends on the seeds only):
		// the last summary's.
		fmt.Fprintf(stdout, "offered load (the streams' GPU-time over the cluster's): mean %.3f, least %.3f, under 1 on %d of %d seeds\n",
			m.OfferedLoadMean, m.OfferedLoadMin, m.BelowCapacity, m.Seeds)
	}
	return 0
}
