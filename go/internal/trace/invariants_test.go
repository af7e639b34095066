package trace

import (
	"fmt"
	"slices"
	"strings"
)

// podsInvariant returns the first way pods breaks the promises ReadPods
// makes on success, or nil. The fuzz tests and the shared-data test both
// use it, so the promises are written down once.
func podsInvariant(pods []Pod) error {
	seen := make(map[string]bool, len(pods))
	prevLine := 1 // the header
	for i, p := range pods {
		at := describe("pod", i, p.Name, p.Line)
		switch {
		case p.Name == "":
			return fmt.Errorf("%s: empty name", at)
		case seen[p.Name]:
			return fmt.Errorf("%s: duplicate name", at)
		case p.Line <= prevLine:
			return fmt.Errorf("%s: line not after the previous row's %d", at, prevLine)
		case p.CPUMilli < 0 || p.MemoryMiB < 0:
			return fmt.Errorf("%s: negative CPU or memory", at)
		case p.NumGPU < 0:
			return fmt.Errorf("%s: negative num_gpu", at)
		case p.GPUMilli < 0 || p.GPUMilli > 1000:
			return fmt.Errorf("%s: gpu_milli %d outside 0..1000", at, p.GPUMilli)
		case p.NumGPU == 0 && p.GPUMilli != 0:
			return fmt.Errorf("%s: GPU share without GPUs", at)
		case p.NumGPU >= 1 && p.GPUMilli == 0:
			return fmt.Errorf("%s: GPUs with a zero share", at)
		case p.NumGPU > 1 && p.GPUMilli != 1000:
			return fmt.Errorf("%s: multi-GPU pod with a partial share", at)
		}
		if err := specInvariant(p); err != nil {
			return fmt.Errorf("%s: %v", at, err)
		}
		if err := timesInvariant(p); err != nil {
			return fmt.Errorf("%s: %v", at, err)
		}
		seen[p.Name] = true
		prevLine = p.Line
	}
	return nil
}

func specInvariant(p Pod) error {
	noSpec := p.GPUSpecRaw == "" || strings.EqualFold(p.GPUSpecRaw, "nan")
	if noSpec != (p.GPUSpec == nil) {
		return fmt.Errorf("GPUSpec %q does not match raw %q", p.GPUSpec, p.GPUSpecRaw)
	}
	if noSpec {
		return nil
	}
	if len(p.GPUSpec) == 0 {
		return fmt.Errorf("GPUSpec empty but not nil")
	}
	// The parsed list is the raw list with later repeats removed.
	var want []string
	for _, m := range strings.Split(p.GPUSpecRaw, "|") {
		if !slices.Contains(want, m) {
			want = append(want, m)
		}
	}
	if !slices.Equal(p.GPUSpec, want) {
		return fmt.Errorf("GPUSpec %q, want %q from raw %q", p.GPUSpec, want, p.GPUSpecRaw)
	}
	for _, m := range p.GPUSpec {
		if m == "" || strings.EqualFold(m, "nan") || strings.Contains(m, "|") {
			return fmt.Errorf("GPUSpec has bad model %q", m)
		}
	}
	return nil
}

func timesInvariant(p Pod) error {
	times := []struct {
		v   int64
		has bool
	}{{p.CreationTime, p.HasCreation}, {p.DeletionTime, p.HasDeletion}, {p.ScheduledTime, p.HasScheduled}}
	for _, tm := range times {
		if tm.v < 0 || (!tm.has && tm.v != 0) {
			return fmt.Errorf("bad time %d (present %v)", tm.v, tm.has)
		}
	}
	return nil
}

// nodesInvariant is podsInvariant for ReadNodes.
func nodesInvariant(nodes []Node) error {
	seen := make(map[string]bool, len(nodes))
	prevLine := 1
	for i, n := range nodes {
		at := describe("node", i, n.Name, n.Line)
		switch {
		case n.Name == "":
			return fmt.Errorf("%s: empty name", at)
		case seen[n.Name]:
			return fmt.Errorf("%s: duplicate name", at)
		case n.Line <= prevLine:
			return fmt.Errorf("%s: line not after the previous row's %d", at, prevLine)
		case n.CPUMilli < 0 || n.MemoryMiB < 0 || n.GPUs < 0:
			return fmt.Errorf("%s: negative capacity", at)
		case n.GPUs > 0 && (n.Model == "" || strings.EqualFold(n.Model, "nan")):
			return fmt.Errorf("%s: GPUs without a model", at)
		case n.GPUs == 0 && n.Model != "":
			return fmt.Errorf("%s: model %q without GPUs", at, n.Model)
		case strings.Contains(n.Model, "|"):
			return fmt.Errorf("%s: model %q is a list", at, n.Model)
		}
		seen[n.Name] = true
		prevLine = n.Line
	}
	return nil
}

// describe names a row in an invariant failure. It returns a Stringer so
// the text is only built when a check fails: the shared-data test runs the
// invariants over some 170,000 rows.
func describe(kind string, i int, name string, line int) fmt.Stringer {
	return rowDesc{kind, i, name, line}
}

type rowDesc struct {
	kind string
	i    int
	name string
	line int
}

func (d rowDesc) String() string {
	return fmt.Sprintf("%s %d (%q, line %d)", d.kind, d.i, d.name, d.line)
}
