package scenario

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/profiles"
	"partita.dev/partita/internal/workload"
)

// Limits that keep a scenario, and what Nodes and Jobs build from it, to a
// size a simulator can hold. They are far above any real cluster or week.
const (
	maxHorizon     = 10 * 365 * 24 * time.Hour
	maxNodes       = 100_000
	maxGPUsPerNode = 16
	maxReplicas    = 1_000
	maxGangSize    = 4_096
	maxArrivals    = 1_000_000 // expected jobs per workload over the horizon
	maxSigma       = 10
)

var (
	nameRE  = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$`)
	labelRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
)

// Validate checks the whole scenario: ranges, names, references between
// sections, and that the cluster can run every workload. Parse calls it; a
// Scenario built or changed in code should be checked with it too.
func (s *Scenario) Validate() error {
	switch {
	case s.Name == "":
		return s.errorf("name", "missing")
	case s.Duration <= 0 || s.Duration > maxHorizon:
		return s.errorf("duration", "%s must be more than 0 and at most %s", human(s.Duration), human(maxHorizon))
	}
	if err := s.validateNodes(); err != nil {
		return err
	}
	if err := s.validateTeams(); err != nil {
		return err
	}
	if r, total := s.ProductionReserveGPUs, s.GPUs(); r < 0 || r > total {
		return s.errorf("production_reserve_gpus", "%d must be between 0 and the cluster's %d GPUs", r, total)
	}
	names := map[string]bool{}
	for i := range s.Workloads {
		w := &s.Workloads[i]
		path := fmt.Sprintf("workloads[%d]", i)
		if err := s.checkName(path+".name", w.Name, names); err != nil {
			return err
		}
		if err := s.validateWorkload(path, w); err != nil {
			return err
		}
	}
	return nil
}

func (s *Scenario) checkName(field, name string, seen map[string]bool) error {
	switch {
	case name == "":
		return s.errorf(field, "missing")
	case !nameRE.MatchString(name):
		return s.errorf(field, "%q must be lowercase letters, digits and '-', start with a letter, "+
			"not end with '-', and be at most 40 long", name)
	case seen[name]:
		return s.errorf(field, "%q is used twice", name)
	}
	seen[name] = true
	return nil
}

func (s *Scenario) checkLabel(field, value string) error {
	if !labelRE.MatchString(value) {
		return s.errorf(field, "%q is not a valid label value (letters, digits, '-', '_', '.'; at most 63)", value)
	}
	return nil
}

func (s *Scenario) validateNodes() error {
	if len(s.NodeGroups) == 0 {
		return s.errorf("nodes", "missing: at least one node group")
	}
	names := map[string]bool{}
	total := 0
	for i := range s.NodeGroups {
		g := &s.NodeGroups[i]
		path := fmt.Sprintf("nodes[%d]", i)
		if err := s.checkName(path+".group", g.Group, names); err != nil {
			return err
		}
		if err := s.validateGroup(path, g); err != nil {
			return err
		}
		if total += g.Count; total > maxNodes {
			return s.errorf(path+".count", "brings the cluster to %d nodes, more than %d", total, maxNodes)
		}
	}
	return nil
}

func (s *Scenario) validateGroup(path string, g *NodeGroup) error {
	m := gpu.Lookup(g.GPU)
	switch {
	case g.Count < 1 || g.Count > maxNodes:
		return s.errorf(path+".count", "%d must be ≥ 1 and ≤ %d", g.Count, maxNodes)
	case !m.Known || m.MemoryMiB <= 0:
		return s.errorf(path+".gpu", "unknown GPU model %q (known: %s)", g.GPU, strings.Join(knownModels(), ", "))
	case g.GPUs < 1:
		return s.errorf(path+".gpus", "%d must be ≥ 1", g.GPUs)
	case g.GPUs > maxGPUsPerNode:
		return s.errorf(path+".gpus", "%d must be ≤ %d", g.GPUs, maxGPUsPerNode)
	case g.MIG && !m.MIG:
		return s.errorf(path+".mig", "%s does not support MIG", m.Name)
	case g.CPUMilli <= 0:
		return s.errorf(path+".cpu", "%dm must be more than 0", g.CPUMilli)
	case g.MemoryMiB <= 0:
		return s.errorf(path+".memory", "%d MiB must be more than 0", g.MemoryMiB)
	}
	if _, err := cluster.ParseTier(string(g.Tier)); err != nil {
		return s.errorf(path+".tier", "%v", err)
	}
	switch g.NVLink {
	case "", cluster.LinkNone, cluster.LinkAll, cluster.LinkPairs:
	default:
		return s.errorf(path+".nvlink", "%q must be none, all or pairs", g.NVLink)
	}
	for j, leaf := range g.Leaves {
		field := fmt.Sprintf("%s.leaves[%d]", path, j)
		if err := s.checkLabel(field, leaf); err != nil {
			return err
		}
		if slices.Index(g.Leaves, leaf) < j {
			return s.errorf(field, "%q is listed twice", leaf)
		}
	}
	for _, l := range []struct{ field, value string }{{path + ".spine", g.Spine}, {path + ".block", g.Block}} {
		if l.value != "" {
			if err := s.checkLabel(l.field, l.value); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Scenario) validateTeams() error {
	total := s.GPUs()
	names := map[string]bool{}
	guaranteed := 0
	for i := range s.Teams {
		t := &s.Teams[i]
		path := fmt.Sprintf("teams[%d]", i)
		if err := s.checkName(path+".name", t.Name, names); err != nil {
			return err
		}
		switch {
		case t.GuaranteedGPUs < 0:
			return s.errorf(path+".guaranteed_gpus", "%d must be ≥ 0", t.GuaranteedGPUs)
		case t.GuaranteedGPUs > total:
			return s.errorf(path+".guaranteed_gpus", "%d is more than the cluster's %d GPUs", t.GuaranteedGPUs, total)
		case t.BurstGPUs < t.GuaranteedGPUs:
			return s.errorf(path+".burst_gpus", "%d is below guaranteed_gpus %d", t.BurstGPUs, t.GuaranteedGPUs)
		case t.BurstGPUs > total:
			return s.errorf(path+".burst_gpus", "%d is more than the cluster's %d GPUs", t.BurstGPUs, total)
		case !(t.Weight > 0) || math.IsInf(t.Weight, 1):
			return s.errorf(path+".weight", "%v must be a number more than 0", t.Weight)
		case len(t.Classes) == 0:
			return s.errorf(path+".classes", "empty: allow at least one of production, batch, best-effort")
		}
		for j, c := range t.Classes {
			field := fmt.Sprintf("%s.classes[%d]", path, j)
			if c < workload.BestEffort || c > workload.Production {
				return s.errorf(field, "%v is not a priority class", c)
			}
			if slices.Index(t.Classes, c) < j {
				return s.errorf(field, "%v is listed twice", c)
			}
		}
		guaranteed += t.GuaranteedGPUs
	}
	if guaranteed > total {
		return s.errorf("teams", "guaranteed_gpus add up to %d, more than the cluster's %d GPUs", guaranteed, total)
	}
	return nil
}

func (s *Scenario) team(name string) *Team {
	for i := range s.Teams {
		if s.Teams[i].Name == name {
			return &s.Teams[i]
		}
	}
	return nil
}

func (s *Scenario) teamNames() string {
	names := make([]string, len(s.Teams))
	for i, t := range s.Teams {
		names[i] = t.Name
	}
	if len(names) == 0 {
		return "none are defined"
	}
	return strings.Join(names, ", ")
}

func (s *Scenario) validateWorkload(path string, w *Workload) error {
	t := s.team(w.Team)
	switch {
	case t == nil:
		return s.errorf(path+".team", "%q is not a team (teams: %s)", w.Team, s.teamNames())
	case w.Class < workload.BestEffort || w.Class > workload.Production:
		return s.errorf(path+".class", "%v is not a priority class", w.Class)
	case !slices.Contains(t.Classes, w.Class):
		return s.errorf(path+".class", "team %s may not run %v work (allowed: %s)", t.Name, w.Class, classList(t.Classes))
	}
	if err := s.validateMix(path, w); err != nil {
		return err
	}
	if err := s.validateArrival(path+".arrival", w); err != nil {
		return err
	}
	if err := s.validateDist(path+".duration", w); err != nil {
		return err
	}
	return s.validateShape(path, w)
}

func classList(cs []workload.Class) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.String()
	}
	return strings.Join(names, ", ")
}

// mixField is where the i-th profile of a workload is written in the file.
func (s *Scenario) mixField(path string, w *Workload, i int) string {
	if _, inFile := s.lines[path+".mix"]; !inFile && len(w.Mix) == 1 {
		return path + ".profile"
	}
	return path + ".mix." + w.Mix[i].Profile.Name
}

func (s *Scenario) validateMix(path string, w *Workload) error {
	if len(w.Mix) == 0 {
		return s.errorf(path+".profile", "missing: a profile, or a mix of profiles with weights")
	}
	kind := w.Mix[0].Profile.Kind
	for i, m := range w.Mix {
		field := s.mixField(path, w, i)
		p, err := profiles.Lookup(m.Profile.Name)
		switch {
		case err != nil:
			return s.errorf(field, "%v", err)
		case !(m.Weight > 0) || math.IsInf(m.Weight, 1):
			return s.errorf(field, "weight %v must be a number more than 0", m.Weight)
		case p.Kind != kind:
			return s.errorf(field, "%s is %s but %s is %s; a workload's profiles must be of one kind",
				p.Name, p.Kind, w.Mix[0].Profile.Name, kind)
		}
		if err := s.fits(field, m.Profile); err != nil {
			return err
		}
	}
	return nil
}

// fits checks that some node group can run a task of p.
func (s *Scenario) fits(field string, p profiles.Profile) error {
	if len(s.holders(p)) > 0 {
		return nil
	}
	need := needMiB(p)
	if p.Whole() {
		return s.errorf(field, "%s needs %s with %.0f MiB each (%d MiB + %.0f%% headroom) on one node; no node group has that",
			p.Name, plural(max(p.GPUs, 1), "GPU"), need, p.PeakMemoryMiB, gpu.DefaultHeadroom*100)
	}
	return s.errorf(field, "%s needs a GPU with %.0f MiB (%d MiB + %.0f%% headroom); no node group has one",
		p.Name, need, p.PeakMemoryMiB, gpu.DefaultHeadroom*100)
}

func (s *Scenario) validateArrival(path string, w *Workload) error {
	a := &w.Arrival
	only := func(field, process string) error {
		return s.errorf(path+"."+field, "only for process: %s (this one is %s)", process, a.Process)
	}
	switch {
	case a.Process != Poisson && a.Process != Trace && a.Process != Fixed:
		return s.errorf(path+".process", "unknown process %q (known: poisson, trace, fixed)", a.Process)
	case a.Process != Poisson && a.RatePerHour != 0:
		return only("rate_per_hour", Poisson)
	case a.Process != Trace && a.File != "":
		return only("file", Trace)
	case a.Process != Trace && a.TimeScale != 0:
		return only("time_scale", Trace)
	case a.Process != Fixed && len(a.At) > 0:
		return only("at", Fixed)
	}
	switch a.Process {
	case Poisson:
		if !(a.RatePerHour > 0) || math.IsInf(a.RatePerHour, 1) {
			return s.errorf(path+".rate_per_hour", "%v must be a number more than 0", a.RatePerHour)
		}
		if n := a.RatePerHour * s.Duration.Hours(); n > maxArrivals {
			return s.errorf(path+".rate_per_hour", "%g per hour over %s is %.3g jobs, more than %d", a.RatePerHour, human(s.Duration), n, maxArrivals)
		}
	case Trace:
		if a.File == "" {
			return s.errorf(path+".file", "missing: the Alibaba pod list (CSV) whose creation times give the arrivals")
		}
		if !(a.TimeScale > 0) || math.IsInf(a.TimeScale, 1) {
			return s.errorf(path+".time_scale", "%v must be a number more than 0", a.TimeScale)
		}
	case Fixed:
		if len(a.At) == 0 {
			return s.errorf(path+".at", "missing: the arrival times, such as [0s, 10m]")
		}
		if len(a.At) > maxArrivals {
			return s.errorf(path+".at", "%d times, more than %d", len(a.At), maxArrivals)
		}
		for i, at := range a.At {
			if at < 0 || at >= s.Duration {
				return s.errorf(fmt.Sprintf("%s.at[%d]", path, i), "%s must be ≥ 0 and before the horizon %s", human(at), human(s.Duration))
			}
		}
	}
	return nil
}

func (s *Scenario) validateDist(path string, w *Workload) error {
	d := &w.Duration
	switch {
	case *d == (Dist{}) && w.Arrival.Process == Trace:
		return nil // the trace's own deletion times
	case *d == (Dist{}):
		return s.errorf(path, "missing: a run-time distribution, such as {dist: exponential, mean: 2h}")
	case d.Dist == "":
		return s.errorf(path+".dist", "missing: exponential, lognormal, fixed or uniform")
	}
	want := map[string][]string{
		Exponential: {"mean"}, Lognormal: {"mean", "sigma"}, Constant: {"value"}, Uniform: {"min", "max"},
	}[d.Dist]
	if want == nil {
		return s.errorf(path+".dist", "unknown distribution %q (known: exponential, lognormal, fixed, uniform)", d.Dist)
	}
	set := map[string]bool{"mean": d.Mean != 0, "sigma": d.Sigma != 0, "value": d.Value != 0, "min": d.Min != 0, "max": d.Max != 0}
	for _, f := range []string{"mean", "sigma", "value", "min", "max"} {
		if set[f] && !slices.Contains(want, f) {
			return s.errorf(path+"."+f, "not used by dist: %s (it takes %s)", d.Dist, strings.Join(want, " and "))
		}
	}
	positive := func(field string, v time.Duration) error {
		if v <= 0 || v > maxHorizon {
			return s.errorf(path+"."+field, "%s must be more than 0 and at most %s", human(v), human(maxHorizon))
		}
		return nil
	}
	switch d.Dist {
	case Exponential:
		return positive("mean", d.Mean)
	case Lognormal:
		if !(d.Sigma > 0 && d.Sigma <= maxSigma) {
			return s.errorf(path+".sigma", "%v must be more than 0 and at most %d", d.Sigma, maxSigma)
		}
		return positive("mean", d.Mean)
	case Constant:
		return positive("value", d.Value)
	}
	if d.Min < 0 {
		return s.errorf(path+".min", "%s must be ≥ 0", human(d.Min))
	}
	if err := positive("max", d.Max); err != nil {
		return err
	}
	if d.Max <= d.Min {
		return s.errorf(path+".max", "%s must be more than min %s", human(d.Max), human(d.Min))
	}
	return nil
}

// validateShape checks the fields that depend on the workload's kind:
// replicas for inference; gang and checkpoints for training.
func (s *Scenario) validateShape(path string, w *Workload) error {
	if w.Kind() == profiles.Inference {
		switch {
		case w.Replicas < 1 || w.Replicas > maxReplicas:
			return s.errorf(path+".replicas", "%d must be ≥ 1 and ≤ %d", w.Replicas, maxReplicas)
		case len(w.Gang.Sizes) > 0 || len(w.Gang.Weights) > 0:
			return s.errorf(path+".gang", "only for training workloads; inference runs replicas tasks per job")
		case w.CheckpointEvery != 0:
			return s.errorf(path+".checkpoint_every", "only for training workloads")
		}
		return nil
	}
	switch {
	case w.Replicas != 0:
		return s.errorf(path+".replicas", "only for inference workloads; training runs gang.sizes tasks per job")
	case len(w.Gang.Sizes) == 0:
		return s.errorf(path+".gang.sizes", "missing: tasks per job, such as [8, 16]")
	case len(w.Gang.Weights) != len(w.Gang.Sizes):
		return s.errorf(path+".gang.weights", "%d given for %d sizes; give one weight per size", len(w.Gang.Weights), len(w.Gang.Sizes))
	case w.CheckpointEvery < 0 || w.CheckpointEvery > maxHorizon:
		return s.errorf(path+".checkpoint_every", "%s must be ≥ 0 and at most %s", human(w.CheckpointEvery), human(maxHorizon))
	}
	for i, size := range w.Gang.Sizes {
		field := fmt.Sprintf("%s.gang.sizes[%d]", path, i)
		if size < 1 || size > maxGangSize {
			return s.errorf(field, "%d must be ≥ 1 and ≤ %d", size, maxGangSize)
		}
		for _, m := range w.Mix {
			p := m.Profile
			if have := s.capacityFor(p); size*max(p.GPUs, 1) > have {
				return s.errorf(field, "a gang of %d tasks × %s needs %s; the cluster has %d that can run %s",
					size, plural(max(p.GPUs, 1), "GPU"), plural(size*max(p.GPUs, 1), "GPU"), have, p.Name)
			}
		}
	}
	for i, wt := range w.Gang.Weights {
		if !(wt > 0) || math.IsInf(wt, 1) {
			return s.errorf(fmt.Sprintf("%s.gang.weights[%d]", path, i), "%v must be a number more than 0", wt)
		}
	}
	return nil
}

// human writes a duration without trailing zero units: 24h, 1h30m, 90s.
func human(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// plural writes "1 GPU", "8 GPUs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
