package scenario

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/workload"
)

func TestParseRefusesWhatItCannotRead(t *testing.T) {
	tests := []struct {
		name     string
		old, new string // one edit of base
		want     string
	}{
		{"reports a YAML syntax error with its line", "name: t\nduration", "name: [\nduration",
			"t.yaml:2: did not find expected ',' or ']'"},
		{"refuses an unknown top-level field and lists the known ones", "name: t\n", "name: t\ncolour: red\n",
			"t.yaml:2: colour: unknown field (known here: name, duration, seed, production_reserve_gpus, nodes, teams, workloads)"},
		{"refuses an unknown field in a node group", "    gpus: 8", "    gpus: 8\n    colour: red",
			"t.yaml:8: nodes[0].colour: unknown field (known here: group, count, gpu, gpus, mig, cpu, memory, tier, leaves, spine, block, nvlink)"},
		{"refuses an unknown field in a flow mapping", "rate_per_hour: 30}", "rate: 30}",
			"t.yaml:23: workloads[0].arrival.rate: unknown field (known here: process, rate_per_hour, file, time_scale, at)"},
		{"refuses text where a number belongs", "    gpus: 8", "    gpus: eight",
			`t.yaml:7: nodes[0].gpus: "eight" is not a whole number`},
		{"refuses a fraction where a whole number belongs", "    replicas: 2", "    replicas: 2.5",
			`t.yaml:25: workloads[0].replicas: "2.5" is not a whole number`},
		{"refuses a list where a number belongs", "    gpus: 8", "    gpus: [8]",
			"t.yaml:7: nodes[0].gpus: a list is not a whole number"},
		{"refuses a word that is not a boolean", "    mig: true", "    mig: maybe",
			`t.yaml:8: nodes[0].mig: "maybe" is not true or false`},
		{"refuses a text rate", "rate_per_hour: 30}", "rate_per_hour: lots}",
			`t.yaml:23: workloads[0].arrival.rate_per_hour: "lots" is not a number`},
		{"refuses a key given twice", "    gpus: 8", "    gpus: 8\n    gpus: 4",
			"t.yaml:8: nodes[0].gpus: given twice (first at line 7)"},
		{"refuses a second document", "    checkpoint_every: 30m\n", "    checkpoint_every: 30m\n---\nname: x\n",
			"t.yaml:34: a second YAML document; put one scenario in a file"},
		{"refuses days, which Go durations do not have", "duration: 24h", "duration: 7d",
			`t.yaml:2: duration: "7d" is not a duration (Go syntax with a unit: 90s, 30m, 2h, 168h)`},
		{"refuses a duration without a unit", "duration: 24h", "duration: 3600",
			`t.yaml:2: duration: "3600" is not a duration (Go syntax with a unit: 90s, 30m, 2h, 168h)`},
		{"refuses a mapping where a duration belongs", "mean: 2h}", "mean: {a: 1}}",
			"t.yaml:24: workloads[0].duration.mean: a mapping is not a duration"},
		{"refuses a CPU quantity it cannot read", "    cpu: 192", "    cpu: lots",
			`t.yaml:9: nodes[0].cpu: "lots" is not a CPU quantity (cores such as 192 or 1.5, or millicores such as 1500m)`},
		{"refuses a CPU quantity finer than a millicore", "    cpu: 192", "    cpu: 0.0005",
			`t.yaml:9: nodes[0].cpu: "0.0005" is not a CPU quantity (cores such as 192 or 1.5, or millicores such as 1500m)`},
		{"refuses memory without a unit", "    memory: 2Ti", "    memory: 2048",
			`t.yaml:10: nodes[0].memory: "2048" needs a binary unit: Ki, Mi, Gi or Ti (such as 512Gi or 2Ti)`},
		{"refuses decimal memory units", "    memory: 2Ti", "    memory: 2T",
			`t.yaml:10: nodes[0].memory: "2T" needs a binary unit: Ki, Mi, Gi or Ti (such as 512Gi or 2Ti)`},
		{"refuses memory that is not whole MiB", "    memory: 2Ti", "    memory: 1.5Ki",
			`t.yaml:10: nodes[0].memory: "1.5Ki" is not a whole number of MiB`},
		{"refuses a missing horizon", "duration: 24h\n", "",
			"t.yaml: duration: missing: the simulated horizon, such as 168h"},
		{"refuses a missing GPU count, at its group's line", "    gpus: 8\n", "",
			"t.yaml:4: nodes[0].gpus: missing: GPUs per node, such as 8"},
		{"refuses a missing GPU model", "    gpu: H100-80GB\n", "",
			"t.yaml:4: nodes[0].gpu: missing: a GPU model such as H100-80GB"},
		{"refuses missing CPU", "    cpu: 192\n", "",
			"t.yaml:4: nodes[0].cpu: missing: CPU cores per node, such as 192"},
		{"refuses missing memory", "    memory: 2Ti\n", "",
			"t.yaml:4: nodes[0].memory: missing: host memory per node, such as 2Ti"},
		{"refuses a scenario without nodes", "nodes:\n", "nodes: []\nx:\n",
			"t.yaml:4: x: unknown field (known here: name, duration, seed, production_reserve_gpus, nodes, teams, workloads)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(edit(t, base, tt.old, tt.new)), "t.yaml")
			wantError(t, err, tt.want)
		})
	}
}

func TestParseRefusesWholeFiles(t *testing.T) {
	tests := []struct {
		name string
		text string
		want string
	}{
		{"refuses an empty file", "", "t.yaml: empty scenario: no YAML document"},
		{"refuses a file of comments", "# nothing\n", "t.yaml: empty scenario: no YAML document"},
		{"refuses a scalar document", "hello", `t.yaml:1: "hello" is not a mapping`},
		{"refuses a list document", "- a\n- b", "t.yaml:1: a list is not a mapping"},
		{"refuses a scenario without node groups", "duration: 1h\n", "t.yaml: nodes: missing: at least one node group"},
		{"refuses tabs for indentation", "name: t\n\tduration: 1h\n", "t.yaml:2: found a tab character that violates indentation"},
		// An alias naming the sequence it sits in: the index recursed on
		// it until the stack overflowed.
		{"refuses a merge key that names its own sequence", "<<: &a [*a]\n", "t.yaml: map merge requires map or sequence of maps as the value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.text), "t.yaml")
			wantError(t, err, tt.want)
		})
	}
}

func TestParseRefusesAFileLargerThanTheLimit(t *testing.T) {
	text := base + "# " + strings.Repeat("x", maxFileBytes) + "\n"
	_, err := Parse(strings.NewReader(text), "t.yaml")
	wantError(t, err, "t.yaml: larger than 4 MiB")
}

func TestLoadNamesTheFileItCannotOpen(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "absent.yaml"))
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "absent.yaml") {
		t.Fatalf("Load error %v, want an *Error wrapping fs.ErrNotExist naming the file", err)
	}
}

func TestParseReadsEveryField(t *testing.T) {
	s := parse(t, base)
	if s.Name != "t" || s.Duration != 24*time.Hour || s.Seed != 1 || s.GPUs() != 16 {
		t.Fatalf("scenario %q %v seed %d with %d GPUs", s.Name, s.Duration, s.Seed, s.GPUs())
	}
	g := s.NodeGroups[0]
	want := NodeGroup{
		Group: "h100", Count: 2, GPU: "H100-80GB", GPUs: 8, MIG: true, CPUMilli: 192000, MemoryMiB: 2 << 20,
		Tier: cluster.Reserved, Leaves: []string{"leaf-a", "leaf-b"},
	}
	if g.Group != want.Group || g.Count != want.Count || g.GPU != want.GPU || g.GPUs != want.GPUs || g.MIG != want.MIG ||
		g.CPUMilli != want.CPUMilli || g.MemoryMiB != want.MemoryMiB || g.Tier != want.Tier || !slices.Equal(g.Leaves, want.Leaves) {
		t.Fatalf("node group\n got  %+v\n want %+v", g, want)
	}
	search, research := s.Teams[0], s.Teams[1]
	if search.GuaranteedGPUs != 8 || search.BurstGPUs != 16 || search.Weight != 1 || len(search.Classes) != 3 {
		t.Fatalf("team search %+v", search)
	}
	if research.BurstGPUs != 16 {
		t.Fatalf("team research burst %d, want the cluster's 16 by default", research.BurstGPUs)
	}
	chat, train := s.Workloads[0], s.Workloads[1]
	if chat.Class != workload.Production || chat.Mix[0].Profile.Name != "llm-7b-bf16" || chat.Replicas != 2 ||
		chat.Arrival.RatePerHour != 30 || chat.Duration.Mean != 2*time.Hour || len(chat.Gang.Sizes) != 0 {
		t.Fatalf("workload chat %+v", chat)
	}
	if !slices.Equal(train.Gang.Sizes, []int{4, 8}) || !slices.Equal(train.Gang.Weights, []float64{0.5, 0.5}) ||
		train.CheckpointEvery != 30*time.Minute || train.Replicas != 0 ||
		!slices.Equal(train.Arrival.At, []time.Duration{0, 10 * time.Minute}) || train.Duration.Value != time.Hour {
		t.Fatalf("workload train %+v", train)
	}
}

func TestParseAppliesDefaults(t *testing.T) {
	text := edit(t, base, "name: t\n", "")
	text = edit(t, text, "    count: 2\n", "")
	text = edit(t, text, "    gpus: 8", "    gpus: 16") // the one node keeps the cluster at 16 GPUs
	text = edit(t, text, "    gang: {sizes: [4, 8], weights: [0.5, 0.5]}\n", "")
	text = edit(t, text, "    replicas: 2\n", "")
	s, err := Parse(strings.NewReader(text), "dir/my-scenario.yaml")
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case s.Name != "my-scenario":
		t.Errorf("name %q, want the file's name", s.Name)
	case s.NodeGroups[0].Count != 1:
		t.Errorf("count %d, want 1", s.NodeGroups[0].Count)
	case s.Workloads[0].Replicas != 1:
		t.Errorf("replicas %d, want 1", s.Workloads[0].Replicas)
	case !slices.Equal(s.Workloads[1].Gang.Sizes, []int{1}) || !slices.Equal(s.Workloads[1].Gang.Weights, []float64{1}):
		t.Errorf("gang %+v, want one task", s.Workloads[1].Gang)
	case s.Teams[1].Weight != 1 || !slices.Equal(s.Teams[1].Classes, workload.Classes()):
		t.Errorf("team %+v, want weight 1 and every class", s.Teams[1])
	}
}

func TestParseAcceptsQuantitySyntax(t *testing.T) {
	tests := []struct {
		name   string
		cpu    string
		memory string
		milli  int64
		mib    int64
	}{
		{"reads cores and Ti", "192", "2Ti", 192000, 2 << 20},
		{"reads millicores and Gi", "192000m", "512Gi", 192000, 512 << 10},
		{"reads fractional cores and Mi", "1.5", "1536Mi", 1500, 1536},
		{"reads quoted cores and Ki", `"64"`, "2048Ki", 64000, 2},
		{"reads fractional Ti", "96", "1.5Ti", 96000, 3 << 19},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := edit(t, base, "    cpu: 192", "    cpu: "+tt.cpu)
			text = edit(t, text, "    memory: 2Ti", "    memory: "+tt.memory)
			g := parse(t, text).NodeGroups[0]
			if g.CPUMilli != tt.milli || g.MemoryMiB != tt.mib {
				t.Fatalf("cpu %dm memory %d MiB, want %dm %d MiB", g.CPUMilli, g.MemoryMiB, tt.milli, tt.mib)
			}
		})
	}
}

func TestParseReadsAMix(t *testing.T) {
	text := edit(t, base, "    profile: llm-7b-bf16", "    mix: {llm-7b-bf16: 3, embed-335m: 1}")
	w := parse(t, text).Workloads[0]
	if len(w.Mix) != 2 || w.Mix[0].Profile.Name != "embed-335m" || w.Mix[0].Weight != 1 ||
		w.Mix[1].Profile.Name != "llm-7b-bf16" || w.Mix[1].Weight != 3 {
		t.Fatalf("mix %+v, want embed-335m:1, llm-7b-bf16:3 in name order", w.Mix)
	}
}

func TestParseResolvesTracePathsAgainstTheScenario(t *testing.T) {
	text := edit(t, base, "    arrival: {process: poisson, rate_per_hour: 30}", "    arrival: {process: trace, file: pods.csv}")
	text = edit(t, text, "    duration: {dist: exponential, mean: 2h}\n", "")
	s, err := Parse(strings.NewReader(text), filepath.Join("some", "dir", "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	a := s.Workloads[0].Arrival
	if a.File != filepath.Join("some", "dir", "pods.csv") || a.TimeScale != 1 {
		t.Fatalf("trace %q scale %v", a.File, a.TimeScale)
	}
	if s.Workloads[0].Duration.Dist != "" {
		t.Fatalf("duration %+v, want the trace's", s.Workloads[0].Duration)
	}
}

func TestValidateChecksScenariosBuiltInCode(t *testing.T) {
	s := parse(t, base)
	s.NodeGroups[0].GPUs = 0
	s.lines = nil
	wantError(t, s.Validate(), "t.yaml: nodes[0].gpus: 0 must be ≥ 1")
	s = &Scenario{Name: "x", Duration: time.Hour}
	wantError(t, s.Validate(), "scenario: nodes: missing: at least one node group")
}

func TestShippedScenariosParse(t *testing.T) {
	paths, err := filepath.Glob("../../../scenarios/*.yaml")
	if err != nil || len(paths) < 3 {
		t.Fatalf("found %d scenarios (%v)", len(paths), err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			s, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(); err != nil {
				t.Fatalf("revalidate: %v", err)
			}
			nodes, err := s.Nodes()
			if err != nil {
				t.Fatal(err)
			}
			gpus := 0
			for _, n := range nodes {
				gpus += len(n.GPUs)
			}
			if gpus != s.GPUs() {
				t.Fatalf("nodes hold %d GPUs, scenario says %d", gpus, s.GPUs())
			}
			if _, err := cluster.New(nodes); err != nil {
				t.Fatalf("cluster.New: %v", err)
			}
		})
	}
}

func TestShippedScenariosAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/scenario.md")
	if err != nil {
		t.Fatal(err)
	}
	for typ, fields := range knownFields {
		for _, f := range fields {
			if !strings.Contains(string(doc), "`"+f+"`") {
				t.Errorf("docs/scenario.md does not document %s (a field of %s)", f, typ)
			}
		}
	}
}

func TestTheDocumentedExampleParses(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/scenario.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## A complete example\n\n```yaml\n")
	example, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("docs/scenario.md has no complete example")
	}
	s := parse(t, example)
	if s.GPUs() != 64 || len(s.Workloads) != 2 {
		t.Fatalf("example has %d GPUs and %d workloads", s.GPUs(), len(s.Workloads))
	}
}

func TestParseFollowsMergeKeys(t *testing.T) {
	text := edit(t, base, "    leaves: [leaf-a, leaf-b]\n", `    leaves: [leaf-a, leaf-b]
  - <<: *h100
    group: spot
    tier: spot
`)
	text = edit(t, text, "  - group: h100\n", "  - &h100\n    group: h100\n")
	s := parse(t, text)
	spot := s.NodeGroups[1]
	if spot.Group != "spot" || spot.GPUs != 8 || spot.Count != 2 || spot.Tier != cluster.Spot || spot.MemoryMiB != 2<<20 {
		t.Fatalf("merged group %+v", spot)
	}
}
