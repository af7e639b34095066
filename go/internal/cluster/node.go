// Package cluster holds the state of a GPU cluster: nodes, their GPUs and
// MIG instances, what is allocated where, and the topology that training
// gangs care about.
//
// A State is changed only through Allocate, Release and the MIG methods,
// which keep its invariants: no GPU or MIG instance is over-allocated, CPU
// and memory in use never exceed a node's capacity or go negative, every
// MIG layout is valid. Clone is cheap (copy on write per node), so the
// engine can try a plan on a copy and throw it away.
package cluster

import (
	"fmt"
	"strings"
	"sync/atomic"

	"partita.dev/partita/internal/gpu"
)

// Tier is how capacity is bought; it decides price and whether it can be
// taken back (spot).
type Tier string

const (
	Reserved Tier = "reserved"
	OnDemand Tier = "on-demand"
	Spot     Tier = "spot"
)

// ParseTier accepts the tier names; "" means reserved, the default for
// owned hardware.
func ParseTier(s string) (Tier, error) {
	switch Tier(s) {
	case "", Reserved:
		return Reserved, nil
	case OnDemand, Spot:
		return Tier(s), nil
	}
	return "", fmt.Errorf("unknown capacity tier %q (known: reserved, on-demand, spot)", s)
}

// Labels that place a node in the network. Training gangs prefer nodes
// under one leaf switch, then one spine, then one block.
const (
	LabelBlock = "partita.dev/network-block"
	LabelSpine = "partita.dev/network-spine"
	LabelLeaf  = "partita.dev/network-leaf"
)

// Topology is where a node sits in the network.
type Topology struct {
	Block, Spine, Leaf string
}

// TopologyFromLabels reads the network position from a node's labels.
func TopologyFromLabels(labels map[string]string) Topology {
	return Topology{Block: labels[LabelBlock], Spine: labels[LabelSpine], Leaf: labels[LabelLeaf]}
}

// NoLink marks a GPU that reaches its peers only over PCIe.
const NoLink = -1

// GPU is one physical GPU of a node. Without MIG it is shared in
// thousandths (milli); with MIG it is split into instances.
type GPU struct {
	Index int
	Model *gpu.Model
	MIG   bool // MIG mode is on: only MIG instances can be allocated
	// Link is the NVLink/NVSwitch domain inside the node: GPUs with the same
	// Link talk over NVLink. NoLink for PCIe-only GPUs.
	Link int

	// Cordoned GPUs take no new work: a MIG change is in flight, or the
	// GPU is being drained. What runs on them keeps running.
	cordoned bool

	used    int    // milli held, without MIG
	holders []Hold // who holds those milli
	slices  []Slice
	memMask uint8 // memory slices taken by instances
	compute int   // compute slices taken by instances
}

// Hold is a task's share of a non-MIG GPU.
type Hold struct {
	Task  string
	Milli int
}

// Slice is a MIG instance and the task on it ("" when free).
type Slice struct {
	gpu.Placement
	Task string
}

// Free returns the milli left on a non-MIG GPU; a MIG GPU or a cordoned
// GPU has none to give as a share or a whole GPU.
func (g *GPU) Free() int {
	if g.MIG || g.cordoned {
		return 0
	}
	return 1000 - g.used
}

// Cordoned reports whether the GPU takes no new work.
func (g *GPU) Cordoned() bool { return g.cordoned }

// Used returns the milli held on a non-MIG GPU.
func (g *GPU) Used() int { return g.used }

// Holders lists the tasks sharing a non-MIG GPU. Do not modify.
func (g *GPU) Holders() []Hold { return g.holders }

// Slices lists the MIG instances, free or in use. Do not modify.
func (g *GPU) Slices() []Slice { return g.slices }

// Layout returns the current MIG layout.
func (g *GPU) Layout() gpu.Layout {
	return g.AppendLayout(make(gpu.Layout, 0, len(g.slices)))
}

// AppendLayout appends g's instances to l and returns it: Layout into a
// buffer the caller reuses (a busy week listed layouts by the million,
// each thrown away at once).
func (g *GPU) AppendLayout(l gpu.Layout) gpu.Layout {
	for _, s := range g.slices {
		l = append(l, s.Placement)
	}
	return l
}

// Idle reports whether nothing runs on the GPU.
func (g *GPU) Idle() bool {
	if g.used > 0 {
		return false
	}
	for _, s := range g.slices {
		if s.Task != "" {
			return false
		}
	}
	return true
}

// FreeMemorySlices and FreeComputeSlices tell how much room a MIG GPU has
// for new instances.
func (g *GPU) FreeMemorySlices() uint8 {
	if g.cordoned {
		return 0
	}
	return ^g.memMask
}
func (g *GPU) FreeComputeSlices() int {
	if g.cordoned {
		return 0
	}
	return 7 - g.compute
}

// Node is one machine. Its exported fields are fixed facts; what is in use
// changes only through State.
type Node struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	Labels    map[string]string
	Tier      Tier
	Topology  Topology
	// Rank breaks ties between equally good nodes: lower wins, and among
	// equal ranks the earlier node. Worlds may set it (the simulator does,
	// from a seeded permutation, as the FGD protocol does); left at 0 it
	// makes ties go by position.
	Rank int
	GPUs []GPU

	cpuUsed int64
	memUsed int64
	tasks   []Assignment
	gen     uint64
}

// generation numbers every change to any node in the process, so a cache
// keyed by Gen can never confuse two different states, even across clones.
var generation atomic.Uint64

func (n *Node) touch() { n.gen = generation.Add(1) }

// Gen changes whenever the node's allocations or layout change.
func (n *Node) Gen() uint64 { return n.gen }

func (n *Node) CPUFree() int64 { return n.CPUMilli - n.cpuUsed }
func (n *Node) MemFree() int64 { return n.MemoryMiB - n.memUsed }
func (n *Node) CPUUsed() int64 { return n.cpuUsed }
func (n *Node) MemUsed() int64 { return n.memUsed }

// Tasks lists what runs on the node. Do not modify.
func (n *Node) Tasks() []Assignment { return n.tasks }

// Task returns the assignment of the named task on this node.
func (n *Node) Task(name string) (Assignment, bool) {
	for _, a := range n.tasks {
		if a.Task == name {
			return a, true
		}
	}
	return Assignment{}, false
}

// GPUFreeMilli sums the milli left on the node's non-MIG GPUs.
func (n *Node) GPUFreeMilli() int {
	total := 0
	for i := range n.GPUs {
		total += n.GPUs[i].Free()
	}
	return total
}

// FullyFreeGPUs counts non-MIG, uncordoned GPUs with nothing on them.
func (n *Node) FullyFreeGPUs() int {
	c := 0
	for i := range n.GPUs {
		if !n.GPUs[i].MIG && !n.GPUs[i].cordoned && n.GPUs[i].used == 0 {
			c++
		}
	}
	return c
}

// Model returns the model of the node's GPUs (nodes are homogeneous in
// practice; the first GPU decides), or nil for a CPU-only node.
func (n *Node) Model() *gpu.Model {
	if len(n.GPUs) == 0 {
		return nil
	}
	return n.GPUs[0].Model
}

func (n *Node) clone() *Node {
	c := *n
	c.GPUs = make([]GPU, len(n.GPUs))
	// The GPUs' holders and instances are copied into one array of each
	// for the node, each GPU's part capped so that growing it reallocates
	// instead of overwriting the next: a trial placement clones nodes by
	// the million, and two allocations per GPU were most of the cost.
	var nh, ns int
	for i := range n.GPUs {
		nh += len(n.GPUs[i].holders)
		ns += len(n.GPUs[i].slices)
	}
	holders, slices := make([]Hold, 0, nh), make([]Slice, 0, ns)
	for i := range n.GPUs {
		g := &n.GPUs[i]
		c.GPUs[i] = *g
		c.GPUs[i].holders, c.GPUs[i].slices = nil, nil
		if len(g.holders) > 0 {
			k := len(holders)
			holders = append(holders, g.holders...)
			c.GPUs[i].holders = holders[k:len(holders):len(holders)]
		}
		if len(g.slices) > 0 {
			k := len(slices)
			slices = append(slices, g.slices...)
			c.GPUs[i].slices = slices[k:len(slices):len(slices)]
		}
	}
	c.tasks = append([]Assignment(nil), n.tasks...)
	return &c
}

// Describe writes the node's GPUs and what runs on them, one line per GPU:
// the canonical text form tests compare and the demo prints.
func (n *Node) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s cpu %d/%dm mem %d/%d MiB\n", n.Name, n.cpuUsed, n.CPUMilli, n.memUsed, n.MemoryMiB)
	for i := range n.GPUs {
		g := &n.GPUs[i]
		fmt.Fprintf(&b, "  gpu%d %s", g.Index, g.Model.Name)
		if g.cordoned {
			b.WriteString(" cordoned")
		}
		if g.MIG {
			b.WriteString(" mig")
			for _, s := range g.slices {
				task := s.Task
				if task == "" {
					task = "-"
				}
				fmt.Fprintf(&b, " [%s %s]", s.Placement, task)
			}
		} else {
			fmt.Fprintf(&b, " %d/1000", g.used)
			for _, h := range g.holders {
				fmt.Fprintf(&b, " [%s %d]", h.Task, h.Milli)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
