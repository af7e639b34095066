package engine

import (
	"fmt"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/workload"
)

// Code says why a node was filtered out. Codes are few and fixed so that
// the reasons of a thousand nodes can be counted without formatting a
// thousand strings; Explain gives the numbers for one node.
type Code string

const (
	CodeCPU      Code = "cpu"       // not enough CPU left
	CodeMemory   Code = "memory"    // not enough memory left
	CodeNoGPU    Code = "no-gpu"    // the node has no GPU
	CodeModel    Code = "gpu-model" // no GPU of an allowed model
	CodeGPU      Code = "gpu"       // not enough free GPUs or share
	CodeMIG      Code = "mig-slice" // no free or creatable MIG instance of the profile
	CodeMIGOff   Code = "mig-off"   // the demand needs MIG (or no MIG) and the GPUs are the other way
	CodeTooSmall Code = "gpu-memory"
	CodePolicy   Code = "policy" // a policy's own filter said no
)

// Reason is a filter's verdict on one node.
type Reason struct {
	Filter string
	Code   Code
}

// unit is what a request needs on one particular GPU.
type unit struct {
	milli   int          // a share of a non-MIG GPU (1000 = the whole GPU)
	profile *gpu.Profile // a MIG instance
}

// need returns what r needs on GPU g, or a code saying why g cannot serve it
// whatever its load.
func need(r *Request, g *cluster.GPU) (unit, Code) {
	if !r.AllowsModel(g.Model) {
		return unit{}, CodeModel
	}
	switch r.Kind {
	case workload.WholeGPUs:
		if g.MIG {
			return unit{}, CodeMIGOff
		}
		return unit{milli: 1000}, ""
	case workload.Fraction:
		if g.MIG {
			return unit{}, CodeMIGOff
		}
		return unit{milli: r.Milli}, ""
	case workload.MIGProfile:
		if !g.MIG {
			return unit{}, CodeMIGOff
		}
		p, err := g.Model.Profile(r.Profile)
		if err != nil {
			return unit{}, CodeModel
		}
		return unit{profile: p}, ""
	case workload.MemoryProfile:
		p, milli := r.Resolve(g.Model)
		if g.MIG {
			if p == nil {
				return unit{}, CodeTooSmall
			}
			return unit{profile: p}, ""
		}
		if r.MIGOnly && g.Model.MIG {
			return unit{}, CodeMIGOff
		}
		if milli == 0 {
			return unit{}, CodeTooSmall
		}
		return unit{milli: milli}, ""
	}
	return unit{}, CodeNoGPU
}

// ProfileOn returns the MIG profile r takes on GPU g, or nil when r takes
// no MIG instance there (MIG off, another model, no profile big enough).
func (r *Request) ProfileOn(g *cluster.GPU) *gpu.Profile {
	if !g.MIG {
		return nil
	}
	u, code := need(r, g)
	if code != "" {
		return nil
	}
	return u.profile
}

// hosts reports whether GPU g has room for u right now.
func hosts(g *cluster.GPU, u unit) bool {
	if u.profile == nil {
		return g.Free() >= u.milli
	}
	return len(slicesFor(g, u.profile)) > 0
}

// SlicesFor lists where a new task of profile p can go on g: free
// instances of p first (no reconfiguration), then instances that could be
// created in free space.
func SlicesFor(g *cluster.GPU, p *gpu.Profile) []gpu.Placement { return slicesFor(g, p) }

func slicesFor(g *cluster.GPU, p *gpu.Profile) []gpu.Placement {
	if g.Cordoned() {
		return nil
	}
	var out []gpu.Placement
	for _, s := range g.Slices() {
		if s.Task == "" && s.Profile == p.Name {
			out = append(out, s.Placement)
		}
	}
	if g.FreeComputeSlices() < p.Compute {
		return out
	}
	fits := false
	for _, st := range p.Starts {
		if p.Mask(st)&^g.FreeMemorySlices() == 0 {
			fits = true
			break
		}
	}
	if !fits {
		return out
	}
	more, err := g.Model.FreePlacements(g.Layout(), p.Name)
	if err == nil {
		out = append(out, more...)
	}
	return out
}

// fits is the filter every policy shares: CPU and memory must fit, and the
// GPUs must have room for the demand (the FGD protocol's NodeResourcesFit
// and Open-Gpu-Share filters, extended to MIG and memory profiles).
func fits(n *cluster.Node, r *Request) (bool, Code) {
	if r.CPUMilli > n.CPUFree() {
		return false, CodeCPU
	}
	if r.MemMiB > n.MemFree() {
		return false, CodeMemory
	}
	if r.Kind == workload.NoGPU {
		return true, ""
	}
	if len(n.GPUs) == 0 {
		return false, CodeNoGPU
	}
	want := 1
	if r.Kind == workload.WholeGPUs {
		want = r.Count
	}
	found, why := 0, CodeGPU
	for i := range n.GPUs {
		g := &n.GPUs[i]
		u, code := need(r, g)
		if code != "" {
			why = code
			continue
		}
		why = CodeGPU
		if u.profile != nil {
			why = CodeMIG
		}
		if hosts(g, u) {
			found++
			if found >= want {
				return true, ""
			}
		}
	}
	if found > 0 && why != CodeMIG || why == "" {
		why = CodeGPU
	}
	return false, why
}

// Fit is the shared filter as a pipeline stage.
type Fit struct{}

var _ Filter = Fit{}

func (Fit) Name() string { return "fit" }

func (Fit) Filter(n *cluster.Node, r *Request) (bool, Reason) {
	ok, code := fits(n, r)
	return ok, Reason{Filter: "fit", Code: code}
}

// Explain says in words why r does not fit n, with the numbers.
func Explain(n *cluster.Node, r *Request) string {
	ok, code := fits(n, r)
	switch {
	case ok:
		return "fits"
	case code == CodeCPU:
		return fmt.Sprintf("cpu: asks %dm, %dm free", r.CPUMilli, n.CPUFree())
	case code == CodeMemory:
		return fmt.Sprintf("memory: asks %d MiB, %d MiB free", r.MemMiB, n.MemFree())
	case code == CodeNoGPU:
		return "no GPU on the node"
	case code == CodeModel:
		return fmt.Sprintf("gpu model: node has %s, task allows %v", n.Model().Name, r.Models)
	case code == CodeMIGOff:
		return "gpu: MIG mode does not match the demand"
	case code == CodeTooSmall:
		return fmt.Sprintf("gpu memory: no profile or share of %s holds %d MiB", n.Model().Name, r.PeakMiB)
	}
	return fmt.Sprintf("gpu: asks %s; %d fully free GPUs, %d milli free", r.Task.GPU, n.FullyFreeGPUs(), n.GPUFreeMilli())
}
