package scenario

import (
	"fmt"
	"math/big"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The raw types mirror the file. The strict decoder (KnownFields) fills
// them, refusing unknown fields; convert then turns them into the exported
// types, applying defaults. Leaf values with their own syntax (durations,
// CPU and memory quantities) parse themselves and report their position.

type rawScenario struct {
	Name      string         `yaml:"name"`
	Duration  durationField  `yaml:"duration"`
	Seed      whole          `yaml:"seed"`
	Reserve   whole          `yaml:"production_reserve_gpus"`
	Nodes     []rawNodeGroup `yaml:"nodes"`
	Teams     []rawTeam      `yaml:"teams"`
	Workloads []rawWorkload  `yaml:"workloads"`
}

type rawNodeGroup struct {
	Group  string   `yaml:"group"`
	Count  whole    `yaml:"count"`
	GPU    string   `yaml:"gpu"`
	GPUs   whole    `yaml:"gpus"`
	MIG    bool     `yaml:"mig"`
	CPU    cpuField `yaml:"cpu"`
	Memory memField `yaml:"memory"`
	Tier   string   `yaml:"tier"`
	Leaves []string `yaml:"leaves"`
	Spine  string   `yaml:"spine"`
	Block  string   `yaml:"block"`
	NVLink string   `yaml:"nvlink"`
}

type rawTeam struct {
	Name           string   `yaml:"name"`
	GuaranteedGPUs whole    `yaml:"guaranteed_gpus"`
	BurstGPUs      whole    `yaml:"burst_gpus"`
	Weight         float64  `yaml:"weight"`
	Classes        []string `yaml:"classes"`
}

type rawWorkload struct {
	Name            string             `yaml:"name"`
	Team            string             `yaml:"team"`
	Class           string             `yaml:"class"`
	Profile         string             `yaml:"profile"`
	Mix             map[string]float64 `yaml:"mix"`
	Arrival         rawArrival         `yaml:"arrival"`
	Duration        rawDist            `yaml:"duration"`
	Replicas        whole              `yaml:"replicas"`
	Gang            rawGang            `yaml:"gang"`
	CheckpointEvery durationField      `yaml:"checkpoint_every"`
}

type rawArrival struct {
	Process     string          `yaml:"process"`
	RatePerHour float64         `yaml:"rate_per_hour"`
	File        string          `yaml:"file"`
	TimeScale   float64         `yaml:"time_scale"`
	At          []durationField `yaml:"at"`
}

type rawDist struct {
	Dist  string        `yaml:"dist"`
	Mean  durationField `yaml:"mean"`
	Sigma float64       `yaml:"sigma"`
	Value durationField `yaml:"value"`
	Min   durationField `yaml:"min"`
	Max   durationField `yaml:"max"`
}

type rawGang struct {
	Sizes   []whole   `yaml:"sizes"`
	Weights []float64 `yaml:"weights"`
}

// leafError is a leaf value that does not parse; it carries its position
// because the decoder passes custom errors through without one.
type leafError struct {
	line, column int
	err          error
}

func (e *leafError) Error() string { return e.err.Error() }

func leafErr(n *yaml.Node, format string, args ...any) error {
	return &leafError{line: n.Line, column: n.Column, err: fmt.Errorf(format, args...)}
}

// scalar returns the node's text, refusing lists and mappings.
func scalar(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", leafErr(n, "%s is not %s", found(n.ShortTag(), ""), what)
	}
	return n.Value, nil
}

// whole is an integer. The decoder would truncate 2.5 into an int field;
// this refuses it.
type whole int64

func (w *whole) UnmarshalYAML(n *yaml.Node) error {
	if _, err := scalar(n, "a whole number"); err != nil {
		return err
	}
	var v int64
	if n.ShortTag() != "!!int" {
		return leafErr(n, "%q is not a whole number", n.Value)
	}
	if err := n.Decode(&v); err != nil {
		return leafErr(n, "%s is out of range", n.Value)
	}
	*w = whole(v)
	return nil
}

// durationField is a Go duration ("90s", "2h30m"). Null leaves it unset.
type durationField struct {
	d   time.Duration
	set bool
}

func (f *durationField) UnmarshalYAML(n *yaml.Node) error {
	s, err := scalar(n, "a duration")
	if err != nil {
		return err
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return leafErr(n, "%q is not a duration (Go syntax with a unit: 90s, 30m, 2h, 168h)", s)
	}
	f.d, f.set = d, true
	return nil
}

// cpuField is a CPU quantity in Kubernetes syntax: cores ("192", "1.5") or
// millicores ("1500m"), kept in millicores.
type cpuField struct {
	milli int64
	set   bool
}

func (f *cpuField) UnmarshalYAML(n *yaml.Node) error {
	s, err := scalar(n, "a CPU quantity")
	if err != nil {
		return err
	}
	num, scale := s, int64(1000) // millicores per unit
	if strings.HasSuffix(s, "m") {
		num, scale = strings.TrimSuffix(s, "m"), 1
	}
	milli, ok := exact(num, scale, 1)
	if !ok {
		return leafErr(n, "%q is not a CPU quantity (cores such as 192 or 1.5, or millicores such as 1500m)", s)
	}
	f.milli, f.set = milli, true
	return nil
}

// memField is a memory quantity with a binary suffix (Ki, Mi, Gi, Ti),
// kept in MiB; it must come to whole MiB.
type memField struct {
	mib int64
	set bool
}

// memUnits is KiB per unit of each accepted suffix.
var memUnits = []struct {
	suffix string
	kib    int64
}{{"Ki", 1}, {"Mi", 1 << 10}, {"Gi", 1 << 20}, {"Ti", 1 << 30}}

func (f *memField) UnmarshalYAML(n *yaml.Node) error {
	s, err := scalar(n, "a memory quantity")
	if err != nil {
		return err
	}
	for _, u := range memUnits {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		mib, ok := exact(num, u.kib, 1<<10)
		if !ok {
			return leafErr(n, "%q is not a whole number of MiB", s)
		}
		f.mib, f.set = mib, true
		return nil
	}
	return leafErr(n, "%q needs a binary unit: Ki, Mi, Gi or Ti (such as 512Gi or 2Ti)", s)
}

// maxQuantity bounds quantities so that sums over many nodes cannot
// overflow: 2^40 MiB is an exbibyte, 2^40 millicores a billion cores.
const maxQuantity = 1 << 40

// exact reads a plain non-negative decimal ("12", "1.5"; at most 18
// digits) and returns num × mul / div when that is a whole number no larger
// than maxQuantity.
func exact(num string, mul, div int64) (int64, bool) {
	if num == "" || len(num) > 19 || strings.Count(num, ".") > 1 || num[0] == '.' || num[len(num)-1] == '.' {
		return 0, false
	}
	for _, c := range num {
		if (c < '0' || c > '9') && c != '.' {
			return 0, false
		}
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, false
	}
	r.Mul(r, big.NewRat(mul, div))
	if !r.IsInt() || r.Num().Cmp(big.NewInt(maxQuantity)) > 0 {
		return 0, false
	}
	return r.Num().Int64(), true
}
