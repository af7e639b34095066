//! The Rust scheduler's loop against a real kube-apiserver: fake GPU nodes
//! as the NVIDIA device plugin and GPU Feature Discovery describe them
//! (go/test/integration/kubetest/nodes.go), pods for scheduler "partita",
//! and the Scheduler run in-process. Pods get bound with their devices in
//! annotations; a gang (PodGroup) binds all or nothing. The full Go
//! integration suite is ported elsewhere; this proves the loop works.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use partita::k8s::events::Events;
use partita::k8s::metrics::Metrics;
use partita::k8s::migconfig::{expand_specs, parse_mig_parted};
use partita::k8s::names::{LABEL_MIG_CONFIG, LABEL_MIG_CONFIG_STATE};
use partita::k8s::resources::{PodGroup, PodGroupPhase, PodGroupSpec};
use partita::k8s::scheduler::{Options, Scheduler};
use serde_json::json;

/// Polls `f` until it gives a value, or panics naming `what`.
async fn wait_for<T, F, Fut>(limit: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A Ready node with `gpus` whole H100 80GB GPUs, with the capacity and
/// labels the device plugin and GFD publish (kubetest.NewGPUNode).
fn gpu_node(name: &str, gpus: u32) -> Node {
    let res =
        json!({"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": gpus.to_string()});
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "nvidia.com/gpu.count": gpus.to_string(),
            "nvidia.com/gpu.memory": "81559",
            "nvidia.com/mig.capable": "true",
        }},
        "status": {
            "capacity": res,
            "allocatable": res,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }))
    .unwrap()
}

/// A node under the GPU Operator's mixed MIG strategy with one MIG GPU
/// advertising `count` instances of `profile` (kubetest.NewMIGNode).
fn mig_node(name: &str, profile: &str, count: u32) -> Node {
    let mut n = gpu_node(name, 0);
    let labels = n.metadata.labels.get_or_insert_default();
    labels.insert("nvidia.com/mig.strategy".into(), "mixed".into());
    labels.insert("nvidia.com/gpu.count".into(), "1".into());
    labels.insert(format!("nvidia.com/mig-{profile}.count"), count.to_string());
    let status = n.status.get_or_insert_default();
    let q = k8s_openapi::apimachinery::pkg::api::resource::Quantity(count.to_string());
    for res in [&mut status.capacity, &mut status.allocatable] {
        res.get_or_insert_default()
            .insert(format!("nvidia.com/mig-{profile}"), q.clone());
    }
    n
}

/// Plays the GPU Operator's MIG manager and device plugin (the Go
/// suite's fakeMIGManager): when a node's nvidia.com/mig.config.state is
/// pending, it reads the named config from the mig-parted ConfigMap,
/// reports success, and a moment later advertises the new instances in
/// the node's capacity. Returns the changes applied ("node=config").
fn mig_manager(client: kube::Client, namespace: &str) -> Arc<std::sync::Mutex<Vec<String>>> {
    let applied = Arc::new(std::sync::Mutex::new(Vec::new()));
    let out = applied.clone();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let nodes: Api<Node> = Api::all(client);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let Ok(list) = nodes.list(&Default::default()).await else {
                continue;
            };
            for n in list {
                let labels = n.labels().clone();
                if labels.get(LABEL_MIG_CONFIG_STATE).map(String::as_str) != Some("pending") {
                    continue;
                }
                let name = labels[LABEL_MIG_CONFIG].clone();
                let cm = cms.get("partita-mig-parted").await.unwrap();
                let text = cm.data.unwrap_or_default()["config.yaml"].clone();
                let c = parse_mig_parted(text.as_bytes()).unwrap();
                let total: usize = labels["nvidia.com/gpu.count"].parse().unwrap();
                let (gpus, _) = expand_specs(&c.mig_configs[&name], total).unwrap();
                let patch = json!({"metadata": {"labels": {LABEL_MIG_CONFIG_STATE: "success"}}});
                nodes
                    .patch(
                        &n.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(200)).await;
                let mut res = serde_json::Map::new();
                for r in n
                    .status
                    .as_ref()
                    .and_then(|s| s.capacity.as_ref())
                    .into_iter()
                    .flatten()
                {
                    if r.0.starts_with("nvidia.com/mig-") {
                        res.insert(r.0.clone(), serde_json::Value::Null);
                    }
                }
                let whole = gpus.iter().filter(|g| !g.mig).count();
                res.insert("nvidia.com/gpu".into(), json!(whole.to_string()));
                let mut counts = BTreeMap::<String, i64>::new();
                for g in gpus.iter().filter(|g| g.mig) {
                    for (p, c) in &g.counts {
                        *counts.entry(p.clone()).or_default() += c;
                    }
                }
                for (p, c) in counts {
                    res.insert(format!("nvidia.com/mig-{p}"), json!(c.to_string()));
                }
                let status = json!({"status": {"capacity": res, "allocatable": res}});
                nodes
                    .patch_status(
                        &n.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(&status),
                    )
                    .await
                    .unwrap();
                out.lock().unwrap().push(format!("{}={name}", n.name_any()));
            }
        }
    });
    applied
}

/// Creates a node with its status, and lifts the not-ready taint the API
/// server may put on a new node (the node lifecycle controller's job).
async fn create_node(client: &kube::Client, n: Node) {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut got = nodes.create(&PostParams::default(), &n).await.unwrap();
    let taints = got
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let keep: Vec<_> = taints
        .iter()
        .filter(|t| t.key != "node.kubernetes.io/not-ready")
        .cloned()
        .collect();
    if keep.len() != taints.len() {
        got.spec.get_or_insert_default().taints = Some(keep);
        nodes
            .replace(&n.name_any(), &PostParams::default(), &got)
            .await
            .unwrap();
    }
}

/// A pod for Partita in namespace default asking for `gpus` whole GPUs,
/// or for one MIG instance of a profile.
async fn create_pod(pods: &Api<Pod>, name: &str, gpus: u32, group: Option<&str>) {
    create_pod_asking(pods, name, "nvidia.com/gpu", gpus, group).await
}

async fn create_pod_asking(
    pods: &Api<Pod>,
    name: &str,
    resource: &str,
    count: u32,
    group: Option<&str>,
) {
    let mut labels = BTreeMap::new();
    if let Some(g) = group {
        labels.insert("partita.dev/pod-group", g);
    }
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {
            "schedulerName": "partita",
            "containers": [{
                "name": "main",
                "image": "example.invalid/work",
                "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi"},
                    "limits": {resource: count.to_string()},
                },
            }],
        },
    }))
    .unwrap();
    pods.create(&PostParams::default(), &p).await.unwrap();
}

fn node_of(p: &Pod) -> Option<&str> {
    p.spec.as_ref()?.node_name.as_deref()
}

fn annotation<'a>(p: &'a Pod, key: &str) -> &'a str {
    p.annotations()
        .get(key)
        .map(String::as_str)
        .unwrap_or_default()
}

/// Waits until every named pod is bound; returns them.
async fn wait_bound(pods: &Api<Pod>, names: &[&str]) -> BTreeMap<String, Pod> {
    wait_for(
        Duration::from_secs(30),
        &format!("{names:?} bound"),
        || async {
            let mut out = BTreeMap::new();
            for n in names {
                let p = pods.get(n).await.ok()?;
                node_of(&p)?;
                out.insert(n.to_string(), p);
            }
            Some(out)
        },
    )
    .await
}

/// Waits for an Event on pod `pod` with `reason` whose note contains
/// `contains` (events.k8s.io/v1, as the recorder writes them).
async fn wait_event(client: &kube::Client, pod: &str, reason: &str, contains: &str) {
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    wait_for(
        Duration::from_secs(20),
        &format!("event {reason} on {pod} saying {contains:?}"),
        || async {
            let list = events.list(&Default::default()).await.ok()?;
            list.items
                .iter()
                .any(|e| {
                    e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod)
                        && e.reason.as_deref() == Some(reason)
                        && e.note.as_deref().unwrap_or_default().contains(contains)
                })
                .then_some(())
        },
    )
    .await;
}

/// Checks that none of the named pods gets bound for `d`.
async fn stay_pending(pods: &Api<Pod>, d: Duration, names: &[&str]) {
    let start = Instant::now();
    while start.elapsed() < d {
        for n in names {
            let p = pods.get(n).await.unwrap();
            assert_eq!(node_of(&p), None, "{n} was bound");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_binds_pods_with_devices_and_gangs_all_or_nothing() {
    let Some(h) = support::kube::harness() else {
        return;
    };
    let client = support::kube::client(h).await;
    support::kube::install_crds(&client).await;
    create_node(&client, gpu_node("gpu-0", 4)).await;
    create_node(&client, gpu_node("gpu-1", 4)).await;
    create_node(&client, mig_node("mig-0", "1g.10gb", 7)).await;

    let metrics = Arc::new(Metrics::new());
    let opt = Options {
        interval: Duration::from_millis(100),
        reconfig_cooldown: Duration::from_secs(1),
        grace: Duration::from_secs(1),
        mig_config_namespace: "default".into(),
        ..Options::default()
    };
    let (events, _writer) = Events::start(client.clone(), "partita", 50.0, 100, metrics.clone());
    let s = Arc::new(Scheduler::new(client.clone(), opt, metrics.clone(), events).unwrap());
    tokio::time::timeout(Duration::from_secs(30), s.start())
        .await
        .expect("reflectors synced within 30 s")
        .unwrap();
    assert!(s.ready());
    assert_eq!(s.nodes().len(), 3, "the webhook's view of the nodes");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = {
        let s = s.clone();
        tokio::spawn(async move {
            s.run(async {
                let _ = stopped.await;
            })
            .await
        })
    };

    // Single pods: bound, each with its own GPUs in the annotations.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    create_pod(&pods, "train-a", 2, None).await;
    create_pod(&pods, "train-b", 1, None).await;
    let bound = wait_bound(&pods, &["train-a", "train-b"]).await;
    let mut used = BTreeMap::new();
    for (name, want) in [("train-a", 2), ("train-b", 1)] {
        let p = &bound[name];
        let node = node_of(p).unwrap();
        let gpus: Vec<&str> = annotation(p, "partita.dev/gpus").split(',').collect();
        assert_eq!(gpus.len(), want, "{name}: GPUs {gpus:?}");
        for g in gpus {
            assert!(
                used.insert((node.to_string(), g.to_string()), name)
                    .is_none(),
                "GPU {g} of {node} given twice"
            );
        }
        assert_eq!(
            annotation(p, "partita.dev/job"),
            format!("pod:default/{name}")
        );
    }

    // A MIG instance: on the MIG node, with its place in the annotation.
    create_pod_asking(&pods, "infer", "nvidia.com/mig-1g.10gb", 1, None).await;
    let bound = wait_bound(&pods, &["infer"]).await;
    assert_eq!(node_of(&bound["infer"]), Some("mig-0"));
    let slice = annotation(&bound["infer"], "partita.dev/mig-slice");
    assert!(slice.starts_with("0:1g.10gb@"), "mig-slice {slice:?}");
    // The mig-parted ConfigMap was made for later MIG changes.
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "default");
    let cm = cms.get("partita-mig-parted").await.unwrap();
    let text = &cm.data.unwrap_or_default()["config.yaml"];
    assert!(text.contains("all-disabled"), "{text}");

    // A gang of two 4-GPU pods: one pod alone is not started, though a
    // node has room for it.
    let groups: Api<PodGroup> = Api::namespaced(client.clone(), "default");
    let pg = PodGroup::new(
        "big",
        PodGroupSpec {
            min_member: 2,
            queue: None,
        },
    );
    groups.create(&PostParams::default(), &pg).await.unwrap();
    for name in ["train-a", "train-b"] {
        pods.delete(name, &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
    }
    create_pod(&pods, "big-0", 4, Some("big")).await;
    stay_pending(&pods, Duration::from_millis(1500), &["big-0"]).await;
    wait_event(
        &client,
        "big-0",
        "FailedScheduling",
        "gang: 1 of 2 pods exist",
    )
    .await;

    // The second member arrives: both start, on different nodes, with all
    // four GPUs each.
    create_pod(&pods, "big-1", 4, Some("big")).await;
    let bound = wait_bound(&pods, &["big-0", "big-1"]).await;
    assert_ne!(node_of(&bound["big-0"]), node_of(&bound["big-1"]));
    for p in bound.values() {
        assert_eq!(annotation(p, "partita.dev/gpus"), "0,1,2,3");
        assert_eq!(annotation(p, "partita.dev/job"), "group:default/big");
    }

    // A profile no GPU has: Partita writes a layout into the mig-parted
    // ConfigMap, points the label of the idle MIG node at it (not the busy
    // one's: the MIG manager would stop its pod), waits for the MIG
    // manager and the device plugin, and binds the pod to the new
    // instance.
    let applied = mig_manager(client.clone(), "default");
    let mut idle = mig_node("mig-1", "1g.10gb", 7);
    let labels = idle.metadata.labels.get_or_insert_default();
    labels.insert(LABEL_MIG_CONFIG.into(), "all-1g.10gb".into());
    labels.insert(LABEL_MIG_CONFIG_STATE.into(), "success".into());
    create_node(&client, idle).await;
    create_pod_asking(&pods, "llm", "nvidia.com/mig-3g.40gb", 1, None).await;
    let bound = wait_bound(&pods, &["llm"]).await;
    assert_eq!(node_of(&bound["llm"]), Some("mig-1"));
    let slice = annotation(&bound["llm"], "partita.dev/mig-slice");
    assert!(slice.starts_with("0:3g.40gb@"), "mig-slice {slice:?}");
    let changes = applied.lock().unwrap().clone();
    assert_eq!(changes.len(), 1, "{changes:?}");
    let name = changes[0]
        .strip_prefix("mig-1=")
        .unwrap_or_else(|| panic!("MIG changes {changes:?}, want one on mig-1"));
    assert!(name.starts_with("partita-"), "{name}");
    let cm = cms.get("partita-mig-parted").await.unwrap();
    let c = parse_mig_parted(cm.data.unwrap_or_default()["config.yaml"].as_bytes()).unwrap();
    let (gpus, _) = expand_specs(&c.mig_configs[name], 1).unwrap();
    assert!(
        gpus[0].mig && gpus[0].counts.get("3g.40gb") == Some(&1),
        "{gpus:?}"
    );
    assert!(c.mig_configs.contains_key("all-disabled"));

    wait_event(
        &client,
        "llm",
        "Scheduled",
        "assigned default/llm to mig-1 (MIG instance 0:3g.40gb@",
    )
    .await;

    // The status task writes the gang's progress (every 5 s).
    wait_for(
        Duration::from_secs(20),
        "PodGroup status Running",
        || async {
            let st = groups.get("big").await.ok()?.status?;
            (st.phase == Some(PodGroupPhase::Running) && st.scheduled == Some(2)).then_some(())
        },
    )
    .await;

    // The cycle's metrics count the binds.
    let text = metrics.encode();
    assert!(
        text.contains("partita_kube_mig_changes_total{result=\"ok\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("partita_kube_binds_total{result=\"ok\"} 6"),
        "{text}"
    );
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the scheduler stopped within 10 s")
        .unwrap();
}
