package kube

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestChooseDevice(t *testing.T) {
	h100 := map[string]int{"H100-80GB": 16}
	mixed := map[string]int{"H100-80GB": 8, "H200-141GB": 8, "L4": 4}
	tests := []struct {
		name     string
		peakMiB  int64
		compute  float64
		allowed  []string
		models   map[string]int
		want     string
		wantFail bool
	}{
		{"a small model takes 1g.10gb", 6 << 10, 0, nil, h100, "nvidia.com/mig-1g.10gb", false},
		{"headroom pushes 10 GiB to 1g.20gb", 10 << 10, 0, nil, h100, "nvidia.com/mig-1g.20gb", false},
		{"compute pushes to 2g", 6 << 10, 0.25, nil, h100, "nvidia.com/mig-2g.20gb", false},
		{"too big for MIG, fits a whole L4? no: 70 GiB on H100 is 7g", 70 << 10, 0, nil, h100, "nvidia.com/mig-7g.80gb", false},
		{"the H200's 1g.18gb holds 14 GiB in one memory slice, the H100 needs two", 14 << 10, 0, nil, mixed, "nvidia.com/mig-1g.18gb", false},
		{"the product selector limits the models", 14 << 10, 0, []string{"H100-80GB"}, mixed, "nvidia.com/mig-1g.20gb", false},
		{"only a non-MIG model: a whole GPU", 10 << 10, 0, []string{"L4"}, mixed, "nvidia.com/gpu", false},
		{"nothing holds it", 200 << 10, 0, nil, mixed, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := ChooseDevice(tc.peakMiB, tc.compute, 0.1, tc.allowed, tc.models)
			if (err != nil) != tc.wantFail || got != tc.want {
				t.Fatalf("got %q err %v, want %q (fail %v)", got, err, tc.want, tc.wantFail)
			}
		})
	}
}

func TestWebhookPatchesMemoryPods(t *testing.T) {
	nodes := []*corev1.Node{gpuNode("a", 8).obj()}
	wh := &Webhook{SchedulerName: DefaultSchedulerName, Headroom: 0.1, Nodes: func() ([]*corev1.Node, error) { return nodes, nil }}
	review := func(p *corev1.Pod) *admissionv1.AdmissionResponse {
		raw, _ := json.Marshal(p)
		body, _ := json.Marshal(admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{UID: "u1", Object: runtime.RawExtension{Raw: raw}}})
		rec := httptest.NewRecorder()
		wh.ServeHTTP(rec, httptest.NewRequest("POST", WebhookPath, bytes.NewReader(body)))
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("response %q: %v", rec.Body.String(), err)
		}
		if !out.Response.Allowed || out.Response.UID != "u1" {
			t.Fatalf("response %+v", out.Response)
		}
		return out.Response
	}
	// 12 GiB plus 5% headroom needs the 2 memory slices of a 1g.20gb.
	resp := review(pod("p").ann(AnnotationGPUMemory, "12Gi").obj())
	patch := string(resp.Patch)
	for _, want := range []string{
		// The pod has no limits at all: the map is added whole.
		`{"op":"add","path":"/spec/containers/0/resources/limits","value":{"nvidia.com/mig-1g.20gb":"1"}}`,
		`{"op":"add","path":"/spec/containers/0/resources/requests/nvidia.com~1mig-1g.20gb","value":"1"}`,
		`"path":"/metadata/annotations/partita.dev~1mig-profile","value":"1g.20gb"`,
	} {
		if !strings.Contains(patch, want) {
			t.Errorf("patch %s lacks %s", patch, want)
		}
	}
	for name, p := range map[string]*corev1.Pod{
		"a pod that asks for a device":       pod("p").gpus(1).ann(AnnotationGPUMemory, "18Gi").obj(),
		"another scheduler's pod":            pod("p").scheduler("default-scheduler").ann(AnnotationGPUMemory, "18Gi").obj(),
		"a pod without the annotation":       pod("p").obj(),
		"a pod with a bad annotation":        pod("p").ann(AnnotationGPUMemory, "x").obj(),
		"a pod nothing in the cluster holds": pod("p").ann(AnnotationGPUMemory, "500Gi").obj(),
	} {
		if resp := review(p); len(resp.Patch) != 0 {
			t.Errorf("%s: patched %s", name, resp.Patch)
		}
	}
}
