package kube_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"partita.dev/partita/internal/kube"
	"partita.dev/partita/test/integration/kubetest"
)

// TestRestartHalfway: the scheduler dies after binding half of a gang.
// Its successor binds the rest (the gang is not lost) and never tries to
// bind a pod already bound, and no device is given twice.
func TestRestartHalfway(t *testing.T) {
	e := newEnv(t)
	e.createNode(kubetest.NewGPUNode("gpu-0", 8, nil))
	e.kubelet()
	names := []string{"w0", "w1", "w2", "w3"}
	if err := e.createPodGroup("ring", 4, ""); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		e.createPod(podSpec{name: n, group: "ring", gpus: 2})
	}

	// The first scheduler gets two binds through, then every other bind
	// fails, and it is stopped: it died half-way through the gang.
	var mu sync.Mutex
	allowed := 2
	first := testOptions()
	first.BeforeBind = func(p *corev1.Pod) error {
		mu.Lock()
		defer mu.Unlock()
		if allowed == 0 {
			return errors.New("crashed")
		}
		allowed--
		return nil
	}
	s1 := e.startScheduler(first)
	e.eventually(30*time.Second, "two members bound", func() (bool, error) {
		bound := 0
		for _, n := range names {
			if e.pod(n).Spec.NodeName != "" {
				bound++
			}
		}
		return bound == 2, nil
	})
	s1.stop()

	var tried []string
	second := testOptions()
	second.BeforeBind = func(p *corev1.Pod) error {
		mu.Lock()
		defer mu.Unlock()
		tried = append(tried, p.Name)
		return nil
	}
	e.startScheduler(second)
	bound := e.waitBound(names...)
	mu.Lock()
	defer mu.Unlock()
	if len(tried) != 2 {
		t.Fatalf("the second scheduler tried to bind %v, want only the two pending members", tried)
	}
	gpus := map[string]string{}
	for _, n := range names {
		for _, g := range strings.Split(bound[n].Annotations[kube.AnnotationGPUs], ",") {
			if other, dup := gpus[g]; dup {
				t.Fatalf("GPU %s given to %s and %s", g, other, n)
			}
			gpus[g] = n
		}
	}
	if len(gpus) != 8 {
		t.Fatalf("GPUs %v, want all 8 given once", gpus)
	}
}
