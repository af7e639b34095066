// Package workload describes what users ask for: jobs made of tasks, each
// task asking for CPU, memory and one kind of GPU demand.
//
// It knows nothing about where work runs; the engine matches demands to the
// cluster. Validation here only checks what can be checked without a
// cluster, plus the few facts a Capacity summary gives (largest node, which
// models exist).
package workload

import (
	"fmt"
	"strings"
)

// Class is a priority class. Higher classes are ordered first and may
// preempt lower ones.
type Class int

const (
	BestEffort Class = iota // may be preempted at any time
	Batch                   // training and other throughput work
	Production              // latency-sensitive serving; always runs
)

var classNames = [...]string{"best-effort", "batch", "production"}

func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return fmt.Sprintf("class(%d)", int(c))
	}
	return classNames[c]
}

// ParseClass accepts the names String returns.
func ParseClass(s string) (Class, error) {
	for i, n := range classNames {
		if s == n {
			return Class(i), nil
		}
	}
	return 0, fmt.Errorf("unknown priority class %q (known: %s)", s, strings.Join(classNames[:], ", "))
}

// Classes lists every class from lowest to highest.
func Classes() []Class { return []Class{BestEffort, Batch, Production} }

// Kind says which form a GPU demand takes.
type Kind int

const (
	NoGPU         Kind = iota // CPU and memory only
	WholeGPUs                 // Count whole GPUs on one node
	MIGProfile                // one MIG instance of the named profile
	MemoryProfile             // peak GPU memory and compute share; the engine picks a MIG profile or a share
	Fraction                  // Milli thousandths of one GPU, shared with others
)

var kindNames = [...]string{"none", "gpus", "mig", "memory", "fraction"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("kind(%d)", int(k))
	}
	return kindNames[k]
}

// Demand is a task's GPU request. Only the fields of its Kind are used.
type Demand struct {
	Kind Kind

	Count   int    // WholeGPUs: how many whole GPUs, all on one node
	Milli   int    // Fraction: 1..999 thousandths of one GPU
	Profile string // MIGProfile: a profile name such as "1g.10gb"

	// MemoryProfile: the most GPU memory the task touches, and the share of
	// one GPU's compute it needs to meet its latency or throughput target.
	PeakMemoryMiB int64
	Compute       float64

	// Models, when not empty, lists the GPU models the task may run on.
	Models []string
}

// GPUs returns the number of GPUs the demand touches (a share or slice
// counts as one).
func (d Demand) GPUs() int {
	switch d.Kind {
	case WholeGPUs:
		return d.Count
	case NoGPU:
		return 0
	default:
		return 1
	}
}

// AllowsModel reports whether the demand may run on the named model. Names
// are compared as given; callers canonicalise them first (gpu.Lookup).
func (d Demand) AllowsModel(model string) bool {
	if len(d.Models) == 0 {
		return true
	}
	for _, m := range d.Models {
		if m == model {
			return true
		}
	}
	return false
}

func (d Demand) String() string {
	var s string
	switch d.Kind {
	case NoGPU:
		return "no GPU"
	case WholeGPUs:
		s = fmt.Sprintf("%d GPU", d.Count)
	case Fraction:
		s = fmt.Sprintf("%d milli-GPU", d.Milli)
	case MIGProfile:
		s = "MIG " + d.Profile
	case MemoryProfile:
		s = fmt.Sprintf("%d MiB peak, %.2f compute", d.PeakMemoryMiB, d.Compute)
	default:
		s = d.Kind.String()
	}
	if len(d.Models) > 0 {
		s += " on " + strings.Join(d.Models, "|")
	}
	return s
}

// Task is one schedulable unit: a pod, a process.
type Task struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	GPU       Demand
}

// Job is what a user submits: one or more tasks, owned by a team.
type Job struct {
	ID      string
	Team    string
	Project string
	Class   Class
	Tasks   []Task

	// GangSize tasks must start together or not at all. 0 or 1 means each
	// task starts on its own.
	GangSize int
}

// IsGang reports whether the job's tasks must start all together.
func (j *Job) IsGang() bool { return j.GangSize > 1 }

// GPUMilli returns the GPU the job asks for in thousandths of a GPU, before
// a model is chosen: a MIG profile counts as its compute share (3g = 3/7), a
// memory profile as its compute share.
func (j *Job) GPUMilli() int64 {
	var total int64
	for _, t := range j.Tasks {
		total += t.GPU.nominalMilli()
	}
	return total
}

// nominalMilli is the demand's size before a model is chosen.
func (d Demand) nominalMilli() int64 {
	switch d.Kind {
	case WholeGPUs:
		return int64(d.Count) * 1000
	case Fraction:
		return int64(d.Milli)
	case MemoryProfile:
		return int64(d.Compute*1000 + 0.5)
	case MIGProfile:
		// The compute share of a profile is fixed by its name: "3g.40gb" is
		// 3/7. (Parsed by hand: this runs for every waiting job in every
		// scheduling cycle.)
		if len(d.Profile) >= 2 && d.Profile[1] == 'g' && d.Profile[0] >= '1' && d.Profile[0] <= '7' {
			return int64(d.Profile[0]-'0') * 1000 / 7
		}
		return 1000
	}
	return 0
}
