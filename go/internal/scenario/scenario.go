// Package scenario reads scenario files: the YAML that describes a
// cluster (node groups, teams with quotas) and the work offered to it
// (workloads: which profile, how jobs arrive, how long they run) for the
// mixed-workload benchmark and the standalone server's virtual cluster.
// docs/scenario.md documents every field.
//
// Parse refuses anything it does not understand: unknown fields, values of
// the wrong type, references to teams or profiles that do not exist, and
// workloads the cluster could never run. Every error is an *Error naming
// the file, the line and the field.
//
// A parsed Scenario builds its nodes (Nodes) and a deterministic stream of
// job arrivals over its horizon (Jobs): the same seed gives the same
// stream, bit for bit.
package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.yaml.in/yaml/v3"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/profiles"
	"partita.dev/partita/internal/workload"
)

// Scenario is a parsed, valid scenario file.
type Scenario struct {
	File     string        // as given to Parse; trace files are relative to its directory
	Name     string        // default: the file name without its extension
	Duration time.Duration // the simulated horizon
	Seed     int64         // default 1; callers pass it to Jobs
	// ProductionReserveGPUs is what Partita keeps free of borrowed batch
	// and best-effort work so that production starts at once (0: none).
	ProductionReserveGPUs int
	NodeGroups            []NodeGroup
	Teams                 []Team
	Workloads             []Workload

	lines map[string]int // field path -> line, for errors found after Parse
}

// NodeGroup is Count identical nodes named Group-0, Group-1, ….
type NodeGroup struct {
	Group     string
	Count     int
	GPU       string // canonical gpu.Lookup name
	GPUs      int    // per node
	MIG       bool   // every GPU starts in MIG mode with no instances
	CPUMilli  int64
	MemoryMiB int64
	Tier      cluster.Tier
	Leaves    []string // nodes go round-robin under these leaf switches
	Spine     string
	Block     string
	NVLink    string // cluster.LinkNone, LinkAll, LinkPairs, or "" for the model's default
}

// Team is a quota holder.
type Team struct {
	Name           string
	GuaranteedGPUs int
	BurstGPUs      int     // most GPUs the team may hold when others are idle; default all
	Weight         float64 // share of what is left over after guarantees; default 1
	Classes        []workload.Class
}

// Workload is a stream of jobs of one kind.
type Workload struct {
	Name            string // also the Project of its jobs and the prefix of their IDs
	Team            string
	Class           workload.Class
	Mix             []Weighted // `profile: x` is a mix of one with weight 1
	Arrival         Process
	Duration        Dist // Dist "" only for trace arrivals: the trace's own times
	Replicas        int  // inference: tasks per job, default 1; 0 for training
	Gang            Gang // training: tasks per job; empty for inference
	CheckpointEvery time.Duration
}

// Weighted is one profile of a workload's mix.
type Weighted struct {
	Profile profiles.Profile
	Weight  float64
}

// Kind is the kind of the workload's profiles (they all share one).
func (w *Workload) Kind() profiles.Kind {
	if len(w.Mix) == 0 {
		return ""
	}
	return w.Mix[0].Profile.Kind
}

// Arrival processes.
const (
	Poisson = "poisson" // RatePerHour, exponential gaps
	Trace   = "trace"   // creation times of an Alibaba pod list
	Fixed   = "fixed"   // At, listed times
)

// Process says when a workload's jobs arrive. Only the fields of its
// Process are set.
type Process struct {
	Process     string
	RatePerHour float64
	File        string  // resolved against the scenario file's directory
	TimeScale   float64 // multiplies trace times (0.1 runs the trace ten times faster)
	At          []time.Duration
}

// Duration distributions.
const (
	Exponential = "exponential" // Mean
	Lognormal   = "lognormal"   // Mean (of the distribution, not of its log) and Sigma
	Constant    = "fixed"       // Value
	Uniform     = "uniform"     // Min, Max
)

// Dist is a distribution of job run times. Only the fields of its Dist are
// set.
type Dist struct {
	Dist  string
	Mean  time.Duration
	Sigma float64
	Value time.Duration
	Min   time.Duration
	Max   time.Duration
}

// Gang is a distribution of gang sizes: tasks per training job.
type Gang struct {
	Sizes   []int
	Weights []float64 // one per size; default equal
}

var errEmpty = errors.New("empty scenario: no YAML document")

// maxFileBytes bounds what Parse reads: scenario files are hand-written.
const maxFileBytes = 4 << 20

// Load reads and checks the scenario file at path.
func Load(path string) (*Scenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Err: err}
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads and checks a scenario; file names it in errors and anchors
// relative trace paths. Errors are *Error.
func Parse(r io.Reader, file string) (*Scenario, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxFileBytes+1))
	if err != nil {
		return nil, &Error{File: file, Err: err}
	}
	if len(data) > maxFileBytes {
		return nil, &Error{File: file, Err: fmt.Errorf("larger than %d MiB", maxFileBytes>>20)}
	}
	// The tree gives the positions of fields; the strict decode below fills
	// the raw types and refuses unknown fields, which decoding from the
	// tree cannot do.
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, syntaxError(file, err)
	}
	if root.Kind == 0 {
		return nil, &Error{File: file, Err: errEmpty}
	}
	ix := newIndex(&root)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var raw rawScenario
	if err := dec.Decode(&raw); err != nil {
		return nil, ix.decodeError(file, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, &Error{File: file, Line: next.Line, Err: errors.New("a second YAML document; put one scenario in a file")}
	case !errors.Is(err, io.EOF):
		return nil, syntaxError(file, err)
	}
	s, err := convert(&raw, file, ix)
	if err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// errorf makes an *Error for a field of s.
func (s *Scenario) errorf(field, format string, args ...any) *Error {
	return &Error{File: s.File, Line: lineOf(s.lines, field), Field: field, Err: fmt.Errorf(format, args...)}
}

// GPUs is the number of GPUs in the cluster.
func (s *Scenario) GPUs() int {
	n := 0
	for _, g := range s.NodeGroups {
		n += g.Count * g.GPUs
	}
	return n
}
