//! A job submitted through the portal or the API, as the Kubernetes
//! objects that run it on a cluster (issue 48, item 3): one pod per task
//! and, for a gang, a PodGroup, in the team's namespace, for the scheduler
//! (`schedulerName: partita`) to place like any pod people create with
//! kubectl. Pure: the objects are built here and written elsewhere.
//!
//! Why bare pods with a PodGroup and not a `batch/v1` Job: a Job's
//! controller owns its pods and makes new ones when one is evicted or
//! fails, whereas Partita decides itself when a preempted job comes back
//! (after its grace, from its checkpoint, at its queue position) and what
//! a failure means for the gang; two owners of one pod's life would fight.
//! A PodGroup is also how Partita already reads gangs from kubectl users,
//! so one path serves both. And the pods carry everything the engine
//! reads (`k8s::pod`): reading them back gives the job the worker meant.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use partita_engine::workload::{Class, Kind, Task};

use super::names::{
    ANNOTATION_ESTIMATED_RUNTIME, ANNOTATION_GPU_COMPUTE, ANNOTATION_GPU_MEMORY,
    DEFAULT_SCHEDULER_NAME, LABEL_POD_GROUP, LABEL_QUEUE, RESOURCE_GPU, RESOURCE_MIG_PREFIX,
};
use super::resources::{PodGroup, PodGroupSpec};
use crate::worker::spec::JobSpec;

/// Marks the objects Partita made for a stored job, so the worker can list
/// them and tell them from pods people made.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "partita";
/// The stored job an object belongs to (its ID, as the API shows it).
pub const LABEL_JOB_ID: &str = "partita.dev/job-id";
/// Which run of the job an object belongs to: a preempted job comes back
/// as new pods (the evicted ones may still be terminating under their
/// names), so the run is part of every name.
pub const LABEL_RUN: &str = "partita.dev/run";

/// The PriorityClasses of `deploy/kubernetes/partita.yaml`, by class: the
/// API server turns the name into the priority that `k8s::pod` reads back
/// as the class.
pub fn priority_class(class: Class) -> &'static str {
    match class {
        Class::Production => "partita-production",
        Class::Batch => "partita-batch",
        Class::BestEffort => "partita-best-effort",
    }
}

/// A stored job as the worker hands it over.
#[derive(Debug, Clone)]
pub struct StoredJob<'a> {
    pub id: &'a str,
    /// The job's run (`Runtime::epoch`): 0 first, one more after each
    /// preemption or requeue.
    pub run: u64,
    pub class: Class,
    pub spec: &'a JobSpec,
}

/// Where and how a job's pods run.
#[derive(Debug, Clone)]
pub struct Placement<'a> {
    /// The team's namespace.
    pub namespace: &'a str,
    /// The team's Queue.
    pub queue: &'a str,
    pub scheduler_name: &'a str,
    /// The container image and command of every task (the job spec names
    /// none yet: one per installation).
    pub image: &'a str,
    pub command: &'a [String],
}

impl Default for Placement<'_> {
    fn default() -> Self {
        Placement {
            namespace: "default",
            queue: "default",
            scheduler_name: DEFAULT_SCHEDULER_NAME,
            image: "registry.k8s.io/pause:3.10",
            command: &[],
        }
    }
}

/// The objects of one job.
#[derive(Debug, Clone)]
pub struct Workload {
    pub pod_group: Option<PodGroup>,
    pub pods: Vec<Pod>,
}

/// Why a job cannot run as pods.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    #[error(
        "job {job}: task {task} asks for {milli} thousandths of a GPU; on Kubernetes a pod takes whole GPUs, a MIG instance or a memory profile"
    )]
    Fraction {
        job: String,
        task: String,
        milli: i32,
    },
    #[error("job {job}: no tasks")]
    NoTasks { job: String },
    #[error(
        "job {job}: {what} {value:?} is not a DNS-1123 label (lower-case letters, digits and '-', at most {max} characters)"
    )]
    BadName {
        job: String,
        what: &'static str,
        value: String,
        max: usize,
    },
}

/// The pods (and PodGroup) that run `job`.
pub fn workload_of(job: &StoredJob<'_>, at: &Placement<'_>) -> Result<Workload, WorkloadError> {
    let base = format!("{}-{}", object_name(job.id), job.run);
    // A pod name is at most 253 characters; "-<task>" follows the base.
    check_label(job, "job ID", &base, 240)?;
    check_label(job, "namespace", at.namespace, 63)?;
    if job.spec.tasks.is_empty() {
        return Err(WorkloadError::NoTasks { job: job.id.into() });
    }
    let gang = job.spec.gang > 1;
    let mut labels = BTreeMap::from([
        (LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string()),
        (LABEL_JOB_ID.to_string(), label_value(job.id)),
        (LABEL_RUN.to_string(), job.run.to_string()),
        (LABEL_QUEUE.to_string(), at.queue.to_string()),
    ]);
    if gang {
        labels.insert(LABEL_POD_GROUP.into(), base.clone());
    }
    let pods = job
        .spec
        .tasks
        .iter()
        .enumerate()
        .map(|(i, task)| pod_of(job, at, task, format!("{base}-{i}"), &labels))
        .collect::<Result<Vec<_>, _>>()?;
    let pod_group = gang.then(|| PodGroup {
        metadata: ObjectMeta {
            name: Some(base.clone()),
            namespace: Some(at.namespace.into()),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        spec: PodGroupSpec {
            min_member: job.spec.gang,
            queue: Some(at.queue.into()),
        },
        status: None,
    });
    Ok(Workload { pod_group, pods })
}

/// The start of a job's objects' names: its ID in lower case, with
/// anything a DNS label refuses made a '-', after "job-" unless the ID
/// starts so.
pub fn object_name(id: &str) -> String {
    let mut s: String = id
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-') => c,
            _ => '-',
        })
        .collect();
    // The API's IDs are "job-" and hex digits already.
    if !s.starts_with("job-") {
        s.insert_str(0, "job-");
    }
    s.trim_end_matches('-').to_string()
}

pub fn label_value(id: &str) -> String {
    // Label values allow upper case, '.', '_' too; IDs are short.
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_') {
                c
            } else {
                '_'
            }
        })
        .take(63)
        .collect()
}

fn check_label(
    job: &StoredJob<'_>,
    what: &'static str,
    value: &str,
    max: usize,
) -> Result<(), WorkloadError> {
    let ok = !value.is_empty()
        && value.len() <= max
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(WorkloadError::BadName {
            job: job.id.into(),
            what,
            value: value.into(),
            max,
        })
    }
}

fn pod_of(
    job: &StoredJob<'_>,
    at: &Placement<'_>,
    task: &Task,
    name: String,
    labels: &BTreeMap<String, String>,
) -> Result<Pod, WorkloadError> {
    let mut requests = BTreeMap::new();
    let mut limits = BTreeMap::new();
    if task.cpu_milli > 0 {
        requests.insert("cpu".into(), Quantity(format!("{}m", task.cpu_milli)));
    }
    if task.memory_mib > 0 {
        requests.insert("memory".into(), Quantity(format!("{}Mi", task.memory_mib)));
    }
    let mut annotations = BTreeMap::new();
    if job.spec.duration > 0 {
        // A Go duration, as `k8s::pod` reads it: whole nanoseconds are
        // always valid ("90000000000ns" = 90 s).
        annotations.insert(
            ANNOTATION_ESTIMATED_RUNTIME.to_string(),
            format!("{}ns", job.spec.duration),
        );
    }
    let d = &task.gpu;
    match d.kind {
        Kind::NoGpu => {}
        Kind::WholeGpus => {
            limits.insert(RESOURCE_GPU.into(), Quantity(d.count.to_string()));
        }
        Kind::MigProfile => {
            limits.insert(
                format!("{RESOURCE_MIG_PREFIX}{}", d.profile),
                Quantity("1".into()),
            );
        }
        Kind::MemoryProfile => {
            annotations.insert(
                ANNOTATION_GPU_MEMORY.into(),
                format!("{}Mi", d.peak_memory_mib),
            );
            if d.compute > 0.0 {
                annotations.insert(ANNOTATION_GPU_COMPUTE.into(), d.compute.to_string());
            }
        }
        Kind::Fraction => {
            return Err(WorkloadError::Fraction {
                job: job.id.into(),
                task: task.name.clone(),
                milli: d.milli,
            });
        }
    }
    // A GPU model limit is the one node selector Partita evaluates.
    let node_selector = d.models.first().map(|model| {
        BTreeMap::from([(super::names::LABEL_GPU_PRODUCT.to_string(), model.clone())])
    });
    let container = Container {
        name: "task".into(),
        image: Some(at.image.into()),
        command: (!at.command.is_empty()).then(|| at.command.to_vec()),
        resources: Some(ResourceRequirements {
            requests: (!requests.is_empty()).then_some(requests),
            limits: (!limits.is_empty()).then_some(limits),
            ..ResourceRequirements::default()
        }),
        ..Container::default()
    };
    Ok(Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(at.namespace.into()),
            labels: Some(labels.clone()),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some(at.scheduler_name.into()),
            priority_class_name: Some(priority_class(job.class).into()),
            // Partita decides when a job comes back; the kubelet must not
            // restart a task on its own.
            restart_policy: Some("Never".into()),
            node_selector,
            containers: vec![container],
            ..PodSpec::default()
        }),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use partita_engine::sched::SECOND;
    use partita_engine::workload::Demand;

    fn task(name: &str, gpu: Demand) -> Task {
        Task {
            name: name.into(),
            cpu_milli: 4000,
            memory_mib: 16384,
            gpu,
        }
    }

    fn whole(n: i32) -> Demand {
        Demand {
            kind: Kind::WholeGpus,
            count: n,
            ..Demand::default()
        }
    }

    fn resources(p: &Pod) -> &ResourceRequirements {
        p.spec.as_ref().unwrap().containers[0]
            .resources
            .as_ref()
            .unwrap()
    }

    #[test]
    fn a_gang_becomes_a_pod_group_and_one_pod_per_task() {
        let spec = JobSpec {
            tasks: (0..4).map(|i| task(&format!("w{i}"), whole(8))).collect(),
            gang: 4,
            duration: 3600 * SECOND,
            ..JobSpec::default()
        };
        let job = StoredJob {
            id: "J42",
            run: 0,
            class: Class::Batch,
            spec: &spec,
        };
        let at = Placement {
            namespace: "search",
            queue: "search",
            ..Placement::default()
        };
        let w = workload_of(&job, &at).unwrap();
        let pg = w.pod_group.expect("a gang has a PodGroup");
        assert_eq!(pg.metadata.name.as_deref(), Some("job-j42-0"));
        assert_eq!(pg.spec.min_member, 4);
        assert_eq!(pg.spec.queue.as_deref(), Some("search"));
        assert_eq!(w.pods.len(), 4);
        for (i, p) in w.pods.iter().enumerate() {
            assert_eq!(p.metadata.name.as_deref(), Some(&*format!("job-j42-0-{i}")));
            let labels = p.metadata.labels.as_ref().unwrap();
            assert_eq!(labels[LABEL_POD_GROUP], "job-j42-0");
            assert_eq!(labels[LABEL_QUEUE], "search");
            assert_eq!(labels[LABEL_JOB_ID], "J42");
            let spec = p.spec.as_ref().unwrap();
            assert_eq!(spec.scheduler_name.as_deref(), Some("partita"));
            assert_eq!(spec.priority_class_name.as_deref(), Some("partita-batch"));
            assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
            let r = resources(p);
            assert_eq!(r.limits.as_ref().unwrap()[RESOURCE_GPU].0, "8");
            assert_eq!(r.requests.as_ref().unwrap()["cpu"].0, "4000m");
            assert_eq!(r.requests.as_ref().unwrap()["memory"].0, "16384Mi");
            let ann = p.metadata.annotations.as_ref().unwrap();
            assert_eq!(ann[ANNOTATION_ESTIMATED_RUNTIME], "3600000000000ns");
        }
    }

    #[test]
    fn a_lone_task_has_no_pod_group_and_each_demand_its_resource() {
        let mig = Demand {
            kind: Kind::MigProfile,
            profile: "3g.40gb".into(),
            models: vec!["NVIDIA-H100-80GB-HBM3".into()],
            ..Demand::default()
        };
        let memory = Demand {
            kind: Kind::MemoryProfile,
            peak_memory_mib: 20480,
            compute: 0.25,
            ..Demand::default()
        };
        for (demand, check) in [
            (
                mig,
                Box::new(|p: &Pod| {
                    let r = resources(p);
                    assert_eq!(r.limits.as_ref().unwrap()["nvidia.com/mig-3g.40gb"].0, "1");
                    let sel = p.spec.as_ref().unwrap().node_selector.as_ref().unwrap();
                    assert_eq!(sel["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
                }) as Box<dyn Fn(&Pod)>,
            ),
            (
                memory,
                Box::new(|p: &Pod| {
                    let ann = p.metadata.annotations.as_ref().unwrap();
                    assert_eq!(ann[ANNOTATION_GPU_MEMORY], "20480Mi");
                    assert_eq!(ann[ANNOTATION_GPU_COMPUTE], "0.25");
                    assert!(resources(p).limits.is_none());
                }),
            ),
        ] {
            let spec = JobSpec {
                tasks: vec![task("t", demand)],
                ..JobSpec::default()
            };
            let job = StoredJob {
                id: "J7",
                run: 2,
                class: Class::Production,
                spec: &spec,
            };
            let w = workload_of(&job, &Placement::default()).unwrap();
            assert!(w.pod_group.is_none());
            assert_eq!(w.pods.len(), 1);
            let p = &w.pods[0];
            assert_eq!(p.metadata.name.as_deref(), Some("job-j7-2-0"));
            assert_eq!(p.metadata.labels.as_ref().unwrap()[LABEL_RUN], "2");
            assert!(
                !p.metadata
                    .labels
                    .as_ref()
                    .unwrap()
                    .contains_key(LABEL_POD_GROUP)
            );
            assert_eq!(
                p.spec.as_ref().unwrap().priority_class_name.as_deref(),
                Some("partita-production")
            );
            check(p);
        }
    }

    #[test]
    fn what_pods_cannot_express_is_refused_by_name() {
        let spec = JobSpec {
            tasks: vec![task(
                "half",
                Demand {
                    kind: Kind::Fraction,
                    milli: 500,
                    ..Demand::default()
                },
            )],
            ..JobSpec::default()
        };
        let job = StoredJob {
            id: "J1",
            run: 0,
            class: Class::Batch,
            spec: &spec,
        };
        let err = workload_of(&job, &Placement::default()).unwrap_err();
        assert!(
            err.to_string()
                .contains("task half asks for 500 thousandths"),
            "{err}"
        );
        let at = Placement {
            namespace: "Team_A",
            ..Placement::default()
        };
        let spec = JobSpec {
            tasks: vec![task("t", whole(1))],
            ..JobSpec::default()
        };
        let job = StoredJob { spec: &spec, ..job };
        let err = workload_of(&job, &at).unwrap_err();
        assert!(err.to_string().contains("namespace \"Team_A\""), "{err}");
        let empty = JobSpec::default();
        let job = StoredJob {
            spec: &empty,
            ..job
        };
        assert_eq!(
            workload_of(&job, &Placement::default()).unwrap_err(),
            WorkloadError::NoTasks { job: "J1".into() }
        );
    }

    #[test]
    fn object_names_are_dns_labels() {
        assert_eq!(object_name("J000123"), "job-j000123");
        assert_eq!(object_name("a_b.c"), "job-a-b-c");
        assert_eq!(object_name("x!"), "job-x");
        assert_eq!(object_name("job-00ff"), "job-00ff");
    }
}
