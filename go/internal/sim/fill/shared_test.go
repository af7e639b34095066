package fill

import (
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"partita.dev/partita/internal/trace"
)

// The real trace and the published curves, when the workspace has them;
// the tests that need them skip otherwise.
const (
	sharedTraceDir   = "../../../../../shared/data/alibaba-gpu-v2023"
	sharedExpectFile = "../../../../../shared/data/fgd-expected/analysis_allo_discrete.csv"
)

func sharedDefaultInput(t *testing.T) Input {
	t.Helper()
	if _, err := os.Stat(sharedTraceDir); err != nil {
		t.Skipf("shared trace not available: %v", err)
	}
	nodes, err := trace.ReadNodesFile(filepath.Join(sharedTraceDir, "openb_node_list_gpu_node.csv"))
	if err != nil {
		t.Fatal(err)
	}
	pods, err := trace.ReadPodsFile(filepath.Join(sharedTraceDir, "openb_pod_list_default.csv"))
	if err != nil {
		t.Fatal(err)
	}
	return Input{Nodes: nodes, Pods: pods}
}

// publishedAlloc reads one column of one published run from
// analysis_allo_discrete.csv.
func publishedAlloc(t *testing.T, workload, label string, seed int64, column string) float64 {
	t.Helper()
	f, err := os.Open(sharedExpectFile)
	if err != nil {
		t.Skipf("published curves not available: %v", err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", sharedExpectFile, err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s is empty", sharedExpectFile)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, h := range []string{"workload", "sc_policy", "seed", column} {
		if _, ok := col[h]; !ok {
			t.Fatalf("%s: no column %q", sharedExpectFile, h)
		}
	}
	want := strconv.FormatInt(seed, 10)
	for i, r := range rows[1:] {
		if r[col["workload"]] == workload && r[col["sc_policy"]] == label && r[col["seed"]] == want {
			v, err := strconv.ParseFloat(r[col[column]], 64)
			if err != nil {
				t.Fatalf("%s:%d: column %s: %v", sharedExpectFile, i+2, column, err)
			}
			return v
		}
	}
	t.Fatalf("%s: no row for %s %s seed %d", sharedExpectFile, workload, label, seed)
	return 0
}

// The default trace with seed 42 against the published run of the same
// seed: the first two columns (the protocol's sanity check) and the
// unallocated GPUs at 100 %.
func TestSharedDefaultTraceSeed42MatchesPublished(t *testing.T) {
	in := sharedDefaultInput(t)
	in.Typical, in.Shapes = Typical(in.Pods), Shapes(in.Pods)
	for _, c := range []struct{ policy, label string }{{"fgd", "06-FGD"}, {"best-fit", "05-BestFit"}} {
		t.Run(c.policy, func(t *testing.T) {
			t.Parallel()
			published := 100 - publishedAlloc(t, "openb_pod_list_default", c.label, 42, "100")
			r, err := Run(in, Options{Policy: c.policy, Seed: 42, Tune: 1.3})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(r.Alloc[0]-0.25) > 0.05 || math.Abs(r.Alloc[1]-0.99) > 0.1 {
				t.Errorf("columns 0 and 1 are %v and %v; want about 0.25 and 0.99", r.Alloc[0], r.Alloc[1])
			}
			if got := r.Unallocated(); math.Abs(got-published) > 1.0 {
				t.Errorf("unallocated at 100 %% is %.2f; published %.2f for seed 42 (±1.0)", got, published)
			}
			t.Logf("%s seed 42: columns 0, 1: %v %v; unallocated at 100 %%: %.2f (published %.2f); %d pods, %d failed",
				c.policy, r.Alloc[0], r.Alloc[1], r.Unallocated(), published, r.Pods, r.Failed)
		})
	}
}
