// Package gpu knows GPU models and MIG geometry: which profiles a model
// offers, where on the GPU each may start, and which sets of instances can
// share one GPU. It is pure arithmetic over the tables in catalog.go: no I/O,
// no clocks, no global state that changes.
package gpu

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// DefaultHeadroom is the share of extra memory ProfileFor asks for above a
// workload's peak, for what a profile's derivation does not foresee.
//
// It comes from measurements (shared/reference/h200-measurements.md and
// the Measured rows of internal/profiles): once a profile budgets what a
// process really holds (its tensors, the caching allocator's reserve, the
// CUDA context), the measured processes held at most what their
// derivations gave (lora-ft-7b: 26,533 MiB against 26,537), and the
// derivation of allocated bytes fell short by at most 0.33 % (the LoRA
// step: 23,462 MiB allocated against 23,384 derived). Two measurements
// cannot bound the budgets (activations, batch buffers) of the profiles
// never measured, so the headroom is 5 %, fifteen times the largest error
// measured; TestHeadroomCoversEveryMeasurement checks it against each
// measurement. It was 10 % while profiles counted allocated bytes only,
// which a real LoRA fine-tune exceeded by 9.9 %. (Memory a driver reports
// below a profile's nominal size is not its job: the catalog's MIG
// profiles carry the reported sizes where a transcript exists.)
const DefaultHeadroom = 0.05

// ErrNoMIG is wrapped by every error that comes from asking a model without
// MIG (or an unknown model) for MIG geometry.
var ErrNoMIG = errors.New("does not support MIG")

// ErrNoFit is wrapped by ProfileFor when no profile is big enough; callers
// fall back to a whole GPU on it.
var ErrNoFit = errors.New("no MIG profile fits")

// Profile is one MIG GPU-instance profile of a model.
type Profile struct {
	Name      string `json:"name"`      // "3g.40gb", "1g.10gb+me"
	Compute   int    `json:"compute"`   // compute slices, of ComputeSlices
	Memory    int    `json:"memory"`    // memory slices, of MemorySlices; also the placement width
	Starts    []int  `json:"starts"`    // allowed start memory-slice indexes, ascending
	MemoryMiB int64  `json:"memoryMiB"` // nominal: the GB in the name x 1024 (see mibPerGB)
	SMs       int    `json:"sms"`
	MediaExt  bool   `json:"mediaExt"` // "+me": the instance owns the media engines
	MaxPerGPU int    `json:"maxPerGPU"`
}

// ComputeShare is the profile's share of the GPU's compute, in (0, 1].
func (p *Profile) ComputeShare() float64 {
	return float64(p.Compute) / ComputeSlices
}

// Mask has bit i set for each memory slice i in [start, start+Memory). Bits
// past the last memory slice are dropped and a start outside the GPU gives 0,
// so check CanStart first.
func (p *Profile) Mask(start int) uint8 {
	if start < 0 || start >= MemorySlices || p.Memory <= 0 {
		return 0
	}
	width := min(p.Memory, MemorySlices)
	return uint8((1<<width - 1) << start)
}

// CanStart reports whether an instance of p may start at memory slice start.
func (p *Profile) CanStart(start int) bool {
	if start < 0 || start+p.Memory > MemorySlices {
		return false
	}
	for _, s := range p.Starts {
		if s == start {
			return true
		}
	}
	return false
}

// Model is one GPU model. Models from Lookup and Catalog are shared: treat
// them as read-only.
type Model struct {
	Name         string    `json:"name"`    // canonical: "H100-80GB", "V100-16GB", "G2"
	Aliases      []string  `json:"aliases"` // trace names and GFD product labels Lookup also accepts
	MemoryMiB    int64     `json:"memoryMiB"`
	SMs          int       `json:"sms"`                    // 0 when unknown
	PCIDeviceIDs []string  `json:"pciDeviceIDs,omitempty"` // "0x2330"; only for MIG models
	MIG          bool      `json:"mig"`
	Profiles     []Profile `json:"profiles,omitempty"` // nil when !MIG; small to large
	Known        bool      `json:"known"`              // false for a model accepted by name only
	Source       string    `json:"source"`             // where the facts come from
}

// byName indexes the catalog by exact and lower-cased name and alias, so
// that a lookup by canonical name costs no allocation.
var byName = indexCatalog()

func indexCatalog() map[string]*Model {
	idx := make(map[string]*Model)
	add := func(key string, m *Model) {
		if other, dup := idx[key]; dup && other != m {
			panic(fmt.Sprintf("gpu: name %q belongs to both %s and %s", key, other.Name, m.Name))
		}
		idx[key] = m
	}
	for _, m := range catalog {
		for _, n := range append([]string{m.Name}, m.Aliases...) {
			add(n, m)
			add(strings.ToLower(n), m)
		}
	}
	return idx
}

// Lookup finds a model by name or alias, ignoring case. It never returns nil:
// a name not in the catalog gives a new opaque model (Known false, no MIG)
// so that a trace with a GPU we have never heard of still loads.
func Lookup(name string) *Model {
	if m, ok := byName[name]; ok {
		return m
	}
	if m, ok := byName[strings.ToLower(name)]; ok {
		return m
	}
	return &Model{Name: name}
}

// Catalog returns every known model in a stable order.
func Catalog() []*Model {
	return append([]*Model(nil), catalog...)
}

// Profile finds one of the model's MIG profiles by its exact name.
func (m *Model) Profile(name string) (*Profile, error) {
	if !m.MIG {
		return nil, m.errNoMIG()
	}
	if p := m.find(name); p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("unknown MIG profile %q for %s (known: %s)", name, m.Name, m.profileNames())
}

// find is Profile without the error, for hot paths.
func (m *Model) find(name string) *Profile {
	for i := range m.Profiles {
		if m.Profiles[i].Name == name {
			return &m.Profiles[i]
		}
	}
	return nil
}

func (m *Model) profileNames() string {
	names := make([]string, len(m.Profiles))
	for i := range m.Profiles {
		names[i] = m.Profiles[i].Name
	}
	return strings.Join(names, ", ")
}

func (m *Model) errNoMIG() error {
	if !m.Known {
		return fmt.Errorf("model %q is not in the GPU catalog, so it %w", m.Name, ErrNoMIG)
	}
	return fmt.Errorf("model %q %w", m.Name, ErrNoMIG)
}

// shareEpsilon forgives float rounding when a caller passes a compute share
// it computed as k/7.
const shareEpsilon = 1e-9

// ProfileFor picks the smallest non-+me profile with at least
// peakMiB*(1+headroom) of memory and at least the given share of compute (0
// to 1). Smallest means fewest memory slices, then fewest compute slices, so
// that the pick wastes the least of the scarcer resource. The error wraps
// ErrNoFit when the need is larger than every profile.
func (m *Model) ProfileFor(peakMiB int64, compute float64, headroom float64) (*Profile, error) {
	switch {
	case peakMiB < 0:
		return nil, fmt.Errorf("peak memory %d MiB is negative", peakMiB)
	case !(compute >= 0) || math.IsInf(compute, 1): // also rejects NaN
		return nil, fmt.Errorf("compute share %v must be a number from 0 to 1", compute)
	case !(headroom >= 0) || math.IsInf(headroom, 1):
		return nil, fmt.Errorf("memory headroom %v must be a finite number >= 0", headroom)
	case !m.MIG:
		return nil, m.errNoMIG()
	}
	need := float64(peakMiB) * (1 + headroom)
	var best, largest *Profile
	for i := range m.Profiles {
		p := &m.Profiles[i]
		if p.MediaExt {
			continue
		}
		if largest == nil || smaller(largest, p) {
			largest = p
		}
		if float64(p.MemoryMiB) < need || p.ComputeShare() < compute-shareEpsilon {
			continue
		}
		if best == nil || smaller(p, best) {
			best = p
		}
	}
	if best == nil {
		if largest == nil {
			return nil, fmt.Errorf("%w: %s has only +me profiles", ErrNoFit, m.Name)
		}
		return nil, fmt.Errorf("%w: %s needs %.0f MiB (%d MiB peak + %.0f%% headroom) and %.2f of the compute; "+
			"the largest profile, %s, has %d MiB and %.2f", ErrNoFit, m.Name, need, peakMiB, headroom*100,
			compute, largest.Name, largest.MemoryMiB, largest.ComputeShare())
	}
	return best, nil
}

// smaller orders profiles by memory slices, then compute slices.
func smaller(a, b *Profile) bool {
	if a.Memory != b.Memory {
		return a.Memory < b.Memory
	}
	return a.Compute < b.Compute
}
