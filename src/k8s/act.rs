//! Carrying a decision out (port of go/internal/kube/act.go). Order
//! matters:
//!
//!  1. MIG changes (mig.rs): each node's changes become one mig-parted
//!     config and one label. A start that needs a MIG instance that does
//!     not exist yet is a change too: the instance can only be made by the
//!     MIG manager, so the job waits for it instead of binding.
//!  2. Binds, then evictions, concurrently up to `bind_workers`; binds of
//!     a gang go out together. The engine checked the whole plan on its
//!     copy of the cluster, so the order between pods does not matter.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{DeleteParams, EvictParams, PostParams, Preconditions};
use partita_engine::cluster::Assignment;
use partita_engine::sched::{Decision, Preemption};

use super::cycle::{node_name, starts_by_job, uid};
use super::devices::device_annotations;
use super::events::EventType;
use super::names::{
    ANNOTATION_GPU_MEMORY, ANNOTATION_GPU_SHARE, ANNOTATION_GPUS, ANNOTATION_JOB,
    ANNOTATION_MIG_SLICE,
};
use super::pod::{gpu_resources, task_name};
use super::scheduler::{AssumedBind, Memory, Scheduler, duration};
use super::snapshot::{Assumed, Snapshot};

/// One API call of the act step.
enum Action<'a> {
    Bind {
        pod: Arc<Pod>,
        job: &'a str,
        assignment: &'a Assignment,
    },
    Evict {
        pod: Arc<Pod>,
        preemption: &'a Preemption,
    },
}

impl Scheduler {
    /// Carries `d` out and returns the reasons of the jobs it could not
    /// start as decided (waiting for a MIG change), by job ID.
    pub(crate) async fn act(
        &self,
        mem: &mut Memory,
        snap: &Snapshot,
        d: &Decision,
    ) -> BTreeMap<String, String> {
        // Events wait while this cycle binds and evicts.
        let _binding = self.events.binding();
        let mut waits = BTreeMap::new();
        let (order, starts) = starts_by_job(d);
        // Jobs that need a new instance.
        let creating: HashSet<&str> = d
            .starts
            .iter()
            .filter(|st| st.creates)
            .map(|st| st.job.as_str())
            .collect();
        let changed = self
            .change_mig(mem, snap, d, &starts, &creating, &mut waits)
            .await;
        let mut actions = Vec::new();
        for job in &order {
            if creating.contains(job.as_str()) {
                continue;
            }
            let pods = snap
                .job_pods
                .get(job)
                .map(Vec::as_slice)
                .unwrap_or_default();
            for &i in &starts[job] {
                let st = &d.starts[i];
                let Some(pod) = pods.get(st.task) else {
                    continue;
                };
                actions.push(Action::Bind {
                    pod: pod.clone(),
                    job,
                    assignment: &st.assignment,
                });
            }
        }
        for pr in &d.preemptions {
            for p in snap.job_pods.get(&pr.job).into_iter().flatten() {
                let assumed = self.lock_acted().assumed.contains_key(&uid(p));
                if node_name(p).is_empty() && !assumed {
                    continue;
                }
                actions.push(Action::Evict {
                    pod: p.clone(),
                    preemption: pr,
                });
            }
        }
        futures::stream::iter(actions)
            .for_each_concurrent(self.opt.bind_workers, |a| async move {
                match a {
                    Action::Bind {
                        pod,
                        job,
                        assignment,
                    } => self.bind(&pod, job, assignment).await,
                    Action::Evict { pod, preemption } => self.evict(&pod, preemption).await,
                }
            })
            .await;
        for (job, node) in &changed {
            mem.wait_for.insert(job.clone(), node.clone());
        }
        // A hold ends when its node's change is done (or failed: the job
        // goes back to the engine, which sees the node cordoned).
        mem.wait_for.retain(|job, node| {
            changed.contains_key(job) || snap.views.get(node).is_some_and(|v| v.mig_changing)
        });
        waits
    }

    /// Binds one pod through pods/binding, with the devices in the
    /// Binding's annotations (the API server sets them on the pod in the
    /// same write). The API server refuses a second bind of a pod, so a
    /// restarted or duplicated scheduler can never place a pod twice.
    async fn bind(&self, p: &Pod, job: &str, a: &Assignment) {
        if let Some(before) = &self.opt.before_bind
            && before(p).is_err()
        {
            self.metrics.bind("skipped");
            return;
        }
        let mut ann = device_annotations(a);
        ann.insert(ANNOTATION_JOB.to_string(), job.to_string());
        let namespace = p.metadata.namespace.clone().unwrap_or_default();
        let name = p.metadata.name.clone().unwrap_or_default();
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                uid: p.metadata.uid.clone(),
                annotations: Some(ann.clone()),
                ..ObjectMeta::default()
            },
            target: ObjectReference {
                kind: Some("Node".to_string()),
                name: Some(a.node.clone()),
                ..ObjectReference::default()
            },
        };
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let result: Result<serde_json::Value, kube::Error> = pods
            .create_subresource("binding", &name, &PostParams::default(), &binding)
            .await;
        if let Err(e) = result {
            self.metrics.bind(error_class(&e));
            tracing::info!(pod = %task_name(p), node = %a.node, error = %e, "bind failed");
            return;
        }
        self.metrics.bind("ok");
        let note = format!(
            "partita: assigned {} to {}{}",
            task_name(p),
            a.node,
            describe_devices(&ann)
        );
        let mig_slice = ann.contains_key(ANNOTATION_MIG_SLICE);
        self.lock_acted().assumed.insert(
            uid(p),
            AssumedBind {
                assumed: Assumed {
                    node: a.node.clone(),
                    annotations: ann,
                },
                at: Instant::now(),
            },
        );
        self.events.record(p, EventType::Normal, "Scheduled", &note);
        let memory_only = p
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|an| an.contains_key(ANNOTATION_GPU_MEMORY));
        if memory_only && mig_slice && !gpu_resources(p).any() {
            // No nvidia.com resource in the spec: the stock device plugin
            // gives this pod no GPU (see docs/kubernetes.md, "memory").
            self.events.record(
                p,
                EventType::Warning,
                "NoDeviceRequest",
                &format!(
                    "partita: the pod asks for GPU memory by annotation only; its MIG instance is recorded in {ANNOTATION_MIG_SLICE} but the NVIDIA device plugin gives a pod only what its spec requests: enable Partita's admission webhook"
                ),
            );
        }
    }

    /// Asks the Eviction API to remove a victim with the engine's grace
    /// period; the API honours PodDisruptionBudgets (a refusal is retried
    /// next cycle, since the engine still wants the room).
    async fn evict(&self, p: &Pod, pr: &Preemption) {
        let grace = duration(pr.grace).as_secs();
        let params = EvictParams {
            delete_options: Some(DeleteParams {
                grace_period_seconds: Some(u32::try_from(grace).unwrap_or(u32::MAX)),
                preconditions: Some(Preconditions {
                    uid: p.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            }),
            post_options: PostParams::default(),
        };
        let namespace = p.metadata.namespace.clone().unwrap_or_default();
        let name = p.metadata.name.clone().unwrap_or_default();
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        match pods.evict(&name, &params).await {
            Err(e) if !is_not_found(&e) => {
                self.metrics.eviction(error_class(&e));
                tracing::info!(pod = %task_name(p), error = %e, "eviction failed");
                if error_class(&e) == "too-many-requests" {
                    self.events.record(
                        p,
                        EventType::Warning,
                        "PreemptionBlocked",
                        &format!("partita: eviction refused (PodDisruptionBudget): {e}"),
                    );
                }
                return;
            }
            _ => {}
        }
        self.metrics.eviction("ok");
        self.lock_acted().evicting.insert(uid(p), Instant::now());
        self.events.record(
            p,
            EventType::Normal,
            "Preempted",
            &format!(
                "partita: {}; grace {}s",
                pr.reason,
                duration(pr.grace).as_secs()
            ),
        );
    }
}

/// " (GPUs 0,1, MIG instance 2:3g.40gb@4)" for the Scheduled event, ""
/// without devices.
fn describe_devices(ann: &BTreeMap<String, String>) -> String {
    let mut parts = Vec::new();
    for (key, what) in [
        (ANNOTATION_GPUS, "GPUs"),
        (ANNOTATION_MIG_SLICE, "MIG instance"),
        (ANNOTATION_GPU_SHARE, "GPU share"),
    ] {
        if let Some(v) = ann.get(key).filter(|v| !v.is_empty()) {
            parts.push(format!("{what} {v}"));
        }
    }
    if parts.is_empty() {
        return String::new();
    }
    format!(" ({})", parts.join(", "))
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Labels a failed API call for the metrics.
pub(crate) fn error_class(e: &kube::Error) -> &'static str {
    match e {
        kube::Error::Api(s) => match s.code {
            409 => "conflict",
            404 => "not-found",
            429 => "too-many-requests",
            403 => "forbidden",
            _ => "error",
        },
        _ => "error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            ..kube::core::Status::default()
        }))
    }

    #[test]
    fn error_classes_are_the_go_builds() {
        for (code, class) in [
            (409, "conflict"),
            (404, "not-found"),
            (429, "too-many-requests"),
            (403, "forbidden"),
            (500, "error"),
        ] {
            assert_eq!(error_class(&api_error(code)), class, "{code}");
        }
        assert!(is_not_found(&api_error(404)));
        assert!(!is_not_found(&api_error(409)));
    }

    #[test]
    fn devices_are_described_for_the_scheduled_event() {
        let ann: BTreeMap<String, String> = [
            (ANNOTATION_GPUS.to_string(), "0,1".to_string()),
            (ANNOTATION_MIG_SLICE.to_string(), "2:3g.40gb@4".to_string()),
            (ANNOTATION_JOB.to_string(), "pod:ns/a".to_string()),
        ]
        .into();
        assert_eq!(
            describe_devices(&ann),
            " (GPUs 0,1, MIG instance 2:3g.40gb@4)"
        );
        assert_eq!(describe_devices(&BTreeMap::new()), "");
    }
}
