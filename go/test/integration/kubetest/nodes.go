package kubetest

import (
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Resource and label names published by the NVIDIA device plugin and GPU
// Feature Discovery (GFD) on real GPU nodes.
const (
	ResourceGPU = corev1.ResourceName("nvidia.com/gpu")

	LabelGPUProduct  = "nvidia.com/gpu.product"
	LabelGPUCount    = "nvidia.com/gpu.count"
	LabelGPUMemory   = "nvidia.com/gpu.memory" // MiB per GPU
	LabelMIGCapable  = "nvidia.com/mig.capable"
	LabelMIGStrategy = "nvidia.com/mig.strategy"
)

// MIGResource is the extended resource a pod requests for one MIG slice of
// the given profile under the mixed strategy, e.g. "nvidia.com/mig-1g.10gb".
func MIGResource(profile string) corev1.ResourceName {
	return corev1.ResourceName("nvidia.com/mig-" + profile)
}

// NewGPUNode returns a Ready node with gpus whole H100 80GB GPUs, as the
// device plugin and GFD would describe it: status.capacity and allocatable
// for cpu, memory, pods and nvidia.com/gpu, plus the GFD labels. labels are
// applied last, so they can override the defaults (e.g. the product).
//
// Nodes accept status on create, so client.CoreV1().Nodes().Create keeps the
// capacity; later changes need UpdateStatus.
func NewGPUNode(name string, gpus int, labels map[string]string) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
		ResourceGPU:           *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				corev1.LabelHostname: name,
				LabelGPUProduct:      "NVIDIA-H100-80GB-HBM3",
				LabelGPUCount:        strconv.Itoa(gpus),
				LabelGPUMemory:       "81559",
				LabelMIGCapable:      "true",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    res,
			Allocatable: res.DeepCopy(),
			Conditions: []corev1.NodeCondition{{
				Type:               corev1.NodeReady,
				Status:             corev1.ConditionTrue,
				Reason:             "KubeletReady",
				LastHeartbeatTime:  metav1.Now(),
				LastTransitionTime: metav1.Now(),
			}},
		},
	}
	maps.Copy(n.Labels, labels)
	return n
}

// NewMIGNode returns a node as it looks under the GPU Operator's mixed MIG
// strategy: wholeGPUs GPUs without MIG are still advertised as
// nvidia.com/gpu, and each MIG slice profile as its own resource, e.g.
// slices = {"1g.10gb": 7} gives capacity nvidia.com/mig-1g.10gb: 7 and the
// GFD label nvidia.com/mig-1g.10gb.count=7. labels are applied last.
func NewMIGNode(name string, wholeGPUs int, slices map[string]int, labels map[string]string) *corev1.Node {
	n := NewGPUNode(name, wholeGPUs, nil)
	n.Labels[LabelMIGStrategy] = "mixed"
	for profile, count := range slices {
		q := *resource.NewQuantity(int64(count), resource.DecimalSI)
		n.Status.Capacity[MIGResource(profile)] = q
		n.Status.Allocatable[MIGResource(profile)] = q.DeepCopy()
		n.Labels["nvidia.com/mig-"+profile+".count"] = strconv.Itoa(count)
	}
	maps.Copy(n.Labels, labels)
	return n
}
