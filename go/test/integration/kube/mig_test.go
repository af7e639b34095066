package kube_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/kube"
	"partita.dev/partita/test/integration/kubetest"
)

const migNamespace = "gpu-operator"

// fakeMIGManager plays the GPU Operator's MIG manager and device plugin:
// when a node's nvidia.com/mig.config label names a config it has not
// applied, it reads the config from the mig-parted ConfigMap, reports
// success, and a moment later (as the restarted device plugin would)
// advertises the new instances in the node's capacity.
type fakeMIGManager struct {
	mu      sync.Mutex
	applied []string // node=config, in order
}

func (m *fakeMIGManager) changes() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.applied...)
}

func (e *env) migManager() *fakeMIGManager {
	m := &fakeMIGManager{}
	e.every(func(ctx context.Context) {
		nodes, err := e.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		for i := range nodes.Items {
			n := &nodes.Items[i]
			if n.Labels[kube.LabelMIGConfigState] != kube.MIGStatePending {
				continue
			}
			if err := e.applyMIG(ctx, n); err == nil {
				m.mu.Lock()
				m.applied = append(m.applied, n.Name+"="+n.Labels[kube.LabelMIGConfig])
				m.mu.Unlock()
			} else if ctx.Err() == nil {
				e.t.Errorf("MIG manager: node %s: %v", n.Name, err)
			}
		}
	})
	return m
}

// applyMIG applies the node's config: state success first, then the
// capacity, so the scheduler must wait for both.
func (e *env) applyMIG(ctx context.Context, n *corev1.Node) error {
	cm, err := e.client.CoreV1().ConfigMaps(migNamespace).Get(ctx, "partita-mig-parted", metav1.GetOptions{})
	if err != nil {
		return err
	}
	c, err := kube.ParseMIGParted([]byte(cm.Data[kube.MIGConfigKey]))
	if err != nil {
		return err
	}
	name := n.Labels[kube.LabelMIGConfig]
	specs, ok := c.MIGConfigs[name]
	if !ok {
		return errorf("config %s not in the ConfigMap", name)
	}
	total := atoi(n.Labels[kubetest.LabelGPUCount])
	gpus, _, err := kube.ExpandSpecs(specs, total)
	if err != nil {
		return err
	}
	n.Labels[kube.LabelMIGConfigState] = kube.MIGStateSuccess
	if n, err = e.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond)
	whole := 0
	counts := map[string]int{}
	for _, g := range gpus {
		if !g.MIG {
			whole++
			continue
		}
		for p, c := range g.Counts {
			counts[p] += c
		}
	}
	for _, l := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
		for r := range l {
			if strings.HasPrefix(string(r), kube.ResourceMIGPrefix) {
				delete(l, r)
			}
		}
		l[kubetest.ResourceGPU] = *resource.NewQuantity(int64(whole), resource.DecimalSI)
		for p, c := range counts {
			l[kubetest.MIGResource(p)] = *resource.NewQuantity(int64(c), resource.DecimalSI)
		}
	}
	_, err = e.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	return err
}

// TestMIGReconfigurationThroughTheLabel: a pod asks for a profile no GPU
// has; Partita writes a layout into the mig-parted ConfigMap, points the
// node's label at it, waits for the MIG manager and the device plugin,
// and binds the pod to the new instance.
func TestMIGReconfigurationThroughTheLabel(t *testing.T) {
	e := newEnv(t)
	if _, err := e.client.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: migNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// One H100 split the GPU Operator's all-1g.10gb way.
	e.createNode(kubetest.NewMIGNode("mig-0", 0, map[string]int{"1g.10gb": 7}, map[string]string{
		kubetest.LabelGPUCount: "1", kube.LabelMIGConfig: "all-1g.10gb", kube.LabelMIGConfigState: kube.MIGStateSuccess,
	}))
	e.kubelet()
	mm := e.migManager()
	e.startScheduler(testOptions())

	e.createPod(podSpec{name: "llm", mig: "3g.40gb"})
	p := e.waitBound("llm")["llm"]
	if s := p.Annotations[kube.AnnotationMIGSlice]; !strings.HasPrefix(s, "0:3g.40gb@") {
		t.Fatalf("bound with %s=%q, want a 3g.40gb instance", kube.AnnotationMIGSlice, s)
	}
	changes := mm.changes()
	if len(changes) != 1 || !strings.HasPrefix(changes[0], "mig-0=partita-") {
		t.Fatalf("MIG changes %v, want one Partita config on mig-0", changes)
	}
	cm, err := e.client.CoreV1().ConfigMaps(migNamespace).Get(e.ctx, "partita-mig-parted", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.ParseMIGParted([]byte(cm.Data[kube.MIGConfigKey]))
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(changes[0], "mig-0=")
	gpus, _, err := kube.ExpandSpecs(c.MIGConfigs[name], 1)
	if err != nil || !gpus[0].MIG || gpus[0].Counts["3g.40gb"] != 1 {
		t.Fatalf("config %s = %+v (%v), want MIG with a 3g.40gb", name, gpus, err)
	}
	if err := gpu.Lookup("H100-80GB").Validate(mustPack(t, gpus[0].Counts)); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.MIGConfigs["all-disabled"]; !ok {
		t.Error("the ConfigMap lacks all-disabled")
	}
	t.Logf("mig-parted config:\n%s", cm.Data[kube.MIGConfigKey])
}

// TestMIGChangesOnlyIdleNodes: the MIG manager stops a node's GPU pods
// while it applies a layout, so Partita re-partitions a node where
// nothing runs rather than the busy node a pod would fit better on.
func TestMIGChangesOnlyIdleNodes(t *testing.T) {
	e := newEnv(t)
	if _, err := e.client.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: migNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{kubetest.LabelGPUCount: "1", kube.LabelMIGConfig: "all-1g.10gb", kube.LabelMIGConfigState: kube.MIGStateSuccess}
	e.createNode(kubetest.NewMIGNode("busy", 0, map[string]int{"1g.10gb": 7}, labels))
	e.createNode(kubetest.NewMIGNode("idle", 0, map[string]int{"1g.10gb": 7}, labels))
	e.kubelet()
	mm := e.migManager()
	running := e.createPod(podSpec{name: "running", mig: "1g.10gb", scheduler: "default-scheduler"})
	bindTo(t, e, running.Name, "busy")
	e.startScheduler(testOptions())

	e.createPod(podSpec{name: "llm", mig: "3g.40gb"})
	if p := e.waitBound("llm")["llm"]; p.Spec.NodeName != "idle" {
		t.Fatalf("llm on %s, want idle", p.Spec.NodeName)
	}
	for _, c := range mm.changes() {
		if strings.HasPrefix(c, "busy=") {
			t.Fatalf("the busy node was re-partitioned: %v", mm.changes())
		}
	}
	if e.pod("running").DeletionTimestamp != nil {
		t.Fatal("the running pod was disturbed")
	}
}

func mustPack(t *testing.T, counts map[string]int) gpu.Layout {
	t.Helper()
	l, err := kube.PackLayouts(gpu.Lookup("H100-80GB"), counts, 1)
	if err != nil {
		t.Fatal(err)
	}
	return l[0]
}
