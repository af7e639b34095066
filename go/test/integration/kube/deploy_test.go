package kube_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"partita.dev/partita/internal/kube"
	"partita.dev/partita/test/integration/kubetest"
)

// TestDeploymentManifests applies deploy/kubernetes/partita.yaml to an API
// server that enforces RBAC, then runs the scheduler as its
// ServiceAccount, with leader election and the health and metrics server:
// the least-privilege role must be enough to bind, evict, change a MIG
// layout and write status, and the admission policy must stop it from
// changing anything else on a node.
func TestDeploymentManifests(t *testing.T) {
	e := newEnv(t, "--authorization-mode=Node,RBAC")
	if _, err := e.client.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: migNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mapper := e.discoveryMapper()
	for _, u := range manifests(t, "partita.yaml") {
		if err := e.create(mapper, u); err != nil {
			t.Fatal(err)
		}
	}

	e.createNode(kubetest.NewGPUNode("gpu-0", 1, nil))
	e.createNode(kubetest.NewMIGNode("mig-0", 0, map[string]int{"1g.10gb": 7}, map[string]string{
		kubetest.LabelGPUCount: "1", kube.LabelMIGConfig: "all-1g.10gb", kube.LabelMIGConfigState: kube.MIGStateSuccess,
	}))
	if err := e.createQueue("team-a", 3, 4, nil); err != nil {
		t.Fatal(err)
	}
	k := e.kubelet()
	e.migManager()

	sa := rest2SA(e)
	addrs := make(chan string, 1)
	ro := kube.RunOptions{Options: testOptions(), LeaderElect: true, LeaseNamespace: "partita-system", LeaseName: "partita-scheduler",
		Identity: "replica-1", MetricsAddr: "127.0.0.1:0", OnListen: func(m, _ string) { addrs <- m }}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- kube.Run(ctx, sa, ro) }()
	t.Cleanup(func() { cancel(); <-done })
	metrics := "http://" + <-addrs

	e.eventually(30*time.Second, "lease held", func() (bool, error) {
		l, err := e.client.CoordinationV1().Leases("partita-system").Get(e.ctx, "partita-scheduler", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "replica-1", nil
	})
	e.createPod(podSpec{name: "batch", gpus: 1, queue: "team-a"})
	e.waitBound("batch")
	e.createPod(podSpec{name: "llm", mig: "3g.40gb", queue: "team-a"})
	e.waitBound("llm")
	// Preemption: a production pod takes the batch pod's GPU.
	e.createPod(podSpec{name: "serve", gpus: 1, queue: "team-a", priorityClass: "partita-production"})
	e.waitBound("serve")
	if !k.wasEvicted("batch") {
		t.Error("the batch pod was not evicted through the Eviction API")
	}
	e.eventually(15*time.Second, "queue status written", func() (bool, error) {
		q, err := e.dyn.Resource(queueGVR).Get(e.ctx, "team-a", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		used, _, _ := unstructuredString(q.Object, "status", "usedGPUs")
		return used != "", nil
	})

	// The admission policy: the ServiceAccount may set the MIG labels and
	// nothing else on a node.
	saClient := kubernetes.NewForConfigOrDie(sa)
	_, err := saClient.CoreV1().Nodes().Patch(e.ctx, "gpu-0", types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"mine"}}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
		t.Errorf("patching another node label: got %v, want it denied by the ValidatingAdmissionPolicy", err)
	}
	_, err = saClient.CoreV1().Nodes().Patch(e.ctx, "gpu-0", types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
		t.Errorf("cordoning a node: got %v, want it denied", err)
	}
	if _, err := saClient.CoreV1().Secrets("default").List(e.ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing secrets: got %v, want Forbidden", err)
	}

	for path, want := range map[string]string{
		"/healthz": "ok", "/readyz": "ok",
		"/metrics": `partita_kube_binds_total{result="ok"} 3`,
	} {
		resp, err := http.Get(metrics + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, want 200 with %q:\n%.2000s", path, resp.StatusCode, want, body)
		}
	}
	for _, forbidden := range []string{`result="forbidden"`, `result="error"`} {
		resp, _ := http.Get(metrics + "/metrics")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), forbidden) {
			t.Errorf("metrics report failed calls (%s):\n%s", forbidden, grepLines(string(body), "partita_kube"))
		}
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
