// Package v1alpha1 holds Partita's custom resources, group partita.dev,
// version v1alpha1: Queue (a team's share of the cluster) and PodGroup (a
// gang of pods that start together).
//
// The CRD manifests with their OpenAPI validation live in
// deploy/kubernetes/crds.yaml, generated from the Rust types
// (src/k8s/resources.rs, `partita crdgen`); the API server enforces them, so the
// scheduler can trust field ranges of objects it reads (it still checks,
// since an older CRD may be installed). There is no generated clientset:
// the scheduler reads these objects through the dynamic client and
// converts them with FromUnstructured.
package v1alpha1

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and Version of the API.
const (
	Group   = "partita.dev"
	Version = "v1alpha1"
)

// GroupVersion, and the resources as the dynamic client names them.
var (
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}
	QueuesGVR    = GroupVersion.WithResource("queues")
	PodGroupsGVR = GroupVersion.WithResource("podgroups")
)

// Queue is a team's share of the cluster's GPUs. Cluster-scoped: a pod
// names its queue with the label partita.dev/queue (or through its
// PodGroup).
type Queue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              QueueSpec   `json:"spec"`
	Status            QueueStatus `json:"status,omitempty"`
}

// QueueSpec is what the team is promised.
type QueueSpec struct {
	// Team owns the queue (reports and accounting group by it).
	Team string `json:"team"`
	// GuaranteedGPUs the team can always get: when it asks, borrowers are
	// preempted to make room. A MIG slice counts as its compute share.
	GuaranteedGPUs int64 `json:"guaranteedGPUs"`
	// BurstGPUs is the most the team may hold, borrowed capacity included;
	// 0 or unset means the guarantee is also the limit.
	BurstGPUs int64 `json:"burstGPUs,omitempty"`
	// Weight orders teams above their guarantee: GPU held over weight.
	Weight float64 `json:"weight,omitempty"`
	// AllowedPriorityClasses, when not empty, lists the PriorityClass
	// names the queue's pods may use; a pod with another waits, with an
	// Event saying why.
	AllowedPriorityClasses []string `json:"allowedPriorityClasses,omitempty"`
}

// QueueStatus is written by the scheduler.
type QueueStatus struct {
	// UsedGPUs is what the queue's running pods hold, in GPUs (a MIG
	// slice counts its compute share), as a decimal string: "3.429".
	UsedGPUs    string `json:"usedGPUs,omitempty"`
	RunningPods int    `json:"runningPods"`
	PendingPods int    `json:"pendingPods"`
}

// QueueList is a list of Queues.
type QueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Queue `json:"items"`
}

// PodGroup is a gang: its pods (those labelled partita.dev/pod-group with
// the group's name, in its namespace) start together, at least MinMember
// of them at once, or not at all.
type PodGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PodGroupSpec   `json:"spec"`
	Status            PodGroupStatus `json:"status,omitempty"`
}

// PodGroupSpec says how many pods make the gang and whose queue it uses.
type PodGroupSpec struct {
	MinMember int32  `json:"minMember"`
	Queue     string `json:"queue,omitempty"`
}

// PodGroup phases, as the scheduler writes them.
const (
	PodGroupPending = "Pending" // waiting for members or for room
	PodGroupRunning = "Running" // at least MinMember members are bound
)

// PodGroupStatus is written by the scheduler.
type PodGroupStatus struct {
	Phase string `json:"phase,omitempty"`
	// Scheduled counts members bound to nodes.
	Scheduled int32 `json:"scheduled"`
	// Message says why the group waits, when it does.
	Message string `json:"message,omitempty"`
}

// PodGroupList is a list of PodGroups.
type PodGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodGroup `json:"items"`
}

// Validate checks what the CRD schema checks, for objects read from a
// cluster whose CRD may be older than this binary.
func (q *Queue) Validate() error {
	s := q.Spec
	switch {
	case s.GuaranteedGPUs < 0:
		return fmt.Errorf("queue %s: spec.guaranteedGPUs %d is negative", q.Name, s.GuaranteedGPUs)
	case s.BurstGPUs < 0:
		return fmt.Errorf("queue %s: spec.burstGPUs %d is negative", q.Name, s.BurstGPUs)
	case s.BurstGPUs != 0 && s.BurstGPUs < s.GuaranteedGPUs:
		return fmt.Errorf("queue %s: spec.burstGPUs %d is below spec.guaranteedGPUs %d", q.Name, s.BurstGPUs, s.GuaranteedGPUs)
	case s.Weight < 0:
		return fmt.Errorf("queue %s: spec.weight %g is negative", q.Name, s.Weight)
	}
	return nil
}

// Validate checks what the CRD schema checks.
func (g *PodGroup) Validate() error {
	if g.Spec.MinMember < 1 {
		return fmt.Errorf("podgroup %s/%s: spec.minMember %d must be at least 1", g.Namespace, g.Name, g.Spec.MinMember)
	}
	return nil
}

// FromUnstructured converts an object read through the dynamic client
// (or an informer of it) into one of this package's types.
func FromUnstructured[T any](obj any) (*T, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("want *unstructured.Unstructured, got %T", obj)
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return out, nil
}

// ToUnstructured converts a typed object for the dynamic client.
func ToUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
