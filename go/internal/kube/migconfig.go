package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"partita.dev/partita/internal/gpu"
)

// The NVIDIA GPU Operator's MIG manager applies a named layout from a
// mig-parted config file, chosen per node by the label nvidia.com/mig.config.
// Partita writes its layouts into that file (a ConfigMap, see
// docs/kubernetes.md) under content-addressed names, one entry per set of
// GPUs of a node that share a layout:
//
//	version: v1
//	mig-configs:
//	  all-disabled:
//	    - devices: all
//	      mig-enabled: false
//	  partita-b1556776c7:
//	    - devices: [0, 1, 2, 3]
//	      mig-enabled: false
//	    - devices: [4, 5, 6, 7]
//	      mig-enabled: true
//	      mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
//
// mig-parted places instances itself: the config holds counts per profile,
// not start slices. Partita's own bookkeeping of start slices is derived
// from the counts (PackLayouts), so it is the same before and after a
// restart.

// MIGParted is a mig-parted config file.
type MIGParted struct {
	Version    string                     `yaml:"version"`
	MIGConfigs map[string][]MIGDeviceSpec `yaml:"mig-configs"`
}

// MIGDeviceSpec is one entry of a named config: a set of GPUs and what
// they become.
type MIGDeviceSpec struct {
	// DeviceFilter limits the entry to GPUs of the listed PCI device IDs
	// ("0x20B210DE", or a list of them), as the GPU Operator's default
	// config does for per-model entries. Partita's own entries have none;
	// in entries it did not write it is kept exactly as written, since
	// Partita rewrites the whole file when it adds a layout.
	DeviceFilter yaml.Node `yaml:"device-filter,omitempty"`
	// Devices is "all" or a list of GPU indices.
	Devices    Devices        `yaml:"devices"`
	MIGEnabled bool           `yaml:"mig-enabled"`
	MIGDevices map[string]int `yaml:"mig-devices,omitempty"`
}

// Devices is mig-parted's device selector: all GPUs, or the listed ones.
type Devices struct {
	All     bool
	Indices []int
}

// MarshalYAML writes "all" or a flow list of indices.
func (d Devices) MarshalYAML() (any, error) {
	if d.All {
		return "all", nil
	}
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, i := range d.Indices {
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: fmt.Sprint(i)})
	}
	return n, nil
}

// UnmarshalYAML reads "all" or a list of indices.
func (d *Devices) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Value != "all" {
			return fmt.Errorf("devices: %q: want \"all\" or a list of GPU indices", n.Value)
		}
		*d = Devices{All: true}
		return nil
	}
	var idx []int
	if err := n.Decode(&idx); err != nil {
		return fmt.Errorf("devices: %w", err)
	}
	for _, i := range idx {
		if i < 0 {
			return fmt.Errorf("devices: GPU index %d is negative", i)
		}
	}
	*d = Devices{Indices: idx}
	return nil
}

// ParseMIGParted reads a mig-parted config file.
func ParseMIGParted(data []byte) (*MIGParted, error) {
	var c MIGParted
	if err := yaml.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("mig-parted config: %w", err)
	}
	if c.Version != "v1" {
		return nil, fmt.Errorf("mig-parted config: version %q, want v1", c.Version)
	}
	if c.MIGConfigs == nil {
		c.MIGConfigs = map[string][]MIGDeviceSpec{}
	}
	return &c, nil
}

// Render writes the config with names in sorted order, so the same
// content gives the same bytes.
func (c *MIGParted) Render() ([]byte, error) {
	return yaml.Marshal(c)
}

// GPUConfig is what one GPU should be: MIG off, or MIG on with these
// instances (counts per profile).
type GPUConfig struct {
	MIG    bool
	Counts map[string]int
}

func (g GPUConfig) key() string {
	if !g.MIG {
		return "off"
	}
	names := slices.Sorted(maps.Keys(g.Counts))
	var b strings.Builder
	b.WriteString("on")
	for _, n := range names {
		if g.Counts[n] > 0 {
			fmt.Fprintf(&b, ",%s=%d", n, g.Counts[n])
		}
	}
	return b.String()
}

// CountsOf turns a layout into counts per profile.
func CountsOf(l gpu.Layout) map[string]int {
	c := map[string]int{}
	for _, p := range l {
		c[p.Profile]++
	}
	return c
}

// ConfigName names a node's per-GPU configuration by its content, so
// nodes with the same layouts share one entry and a name never changes
// meaning.
func ConfigName(gpus []GPUConfig) string {
	h := sha256.New()
	for i, g := range gpus {
		fmt.Fprintf(h, "%d:%s;", i, g.key())
	}
	return "partita-" + hex.EncodeToString(h.Sum(nil))[:10]
}

// DeviceSpecs writes per-GPU configs as mig-parted entries, grouping GPUs
// that share a configuration, in order of their first GPU.
func DeviceSpecs(gpus []GPUConfig) []MIGDeviceSpec {
	var out []MIGDeviceSpec
	at := map[string]int{}
	for i, g := range gpus {
		k := g.key()
		if j, ok := at[k]; ok {
			out[j].Devices.Indices = append(out[j].Devices.Indices, i)
			continue
		}
		at[k] = len(out)
		spec := MIGDeviceSpec{Devices: Devices{Indices: []int{i}}, MIGEnabled: g.MIG}
		if g.MIG {
			spec.MIGDevices = map[string]int{}
			for n, c := range g.Counts {
				if c > 0 {
					spec.MIGDevices[n] = c
				}
			}
		}
		out = append(out, spec)
	}
	if len(out) == 1 && len(gpus) > 0 {
		out[0].Devices = Devices{All: true}
	}
	return out
}

// ExpandSpecs turns the entries of a named config into per-GPU configs for
// a node with n GPUs. A GPU no entry names keeps ok false.
func ExpandSpecs(specs []MIGDeviceSpec, n int) (gpus []GPUConfig, ok []bool, err error) {
	gpus, ok = make([]GPUConfig, n), make([]bool, n)
	for _, s := range specs {
		idx := s.Devices.Indices
		if s.Devices.All {
			idx = make([]int, n)
			for i := range idx {
				idx[i] = i
			}
		}
		for _, i := range idx {
			if i >= n {
				return nil, nil, fmt.Errorf("device %d: the node has %d GPUs", i, n)
			}
			gpus[i], ok[i] = GPUConfig{MIG: s.MIGEnabled, Counts: maps.Clone(s.MIGDevices)}, true
		}
	}
	return gpus, ok, nil
}

// maxPackSteps bounds the search of PackLayouts; real inputs (at most 8
// GPUs of 7 instances) take a few dozen steps.
const maxPackSteps = 200000

// PackLayouts places counts of MIG instances (per profile, over the whole
// set) onto gpus GPUs of model m, and returns a valid layout per GPU. It
// is deterministic: the largest instances first, each on the first GPU and
// the first start where the rest can still be placed. Partita uses it to
// turn the device plugin's per-profile capacity, or a mig-parted entry,
// into start slices for its bookkeeping.
func PackLayouts(m *gpu.Model, counts map[string]int, gpus int) ([]gpu.Layout, error) {
	var items []*gpu.Profile
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		if counts[name] < 0 {
			return nil, fmt.Errorf("mig profile %s: count %d is negative", name, counts[name])
		}
		if counts[name] == 0 {
			continue
		}
		p, err := m.Profile(name)
		if err != nil {
			return nil, err
		}
		for range counts[name] {
			items = append(items, p)
		}
	}
	layouts := make([]gpu.Layout, gpus)
	if len(items) == 0 {
		return layouts, nil
	}
	if gpus == 0 {
		return nil, fmt.Errorf("%d MIG instances but no MIG GPU to hold them", len(items))
	}
	sort.SliceStable(items, func(a, b int) bool {
		if items[a].Memory != items[b].Memory {
			return items[a].Memory > items[b].Memory
		}
		return items[a].Compute > items[b].Compute
	})
	steps := 0
	var place func(k int) bool
	place = func(k int) bool {
		if k == len(items) {
			return true
		}
		steps++
		if steps > maxPackSteps {
			return false
		}
		tried := map[string]bool{}
		for g := range layouts {
			// GPUs with the same layout are interchangeable: try one.
			key := layouts[g].String()
			if tried[key] {
				continue
			}
			tried[key] = true
			places, err := m.FreePlacements(layouts[g], items[k].Name)
			if err != nil {
				return false
			}
			for _, pl := range places {
				layouts[g] = append(layouts[g], pl)
				if place(k + 1) {
					return true
				}
				layouts[g] = layouts[g][:len(layouts[g])-1]
			}
		}
		return false
	}
	if !place(0) {
		return nil, fmt.Errorf("%s: %s do not fit on %d MIG GPUs", m.Name, describeCounts(counts), gpus)
	}
	for g := range layouts {
		sort.Slice(layouts[g], func(a, b int) bool { return layouts[g][a].Start < layouts[g][b].Start })
	}
	return layouts, nil
}

func describeCounts(counts map[string]int) string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(counts)) {
		if counts[n] > 0 {
			parts = append(parts, fmt.Sprintf("%d×%s", counts[n], n))
		}
	}
	if len(parts) == 0 {
		return "no instances"
	}
	return strings.Join(parts, " + ")
}
