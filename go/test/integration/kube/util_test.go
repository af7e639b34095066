package kube_test

import (
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"partita.dev/partita/internal/kube/api/v1alpha1"
)

var (
	pgGVR    = v1alpha1.PodGroupsGVR
	queueGVR = v1alpha1.QueuesGVR
)

func unstructuredString(obj map[string]any, fields ...string) (string, bool, error) {
	return unstructured.NestedString(obj, fields...)
}

// bindTo binds a pod as another scheduler would, without annotations.
func bindTo(t *testing.T, e *env, pod, node string) {
	t.Helper()
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := e.client.CoreV1().Pods("default").Bind(e.ctx, b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// rest2SA is the test's config impersonating Partita's ServiceAccount.
func rest2SA(e *env) *rest.Config {
	c := rest.CopyConfig(e.cfg)
	c.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:partita-system:partita",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:partita-system", "system:authenticated"},
	}
	return c
}
