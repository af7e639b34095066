package scenario

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/profiles"
	"partita.dev/partita/internal/workload"
)

// converter turns the raw file into a Scenario: it parses the names that
// refer to other tables (GPU models, tiers, classes, profiles), applies
// defaults, and reports required fields that are missing. Ranges and
// cross-references are Validate's job, so that a Scenario built in code is
// checked the same way.
type converter struct {
	s  *Scenario
	ix *index
}

func convert(raw *rawScenario, file string, ix *index) (*Scenario, error) {
	s := &Scenario{File: file, Name: raw.Name, Duration: raw.Duration.d, Seed: int64(raw.Seed), ProductionReserveGPUs: int(raw.Reserve), lines: ix.lines}
	c := &converter{s: s, ix: ix}
	if !c.has("name") {
		s.Name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	}
	if !c.has("seed") {
		s.Seed = 1
	}
	if !raw.Duration.set {
		return nil, c.missing("duration", "the simulated horizon, such as 168h")
	}
	for i := range raw.Nodes {
		g, err := c.nodeGroup(fmt.Sprintf("nodes[%d]", i), &raw.Nodes[i])
		if err != nil {
			return nil, err
		}
		s.NodeGroups = append(s.NodeGroups, g)
	}
	for i := range raw.Teams {
		t, err := c.team(fmt.Sprintf("teams[%d]", i), &raw.Teams[i])
		if err != nil {
			return nil, err
		}
		s.Teams = append(s.Teams, t)
	}
	for i := range raw.Workloads {
		w, err := c.workload(fmt.Sprintf("workloads[%d]", i), &raw.Workloads[i])
		if err != nil {
			return nil, err
		}
		s.Workloads = append(s.Workloads, w)
	}
	return s, nil
}

func (c *converter) has(path string) bool {
	_, ok := c.ix.lines[path]
	return ok
}

func (c *converter) missing(path, what string) *Error {
	return c.s.errorf(path, "missing: %s", what)
}

func (c *converter) nodeGroup(path string, r *rawNodeGroup) (NodeGroup, error) {
	g := NodeGroup{
		Group: r.Group, Count: int(r.Count), GPUs: int(r.GPUs), MIG: r.MIG,
		CPUMilli: r.CPU.milli, MemoryMiB: r.Memory.mib,
		Leaves: r.Leaves, Spine: r.Spine, Block: r.Block, NVLink: r.NVLink,
	}
	if !c.has(path + ".count") {
		g.Count = 1
	}
	switch {
	case r.GPU == "":
		return g, c.missing(path+".gpu", "a GPU model such as H100-80GB")
	case !c.has(path + ".gpus"):
		return g, c.missing(path+".gpus", "GPUs per node, such as 8")
	case !r.CPU.set:
		return g, c.missing(path+".cpu", "CPU cores per node, such as 192")
	case !r.Memory.set:
		return g, c.missing(path+".memory", "host memory per node, such as 2Ti")
	}
	m := gpu.Lookup(r.GPU)
	if !m.Known {
		return g, c.s.errorf(path+".gpu", "unknown GPU model %q (known: %s)", r.GPU, strings.Join(knownModels(), ", "))
	}
	g.GPU = m.Name
	tier, err := cluster.ParseTier(r.Tier)
	if err != nil {
		return g, c.s.errorf(path+".tier", "%v", err)
	}
	g.Tier = tier
	return g, nil
}

func knownModels() []string {
	var names []string
	for _, m := range gpu.Catalog() {
		if m.MemoryMiB > 0 {
			names = append(names, m.Name)
		}
	}
	return names
}

func (c *converter) team(path string, r *rawTeam) (Team, error) {
	t := Team{Name: r.Name, GuaranteedGPUs: int(r.GuaranteedGPUs), BurstGPUs: int(r.BurstGPUs), Weight: r.Weight}
	if !c.has(path + ".burst_gpus") {
		t.BurstGPUs = c.s.GPUs()
	}
	if !c.has(path + ".weight") {
		t.Weight = 1
	}
	if !c.has(path + ".classes") {
		t.Classes = workload.Classes()
	}
	for i, name := range r.Classes {
		class, err := workload.ParseClass(name)
		if err != nil {
			return t, c.s.errorf(fmt.Sprintf("%s.classes[%d]", path, i), "%v", err)
		}
		t.Classes = append(t.Classes, class)
	}
	return t, nil
}

func (c *converter) workload(path string, r *rawWorkload) (Workload, error) {
	w := Workload{
		Name: r.Name, Team: r.Team, Replicas: int(r.Replicas), CheckpointEvery: r.CheckpointEvery.d,
		Gang: Gang{Weights: r.Gang.Weights},
	}
	for _, size := range r.Gang.Sizes {
		w.Gang.Sizes = append(w.Gang.Sizes, int(size))
	}
	switch {
	case r.Team == "":
		return w, c.missing(path+".team", "the team that owns the workload")
	case r.Class == "":
		return w, c.missing(path+".class", "production, batch or best-effort")
	case !c.has(path + ".arrival"):
		return w, c.missing(path+".arrival", "how jobs arrive: {process: poisson, rate_per_hour: …}, trace or fixed")
	}
	class, err := workload.ParseClass(r.Class)
	if err != nil {
		return w, c.s.errorf(path+".class", "%v", err)
	}
	w.Class = class
	if w.Mix, err = c.mix(path, r); err != nil {
		return w, err
	}
	if w.Arrival, err = c.arrival(path+".arrival", &r.Arrival); err != nil {
		return w, err
	}
	w.Duration = Dist{Dist: r.Duration.Dist, Mean: r.Duration.Mean.d, Sigma: r.Duration.Sigma,
		Value: r.Duration.Value.d, Min: r.Duration.Min.d, Max: r.Duration.Max.d}
	switch w.Kind() {
	case profiles.Inference:
		if !c.has(path + ".replicas") {
			w.Replicas = 1
		}
	case profiles.Training:
		if !c.has(path + ".gang") {
			w.Gang = Gang{Sizes: []int{1}}
		}
		if len(w.Gang.Weights) == 0 && len(w.Gang.Sizes) > 0 && !c.has(path+".gang.weights") {
			w.Gang.Weights = slices.Repeat([]float64{1}, len(w.Gang.Sizes))
		}
	}
	return w, nil
}

// mix reads `profile: x` or `mix: {x: weight, …}`, in name order so that
// the map's order in the file does not matter.
func (c *converter) mix(path string, r *rawWorkload) ([]Weighted, error) {
	switch {
	case r.Profile != "" && c.has(path+".mix"):
		return nil, c.s.errorf(path+".mix", "give profile or mix, not both")
	case r.Profile != "":
		p, err := profiles.Lookup(r.Profile)
		if err != nil {
			return nil, c.s.errorf(path+".profile", "%v", err)
		}
		return []Weighted{{Profile: p, Weight: 1}}, nil
	case len(r.Mix) == 0:
		return nil, c.missing(path+".profile", "a profile, or a mix of profiles with weights")
	}
	names := make([]string, 0, len(r.Mix))
	for name := range r.Mix {
		names = append(names, name)
	}
	slices.Sort(names)
	mix := make([]Weighted, 0, len(names))
	for _, name := range names {
		p, err := profiles.Lookup(name)
		if err != nil {
			return nil, c.s.errorf(path+".mix."+name, "%v", err)
		}
		mix = append(mix, Weighted{Profile: p, Weight: r.Mix[name]})
	}
	return mix, nil
}

func (c *converter) arrival(path string, r *rawArrival) (Process, error) {
	a := Process{Process: r.Process, RatePerHour: r.RatePerHour, File: r.File, TimeScale: r.TimeScale}
	for _, at := range r.At {
		a.At = append(a.At, at.d)
	}
	if r.Process == "" {
		return a, c.missing(path+".process", "poisson, trace or fixed")
	}
	if r.Process == Trace {
		if !c.has(path + ".time_scale") {
			a.TimeScale = 1
		}
		if a.File != "" && !filepath.IsAbs(a.File) {
			a.File = filepath.Join(filepath.Dir(c.s.File), a.File)
		}
	}
	return a, nil
}
