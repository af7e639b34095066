package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"partita.dev/partita/internal/sim/fill"
	"partita.dev/partita/internal/trace"
)

func init() {
	register("bench", "benchmarks: fill (FGD protocol on the Alibaba trace), mixed (inference + training), api (server load)", runBench)
}

var benchCommands = map[string]func(args []string, stdout, stderr io.Writer) int{
	"fill":  runBenchFill,
	"mixed": runBenchMixed,
}

func runBench(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || benchCommands[args[0]] == nil {
		fmt.Fprintln(stderr, "usage: partita bench <fill|mixed|api> [flags]")
		return 2
	}
	return benchCommands[args[0]](args[1:], stdout, stderr)
}

func runBenchFill(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench fill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodesPath := fs.String("nodes", "", "node list CSV (openb_node_list_gpu_node.csv)")
	podsArg := fs.String("pods", "", "pod list CSV (openb_pod_list_*.csv); several separated by commas, or a directory for all openb_pod_list_*.csv in it")
	policyList := fs.String("policies", "random,dot-product,gpu-clustering,gpu-packing,best-fit,fgd,partita", "comma-separated policies")
	seedSpec := fs.String("seeds", "42-51", "seeds: a range 42-51 or a list 42,43")
	tune := fs.Float64("tune", 1.3, "inflate (or trim) the pod list to this multiple of the cluster's GPUs")
	outDir := fs.String("out", "", "write curves CSV, a Markdown table and an SVG chart to this directory (one subdirectory per pod list when there are several)")
	asJSON := fs.Bool("json", false, "print one JSON object (an array of them for several pod lists) instead of a table")
	defrag := fs.Bool("defrag", false, "beyond the protocol: let the policy move placed shares to make room for a pod that fits nowhere")
	workers := fs.Int("workers", 0, "parallel runs (0 = one per CPU)")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	expected := fs.String("expected", "", "published curves (analysis_allo_discrete.csv); default: ../fgd-expected beside the pod lists, when present")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *nodesPath == "" || *podsArg == "" {
		fmt.Fprintln(stderr, "bench fill: --nodes and --pods are required")
		return 2
	}
	seeds, err := parseSeeds(*seedSpec)
	if err != nil {
		fmt.Fprintf(stderr, "bench fill: --seeds: %v\n", err)
		return 2
	}
	podPaths, err := podLists(*podsArg)
	if err != nil {
		fmt.Fprintf(stderr, "bench fill: --pods: %v\n", err)
		return 2
	}
	nodes, err := trace.ReadNodesFile(*nodesPath)
	if err != nil {
		fmt.Fprintf(stderr, "bench fill: %v\n", err)
		return 1
	}
	published, err := readPublished(*expected, podPaths[0])
	if err != nil {
		fmt.Fprintf(stderr, "bench fill: %v\n", err)
		return 1
	}
	var all []fill.ListResult
	for _, podsPath := range podPaths {
		pods, err := trace.ReadPodsFile(podsPath)
		if err != nil {
			fmt.Fprintf(stderr, "bench fill: %v\n", err)
			return 1
		}
		exp := &fill.Experiment{
			Input: fill.Input{Nodes: nodes, Pods: pods}, Policies: splitList(*policyList),
			Seeds: seeds, Tune: *tune, Defrag: *defrag, Workers: *workers,
		}
		start := time.Now()
		if !*quiet {
			exp.Progress = func(done, total int) {
				fmt.Fprintf(stderr, "\rbench fill %s: %d/%d runs, %.1fs", filepath.Base(podsPath), done, total, time.Since(start).Seconds())
				if done == total {
					fmt.Fprintln(stderr)
				}
			}
		}
		results, err := exp.Run()
		if err != nil {
			fmt.Fprintf(stderr, "bench fill: %v\n", err)
			return 1
		}
		lr := fill.ListResult{Pods: podsPath, Experiment: exp, Results: results, Wall: time.Since(start)}
		all = append(all, lr)
		if *outDir != "" {
			dir := *outDir
			if len(podPaths) > 1 {
				dir = filepath.Join(dir, fill.WorkloadName(podsPath))
			}
			if err := fill.WriteReport(dir, podsPath, exp, results, published); err != nil {
				fmt.Fprintf(stderr, "bench fill: %v\n", err)
				return 1
			}
		}
		if !*asJSON {
			printFillTable(stdout, podsPath, exp.Policies, results)
		}
	}
	if *outDir != "" && len(all) > 1 {
		if err := fill.WriteSummary(filepath.Join(*outDir, "README.md"), all, published, strings.Join(args, " ")); err != nil {
			fmt.Fprintf(stderr, "bench fill: %v\n", err)
			return 1
		}
	}
	if *asJSON {
		return printFillJSON(stdout, all)
	}
	return 0
}

// podLists expands --pods: a comma-separated list, or a directory.
func podLists(arg string) ([]string, error) {
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		paths, err := filepath.Glob(filepath.Join(arg, "openb_pod_list_*.csv"))
		if err != nil {
			return nil, err
		}
		if len(paths) == 0 {
			return nil, fmt.Errorf("no openb_pod_list_*.csv in %s", arg)
		}
		sort.Strings(paths)
		return paths, nil
	}
	return splitList(arg), nil
}

// readPublished reads the published curves named by flag, or found beside
// the pod list (shared/data/fgd-expected); nil when there are none.
func readPublished(flagPath, podsPath string) (fill.Published, error) {
	path := flagPath
	if path == "" {
		path = filepath.Join(filepath.Dir(filepath.Dir(podsPath)), "fgd-expected", "analysis_allo_discrete.csv")
		if _, err := os.Stat(path); err != nil {
			return nil, nil
		}
	}
	return fill.ReadPublished(path)
}

type fillPolicyJSON struct {
	Median float64            `json:"median_unallocated_at_100"`
	Seeds  map[string]float64 `json:"seeds"`
	Failed map[string]int     `json:"failed_pods,omitempty"`
	Moves  map[string]int     `json:"moves,omitempty"`
}

func printFillJSON(w io.Writer, all []fill.ListResult) int {
	type listJSON struct {
		Pods     string                    `json:"pods"`
		Policies map[string]fillPolicyJSON `json:"policies"`
	}
	var out []listJSON
	for _, lr := range all {
		lj := listJSON{Pods: filepath.Base(lr.Pods), Policies: map[string]fillPolicyJSON{}}
		for _, p := range lr.Experiment.Policies {
			pj := fillPolicyJSON{Seeds: map[string]float64{}, Failed: map[string]int{}}
			var vals []float64
			for _, r := range lr.Results[p] {
				s := strconv.FormatInt(r.Seed, 10)
				pj.Seeds[s] = r.Unallocated()
				pj.Failed[s] = r.Failed
				if r.Moves > 0 {
					if pj.Moves == nil {
						pj.Moves = map[string]int{}
					}
					pj.Moves[s] = r.Moves
				}
				vals = append(vals, r.Unallocated())
			}
			pj.Median = fill.Median(vals)
			lj.Policies[p] = pj
		}
		out = append(out, lj)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	var err error
	if len(out) == 1 {
		err = enc.Encode(out[0])
	} else {
		err = enc.Encode(out)
	}
	if err != nil {
		return 1
	}
	return 0
}

func printFillTable(w io.Writer, pods string, policies []string, results map[string][]*fill.Result) {
	fmt.Fprintf(w, "%s: unallocated GPU %% at arrived workload = 100%% (median over seeds)\n", filepath.Base(pods))
	for _, p := range policies {
		var vals []float64
		var seeds []string
		for _, r := range results[p] {
			vals = append(vals, r.Unallocated())
			seeds = append(seeds, fmt.Sprintf("%.2f", r.Unallocated()))
		}
		fmt.Fprintf(w, "  %-15s %6.2f   [%s]\n", p, fill.Median(vals), strings.Join(seeds, " "))
	}
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// maxSeeds bounds a --seeds list: each seed is a whole run.
const maxSeeds = 10000

// parseSeeds reads "42-51" or "42,43,47".
func parseSeeds(s string) ([]int64, error) {
	var seeds []int64
	for _, part := range splitList(s) {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseInt(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a seed", part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseInt(hi, 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("%q is not a seed range", part)
			}
			if b-a >= maxSeeds {
				return nil, fmt.Errorf("%q: more than %d seeds", part, maxSeeds)
			}
		}
		// Counted, not x <= b: with b the largest int64, x++ wraps and
		// the loop never ends.
		for k := int64(0); k <= b-a; k++ {
			seeds = append(seeds, a+k)
		}
		if len(seeds) > maxSeeds {
			return nil, fmt.Errorf("%q: more than %d seeds in all", s, maxSeeds)
		}
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("no seeds in %q", s)
	}
	sort.Slice(seeds, func(i, j int) bool { return seeds[i] < seeds[j] })
	return seeds, nil
}
