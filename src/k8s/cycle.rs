//! One turn of the scheduler's loop (port of go/internal/kube/cycle.go):
//!
//!  1. Objects: read the reflectors' stores, overlaid with what this
//!     scheduler did that they do not show yet (binds, evictions, MIG
//!     labels).
//!  2. Snapshot: translate them into the engine's input.
//!  3. Decide: run the engine's cycle.
//!  4. Act: MIG changes first, then binds and evictions, concurrently.
//!  5. Report: an Event to each pod whose reason to wait changed.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use partita_engine::sched::{Decision, Input, Job, Wait};

use super::jobs::group_name;
use super::names::{
    ANNOTATION_MIN_MEMBER, LABEL_MIG_CONFIG, LABEL_MIG_CONFIG_STATE, MIG_STATE_PENDING,
};
use super::node::NodeOptions;
use super::resources::PodGroup;
use super::scheduler::{ASSUME_TTL, Acted, Memory, MigReconfigure, Scheduler, engine_now};
use super::snapshot::{Objects, Snapshot, SnapshotError, SnapshotOptions, build_snapshot};
use super::status::summarize;
use super::waiting;

/// The pod's UID ("" if the server gave none).
pub(crate) fn uid(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap_or_default()
}

/// The node a pod is bound to, "" while it is pending.
pub(crate) fn node_name(p: &Pod) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

fn pod_scheduler(p: &Pod) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or_default()
}

fn label<'a>(n: &'a Node, key: &str) -> &'a str {
    n.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
        .unwrap_or_default()
}

impl Scheduler {
    /// One cycle; an error means no snapshot could be built.
    pub(crate) async fn cycle(&self) -> Result<(), SnapshotError> {
        let began = Instant::now();
        let mut mem = self.memory.lock().await;
        let mut obj = self.objects(&mut mem, began);
        confirm_pod_groups(
            &self.client,
            &self.opt.scheduler_name,
            &mut mem.no_group,
            &mut obj,
        )
        .await;
        let snap = build_snapshot(&obj, &self.snapshot_options(&mem))?;
        mem.placed = snap.placed.clone();
        for u in &snap.unaccounted {
            tracing::warn!(pod = %u, "pod not accounted");
        }
        let jobs: Vec<&Job> = snap.jobs.iter().collect();
        let decided = Instant::now();
        let (d, waiting) = {
            let mut input = Input::new(engine_now(), &snap.state, &snap.teams, &jobs);
            let d = mem.engine.cycle(&mut input);
            let waiting: BTreeMap<String, Wait> = d
                .waits_by_id(&jobs)
                .into_iter()
                .map(|(id, w)| (id.to_string(), w))
                .collect();
            (d, waiting)
        };
        self.metrics
            .engine_seconds
            .observe(decided.elapsed().as_secs_f64());
        tracing::debug!(
            nodes = snap.state.len(),
            jobs = snap.jobs.len(),
            held = snap.held.len(),
            starts = d.starts.len(),
            preemptions = d.preemptions.len(),
            reconfigs = d.reconfigs.len(),
            waiting = waiting.len(),
            "cycle"
        );
        for (id, why) in &snap.held {
            tracing::debug!(job = %id, why = %why, "held");
        }
        for (id, w) in &waiting {
            tracing::debug!(job = %id, why = %w.reason, "waiting");
        }
        let acting = Instant::now();
        let waits = self.act(&mut mem, &snap, &d).await;
        if d.starts.len() + d.preemptions.len() + d.reconfigs.len() > 0 {
            tracing::info!(
                starts = d.starts.len(),
                preemptions = d.preemptions.len(),
                reconfigs = d.reconfigs.len(),
                waiting = waiting.len() + snap.held.len(),
                snapshot_ms = (decided - began).as_millis() as u64,
                engine_ms = (acting - decided).as_millis() as u64,
                act_ms = acting.elapsed().as_millis() as u64,
                "cycle"
            );
        }
        self.report(&mut mem, &snap, &waiting, &waits);
        self.statuses.set(summarize(&snap, &waiting));
        self.metrics.cycles.inc();
        self.metrics
            .cycle_seconds
            .observe(began.elapsed().as_secs_f64());
        Ok(())
    }

    /// The stores' objects, overlaid with this scheduler's recent MIG
    /// labels (binds and evictions go through the snapshot options).
    fn objects(&self, mem: &mut Memory, now: Instant) -> Objects {
        let mut obj = Objects {
            nodes: self.stores.nodes.state(),
            pods: self.stores.pods.state(),
            queues: self.stores.queues.state(),
            pod_groups: self.stores.pod_groups.state(),
        };
        // The stores are hash maps: a stable order keeps the engine's
        // input order stable from cycle to cycle.
        obj.nodes
            .sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        obj.pods.sort_by(|a, b| {
            (&a.metadata.namespace, &a.metadata.name)
                .cmp(&(&b.metadata.namespace, &b.metadata.name))
        });
        obj.queues
            .sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        obj.pod_groups.sort_by(|a, b| {
            (&a.metadata.namespace, &a.metadata.name)
                .cmp(&(&b.metadata.namespace, &b.metadata.name))
        });
        {
            let mut acted = self.lock_acted();
            expire(mem, &mut acted, &obj, now);
        }
        for n in obj.nodes.iter_mut() {
            let name = n.metadata.name.clone().unwrap_or_default();
            let Some(c) = mem.changes.get(&name) else {
                continue;
            };
            if label(n, LABEL_MIG_CONFIG) == c.name {
                continue;
            }
            let mut copy = Node::clone(n);
            let labels = copy.metadata.labels.get_or_insert_with(BTreeMap::new);
            labels.insert(LABEL_MIG_CONFIG.to_string(), c.name.clone());
            labels.insert(
                LABEL_MIG_CONFIG_STATE.to_string(),
                MIG_STATE_PENDING.to_string(),
            );
            *n = Arc::new(copy);
        }
        obj
    }

    /// The snapshot's view of the scheduler's settings and memory.
    fn snapshot_options(&self, mem: &Memory) -> SnapshotOptions {
        let acted = self.lock_acted();
        SnapshotOptions {
            scheduler_name: self.opt.scheduler_name.clone(),
            node: NodeOptions {
                configs: self.mig_configs(),
                tolerated_taints: self.opt.tolerated_taints.iter().cloned().collect(),
            },
            headroom: self.headroom,
            freeze_busy: self.opt.mig_reconfigure == MigReconfigure::IdleNodes,
            bound: acted
                .assumed
                .iter()
                .map(|(uid, a)| (uid.clone(), a.assumed.clone()))
                .collect(),
            evicting: acted.evicting.keys().cloned().collect(),
            hold: mem.wait_for.clone(),
            placed: mem.placed.clone(),
        }
    }

    /// The memory binds and evictions write; a poisoned lock (a panicked
    /// bind) still holds good data.
    pub(crate) fn lock_acted(&self) -> std::sync::MutexGuard<'_, Acted> {
        self.acted.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends an Event to each pending pod whose reason to wait changed,
    /// and counts the pending pods. `extra` are the reasons `act` gave.
    fn report(
        &self,
        mem: &mut Memory,
        snap: &Snapshot,
        waiting: &BTreeMap<String, Wait>,
        extra: &BTreeMap<String, String>,
    ) {
        let mut reasons: BTreeMap<&str, String> = BTreeMap::new();
        for (id, w) in waiting {
            let queue = snap
                .job_queue
                .get(id)
                .map(String::as_str)
                .unwrap_or_default();
            reasons.insert(
                id,
                format!("{} (position {} in queue {queue})", w.reason, w.position),
            );
        }
        for (id, why) in snap.held.iter().chain(extra) {
            reasons.insert(id, why.clone());
        }
        let acted = self.lock_acted();
        let mut pending = 0;
        for (id, reason) in &reasons {
            let key = reason_key(waiting, snap, extra, id);
            for p in snap.job_pods.get(*id).into_iter().flatten() {
                let uid = uid(p);
                if !node_name(p).is_empty() || acted.assumed.contains_key(&uid) {
                    continue;
                }
                pending += 1;
                if mem.reasons.get(&uid) == Some(&key) {
                    continue;
                }
                mem.reasons.insert(uid, key.clone());
                self.events.record_waiting(p, &waiting::message(reason));
            }
        }
        self.metrics.pending_pods.set(pending);
    }
}

/// Asks the API server for the PodGroup of each gang with pending pods
/// that the store does not hold and whose pods do not give the size
/// (partita.dev/min-member): such a gang is one pod at a time, and a
/// PodGroup created just before its pods may not have reached the
/// reflector yet (the gang's 4-GPU pods were bound one by one in a
/// test run of the Go build on a loaded machine). A PodGroup the
/// server does not have either is not asked for again while the gang
/// has pods.
pub(crate) async fn confirm_pod_groups(
    client: &kube::Client,
    scheduler_name: &str,
    no_group: &mut BTreeSet<String>,
    obj: &mut Objects,
) {
    let known: HashSet<String> = obj
        .pod_groups
        .iter()
        .map(|pg| {
            format!(
                "{}/{}",
                pg.metadata.namespace.as_deref().unwrap_or_default(),
                pg.metadata.name.as_deref().unwrap_or_default()
            )
        })
        .collect();
    let mut sized = HashSet::new();
    let mut pending = BTreeSet::new();
    for p in &obj.pods {
        let g = group_name(p);
        if g.is_empty() || pod_scheduler(p) != scheduler_name {
            continue;
        }
        let key = format!(
            "{}/{g}",
            p.metadata.namespace.as_deref().unwrap_or_default()
        );
        let sized_by_pod = p
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(ANNOTATION_MIN_MEMBER));
        if sized_by_pod {
            sized.insert(key.clone());
        }
        if node_name(p).is_empty() {
            pending.insert(key);
        }
    }
    no_group.retain(|key| pending.contains(key) && !known.contains(key));
    let mut unread = HashSet::new();
    for key in &pending {
        if known.contains(key) || sized.contains(key) || no_group.contains(key) {
            continue;
        }
        let Some((ns, name)) = key.split_once('/') else {
            continue;
        };
        let api: Api<PodGroup> = Api::namespaced(client.clone(), ns);
        match api.get_opt(name).await {
            Ok(None) => {
                no_group.insert(key.clone());
            }
            Ok(Some(pg)) => obj.pod_groups.push(Arc::new(pg)),
            Err(e) => {
                // Unknown size: the gang's pending pods sit this cycle
                // out rather than be placed one by one.
                tracing::warn!(podgroup = %key, error = %e, "PodGroup not read");
                unread.insert(key.clone());
            }
        }
    }
    if !unread.is_empty() {
        obj.pods.retain(|p| {
            let key = format!(
                "{}/{}",
                p.metadata.namespace.as_deref().unwrap_or_default(),
                group_name(p)
            );
            !(node_name(p).is_empty() && unread.contains(&key))
        });
    }
}

/// Forgets assumptions the reflectors have caught up with, or that are
/// too old to trust.
pub(crate) fn expire(mem: &mut Memory, acted: &mut Acted, obj: &Objects, now: Instant) {
    let by_uid: HashMap<String, &Pod> = obj.pods.iter().map(|p| (uid(p), p.as_ref())).collect();
    let old = |at: Instant| now.saturating_duration_since(at) > ASSUME_TTL;
    acted.assumed.retain(|uid, a| {
        by_uid
            .get(uid)
            .is_some_and(|p| node_name(p).is_empty() && !old(a.at))
    });
    acted.evicting.retain(|uid, at| {
        by_uid
            .get(uid)
            .is_some_and(|p| p.metadata.deletion_timestamp.is_none() && !old(*at))
    });
    let nodes: HashMap<&str, &Node> = obj
        .nodes
        .iter()
        .map(|n| (n.metadata.name.as_deref().unwrap_or_default(), n.as_ref()))
        .collect();
    mem.changes.retain(|name, c| {
        nodes
            .get(name.as_str())
            .is_some_and(|n| label(n, LABEL_MIG_CONFIG) != c.name && !old(c.at))
    });
    mem.reasons.retain(|uid, _| by_uid.contains_key(uid));
}

/// What must change for a pod to get a new Event: the reason without the
/// queue position, which moves all the time.
fn reason_key(
    waiting: &BTreeMap<String, Wait>,
    snap: &Snapshot,
    extra: &BTreeMap<String, String>,
    id: &str,
) -> String {
    if let Some(r) = extra.get(id) {
        return r.clone();
    }
    if let Some(r) = snap.held.get(id) {
        return r.clone();
    }
    waiting
        .get(id)
        .map(|w| w.reason.to_string())
        .unwrap_or_default()
}

/// The decision's starts grouped by job, jobs in the order of their first
/// start.
pub(crate) fn starts_by_job(d: &Decision) -> (Vec<String>, HashMap<String, Vec<usize>>) {
    let mut order = Vec::new();
    let mut by_job: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, st) in d.starts.iter().enumerate() {
        if !by_job.contains_key(&st.job) {
            order.push(st.job.clone());
        }
        by_job.entry(st.job.clone()).or_default().push(i);
    }
    (order, by_job)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::scheduler::{AssumedBind, MigChange, Options};
    use crate::k8s::snapshot::Assumed;
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use std::time::Duration;

    fn pod(name: &str, uid: &str, node: &str) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(uid.into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: (!node.is_empty()).then(|| node.to_string()),
                ..PodSpec::default()
            }),
            ..Pod::default()
        })
    }

    fn node(name: &str, config: &str) -> Arc<Node> {
        Arc::new(Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([(LABEL_MIG_CONFIG.to_string(), config.to_string())].into()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        })
    }

    fn memory() -> Memory {
        let (cfg, pol) = crate::k8s::scheduler::engine_config(&Options::default()).unwrap();
        Memory {
            engine: partita_engine::sched::Scheduler::new(
                cfg,
                pol,
                partita_engine::random::Rand::new(0),
            ),
            changes: HashMap::new(),
            wait_for: HashMap::new(),
            reasons: HashMap::new(),
            no_group: BTreeSet::new(),
            placed: HashMap::new(),
        }
    }

    // expire forgets what the reflectors show, what is gone, and what is
    // older than the TTL; it keeps the rest.
    #[test]
    fn expire_forgets_what_the_reflectors_caught_up_with() {
        let now = Instant::now();
        let recent = now - Duration::from_secs(1);
        let stale = now - ASSUME_TTL - Duration::from_secs(1);
        let mut deleting = Pod::clone(&pod("d", "u-deleting", "n1"));
        deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        let obj = Objects {
            pods: vec![
                pod("a", "u-pending", ""),
                pod("b", "u-bound", "n1"),
                pod("c", "u-stale", ""),
                Arc::new(deleting),
                pod("e", "u-running", "n1"),
            ],
            nodes: vec![node("n1", "old"), node("n2", "new")],
            ..Objects::default()
        };
        let bind = |at| AssumedBind {
            assumed: Assumed {
                node: "n1".into(),
                annotations: BTreeMap::new(),
            },
            at,
        };
        let mut acted = Acted::default();
        for uid in ["u-pending", "u-bound", "u-gone"] {
            acted.assumed.insert(uid.into(), bind(recent));
        }
        acted.assumed.insert("u-stale".into(), bind(stale));
        for uid in ["u-deleting", "u-running", "u-gone"] {
            acted.evicting.insert(uid.into(), recent);
        }
        let mut mem = memory();
        for (n, name) in [("n1", "new"), ("n2", "new"), ("n3", "new")] {
            mem.changes.insert(
                n.into(),
                MigChange {
                    name: name.into(),
                    at: recent,
                },
            );
        }
        mem.reasons.insert("u-pending".into(), "x".into());
        mem.reasons.insert("u-gone".into(), "x".into());
        expire(&mut mem, &mut acted, &obj, now);
        let keys = |m: Vec<&String>| {
            let mut v: Vec<String> = m.into_iter().cloned().collect();
            v.sort();
            v
        };
        assert_eq!(keys(acted.assumed.keys().collect()), ["u-pending"]);
        assert_eq!(keys(acted.evicting.keys().collect()), ["u-running"]);
        assert_eq!(keys(mem.changes.keys().collect()), ["n1"]);
        assert_eq!(keys(mem.reasons.keys().collect()), ["u-pending"]);
    }
    /// A fake API server for PodGroup GETs: "ns/big" exists (minMember
    /// 2), others are not found, or every GET fails while `failing`.
    fn fake_api(
        gets: Arc<std::sync::atomic::AtomicUsize>,
        failing: Arc<std::sync::atomic::AtomicBool>,
    ) -> kube::Client {
        use axum::http::{Response, StatusCode};
        use std::sync::atomic::Ordering;
        let svc = tower::service_fn(move |req: axum::http::Request<kube::client::Body>| {
            let gets = gets.clone();
            let failing = failing.clone();
            async move {
                let path = req.uri().path().to_string();
                if req.method() == "GET" {
                    gets.fetch_add(1, Ordering::SeqCst);
                }
                let (status, body) = if failing.load(Ordering::SeqCst) {
                    (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "message": "the server is busy", "reason": "InternalError", "code": 500}),
                    )
                } else if path == "/apis/partita.dev/v1alpha1/namespaces/ns/podgroups/big" {
                    (
                        StatusCode::OK,
                        serde_json::json!({"apiVersion": "partita.dev/v1alpha1", "kind": "PodGroup",
                            "metadata": {"name": "big", "namespace": "ns"}, "spec": {"minMember": 2}}),
                    )
                } else {
                    (
                        StatusCode::NOT_FOUND,
                        serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "message": format!("{path} not found"), "reason": "NotFound", "code": 404}),
                    )
                };
                let body = http_body_util::Full::new(bytes::Bytes::from(body.to_string()));
                Ok::<_, std::convert::Infallible>(
                    Response::builder()
                        .status(status)
                        .body(body)
                        .expect("a response"),
                )
            }
        });
        kube::Client::new(svc, "default")
    }

    // TestAPodGroupMissingFromTheCacheIsAskedFor: a gang whose PodGroup
    // the reflector has not delivered yet is sized from the API server,
    // not taken for pods of one (which would bind them one by one); one
    // the server does not have either is asked for once.
    #[tokio::test]
    async fn a_pod_group_missing_from_the_store_is_asked_for() {
        use crate::k8s::fixtures::{gpu_node, must_snapshot, pod};
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        let gets = Arc::new(AtomicUsize::new(0));
        let failing = Arc::new(AtomicBool::new(false));
        let client = fake_api(gets.clone(), failing.clone());
        let mut no_group = BTreeSet::new();
        let nodes = vec![gpu_node("n1", 4).obj(), gpu_node("n2", 4).obj()];
        let mut obj = Objects {
            nodes: nodes.clone(),
            pods: vec![
                pod("big-0").gpus(4).group("big").obj(),
                pod("big-1").gpus(4).group("big").obj(),
                pod("solo-0").gpus(1).group("solo").obj(),
                pod("ann-0")
                    .gpus(1)
                    .group("ann")
                    .ann(ANNOTATION_MIN_MEMBER, "2")
                    .obj(),
                pod("plain").gpus(1).obj(),
            ],
            ..Objects::default()
        };
        confirm_pod_groups(&client, "partita", &mut no_group, &mut obj).await;
        assert_eq!(obj.pod_groups.len(), 1, "{:?}", obj.pod_groups);
        assert_eq!(obj.pod_groups[0].metadata.name.as_deref(), Some("big"));
        assert_eq!(obj.pod_groups[0].spec.min_member, 2);
        // Asked: big (found) and solo (not found); not ann (sized by its
        // annotation) nor plain (no gang).
        assert_eq!(gets.load(Ordering::SeqCst), 2, "GETs: big, solo");
        let snap = must_snapshot(obj.clone(), SnapshotOptions::default());
        assert_eq!(snap.held.get("group:ns/big"), None, "big held");
        let big = snap.jobs.iter().find(|j| j.id() == "group:ns/big");
        assert_eq!(big.map(|j| j.spec.gang_size), Some(2), "big's gang size");

        // The next cycle: big is in the store now; solo, not found
        // before, is not asked for again.
        let mut obj = Objects {
            nodes: nodes.clone(),
            pods: obj.pods.clone(),
            pod_groups: obj.pod_groups.clone(),
            ..Objects::default()
        };
        confirm_pod_groups(&client, "partita", &mut no_group, &mut obj).await;
        assert_eq!(gets.load(Ordering::SeqCst), 2, "second cycle: still 2 GETs");

        // The server failing: the gang's pending pods sit the cycle out.
        failing.store(true, Ordering::SeqCst);
        let mut obj = Objects {
            nodes,
            pods: vec![
                pod("new-0").gpus(4).group("new").obj(),
                pod("plain-2").gpus(1).obj(),
            ],
            ..Objects::default()
        };
        confirm_pod_groups(&client, "partita", &mut no_group, &mut obj).await;
        let names: Vec<&str> = obj
            .pods
            .iter()
            .map(|p| p.metadata.name.as_deref().unwrap_or_default())
            .collect();
        assert_eq!(names, ["plain-2"], "pods after a failed read");
    }
}
