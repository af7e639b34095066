package engine

import (
	"slices"
	"strings"
	"testing"

	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/workload"
)

func TestNewRequestCanonicalisesModelNames(t *testing.T) {
	tests := []struct {
		name  string
		asked []string
		want  []string
	}{
		{"keeps no models as any model", nil, nil},
		{"turns a trace name into the catalog name", []string{"V100M16"}, []string{"V100-16GB"}},
		{"turns a GFD product label into the catalog name", []string{"NVIDIA-H100-80GB-HBM3"}, []string{"H100-80GB"}},
		{"ignores case", []string{"v100m32"}, []string{"V100-32GB"}},
		{"keeps the order given", []string{"V100M32", "V100M16"}, []string{"V100-32GB", "V100-16GB"}},
		{"removes a name given twice", []string{"G2", "G2"}, []string{"G2"}},
		{"removes two spellings of one model", []string{"V100M16", "V100-16GB", "v100m16", "V100M32"}, []string{"V100-16GB", "V100-32GB"}},
		{"keeps an unknown model as written", []string{"X9"}, []string{"X9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request(t, task("t").share(500).on(tt.asked...))
			if !slices.Equal(r.Models, tt.want) {
				t.Fatalf("Models = %q, want %q", r.Models, tt.want)
			}
		})
	}
}

func TestNewRequestCopiesTheDemand(t *testing.T) {
	r := request(t, task("t").cpu(1500).memory(2048).gpuMemory(4096, 0.5).on("V100M16"))
	if r.Task.Name != "t" || r.CPUMilli != 1500 || r.MemMiB != 2048 {
		t.Fatalf("task, cpu, memory = %s, %d, %d; want t, 1500, 2048", r.Task.Name, r.CPUMilli, r.MemMiB)
	}
	if r.Kind != workload.MemoryProfile || r.PeakMiB != 4096 || r.Compute != 0.5 {
		t.Fatalf("kind, peak, compute = %v, %d, %v; want memory, 4096, 0.5", r.Kind, r.PeakMiB, r.Compute)
	}
	if !strings.Contains(r.String(), "t (cpu 1500m, mem 2048 MiB") {
		t.Fatalf("String() = %q", r.String())
	}
}

func TestNewRequestRefusesInvalidTasks(t *testing.T) {
	tests := []struct {
		name string
		task *taskBuilder
		want string
	}{
		{"refuses negative cpu", task("t").cpu(-1), "cpu"},
		{"refuses negative memory", task("t").memory(-1), "memory"},
		{"refuses a zero share", task("t").share(0), "fraction"},
		{"refuses a share of a whole GPU", task("t").share(1000), "fraction"},
		{"refuses zero whole GPUs", task("t").gpus(0), "gpus"},
		{"refuses an empty MIG profile", task("t").migProfile(""), "mig profile"},
		{"refuses a memory profile without memory", task("t").gpuMemory(0, 0.5), "peak"},
		{"refuses a compute share above one", task("t").gpuMemory(1024, 1.5), "compute"},
		{"refuses models on a CPU-only task", task("t").on("V100M16"), "no GPU"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRequest(tt.task.build(), 0)
			wantErr(t, err, tt.want)
			if r != nil {
				t.Fatalf("got a request %v with the error", r)
			}
		})
	}
}

func TestRequestAllowsModel(t *testing.T) {
	anyModel := request(t, task("t").share(100))
	v100 := request(t, task("t").share(100).on("V100M16", "V100M32"))
	tests := []struct {
		name  string
		r     *Request
		model string
		want  bool
	}{
		{"allows every model when none is named", anyModel, "G2", true},
		{"allows a named model under its catalog name", v100, "V100-32GB", true},
		{"refuses a model not named", v100, "G2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.AllowsModel(gpu.Lookup(tt.model)); got != tt.want {
				t.Fatalf("AllowsModel(%s) = %t, want %t", tt.model, got, tt.want)
			}
		})
	}
}

func TestRequestGPUMilliCountsWholeGPUsAsAThousandEach(t *testing.T) {
	tests := []struct {
		name string
		task *taskBuilder
		want int
	}{
		{"counts nothing for a CPU-only task", task("t"), 0},
		{"counts a share as itself", task("t").share(250), 250},
		{"counts whole GPUs as a thousand each", task("t").gpus(4), 4000},
		{"counts a MIG profile as nothing", task("t").migProfile("1g.10gb"), 0},
		{"counts a memory profile as nothing", task("t").gpuMemory(1024, 0.5), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request(t, tt.task)
			if got := r.GPUMilli(); got != tt.want {
				t.Fatalf("GPUMilli() = %d, want %d", got, tt.want)
			}
			if got, want := r.IsFractional(), r.Kind == workload.Fraction; got != want {
				t.Fatalf("IsFractional() = %t, want %t", got, want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name        string
		model       string
		peakMiB     int64
		compute     float64
		headroom    float64
		wantProfile string // "" = none
		wantMilli   int
	}{
		// On a MIG model the smallest profile with peak×(1+headroom) of
		// memory and the compute share; 1g.10gb holds 10240 MiB.
		{"picks the smallest profile that holds the peak", "H100-80GB", 9000, 0, 0.1, "1g.10gb", 121},
		{"moves up a profile when the headroom no longer fits", "H100-80GB", 9500, 0, 0.1, "1g.20gb", 128},
		{"fits the same peak without headroom", "H100-80GB", 9500, 0, 0, "1g.10gb", 116},
		{"moves up to the compute share", "H100-80GB", 5000, 0.5, 0, "4g.40gb", 500},
		{"finds no profile for more than the GPU", "H100-80GB", 90000, 0, 0.1, "", 0},
		// Without MIG, a share is the larger of the memory share and the
		// compute share; V100-16GB has 16384 MiB.
		{"takes the memory share", "V100-16GB", 4096, 0.125, 0, "", 250},
		{"takes the compute share when larger", "V100-16GB", 4096, 0.5, 0, "", 500},
		{"rounds the memory share up", "V100-16GB", 4096, 0, 0.25, "", 313},
		{"takes at least one milli", "V100-16GB", 1, 0, 0, "", 1},
		{"takes the whole GPU when the peak is its memory", "V100-16GB", 16384, 0, 0, "", 1000},
		{"takes nothing when the headroom passes the whole GPU", "V100-16GB", 16384, 0, 0.1, "", 0},
		{"takes nothing when the GPU's memory is unknown", "G2", 1024, 0.5, 0, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := requestWith(t, task("t").gpuMemory(tt.peakMiB, tt.compute), tt.headroom)
			m := gpu.Lookup(tt.model)
			p, milli := r.Resolve(m)
			got := ""
			if p != nil {
				got = p.Name
			}
			if got != tt.wantProfile || milli != tt.wantMilli {
				t.Fatalf("Resolve(%s) = %q, %d; want %q, %d", tt.model, got, milli, tt.wantProfile, tt.wantMilli)
			}
			p2, milli2 := r.Resolve(m)
			if p2 != p || milli2 != milli {
				t.Fatalf("second Resolve(%s) = %v, %d; want the first answer %v, %d", tt.model, p2, milli2, p, milli)
			}
		})
	}
}

func TestResolveAnswersPerModel(t *testing.T) {
	r := request(t, task("t").gpuMemory(8192, 0))
	if _, milli := r.Resolve(gpu.Lookup("V100-16GB")); milli != 500 {
		t.Fatalf("on V100-16GB: %d milli, want 500", milli)
	}
	if _, milli := r.Resolve(gpu.Lookup("V100-32GB")); milli != 250 {
		t.Fatalf("on V100-32GB after V100-16GB: %d milli, want 250", milli)
	}
}
