// Package kube is Partita's Kubernetes world: a secondary scheduler for
// pods with spec.schedulerName "partita" and the controllers around it.
// It builds the engine's snapshot from informers (GPU nodes as the NVIDIA
// device plugin and GPU Feature Discovery describe them, bound pods, the
// Queue and PodGroup resources), runs the very scheduling cycle the
// simulator runs (engine/sched), and carries the decision out through the
// API server: binds through pods/binding, evictions through the Eviction
// API, MIG layouts through the GPU Operator's nvidia.com/mig.config label.
//
// The translation from API objects to the engine's types (node.go, pod.go,
// jobs.go, migconfig.go) is pure and unit-tested with fake objects; the
// rest is tested against a real kube-apiserver in test/integration.
// docs/kubernetes.md is the user's guide; it also says what is real and
// what is simplified.
package kube

// Labels, annotations and resources Partita reads or writes on pods.
const (
	// DefaultSchedulerName is the spec.schedulerName Partita serves.
	DefaultSchedulerName = "partita"

	// LabelQueue names the pod's Queue (cluster-scoped). Without it the
	// pod's PodGroup's queue is used, else DefaultQueue.
	LabelQueue = "partita.dev/queue"
	// LabelPodGroup puts the pod in a gang: a PodGroup of that name in the
	// pod's namespace, or, without one, the pods sharing the label.
	LabelPodGroup = "partita.dev/pod-group"
	// LabelCoschedulingPodGroup is the scheduler-plugins coscheduling
	// label, honoured the same way, so workloads written for it (Kubeflow
	// training operators set it) work unchanged.
	LabelCoschedulingPodGroup = "scheduling.x-k8s.io/pod-group"
	// AnnotationMinMember gives the gang size when no PodGroup object
	// exists: "4" means the group's pods start four or more at a time.
	AnnotationMinMember = "partita.dev/min-member"

	// AnnotationGPUMemory is a pod's peak GPU memory, a Kubernetes
	// quantity ("20Gi"); Partita picks the MIG profile from it.
	AnnotationGPUMemory = "partita.dev/gpu-memory"
	// AnnotationGPUCompute is the share of one GPU's compute the pod
	// needs, 0 to 1 ("0.3"); 0 when absent.
	AnnotationGPUCompute = "partita.dev/gpu-compute"
	// AnnotationEstimatedRuntime is the declared run time ("2h"), which
	// lets short work backfill in front of a reserved gang.
	AnnotationEstimatedRuntime = "partita.dev/estimated-runtime"
	// AnnotationLastCheckpoint is when the pod last checkpointed
	// (RFC 3339); preemption prefers victims that lose least.
	AnnotationLastCheckpoint = "partita.dev/last-checkpoint"

	// Written at bind time (on the Binding, so they land on the pod
	// atomically with spec.nodeName):
	//
	// AnnotationGPUs: the GPU indices of whole GPUs, "0,1,2,3".
	AnnotationGPUs = "partita.dev/gpus"
	// AnnotationMIGSlice: the MIG instance, "<gpu>:<profile>@<start>",
	// e.g. "2:3g.40gb@4".
	AnnotationMIGSlice = "partita.dev/mig-slice"
	// AnnotationGPUShare: a time-sliced share of one GPU, "<gpu>:<milli>".
	AnnotationGPUShare = "partita.dev/gpu-share"
	// AnnotationJob: the engine's job the pod is a task of.
	AnnotationJob = "partita.dev/job"
	// AnnotationMIGProfile is set by the admission webhook: the MIG
	// profile it chose from the memory annotation.
	AnnotationMIGProfile = "partita.dev/mig-profile"

	// DefaultQueue is the queue of pods that name none. Without a Queue
	// object of that name its pods have no quota.
	DefaultQueue = "default"
)

// NVIDIA device plugin and GPU Feature Discovery names.
const (
	ResourceGPU       = "nvidia.com/gpu"
	ResourceMIGPrefix = "nvidia.com/mig-"

	LabelGPUProduct  = "nvidia.com/gpu.product"
	LabelGPUCount    = "nvidia.com/gpu.count"
	LabelMIGStrategy = "nvidia.com/mig.strategy"
	// LabelMIGConfig selects a named layout of the MIG manager's
	// mig-parted config; LabelMIGConfigState is the manager's report:
	// pending, rebooting, success or failed.
	LabelMIGConfig      = "nvidia.com/mig.config"
	LabelMIGConfigState = "nvidia.com/mig.config.state"
	MIGStateSuccess     = "success"
	MIGStatePending     = "pending"
	MIGStateFailed      = "failed"
)

// Labels Partita reads on nodes, beyond the network position
// (partita.dev/network-block|spine|leaf, see cluster.TopologyFromLabels).
const (
	// LabelTier is how the node's capacity is bought: reserved,
	// on-demand or spot.
	LabelTier = "partita.dev/tier"
	// LabelNVLink is the NVLink shape inside the node: none, all or
	// pairs (cluster.LinkNone, LinkAll, LinkPairs).
	LabelNVLink = "partita.dev/nvlink"
)
