package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/kube/api/v1alpha1"
)

// cycle is one turn of the loop:
//
//  1. Objects: read the informers' caches, overlaid with what this
//     scheduler did that they do not show yet (binds, evictions, MIG
//     labels).
//  2. Snapshot: translate them into the engine's input.
//  3. Decide: run the engine's cycle.
//  4. Act: MIG changes first, then binds and evictions, concurrently.
//  5. Report: an Event to each pod whose reason to wait changed.
func (s *Scheduler) cycle(ctx context.Context) error {
	began := time.Now()
	obj, err := s.objects(began)
	if err != nil {
		return err
	}
	s.confirmPodGroups(ctx, &obj)
	snap, err := BuildSnapshot(obj, s.snapshotOptions())
	if err != nil {
		return err
	}
	s.placed = snap.Placed
	for _, u := range snap.Unaccounted {
		s.opt.Logger.Warn("pod not accounted", "pod", u)
	}
	in := sched.Input{Now: began.Sub(Epoch), Cluster: snap.State, Teams: snap.Teams, Jobs: snap.Jobs}
	decided := time.Now()
	d := s.engine.Cycle(in)
	s.metrics.engineSeconds.Observe(time.Since(decided).Seconds())
	s.opt.Logger.Debug("cycle", "nodes", snap.State.Len(), "jobs", len(snap.Jobs), "held", len(snap.Held),
		"starts", len(d.Starts), "preemptions", len(d.Preemptions), "reconfigs", len(d.Reconfigs), "waiting", len(d.Waiting))
	for id, why := range snap.Held {
		s.opt.Logger.Debug("held", "job", id, "why", why)
	}
	for id, w := range d.Waiting {
		s.opt.Logger.Debug("waiting", "job", id, "why", w.Reason)
	}
	if len(d.Waiting) > 0 && snap.State.Len() <= 4 {
		for i := 0; i < snap.State.Len(); i++ {
			s.opt.Logger.Debug("node", "state", snap.State.Node(i).Describe(), "view", fmt.Sprintf("%+v", *snap.Views[snap.State.Node(i).Name]))
		}
	}
	acting := time.Now()
	waits := s.act(ctx, snap, d)
	if len(d.Starts)+len(d.Preemptions)+len(d.Reconfigs) > 0 {
		s.opt.Logger.Info("cycle", "starts", len(d.Starts), "preemptions", len(d.Preemptions), "reconfigs", len(d.Reconfigs),
			"waiting", len(d.Waiting)+len(snap.Held), "snapshot", decided.Sub(began).Round(time.Millisecond),
			"engine", acting.Sub(decided).Round(time.Millisecond), "act", time.Since(acting).Round(time.Millisecond))
	}
	s.report(snap, d, waits)
	s.statuses.set(summarize(snap, d))
	s.metrics.cycles.Inc()
	s.metrics.cycleSeconds.Observe(time.Since(began).Seconds())
	return nil
}

// objects reads the caches and overlays this scheduler's recent actions.
func (s *Scheduler) objects(now time.Time) (Objects, error) {
	var obj Objects
	var err error
	if obj.Pods, err = s.pods.List(labels.Everything()); err != nil {
		return obj, err
	}
	if obj.Nodes, err = s.nodes.List(labels.Everything()); err != nil {
		return obj, err
	}
	for _, x := range s.listDynamic(s.queues) {
		if q, err := v1alpha1.FromUnstructured[v1alpha1.Queue](x); err == nil {
			obj.Queues = append(obj.Queues, q)
		}
	}
	for _, x := range s.listDynamic(s.podGroups) {
		if pg, err := v1alpha1.FromUnstructured[v1alpha1.PodGroup](x); err == nil {
			obj.PodGroups = append(obj.PodGroups, pg)
		}
	}
	s.expire(obj, now)
	for i, n := range obj.Nodes {
		if c, ok := s.changes[n.Name]; ok && n.Labels[LabelMIGConfig] != c.name {
			n = n.DeepCopy()
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			n.Labels[LabelMIGConfig], n.Labels[LabelMIGConfigState] = c.name, MIGStatePending
			obj.Nodes[i] = n
		}
	}
	return obj, nil
}

// confirmPodGroups asks the API server for the PodGroup of each gang with
// pending pods that the cache does not hold and whose pods do not give
// the size (partita.dev/min-member): such a gang is one pod at a time,
// and a PodGroup created just before its pods may not have reached the
// informer yet (the gang's 4-GPU pods were bound one by one in a test
// run on a loaded machine). A PodGroup the server does not have either
// is not asked for again while the gang has pods.
func (s *Scheduler) confirmPodGroups(ctx context.Context, obj *Objects) {
	known := map[string]bool{}
	for _, pg := range obj.PodGroups {
		known[pg.Namespace+"/"+pg.Name] = true
	}
	sized, pending := map[string]bool{}, map[string]bool{}
	for _, p := range obj.Pods {
		g := GroupName(p)
		if g == "" || p.Spec.SchedulerName != s.opt.SchedulerName {
			continue
		}
		key := p.Namespace + "/" + g
		if _, ok := p.Annotations[AnnotationMinMember]; ok {
			sized[key] = true
		}
		if p.Spec.NodeName == "" {
			pending[key] = true
		}
	}
	for key := range s.noGroup {
		if !pending[key] || known[key] {
			delete(s.noGroup, key)
		}
	}
	unread := map[string]bool{}
	for key := range pending {
		if known[key] || sized[key] || s.noGroup[key] {
			continue
		}
		ns, name, _ := strings.Cut(key, "/")
		x, err := s.dyn.Resource(v1alpha1.PodGroupsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			s.noGroup[key] = true
		case err != nil:
			// Unknown size: the gang's pending pods sit this cycle out
			// rather than be placed one by one.
			s.opt.Logger.Warn("PodGroup not read", "podgroup", key, "err", err)
			unread[key] = true
		default:
			if pg, err := v1alpha1.FromUnstructured[v1alpha1.PodGroup](x); err == nil {
				obj.PodGroups = append(obj.PodGroups, pg)
			}
		}
	}
	if len(unread) > 0 {
		obj.Pods = slices.DeleteFunc(slices.Clone(obj.Pods), func(p *corev1.Pod) bool {
			return p.Spec.NodeName == "" && unread[p.Namespace+"/"+GroupName(p)]
		})
	}
}

func (s *Scheduler) listDynamic(l cache.GenericLister) []runtime.Object {
	out, err := l.List(labels.Everything())
	if err != nil {
		return nil
	}
	return out
}

// expire forgets assumptions the informers have caught up with, or that
// are too old to trust.
func (s *Scheduler) expire(obj Objects, now time.Time) {
	byUID := make(map[types.UID]*corev1.Pod, len(obj.Pods))
	for _, p := range obj.Pods {
		byUID[p.UID] = p
	}
	for uid, a := range s.assumed {
		if p, ok := byUID[uid]; !ok || p.Spec.NodeName != "" || now.Sub(a.at) > assumeTTL {
			delete(s.assumed, uid)
		}
	}
	for uid, at := range s.evicting {
		if p, ok := byUID[uid]; !ok || p.DeletionTimestamp != nil || now.Sub(at) > assumeTTL {
			delete(s.evicting, uid)
		}
	}
	nodes := make(map[string]*corev1.Node, len(obj.Nodes))
	for _, n := range obj.Nodes {
		nodes[n.Name] = n
	}
	for name, c := range s.changes {
		n, ok := nodes[name]
		if !ok || n.Labels[LabelMIGConfig] == c.name || now.Sub(c.at) > assumeTTL {
			delete(s.changes, name)
		}
	}
	for uid := range s.reasons {
		if _, ok := byUID[uid]; !ok {
			delete(s.reasons, uid)
		}
	}
}

func (s *Scheduler) snapshotOptions() SnapshotOptions {
	tolerated := map[string]bool{}
	for _, t := range s.opt.ToleratedTaints {
		tolerated[t] = true
	}
	bound := make(map[types.UID]Assumed, len(s.assumed))
	for uid, a := range s.assumed {
		bound[uid] = a.Assumed
	}
	evicting := make(map[types.UID]bool, len(s.evicting))
	for uid := range s.evicting {
		evicting[uid] = true
	}
	return SnapshotOptions{
		SchedulerName: s.opt.SchedulerName,
		Node:          NodeOptions{Configs: s.migConfigs(), ToleratedTaints: tolerated},
		Headroom:      s.engine.Config().Headroom,
		FreezeBusy:    s.opt.MIGReconfigure == MIGIdleNodes,
		Bound:         bound,
		Evicting:      evicting,
		Hold:          maps.Clone(s.waitFor),
		Placed:        s.placed,
	}
}

// report sends an Event to each pending pod whose reason to wait changed,
// and counts the pending pods.
func (s *Scheduler) report(snap *Snapshot, d sched.Decision, extra map[string]string) {
	reasons := map[string]string{}
	for id, w := range d.Waiting {
		reasons[id] = fmt.Sprintf("%s (position %d in queue %s)", w.Reason, w.Position, snap.JobQueue[id])
	}
	maps.Copy(reasons, snap.Held)
	maps.Copy(reasons, extra)
	ids := make([]string, 0, len(reasons))
	for id := range reasons {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	pending := 0
	for _, id := range ids {
		reason := reasons[id]
		key := reasonKey(d, snap, extra, id)
		for _, p := range snap.JobPods[id] {
			if p.Spec.NodeName != "" {
				continue
			}
			if _, bound := s.assumed[p.UID]; bound {
				continue
			}
			pending++
			if s.reasons[p.UID] == key {
				continue
			}
			s.reasons[p.UID] = key
			s.recorder.Event(p, corev1.EventTypeWarning, "FailedScheduling", "partita: "+reason)
		}
	}
	s.metrics.pendingPods.Set(float64(pending))
}

// reasonKey is what must change for a pod to get a new Event: the reason
// without the queue position, which moves all the time.
func reasonKey(d sched.Decision, snap *Snapshot, extra map[string]string, id string) string {
	if r, ok := extra[id]; ok {
		return r
	}
	if r, ok := snap.Held[id]; ok {
		return r
	}
	return d.Waiting[id].Reason
}
