package kube

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"partita.dev/partita/internal/gpu"
)

// The admission webhook turns a memory need into a device request. A
// pod's resources cannot change after it is created, and under the GPU
// Operator's mixed strategy the device plugin hands a MIG instance only to
// a pod whose spec requests nvidia.com/mig-<profile>; so the profile must
// be chosen when the pod is created. The webhook does that for pods of
// Partita's scheduler that carry partita.dev/gpu-memory and request no
// NVIDIA resource: it adds nvidia.com/mig-<profile>: 1 (or, where no MIG
// GPU holds the need, nvidia.com/gpu: 1) to the first container and
// records the choice in partita.dev/mig-profile.

// WebhookPath is where the webhook is served.
const WebhookPath = "/mutate-pods"

// ChooseDevice picks the device request for a memory need on the cluster's
// GPU models (models: the nodes' models, with how many GPUs each has):
// among MIG-capable models the pod may use, the smallest profile that
// holds peak memory (plus headroom) and the compute share (fewest memory
// slices, then fewest compute slices; ties to the model with more GPUs,
// then by name); else one whole GPU of a model big enough. The engine then
// places the pod like any pod asking for that resource, on any model that
// offers the profile.
func ChooseDevice(peakMiB int64, compute, headroom float64, allowed []string, models map[string]int) (resourceName string, profile string, err error) {
	names := make([]string, 0, len(models))
	for n := range models {
		if len(allowed) == 0 || slices.Contains(allowed, n) {
			names = append(names, n)
		}
	}
	sort.Slice(names, func(a, b int) bool {
		if models[names[a]] != models[names[b]] {
			return models[names[a]] > models[names[b]]
		}
		return names[a] < names[b]
	})
	var best *gpu.Profile
	for _, n := range names {
		m := gpu.Lookup(n)
		if !m.MIG {
			continue
		}
		p, err := m.ProfileFor(peakMiB, compute, headroom)
		if err != nil {
			continue
		}
		if best == nil || p.Memory < best.Memory || p.Memory == best.Memory && p.Compute < best.Compute {
			best = p
		}
	}
	if best != nil {
		return ResourceMIGPrefix + best.Name, best.Name, nil
	}
	need := float64(peakMiB) * (1 + headroom)
	for _, n := range names {
		if m := gpu.Lookup(n); m.MemoryMiB > 0 && float64(m.MemoryMiB) >= need {
			return ResourceGPU, "", nil
		}
	}
	return "", "", fmt.Errorf("no GPU model in the cluster (%s) holds %d MiB", strings.Join(names, ", "), peakMiB)
}

// Webhook is the mutating admission webhook's HTTP handler.
type Webhook struct {
	SchedulerName string
	Headroom      float64
	// Nodes lists the cluster's nodes (the scheduler's informer).
	Nodes func() ([]*corev1.Node, error)
}

// ServeHTTP answers an AdmissionReview. It never refuses a pod: a pod it
// cannot size goes through unchanged and the scheduler says why it waits.
func (w *Webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(rw, "want an admission.k8s.io/v1 AdmissionReview", http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	var pod corev1.Pod
	if err := json.Unmarshal(review.Request.Object.Raw, &pod); err != nil {
		resp.Warnings = []string{"partita: pod not readable: " + err.Error()}
	} else if patch, warn := w.Mutate(&pod); len(patch) > 0 {
		data, _ := json.Marshal(patch)
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = data, &pt
	} else if warn != "" {
		resp.Warnings = []string{warn}
	}
	out := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Response: resp}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(out)
}

// jsonPatchOp is one RFC 6902 operation.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// Mutate returns the JSON patch that adds the device request to a pod, or
// none with a warning saying why not.
func (w *Webhook) Mutate(p *corev1.Pod) ([]jsonPatchOp, string) {
	if p.Spec.SchedulerName != w.SchedulerName || len(p.Spec.Containers) == 0 {
		return nil, ""
	}
	if _, ok := p.Annotations[AnnotationGPUMemory]; !ok {
		return nil, ""
	}
	if whole, mig := gpuResources(p); whole > 0 || len(mig) > 0 {
		return nil, "" // asks for devices itself: honoured as is
	}
	peak, compute, err := MemoryNeed(p.Annotations)
	if err != nil {
		return nil, "partita: " + err.Error()
	}
	nodes, err := w.Nodes()
	if err != nil {
		return nil, "partita: nodes not readable: " + err.Error()
	}
	models := map[string]int{}
	for _, n := range nodes {
		v := ViewNode(n, NodeOptions{})
		if v.Spec.GPUs > 0 {
			models[v.Spec.GPUModel] += v.Spec.GPUs
		}
	}
	var allowed []string
	if prod, ok := p.Spec.NodeSelector[LabelGPUProduct]; ok {
		allowed = []string{gpu.Lookup(prod).Name}
	}
	name, profile, err := ChooseDevice(peak, compute, w.Headroom, allowed, models)
	if err != nil {
		return nil, "partita: " + err.Error()
	}
	return devicePatch(p, name, profile), ""
}

// devicePatch adds name: 1 to the first container's limits and requests
// and the chosen profile to the annotations.
func devicePatch(p *corev1.Pod, name, profile string) []jsonPatchOp {
	one := resource.MustParse("1")
	c := p.Spec.Containers[0]
	var ops []jsonPatchOp
	for _, field := range []struct {
		path string
		list corev1.ResourceList
	}{{"limits", c.Resources.Limits}, {"requests", c.Resources.Requests}} {
		base := "/spec/containers/0/resources/" + field.path
		if field.list == nil {
			ops = append(ops, jsonPatchOp{Op: "add", Path: base, Value: map[string]string{name: one.String()}})
		} else {
			ops = append(ops, jsonPatchOp{Op: "add", Path: base + "/" + escapePointer(name), Value: one.String()})
		}
	}
	if profile != "" {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations/" + escapePointer(AnnotationMIGProfile), Value: profile})
	}
	return ops
}

// escapePointer escapes a JSON pointer segment (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
