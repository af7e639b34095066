package gpu

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestProfileFor(t *testing.T) {
	tests := []struct {
		name     string
		model    string
		peakMiB  int64
		compute  float64
		headroom float64
		want     string
		wantErr  string
	}{
		{"picks the smallest profile for a small need", "H100-80GB", 5000, 0, DefaultHeadroom, "1g.10gb", ""},
		{"picks the smallest profile for no need at all", "H100-80GB", 0, 0, 0, "1g.10gb", ""},
		{"fits a peak just under the profile with its headroom", "H100-80GB", 9500, 0, DefaultHeadroom, "1g.10gb", ""},
		{"moves up when the headroom tips the peak over", "H100-80GB", 9600, 0, DefaultHeadroom, "1g.20gb", ""},
		{"fits the same peak without headroom", "H100-80GB", 9600, 0, 0, "1g.10gb", ""},
		{"prefers a 1g with 2/8 memory to a 2g for memory alone", "H100-80GB", 15000, 0, DefaultHeadroom, "1g.20gb", ""},
		{"takes a 2g when two compute slices are needed", "H100-80GB", 15000, 2.0 / 7, DefaultHeadroom, "2g.20gb", ""},
		{"takes a 3g for 40 GB at 3/7 compute", "H100-80GB", 30000, 3.0 / 7, DefaultHeadroom, "3g.40gb", ""},
		{"takes a 4g when half the compute is needed", "H100-80GB", 30000, 0.5, DefaultHeadroom, "4g.40gb", ""},
		{"takes the whole GPU for a large peak", "H100-80GB", 70000, 0, DefaultHeadroom, "7g.80gb", ""},
		{"takes the whole GPU for all of the compute", "H100-80GB", 1, 1, DefaultHeadroom, "7g.80gb", ""},
		{"uses the model's own profile sizes", "H200-141GB", 17000, 0, DefaultHeadroom, "1g.35gb", ""},
		{"uses the A100-40GB sizes", "A100-40GB", 4000, 0, DefaultHeadroom, "1g.5gb", ""},
		{"fails on a peak above the largest profile, naming need and largest", "H100-80GB", 80000, 0, DefaultHeadroom, "",
			"needs 84000 MiB (80000 MiB peak + 5% headroom) and 0.00 of the compute; the largest profile, 7g.80gb, has 81152 MiB"},
		{"fails on more than all of the compute", "H100-80GB", 1, 1.5, 0, "", "no MIG profile fits"},
		{"rejects a negative peak", "H100-80GB", -1, 0, 0, "", "peak memory -1 MiB is negative"},
		{"rejects a negative compute share", "H100-80GB", 1, -0.1, 0, "", "compute share -0.1"},
		{"rejects a NaN compute share", "H100-80GB", 1, math.NaN(), 0, "", "compute share NaN"},
		{"rejects a negative headroom", "H100-80GB", 1, 0, -0.5, "", "memory headroom -0.5"},
		{"rejects an infinite headroom", "H100-80GB", 1, 0, math.Inf(1), "", "memory headroom +Inf"},
		{"rejects a GPU without MIG", "V100M32", 1, 0, 0, "", `model "V100-32GB" does not support MIG`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Lookup(tt.model).ProfileFor(tt.peakMiB, tt.compute, tt.headroom)
			checkErr(t, err, tt.wantErr)
			if err == nil && p.Name != tt.want {
				t.Fatalf("ProfileFor = %s, want %s", p.Name, tt.want)
			}
		})
	}
}

func TestProfileForNeverPicksMediaExtensions(t *testing.T) {
	for _, name := range migModels {
		m := Lookup(name)
		for peak := int64(0); peak < m.MemoryMiB; peak += 997 {
			p, err := m.ProfileFor(peak, 0, DefaultHeadroom)
			if err != nil {
				if !errors.Is(err, ErrNoFit) {
					t.Fatalf("%s ProfileFor(%d): %v", name, peak, err)
				}
				continue
			}
			if p.MediaExt || strings.HasSuffix(p.Name, "+me") {
				t.Fatalf("%s ProfileFor(%d) = %s, a +me profile", name, peak, p.Name)
			}
			if float64(p.MemoryMiB) < float64(peak)*(1+DefaultHeadroom) {
				t.Fatalf("%s ProfileFor(%d) = %s, too small", name, peak, p.Name)
			}
		}
	}
}
