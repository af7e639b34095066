package kube

import (
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Builders of fake API objects, for the pure translation tests only; the
// behaviour against a real API server is tested in test/integration.

type nodeBuilder struct{ n *corev1.Node }

// gpuNode is a Ready H100 node with whole GPUs, as the device plugin and
// GFD describe it.
func gpuNode(name string, gpus int) *nodeBuilder {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		ResourceGPU:           *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	}
	return &nodeBuilder{n: &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			LabelGPUProduct: "NVIDIA-H100-80GB-HBM3", LabelGPUCount: strconv.Itoa(gpus),
		}},
		Status: corev1.NodeStatus{
			Capacity: res, Allocatable: res.DeepCopy(),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}}
}

// mig makes k of the node's GPUs MIG GPUs advertising the instances.
func (b *nodeBuilder) mig(k int, instances map[string]int) *nodeBuilder {
	whole := b.n.Status.Capacity[ResourceGPU]
	left := *resource.NewQuantity(whole.Value()-int64(k), resource.DecimalSI)
	b.n.Status.Capacity[ResourceGPU], b.n.Status.Allocatable[ResourceGPU] = left, left
	for p, c := range instances {
		q := *resource.NewQuantity(int64(c), resource.DecimalSI)
		b.n.Status.Capacity[corev1.ResourceName(ResourceMIGPrefix+p)] = q
		b.n.Status.Allocatable[corev1.ResourceName(ResourceMIGPrefix+p)] = q
	}
	b.n.Labels[LabelMIGStrategy] = "mixed"
	return b
}

func (b *nodeBuilder) label(k, v string) *nodeBuilder { b.n.Labels[k] = v; return b }

func (b *nodeBuilder) taint(key string) *nodeBuilder {
	b.n.Spec.Taints = append(b.n.Spec.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
	return b
}

func (b *nodeBuilder) cordoned() *nodeBuilder { b.n.Spec.Unschedulable = true; return b }

func (b *nodeBuilder) obj() *corev1.Node { return b.n }

type podBuilder struct{ p *corev1.Pod }

var podSeq int

// pod is a pending pod for Partita in namespace "ns", asking 1 CPU and
// 1 GiB.
func pod(name string) *podBuilder {
	podSeq++
	return &podBuilder{p: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, podSeq, 0, time.UTC)),
			Labels:            map[string]string{}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{SchedulerName: DefaultSchedulerName, Containers: []corev1.Container{{
			Name: "main",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
				Limits:   corev1.ResourceList{},
			},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}}
}

func (b *podBuilder) limit(name string, n int64) *podBuilder {
	b.p.Spec.Containers[0].Resources.Limits[corev1.ResourceName(name)] = *resource.NewQuantity(n, resource.DecimalSI)
	return b
}
func (b *podBuilder) gpus(n int64) *podBuilder           { return b.limit(ResourceGPU, n) }
func (b *podBuilder) migProfile(p string) *podBuilder    { return b.limit(ResourceMIGPrefix+p, 1) }
func (b *podBuilder) ann(k, v string) *podBuilder        { b.p.Annotations[k] = v; return b }
func (b *podBuilder) label(k, v string) *podBuilder      { b.p.Labels[k] = v; return b }
func (b *podBuilder) scheduler(name string) *podBuilder  { b.p.Spec.SchedulerName = name; return b }
func (b *podBuilder) group(g string) *podBuilder         { return b.label(LabelPodGroup, g) }
func (b *podBuilder) queue(q string) *podBuilder         { return b.label(LabelQueue, q) }
func (b *podBuilder) priorityClass(c string) *podBuilder { b.p.Spec.PriorityClassName = c; return b }
func (b *podBuilder) phase(ph corev1.PodPhase) *podBuilder {
	b.p.Status.Phase = ph
	return b
}

// on binds the pod to a node, with Partita's device annotations.
func (b *podBuilder) on(node string, ann map[string]string) *podBuilder {
	b.p.Spec.NodeName = node
	for k, v := range ann {
		b.p.Annotations[k] = v
	}
	b.p.Status.Phase = corev1.PodRunning
	return b
}

func (b *podBuilder) deleting() *podBuilder {
	now := metav1.Now()
	b.p.DeletionTimestamp = &now
	return b
}

func (b *podBuilder) obj() *corev1.Pod { return b.p }

func mustSnapshot(t *testing.T, obj Objects, opt SnapshotOptions) *Snapshot {
	t.Helper()
	if opt.SchedulerName == "" {
		opt.SchedulerName = DefaultSchedulerName
	}
	if opt.Headroom == 0 {
		opt.Headroom = 0.1
	}
	s, err := BuildSnapshot(obj, opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.State.Check(); err != nil {
		t.Fatalf("snapshot state breaks an invariant: %v", err)
	}
	return s
}
