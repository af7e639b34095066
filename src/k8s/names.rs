//! The names Partita reads and writes on Kubernetes objects, in one place
//! (port of go/internal/kube/names.go; the values are the Go build's, so
//! both builds can drive the same cluster).

// Labels, annotations and resources Partita reads or writes on pods.
// Source: Partita's own (docs/kubernetes.md), except the coscheduling label.

/// The spec.schedulerName Partita serves.
pub const DEFAULT_SCHEDULER_NAME: &str = "partita";

/// Names the pod's Queue (cluster-scoped). Without it the pod's PodGroup's
/// queue is used, else `DEFAULT_QUEUE`.
pub const LABEL_QUEUE: &str = "partita.dev/queue";
/// Puts the pod in a gang: a PodGroup of that name in the pod's namespace,
/// or, without one, the pods sharing the label.
pub const LABEL_POD_GROUP: &str = "partita.dev/pod-group";
/// The scheduler-plugins coscheduling label (sigs.k8s.io/scheduler-plugins),
/// honoured the same way, so workloads written for it (Kubeflow training
/// operators set it) work unchanged.
pub const LABEL_COSCHEDULING_POD_GROUP: &str = "scheduling.x-k8s.io/pod-group";
/// The gang size when no PodGroup object exists: "4" means the group's pods
/// start four or more at a time.
pub const ANNOTATION_MIN_MEMBER: &str = "partita.dev/min-member";

/// A pod's peak GPU memory, a Kubernetes quantity ("20Gi"); Partita picks
/// the MIG profile from it.
pub const ANNOTATION_GPU_MEMORY: &str = "partita.dev/gpu-memory";
/// The share of one GPU's compute the pod needs, 0 to 1 ("0.3"); 0 when
/// absent.
pub const ANNOTATION_GPU_COMPUTE: &str = "partita.dev/gpu-compute";
/// The declared run time ("2h"), which lets short work backfill in front
/// of a reserved gang.
pub const ANNOTATION_ESTIMATED_RUNTIME: &str = "partita.dev/estimated-runtime";
/// When the pod last checkpointed (RFC 3339); preemption prefers victims
/// that lose least.
pub const ANNOTATION_LAST_CHECKPOINT: &str = "partita.dev/last-checkpoint";

// Written at bind time (on the Binding, so they land on the pod atomically
// with spec.nodeName):

/// The GPU indices of whole GPUs, "0,1,2,3".
pub const ANNOTATION_GPUS: &str = "partita.dev/gpus";
/// The MIG instance, "<gpu>:<profile>@<start>", e.g. "2:3g.40gb@4".
pub const ANNOTATION_MIG_SLICE: &str = "partita.dev/mig-slice";
/// A time-sliced share of one GPU, "<gpu>:<milli>".
pub const ANNOTATION_GPU_SHARE: &str = "partita.dev/gpu-share";
/// The engine's job the pod is a task of.
pub const ANNOTATION_JOB: &str = "partita.dev/job";
/// Set by the admission webhook: the MIG profile it chose from the memory
/// annotation.
pub const ANNOTATION_MIG_PROFILE: &str = "partita.dev/mig-profile";

/// The queue of pods that name none. Without a Queue object of that name
/// its pods have no quota.
pub const DEFAULT_QUEUE: &str = "default";

// NVIDIA names. Sources: the NVIDIA device plugin (resources
// nvidia.com/gpu and, under MIG strategy mixed, nvidia.com/mig-<profile>),
// GPU Feature Discovery (the nvidia.com/gpu.* and mig.strategy labels) and
// the GPU Operator's MIG manager (nvidia.com/mig.config and its state).

/// Whole GPUs, as the device plugin advertises them.
pub const RESOURCE_GPU: &str = "nvidia.com/gpu";
/// MIG instances under strategy mixed: "nvidia.com/mig-3g.40gb".
pub const RESOURCE_MIG_PREFIX: &str = "nvidia.com/mig-";

/// GFD's product name, "NVIDIA-H100-80GB-HBM3" (or "...-MIG-1g.10gb" under
/// strategy single).
pub const LABEL_GPU_PRODUCT: &str = "nvidia.com/gpu.product";
/// GFD's count of the node's GPUs, MIG ones included.
pub const LABEL_GPU_COUNT: &str = "nvidia.com/gpu.count";
/// GFD's MIG strategy: none, single or mixed (Partita supports mixed).
pub const LABEL_MIG_STRATEGY: &str = "nvidia.com/mig.strategy";
/// Selects a named layout of the MIG manager's mig-parted config.
pub const LABEL_MIG_CONFIG: &str = "nvidia.com/mig.config";
/// The MIG manager's report: pending, rebooting, success or failed.
pub const LABEL_MIG_CONFIG_STATE: &str = "nvidia.com/mig.config.state";
/// `LABEL_MIG_CONFIG_STATE` once the layout is applied.
pub const MIG_STATE_SUCCESS: &str = "success";
/// `LABEL_MIG_CONFIG_STATE` while the MIG manager works.
pub const MIG_STATE_PENDING: &str = "pending";
/// `LABEL_MIG_CONFIG_STATE` when the MIG manager gave up.
pub const MIG_STATE_FAILED: &str = "failed";

// Labels Partita reads on nodes, beyond the network position
// (partita.dev/network-block|spine|leaf, see the engine's
// topology_from_labels). Source: Partita's own (docs/kubernetes.md).

/// How the node's capacity is bought: reserved, on-demand or spot.
pub const LABEL_TIER: &str = "partita.dev/tier";
/// The NVLink shape inside the node: none, all or pairs (the engine's
/// `LINK_NONE`, `LINK_ALL`, `LINK_PAIRS`).
pub const LABEL_NVLINK: &str = "partita.dev/nvlink";
