//! A Kubernetes Pod as the engine sees it (port of
//! go/internal/kube/pod.go): its priority class, the CPU and memory it
//! requests as the kube-scheduler counts them, its GPU demand (whole GPUs,
//! a MIG instance, or a memory need Partita turns into a profile) and the
//! node constraints Partita refuses to ignore. Pure: no API calls.
//!
//! Pods come from the API server, which validated them, but annotations
//! are free text: every reading here either succeeds or says, in words,
//! what is wrong; none panics on what a user wrote.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use partita_engine::gpu::lookup;
use partita_engine::quote::quote;
use partita_engine::scenario::duration::parse_duration;
use partita_engine::sched::Nanos;
use partita_engine::workload::{Class, Demand, Kind, Task, WorkloadError};

use super::names::{
    ANNOTATION_GPU_COMPUTE, ANNOTATION_GPU_MEMORY, LABEL_GPU_PRODUCT, RESOURCE_GPU,
    RESOURCE_MIG_PREFIX,
};
use super::node::{Scale, parse_quantity, quantity_of, quantity_value};

/// A pod's spec.priority (resolved by the API server from its
/// PriorityClass) at or above this is production: serving, which preempts
/// lower classes of any team.
pub const PRODUCTION_PRIORITY: i32 = 1_000_000;
/// Below this priority a pod is best-effort (preempted first); between the
/// two, batch.
pub const BEST_EFFORT_BELOW: i32 = 0;

/// The resource names of the core API (k8s.io/api/core/v1: ResourceCPU,
/// ResourceMemory) and the init container restart policy that makes a
/// sidecar (ContainerRestartPolicyAlways).
const RESOURCE_CPU: &str = "cpu";
const RESOURCE_MEMORY: &str = "memory";
const RESTART_POLICY_ALWAYS: &str = "Always";

/// resource.ErrFormatWrong of k8s.io/apimachinery, the reason Go gives for
/// text that is not a quantity.
const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// Why a pod cannot be scheduled as it is; the scheduler reports it in an
/// Event. The texts are the Go build's.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PodError {
    #[error(
        "asks for both {RESOURCE_GPU} and {RESOURCE_MIG_PREFIX}{profile}: a pod takes whole GPUs or one MIG instance"
    )]
    GpusAndMig { profile: String },
    #[error("asks for MIG instances of {0} profiles; a pod takes one MIG instance")]
    SeveralProfiles(usize),
    #[error(
        "asks for {count} instances of {RESOURCE_MIG_PREFIX}{profile}; a pod takes one MIG instance"
    )]
    SeveralInstances { count: i64, profile: String },
    #[error("annotation {ANNOTATION_GPU_COMPUTE} needs {ANNOTATION_GPU_MEMORY} beside it")]
    ComputeWithoutMemory,
    #[error("annotation {ANNOTATION_GPU_MEMORY}={}: not a quantity (e.g. 20Gi): {QUANTITY_FORMAT}", quote(.0))]
    MemoryNotQuantity(String),
    #[error("annotation {ANNOTATION_GPU_MEMORY}={}: must be positive", quote(.0))]
    MemoryNotPositive(String),
    #[error("annotation {ANNOTATION_GPU_COMPUTE}={}: want a share of one GPU from 0 to 1", quote(.0))]
    BadCompute(String),
    #[error("annotation {key}={}: want a duration such as 90m", quote(.text))]
    BadDuration { key: String, text: String },
    #[error("nodeSelector {0}: Partita evaluates only {LABEL_GPU_PRODUCT}")]
    NodeSelector(String),
    #[error("required node affinity is not evaluated by Partita yet")]
    RequiredNodeAffinity,
    /// The engine refuses the task (a negative request, a bad demand).
    #[error(transparent)]
    Task(#[from] WorkloadError),
}

/// Maps a pod's priority to an engine class: production at
/// `PRODUCTION_PRIORITY` and above, best-effort below 0, batch otherwise
/// (including pods with no priority, which the API server gives 0).
pub fn class_of(p: &Pod) -> Class {
    let prio = p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
    if prio >= PRODUCTION_PRIORITY {
        Class::Production
    } else if prio < BEST_EFFORT_BELOW {
        Class::BestEffort
    } else {
        Class::Batch
    }
}

/// The pod's namespace ("" when unset).
pub fn namespace_of(p: &Pod) -> &str {
    p.metadata.namespace.as_deref().unwrap_or("")
}

/// The pod's name ("" when unset).
pub fn name_of(p: &Pod) -> &str {
    p.metadata.name.as_deref().unwrap_or("")
}

/// The pod's UID ("" when unset, as in Go): the key of the snapshot's
/// maps of pods.
pub fn uid_of(p: &Pod) -> &str {
    p.metadata.uid.as_deref().unwrap_or("")
}

/// The pod's annotations (empty when it has none).
pub fn annotations_of(p: &Pod) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    p.metadata.annotations.as_ref().unwrap_or(&EMPTY)
}

/// The pod's labels (empty when it has none).
pub fn labels_of(p: &Pod) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    p.metadata.labels.as_ref().unwrap_or(&EMPTY)
}

/// The pod's nodeSelector (empty when it has none).
fn node_selector(p: &Pod) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    p.spec
        .as_ref()
        .and_then(|s| s.node_selector.as_ref())
        .unwrap_or(&EMPTY)
}

fn containers(p: &Pod) -> &[Container] {
    p.spec.as_ref().map_or(&[], |s| &s.containers)
}

fn init_containers(p: &Pod) -> &[Container] {
    p.spec
        .as_ref()
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
}

/// Names the engine task of a pod: unique in the cluster.
pub fn task_name(p: &Pod) -> String {
    format!("{}/{}", namespace_of(p), name_of(p))
}

/// Translates a pod into the engine's task. An error says why the pod
/// cannot be scheduled as it is.
pub fn task_of(p: &Pod) -> Result<Task, PodError> {
    let (cpu_milli, memory_mib) = pod_requests(p);
    let gpu = demand_of(p)?;
    let t = Task {
        name: task_name(p),
        cpu_milli,
        memory_mib,
        gpu,
    };
    t.validate(None)?;
    Ok(t)
}

/// The CPU (milli) and memory (MiB, rounded up) the pod requests, as the
/// kube-scheduler counts them: the larger of the containers' sum and the
/// largest init container, plus the pod overhead. Sidecars (restartable
/// init containers) run beside the containers and are added to them.
/// Sums saturate: a pod asking for more than i64 holds is refused later as
/// larger than any node.
pub fn pod_requests(p: &Pod) -> (i64, i64) {
    let requests = |c: &Container| {
        let list = c.resources.as_ref().and_then(|r| r.requests.as_ref());
        (
            quantity_of(list, RESOURCE_CPU, Scale::Milli),
            quantity_of(list, RESOURCE_MEMORY, Scale::One),
        )
    };
    let (mut cpu, mut mem) = (0i64, 0i64);
    for c in containers(p) {
        let (rc, rm) = requests(c);
        cpu = cpu.saturating_add(rc);
        mem = mem.saturating_add(rm);
    }
    let (mut side_cpu, mut side_mem, mut init_cpu, mut init_mem) = (0i64, 0i64, 0i64, 0i64);
    for c in init_containers(p) {
        let (rc, rm) = requests(c);
        if c.restart_policy.as_deref() == Some(RESTART_POLICY_ALWAYS) {
            side_cpu = side_cpu.saturating_add(rc);
            side_mem = side_mem.saturating_add(rm);
            continue;
        }
        // An init container runs beside the sidecars started before it.
        init_cpu = init_cpu.max(rc.saturating_add(side_cpu));
        init_mem = init_mem.max(rm.saturating_add(side_mem));
    }
    cpu = cpu.saturating_add(side_cpu).max(init_cpu);
    mem = mem.saturating_add(side_mem).max(init_mem);
    let overhead = p.spec.as_ref().and_then(|s| s.overhead.as_ref());
    cpu = cpu.saturating_add(quantity_of(overhead, RESOURCE_CPU, Scale::Milli));
    mem = mem.saturating_add(quantity_of(overhead, RESOURCE_MEMORY, Scale::One));
    (cpu, mib_rounded_up(mem))
}

/// Bytes to MiB, rounded up (Go's `(b + 1<<20 - 1) >> 20`, without its
/// overflow near the top of i64).
fn mib_rounded_up(bytes: i64) -> i64 {
    ((i128::from(bytes) + (1 << 20) - 1) >> 20) as i64
}

/// The NVIDIA resources a pod asks for: whole GPUs, and MIG instances per
/// profile (never 0). See `gpu_resources`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuResources {
    pub whole: i64,
    pub mig: BTreeMap<String, i64>,
}

impl GpuResources {
    /// Whether the pod asks for any NVIDIA device itself.
    pub fn any(&self) -> bool {
        self.whole > 0 || !self.mig.is_empty()
    }
}

/// Sums the NVIDIA resources a pod asks for: whole GPUs and MIG instances
/// per profile (limits, which equal requests for extended resources;
/// requests when no limit is set).
pub fn gpu_resources(p: &Pod) -> GpuResources {
    let mut out = GpuResources::default();
    for c in containers(p) {
        let d = container_devices(c);
        out.whole = out.whole.saturating_add(d.whole);
        for (k, v) in d.mig {
            let n = out.mig.entry(k).or_insert(0);
            *n = n.saturating_add(v);
        }
    }
    // Init containers run before the containers and release their
    // devices; the pod needs the larger of the two.
    for c in init_containers(p) {
        let d = container_devices(c);
        out.whole = out.whole.max(d.whole);
        for (k, v) in d.mig {
            let n = out.mig.entry(k).or_insert(0);
            *n = (*n).max(v);
        }
    }
    out.mig.retain(|_, v| *v != 0);
    out
}

/// The NVIDIA resources one container asks for: its limits, and its
/// requests of resources without a limit.
fn container_devices(c: &Container) -> GpuResources {
    let r = c.resources.as_ref();
    let limits = r.and_then(|r| r.limits.as_ref());
    let requests = r.and_then(|r| r.requests.as_ref());
    let unlimited = requests
        .into_iter()
        .flatten()
        .filter(|(name, _)| !limits.is_some_and(|l| l.contains_key(*name)));
    let mut out = GpuResources::default();
    for (name, q) in limits.into_iter().flatten().chain(unlimited) {
        let v = quantity_value(q, Scale::One);
        if name == RESOURCE_GPU {
            out.whole = out.whole.saturating_add(v);
        } else if let Some(profile) = name.strip_prefix(RESOURCE_MIG_PREFIX) {
            let n = out.mig.entry(profile.to_string()).or_insert(0);
            *n = n.saturating_add(v);
        }
    }
    out
}

/// Reads a pod's GPU demand:
///   - nvidia.com/gpu: N asks for N whole GPUs on one node;
///   - nvidia.com/mig-<profile>: 1 asks for one MIG instance of that
///     profile (as the pod asks, whatever its annotations say);
///   - else partita.dev/gpu-memory (and partita.dev/gpu-compute) ask for a
///     memory profile: Partita picks the MIG profile;
///   - else no GPU.
///
/// A nodeSelector on nvidia.com/gpu.product limits the GPU model; other
/// node constraints are refused for pending pods (see `check_constraints`).
pub fn demand_of(p: &Pod) -> Result<Demand, PodError> {
    let models: Vec<String> = node_selector(p)
        .get(LABEL_GPU_PRODUCT)
        .map(|prod| vec![lookup(prod).name.clone()])
        .unwrap_or_default();
    let GpuResources { whole, mig } = gpu_resources(p);
    // The map is ordered: the first key is the smallest, as Go's firstKey.
    let first = mig.iter().next().map(|(k, v)| (k.clone(), *v));
    match first {
        Some((profile, _)) if whole > 0 => return Err(PodError::GpusAndMig { profile }),
        Some(_) if mig.len() > 1 => return Err(PodError::SeveralProfiles(mig.len())),
        _ if whole > 0 => {
            return Ok(Demand {
                kind: Kind::WholeGpus,
                // More than i32 GPUs is refused by validation as larger
                // than any node.
                count: i32::try_from(whole).unwrap_or(i32::MAX),
                models,
                ..Demand::default()
            });
        }
        Some((profile, count)) => {
            if count != 1 {
                return Err(PodError::SeveralInstances { count, profile });
            }
            return Ok(Demand {
                kind: Kind::MigProfile,
                profile,
                models,
                ..Demand::default()
            });
        }
        None => {}
    }
    let ann = annotations_of(p);
    if !ann.contains_key(ANNOTATION_GPU_MEMORY) {
        if ann.contains_key(ANNOTATION_GPU_COMPUTE) {
            return Err(PodError::ComputeWithoutMemory);
        }
        return Ok(Demand::none());
    }
    let (peak_memory_mib, compute) = memory_need(ann)?;
    Ok(Demand {
        kind: Kind::MemoryProfile,
        peak_memory_mib,
        compute,
        models,
        ..Demand::default()
    })
}

/// Reads the memory annotations: peak GPU memory in MiB (rounded up) and
/// the compute share (0 when absent).
pub fn memory_need(ann: &BTreeMap<String, String>) -> Result<(i64, f64), PodError> {
    let text = ann.get(ANNOTATION_GPU_MEMORY).map_or("", String::as_str);
    let Some((negative, num, den)) = parse_quantity(text) else {
        return Err(PodError::MemoryNotQuantity(text.to_string()));
    };
    if negative || num == 0 {
        return Err(PodError::MemoryNotPositive(text.to_string()));
    }
    // Go's Quantity.Value: rounded up to a whole byte; saturates.
    let bytes = i64::try_from(num.div_ceil(den)).unwrap_or(i64::MAX);
    let peak = mib_rounded_up(bytes);
    let mut compute = 0.0;
    if let Some(c) = ann.get(ANNOTATION_GPU_COMPUTE) {
        // `contains` is false for NaN.
        match c.trim().parse::<f64>() {
            Ok(v) if (0.0..=1.0).contains(&v) => compute = v,
            _ => return Err(PodError::BadCompute(c.clone())),
        }
    }
    Ok((peak, compute))
}

/// Refuses node constraints Partita does not evaluate (the engine places
/// by GPU, CPU and memory; see docs/kubernetes.md): a nodeSelector other
/// than nvidia.com/gpu.product, and required node affinity. Refusing is
/// safer than binding where the pod must not run.
pub fn check_constraints(p: &Pod) -> Result<(), PodError> {
    if let Some(k) = node_selector(p).keys().find(|k| *k != LABEL_GPU_PRODUCT) {
        return Err(PodError::NodeSelector(k.clone()));
    }
    let required = p
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    if required.is_some() {
        return Err(PodError::RequiredNodeAffinity);
    }
    Ok(())
}

/// A duration annotation (an estimated run time) read as a Go duration;
/// 0 when absent.
pub fn duration_annotation(ann: &BTreeMap<String, String>, key: &str) -> Result<Nanos, PodError> {
    let Some(text) = ann.get(key) else {
        return Ok(0);
    };
    match parse_duration(text) {
        Some(d) if d >= 0 => Ok(d),
        _ => Err(PodError::BadDuration {
            key: key.to_string(),
            text: text.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::fixtures::{pod, q};
    use k8s_openapi::api::core::v1::ResourceRequirements;

    // TestDemandOf: its fifteen cases.
    #[test]
    fn demand_of_reads_resources_and_annotations() {
        let mig = |p: &str| format!("{RESOURCE_MIG_PREFIX}{p}");
        let cases: Vec<(&str, Pod, Result<&str, &str>)> = vec![
            ("no GPU", pod("p").pod(), Ok("no GPU")),
            ("whole GPUs", pod("p").gpus(4).pod(), Ok("4 GPU")),
            (
                "a MIG instance",
                pod("p").mig_profile("3g.40gb").pod(),
                Ok("MIG 3g.40gb"),
            ),
            (
                "a MIG request wins over the memory annotation",
                pod("p")
                    .mig_profile("1g.10gb")
                    .ann(ANNOTATION_GPU_MEMORY, "40Gi")
                    .pod(),
                Ok("MIG 1g.10gb"),
            ),
            (
                "memory and compute",
                pod("p")
                    .ann(ANNOTATION_GPU_MEMORY, "20Gi")
                    .ann(ANNOTATION_GPU_COMPUTE, "0.3")
                    .pod(),
                Ok("20480 MiB peak, 0.30 compute"),
            ),
            (
                "memory in decimal units",
                pod("p").ann(ANNOTATION_GPU_MEMORY, "1G").pod(),
                Ok("954 MiB peak, 0.00 compute"),
            ),
            (
                "the model from the GFD product selector",
                pod("p")
                    .gpus(1)
                    .node_selector(LABEL_GPU_PRODUCT, "NVIDIA-A100-SXM4-80GB")
                    .pod(),
                Ok("1 GPU on A100-80GB"),
            ),
            (
                "GPUs and MIG together",
                pod("p").gpus(1).mig_profile("1g.10gb").pod(),
                Err("a pod takes whole GPUs or one MIG instance"),
            ),
            (
                "two MIG profiles",
                pod("p").mig_profile("1g.10gb").mig_profile("2g.20gb").pod(),
                Err("2 profiles"),
            ),
            (
                "two instances of a profile",
                pod("p").limit(&mig("1g.10gb"), 2).pod(),
                Err("2 instances"),
            ),
            (
                "memory that is not a quantity",
                pod("p").ann(ANNOTATION_GPU_MEMORY, "lots").pod(),
                Err("not a quantity"),
            ),
            (
                "negative memory",
                pod("p").ann(ANNOTATION_GPU_MEMORY, "-1Gi").pod(),
                Err("must be positive"),
            ),
            (
                "compute above 1",
                pod("p")
                    .ann(ANNOTATION_GPU_MEMORY, "1Gi")
                    .ann(ANNOTATION_GPU_COMPUTE, "1.5")
                    .pod(),
                Err("from 0 to 1"),
            ),
            (
                "compute NaN",
                pod("p")
                    .ann(ANNOTATION_GPU_MEMORY, "1Gi")
                    .ann(ANNOTATION_GPU_COMPUTE, "NaN")
                    .pod(),
                Err("from 0 to 1"),
            ),
            (
                "compute without memory",
                pod("p").ann(ANNOTATION_GPU_COMPUTE, "0.5").pod(),
                Err("needs partita.dev/gpu-memory"),
            ),
        ];
        assert_eq!(cases.len(), 15);
        for (name, p, want) in cases {
            match (demand_of(&p), want) {
                (Ok(d), Ok(w)) => assert_eq!(d.to_string(), w, "{name}"),
                (Err(e), Err(w)) => assert!(e.to_string().contains(w), "{name}: err {e}, want {w}"),
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }

    // The error texts are the Go build's, whole.
    #[test]
    fn demand_errors_read_as_go_writes_them() {
        let e = demand_of(&pod("p").ann(ANNOTATION_GPU_MEMORY, "lots").pod()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "annotation partita.dev/gpu-memory=\"lots\": not a quantity (e.g. 20Gi): \
             quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        let e = demand_of(&pod("p").gpus(1).mig_profile("1g.10gb").pod()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "asks for both nvidia.com/gpu and nvidia.com/mig-1g.10gb: a pod takes whole GPUs or one MIG instance"
        );
        let e = demand_of(
            &pod("p")
                .ann(ANNOTATION_GPU_MEMORY, "1Gi")
                .ann(ANNOTATION_GPU_COMPUTE, " 2 ")
                .pod(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "annotation partita.dev/gpu-compute=\" 2 \": want a share of one GPU from 0 to 1"
        );
        // Requests count when no limit is set; limits win over requests.
        let mut p = pod("p").pod();
        let r = p.spec.as_mut().unwrap().containers[0]
            .resources
            .get_or_insert_default();
        r.requests
            .get_or_insert_default()
            .insert(RESOURCE_GPU.to_string(), q("2"));
        assert_eq!(demand_of(&p).unwrap().to_string(), "2 GPU");
        r_limit(&mut p, RESOURCE_GPU, "3");
        assert_eq!(demand_of(&p).unwrap().to_string(), "3 GPU");
    }

    fn r_limit(p: &mut Pod, name: &str, v: &str) {
        p.spec.as_mut().unwrap().containers[0]
            .resources
            .get_or_insert_with(ResourceRequirements::default)
            .limits
            .get_or_insert_default()
            .insert(name.to_string(), q(v));
    }

    // TestPodRequests.
    #[test]
    fn pod_requests_count_as_the_kube_scheduler_does() {
        let mut p = pod("p").pod();
        let spec = p.spec.as_mut().unwrap();
        let requests = |pairs: &[(&str, &str)]| ResourceRequirements {
            requests: Some(pairs.iter().map(|(k, v)| (k.to_string(), q(*v))).collect()),
            ..ResourceRequirements::default()
        };
        spec.containers.push(Container {
            name: "side".to_string(),
            resources: Some(requests(&[("cpu", "500m"), ("memory", "512Mi")])),
            ..Container::default()
        });
        spec.init_containers = Some(vec![
            Container {
                name: "sidecar".to_string(),
                restart_policy: Some("Always".to_string()),
                resources: Some(requests(&[("cpu", "100m")])),
                ..Container::default()
            },
            Container {
                name: "big-init".to_string(),
                resources: Some(requests(&[("memory", "8Gi")])),
                ..Container::default()
            },
        ]);
        spec.overhead = Some([("cpu".to_string(), q("50m"))].into());
        assert_eq!(pod_requests(&p), (1650, 8192));
    }

    // Init containers' devices: the pod needs the larger of theirs and
    // the containers'.
    #[test]
    fn gpu_resources_take_the_larger_of_init_and_main() {
        let mut p = pod("p").gpus(1).pod();
        let init = Container {
            name: "init".to_string(),
            resources: Some(ResourceRequirements {
                limits: Some(
                    [
                        (RESOURCE_GPU.to_string(), q("2")),
                        (format!("{RESOURCE_MIG_PREFIX}1g.10gb"), q("0")),
                    ]
                    .into(),
                ),
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        };
        p.spec.as_mut().unwrap().init_containers = Some(vec![init]);
        let got = gpu_resources(&p);
        assert_eq!(got.whole, 2);
        assert!(got.mig.is_empty(), "zero counts are dropped: {got:?}");
    }

    // TestClassOf.
    #[test]
    fn class_of_maps_priorities() {
        for (prio, want) in [
            (None, Class::Batch),
            (Some(0), Class::Batch),
            (Some(-1), Class::BestEffort),
            (Some(999_999), Class::Batch),
            (Some(PRODUCTION_PRIORITY), Class::Production),
            (Some(2_000_000_000), Class::Production),
        ] {
            assert_eq!(class_of(&pod("p").priority(prio).pod()), want, "{prio:?}");
        }
    }

    // TestCheckConstraints.
    #[test]
    fn check_constraints_refuses_what_partita_does_not_evaluate() {
        let p = pod("p").node_selector(LABEL_GPU_PRODUCT, "NVIDIA-H100-80GB-HBM3");
        let p = p.pod();
        assert_eq!(
            check_constraints(&p),
            Ok(()),
            "GPU product selector refused"
        );
        let mut p = p;
        p.spec
            .as_mut()
            .unwrap()
            .node_selector
            .as_mut()
            .unwrap()
            .insert("zone".to_string(), "a".to_string());
        let e = check_constraints(&p).unwrap_err();
        assert!(e.to_string().contains("zone"), "{e}");
        let e = check_constraints(&pod("p").required_node_affinity().pod());
        assert_eq!(e, Err(PodError::RequiredNodeAffinity));
    }

    #[test]
    fn task_of_names_the_task_and_validates_it() {
        let t = task_of(&pod("p").gpus(2).pod()).unwrap();
        assert_eq!(t.name, "ns/p");
        assert_eq!((t.cpu_milli, t.memory_mib), (1000, 1024));
        assert_eq!(t.gpu.to_string(), "2 GPU");
        // A negative request is lifted to 0 by the init containers' max
        // (as in Go); a negative overhead is not.
        let mut p = pod("p").pod();
        p.spec.as_mut().unwrap().overhead = Some([("cpu".to_string(), q("-2"))].into());
        let e = task_of(&p).unwrap_err();
        assert_eq!(e.to_string(), "task ns/p: cpu -1000m is negative");
    }

    #[test]
    fn duration_annotations_read_go_durations() {
        let ann = |v: &str| BTreeMap::from([("k".to_string(), v.to_string())]);
        assert_eq!(duration_annotation(&BTreeMap::new(), "k"), Ok(0));
        assert_eq!(
            duration_annotation(&ann("90m"), "k"),
            Ok(90 * 60 * 1_000_000_000)
        );
        assert_eq!(
            duration_annotation(&ann("1h30m"), "k"),
            Ok(90 * 60 * 1_000_000_000)
        );
        for bad in ["-1h", "90", "soon", ""] {
            let e = duration_annotation(&ann(bad), "k").unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("annotation k={}: want a duration such as 90m", quote(bad))
            );
        }
    }

    // Memory too large for i64 bytes saturates instead of overflowing.
    #[test]
    fn memory_need_saturates() {
        let ann = |v: &str| BTreeMap::from([(ANNOTATION_GPU_MEMORY.to_string(), v.to_string())]);
        assert_eq!(memory_need(&ann("1e40")), Ok(((i64::MAX >> 20) + 1, 0.0)));
        assert_eq!(memory_need(&ann("1n")), Ok((1, 0.0)));
        assert!(memory_need(&ann("0")).is_err());
        assert!(memory_need(&BTreeMap::new()).is_err());
    }
}
