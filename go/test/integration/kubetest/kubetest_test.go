package kubetest_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"partita.dev/partita/test/integration/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// TestBindGPUPod plays a secondary scheduler against a real API server:
// a pending pod for scheduler "partita" is bound with the pods/binding
// subresource, and the annotation on the Binding lands on the pod.
func TestBindGPUPod(t *testing.T) {
	ctx := t.Context()
	client := kubernetes.NewForConfigOrDie(kubetest.Start(t))

	node, err := client.CoreV1().Nodes().Create(ctx, kubetest.NewGPUNode("gpu-0", 8, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := node.Status.Allocatable[kubetest.ResourceGPU]; got.Value() != 8 {
		t.Fatalf("allocatable nvidia.com/gpu after create = %v, want 8", got.String())
	}
	// Status can be changed later only through the status subresource,
	// as the device plugin (via kubelet) does.
	node.Status.Allocatable[kubetest.ResourceGPU] = resource.MustParse("7")
	if node, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := node.Status.Allocatable[kubetest.ResourceGPU]; got.Value() != 7 {
		t.Fatalf("allocatable nvidia.com/gpu after UpdateStatus = %v, want 7", got.String())
	}

	mig, err := client.CoreV1().Nodes().Create(ctx, kubetest.NewMIGNode("mig-0", 1, map[string]int{"1g.10gb": 7}, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := mig.Status.Capacity[kubetest.MIGResource("1g.10gb")]; got.Value() != 7 {
		t.Fatalf("capacity nvidia.com/mig-1g.10gb = %v, want 7", got.String())
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "default"},
		Spec: corev1.PodSpec{
			SchedulerName: "partita",
			Containers: []corev1.Container{{
				Name:  "main",
				Image: "example.invalid/train",
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{kubetest.ResourceGPU: resource.MustParse("1")},
				},
			}},
		},
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "train",
			Annotations: map[string]string{"partita.dev/gpu-index": "3"},
		},
		Target: corev1.ObjectReference{Kind: "Node", Name: "gpu-0"},
	}
	if err := client.CoreV1().Pods("default").Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	got, err := client.CoreV1().Pods("default").Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != "gpu-0" {
		t.Errorf("nodeName = %q, want gpu-0", got.Spec.NodeName)
	}
	if a := got.Annotations["partita.dev/gpu-index"]; a != "3" {
		t.Errorf("annotation partita.dev/gpu-index = %q, want 3", a)
	}

	// A second bind must fail: this is what stops a restarted scheduler
	// from placing the same pod twice.
	binding.Target.Name = "mig-0"
	err = client.CoreV1().Pods("default").Bind(ctx, binding, metav1.CreateOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("second bind: got %v, want a Conflict error", err)
	}
	t.Logf("second bind refused as expected: %v", err)
}

// TestCRDValidation checks that CRDs are served and their OpenAPI schema is
// enforced by the in-process API server.
func TestCRDValidation(t *testing.T) {
	ctx := t.Context()
	cfg := kubetest.Start(t)

	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "queues.partita.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "partita.dev",
			Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "queues", Singular: "queue", Kind: "Queue", ListKind: "QueueList",
			},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{
					OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object",
						Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"spec": {
								Type: "object",
								Properties: map[string]apiextensionsv1.JSONSchemaProps{
									"guaranteedGPUs": {Type: "integer", Minimum: ptr.To(0.0)},
								},
							},
						},
					},
				},
			}},
		},
	}
	ext := apiextensionsclient.NewForConfigOrDie(cfg)
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The CRD is served only once the apiextensions controllers have
	// accepted its names and marked it Established.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD not established: %v", err)
	}

	queues := dynamic.NewForConfigOrDie(cfg).Resource(schema.GroupVersionResource{Group: "partita.dev", Version: "v1alpha1", Resource: "queues"})
	queue := func(name string, gpus int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "partita.dev/v1alpha1",
			"kind":       "Queue",
			"metadata":   map[string]any{"name": name},
			"spec":       map[string]any{"guaranteedGPUs": gpus},
		}}
	}

	// Discovery of a just-established CRD can lag a little; retry NotFound.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := queues.Create(ctx, queue("research", 16), metav1.CreateOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("create valid queue: %v", err)
	}

	_, err = queues.Create(ctx, queue("broken", -1), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("create queue with guaranteedGPUs=-1: got %v, want an Invalid error", err)
	}
	t.Logf("negative guaranteedGPUs refused as expected: %v", err)
}
