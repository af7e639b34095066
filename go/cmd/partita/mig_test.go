package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"partita.dev/partita/internal/gpu"
)

func runMigArgs(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = runMig(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestMigIsRegistered(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := dispatch([]string{"mig", "models"}, &out, &errOut); code != 0 {
		t.Fatalf("partita mig models exited %d: %s", code, errOut.String())
	}
}

func TestMigLayoutsJSONListsEveryMaximalLayout(t *testing.T) {
	for _, name := range []string{"A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "nvidia-h100-80gb-hbm3"} {
		code, stdout, stderr := runMigArgs("layouts", "--gpu", name, "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, stderr)
		}
		var layouts []gpu.Layout
		if err := json.Unmarshal([]byte(stdout), &layouts); err != nil {
			t.Fatalf("%s: output is not a JSON array of layouts: %v\n%s", name, err, stdout)
		}
		m := gpu.Lookup(name)
		if want := len(m.MaximalLayouts()); len(layouts) != want {
			t.Fatalf("%s: %d layouts, want %d", name, len(layouts), want)
		}
		for _, l := range layouts {
			if err := m.Validate(l); err != nil {
				t.Errorf("%s: %s decoded from JSON is invalid: %v", name, l, err)
			}
		}
	}
}

func TestMigLayoutsTableHasOneAlignedRowPerLayout(t *testing.T) {
	code, stdout, stderr := runMigArgs("layouts", "--gpu", "H100-80GB")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := len(gpu.Lookup("H100-80GB").MaximalLayouts())
	var rows []string
	for _, line := range strings.Split(stdout, "\n") {
		if strings.Contains(line, "[") {
			rows = append(rows, line)
		}
	}
	if len(rows) != want {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), want, stdout)
	}
	// The picture ends at the same column on every row.
	end := strings.LastIndex(rows[0], "]")
	for _, r := range rows {
		if strings.LastIndex(r, "]") != end {
			t.Fatalf("rows are not aligned:\n%s\n%s", rows[0], r)
		}
	}
	if !strings.Contains(stdout, "[7g.80gb") || !strings.Contains(stdout, "7g.80gb@0") {
		t.Fatalf("the whole-GPU layout is missing:\n%s", stdout)
	}
}

func TestMigFitJSON(t *testing.T) {
	tests := []struct {
		name           string
		used, want     string
		wantFits       bool
		wantPlacements string
		wantReason     string
	}{
		{"finds the one 2g start left beside a 3g", "3g.40gb@0", "2g.20gb", true, "2g.20gb@4", ""},
		{"finds every start on an empty GPU", "", "3g.40gb", true, "3g.40gb@0,3g.40gb@4", ""},
		{"says why nothing fits on a full GPU", "4g.40gb@0,3g.40gb@4", "1g.10gb", false, "", "1g.10gb@4 overlaps 3g.40gb@4"},
		{"says a second +me cannot join", "1g.10gb+me@0", "1g.10gb+me", false, "", "at most one +me instance"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runMigArgs("fit", "--gpu", "H100-80GB", "--used", tt.used, "--want", tt.want, "--json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var res migFitResult
			if err := json.Unmarshal([]byte(stdout), &res); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, stdout)
			}
			if res.Fits != tt.wantFits || gpu.Layout(res.Placements).String() != tt.wantPlacements {
				t.Fatalf("fits %v at %v, want %v at %s", res.Fits, res.Placements, tt.wantFits, tt.wantPlacements)
			}
			if tt.wantReason != "" && !strings.Contains(strings.Join(res.Reasons, "\n"), tt.wantReason) {
				t.Fatalf("reasons %q do not say %q", res.Reasons, tt.wantReason)
			}
		})
	}
}

func TestMigFitText(t *testing.T) {
	code, stdout, _ := runMigArgs("fit", "--gpu", "H100-80GB", "--used", "3g.40gb@0", "--want", "2g.20gb")
	if code != 0 || !strings.Contains(stdout, "2g.20gb fits on H100-80GB beside 3g.40gb@0 at 1 place") ||
		!strings.Contains(stdout, "2g.20gb@4") {
		t.Fatalf("exit %d, output:\n%s", code, stdout)
	}
	code, stdout, _ = runMigArgs("fit", "--gpu", "H100-80GB", "--used", "7g.80gb@0", "--want", "1g.10gb")
	if code != 0 || !strings.Contains(stdout, "1g.10gb does not fit on H100-80GB beside 7g.80gb@0") ||
		!strings.Contains(stdout, "1g.10gb@3 overlaps 7g.80gb@0") {
		t.Fatalf("exit %d, output:\n%s", code, stdout)
	}
}

func TestMigProfilesAndModels(t *testing.T) {
	code, stdout, stderr := runMigArgs("profiles", "--gpu", "H100-80GB")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, p := range gpu.Lookup("H100-80GB").Profiles {
		if !strings.Contains(stdout, p.Name) {
			t.Errorf("profiles output lacks %s:\n%s", p.Name, stdout)
		}
	}
	code, stdout, _ = runMigArgs("profiles", "--gpu", "A100-40GB", "--json")
	var profiles []gpu.Profile
	if err := json.Unmarshal([]byte(stdout), &profiles); code != 0 || err != nil || len(profiles) != 7 || profiles[0].Name != "1g.5gb" {
		t.Fatalf("exit %d, err %v, profiles %+v", code, err, profiles)
	}
	code, stdout, _ = runMigArgs("models")
	if code != 0 || !strings.Contains(stdout, "V100-16GB") || !strings.Contains(stdout, "V100M16") {
		t.Fatalf("exit %d, output:\n%s", code, stdout)
	}
	code, stdout, _ = runMigArgs("models", "--json")
	var models []gpu.Model
	if err := json.Unmarshal([]byte(stdout), &models); code != 0 || err != nil || len(models) != len(gpu.Catalog()) {
		t.Fatalf("exit %d, err %v, %d models, want %d", code, err, len(models), len(gpu.Catalog()))
	}
}

func TestMigBadInput(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"asks for a subcommand", nil, 2, "Usage: partita mig"},
		{"rejects an unknown subcommand", []string{"bogus"}, 2, `unknown subcommand "bogus"`},
		{"rejects an unknown flag", []string{"layouts", "--nope"}, 2, "flag provided but not defined: -nope"},
		{"requires --gpu", []string{"layouts"}, 2, "--gpu is required"},
		{"rejects a stray argument", []string{"layouts", "--gpu", "H100-80GB", "extra"}, 2, `unexpected argument "extra"`},
		{"names an unknown GPU", []string{"layouts", "--gpu", "B300"}, 1, `unknown GPU model "B300"`},
		{"names a GPU without MIG", []string{"profiles", "--gpu", "t4"}, 1, `model "T4" does not support MIG`},
		{"requires --want", []string{"fit", "--gpu", "H100-80GB"}, 2, "--want is required"},
		{"names an unknown profile", []string{"fit", "--gpu", "H100-80GB", "--want", "5g.50gb"}, 1,
			`--want: unknown MIG profile "5g.50gb" for H100-80GB`},
		{"names a placement that does not parse", []string{"fit", "--gpu", "H100-80GB", "--used", "3g.40gb@9", "--want", "1g.10gb"}, 1,
			`placement "3g.40gb@9": start "9"`},
		{"names an invalid used layout", []string{"fit", "--gpu", "H100-80GB", "--used", "2g.20gb@6", "--want", "1g.10gb"}, 1,
			`--used "2g.20gb@6": 2g.20gb@6: start 6 not allowed (allowed: 0,2,4)`},
		{"names overlapping used instances", []string{"fit", "--gpu", "H100-80GB", "--used", "4g.40gb@0,2g.20gb@2", "--want", "1g.10gb"}, 1,
			"2g.20gb@2 overlaps 4g.40gb@0"},
		{"shows flags on -h", []string{"fit", "-h"}, 0, "-want"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runMigArgs(tt.args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantStderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, stderr, tt.wantCode, tt.wantStderr)
			}
		})
	}
}

func TestMigHelpGoesToStdout(t *testing.T) {
	code, stdout, _ := runMigArgs("help")
	if code != 0 || !strings.Contains(stdout, "layouts") || !strings.Contains(stdout, "fit") {
		t.Fatalf("exit %d, output:\n%s", code, stdout)
	}
}
