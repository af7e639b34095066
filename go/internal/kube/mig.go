package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/gpu"
)

// MIGConfigKey is the ConfigMap key the MIG manager reads.
const MIGConfigKey = "config.yaml"

// migChange is a MIG label Partita set that the informer may not show
// yet.
type migChange struct {
	name string
	at   time.Time
}

// migConfigs returns Partita's configs by name, from the ConfigMap. Only
// names Partita made (partita-...) are read: a node on any other config
// is read from the device plugin's capacity.
func (s *Scheduler) migConfigs() map[string][]MIGDeviceSpec {
	cm, err := s.configMaps.ConfigMaps(s.opt.MIGConfigNamespace).Get(s.opt.MIGConfigName)
	if err != nil {
		return nil
	}
	c, err := ParseMIGParted([]byte(cm.Data[MIGConfigKey]))
	if err != nil {
		s.opt.Logger.Warn("MIG config map unreadable", "configmap", s.opt.MIGConfigName, "err", err)
		return nil
	}
	out := map[string][]MIGDeviceSpec{}
	for name, specs := range c.MIGConfigs {
		if strings.HasPrefix(name, "partita-") {
			out[name] = specs
		}
	}
	return out
}

// ensureConfigMap creates the mig-parted ConfigMap if it is missing, with
// the one layout every MIG manager config has: all-disabled.
func (s *Scheduler) ensureConfigMap(ctx context.Context) error {
	if s.opt.MIGReconfigure == MIGOff {
		return nil
	}
	_, err := s.client.CoreV1().ConfigMaps(s.opt.MIGConfigNamespace).Get(ctx, s.opt.MIGConfigName, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	c := &MIGParted{Version: "v1", MIGConfigs: map[string][]MIGDeviceSpec{
		"all-disabled": {{Devices: Devices{All: true}, MIGEnabled: false}},
	}}
	data, err := c.Render()
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: s.opt.MIGConfigName, Namespace: s.opt.MIGConfigNamespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "partita"}},
		Data: map[string]string{MIGConfigKey: string(data)},
	}
	_, err = s.client.CoreV1().ConfigMaps(s.opt.MIGConfigNamespace).Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create MIG config map %s/%s: %w", s.opt.MIGConfigNamespace, s.opt.MIGConfigName, err)
	}
	return nil
}

// nodePlan is the MIG change of one node this cycle.
type nodePlan struct {
	gpus   []GPUConfig
	jobs   []string // jobs whose starts need it
	reason []string
}

// changeMIG turns the decision's MIG changes, and the starts that need an
// instance not yet made, into one config per node, and applies those the
// mode allows. It returns the jobs now waiting for a change, by node.
func (s *Scheduler) changeMIG(ctx context.Context, snap *Snapshot, d sched.Decision, starts map[string][]sched.Start,
	creating map[string]bool, waits map[string]string) map[string]string {
	plans := map[string]*nodePlan{}
	plan := func(node string) *nodePlan {
		if p := plans[node]; p != nil {
			return p
		}
		v := snap.Views[node]
		if v == nil {
			return nil
		}
		p := &nodePlan{gpus: v.Configs()}
		plans[node] = p
		return p
	}
	for _, rc := range d.Reconfigs {
		if p := plan(rc.Node); p != nil && rc.GPU < len(p.gpus) {
			p.gpus[rc.GPU] = GPUConfig{MIG: rc.MIG, Counts: CountsOf(rc.Layout)}
			p.reason = append(p.reason, fmt.Sprintf("GPU %d for %s", rc.GPU, rc.For))
		}
	}
	startsOn := map[string]bool{} // nodes that get a bind this cycle
	for job, sts := range starts {
		for _, st := range sts {
			if !creating[job] {
				startsOn[st.Assignment.Node] = true
				continue
			}
			p := plan(st.Assignment.Node)
			if p == nil {
				continue
			}
			p.jobs = append(p.jobs, job)
			for _, g := range st.Assignment.Grants {
				if g.Slice != nil && g.GPU < len(p.gpus) && !hasInstance(snap, st.Assignment.Node, g) {
					c := maps.Clone(p.gpus[g.GPU].Counts)
					if c == nil {
						c = map[string]int{}
					}
					c[g.Slice.Profile]++
					p.gpus[g.GPU] = GPUConfig{MIG: true, Counts: c}
					p.reason = append(p.reason, fmt.Sprintf("a %s instance on GPU %d for %s", g.Slice.Profile, g.GPU, job))
				}
			}
		}
	}
	waiting := map[string]string{}
	for _, node := range slices.Sorted(maps.Keys(plans)) {
		p := plans[node]
		why := s.applyPlan(ctx, snap, node, p, startsOn[node])
		for _, job := range p.jobs {
			if why == "" {
				waiting[job] = node
				waits[job] = fmt.Sprintf("%s: node %s is being re-partitioned for it", sched.WaitReconfig, node)
			} else {
				waits[job] = fmt.Sprintf("%s: %s", sched.WaitNoSlice, why)
			}
		}
	}
	return waiting
}

func hasInstance(snap *Snapshot, node string, g cluster.Grant) bool {
	n := snap.State.NodeByName(node)
	if n == nil || g.GPU >= len(n.GPUs) {
		return false
	}
	for _, sl := range n.GPUs[g.GPU].Slices() {
		if sl.Placement == *g.Slice {
			return true
		}
	}
	return false
}

// applyPlan writes a node's new config and label, or says why it may not.
func (s *Scheduler) applyPlan(ctx context.Context, snap *Snapshot, node string, p *nodePlan, binding bool) string {
	v := snap.Views[node]
	model := gpu.Lookup(v.Spec.GPUModel)
	for i, g := range p.gpus {
		if !g.MIG {
			continue
		}
		if _, err := PackLayouts(model, g.Counts, 1); err != nil {
			s.metrics.reconfigs.WithLabelValues("invalid").Inc()
			return fmt.Sprintf("node %s GPU %d: %v", node, i, err)
		}
	}
	switch {
	case s.opt.MIGReconfigure == MIGOff:
		s.metrics.reconfigs.WithLabelValues("declined").Inc()
		return "MIG changes are off (--mig-reconfigure=off)"
	case s.opt.MIGReconfigure == MIGIdleNodes && (snap.Busy[node] || binding):
		s.metrics.reconfigs.WithLabelValues("declined").Inc()
		s.opt.Logger.Info("MIG change declined: node runs GPU pods", "node", node, "for", strings.Join(p.reason, "; "))
		return fmt.Sprintf("node %s runs GPU pods and the MIG manager would stop them (--mig-reconfigure=%s)", node, MIGIdleNodes)
	}
	name := ConfigName(p.gpus)
	if name == v.Config && !v.MIGChanging && !v.MIGFailed {
		return ""
	}
	if err := s.writeConfig(ctx, name, DeviceSpecs(p.gpus)); err != nil {
		s.metrics.reconfigs.WithLabelValues("error").Inc()
		s.opt.Logger.Error("MIG config not written", "node", node, "err", err)
		return "the MIG config could not be written: " + err.Error()
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{
		LabelMIGConfig: name, LabelMIGConfigState: MIGStatePending,
	}}})
	if _, err := s.client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		s.metrics.reconfigs.WithLabelValues("error").Inc()
		s.opt.Logger.Error("MIG label not set", "node", node, "err", err)
		return "the node label could not be set: " + err.Error()
	}
	s.changes[node] = &migChange{name: name, at: time.Now()}
	s.metrics.reconfigs.WithLabelValues("ok").Inc()
	s.opt.Logger.Info("MIG change", "node", node, "config", name, "for", strings.Join(p.reason, "; "))
	return ""
}

// writeConfig adds a named layout to the mig-parted ConfigMap, and drops
// Partita's layouts no node uses any more. Entries Partita did not make
// are left alone.
func (s *Scheduler) writeConfig(ctx context.Context, name string, specs []MIGDeviceSpec) error {
	inUse := map[string]bool{name: true}
	if nodes, err := s.nodes.List(labels.Everything()); err == nil {
		for _, n := range nodes {
			inUse[n.Labels[LabelMIGConfig]] = true
		}
	}
	for _, c := range s.changes {
		inUse[c.name] = true
	}
	cms := s.client.CoreV1().ConfigMaps(s.opt.MIGConfigNamespace)
	if err := s.ensureConfigMap(ctx); err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, s.opt.MIGConfigName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c, err := ParseMIGParted([]byte(cm.Data[MIGConfigKey]))
		if err != nil {
			return err
		}
		c.MIGConfigs[name] = specs
		for n := range c.MIGConfigs {
			if strings.HasPrefix(n, "partita-") && !inUse[n] {
				delete(c.MIGConfigs, n)
			}
		}
		data, err := c.Render()
		if err != nil {
			return err
		}
		if cm.Data[MIGConfigKey] == string(data) {
			return nil
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[MIGConfigKey] = string(data)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}
