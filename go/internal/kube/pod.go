package kube

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"partita.dev/partita/internal/gpu"
	"partita.dev/partita/internal/workload"
)

// Priority thresholds that map a pod's spec.priority (resolved by the API
// server from its PriorityClass) to the engine's three classes.
const (
	// ProductionPriority and above: production (serving; preempts lower
	// classes of any team).
	ProductionPriority = 1_000_000
	// Below 0: best-effort (preempted first). Between: batch.
	BestEffortBelow = 0
)

// ClassOf maps a pod's priority to an engine class: production at
// ProductionPriority and above, best-effort below 0, batch otherwise
// (including pods with no priority, which the API server gives 0).
func ClassOf(p *corev1.Pod) workload.Class {
	prio := int32(0)
	if p.Spec.Priority != nil {
		prio = *p.Spec.Priority
	}
	switch {
	case prio >= ProductionPriority:
		return workload.Production
	case prio < BestEffortBelow:
		return workload.BestEffort
	}
	return workload.Batch
}

// TaskName names the engine task of a pod: unique in the cluster.
func TaskName(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// TaskOf translates a pod into the engine's task. An error says why the
// pod cannot be scheduled as it is; the scheduler reports it in an Event.
func TaskOf(p *corev1.Pod) (workload.Task, error) {
	cpu, mem := PodRequests(p)
	d, err := DemandOf(p)
	if err != nil {
		return workload.Task{}, err
	}
	t := workload.Task{Name: TaskName(p), CPUMilli: cpu, MemoryMiB: mem, GPU: d}
	if err := t.Validate(nil); err != nil {
		return workload.Task{}, err
	}
	return t, nil
}

// PodRequests returns the CPU (milli) and memory (MiB, rounded up) the
// pod requests, as the kube-scheduler counts them: the larger of the
// containers' sum and the largest init container, plus the pod overhead.
// Sidecars (restartable init containers) run beside the containers and are
// added to them.
func PodRequests(p *corev1.Pod) (cpuMilli, memMiB int64) {
	var cpu, mem, sideCPU, sideMem, initCPU, initMem int64
	for _, c := range p.Spec.Containers {
		cpu += c.Resources.Requests.Cpu().MilliValue()
		mem += c.Resources.Requests.Memory().Value()
	}
	for _, c := range p.Spec.InitContainers {
		rc, rm := c.Resources.Requests.Cpu().MilliValue(), c.Resources.Requests.Memory().Value()
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sideCPU, sideMem = sideCPU+rc, sideMem+rm
			continue
		}
		// An init container runs beside the sidecars started before it.
		initCPU, initMem = max(initCPU, rc+sideCPU), max(initMem, rm+sideMem)
	}
	cpu, mem = max(cpu+sideCPU, initCPU), max(mem+sideMem, initMem)
	if p.Spec.Overhead != nil {
		cpu += p.Spec.Overhead.Cpu().MilliValue()
		mem += p.Spec.Overhead.Memory().Value()
	}
	return cpu, (mem + 1<<20 - 1) >> 20
}

// gpuResources sums the NVIDIA resources a pod asks for: whole GPUs and
// MIG instances per profile (limits, which equal requests for extended
// resources; requests when no limit is set).
func gpuResources(p *corev1.Pod) (whole int64, mig map[string]int64) {
	mig = map[string]int64{}
	add := func(c corev1.Container, into func(string, int64)) {
		for name, q := range c.Resources.Limits {
			into(string(name), q.Value())
		}
		for name, q := range c.Resources.Requests {
			if _, ok := c.Resources.Limits[name]; !ok {
				into(string(name), q.Value())
			}
		}
	}
	sum := func(name string, v int64) {
		switch {
		case name == ResourceGPU:
			whole += v
		case strings.HasPrefix(name, ResourceMIGPrefix):
			mig[strings.TrimPrefix(name, ResourceMIGPrefix)] += v
		}
	}
	for _, c := range p.Spec.Containers {
		add(c, sum)
	}
	// Init containers run before the containers and release their
	// devices; the pod needs the larger of the two.
	for _, c := range p.Spec.InitContainers {
		var w int64
		m := map[string]int64{}
		add(c, func(name string, v int64) {
			switch {
			case name == ResourceGPU:
				w += v
			case strings.HasPrefix(name, ResourceMIGPrefix):
				m[strings.TrimPrefix(name, ResourceMIGPrefix)] += v
			}
		})
		whole = max(whole, w)
		for k, v := range m {
			mig[k] = max(mig[k], v)
		}
	}
	for k, v := range mig {
		if v == 0 {
			delete(mig, k)
		}
	}
	return whole, mig
}

// DemandOf reads a pod's GPU demand:
//   - nvidia.com/gpu: N asks for N whole GPUs on one node;
//   - nvidia.com/mig-<profile>: 1 asks for one MIG instance of that
//     profile (as the pod asks, whatever its annotations say);
//   - else partita.dev/gpu-memory (and partita.dev/gpu-compute) ask for a
//     memory profile: Partita picks the MIG profile;
//   - else no GPU.
//
// A nodeSelector on nvidia.com/gpu.product limits the GPU model; other
// node constraints are refused for pending pods (see CheckConstraints).
func DemandOf(p *corev1.Pod) (workload.Demand, error) {
	var models []string
	if prod, ok := p.Spec.NodeSelector[LabelGPUProduct]; ok {
		models = []string{gpu.Lookup(prod).Name}
	}
	whole, mig := gpuResources(p)
	switch {
	case whole > 0 && len(mig) > 0:
		return workload.Demand{}, fmt.Errorf("asks for both %s and %s%s: a pod takes whole GPUs or one MIG instance", ResourceGPU, ResourceMIGPrefix, firstKey(mig))
	case len(mig) > 1:
		return workload.Demand{}, fmt.Errorf("asks for MIG instances of %d profiles; a pod takes one MIG instance", len(mig))
	case whole > 0:
		return workload.Demand{Kind: workload.WholeGPUs, Count: int(whole), Models: models}, nil
	case len(mig) == 1:
		name := firstKey(mig)
		if mig[name] != 1 {
			return workload.Demand{}, fmt.Errorf("asks for %d instances of %s%s; a pod takes one MIG instance", mig[name], ResourceMIGPrefix, name)
		}
		return workload.Demand{Kind: workload.MIGProfile, Profile: name, Models: models}, nil
	}
	_, ok := p.Annotations[AnnotationGPUMemory]
	if !ok {
		if _, ok := p.Annotations[AnnotationGPUCompute]; ok {
			return workload.Demand{}, fmt.Errorf("annotation %s needs %s beside it", AnnotationGPUCompute, AnnotationGPUMemory)
		}
		return workload.Demand{Kind: workload.NoGPU}, nil
	}
	peak, compute, err := MemoryNeed(p.Annotations)
	if err != nil {
		return workload.Demand{}, err
	}
	return workload.Demand{Kind: workload.MemoryProfile, PeakMemoryMiB: peak, Compute: compute, Models: models}, nil
}

// MemoryNeed reads the memory annotations: peak GPU memory in MiB and the
// compute share.
func MemoryNeed(ann map[string]string) (peakMiB int64, compute float64, err error) {
	text := ann[AnnotationGPUMemory]
	q, err := resource.ParseQuantity(text)
	if err != nil {
		return 0, 0, fmt.Errorf("annotation %s=%q: not a quantity (e.g. 20Gi): %v", AnnotationGPUMemory, text, err)
	}
	if q.Sign() <= 0 {
		return 0, 0, fmt.Errorf("annotation %s=%q: must be positive", AnnotationGPUMemory, text)
	}
	peakMiB = (q.Value() + 1<<20 - 1) >> 20
	if c, ok := ann[AnnotationGPUCompute]; ok {
		compute, err = strconv.ParseFloat(strings.TrimSpace(c), 64)
		if err != nil || math.IsNaN(compute) || compute < 0 || compute > 1 {
			return 0, 0, fmt.Errorf("annotation %s=%q: want a share of one GPU from 0 to 1", AnnotationGPUCompute, c)
		}
	}
	return peakMiB, compute, nil
}

// CheckConstraints refuses node constraints Partita does not evaluate
// (the engine places by GPU, CPU and memory; see docs/kubernetes.md): a
// nodeSelector other than nvidia.com/gpu.product, and required node
// affinity. Refusing is safer than binding where the pod must not run.
func CheckConstraints(p *corev1.Pod) error {
	for k := range p.Spec.NodeSelector {
		if k != LabelGPUProduct {
			return fmt.Errorf("nodeSelector %s: Partita evaluates only %s", k, LabelGPUProduct)
		}
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		return fmt.Errorf("required node affinity is not evaluated by Partita yet")
	}
	return nil
}

func firstKey[V any](m map[string]V) string {
	best := ""
	for k := range m {
		if best == "" || k < best {
			best = k
		}
	}
	return best
}

// Duration annotations (estimated run time) read as Go durations.
func durationAnnotation(ann map[string]string, key string) (time.Duration, error) {
	text, ok := ann[key]
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(text)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("annotation %s=%q: want a duration such as 90m", key, text)
	}
	return d, nil
}
