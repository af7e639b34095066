package kube

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"partita.dev/partita/internal/cluster"
	"partita.dev/partita/internal/engine/sched"
	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/kube/api/v1alpha1"
	"partita.dev/partita/internal/workload"
)

// Objects is what a cycle reads from the informers.
type Objects struct {
	Nodes     []*corev1.Node
	Pods      []*corev1.Pod
	Queues    []*v1alpha1.Queue
	PodGroups []*v1alpha1.PodGroup
}

// Assumed is a bind Partita made that the informer has not shown yet.
type Assumed struct {
	Node        string
	Annotations map[string]string
}

// SnapshotOptions are the scheduler's settings and memory that shape a
// snapshot beyond the objects.
type SnapshotOptions struct {
	SchedulerName string
	Node          NodeOptions
	Headroom      float64
	// FreezeBusy hides the free MIG regions of nodes that run GPU pods
	// from the engine, so that it does not plan MIG changes there: the
	// GPU Operator's MIG manager stops a node's GPU pods while it applies
	// a layout (see docs/kubernetes.md).
	FreezeBusy bool
	// Bound are binds made but not yet seen; Evicting, evictions made.
	Bound    map[types.UID]Assumed
	Evicting map[types.UID]bool
	// Hold keeps jobs from the engine while the MIG change made for them
	// is in flight: job ID -> node.
	Hold map[string]string
	// Placed are the assignments of the last snapshot, by pod: an
	// unchanged one is handed to the engine as the same pointer, which its
	// per-assignment caches key on.
	Placed map[types.UID]*cluster.Assignment
}

// Snapshot is one cycle's input to the engine, plus what the world needs
// to carry the decision out.
type Snapshot struct {
	State *cluster.State
	Jobs  []*sched.Job
	Teams []sched.Team
	Views map[string]*NodeView
	// Busy nodes run pods that hold GPUs.
	Busy map[string]bool
	// JobPods are each job's unfinished pods, in task order for a job
	// the engine gets whole (a held job with bound pods gets its bound
	// part only; its Starts cannot happen, it has no pending task).
	JobPods map[string][]*corev1.Pod
	// Queue of each job.
	JobQueue map[string]string
	// Held are jobs not given to the engine, with the reason; each of
	// their pending pods waits for it.
	Held map[string]string
	// Unaccounted lists bound pods whose devices could not be matched to
	// the node's capacity (over-commitment by another component).
	Unaccounted []string

	// Placed are this snapshot's assignments by pod, for the next one.
	Placed map[types.UID]*cluster.Assignment

	evicting   map[types.UID]bool
	headroom   float64
	prevPlaced map[types.UID]*cluster.Assignment
}

// labelUnschedulable marks, on the engine's copy of a node, that no new
// work may go there; the nodeFilter policy stage reads it.
const labelUnschedulable = "partita.dev/~unschedulable"

// Epoch is the origin of the engine's clock: durations since the Unix
// epoch, so that times survive a restart of the scheduler.
var Epoch = time.Unix(0, 0)

// BuildSnapshot turns the objects into the engine's input.
func BuildSnapshot(obj Objects, opt SnapshotOptions) (*Snapshot, error) {
	s := &Snapshot{Views: map[string]*NodeView{}, Busy: map[string]bool{}, JobPods: map[string][]*corev1.Pod{},
		JobQueue: map[string]string{}, Held: map[string]string{}, evicting: opt.Evicting, headroom: opt.Headroom,
		Placed: map[types.UID]*cluster.Assignment{}, prevPlaced: opt.Placed}
	st, err := s.buildNodes(obj.Nodes, opt)
	if err != nil {
		return nil, err
	}
	s.State = st
	bound := s.allocatePods(obj.Pods, opt)
	s.cordon()
	groups := groupPods(obj.Pods, opt, bound)
	if opt.FreezeBusy {
		s.freezeBusy(groups)
	}
	s.buildJobs(groups, obj, opt)
	return s, nil
}

func (s *Snapshot) buildNodes(nodes []*corev1.Node, opt SnapshotOptions) (*cluster.State, error) {
	sorted := append([]*corev1.Node(nil), nodes...)
	sort.Slice(sorted, func(a, b int) bool { return sorted[a].Name < sorted[b].Name })
	built := make([]*cluster.Node, 0, len(sorted))
	for _, n := range sorted {
		v := ViewNode(n, opt.Node)
		s.Views[n.Name] = &v
		spec := v.Spec
		if v.Unschedulable {
			spec.Labels[labelUnschedulable] = "true"
		}
		cn, err := cluster.BuildNode(spec)
		if err != nil {
			// BuildNode refuses only malformed specs (negative GPUs);
			// keep the node without GPUs so its pods are still counted.
			spec.GPUs, spec.GPUModel = 0, ""
			spec.Labels[labelUnschedulable] = "true"
			v.Unschedulable, v.Reason, v.GPUs = true, err.Error(), nil
			if cn, err = cluster.BuildNode(spec); err != nil {
				return nil, err
			}
		}
		built = append(built, cn)
	}
	st, err := cluster.New(built)
	if err != nil {
		return nil, err
	}
	for _, n := range sorted {
		v := s.Views[n.Name]
		for k, g := range v.GPUs {
			if !g.MIG {
				continue
			}
			if err := st.SetMIG(n.Name, k, true); err != nil {
				v.MIGFailed, v.Reason = true, err.Error()
				break
			}
			if err := st.SetLayout(n.Name, k, g.Layout); err != nil {
				v.MIGFailed, v.Reason = true, err.Error()
				break
			}
		}
	}
	return st, nil
}

// boundPod is a pod that holds resources on a node.
type boundPod struct {
	pod  *corev1.Pod
	node string
	ann  map[string]string
}

// allocatePods puts every bound, unfinished pod (any scheduler's) on its
// node: first those whose devices Partita recorded, then the others, on
// devices derived from what they ask. It returns the bound pods by UID.
func (s *Snapshot) allocatePods(pods []*corev1.Pod, opt SnapshotOptions) map[types.UID]*boundPod {
	out := map[types.UID]*boundPod{}
	var recorded, others []*boundPod
	for _, p := range pods {
		if finished(p) {
			continue
		}
		b := &boundPod{pod: p, node: p.Spec.NodeName, ann: p.Annotations}
		if b.node == "" {
			a, ok := opt.Bound[p.UID]
			if !ok {
				continue
			}
			b.node, b.ann = a.Node, a.Annotations
		}
		out[p.UID] = b
		if _, has, _ := GrantsFromAnnotations(b.ann); has {
			recorded = append(recorded, b)
		} else {
			others = append(others, b)
		}
	}
	byName := func(list []*boundPod) {
		sort.Slice(list, func(a, c int) bool { return TaskName(list[a].pod) < TaskName(list[c].pod) })
	}
	byName(recorded)
	byName(others)
	for _, b := range recorded {
		s.allocate(b, true, opt)
	}
	for _, b := range others {
		s.allocate(b, false, opt)
	}
	return out
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// allocate puts one bound pod on its node, with the recorded devices when
// they fit, else derived ones, else CPU and memory only.
func (s *Snapshot) allocate(b *boundPod, recorded bool, opt SnapshotOptions) {
	n := s.State.NodeByName(b.node)
	if n == nil {
		return // bound to a node that is gone: it holds nothing
	}
	cpu, mem := PodRequests(b.pod)
	a := cluster.Assignment{Task: TaskName(b.pod), Node: b.node, CPUMilli: cpu, MemoryMiB: mem}
	if recorded {
		if grants, _, err := GrantsFromAnnotations(b.ann); err == nil {
			a.Grants = grants
			if s.State.Allocate(a) == nil {
				s.markBusy(a)
				return
			}
		}
	}
	if grants, ok := deriveGrants(n, b.pod, opt.Headroom); ok {
		a.Grants = grants
		if s.State.Allocate(a) == nil {
			s.markBusy(a)
			return
		}
	}
	a.Grants = nil
	if whole, mig := gpuResources(b.pod); whole > 0 || len(mig) > 0 {
		s.Unaccounted = append(s.Unaccounted, fmt.Sprintf("%s on %s: its GPUs do not match the node's free devices", a.Task, a.Node))
		s.Busy[a.Node] = true
	}
	if err := s.State.Allocate(a); err != nil {
		s.Unaccounted = append(s.Unaccounted, fmt.Sprintf("%s on %s: %v", a.Task, a.Node, err))
	}
}

func (s *Snapshot) markBusy(a cluster.Assignment) {
	if len(a.Grants) > 0 {
		s.Busy[a.Node] = true
	}
}

// deriveGrants picks devices for a bound pod Partita did not record (bound
// by another scheduler, or before an upgrade): the lowest free whole GPUs,
// or the first free MIG instance of its profile.
func deriveGrants(n *cluster.Node, p *corev1.Pod, headroom float64) ([]cluster.Grant, bool) {
	d, err := DemandOf(p)
	if err != nil {
		return nil, false
	}
	switch d.Kind {
	case workload.NoGPU:
		return nil, true
	case workload.WholeGPUs:
		var out []cluster.Grant
		for i := range n.GPUs {
			g := &n.GPUs[i]
			if !g.MIG && g.Used() == 0 && len(out) < d.Count {
				out = append(out, cluster.Grant{GPU: i, Milli: 1000})
			}
		}
		return out, len(out) == d.Count
	case workload.MIGProfile, workload.MemoryProfile:
		for i := range n.GPUs {
			g := &n.GPUs[i]
			if !g.MIG {
				continue
			}
			profile := d.Profile
			if d.Kind == workload.MemoryProfile {
				p, err := g.Model.ProfileFor(d.PeakMemoryMiB, d.Compute, headroom)
				if err != nil {
					continue
				}
				profile = p.Name
			}
			for _, sl := range g.Slices() {
				if sl.Task == "" && sl.Profile == profile {
					pl := sl.Placement
					return []cluster.Grant{{GPU: i, Slice: &pl}}, true
				}
			}
		}
	}
	return nil, false
}

// cordon stops new GPU work on nodes that take none: unschedulable, or a
// MIG change in flight or failed.
func (s *Snapshot) cordon() {
	for name, v := range s.Views {
		if !v.Unschedulable && !v.MIGChanging && !v.MIGFailed {
			continue
		}
		n := s.State.NodeByName(name)
		for k := range n.GPUs {
			_ = s.State.Cordon(name, k, true)
		}
	}
}

// freezeBusy hides, on nodes that run GPU pods, what the engine could
// re-partition: the uncovered memory of MIG GPUs, free instances of
// profiles no pending pod asks for, and (when no pending pod asks for
// whole GPUs) idle whole GPUs it could turn to MIG. Each is held by a
// placeholder task that belongs to no job; free instances pending pods can
// use stay free.
func (s *Snapshot) freezeBusy(groups []*group) {
	wantProfiles, wantWhole := pendingDemand(groups, s.headroom)
	for i := 0; i < s.State.Len(); i++ {
		n := s.State.Node(i)
		if !s.Busy[n.Name] {
			continue
		}
		for k := range n.GPUs {
			g := &n.GPUs[k]
			if g.Cordoned() || !g.Model.MIG {
				continue
			}
			if !g.MIG {
				if g.Idle() && !wantWhole {
					_ = s.State.Allocate(cluster.Assignment{Task: holdName(n.Name, k, 0), Node: n.Name, Grants: []cluster.Grant{{GPU: k, Milli: 1000}}})
				}
				continue
			}
			s.freezeMIG(n, k, wantProfiles[g.Model.Name])
		}
	}
}

func (s *Snapshot) freezeMIG(n *cluster.Node, k int, wanted map[string]bool) {
	g := &n.GPUs[k]
	seq := 0
	for _, sl := range g.Slices() {
		if sl.Task == "" && !wanted[sl.Profile] {
			pl := sl.Placement
			seq++
			_ = s.State.Allocate(cluster.Assignment{Task: holdName(n.Name, k, seq), Node: n.Name, Grants: []cluster.Grant{{GPU: k, Slice: &pl}}})
		}
	}
	small := smallestProfile(g.Model)
	if small == nil {
		return
	}
	for start := 0; start < gpu.MemorySlices; start++ {
		g = &s.State.NodeByName(n.Name).GPUs[k]
		if g.FreeMemorySlices()&small.Mask(start) == 0 || !small.CanStart(start) {
			continue
		}
		pl := gpu.Placement{Profile: small.Name, Start: start}
		seq++
		_ = s.State.Allocate(cluster.Assignment{Task: holdName(n.Name, k, seq), Node: n.Name, Grants: []cluster.Grant{{GPU: k, Slice: &pl}}})
	}
}

// smallestProfile is the model's 1g profile with one memory slice.
func smallestProfile(m *gpu.Model) *gpu.Profile {
	for i := range m.Profiles {
		p := &m.Profiles[i]
		if p.Memory == 1 && p.Compute == 1 && !p.MediaExt {
			return p
		}
	}
	return nil
}

func holdName(node string, gpu, seq int) string {
	return fmt.Sprintf("~hold/%s/%d/%d", node, gpu, seq)
}

// IsHold reports whether a task is one of freezeBusy's placeholders.
func IsHold(task string) bool { return strings.HasPrefix(task, "~hold/") }

// pendingDemand lists, per GPU model, the MIG profiles pending pods may
// take, and whether any pending pod asks for whole GPUs or a share.
func pendingDemand(groups []*group, headroom float64) (map[string]map[string]bool, bool) {
	profiles := map[string]map[string]bool{}
	whole := false
	for _, gr := range groups {
		for _, m := range gr.members {
			if m.bound != nil || m.taskErr != nil {
				continue
			}
			d := m.task.GPU
			switch d.Kind {
			case workload.WholeGPUs, workload.Fraction:
				whole = true
			case workload.MIGProfile, workload.MemoryProfile:
				for _, model := range gpu.Catalog() {
					if !model.MIG || !d.AllowsModel(model.Name) {
						continue
					}
					name := d.Profile
					if d.Kind == workload.MemoryProfile {
						p, err := model.ProfileFor(d.PeakMemoryMiB, d.Compute, headroom)
						if err != nil {
							continue
						}
						name = p.Name
					}
					if profiles[model.Name] == nil {
						profiles[model.Name] = map[string]bool{}
					}
					profiles[model.Name][name] = true
				}
			}
		}
	}
	return profiles, whole
}
