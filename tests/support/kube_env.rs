//! One Kubernetes test's cluster (port of
//! go/test/integration/kube/harness_test.go): a kube-apiserver of its own
//! with the CRDs of deploy/kubernetes/crds.yaml installed, and the parts a
//! cluster would add, played by the test: the node lifecycle controller
//! (new nodes lose their not-ready taint), the kubelet (bound pods run,
//! deleted or evicted pods go away at once) and the GPU Operator's MIG
//! manager (it applies the layout a node's label names and the device
//! plugin advertises it). Tests of one binary run one at a time: each
//! holds a lock for its whole life, as the Go tests run one after another.

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    Binding, ConfigMap, Event, Namespace, Node, ObjectReference, Pod,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use kube::discovery::Scope;
use partita::k8s::migconfig::{self, Counts, Devices, MigDeviceSpec};
use partita::k8s::names;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::kube::Harness;
use super::kube_nodes::{LABEL_GPU_COUNT, RESOURCE_GPU, mig_resource};
use super::kube_scheduler::{Flags, Scheduler, check_none_died, forget_deaths};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long a test waits for what the scheduler should do: the Go tests'
/// 30 s, generously more (two cores shared by several builds).
pub const WAIT: Duration = Duration::from_secs(90);
/// The Go tests' 15 s waits (status written after a cycle), likewise.
pub const WAIT_STATUS: Duration = Duration::from_secs(60);

/// The namespace of the GPU Operator, where the mig-parted ConfigMap is.
pub const MIG_NAMESPACE: &str = "gpu-operator";
/// The mig-parted ConfigMap's name and its key (the Go build's
/// partita-mig-parted and MIGConfigKey).
pub const MIG_CONFIGMAP: &str = "partita-mig-parted";
pub const MIG_CONFIG_KEY: &str = "config.yaml";

/// Held by each test for its whole life (an async lock: it is held
/// across awaits).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A path in the repository.
pub fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// One test's cluster.
pub struct Env {
    pub client: kube::Client,
    /// Pods of namespace default, where the tests' pods live.
    pub pods: Api<Pod>,
    pub harness: Harness,
    /// The fake components' loops, stopped with the test.
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// What went wrong in them: the test fails at its end, as the Go
    /// tests' t.Errorf from a background goroutine.
    errors: Arc<Mutex<Vec<String>>>,
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

/// A pod for Partita in namespace default (the Go tests' podSpec).
#[derive(Default, Clone, Copy)]
pub struct TestPod<'a> {
    pub name: &'a str,
    pub group: &'a str,
    pub queue: &'a str,
    pub priority_class: &'a str,
    pub gpus: i64,
    /// A MIG profile: one instance of it, e.g. "1g.10gb".
    pub mig: &'a str,
    pub ann: &'a [(&'a str, &'a str)],
    pub labels: &'a [(&'a str, &'a str)],
    /// spec.schedulerName when not "partita".
    pub scheduler: &'a str,
}

/// The custom resources as the API server serves them, for objects the
/// Rust types cannot hold (a wrong type in a field) and for status.
pub fn queue_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("partita.dev", "v1alpha1", "Queue"),
        "queues",
    )
}

pub fn pod_group_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("partita.dev", "v1alpha1", "PodGroup"),
        "podgroups",
    )
}

/// A client from a kubeconfig file.
pub async fn client_from(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .unwrap_or_else(|e| panic!("{}: {e}", kubeconfig.display()));
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", kubeconfig.display()));
    kube::Client::try_from(config).expect("a client")
}

/// Polls `cond` every 50 ms until it holds; panics after `timeout` with
/// the last error it returned.
pub async fn eventually(
    timeout: Duration,
    what: &str,
    mut cond: impl AsyncFnMut() -> Result<bool, BoxError>,
) {
    let start = Instant::now();
    let mut last = String::from("none");
    loop {
        check_none_died();
        match cond().await {
            Ok(true) => return,
            Ok(false) => {}
            Err(e) => last = e.to_string(),
        }
        assert!(
            start.elapsed() < timeout,
            "{what}: not within {timeout:?} (last error: {last})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The HTTP status code of an API error (422 Invalid, 403 Forbidden...).
pub fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// The YAML documents of a file under deploy/kubernetes.
pub fn manifests(name: &str) -> Vec<Value> {
    let path = repo_file(&format!("deploy/kubernetes/{name}"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    docs.into_iter()
        .filter(|d| d.as_object().is_some_and(|o| !o.is_empty()))
        .collect()
}

/// Why `Env::create` did not create an object.
#[derive(Debug)]
pub enum CreateError {
    /// The server serves no such kind.
    NotServed(String),
    Api(kube::Error),
}

impl std::fmt::Display for CreateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CreateError::NotServed(k) => write!(f, "{k}: kind not served"),
            CreateError::Api(e) => write!(f, "{e}"),
        }
    }
}

impl Env {
    /// A cluster of the test's own, its kube-apiserver started with the
    /// extra flags; None where Go is missing (see [`super::kube`]).
    pub async fn new(apiserver_flags: &[&str]) -> Option<Env> {
        let serial = SERIAL.lock().await;
        forget_deaths();
        let harness = Harness::start(apiserver_flags)?;
        let client = client_from(&harness.kubeconfig).await;
        let e = Env {
            pods: Api::namespaced(client.clone(), "default"),
            client,
            harness,
            tasks: Mutex::new(Vec::new()),
            errors: Arc::new(Mutex::new(Vec::new())),
            _serial: serial,
        };
        e.apply_crds().await;
        Some(e)
    }

    async fn apply_crds(&self) {
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        for doc in manifests("crds.yaml") {
            let crd: CustomResourceDefinition =
                serde_json::from_value(doc).expect("crds.yaml holds CRDs");
            let name = crd.metadata.name.clone().unwrap_or_default();
            crds.create(&PostParams::default(), &crd)
                .await
                .unwrap_or_else(|e| panic!("create CRD {name}: {e}"));
            eventually(
                WAIT_STATUS,
                &format!("CRD {name} established"),
                async || {
                    let c = crds.get(&name).await?;
                    Ok(c.status
                        .and_then(|s| s.conditions)
                        .unwrap_or_default()
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True"))
                },
            )
            .await;
        }
        // Discovery of a just-established CRD can lag; wait until both serve.
        for (what, api) in [("queues", self.queues()), ("podgroups", self.pod_groups())] {
            eventually(WAIT_STATUS, &format!("{what} served"), async || {
                Ok(api.list(&ListParams::default()).await.is_ok())
            })
            .await;
        }
    }

    pub fn queues(&self) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &queue_resource())
    }

    pub fn pod_groups(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), "default", &pod_group_resource())
    }

    /// Starts the scheduler under test against this cluster.
    pub fn start_scheduler(&self, flags: &Flags) -> Scheduler {
        Scheduler::start(&self.harness.kubeconfig, flags)
    }

    /// Creates an object of any kind the server serves, finding its
    /// resource through discovery.
    pub async fn create(&self, obj: &Value) -> Result<(), CreateError> {
        let api_version = obj["apiVersion"].as_str().unwrap_or_default();
        let kind = obj["kind"].as_str().unwrap_or_default();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (ar, caps) = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|e| CreateError::NotServed(format!("{api_version} {kind} ({e})")))?;
        let o: DynamicObject = serde_json::from_value(obj.clone())
            .map_err(|e| CreateError::NotServed(format!("{api_version} {kind}: {e}")))?;
        let api: Api<DynamicObject> = match (&caps.scope, o.metadata.namespace.as_deref()) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &ar),
            (Scope::Namespaced, None) => Api::default_namespaced_with(self.client.clone(), &ar),
            (Scope::Cluster, _) => Api::all_with(self.client.clone(), &ar),
        };
        api.create(&PostParams::default(), &o)
            .await
            .map(|_| ())
            .map_err(CreateError::Api)
    }

    pub async fn create_namespace(&self, name: &str) {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
    }

    /// Creates a node with its status (kept on create), and plays the node
    /// lifecycle controller: the API server taints a new node
    /// node.kubernetes.io/not-ready, which the controller lifts once the
    /// node reports Ready.
    pub async fn create_node(&self, n: &Node) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let name = n.metadata.name.clone().unwrap_or_default();
        let mut got = nodes
            .create(&PostParams::default(), n)
            .await
            .unwrap_or_else(|e| panic!("create node {name}: {e}"));
        let Some(spec) = got.spec.as_mut() else {
            return;
        };
        let Some(taints) = spec.taints.as_mut() else {
            return;
        };
        let before = taints.len();
        taints.retain(|t| t.key != "node.kubernetes.io/not-ready");
        if taints.len() == before {
            return;
        }
        nodes
            .replace(&name, &PostParams::default(), &got)
            .await
            .unwrap_or_else(|e| panic!("lift the not-ready taint of {name}: {e}"));
    }

    /// Creates a pod in namespace default: one container asking 1 CPU and
    /// 1 GiB, its GPUs or MIG instance as limits.
    pub async fn create_pod(&self, s: TestPod<'_>) -> Pod {
        let mut labels: BTreeMap<String, String> = s
            .labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if !s.group.is_empty() {
            labels.insert(names::LABEL_POD_GROUP.into(), s.group.into());
        }
        if !s.queue.is_empty() {
            labels.insert(names::LABEL_QUEUE.into(), s.queue.into());
        }
        let ann: BTreeMap<String, String> = s
            .ann
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut limits = serde_json::Map::new();
        if s.gpus > 0 {
            limits.insert(RESOURCE_GPU.into(), json!(s.gpus.to_string()));
        }
        if !s.mig.is_empty() {
            limits.insert(mig_resource(s.mig), json!("1"));
        }
        let scheduler = if s.scheduler.is_empty() {
            names::DEFAULT_SCHEDULER_NAME
        } else {
            s.scheduler
        };
        let mut spec = json!({
            "schedulerName": scheduler,
            "containers": [{
                "name": "main",
                "image": "example.invalid/work",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": limits},
            }],
        });
        if !s.priority_class.is_empty() {
            spec["priorityClassName"] = json!(s.priority_class);
        }
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": s.name, "namespace": "default", "labels": labels, "annotations": ann},
            "spec": spec,
        }))
        .expect("a pod");
        self.pods
            .create(&PostParams::default(), &pod)
            .await
            .unwrap_or_else(|e| panic!("create pod {}: {e}", s.name))
    }

    pub async fn pod(&self, name: &str) -> Pod {
        self.pods
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("get pod {name}: {e}"))
    }

    /// Deletes a pod at once (grace period 0).
    pub async fn delete_pod(&self, name: &str) {
        self.pods
            .delete(name, &DeleteParams::default().grace_period(0))
            .await
            .unwrap_or_else(|e| panic!("delete pod {name}: {e}"));
    }

    /// Waits until the pods are bound and returns them.
    pub async fn wait_bound(&self, names: &[&str]) -> BTreeMap<String, Pod> {
        let mut out = BTreeMap::new();
        eventually(WAIT, &format!("pods {names:?} bound"), async || {
            for n in names {
                let p = self.pods.get(n).await?;
                if node_name(&p).is_empty() {
                    return Ok(false);
                }
                out.insert(n.to_string(), p);
            }
            Ok(true)
        })
        .await;
        out
    }

    /// Checks that the pods are still not bound after a while (several
    /// scheduling cycles): a negative cannot be waited for.
    pub async fn stay_pending(&self, d: Duration, names: &[&str]) {
        tokio::time::sleep(d).await;
        check_none_died();
        for n in names {
            let p = self.pod(n).await;
            assert!(
                node_name(&p).is_empty(),
                "pod {n} was bound to {}; want it pending",
                node_name(&p)
            );
        }
    }

    /// Waits for an Event on the pod whose reason matches and whose
    /// message contains `contains`.
    pub async fn wait_event(&self, pod: &str, reason: &str, contains: &str) -> Event {
        let events: Api<Event> = Api::namespaced(self.client.clone(), "default");
        let lp = ListParams::default().fields(&format!("involvedObject.name={pod}"));
        let mut found = None;
        eventually(
            WAIT,
            &format!("event {reason} on {pod} containing {contains:?}"),
            async || {
                let list = events.list(&lp).await?;
                found = list.items.into_iter().find(|ev| {
                    ev.reason.as_deref() == Some(reason)
                        && ev.message.as_deref().unwrap_or_default().contains(contains)
                });
                Ok(found.is_some())
            },
        )
        .await;
        found.expect("found")
    }

    /// Binds a pod as another scheduler would, without annotations.
    pub async fn bind_to(&self, pod: &str, node: &str) -> Result<(), kube::Error> {
        let b = Binding {
            metadata: ObjectMeta {
                name: Some(pod.into()),
                ..Default::default()
            },
            target: ObjectReference {
                kind: Some("Node".into()),
                name: Some(node.into()),
                ..Default::default()
            },
        };
        self.pods
            .create_subresource::<_, Value>("binding", pod, &PostParams::default(), &b)
            .await
            .map(|_| ())
    }

    pub async fn create_queue(
        &self,
        name: &str,
        guaranteed: i64,
        burst: i64,
        extra: Value,
    ) -> Result<(), kube::Error> {
        let mut spec = json!({"team": name, "guaranteedGPUs": guaranteed, "burstGPUs": burst});
        if let Value::Object(extra) = extra {
            for (k, v) in extra {
                spec[k] = v;
            }
        }
        let q: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "partita.dev/v1alpha1", "kind": "Queue",
            "metadata": {"name": name}, "spec": spec,
        }))
        .expect("a queue");
        self.queues()
            .create(&PostParams::default(), &q)
            .await
            .map(|_| ())
    }

    pub async fn create_pod_group(
        &self,
        name: &str,
        min_member: i64,
        queue: &str,
    ) -> Result<(), kube::Error> {
        let pg: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "partita.dev/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": min_member, "queue": queue},
        }))
        .expect("a pod group");
        self.pod_groups()
            .create(&PostParams::default(), &pg)
            .await
            .map(|_| ())
    }

    /// A kubeconfig for the same server that impersonates `user` in
    /// `groups` (as `kubectl --as`); the harness's token may impersonate.
    pub fn impersonating_kubeconfig(&self, user: &str, groups: &[&str]) -> PathBuf {
        let text = std::fs::read_to_string(&self.harness.kubeconfig).expect("the kubeconfig");
        let mut kc: Value = serde_saphyr::from_str(&text).expect("the kubeconfig is YAML");
        for u in kc["users"].as_array_mut().expect("users") {
            u["user"]["as"] = json!(user);
            u["user"]["as-groups"] = json!(groups);
        }
        let path = self
            .harness
            .kubeconfig
            .with_file_name(format!("kubeconfig-{}", user.replace(':', "-")));
        std::fs::write(&path, serde_json::to_vec_pretty(&kc).unwrap()).expect("write kubeconfig");
        path
    }

    /// Runs `f` every 50 ms in the background until the test ends (the
    /// fake kubelet and MIG manager poll as their real counterparts watch).
    pub fn every<F, Fut>(&self, mut f: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send,
    {
        let task = tokio::spawn(async move {
            loop {
                f().await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        self.tasks.lock().unwrap().push(task);
    }

    /// Plays every node's kubelet: a bound pod starts running; a pod being
    /// deleted (evicted) goes away at once, as if it exited within its
    /// grace period. It remembers which pods went through the Eviction API.
    pub fn kubelet(&self) -> FakeKubelet {
        let k = FakeKubelet {
            evicted: Arc::new(Mutex::new(HashSet::new())),
        };
        let client = self.client.clone();
        let evicted = k.evicted.clone();
        self.every(move || {
            let client = client.clone();
            let evicted = evicted.clone();
            async move {
                let all: Api<Pod> = Api::all(client.clone());
                let Ok(list) = all.list(&ListParams::default()).await else {
                    return;
                };
                for mut p in list.items {
                    let name = p.metadata.name.clone().unwrap_or_default();
                    let ns = p.metadata.namespace.clone().unwrap_or_default();
                    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
                    if p.metadata.deletion_timestamp.is_some() {
                        if evicted_by_api(&p) {
                            evicted.lock().unwrap().insert(name.clone());
                        }
                        let _ = pods
                            .delete(&name, &DeleteParams::default().grace_period(0))
                            .await;
                        continue;
                    }
                    if !node_name(&p).is_empty()
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending")
                    {
                        let status = p.status.get_or_insert_default();
                        status.phase = Some("Running".into());
                        status.start_time = Some(Time(k8s_openapi::jiff::Timestamp::now()));
                        let _ = pods.replace_status(&name, &PostParams::default(), &p).await;
                    }
                }
            }
        });
        k
    }

    /// Plays the GPU Operator's MIG manager and device plugin: when a
    /// node's nvidia.com/mig.config.state is pending, it reads the named
    /// config from the mig-parted ConfigMap, reports success, and a moment
    /// later (as the restarted device plugin would) advertises the new
    /// instances in the node's capacity. A conflict (the node changed
    /// meanwhile) is tried again at the next poll; other errors fail the
    /// test.
    pub fn mig_manager(&self) -> FakeMigManager {
        let m = FakeMigManager {
            applied: Arc::new(Mutex::new(Vec::new())),
        };
        let client = self.client.clone();
        let applied = m.applied.clone();
        let errors = self.errors.clone();
        self.every(move || {
            let client = client.clone();
            let applied = applied.clone();
            let errors = errors.clone();
            async move {
                let nodes: Api<Node> = Api::all(client.clone());
                let Ok(list) = nodes.list(&ListParams::default()).await else {
                    return;
                };
                for n in list.items {
                    let labels = n.metadata.labels.clone().unwrap_or_default();
                    if labels
                        .get(names::LABEL_MIG_CONFIG_STATE)
                        .map(String::as_str)
                        != Some(names::MIG_STATE_PENDING)
                    {
                        continue;
                    }
                    let name = n.metadata.name.clone().unwrap_or_default();
                    let config = labels
                        .get(names::LABEL_MIG_CONFIG)
                        .cloned()
                        .unwrap_or_default();
                    match apply_mig(&client, n).await {
                        Ok(()) => applied.lock().unwrap().push(format!("{name}={config}")),
                        Err(ApplyMigError::Conflict) => {}
                        Err(ApplyMigError::Other(e)) => errors
                            .lock()
                            .unwrap()
                            .push(format!("MIG manager: node {name}: {e}")),
                    }
                }
            }
        });
        m
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        for t in self
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            t.abort();
        }
        let errors = self
            .errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if !errors.is_empty() && !std::thread::panicking() {
            panic!(
                "errors in the fake cluster components:\n{}",
                errors.join("\n")
            );
        }
    }
}

/// spec.nodeName, "" while pending.
pub fn node_name(p: &Pod) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

/// An annotation of a pod, "" when absent.
pub fn annotation<'a>(p: &'a Pod, key: &str) -> &'a str {
    p.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
        .unwrap_or_default()
}

/// Whether a pod was removed through the Eviction API: the API server
/// marks it with the DisruptionTarget condition.
fn evicted_by_api(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == "DisruptionTarget"
                    && c.reason.as_deref() == Some("EvictionByEvictionAPI")
            })
        })
}

/// The fake kubelet's record of evictions.
pub struct FakeKubelet {
    evicted: Arc<Mutex<HashSet<String>>>,
}

impl FakeKubelet {
    pub fn was_evicted(&self, name: &str) -> bool {
        self.evicted.lock().unwrap().contains(name)
    }
}

/// The fake MIG manager's record: "node=config", in order.
pub struct FakeMigManager {
    applied: Arc<Mutex<Vec<String>>>,
}

impl FakeMigManager {
    pub fn changes(&self) -> Vec<String> {
        self.applied.lock().unwrap().clone()
    }
}

enum ApplyMigError {
    Conflict,
    Other(String),
}

impl<E: std::fmt::Display> From<E> for ApplyMigError {
    fn from(e: E) -> Self {
        ApplyMigError::Other(e.to_string())
    }
}

fn api_result<T>(r: Result<T, kube::Error>) -> Result<T, ApplyMigError> {
    match r {
        Err(e) if api_code(&e) == Some(409) => Err(ApplyMigError::Conflict),
        Err(e) => Err(ApplyMigError::Other(e.to_string())),
        Ok(t) => Ok(t),
    }
}

/// Applies the node's config: state success first, then the capacity, so
/// the scheduler must wait for both.
async fn apply_mig(client: &kube::Client, mut n: Node) -> Result<(), ApplyMigError> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), MIG_NAMESPACE);
    let cm = cms.get(MIG_CONFIGMAP).await?;
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(MIG_CONFIG_KEY))
        .ok_or_else(|| format!("the ConfigMap has no {MIG_CONFIG_KEY}"))?;
    let configs = parse_mig_parted(text)?;
    let labels = n.metadata.labels.get_or_insert_default();
    let name = labels
        .get(names::LABEL_MIG_CONFIG)
        .cloned()
        .unwrap_or_default();
    let specs = configs
        .get(&name)
        .ok_or_else(|| format!("config {name} not in the ConfigMap"))?;
    // Go's atoi: 0 for a missing or bad count.
    let total: usize = labels
        .get(LABEL_GPU_COUNT)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (gpus, _) = migconfig::expand_specs(specs, total)?;
    labels.insert(
        names::LABEL_MIG_CONFIG_STATE.into(),
        names::MIG_STATE_SUCCESS.into(),
    );
    let nodes: Api<Node> = Api::all(client.clone());
    let node_name = n.metadata.name.clone().unwrap_or_default();
    let mut n = api_result(nodes.replace(&node_name, &PostParams::default(), &n).await)?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut whole = 0;
    let mut counts = Counts::new();
    for g in &gpus {
        if !g.mig {
            whole += 1;
            continue;
        }
        for (p, c) in &g.counts {
            *counts.entry(p.clone()).or_insert(0) += c;
        }
    }
    let status = n.status.get_or_insert_default();
    for list in [&mut status.capacity, &mut status.allocatable] {
        let list = list.get_or_insert_default();
        list.retain(|r, _| !r.starts_with(names::RESOURCE_MIG_PREFIX));
        list.insert(RESOURCE_GPU.into(), Quantity(whole.to_string()));
        for (p, c) in &counts {
            list.insert(mig_resource(p), Quantity(c.to_string()));
        }
    }
    api_result(
        nodes
            .replace_status(&node_name, &PostParams::default(), &n)
            .await,
    )?;
    Ok(())
}

/// The named configs of a mig-parted config file (version v1):
/// `mig-configs: {NAME: [{devices: all | [i...], mig-enabled, mig-devices}]}`.
pub fn parse_mig_parted(text: &str) -> Result<BTreeMap<String, Vec<MigDeviceSpec>>, String> {
    let doc: Value = serde_saphyr::from_str(text).map_err(|e| format!("mig-parted config: {e}"))?;
    let configs = doc["mig-configs"]
        .as_object()
        .ok_or("mig-parted config: no mig-configs")?;
    let mut out = BTreeMap::new();
    for (name, entries) in configs {
        let mut specs = Vec::new();
        for e in entries.as_array().ok_or(format!("{name}: not a list"))? {
            let devices = match &e["devices"] {
                Value::String(s) if s == "all" => Devices::All,
                Value::Array(idx) => Devices::Indices(
                    idx.iter()
                        .map(|i| i.as_u64().map(|i| i as usize))
                        .collect::<Option<_>>()
                        .ok_or(format!("{name}: devices: {idx:?}"))?,
                ),
                other => return Err(format!("{name}: devices: {other}")),
            };
            let mut mig_devices = Counts::new();
            if let Some(m) = e["mig-devices"].as_object() {
                for (p, c) in m {
                    let c = c.as_i64().ok_or(format!("{name}: mig-devices {p}: {c}"))?;
                    mig_devices.insert(p.clone(), c);
                }
            }
            specs.push(MigDeviceSpec {
                devices,
                mig_enabled: e["mig-enabled"].as_bool().unwrap_or(false),
                mig_devices,
                ..MigDeviceSpec::default()
            });
        }
        out.insert(name.clone(), specs);
    }
    Ok(out)
}

/// A plain HTTP/1.0 GET (no chunked body): the status code and the body.
pub fn http_get(addr: &str, path: &str) -> Result<(u16, String), String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).map_err(|e| format!("{addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut response = String::new();
    s.read_to_string(&mut response).map_err(|e| e.to_string())?;
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or(format!("GET {path}: no status line in {response:?}"))?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((code, body))
}

/// The value of a sample in Prometheus text, e.g.
/// `partita_kube_binds_total{result="ok"}`; None when absent.
pub fn metric(text: &str, sample: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(sample)?;
        rest.strip_prefix(' ')?.trim().parse().ok()
    })
}
