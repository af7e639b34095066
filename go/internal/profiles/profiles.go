// Package profiles is the catalog of workload types Partita's scenarios and
// benchmarks are made of: LLM serving at several sizes, embedding,
// reranking, diffusion, recommendation, speech, notebooks, and training
// from a LoRA fine-tune to a pre-training rank.
//
// Each profile says how much GPU memory a task touches at its peak and how
// much compute it needs, and shows where the memory figure comes from, term
// by term (catalog.go). Inference asks for a memory profile, so the engine
// can pick the smallest MIG slice that holds it; training and models too big
// for one GPU ask for whole GPUs.
package profiles

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"partita.dev/partita/internal/workload"
)

// Kind says how a profile asks for GPUs.
type Kind string

const (
	// Inference is long-running work sized by memory: a MIG slice picked
	// from PeakMemoryMiB and Compute, or whole GPUs when GPUs > 0.
	Inference Kind = "inference"
	// Training runs on whole GPUs, GPUs per task, often as a gang.
	Training Kind = "training"
)

// Profile is one workload type.
type Profile struct {
	Name string
	Kind Kind
	// PeakMemoryMiB is the most GPU memory one GPU of a task holds: for a
	// memory-profiled task (inference with GPUs 0) the whole task, for a
	// whole-GPU task each of its GPUs.
	PeakMemoryMiB int64
	// Compute is the share of one H100's compute a task needs, 0 to 1.
	Compute float64
	// GPUs is the number of whole GPUs per task, all on one node; 0 means
	// the task asks for a memory profile instead.
	GPUs          int
	CPUMilli      int64
	HostMemoryMiB int64
	Derivation    Derivation
	// Measured lists processes of the profile's model measured on real
	// hardware, each beside what the derivation gives for the
	// configuration measured.
	Measured []Measurement
}

// Measurement is what one process really held on a real GPU: the caching
// allocator's reserved memory plus the CUDA context, at its peak.
type Measurement struct {
	Where      string // the GPU, driver, software, date and source
	Config     string // what ran, and how it differs from the profile
	HeldMiB    int64  // measured
	DerivedMiB int64  // the derivation, for the configuration measured
}

// Derivation shows where PeakMemoryMiB comes from.
type Derivation struct {
	Basis string // the model's shape, the assumptions (batch, tokens), and sources
	Terms []Term // they add up to PeakMemoryMiB (rounded up to whole MiB)
}

// Term is one addend of a derivation.
type Term struct {
	What  string  // the arithmetic in words: "weights: 6.74e9 params × 2 B (bf16)"
	Bytes float64 // the same arithmetic, evaluated
}

// TotalMiB adds the terms up and rounds up to whole MiB.
func (d Derivation) TotalMiB() int64 {
	var sum float64
	for _, t := range d.Terms {
		sum += t.Bytes
	}
	return int64(math.Ceil(sum / mib))
}

// String writes the derivation out, one term a line, ending with the total.
func (d Derivation) String() string {
	var b strings.Builder
	b.WriteString(d.Basis)
	for _, t := range d.Terms {
		fmt.Fprintf(&b, "\n  %9.1f MiB  %s", t.Bytes/mib, t.What)
	}
	fmt.Fprintf(&b, "\n  %7d   MiB  total", d.TotalMiB())
	return b.String()
}

// Lookup finds a profile by its exact name.
func Lookup(name string) (Profile, error) {
	for _, p := range catalog {
		if p.Name == name {
			return p.clone(), nil
		}
	}
	return Profile{}, fmt.Errorf("unknown profile %q (known: %s)", name, strings.Join(Names(), ", "))
}

// All returns every profile, in catalog order (inference small to large,
// then training). The slice and the profiles are the caller's to change.
func All() []Profile {
	out := make([]Profile, len(catalog))
	for i, p := range catalog {
		out[i] = p.clone()
	}
	return out
}

// Names lists the profile names in catalog order.
func Names() []string {
	names := make([]string, len(catalog))
	for i, p := range catalog {
		names[i] = p.Name
	}
	return names
}

// clone copies the terms so that callers cannot change the catalog.
func (p Profile) clone() Profile {
	p.Derivation.Terms = slices.Clone(p.Derivation.Terms)
	p.Measured = slices.Clone(p.Measured)
	return p
}

// Whole reports whether a task of the profile asks for whole GPUs rather
// than a memory profile.
func (p Profile) Whole() bool {
	return p.Kind == Training || p.GPUs > 0
}

// Demand is the GPU demand of one task, limited to models when models is
// not empty: a memory profile for inference that fits one GPU, GPUs whole
// GPUs otherwise. A training profile with GPUs 0 (none in the catalog)
// still asks for one whole GPU.
func (p Profile) Demand(models []string) workload.Demand {
	models = slices.Clone(models)
	if !p.Whole() {
		return workload.Demand{
			Kind:          workload.MemoryProfile,
			PeakMemoryMiB: p.PeakMemoryMiB,
			Compute:       p.Compute,
			Models:        models,
		}
	}
	return workload.Demand{Kind: workload.WholeGPUs, Count: max(p.GPUs, 1), Models: models}
}

// Task is one task of the profile, named name, on any GPU model.
func (p Profile) Task(name string) workload.Task {
	return workload.Task{
		Name:      name,
		CPUMilli:  p.CPUMilli,
		MemoryMiB: p.HostMemoryMiB,
		GPU:       p.Demand(nil),
	}
}
