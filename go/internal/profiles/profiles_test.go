package profiles

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/workload"
)

// expectedOnH100 is what each profile should get on an H100-80GB: the MIG
// profile its memory and compute imply, or "N whole" for whole-GPU
// profiles. Every catalog entry must be listed, so a new profile comes with
// its expectation.
var expectedOnH100 = map[string]string{
	"embed-335m":           "1g.10gb", // 1,818 MiB × 1.05 fits 10 GB; 0.10 compute fits one slice
	"recsys-dlrm":          "1g.10gb", // 6,401 MiB × 1.05 = 6,722
	"notebook-small":       "1g.10gb", // 7,515 MiB × 1.05 = 7,891
	"speech-whisper-large": "1g.20gb", // 10,900 MiB × 1.05 = 11,445: two memory slices, one compute slice
	"rerank-568m":          "2g.20gb", // memory fits 1g.10gb; 0.25 compute needs two slices
	"llm-8b-fp8":           "2g.20gb", // 13,879 MiB × 1.05 = 14,573 and 0.25 compute
	"diffusion-sdxl":       "3g.40gb", // 12,873 MiB fits 20 GB, but 0.40 compute needs three slices
	"llm-7b-bf16":          "3g.40gb", // 31,819 MiB × 1.05 = 33,410
	"llm-13b-bf16":         "7g.80gb", // 53,564 MiB × 1.05 = 56,243
	"llm-70b-bf16":         "4 whole", // tensor-parallel over 4 GPUs
	"lora-ft-7b":           "1 whole",
	"full-ft-7b":           "8 whole",
	"pretrain-13b-worker":  "1 whole",
}

func TestProfilesGetTheExpectedShareOfAnH100(t *testing.T) {
	h100 := gpu.Lookup("H100-80GB")
	for _, p := range All() {
		t.Run(p.Name, func(t *testing.T) {
			want, ok := expectedOnH100[p.Name]
			if !ok {
				t.Fatalf("no expectation for %s: add it to expectedOnH100", p.Name)
			}
			if p.Whole() {
				d := p.Demand(nil)
				if got := fmt.Sprintf("%d whole", d.Count); d.Kind != workload.WholeGPUs || got != want {
					t.Fatalf("demand %v, want %s", d, want)
				}
				return
			}
			mp, err := h100.ProfileFor(p.PeakMemoryMiB, p.Compute, gpu.DefaultHeadroom)
			if err != nil {
				t.Fatalf("ProfileFor(%d MiB, %.2f): %v", p.PeakMemoryMiB, p.Compute, err)
			}
			if mp.Name != want {
				t.Fatalf("ProfileFor(%d MiB, %.2f) = %s, want %s", p.PeakMemoryMiB, p.Compute, mp.Name, want)
			}
		})
	}
	if len(expectedOnH100) != len(catalog) {
		t.Fatalf("expectedOnH100 has %d entries for %d profiles", len(expectedOnH100), len(catalog))
	}
}

func TestWholeGPUProfilesFitAnH100PerGPU(t *testing.T) {
	h100 := gpu.Lookup("H100-80GB")
	for _, p := range All() {
		if !p.Whole() {
			continue
		}
		need := float64(p.PeakMemoryMiB) * (1 + gpu.DefaultHeadroom)
		if need > float64(h100.MemoryMiB) {
			t.Errorf("%s: %d MiB per GPU + headroom is %.0f MiB, more than an H100's %d", p.Name, p.PeakMemoryMiB, need, h100.MemoryMiB)
		}
	}
}

func TestDerivationsAddUpToThePeak(t *testing.T) {
	for _, p := range All() {
		if got := p.Derivation.TotalMiB(); got != p.PeakMemoryMiB {
			t.Errorf("%s: terms add up to %d MiB, PeakMemoryMiB says %d\n%s", p.Name, got, p.PeakMemoryMiB, p.Derivation)
		}
	}
}

func TestCatalogIsWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range All() {
		switch {
		case p.Name == "" || seen[p.Name]:
			t.Errorf("name %q is empty or used twice", p.Name)
		case p.Kind != Inference && p.Kind != Training:
			t.Errorf("%s: kind %q", p.Name, p.Kind)
		case !(p.Compute > 0 && p.Compute <= 1):
			t.Errorf("%s: compute %v outside (0, 1]", p.Name, p.Compute)
		case p.GPUs < 0 || p.GPUs > 8:
			t.Errorf("%s: %d GPUs per task", p.Name, p.GPUs)
		case p.Kind == Training && p.GPUs < 1:
			t.Errorf("%s: training needs whole GPUs", p.Name)
		case p.Whole() && p.Compute != 1:
			t.Errorf("%s: whole GPUs but compute %v", p.Name, p.Compute)
		case p.CPUMilli <= 0 || p.HostMemoryMiB <= 0:
			t.Errorf("%s: cpu %dm, host memory %d MiB", p.Name, p.CPUMilli, p.HostMemoryMiB)
		case p.Derivation.Basis == "" || len(p.Derivation.Terms) < 2:
			t.Errorf("%s: derivation has no basis or too few terms", p.Name)
		}
		seen[p.Name] = true
		for _, term := range p.Derivation.Terms {
			if term.What == "" || !(term.Bytes > 0) {
				t.Errorf("%s: term %q has %v bytes", p.Name, term.What, term.Bytes)
			}
		}
		job := workload.Job{ID: "j", Team: "t", Class: workload.Batch, Tasks: []workload.Task{p.Task("t0")}}
		if err := job.Validate(nil); err != nil {
			t.Errorf("%s: task does not validate: %v", p.Name, err)
		}
	}
}

func TestCatalogCoversTheWorkloadMix(t *testing.T) {
	// The scenarios and the benchmark rely on these; renaming one is a
	// breaking change for scenario files.
	for _, name := range []string{
		"llm-7b-bf16", "llm-13b-bf16", "llm-70b-bf16", "llm-8b-fp8", "embed-335m", "rerank-568m",
		"diffusion-sdxl", "recsys-dlrm", "speech-whisper-large", "lora-ft-7b", "full-ft-7b", "pretrain-13b-worker",
	} {
		if _, err := Lookup(name); err != nil {
			t.Error(err)
		}
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		name    string
		lookup  string
		wantErr string
	}{
		{"finds a profile by its name", "llm-7b-bf16", ""},
		{"finds a training profile", "full-ft-7b", ""},
		{"refuses an unknown name and lists the known ones", "llm-9b", `unknown profile "llm-9b" (known: embed-335m, rerank-568m,`},
		{"is case-sensitive", "LLM-7B-BF16", `unknown profile "LLM-7B-BF16"`},
		{"refuses the empty name", "", `unknown profile ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Lookup(tt.lookup)
			if tt.wantErr == "" {
				if err != nil || p.Name != tt.lookup {
					t.Fatalf("Lookup(%q) = %q, %v", tt.lookup, p.Name, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Lookup(%q) error %v, want %q", tt.lookup, err, tt.wantErr)
			}
		})
	}
}

func TestDemand(t *testing.T) {
	tests := []struct {
		name    string
		profile string
		models  []string
		want    workload.Demand
	}{
		{"inference asks for its memory profile", "llm-7b-bf16", nil,
			workload.Demand{Kind: workload.MemoryProfile, PeakMemoryMiB: 31819, Compute: 0.40}},
		{"inference keeps the allowed models", "embed-335m", []string{"H100-80GB"},
			workload.Demand{Kind: workload.MemoryProfile, PeakMemoryMiB: 1818, Compute: 0.10, Models: []string{"H100-80GB"}}},
		{"inference over several GPUs asks for whole GPUs", "llm-70b-bf16", nil,
			workload.Demand{Kind: workload.WholeGPUs, Count: 4}},
		{"training asks for whole GPUs", "full-ft-7b", []string{"H100-80GB", "H200-141GB"},
			workload.Demand{Kind: workload.WholeGPUs, Count: 8, Models: []string{"H100-80GB", "H200-141GB"}}},
		{"a single-GPU training task asks for one GPU", "lora-ft-7b", nil,
			workload.Demand{Kind: workload.WholeGPUs, Count: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Lookup(tt.profile)
			if err != nil {
				t.Fatal(err)
			}
			got := p.Demand(tt.models)
			if got.String() != tt.want.String() || got.Kind != tt.want.Kind || !slices.Equal(got.Models, tt.want.Models) {
				t.Fatalf("Demand = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDemandDoesNotShareTheCallersModels(t *testing.T) {
	p, _ := Lookup("embed-335m")
	models := []string{"H100-80GB"}
	d := p.Demand(models)
	models[0] = "changed"
	if d.Models[0] != "H100-80GB" {
		t.Fatalf("demand models changed with the caller's slice: %v", d.Models)
	}
}

func TestTaskCarriesHostResources(t *testing.T) {
	p, _ := Lookup("pretrain-13b-worker")
	task := p.Task("w3")
	if task.Name != "w3" || task.CPUMilli != p.CPUMilli || task.MemoryMiB != p.HostMemoryMiB || task.GPU.Count != 1 {
		t.Fatalf("Task = %+v", task)
	}
}

func TestAllAndLookupReturnCopies(t *testing.T) {
	all := All()
	all[0].Derivation.Terms[0].Bytes = -1
	all[0].Name = "changed"
	p, err := Lookup(catalog[0].Name)
	if err != nil || p.Derivation.Terms[0].Bytes < 0 {
		t.Fatalf("All shares the catalog: %v %v", p.Derivation.Terms[0], err)
	}
	p.Derivation.Terms[0].Bytes = -1
	if catalog[0].Derivation.Terms[0].Bytes < 0 {
		t.Fatal("Lookup shares the catalog's terms")
	}
}

func TestDerivationString(t *testing.T) {
	p, _ := Lookup("llm-7b-bf16")
	s := p.Derivation.String()
	for _, want := range []string{"Llama-2-7B", "16384.0 MiB  KV cache", "31819   MiB  total", "caching allocator reserve: 2.6 %"} {
		if !strings.Contains(s, want) {
			t.Errorf("derivation text lacks %q:\n%s", want, s)
		}
	}
}

func TestTotalMiBRoundsUp(t *testing.T) {
	d := Derivation{Terms: []Term{{"a", mib}, {"b", 1}}}
	if got := d.TotalMiB(); got != 2 {
		t.Fatalf("TotalMiB = %d, want 2", got)
	}
	if got := (Derivation{}).TotalMiB(); got != 0 {
		t.Fatalf("empty TotalMiB = %d", got)
	}
}

// Every measured process fits its derivation plus the headroom: the
// headroom is what the derivations do not foresee, and each measurement
// is a check of it.
func TestHeadroomCoversEveryMeasurement(t *testing.T) {
	n := 0
	for _, p := range All() {
		for _, m := range p.Measured {
			n++
			if limit := float64(m.DerivedMiB) * (1 + gpu.DefaultHeadroom); float64(m.HeldMiB) > limit {
				t.Errorf("%s (%s): held %d MiB, more than %d derived + %.0f%% headroom", p.Name, m.Config, m.HeldMiB, m.DerivedMiB, gpu.DefaultHeadroom*100)
			}
			if m.Where == "" || m.Config == "" || m.HeldMiB <= 0 || m.DerivedMiB <= 0 {
				t.Errorf("%s: a measurement without its facts: %+v", p.Name, m)
			}
		}
	}
	if n == 0 {
		t.Fatal("no measurement in the catalog")
	}
}

// A measurement of the profile's own configuration is compared with the
// profile's own derivation.
func TestAMeasurementOfTheProfilesOwnConfigurationUsesItsDerivation(t *testing.T) {
	p, _ := Lookup("lora-ft-7b")
	if len(p.Measured) == 0 || p.Measured[0].DerivedMiB != p.PeakMemoryMiB {
		t.Fatalf("lora-ft-7b's measurement is of its own configuration: derived %v, the profile %d", p.Measured, p.PeakMemoryMiB)
	}
}
