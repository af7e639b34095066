package trace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sharedDir holds the real trace when the workspace has it; the tests
// that need it skip otherwise.
const sharedDir = "../../../../shared/data/alibaba-gpu-v2023"

func sharedFile(t testing.TB, name string) string {
	t.Helper()
	if _, err := os.Stat(sharedDir); err != nil {
		t.Skipf("shared trace not available: %v", err)
	}
	return filepath.Join(sharedDir, name)
}

// Row counts of every pod list, from the upstream files (lines minus header).
var sharedPodCounts = map[string]int{
	"openb_pod_list_cpu0.csv":       7064,
	"openb_pod_list_cpu037.csv":     7336,
	"openb_pod_list_cpu072.csv":     7608,
	"openb_pod_list_cpu100.csv":     7853,
	"openb_pod_list_cpu200.csv":     8832,
	"openb_pod_list_cpu235.csv":     9240,
	"openb_pod_list_cpu250.csv":     9420,
	"openb_pod_list_cpu300.csv":     10094,
	"openb_pod_list_default.csv":    8152,
	"openb_pod_list_gpushare20.csv": 8152,
	"openb_pod_list_gpushare40.csv": 8152,
	"openb_pod_list_gpushare60.csv": 8152,
	"openb_pod_list_gpushare80.csv": 8152,
	"openb_pod_list_gpuspec05.csv":  8152,
	"openb_pod_list_gpuspec10.csv":  8152,
	"openb_pod_list_gpuspec20.csv":  8152,
	"openb_pod_list_gpuspec25.csv":  8152,
	"openb_pod_list_multigpu20.csv": 8324,
	"openb_pod_list_multigpu30.csv": 8508,
	"openb_pod_list_multigpu40.csv": 8746,
}

// Every CSV of the shared trace must parse: the strict rules were checked
// against this data, and a rule that rejects it is a wrong rule.
func TestSharedTraceParses(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(sharedFile(t, ""), "*.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no CSV files in %s", sharedDir)
	}
	for _, path := range paths {
		base := filepath.Base(path)
		t.Run(base, func(t *testing.T) {
			switch {
			case strings.HasPrefix(base, "openb_node_list_"):
				nodes, err := ReadNodesFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := nodesInvariant(nodes); err != nil {
					t.Fatal(err)
				}
			case strings.HasPrefix(base, "openb_pod_list_"):
				pods, err := ReadPodsFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := podsInvariant(pods); err != nil {
					t.Fatal(err)
				}
				want, known := sharedPodCounts[base]
				if !known {
					t.Fatalf("no known row count for %s; add it to sharedPodCounts", base)
				}
				if len(pods) != want {
					t.Errorf("got %d pods, want %d", len(pods), want)
				}
			default:
				t.Fatalf("CSV of unknown kind: %s", base)
			}
		})
	}
}

func TestSharedNodeLists(t *testing.T) {
	tests := []struct {
		file           string
		nodes, gpus    int
		cpuOnly        int
		models         int
		wantFirstModel string
	}{
		{file: "openb_node_list_gpu_node.csv", nodes: 1213, gpus: 6212, cpuOnly: 0, models: 7, wantFirstModel: "P100"},
		{file: "openb_node_list_all_node.csv", nodes: 1523, gpus: 6212, cpuOnly: 310, models: 7, wantFirstModel: ""},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			nodes, err := ReadNodesFile(sharedFile(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			gpus, cpuOnly := 0, 0
			models := map[string]bool{}
			for _, n := range nodes {
				gpus += n.GPUs
				if n.GPUs == 0 {
					cpuOnly++
				} else {
					models[n.Model] = true
				}
			}
			if len(nodes) != tt.nodes || gpus != tt.gpus || cpuOnly != tt.cpuOnly || len(models) != tt.models {
				t.Errorf("got %d nodes, %d GPUs, %d CPU-only, %d models; want %d, %d, %d, %d",
					len(nodes), gpus, cpuOnly, len(models), tt.nodes, tt.gpus, tt.cpuOnly, tt.models)
			}
			if nodes[0].Model != tt.wantFirstModel {
				t.Errorf("first node model %q, want %q", nodes[0].Model, tt.wantFirstModel)
			}
		})
	}
}

func TestSharedDefaultPods(t *testing.T) {
	pods, err := ReadPodsFile(sharedFile(t, "openb_pod_list_default.csv"))
	if err != nil {
		t.Fatal(err)
	}
	var cpuOnly, shares, unscheduled, withSpec int
	for _, p := range pods {
		switch {
		case p.NumGPU == 0:
			cpuOnly++
		case p.NumGPU == 1 && p.GPUMilli < 1000:
			shares++
		}
		if !p.HasScheduled {
			unscheduled++
			if p.Phase != "Pending" {
				t.Errorf("line %d: no scheduled_time but phase %q", p.Line, p.Phase)
			}
		}
		if p.GPUSpec != nil {
			withSpec++
		}
	}
	// Figures from the upstream file: 1088 CPU-only pods, 3078 GPU-sharing
	// pods, 897 Pending pods without a scheduled_time, no gpu_spec at all.
	if len(pods) != 8152 || cpuOnly != 1088 || shares != 3078 || unscheduled != 897 || withSpec != 0 {
		t.Errorf("got %d pods, %d CPU-only, %d shares, %d unscheduled, %d with spec; want 8152, 1088, 3078, 897, 0",
			len(pods), cpuOnly, shares, unscheduled, withSpec)
	}
}

// The gpuspec lists hold the one repeated-model spec of the trace; it must
// come back de-duplicated while the raw text keeps the repeat.
func TestSharedRepeatedSpec(t *testing.T) {
	pods, err := ReadPodsFile(sharedFile(t, "openb_pod_list_gpuspec25.csv"))
	if err != nil {
		t.Fatal(err)
	}
	withSpec, repeated := 0, 0
	for _, p := range pods {
		if p.GPUSpec != nil {
			withSpec++
		}
		if p.GPUSpecRaw == "V100M16|V100M32|V100M32" {
			repeated++
			if len(p.GPUSpec) != 2 || p.GPUSpec[0] != "V100M16" || p.GPUSpec[1] != "V100M32" {
				t.Errorf("line %d: GPUSpec %q, want [V100M16 V100M32]", p.Line, p.GPUSpec)
			}
		}
	}
	if withSpec != 8152-6393 || repeated == 0 {
		t.Errorf("got %d pods with a spec (%d repeated), want %d (some repeated)", withSpec, repeated, 8152-6393)
	}
}
