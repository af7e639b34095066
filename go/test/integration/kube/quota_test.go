package kube_test

import (
	"testing"
	"time"

	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"partita.dev/partita/test/integration/kubetest"
)

// TestQuotaAndBorrowing: a team borrows idle GPUs up to its burst, waits
// beyond it, and gives borrowed GPUs back, through evictions, when the
// owner of the guarantee asks.
func TestQuotaAndBorrowing(t *testing.T) {
	e := newEnv(t)
	e.createNode(kubetest.NewGPUNode("gpu-0", 4, nil))
	k := e.kubelet()
	if err := e.createQueue("research", 2, 4, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.createQueue("prod", 2, 2, nil); err != nil {
		t.Fatal(err)
	}
	e.startScheduler(testOptions())

	names := []string{"r0", "r1", "r2", "r3", "r4"}
	for _, n := range names {
		e.createPod(podSpec{name: n, queue: "research", gpus: 1})
		time.Sleep(10 * time.Millisecond) // distinct creation order
	}
	// Burst 4: four run (two of them borrowed), the fifth waits on quota.
	e.waitBound(names[:4]...)
	e.waitEvent("r4", "FailedScheduling", "quota")
	e.stayPending(500*time.Millisecond, "r4")
	e.eventually(15*time.Second, "queue status", func() (bool, error) {
		q, err := e.dyn.Resource(queueGVR).Get(e.ctx, "research", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		used, _, _ := unstructuredString(q.Object, "status", "usedGPUs")
		return used == "4.000", nil
	})

	// The owner of the other guarantee asks: two borrowed GPUs come back,
	// one eviction each. (One at a time: while the first claim's victim
	// exits its node is promised to it, and the engine then holds off a
	// second victim search for a while.)
	e.createPod(podSpec{name: "p0", queue: "prod", gpus: 1})
	e.waitBound("p0")
	e.createPod(podSpec{name: "p1", queue: "prod", gpus: 1})
	e.waitBound("p1")
	evicted := 0
	for _, n := range names[:4] {
		if k.wasEvicted(n) {
			evicted++
		}
	}
	if evicted != 2 {
		t.Fatalf("%d research pods evicted through the Eviction API, want 2", evicted)
	}
}

// TestPreemptionThroughEviction: production work evicts lower-priority
// work of its own team through the Eviction API, with the grace period.
func TestPreemptionThroughEviction(t *testing.T) {
	e := newEnv(t)
	e.createNode(kubetest.NewGPUNode("gpu-0", 2, nil))
	k := e.kubelet()
	for name, v := range map[string]int32{"batch": 0, "production": 1_000_000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v}
		if _, err := e.client.SchedulingV1().PriorityClasses().Create(e.ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.startScheduler(testOptions())
	e.createPod(podSpec{name: "b0", gpus: 1, priorityClass: "batch"})
	e.createPod(podSpec{name: "b1", gpus: 1, priorityClass: "batch"})
	e.waitBound("b0", "b1")

	e.createPod(podSpec{name: "serve", gpus: 1, priorityClass: "production"})
	e.waitBound("serve")
	victims := 0
	for _, n := range []string{"b0", "b1"} {
		if k.wasEvicted(n) {
			victims++
			e.waitEvent(n, "Preempted", "preempted for pod:default/serve")
		}
	}
	if victims != 1 {
		t.Fatalf("%d batch pods evicted, want exactly 1", victims)
	}
}
