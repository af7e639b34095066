package kube

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/gpu"
)

// NodeView is a Kubernetes node as the engine will see it: the node to
// build, each GPU's MIG state, and whether new work may go there.
type NodeView struct {
	Spec cluster.NodeSpec
	// GPUs[i] is GPU i: MIG off, or on with Layout (start slices Partita
	// derived from counts; the device plugin decides the physical
	// instance a pod gets).
	GPUs []GPUView
	// Unschedulable: no new work at all (not Ready, cordoned, a taint
	// Partita does not tolerate); Reason says which.
	Unschedulable bool
	// MIGChanging: a MIG change is being applied (or awaits the device
	// plugin's new capacity); every GPU of the node is cordoned meanwhile,
	// since the MIG manager stops GPU clients while it works.
	MIGChanging bool
	// MIGFailed: the MIG manager reported failure; GPUs stay cordoned
	// until an operator fixes the node.
	MIGFailed bool
	Reason    string
	// Config is the node's current nvidia.com/mig.config value.
	Config string
}

// GPUView is one GPU of a NodeView.
type GPUView struct {
	MIG    bool
	Layout gpu.Layout
}

// Configs of the GPUs, as mig-parted would write them.
func (v *NodeView) Configs() []GPUConfig {
	out := make([]GPUConfig, len(v.GPUs))
	for i, g := range v.GPUs {
		out[i] = GPUConfig{MIG: g.MIG, Counts: CountsOf(g.Layout)}
	}
	return out
}

// NodeOptions are the cluster-wide facts a node's translation needs.
type NodeOptions struct {
	// Configs are Partita's own mig-parted configs by name (from its
	// ConfigMap). A node whose mig.config label names one is read from
	// it; other nodes are read from the device plugin's capacity.
	Configs map[string][]MIGDeviceSpec
	// ToleratedTaints are taint keys Partita ignores, besides the
	// NVIDIA ones (nvidia.com/...) that GPU nodes carry for GPU pods.
	ToleratedTaints map[string]bool
}

// ViewNode translates a node. It never fails: what cannot be read is
// reported through Unschedulable and Reason, so that pods bound there are
// still accounted for.
func ViewNode(n *corev1.Node, opt NodeOptions) NodeView {
	v := NodeView{Spec: cluster.NodeSpec{
		Name:      n.Name,
		CPUMilli:  n.Status.Allocatable.Cpu().MilliValue(),
		MemoryMiB: n.Status.Allocatable.Memory().Value() >> 20,
		Labels:    maps.Clone(n.Labels),
	}, Config: n.Labels[LabelMIGConfig]}
	if v.Spec.Labels == nil {
		v.Spec.Labels = map[string]string{}
	}
	if t, err := cluster.ParseTier(n.Labels[LabelTier]); err == nil {
		v.Spec.Tier = t
	}
	switch l := n.Labels[LabelNVLink]; l {
	case cluster.LinkNone, cluster.LinkAll, cluster.LinkPairs:
		v.Spec.NVLink = l
	}
	if why := unschedulable(n, opt.ToleratedTaints); why != "" {
		v.Unschedulable, v.Reason = true, why
	}
	readGPUs(n, opt, &v)
	return v
}

// unschedulable says why no new pod may go to n, or "".
func unschedulable(n *corev1.Node, tolerated map[string]bool) string {
	if n.Spec.Unschedulable {
		return "node is cordoned"
	}
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return "node is not Ready"
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule || strings.HasPrefix(t.Key, "nvidia.com/") || tolerated[t.Key] {
			continue
		}
		return fmt.Sprintf("taint %s:%s is not tolerated (Partita does not evaluate pod tolerations)", t.Key, t.Effect)
	}
	return ""
}

// readGPUs fills the GPUs of v from the device plugin's capacity, the GFD
// labels and, for a node on one of Partita's configs, that config.
func readGPUs(n *corev1.Node, opt NodeOptions, v *NodeView) {
	whole := int(quantity(n.Status.Capacity, ResourceGPU))
	counts := map[string]int{}
	for name, q := range n.Status.Capacity {
		if p, ok := strings.CutPrefix(string(name), ResourceMIGPrefix); ok && q.Value() > 0 {
			counts[p] = int(q.Value())
		}
	}
	product := n.Labels[LabelGPUProduct]
	if whole == 0 && len(counts) == 0 && product == "" {
		return // a CPU node
	}
	if strings.Contains(product, "-MIG-") {
		// GFD names the product "...-MIG-1g.10gb" under the single
		// strategy, where every GPU exposes one profile as nvidia.com/gpu.
		base, _, _ := strings.Cut(product, "-MIG-")
		v.Spec.GPUModel, v.Spec.GPUs = gpu.Lookup(base).Name, max(whole, 1)
		v.MIGFailed, v.Reason = true, "MIG strategy single is not supported (use mixed)"
		v.GPUs = make([]GPUView, v.Spec.GPUs)
		return
	}
	model := gpu.Lookup(product)
	if product == "" {
		model = gpu.Lookup("unknown")
	}
	v.Spec.GPUModel = model.Name
	total := whole
	if c, err := strconv.Atoi(n.Labels[LabelGPUCount]); err == nil && c >= whole {
		total = c
	} else if len(counts) > 0 {
		total = whole + minMIGGPUs(model, counts)
	}
	v.Spec.GPUs = total
	v.GPUs = make([]GPUView, total)
	if specs, ours := opt.Configs[v.Config]; ours {
		readOwnConfig(n, model, specs, whole, counts, v)
		return
	}
	if st := n.Labels[LabelMIGConfigState]; st != "" && st != MIGStateSuccess && v.Config != "" {
		v.MIGChanging, v.Reason = true, fmt.Sprintf("MIG config %s is %s", v.Config, st)
		if st == MIGStateFailed {
			v.MIGChanging, v.MIGFailed = false, true
		}
	}
	fillFromCapacity(model, whole, counts, v)
}

// fillFromCapacity spreads the MIG instances the device plugin advertises
// over the GPUs that are not advertised whole: by convention the last
// ones (the device plugin does not say which; only counts matter to the
// kubelet).
func fillFromCapacity(model *gpu.Model, whole int, counts map[string]int, v *NodeView) {
	migGPUs := len(v.GPUs) - whole
	if migGPUs <= 0 {
		return
	}
	if !model.MIG {
		v.MIGFailed, v.Reason = true, fmt.Sprintf("%d GPUs of %s are not advertised and the model has no MIG", migGPUs, model.Name)
		return
	}
	layouts, err := PackLayouts(model, counts, migGPUs)
	if err != nil {
		v.MIGFailed, v.Reason = true, "MIG capacity: "+err.Error()
		return
	}
	for k, l := range layouts {
		v.GPUs[whole+k] = GPUView{MIG: true, Layout: l}
	}
}

// readOwnConfig reads a node whose label names one of Partita's configs:
// the layouts come from the config. Until the MIG manager says success and
// the device plugin advertises exactly what the config holds, the change
// is in flight and the node's GPUs are cordoned.
func readOwnConfig(n *corev1.Node, model *gpu.Model, specs []MIGDeviceSpec, whole int, counts map[string]int, v *NodeView) {
	gpus, ok, err := ExpandSpecs(specs, len(v.GPUs))
	if err == nil {
		for i := range ok {
			if !ok[i] {
				err = fmt.Errorf("config names no setting for GPU %d", i)
				break
			}
		}
	}
	wantWhole, wantCounts := 0, map[string]int{}
	if err == nil {
		for i, g := range gpus {
			if !g.MIG {
				wantWhole++
				continue
			}
			layouts, perr := PackLayouts(model, g.Counts, 1)
			if perr != nil {
				err = fmt.Errorf("GPU %d: %w", i, perr)
				break
			}
			v.GPUs[i] = GPUView{MIG: true, Layout: layouts[0]}
			for p, c := range g.Counts {
				if c > 0 {
					wantCounts[p] += c
				}
			}
		}
	}
	if err != nil {
		v.MIGFailed, v.Reason = true, fmt.Sprintf("MIG config %s: %v", v.Config, err)
		return
	}
	switch st := n.Labels[LabelMIGConfigState]; {
	case st == MIGStateFailed:
		v.MIGFailed, v.Reason = true, fmt.Sprintf("the MIG manager failed to apply %s", v.Config)
	case st != MIGStateSuccess:
		v.MIGChanging, v.Reason = true, fmt.Sprintf("MIG config %s is %s", v.Config, orNone(st))
	case whole != wantWhole || !maps.Equal(counts, wantCounts):
		v.MIGChanging, v.Reason = true, fmt.Sprintf("MIG config %s applied; waiting for the device plugin to advertise it", v.Config)
	}
}

func orNone(s string) string {
	if s == "" {
		return "not reported yet"
	}
	return s
}

// minMIGGPUs is the fewest GPUs that hold the instances, for a node
// without the nvidia.com/gpu.count label.
func minMIGGPUs(m *gpu.Model, counts map[string]int) int {
	for k := 1; k <= 64; k++ {
		if _, err := PackLayouts(m, counts, k); err == nil {
			return k
		}
	}
	return 0
}

func quantity(l corev1.ResourceList, name string) int64 {
	q, ok := l[corev1.ResourceName(name)]
	if !ok {
		return 0
	}
	return q.Value()
}
