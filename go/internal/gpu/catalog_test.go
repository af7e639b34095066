package gpu

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// referenceKind is the profile table of shared/reference/mig-and-gpu-operator.md,
// typed in again here so that a slip in catalog.go shows up as a difference.
type referenceKind struct {
	names             map[string]string // model -> profile name
	compute, width    int
	starts            []int
	maxPerGPU         int
	smsA100, smsGH100 int
	mediaExt          bool
}

var referenceKinds = []referenceKind{
	{names: map[string]string{"A100-40GB": "1g.5gb", "A100-80GB": "1g.10gb", "H100-80GB": "1g.10gb", "H200-141GB": "1g.18gb"},
		compute: 1, width: 1, starts: []int{0, 1, 2, 3, 4, 5, 6}, maxPerGPU: 7, smsA100: 14, smsGH100: 16},
	{names: map[string]string{"A100-40GB": "1g.5gb+me", "A100-80GB": "1g.10gb+me", "H100-80GB": "1g.10gb+me", "H200-141GB": "1g.18gb+me"},
		compute: 1, width: 1, starts: []int{0, 1, 2, 3, 4, 5, 6}, maxPerGPU: 1, smsA100: 14, smsGH100: 16, mediaExt: true},
	{names: map[string]string{"A100-40GB": "1g.10gb", "A100-80GB": "1g.20gb", "H100-80GB": "1g.20gb", "H200-141GB": "1g.35gb"},
		compute: 1, width: 2, starts: []int{0, 2, 4, 6}, maxPerGPU: 4, smsA100: 14, smsGH100: 26},
	{names: map[string]string{"A100-40GB": "2g.10gb", "A100-80GB": "2g.20gb", "H100-80GB": "2g.20gb", "H200-141GB": "2g.35gb"},
		compute: 2, width: 2, starts: []int{0, 2, 4}, maxPerGPU: 3, smsA100: 28, smsGH100: 32},
	{names: map[string]string{"A100-40GB": "3g.20gb", "A100-80GB": "3g.40gb", "H100-80GB": "3g.40gb", "H200-141GB": "3g.71gb"},
		compute: 3, width: 4, starts: []int{0, 4}, maxPerGPU: 2, smsA100: 42, smsGH100: 60},
	{names: map[string]string{"A100-40GB": "4g.20gb", "A100-80GB": "4g.40gb", "H100-80GB": "4g.40gb", "H200-141GB": "4g.71gb"},
		compute: 4, width: 4, starts: []int{0}, maxPerGPU: 1, smsA100: 56, smsGH100: 64},
	{names: map[string]string{"A100-40GB": "7g.40gb", "A100-80GB": "7g.80gb", "H100-80GB": "7g.80gb", "H200-141GB": "7g.141gb"},
		compute: 7, width: 8, starts: []int{0}, maxPerGPU: 1, smsA100: 98, smsGH100: 132},
}

var migModels = []string{"A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB"}

func TestCatalogMatchesReference(t *testing.T) {
	for _, name := range migModels {
		m := Lookup(name)
		if !m.Known || !m.MIG || m.Name != name {
			t.Fatalf("Lookup(%q) = %+v, want a known MIG model", name, m)
		}
		if len(m.Profiles) != len(referenceKinds) {
			t.Fatalf("%s has %d profiles, want %d", name, len(m.Profiles), len(referenceKinds))
		}
		for _, k := range referenceKinds {
			p, err := m.Profile(k.names[name])
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			wantSMs := k.smsGH100
			if strings.HasPrefix(name, "A100") {
				wantSMs = k.smsA100
			}
			if p.Compute != k.compute || p.Memory != k.width || !slices.Equal(p.Starts, k.starts) ||
				p.MaxPerGPU != k.maxPerGPU || p.SMs != wantSMs || p.MediaExt != k.mediaExt {
				t.Errorf("%s %s = %+v, want compute %d, width %d, starts %v, max %d, SMs %d, +me %v",
					name, p.Name, *p, k.compute, k.width, k.starts, k.maxPerGPU, wantSMs, k.mediaExt)
			}
		}
	}
}

func TestProfileMemoryIsWhatTheDriverReportsOrTheNominalSize(t *testing.T) {
	tests := []struct {
		model, profile string
		wantMiB        int64
	}{
		{"A100-40GB", "1g.5gb", 5 * 1024},
		{"A100-40GB", "1g.5gb+me", 5 * 1024},
		// Where nvidia-smi's report is known, the reported size.
		{"H100-80GB", "3g.40gb", 39.50 * 1024},
		{"H200-141GB", "1g.18gb", 16 * 1024},
		{"H200-141GB", "7g.141gb", 140 * 1024},
	}
	for _, tt := range tests {
		p, err := Lookup(tt.model).Profile(tt.profile)
		if err != nil {
			t.Fatal(err)
		}
		if p.MemoryMiB != tt.wantMiB {
			t.Errorf("%s %s MemoryMiB = %d, want %d", tt.model, tt.profile, p.MemoryMiB, tt.wantMiB)
		}
	}
}

func TestCatalogProfilesAreOrderedSmallToLarge(t *testing.T) {
	for _, m := range Catalog() {
		for i := 1; i < len(m.Profiles); i++ {
			if smaller(&m.Profiles[i], &m.Profiles[i-1]) {
				t.Errorf("%s: %s comes after the larger %s", m.Name, m.Profiles[i].Name, m.Profiles[i-1].Name)
			}
		}
		if !m.Known || m.Source == "" {
			t.Errorf("%s: catalog models must be Known and name a Source", m.Name)
		}
		if m.MIG != (len(m.Profiles) > 0) {
			t.Errorf("%s: MIG %v but %d profiles", m.Name, m.MIG, len(m.Profiles))
		}
		if m.MIG && len(m.PCIDeviceIDs) == 0 {
			t.Errorf("%s: a MIG model needs its PCI device ids for mig-parted device filters", m.Name)
		}
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantName  string
		wantKnown bool
		wantMIG   bool
	}{
		{"finds a canonical name", "H100-80GB", "H100-80GB", true, true},
		{"ignores case", "h100-80gb", "H100-80GB", true, true},
		{"accepts a GFD product label", "NVIDIA-H100-80GB-HBM3", "H100-80GB", true, true},
		{"accepts a GFD product label in any case", "nvidia-a100-sxm4-80gb", "A100-80GB", true, true},
		{"accepts the H200 NVL label", "NVIDIA-H200-NVL", "H200-141GB", true, true},
		{"maps the trace's V100M16", "V100M16", "V100-16GB", true, false},
		{"maps the trace's V100M32 in lower case", "v100m32", "V100-32GB", true, false},
		{"knows the trace's undisclosed G2", "G2", "G2", true, false},
		{"knows the trace's undisclosed G3", "g3", "G3", true, false},
		{"knows the T4 label", "Tesla-T4", "T4", true, false},
		{"makes an opaque model of an unknown name", "B200", "B200", false, false},
		{"makes an opaque model of the empty name", "", "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Lookup(tt.in)
			if m == nil {
				t.Fatal("Lookup returned nil")
			}
			if m.Name != tt.wantName || m.Known != tt.wantKnown || m.MIG != tt.wantMIG {
				t.Errorf("Lookup(%q) = {Name %q, Known %v, MIG %v}, want {%q, %v, %v}",
					tt.in, m.Name, m.Known, m.MIG, tt.wantName, tt.wantKnown, tt.wantMIG)
			}
		})
	}
}

func TestLookupKnowsEveryModelOfTheAlibabaTrace(t *testing.T) {
	// The distinct values of the model column of openb_node_list_all_node.csv.
	for _, name := range []string{"A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32"} {
		if m := Lookup(name); !m.Known {
			t.Errorf("Lookup(%q) is opaque, want a catalog model", name)
		}
	}
}

func TestLookupGivesEachUnknownNameItsOwnModel(t *testing.T) {
	a, b := Lookup("B200"), Lookup("B200")
	if a == b {
		t.Fatal("two lookups of an unknown name share one *Model; a caller's change to one would leak")
	}
	if Lookup("G2") != Lookup("g2") {
		t.Fatal("lookups of a catalog model should share the catalog's *Model")
	}
}

func TestCatalogReturnsACopyOfTheList(t *testing.T) {
	c := Catalog()
	c[0] = nil
	if Catalog()[0] == nil {
		t.Fatal("changing the slice Catalog returned changed the catalog")
	}
}

func TestModelProfileErrors(t *testing.T) {
	tests := []struct {
		name    string
		model   string
		profile string
		wantErr string
	}{
		{"names the known profiles", "H100-80GB", "5g.50gb",
			`unknown MIG profile "5g.50gb" for H100-80GB (known: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)`},
		{"rejects another model's profile name", "H100-80GB", "1g.5gb", `unknown MIG profile "1g.5gb" for H100-80GB`},
		{"is case-sensitive on profile names", "H100-80GB", "3G.40GB", `unknown MIG profile "3G.40GB"`},
		{"says a non-MIG model has no MIG", "T4", "1g.10gb", `model "T4" does not support MIG`},
		{"says an unknown model is not in the catalog", "B200", "1g.23gb", `model "B200" is not in the GPU catalog, so it does not support MIG`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Lookup(tt.model).Profile(tt.profile)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Profile(%q) error = %v, want it to contain %q", tt.profile, err, tt.wantErr)
			}
		})
	}
	if _, err := Lookup("T4").Profile("x"); !errors.Is(err, ErrNoMIG) {
		t.Errorf("error %v does not wrap ErrNoMIG", err)
	}
}

func TestMaskAndCanStart(t *testing.T) {
	h := Lookup("H100-80GB")
	prof := func(name string) *Profile {
		p, err := h.Profile(name)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		profile   string
		start     int
		wantMask  uint8
		wantStart bool
	}{
		{"1g.10gb", 0, 0b0000_0001, true},
		{"1g.10gb", 6, 0b0100_0000, true},
		{"1g.10gb", 7, 0b1000_0000, false}, // one slice wide, but 7 is not an allowed start
		{"1g.20gb", 6, 0b1100_0000, true},
		{"2g.20gb", 6, 0b1100_0000, false},
		{"3g.40gb", 0, 0b0000_1111, true},
		{"3g.40gb", 4, 0b1111_0000, true},
		{"4g.40gb", 4, 0b1111_0000, false},
		{"7g.80gb", 0, 0b1111_1111, true},
		{"7g.80gb", 1, 0b1111_1110, false}, // bits past slice 7 are dropped
		{"3g.40gb", -1, 0, false},
		{"3g.40gb", 8, 0, false},
	}
	for _, tt := range tests {
		p := prof(tt.profile)
		if got := p.Mask(tt.start); got != tt.wantMask {
			t.Errorf("%s.Mask(%d) = %08b, want %08b", tt.profile, tt.start, got, tt.wantMask)
		}
		if got := p.CanStart(tt.start); got != tt.wantStart {
			t.Errorf("%s.CanStart(%d) = %v, want %v", tt.profile, tt.start, got, tt.wantStart)
		}
	}
	if got := prof("3g.40gb").ComputeShare(); got != 3.0/7 {
		t.Errorf("3g.40gb ComputeShare = %v, want 3/7", got)
	}
}
