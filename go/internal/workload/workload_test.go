package workload

import (
	"slices"
	"strings"
	"testing"
)

func TestParseClassReadsWhatStringWrites(t *testing.T) {
	tests := []struct {
		name string
		text string
		want Class
	}{
		{"reads best-effort", "best-effort", BestEffort},
		{"reads batch", "batch", Batch},
		{"reads production", "production", Production},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseClass(tt.text)
			if err != nil || got != tt.want {
				t.Fatalf("ParseClass(%q) = %v, %v; want %v", tt.text, got, err, tt.want)
			}
			if got.String() != tt.text {
				t.Fatalf("%v.String() = %q, want %q", got, got.String(), tt.text)
			}
		})
	}
}

func TestParseClassRefusesUnknownNames(t *testing.T) {
	for _, text := range []string{"", "Batch", "besteffort", " batch", "batch ", "class(1)", "1", "prod"} {
		t.Run(text, func(t *testing.T) {
			_, err := ParseClass(text)
			if err == nil {
				t.Fatalf("ParseClass(%q) accepted it", text)
			}
			for _, want := range []string{`unknown priority class "` + text + `"`, "known: best-effort, batch, production"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestClassesAreOrderedLowToHigh(t *testing.T) {
	got := Classes()
	if !slices.Equal(got, []Class{BestEffort, Batch, Production}) {
		t.Fatalf("Classes() = %v", got)
	}
	if !slices.IsSorted(got) {
		t.Fatalf("Classes() = %v is not ordered lowest first", got)
	}
	for _, c := range got {
		back, err := ParseClass(c.String())
		if err != nil || back != c {
			t.Fatalf("class %d: %q parses as %v, %v", int(c), c.String(), back, err)
		}
	}
}

func TestClassAndKindStringOutOfRange(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"names a class past the last", Class(3).String(), "class(3)"},
		{"names a negative class", Class(-1).String(), "class(-1)"},
		{"names a kind past the last", Kind(5).String(), "kind(5)"},
		{"names a negative kind", Kind(-2).String(), "kind(-2)"},
		{"names no GPU", NoGPU.String(), "none"},
		{"names whole GPUs", WholeGPUs.String(), "gpus"},
		{"names a MIG profile", MIGProfile.String(), "mig"},
		{"names a memory profile", MemoryProfile.String(), "memory"},
		{"names a fraction", Fraction.String(), "fraction"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Fatalf("String() = %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestDemandString(t *testing.T) {
	tests := []struct {
		name   string
		demand Demand
		want   string
	}{
		{"describes no GPU", noGPU().demand(), "no GPU"},
		{"describes whole GPUs", wholeGPUs(8).demand(), "8 GPU"},
		{"describes a fraction", fraction(250).demand(), "250 milli-GPU"},
		{"describes a MIG profile", migProfile("3g.40gb").demand(), "MIG 3g.40gb"},
		{"describes a memory profile", memoryProfile(20480, 0.5).demand(), "20480 MiB peak, 0.50 compute"},
		{"names the allowed models", wholeGPUs(2).on("H100-80GB", "A100-80GB").demand(), "2 GPU on H100-80GB|A100-80GB"},
		{"names one allowed model", migProfile("1g.10gb").on("H100-80GB").demand(), "MIG 1g.10gb on H100-80GB"},
		{"names an unknown kind", Demand{Kind: Kind(9)}, "kind(9)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.demand.String(); got != tt.want {
				t.Fatalf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDemandGPUs(t *testing.T) {
	tests := []struct {
		name   string
		demand Demand
		want   int
	}{
		{"counts none without a GPU", noGPU().demand(), 0},
		{"counts each whole GPU", wholeGPUs(4).demand(), 4},
		{"counts a share as one", fraction(100).demand(), 1},
		{"counts an instance as one", migProfile("1g.10gb").demand(), 1},
		{"counts a memory profile as one", memoryProfile(1024, 0.1).demand(), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.demand.GPUs(); got != tt.want {
				t.Fatalf("GPUs() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestDemandAllowsModel(t *testing.T) {
	anyModel := wholeGPUs(1).demand()
	if !anyModel.AllowsModel("H100-80GB") || !anyModel.AllowsModel("") {
		t.Fatal("a demand without models refuses a model")
	}
	some := wholeGPUs(1).on("H100-80GB", "A100-80GB").demand()
	if !some.AllowsModel("A100-80GB") || !some.AllowsModel("H100-80GB") {
		t.Fatal("a demand refuses a model it lists")
	}
	for _, m := range []string{"V100-32GB", "h100-80gb", ""} {
		if some.AllowsModel(m) {
			t.Fatalf("a demand allows %q, which it does not list (names are compared as given)", m)
		}
	}
}

func TestJobGPUMilli(t *testing.T) {
	tests := []struct {
		name  string
		tasks []*taskBuilder
		want  int64
	}{
		{"counts nothing for CPU work", []*taskBuilder{task("a")}, 0},
		{"counts whole GPUs as 1000 each", []*taskBuilder{task("a").gpu(wholeGPUs(3))}, 3000},
		{"counts a fraction as its milli", []*taskBuilder{task("a").gpu(fraction(250))}, 250},
		{"counts a memory profile by its compute share", []*taskBuilder{task("a").gpu(memoryProfile(1024, 0.3333))}, 333},
		{"rounds a compute share up to the nearest milli", []*taskBuilder{task("a").gpu(memoryProfile(1024, 0.0006))}, 1},
		{"rounds a compute share down to the nearest milli", []*taskBuilder{task("a").gpu(memoryProfile(1024, 0.0004))}, 0},
		{"counts a MIG profile as its compute sevenths", []*taskBuilder{task("a").gpu(migProfile("3g.40gb"))}, 3000 / 7},
		{"counts a +me profile by its compute", []*taskBuilder{task("a").gpu(migProfile("1g.10gb+me"))}, 1000 / 7},
		{"counts a full-GPU profile as 1000", []*taskBuilder{task("a").gpu(migProfile("7g.80gb"))}, 1000},
		{"counts an unreadable profile as a whole GPU", []*taskBuilder{task("a").gpu(migProfile("big"))}, 1000},
		{"counts a profile past 7g as a whole GPU", []*taskBuilder{task("a").gpu(migProfile("9g.99gb"))}, 1000},
		{"adds up every task", []*taskBuilder{task("a").gpu(wholeGPUs(1)), task("b").gpu(fraction(500)), task("c").gpu(migProfile("2g.20gb"))}, 1000 + 500 + 2000/7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := job("j").tasks(tt.tasks...).build()
			if got := j.GPUMilli(); got != tt.want {
				t.Fatalf("GPUMilli() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestJobIsGang(t *testing.T) {
	for _, tt := range []struct {
		size int
		want bool
	}{{0, false}, {1, false}, {2, true}, {5, true}} {
		j := job("j").gang(tt.size).build()
		if j.IsGang() != tt.want {
			t.Fatalf("gang size %d: IsGang = %t, want %t", tt.size, j.IsGang(), tt.want)
		}
	}
}

func FuzzParseClass(f *testing.F) {
	for _, s := range []string{"best-effort", "batch", "production", "", "Batch", "class(1)", "batch\x00", "prödüction"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseClass(s)
		if err != nil {
			if !strings.Contains(err.Error(), "unknown priority class") {
				t.Fatalf("ParseClass(%q): error %q does not say what is wrong", s, err)
			}
			return
		}
		if c < BestEffort || c > Production {
			t.Fatalf("ParseClass(%q) = %d, not a class", s, int(c))
		}
		if c.String() != s {
			t.Fatalf("ParseClass(%q) = %v, which prints as %q", s, c, c.String())
		}
		if back, err := ParseClass(c.String()); err != nil || back != c {
			t.Fatalf("%q round-trips to %v, %v", s, back, err)
		}
	})
}
