package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strings"
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
	reserve := fs.Float64("production-reserve", -1, "GPUs partita keeps free of borrowed batch and best-effort work and borrowed production on whole GPUs, for production (-1: the scenario's production_reserve_gpus)")
	if err := fs.Parse(args); err != nil {
		return 2
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
		r, err := mixed.Run(sc, mixed.Options{Scheduler: name, Seed: *seed, Trace: trace, ProductionReserveGPUs: reserveGPUs})
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
		fmt.Fprintf(stdout, "%-9s %8.3f %8.3f %4d %9.0fs %9.0fs %7.0fs %6.3f %7d\n", r.Scheduler, r.UsefulUtilization, r.AllocatedUtilization,
			r.OOMEvents, r.WaitP95["production"], r.WaitP95["batch"], r.GuaranteeViolation, r.JainFairness, r.Preemptions)
	}
	return 0
}
