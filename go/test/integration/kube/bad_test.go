package kube_test

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"partita.dev/partita/test/integration/kubetest"
)

// TestBadObjects: the CRD schema refuses bad Queues and PodGroups; a pod
// that can never run is told why in an Event.
func TestBadObjects(t *testing.T) {
	e := newEnv(t)
	for name, tc := range map[string]struct {
		guaranteed, burst int64
		extra             map[string]any
		want              string
	}{
		"negative guarantee":        {-1, 0, nil, "guaranteedGPUs"},
		"burst below the guarantee": {4, 2, nil, "burstGPUs must be 0 (no borrowing) or at least guaranteedGPUs"},
		"zero weight":               {1, 0, map[string]any{"weight": 0}, "weight"},
		"empty team":                {1, 0, map[string]any{"team": ""}, "team"},
		"an unknown field is dropped, a wrong type is not": {1, 0, map[string]any{"guaranteedGPUs": "lots"}, "guaranteedGPUs"},
	} {
		err := e.createQueue("q-"+strings.ReplaceAll(name, " ", "-")[:10], tc.guaranteed, tc.burst, tc.extra)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an Invalid error naming %s", name, err, tc.want)
		}
	}
	if err := e.createQueue("fine", 0, 0, nil); err != nil {
		t.Errorf("a queue with no guarantee refused: %v", err)
	}
	if err := e.createPodGroup("empty", 0, ""); !apierrors.IsInvalid(err) {
		t.Errorf("PodGroup with minMember 0: got %v, want Invalid", err)
	}

	e.createNode(kubetest.NewMIGNode("mig-0", 0, map[string]int{"1g.10gb": 7}, map[string]string{kubetest.LabelGPUCount: "1"}))
	e.startScheduler(testOptions())
	e.createPod(podSpec{name: "odd", mig: "5g.99gb"})
	ev := e.waitEvent("odd", "FailedScheduling", `mig profile "5g.99gb": no GPU in the cluster offers it`)
	t.Logf("event: %s", ev.Message)
	e.createPod(podSpec{name: "nowhere", queue: "missing", gpus: 1})
	e.waitEvent("nowhere", "FailedScheduling", `queue "missing" does not exist`)
}
