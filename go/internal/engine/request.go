// Package engine decides where work goes. It is a pure library: given a
// cluster snapshot and the work to place, it returns decisions; it does no
// I/O, starts no goroutines, reads no clock, and draws randomness only from
// the *rand.Rand its caller gives it. The simulator, the standalone server
// and the Kubernetes scheduler all drive this same code.
package engine

import (
	"fmt"
	"math"
	"strings"

	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/workload"
)

// Request is a task as the placement pipeline sees it: the demand with
// model names made canonical and memory profiles ready to resolve per GPU
// model.
type Request struct {
	Task     workload.Task
	CPUMilli int64
	MemMiB   int64
	Kind     workload.Kind
	Count    int    // whole GPUs
	Milli    int    // share of one GPU
	Profile  string // MIG profile
	PeakMiB  int64
	Compute  float64
	Models   []string // canonical model names; empty = any
	// MIGOnly: on a MIG-capable model a memory profile takes a MIG
	// instance, never a time-sliced share of a GPU with MIG off.
	MIGOnly bool

	headroom float64
	key      requestKey
	resolved []resolution // memory profile per model, filled lazily
}

// requestKey identifies requests that every filter and scorer treat alike,
// so their per-node results can be cached and shared.
type requestKey struct {
	cpu, mem int64
	kind     workload.Kind
	count    int
	milli    int
	profile  string
	peak     int64
	compute  float64
	models   string
	headroom float64
	migOnly  bool
}

// NewRequest prepares a task for placement. headroom is the extra GPU
// memory a memory profile keeps above its peak (gpu.DefaultHeadroom).
func NewRequest(t workload.Task, headroom float64) (*Request, error) {
	if err := t.Validate(nil); err != nil {
		return nil, err
	}
	d := t.GPU
	r := &Request{
		Task: t, CPUMilli: t.CPUMilli, MemMiB: t.MemoryMiB, Kind: d.Kind,
		Count: d.Count, Milli: d.Milli, Profile: d.Profile,
		PeakMiB: d.PeakMemoryMiB, Compute: d.Compute, headroom: headroom,
	}
	seen := map[string]bool{}
	for _, m := range d.Models {
		name := gpu.Lookup(m).Name
		if !seen[name] {
			seen[name] = true
			r.Models = append(r.Models, name)
		}
	}
	r.key = requestKey{r.CPUMilli, r.MemMiB, r.Kind, r.Count, r.Milli, r.Profile, r.PeakMiB, r.Compute, strings.Join(r.Models, "|"), headroom, false}
	return r, nil
}

// AllowsModel reports whether the request may use a GPU of model m.
func (r *Request) AllowsModel(m *gpu.Model) bool {
	if len(r.Models) == 0 {
		return true
	}
	for _, name := range r.Models {
		if name == m.Name {
			return true
		}
	}
	return false
}

// IsFractional reports whether the request shares one non-MIG GPU.
func (r *Request) IsFractional() bool { return r.Kind == workload.Fraction }

// GPUMilli returns the GPU the request takes on a non-MIG GPU in milli, for
// policies that think in milli (whole GPUs count 1000 each).
func (r *Request) GPUMilli() int {
	switch r.Kind {
	case workload.WholeGPUs:
		return r.Count * 1000
	case workload.Fraction:
		return r.Milli
	}
	return 0
}

// resolution is what a memory profile becomes on one GPU model.
type resolution struct {
	model   *gpu.Model
	profile *gpu.Profile // on a MIG GPU; nil when no profile fits
	milli   int          // on a non-MIG GPU; 0 when it cannot fit
}

// Resolve returns what a memory-profile request needs on model m: the MIG
// profile (when MIG is on) and the share of a non-MIG GPU. A share is the
// larger of the compute share and the memory share, since without MIG a
// task gets memory in proportion to its share (that is how we model
// time-sliced sharing without OOM).
func (r *Request) Resolve(m *gpu.Model) (profile *gpu.Profile, milli int) {
	for _, x := range r.resolved {
		if x.model.Name == m.Name {
			return x.profile, x.milli
		}
	}
	x := resolution{model: m}
	if m.MIG {
		x.profile, _ = m.ProfileFor(r.PeakMiB, r.Compute, r.headroom)
	}
	if m.MemoryMiB > 0 {
		need := float64(r.PeakMiB) * (1 + r.headroom)
		byMem := int(math.Ceil(need / float64(m.MemoryMiB) * 1000))
		byCompute := int(math.Ceil(r.Compute * 1000))
		x.milli = max(byMem, byCompute, 1)
		if x.milli > 1000 {
			x.milli = 0
		}
	}
	r.resolved = append(r.resolved, x)
	return x.profile, x.milli
}

func (r *Request) String() string {
	return fmt.Sprintf("%s (cpu %dm, mem %d MiB, %s)", r.Task.Name, r.CPUMilli, r.MemMiB, r.Task.GPU)
}
