//! Queue and PodGroup status (port of go/internal/kube/status.go): each
//! cycle counts, per queue and per pod group, what runs and waits; a task
//! of its own writes the counts to the status subresources every few
//! seconds, only what changed. Status is for people and dashboards, not
//! for decisions, so it never slows a cycle.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use kube::Api;
use kube::api::{Patch, PatchParams};
use partita_engine::sched::Wait;

use super::resources::{PodGroup, PodGroupPhase, PodGroupStatus, Queue, QueueStatus};
use super::scheduler::Scheduler;
use super::snapshot::Snapshot;

/// How often Queue and PodGroup status is brought up to date.
const STATUS_INTERVAL: Duration = Duration::from_secs(5);

/// What the status task writes to Queues and PodGroups.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub queues: BTreeMap<String, QueueStatus>,
    /// By "namespace/name".
    pub groups: BTreeMap<String, PodGroupStatus>,
}

/// Counts, per queue and per pod group, what runs and waits.
pub fn summarize(snap: &Snapshot, waiting: &BTreeMap<String, Wait>) -> Summary {
    let mut out = Summary::default();
    let mut used: HashMap<String, i64> = HashMap::new();
    for j in &snap.jobs {
        let id = j.id();
        let q = snap.job_queue.get(id).cloned().unwrap_or_default();
        let st = out.queues.entry(q.clone()).or_default();
        let mut scheduled: i32 = 0;
        for a in &j.placed {
            let Some(a) = a else {
                *st.pending_pods.get_or_insert(0) += 1;
                continue;
            };
            *st.running_pods.get_or_insert(0) += 1;
            scheduled += 1;
            if let Some(n) = snap.state.node_by_name(&a.node) {
                *used.entry(q.clone()).or_insert(0) += i64::from(a.gpu_milli(n));
            }
        }
        if let Some(key) = id.strip_prefix("group:") {
            let running = j.complete() || (j.spec.gang_size > 0 && scheduled >= j.spec.gang_size);
            out.groups.insert(
                key.to_string(),
                PodGroupStatus {
                    phase: Some(if running {
                        PodGroupPhase::Running
                    } else {
                        PodGroupPhase::Pending
                    }),
                    scheduled: Some(scheduled),
                    message: waiting.get(id).map(|w| w.reason.to_string()),
                },
            );
        }
    }
    for (q, st) in out.queues.iter_mut() {
        let milli = used.get(q).copied().unwrap_or(0);
        st.used_gpus = Some(format!("{:.3}", milli as f64 / 1000.0));
        // Go writes the counts even when zero (no omitempty).
        st.running_pods.get_or_insert(0);
        st.pending_pods.get_or_insert(0);
    }
    for (id, why) in &snap.held {
        let Some(key) = id.strip_prefix("group:") else {
            continue;
        };
        let gs = out.groups.entry(key.to_string()).or_default();
        gs.phase = Some(PodGroupPhase::Pending);
        gs.message = Some(why.clone());
        gs.scheduled.get_or_insert(0);
    }
    out
}

/// Hands the latest summary from the cycle to the status task, and
/// remembers what was written so only changes are.
#[derive(Debug, Default)]
pub struct StatusCache {
    latest: Mutex<Option<Summary>>,
    written: Mutex<HashMap<String, String>>,
}

impl StatusCache {
    pub fn set(&self, s: Summary) {
        *self.latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
    }

    fn take(&self) -> Option<Summary> {
        self.latest.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Whether `body` differs from what was last written under `key`.
    fn changed(&self, key: &str, body: &str) -> bool {
        let written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        written.get(key).map(String::as_str) != Some(body)
    }

    fn wrote(&self, key: String, body: String) {
        self.written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, body);
    }
}

impl Scheduler {
    /// Writes Queue and PodGroup status every `STATUS_INTERVAL`, only what
    /// changed; runs until dropped (`run` aborts it).
    pub(crate) fn status_loop(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let client = self.client.clone();
        let statuses = self.statuses.clone();
        let queues = self.stores.queues.clone();
        let groups = self.stores.pod_groups.clone();
        async move {
            let mut tick = tokio::time::interval(STATUS_INTERVAL);
            loop {
                tick.tick().await;
                let Some(sum) = statuses.take() else {
                    continue;
                };
                for q in queues.state() {
                    let Some(name) = q.metadata.name.clone() else {
                        continue;
                    };
                    let st = sum.queues.get(&name).cloned().unwrap_or(QueueStatus {
                        used_gpus: None,
                        running_pods: Some(0),
                        pending_pods: Some(0),
                    });
                    let api: Api<Queue> = Api::all(client.clone());
                    write_status(&statuses, &api, format!("queue/{name}"), &name, &st).await;
                }
                for pg in groups.state() {
                    let (Some(ns), Some(name)) =
                        (pg.metadata.namespace.clone(), pg.metadata.name.clone())
                    else {
                        continue;
                    };
                    let key = format!("{ns}/{name}");
                    let st = sum
                        .groups
                        .get(&key)
                        .cloned()
                        .unwrap_or_else(|| PodGroupStatus {
                            phase: Some(PodGroupPhase::Pending),
                            scheduled: Some(0),
                            message: Some("no pods yet".to_string()),
                        });
                    let api: Api<PodGroup> = Api::namespaced(client.clone(), &ns);
                    write_status(&statuses, &api, format!("podgroup/{key}"), &name, &st).await;
                }
            }
        }
    }
}

/// Patches one object's status unless it is what was last written.
async fn write_status<K, S>(cache: &StatusCache, api: &Api<K>, key: String, name: &str, status: &S)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    S: serde::Serialize,
{
    let body = serde_json::json!({ "status": status });
    let text = body.to_string();
    if !cache.changed(&key, &text) {
        return;
    }
    match api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
        .await
    {
        Ok(_) => cache.wrote(key, text),
        Err(e) => tracing::info!(object = %key, error = %e, "status not written"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_writes_only_changes() {
        let c = StatusCache::default();
        assert!(c.take().is_none());
        c.set(Summary::default());
        assert_eq!(c.take(), Some(Summary::default()));
        assert!(c.take().is_none(), "a summary is taken once");
        assert!(c.changed("queue/a", "{}"));
        c.wrote("queue/a".into(), "{}".into());
        assert!(!c.changed("queue/a", "{}"));
        assert!(c.changed("queue/a", "{\"status\":1}"));
    }
    // Counts per queue and per gang: running and pending pods, GPUs held
    // (a whole GPU is 1), a gang's phase and why it waits.
    #[test]
    fn summarize_counts_queues_and_gangs() {
        use crate::k8s::fixtures::{gpu_node, must_snapshot, pod, pod_group};
        use crate::k8s::names::ANNOTATION_GPUS;
        use crate::k8s::snapshot::{Objects, SnapshotOptions};
        use partita_engine::sched::WaitReason;
        let obj = Objects {
            nodes: vec![gpu_node("n1", 4).obj()],
            pods: vec![
                pod("run-a")
                    .gpus(2)
                    .on("n1", &[(ANNOTATION_GPUS, "0,1")])
                    .obj(),
                pod("wait-b").gpus(1).obj(),
                pod("g-0")
                    .gpus(1)
                    .group("g")
                    .on("n1", &[(ANNOTATION_GPUS, "2")])
                    .obj(),
                pod("g-1").gpus(1).group("g").obj(),
                pod("h-0").gpus(1).group("h").obj(),
            ],
            pod_groups: vec![pod_group("g", 2, ""), pod_group("h", 2, "")],
            ..Objects::default()
        };
        let snap = must_snapshot(obj, SnapshotOptions::default());
        let waiting: BTreeMap<String, Wait> = [(
            "group:ns/g".to_string(),
            Wait {
                position: 1,
                reason: WaitReason::NoRoom,
            },
        )]
        .into();
        let sum = summarize(&snap, &waiting);
        let q = &sum.queues["default"];
        assert_eq!(q.used_gpus.as_deref(), Some("3.000"), "{q:?}");
        assert_eq!(q.running_pods, Some(2), "{q:?}");
        assert_eq!(q.pending_pods, Some(2), "{q:?}: wait-b and g-1 (h is held)");
        let g = &sum.groups["ns/g"];
        assert_eq!(g.phase, Some(PodGroupPhase::Pending));
        assert_eq!(g.scheduled, Some(1));
        assert_eq!(g.message.as_deref(), Some(WaitReason::NoRoom.as_str()));
        let h = &sum.groups["ns/h"];
        assert_eq!(h.phase, Some(PodGroupPhase::Pending));
        assert!(
            h.message.as_deref().unwrap_or_default().contains("1 of 2"),
            "{h:?}"
        );
    }
}
