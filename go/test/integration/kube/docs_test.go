package kube_test

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/kube"
)

// TestDocsExamples keeps docs/kubernetes.md honest: its Queue, PodGroup
// and Job examples are created on a real API server with Partita's CRDs
// (kinds the server does not know, such as Kubeflow's, are skipped), the
// labels and annotations in its pod templates are the ones Partita reads,
// and its mig-parted example is a valid config under the name Partita
// would give it.
func TestDocsExamples(t *testing.T) {
	e := newEnv(t)
	text, err := os.ReadFile(repoFile("docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CoreV1().Namespaces().Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{
		kube.LabelPodGroup: true, kube.LabelQueue: true, kube.LabelCoschedulingPodGroup: true,
		kube.AnnotationMinMember: true, kube.AnnotationGPUMemory: true, kube.AnnotationGPUCompute: true,
		kube.AnnotationEstimatedRuntime: true, kube.AnnotationLastCheckpoint: true,
	}
	checkKeys := func(where string, m map[string]any) {
		for k := range m {
			if strings.HasPrefix(k, "partita.dev/") && !known[k] {
				t.Errorf("%s: %s is not a label or annotation Partita reads", where, k)
			}
		}
	}
	mapper := e.discoveryMapper()
	created := map[string]int{}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(text), -1)
	for i, b := range blocks {
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(b[1]), 4096)
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); err != nil {
				break
			}
			u := &unstructured.Unstructured{Object: obj}
			if _, ok := obj["mig-configs"]; ok {
				checkMIGExample(t, b[1])
				continue
			}
			for _, fields := range [][]string{{"metadata"}, {"spec", "template", "metadata"}} {
				for _, kind := range []string{"labels", "annotations"} {
					if m, ok, _ := unstructured.NestedMap(obj, append(fields, kind)...); ok {
						checkKeys("block "+strconv.Itoa(i), m)
					}
				}
			}
			if u.GetKind() == "" {
				continue // a fragment
			}
			gvk := u.GroupVersionKind()
			if err := e.create(mapper, u); errors.Is(err, errNotServed) {
				t.Logf("block %d: %s not served here, skipped", i, gvk)
				continue
			} else if err != nil {
				t.Errorf("block %d: %v", i, err)
				continue
			}
			created[gvk.Kind]++
			if gvk.Kind == "Job" {
				if s, _, _ := unstructured.NestedString(obj, "spec", "template", "spec", "schedulerName"); s != kube.DefaultSchedulerName {
					t.Errorf("the Job example's schedulerName is %q", s)
				}
			}
		}
	}
	for _, kind := range []string{"Queue", "PodGroup", "Job"} {
		if created[kind] == 0 {
			t.Errorf("no %s example was created", kind)
		}
	}
}

// checkMIGExample: the example config parses, every partita- entry
// carries the name Partita gives its content, and its layouts fit an
// H100-80GB.
func checkMIGExample(t *testing.T, text string) {
	t.Helper()
	c, err := kube.ParseMIGParted([]byte(text))
	if err != nil {
		t.Fatalf("mig-parted example: %v", err)
	}
	for name, specs := range c.MIGConfigs {
		if !strings.HasPrefix(name, "partita-") {
			continue
		}
		gpus, ok, err := kube.ExpandSpecs(specs, 8)
		if err != nil || slices.Contains(ok, false) {
			t.Fatalf("mig-parted example %s on 8 GPUs: %v (named %v)", name, err, ok)
		}
		if got := kube.ConfigName(gpus); got != name {
			t.Errorf("mig-parted example is named %s; Partita names that content %s", name, got)
		}
		for i, g := range gpus {
			if g.MIG {
				if _, err := kube.PackLayouts(gpu.Lookup("H100-80GB"), g.Counts, 1); err != nil {
					t.Errorf("mig-parted example %s GPU %d: %v", name, i, err)
				}
			}
		}
	}
}
