package kube

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine/sched"
)

// act carries a decision out and returns the reasons of jobs it could not
// start as decided (waiting for a MIG change). Order matters:
//
//  1. MIG changes: each node's changes become one mig-parted config and
//     one label. A start that needs a MIG instance that does not exist
//     yet is a change too: the instance can only be made by the MIG
//     manager, so the job waits for it instead of binding.
//  2. Binds, then evictions, concurrently through a bounded pool; binds of
//     a gang go out together. The engine checked the whole plan on its
//     copy of the cluster, so the order between pods does not matter.
func (s *Scheduler) act(ctx context.Context, snap *Snapshot, d sched.Decision) map[string]string {
	waits := map[string]string{}
	starts := map[string][]sched.Start{}
	var order []string
	for _, st := range d.Starts {
		if _, seen := starts[st.Job]; !seen {
			order = append(order, st.Job)
		}
		starts[st.Job] = append(starts[st.Job], st)
	}
	creating := map[string]bool{} // jobs that need a new instance
	for job, sts := range starts {
		for _, st := range sts {
			if st.Creates {
				creating[job] = true
			}
		}
	}
	changed := s.changeMIG(ctx, snap, d, starts, creating, waits)
	pool := newPool(s.opt.BindWorkers)
	for _, job := range order {
		if creating[job] {
			continue
		}
		for _, st := range starts[job] {
			pods := snap.JobPods[job]
			if st.Task >= len(pods) {
				continue
			}
			p, a := pods[st.Task], st.Assignment
			pool.run(func() { s.bind(ctx, p, job, a) })
		}
	}
	for _, pr := range d.Preemptions {
		for _, p := range snap.JobPods[pr.Job] {
			s.mu.Lock()
			_, assumed := s.assumed[p.UID]
			s.mu.Unlock()
			if p.Spec.NodeName == "" && !assumed {
				continue
			}
			p, pr := p, pr
			pool.run(func() { s.evict(ctx, p, pr) })
		}
	}
	pool.wait()
	for job, node := range changed {
		s.waitFor[job] = node
	}
	// A hold ends when its node's change is done (or failed: the job goes
	// back to the engine, which sees the node cordoned).
	for job, node := range s.waitFor {
		if v := snap.Views[node]; changed[job] == "" && (v == nil || !v.MIGChanging) {
			delete(s.waitFor, job)
		}
	}
	return waits
}

// pool runs functions on at most n goroutines.
type pool struct {
	sem chan struct{}
	wg  sync.WaitGroup
}

func newPool(n int) *pool { return &pool{sem: make(chan struct{}, n)} }

func (p *pool) run(f func()) {
	p.sem <- struct{}{}
	p.wg.Add(1)
	go func() {
		defer func() { <-p.sem; p.wg.Done() }()
		f()
	}()
}

func (p *pool) wait() { p.wg.Wait() }

// bind binds one pod through pods/binding, with the devices in the
// Binding's annotations (they land on the pod in the same write). The
// API server refuses a second bind of a pod, so a restarted or
// duplicated scheduler can never place a pod twice.
func (s *Scheduler) bind(ctx context.Context, p *corev1.Pod, job string, a cluster.Assignment) {
	if s.opt.BeforeBind != nil {
		if err := s.opt.BeforeBind(p); err != nil {
			s.metrics.binds.WithLabelValues("skipped").Inc()
			return
		}
	}
	ann := DeviceAnnotations(a)
	ann[AnnotationJob] = job
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, Annotations: ann},
		Target:     corev1.ObjectReference{Kind: "Node", Name: a.Node},
	}
	err := s.client.CoreV1().Pods(p.Namespace).Bind(ctx, b, metav1.CreateOptions{})
	if err != nil {
		s.metrics.binds.WithLabelValues(errorClass(err)).Inc()
		s.opt.Logger.Info("bind failed", "pod", TaskName(p), "node", a.Node, "err", err)
		return
	}
	s.metrics.binds.WithLabelValues("ok").Inc()
	s.mu.Lock()
	s.assumed[p.UID] = assumedBind{Assumed: Assumed{Node: a.Node, Annotations: ann}, at: time.Now()}
	s.mu.Unlock()
	s.recorder.Eventf(p, corev1.EventTypeNormal, "Scheduled", "partita: assigned %s to %s%s", TaskName(p), a.Node, describeDevices(ann))
	if _, memOnly := p.Annotations[AnnotationGPUMemory]; memOnly && ann[AnnotationMIGSlice] != "" {
		if whole, mig := gpuResources(p); whole == 0 && len(mig) == 0 {
			// No nvidia.com resource in the spec: the stock device plugin
			// gives this pod no GPU (see docs/kubernetes.md, "memory").
			s.recorder.Event(p, corev1.EventTypeWarning, "NoDeviceRequest",
				"partita: the pod asks for GPU memory by annotation only; its MIG instance is recorded in "+AnnotationMIGSlice+
					" but the NVIDIA device plugin gives a pod only what its spec requests: enable Partita's admission webhook")
		}
	}
}

func describeDevices(ann map[string]string) string {
	var parts []string
	if g := ann[AnnotationGPUs]; g != "" {
		parts = append(parts, "GPUs "+g)
	}
	if m := ann[AnnotationMIGSlice]; m != "" {
		parts = append(parts, "MIG instance "+m)
	}
	if sh := ann[AnnotationGPUShare]; sh != "" {
		parts = append(parts, "GPU share "+sh)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// evict asks the Eviction API to remove a victim with the engine's grace
// period; the API honours PodDisruptionBudgets (a refusal is retried next
// cycle, since the engine still wants the room).
func (s *Scheduler) evict(ctx context.Context, p *corev1.Pod, pr sched.Preemption) {
	grace := int64(pr.Grace / time.Second)
	ev := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &p.UID}},
	}
	err := s.client.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
	if err != nil && !apierrors.IsNotFound(err) {
		s.metrics.evictions.WithLabelValues(errorClass(err)).Inc()
		s.opt.Logger.Info("eviction failed", "pod", TaskName(p), "err", err)
		if apierrors.IsTooManyRequests(err) {
			s.recorder.Event(p, corev1.EventTypeWarning, "PreemptionBlocked", "partita: eviction refused (PodDisruptionBudget): "+err.Error())
		}
		return
	}
	s.metrics.evictions.WithLabelValues("ok").Inc()
	s.mu.Lock()
	s.evicting[p.UID] = time.Now()
	s.mu.Unlock()
	s.recorder.Eventf(p, corev1.EventTypeNormal, "Preempted", "partita: %s; grace %s", pr.Reason, pr.Grace)
}

// errorClass labels a failed API call for metrics.
func errorClass(err error) string {
	switch {
	case apierrors.IsConflict(err):
		return "conflict"
	case apierrors.IsNotFound(err):
		return "not-found"
	case apierrors.IsTooManyRequests(err):
		return "too-many-requests"
	case apierrors.IsForbidden(err):
		return "forbidden"
	}
	return "error"
}
