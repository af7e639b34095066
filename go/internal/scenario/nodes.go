package scenario

import (
	"fmt"
	"math"
	"slices"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/profiles"
)

// Nodes builds the cluster: each group's nodes named group-0, group-1, …,
// spread round-robin over the group's leaf switches.
func (s *Scenario) Nodes() ([]*cluster.Node, error) {
	var nodes []*cluster.Node
	for i := range s.NodeGroups {
		g := &s.NodeGroups[i]
		for j := range g.Count {
			n, err := cluster.BuildNode(g.spec(j))
			if err != nil {
				return nil, s.errorf(fmt.Sprintf("nodes[%d]", i), "%v", err)
			}
			nodes = append(nodes, n)
		}
	}
	return nodes, nil
}

// spec is the j-th node of the group.
func (g *NodeGroup) spec(j int) cluster.NodeSpec {
	labels := map[string]string{}
	if len(g.Leaves) > 0 {
		labels[cluster.LabelLeaf] = g.Leaves[j%len(g.Leaves)]
	}
	if g.Spine != "" {
		labels[cluster.LabelSpine] = g.Spine
	}
	if g.Block != "" {
		labels[cluster.LabelBlock] = g.Block
	}
	return cluster.NodeSpec{
		Name:      fmt.Sprintf("%s-%d", g.Group, j),
		CPUMilli:  g.CPUMilli,
		MemoryMiB: g.MemoryMiB,
		Labels:    labels,
		Tier:      g.Tier,
		GPUModel:  g.GPU,
		GPUs:      g.GPUs,
		MIG:       g.MIG,
		NVLink:    g.NVLink,
	}
}

// needMiB is the GPU memory a task of p needs per GPU, with the headroom
// the engine adds when it picks a MIG profile.
func needMiB(p profiles.Profile) float64 {
	return float64(p.PeakMemoryMiB) * (1 + gpu.DefaultHeadroom)
}

// holds reports whether one node of the group can run a task of p.
func (g *NodeGroup) holds(p profiles.Profile) bool {
	m := gpu.Lookup(g.GPU)
	if needMiB(p) > float64(m.MemoryMiB) {
		return false
	}
	return !p.Whole() || g.GPUs >= max(p.GPUs, 1)
}

// holders lists the groups that can run a task of p.
func (s *Scenario) holders(p profiles.Profile) []*NodeGroup {
	var out []*NodeGroup
	for i := range s.NodeGroups {
		if s.NodeGroups[i].holds(p) {
			out = append(out, &s.NodeGroups[i])
		}
	}
	return out
}

// capacityFor is how many GPUs of the cluster whole tasks of p can use
// at once: per node, whole multiples of p.GPUs.
func (s *Scenario) capacityFor(p profiles.Profile) int {
	per := max(p.GPUs, 1)
	total := 0
	for _, g := range s.holders(p) {
		total += g.Count * (g.GPUs / per * per)
	}
	return total
}

// modelsFor lists the GPU models a task of p may run on: nil when every
// model in the cluster can hold it, so that demands stay unconstrained
// unless the cluster mixes GPUs too small for the profile with larger ones.
func (s *Scenario) modelsFor(p profiles.Profile) []string {
	var all, ok []string
	for i := range s.NodeGroups {
		g := &s.NodeGroups[i]
		if !slices.Contains(all, g.GPU) {
			all = append(all, g.GPU)
		}
		if g.holds(p) && !slices.Contains(ok, g.GPU) {
			ok = append(ok, g.GPU)
		}
	}
	if len(ok) == len(all) {
		return nil
	}
	return ok
}

// share is the part of one GPU of g a task of p takes, in GPU-equivalents:
// for a MIG slice the larger of its compute share (slices of 7) and memory
// share (slices of 8), because either may be what stops another slice
// fitting; without MIG the larger of its compute and memory shares.
func (g *NodeGroup) share(p profiles.Profile) float64 {
	if p.Whole() {
		return float64(max(p.GPUs, 1))
	}
	m := gpu.Lookup(g.GPU)
	if g.MIG {
		if mp, err := m.ProfileFor(p.PeakMemoryMiB, p.Compute, gpu.DefaultHeadroom); err == nil {
			return max(mp.ComputeShare(), float64(mp.Memory)/gpu.MemorySlices)
		}
	}
	return math.Min(1, max(p.Compute, needMiB(p)/float64(m.MemoryMiB)))
}

// gpuEquivalents is the smallest share of the cluster's GPUs a task of p
// can take: what it costs where it fits best.
func (s *Scenario) gpuEquivalents(p profiles.Profile) float64 {
	best := math.Inf(1)
	for _, g := range s.holders(p) {
		best = min(best, g.share(p))
	}
	if math.IsInf(best, 1) {
		return 0
	}
	return best
}
