package cluster

import (
	"fmt"

	"partita.dev/partita/internal/gpu"
)

// NVLink shapes inside a node.
const (
	LinkNone  = "none"  // PCIe only
	LinkAll   = "all"   // one NVSwitch domain (HGX/DGX boards)
	LinkPairs = "pairs" // NVLink bridges between GPU pairs (0-1, 2-3, …)
)

// NodeSpec describes a node to build: the form nodes take in scenario files
// and traces.
type NodeSpec struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	Labels    map[string]string
	Tier      Tier
	GPUModel  string // any name gpu.Lookup accepts; "" for a CPU-only node
	GPUs      int
	MIG       bool       // MIG mode on for every GPU
	Layout    gpu.Layout // initial MIG instances on every GPU (MIG only)
	NVLink    string     // LinkNone, LinkAll or LinkPairs; "" picks all for MIG-capable models, none otherwise
}

// BuildNode makes a Node from a spec, checking it.
func BuildNode(spec NodeSpec) (*Node, error) {
	if spec.GPUs < 0 {
		return nil, fmt.Errorf("node %s: gpus %d is negative", spec.Name, spec.GPUs)
	}
	if spec.GPUs > 0 && spec.GPUModel == "" {
		return nil, fmt.Errorf("node %s: %d GPUs but no GPU model", spec.Name, spec.GPUs)
	}
	tier, err := ParseTier(string(spec.Tier))
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", spec.Name, err)
	}
	n := &Node{
		Name:      spec.Name,
		CPUMilli:  spec.CPUMilli,
		MemoryMiB: spec.MemoryMiB,
		Labels:    spec.Labels,
		Tier:      tier,
		Topology:  TopologyFromLabels(spec.Labels),
	}
	if spec.GPUs == 0 {
		return n, nil
	}
	model := gpu.Lookup(spec.GPUModel)
	if spec.MIG && !model.MIG {
		return nil, fmt.Errorf("node %s: model %s does not support MIG", spec.Name, model.Name)
	}
	if len(spec.Layout) > 0 {
		if !spec.MIG {
			return nil, fmt.Errorf("node %s: a MIG layout is given but MIG is off", spec.Name)
		}
		if err := model.Validate(spec.Layout); err != nil {
			return nil, fmt.Errorf("node %s: layout: %w", spec.Name, err)
		}
	}
	link := spec.NVLink
	if link == "" {
		link = LinkNone
		if model.MIG {
			link = LinkAll
		}
	}
	n.GPUs = make([]GPU, spec.GPUs)
	for i := range n.GPUs {
		l, err := linkOf(link, i)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", spec.Name, err)
		}
		n.GPUs[i] = GPU{Index: i, Model: model, MIG: spec.MIG, Link: l}
		for _, p := range spec.Layout {
			n.GPUs[i].slices = append(n.GPUs[i].slices, Slice{Placement: p})
		}
	}
	return n, nil
}

func linkOf(shape string, i int) (int, error) {
	switch shape {
	case LinkNone:
		return NoLink, nil
	case LinkAll:
		return 0, nil
	case LinkPairs:
		return i / 2, nil
	}
	return 0, fmt.Errorf("nvlink %q: want none, all or pairs", shape)
}

// Check verifies every invariant of the State; tests call it after random
// operation sequences.
func (s *State) Check() error {
	for _, n := range s.nodes {
		if err := n.check(); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	return nil
}

func (n *Node) check() error {
	var cpu, mem int64
	used := make([]int, len(n.GPUs))
	owner := make(map[gpu.Placement]string)
	for _, a := range n.tasks {
		cpu += a.CPUMilli
		mem += a.MemoryMiB
		for _, g := range a.Grants {
			if g.Slice == nil {
				used[g.GPU] += g.Milli
				continue
			}
			key := *g.Slice
			key.Start += 8 * g.GPU // one key space for all GPUs of the node
			owner[key] = a.Task
		}
	}
	if cpu != n.cpuUsed || mem != n.memUsed {
		return fmt.Errorf("cpu/memory in use %d/%d, tasks add up to %d/%d", n.cpuUsed, n.memUsed, cpu, mem)
	}
	if cpu < 0 || mem < 0 || cpu > n.CPUMilli || mem > n.MemoryMiB {
		return fmt.Errorf("cpu/memory in use %d/%d outside 0..%d/%d", cpu, mem, n.CPUMilli, n.MemoryMiB)
	}
	for i := range n.GPUs {
		if err := n.GPUs[i].check(used[i], owner); err != nil {
			return fmt.Errorf("gpu %d: %w", i, err)
		}
	}
	return nil
}

func (g *GPU) check(used int, owner map[gpu.Placement]string) error {
	if used != g.used || g.used < 0 || g.used > 1000 {
		return fmt.Errorf("used %d milli, tasks hold %d", g.used, used)
	}
	if g.MIG && g.used != 0 {
		return fmt.Errorf("MIG GPU holds %d milli outside instances", g.used)
	}
	if err := g.Model.Validate(g.Layout()); len(g.slices) > 0 && err != nil {
		return err
	}
	for _, s := range g.slices {
		key := s.Placement
		key.Start += 8 * g.Index
		if owner[key] != s.Task {
			return fmt.Errorf("instance %s held by %q, tasks say %q", s.Placement, s.Task, owner[key])
		}
		delete(owner, key)
	}
	for key, t := range owner {
		if key.Start/8 == g.Index {
			return fmt.Errorf("task %s holds a missing instance %s", t, key)
		}
	}
	return nil
}
