package cluster

import (
	"errors"
	"fmt"

	"partita.dev/partita/internal/gpu"
)

// Grant is one GPU's part of an assignment: a share or whole GPU (Milli,
// without MIG) or one MIG instance (Slice).
type Grant struct {
	GPU   int            `json:"gpu"`
	Milli int            `json:"milli,omitempty"` // 1..1000 on a non-MIG GPU
	Slice *gpu.Placement `json:"slice,omitempty"` // a MIG instance; created if it does not exist yet
}

// Assignment is what one task holds on one node.
type Assignment struct {
	Task      string  `json:"task"`
	Node      string  `json:"node"`
	CPUMilli  int64   `json:"cpu_milli"`
	MemoryMiB int64   `json:"memory_mib"`
	Grants    []Grant `json:"grants,omitempty"`
}

// GPUMilli returns the GPU the assignment holds in milli; a MIG instance
// counts as its compute share of the GPU (3g = 3/7).
func (a Assignment) GPUMilli(n *Node) int {
	total := 0
	for _, g := range a.Grants {
		if g.Slice == nil {
			total += g.Milli
			continue
		}
		if p, err := n.GPUs[g.GPU].Model.Profile(g.Slice.Profile); err == nil {
			total += p.Compute * 1000 / 7
		}
	}
	return total
}

// State is the cluster: its nodes and what runs on them.
type State struct {
	nodes []*Node
	// owned[i] says nodes[i] belongs to this State alone and may be changed
	// in place; a shared node is copied before its first change.
	owned []bool
	index map[string]int // node name -> position; shared between clones, never changed
	set   *NodeSet       // shared between clones, like index
	// version changes on every change of the State, and equal versions
	// mean equal contents (a clone starts with its original's): caches of
	// whole-cluster facts key on it.
	version uint64
}

// Version identifies the State's contents; see the field's comment.
func (s *State) Version() uint64 { return s.version }

// NodeSet identifies a set of nodes and their fixed properties (names,
// CPU, memory, GPU models): clones of a State share it, a State built by
// New gets its own. Caches of facts that only these decide key on it.
type NodeSet struct{ _ byte } // not zero-sized: each one has its own address

// NodeSet returns the State's node set; see the type.
func (s *State) NodeSet() *NodeSet { return s.set }

// ErrNotFound is returned for an unknown node or task.
var ErrNotFound = errors.New("not found")

// New builds a State from nodes, checking that names are unique, GPU indexes
// match positions and MIG layouts are valid. The nodes become the State's.
func New(nodes []*Node) (*State, error) {
	s := &State{nodes: nodes, owned: make([]bool, len(nodes)), index: make(map[string]int, len(nodes)), set: &NodeSet{}}
	for i, n := range nodes {
		if n.Name == "" {
			return nil, fmt.Errorf("node %d: name is empty", i)
		}
		if _, dup := s.index[n.Name]; dup {
			return nil, fmt.Errorf("node %s: name is used twice", n.Name)
		}
		if n.CPUMilli < 0 || n.MemoryMiB < 0 {
			return nil, fmt.Errorf("node %s: negative capacity", n.Name)
		}
		for j := range n.GPUs {
			if err := initGPU(n, j); err != nil {
				return nil, err
			}
		}
		s.index[n.Name] = i
		s.owned[i] = true
		n.touch()
	}
	s.version = generation.Add(1)
	return s, nil
}

func initGPU(n *Node, j int) error {
	g := &n.GPUs[j]
	if g.Index != j {
		return fmt.Errorf("node %s: GPU at position %d has index %d", n.Name, j, g.Index)
	}
	if g.Model == nil {
		return fmt.Errorf("node %s: GPU %d has no model", n.Name, j)
	}
	if g.MIG && !g.Model.MIG {
		return fmt.Errorf("node %s: GPU %d: model %s does not support MIG", n.Name, j, g.Model.Name)
	}
	if len(g.slices) > 0 {
		if err := g.Model.Validate(g.Layout()); err != nil {
			return fmt.Errorf("node %s: GPU %d: %w", n.Name, j, err)
		}
	}
	g.recount()
	return nil
}

// recount derives the memory mask and compute in use from the instances.
func (g *GPU) recount() {
	g.memMask, g.compute = 0, 0
	for _, s := range g.slices {
		p, err := g.Model.Profile(s.Profile)
		if err != nil {
			continue // New validated the layout; cannot happen
		}
		g.memMask |= p.Mask(s.Start)
		g.compute += p.Compute
	}
}

// Clone returns a State that can be changed without touching s. It costs
// one slice copy; nodes are copied only when first changed.
func (s *State) Clone() *State {
	c := s.Scratch()
	// s no longer owns its nodes either: both sides copy before writing.
	clear(s.owned)
	return c
}

// Scratch is Clone for a copy used only while s does not change, such as a
// scheduling cycle's plan over its world's state: s keeps its nodes, so
// its own next writes copy none, and the copy still copies a node before
// its first write to it. A change to s while the copy is in use shows
// through it. (Each cycle's Clone took the world's nodes from it, and the
// world's next start or release on each node copied it: over a busy
// week, more than a tenth of all bytes allocated.)
func (s *State) Scratch() *State {
	return &State{
		nodes:   append([]*Node(nil), s.nodes...),
		owned:   make([]bool, len(s.nodes)),
		index:   s.index,
		set:     s.set,
		version: s.version,
	}
}

// Len returns the number of nodes.
func (s *State) Len() int { return len(s.nodes) }

// Node returns node i for reading. Do not modify it.
func (s *State) Node(i int) *Node { return s.nodes[i] }

// Lookup returns the position of the named node.
func (s *State) Lookup(name string) (int, bool) {
	i, ok := s.index[name]
	return i, ok
}

// NodeByName returns the named node for reading, or nil.
func (s *State) NodeByName(name string) *Node {
	if i, ok := s.index[name]; ok {
		return s.nodes[i]
	}
	return nil
}

// mutable returns node i, copied first if another State shares it.
func (s *State) mutable(i int) *Node {
	if !s.owned[i] {
		s.nodes[i] = s.nodes[i].clone()
		s.owned[i] = true
	}
	s.version = generation.Add(1)
	return s.nodes[i]
}

func (s *State) find(name string) (int, error) {
	i, ok := s.index[name]
	if !ok {
		return 0, fmt.Errorf("node %q: %w", name, ErrNotFound)
	}
	return i, nil
}
