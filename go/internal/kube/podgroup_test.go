package kube

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"partita.dev/partita/internal/kube/api/v1alpha1"
)

// A gang whose PodGroup the informer has not delivered yet is sized from
// the API server, not taken for pods of one (which would bind them one
// by one); one the server does not have either is asked for once.
func TestAPodGroupMissingFromTheCacheIsAskedFor(t *testing.T) {
	pg, err := v1alpha1.ToUnstructured(&v1alpha1.PodGroup{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "PodGroup"},
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "ns"},
		Spec:       v1alpha1.PodGroupSpec{MinMember: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.PodGroupsGVR: "PodGroupList", v1alpha1.QueuesGVR: "QueueList"}, pg)
	s := &Scheduler{opt: Options{SchedulerName: DefaultSchedulerName, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		dyn: dyn, noGroup: map[string]bool{}}
	gets := func() int {
		n := 0
		for _, a := range dyn.Actions() {
			if a.GetVerb() == "get" {
				n++
			}
		}
		return n
	}
	nodes := []*corev1.Node{gpuNode("n1", 4).obj(), gpuNode("n2", 4).obj()}
	obj := Objects{Nodes: nodes, Pods: []*corev1.Pod{
		pod("big-0").gpus(4).group("big").obj(), pod("big-1").gpus(4).group("big").obj(),
		pod("solo-0").gpus(1).group("solo").obj(),
		pod("ann-0").gpus(1).group("ann").ann(AnnotationMinMember, "2").obj(),
		pod("plain").gpus(1).obj(),
	}}
	s.confirmPodGroups(t.Context(), &obj)
	if len(obj.PodGroups) != 1 || obj.PodGroups[0].Name != "big" || obj.PodGroups[0].Spec.MinMember != 2 {
		t.Fatalf("PodGroups after the check: %+v, want big (minMember 2) from the server", obj.PodGroups)
	}
	// Asked: big (found) and solo (not found); not ann (sized by its
	// annotation) nor plain (no gang).
	if got := gets(); got != 2 {
		t.Errorf("%d GETs, want 2 (big, solo)", got)
	}
	snap := mustSnapshot(t, obj, SnapshotOptions{})
	if why := snap.Held["group:ns/big"]; why != "" {
		t.Errorf("big held: %q, want it a job of two", why)
	}
	for _, j := range snap.Jobs {
		if j.ID() == "group:ns/big" && j.Spec.GangSize != 2 {
			t.Errorf("big: gang of %d, want 2", j.Spec.GangSize)
		}
	}

	// The next cycle: big is in the cache now; solo, not found before,
	// is not asked for again.
	obj = Objects{Nodes: nodes, Pods: obj.Pods, PodGroups: obj.PodGroups}
	s.confirmPodGroups(t.Context(), &obj)
	if got := gets(); got != 2 {
		t.Errorf("second cycle: %d GETs in all, want still 2", got)
	}

	// The server failing: the gang's pending pods sit the cycle out.
	dyn.PrependReactor("get", "podgroups", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the server is busy")
	})
	obj = Objects{Nodes: nodes, Pods: []*corev1.Pod{pod("new-0").gpus(4).group("new").obj(), pod("plain-2").gpus(1).obj()}}
	s.confirmPodGroups(t.Context(), &obj)
	if len(obj.Pods) != 1 || obj.Pods[0].Name != "plain-2" {
		var names []string
		for _, p := range obj.Pods {
			names = append(names, p.Name)
		}
		t.Errorf("pods after a failed read: %v, want [plain-2]", names)
	}
}
