package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"partita.dev/partita/internal/workload"
)

func TestDemandOf(t *testing.T) {
	tests := []struct {
		name    string
		pod     *corev1.Pod
		want    string // workload.Demand.String()
		wantErr string
	}{
		{"no GPU", pod("p").obj(), "no GPU", ""},
		{"whole GPUs", pod("p").gpus(4).obj(), "4 GPU", ""},
		{"a MIG instance", pod("p").migProfile("3g.40gb").obj(), "MIG 3g.40gb", ""},
		{"a MIG request wins over the memory annotation", pod("p").migProfile("1g.10gb").ann(AnnotationGPUMemory, "40Gi").obj(), "MIG 1g.10gb", ""},
		{"memory and compute", pod("p").ann(AnnotationGPUMemory, "20Gi").ann(AnnotationGPUCompute, "0.3").obj(), "20480 MiB peak, 0.30 compute", ""},
		{"memory in decimal units", pod("p").ann(AnnotationGPUMemory, "1G").obj(), "954 MiB peak, 0.00 compute", ""},
		{"the model from the GFD product selector", func() *corev1.Pod {
			p := pod("p").gpus(1).obj()
			p.Spec.NodeSelector = map[string]string{LabelGPUProduct: "NVIDIA-A100-SXM4-80GB"}
			return p
		}(), "1 GPU on A100-80GB", ""},
		{"GPUs and MIG together", pod("p").gpus(1).migProfile("1g.10gb").obj(), "", "a pod takes whole GPUs or one MIG instance"},
		{"two MIG profiles", pod("p").migProfile("1g.10gb").migProfile("2g.20gb").obj(), "", "2 profiles"},
		{"two instances of a profile", pod("p").limit(ResourceMIGPrefix+"1g.10gb", 2).obj(), "", "2 instances"},
		{"memory that is not a quantity", pod("p").ann(AnnotationGPUMemory, "lots").obj(), "", "not a quantity"},
		{"negative memory", pod("p").ann(AnnotationGPUMemory, "-1Gi").obj(), "", "must be positive"},
		{"compute above 1", pod("p").ann(AnnotationGPUMemory, "1Gi").ann(AnnotationGPUCompute, "1.5").obj(), "", "from 0 to 1"},
		{"compute NaN", pod("p").ann(AnnotationGPUMemory, "1Gi").ann(AnnotationGPUCompute, "NaN").obj(), "", "from 0 to 1"},
		{"compute without memory", pod("p").ann(AnnotationGPUCompute, "0.5").obj(), "", "needs " + AnnotationGPUMemory},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := DemandOf(tc.pod)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.String() != tc.want {
				t.Fatalf("demand %q, want %q", d, tc.want)
			}
		})
	}
}

func TestPodRequests(t *testing.T) {
	p := pod("p").obj()
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
	}})
	always := corev1.ContainerRestartPolicyAlways
	p.Spec.InitContainers = []corev1.Container{
		{Name: "sidecar", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}},
		{Name: "big-init", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}}},
	}
	p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}
	cpu, mem := PodRequests(p)
	if cpu != 1650 || mem != 8192 {
		t.Fatalf("requests %dm / %d MiB, want 1650m / 8192 MiB", cpu, mem)
	}
}

func TestClassOf(t *testing.T) {
	for _, tc := range []struct {
		prio *int32
		want workload.Class
	}{
		{nil, workload.Batch},
		{ptr(int32(0)), workload.Batch},
		{ptr(int32(-1)), workload.BestEffort},
		{ptr(int32(999_999)), workload.Batch},
		{ptr(int32(ProductionPriority)), workload.Production},
		{ptr(int32(2_000_000_000)), workload.Production},
	} {
		p := pod("p").obj()
		p.Spec.Priority = tc.prio
		if got := ClassOf(p); got != tc.want {
			t.Errorf("priority %v: class %s, want %s", tc.prio, got, tc.want)
		}
	}
}

func TestCheckConstraints(t *testing.T) {
	p := pod("p").obj()
	p.Spec.NodeSelector = map[string]string{LabelGPUProduct: "NVIDIA-H100-80GB-HBM3"}
	if err := CheckConstraints(p); err != nil {
		t.Fatalf("GPU product selector refused: %v", err)
	}
	p.Spec.NodeSelector["zone"] = "a"
	if err := CheckConstraints(p); err == nil || !strings.Contains(err.Error(), "zone") {
		t.Fatalf("other selector: err %v, want one naming it", err)
	}
	p = pod("p").obj()
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{}}}
	if err := CheckConstraints(p); err == nil {
		t.Fatal("required node affinity accepted")
	}
}

func ptr[T any](v T) *T { return &v }
