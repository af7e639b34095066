package kube_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"partita.dev/partita/internal/kube"
	"partita.dev/partita/test/integration/kubetest"
)

// TestBindsWithDevices: pods asking for whole GPUs, a MIG instance and a
// memory need are bound through pods/binding with the devices recorded in
// annotations, never two pods on one device.
func TestBindsWithDevices(t *testing.T) {
	e := newEnv(t)
	e.createNode(kubetest.NewGPUNode("gpu-0", 8, nil))
	e.createNode(kubetest.NewMIGNode("mig-0", 0, map[string]int{"1g.10gb": 7}, map[string]string{kubetest.LabelGPUCount: "1"}))
	e.kubelet()
	e.startScheduler(testOptions())

	e.createPod(podSpec{name: "train-a", gpus: 2})
	e.createPod(podSpec{name: "train-b", gpus: 4})
	e.createPod(podSpec{name: "infer", mig: "1g.10gb"})
	// No webhook in this test: the memory need is honoured by the
	// scheduler's bookkeeping, and the pod is told the device plugin
	// will not give it a device.
	e.createPod(podSpec{name: "embed", ann: map[string]string{kube.AnnotationGPUMemory: "5Gi"}})
	bound := e.waitBound("train-a", "train-b", "infer", "embed")

	used := map[string]bool{}
	for _, name := range []string{"train-a", "train-b"} {
		p := bound[name]
		if p.Spec.NodeName != "gpu-0" {
			t.Errorf("%s on %s, want gpu-0", name, p.Spec.NodeName)
		}
		gpus := strings.Split(p.Annotations[kube.AnnotationGPUs], ",")
		want := map[string]int{"train-a": 2, "train-b": 4}[name]
		if len(gpus) != want {
			t.Errorf("%s: %s=%q, want %d GPUs", name, kube.AnnotationGPUs, p.Annotations[kube.AnnotationGPUs], want)
		}
		for _, g := range gpus {
			if used[g] {
				t.Errorf("GPU %s given twice", g)
			}
			used[g] = true
		}
		if p.Annotations[kube.AnnotationJob] != "pod:default/"+name {
			t.Errorf("%s: job annotation %q", name, p.Annotations[kube.AnnotationJob])
		}
	}
	slices := map[string]bool{}
	for _, name := range []string{"infer", "embed"} {
		p := bound[name]
		s := p.Annotations[kube.AnnotationMIGSlice]
		if p.Spec.NodeName != "mig-0" || !strings.HasPrefix(s, "0:1g.10gb@") {
			t.Errorf("%s on %s with %s=%q, want a 1g.10gb instance on mig-0", name, p.Spec.NodeName, kube.AnnotationMIGSlice, s)
		}
		if slices[s] {
			t.Errorf("instance %s given twice", s)
		}
		slices[s] = true
	}
	e.waitEvent("train-a", "Scheduled", "assigned default/train-a to gpu-0 (GPUs")
	e.waitEvent("embed", "NoDeviceRequest", "admission webhook")
}

// TestGangAllOrNothing: a gang starts whole or not at all, and waits for
// all its members to exist.
func TestGangAllOrNothing(t *testing.T) {
	e := newEnv(t)
	e.createNode(kubetest.NewGPUNode("gpu-0", 4, nil))
	e.createNode(kubetest.NewGPUNode("gpu-1", 4, nil))
	e.kubelet()
	// Another scheduler's pod holds one GPU of gpu-0: Partita counts it.
	blocker := e.createPod(podSpec{name: "blocker", gpus: 1, scheduler: "default-scheduler"})
	bindTo(t, e, blocker.Name, "gpu-0")
	e.startScheduler(testOptions())

	if err := e.createPodGroup("big", 2, ""); err != nil {
		t.Fatal(err)
	}
	e.createPod(podSpec{name: "big-0", group: "big", gpus: 4})
	e.createPod(podSpec{name: "big-1", group: "big", gpus: 4})
	// Three of four pods of a gang declared by annotation.
	ann := map[string]string{kube.AnnotationMinMember: "4"}
	for _, n := range []string{"small-0", "small-1", "small-2"} {
		e.createPod(podSpec{name: n, group: "small", gpus: 1, ann: ann})
	}
	e.waitEvent("big-0", "FailedScheduling", "gang")
	e.waitEvent("small-0", "FailedScheduling", "gang: 3 of 4 pods exist")
	e.stayPending(time.Second, "big-0", "big-1", "small-0", "small-1", "small-2")

	// The last member arrives: the small gang fits on gpu-1 (or the free
	// GPUs of gpu-0) and starts whole.
	e.createPod(podSpec{name: "small-3", group: "small", gpus: 1, ann: ann})
	e.waitBound("small-0", "small-1", "small-2", "small-3")
	e.stayPending(500*time.Millisecond, "big-0", "big-1")

	// Room for the big gang: both members start.
	for _, n := range []string{"blocker", "small-0", "small-1", "small-2", "small-3"} {
		if err := e.client.CoreV1().Pods("default").Delete(e.ctx, n, *metav1.NewDeleteOptions(0)); err != nil {
			t.Fatal(err)
		}
	}
	bound := e.waitBound("big-0", "big-1")
	if bound["big-0"].Spec.NodeName == bound["big-1"].Spec.NodeName {
		t.Fatalf("both 4-GPU members on %s, which has 4 GPUs", bound["big-0"].Spec.NodeName)
	}
	e.eventually(15*time.Second, "PodGroup status Running", func() (bool, error) {
		pg, err := e.dyn.Resource(pgGVR).Namespace("default").Get(e.ctx, "big", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase, _, _ := unstructuredString(pg.Object, "status", "phase")
		return phase == "Running", nil
	})
}
