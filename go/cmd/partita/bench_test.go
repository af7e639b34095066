package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"partita.dev/partita/internal/sim/fill"
	"partita.dev/partita/internal/trace"
)

// The small fixtures of the fill experiment's own tests: five nodes
// (26 GPUs) and 36 pods.
const (
	benchNodes = "../../internal/sim/fill/testdata/nodes_small.csv"
	benchPods  = "../../internal/sim/fill/testdata/pods_small.csv"
)

func runBenchFillArgs(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = dispatch(append([]string{"bench", "fill"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

type benchFillJSON struct {
	Pods     string `json:"pods"`
	Policies map[string]struct {
		Median float64            `json:"median_unallocated_at_100"`
		Seeds  map[string]float64 `json:"seeds"`
	} `json:"policies"`
}

func TestBenchFillJSON(t *testing.T) {
	code, stdout, stderr := runBenchFillArgs("--nodes", benchNodes, "--pods", benchPods,
		"--policies", "best-fit,fgd", "--seeds", "42-44", "--workers", "2", "--quiet", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got benchFillJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("output does not decode: %v\n%s", err, stdout)
	}
	if got.Pods != "pods_small.csv" {
		t.Errorf("pods %q; want pods_small.csv", got.Pods)
	}
	if len(got.Policies) != 2 {
		t.Fatalf("policies %v; want best-fit and fgd", got.Policies)
	}
	nodes, err := trace.ReadNodesFile(benchNodes)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := trace.ReadPodsFile(benchPods)
	if err != nil {
		t.Fatal(err)
	}
	for _, policy := range []string{"best-fit", "fgd"} {
		p, ok := got.Policies[policy]
		if !ok {
			t.Fatalf("no %s in %v", policy, got.Policies)
		}
		var keys []string
		var vals []float64
		for _, seed := range []int64{42, 43, 44} {
			r, err := fill.Run(fill.Input{Nodes: nodes, Pods: pods}, fill.Options{Policy: policy, Seed: seed, Tune: 1.3})
			if err != nil {
				t.Fatal(err)
			}
			key := strconv.FormatInt(seed, 10)
			keys = append(keys, key)
			if v, ok := p.Seeds[key]; !ok || v != r.Unallocated() {
				t.Errorf("%s seed %s: %v (present %v); want %v from fill.Run", policy, key, v, ok, r.Unallocated())
			}
			vals = append(vals, r.Unallocated())
		}
		if len(p.Seeds) != 3 {
			t.Errorf("%s: seeds %v; want exactly %v", policy, p.Seeds, keys)
		}
		if want := fill.Median(vals); p.Median != want {
			t.Errorf("%s: median %v; want %v", policy, p.Median, want)
		}
	}
}

func TestBenchFillTableNamesEveryPolicy(t *testing.T) {
	code, stdout, stderr := runBenchFillArgs("--nodes", benchNodes, "--pods", benchPods,
		"--policies", "gpu-packing,random", "--seeds", "42,43", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"pods_small.csv", "gpu-packing", "random"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table does not mention %q:\n%s", want, stdout)
		}
	}
}

func TestBenchFillBadUsage(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"a reversed seed range", []string{"--nodes", benchNodes, "--pods", benchPods, "--seeds", "51-42"}, `"51-42"`},
		{"a seed that is not a number", []string{"--nodes", benchNodes, "--pods", benchPods, "--seeds", "x"}, `"x"`},
		{"no --nodes", []string{"--pods", benchPods}, "--nodes"},
		{"no --pods", []string{"--nodes", benchNodes}, "--pods"},
		{"an unknown flag", []string{"--nodes", benchNodes, "--pods", benchPods, "--nope"}, "-nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runBenchFillArgs(tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.wantStderr) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and %q", code, stderr, tt.wantStderr)
			}
			if stdout != "" {
				t.Errorf("a usage error wrote to stdout: %q", stdout)
			}
		})
	}
}

func TestBenchFillNamesTheBadLineOfAMalformedCSV(t *testing.T) {
	dir := t.TempDir()
	badPods := filepath.Join(dir, "pods_bad.csv")
	body := "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,1024,1,500\np2,1000,1024,2,500\n"
	if err := os.WriteFile(badPods, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	badNodes := filepath.Join(dir, "nodes_bad.csv")
	if err := os.WriteFile(badNodes, []byte("sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,2,P100\nn2,64000,lots,2,P100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"pods", []string{"--nodes", benchNodes, "--pods", badPods}, badPods + ":3"},
		{"nodes", []string{"--nodes", badNodes, "--pods", benchPods}, badNodes + ":3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runBenchFillArgs(append(tt.args, "--quiet", "--seeds", "42")...)
			if code != 1 || !strings.Contains(stderr, tt.wantStderr) {
				t.Fatalf("exit %d, stderr %q; want exit 1 and %q", code, stderr, tt.wantStderr)
			}
		})
	}
}

func TestBenchFillReportsAnUnknownPolicy(t *testing.T) {
	code, _, stderr := runBenchFillArgs("--nodes", benchNodes, "--pods", benchPods, "--policies", "fgd,bogus", "--seeds", "42", "--quiet")
	if code != 1 || !strings.Contains(stderr, "bogus") {
		t.Fatalf("exit %d, stderr %q; want exit 1 naming bogus", code, stderr)
	}
}

func TestBenchNeedsASubcommand(t *testing.T) {
	for _, args := range [][]string{{"bench"}, {"bench", "nope"}} {
		var out, errOut bytes.Buffer
		if code := dispatch(args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "usage: partita bench") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and the usage", args, code, errOut.String())
		}
	}
}

// --production-reserve replaces the scenario's production_reserve_gpus
// (3 in the fixture: partita leaves 3 of the node's 8 GPUs to production).
func TestBenchMixedProductionReserve(t *testing.T) {
	const scenario = "../../internal/sim/mixed/testdata/reserve.yaml"
	allocated := func(extra ...string) float64 {
		t.Helper()
		var out, errOut bytes.Buffer
		args := append([]string{"bench", "mixed", "--scenario", scenario, "--policies", "partita", "--json"}, extra...)
		if code := dispatch(args, &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", extra, code, errOut.String())
		}
		var got struct {
			Policies map[string]struct {
				Allocated float64 `json:"allocated_utilization"`
			} `json:"policies"`
		}
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		return got.Policies["partita"].Allocated
	}
	if got := allocated(); got > 5.0/8+1e-9 {
		t.Errorf("the scenario's reserve: allocated %.3f, want at most 5 of 8 GPUs", got)
	}
	if got := allocated("--production-reserve", "0"); got < 7.5/8 {
		t.Errorf("--production-reserve 0: allocated %.3f, want the whole node", got)
	}
	for _, bad := range []string{"-2", "NaN", "+Inf", "x"} {
		var out, errOut bytes.Buffer
		code := dispatch([]string{"bench", "mixed", "--scenario", scenario, "--production-reserve", bad}, &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), "production-reserve") {
			t.Errorf("--production-reserve %s: exit %d, stderr %q; want exit 2 naming the flag", bad, code, errOut.String())
		}
	}
}

// --seeds runs every seed and gives, per seed, what --seed gives alone,
// and a summary of them.
func TestBenchMixedSeedsMatchesOneRunPerSeed(t *testing.T) {
	const scenario = "../../../scenarios/default.yaml"
	run := func(args ...string) []byte {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append([]string{"bench", "mixed", "--scenario", scenario, "--policies", "partita", "--horizon", "12h", "--json"}, args...)
		if code := dispatch(args, &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		return out.Bytes()
	}
	var many struct {
		Seeds    []int64 `json:"seeds"`
		Policies map[string]struct {
			Summary map[string]json.RawMessage            `json:"summary"`
			Seeds   map[string]map[string]json.RawMessage `json:"seeds"`
		} `json:"policies"`
	}
	if err := json.Unmarshal(run("--seeds", "3,2-3", "--workers", "2"), &many); err != nil {
		t.Fatal(err)
	}
	if len(many.Seeds) != 2 || many.Seeds[0] != 2 || many.Seeds[1] != 3 {
		t.Fatalf("seeds %v, want [2 3] (sorted, once each)", many.Seeds)
	}
	got := many.Policies["partita"]
	if len(got.Seeds) != 2 || string(got.Summary["seeds"]) != "2" {
		t.Fatalf("partita: %d seeds, summary of %s; want 2", len(got.Seeds), got.Summary["seeds"])
	}
	var violations float64
	for _, seed := range []string{"2", "3"} {
		var one struct {
			Policies map[string]map[string]json.RawMessage `json:"policies"`
		}
		if err := json.Unmarshal(run("--seed", seed), &one); err != nil {
			t.Fatal(err)
		}
		alone, within := one.Policies["partita"], got.Seeds[seed]
		if len(alone) == 0 || len(alone) != len(within) {
			t.Fatalf("seed %s: %d fields alone, %d in --seeds", seed, len(alone), len(within))
		}
		for k, v := range alone {
			var a, b bytes.Buffer
			if json.Compact(&a, v) != nil || json.Compact(&b, within[k]) != nil || !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Errorf("seed %s: %s is %s alone, %s in --seeds", seed, k, v, within[k])
			}
		}
		var v float64
		if err := json.Unmarshal(alone["guarantee_violation_s"], &v); err != nil {
			t.Fatal(err)
		}
		violations += v
	}
	var total float64
	if err := json.Unmarshal(got.Summary["guarantee_violation_s_total"], &total); err != nil {
		t.Fatal(err)
	}
	if d := total - violations; d > 1e-6 || d < -1e-6 {
		t.Errorf("summary's violations %v, want the seeds' sum %v", total, violations)
	}
	if a, b := run("--seeds", "2"), run("--seeds", "2"); !bytes.Equal(a, b) {
		t.Error("two runs of --seeds 2 differ")
	}
}

func TestBenchMixedSeedsRefusesOneRunFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--seeds", "1-2", "--seed", "3"}, "--seed"},
		{[]string{"--seeds", "1-2", "--out", t.TempDir()}, "--out"},
		{[]string{"--seeds", "1-2", "--trace", filepath.Join(t.TempDir(), "t")}, "--trace"},
		{[]string{"--seeds", "x"}, "--seeds"},
		{[]string{"--seeds", "5-2"}, "--seeds"},
		{[]string{"--seeds", "1-2", "--workers", "-1"}, "--workers"},
	} {
		var out, errOut bytes.Buffer
		code := dispatch(append([]string{"bench", "mixed", "--scenario", "../../../scenarios/default.yaml"}, c.args...), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %s", c.args, code, errOut.String(), c.want)
		}
	}
	// A run that fails is reported by its scheduler and first seed, not
	// by whichever worker failed first.
	var out, errOut bytes.Buffer
	code := dispatch([]string{"bench", "mixed", "--scenario", "../../../scenarios/default.yaml", "--horizon", "1h",
		"--policies", "partita,bogus", "--seeds", "4-7", "--workers", "3"}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), `bogus, seed 4: unknown scheduler "bogus"`) {
		t.Errorf("an unknown scheduler: exit %d, stderr %q; want exit 1 naming it and seed 4", code, errOut.String())
	}
}

// parseSeeds (--seeds of bench fill and bench mixed) never panics; what it
// accepts is a sorted, non-empty list whose every seed the text names.
func FuzzParseSeeds(f *testing.F) {
	for _, s := range []string{"42-51", "1,5,9", "3,2-3", "", "x", "5-2", "1-", "-3", "1-20000", "9223372036854775807", "1,,2", " 7 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		seeds, err := parseSeeds(s)
		if err != nil {
			if seeds != nil {
				t.Fatalf("%q: error %v with seeds %v", s, err, seeds)
			}
			return
		}
		if len(seeds) == 0 {
			t.Fatalf("%q: no seeds and no error", s)
		}
		for i := 1; i < len(seeds); i++ {
			if seeds[i] < seeds[i-1] {
				t.Fatalf("%q: %v not sorted", s, seeds)
			}
		}
		for _, x := range []int64{seeds[0], seeds[len(seeds)-1]} {
			if !strings.Contains(s, strconv.FormatInt(x, 10)) {
				t.Fatalf("%q: seed %d is not in the text", s, x)
			}
		}
	})
}

// --cycle-every and --coalesce set the simulated world's cadence; their
// defaults are the cadence it had before them.
func TestBenchMixedCadence(t *testing.T) {
	const scenario = "../../../scenarios/default.yaml"
	run := func(args ...string) map[string]json.RawMessage {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append([]string{"bench", "mixed", "--scenario", scenario, "--policies", "partita", "--horizon", "12h", "--json"}, args...)
		if code := dispatch(args, &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		var got struct {
			Policies map[string]struct {
				Seeds map[string]map[string]json.RawMessage `json:"seeds"`
			} `json:"policies"`
		}
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		return got.Policies["partita"].Seeds["2"]
	}
	same := func(a, b map[string]json.RawMessage) bool {
		if len(a) == 0 || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			if !bytes.Equal(v, b[k]) {
				return false
			}
		}
		return true
	}
	def := run("--seeds", "2")
	if !same(def, run("--seeds", "2", "--cycle-every", "60s", "--coalesce", "5s")) {
		t.Error("--cycle-every 60s --coalesce 5s differs from the defaults; want them the same")
	}
	fast := run("--seeds", "2", "--cycle-every", "2s", "--coalesce", "2s")
	if same(def, fast) {
		t.Error("a 2 s cadence gave the default cadence's results; want the flags to reach the world")
	}
	if !same(fast, run("--seeds", "2", "--workers", "1", "--coalesce", "2s", "--cycle-every", "2s")) {
		t.Error("the same cadence gave other results on a second run")
	}
	for _, bad := range [][]string{{"--cycle-every", "-1s"}, {"--coalesce", "500ms"}, {"--cycle-every", "x"}} {
		var out, errOut bytes.Buffer
		code := dispatch(append([]string{"bench", "mixed", "--scenario", scenario}, bad...), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), bad[0][2:]) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming the flag", bad, code, errOut.String())
		}
	}
}
