package gpu

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func mustLayout(t testing.TB, s string) Layout {
	t.Helper()
	l, err := ParseLayout(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		model   string
		layout  string
		wantErr string // "" means valid
	}{
		// The reference's valid examples.
		{"accepts 4g and 3g side by side", "H100-80GB", "4g.40gb@0,3g.40gb@4", ""},
		{"accepts two 3g with one compute slice idle", "H100-80GB", "3g.40gb@0,3g.40gb@4", ""},
		{"accepts 2g, two 1g and a 3g", "H100-80GB", "2g.20gb@0,1g.10gb@2,1g.10gb@3,3g.40gb@4", ""},
		{"accepts 4g, 2g and 1g", "H100-80GB", "4g.40gb@0,2g.20gb@4,1g.10gb@6", ""},
		{"accepts seven 1g leaving memory slice 7 unused", "H100-80GB",
			"1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6", ""},
		// The reference's invalid examples.
		{"rejects a 2g at 6", "H100-80GB", "2g.20gb@6", "2g.20gb@6: start 6 not allowed (allowed: 0,2,4)"},
		{"rejects a 4g at 4", "H100-80GB", "4g.40gb@4", "4g.40gb@4: start 4 not allowed (allowed: 0)"},
		// More.
		{"accepts the empty layout", "H100-80GB", "", ""},
		{"accepts the empty layout on a GPU without MIG", "T4", "", ""},
		{"accepts placements in any order", "H100-80GB", "3g.40gb@4,4g.40gb@0", ""},
		{"accepts the whole GPU", "H200-141GB", "7g.141gb@0", ""},
		{"accepts a 1g with 2/8 memory in the last two slices", "A100-80GB", "3g.40gb@0,2g.20gb@4,1g.20gb@6", ""},
		{"accepts one +me instance beside plain 1g", "H100-80GB", "1g.10gb+me@0,1g.10gb@1,1g.10gb@2", ""},
		{"accepts A100-40GB names on an A100-40GB", "A100-40GB", "1g.5gb@0,1g.10gb@2,2g.10gb@4,1g.5gb+me@6", ""},
		{"rejects overlapping memory", "H100-80GB", "4g.40gb@0,2g.20gb@2", "2g.20gb@2 overlaps 4g.40gb@0"},
		{"rejects the same instance twice", "H100-80GB", "3g.40gb@4,3g.40gb@4", "3g.40gb@4 overlaps 3g.40gb@4"},
		{"names the instance a new one overlaps", "H100-80GB", "1g.10gb@0,1g.10gb@5,3g.40gb@4", "3g.40gb@4 overlaps 1g.10gb@5"},
		{"rejects anything beside the whole GPU", "H100-80GB", "7g.80gb@0,1g.10gb@3", "1g.10gb@3 overlaps 7g.80gb@0"},
		{"rejects an unknown profile", "H100-80GB", "3g.40gb@0,5g.50gb@0",
			`5g.50gb@0: unknown MIG profile "5g.50gb" for H100-80GB (known: 1g.10gb,`},
		{"rejects another model's profile", "H100-80GB", "1g.5gb@0", `1g.5gb@0: unknown MIG profile "1g.5gb" for H100-80GB`},
		{"rejects two +me instances", "H100-80GB", "1g.10gb+me@0,1g.10gb+me@1",
			"1g.10gb+me@1: at most one +me instance per GPU, and 1g.10gb+me@0 already has the media engines"},
		{"rejects start 7, where no profile may start", "H100-80GB", "1g.10gb@7", "1g.10gb@7: start 7 not allowed (allowed: 0,1,2,3,4,5,6)"},
		{"rejects MIG instances on a GPU without MIG", "T4", "1g.10gb@0", `model "T4" does not support MIG`},
		{"rejects MIG instances on an unknown GPU", "B200", "1g.23gb@0", `model "B200" is not in the GPU catalog`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Lookup(tt.model).Validate(mustLayout(t, tt.layout))
			checkErr(t, err, tt.wantErr)
		})
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("error = %v, want none", err)
	case want != "" && err == nil:
		t.Fatalf("no error, want one containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error = %q, want it to contain %q", err, want)
	}
}

// toyModel has a geometry no real GPU has, to reach the compute and count
// rules, which the real placement tables already imply.
var toyModel = &Model{Name: "toy", MIG: true, Known: true, Profiles: []Profile{
	{Name: "1c", Compute: 1, Memory: 1, Starts: []int{0, 1, 2, 3, 4, 5, 6, 7}, MaxPerGPU: 2},
	{Name: "3c", Compute: 3, Memory: 1, Starts: []int{0, 1, 2, 3, 4, 5, 6, 7}, MaxPerGPU: 8},
	{Name: "bad", Compute: 1, Memory: 4, Starts: []int{6}, MaxPerGPU: 1}, // start 6 would run past slice 7
}}

func TestValidateRulesTheRealTablesImply(t *testing.T) {
	tests := []struct {
		name    string
		layout  string
		wantErr string
	}{
		{"accepts up to the profile's count", "1c@0,1c@1", ""},
		{"rejects more than the profile's count", "1c@0,1c@1,1c@2", "1c@2: at most 2 1c per GPU"},
		{"accepts exactly seven compute slices", "3c@0,3c@1,1c@2", ""},
		{"rejects more than seven compute slices", "3c@0,3c@1,3c@2", "3c@2: compute slices would add up to 9, more than 7"},
		{"rejects a listed start that runs past the last slice", "bad@6", "bad@6: start 6 not allowed (allowed: 6)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, toyModel.Validate(mustLayout(t, tt.layout)), tt.wantErr)
		})
	}
}

func TestFreePlacements(t *testing.T) {
	tests := []struct {
		name    string
		model   string
		used    string
		want    string
		wantOut string // the placements as a layout string
		wantErr string
	}{
		{"finds both halves of an empty GPU for a 3g", "H100-80GB", "", "3g.40gb", "3g.40gb@0,3g.40gb@4", ""},
		{"finds every 1g start on an empty GPU", "H100-80GB", "", "1g.10gb",
			"1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6", ""},
		{"skips starts the used instances cover", "H100-80GB", "3g.40gb@0", "2g.20gb", "2g.20gb@4", ""},
		{"offers slice 6 to a 1g with 2/8 memory", "H100-80GB", "3g.40gb@0", "1g.20gb", "1g.20gb@4,1g.20gb@6", ""},
		{"finds the gaps between instances", "H100-80GB", "2g.20gb@0,1g.10gb@3,3g.40gb@4", "1g.10gb", "1g.10gb@2", ""},
		{"finds nothing on a full GPU", "H100-80GB", "4g.40gb@0,3g.40gb@4", "1g.10gb", "", ""},
		{"finds nothing for a second +me", "H100-80GB", "1g.10gb+me@0", "1g.10gb+me", "", ""},
		{"lets a plain 1g join a +me", "H100-80GB", "1g.10gb+me@0,3g.40gb@4", "1g.10gb",
			"1g.10gb@1,1g.10gb@2,1g.10gb@3", ""},
		{"finds nothing beside the whole GPU", "A100-40GB", "7g.40gb@0", "1g.5gb", "", ""},
		{"rejects an invalid used layout", "H100-80GB", "2g.20gb@6", "1g.10gb", "",
			"used layout: 2g.20gb@6: start 6 not allowed"},
		{"rejects an unknown profile", "H100-80GB", "", "5g.50gb", "", `unknown MIG profile "5g.50gb"`},
		{"rejects a GPU without MIG", "T4", "", "1g.10gb", "", `model "T4" does not support MIG`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Lookup(tt.model).FreePlacements(mustLayout(t, tt.used), tt.want)
			checkErr(t, err, tt.wantErr)
			if s := Layout(got).String(); s != tt.wantOut {
				t.Fatalf("FreePlacements = %s, want %s", s, tt.wantOut)
			}
		})
	}
}

func TestFreePlacementsWrapsErrNoMIG(t *testing.T) {
	if _, err := Lookup("L4").FreePlacements(nil, "1g.10gb"); !errors.Is(err, ErrNoMIG) {
		t.Fatalf("error %v does not wrap ErrNoMIG", err)
	}
}

// Validate and FreePlacements run for every GPU in every scheduling cycle.
func TestValidateAndFreePlacementsAllocateLittle(t *testing.T) {
	m := Lookup("H100-80GB")
	l := mustLayout(t, "2g.20gb@0,1g.10gb@2,1g.10gb+me@3,3g.40gb@4")
	if n := testing.AllocsPerRun(100, func() { _ = m.Validate(l) }); n != 0 {
		t.Errorf("Validate of a valid layout allocates %v times, want 0", n)
	}
	used := l[:2]
	if n := testing.AllocsPerRun(100, func() { _, _ = m.FreePlacements(used, "1g.10gb") }); n > 1 {
		t.Errorf("FreePlacements allocates %v times, want at most 1 (the result)", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = m.FreePlacements(l, "4g.40gb") }); n != 0 {
		t.Errorf("FreePlacements that finds nothing allocates %v times, want 0", n)
	}
}

func TestValidateIgnoresOrder(t *testing.T) {
	m := Lookup("A100-80GB")
	for _, l := range m.MaximalLayouts() {
		r := slices.Clone(l)
		slices.Reverse(r)
		if err := m.Validate(r); err != nil {
			t.Errorf("%s is valid but reversed: %v", l, err)
		}
	}
}
