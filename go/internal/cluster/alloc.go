package cluster

import (
	"fmt"

	"partita.dev/partita/internal/gpu"
)

// Allocate gives a task what the assignment names. Everything is checked
// before anything changes: on error the State is as it was.
func (s *State) Allocate(a Assignment) error {
	i, err := s.find(a.Node)
	if err != nil {
		return fmt.Errorf("allocate %s: %w", a.Task, err)
	}
	if err := check(s.nodes[i], a); err != nil {
		return fmt.Errorf("allocate %s on %s: %w", a.Task, a.Node, err)
	}
	n := s.mutable(i)
	n.cpuUsed += a.CPUMilli
	n.memUsed += a.MemoryMiB
	for _, g := range a.Grants {
		d := &n.GPUs[g.GPU]
		if g.Slice == nil {
			d.used += g.Milli
			d.holders = append(d.holders, Hold{Task: a.Task, Milli: g.Milli})
			continue
		}
		if k := d.sliceAt(*g.Slice); k >= 0 {
			d.slices[k].Task = a.Task
			continue
		}
		d.slices = append(d.slices, Slice{Placement: *g.Slice, Task: a.Task})
		d.recount()
	}
	n.tasks = append(n.tasks, a.copy())
	n.touch()
	return nil
}

// copy returns a deep copy: the State must not share the caller's grants
// or placements, which the caller may reuse.
func (a Assignment) copy() Assignment {
	grants := make([]Grant, len(a.Grants))
	for i, g := range a.Grants {
		if g.Slice != nil {
			p := *g.Slice
			g.Slice = &p
		}
		grants[i] = g
	}
	a.Grants = grants
	return a
}

// check says why an assignment does not fit a node, or nil.
func check(n *Node, a Assignment) error {
	if a.Task == "" {
		return fmt.Errorf("task name is empty")
	}
	if _, dup := n.Task(a.Task); dup {
		return fmt.Errorf("task already runs here")
	}
	if a.CPUMilli < 0 || a.MemoryMiB < 0 {
		return fmt.Errorf("negative cpu or memory request")
	}
	if a.CPUMilli > n.CPUFree() {
		return fmt.Errorf("cpu: asks %dm, %dm free of %dm", a.CPUMilli, n.CPUFree(), n.CPUMilli)
	}
	if a.MemoryMiB > n.MemFree() {
		return fmt.Errorf("memory: asks %d MiB, %d MiB free of %d MiB", a.MemoryMiB, n.MemFree(), n.MemoryMiB)
	}
	seen := make(map[int]bool, len(a.Grants))
	for _, g := range a.Grants {
		if g.GPU < 0 || g.GPU >= len(n.GPUs) {
			return fmt.Errorf("gpu %d: node has %d GPUs", g.GPU, len(n.GPUs))
		}
		if seen[g.GPU] {
			return fmt.Errorf("gpu %d: granted twice to one task", g.GPU)
		}
		seen[g.GPU] = true
		if err := checkGrant(&n.GPUs[g.GPU], g); err != nil {
			return fmt.Errorf("gpu %d: %w", g.GPU, err)
		}
	}
	return nil
}

func checkGrant(d *GPU, g Grant) error {
	if d.cordoned {
		return fmt.Errorf("cordoned: takes no new work")
	}
	if g.Slice == nil {
		if d.MIG {
			return fmt.Errorf("MIG is on: ask for an instance, not %d milli", g.Milli)
		}
		if g.Milli < 1 || g.Milli > 1000 {
			return fmt.Errorf("share %d milli is not between 1 and 1000", g.Milli)
		}
		if g.Milli > d.Free() {
			return fmt.Errorf("asks %d milli, %d free", g.Milli, d.Free())
		}
		return nil
	}
	if !d.MIG {
		return fmt.Errorf("MIG is off: no instance %s", g.Slice)
	}
	if k := d.sliceAt(*g.Slice); k >= 0 {
		if d.slices[k].Task != "" {
			return fmt.Errorf("instance %s is held by %s", g.Slice, d.slices[k].Task)
		}
		return nil
	}
	p, err := d.Model.Profile(g.Slice.Profile)
	if err != nil {
		return err
	}
	if !p.CanStart(g.Slice.Start) {
		return fmt.Errorf("instance %s: start not allowed (allowed: %v)", g.Slice, p.Starts)
	}
	if p.Mask(g.Slice.Start)&d.memMask != 0 || d.compute+p.Compute > 7 {
		return fmt.Errorf("instance %s does not fit beside %s", g.Slice, d.Layout())
	}
	// Per-profile limits and the single +me are rules the geometry above
	// does not cover; Validate knows them all.
	return d.Model.Validate(append(d.Layout(), *g.Slice))
}

func (g *GPU) sliceAt(p gpu.Placement) int {
	for k, s := range g.slices {
		if s.Placement == p {
			return k
		}
	}
	return -1
}

// Release frees what a task holds on a node and returns it. MIG instances
// stay in place, free, as they do on a real GPU.
func (s *State) Release(node, task string) (Assignment, error) {
	i, err := s.find(node)
	if err != nil {
		return Assignment{}, fmt.Errorf("release %s: %w", task, err)
	}
	k := -1
	for j, a := range s.nodes[i].tasks {
		if a.Task == task {
			k = j
			break
		}
	}
	if k < 0 {
		return Assignment{}, fmt.Errorf("release: task %q on node %s: %w", task, node, ErrNotFound)
	}
	n := s.mutable(i)
	a := n.tasks[k]
	n.tasks = append(n.tasks[:k], n.tasks[k+1:]...)
	n.cpuUsed -= a.CPUMilli
	n.memUsed -= a.MemoryMiB
	for _, g := range a.Grants {
		d := &n.GPUs[g.GPU]
		if g.Slice == nil {
			d.used -= g.Milli
			d.holders = removeHold(d.holders, task)
			continue
		}
		if j := d.sliceAt(*g.Slice); j >= 0 {
			d.slices[j].Task = ""
		}
	}
	n.touch()
	return a, nil
}

func removeHold(hs []Hold, task string) []Hold {
	for j, h := range hs {
		if h.Task == task {
			return append(hs[:j], hs[j+1:]...)
		}
	}
	return hs
}

// SetLayout replaces a MIG GPU's free instances with layout. Instances in
// use must appear in layout at the same place: reconfiguring never touches
// running work.
func (s *State) SetLayout(node string, index int, layout gpu.Layout) error {
	i, err := s.find(node)
	if err != nil {
		return err
	}
	n := s.nodes[i]
	if index < 0 || index >= len(n.GPUs) {
		return fmt.Errorf("node %s: no GPU %d", node, index)
	}
	d := &n.GPUs[index]
	if !d.MIG {
		return fmt.Errorf("node %s: GPU %d: MIG is off", node, index)
	}
	if err := d.Model.Validate(layout); err != nil {
		return fmt.Errorf("node %s: GPU %d: %w", node, index, err)
	}
	next := make([]Slice, len(layout))
	for k, p := range layout {
		next[k] = Slice{Placement: p}
	}
	for _, old := range d.slices {
		if old.Task == "" {
			continue
		}
		k := indexOf(layout, old.Placement)
		if k < 0 {
			return fmt.Errorf("node %s: GPU %d: new layout drops %s, which %s is using", node, index, old.Placement, old.Task)
		}
		next[k].Task = old.Task
	}
	d = &s.mutable(i).GPUs[index]
	d.slices = next
	d.recount()
	s.nodes[i].touch()
	return nil
}

func indexOf(l gpu.Layout, p gpu.Placement) int {
	for k, q := range l {
		if q == p {
			return k
		}
	}
	return -1
}

// SetMIG turns MIG mode on or off. Like the real switch, it needs the GPU
// idle; it drops any instances.
func (s *State) SetMIG(node string, index int, on bool) error {
	i, err := s.find(node)
	if err != nil {
		return err
	}
	n := s.nodes[i]
	if index < 0 || index >= len(n.GPUs) {
		return fmt.Errorf("node %s: no GPU %d", node, index)
	}
	d := &n.GPUs[index]
	if on && !d.Model.MIG {
		return fmt.Errorf("node %s: GPU %d: model %s does not support MIG", node, index, d.Model.Name)
	}
	if !d.Idle() {
		return fmt.Errorf("node %s: GPU %d: busy; MIG mode changes need an idle GPU", node, index)
	}
	d = &s.mutable(i).GPUs[index]
	d.MIG = on
	d.slices = nil
	d.recount()
	s.nodes[i].touch()
	return nil
}

// Cordon stops (or, with on false, resumes) new work on a GPU. Running
// work is untouched.
func (s *State) Cordon(node string, index int, on bool) error {
	i, err := s.find(node)
	if err != nil {
		return err
	}
	if index < 0 || index >= len(s.nodes[i].GPUs) {
		return fmt.Errorf("node %s: no GPU %d", node, index)
	}
	n := s.mutable(i)
	n.GPUs[index].cordoned = on
	n.touch()
	return nil
}
