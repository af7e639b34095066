package kube

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine"
	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/kube/api/v1alpha1"
	"partita.dev/partita/internal/workload"
)

// A job is one pod, or the pods of a gang: those sharing the label
// partita.dev/pod-group (or scheduling.x-k8s.io/pod-group) in one
// namespace. The gang size is its PodGroup's minMember, else the pods'
// partita.dev/min-member annotation, else 1 (no gang).

// group is a job in the making: its unfinished pods and what they ask.
type group struct {
	id        string // the engine's job ID
	namespace string
	name      string // the pod group's name; "" for a lone pod
	members   []*member
	succeeded int // members that finished successfully (count toward the gang)
}

type member struct {
	pod     *corev1.Pod
	bound   *boundPod // nil while pending
	task    workload.Task
	taskErr error // why a pending pod cannot be scheduled as it is
}

// GroupName returns the pod's gang name, or "".
func GroupName(p *corev1.Pod) string {
	if g := p.Labels[LabelPodGroup]; g != "" {
		return g
	}
	return p.Labels[LabelCoschedulingPodGroup]
}

// JobID is the engine's ID for the job a pod belongs to.
func JobID(p *corev1.Pod) string {
	if g := GroupName(p); g != "" {
		return "group:" + p.Namespace + "/" + g
	}
	return "pod:" + p.Namespace + "/" + p.Name
}

// groupPods gathers Partita's pods into jobs, in ID order.
func groupPods(pods []*corev1.Pod, opt SnapshotOptions, bound map[types.UID]*boundPod) []*group {
	byID := map[string]*group{}
	for _, p := range pods {
		if p.Spec.SchedulerName != opt.SchedulerName {
			continue
		}
		id := JobID(p)
		g := byID[id]
		if g == nil {
			g = &group{id: id, namespace: p.Namespace, name: GroupName(p)}
			byID[id] = g
		}
		switch {
		case p.Status.Phase == corev1.PodSucceeded:
			g.succeeded++
			continue
		case p.Status.Phase == corev1.PodFailed:
			continue
		}
		m := &member{pod: p, bound: bound[p.UID]}
		if m.bound == nil && p.DeletionTimestamp != nil {
			continue // deleted before it ran
		}
		m.task, m.taskErr = TaskOf(p)
		if m.bound == nil && m.taskErr == nil {
			m.taskErr = CheckConstraints(p)
		}
		if m.bound != nil && m.taskErr != nil {
			// A bound pod counts with what it holds, readable or not.
			cpu, mem := PodRequests(p)
			m.task, m.taskErr = workload.Task{Name: TaskName(p), CPUMilli: cpu, MemoryMiB: mem}, nil
		}
		g.members = append(g.members, m)
	}
	out := make([]*group, 0, len(byID))
	for _, g := range byID {
		if len(g.members) == 0 {
			continue
		}
		sort.Slice(g.members, func(a, b int) bool { return g.members[a].pod.Name < g.members[b].pod.Name })
		out = append(out, g)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].id < out[b].id })
	return out
}

func (g *group) pending() []*member {
	var out []*member
	for _, m := range g.members {
		if m.bound == nil {
			out = append(out, m)
		}
	}
	return out
}

// buildJobs turns groups into engine jobs; groups that cannot be given to
// the engine go to Held with the reason.
func (s *Snapshot) buildJobs(groups []*group, obj Objects, opt SnapshotOptions) {
	queues := map[string]*v1alpha1.Queue{}
	for _, q := range obj.Queues {
		if q.Validate() == nil {
			queues[q.Name] = q
			s.Teams = append(s.Teams, teamOf(q))
		}
	}
	sort.Slice(s.Teams, func(a, b int) bool { return s.Teams[a].Name < s.Teams[b].Name })
	podGroups := map[string]*v1alpha1.PodGroup{}
	for _, pg := range obj.PodGroups {
		podGroups[pg.Namespace+"/"+pg.Name] = pg
	}
	// What the cluster could ever offer one task (as the engine's own
	// validation uses it), so that jobs that can never run are held back
	// with the reason rather than cached by the engine as invalid
	// forever: a Kubernetes cluster grows.
	capacity := engine.CapacityOf(s.State)
	for _, g := range groups {
		j, why := s.jobOf(g, queues, podGroups[g.namespace+"/"+g.name], capacity)
		if why == "" && len(g.pending()) > 0 {
			if node, held := opt.Hold[g.id]; held && s.Views[node] != nil && s.Views[node].MIGChanging {
				why = fmt.Sprintf("%s: the MIG change on node %s made for it (%s)", sched.WaitReconfig, node, s.Views[node].Reason)
			}
		}
		pods := make([]*corev1.Pod, len(g.members))
		for i, m := range g.members {
			pods[i] = m.pod
		}
		s.JobPods[g.id] = pods
		if why != "" {
			s.Held[g.id] = why
			// What its bound pods hold still counts (quota, fairness,
			// preemption): the engine gets the bound part alone.
			g = g.boundPart()
			if g == nil {
				continue
			}
			if j, why = s.jobOf(g, queues, podGroups[g.namespace+"/"+g.name], capacity); why != "" {
				continue
			}
		}
		s.JobQueue[g.id] = j.Spec.Team
		s.Jobs = append(s.Jobs, j)
	}
}

// boundPart is the group without its pending pods, or nil when none is
// bound.
func (g *group) boundPart() *group {
	out := *g
	out.members = nil
	for _, m := range g.members {
		if m.bound != nil {
			out.members = append(out.members, m)
		}
	}
	if len(out.members) == 0 {
		return nil
	}
	return &out
}

// teamOf is a queue as the engine's team: quantities in GPU milli.
func teamOf(q *v1alpha1.Queue) sched.Team {
	w := q.Spec.Weight
	if w <= 0 {
		w = 1
	}
	return sched.Team{
		Name: q.Name, Guarantee: q.Spec.GuaranteedGPUs * 1000,
		Burst: max(q.Spec.BurstGPUs, q.Spec.GuaranteedGPUs) * 1000, Weight: w,
	}
}

// jobOf builds a group's job, or says why its pending pods wait outside
// the engine.
func (s *Snapshot) jobOf(g *group, queues map[string]*v1alpha1.Queue, pg *v1alpha1.PodGroup, capacity *workload.Capacity) (*sched.Job, string) {
	pending := g.pending()
	for _, m := range pending {
		if m.taskErr != nil {
			return nil, fmt.Sprintf("pod %s: %v", m.pod.Name, m.taskErr)
		}
	}
	minMember, err := g.minMember(pg)
	if err != nil && len(pending) > 0 {
		return nil, err.Error()
	}
	if len(pending) > 0 && len(g.members)+g.succeeded < minMember {
		return nil, fmt.Sprintf("gang: %d of %d pods exist", len(g.members)+g.succeeded, minMember)
	}
	queue, why := g.queue(pg, queues)
	if why != "" && len(pending) > 0 {
		return nil, why
	}
	j := &sched.Job{Spec: workload.Job{ID: g.id, Team: queue, Project: g.namespace, Class: workload.BestEffort}}
	j.Spec.GangSize = min(max(minMember-g.succeeded, 0), len(g.members))
	var started, checkpoint time.Time
	for _, m := range g.members {
		j.Spec.Class = max(j.Spec.Class, ClassOf(m.pod))
		j.Spec.Tasks = append(j.Spec.Tasks, m.task)
		created := m.pod.CreationTimestamp.Time
		if j.Submitted == 0 || created.Sub(Epoch) < j.Submitted {
			j.Submitted = created.Sub(Epoch)
		}
		if est, err := durationAnnotation(m.pod.Annotations, AnnotationEstimatedRuntime); err == nil {
			j.Estimate = max(j.Estimate, est)
		}
		if m.bound == nil {
			j.Placed = append(j.Placed, nil)
			continue
		}
		j.Placed = append(j.Placed, s.placed(m))
		if t := startTime(m.pod); started.IsZero() || t.Before(started) {
			started = t
		}
		if t, err := time.Parse(time.RFC3339, m.pod.Annotations[AnnotationLastCheckpoint]); err == nil && t.After(checkpoint) {
			checkpoint = t
		}
	}
	if len(pending) > 0 {
		if err := j.Spec.Validate(capacity); err != nil {
			return nil, sched.WaitInvalidSpec + ": " + err.Error()
		}
	}
	if !started.IsZero() {
		j.Started = started.Sub(Epoch)
		j.Checkpoint = j.Started
		if checkpoint.After(started) {
			j.Checkpoint = checkpoint.Sub(Epoch)
		}
	}
	j.Phase = phaseOf(g, s)
	return j, ""
}

// placed returns what a bound member holds in the snapshot: the last
// snapshot's pointer when nothing changed.
func (s *Snapshot) placed(m *member) *cluster.Assignment {
	// Its node may be gone or it could not be accounted: then it holds
	// nothing, but it is not pending either.
	a := cluster.Assignment{Task: TaskName(m.pod), Node: m.bound.node}
	if n := s.State.NodeByName(m.bound.node); n != nil {
		if got, ok := n.Task(a.Task); ok {
			a = got
		}
	}
	if prev, ok := s.prevPlaced[m.pod.UID]; ok && reflect.DeepEqual(*prev, a) {
		s.Placed[m.pod.UID] = prev
		return prev
	}
	s.Placed[m.pod.UID] = &a
	return &a
}

// phaseOf: Terminating once any bound member is being deleted (evicted),
// Running when every member is bound, Pending otherwise.
func phaseOf(g *group, s *Snapshot) sched.Phase {
	all := true
	for _, m := range g.members {
		if m.bound == nil {
			all = false
			continue
		}
		if m.pod.DeletionTimestamp != nil || s.evicting[m.pod.UID] {
			return sched.Terminating
		}
	}
	if all {
		return sched.Running
	}
	return sched.Pending
}

// minMember is the gang size: the PodGroup's, else the largest
// partita.dev/min-member annotation of the group's pods, else 1.
func (g *group) minMember(pg *v1alpha1.PodGroup) (int, error) {
	if g.name == "" {
		return 1, nil
	}
	if pg != nil {
		if err := pg.Validate(); err != nil {
			return 0, err
		}
		return int(pg.Spec.MinMember), nil
	}
	most := 1
	for _, m := range g.members {
		text, ok := m.pod.Annotations[AnnotationMinMember]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(text))
		if err != nil || n < 1 {
			return 0, fmt.Errorf("pod %s: annotation %s=%q: want a whole number of pods, at least 1", m.pod.Name, AnnotationMinMember, text)
		}
		most = max(most, n)
	}
	return most, nil
}

// queue is the group's queue: the pods' partita.dev/queue label, else the
// PodGroup's, else DefaultQueue. A named queue must exist, and pending
// pods must use a priority class it allows.
func (g *group) queue(pg *v1alpha1.PodGroup, queues map[string]*v1alpha1.Queue) (string, string) {
	name := ""
	for _, m := range g.members {
		q := m.pod.Labels[LabelQueue]
		if q == "" {
			continue
		}
		if name != "" && q != name {
			return "", fmt.Sprintf("the group's pods name two queues, %s and %s", name, q)
		}
		name = q
	}
	if name == "" && pg != nil {
		name = pg.Spec.Queue
	}
	if name == "" {
		name = DefaultQueue
	}
	q, ok := queues[name]
	if !ok {
		if name == DefaultQueue {
			return name, "" // no Queue object: no quota
		}
		return name, fmt.Sprintf("queue %q does not exist (or is invalid)", name)
	}
	if allowed := q.Spec.AllowedPriorityClasses; len(allowed) > 0 {
		for _, m := range g.pending() {
			if pc := m.pod.Spec.PriorityClassName; !slices.Contains(allowed, pc) {
				return name, fmt.Sprintf("pod %s: priority class %q is not allowed in queue %s (allowed: %s)", m.pod.Name, pc, name, strings.Join(allowed, ", "))
			}
		}
	}
	return name, ""
}

// startTime is when a bound pod started: its status start time, else when
// it was bound, else when it was created.
func startTime(p *corev1.Pod) time.Time {
	if p.Status.StartTime != nil {
		return p.Status.StartTime.Time
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return p.CreationTimestamp.Time
}
